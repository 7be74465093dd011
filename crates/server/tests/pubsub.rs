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

/// Bad input for the family, against redis-server in the same pipelines: wrong arities,
/// unknown PUBSUB subcommands, binary channel names, and one SUBSCRIBE of 65,537 channels
/// pipelined with PUBLISHes; replies byte for byte, and the server serves others after.
#[test]
fn bad_input_and_huge_variadic_subscribe_match_redis() {
    let redis = common::RedisServer::start();
    let dfly = start();
    let mut cmds: Vec<Vec<Vec<u8>>> = vec![
        vec![b"SUBSCRIBE".to_vec()],
        vec![b"PUBLISH".to_vec(), b"a".to_vec()],
        vec![b"PUBSUB".to_vec()],
        vec![b"PUBSUB".to_vec(), b"NOPE".to_vec()],
        vec![b"PUBSUB".to_vec(), b"NUMPAT".to_vec(), b"x".to_vec()],
        vec![
            b"PUBSUB".to_vec(),
            b"CHANNELS".to_vec(),
            b"a".to_vec(),
            b"b".to_vec(),
        ],
        vec![b"SPUBLISH".to_vec(), b"a".to_vec()],
        vec![b"PUBSUB".to_vec(), b"NUMSUB".to_vec()],
    ];
    let mut big = vec![b"SUBSCRIBE".to_vec()];
    big.extend((0..65_537).map(|i| format!("ch{i}").into_bytes()));
    big.push(b"\x00\xff\r\nbin".to_vec());
    cmds.push(big);
    cmds.push(vec![b"PING".to_vec()]);
    cmds.push(vec![b"GET".to_vec(), b"k".to_vec()]);
    cmds.push(vec![
        b"UNSUBSCRIBE".to_vec(),
        b"ch5".to_vec(),
        b"nope".to_vec(),
    ]);
    // Replies: 8 errors/answers, 65,538 confirmations, PING, the context error, 2 confirmations.
    let n = 8 + 65_538 + 1 + 1 + 2;
    let bytes: Vec<u8> = cmds.iter().flat_map(|c| common::encode(c)).collect();
    let run = |srv: &Server| {
        let mut c = srv.raw_conn();
        c.send_raw(&bytes);
        let replies: Vec<Resp> = (0..n).map(|_| c.read()).collect();
        // Published from another connection: reaches the binary channel.
        let mut p = srv.raw_conn();
        let count = p.cmd(&[&b"PUBLISH"[..], b"\x00\xff\r\nbin", b"m"]);
        let msg = c.read();
        // The subscriber stays connected (its subscriptions end with it).
        (replies, count, msg, c)
    };
    let theirs = run(&redis);
    let ours = run(&dfly);
    assert_eq!(ours.1, theirs.1);
    assert_eq!(ours.2, theirs.2);
    for (i, (a, b)) in ours.0.iter().zip(&theirs.0).enumerate() {
        assert_eq!(a, b, "reply {i}");
    }
    let mut c = dfly.raw_conn();
    assert_eq!(
        c.q("PUBSUB NUMSUB ch65536"),
        array(vec![b("ch65536"), Resp::Int(1)])
    );
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
}

/// Client-side caching across threads (4 shard threads): a RESP3 connection that read keys
/// living on every shard gets one invalidation push per key when other connections (on other
/// threads) write them, none for keys it did not read, none twice; a RESP2 connection
/// redirects to a subscriber of `__redis__:invalidate`; BCAST sends a prefix's keys; FLUSHALL
/// sends the null invalidation.
#[test]
fn tracking_invalidations_cross_threads() {
    let srv = start();
    let mut w = srv.raw_conn();
    let mut t = srv.raw_conn();
    assert!(matches!(t.q("HELLO 3"), Resp::Map(_)));
    assert_eq!(t.q("CLIENT TRACKING on"), ok());
    let keys: Vec<String> = (0..16).map(|i| format!("tk:{i}")).collect();
    for k in &keys {
        assert_eq!(w.cmd(&["SET", k, "1"]), ok());
        assert_eq!(t.cmd(&["GET", k]), b("1"));
    }
    assert_eq!(w.q("SET untracked 1"), ok());
    for k in &keys {
        assert_eq!(w.cmd(&["INCR", k]), Resp::Int(2));
    }
    let mut got: Vec<String> = Vec::new();
    for _ in 0..keys.len() {
        match t.read() {
            Resp::Push(items) => {
                assert_eq!(items[0], b("invalidate"));
                let Resp::Array(ks) = &items[1] else {
                    panic!("{items:?}")
                };
                got.extend(ks.iter().map(|k| text(k.clone())));
            }
            r => panic!("{r}"),
        }
    }
    got.sort();
    let mut want = keys.clone();
    want.sort();
    assert_eq!(got, want);
    // Forgotten after the first invalidation: a second write sends nothing.
    for k in &keys {
        assert_eq!(w.cmd(&["INCR", k]), Resp::Int(3));
    }
    assert_eq!(t.q("PING"), Resp::Simple(b"PONG".to_vec()));

    // RESP2 with a redirection to a subscriber of __redis__:invalidate.
    let mut sub = srv.raw_conn();
    let Resp::Int(sid) = sub.q("CLIENT ID") else {
        panic!()
    };
    subscribe(&mut sub, "SUBSCRIBE", &["__redis__:invalidate"], 1);
    let mut t2 = srv.raw_conn();
    assert_eq!(
        t2.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &sid.to_string()]),
        ok()
    );
    assert_eq!(t2.q("GET tk:3"), b("3"));
    assert_eq!(w.q("DEL tk:3"), Resp::Int(1));
    assert_eq!(
        sub.read(),
        array(vec![
            b("message"),
            b("__redis__:invalidate"),
            array(vec![b("tk:3")])
        ])
    );
    assert_eq!(t2.q("CLIENT GETREDIR"), Resp::Int(sid));

    // BCAST: every key under the prefix, read or not; MSET's keys of one prefix in one message.
    let mut bc = srv.raw_conn();
    assert!(matches!(bc.q("HELLO 3"), Resp::Map(_)));
    assert_eq!(bc.q("CLIENT TRACKING on BCAST PREFIX user:"), ok());
    assert_eq!(w.q("MSET user:{a}1 x user:{a}2 y other:1 z"), ok());
    match bc.read() {
        Resp::Push(items) => {
            let Resp::Array(ks) = &items[1] else {
                panic!("{items:?}")
            };
            let mut ks: Vec<String> = ks.iter().map(|k| text(k.clone())).collect();
            ks.sort();
            assert_eq!(ks, vec!["user:{a}1", "user:{a}2"]);
        }
        r => panic!("{r}"),
    }

    // FLUSHALL: the null invalidation to every tracking connection.
    assert_eq!(t.q("GET tk:5"), b("3"));
    assert_eq!(w.q("FLUSHALL"), ok());
    assert_eq!(t.read(), Resp::Push(vec![b("invalidate"), Resp::Nil]));
    assert_eq!(bc.read(), Resp::Push(vec![b("invalidate"), Resp::Nil]));
    assert_eq!(
        sub.read(),
        array(vec![b("message"), b("__redis__:invalidate"), Resp::Nil])
    );
}
