//! INFO, the statistics snapshot behind it (summed over every thread with one broadcast), the
//! Prometheus `/metrics` exposition and the HTML console.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::commands::connection::REDIS_VERSION;
use crate::commands::{flags, registry, BoxFut, ConnCtx, Entry};
use crate::engine::clock;
use crate::stats::CmdStat;

/// One thread's counters and its shard's per-db sizes.
#[derive(Default)]
pub struct ThreadSnap {
    pub commands_processed: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub cmd: Vec<CmdStat>,
    pub errors: Vec<(String, u64)>,
    pub total_error_replies: u64,
    pub internal_errors: u64,
    pub clients: usize,
    /// Connections blocked in a blocking command.
    pub blocked: usize,
    /// (keys, expires) per db.
    pub dbs: Vec<(u64, u64)>,
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    pub table_mem: u64,
}

/// Everything INFO and `/metrics` report, summed over threads.
#[derive(Default)]
pub struct Totals {
    pub threads: usize,
    pub commands_processed: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Indexed by command id.
    pub cmd: Vec<CmdStat>,
    pub errors: BTreeMap<String, u64>,
    pub total_error_replies: u64,
    pub internal_errors: u64,
    pub clients: usize,
    pub blocked: usize,
    pub dbs: Vec<(u64, u64)>,
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    pub table_mem: u64,
    pub mem: MemStats,
}

impl Totals {
    pub fn keys(&self) -> u64 {
        self.dbs.iter().map(|d| d.0).sum()
    }
    pub fn expires(&self) -> u64 {
        self.dbs.iter().map(|d| d.1).sum()
    }
    /// Calls of write commands: our stand-in for Redis's dirty counter.
    pub fn write_calls(&self) -> u64 {
        let by_id = entries_by_id();
        self.cmd
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                by_id
                    .get(*i)
                    .and_then(|e| *e)
                    .is_some_and(|e| e.spec.flags & flags::WRITE != 0)
            })
            .map(|(_, c)| c.calls)
            .sum()
    }
}

/// Takes a snapshot of every thread's counters.
pub async fn gather(cx: &ConnCtx) -> Totals {
    let snaps = cx
        .worker
        .broadcast(|w| {
            let st = w.stats.borrow();
            let shard = w.shard.borrow();
            let mut s = ThreadSnap {
                commands_processed: st.commands_processed,
                net_input_bytes: st.net_input_bytes,
                net_output_bytes: st.net_output_bytes,
                cmd: st.cmd.clone(),
                errors: st.errors.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                total_error_replies: st.total_error_replies,
                internal_errors: st.internal_errors,
                clients: w.clients.borrow().len(),
                blocked: w.blocked.borrow().len(),
                ..ThreadSnap::default()
            };
            for db in &shard.dbs {
                s.dbs.push((db.len() as u64, db.expires_len() as u64));
                s.hits += db.stats.hits;
                s.misses += db.stats.misses;
                s.expired += db.stats.expired;
                s.table_mem += db.table_mem() as u64;
            }
            s
        })
        .await;
    let mut t = Totals {
        threads: snaps.len(),
        mem: mem_stats(),
        ..Totals::default()
    };
    for s in snaps {
        t.commands_processed += s.commands_processed;
        t.net_input_bytes += s.net_input_bytes;
        t.net_output_bytes += s.net_output_bytes;
        if t.cmd.len() < s.cmd.len() {
            t.cmd.resize(s.cmd.len(), CmdStat::default());
        }
        for (i, c) in s.cmd.iter().enumerate() {
            let d = &mut t.cmd[i];
            d.calls += c.calls;
            d.usec += c.usec;
            d.rejected += c.rejected;
            d.failed += c.failed;
        }
        for (k, v) in s.errors {
            *t.errors.entry(k).or_insert(0) += v;
        }
        t.total_error_replies += s.total_error_replies;
        t.internal_errors += s.internal_errors;
        t.clients += s.clients;
        t.blocked += s.blocked;
        if t.dbs.len() < s.dbs.len() {
            t.dbs.resize(s.dbs.len(), (0, 0));
        }
        for (i, d) in s.dbs.iter().enumerate() {
            t.dbs[i].0 += d.0;
            t.dbs[i].1 += d.1;
        }
        t.hits += s.hits;
        t.misses += s.misses;
        t.expired += s.expired;
        t.table_mem += s.table_mem;
    }
    t
}

/// Registry entries (top-level and subcommands) indexed by their dense id.
pub fn entries_by_id() -> Vec<Option<&'static Entry>> {
    let reg = registry();
    let mut out: Vec<Option<&'static Entry>> = vec![None; reg.count];
    for e in reg.by_name.values() {
        if let Some(slot) = out.get_mut(e.id) {
            *slot = Some(e);
        }
        for s in e.subs.values() {
            if let Some(slot) = out.get_mut(s.id) {
                *slot = Some(s);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Memory and process figures.

#[derive(Default, Clone, Copy)]
pub struct MemStats {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub rss: u64,
    pub peak: u64,
}

static PEAK: AtomicU64 = AtomicU64::new(0);

pub fn reset_peak() {
    PEAK.store(0, Ordering::Relaxed);
}

/// jemalloc's view (after advancing its stats epoch) plus the process RSS.
pub fn mem_stats() -> MemStats {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64;
    let active = tikv_jemalloc_ctl::stats::active::read().unwrap_or(0) as u64;
    let resident = tikv_jemalloc_ctl::stats::resident::read().unwrap_or(0) as u64;
    let rss = process_rss();
    // Outside the jemalloc-backed binary (unit tests) jemalloc reports nothing: fall back to RSS.
    let allocated = if allocated == 0 { rss } else { allocated };
    let peak = PEAK.fetch_max(allocated, Ordering::Relaxed).max(allocated);
    MemStats {
        allocated,
        active,
        resident,
        rss,
        peak,
    }
}

/// Current used bytes (jemalloc allocated).
pub fn used_memory() -> u64 {
    mem_stats().allocated
}

pub fn process_rss() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

pub fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64) * (page.max(0) as u64)
}

/// Redis `bytesToHuman`.
pub fn human_bytes(n: u64) -> String {
    let d = n as f64;
    const K: f64 = 1024.0;
    if n < 1024 {
        format!("{n}B")
    } else if d < K * K {
        format!("{:.2}K", d / K)
    } else if d < K * K * K {
        format!("{:.2}M", d / (K * K))
    } else if d < K * K * K * K {
        format!("{:.2}G", d / (K * K * K))
    } else if d < K * K * K * K * K {
        format!("{:.2}T", d / (K * K * K * K))
    } else {
        format!("{:.2}P", d / (K * K * K * K * K))
    }
}

/// (system, user) CPU seconds of the process.
pub fn cpu_times() -> (String, String) {
    // SAFETY: getrusage fills the zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    (
        format!("{}.{:06}", ru.ru_stime.tv_sec, ru.ru_stime.tv_usec),
        format!("{}.{:06}", ru.ru_utime.tv_sec, ru.ru_utime.tv_usec),
    )
}

fn uname() -> String {
    // SAFETY: uname fills the zeroed struct we own; fields are NUL-terminated C strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".into();
        }
        let f = |s: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(s.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
    }
}

/// Ops/sec measured between samples at least a second apart (updated when INFO is asked).
fn instantaneous_ops(total: u64) -> u64 {
    static SAMPLE: Mutex<Option<(Instant, u64, u64)>> = Mutex::new(None);
    let mut s = SAMPLE.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    match *s {
        None => {
            *s = Some((now, total, 0));
            0
        }
        Some((t, last, rate)) => {
            let dt = now.duration_since(t).as_secs_f64();
            if dt >= 1.0 {
                let r = (total.saturating_sub(last) as f64 / dt) as u64;
                *s = Some((now, total, r));
                r
            } else {
                rate
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// INFO.

pub const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

fn is_default(s: &str) -> bool {
    !matches!(s, "commandstats" | "latencystats")
}

/// Which sections the INFO arguments select (Redis 7 rules: several per call, "default", "all",
/// "everything"; unknown names select nothing).
pub fn select_sections(args: &[&[u8]]) -> Vec<&'static str> {
    let mut want = vec![false; SECTIONS.len()];
    if args.is_empty() {
        for (i, s) in SECTIONS.iter().enumerate() {
            want[i] = is_default(s);
        }
    }
    for a in args {
        let l = String::from_utf8_lossy(a).to_ascii_lowercase();
        match l.as_str() {
            "default" => {
                for (i, s) in SECTIONS.iter().enumerate() {
                    want[i] |= is_default(s);
                }
            }
            "all" | "everything" => want.iter_mut().for_each(|w| *w = true),
            name => {
                if let Some(i) = SECTIONS.iter().position(|s| *s == name) {
                    want[i] = true;
                }
            }
        }
    }
    SECTIONS
        .iter()
        .zip(want)
        .filter(|(_, w)| *w)
        .map(|(s, _)| *s)
        .collect()
}

pub fn render_info(cx: &ConnCtx, t: &Totals, sections: &[&str]) -> String {
    let mut out = String::new();
    for (n, s) in sections.iter().enumerate() {
        if n > 0 {
            out.push_str("\r\n");
        }
        render_section(cx, t, s, &mut out);
    }
    out
}

macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        let _ = write!($out, $($arg)*);
        $out.push_str("\r\n");
    }};
}

fn render_section(cx: &ConnCtx, t: &Totals, section: &str, o: &mut String) {
    let shared = cx.shared();
    let cfg = &shared.config;
    let uptime = shared.started.elapsed().as_secs();
    match section {
        "server" => {
            o.push_str("# Server\r\n");
            line!(o, "redis_version:{REDIS_VERSION}");
            line!(o, "redis_git_sha1:00000000");
            line!(o, "redis_git_dirty:0");
            line!(o, "redis_build_id:0");
            line!(o, "damselfly_version:{}", env!("CARGO_PKG_VERSION"));
            line!(o, "redis_mode:standalone");
            line!(o, "os:{}", uname());
            line!(o, "arch_bits:{}", usize::BITS);
            line!(o, "monotonic_clock:POSIX clock_gettime");
            line!(o, "multiplexing_api:epoll");
            line!(o, "atomicvar_api:c11-builtin");
            line!(o, "gcc_version:0.0.0");
            line!(o, "process_id:{}", std::process::id());
            line!(o, "process_supervised:no");
            line!(o, "run_id:{}", shared.run_id);
            line!(o, "tcp_port:{}", cfg.port());
            line!(o, "server_time_usec:{}", clock::unix_us());
            line!(o, "uptime_in_seconds:{uptime}");
            line!(o, "uptime_in_days:{}", uptime / 86400);
            line!(o, "hz:{}", cfg.hz());
            line!(o, "configured_hz:{}", cfg.hz());
            line!(
                o,
                "lru_clock:{}",
                (clock::unix_ms() / 1000) & ((1 << 24) - 1)
            );
            let exe = std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            line!(o, "executable:{exe}");
            line!(o, "config_file:");
            line!(o, "io_threads_active:0");
            line!(o, "thread_count:{}", shared.threads);
            line!(o, "num_shards:{}", shared.threads);
        }
        "clients" => {
            o.push_str("# Clients\r\n");
            line!(o, "connected_clients:{}", t.clients);
            line!(o, "cluster_connections:0");
            line!(o, "maxclients:{}", cfg.maxclients());
            line!(o, "client_recent_max_input_buffer:0");
            line!(o, "client_recent_max_output_buffer:0");
            line!(o, "blocked_clients:{}", t.blocked);
            line!(o, "tracking_clients:0");
            line!(o, "clients_in_timeout_table:0");
        }
        "memory" => {
            let m = &t.mem;
            o.push_str("# Memory\r\n");
            line!(o, "used_memory:{}", m.allocated);
            line!(o, "used_memory_human:{}", human_bytes(m.allocated));
            line!(o, "used_memory_rss:{}", m.rss);
            line!(o, "used_memory_rss_human:{}", human_bytes(m.rss));
            line!(o, "used_memory_peak:{}", m.peak);
            line!(o, "used_memory_peak_human:{}", human_bytes(m.peak));
            let peak_perc = if m.peak > 0 {
                m.allocated as f64 * 100.0 / m.peak as f64
            } else {
                100.0
            };
            line!(o, "used_memory_peak_perc:{peak_perc:.2}%");
            let overhead = t.table_mem.min(m.allocated);
            let dataset = m.allocated - overhead;
            line!(o, "used_memory_overhead:{overhead}");
            line!(o, "used_memory_startup:0");
            line!(o, "used_memory_dataset:{dataset}");
            let dperc = if m.allocated > 0 {
                dataset as f64 * 100.0 / m.allocated as f64
            } else {
                0.0
            };
            line!(o, "used_memory_dataset_perc:{dperc:.2}%");
            line!(o, "allocator_allocated:{}", m.allocated);
            line!(o, "allocator_active:{}", m.active);
            line!(o, "allocator_resident:{}", m.resident);
            let sys = total_system_memory();
            line!(o, "total_system_memory:{sys}");
            line!(o, "total_system_memory_human:{}", human_bytes(sys));
            line!(o, "used_memory_lua:0");
            line!(o, "used_memory_lua_human:0B");
            line!(o, "used_memory_scripts:0");
            line!(o, "used_memory_scripts_human:0B");
            line!(o, "number_of_cached_scripts:0");
            let maxm = cfg.maxmemory();
            line!(o, "maxmemory:{maxm}");
            line!(o, "maxmemory_human:{}", human_bytes(maxm));
            line!(
                o,
                "maxmemory_policy:{}",
                cfg.get("maxmemory-policy").unwrap_or_default()
            );
            let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
            line!(
                o,
                "allocator_frag_ratio:{:.2}",
                ratio(m.active, m.allocated)
            );
            line!(
                o,
                "allocator_frag_bytes:{}",
                m.active.saturating_sub(m.allocated)
            );
            line!(o, "allocator_rss_ratio:{:.2}", ratio(m.resident, m.active));
            line!(
                o,
                "allocator_rss_bytes:{}",
                m.resident.saturating_sub(m.active)
            );
            line!(o, "rss_overhead_ratio:{:.2}", ratio(m.rss, m.resident));
            line!(o, "rss_overhead_bytes:{}", m.rss as i64 - m.resident as i64);
            line!(
                o,
                "mem_fragmentation_ratio:{:.2}",
                ratio(m.rss, m.allocated)
            );
            line!(
                o,
                "mem_fragmentation_bytes:{}",
                m.rss as i64 - m.allocated as i64
            );
            line!(o, "mem_not_counted_for_evict:0");
            line!(o, "mem_replication_backlog:0");
            line!(o, "mem_clients_slaves:0");
            line!(o, "mem_clients_normal:0");
            line!(o, "mem_aof_buffer:0");
            line!(o, "mem_allocator:jemalloc-5.3.0");
            line!(o, "active_defrag_running:0");
            line!(o, "lazyfree_pending_objects:0");
            line!(o, "lazyfreed_objects:0");
        }
        "persistence" => {
            o.push_str("# Persistence\r\n");
            line!(o, "loading:0");
            line!(o, "async_loading:0");
            line!(o, "current_cow_peak:0");
            line!(o, "current_cow_size:0");
            line!(o, "current_cow_size_age:0");
            line!(o, "current_fork_perc:0.00");
            line!(o, "current_save_keys_processed:0");
            line!(o, "current_save_keys_total:0");
            line!(o, "rdb_changes_since_last_save:{}", t.write_calls());
            line!(o, "rdb_bgsave_in_progress:0");
            line!(
                o,
                "rdb_last_save_time:{}",
                shared.last_save.load(Ordering::Relaxed)
            );
            line!(o, "rdb_last_bgsave_status:ok");
            line!(o, "rdb_last_bgsave_time_sec:-1");
            line!(o, "rdb_current_bgsave_time_sec:-1");
            line!(o, "rdb_saves:0");
            line!(o, "rdb_last_cow_size:0");
            line!(o, "rdb_last_load_keys_expired:0");
            line!(o, "rdb_last_load_keys_loaded:0");
            line!(o, "aof_enabled:0");
            line!(o, "aof_rewrite_in_progress:0");
            line!(o, "aof_rewrite_scheduled:0");
            line!(o, "aof_last_rewrite_time_sec:-1");
            line!(o, "aof_current_rewrite_time_sec:-1");
            line!(o, "aof_last_bgrewrite_status:ok");
            line!(o, "aof_rewrites:0");
            line!(o, "aof_rewrites_consecutive_failures:0");
            line!(o, "aof_last_write_status:ok");
            line!(o, "aof_last_cow_size:0");
            line!(o, "module_fork_in_progress:0");
            line!(o, "module_fork_last_cow_size:0");
        }
        "stats" => {
            o.push_str("# Stats\r\n");
            line!(
                o,
                "total_connections_received:{}",
                shared.total_connections.load(Ordering::Relaxed)
            );
            line!(o, "total_commands_processed:{}", t.commands_processed);
            line!(
                o,
                "instantaneous_ops_per_sec:{}",
                instantaneous_ops(t.commands_processed)
            );
            line!(o, "total_net_input_bytes:{}", t.net_input_bytes);
            line!(o, "total_net_output_bytes:{}", t.net_output_bytes);
            line!(o, "total_net_repl_input_bytes:0");
            line!(o, "total_net_repl_output_bytes:0");
            line!(o, "instantaneous_input_kbps:0.00");
            line!(o, "instantaneous_output_kbps:0.00");
            line!(o, "instantaneous_input_repl_kbps:0.00");
            line!(o, "instantaneous_output_repl_kbps:0.00");
            line!(
                o,
                "rejected_connections:{}",
                shared.rejected_connections.load(Ordering::Relaxed)
            );
            line!(o, "sync_full:0");
            line!(o, "sync_partial_ok:0");
            line!(o, "sync_partial_err:0");
            line!(o, "expired_keys:{}", t.expired);
            line!(o, "expired_stale_perc:0.00");
            line!(o, "expired_time_cap_reached_count:0");
            line!(o, "expire_cycle_cpu_milliseconds:0");
            line!(o, "evicted_keys:0");
            line!(o, "evicted_clients:0");
            line!(o, "total_eviction_exceeded_time:0");
            line!(o, "current_eviction_exceeded_time:0");
            line!(o, "keyspace_hits:{}", t.hits);
            line!(o, "keyspace_misses:{}", t.misses);
            line!(o, "pubsub_channels:0");
            line!(o, "pubsub_patterns:0");
            line!(o, "pubsubshard_channels:0");
            line!(o, "latest_fork_usec:0");
            line!(o, "total_forks:0");
            line!(o, "migrate_cached_sockets:0");
            line!(o, "slave_expires_tracked_keys:0");
            line!(o, "active_defrag_hits:0");
            line!(o, "active_defrag_misses:0");
            line!(o, "active_defrag_key_hits:0");
            line!(o, "active_defrag_key_misses:0");
            line!(o, "total_active_defrag_time:0");
            line!(o, "current_active_defrag_time:0");
            line!(o, "tracking_total_keys:0");
            line!(o, "tracking_total_items:0");
            line!(o, "tracking_total_prefixes:0");
            line!(o, "unexpected_error_replies:0");
            line!(o, "total_error_replies:{}", t.total_error_replies);
            // Not in Redis: commands whose panic was contained (see engine::guard).
            line!(o, "internal_errors:{}", t.internal_errors);
            line!(o, "dump_payload_sanitizations:0");
            line!(o, "total_reads_processed:{}", t.commands_processed);
            line!(o, "total_writes_processed:{}", t.commands_processed);
            line!(o, "io_threaded_reads_processed:0");
            line!(o, "io_threaded_writes_processed:0");
        }
        "replication" => {
            o.push_str("# Replication\r\n");
            line!(o, "role:master");
            line!(o, "connected_slaves:0");
            line!(o, "master_failover_state:no-failover");
            line!(o, "master_replid:{}", shared.run_id);
            line!(o, "master_replid2:0000000000000000000000000000000000000000");
            line!(o, "master_repl_offset:0");
            line!(o, "second_repl_offset:-1");
            line!(o, "repl_backlog_active:0");
            line!(o, "repl_backlog_size:1048576");
            line!(o, "repl_backlog_first_byte_offset:0");
            line!(o, "repl_backlog_histlen:0");
        }
        "cpu" => {
            let (sys, user) = cpu_times();
            o.push_str("# CPU\r\n");
            line!(o, "used_cpu_sys:{sys}");
            line!(o, "used_cpu_user:{user}");
            line!(o, "used_cpu_sys_children:0.000000");
            line!(o, "used_cpu_user_children:0.000000");
        }
        "modules" => o.push_str("# Modules\r\n"),
        "commandstats" => {
            o.push_str("# Commandstats\r\n");
            let by_id = entries_by_id();
            let mut rows: Vec<(&str, CmdStat)> = t
                .cmd
                .iter()
                .enumerate()
                .filter(|(_, c)| c.calls > 0 || c.rejected > 0 || c.failed > 0)
                .filter_map(|(i, c)| {
                    by_id
                        .get(i)
                        .and_then(|e| *e)
                        .map(|e| (e.fullname.as_str(), *c))
                })
                .collect();
            rows.sort_by(|a, b| a.0.cmp(b.0));
            for (name, c) in rows {
                let per = if c.calls > 0 {
                    c.usec as f64 / c.calls as f64
                } else {
                    0.0
                };
                line!(
                    o,
                    "cmdstat_{name}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
                    c.calls,
                    c.usec,
                    c.rejected,
                    c.failed
                );
            }
        }
        "errorstats" => {
            o.push_str("# Errorstats\r\n");
            for (code, n) in &t.errors {
                line!(o, "errorstat_{code}:count={n}");
            }
        }
        "latencystats" => o.push_str("# Latencystats\r\n"),
        "cluster" => {
            o.push_str("# Cluster\r\n");
            line!(o, "cluster_enabled:0");
        }
        "keyspace" => {
            o.push_str("# Keyspace\r\n");
            for (i, (keys, expires)) in t.dbs.iter().enumerate() {
                if *keys > 0 || *expires > 0 {
                    line!(o, "db{i}:keys={keys},expires={expires},avg_ttl=0");
                }
            }
        }
        _ => {}
    }
}

pub fn info<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let sections = select_sections(&args[1..]);
        let t = gather(cx).await;
        let text = render_info(cx, &t, &sections);
        cx.reply.verbatim("txt", text.as_bytes());
    })
}

// ---------------------------------------------------------------------------------------------
// HTTP: Prometheus metrics and the console page.

fn metric(o: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, String)]) {
    let _ = writeln!(o, "# HELP dragonfly_{name} {help}");
    let _ = writeln!(o, "# TYPE dragonfly_{name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(o, "dragonfly_{name}{labels} {v}");
    }
}

/// Prometheus text exposition with Dragonfly's metric names.
pub async fn prometheus_metrics(cx: &mut ConnCtx) -> String {
    let t = gather(cx).await;
    let shared = cx.shared();
    let cfg = &shared.config;
    let mut o = String::new();
    let one = |v: u64| vec![("", v.to_string())];
    metric(
        &mut o,
        "version",
        "gauge",
        "Damselfly version",
        &[(
            &format!("{{version=\"{}\"}}", env!("CARGO_PKG_VERSION")),
            "1".into(),
        )],
    );
    metric(
        &mut o,
        "role",
        "gauge",
        "Replication role",
        &[("{role=\"master\"}", "1".into())],
    );
    metric(
        &mut o,
        "master",
        "gauge",
        "1 if master 0 if replica",
        &one(1),
    );
    metric(
        &mut o,
        "uptime_in_seconds",
        "counter",
        "Server uptime in seconds",
        &one(shared.started.elapsed().as_secs()),
    );
    metric(
        &mut o,
        "connected_clients",
        "gauge",
        "Number of connected clients",
        &one(t.clients as u64),
    );
    metric(
        &mut o,
        "blocked_clients",
        "gauge",
        "Number of clients blocked on a blocking call",
        &one(t.blocked as u64),
    );
    metric(
        &mut o,
        "memory_used_bytes",
        "gauge",
        "Memory used by the allocator in bytes",
        &one(t.mem.allocated),
    );
    metric(
        &mut o,
        "memory_used_peak_bytes",
        "gauge",
        "Peak memory used by the allocator in bytes",
        &one(t.mem.peak),
    );
    metric(
        &mut o,
        "used_memory_rss_bytes",
        "gauge",
        "Resident set size of the process in bytes",
        &one(t.mem.rss),
    );
    metric(
        &mut o,
        "memory_max_bytes",
        "gauge",
        "Maximum memory (maxmemory), 0 = unlimited",
        &one(cfg.maxmemory()),
    );
    metric(
        &mut o,
        "table_used_memory_bytes",
        "gauge",
        "Memory used by the key tables in bytes",
        &one(t.table_mem),
    );
    metric(
        &mut o,
        "connections_received_total",
        "counter",
        "Total connections accepted",
        &one(shared.total_connections.load(Ordering::Relaxed)),
    );
    metric(
        &mut o,
        "rejected_connections_total",
        "counter",
        "Total connections rejected",
        &one(shared.rejected_connections.load(Ordering::Relaxed)),
    );
    metric(
        &mut o,
        "commands_processed_total",
        "counter",
        "Total commands processed",
        &one(t.commands_processed),
    );
    metric(
        &mut o,
        "keyspace_hits_total",
        "counter",
        "Successful key lookups",
        &one(t.hits),
    );
    metric(
        &mut o,
        "keyspace_misses_total",
        "counter",
        "Failed key lookups",
        &one(t.misses),
    );
    metric(
        &mut o,
        "net_input_bytes_total",
        "counter",
        "Bytes read from clients",
        &one(t.net_input_bytes),
    );
    metric(
        &mut o,
        "net_output_bytes_total",
        "counter",
        "Bytes written to clients",
        &one(t.net_output_bytes),
    );
    metric(
        &mut o,
        "expired_keys_total",
        "counter",
        "Keys removed because their TTL passed",
        &one(t.expired),
    );
    metric(
        &mut o,
        "evicted_keys_total",
        "counter",
        "Keys evicted because of maxmemory",
        &one(0),
    );
    metric(
        &mut o,
        "internal_errors_total",
        "counter",
        "Commands that failed with an internal error (a contained panic)",
        &one(t.internal_errors),
    );
    metric(
        &mut o,
        "errors_total",
        "counter",
        "Error replies by error code",
        &t.errors
            .iter()
            .map(|(k, v)| (format!("{{error=\"{k}\"}}"), v.to_string()))
            .collect::<Vec<_>>()
            .iter()
            .map(|(l, v)| (l.as_str(), v.clone()))
            .collect::<Vec<_>>(),
    );
    let db_labels: Vec<(String, u64, u64)> = t
        .dbs
        .iter()
        .enumerate()
        .filter(|(i, d)| *i == 0 || d.0 > 0)
        .map(|(i, d)| (format!("{{db=\"db{i}\"}}"), d.0, d.1))
        .collect();
    metric(
        &mut o,
        "db_keys",
        "gauge",
        "Total number of keys by DB",
        &db_labels
            .iter()
            .map(|(l, k, _)| (l.as_str(), k.to_string()))
            .collect::<Vec<_>>(),
    );
    metric(
        &mut o,
        "db_keys_expiring",
        "gauge",
        "Total number of expiring keys by DB",
        &db_labels
            .iter()
            .map(|(l, _, e)| (l.as_str(), e.to_string()))
            .collect::<Vec<_>>(),
    );
    let by_id = entries_by_id();
    let mut cmds: Vec<(String, CmdStat)> = t
        .cmd
        .iter()
        .enumerate()
        .filter(|(_, c)| c.calls > 0)
        .filter_map(|(i, c)| {
            by_id
                .get(i)
                .and_then(|e| *e)
                .map(|e| (format!("{{cmd=\"{}\"}}", e.fullname.replace('|', "_")), *c))
        })
        .collect();
    cmds.sort_by(|a, b| a.0.cmp(&b.0));
    metric(
        &mut o,
        "commands_total",
        "counter",
        "Total number of calls by command",
        &cmds
            .iter()
            .map(|(l, c)| (l.as_str(), c.calls.to_string()))
            .collect::<Vec<_>>(),
    );
    metric(
        &mut o,
        "commands_duration_seconds_total",
        "counter",
        "Total time spent in commands",
        &cmds
            .iter()
            .map(|(l, c)| (l.as_str(), format!("{:.6}", c.usec as f64 / 1e6)))
            .collect::<Vec<_>>(),
    );
    o
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The HTML console at `/`.
pub async fn console_page(cx: &mut ConnCtx) -> String {
    let t = gather(cx).await;
    let shared = cx.shared();
    let rows: Vec<(&str, String)> = vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("redis_version", REDIS_VERSION.to_string()),
        (
            "uptime_in_seconds",
            shared.started.elapsed().as_secs().to_string(),
        ),
        ("threads", shared.threads.to_string()),
        ("connected_clients", t.clients.to_string()),
        ("used_memory", human_bytes(t.mem.allocated)),
        ("used_memory_rss", human_bytes(t.mem.rss)),
        ("used_memory_peak", human_bytes(t.mem.peak)),
        ("keys", t.keys().to_string()),
        ("expiring_keys", t.expires().to_string()),
        ("total_commands_processed", t.commands_processed.to_string()),
        ("keyspace_hits", t.hits.to_string()),
        ("keyspace_misses", t.misses.to_string()),
        ("expired_keys", t.expired.to_string()),
        ("total_error_replies", t.total_error_replies.to_string()),
    ];
    let mut body = String::new();
    for (k, v) in rows {
        let _ = write!(body, "<tr><td>{}</td><td>{}</td></tr>", k, html_escape(&v));
    }
    format!(
        "<!DOCTYPE html>\n<html><head><title>damselfly</title><style>body{{font-family:sans-serif}}td{{padding:2px 12px}}</style></head>\
         <body><h1>damselfly v{}</h1><table>{}</table><p><a href=\"/metrics\">/metrics</a></p></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        body
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections() {
        let d = select_sections(&[]);
        assert!(d.contains(&"server") && d.contains(&"keyspace"));
        assert!(!d.contains(&"commandstats"));
        assert_eq!(
            select_sections(&[b"keyspace", b"SERVER"]),
            vec!["server", "keyspace"]
        );
        assert_eq!(select_sections(&[b"all"]).len(), SECTIONS.len());
        assert!(select_sections(&[b"nope"]).is_empty());
        let e = select_sections(&[b"default", b"commandstats"]);
        assert!(e.contains(&"commandstats") && e.contains(&"cpu"));
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(941056), "919.00K");
        assert_eq!(human_bytes(7151616), "6.82M");
    }
}
