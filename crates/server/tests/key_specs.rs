//! Key specs as clients see them: COMMAND GETKEYS and the key-spec part of COMMAND INFO, for
//! commands with several key specs (ZUNIONSTORE dst numkeys key...) and keynum ones.
//!
//! The expected begin_search / find_keys maps below are what a real redis-server 7.0.15 prints
//! (`redis-cli -3 COMMAND INFO zunionstore`); `command_info_matches_live_redis` also compares
//! them live. The per-spec access flags (RO/RW/OW, access/update...) are left out: damselfly
//! derives them from the command's flags, where Redis declares them per spec.

mod common;

use common::{RawConn, RedisServer, Resp, Server};

/// A compact, JSON-like rendering of a reply (strings unquoted, maps as `{k: v}`).
fn render(r: &Resp) -> String {
    match r {
        Resp::Bulk(b) | Resp::Simple(b) | Resp::Verbatim(b) => String::from_utf8_lossy(b).into(),
        Resp::Int(i) => i.to_string(),
        Resp::Array(v) | Resp::Set(v) | Resp::Push(v) => {
            format!("[{}]", v.iter().map(render).collect::<Vec<_>>().join(", "))
        }
        Resp::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", render(k), render(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other}"),
    }
}

/// A RESP3 connection (COMMAND INFO's key specs come as maps).
fn resp3(srv: &Server) -> RawConn {
    let mut c = srv.raw_conn();
    let hello = c.cmd(&["HELLO", "3"]);
    assert!(!hello.is_error(), "{hello}");
    c
}

/// COMMAND INFO `name`: its legacy (first, last, step) triple and its key specs, each rendered
/// without its flags (and notes).
fn key_specs(c: &mut RawConn, name: &str) -> ((i64, i64, i64), Vec<String>) {
    let info = c.cmd(&["COMMAND", "INFO", name]);
    let Resp::Array(all) = &info else {
        panic!("COMMAND INFO {name}: {info}")
    };
    let Some(Resp::Array(e)) = all.first() else {
        panic!("COMMAND INFO {name}: {info}")
    };
    let int = |i: usize| e[i].as_int().unwrap_or_else(|| panic!("{name}: {}", e[i]));
    let legacy = (int(3), int(4), int(5));
    let specs = match &e[8] {
        Resp::Array(v) | Resp::Set(v) => v,
        other => panic!("{name}: key specs {other}"),
    };
    let specs = specs
        .iter()
        .map(|s| {
            let Resp::Map(m) = s else {
                panic!("{name}: key spec {s}")
            };
            let kept: Vec<(Resp, Resp)> = m
                .iter()
                .filter(|(k, _)| !matches!(k.as_bytes(), Some(b"flags" | b"notes")))
                .cloned()
                .collect();
            render(&Resp::Map(kept))
        })
        .collect();
    (legacy, specs)
}

fn getkeys(c: &mut RawConn, line: &str) -> Resp {
    let mut args = vec!["COMMAND", "GETKEYS"];
    args.extend(line.split(' '));
    c.cmd(&args)
}

fn keys(names: &[&str]) -> Resp {
    Resp::Array(names.iter().map(|n| common::bulk(n)).collect())
}

// Redis 7.0.15's begin_search / find_keys maps.
const INDEX_1_RANGE_0: &str = "{begin_search: {type: index, spec: {index: 1}}, \
     find_keys: {type: range, spec: {lastkey: 0, keystep: 1, limit: 0}}}";
const INDEX_1_KEYNUM: &str = "{begin_search: {type: index, spec: {index: 1}}, \
     find_keys: {type: keynum, spec: {keynumidx: 0, firstkey: 1, keystep: 1}}}";
const INDEX_2_KEYNUM: &str = "{begin_search: {type: index, spec: {index: 2}}, \
     find_keys: {type: keynum, spec: {keynumidx: 0, firstkey: 1, keystep: 1}}}";
const MSET: &str = "{begin_search: {type: index, spec: {index: 1}}, \
     find_keys: {type: range, spec: {lastkey: -1, keystep: 2, limit: 0}}}";

#[test]
fn getkeys_store_family() {
    let srv = Server::start(&["--proactor_threads=2"]);
    let mut c = srv.raw_conn();
    for cmd in ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"] {
        // The destination first, then the sources (Redis concatenates its key specs' keys).
        assert_eq!(
            getkeys(&mut c, &format!("{cmd} dst 2 k1 k2")),
            keys(&["dst", "k1", "k2"]),
            "{cmd}"
        );
        assert_eq!(
            getkeys(&mut c, &format!("{cmd} dst 1 k1")),
            keys(&["dst", "k1"]),
            "{cmd}"
        );
        // The keys end where numkeys says: WEIGHTS and its values are no keys.
        assert_eq!(
            getkeys(&mut c, &format!("{cmd} dst 3 k1 k2 k3 WEIGHTS 1 2 3")),
            keys(&["dst", "k1", "k2", "k3"]),
            "{cmd}"
        );
        // The destination may also be a source.
        assert_eq!(
            getkeys(&mut c, &format!("{cmd} k1 2 k1 k2 AGGREGATE MAX")),
            keys(&["k1", "k1", "k2"]),
            "{cmd}"
        );
    }
    // The keynum commands without a destination.
    assert_eq!(
        getkeys(&mut c, "ZUNION 2 a b WITHSCORES"),
        keys(&["a", "b"])
    );
    assert_eq!(getkeys(&mut c, "BLMPOP 0 2 a b LEFT"), keys(&["a", "b"]));
}

#[test]
fn store_family_still_works() {
    // The key spec drives the lock plan: the destination and every source on whatever shard
    // they hash to.
    let srv = Server::start(&["--proactor_threads=4"]);
    let mut c = srv.raw_conn();
    assert_eq!(c.q("ZADD {a}1 1 x 2 y"), Resp::Int(2));
    assert_eq!(c.q("ZADD b2 3 y 4 z"), Resp::Int(2));
    assert_eq!(c.q("ZUNIONSTORE dst 2 {a}1 b2 WEIGHTS 1 10"), Resp::Int(3));
    assert_eq!(c.q("ZINTERSTORE dst2 2 {a}1 b2"), Resp::Int(1));
    assert_eq!(c.q("ZDIFFSTORE dst3 2 {a}1 b2"), Resp::Int(1));
    assert_eq!(c.q("ZSCORE dst z"), common::bulk("40"));
    assert_eq!(c.q("ZSCORE dst2 y"), common::bulk("5"));
    assert_eq!(c.q("ZRANGE dst3 0 -1"), keys(&["x"]));
}

#[test]
fn command_info_key_specs_as_redis_7_0() {
    let srv = Server::start(&[]);
    let mut c = resp3(&srv);
    // (command, legacy first last step, key specs)
    type Case = (&'static str, (i64, i64, i64), &'static [&'static str]);
    let cases: &[Case] = &[
        ("get", (1, 1, 1), &[INDEX_1_RANGE_0]),
        ("mset", (1, -1, 2), &[MSET]),
        ("zunion", (0, 0, 0), &[INDEX_1_KEYNUM]),
        ("zunionstore", (1, 1, 1), &[INDEX_1_RANGE_0, INDEX_2_KEYNUM]),
        ("zinterstore", (1, 1, 1), &[INDEX_1_RANGE_0, INDEX_2_KEYNUM]),
        ("zdiffstore", (1, 1, 1), &[INDEX_1_RANGE_0, INDEX_2_KEYNUM]),
        ("lmpop", (0, 0, 0), &[INDEX_1_KEYNUM]),
        ("blmpop", (0, 0, 0), &[INDEX_2_KEYNUM]),
    ];
    for (name, legacy, specs) in cases {
        let (l, s) = key_specs(&mut c, name);
        assert_eq!(l, *legacy, "{name}: first last step");
        assert_eq!(s, *specs, "{name}: key specs");
    }
    // Every key spec carries its flags.
    let info = c.cmd(&["COMMAND", "INFO", "zunionstore"]);
    let Resp::Array(all) = &info else {
        panic!("{info}")
    };
    let Resp::Array(e) = &all[0] else {
        panic!("{info}")
    };
    let (Resp::Array(specs) | Resp::Set(specs)) = &e[8] else {
        panic!("{info}")
    };
    for s in specs {
        let Resp::Map(m) = s else { panic!("{s}") };
        assert_eq!(m[0].0, common::bulk("flags"), "{s}");
        assert!(
            matches!(&m[0].1, Resp::Set(f) | Resp::Array(f) if !f.is_empty()),
            "{s}"
        );
    }
}

/// Damselfly's key specs against a live redis-server 7.0 (flags aside).
#[test]
fn command_info_matches_live_redis() {
    let redis = RedisServer::start();
    let srv = Server::start(&[]);
    let (mut r, mut d) = (resp3(&redis), resp3(&srv));
    for name in [
        "get",
        "mset",
        "del",
        "zunion",
        "zinter",
        "zdiff",
        "zintercard",
        "zunionstore",
        "zinterstore",
        "zdiffstore",
        "zmpop",
        "bzmpop",
        "lmpop",
        "blmpop",
    ] {
        assert_eq!(
            key_specs(&mut d, name),
            key_specs(&mut r, name),
            "{name}: damselfly (left) vs redis-server"
        );
    }
}
