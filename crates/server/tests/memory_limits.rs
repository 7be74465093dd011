//! maxmemory with the noeviction policy against the real binary (4 shard threads): over the
//! limit, commands that may grow memory get Redis 7.0's `-OOM` error (inside MULTI at queue
//! time, EXEC with EXECABORT), reads and deletes go on, and writes resume once memory is freed.
//! Every expected reply is Redis's own (`DFLY_TEST_TARGET=redis` runs this file against it).

mod common;

use std::time::{Duration, Instant};

use common::{bulk, encode, err, ok, RawConn, Resp, Server};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn start() -> Server {
    Server::start(&["--proactor_threads=4"])
}

fn info_u64(c: &mut RawConn, field: &str) -> u64 {
    let Resp::Bulk(b) = c.q("INFO memory") else {
        panic!("INFO did not answer a bulk string");
    };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO memory"))
        .trim()
        .parse()
        .unwrap()
}

/// The limit holds while one client writes 1 KiB values to keys on every shard: writes stop
/// with OOM a little past the limit (the last write may pass it), what was
/// written stays readable, a pipeline of writes and reads gets OOM for each write and the value
/// for each read, and after deletes free memory, writes are accepted again.
#[test]
fn writes_stop_at_the_limit_and_resume_after_deletes() {
    let srv = start();
    let mut c = srv.raw_conn();
    let base = info_u64(&mut c, "used_memory");
    let limit = base + (4 << 20);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
        ok()
    );
    assert_eq!(info_u64(&mut c, "maxmemory"), limit);
    let value = "v".repeat(1024);
    let mut written = 0;
    loop {
        assert!(
            written < 64 * 1024,
            "64 MiB written past a 4 MiB margin: no limit"
        );
        match c.cmd(&["SET", &format!("key:{written}"), &value]) {
            Resp::Simple(s) if s == b"OK" => written += 1,
            r => {
                assert_eq!(r, err(OOM));
                break;
            }
        }
    }
    assert!(
        written > 1000,
        "only {written} keys fitted in a 4 MiB margin"
    );
    let used = info_u64(&mut c, "used_memory");
    assert!(
        used <= limit + (1 << 20),
        "used_memory {used} went more than 1 MiB past maxmemory {limit}"
    );
    // Memory hovers at the limit (buffers come and go): tighten it so the server is firmly
    // over. Reads, deletes and commands that cannot grow memory go on; every write is refused,
    // pipelined too.
    let limit = limit - (2 << 20);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]),
        ok()
    );
    assert_eq!(c.cmd(&["GET", "key:0"]), bulk(&value));
    assert_eq!(c.cmd(&["EXISTS", "key:1", "key:2"]), Resp::Int(2));
    assert_eq!(c.cmd(&["APPEND", "key:0", "x"]), err(OOM));
    assert_eq!(c.cmd(&["LPUSH", "list", "x"]), err(OOM));
    let mut pipeline = Vec::new();
    for i in 0..500 {
        pipeline.extend(encode(&["SET", &format!("new:{i}"), "x"]));
        pipeline.extend(encode(&["GET", &format!("key:{i}")]));
    }
    c.send_raw(&pipeline);
    for _ in 0..500 {
        assert_eq!(c.read(), err(OOM));
        assert_eq!(c.read(), bulk(&value));
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Resp::Int(written as i64));
    // Free most of it: writes come back.
    for chunk in (0..written).collect::<Vec<_>>().chunks(500) {
        let mut del = vec!["DEL".to_string()];
        del.extend(chunk.iter().map(|i| format!("key:{i}")));
        assert_eq!(c.cmd(&del), Resp::Int(chunk.len() as i64));
    }
    let t0 = Instant::now();
    loop {
        match c.cmd(&["SET", "after", "1"]) {
            r if r == ok() => break,
            r => assert_eq!(r, err(OOM)),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "writes still refused after the dataset was deleted"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(c.cmd(&["GET", "after"]), bulk("1"));
}

/// Inside MULTI every queued command is refused while over the limit (queueing takes memory)
/// and EXEC then aborts; a transaction queued before the limit was crossed aborts at EXEC when
/// it holds a write, and runs when it only reads. Exact replies as Redis 7.0.
#[test]
fn transactions_over_the_limit_abort_as_in_redis() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut admin = srv.raw_conn();
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    assert_eq!(c.cmd(&["SET", "b", "1"]), err(OOM));
    assert_eq!(c.cmd(&["GET", "a"]), bulk("1"));
    assert_eq!(c.cmd(&["DEL", "nope"]), Resp::Int(0));
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));

    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.cmd(&["GET", "a"]), err(OOM));
    assert_eq!(
        c.q("EXEC"),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.cmd(&["GET", "a"]), err(OOM));
    assert_eq!(c.q("DISCARD"), ok());

    // Queued under the limit, executed over it.
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.cmd(&["SET", "a", "2"]), Resp::Simple(b"QUEUED".to_vec()));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    assert_eq!(
        c.q("EXEC"),
        err(&format!(
            "EXECABORT Transaction discarded because of: {OOM}"
        ))
    );
    assert_eq!(c.cmd(&["GET", "a"]), bulk("1"));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.cmd(&["GET", "a"]), Resp::Simple(b"QUEUED".to_vec()));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory", "1"]), ok());
    assert_eq!(c.q("EXEC"), Resp::Array(vec![bulk("1")]));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    assert_eq!(c.cmd(&["SET", "b", "1"]), ok());
}

/// The eviction settings given at start-up are the ones in force and shown by CONFIG GET
/// (tests/eviction.rs checks what they do).
#[test]
fn eviction_settings_from_flags_are_in_force() {
    if common::against_redis() {
        return; // cache_mode is damselfly's.
    }
    let srv = Server::start(&[
        "--maxmemory",
        "50mb",
        "--maxmemory-policy",
        "allkeys-lfu",
        "--maxmemory-samples",
        "7",
        "--cache_mode=true",
    ]);
    let mut c = srv.raw_conn();
    for (name, value) in [
        ("maxmemory", "52428800"),
        ("maxmemory-policy", "allkeys-lfu"),
        ("maxmemory-samples", "7"),
        ("cache_mode", "yes"),
    ] {
        assert_eq!(
            c.cmd(&["CONFIG", "GET", name]),
            Resp::Array(vec![bulk(name), bulk(value)])
        );
    }
    // An LFU policy: OBJECT FREQ answers, OBJECT IDLETIME is refused, as in Redis.
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["OBJECT", "FREQ", "k"]), Resp::Int(5));
    assert!(matches!(
        c.cmd(&["OBJECT", "IDLETIME", "k"]),
        Resp::Error(_)
    ));
}

/// A synchronous FLUSHALL gives the freed memory back to the OS at once, as Redis's does
/// (jemalloc would otherwise keep the pages while no allocation traffic decays them): RSS falls
/// with the data instead of staying at its peak. MEMORY PURGE does the same on demand.
#[test]
fn flushall_returns_memory_to_the_os() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "300000", "key", "512"]), ok());
    let full = srv.rss_kb();
    assert!(full > 150 * 1024, "300k keys of 512 bytes in {full} KiB?");
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    let flushed = srv.rss_kb();
    assert!(
        flushed < full / 3,
        "RSS {full} KiB before FLUSHALL, still {flushed} KiB after"
    );
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "300000", "key", "512"]), ok());
    assert_eq!(c.cmd(&["FLUSHALL", "ASYNC"]), ok());
    // (Redis frees an ASYNC flush on a background thread: purge until it is done.)
    let t0 = Instant::now();
    loop {
        assert_eq!(c.cmd(&["MEMORY", "PURGE"]), ok());
        let purged = srv.rss_kb();
        if purged < full / 3 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "RSS {full} KiB full, still {purged} KiB after FLUSHALL ASYNC and MEMORY PURGE"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
