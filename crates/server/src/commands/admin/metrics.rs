//! Prometheus text exposition for `/metrics`, with Dragonfly's metric names.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::stats_snapshot::gather;
use crate::commands::ConnCtx;

/// One metric: HELP and TYPE lines, then a sample per (labels, value).
fn metric<L: AsRef<str>>(
    o: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    samples: &[(L, String)],
) {
    let _ = writeln!(o, "# HELP dragonfly_{name} {help}");
    let _ = writeln!(o, "# TYPE dragonfly_{name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(o, "dragonfly_{name}{} {v}", labels.as_ref());
    }
}

/// Prometheus text exposition with Dragonfly's metric names.
pub async fn prometheus_metrics(cx: &mut ConnCtx) -> String {
    let t = gather(cx).await;
    let shared = cx.shared();
    let cfg = &shared.config;
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
    metric(
        &mut o,
        "role",
        "gauge",
        "Replication role",
        &[("{role=\"master\"}", "1".into())],
    );
    // (name, type, help, value) of the metrics without labels.
    let unlabelled: &[(&str, &str, &str, u64)] = &[
        ("master", "gauge", "1 if master 0 if replica", 1),
        (
            "uptime_in_seconds",
            "counter",
            "Server uptime in seconds",
            shared.started.elapsed().as_secs(),
        ),
        (
            "connected_clients",
            "gauge",
            "Number of connected clients",
            t.clients as u64,
        ),
        (
            "blocked_clients",
            "gauge",
            "Number of clients blocked on a blocking call",
            t.blocked as u64,
        ),
        (
            "memory_used_bytes",
            "gauge",
            "Memory used by the allocator in bytes",
            t.mem.allocated,
        ),
        (
            "memory_used_peak_bytes",
            "gauge",
            "Peak memory used by the allocator in bytes",
            t.mem.peak,
        ),
        (
            "used_memory_rss_bytes",
            "gauge",
            "Resident set size of the process in bytes",
            t.mem.rss,
        ),
        (
            "memory_max_bytes",
            "gauge",
            "Maximum memory (maxmemory), 0 = unlimited",
            cfg.maxmemory(),
        ),
        (
            "table_used_memory_bytes",
            "gauge",
            "Memory used by the key tables in bytes",
            t.table_mem,
        ),
        (
            "connections_received_total",
            "counter",
            "Total connections accepted",
            shared.total_connections.load(Ordering::Relaxed),
        ),
        (
            "rejected_connections_total",
            "counter",
            "Total connections rejected",
            shared.rejected_connections.load(Ordering::Relaxed),
        ),
        (
            "commands_processed_total",
            "counter",
            "Total commands processed",
            t.commands_processed,
        ),
        (
            "keyspace_hits_total",
            "counter",
            "Successful key lookups",
            t.hits,
        ),
        (
            "keyspace_misses_total",
            "counter",
            "Failed key lookups",
            t.misses,
        ),
        (
            "net_input_bytes_total",
            "counter",
            "Bytes read from clients",
            t.net_input_bytes,
        ),
        (
            "net_output_bytes_total",
            "counter",
            "Bytes written to clients",
            t.net_output_bytes,
        ),
        (
            "expired_keys_total",
            "counter",
            "Keys removed because their TTL passed",
            t.expired,
        ),
        (
            "evicted_keys_total",
            "counter",
            "Keys evicted because of maxmemory",
            0,
        ),
        (
            "internal_errors_total",
            "counter",
            "Commands that failed with an internal error (a contained panic)",
            t.internal_errors,
        ),
    ];
    for &(name, kind, help, v) in unlabelled {
        metric(&mut o, name, kind, help, &[("", v.to_string())]);
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
        &mut o,
        "db_keys",
        "gauge",
        "Total number of keys by DB",
        &per_db(|keys, _| keys),
    );
    metric(
        &mut o,
        "db_keys_expiring",
        "gauge",
        "Total number of expiring keys by DB",
        &per_db(|_, expires| expires),
    );
    let mut cmds: Vec<_> = t
        .named_cmd_stats(|c| c.calls > 0)
        .into_iter()
        .map(|(name, c)| (format!("{{cmd=\"{}\"}}", name.replace('|', "_")), c))
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
