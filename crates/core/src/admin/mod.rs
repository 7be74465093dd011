//! Server commands: INFO CONFIG COMMAND DEBUG MEMORY SLOWLOG LATENCY TIME LASTSAVE SHUTDOWN, and
//! the HTTP console pages.
//!
//! - `info.rs`: INFO's sections; `stats_snapshot.rs`: the cross-thread statistics snapshot they
//!   (and `/metrics`, the console) read; `sysinfo.rs`: process and system probes (memory, CPU,
//!   uname); `metrics.rs`: Prometheus `/metrics`; `console.rs`: the HTML console page.
//! - `config_cmd.rs`: CONFIG.
//! - `command_cmd.rs`: COMMAND.
//! - `debug.rs`: DEBUG and MEMORY.
//! - `misc.rs`: TIME LASTSAVE SHUTDOWN SLOWLOG LATENCY.

pub mod command_cmd;
pub mod config_cmd;
pub mod console;
pub mod debug;
pub mod info;
pub mod lolwut;
pub mod metrics;
pub mod misc;
pub mod stats_snapshot;

use crate::commands::spec::prelude::*;

pub use console::console_page;
pub use metrics::prometheus_metrics;

const ADMIN_FLAGS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

const G: Group = Group::Server;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("info", -1, LOADING | STALE | SENTINEL, NOKEYS, Conn(info::info)).acl(acl::DANGEROUS)
        .doc(G, "1.0.0", "Returns information and statistics about the server."),
    container("config", -2, CONFIG_SUBS)
        .doc(G, "2.0.0", "A container for server configuration commands."),
    cmd("command", -1, LOADING | STALE | SENTINEL, NOKEYS, Local(command_cmd::command)).subs(COMMAND_SUBS).acl(acl::CONNECTION)
        .doc(G, "2.8.13", "Returns detailed information about all commands."),
    cmd("lolwut", -1, READONLY | FAST, NOKEYS, Local(lolwut::lolwut))
        .doc(G, "5.0.0", "Display some computer art and the Redis version"),
    cmd("time", 1, LOADING | STALE | FAST, NOKEYS, Local(misc::time))
        .doc(G, "1.0.0", "Returns the server time."),
    cmd("lastsave", 1, LOADING | STALE | FAST, NOKEYS, Local(misc::lastsave)).acl(acl::ADMIN | acl::DANGEROUS)
        .doc(G, "1.0.0", "Returns the Unix timestamp of the last successful save to disk."),
    cmd("shutdown", -1, ADMIN_FLAGS | NO_MULTI | SENTINEL | ALLOW_BUSY, NOKEYS, Conn(misc::shutdown))
        .doc(G, "1.0.0", "Synchronously saves the database(s) to disk and shuts down the server."),
    cmd("debug", -2, ADMIN_FLAGS, NOKEYS, Conn(debug::debug)).plan(debug::debug_plan)
        .doc(G, "1.0.0", "A container for debugging commands."),
    container("memory", -2, MEMORY_SUBS)
        .doc(G, "2.0.0", "A container for memory diagnostics commands."),
    container("slowlog", -2, SLOWLOG_SUBS)
        .doc(G, "2.0.0", "A container for slow log commands."),
    container("latency", -2, LATENCY_SUBS)
        .doc(G, "2.0.0", "A container for latency diagnostics commands."),
];

#[rustfmt::skip]
static CONFIG_SUBS: &[CommandSpec] = &[
    cmd("get", -3, ADMIN_FLAGS, NOKEYS, Local(config_cmd::config_get))
        .doc(G, "1.0.0", "Returns the effective values of configuration parameters."),
    cmd("set", -4, ADMIN_FLAGS, NOKEYS, Conn(config_cmd::config_set))
        .doc(G, "1.0.0", "Sets configuration parameters in-flight."),
    cmd("resetstat", 2, ADMIN_FLAGS, NOKEYS, Conn(config_cmd::config_resetstat))
        .doc(G, "1.0.0", "Resets the server's statistics."),
    cmd("rewrite", 2, ADMIN_FLAGS, NOKEYS, Local(config_cmd::config_rewrite))
        .doc(G, "1.0.0", "Persists the effective configuration to file."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(config_cmd::config_help))
        .doc(G, "1.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
static COMMAND_SUBS: &[CommandSpec] = &[
    cmd("count", 2, LOADING | STALE, NOKEYS, Local(command_cmd::command_count)).acl(acl::CONNECTION)
        .doc(G, "1.0.0", "Returns a count of commands."),
    cmd("list", -2, LOADING | STALE, NOKEYS, Local(command_cmd::command_list)).acl(acl::CONNECTION)
        .doc(G, "1.0.0", "Returns a list of command names."),
    cmd("info", -2, LOADING | STALE, NOKEYS, Local(command_cmd::command_info)).acl(acl::CONNECTION)
        .doc(G, "1.0.0", "Returns information about one, multiple or all commands."),
    cmd("docs", -2, LOADING | STALE, NOKEYS, Local(command_cmd::command_docs)).acl(acl::CONNECTION)
        .doc(G, "1.0.0", "Returns documentary information about one, multiple or all commands."),
    cmd("getkeys", -3, LOADING | STALE, NOKEYS, Local(command_cmd::command_getkeys)).acl(acl::CONNECTION)
        .doc(G, "1.0.0", "Extracts the key names from an arbitrary command."),
    cmd("getkeysandflags", -3, LOADING | STALE, NOKEYS, Local(command_cmd::command_getkeysandflags)).acl(acl::CONNECTION)
        .doc(G, "1.0.0", "Extracts the key names and access flags for an arbitrary command."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(command_cmd::command_help)).acl(acl::CONNECTION)
        .doc(G, "1.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
static MEMORY_SUBS: &[CommandSpec] = &[
    cmd("usage", -3, READONLY, range(2, 2, 1), Shard(debug::memory_usage))
        .doc(G, "1.0.0", "Estimates the memory usage of a key."),
    cmd("stats", 2, 0, NOKEYS, Conn(debug::memory_stats))
        .doc(G, "1.0.0", "Returns details about memory usage."),
    cmd("doctor", 2, 0, NOKEYS, Local(debug::memory_doctor))
        .doc(G, "1.0.0", "Outputs a memory problems report."),
    cmd("malloc-stats", 2, 0, NOKEYS, Local(debug::memory_malloc_stats))
        .doc(G, "1.0.0", "Returns the allocator statistics."),
    cmd("purge", 2, 0, NOKEYS, Local(debug::memory_purge))
        .doc(G, "1.0.0", "Asks the allocator to release memory."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(debug::memory_help))
        .doc(G, "1.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
static SLOWLOG_SUBS: &[CommandSpec] = &[
    cmd("get", -2, ADMIN | LOADING | STALE, NOKEYS, Conn(misc::slowlog_get))
        .doc(G, "1.0.0", "Returns the slow log's entries."),
    cmd("len", 2, ADMIN | LOADING | STALE, NOKEYS, Conn(misc::slowlog_len))
        .doc(G, "1.0.0", "Returns the number of entries in the slow log."),
    cmd("reset", 2, ADMIN | LOADING | STALE, NOKEYS, Conn(misc::slowlog_reset))
        .doc(G, "1.0.0", "Clears all entries from the slow log."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(misc::slowlog_help))
        .doc(G, "1.0.0", "Show helpful text about the different subcommands."),
];

#[rustfmt::skip]
static LATENCY_SUBS: &[CommandSpec] = &[
    cmd("doctor", 2, ADMIN_FLAGS, NOKEYS, Local(misc::latency_doctor))
        .doc(G, "1.0.0", "Returns a human-readable latency analysis report."),
    cmd("latest", 2, ADMIN_FLAGS, NOKEYS, Local(misc::latency_latest))
        .doc(G, "1.0.0", "Returns the latest latency samples for all events."),
    cmd("history", 3, ADMIN_FLAGS, NOKEYS, Local(misc::latency_history))
        .doc(G, "1.0.0", "Returns timestamp-latency samples for an event."),
    cmd("graph", 3, ADMIN_FLAGS, NOKEYS, Local(misc::latency_graph))
        .doc(G, "1.0.0", "Returns a latency graph for an event."),
    cmd("reset", -2, ADMIN_FLAGS, NOKEYS, Local(misc::latency_reset))
        .doc(G, "1.0.0", "Resets the latency data for one or more events."),
    cmd("histogram", -2, ADMIN_FLAGS, NOKEYS, Conn(misc::latency_histogram))
        .doc(G, "1.0.0", "Returns the cumulative distribution of latencies of a subset or all commands."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(misc::latency_help))
        .doc(G, "1.0.0", "Returns helpful text about the different subcommands."),
];
