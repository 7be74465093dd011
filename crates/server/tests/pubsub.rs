//! Pub/Sub against the real binary with 4 shard threads (connections are spread over the
//! threads, so publishers and subscribers sit on different ones): every message reaches every
//! subscriber exactly once and in each publisher's order, PUBLISH counts the receivers, the
//! RESP2 subscribed context, RESP3 pushes, introspection, cleanup on disconnect, and a slow
//! subscriber disconnected at the `pubsub` output limit while others go on.
//! `DFLY_TEST_TARGET=redis` runs the same expectations against redis-server.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use common::{bulk, err, ok, RawConn, Resp, Server};

fn start() -> Server {
    Server::start_threads(4, &[])
}

fn b(s: &str) -> Resp {
    bulk(s)
}

fn array(items: Vec<Resp>) -> Resp {
    Resp::Array(items)
}

fn text(r: Resp) -> String {
    match r {
        Resp::Bulk(b) | Resp::Verbatim(b) | Resp::Simple(b) => String::from_utf8(b).unwrap(),
        r => panic!("expected text, got {r}"),
    }
}

/// Subscribes `c` to `channels`, checking each confirmation.
fn subscribe(c: &mut RawConn, cmd: &str, channels: &[&str], first_count: i64) {
    let mut args = vec![cmd];
    args.extend_from_slice(channels);
    c.send(&args);
    for (i, ch) in channels.iter().enumerate() {
        assert_eq!(
            c.read(),
            array(vec![
                b(&cmd.to_lowercase()),
                b(ch),
                Resp::Int(first_count + i as i64)
            ])
        );
    }
}

/// The payload of a `message` or `pmessage` reply.
fn payload(r: Resp) -> (String, String) {
    let items = match r {
        Resp::Array(v) | Resp::Push(v) => v,
        r => panic!("not a message: {r}"),
    };
    let kind = text(items[0].clone());
    let last = text(items[items.len() - 1].clone());
    (kind, last)
}

#[test]
fn every_subscriber_gets_every_message_once_in_publish_order() {
    let srv = start();
    let subscribers = 8;
    let publishers = 3;
    let per_publisher = 300;
    let mut subs: Vec<RawConn> = (0..subscribers).map(|_| srv.raw_conn()).collect();
    for (i, s) in subs.iter_mut().enumerate() {
        // Half by channel, half by pattern: both kinds count as receivers.
        if i % 2 == 0 {
            subscribe(s, "SUBSCRIBE", &["news"], 1);
        } else {
            subscribe(s, "PSUBSCRIBE", &["ne*"], 1);
        }
    }
    let mut pubs: Vec<RawConn> = (0..publishers).map(|_| srv.raw_conn()).collect();
    for n in 0..per_publisher {
        for (p, c) in pubs.iter_mut().enumerate() {
            assert_eq!(
                c.cmd(&["PUBLISH", "news", &format!("{p}:{n}")]),
                Resp::Int(subscribers as i64),
                "PUBLISH counts every subscriber"
            );
        }
    }
    for (i, s) in subs.iter_mut().enumerate() {
        let mut next: HashMap<usize, usize> = HashMap::new();
        for _ in 0..publishers * per_publisher {
            let (kind, msg) = payload(s.read());
            assert_eq!(kind, if i % 2 == 0 { "message" } else { "pmessage" });
            let (p, n) = msg.split_once(':').unwrap();
            let (p, n): (usize, usize) = (p.parse().unwrap(), n.parse().unwrap());
            let want = next.entry(p).or_insert(0);
            assert_eq!(n, *want, "subscriber {i}: publisher {p} out of order");
            *want += 1;
        }
        assert!(next.values().all(|&n| n == per_publisher));
        // Nothing more (no duplicates): a PING answers next.
        assert_eq!(s.cmd(&["PING"]), array(vec![b("pong"), b("")]));
    }
}

#[test]
fn unsubscribing_and_closing_stop_delivery_and_counts() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut s = srv.raw_conn();
    subscribe(&mut s, "SUBSCRIBE", &["a", "b", "c"], 1);
    subscribe(&mut s, "PSUBSCRIBE", &["x*"], 4);
    subscribe(&mut s, "SSUBSCRIBE", &["sh"], 1);
    assert_eq!(
        c.q("PUBSUB NUMSUB a b z"),
        array(vec![
            b("a"),
            Resp::Int(1),
            b("b"),
            Resp::Int(1),
            b("z"),
            Resp::Int(0)
        ])
    );
    assert_eq!(c.q("PUBSUB NUMPAT"), Resp::Int(1));
    assert_eq!(
        c.q("PUBSUB SHARDNUMSUB sh"),
        array(vec![b("sh"), Resp::Int(1)])
    );
    let mut chans = match c.q("PUBSUB CHANNELS") {
        Resp::Array(v) => v.into_iter().map(text).collect::<Vec<_>>(),
        r => panic!("{r}"),
    };
    chans.sort();
    assert_eq!(chans, vec!["a", "b", "c"]);
    assert_eq!(c.q("PUBSUB CHANNELS a*"), Resp::Array(vec![b("a")]));
    // SPUBLISH reaches shard subscribers only; PUBLISH never does.
    assert_eq!(c.q("SPUBLISH sh m1"), Resp::Int(1));
    assert_eq!(c.q("PUBLISH sh m1"), Resp::Int(0));
    assert_eq!(s.read(), array(vec![b("smessage"), b("sh"), b("m1")]));
    // UNSUBSCRIBE of one channel: the count goes down, the others still deliver.
    s.send(&["UNSUBSCRIBE", "a", "nope"]);
    assert_eq!(
        s.read(),
        array(vec![b("unsubscribe"), b("a"), Resp::Int(3)])
    );
    assert_eq!(
        s.read(),
        array(vec![b("unsubscribe"), b("nope"), Resp::Int(3)])
    );
    assert_eq!(c.q("PUBLISH a m2"), Resp::Int(0));
    assert_eq!(c.q("PUBLISH xy m3"), Resp::Int(1));
    assert_eq!(
        s.read(),
        array(vec![b("pmessage"), b("x*"), b("xy"), b("m3")])
    );
    // Closing the subscriber removes everything it had.
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.q("PUBSUB NUMSUB b") != array(vec![b("b"), Resp::Int(0)])
        || c.q("PUBSUB NUMPAT") != Resp::Int(0)
    {
        assert!(Instant::now() < deadline, "the closed subscriber stayed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(c.q("PUBLISH b m4"), Resp::Int(0));
    assert_eq!(c.q("PUBSUB SHARDCHANNELS"), Resp::Array(vec![]));
}

#[test]
fn resp2_subscribed_context_and_resp3_pushes() {
    let srv = start();
    let mut s = srv.raw_conn();
    subscribe(&mut s, "SUBSCRIBE", &["ch"], 1);
    assert_eq!(
        s.q("GET x"),
        err("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
    );
    assert_eq!(s.q("PING hi"), array(vec![b("pong"), b("hi")]));
    // RESET leaves the channel and the context.
    assert_eq!(s.q("RESET"), Resp::Simple(b"RESET".to_vec()));
    assert_eq!(s.q("PING"), Resp::Simple(b"PONG".to_vec()));
    let mut c = srv.raw_conn();
    assert_eq!(c.q("PUBLISH ch m"), Resp::Int(0));

    // RESP3: any command runs while subscribed; messages are pushes.
    let mut r3 = srv.raw_conn();
    assert!(matches!(r3.q("HELLO 3"), Resp::Map(_)));
    r3.send(&["SUBSCRIBE", "ch"]);
    assert_eq!(
        r3.read(),
        Resp::Push(vec![b("subscribe"), b("ch"), Resp::Int(1)])
    );
    assert_eq!(r3.q("SET k v"), ok());
    assert_eq!(c.q("PUBLISH ch hello"), Resp::Int(1));
    assert_eq!(
        r3.read(),
        Resp::Push(vec![b("message"), b("ch"), b("hello")])
    );
    assert_eq!(r3.q("GET k"), b("v"));
    // Unsubscribing from all when subscribed to nothing still answers.
    let mut n = srv.raw_conn();
    assert_eq!(
        n.q("UNSUBSCRIBE"),
        array(vec![b("unsubscribe"), Resp::Nil, Resp::Int(0)])
    );
    assert_eq!(
        n.q("PUNSUBSCRIBE"),
        array(vec![b("punsubscribe"), Resp::Nil, Resp::Int(0)])
    );
}

/// A subscriber that stops reading passes the `pubsub` class's hard limit and is disconnected;
/// a subscriber that reads gets every message; the publisher goes on.
#[test]
fn slow_subscriber_is_disconnected_at_the_pubsub_limit() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 0 0"
        ]),
        ok()
    );
    let mut slow = srv.raw_conn();
    assert_eq!(slow.q("CLIENT SETNAME slow"), ok());
    subscribe(&mut slow, "SUBSCRIBE", &["big"], 1);
    let mut good = srv.raw_conn();
    subscribe(&mut good, "SUBSCRIBE", &["big"], 1);
    let msg = "m".repeat(100_000);
    let n = 300; // 30 MB: far past the limit and the socket buffers
    let reader = std::thread::spawn(move || {
        for _ in 0..n {
            let (_, m) = payload(good.read());
            assert_eq!(m.len(), 100_000);
        }
        good
    });
    let mut published = 0;
    for _ in 0..n {
        match c.cmd(&["PUBLISH", "big", &msg]) {
            Resp::Int(k) => {
                assert!(k == 1 || k == 2, "{k} receivers");
                published += 1;
            }
            r => panic!("{r}"),
        }
    }
    assert_eq!(published, n);
    let _good = reader.join().unwrap();
    let list = text(c.q("CLIENT LIST"));
    assert!(!list.contains("name=slow"), "{list}");
    assert!(
        srv.output()
            .contains("for overcoming of output buffer limits."),
        "no log line:\n{}",
        srv.output()
    );
    slow.stream.shutdown(std::net::Shutdown::Both).ok();
    let _ = slow.stream.flush();
    // The slow subscriber's subscription went with it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.q("PUBSUB NUMSUB big") != array(vec![b("big"), Resp::Int(1)]) {
        assert!(
            Instant::now() < deadline,
            "the closed subscriber stayed subscribed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// MONITOR sees commands executed for clients on every thread, once each, with Redis's line
/// format (db, address, quoted arguments, passwords redacted); RESET ends it.
#[test]
fn monitor_sees_every_thread() {
    let srv = start();
    let mut m = srv.raw_conn();
    assert_eq!(m.q("MONITOR"), ok());
    let mut clients: Vec<RawConn> = (0..4).map(|_| srv.raw_conn()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "a \"b\""]), ok());
    }
    let _ = clients[0].cmd(&["AUTH", "secret"]);
    let mut lines = Vec::new();
    for _ in 0..5 {
        match m.read() {
            Resp::Simple(l) => lines.push(String::from_utf8(l).unwrap()),
            r => panic!("{r}"),
        }
    }
    for i in 0..4 {
        let want = format!("\"SET\" \"k{i}\" \"a \\\"b\\\"\"");
        assert_eq!(
            lines.iter().filter(|l| l.ends_with(&want)).count(),
            1,
            "{want} in {lines:?}"
        );
    }
    assert!(
        lines.iter().any(|l| l.ends_with("\"AUTH\" \"(redacted)\"")),
        "{lines:?}"
    );
    for l in &lines {
        // `<secs>.<usecs> [<db> <ip:port>] ...`
        let (ts, rest) = l.split_once(' ').unwrap();
        let (secs, usecs) = ts.split_once('.').unwrap();
        assert!(secs.parse::<u64>().is_ok() && usecs.len() == 6, "{l}");
        assert!(rest.starts_with("[0 127.0.0.1:"), "{l}");
    }
    assert_eq!(m.q("RESET"), Resp::Simple(b"RESET".to_vec()));
    assert_eq!(clients[1].q("SET after reset"), ok());
    assert_eq!(m.q("PING"), Resp::Simple(b"PONG".to_vec()));
}
