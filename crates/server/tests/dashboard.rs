//! The Grafana dashboard (dist/grafana/damselfly-dashboard.json) against the real `/metrics`:
//! every metric its PromQL queries exists in the exposition of a running primary and of a
//! replica attached to it, after some traffic; and the exposition is well-formed (every sample's
//! family has a `# TYPE`, histogram buckets are cumulative and end with `le="+Inf"`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{against_redis, Server};

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../dist/grafana/damselfly-dashboard.json"
);

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8(out).expect("utf-8 response");
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    let body = out.find("\r\n\r\n").expect("head ends") + 4;
    out[body..].to_string()
}

/// Every string that holds a query: `expr` of panel targets, `query` and `definition` of
/// template variables.
fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "query" | "definition", serde_json::Value::String(s)) => {
                        out.push(s.clone())
                    }
                    _ => queries(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| queries(x, out)),
        _ => {}
    }
}

fn ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

/// The `dragonfly_[a-z0-9_]+` identifiers of a PromQL expression.
fn metric_names(expr: &str, out: &mut BTreeSet<String>) {
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("dragonfly_") {
        let start = i + at;
        let mut end = start + "dragonfly_".len();
        while end < b.len()
            && (b[end].is_ascii_lowercase() || b[end].is_ascii_digit() || b[end] == b'_')
        {
            end += 1;
        }
        if start == 0 || !ident_char(b[start - 1]) {
            out.insert(expr[start..end].to_string());
        }
        i = end;
    }
}

/// One sample line: (name, labels in order, value).
type Sample = (String, Vec<(String, String)>, String);

fn parse_sample(line: &str) -> Sample {
    let name_end = line
        .find(['{', ' '])
        .unwrap_or_else(|| panic!("no value: {line}"));
    let name = line[..name_end].to_string();
    assert!(
        !name.is_empty() && !name.as_bytes()[0].is_ascii_digit() && name.bytes().all(ident_char),
        "bad metric name: {line}"
    );
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        let mut r = r;
        loop {
            if let Some(after) = r.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = r.find("=\"").unwrap_or_else(|| panic!("bad label: {line}"));
            let key = r[..eq].to_string();
            assert!(
                !key.is_empty() && key.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'),
                "bad label name: {line}"
            );
            let mut value = String::new();
            let mut chars = r[eq + 2..].char_indices();
            let close = loop {
                match chars.next() {
                    Some((_, '\\')) => {
                        let (_, c) = chars.next().expect("escape");
                        value.push(if c == 'n' { '\n' } else { c });
                    }
                    Some((j, '"')) => break eq + 2 + j,
                    Some((_, c)) => value.push(c),
                    None => panic!("unterminated label value: {line}"),
                }
            };
            labels.push((key, value));
            r = &r[close + 1..];
            r = r.strip_prefix(',').unwrap_or(r);
        }
    }
    let value = rest
        .strip_prefix(' ')
        .unwrap_or_else(|| panic!("no value: {line}"));
    assert!(
        value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
        "bad value: {line}"
    );
    (name, labels, value.to_string())
}

/// Checks the exposition and returns (family -> type, family -> number of samples).
fn check_exposition(text: &str) -> (BTreeMap<String, String>, BTreeMap<String, usize>) {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples: BTreeMap<String, usize> = BTreeMap::new();
    // Histogram series: (family, labels without le) -> [(le, count)], plus _count values.
    let mut buckets: BTreeMap<(String, String), Vec<(String, f64)>> = BTreeMap::new();
    let mut counts: BTreeMap<(String, String), f64> = BTreeMap::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "TYPE twice: {line}"
            );
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment: {line}");
        let (name, labels, value) = parse_sample(line);
        let family = if types.contains_key(&name) {
            name.clone()
        } else {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| {
                    let base = name.strip_suffix(suffix)?;
                    (types.get(base).map(String::as_str) == Some("histogram"))
                        .then(|| base.to_string())
                })
                .unwrap_or_else(|| panic!("sample without a # TYPE before it: {line}"))
        };
        *samples.entry(family.clone()).or_default() += 1;
        if types[&family] != "histogram" {
            continue;
        }
        let others: Vec<String> = labels
            .iter()
            .filter(|(k, _)| k != "le")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let key = (family.clone(), others.join(","));
        let v: f64 = value.parse().expect("histogram values are numbers");
        if name.ends_with("_bucket") {
            let le = labels
                .iter()
                .find(|(k, _)| k == "le")
                .unwrap_or_else(|| panic!("bucket without le: {line}"));
            buckets.entry(key).or_default().push((le.1.clone(), v));
        } else if name.ends_with("_count") {
            counts.insert(key, v);
        }
    }
    for ((family, series), bs) in &buckets {
        let (last_le, last) = bs.last().expect("a bucket");
        assert_eq!(last_le, "+Inf", "{family}{{{series}}} ends with +Inf");
        for w in bs.windows(2) {
            let bound = |le: &str| {
                if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse::<f64>().expect("le is a number")
                }
            };
            assert!(
                bound(&w[0].0) < bound(&w[1].0),
                "{family}{{{series}}}: le ascending {bs:?}"
            );
            assert!(w[0].1 <= w[1].1, "{family}{{{series}}}: cumulative {bs:?}");
        }
        let count = counts.get(&(family.clone(), series.clone()));
        assert_eq!(
            count,
            Some(last),
            "{family}{{{series}}}: _count is the +Inf bucket"
        );
    }
    (types, samples)
}

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let v: String = redis::cmd("INFO").arg(section).query(c).ok()?;
    v.lines().find_map(|l| {
        l.strip_prefix(&format!("{field}:"))
            .map(|x| x.trim().to_string())
    })
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: never happened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    if against_redis() {
        return; // /metrics is damselfly's.
    }
    let json = std::fs::read_to_string(DASHBOARD).expect("dashboard file");
    let dash: serde_json::Value = serde_json::from_str(&json).expect("dashboard is JSON");
    assert!(
        dash["panels"].as_array().is_some_and(|p| !p.is_empty()),
        "panels"
    );
    let mut exprs = Vec::new();
    queries(&dash, &mut exprs);
    let mut queried = BTreeSet::new();
    for e in &exprs {
        metric_names(e, &mut queried);
    }
    assert!(
        queried.len() > 10,
        "the dashboard queries metrics: {queried:?}"
    );

    // A primary with two shard threads and a replica attached to it.
    let primary = Server::start_threads(2, &[]);
    let replica = Server::start(&[]);
    let mut r = replica.client();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .query(&mut r)
        .unwrap();
    wait_for("replica link up", || {
        info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    let mut p = primary.client();
    for i in 0..200 {
        let k = format!("key:{i}");
        let _: () = redis::cmd("SET").arg(&k).arg(i).query(&mut p).unwrap();
        let _: Option<String> = redis::cmd("GET").arg(&k).query(&mut p).unwrap();
        let _: i64 = redis::cmd("LPUSH")
            .arg("list")
            .arg(i)
            .query(&mut p)
            .unwrap();
    }
    let _: Option<String> = redis::cmd("GET").arg("missing").query(&mut p).unwrap();
    let _: redis::RedisResult<i64> = redis::cmd("INCR").arg("list").query(&mut p);
    wait_for("replica acknowledged", || {
        info_field(&mut p, "replication", "connected_slaves").as_deref() == Some("1")
    });

    let mut types = BTreeMap::new();
    let mut samples: BTreeMap<String, usize> = BTreeMap::new();
    for srv in [&primary, &replica] {
        let text = http_get(srv.port(), "/metrics");
        let (t, s) = check_exposition(&text);
        types.extend(t);
        for (k, n) in s {
            *samples.entry(k).or_default() += n;
        }
        if std::ptr::eq(srv, &primary) {
            // Traffic made per-command, per-thread and per-replica series.
            for want in [
                "dragonfly_commands_total{cmd=\"set\"} 200\n",
                "dragonfly_command_duration_seconds_count{cmd=\"get\"} 201\n",
                "dragonfly_command_duration_seconds_bucket{cmd=\"lpush\",le=\"+Inf\"} 200\n",
                "dragonfly_thread_keys{thread=\"1\"} ",
                "dragonfly_connected_replicas 1\n",
                "dragonfly_role{role=\"master\"} 1\n",
                "dragonfly_connected_replica_lag_bytes{replica_ip=\"127.0.0.1\",",
            ] {
                assert!(text.contains(want), "{want} in:\n{text}");
            }
            let keys: u64 = (0..2)
                .map(|t| {
                    let tag = format!("dragonfly_thread_keys{{thread=\"{t}\"}} ");
                    let at = text.find(&tag).expect("thread keys") + tag.len();
                    text[at..].lines().next().unwrap().parse::<u64>().unwrap()
                })
                .sum();
            assert_eq!(keys, 201, "per-thread keys add up to the keyspace");
        } else {
            for want in [
                "dragonfly_role{role=\"replica\"} 1\n",
                "dragonfly_master 0\n",
                "dragonfly_master_link_status 1\n",
            ] {
                assert!(text.contains(want), "{want} in:\n{text}");
            }
        }
    }
    for name in &queried {
        let family = if types.contains_key(name) {
            name.clone()
        } else {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|base| types.get(*base).map(String::as_str) == Some("histogram"))
                .unwrap_or_else(|| panic!("the dashboard queries {name}, which /metrics lacks"))
                .to_string()
        };
        assert!(
            samples.get(&family).is_some_and(|n| *n > 0),
            "the dashboard queries {name}, which has no samples"
        );
    }
}
