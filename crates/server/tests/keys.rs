//! Integration tests for the generic keyspace commands, against the real binary with 4 shard
//! threads. Replies are checked at the RESP level; a scripted session is also replayed against a
//! real `redis-server` (which must be installed) and the replies compared byte for byte.

mod common;
use common::{RedisServer, Server};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread::sleep;
use std::time::{Duration, Instant};

use damselfly::engine::shard_of;

const THREADS: usize = 4;

// ---------------------------------------------------------------------------------------------
// Harness

/// Damselfly with `--proactor_threads=4` plus `extra`.
fn start(extra: &[&str]) -> Server {
    Server::start_threads(THREADS, extra)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Arr(Option<Vec<R>>),
}

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Conn {
    fn new(srv: &Server) -> Conn {
        let s = srv.connect();
        s.set_read_timeout(Some(Duration::from_secs(30))).ok();
        Conn {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).expect("read");
        assert!(l.ends_with("\r\n"), "bad line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> R {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => R::Simple(rest.to_string()),
            "-" => R::Err(rest.to_string()),
            ":" => R::Int(rest.parse().expect("int")),
            "$" => {
                let n: i64 = rest.parse().expect("len");
                if n < 0 {
                    return R::Bulk(None);
                }
                let mut b = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut b).expect("bulk");
                b.truncate(n as usize);
                R::Bulk(Some(b))
            }
            "*" => {
                let n: i64 = rest.parse().expect("len");
                if n < 0 {
                    return R::Arr(None);
                }
                R::Arr(Some((0..n).map(|_| self.read()).collect()))
            }
            _ => panic!("unexpected reply {l:?}"),
        }
    }

    fn cmd_b(&mut self, args: &[&[u8]]) -> R {
        let mut out = Vec::new();
        encode(&mut out, args);
        self.w.write_all(&out).expect("write");
        self.read()
    }

    fn cmd(&mut self, args: &[&str]) -> R {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.cmd_b(&a)
    }

    /// Sends all commands at once, then reads every reply.
    fn pipeline(&mut self, cmds: &[Vec<String>]) -> Vec<R> {
        let mut out = Vec::new();
        for c in cmds {
            let a: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
            encode(&mut out, &a);
        }
        self.w.write_all(&out).expect("write");
        cmds.iter().map(|_| self.read()).collect()
    }

    fn int(&mut self, args: &[&str]) -> i64 {
        match self.cmd(args) {
            R::Int(i) => i,
            r => panic!("{args:?}: expected int, got {r:?}"),
        }
    }

    fn ok(&mut self, args: &[&str]) {
        assert_eq!(self.cmd(args), R::Simple("OK".into()), "{args:?}");
    }

    fn err(&mut self, args: &[&str]) -> String {
        match self.cmd(args) {
            R::Err(e) => e,
            r => panic!("{args:?}: expected error, got {r:?}"),
        }
    }

    fn get(&mut self, args: &[&str]) -> Option<String> {
        match self.cmd(args) {
            R::Bulk(b) => b.map(|b| String::from_utf8(b).expect("utf8")),
            r => panic!("{args:?}: expected bulk, got {r:?}"),
        }
    }

    fn strings(&mut self, args: &[&str]) -> Vec<String> {
        strings(self.cmd(args))
    }

    /// Full SCAN iteration; returns (calls, every key returned, duplicates included).
    fn scan_all(&mut self, extra: &[&str]) -> (usize, Vec<String>) {
        self.scan_all_paced(extra, None)
    }

    /// `scan_all`, sleeping `pause` every 10 calls so concurrent writers make progress.
    fn scan_all_paced(&mut self, extra: &[&str], pause: Option<Duration>) -> (usize, Vec<String>) {
        let mut cursor = "0".to_string();
        let mut all = Vec::new();
        let mut calls = 0;
        loop {
            let mut args = vec!["SCAN", cursor.as_str()];
            args.extend_from_slice(extra);
            let r = self.cmd(&args);
            calls += 1;
            if let Some(p) = pause {
                if calls % 10 == 0 {
                    sleep(p);
                }
            }
            let R::Arr(Some(parts)) = r else {
                panic!("scan reply {r:?}")
            };
            let R::Bulk(Some(c)) = &parts[0] else {
                panic!("cursor {parts:?}")
            };
            let next = String::from_utf8(c.clone()).expect("cursor");
            all.extend(strings(parts[1].clone()));
            if next == "0" {
                return (calls, all);
            }
            cursor = next;
        }
    }
}

fn strings(r: R) -> Vec<String> {
    match r {
        R::Arr(Some(v)) => v
            .into_iter()
            .map(|x| match x {
                R::Bulk(Some(b)) => String::from_utf8(b).expect("utf8"),
                R::Simple(s) => s,
                o => panic!("not a string: {o:?}"),
            })
            .collect(),
        r => panic!("expected array, got {r:?}"),
    }
}

fn shard(k: &str) -> usize {
    shard_of(k.as_bytes(), THREADS)
}

/// Two keys with the given prefix that live on different shards.
fn cross_pair(prefix: &str) -> (String, String) {
    let a = format!("{prefix}:0");
    for i in 1..1000 {
        let b = format!("{prefix}:{i}");
        if shard(&a) != shard(&b) {
            return (a, b);
        }
    }
    unreachable!("no cross-shard pair")
}

/// Two distinct keys on the same shard.
fn same_pair(prefix: &str) -> (String, String) {
    let a = format!("{{{prefix}}}a");
    let b = format!("{{{prefix}}}b");
    assert_eq!(shard(&a), shard(&b));
    (a, b)
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn del_unlink_exists_touch_across_shards() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
    let shards: HashSet<usize> = keys.iter().map(|k| shard(k)).collect();
    assert_eq!(shards.len(), THREADS, "keys spread over every shard");
    for k in &keys {
        c.ok(&["SET", k, "v"]);
    }
    let mut args = vec!["EXISTS"];
    args.extend(keys.iter().map(|s| s.as_str()));
    args.push("k0");
    args.push("k0");
    args.push("missing");
    assert_eq!(c.int(&args), 66, "EXISTS counts duplicates");
    args[0] = "TOUCH";
    assert_eq!(c.int(&args), 66);
    assert_eq!(c.int(&["DEL", "k0", "k0", "k1", "nope"]), 2);
    assert_eq!(c.int(&["UNLINK", "k2", "k3", "k3", "k4"]), 3);
    assert_eq!(c.int(&["EXISTS", "k0", "k1", "k2", "k3", "k4"]), 0);
    let mut del: Vec<&str> = vec!["DEL"];
    del.extend(keys.iter().map(|s| s.as_str()));
    assert_eq!(c.int(&del), 59);
    assert_eq!(c.int(&["DBSIZE"]), 0);
    assert_eq!(
        c.err(&["DEL"]),
        "ERR wrong number of arguments for 'del' command"
    );
}

#[test]
fn type_and_object() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    c.ok(&["SET", "s", "hello"]);
    c.ok(&["SET", "i", "123"]);
    c.ok(&["SET", "big", "12345"]);
    c.ok(&["SET", "long", &"x".repeat(100)]);
    assert_eq!(c.cmd(&["TYPE", "s"]), R::Simple("string".into()));
    assert_eq!(c.cmd(&["TYPE", "nope"]), R::Simple("none".into()));
    assert_eq!(
        c.get(&["OBJECT", "ENCODING", "s"]).as_deref(),
        Some("embstr")
    );
    assert_eq!(c.get(&["OBJECT", "ENCODING", "i"]).as_deref(), Some("int"));
    assert_eq!(
        c.get(&["OBJECT", "ENCODING", "long"]).as_deref(),
        Some("raw")
    );
    assert_eq!(c.get(&["OBJECT", "ENCODING", "nope"]), None);
    assert_eq!(c.int(&["OBJECT", "REFCOUNT", "i"]), 2147483647);
    assert_eq!(c.int(&["OBJECT", "REFCOUNT", "big"]), 1);
    assert_eq!(c.int(&["OBJECT", "REFCOUNT", "s"]), 1);
    assert_eq!(c.cmd(&["OBJECT", "REFCOUNT", "nope"]), R::Bulk(None));
    assert_eq!(c.int(&["OBJECT", "IDLETIME", "s"]), 0);
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "nope"]), R::Bulk(None));
    assert_eq!(c.cmd(&["OBJECT", "FREQ", "nope"]), R::Bulk(None));
    assert_eq!(
        c.err(&["OBJECT", "FREQ", "s"]),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
    let help = c.strings(&["OBJECT", "HELP"]);
    assert_eq!(
        help[0],
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(
        help.last().map(|s| s.as_str()),
        Some("    Prints this help.")
    );
    assert_eq!(help.len(), 15);
    assert_eq!(
        c.err(&["OBJECT", "FOO", "s"]),
        "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
    );
    assert_eq!(
        c.err(&["OBJECT"]),
        "ERR wrong number of arguments for 'object' command"
    );
    assert_eq!(
        c.err(&["OBJECT", "ENCODING"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    // (OBJECT FREQ / IDLETIME under an LFU policy come with eviction: the policies are refused
    // until then, see tests/memory_limits.rs.)
}

#[test]
fn expire_options_and_errors() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    c.ok(&["SET", "k", "v"]);
    assert_eq!(
        c.err(&["EXPIRE", "k", "10", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        c.err(&["EXPIRE", "k", "10", "nx", "gt"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        c.err(&["EXPIRE", "k", "10", "GT", "LT"]),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(
        c.err(&["EXPIRE", "k", "10", "FOO"]),
        "ERR Unsupported option FOO"
    );
    assert_eq!(
        c.err(&["EXPIRE", "k", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        c.err(&["EXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        c.err(&["EXPIRE", "k", "9223372036854775"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        c.err(&["PEXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'pexpire' command"
    );
    assert_eq!(
        c.err(&["EXPIREAT", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expireat' command"
    );
    assert_eq!(
        c.err(&["EXPIRE", "k", "-9223372036854775807"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(c.int(&["TTL", "k"]), -1, "errors leave the key alone");

    // GT on a key without TTL: no TTL counts as infinite.
    assert_eq!(c.int(&["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(c.int(&["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(c.int(&["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(c.int(&["TTL", "k"]), 100);
    assert_eq!(c.int(&["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(c.int(&["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(c.int(&["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(c.int(&["EXPIRE", "k", "150", "lt", "xx"]), 1);
    assert_eq!(c.int(&["TTL", "k"]), 150);
    assert_eq!(c.int(&["EXPIRE", "k", "100", "NX"]), 0);
    assert_eq!(c.int(&["PERSIST", "k"]), 1);
    assert_eq!(c.int(&["PERSIST", "k"]), 0);
    assert_eq!(c.int(&["PERSIST", "nope"]), 0);
    assert_eq!(c.int(&["EXPIRE", "k", "100", "NX"]), 1);
    assert_eq!(c.int(&["EXPIRE", "k", "100", "NX"]), 0);
    assert_eq!(c.int(&["EXPIRE", "k", "77", "XX"]), 1);
    assert_eq!(c.int(&["TTL", "k"]), 77);
    let pttl = c.int(&["PTTL", "k"]);
    assert!(pttl > 70_000 && pttl <= 77_000, "{pttl}");
    assert_eq!(c.int(&["EXPIRE", "nope", "10"]), 0);
    assert_eq!(c.int(&["TTL", "nope"]), -2);
    assert_eq!(c.int(&["PTTL", "nope"]), -2);
    assert_eq!(c.int(&["EXPIRETIME", "nope"]), -2);
    assert_eq!(c.int(&["PEXPIRETIME", "nope"]), -2);

    // Absolute times.
    assert_eq!(c.int(&["PEXPIREAT", "k", "33177600000000"]), 1);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), 33177600000000);
    assert_eq!(c.int(&["EXPIRETIME", "k"]), 33177600000);
    assert_eq!(c.int(&["EXPIREAT", "k", "33177600001"]), 1);
    assert_eq!(c.int(&["EXPIRETIME", "k"]), 33177600001);
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), 33177600001000);
    c.ok(&["SET", "k", "v"]);
    assert_eq!(c.int(&["EXPIRETIME", "k"]), -1, "SET clears the TTL");
    assert_eq!(c.int(&["PEXPIRETIME", "k"]), -1);

    // A time in the past deletes the key and reports 1.
    assert_eq!(c.int(&["EXPIRE", "k", "-1"]), 1);
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    c.ok(&["SET", "k", "v"]);
    assert_eq!(c.int(&["PEXPIRE", "k", "0"]), 1);
    assert_eq!(c.int(&["EXISTS", "k"]), 0);
    c.ok(&["SET", "k", "v"]);
    assert_eq!(c.int(&["EXPIREAT", "k", "1"]), 1);
    assert_eq!(c.cmd(&["GET", "k"]), R::Bulk(None));
    c.ok(&["SET", "k", "v"]);
    assert_eq!(c.int(&["PEXPIREAT", "k", "-5"]), 1);
    assert_eq!(c.int(&["DBSIZE"]), 0);
    // ...unless a condition refuses it first.
    c.ok(&["SET", "k", "v"]);
    assert_eq!(c.int(&["EXPIRE", "k", "-1", "XX"]), 0);
    assert_eq!(c.int(&["EXISTS", "k"]), 1);
    assert_eq!(
        c.err(&["EXPIRE", "k"]),
        "ERR wrong number of arguments for 'expire' command"
    );
}

#[test]
fn keys_expire_after_their_ttl() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    let keys: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    for k in &keys {
        c.ok(&["SET", k, "v"]);
        assert_eq!(c.int(&["PEXPIRE", k, "150"]), 1);
    }
    c.ok(&["SET", "stay", "v"]);
    c.ok(&["SET", "sec", "v"]);
    assert_eq!(c.int(&["EXPIRE", "sec", "1"]), 1);
    let t = c.int(&["TTL", "sec"]);
    assert!(t == 1 || t == 0, "{t}");
    sleep(Duration::from_millis(600));
    for k in &keys {
        assert_eq!(c.cmd(&["GET", k]), R::Bulk(None), "{k}");
        assert_eq!(c.int(&["TTL", k]), -2);
        assert_eq!(c.cmd(&["TYPE", k]), R::Simple("none".into()));
    }
    let mut ex = vec!["EXISTS"];
    ex.extend(keys.iter().map(|s| s.as_str()));
    assert_eq!(c.int(&ex), 0);
    assert_eq!(c.strings(&["KEYS", "t*"]), Vec::<String>::new());
    assert_eq!(c.int(&["EXISTS", "stay"]), 1);
    sleep(Duration::from_millis(1000));
    assert_eq!(c.int(&["EXISTS", "sec"]), 0);

    // Expired keys are invisible to RENAME / COPY / MOVE / PERSIST / EXPIRE too.
    c.ok(&["SET", "e", "v"]);
    assert_eq!(c.int(&["PEXPIRE", "e", "100"]), 1);
    sleep(Duration::from_millis(300));
    assert_eq!(c.err(&["RENAME", "e", "x"]), "ERR no such key");
    assert_eq!(c.int(&["COPY", "e", "x"]), 0);
    assert_eq!(c.int(&["MOVE", "e", "1"]), 0);
    assert_eq!(c.int(&["PERSIST", "e"]), 0);
    assert_eq!(c.int(&["EXPIRE", "e", "100"]), 0);
    // Active expiry eventually removes keys nobody touches.
    for i in 0..50 {
        c.ok(&["SET", &format!("a{i}"), "v"]);
        c.int(&["PEXPIRE", &format!("a{i}"), "100"]);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.int(&["DBSIZE"]) != 1 {
        assert!(Instant::now() < deadline, "active expiry did not run");
        sleep(Duration::from_millis(100));
    }
}

#[test]
fn rename_and_renamenx() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    for (a, b) in [same_pair("r"), cross_pair("r")] {
        c.ok(&["SET", &a, "va"]);
        assert_eq!(c.int(&["PEXPIRE", &a, "100000"]), 1);
        c.ok(&["SET", &b, "vb"]);
        // RENAME keeps the TTL and overwrites the destination (and its lack of TTL).
        c.ok(&["RENAME", &a, &b]);
        assert_eq!(c.int(&["EXISTS", &a]), 0);
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("va"));
        let pttl = c.int(&["PTTL", &b]);
        assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");
        // A destination's TTL is replaced by the source's lack of one.
        c.ok(&["SET", &a, "plain"]);
        c.ok(&["RENAME", &a, &b]);
        assert_eq!(c.int(&["TTL", &b]), -1);
        assert_eq!(c.err(&["RENAME", &a, &b]), "ERR no such key");
        assert_eq!(c.err(&["RENAMENX", &a, &b]), "ERR no such key");
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("plain"), "untouched");
        // Same key.
        c.ok(&["RENAME", &b, &b]);
        assert_eq!(c.int(&["RENAMENX", &b, &b]), 0);
        assert_eq!(c.err(&["RENAME", &a, &a]), "ERR no such key");
        // RENAMENX.
        c.ok(&["SET", &a, "new"]);
        assert_eq!(c.int(&["RENAMENX", &a, &b]), 0);
        assert_eq!(c.get(&["GET", &a]).as_deref(), Some("new"));
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("plain"));
        assert_eq!(c.int(&["DEL", &b]), 1);
        assert_eq!(c.int(&["EXPIRE", &a, "500"]), 1);
        assert_eq!(c.int(&["RENAMENX", &a, &b]), 1);
        assert_eq!(c.int(&["EXISTS", &a]), 0);
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("new"));
        assert_eq!(c.int(&["TTL", &b]), 500);
        assert_eq!(c.int(&["DEL", &b]), 1);
        assert_eq!(c.int(&["DBSIZE"]), 0);
    }
    // Many renames between shards keep the keyspace consistent.
    for i in 0..200 {
        c.ok(&["SET", &format!("src{i}"), &i.to_string()]);
    }
    for i in 0..200 {
        c.ok(&["RENAME", &format!("src{i}"), &format!("dst{i}")]);
    }
    assert_eq!(c.int(&["DBSIZE"]), 200);
    for i in 0..200 {
        assert_eq!(c.get(&["GET", &format!("dst{i}")]), Some(i.to_string()));
    }
}

#[test]
fn copy_and_move() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    for (a, b) in [same_pair("c"), cross_pair("c")] {
        c.ok(&["SET", &a, "va"]);
        assert_eq!(c.int(&["EXPIRE", &a, "1000"]), 1);
        assert_eq!(c.int(&["COPY", &a, &b]), 1);
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("va"));
        assert_eq!(c.get(&["GET", &a]).as_deref(), Some("va"));
        assert_eq!(c.int(&["TTL", &b]), 1000);
        c.ok(&["SET", &a, "va2"]);
        assert_eq!(c.int(&["COPY", &a, &b]), 0, "destination exists");
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("va"));
        assert_eq!(c.int(&["COPY", &a, &b, "REPLACE"]), 1);
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("va2"));
        assert_eq!(c.int(&["TTL", &b]), -1, "REPLACE takes the source's TTL");
        assert_eq!(c.int(&["COPY", "missing", &b, "REPLACE"]), 0);
        // Copy into another db.
        assert_eq!(c.int(&["COPY", &a, &b, "DB", "3"]), 1);
        assert_eq!(c.int(&["COPY", &a, &a, "DB", "3"]), 1);
        c.ok(&["SELECT", "3"]);
        assert_eq!(c.get(&["GET", &b]).as_deref(), Some("va2"));
        assert_eq!(c.get(&["GET", &a]).as_deref(), Some("va2"));
        c.ok(&["FLUSHDB"]);
        c.ok(&["SELECT", "0"]);
        c.ok(&["FLUSHDB"]);
    }
    assert_eq!(
        c.err(&["COPY", "a", "a"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        c.err(&["COPY", "a", "a", "DB", "0"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        c.err(&["COPY", "a", "b", "DB", "99"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        c.err(&["COPY", "a", "b", "DB", "-1"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        c.err(&["COPY", "a", "b", "DB", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(c.err(&["COPY", "a", "b", "DB"]), "ERR syntax error");
    assert_eq!(
        c.err(&["COPY", "a", "b", "REPLACE", "foo"]),
        "ERR syntax error"
    );
    assert_eq!(
        c.int(&["COPY", "a", "b", "DB", "1", "DB", "2", "REPLACE"]),
        0
    );

    // MOVE.
    c.ok(&["SET", "m", "v"]);
    assert_eq!(c.int(&["PEXPIRE", "m", "100000"]), 1);
    assert_eq!(
        c.err(&["MOVE", "m", "0"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(c.err(&["MOVE", "m", "16"]), "ERR DB index is out of range");
    assert_eq!(
        c.err(&["MOVE", "m", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        c.err(&["MOVE", "m", "99999999999"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(c.int(&["MOVE", "m", "1"]), 1);
    assert_eq!(c.int(&["EXISTS", "m"]), 0);
    assert_eq!(c.int(&["MOVE", "m", "1"]), 0);
    c.ok(&["SET", "m", "other"]);
    assert_eq!(c.int(&["MOVE", "m", "1"]), 0, "exists in the target db");
    c.ok(&["SELECT", "1"]);
    assert_eq!(c.get(&["GET", "m"]).as_deref(), Some("v"));
    let pttl = c.int(&["PTTL", "m"]);
    assert!(pttl > 90_000, "MOVE keeps the TTL: {pttl}");
    c.ok(&["SELECT", "0"]);
    assert_eq!(c.get(&["GET", "m"]).as_deref(), Some("other"));
}

#[test]
fn keys_with_patterns_and_output_limit() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    let cmds: Vec<Vec<String>> = (0..300)
        .map(|i| vec!["SET".into(), format!("user:{i}"), "v".into()])
        .chain((0..50).map(|i| vec!["SET".into(), format!("other{i}"), "v".into()]))
        .collect();
    c.pipeline(&cmds);
    let mut all = c.strings(&["KEYS", "*"]);
    all.sort();
    assert_eq!(all.len(), 350);
    assert_eq!(c.strings(&["KEYS", "user:*"]).len(), 300);
    let mut got = c.strings(&["KEYS", "user:1?"]);
    got.sort();
    let want: Vec<String> = (10..20).map(|i| format!("user:{i}")).collect();
    assert_eq!(got, want);
    assert_eq!(c.strings(&["KEYS", "other[0-2]"]).len(), 3);
    assert_eq!(c.strings(&["KEYS", "nothing*"]), Vec::<String>::new());
    assert_eq!(
        c.strings(&["KEYS", "user:299"]),
        vec!["user:299".to_string()]
    );
    drop(c);
    drop(s);

    let s = start(&["--keys_output_limit=25"]);
    let mut c = Conn::new(&s);
    c.pipeline(&cmds);
    assert_eq!(c.strings(&["KEYS", "*"]).len(), 25);
    assert_eq!(c.strings(&["KEYS", "other[0-2]"]).len(), 3);
}

fn load_keys(c: &mut Conn, n: usize) -> HashSet<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("key:{i}")).collect();
    for chunk in keys.chunks(1000) {
        let cmds: Vec<Vec<String>> = chunk
            .iter()
            .map(|k| vec!["SET".into(), k.clone(), "v".into()])
            .collect();
        for r in c.pipeline(&cmds) {
            assert_eq!(r, R::Simple("OK".into()));
        }
    }
    keys.into_iter().collect()
}

#[test]
fn scan_returns_every_key() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    let keys = load_keys(&mut c, 10_000);
    let (calls, got) = c.scan_all(&["COUNT", "10"]);
    let set: HashSet<String> = got.iter().cloned().collect();
    assert_eq!(set, keys);
    assert!(
        calls > 100,
        "COUNT bounds the work per call ({calls} calls)"
    );
    assert!(got.len() < keys.len() * 2, "few duplicates");

    // Bigger COUNT, MATCH.
    let (_, got) = c.scan_all(&["COUNT", "1000"]);
    assert_eq!(got.iter().cloned().collect::<HashSet<_>>(), keys);
    let (_, got) = c.scan_all(&["MATCH", "key:1*", "COUNT", "100"]);
    let want: HashSet<String> = keys
        .iter()
        .filter(|k| k.starts_with("key:1"))
        .cloned()
        .collect();
    assert_eq!(got.into_iter().collect::<HashSet<_>>(), want);
    let (_, got) = c.scan_all(&["MATCH", "*"]);
    assert_eq!(got.into_iter().collect::<HashSet<_>>(), keys);

    // TYPE.
    let (_, got) = c.scan_all(&["TYPE", "string", "COUNT", "500"]);
    assert_eq!(got.into_iter().collect::<HashSet<_>>(), keys);
    let (_, got) = c.scan_all(&["TYPE", "STRING", "COUNT", "500", "MATCH", "key:99*"]);
    assert_eq!(got.len(), 111);
    let (_, got) = c.scan_all(&["TYPE", "hash", "COUNT", "500"]);
    assert!(got.is_empty());

    // Expired keys are skipped.
    for i in 0..100 {
        c.int(&["PEXPIRE", &format!("key:{i}"), "1"]);
    }
    sleep(Duration::from_millis(50));
    let (_, got) = c.scan_all(&["COUNT", "100"]);
    let set: HashSet<String> = got.into_iter().collect();
    assert_eq!(set.len(), 9_900);
    assert!(!set.contains("key:5"));

    // Errors and edge cases.
    assert_eq!(c.err(&["SCAN", "x"]), "ERR invalid cursor");
    assert_eq!(c.err(&["SCAN", " 1"]), "ERR invalid cursor");
    assert_eq!(c.err(&["SCAN", "x", "COUNT", "0"]), "ERR invalid cursor");
    assert_eq!(c.err(&["SCAN", "0", "COUNT", "0"]), "ERR syntax error");
    assert_eq!(c.err(&["SCAN", "0", "COUNT", "-1"]), "ERR syntax error");
    assert_eq!(
        c.err(&["SCAN", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(c.err(&["SCAN", "0", "MATCH"]), "ERR syntax error");
    assert_eq!(c.err(&["SCAN", "0", "TYPE"]), "ERR syntax error");
    assert_eq!(c.err(&["SCAN", "0", "FOO", "bar"]), "ERR syntax error");
    // A cursor naming a shard past the last one ends the iteration.
    let r = c.cmd(&["SCAN", "18446744073709551615"]);
    assert_eq!(
        r,
        R::Arr(Some(vec![
            R::Bulk(Some(b"0".to_vec())),
            R::Arr(Some(vec![]))
        ]))
    );
    let r = c.cmd(&["SCAN", "-1"]);
    assert_eq!(
        r,
        R::Arr(Some(vec![
            R::Bulk(Some(b"0".to_vec())),
            R::Arr(Some(vec![]))
        ]))
    );
    c.ok(&["FLUSHALL"]);
    let r = c.cmd(&["SCAN", "0"]);
    assert_eq!(
        r,
        R::Arr(Some(vec![
            R::Bulk(Some(b"0".to_vec())),
            R::Arr(Some(vec![]))
        ]))
    );
}

#[test]
fn scan_cursor_encodes_the_shard() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    load_keys(&mut c, 2000);
    let mut cursor = "0".to_string();
    let mut last_shard = 0u64;
    loop {
        let r = c.cmd(&["SCAN", &cursor, "COUNT", "50"]);
        let R::Arr(Some(parts)) = r else { panic!() };
        let R::Bulk(Some(cur)) = &parts[0] else {
            panic!()
        };
        let cur: u64 = std::str::from_utf8(cur).unwrap().parse().unwrap();
        if cur == 0 {
            break;
        }
        let sh = cur >> 56;
        assert!(sh < THREADS as u64);
        assert!(sh >= last_shard, "shards are visited in order");
        last_shard = sh;
        cursor = cur.to_string();
    }
    assert_eq!(last_shard, THREADS as u64 - 1);
}

#[test]
fn scan_under_concurrent_writes_returns_all_original_keys() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    let keys = load_keys(&mut c, 10_000);
    let mut w = Conn::new(&s);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let writer = std::thread::spawn(move || {
        let mut i = 0usize;
        while !st.load(std::sync::atomic::Ordering::Relaxed) && i < 200_000 {
            let cmds: Vec<Vec<String>> = (0..500)
                .map(|j| vec!["SET".into(), format!("new:{}", i + j), "v".into()])
                .collect();
            w.pipeline(&cmds);
            i += 500;
        }
        i
    });
    let (_, got) = c.scan_all_paced(&["COUNT", "10"], Some(Duration::from_millis(3)));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let added = writer.join().expect("writer");
    assert!(added > 0);
    eprintln!("concurrently added {added} keys");
    let set: HashSet<String> = got.into_iter().collect();
    let missing: Vec<&String> = keys.iter().filter(|k| !set.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "{} keys missed, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}

#[test]
fn randomkey() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    assert_eq!(c.cmd(&["RANDOMKEY"]), R::Bulk(None));
    c.ok(&["SET", "only", "v"]);
    assert_eq!(c.get(&["RANDOMKEY"]).as_deref(), Some("only"));
    let keys = load_keys(&mut c, 200);
    let mut seen = HashSet::new();
    let mut shards = HashSet::new();
    for _ in 0..200 {
        let k = c.get(&["RANDOMKEY"]).expect("a key");
        assert!(keys.contains(&k) || k == "only", "{k}");
        shards.insert(shard(&k));
        seen.insert(k);
    }
    assert!(seen.len() > 50, "random enough: {}", seen.len());
    assert_eq!(shards.len(), THREADS);
    // Only expired keys left: RANDOMKEY finds nothing.
    c.ok(&["FLUSHALL"]);
    c.ok(&["SET", "gone", "v"]);
    assert_eq!(c.int(&["PEXPIRE", "gone", "1"]), 1);
    sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["RANDOMKEY"]), R::Bulk(None));
}

#[test]
fn dbsize_flush_and_swapdb() {
    let s = start(&[]);
    let mut c = Conn::new(&s);
    load_keys(&mut c, 100);
    c.ok(&["SELECT", "1"]);
    for i in 0..10 {
        c.ok(&["SET", &format!("one{i}"), "1"]);
    }
    assert_eq!(c.int(&["DBSIZE"]), 10);
    c.ok(&["SWAPDB", "0", "1"]);
    assert_eq!(c.int(&["DBSIZE"]), 100);
    assert_eq!(c.get(&["GET", "key:7"]).as_deref(), Some("v"));
    c.ok(&["SELECT", "0"]);
    assert_eq!(c.int(&["DBSIZE"]), 10);
    assert_eq!(c.get(&["GET", "one3"]).as_deref(), Some("1"));
    c.ok(&["SWAPDB", "1", "0"]);
    assert_eq!(c.int(&["DBSIZE"]), 100);
    c.ok(&["SWAPDB", "2", "2"]);
    assert_eq!(c.err(&["SWAPDB", "x", "1"]), "ERR invalid first DB index");
    assert_eq!(c.err(&["SWAPDB", "0", "x"]), "ERR invalid second DB index");
    assert_eq!(
        c.err(&["SWAPDB", "0", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        c.err(&["SWAPDB", "-1", "0"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        c.err(&["SWAPDB", "99999999999", "0"]),
        "ERR invalid first DB index"
    );
    assert_eq!(c.err(&["FLUSHDB", "FOO"]), "ERR syntax error");
    assert_eq!(c.err(&["FLUSHDB", "ASYNC", "SYNC"]), "ERR syntax error");
    assert_eq!(c.err(&["FLUSHALL", "FOO"]), "ERR syntax error");
    c.ok(&["FLUSHDB", "async"]);
    assert_eq!(c.int(&["DBSIZE"]), 0);
    c.ok(&["SELECT", "1"]);
    assert_eq!(
        c.int(&["DBSIZE"]),
        10,
        "FLUSHDB only clears the selected db"
    );
    c.ok(&["SET", "x", "1"]);
    c.ok(&["SELECT", "5"]);
    c.ok(&["SET", "y", "1"]);
    c.ok(&["FLUSHALL", "SYNC"]);
    assert_eq!(c.int(&["DBSIZE"]), 0);
    c.ok(&["SELECT", "1"]);
    assert_eq!(c.int(&["DBSIZE"]), 0);
    c.ok(&["FLUSHALL"]);
    c.ok(&["FLUSHDB"]);
}

/// Replays the same deterministic session on damselfly and on redis-server and compares every
/// reply. Needs redis-server installed.
#[test]
fn same_replies_as_redis() {
    let r = RedisServer::start();
    let d = start(&[]);
    let mut rc = Conn::new(&r);
    let mut dc = Conn::new(&d);
    let (x, y) = cross_pair("cmp");
    let (p, q) = same_pair("cmp");
    let script: Vec<Vec<String>> = [
        "SET a 1",
        "SET b hello",
        "SET c 12345678901",
        "EXISTS a a b nope",
        "TOUCH a b nope",
        "TYPE a",
        "TYPE nope",
        "OBJECT ENCODING a",
        "OBJECT ENCODING b",
        "OBJECT ENCODING c",
        "OBJECT ENCODING nope",
        "OBJECT REFCOUNT a",
        "OBJECT REFCOUNT b",
        "OBJECT FREQ b",
        "OBJECT FREQ nope",
        "OBJECT HELP",
        "OBJECT NOPE",
        "OBJECT",
        "EXPIRE a 100",
        "TTL a",
        "EXPIRE a 100 NX",
        "EXPIRE a 200 GT",
        "TTL a",
        "EXPIRE a 50 GT",
        "EXPIRE a 300 LT",
        "EXPIRE a 10 LT XX",
        "TTL a",
        "EXPIRE a 1 NX XX",
        "EXPIRE a 1 GT LT",
        "EXPIRE a 1 NX LT",
        "EXPIRE a 1 BAD",
        "EXPIRE a 1 BAD NX XX",
        "EXPIRE a abc",
        "EXPIRE a 9223372036854775807",
        "PEXPIRE a 9223372036854775807",
        "EXPIREAT a 9223372036854775807",
        "PEXPIREAT a 9223372036854775807",
        "PEXPIREAT a 9223372036854775807",
        "EXPIRETIME a",
        "PEXPIRETIME a",
        "EXPIREAT a 9223372036854775",
        "EXPIRETIME a",
        "PEXPIREAT a 33177600000000",
        "PEXPIRETIME a",
        "EXPIRETIME a",
        "PERSIST a",
        "PERSIST a",
        "TTL a",
        "PTTL a",
        "TTL nope",
        "PTTL nope",
        "EXPIRETIME nope",
        "EXPIRE b -1",
        "EXISTS b",
        "EXPIRE nope 10",
        "RENAME nope x",
        "RENAMENX nope x",
        "RENAME a a",
        "RENAMENX a a",
        "RENAME nope nope",
        "COPY a a",
        "COPY a x DB 99",
        "COPY a x DB foo",
        "COPY a x DB",
        "COPY a x REPLACE junk",
        "COPY nope x",
        "MOVE a 0",
        "MOVE a 99",
        "MOVE a foo",
        "MOVE nope 1",
        "SWAPDB foo 1",
        "SWAPDB 0 foo",
        "SWAPDB 0 99",
        "SWAPDB -1 0",
        "SWAPDB 3 3",
        "FLUSHDB bad",
        "FLUSHALL bad",
        "SCAN bad",
        "SCAN 0 COUNT 0",
        "SCAN 0 COUNT x",
        "SCAN 0 MATCH",
        "SCAN 0 junk",
        "KEYS nomatch*",
        "DEL a a c nope",
        "DBSIZE",
        "RANDOMKEY",
        "DEL",
        "TTL",
        "RENAME a",
    ]
    .iter()
    .map(|l| l.split(' ').map(String::from).collect())
    .chain(
        [
            format!("SET {x} 1"),
            format!("RENAME {x} {y}"),
            format!("GET {y}"),
            format!("RENAMENX {y} {x}"),
            format!("SET {y} 2"),
            format!("RENAMENX {y} {x}"),
            format!("COPY {x} {y}"),
            format!("COPY {x} {y} REPLACE"),
            format!("GET {y}"),
            format!("SET {p} 1"),
            format!("COPY {p} {q}"),
            format!("RENAME {p} {q}"),
            format!("RENAMENX {q} {p}"),
            format!("MOVE {p} 2"),
            format!("EXISTS {p} {q} {x} {y}"),
            "FLUSHALL".to_string(),
            "DBSIZE".to_string(),
        ]
        .iter()
        .map(|l| l.split(' ').map(String::from).collect()),
    )
    .collect();
    for cmd in &script {
        let a: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
        let want = rc.cmd(&a);
        let got = dc.cmd(&a);
        assert_eq!(got, want, "reply to {cmd:?}");
    }
}
