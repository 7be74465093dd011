//! Streams end to end on a 4-shard server (replies are compared with redis-server's by the
//! differential and pipeline fuzz tests, and with Redis's own suite; RDB/DUMP both ways in
//! `persistence.rs`; replication in `replication.rs`). Here: what those do not reach.
//!
//! - blocking XREAD / XREADGROUP with keys on several shards: woken by the XADD that made a key
//!   ready (only that key in the reply), `$` meaning the last ID when the command ran, errors
//!   for waiters whose group or key went away, timeouts;
//! - large variadic calls (XADD of 10k fields, XDEL and XACK of 10k IDs), a MULTI of 5000 XADDs
//!   to one key, pipelined group reads;
//! - consumer-group bookkeeping across many consumers (every delivered ID pending exactly
//!   once).

mod common;

use std::time::Duration;

use common::{bulk, Resp, Server};
use damselfly::engine::shard_of;

const THREADS: usize = 4;

fn server() -> Server {
    Server::start(&["--proactor_threads=4"])
}

/// Two stream keys on different shards.
fn two_shard_keys() -> (String, String) {
    let a = "sa".to_string();
    let b = (0..1000)
        .map(|i| format!("sb{i}"))
        .find(|k| shard_of(k.as_bytes(), THREADS) != shard_of(a.as_bytes(), THREADS))
        .unwrap();
    (a, b)
}

fn wait_blocked(c: &mut common::RawConn, n: i64) {
    for _ in 0..200 {
        let info = c.cmd(&["INFO", "clients"]);
        let Resp::Bulk(b) = info else {
            panic!("{info}")
        };
        let s = String::from_utf8_lossy(&b);
        let v: i64 = s
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1);
        if v == n {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("blocked_clients never reached {n}");
}

fn entry(id: &str, f: &str, v: &str) -> Resp {
    Resp::Array(vec![bulk(id), Resp::Array(vec![bulk(f), bulk(v)])])
}

#[test]
fn blocking_reads_across_shards() {
    let srv = server();
    let (a, b) = two_shard_keys();
    let mut w = srv.raw_conn();
    let mut c = srv.raw_conn();
    c.cmd(&["XADD", &a, "5-0", "f", "old"]);
    // `$` is the last ID when the command ran: the old entry is never served.
    w.send(&["XREAD", "BLOCK", "0", "STREAMS", &a, &b, "$", "$"]);
    wait_blocked(&mut c, 1);
    c.cmd(&["XADD", &b, "7-0", "f", "new"]);
    assert_eq!(
        w.read(),
        Resp::Array(vec![Resp::Array(vec![
            bulk(&b),
            Resp::Array(vec![entry("7-0", "f", "new")])
        ])])
    );
    // A timeout answers nil.
    assert_eq!(
        w.cmd(&["XREAD", "BLOCK", "50", "STREAMS", &a, &b, "$", "$"]),
        Resp::NilArray
    );
    // XADD below the waited-past ID does not wake; a later one does.
    w.send(&["XREAD", "BLOCK", "0", "STREAMS", &a, "10-0"]);
    wait_blocked(&mut c, 1);
    c.cmd(&["XADD", &a, "8-0", "f", "low"]);
    c.cmd(&["XADD", &a, "11-0", "f", "high"]);
    assert_eq!(
        w.read(),
        Resp::Array(vec![Resp::Array(vec![
            bulk(&a),
            Resp::Array(vec![entry("11-0", "f", "high")])
        ])])
    );
}

#[test]
fn blocking_group_reads_and_their_errors() {
    let srv = server();
    let (a, b) = two_shard_keys();
    let mut c = srv.raw_conn();
    for k in [&a, &b] {
        assert_eq!(
            c.cmd(&["XGROUP", "CREATE", k, "g", "$", "MKSTREAM"]),
            common::ok()
        );
    }
    // Two consumers wait; one XADD serves the first only (the group's last ID moved).
    let mut w1 = srv.raw_conn();
    let mut w2 = srv.raw_conn();
    w1.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "0",
        "STREAMS",
        &a,
        &b,
        ">",
        ">",
    ]);
    wait_blocked(&mut c, 1);
    w2.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c2",
        "BLOCK",
        "0",
        "STREAMS",
        &a,
        &b,
        ">",
        ">",
    ]);
    wait_blocked(&mut c, 2);
    c.cmd(&["XADD", &b, "1-0", "f", "v"]);
    assert_eq!(
        w1.read(),
        Resp::Array(vec![Resp::Array(vec![
            bulk(&b),
            Resp::Array(vec![entry("1-0", "f", "v")])
        ])])
    );
    wait_blocked(&mut c, 1);
    let p = c.cmd(&["XPENDING", &b, "g"]);
    assert_eq!(
        p,
        Resp::Array(vec![
            Resp::Int(1),
            bulk("1-0"),
            bulk("1-0"),
            Resp::Array(vec![Resp::Array(vec![bulk("c1"), bulk("1")])])
        ])
    );
    // The group goes away: the other waiter gets NOGROUP.
    c.cmd(&["XGROUP", "DESTROY", &a, "g"]);
    let r = w2.read();
    assert!(
        matches!(&r, Resp::Error(e) if e.starts_with(b"NOGROUP")),
        "{r}"
    );
    // The key goes away: UNBLOCKED.
    w2.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c2",
        "BLOCK",
        "0",
        "STREAMS",
        &b,
        ">",
    ]);
    wait_blocked(&mut c, 1);
    c.cmd(&["DEL", &b]);
    assert_eq!(
        w2.read(),
        common::err("UNBLOCKED the stream key no longer exists")
    );
    wait_blocked(&mut c, 0);
}

#[test]
fn large_variadic_calls() {
    let srv = server();
    let mut c = srv.raw_conn();
    // One entry of 10k fields.
    let mut args: Vec<String> = vec!["XADD".into(), "big".into(), "1-0".into()];
    for i in 0..10_000 {
        args.push(format!("f{i}"));
        args.push(format!("v{i}"));
    }
    assert_eq!(c.cmd(&args), bulk("1-0"));
    let Resp::Array(e) = c.cmd(&["XRANGE", "big", "-", "+"]) else {
        panic!()
    };
    let Resp::Array(kv) = &e[0] else { panic!() };
    let Resp::Array(fields) = &kv[1] else {
        panic!()
    };
    assert_eq!(fields.len(), 20_000);
    assert_eq!(fields[19_999], bulk("v9999"));
    // 10k entries, then XDEL of 10k IDs (half of them missing).
    let mut pipe = Vec::new();
    for i in 2..10_002 {
        pipe.extend(common::encode(&[
            "XADD",
            "many",
            &format!("{i}-0"),
            "f",
            "v",
        ]));
    }
    c.send_raw(&pipe);
    for _ in 2..10_002 {
        assert!(!c.read().is_error());
    }
    assert_eq!(c.cmd(&["XGROUP", "CREATE", "many", "g", "0"]), common::ok());
    let r = c.cmd(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "many", ">"]);
    let Resp::Array(r) = r else { panic!("{r}") };
    let Resp::Array(kv) = &r[0] else { panic!() };
    let Resp::Array(got) = &kv[1] else { panic!() };
    assert_eq!(got.len(), 10_000);
    let mut ack: Vec<String> = vec!["XACK".into(), "many".into(), "g".into()];
    let mut del: Vec<String> = vec!["XDEL".into(), "many".into()];
    for i in (2..20_002).step_by(2) {
        ack.push(format!("{i}-0"));
        del.push(format!("{i}-0"));
    }
    assert_eq!(c.cmd(&ack).as_int(), Some(5_000));
    assert_eq!(c.cmd(&del).as_int(), Some(5_000));
    assert_eq!(c.cmd(&["XLEN", "many"]).as_int(), Some(5_000));
    let p = c.cmd(&["XPENDING", "many", "g"]);
    let Resp::Array(p) = p else { panic!() };
    assert_eq!(p[0], Resp::Int(5_000));
    // A MULTI of 5000 XADDs to one key (one lock, not 5000).
    let mut tx = common::encode(&["MULTI"]);
    for i in 0..5000 {
        tx.extend(common::encode(&["XADD", "tx", "*", "i", &i.to_string()]));
    }
    tx.extend(common::encode(&["EXEC"]));
    c.send_raw(&tx);
    for _ in 0..5001 {
        c.read();
    }
    let Resp::Array(done) = c.read() else {
        panic!()
    };
    assert_eq!(done.len(), 5000);
    assert_eq!(c.cmd(&["XLEN", "tx"]).as_int(), Some(5000));
}

#[test]
fn every_delivery_is_pending_once() {
    let srv = server();
    let mut c = srv.raw_conn();
    let mut pipe = Vec::new();
    for i in 1..=3000 {
        pipe.extend(common::encode(&[
            "XADD",
            "q",
            &format!("{i}-0"),
            "n",
            &i.to_string(),
        ]));
    }
    pipe.extend(common::encode(&["XGROUP", "CREATE", "q", "g", "0"]));
    c.send_raw(&pipe);
    for _ in 0..3001 {
        assert!(!c.read().is_error());
    }
    // Ten consumers read pipelined batches until the group is drained.
    let mut conns: Vec<_> = (0..10).map(|_| srv.raw_conn()).collect();
    let mut seen = std::collections::BTreeSet::new();
    loop {
        let mut got = 0;
        for (i, k) in conns.iter_mut().enumerate() {
            let name = format!("c{i}");
            let mut p = Vec::new();
            for _ in 0..5 {
                p.extend(common::encode(&[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    &name,
                    "COUNT",
                    "7",
                    "STREAMS",
                    "q",
                    ">",
                ]));
            }
            k.send_raw(&p);
            for _ in 0..5 {
                if let Resp::Array(r) = k.read() {
                    let Resp::Array(kv) = &r[0] else { panic!() };
                    let Resp::Array(es) = &kv[1] else { panic!() };
                    for e in es {
                        let Resp::Array(e) = e else { panic!() };
                        assert!(seen.insert(e[0].to_string()), "delivered twice: {}", e[0]);
                        got += 1;
                    }
                }
            }
        }
        if got == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), 3000);
    let p = c.cmd(&["XPENDING", "q", "g"]);
    let Resp::Array(p) = p else { panic!() };
    assert_eq!(p[0], Resp::Int(3000));
    let Resp::Array(per) = &p[3] else { panic!() };
    let total: i64 = per
        .iter()
        .map(|x| {
            let Resp::Array(x) = x else { panic!() };
            let Resp::Bulk(n) = &x[1] else { panic!() };
            String::from_utf8_lossy(n).parse::<i64>().unwrap()
        })
        .sum();
    assert_eq!(total, 3000);
}
