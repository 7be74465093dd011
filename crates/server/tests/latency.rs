//! Integration tests for the latency monitor: LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR
//! / HISTOGRAM and INFO latencystats, against the real binary (two threads, so that events seen
//! on either thread are reported by both).

mod common;

use redis::Value;

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn latency_monitor_records_debug_sleep() {
    let srv = common::Server::start_threads(2, &[]);
    let mut a = srv.client();
    let mut b = srv.client();
    // Off by default: nothing is recorded.
    let _: () = q(&mut a, &["DEBUG", "SLEEP", "0.05"]);
    let latest: Value = q(&mut a, &["LATENCY", "LATEST"]);
    assert!(items(&latest).is_empty());

    let _: () = q(
        &mut a,
        &["CONFIG", "SET", "latency-monitor-threshold", "200"],
    );
    let th: Vec<String> = q(&mut a, &["CONFIG", "GET", "latency-monitor-threshold"]);
    assert_eq!(th, vec!["latency-monitor-threshold", "200"]);
    // Under the threshold: no event.
    let _: () = q(&mut a, &["DEBUG", "SLEEP", "0.05"]);
    let latest: Value = q(&mut a, &["LATENCY", "LATEST"]);
    assert!(items(&latest).is_empty());

    // Two spikes, in different seconds, from connections that may be on different threads.
    let _: () = q(&mut a, &["DEBUG", "SLEEP", "0.3"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let _: () = q(&mut b, &["DEBUG", "SLEEP", "0.4"]);

    let hist: Value = q(&mut a, &["LATENCY", "HISTORY", "command"]);
    let hist = items(&hist);
    assert_eq!(hist.len(), 2, "{hist:?}");
    let (t0, l0) = (int(&items(&hist[0])[0]), int(&items(&hist[0])[1]));
    let (t1, l1) = (int(&items(&hist[1])[0]), int(&items(&hist[1])[1]));
    assert!(t1 > t0);
    assert!((300..450).contains(&l0), "{l0}");
    assert!((400..550).contains(&l1), "{l1}");

    let latest: Value = q(&mut b, &["LATENCY", "LATEST"]);
    let latest = items(&latest);
    assert_eq!(latest.len(), 1);
    let e = items(&latest[0]);
    assert_eq!(text(&e[0]), "command");
    assert_eq!(int(&e[1]), t1);
    assert_eq!(int(&e[2]), l1);
    assert_eq!(int(&e[3]), l1);

    let graph: Value = q(&mut a, &["LATENCY", "GRAPH", "command"]);
    let graph = text(&graph);
    let mut lines = graph.lines();
    assert_eq!(
        lines.next(),
        Some(format!("command - high {l1} ms, low {l0} ms (all time high {l1} ms)").as_str())
    );
    assert_eq!(lines.next(), Some("-".repeat(80).as_str()));
    // 4 rows of sparkline, a blank row, then the labels ("1s"/"0s" style, one column each).
    assert_eq!(lines.clone().count(), 7, "{graph}");
    let err = redis::cmd("LATENCY")
        .arg("GRAPH")
        .arg("blabla")
        .query::<Value>(&mut a)
        .unwrap_err();
    assert!(err
        .to_string()
        .contains("No samples available for event 'blabla'"));

    let doctor: Value = q(&mut a, &["LATENCY", "DOCTOR"]);
    let doctor = text(&doctor);
    assert!(
        doctor.starts_with("Dave, I have observed latency spikes"),
        "{doctor}"
    );
    assert!(doctor.contains("1. command: 2 latency spikes"), "{doctor}");

    let empty: Value = q(&mut a, &["LATENCY", "HISTORY", "blabla"]);
    assert!(items(&empty).is_empty());
    let n: i64 = q(&mut a, &["LATENCY", "RESET", "blabla"]);
    assert_eq!(n, 0);
    let n: i64 = q(&mut a, &["LATENCY", "RESET", "COMMAND"]);
    assert_eq!(n, 1);
    let latest: Value = q(&mut a, &["LATENCY", "LATEST"]);
    assert!(items(&latest).is_empty());
    let doctor: Value = q(&mut a, &["LATENCY", "DOCTOR"]);
    assert!(text(&doctor).starts_with("Dave, no latency spike was observed"));
}

#[test]
fn latency_histogram_and_latencystats() {
    let srv = common::Server::start_threads(2, &[]);
    let mut c = srv.client();
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    let _: () = q(&mut c, &["SET", "a", "b"]);
    let _: () = q(&mut c, &["SET", "c", "d"]);
    let _: Option<String> = q(&mut c, &["GET", "a"]);
    let _: i64 = q(&mut c, &["CLIENT", "ID"]);

    let h: Value = q(&mut c, &["LATENCY", "HISTOGRAM", "set", "blabla", "client"]);
    let h = items(&h);
    assert_eq!(h.len(), 4, "{h:?}");
    assert_eq!(text(&h[0]), "set");
    let set = items(&h[1]);
    assert_eq!(text(&set[0]), "calls");
    assert_eq!(int(&set[1]), 2);
    assert_eq!(text(&set[2]), "histogram_usec");
    let buckets = items(&set[3]);
    assert!(!buckets.is_empty() && buckets.len().is_multiple_of(2));
    // Cumulative counts ending at the number of calls, power-of-two-ish bucket bounds.
    assert_eq!(int(&buckets[buckets.len() - 1]), 2);
    assert_eq!(text(&h[2]), "client|id");

    let all: Value = q(&mut c, &["LATENCY", "HISTOGRAM"]);
    let names: Vec<String> = items(&all).iter().step_by(2).map(text).collect();
    for n in ["set", "get", "client|id", "config|resetstat"] {
        assert!(names.iter().any(|x| x == n), "{names:?}");
    }

    let info: String = q(&mut c, &["INFO", "latencystats"]);
    assert!(info.contains("# Latencystats"), "{info}");
    let line = info
        .lines()
        .find(|l| l.starts_with("latency_percentiles_usec_set:"))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(line.contains(":p50=") && line.contains(",p99=") && line.contains(",p99.9="));

    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 99.99",
        ],
    );
    let info: String = q(&mut c, &["INFO", "latencystats"]);
    assert!(info.contains(",p99.99="), "{info}");

    // RESETSTAT forgets the histograms; latency-tracking no stops recording.
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]);
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    let _: () = q(&mut c, &["SET", "a", "b"]);
    let h: Value = q(&mut c, &["LATENCY", "HISTOGRAM", "set"]);
    assert!(items(&h).is_empty());
}
