//! Integration tests for the set commands against the real binary (4 shard threads). Replies
//! are checked at the RESP level with Redis 7.0's exact texts; `DFLY_TEST_TARGET=redis` runs the
//! same assertions against redis-server.

mod common;

use std::collections::BTreeSet;

use common::{bulk, err, ok, RawConn, Resp, Server};
use damselfly::engine::shard_of;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn start() -> Server {
    Server::start(&["--proactor_threads=4"])
}

fn int(n: i64) -> Resp {
    Resp::Int(n)
}

/// The members of an array/set reply, sorted.
fn members(r: &Resp) -> Vec<String> {
    let items = match r {
        Resp::Array(v) | Resp::Set(v) => v,
        other => panic!("not an array: {other:?}"),
    };
    let mut v: Vec<String> = items
        .iter()
        .map(|x| String::from_utf8_lossy(x.as_bytes().expect("bulk")).into_owned())
        .collect();
    v.sort();
    v
}

fn strs(xs: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = xs.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Two keys owned by different shards (of 4) and one on the first key's shard.
fn spread_keys() -> (String, String, String) {
    let a = "sa".to_string();
    let sa = shard_of(a.as_bytes(), 4);
    let b = (0..)
        .map(|i| format!("sb{i}"))
        .find(|k| shard_of(k.as_bytes(), 4) != sa)
        .unwrap();
    let c = (0..)
        .map(|i| format!("sc{i}"))
        .find(|k| {
            shard_of(k.as_bytes(), 4) != sa
                && shard_of(k.as_bytes(), 4) != shard_of(b.as_bytes(), 4)
        })
        .unwrap();
    (a, b, c)
}

#[test]
fn basics_and_encodings() {
    let s = start();
    let mut c = s.raw_conn();
    assert_eq!(c.q("SADD s 3 1 2 2"), int(3));
    assert_eq!(c.q("OBJECT ENCODING s"), bulk("intset"));
    assert_eq!(
        c.q("SMEMBERS s"),
        Resp::Array(vec![bulk("1"), bulk("2"), bulk("3")])
    );
    assert_eq!(c.q("SCARD s"), int(3));
    assert_eq!(c.q("SISMEMBER s 2"), int(1));
    assert_eq!(c.q("SISMEMBER s 02"), int(0));
    assert_eq!(
        c.q("SMISMEMBER s 1 x 3"),
        Resp::Array(vec![int(1), int(0), int(1)])
    );
    assert_eq!(
        c.q("SMISMEMBER nokey a b"),
        Resp::Array(vec![int(0), int(0)])
    );
    assert_eq!(c.q("SADD s a"), int(1));
    assert_eq!(c.q("OBJECT ENCODING s"), bulk("hashtable"));
    assert_eq!(members(&c.q("SMEMBERS s")), strs(&["1", "2", "3", "a"]));
    assert_eq!(c.q("SREM s 1 x a"), int(2));
    assert_eq!(c.q("OBJECT ENCODING s"), bulk("hashtable"));
    assert_eq!(c.q("SREM s 2 3"), int(2));
    assert_eq!(c.q("EXISTS s"), int(0));
    assert_eq!(c.q("SREM s 2"), int(0));
    // Integers beyond 64 bits and non-canonical integers are strings.
    assert_eq!(c.q("SADD big 213244124402402314402033402"), int(1));
    assert_eq!(c.q("OBJECT ENCODING big"), bulk("hashtable"));
    assert_eq!(c.q("SADD z 007"), int(1));
    assert_eq!(c.q("OBJECT ENCODING z"), bulk("hashtable"));
    // The intset limit, and CONFIG SET of it.
    let mut args: Vec<String> = vec!["SADD".into(), "n".into()];
    args.extend((0..512).map(|i| (i * 7 - 1000).to_string()));
    assert_eq!(c.cmd(&args), int(512));
    assert_eq!(c.q("OBJECT ENCODING n"), bulk("intset"));
    assert_eq!(c.q("SADD n 100000"), int(1));
    assert_eq!(c.q("OBJECT ENCODING n"), bulk("hashtable"));
    assert_eq!(c.q("SCARD n"), int(513));
    assert_eq!(c.q("SISMEMBER n -1000"), int(1));
    assert_eq!(c.q("CONFIG SET set-max-intset-entries 2"), ok());
    assert_eq!(c.q("SADD m 1 2"), int(2));
    assert_eq!(c.q("OBJECT ENCODING m"), bulk("intset"));
    assert_eq!(c.q("SADD m 3"), int(1));
    assert_eq!(c.q("OBJECT ENCODING m"), bulk("hashtable"));
    assert_eq!(c.q("CONFIG SET set-max-intset-entries 512"), ok());
    // Width upgrades keep order and membership.
    assert_eq!(
        c.q("SADD w 5 -70000 9223372036854775807 -9223372036854775808"),
        int(4)
    );
    assert_eq!(
        c.q("SMEMBERS w"),
        Resp::Array(vec![
            bulk("-9223372036854775808"),
            bulk("-70000"),
            bulk("5"),
            bulk("9223372036854775807")
        ])
    );
}

#[test]
fn wrong_types_and_errors() {
    let s = start();
    let mut c = s.raw_conn();
    c.q("SET str x");
    c.q("SADD s a b");
    for cmd in [
        "SADD str a",
        "SREM str a",
        "SISMEMBER str a",
        "SMISMEMBER str a",
        "SCARD str",
        "SMEMBERS str",
        "SRANDMEMBER str",
        "SRANDMEMBER str 3",
        "SPOP str",
        "SPOP str 2",
        "SSCAN str 0",
        "SINTER s str",
        "SINTER nokey str",
        "SUNION str s",
        "SDIFF s nokey str",
        "SINTERSTORE d s str",
        "SUNIONSTORE d str",
        "SDIFFSTORE d s str",
        "SINTERCARD 2 nokey str",
        "SMOVE s str a",
        "SMOVE str s a",
    ] {
        assert_eq!(c.q(cmd), err(WRONGTYPE), "{cmd}");
    }
    assert_eq!(c.q("EXISTS d"), int(0));
    assert_eq!(c.q("SMOVE nokey str a"), int(0));
    assert_eq!(
        c.q("SPOP s -1"),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(
        c.q("SPOP s x"),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(c.q("SPOP s 1 2"), err("ERR syntax error"));
    assert_eq!(c.q("SRANDMEMBER s 1 2"), err("ERR syntax error"));
    assert_eq!(
        c.q("SRANDMEMBER s x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q("SRANDMEMBER s -9223372036854775808"),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
    assert_eq!(c.q("SSCAN s x"), err("ERR invalid cursor"));
    assert_eq!(
        c.q("SSCAN s 18446744073709551616"),
        err("ERR invalid cursor")
    );
    assert_eq!(c.q("SSCAN s 0 COUNT 0"), err("ERR syntax error"));
    assert_eq!(
        c.q("SSCAN s 0 COUNT x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q("SSCAN s 0 MATCH"), err("ERR syntax error"));
    assert_eq!(c.q("SSCAN s 0 TYPE string"), err("ERR syntax error"));
    assert_eq!(
        c.q("SINTERCARD 0 s"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        c.q("SINTERCARD x s"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        c.q("SINTERCARD 2 s"),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        c.q("SINTERCARD 1 s LIMIT -1"),
        err("ERR LIMIT can't be negative")
    );
    assert_eq!(
        c.q("SINTERCARD 1 s LIMIT x"),
        err("ERR LIMIT can't be negative")
    );
    assert_eq!(c.q("SINTERCARD 1 s FOO"), err("ERR syntax error"));
    assert_eq!(
        c.q("SADD s"),
        err("ERR wrong number of arguments for 'sadd' command")
    );
    assert_eq!(
        c.q("SMISMEMBER s"),
        err("ERR wrong number of arguments for 'smismember' command")
    );
}

#[test]
fn random_members_and_pops() {
    let s = start();
    let mut c = s.raw_conn();
    assert_eq!(c.q("SRANDMEMBER nokey"), Resp::Nil);
    assert_eq!(c.q("SRANDMEMBER nokey 3"), Resp::Array(vec![]));
    assert_eq!(c.q("SPOP nokey"), Resp::Nil);
    assert_eq!(c.q("SPOP nokey 3"), Resp::Array(vec![]));
    for (key, vals) in [
        ("ints", (0..50).map(|i| i.to_string()).collect::<Vec<_>>()),
        ("strs", (0..50).map(|i| format!("m{i}")).collect::<Vec<_>>()),
    ] {
        let mut a = vec!["SADD".to_string(), key.to_string()];
        a.extend(vals.iter().cloned());
        c.cmd(&a);
        let all: BTreeSet<String> = vals.iter().cloned().collect();
        assert_eq!(c.q(&format!("SRANDMEMBER {key} 0")), Resp::Array(vec![]));
        for count in [1, 5, 20, 40, 49, 50, 100] {
            let r = members(&c.q(&format!("SRANDMEMBER {key} {count}")));
            let uniq: BTreeSet<String> = r.iter().cloned().collect();
            assert_eq!(r.len(), count.min(50), "{key} {count}");
            assert_eq!(uniq.len(), r.len(), "distinct {key} {count}");
            assert!(uniq.is_subset(&all));
        }
        let r = members(&c.q(&format!("SRANDMEMBER {key} -200")));
        assert_eq!(r.len(), 200);
        assert!(r.iter().all(|m| all.contains(m)));
        // SPOP with counts across the strategies, then the rest.
        let mut popped = BTreeSet::new();
        for count in [1, 3, 30] {
            let r = members(&c.q(&format!("SPOP {key} {count}")));
            assert_eq!(r.len(), count);
            for m in r {
                assert!(all.contains(&m) && popped.insert(m));
            }
        }
        assert_eq!(c.q(&format!("SCARD {key}")), int(16));
        let one = c.q(&format!("SPOP {key}"));
        popped.insert(String::from_utf8(one.as_bytes().unwrap().to_vec()).unwrap());
        let rest = members(&c.q(&format!("SPOP {key} 100")));
        assert_eq!(rest.len(), 15);
        popped.extend(rest);
        assert_eq!(popped, all);
        assert_eq!(c.q(&format!("EXISTS {key}")), int(0));
    }
    c.q("SADD one x");
    assert_eq!(c.q("SPOP one 0"), Resp::Array(vec![]));
    assert_eq!(c.q("SPOP one"), bulk("x"));
    assert_eq!(c.q("EXISTS one"), int(0));
}

#[test]
fn resp3_reply_types() {
    let s = start();
    let mut c = s.raw_conn();
    c.q("HELLO 3");
    c.q("SADD s a");
    assert_eq!(c.q("SMEMBERS s"), Resp::Set(vec![bulk("a")]));
    assert_eq!(c.q("SMEMBERS nokey"), Resp::Set(vec![]));
    assert_eq!(c.q("SINTER s"), Resp::Set(vec![bulk("a")]));
    assert_eq!(c.q("SUNION nokey"), Resp::Set(vec![]));
    assert_eq!(c.q("SDIFF s"), Resp::Set(vec![bulk("a")]));
    assert_eq!(c.q("SRANDMEMBER s 2"), Resp::Array(vec![bulk("a")]));
    assert_eq!(c.q("SRANDMEMBER nokey 2"), Resp::Array(vec![]));
    assert_eq!(c.q("SRANDMEMBER nokey"), Resp::Nil);
    assert_eq!(c.q("SPOP nokey 2"), Resp::Set(vec![]));
    assert_eq!(c.q("SPOP s 0"), Resp::Set(vec![]));
    assert_eq!(c.q("SPOP s 5"), Resp::Set(vec![bulk("a")]));
}

#[test]
fn algebra_and_store_across_shards() {
    let s = start();
    let mut c = s.raw_conn();
    let (a, b, d) = spread_keys();
    c.cmd(&["SADD", &a, "1", "2", "3", "4", "x"]);
    c.cmd(&["SADD", &b, "3", "4", "5", "x"]);
    assert_eq!(members(&c.cmd(&["SINTER", &a, &b])), strs(&["3", "4", "x"]));
    assert_eq!(
        members(&c.cmd(&["SUNION", &a, &b, "nokey"])),
        strs(&["1", "2", "3", "4", "5", "x"])
    );
    assert_eq!(members(&c.cmd(&["SDIFF", &a, &b])), strs(&["1", "2"]));
    assert_eq!(members(&c.cmd(&["SDIFF", &a, &a])), strs(&[]));
    assert_eq!(members(&c.cmd(&["SINTER", &a, &b, "nokey"])), strs(&[]));
    assert_eq!(c.cmd(&["SINTERCARD", "2", &a, &b]), int(3));
    assert_eq!(c.cmd(&["SINTERCARD", "2", &a, &b, "LIMIT", "2"]), int(2));
    assert_eq!(c.cmd(&["SINTERCARD", "2", &a, &b, "LIMIT", "0"]), int(3));
    // STORE: the destination on a third shard; its type and TTL are replaced.
    c.cmd(&["SET", &d, "string"]);
    c.cmd(&["EXPIRE", &d, "1000"]);
    assert_eq!(c.cmd(&["SINTERSTORE", &d, &a, &b]), int(3));
    assert_eq!(c.cmd(&["TYPE", &d]), Resp::Simple(b"set".to_vec()));
    assert_eq!(c.cmd(&["TTL", &d]), int(-1));
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", &d]), bulk("hashtable"));
    assert_eq!(c.cmd(&["SDIFFSTORE", &d, &a, &b]), int(2));
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", &d]), bulk("intset"));
    assert_eq!(members(&c.cmd(&["SMEMBERS", &d])), strs(&["1", "2"]));
    assert_eq!(c.cmd(&["SUNIONSTORE", &d, &a, &b]), int(6));
    assert_eq!(c.cmd(&["SCARD", &d]), int(6));
    // An empty result deletes the destination.
    assert_eq!(c.cmd(&["SINTERSTORE", &d, &a, "nokey"]), int(0));
    assert_eq!(c.cmd(&["EXISTS", &d]), int(0));
    c.cmd(&["SADD", &d, "z"]);
    assert_eq!(c.cmd(&["SDIFFSTORE", &d, &a, &a]), int(0));
    assert_eq!(c.cmd(&["EXISTS", &d]), int(0));
    // The destination may be a source.
    assert_eq!(c.cmd(&["SUNIONSTORE", &a, &a, &b]), int(6));
    assert_eq!(c.cmd(&["SCARD", &a]), int(6));
    // Inside MULTI.
    assert_eq!(c.q("MULTI"), ok());
    c.cmd(&["SINTERSTORE", &d, &a, &b]);
    c.cmd(&["SCARD", &d]);
    assert_eq!(c.q("EXEC"), Resp::Array(vec![int(4), int(4)]));
}

#[test]
fn smove_cases() {
    let s = start();
    let mut c = s.raw_conn();
    let (a, b, _) = spread_keys();
    c.cmd(&["SADD", &a, "1", "x"]);
    c.cmd(&["SADD", &b, "2"]);
    assert_eq!(c.cmd(&["SMOVE", &a, &b, "x"]), int(1));
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", &b]), bulk("hashtable"));
    assert_eq!(c.cmd(&["SMOVE", &a, &b, "x"]), int(0));
    assert_eq!(c.cmd(&["SMOVE", &a, &a, "1"]), int(1));
    assert_eq!(c.cmd(&["SMOVE", &a, &a, "9"]), int(0));
    assert_eq!(c.cmd(&["SMOVE", &a, "fresh", "1"]), int(1));
    assert_eq!(c.cmd(&["EXISTS", &a]), int(0));
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "fresh"]), bulk("intset"));
    // Moving a member the destination already has still removes it from the source.
    c.cmd(&["SADD", &a, "2", "3"]);
    assert_eq!(c.cmd(&["SMOVE", &a, &b, "2"]), int(1));
    assert_eq!(members(&c.cmd(&["SMEMBERS", &a])), strs(&["3"]));
    assert_eq!(members(&c.cmd(&["SMEMBERS", &b])), strs(&["2", "x"]));
}

#[test]
fn smove_touches_destination_only_when_added() {
    let s = start();
    let mut c = s.raw_conn();
    let mut c2 = s.raw_conn();
    c.q("SADD src{t} a b");
    c.q("SADD dst{t} a");
    c.q("WATCH dst{t}");
    c.q("MULTI");
    c.q("SADD dst{t} c");
    assert_eq!(c2.q("SMOVE src{t} dst{t} a"), int(1));
    assert_eq!(c.q("EXEC"), Resp::Array(vec![int(1)]));
    assert_eq!(c.q("SCARD dst{t}"), int(2));
}

#[test]
fn sscan_keeps_its_guarantee_while_the_set_grows() {
    let s = start();
    let mut c = s.raw_conn();
    // Small intset: one call, cursor 0.
    c.q("SADD small 1 2 3");
    let r = c.q("SSCAN small 0");
    let Resp::Array(parts) = &r else { panic!() };
    assert_eq!(parts[0], bulk("0"));
    assert_eq!(members(&parts[1]), strs(&["1", "2", "3"]));
    assert_eq!(
        c.q("SSCAN small 0 MATCH 2*"),
        Resp::Array(vec![bulk("0"), Resp::Array(vec![bulk("2")])])
    );
    assert_eq!(
        c.q("SSCAN nokey 0"),
        Resp::Array(vec![bulk("0"), Resp::Array(vec![])])
    );
    let mut a = vec!["SADD".to_string(), "big".to_string()];
    let original: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
    a.extend(original.iter().cloned());
    c.cmd(&a);
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let r = c.cmd(&["SSCAN", "big", &cursor, "COUNT", "20"]);
        let Resp::Array(parts) = r else { panic!() };
        cursor = String::from_utf8(parts[0].as_bytes().unwrap().to_vec()).unwrap();
        for m in members(&parts[1]) {
            seen.insert(m);
        }
        // Grow the set between calls (forces rehashes: 1000 -> ~2000 members).
        let mut a = vec!["SADD".to_string(), "big".to_string()];
        a.extend((0..10).map(|i| format!("new{round}-{i}")));
        c.cmd(&a);
        round += 1;
        if cursor == "0" {
            break;
        }
        assert!(round < 10_000);
    }
    for m in &original {
        assert!(seen.contains(m), "missed {m}");
    }
    let r = c.q("SSCAN big 0 MATCH m1?? COUNT 100000");
    let Resp::Array(parts) = r else { panic!() };
    assert_eq!(parts[0], bulk("0"));
    assert_eq!(members(&parts[1]).len(), 100);
}

/// SMOVE between two shards from several clients keeps the total constant for an atomic
/// observer (SUNION over both keys runs in one transaction).
#[test]
fn smove_across_shards_is_atomic() {
    let s = start();
    let (a, b, _) = spread_keys();
    let mut c = s.raw_conn();
    let mut args = vec!["SADD".to_string(), a.clone()];
    args.extend((0..20).map(|i| format!("e{i}")));
    c.cmd(&args);
    let port_conns: Vec<RawConn> = (0..3).map(|_| s.raw_conn()).collect();
    let handles: Vec<_> = port_conns
        .into_iter()
        .enumerate()
        .map(|(t, mut w)| {
            let (a, b) = (a.clone(), b.clone());
            std::thread::spawn(move || {
                for i in 0..300 {
                    let m = format!("e{}", (i * 7 + t) % 20);
                    if i % 2 == 0 {
                        w.cmd(&["SMOVE", &a, &b, &m]);
                    } else {
                        w.cmd(&["SMOVE", &b, &a, &m]);
                    }
                }
            })
        })
        .collect();
    for _ in 0..300 {
        let n = members(&c.cmd(&["SUNION", &a, &b])).len();
        assert_eq!(n, 20);
        let card = c.cmd(&["SINTERCARD", "2", &a, &b]);
        assert_eq!(card, int(0));
    }
    for h in handles {
        h.join().unwrap();
    }
}
