//! memtier-style text report and JSON output.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

use crate::opts::{BenchOpts, Requests};
use crate::run::{new_hist, RowKind, RowStats, RunResult};

/// Per-row numbers as shown in the table.
#[derive(Debug, Clone)]
pub struct RowSummary {
    pub label: String,
    pub count: u64,
    pub errors: u64,
    pub ops_sec: f64,
    pub hits_sec: Option<f64>,
    pub misses_sec: Option<f64>,
    pub avg_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub pcts_ms: Vec<(f64, f64)>,
    pub kb_sec: f64,
}

fn summarize(label: &str, kind: RowKind, r: &RowStats, secs: f64, pcts: &[f64]) -> RowSummary {
    let has = !r.hist.is_empty();
    let ms = |ns: f64| ns / 1e6;
    RowSummary {
        label: label.to_string(),
        count: r.ops,
        errors: r.errors,
        ops_sec: r.ops as f64 / secs,
        hits_sec: (kind == RowKind::Get).then(|| r.hits as f64 / secs),
        misses_sec: (kind == RowKind::Get).then(|| r.misses as f64 / secs),
        avg_ms: has.then(|| ms(r.hist.mean())),
        min_ms: has.then(|| ms(r.hist.min() as f64)),
        max_ms: has.then(|| ms(r.hist.max() as f64)),
        pcts_ms: if has {
            pcts.iter()
                .map(|&p| (p, ms(r.hist.value_at_quantile(p / 100.0) as f64)))
                .collect()
        } else {
            Vec::new()
        },
        kb_sec: r.bytes as f64 / 1024.0 / secs,
    }
}

/// Rows (in memtier's order) plus the Totals row.
pub fn summaries(res: &RunResult, pcts: &[f64]) -> (Vec<RowSummary>, RowSummary, Histogram<u64>) {
    let secs = res.duration.as_secs_f64().max(1e-9);
    let rows: Vec<RowSummary> = res
        .rows
        .iter()
        .map(|r| summarize(&r.label, r.kind, r, secs, pcts))
        .collect();
    let mut total = RowStats {
        label: "Totals".into(),
        kind: RowKind::Get,
        ops: 0,
        hits: 0,
        misses: 0,
        errors: 0,
        bytes: 0,
        hist: new_hist(),
    };
    for r in &res.rows {
        total.ops += r.ops;
        total.hits += r.hits;
        total.misses += r.misses;
        total.errors += r.errors;
        total.bytes += r.bytes;
        let _ = total.hist.add(&r.hist);
    }
    let has_gets = res.rows.iter().any(|r| r.kind == RowKind::Get);
    let kind = if has_gets {
        RowKind::Get
    } else {
        RowKind::Command
    };
    let mut t = summarize("Totals", kind, &total, secs, pcts);
    if !has_gets {
        t.hits_sec = None;
        t.misses_sec = None;
    }
    (rows, t, total.hist)
}

fn pct_name(p: f64) -> String {
    let s = format!("{p}");
    format!("p{s}")
}

fn opt(v: Option<f64>, width: usize, prec: usize) -> String {
    match v {
        Some(x) => format!("{x:>width$.prec$}"),
        None => format!("{:>width$}", "---"),
    }
}

/// The text report: configuration header, ALL STATS table and (optionally) the
/// latency distribution, laid out like memtier_benchmark's.
pub fn render_text(o: &BenchOpts, res: &RunResult) -> String {
    let mut s = String::new();
    let (rows, total, total_hist) = summaries(res, &o.print_percentiles);
    let _ = writeln!(s, "{:<9} Threads", o.threads);
    let _ = writeln!(s, "{:<9} Connections per thread", o.clients);
    match (o.test_time, o.requests) {
        (Some(t), _) => {
            let _ = writeln!(s, "{t:<9} Seconds");
        }
        (None, Requests::PerClient(n)) => {
            let _ = writeln!(s, "{n:<9} Requests per client");
        }
        (None, Requests::AllKeys) => {
            let _ = writeln!(s, "{:<9} Requests per client", "allkeys");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s);
    let _ = writeln!(s, "ALL STATS");
    let width = 6 + 13 * 3 + 16 * (1 + o.print_percentiles.len()) + 13;
    let _ = writeln!(s, "{}", "=".repeat(width));
    let mut header = format!(
        "{:<6} {:>12} {:>12} {:>12} {:>15}",
        "Type", "Ops/sec", "Hits/sec", "Misses/sec", "Avg. Latency"
    );
    for p in &o.print_percentiles {
        let _ = write!(header, " {:>15}", format!("{} Latency", pct_name(*p)));
    }
    let _ = write!(header, " {:>12} ", "KB/sec");
    let _ = writeln!(s, "{header}");
    let _ = writeln!(s, "{}", "-".repeat(width));
    let line = |r: &RowSummary| {
        let mut l = format!(
            "{:<6} {:>12.2} {} {} {}",
            r.label,
            r.ops_sec,
            opt(r.hits_sec, 12, 2),
            opt(r.misses_sec, 12, 2),
            opt(r.avg_ms, 15, 5)
        );
        if r.pcts_ms.is_empty() {
            for _ in &o.print_percentiles {
                let _ = write!(l, " {:>15}", "---");
            }
        } else {
            for (_, v) in &r.pcts_ms {
                let _ = write!(l, " {v:>15.5}");
            }
        }
        let _ = write!(l, " {:>12.2} ", r.kb_sec);
        l
    };
    for r in &rows {
        let _ = writeln!(s, "{}", line(r));
    }
    if o.command.is_empty() {
        let mut w = format!(
            "{:<6} {:>12.2} {:>12} {:>12} {:>15}",
            "Waits", 0.0, "---", "---", "---"
        );
        for _ in &o.print_percentiles {
            let _ = write!(w, " {:>15}", "---");
        }
        let _ = write!(w, " {:>12} ", "---");
        let _ = writeln!(s, "{w}");
    }
    let _ = writeln!(s, "{}", line(&total));
    let errors: u64 = rows.iter().map(|r| r.errors).sum();
    if errors > 0 {
        let _ = writeln!(
            s,
            "\nWARNING: {errors} requests got error replies (counted in Ops/sec); first: {}",
            res.first_error_reply.as_deref().unwrap_or("?")
        );
    }

    if !o.hide_histogram {
        let _ = writeln!(s);
        let _ = writeln!(s);
        let _ = writeln!(s, "Request Latency Distribution");
        let _ = writeln!(s, "{:<6} {:>12} {:>12}", "Type", "<= msec", "Percent");
        let _ = writeln!(s, "{}", "-".repeat(72));
        for r in &res.rows {
            if r.hist.is_empty() {
                continue;
            }
            for v in r.hist.iter_quantiles(1) {
                let _ = writeln!(
                    s,
                    "{:<6} {:>12.3} {:>12.3}",
                    match r.kind {
                        RowKind::Set => "SET".to_string(),
                        RowKind::Get => "GET".to_string(),
                        RowKind::Command => r.label.to_ascii_uppercase(),
                    },
                    v.value_iterated_to() as f64 / 1e6,
                    v.percentile()
                );
            }
            let _ = writeln!(s, "---");
        }
        let _ = total_hist;
    }
    s
}

fn row_json(r: &RowSummary) -> Value {
    let mut pct = Map::new();
    for (p, v) in &r.pcts_ms {
        pct.insert(format!("p{p:.2}"), json!(v));
    }
    json!({
        "Count": r.count,
        "Errors": r.errors,
        "Ops/sec": r.ops_sec,
        "Hits/sec": r.hits_sec.unwrap_or(0.0),
        "Misses/sec": r.misses_sec.unwrap_or(0.0),
        "Latency": r.avg_ms.unwrap_or(0.0),
        "Average Latency": r.avg_ms.unwrap_or(0.0),
        "Min Latency": r.min_ms.unwrap_or(0.0),
        "Max Latency": r.max_ms.unwrap_or(0.0),
        "KB/sec": r.kb_sec,
        "Percentile Latencies": Value::Object(pct),
    })
}

/// JSON in the spirit of memtier's `--json-out-file` (`ALL STATS` → row → metrics;
/// latencies in msec).
pub fn render_json(o: &BenchOpts, res: &RunResult) -> Value {
    let (rows, total, _) = summaries(res, &o.print_percentiles);
    let mut all = Map::new();
    for r in &rows {
        all.insert(r.label.clone(), row_json(r));
    }
    all.insert("Totals".into(), row_json(&total));
    let dur_ms = res.duration.as_secs_f64() * 1000.0;
    json!({
        "configuration": {
            "server": o.server,
            "port": o.port,
            "protocol": format!("{:?}", o.protocol).to_ascii_lowercase(),
            "threads": o.threads,
            "clients": o.clients,
            "requests": match o.requests { Requests::PerClient(n) => json!(n), Requests::AllKeys => json!("allkeys") },
            "test_time": o.test_time,
            "ratio": format!("{}:{}", o.ratio.set, o.ratio.get),
            "pipeline": o.pipeline,
            "data_size": o.data_size,
            "key_prefix": o.key_prefix,
            "key_minimum": o.key_minimum,
            "key_maximum": o.key_maximum,
            "command": o.command,
            "batch": o.batch,
        },
        "ALL STATS": Value::Object(all),
        "First error reply": res.first_error_reply,
        "runtime": {
            "Start time": res.start_unix_ms as u64,
            "Finish time": res.start_unix_ms as u64 + dur_ms as u64,
            "Total duration": dur_ms,
        }
    })
}
