//! Keyspace notifications, differentially: every script below runs against damselfly and a
//! real redis-server with the same `notify-keyspace-events`, a subscriber pattern-subscribed
//! to `__key*__:*` records what each server publishes, and the two recordings must be equal,
//! event for event and in order. Damselfly runs on one shard thread here, where its order is
//! exactly Redis's; `events_cross_threads` checks that with 4 threads every event still arrives
//! once (see docs/design/pubsub.md for the order across threads).

mod common;

use std::time::{Duration, Instant};

use common::{RawConn, RedisServer, Resp, Server};

/// What the subscriber received: (channel, message) per event.
type Events = Vec<(String, String)>;

fn text(r: &Resp) -> String {
    match r {
        Resp::Bulk(b) | Resp::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other}"),
    }
}

/// Runs `script` (one command per line, split on spaces) on `srv` with `flags` and returns
/// the notifications, up to a marker published at the end.
fn record(srv: &Server, flags: &str, script: &[&str]) -> Events {
    let mut c = srv.raw_conn();
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", flags]);
    let mut sub = srv.raw_conn();
    sub.send(&["PSUBSCRIBE", "__key*__:*"]);
    sub.read();
    sub.send(&["SUBSCRIBE", "end-of-script"]);
    sub.read();
    for line in script {
        let args: Vec<&str> = line.split(' ').collect();
        c.cmd(&args);
    }
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    c.cmd(&["PUBLISH", "end-of-script", "x"]);
    let mut out = Vec::new();
    loop {
        let (Resp::Array(items) | Resp::Push(items)) = sub.read() else {
            panic!("not a message");
        };
        if text(&items[0]) == "message" {
            break;
        }
        out.push((text(&items[2]), text(&items[3])));
    }
    out
}

/// Scripts per command family, with the classes they are run under.
const SCRIPTS: &[(&str, &[&str])] = &[
    (
        "KEA",
        &[
            "SET s v",
            "SET s v2 EX 100",
            "SET s v3 KEEPTTL",
            "SETNX s x",
            "SETNX s2 x",
            "SETEX s3 100 v",
            "PSETEX s4 100000 v",
            "GETSET s v4",
            "GETEX s EX 50",
            "GETEX s PERSIST",
            "GETEX s PERSIST",
            "GETDEL s2",
            "GETDEL nosuch",
            "MSET m1 a m2 b",
            "MSETNX m1 a m3 c",
            "MSETNX m4 a m5 c",
            "APPEND s more",
            "APPEND a1 new",
            "SETRANGE s 2 xx",
            "SETRANGE r1 3 abc",
            "SETRANGE r2 0 ",
            "INCR n",
            "INCRBY n 5",
            "DECR n",
            "DECRBY n 2",
            "INCRBYFLOAT f 1.5",
            "INCR s",
            // (A long expiry: a key set to expire in 1 ms may or may not be reclaimed by the
            // active cycle before the script's next command, on either server: the "expired"
            // event is checked by the "Ex" script with DEBUG SLEEP.)
            "SET e v PX 100000",
            "GETEX s EXAT 1",
        ],
    ),
    (
        "KEAn",
        &["SET a 1", "SET a 2", "INCR b", "APPEND c x", "MSET d 1 a 2"],
    ),
    (
        "KEA",
        &[
            "LPUSH l a b c",
            "RPUSH l d",
            "LPUSHX nol a",
            "RPUSHX l e",
            "LPOP l",
            "RPOP l 2",
            "LSET l 0 z",
            "LINSERT l BEFORE z y",
            "LINSERT l BEFORE nope y",
            "LREM l 0 nope",
            "LREM l 1 y",
            "LTRIM l 0 0",
            "RPUSH l2 1 2 3",
            "LMOVE l2 l LEFT RIGHT",
            "RPOPLPUSH l2 l3",
            "LMOVE l2 l2 LEFT LEFT",
            "LMOVE l2 l4 LEFT RIGHT",
            "LMPOP 2 nol l LEFT COUNT 5",
            "RPUSH b1 x",
            "BLPOP b1 0",
            "LTRIM l3 5 10",
        ],
    ),
    (
        "KEA",
        &[
            "SADD s a b c",
            "SADD s a",
            "SADD s d",
            "SREM s x",
            "SREM s a",
            "SMOVE s s2 b",
            "SMOVE s s2 nope",
            "SPOP s",
            "SADD t 1 2",
            "SPOP t 5",
            "SADD u 1 2 3",
            "SADD v 3 4",
            "SINTERSTORE d1 u v",
            "SUNIONSTORE d2 u v",
            "SDIFFSTORE d3 u v",
            "SINTERSTORE d2 u nokey",
            "SREM u 1 2 3",
        ],
    ),
    (
        "KEA",
        &[
            "ZADD z 1 a 2 b",
            "ZADD z 1 a",
            "ZADD z XX 5 c",
            "ZADD z INCR 2 a",
            "ZINCRBY z 1 b",
            "ZREM z nope",
            "ZREM z a",
            "ZADD z 3 c 4 d 5 e",
            "ZREMRANGEBYRANK z 0 0",
            "ZREMRANGEBYSCORE z 4 4",
            "ZREMRANGEBYLEX z [a [z",
            "ZADD y 1 a 2 b 3 c",
            "ZPOPMIN y",
            "ZPOPMAX y 5",
            "ZADD w 1 a 2 b",
            "ZADD x 2 b 3 c",
            "ZUNIONSTORE o1 2 w x",
            "ZINTERSTORE o2 2 w x",
            "ZDIFFSTORE o3 2 w x",
            "ZRANGESTORE o4 w 0 -1",
            "ZRANGESTORE o4 w 5 6",
            "ZMPOP 1 x MIN COUNT 9",
        ],
    ),
    (
        "KEA",
        &[
            "HSET h a 1 b 2",
            "HMSET h c 3",
            "HSETNX h a 9",
            "HSETNX h z 9",
            "HINCRBY h n 5",
            "HINCRBYFLOAT h f 1.5",
            "HDEL h nope",
            "HDEL h a b c n f z",
        ],
    ),
    (
        "KEA",
        &[
            "SET k v",
            "EXPIRE k 100",
            "PEXPIRE k 100000",
            "EXPIREAT k 1",
            "SET k v",
            "EXPIRE k 100 NX",
            "EXPIRE k 50 NX",
            "PERSIST k",
            "PERSIST k",
            "RENAME k k2",
            "SET k3 v",
            "RENAME k3 k2",
            "RENAMENX k2 k2b",
            "COPY k2b k4",
            "COPY k2b k4",
            "COPY k2b k4 REPLACE",
            "MOVE k4 1",
            "DEL k2b k4 nope",
            "SET u1 v",
            "UNLINK u1",
            "RPUSH src 3 1 2",
            "SORT src STORE dst",
            "SORT nolist STORE dst",
            "SETBIT bits 7 1",
            "SETBIT bits 7 1",
            "SETBIT bits 100 0",
            "BITOP OR bo bits",
            "BITOP OR bo nokey",
            "BITFIELD bf SET u8 0 255",
            "BITFIELD bf GET u8 0",
        ],
    ),
    ("Ex", &["SET t v PX 1", "DEBUG SLEEP 0.01", "GET t"]),
    (
        "KEm",
        &["GET missing", "SET here v", "GET here", "STRLEN gone"],
    ),
];

#[test]
fn events_match_redis() {
    let dfly = Server::start_threads(1, &[]);
    let redis = RedisServer::start();
    let mut failures = Vec::new();
    for (flags, script) in SCRIPTS {
        let ours = record(&dfly, flags, script);
        let theirs = record(&redis, flags, script);
        assert!(!theirs.is_empty(), "script {script:?} publishes nothing");
        if ours != theirs {
            failures.push(format!(
                "flags {flags}, script {script:?}\n  damselfly: {ours:?}\n  redis:     {theirs:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// With 4 threads, events of keys on every shard reach a subscriber on another thread, each
/// exactly once.
#[test]
fn events_cross_threads() {
    let srv = Server::start_threads(4, &[]);
    let mut c = srv.raw_conn();
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "E$"]);
    let mut sub = srv.raw_conn();
    sub.send(&["PSUBSCRIBE", "__keyevent@*"]);
    sub.read();
    let n = 200;
    for i in 0..n {
        c.cmd(&["SET", &format!("key:{i}"), "v"]);
    }
    let mut seen = vec![false; n];
    let deadline = Instant::now() + Duration::from_secs(20);
    for _ in 0..n {
        assert!(Instant::now() < deadline);
        let Resp::Array(items) = sub.read() else {
            panic!("not a message");
        };
        assert_eq!(text(&items[2]), "__keyevent@0__:set");
        let k = text(&items[3]);
        let i: usize = k.strip_prefix("key:").unwrap().parse().unwrap();
        assert!(!seen[i], "{k} twice");
        seen[i] = true;
    }
    assert!(seen.iter().all(|&s| s));
    // Nothing more.
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    sub.send(&["PING"]);
    assert_eq!(
        sub.read(),
        Resp::Array(vec![Resp::Bulk(b"pong".to_vec()), Resp::Bulk(vec![])])
    );
    let _ = RawConn::new;
}
