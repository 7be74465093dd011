//! Sorted set commands end to end: exact replies (RESP2 and RESP3), error texts, encodings and
//! their conversion, multi-key commands across shards, blocking pops, ZSCAN under modification.
//! Every expectation is Redis 7.0's: `DFLY_TEST_TARGET=redis cargo test --test zsets` checks
//! them against a real redis-server.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{RawConn, Resp, Server};
use damselfly::engine::shard_of;

fn server() -> Server {
    Server::start(&["--proactor_threads=4"])
}

/// Runs a space-separated command and renders the reply (`common::Resp`'s Display).
fn q(c: &mut RawConn, line: &str) -> String {
    c.q(line).to_string()
}

fn cmd(c: &mut RawConn, args: &[&str]) -> String {
    c.cmd(args).to_string()
}

/// Two keys owned by different shards (of 4), plus a third on the first one's shard.
fn spread_keys() -> (String, String, String) {
    let mut a = None;
    let mut b = None;
    let mut c = None;
    for i in 0..1000 {
        let k = format!("key:{i}");
        let s = shard_of(k.as_bytes(), 4);
        match (&a, &b, &c) {
            (None, _, _) => a = Some((k, s)),
            (Some((_, sa)), None, _) if s != *sa => b = Some((k, s)),
            (Some((ka, sa)), _, None) if s == *sa && k != *ka => c = Some((k, s)),
            _ => {}
        }
        if a.is_some() && b.is_some() && c.is_some() {
            break;
        }
    }
    (a.unwrap().0, b.unwrap().0, c.unwrap().0)
}

#[test]
fn zadd_options_replies_and_errors() {
    let srv = server();
    let mut c = srv.raw_conn();
    assert_eq!(q(&mut c, "ZADD z 1 a 2 b 3 c"), "(integer) 3");
    assert_eq!(q(&mut c, "ZADD z 1 a 5 d"), "(integer) 1");
    assert_eq!(q(&mut c, "ZADD z CH 9 a 5 d 0 e"), "(integer) 2");
    assert_eq!(q(&mut c, "ZADD z NX 100 a 1 f"), "(integer) 1");
    assert_eq!(q(&mut c, "ZSCORE z a"), "\"9\"");
    assert_eq!(q(&mut c, "ZADD z XX CH 10 a 1 g"), "(integer) 1");
    assert_eq!(q(&mut c, "EXISTS nokey"), "(integer) 0");
    assert_eq!(q(&mut c, "ZADD nokey XX 1 a"), "(integer) 0");
    assert_eq!(q(&mut c, "ZADD nokey XX INCR 1 a"), "(nil)");
    assert_eq!(q(&mut c, "EXISTS nokey"), "(integer) 0");
    assert_eq!(q(&mut c, "ZADD z GT CH 5 a 11 b"), "(integer) 1");
    assert_eq!(q(&mut c, "ZADD z LT CH 5 a 11 b"), "(integer) 1");
    assert_eq!(q(&mut c, "ZADD z INCR 2.5 a"), "\"7.5\"");
    assert_eq!(q(&mut c, "ZADD z GT INCR -1 a"), "(nil)");
    assert_eq!(q(&mut c, "ZINCRBY z -0.5 a"), "\"7\"");
    assert_eq!(q(&mut c, "ZINCRBY z 1 new"), "\"1\"");
    for (line, e) in [
        (
            "ZADD z NX XX 1 a",
            "ERR XX and NX options at the same time are not compatible",
        ),
        (
            "ZADD z GT LT 1 a",
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            "ZADD z NX GT 1 a",
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            "ZADD z INCR 1 a 2 b",
            "ERR INCR option supports a single increment-element pair",
        ),
        ("ZADD z 1 a 2", "ERR syntax error"),
        ("ZADD z NX 1", "ERR syntax error"),
        ("ZADD z nan a", "ERR value is not a valid float"),
        ("ZADD z 1 a x b", "ERR value is not a valid float"),
        ("ZINCRBY z x a", "ERR value is not a valid float"),
        (
            "ZADD z 1",
            "ERR wrong number of arguments for 'zadd' command",
        ),
    ] {
        assert_eq!(q(&mut c, line), format!("(error) {e}"), "{line}");
    }
    assert_eq!(q(&mut c, "ZADD inf 1e308 x"), "(integer) 1");
    assert_eq!(q(&mut c, "ZINCRBY inf inf x"), "\"inf\"");
    assert_eq!(
        q(&mut c, "ZINCRBY inf -inf x"),
        "(error) ERR resulting score is not a number (NaN)"
    );
    assert_eq!(q(&mut c, "ZSCORE inf x"), "\"inf\"");
}

#[test]
fn wrong_type_everywhere() {
    let srv = server();
    let mut c = srv.raw_conn();
    q(&mut c, "SET s v");
    let wt = "(error) WRONGTYPE Operation against a key holding the wrong kind of value";
    for line in [
        "ZADD s 1 a",
        "ZINCRBY s 1 a",
        "ZREM s a",
        "ZCARD s",
        "ZSCORE s a",
        "ZMSCORE s a",
        "ZRANK s a",
        "ZREVRANK s a",
        "ZCOUNT s 0 1",
        "ZLEXCOUNT s - +",
        "ZRANGE s 0 -1",
        "ZREVRANGE s 0 -1",
        "ZRANGEBYSCORE s 0 1",
        "ZREVRANGEBYSCORE s 1 0",
        "ZRANGEBYLEX s - +",
        "ZREVRANGEBYLEX s + -",
        "ZREMRANGEBYRANK s 0 1",
        "ZREMRANGEBYSCORE s 0 1",
        "ZREMRANGEBYLEX s - +",
        "ZPOPMIN s",
        "ZPOPMAX s 0",
        "ZMPOP 1 s MIN",
        "BZPOPMIN s 0",
        "BZMPOP 0 1 s MAX",
        "ZRANDMEMBER s",
        "ZUNION 1 s",
        "ZINTER 1 s",
        "ZDIFF 1 s",
        "ZINTERCARD 1 s",
        "ZUNIONSTORE d 1 s",
        "ZRANGESTORE d s 0 -1",
        "ZSCAN s 0",
    ] {
        assert_eq!(q(&mut c, line), wt, "{line}");
    }
    // WRONGTYPE comes before option errors (keys are looked up first).
    assert_eq!(q(&mut c, "ZUNION 1 s WEIGHTS x"), wt);
    // Range parsing comes first.
    assert_eq!(
        q(&mut c, "ZRANGEBYSCORE s x 1"),
        "(error) ERR min or max is not a float"
    );
}

#[test]
fn ranges_by_rank_score_and_lex() {
    let srv = server();
    let mut c = srv.raw_conn();
    q(&mut c, "ZADD z 1 a 2 b 3 c 4 d 5 e");
    assert_eq!(q(&mut c, "ZRANGE z 1 -2"), r#"["b", "c", "d"]"#);
    assert_eq!(
        q(&mut c, "ZRANGE z -100 100 REV"),
        r#"["e", "d", "c", "b", "a"]"#
    );
    assert_eq!(q(&mut c, "ZRANGE z 3 1"), "[]");
    assert_eq!(
        q(&mut c, "ZRANGE z 0 1 WITHSCORES"),
        r#"["a", "1", "b", "2"]"#
    );
    assert_eq!(q(&mut c, "ZREVRANGE z 0 1"), r#"["e", "d"]"#);
    assert_eq!(q(&mut c, "ZRANGEBYSCORE z (1 3"), r#"["b", "c"]"#);
    assert_eq!(
        q(&mut c, "ZRANGEBYSCORE z -inf +inf LIMIT 1 2"),
        r#"["b", "c"]"#
    );
    assert_eq!(q(&mut c, "ZRANGEBYSCORE z -inf +inf LIMIT -1 2"), "[]");
    assert_eq!(
        q(&mut c, "ZRANGEBYSCORE z -inf +inf LIMIT 3 -5"),
        r#"["d", "e"]"#
    );
    assert_eq!(
        q(&mut c, "ZREVRANGEBYSCORE z 4 (1 LIMIT 1 2"),
        r#"["c", "b"]"#
    );
    assert_eq!(
        q(&mut c, "ZRANGE z (4 2 BYSCORE REV WITHSCORES"),
        r#"["c", "3", "b", "2"]"#
    );
    assert_eq!(q(&mut c, "ZCOUNT z (1 (5"), "(integer) 3");
    assert_eq!(q(&mut c, "ZCOUNT z 5 1"), "(integer) 0");
    q(&mut c, "ZADD l 0 a 0 b 0 c 0 d");
    assert_eq!(q(&mut c, "ZRANGEBYLEX l [b (d"), r#"["b", "c"]"#);
    assert_eq!(q(&mut c, "ZREVRANGEBYLEX l + (b"), r#"["d", "c"]"#);
    assert_eq!(q(&mut c, "ZRANGE l - + BYLEX LIMIT 1 1"), r#"["b"]"#);
    assert_eq!(q(&mut c, "ZLEXCOUNT l - +"), "(integer) 4");
    assert_eq!(q(&mut c, "ZLEXCOUNT l [c -"), "(integer) 0");
    for (line, e) in [
        (
            "ZRANGE z 0 -1 LIMIT 0 1",
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            "ZRANGE l - + BYLEX WITHSCORES",
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        ("ZRANGE z 0 -1 BYSCORE BYLEX", "ERR syntax error"),
        ("ZRANGEBYSCORE z 1 x", "ERR min or max is not a float"),
        (
            "ZRANGEBYLEX l a b",
            "ERR min or max not valid string range item",
        ),
        (
            "ZRANGE z a 1",
            "ERR value is not an integer or out of range",
        ),
        (
            "ZRANGEBYSCORE z 0 1 LIMIT x 1",
            "ERR value is not an integer or out of range",
        ),
    ] {
        assert_eq!(q(&mut c, line), format!("(error) {e}"), "{line}");
    }
    assert_eq!(q(&mut c, "ZRANK z c"), "(integer) 2");
    assert_eq!(q(&mut c, "ZREVRANK z c"), "(integer) 2");
    assert_eq!(q(&mut c, "ZRANK z nope"), "(nil)");
    assert_eq!(q(&mut c, "ZREMRANGEBYSCORE z (4 +inf"), "(integer) 1");
    assert_eq!(q(&mut c, "ZREMRANGEBYRANK z 0 0"), "(integer) 1");
    assert_eq!(q(&mut c, "ZREMRANGEBYLEX l (a [c"), "(integer) 2");
    assert_eq!(q(&mut c, "ZRANGE z 0 -1"), r#"["b", "c", "d"]"#);
    assert_eq!(q(&mut c, "ZREMRANGEBYRANK z 0 -1"), "(integer) 3");
    assert_eq!(q(&mut c, "EXISTS z"), "(integer) 0");
}

#[test]
fn resp3_shapes() {
    let srv = server();
    let mut c = srv.raw_conn();
    q(&mut c, "HELLO 3");
    q(&mut c, "ZADD z 1 a 2 b 3 c 4 d");
    assert_eq!(q(&mut c, "ZSCORE z a"), "(double) 1");
    assert_eq!(q(&mut c, "ZMSCORE z a nope"), "[(double) 1, (nil)]");
    assert_eq!(
        q(&mut c, "ZRANGE z 0 1 WITHSCORES"),
        r#"[["a", (double) 1], ["b", (double) 2]]"#
    );
    assert_eq!(q(&mut c, "ZPOPMIN z"), r#"["a", (double) 1]"#);
    assert_eq!(q(&mut c, "ZPOPMIN z 1"), r#"[["b", (double) 2]]"#);
    assert_eq!(q(&mut c, "ZMPOP 1 z MAX"), r#"["z", [["d", (double) 4]]]"#);
    assert_eq!(q(&mut c, "BZPOPMIN z 0"), r#"["z", "c", (double) 3]"#);
    assert_eq!(q(&mut c, "ZMPOP 1 z MAX"), "(nil)");
    assert_eq!(q(&mut c, "ZPOPMIN z"), "[]");
}

#[test]
fn pops_and_mpop() {
    let srv = server();
    let mut c = srv.raw_conn();
    q(&mut c, "ZADD z 1 a 2 b 3 c");
    assert_eq!(q(&mut c, "ZPOPMAX z 2"), r#"["c", "3", "b", "2"]"#);
    assert_eq!(q(&mut c, "ZPOPMIN z 0"), "[]");
    assert_eq!(q(&mut c, "ZPOPMIN z 1000000000000"), r#"["a", "1"]"#);
    assert_eq!(q(&mut c, "EXISTS z"), "(integer) 0");
    assert_eq!(
        q(&mut c, "ZPOPMIN z -1"),
        "(error) ERR value is out of range, must be positive"
    );
    q(&mut c, "ZADD z2 1 x 2 y");
    assert_eq!(
        q(&mut c, "ZMPOP 3 nokey z2 nokey2 MIN COUNT 5"),
        r#"["z2", [["x", "1"], ["y", "2"]]]"#
    );
    assert_eq!(q(&mut c, "ZMPOP 1 z2 MIN"), "(nil array)");
    for (line, e) in [
        ("ZMPOP 0 z MIN", "ERR numkeys should be greater than 0"),
        ("ZMPOP 2 z MIN", "ERR syntax error"),
        (
            "ZMPOP 1 z MIN COUNT 0",
            "ERR count should be greater than 0",
        ),
        ("ZMPOP 1 z LEFT", "ERR syntax error"),
        (
            "BZMPOP x 1 z MIN",
            "ERR timeout is not a float or out of range",
        ),
        ("BZMPOP -1 1 z MIN", "ERR timeout is negative"),
        ("BZPOPMIN z -0.5", "ERR timeout is negative"),
        ("BZPOPMIN z inf", "ERR timeout is negative"),
    ] {
        assert_eq!(q(&mut c, line), format!("(error) {e}"), "{line}");
    }
}

#[test]
fn encodings_convert_at_the_thresholds() {
    let srv = server();
    let mut c = srv.raw_conn();
    let mut args = vec!["ZADD".to_string(), "z".to_string()];
    for i in 0..128 {
        args.push(i.to_string());
        args.push(format!("m{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    assert_eq!(cmd(&mut c, &refs), "(integer) 128");
    assert_eq!(q(&mut c, "OBJECT ENCODING z"), "\"listpack\"");
    q(&mut c, "ZADD z 200 m200");
    assert_eq!(q(&mut c, "OBJECT ENCODING z"), "\"skiplist\"");
    // Removing never converts back.
    q(&mut c, "ZREMRANGEBYRANK z 0 -3");
    assert_eq!(q(&mut c, "OBJECT ENCODING z"), "\"skiplist\"");
    let long = "x".repeat(65);
    cmd(&mut c, &["ZADD", "l", "1", "a"]);
    assert_eq!(q(&mut c, "OBJECT ENCODING l"), "\"listpack\"");
    cmd(&mut c, &["ZADD", "l", "1", &long]);
    assert_eq!(q(&mut c, "OBJECT ENCODING l"), "\"skiplist\"");
    // Stored results take the encoding that fits them.
    assert_eq!(q(&mut c, "ZRANGESTORE small z 0 0"), "(integer) 1");
    assert_eq!(q(&mut c, "OBJECT ENCODING small"), "\"listpack\"");
    q(&mut c, "CONFIG SET zset-max-ziplist-entries 1");
    assert_eq!(q(&mut c, "ZUNIONSTORE u 1 z"), "(integer) 2");
    assert_eq!(q(&mut c, "OBJECT ENCODING u"), "\"skiplist\"");
    q(&mut c, "CONFIG SET zset-max-listpack-entries 128");
    // -0 is kept in the skiplist, becomes 0 in a listpack (as in Redis).
    q(&mut c, "ZADD negz -0 a");
    assert_eq!(q(&mut c, "ZSCORE negz a"), "\"0\"");
    cmd(&mut c, &["ZADD", "negz", "-0", &long]);
    q(&mut c, "ZADD negz -0 b");
    assert_eq!(q(&mut c, "ZSCORE negz b"), "\"-0\"");
}

#[test]
fn set_operations_across_shards() {
    let srv = server();
    let mut c = srv.raw_conn();
    let (a, b, same) = spread_keys();
    cmd(&mut c, &["ZADD", &a, "1", "x", "2", "y", "3", "z"]);
    cmd(&mut c, &["ZADD", &b, "10", "y", "20", "z", "30", "w"]);
    assert_eq!(
        cmd(&mut c, &["ZUNION", "2", &a, &b, "WITHSCORES"]),
        r#"["x", "1", "y", "12", "z", "23", "w", "30"]"#
    );
    assert_eq!(
        cmd(
            &mut c,
            &[
                "ZINTER",
                "2",
                &a,
                &b,
                "WEIGHTS",
                "2",
                "1",
                "AGGREGATE",
                "MAX",
                "WITHSCORES"
            ]
        ),
        r#"["y", "10", "z", "20"]"#
    );
    assert_eq!(cmd(&mut c, &["ZDIFF", "2", &a, &b]), r#"["x"]"#);
    assert_eq!(
        cmd(&mut c, &["ZINTERCARD", "2", &a, &b, "LIMIT", "1"]),
        "(integer) 1"
    );
    assert_eq!(
        cmd(&mut c, &["ZINTERCARD", "3", &a, &b, "nokey"]),
        "(integer) 0"
    );
    assert_eq!(
        cmd(&mut c, &["ZUNIONSTORE", &same, "2", &a, &b]),
        "(integer) 4"
    );
    assert_eq!(
        cmd(&mut c, &["ZRANGE", &same, "0", "-1", "WITHSCORES"]),
        r#"["x", "1", "y", "12", "z", "23", "w", "30"]"#
    );
    assert_eq!(
        cmd(&mut c, &["ZINTERSTORE", &b, "2", &a, &b]),
        "(integer) 2"
    );
    assert_eq!(cmd(&mut c, &["ZRANGE", &b, "0", "-1"]), r#"["y", "z"]"#);
    // An empty result deletes the destination.
    assert_eq!(cmd(&mut c, &["ZDIFFSTORE", &b, "2", &b, &a]), "(integer) 0");
    assert_eq!(cmd(&mut c, &["EXISTS", &b]), "(integer) 0");
    assert_eq!(
        cmd(&mut c, &["ZRANGESTORE", &b, &a, "(1", "+inf", "BYSCORE"]),
        "(integer) 2"
    );
    assert_eq!(cmd(&mut c, &["ZRANGE", &b, "0", "-1"]), r#"["y", "z"]"#);
    // inf * 0 is 0 for the first source, and inf + -inf sums to 0.
    cmd(&mut c, &["ZADD", "i1", "inf", "m"]);
    cmd(&mut c, &["ZADD", "i2", "-inf", "m"]);
    assert_eq!(q(&mut c, "ZUNION 2 i1 i2 WITHSCORES"), r#"["m", "0"]"#);
    assert_eq!(
        q(&mut c, "ZUNION 1 i1 WEIGHTS 0 WITHSCORES"),
        r#"["m", "0"]"#
    );
    for (line, e) in [
        (
            "ZUNION 0 a",
            "ERR at least 1 input key is needed for 'zunion' command",
        ),
        (
            "ZUNIONSTORE d 0 a",
            "ERR at least 1 input key is needed for 'zunionstore' command",
        ),
        (
            "ZINTERCARD 0 a",
            "ERR at least 1 input key is needed for 'zintercard' command",
        ),
        ("ZUNION 3 a", "ERR syntax error"),
        ("ZUNION x a", "ERR value is not an integer or out of range"),
        ("ZUNION 1 a WEIGHTS x", "ERR weight value is not a float"),
        ("ZUNION 1 a AGGREGATE avg", "ERR syntax error"),
        ("ZDIFF 1 a WEIGHTS 1", "ERR syntax error"),
        ("ZUNIONSTORE d 1 a WITHSCORES", "ERR syntax error"),
        ("ZINTERCARD 1 a LIMIT -1", "ERR LIMIT can't be negative"),
    ] {
        assert_eq!(q(&mut c, line), format!("(error) {e}"), "{line}");
    }
}

#[test]
fn zrandmember_counts() {
    let srv = server();
    let mut c = srv.raw_conn();
    q(&mut c, "ZADD z 1 a 2 b 3 c");
    let all: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let names = |r: Resp| -> Vec<String> {
        match r {
            Resp::Array(v) => v
                .iter()
                .map(|x| String::from_utf8_lossy(x.as_bytes().unwrap_or_default()).into_owned())
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    let got: BTreeSet<String> = names(c.q("ZRANDMEMBER z 10")).into_iter().collect();
    assert_eq!(got, all);
    let two = names(c.q("ZRANDMEMBER z 2"));
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1]);
    assert_eq!(names(c.q("ZRANDMEMBER z -7")).len(), 7);
    assert_eq!(names(c.q("ZRANDMEMBER z -4 WITHSCORES")).len(), 8);
    assert_eq!(q(&mut c, "ZRANDMEMBER z 0"), "[]");
    assert_eq!(q(&mut c, "ZRANDMEMBER nokey"), "(nil)");
    assert_eq!(q(&mut c, "ZRANDMEMBER nokey 3"), "[]");
    assert_eq!(
        q(&mut c, "ZRANDMEMBER z -9223372036854775808"),
        "(error) ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(
        q(&mut c, "ZRANDMEMBER z -9223372036854775807 WITHSCORES"),
        "(error) ERR value is out of range"
    );
    assert_eq!(
        q(&mut c, "ZRANDMEMBER z 1 WITHSCORE"),
        "(error) ERR syntax error"
    );
    let mut seen = BTreeSet::new();
    for _ in 0..200 {
        seen.insert(c.q("ZRANDMEMBER z").to_string());
    }
    assert_eq!(seen.len(), 3);
}

#[test]
fn zscan_returns_every_stable_member_while_the_zset_changes() {
    let srv = server();
    let mut c = srv.raw_conn();
    let mut args = vec!["ZADD".to_string(), "big".to_string()];
    for i in 0..2000 {
        args.push((i % 97).to_string());
        args.push(format!("stable:{i}"));
    }
    let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    c.cmd(&refs);
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let Resp::Array(v) = c.cmd(&["ZSCAN", "big", &cursor, "COUNT", "50"]) else {
            panic!("ZSCAN reply is not an array");
        };
        let next = String::from_utf8_lossy(v[0].as_bytes().unwrap_or_default()).into_owned();
        if let Resp::Array(items) = &v[1] {
            for p in items.chunks(2) {
                seen.insert(
                    String::from_utf8_lossy(p[0].as_bytes().unwrap_or_default()).into_owned(),
                );
            }
        }
        // Churn: add, rescore and remove other members between calls.
        round += 1;
        c.cmd(&["ZADD", "big", &round.to_string(), &format!("churn:{round}")]);
        c.cmd(&[
            "ZINCRBY",
            "big",
            "1000",
            &format!("stable:{}", round % 2000),
        ]);
        if round > 3 {
            c.cmd(&["ZREM", "big", &format!("churn:{}", round - 3)]);
        }
        if next == "0" {
            break;
        }
        cursor = next;
        assert!(round < 10_000, "scan does not terminate");
    }
    for i in 0..2000 {
        assert!(seen.contains(&format!("stable:{i}")), "stable:{i} missing");
    }
    // Small zsets come back whole with cursor 0, scores as stored.
    q(&mut c, "ZADD small 1 a 1.5 b");
    assert_eq!(q(&mut c, "ZSCAN small 0 MATCH a*"), r#"["0", ["a", "1"]]"#);
    assert_eq!(q(&mut c, "ZSCAN nokey 0"), r#"["0", []]"#);
    assert_eq!(q(&mut c, "ZSCAN small x"), "(error) ERR invalid cursor");
    assert_eq!(
        q(&mut c, "ZSCAN small 0 COUNT 0"),
        "(error) ERR syntax error"
    );
}

#[test]
fn bzpopmin_is_served_by_a_write_on_another_shard() {
    let srv = server();
    let (a, b, _) = spread_keys();
    let mut waiter = srv.raw_conn();
    waiter.send(&["BZPOPMIN", &a, &b, "5"]);
    std::thread::sleep(Duration::from_millis(150));
    let mut w = srv.raw_conn();
    // The ZADD and the ZCARD arrive together: the waiter must have popped before the ZCARD.
    w.send_raw(
        &[
            common::encode(&["ZADD", &b, "1", "one", "2", "two"]),
            common::encode(&["ZCARD", &b]),
        ]
        .concat(),
    );
    assert_eq!(w.read().to_string(), "(integer) 2");
    assert_eq!(w.read().to_string(), "(integer) 1");
    assert_eq!(waiter.read().to_string(), format!(r#"["{b}", "one", "1"]"#));
}

#[test]
fn blocked_clients_are_served_fifo_once() {
    let srv = server();
    let mut w1 = srv.raw_conn();
    let mut w2 = srv.raw_conn();
    w1.send(&["BZPOPMAX", "q", "5"]);
    std::thread::sleep(Duration::from_millis(100));
    w2.send(&["BZMPOP", "5", "1", "q", "MAX", "COUNT", "2"]);
    std::thread::sleep(Duration::from_millis(100));
    let mut c = srv.raw_conn();
    assert_eq!(q(&mut c, "ZADD q 1 a 2 b 3 c"), "(integer) 3");
    assert_eq!(w1.read().to_string(), r#"["q", "c", "3"]"#);
    assert_eq!(w2.read().to_string(), r#"["q", [["b", "2"], ["a", "1"]]]"#);
    assert_eq!(q(&mut c, "EXISTS q"), "(integer) 0");
}

#[test]
fn blocking_timeout_and_multi() {
    let srv = server();
    let mut c = srv.raw_conn();
    let t0 = Instant::now();
    assert_eq!(q(&mut c, "BZPOPMIN nothing 0.2"), "(nil array)");
    assert!(t0.elapsed() >= Duration::from_millis(150));
    assert_eq!(q(&mut c, "BZMPOP 0.1 1 nothing MIN"), "(nil array)");
    // Inside MULTI a blocking pop does not block.
    q(&mut c, "MULTI");
    assert_eq!(q(&mut c, "BZPOPMIN nothing 0"), "+QUEUED");
    assert_eq!(q(&mut c, "BZMPOP 0 1 nothing MIN"), "+QUEUED");
    assert_eq!(q(&mut c, "EXEC"), "[(nil array), (nil array)]");
    q(&mut c, "ZADD ready 5 x");
    assert_eq!(
        q(&mut c, "BZPOPMIN nothing ready 0"),
        r#"["ready", "x", "5"]"#
    );
}
