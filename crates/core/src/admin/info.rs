//! INFO: section selection and rendering (Redis 7 field names) over the statistics snapshot.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use super::stats_snapshot::{gather, Totals};
use crate::clock;
use crate::commands::{BoxFut, ConnCtx};
use crate::process::sysinfo::{cpu_times, total_system_memory, uname};
use crate::version::REDIS_VERSION;

use crate::process::sysinfo::human_bytes;

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
            line!(
                o,
                "process_supervised:{}",
                crate::process::supervise::supervised_name()
            );
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
            if let Some(ms) = crate::replication::shutdown_in_ms() {
                line!(o, "shutdown_in_milliseconds:{ms}");
            }
            line!(o, "thread_count:{}", shared.threads);
            line!(o, "num_shards:{}", shared.threads);
        }
        "clients" => {
            o.push_str("# Clients\r\n");
            line!(o, "connected_clients:{}", t.clients);
            line!(o, "cluster_connections:0");
            line!(o, "maxclients:{}", cfg.maxclients());
            line!(o, "client_recent_max_input_buffer:{}", t.max_input_buffer);
            line!(o, "client_recent_max_output_buffer:{}", t.max_output_buffer);
            line!(
                o,
                "blocked_clients:{}",
                t.blocked + crate::replication::shutdown_waiters()
            );
            line!(o, "tracking_clients:{}", crate::engine::tracking::clients());
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
            line!(o, "allocator_allocated:{}", m.allocator);
            line!(o, "allocator_active:{}", m.active);
            line!(o, "allocator_resident:{}", m.resident);
            let sys = total_system_memory();
            line!(o, "total_system_memory:{sys}");
            line!(o, "total_system_memory_human:{}", human_bytes(sys));
            // Scripting: the script cache and libraries are the same on every thread; the
            // interpreter's heap is this thread's (one interpreter per thread).
            let lua = crate::scripting::lua_memory();
            let (nscripts, scripts_mem) = crate::scripting::cache_stats();
            let (nlibs, nfuncs) = crate::scripting::functions::counts();
            let funcs_mem = crate::scripting::functions::memory();
            line!(o, "used_memory_lua:{lua}");
            line!(o, "used_memory_vm_eval:{lua}");
            line!(o, "used_memory_lua_human:{}", human_bytes(lua as u64));
            line!(o, "used_memory_scripts_eval:{scripts_mem}");
            line!(o, "number_of_cached_scripts:{nscripts}");
            line!(o, "number_of_functions:{nfuncs}");
            line!(o, "number_of_libraries:{nlibs}");
            line!(o, "used_memory_vm_functions:0");
            line!(o, "used_memory_vm_total:{lua}");
            line!(o, "used_memory_vm_total_human:{}", human_bytes(lua as u64));
            line!(o, "used_memory_functions:{funcs_mem}");
            line!(o, "used_memory_scripts:{}", scripts_mem + funcs_mem);
            line!(
                o,
                "used_memory_scripts_human:{}",
                human_bytes((scripts_mem + funcs_mem) as u64)
            );
            let maxm = cfg.maxmemory();
            line!(o, "maxmemory:{maxm}");
            line!(o, "maxmemory_human:{}", human_bytes(maxm));
            line!(o, "maxmemory_policy:{}", cfg.maxmemory_policy().name());
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
            let (repl_total, repl_backlog, repl_clients) =
                crate::replication::master().buffer_memory();
            line!(
                o,
                "mem_not_counted_for_evict:{}",
                crate::engine::memory::not_counted()
            );
            line!(o, "mem_replication_backlog:{repl_backlog}");
            line!(o, "mem_total_replication_buffers:{repl_total}");
            line!(o, "mem_clients_slaves:{repl_clients}");
            line!(o, "mem_clients_normal:{}", crate::client::evict::total());
            line!(o, "mem_cluster_links:0");
            line!(o, "mem_aof_buffer:0");
            line!(o, "mem_allocator:jemalloc-5.3.0");
            line!(o, "active_defrag_running:0");
            line!(
                o,
                "lazyfree_pending_objects:{}",
                crate::engine::lazyfree::pending()
            );
            line!(o, "lazyfreed_objects:{}", crate::engine::lazyfree::freed());
        }
        "persistence" => {
            o.push_str("# Persistence\r\n");
            let loading = shared.persist.loading.load(Ordering::Relaxed);
            line!(o, "loading:{}", loading as u8);
            line!(
                o,
                "async_loading:{}",
                shared.persist.async_loading.load(Ordering::Relaxed) as u8
            );
            line!(o, "current_cow_peak:0");
            line!(o, "current_cow_size:0");
            line!(o, "current_cow_size_age:0");
            line!(o, "current_fork_perc:0.00");
            let p = &shared.persist;
            let bg = p.bgsave_in_progress.load(Ordering::Relaxed);
            let (done, total) = if bg {
                (
                    p.keys_processed.load(Ordering::Relaxed),
                    p.keys_total.load(Ordering::Relaxed),
                )
            } else {
                (0, 0)
            };
            line!(o, "current_save_keys_processed:{}", done);
            line!(o, "current_save_keys_total:{}", total);
            let changes = p.changes_since_save();
            line!(o, "rdb_changes_since_last_save:{}", changes);
            line!(o, "rdb_bgsave_in_progress:{}", bg as u8);
            line!(
                o,
                "rdb_last_save_time:{}",
                p.last_save.load(Ordering::Relaxed)
            );
            let ok = p.last_bgsave_ok.load(Ordering::Relaxed);
            line!(
                o,
                "rdb_last_bgsave_status:{}",
                if ok { "ok" } else { "err" }
            );
            let last = p.last_bgsave_secs.load(Ordering::Relaxed);
            line!(o, "rdb_last_bgsave_time_sec:{}", last);
            let current = if bg {
                let started = p.bgsave_started_ms.load(Ordering::Relaxed);
                (crate::clock::unix_ms().saturating_sub(started) / 1000) as i64
            } else {
                -1
            };
            line!(o, "rdb_current_bgsave_time_sec:{}", current);
            line!(o, "rdb_saves:{}", p.saves.load(Ordering::Relaxed));
            // No fork, so no copy-on-write.
            line!(o, "rdb_last_cow_size:0");
            let expired = p.last_load_keys_expired.load(Ordering::Relaxed);
            line!(o, "rdb_last_load_keys_expired:{}", expired);
            let loaded = p.last_load_keys_loaded.load(Ordering::Relaxed);
            line!(o, "rdb_last_load_keys_loaded:{}", loaded);
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
            let st = &crate::replication::STATS;
            line!(
                o,
                "sync_full:{}",
                st.full.load(std::sync::atomic::Ordering::Relaxed)
            );
            line!(
                o,
                "sync_partial_ok:{}",
                st.partial_ok.load(std::sync::atomic::Ordering::Relaxed)
            );
            line!(
                o,
                "sync_partial_err:{}",
                st.partial_err.load(std::sync::atomic::Ordering::Relaxed)
            );
            line!(o, "expired_keys:{}", t.expired);
            line!(o, "expired_stale_perc:0.00");
            line!(o, "expired_time_cap_reached_count:0");
            line!(o, "expire_cycle_cpu_milliseconds:0");
            line!(o, "evicted_keys:{}", crate::engine::evict::evicted_keys());
            line!(
                o,
                "evicted_clients:{}",
                crate::client::evict::EVICTED_CLIENTS.load(Ordering::Relaxed)
            );
            let (total, current) = crate::engine::evict::exceeded_ms();
            line!(o, "total_eviction_exceeded_time:{total}");
            line!(o, "current_eviction_exceeded_time:{current}");
            line!(o, "keyspace_hits:{}", t.hits);
            line!(o, "keyspace_misses:{}", t.misses);
            let (channels, patterns, shard) = crate::pubsub::counts();
            line!(o, "pubsub_channels:{channels}");
            line!(o, "pubsub_patterns:{patterns}");
            line!(o, "pubsubshard_channels:{shard}");
            line!(o, "latest_fork_usec:0");
            line!(o, "total_forks:0");
            line!(
                o,
                "migrate_cached_sockets:{}",
                crate::commands::migrate::cached_sockets()
            );
            line!(o, "slave_expires_tracked_keys:0");
            line!(o, "active_defrag_hits:0");
            line!(o, "active_defrag_misses:0");
            line!(o, "active_defrag_key_hits:0");
            line!(o, "active_defrag_key_misses:0");
            line!(o, "total_active_defrag_time:0");
            line!(o, "current_active_defrag_time:0");
            let (keys, items, prefixes) = crate::engine::tracking::totals();
            line!(o, "tracking_total_keys:{keys}");
            line!(o, "tracking_total_items:{items}");
            line!(o, "tracking_total_prefixes:{prefixes}");
            line!(o, "unexpected_error_replies:0");
            line!(o, "total_error_replies:{}", t.total_error_replies);
            // Not in Redis: commands whose panic was contained (see engine::guard).
            line!(o, "internal_errors:{}", t.internal_errors);
            line!(o, "dump_payload_sanitizations:0");
            line!(o, "total_reads_processed:{}", t.commands_processed);
            line!(o, "total_writes_processed:{}", t.commands_processed);
            line!(o, "io_threaded_reads_processed:0");
            line!(o, "io_threaded_writes_processed:0");
            // Redis 7.2's counters (7.0 only logs these disconnections).
            line!(
                o,
                "client_query_buffer_limit_disconnections:{}",
                t.qbuf_limit_disconnections
            );
            line!(
                o,
                "client_output_buffer_limit_disconnections:{}",
                t.obuf_limit_disconnections
            );
        }
        "replication" => crate::replication::commands::info(o, &shared.config),
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
            let mut rows = t.named_cmd_stats(|c| c.calls > 0 || c.rejected > 0 || c.failed > 0);
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
        "latencystats" => {
            o.push_str("# Latencystats\r\n");
            let by_id = super::stats_snapshot::entries_by_id();
            let ps = crate::latency::percentiles();
            let mut rows: Vec<(&str, &crate::latency::Hdr)> = t
                .lat_hist
                .iter()
                .filter_map(|(i, h)| by_id.get(*i).and_then(|e| *e).map(|e| (e.static_name, h)))
                .collect();
            rows.sort_by(|a, b| a.0.cmp(b.0));
            for (name, h) in rows {
                line!(
                    o,
                    "latency_percentiles_usec_{name}:{}",
                    crate::latency::percentiles_line(h, &ps)
                );
            }
        }
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
        let mut t = gather(cx).await;
        if sections.contains(&"latencystats") {
            t.lat_hist = super::stats_snapshot::gather_hists(cx).await;
        }
        let text = render_info(cx, &t, &sections);
        cx.reply.verbatim("txt", text.as_bytes());
    })
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
}
