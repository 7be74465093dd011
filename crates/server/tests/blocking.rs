//! Blocking-command machinery (`engine::waiters`), exercised through the `DEBUG WAIT-KEY` test
//! hook until the list types bring BLPOP: served atomically with the write that made a key ready,
//! exactly once across shards, FIFO among waiters, with timeouts.

mod common;

use std::time::{Duration, Instant};

use common::{bulk, Resp, Server};
use damselfly::engine::shard_of;

fn server() -> Server {
    Server::start(&["--proactor_threads=4"])
}

fn pair(k: &str, v: &str) -> Resp {
    Resp::Array(vec![bulk(k), bulk(v)])
}

#[test]
fn waiter_is_served_by_a_later_write_atomically() {
    if common::against_redis() {
        return; // a Damselfly test hook
    }
    let srv = server();
    let mut waiter = srv.raw_conn();
    waiter.send(&["DEBUG", "WAIT-KEY", "5", "ka", "kb", "kc"]);
    std::thread::sleep(Duration::from_millis(150));
    let mut writer = srv.raw_conn();
    // The SET and the GET arrive in one write: the waiter must have consumed kb before the GET.
    writer.send_raw(
        &[
            common::encode(&["SET", "kb", "hello"]),
            common::encode(&["GET", "kb"]),
        ]
        .concat(),
    );
    assert_eq!(writer.read(), Resp::Simple(b"OK".to_vec()));
    assert_eq!(writer.read(), Resp::Nil);
    assert_eq!(waiter.read(), pair("kb", "hello"));
    assert_eq!(writer.cmd(&["EXISTS", "ka", "kb", "kc"]).as_int(), Some(0));
}

#[test]
fn ready_key_is_served_immediately_and_timeout_gives_nil() {
    if common::against_redis() {
        return;
    }
    let srv = server();
    let mut c = srv.raw_conn();
    c.cmd(&["SET", "k2", "v2"]);
    assert_eq!(
        c.cmd(&["DEBUG", "WAIT-KEY", "1", "k1", "k2"]),
        pair("k2", "v2")
    );
    let t0 = Instant::now();
    let r = c.cmd(&["DEBUG", "WAIT-KEY", "0.2", "nothing"]);
    assert!(matches!(r, Resp::NilArray | Resp::Nil), "{r:?}");
    assert!(t0.elapsed() >= Duration::from_millis(150));
    assert!(c.cmd(&["DEBUG", "WAIT-KEY", "x", "k"]).is_error());
}

#[test]
fn fifo_among_waiters() {
    if common::against_redis() {
        return;
    }
    let srv = server();
    let mut w1 = srv.raw_conn();
    let mut w2 = srv.raw_conn();
    w1.send(&["DEBUG", "WAIT-KEY", "5", "q"]);
    std::thread::sleep(Duration::from_millis(100));
    w2.send(&["DEBUG", "WAIT-KEY", "5", "q"]);
    std::thread::sleep(Duration::from_millis(100));
    let mut p = srv.raw_conn();
    p.cmd(&["SET", "q", "first"]);
    assert_eq!(w1.read(), pair("q", "first"));
    p.cmd(&["SET", "q", "second"]);
    assert_eq!(w2.read(), pair("q", "second"));
}

#[test]
fn served_exactly_once_across_shards() {
    if common::against_redis() {
        return;
    }
    let srv = server();
    // Two keys on different shards.
    let a = "x0".to_string();
    let b = (1..)
        .map(|i| format!("x{i}"))
        .find(|k| shard_of(k.as_bytes(), 4) != shard_of(a.as_bytes(), 4))
        .unwrap();
    let mut w = srv.raw_conn();
    w.send(&["DEBUG", "WAIT-KEY", "5", &a, &b]);
    std::thread::sleep(Duration::from_millis(150));
    let mut p = srv.raw_conn();
    p.cmd(&["SET", &b, "vb"]);
    assert_eq!(w.read(), pair(&b, "vb"));
    // The registration on the other shard is stale: a later write there is not consumed.
    p.cmd(&["SET", &a, "va"]);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(p.cmd(&["GET", &a]), bulk("va"));
}

#[test]
fn many_waiters_many_writers_no_loss_no_duplicates() {
    if common::against_redis() {
        return;
    }
    let srv = server();
    let port = srv.port();
    let n = 40;
    let waiters: Vec<_> = (0..n)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = common::RawConn::new(
                    std::net::TcpStream::connect(("127.0.0.1", port)).unwrap(),
                );
                // Every waiter waits on all 8 keys (rotated): any value can serve any waiter, so
                // n values must serve n waiters exactly once each.
                let keys: Vec<String> = (0..8).map(|j| format!("m{}", (i + j) % 8)).collect();
                let mut args = vec!["DEBUG".to_string(), "WAIT-KEY".into(), "10".into()];
                args.extend(keys);
                c.cmd(&args)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut p = srv.raw_conn();
    for i in 0..n {
        p.cmd(&["SET", &format!("m{}", i % 8), &format!("v{i}")]);
    }
    let mut got: Vec<String> = waiters
        .into_iter()
        .map(|h| match h.join().unwrap() {
            Resp::Array(v) => String::from_utf8(v[1].as_bytes().unwrap().to_vec()).unwrap(),
            other => panic!("waiter got {other:?}"),
        })
        .collect();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), n, "every value served exactly once");
    assert_eq!(p.cmd(&["DBSIZE"]).as_int(), Some(0), "nothing left over");
}

/// On a one-thread server a multi-step command runs without a transaction (nothing to lock
/// against) and a script without entering the shard's queue: what they write must still
/// serve the clients blocked on it (RENAME onto the key a BLPOP waits for; a script's LPUSH).
#[test]
fn one_thread_writes_without_a_transaction_serve_waiters() {
    let srv = Server::start(&["--proactor_threads=1"]);
    let mut waiter = srv.raw_conn();
    let mut writer = srv.raw_conn();
    waiter.send(&["BLPOP", "moved", "5"]);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(writer.cmd(&["RPUSH", "src", "a", "b"]).as_int(), Some(2));
    assert_eq!(
        writer.cmd(&["RENAME", "src", "moved"]),
        Resp::Simple(b"OK".to_vec())
    );
    assert_eq!(waiter.read(), pair("moved", "a"));
    waiter.send(&["BLPOP", "pushed", "5"]);
    std::thread::sleep(Duration::from_millis(150));
    let r = writer.cmd(&[
        "EVAL",
        "redis.call('lpush', KEYS[1], 'x') return redis.call('llen', KEYS[1])",
        "1",
        "pushed",
    ]);
    assert_eq!(r.as_int(), Some(1));
    assert_eq!(waiter.read(), pair("pushed", "x"));
    assert_eq!(writer.cmd(&["EXISTS", "pushed"]).as_int(), Some(0));
}
