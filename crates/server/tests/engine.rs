//! Multi-threaded engine behaviour: `--proactor_threads=4` (more threads than this machine may
//! have cores), many concurrent clients, cross-shard multi-key commands, connection spreading.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{bulk, ok, Resp, Server};

fn server() -> Server {
    Server::start(&["--proactor_threads=4"])
}

fn int(i: i64) -> Resp {
    Resp::Int(i)
}

/// A tiny deterministic PRNG so the workload is reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn concurrent_clients_get_consistent_results() {
    let srv = server();
    let port = srv.port();
    const THREADS: usize = 16;
    const OPS: usize = 2000;
    const KEYS: u64 = 64;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).ok();
                let mut c = common::RawConn::new(s);
                let mut rng = Rng(t as u64 * 7919 + 1);
                // Model of this thread's private keys (keys hash to all shards).
                let mut model: HashMap<String, String> = HashMap::new();
                let key = |i: u64| format!("client{t}:key{i}");
                for op in 0..OPS {
                    let k = key(rng.below(KEYS));
                    match rng.below(6) {
                        0 => {
                            let v = format!("v{op}-{}", rng.next());
                            assert_eq!(c.cmd(&["SET", &k, &v]), ok());
                            model.insert(k, v);
                        }
                        1 => {
                            let want = model.get(&k).map(|v| bulk(v)).unwrap_or(Resp::Nil);
                            assert_eq!(c.cmd(&["GET", &k]), want, "thread {t} op {op} GET {k}");
                        }
                        2 => {
                            let want = i64::from(model.remove(&k).is_some());
                            assert_eq!(c.cmd(&["DEL", &k]), int(want), "thread {t} op {op}");
                        }
                        3 => {
                            let ks: Vec<String> = (0..1 + rng.below(8))
                                .map(|_| key(rng.below(KEYS)))
                                .collect();
                            let mut args = vec!["MGET".to_string()];
                            args.extend(ks.iter().cloned());
                            let want = Resp::Array(
                                ks.iter()
                                    .map(|k| model.get(k).map(|v| bulk(v)).unwrap_or(Resp::Nil))
                                    .collect(),
                            );
                            assert_eq!(c.cmd(&args), want, "thread {t} op {op} {args:?}");
                        }
                        4 => {
                            let mut args = vec!["MSET".to_string()];
                            for _ in 0..1 + rng.below(6) {
                                let k = key(rng.below(KEYS));
                                let v = format!("m{op}-{}", rng.below(1000));
                                args.push(k.clone());
                                args.push(v.clone());
                                model.insert(k, v);
                            }
                            assert_eq!(c.cmd(&args), ok(), "thread {t} op {op}");
                        }
                        _ => {
                            let ks: Vec<String> = (0..1 + rng.below(5))
                                .map(|_| key(rng.below(KEYS)))
                                .collect();
                            let mut args = vec!["EXISTS".to_string()];
                            args.extend(ks.iter().cloned());
                            let want = ks.iter().filter(|k| model.contains_key(*k)).count();
                            assert_eq!(c.cmd(&args), int(want as i64), "thread {t} op {op}");
                        }
                    }
                }
                // Final check of every key.
                for i in 0..KEYS {
                    let k = key(i);
                    let want = model.get(&k).map(|v| bulk(v)).unwrap_or(Resp::Nil);
                    assert_eq!(c.cmd(&["GET", &k]), want, "thread {t} final GET {k}");
                }
                model.len()
            })
        })
        .collect();
    let total: usize = handles
        .into_iter()
        .map(|h| h.join().expect("client thread failed"))
        .sum();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("DBSIZE"), int(total as i64));
}

#[test]
fn cross_shard_multi_key_commands() {
    let srv = server();
    let mut c = srv.raw_conn();
    let keys: Vec<String> = (0..100).map(|i| format!("x{i}")).collect();
    let mut mset = vec!["MSET".to_string()];
    for (i, k) in keys.iter().enumerate() {
        mset.push(k.clone());
        mset.push(format!("val{i}"));
    }
    assert_eq!(c.cmd(&mset), ok());
    assert_eq!(c.q("DBSIZE"), int(100));

    let mut mget = vec!["MGET".to_string()];
    mget.extend(keys.iter().cloned());
    mget.push("missing".into());
    mget.push("x0".into()); // duplicate keeps its position
    let mut want: Vec<Resp> = (0..100).map(|i| bulk(&format!("val{i}"))).collect();
    want.push(Resp::Nil);
    want.push(bulk("val0"));
    assert_eq!(c.cmd(&mget), Resp::Array(want));

    // EXISTS counts duplicates.
    let mut ex = vec!["EXISTS".to_string()];
    ex.extend(keys.iter().cloned());
    ex.push("x1".into());
    ex.push("nope".into());
    assert_eq!(c.cmd(&ex), int(101));

    // MSET with a repeated key: the last value wins.
    assert_eq!(c.q("MSET dup 1 other 2 dup 3"), ok());
    assert_eq!(c.q("GET dup"), bulk("3"));

    // DEL across shards, duplicates counted once.
    let mut del = vec!["DEL".to_string()];
    del.extend(keys[..50].iter().cloned());
    del.push("x0".into());
    del.push("nope".into());
    assert_eq!(c.cmd(&del), int(50));
    assert_eq!(c.q("DBSIZE"), int(52));
    assert_eq!(c.q("EXISTS x0 x49 x50 x99"), int(2));

    // Databases are independent on every shard.
    assert_eq!(c.q("SELECT 3"), ok());
    assert_eq!(c.q("DBSIZE"), int(0));
    assert_eq!(c.q("MSET x50 a x51 b"), ok());
    assert_eq!(
        c.q("MGET x50 x51 x52"),
        Resp::Array(vec![bulk("a"), bulk("b"), Resp::Nil])
    );
    assert_eq!(c.q("SELECT 0"), ok());
    assert_eq!(c.q("GET x50"), bulk("val50"));
}

#[test]
fn debug_populate_and_dbsize() {
    let srv = server();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("DEBUG POPULATE 10000"), ok());
    assert_eq!(c.q("DBSIZE"), int(10000));
    assert_eq!(c.q("GET key:0"), bulk("value:0"));
    assert_eq!(c.q("GET key:9999"), bulk("value:9999"));
    // Existing keys are not overwritten; prefix and size options.
    assert_eq!(c.q("DEBUG POPULATE 10 key 4"), ok());
    assert_eq!(c.q("DBSIZE"), int(10000));
    assert_eq!(c.q("DEBUG POPULATE 5 p 10"), ok());
    assert_eq!(c.q("DBSIZE"), int(10005));
    assert_eq!(c.q("STRLEN p:3"), int(10));
    assert_eq!(c.q("EXISTS key:1 key:2 p:4 p:5"), int(3));
}

#[test]
fn connections_spread_across_threads() {
    if common::against_redis() {
        return; // single-threaded reference: nothing to check
    }
    let srv = server();
    // Connections are handed to the shard threads round-robin; CLIENT LIST reports each
    // connection's owning thread as `tid=`.
    let mut conns: Vec<common::RawConn> = (0..8)
        .map(|_| {
            common::RawConn::new(std::net::TcpStream::connect(("127.0.0.1", srv.port())).unwrap())
        })
        .collect();
    for c in conns.iter_mut() {
        c.send_raw(b"PING\r\n");
        assert_eq!(c.read(), Resp::Simple(b"PONG".to_vec()));
    }
    let list = match conns[0].cmd(&["CLIENT", "LIST"]) {
        Resp::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("CLIENT LIST: {other:?}"),
    };
    let mut per_thread = [0usize; 4];
    for line in list.lines() {
        let tid: usize = line
            .split(' ')
            .find_map(|f| f.strip_prefix("tid="))
            .unwrap_or_else(|| panic!("no tid in {line}"))
            .parse()
            .unwrap();
        per_thread[tid] += 1;
    }
    assert!(
        per_thread.iter().all(|&n| n >= 2),
        "connections not spread over threads: {per_thread:?}\n{list}"
    );
}

#[test]
fn proactor_threads_flag_variants() {
    if common::against_redis() {
        return;
    }
    for threads in ["1", "2", "7"] {
        let srv = Server::start(&["--proactor_threads", threads]);
        let mut c = srv.raw_conn();
        let mut mset = vec!["MSET".to_string()];
        for i in 0..40 {
            mset.push(format!("k{i}"));
            mset.push(i.to_string());
        }
        assert_eq!(c.cmd(&mset), ok(), "threads={threads}");
        assert_eq!(c.q("DBSIZE"), int(40), "threads={threads}");
        assert_eq!(c.q("GET k17"), bulk("17"), "threads={threads}");
        assert_eq!(c.q("DEL k1 k2 k3 nope"), int(3), "threads={threads}");
    }
}
