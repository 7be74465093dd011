//! Prometheus text exposition for `/metrics`, with Dragonfly's metric names where Dragonfly has
//! the metric (redis_exporter's, under the same prefix, where only it has one). The table of
//! names, ours against theirs, is docs/metrics.md.
//!
//! Everything here is read at scrape time from what the server counts anyway: per-thread
//! counters summed by one broadcast (`stats_snapshot`), so scraping costs the command path
//! nothing.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::stats_snapshot::{entries_by_id, gather, gather_hists, ThreadLoad, Totals};
use crate::commands::ConnCtx;

/// HELP and TYPE lines of one metric family.
fn header(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP dragonfly_{name} {help}");
    let _ = writeln!(o, "# TYPE dragonfly_{name} {kind}");
}

/// One metric: HELP and TYPE lines, then a sample per (labels, value).
fn metric<L: AsRef<str>>(
    o: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: &[(L, String)],
) {
    header(o, name, kind, help);
    for (labels, v) in samples {
        let _ = writeln!(o, "dragonfly_{name}{} {v}", labels.as_ref());
    }
}

/// Upper bounds (microseconds) of the per-command latency histogram's buckets: powers of two
/// from 1 µs to 0.52 s (the recorded latencies are whole microseconds, clamped at 1 s).
const LATENCY_BOUNDS_US: [u64; 20] = {
    let mut b = [0u64; 20];
    let mut i = 0;
    while i < b.len() {
        b[i] = 1 << i;
        i += 1;
    }
    b
};

/// One histogram series: the labels inside the braces (`cmd="get"`), the cumulative count at
/// each of `LATENCY_BOUNDS_US`, the total count and the sum (seconds).
struct Series {
    labels: String,
    cumulative: Vec<u64>,
    count: u64,
    sum: f64,
}

/// A histogram family: `_bucket` samples with `le` (cumulative, ending with `+Inf`), then
/// `_sum` and `_count`, per series.
fn histogram(o: &mut String, name: &str, help: &str, series: &[Series]) {
    header(o, name, "histogram", help);
    for s in series {
        for (bound, n) in LATENCY_BOUNDS_US.iter().zip(&s.cumulative) {
            let le = *bound as f64 / 1e6;
            let _ = writeln!(o, "dragonfly_{name}_bucket{{{},le=\"{le}\"}} {n}", s.labels);
        }
        let _ = writeln!(
            o,
            "dragonfly_{name}_bucket{{{},le=\"+Inf\"}} {}",
            s.labels, s.count
        );
        let _ = writeln!(o, "dragonfly_{name}_sum{{{}}} {:.6}", s.labels, s.sum);
        let _ = writeln!(o, "dragonfly_{name}_count{{{}}} {}", s.labels, s.count);
    }
}

/// A command's `cmd` label value: its full name, `|` as `_` (`client_list`).
fn cmd_label(name: &str) -> String {
    format!("cmd=\"{}\"", name.replace('|', "_"))
}

/// Seconds from microseconds, as a sample value.
fn secs(usec: u64) -> String {
    format!("{:.6}", usec as f64 / 1e6)
}

/// Prometheus text exposition with Dragonfly's metric names.
pub async fn prometheus_metrics(cx: &mut ConnCtx) -> String {
    let t = gather(cx).await;
    let hists = gather_hists(cx).await;
    let shared = cx.shared();
    let cfg = &shared.config;
    let p = &shared.persist;
    let mut o = String::new();
    metric(
        &mut o,
        "version",
        "gauge",
        "Damselfly version",
        &[(
            format!("{{version=\"{}\"}}", env!("CARGO_PKG_VERSION")),
            "1".into(),
        )],
    );
    let repl = replication_state();
    let role = if repl.link.is_some() {
        "replica"
    } else {
        "master"
    };
    metric(
        &mut o,
        "role",
        "gauge",
        "Replication role",
        &[(format!("{{role=\"{role}\"}}"), "1".into())],
    );
    let (cpu_sys, cpu_user) = crate::process::sysinfo::cpu_usec(libc::RUSAGE_SELF);
    let (eviction_exceeded_ms, _) = crate::engine::evict::exceeded_ms();
    let bgsave = p.bgsave_in_progress.load(Ordering::Relaxed);
    // (name, type, help, value) of the metrics without labels.
    let unlabelled: &[(&str, &str, &str, String)] = &[
        (
            "master",
            "gauge",
            "1 if master 0 if replica",
            u8::from(repl.link.is_none()).to_string(),
        ),
        (
            "uptime_in_seconds",
            "counter",
            "Server uptime in seconds",
            shared.started.elapsed().as_secs().to_string(),
        ),
        (
            "cpu_sys_seconds_total",
            "counter",
            "System CPU time of the process",
            secs(cpu_sys),
        ),
        (
            "cpu_user_seconds_total",
            "counter",
            "User CPU time of the process",
            secs(cpu_user),
        ),
        (
            "connected_clients",
            "gauge",
            "Number of connected clients",
            t.clients.to_string(),
        ),
        (
            "max_clients",
            "gauge",
            "Maximal number of clients (maxclients)",
            cfg.maxclients().to_string(),
        ),
        (
            "blocked_clients",
            "gauge",
            "Number of clients blocked on a blocking call",
            (t.blocked + crate::replication::shutdown_waiters()).to_string(),
        ),
        (
            "client_read_buffer_bytes",
            "gauge",
            "Query buffer memory of all connections (used and free)",
            t.input_buffers.to_string(),
        ),
        (
            "client_output_buffer_bytes",
            "gauge",
            "Output buffer memory of all connections (replies not yet written)",
            t.output_buffers.to_string(),
        ),
        (
            "client_recent_max_input_buffer_bytes",
            "gauge",
            "Largest query buffer of any connection",
            t.max_input_buffer.to_string(),
        ),
        (
            "client_recent_max_output_buffer_bytes",
            "gauge",
            "Largest output buffer of any connection",
            t.max_output_buffer.to_string(),
        ),
        (
            "client_query_buffer_limit_disconnections_total",
            "counter",
            "Clients closed for passing client-query-buffer-limit",
            t.qbuf_limit_disconnections.to_string(),
        ),
        (
            "client_output_buffer_limit_disconnections_total",
            "counter",
            "Clients closed for passing client-output-buffer-limit",
            t.obuf_limit_disconnections.to_string(),
        ),
        (
            "memory_used_bytes",
            "gauge",
            "Memory used by the allocator in bytes",
            t.mem.allocated.to_string(),
        ),
        (
            "memory_used_peak_bytes",
            "gauge",
            "Peak memory used by the allocator in bytes",
            t.mem.peak.to_string(),
        ),
        (
            "used_memory_rss_bytes",
            "gauge",
            "Resident set size of the process in bytes",
            t.mem.rss.to_string(),
        ),
        (
            "memory_max_bytes",
            "gauge",
            "Maximum memory (maxmemory), 0 = unlimited",
            cfg.maxmemory().to_string(),
        ),
        (
            "table_used_memory_bytes",
            "gauge",
            "Memory used by the key tables in bytes",
            t.table_mem.to_string(),
        ),
        (
            "connections_received_total",
            "counter",
            "Total connections accepted",
            shared.total_connections.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rejected_connections_total",
            "counter",
            "Total connections rejected",
            shared
                .rejected_connections
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "commands_processed_total",
            "counter",
            "Total commands processed",
            t.commands_processed.to_string(),
        ),
        (
            "keyspace_hits_total",
            "counter",
            "Successful key lookups",
            t.hits.to_string(),
        ),
        (
            "keyspace_misses_total",
            "counter",
            "Failed key lookups",
            t.misses.to_string(),
        ),
        (
            "net_input_bytes_total",
            "counter",
            "Bytes read from clients",
            t.net_input_bytes.to_string(),
        ),
        (
            "net_output_bytes_total",
            "counter",
            "Bytes written to clients",
            t.net_output_bytes.to_string(),
        ),
        (
            "expired_keys_total",
            "counter",
            "Keys removed because their TTL passed",
            t.expired.to_string(),
        ),
        (
            "evicted_keys_total",
            "counter",
            "Keys evicted because of maxmemory",
            crate::engine::evict::evicted_keys().to_string(),
        ),
        (
            "eviction_exceeded_time_seconds_total",
            "counter",
            "Time spent with used memory over maxmemory",
            format!("{:.3}", eviction_exceeded_ms as f64 / 1e3),
        ),
        (
            "internal_errors_total",
            "counter",
            "Commands that failed with an internal error (a contained panic)",
            t.internal_errors.to_string(),
        ),
        (
            "loading",
            "gauge",
            "1 while the start-up snapshot loads",
            u8::from(p.loading.load(Ordering::Relaxed)).to_string(),
        ),
        (
            "rdb_changes_since_last_save",
            "gauge",
            "Write commands since the last successful save",
            p.changes_since_save().to_string(),
        ),
        (
            "rdb_bgsave_in_progress",
            "gauge",
            "1 while a BGSAVE runs",
            u8::from(bgsave).to_string(),
        ),
        (
            "rdb_last_save_timestamp_seconds",
            "gauge",
            "Unix time of the last successful save (start-up time before any)",
            p.last_save.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rdb_last_bgsave_status",
            "gauge",
            "1 if the last BGSAVE succeeded, 0 if it failed",
            u8::from(p.last_bgsave_ok.load(Ordering::Relaxed)).to_string(),
        ),
        (
            "rdb_last_bgsave_duration_seconds",
            "gauge",
            "Duration of the last BGSAVE, -1 before any",
            p.last_bgsave_secs.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rdb_saves_total",
            "counter",
            "Successful saves since start-up",
            p.saves.load(Ordering::Relaxed).to_string(),
        ),
    ];
    for (name, kind, help, v) in unlabelled {
        metric(&mut o, name, kind, help, &[("", v.clone())]);
    }
    let errors: Vec<(String, String)> = t
        .errors
        .iter()
        .map(|(k, v)| (format!("{{error=\"{k}\"}}"), v.to_string()))
        .collect();
    metric(
        &mut o,
        "errors_total",
        "counter",
        "Error replies by error code",
        &errors,
    );
    keyspace(&mut o, &t);
    commands(&mut o, &t, &hists);
    replication(&mut o, &repl);
    per_thread(&mut o, &t);
    o
}

/// Keys and expiring keys per db (db0 always, the others when not empty).
fn keyspace(o: &mut String, t: &Totals) {
    let db_labels: Vec<(String, u64, u64)> = t
        .dbs
        .iter()
        .enumerate()
        .filter(|(i, d)| *i == 0 || d.0 > 0)
        .map(|(i, d)| (format!("{{db=\"db{i}\"}}"), d.0, d.1))
        .collect();
    let per_db = |f: fn(u64, u64) -> u64| -> Vec<(&str, String)> {
        db_labels
            .iter()
            .map(|(l, k, e)| (l.as_str(), f(*k, *e).to_string()))
            .collect()
    };
    metric(
        o,
        "db_keys",
        "gauge",
        "Total number of keys by DB",
        &per_db(|keys, _| keys),
    );
    metric(
        o,
        "db_keys_expiring",
        "gauge",
        "Total number of expiring keys by DB",
        &per_db(|_, expires| expires),
    );
}

/// Per-command calls, time, failures and the latency histogram (from the per-thread
/// histograms of LATENCY HISTOGRAM and INFO latencystats, summed).
fn commands(o: &mut String, t: &Totals, hists: &[(usize, crate::latency::Hdr)]) {
    let mut cmds: Vec<_> = t
        .named_cmd_stats(|c| c.calls > 0 || c.rejected > 0 || c.failed > 0)
        .into_iter()
        .map(|(name, c)| (format!("{{{}}}", cmd_label(name)), c))
        .collect();
    cmds.sort_by(|a, b| a.0.cmp(&b.0));
    let col = |f: fn(&crate::stats::CmdStat) -> String| -> Vec<(&str, String)> {
        cmds.iter().map(|(l, c)| (l.as_str(), f(c))).collect()
    };
    metric(
        o,
        "commands_total",
        "counter",
        "Total number of calls by command",
        &col(|c| c.calls.to_string()),
    );
    metric(
        o,
        "commands_duration_seconds_total",
        "counter",
        "Total time spent in commands",
        &col(|c| secs(c.usec)),
    );
    metric(
        o,
        "commands_failed_calls_total",
        "counter",
        "Calls that replied with an error, by command",
        &col(|c| c.failed.to_string()),
    );
    metric(
        o,
        "commands_rejected_calls_total",
        "counter",
        "Calls rejected before running (arity, ACL, OOM...), by command",
        &col(|c| c.rejected.to_string()),
    );
    let by_id = entries_by_id();
    let bounds_ns: Vec<u64> = LATENCY_BOUNDS_US.iter().map(|us| us * 1000).collect();
    let mut series: Vec<Series> = hists
        .iter()
        .filter_map(|(id, h)| {
            let e = by_id.get(*id).copied().flatten()?;
            Some(Series {
                labels: cmd_label(&e.fullname),
                cumulative: h.cumulative(&bounds_ns),
                count: h.total,
                sum: t.cmd.get(*id).map_or(0, |c| c.usec) as f64 / 1e6,
            })
        })
        .collect();
    series.sort_by(|a, b| a.labels.cmp(&b.labels));
    histogram(
        o,
        "command_duration_seconds",
        "Latency of commands (while latency-tracking is on), by command",
        &series,
    );
}

/// What `/metrics` reports of replication, copied out of its locks.
struct ReplState {
    offset: u64,
    /// (ip, port, online, ack offset, ack unix ms) per attached replica.
    replicas: Vec<(String, u16, bool, u64, u64)>,
    /// On a replica: (link up, full sync in progress, last I/O unix ms).
    link: Option<(bool, bool, u64)>,
}

fn replication_state() -> ReplState {
    use crate::replication::replica::{link, State};
    // One lock at a time: the primary's state, then the link.
    let (offset, replicas) = {
        let m = crate::replication::master();
        let replicas = m
            .replicas
            .iter()
            .map(|r| (r.ip.clone(), r.port, r.online, r.ack_offset, r.ack_ms))
            .collect();
        (m.offset, replicas)
    };
    let link = link().as_ref().map(|l| {
        (
            l.state == State::Connected,
            l.state == State::Sync,
            l.last_io_ms,
        )
    });
    ReplState {
        offset,
        replicas,
        link,
    }
}

/// Replication: offsets, attached replicas and their lag; on a replica, its link.
fn replication(o: &mut String, r: &ReplState) {
    let now = crate::clock::unix_ms();
    metric(
        o,
        "connected_replicas",
        "gauge",
        "Number of attached replicas",
        &[("", r.replicas.len().to_string())],
    );
    metric(
        o,
        "repl_offset_bytes",
        "gauge",
        "Replication offset: bytes of stream produced (master) or received (replica)",
        &[("", r.offset.to_string())],
    );
    let labels: Vec<String> = r
        .replicas
        .iter()
        .map(|(ip, port, online, _, _)| {
            let state = if *online { "online" } else { "wait_bgsave" };
            format!("{{replica_ip=\"{ip}\",replica_port=\"{port}\",replica_state=\"{state}\"}}")
        })
        .collect();
    let per_replica = |f: &dyn Fn(u64, u64) -> String| -> Vec<(&str, String)> {
        labels
            .iter()
            .zip(&r.replicas)
            .map(|(l, (_, _, _, ack, ack_ms))| (l.as_str(), f(*ack, *ack_ms)))
            .collect()
    };
    metric(
        o,
        "connected_replica_lag_bytes",
        "gauge",
        "Bytes of stream a replica has not acknowledged",
        &per_replica(&|ack, _| r.offset.saturating_sub(ack).to_string()),
    );
    metric(
        o,
        "connected_replica_lag_seconds",
        "gauge",
        "Seconds since a replica's last acknowledgement",
        &per_replica(&|_, ack_ms| format!("{:.3}", now.saturating_sub(ack_ms) as f64 / 1e3)),
    );
    if let Some((up, sync, last_io_ms)) = r.link {
        metric(
            o,
            "master_link_status",
            "gauge",
            "1 if the link to the master is up, 0 if down",
            &[("", u8::from(up).to_string())],
        );
        let ago = if up {
            (now.saturating_sub(last_io_ms) / 1000) as i64
        } else {
            -1
        };
        metric(
            o,
            "master_last_io_seconds_ago",
            "gauge",
            "Seconds since the last I/O with the master, -1 while the link is down",
            &[("", ago.to_string())],
        );
        metric(
            o,
            "master_sync_in_progress",
            "gauge",
            "1 while the full sync from the master runs",
            &[("", u8::from(sync).to_string())],
        );
    }
}

/// One per-thread metric: name, type, help and how to read it from a thread's figures.
type ThreadMetric = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ThreadLoad) -> String,
);

/// Each thread's (each shard's) load, labelled `thread="N"`: skew between shard threads.
fn per_thread(o: &mut String, t: &Totals) {
    let labels: Vec<String> = (0..t.per_thread.len())
        .map(|i| format!("{{thread=\"{i}\"}}"))
        .collect();
    let col = |f: fn(&ThreadLoad) -> String| -> Vec<(&str, String)> {
        labels
            .iter()
            .zip(&t.per_thread)
            .map(|(l, x)| (l.as_str(), f(x)))
            .collect()
    };
    let rows: [ThreadMetric; 8] = [
        (
            "thread_commands_processed_total",
            "counter",
            "Commands processed by the thread's connections",
            |x| x.commands_processed.to_string(),
        ),
        (
            "thread_net_input_bytes_total",
            "counter",
            "Bytes read from the thread's connections",
            |x| x.net_input_bytes.to_string(),
        ),
        (
            "thread_net_output_bytes_total",
            "counter",
            "Bytes written to the thread's connections",
            |x| x.net_output_bytes.to_string(),
        ),
        (
            "thread_cpu_seconds_total",
            "counter",
            "CPU time (user and system) of the thread",
            |x| secs(x.cpu_usec),
        ),
        (
            "thread_connected_clients",
            "gauge",
            "Connections the thread owns",
            |x| x.clients.to_string(),
        ),
        (
            "thread_blocked_clients",
            "gauge",
            "The thread's connections blocked on a blocking call",
            |x| x.blocked.to_string(),
        ),
        (
            "thread_keys",
            "gauge",
            "Keys in the thread's shard (all dbs)",
            |x| x.keys.to_string(),
        ),
        (
            "thread_table_used_memory_bytes",
            "gauge",
            "Memory of the key tables of the thread's shard",
            |x| x.table_mem.to_string(),
        ),
    ];
    for (name, kind, help, f) in rows {
        metric(o, name, kind, help, &col(f));
    }
}
