//! LIST commands end to end: replies and error texts as Redis 7.0 (`DFLY_TEST_TARGET=redis`
//! runs the same assertions against redis-server), multi-shard atomic moves and pops, and the
//! blocking commands across shards and threads.

mod common;

use std::time::{Duration, Instant};

use common::{RawConn, Resp, Server};
use damselfly::engine::shard_of;

const THREADS: usize = 4;

fn server() -> Server {
    Server::start(&["--proactor_threads=4"])
}

/// Runs a space-separated command and renders the reply.
fn q(c: &mut RawConn, line: &str) -> String {
    c.q(line).to_string()
}

/// Two keys that live on different shards (with 4 threads).
fn two_shards(prefix: &str) -> (String, String) {
    let a = format!("{prefix}0");
    let b = (1..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| shard_of(k.as_bytes(), THREADS) != shard_of(a.as_bytes(), THREADS))
        .unwrap();
    (a, b)
}

fn info_blocked(c: &mut RawConn) -> i64 {
    let r = c.cmd(&["INFO", "clients"]);
    let text = String::from_utf8_lossy(r.as_bytes().unwrap()).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn wait_blocked(c: &mut RawConn, n: i64) {
    let t0 = Instant::now();
    while info_blocked(c) != n {
        assert!(t0.elapsed() < Duration::from_secs(5), "never {n} blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn push_pop_and_null_rules() {
    let srv = server();
    let mut c = srv.raw_conn();
    assert_eq!(q(&mut c, "RPUSH l a b c"), "(integer) 3");
    assert_eq!(q(&mut c, "LPUSH l z y"), "(integer) 5");
    assert_eq!(q(&mut c, "LRANGE l 0 -1"), r#"["y", "z", "a", "b", "c"]"#);
    assert_eq!(q(&mut c, "LPUSHX nol a"), "(integer) 0");
    assert_eq!(q(&mut c, "RPUSHX nol a"), "(integer) 0");
    assert_eq!(q(&mut c, "EXISTS nol"), "(integer) 0");
    assert_eq!(q(&mut c, "RPUSHX l d e"), "(integer) 7");
    assert_eq!(q(&mut c, "LPOP l"), r#""y""#);
    assert_eq!(q(&mut c, "RPOP l"), r#""e""#);
    assert_eq!(q(&mut c, "LPOP l 2"), r#"["z", "a"]"#);
    assert_eq!(q(&mut c, "RPOP l 0"), "[]");
    assert_eq!(q(&mut c, "RPOP l 100"), r#"["d", "c", "b"]"#);
    assert_eq!(q(&mut c, "EXISTS l"), "(integer) 0");
    assert_eq!(q(&mut c, "LPOP l"), "(nil)");
    assert_eq!(q(&mut c, "LPOP l 0"), "(nil array)");
    assert_eq!(q(&mut c, "LPOP l 3"), "(nil array)");
    assert_eq!(q(&mut c, "LLEN l"), "(integer) 0");
    assert_eq!(
        q(&mut c, "LPOP l -1"),
        "(error) ERR value is out of range, must be positive"
    );
    assert_eq!(
        q(&mut c, "LPOP l x"),
        "(error) ERR value is out of range, must be positive"
    );
    assert_eq!(
        q(&mut c, "LPOP l 1 2"),
        "(error) ERR wrong number of arguments for 'lpop' command"
    );
    // Integers round-trip in their canonical text; non-canonical ones stay strings.
    assert_eq!(
        q(
            &mut c,
            "RPUSH n 0 -1 127 128 -2048 70000 -9223372036854775808 007 +1 -0 1.5"
        ),
        "(integer) 11"
    );
    assert_eq!(
        q(&mut c, "LRANGE n 0 -1"),
        r#"["0", "-1", "127", "128", "-2048", "70000", "-9223372036854775808", "007", "+1", "-0", "1.5"]"#
    );
    assert_eq!(q(&mut c, "OBJECT ENCODING n"), r#""quicklist""#);
    assert_eq!(q(&mut c, "TYPE n"), "+list");
    // RESP3: one null type.
    c.q("HELLO 3");
    let raw = |c: &mut RawConn, line: &str| c.q(line);
    assert_eq!(raw(&mut c, "LPOP nokey"), Resp::Nil);
    assert_eq!(raw(&mut c, "LPOP nokey 2"), Resp::Nil);
    assert_eq!(raw(&mut c, "LPOS nokey a"), Resp::Nil);
    assert_eq!(raw(&mut c, "LMPOP 1 nokey LEFT"), Resp::Nil);
}

#[test]
fn wrong_type_everywhere() {
    let srv = server();
    let mut c = srv.raw_conn();
    c.q("SET s v");
    let wt = "(error) WRONGTYPE Operation against a key holding the wrong kind of value";
    for line in [
        "LPUSH s a",
        "RPUSH s a",
        "LPUSHX s a",
        "RPUSHX s a",
        "LPOP s",
        "RPOP s 2",
        "LLEN s",
        "LRANGE s 0 -1",
        "LINDEX s 0",
        "LSET s 0 a",
        "LINSERT s BEFORE a b",
        "LREM s 0 a",
        "LTRIM s 0 1",
        "LPOS s a",
        "LMOVE s x LEFT LEFT",
        "RPOPLPUSH s x",
        "LMPOP 1 s LEFT",
        "BLPOP s 0",
        "BRPOP s 0",
        "BLMOVE s x LEFT LEFT 0",
        "BRPOPLPUSH s x 0",
        "BLMPOP 0 1 s LEFT",
    ] {
        assert_eq!(q(&mut c, line), wt, "{line}");
    }
    assert_eq!(q(&mut c, "GET s"), r#""v""#);
}

#[test]
fn positional_commands() {
    let srv = server();
    let mut c = srv.raw_conn();
    c.q("RPUSH l a b c d e");
    assert_eq!(q(&mut c, "LRANGE l 1 -2"), r#"["b", "c", "d"]"#);
    assert_eq!(
        q(&mut c, "LRANGE l -100 100"),
        r#"["a", "b", "c", "d", "e"]"#
    );
    assert_eq!(q(&mut c, "LRANGE l 3 1"), "[]");
    assert_eq!(q(&mut c, "LRANGE l 5 10"), "[]");
    assert_eq!(q(&mut c, "LRANGE nokey 0 -1"), "[]");
    assert_eq!(
        q(&mut c, "LRANGE l x 1"),
        "(error) ERR value is not an integer or out of range"
    );
    assert_eq!(q(&mut c, "LINDEX l -1"), r#""e""#);
    assert_eq!(q(&mut c, "LINDEX l 5"), "(nil)");
    assert_eq!(q(&mut c, "LINDEX nokey x"), "(nil)");
    assert_eq!(
        q(&mut c, "LINDEX l x"),
        "(error) ERR value is not an integer or out of range"
    );
    assert_eq!(q(&mut c, "LSET l 1 B"), "+OK");
    assert_eq!(q(&mut c, "LSET l -1 E"), "+OK");
    assert_eq!(q(&mut c, "LSET l 5 x"), "(error) ERR index out of range");
    assert_eq!(q(&mut c, "LSET nokey 0 x"), "(error) ERR no such key");
    assert_eq!(q(&mut c, "LINSERT l BEFORE c X"), "(integer) 6");
    assert_eq!(q(&mut c, "LINSERT l after E Y"), "(integer) 7");
    assert_eq!(q(&mut c, "LINSERT l AFTER zz Y"), "(integer) -1");
    assert_eq!(q(&mut c, "LINSERT nokey AFTER a Y"), "(integer) 0");
    assert_eq!(
        q(&mut c, "LINSERT l MIDDLE a Y"),
        "(error) ERR syntax error"
    );
    assert_eq!(
        q(&mut c, "LRANGE l 0 -1"),
        r#"["a", "B", "X", "c", "d", "E", "Y"]"#
    );
    c.q("RPUSH r x 1 x 2 x 3 x");
    assert_eq!(q(&mut c, "LREM r 2 x"), "(integer) 2");
    assert_eq!(q(&mut c, "LRANGE r 0 -1"), r#"["1", "2", "x", "3", "x"]"#);
    assert_eq!(q(&mut c, "LREM r -1 x"), "(integer) 1");
    assert_eq!(q(&mut c, "LRANGE r 0 -1"), r#"["1", "2", "x", "3"]"#);
    assert_eq!(q(&mut c, "LREM r 0 2"), "(integer) 1");
    assert_eq!(q(&mut c, "LREM r 0 nothing"), "(integer) 0");
    assert_eq!(q(&mut c, "LREM nokey 0 a"), "(integer) 0");
    assert_eq!(
        q(&mut c, "LREM r x a"),
        "(error) ERR value is not an integer or out of range"
    );
    assert_eq!(q(&mut c, "LTRIM r 1 -1"), "+OK");
    assert_eq!(q(&mut c, "LRANGE r 0 -1"), r#"["x", "3"]"#);
    assert_eq!(q(&mut c, "LTRIM nokey 0 1"), "+OK");
    assert_eq!(q(&mut c, "LTRIM r 5 1"), "+OK");
    assert_eq!(q(&mut c, "EXISTS r"), "(integer) 0");
}

#[test]
fn lpos_options() {
    let srv = server();
    let mut c = srv.raw_conn();
    c.q("RPUSH l a b c 1 2 3 c c");
    assert_eq!(q(&mut c, "LPOS l c"), "(integer) 2");
    assert_eq!(q(&mut c, "LPOS l c RANK 2"), "(integer) 6");
    assert_eq!(q(&mut c, "LPOS l c RANK -1"), "(integer) 7");
    assert_eq!(q(&mut c, "LPOS l c RANK -3"), "(integer) 2");
    assert_eq!(q(&mut c, "LPOS l c RANK 4"), "(nil)");
    assert_eq!(
        q(&mut c, "LPOS l c COUNT 0"),
        "[(integer) 2, (integer) 6, (integer) 7]"
    );
    assert_eq!(
        q(&mut c, "LPOS l c COUNT 2 RANK -1"),
        "[(integer) 7, (integer) 6]"
    );
    assert_eq!(q(&mut c, "LPOS l c COUNT 0 MAXLEN 3"), "[(integer) 2]");
    assert_eq!(
        q(&mut c, "LPOS l c COUNT 0 MAXLEN 1 RANK -1"),
        "[(integer) 7]"
    );
    assert_eq!(q(&mut c, "LPOS l 3"), "(integer) 5");
    assert_eq!(q(&mut c, "LPOS l x COUNT 5"), "[]");
    assert_eq!(q(&mut c, "LPOS nokey x COUNT 5"), "[]");
    assert_eq!(q(&mut c, "LPOS nokey x"), "(nil)");
    assert_eq!(
        q(&mut c, "LPOS l c RANK 0"),
        "(error) ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(
        q(&mut c, "LPOS l c COUNT -1"),
        "(error) ERR COUNT can't be negative"
    );
    assert_eq!(
        q(&mut c, "LPOS l c MAXLEN -1"),
        "(error) ERR MAXLEN can't be negative"
    );
    assert_eq!(q(&mut c, "LPOS l c FOO 1"), "(error) ERR syntax error");
    assert_eq!(q(&mut c, "LPOS l c RANK"), "(error) ERR syntax error");
    assert_eq!(
        q(&mut c, "LPOS l c RANK x"),
        "(error) ERR value is not an integer or out of range"
    );
}

#[test]
fn lmove_same_and_cross_shard() {
    let srv = server();
    let mut c = srv.raw_conn();
    let (a, b) = two_shards("mv");
    c.cmd(&["RPUSH", &a, "1", "2", "3"]);
    assert_eq!(
        c.cmd(&["LMOVE", &a, &b, "LEFT", "RIGHT"]).to_string(),
        r#""1""#
    );
    assert_eq!(c.cmd(&["RPOPLPUSH", &a, &b]).to_string(), r#""3""#);
    assert_eq!(
        c.cmd(&["LRANGE", &b, "0", "-1"]).to_string(),
        r#"["3", "1"]"#
    );
    // Rotation on one key.
    c.cmd(&["RPUSH", "rot", "a", "b", "c"]);
    assert_eq!(q(&mut c, "LMOVE rot rot LEFT RIGHT"), r#""a""#);
    assert_eq!(q(&mut c, "LRANGE rot 0 -1"), r#"["b", "c", "a"]"#);
    // The last element moves and the source disappears.
    assert_eq!(
        c.cmd(&["LMOVE", &a, &b, "RIGHT", "LEFT"]).to_string(),
        r#""2""#
    );
    assert_eq!(c.cmd(&["EXISTS", &a]).to_string(), "(integer) 0");
    assert_eq!(
        c.cmd(&["LMOVE", &a, &b, "RIGHT", "LEFT"]).to_string(),
        "(nil)"
    );
    // A wrong-typed destination leaves the source untouched; a missing source wins over it.
    c.cmd(&["SET", &a, "str"]);
    let wt = "(error) WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(c.cmd(&["LMOVE", &b, &a, "LEFT", "LEFT"]).to_string(), wt);
    assert_eq!(c.cmd(&["LLEN", &b]).to_string(), "(integer) 3");
    assert_eq!(
        c.cmd(&["LMOVE", "nosrc", &a, "LEFT", "LEFT"]).to_string(),
        "(nil)"
    );
    assert_eq!(
        c.cmd(&["LMOVE", &b, &a, "UP", "LEFT"]).to_string(),
        "(error) ERR syntax error"
    );
}

#[test]
fn lmpop_first_ready_key_in_argument_order() {
    let srv = server();
    let mut c = srv.raw_conn();
    let (a, b) = two_shards("mp");
    c.cmd(&["RPUSH", &b, "b1", "b2", "b3"]);
    c.cmd(&["RPUSH", &a, "a1"]);
    assert_eq!(
        c.cmd(&["LMPOP", "3", "none", &b, &a, "LEFT"]).to_string(),
        format!(r#"["{b}", ["b1"]]"#)
    );
    assert_eq!(
        c.cmd(&["LMPOP", "2", &a, &b, "RIGHT", "COUNT", "10"])
            .to_string(),
        format!(r#"["{a}", ["a1"]]"#)
    );
    assert_eq!(
        c.cmd(&["LMPOP", "2", &a, &b, "RIGHT", "COUNT", "10"])
            .to_string(),
        format!(r#"["{b}", ["b3", "b2"]]"#)
    );
    assert_eq!(q(&mut c, "LMPOP 2 x y LEFT"), "(nil array)");
    c.cmd(&["SET", &a, "s"]);
    c.cmd(&["RPUSH", &b, "z"]);
    assert_eq!(
        c.cmd(&["LMPOP", "2", &a, &b, "LEFT"]).to_string(),
        "(error) WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        c.cmd(&["LMPOP", "2", &b, &a, "LEFT"]).to_string(),
        format!(r#"["{b}", ["z"]]"#)
    );
    for (line, e) in [
        (
            "LMPOP 0 a LEFT",
            "(error) ERR numkeys should be greater than 0",
        ),
        ("LMPOP 2 a LEFT", "(error) ERR syntax error"),
        ("LMPOP 1 a MIDDLE", "(error) ERR syntax error"),
        (
            "LMPOP 1 a LEFT COUNT 0",
            "(error) ERR count should be greater than 0",
        ),
        ("LMPOP 1 a LEFT COUNT 1 COUNT 1", "(error) ERR syntax error"),
        ("LMPOP 1 a LEFT COUNT", "(error) ERR syntax error"),
    ] {
        assert_eq!(q(&mut c, line), e, "{line}");
    }
    assert_eq!(
        q(&mut c, "COMMAND GETKEYS LMPOP 2 k1 k2 LEFT COUNT 3"),
        r#"["k1", "k2"]"#
    );
    assert_eq!(
        q(&mut c, "COMMAND GETKEYS BLMPOP 0 2 k1 k2 LEFT"),
        r#"["k1", "k2"]"#
    );
}

#[test]
fn large_lists_and_small_nodes() {
    let srv = server();
    let mut c = srv.raw_conn();
    for fill in ["-2", "3"] {
        c.cmd(&["CONFIG", "SET", "list-max-listpack-size", fill]);
        c.q("DEL big");
        let mut model: std::collections::VecDeque<String> = Default::default();
        for chunk in 0..20 {
            let mut args = vec!["RPUSH".to_string(), "big".into()];
            for i in 0..500 {
                let v = if i % 7 == 0 {
                    format!("value-{chunk}-{i}-{}", "x".repeat(i % 50))
                } else {
                    (chunk * 500 + i).to_string()
                };
                model.push_back(v.clone());
                args.push(v);
            }
            c.cmd(&args);
        }
        assert_eq!(q(&mut c, "LLEN big"), "(integer) 10000");
        for i in [0usize, 1, 4999, 5000, 9998, 9999] {
            assert_eq!(
                c.cmd(&["LINDEX", "big", &i.to_string()]),
                common::bulk(&model[i])
            );
        }
        c.q("LSET big 5000 changed");
        model[5000] = "changed".into();
        c.q("LINSERT big BEFORE changed inserted");
        model.insert(5000, "inserted".into());
        let r = c.cmd(&["LRANGE", "big", "4990", "5010"]);
        let want: Vec<Resp> = model
            .iter()
            .skip(4990)
            .take(21)
            .map(|s| common::bulk(s))
            .collect();
        assert_eq!(r, Resp::Array(want));
        c.q("LTRIM big 100 -100");
        let model: Vec<String> = model
            .iter()
            .skip(100)
            .take(model.len() - 199)
            .cloned()
            .collect();
        assert_eq!(c.q("LLEN big").as_int(), Some(model.len() as i64));
        let all = c.q("LRANGE big 0 -1");
        let want: Vec<Resp> = model.iter().map(|s| common::bulk(s)).collect();
        assert_eq!(all, Resp::Array(want));
        assert_eq!(q(&mut c, "OBJECT ENCODING big"), r#""quicklist""#);
        assert_eq!(
            c.cmd(&["LPOS", "big", &model[3000], "RANK", "-1"]).as_int(),
            Some(3000)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Blocking

#[test]
fn blpop_served_by_push_on_another_shard_and_thread() {
    let srv = server();
    let (a, b) = two_shards("bk");
    let mut w = srv.raw_conn();
    let mut p = srv.raw_conn();
    w.send(&["BLPOP", &a, &b, "5"]);
    wait_blocked(&mut p, 1);
    // A push of three elements: the waiter takes one atomically with the push.
    p.send_raw(
        &[
            common::encode(&["RPUSH", &b, "x", "y", "z"]),
            common::encode(&["LRANGE", &b, "0", "-1"]),
        ]
        .concat(),
    );
    assert_eq!(p.read().as_int(), Some(3));
    assert_eq!(p.read().to_string(), r#"["y", "z"]"#);
    assert_eq!(w.read().to_string(), format!(r#"["{b}", "x"]"#));
    wait_blocked(&mut p, 0);
    // The stale registration on the other shard consumes nothing.
    p.cmd(&["RPUSH", &a, "keep"]);
    assert_eq!(p.cmd(&["LLEN", &a]).as_int(), Some(1));
    // Ready keys are served immediately, first key in argument order.
    p.cmd(&["RPUSH", &b, "w"]);
    assert_eq!(
        w.cmd(&["BRPOP", &b, &a, "1"]).to_string(),
        format!(r#"["{b}", "w"]"#)
    );
}

#[test]
fn fifo_timeouts_and_errors() {
    let srv = server();
    let mut w1 = srv.raw_conn();
    let mut w2 = srv.raw_conn();
    let mut p = srv.raw_conn();
    w1.send(&["BLPOP", "q", "0"]);
    wait_blocked(&mut p, 1);
    w2.send(&["BLPOP", "q", "0"]);
    wait_blocked(&mut p, 2);
    p.q("RPUSH q first");
    assert_eq!(w1.read().to_string(), r#"["q", "first"]"#);
    p.q("RPUSH q second");
    assert_eq!(w2.read().to_string(), r#"["q", "second"]"#);
    // Sub-second timeout.
    let t0 = Instant::now();
    assert_eq!(q(&mut w1, "BLPOP nothing 0.2"), "(nil array)");
    let el = t0.elapsed();
    assert!(
        el >= Duration::from_millis(180) && el < Duration::from_secs(2),
        "{el:?}"
    );
    assert_eq!(q(&mut w1, "BRPOPLPUSH nothing x 0.05"), "(nil array)");
    assert_eq!(q(&mut w1, "BLMPOP 0.05 1 nothing LEFT"), "(nil array)");
    assert_eq!(q(&mut w1, "BLPOP q -1"), "(error) ERR timeout is negative");
    assert_eq!(
        q(&mut w1, "BLPOP q abc"),
        "(error) ERR timeout is not a float or out of range"
    );
    assert_eq!(
        q(&mut w1, "BLMPOP x 1 q LEFT"),
        "(error) ERR timeout is not a float or out of range"
    );
    assert_eq!(
        q(&mut w1, "BLMPOP 0 0 q LEFT"),
        "(error) ERR numkeys should be greater than 0"
    );
    assert_eq!(
        q(&mut w1, "BLMOVE a b UP LEFT 0"),
        "(error) ERR syntax error"
    );
}

#[test]
fn blocking_commands_inside_multi_do_not_block() {
    let srv = server();
    let mut c = srv.raw_conn();
    c.q("RPUSH xl foo");
    c.q("MULTI");
    for line in [
        "BLPOP xl 0",
        "BLPOP xl 0",
        "BRPOPLPUSH xl t 0",
        "BLMOVE xl t LEFT LEFT 0",
        "BLMPOP 0 1 xl LEFT",
    ] {
        assert_eq!(q(&mut c, line), "+QUEUED");
    }
    assert_eq!(
        q(&mut c, "EXEC"),
        r#"[["xl", "foo"], (nil array), (nil), (nil), (nil array)]"#
    );
}

#[test]
fn client_unblock_and_blocked_clients_count() {
    let srv = server();
    let mut w = srv.raw_conn();
    let mut p = srv.raw_conn();
    let id = w.q("CLIENT ID").as_int().unwrap().to_string();
    assert_eq!(p.cmd(&["CLIENT", "UNBLOCK", &id]).as_int(), Some(0));
    w.send(&["BRPOP", "nothing", "0"]);
    wait_blocked(&mut p, 1);
    assert_eq!(p.cmd(&["CLIENT", "UNBLOCK", &id]).as_int(), Some(1));
    assert_eq!(w.read(), Resp::NilArray);
    w.send(&["BLMPOP", "0", "1", "nothing", "LEFT"]);
    wait_blocked(&mut p, 1);
    assert_eq!(
        p.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]).as_int(),
        Some(1)
    );
    assert_eq!(
        w.read().to_string(),
        "(error) UNBLOCKED client unblocked via CLIENT UNBLOCK"
    );
    wait_blocked(&mut p, 0);
    // A blocked client that disconnects stops counting and consumes nothing.
    let mut gone = srv.raw_conn();
    gone.send(&["BLPOP", "later", "0"]);
    wait_blocked(&mut p, 1);
    drop(gone);
    wait_blocked(&mut p, 0);
    p.q("RPUSH later v");
    assert_eq!(q(&mut p, "LRANGE later 0 -1"), r#"["v"]"#);
}

#[test]
fn blmove_across_shards() {
    let srv = server();
    let (src, dst) = two_shards("bm");
    let mut w = srv.raw_conn();
    let mut p = srv.raw_conn();
    w.send(&["BLMOVE", &src, &dst, "RIGHT", "LEFT", "5"]);
    wait_blocked(&mut p, 1);
    p.cmd(&["RPUSH", &src, "a", "b"]);
    assert_eq!(w.read(), common::bulk("b"));
    assert_eq!(p.cmd(&["LRANGE", &src, "0", "-1"]).to_string(), r#"["a"]"#);
    assert_eq!(p.cmd(&["LRANGE", &dst, "0", "-1"]).to_string(), r#"["b"]"#);
    // Destination of the wrong type: WRONGTYPE, the element stays in the source.
    p.cmd(&["DEL", &src, &dst]);
    p.cmd(&["SET", &dst, "str"]);
    w.send(&["BRPOPLPUSH", &src, &dst, "5"]);
    wait_blocked(&mut p, 1);
    p.cmd(&["RPUSH", &src, "foo"]);
    assert!(w.read().is_error());
    assert_eq!(
        p.cmd(&["LRANGE", &src, "0", "-1"]).to_string(),
        r#"["foo"]"#
    );
    // Same shard, self-referential.
    p.q("DEL self");
    w.send(&["BRPOPLPUSH", "self", "self", "5"]);
    wait_blocked(&mut p, 1);
    p.q("RPUSH self foo");
    assert_eq!(w.read(), common::bulk("foo"));
    assert_eq!(q(&mut p, "LRANGE self 0 -1"), r#"["foo"]"#);
}

#[test]
fn linked_blmoves_chain() {
    let srv = server();
    let mut w1 = srv.raw_conn();
    let mut w2 = srv.raw_conn();
    let mut p = srv.raw_conn();
    w1.send(&["BLMOVE", "list1", "list2", "RIGHT", "LEFT", "0"]);
    wait_blocked(&mut p, 1);
    w2.send(&["BLMOVE", "list2", "list3", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut p, 2);
    p.q("RPUSH list1 foo");
    assert_eq!(w1.read(), common::bulk("foo"));
    assert_eq!(w2.read(), common::bulk("foo"));
    assert_eq!(q(&mut p, "LRANGE list1 0 -1"), "[]");
    assert_eq!(q(&mut p, "LRANGE list2 0 -1"), "[]");
    assert_eq!(q(&mut p, "LRANGE list3 0 -1"), r#"["foo"]"#);
}

#[test]
fn blmpop_serves_waiters_in_order_after_exec() {
    let srv = server();
    let mut rd: Vec<RawConn> = (0..4).map(|_| srv.raw_conn()).collect();
    let mut p = srv.raw_conn();
    let cmds = [
        "BLMPOP 0 2 bl1 bl2 LEFT COUNT 1",
        "BLMPOP 0 2 bl1 bl2 RIGHT COUNT 10",
        "BLMPOP 0 2 bl1 bl2 LEFT COUNT 10",
        "BLMPOP 0 2 bl1 bl2 RIGHT COUNT 1",
    ];
    for (i, line) in cmds.iter().enumerate() {
        let args: Vec<&str> = line.split(' ').collect();
        rd[i].send(&args);
        wait_blocked(&mut p, i as i64 + 1);
    }
    p.q("MULTI");
    p.q("LPUSH bl1 a b c d e");
    p.q("LPUSH bl2 1 2 3 4 5");
    p.q("EXEC");
    assert_eq!(rd[0].read().to_string(), r#"["bl1", ["e"]]"#);
    assert_eq!(rd[1].read().to_string(), r#"["bl1", ["a", "b", "c", "d"]]"#);
    assert_eq!(
        rd[2].read().to_string(),
        r#"["bl2", ["5", "4", "3", "2", "1"]]"#
    );
    p.q("LPUSH bl2 1 2 3");
    assert_eq!(rd[3].read().to_string(), r#"["bl2", ["1"]]"#);
}

#[test]
fn many_blocked_poppers_each_served_once() {
    let srv = server();
    let port = srv.port();
    let n = 24;
    let keys: Vec<String> = (0..6).map(|i| format!("mk{i}")).collect();
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let keys = keys.clone();
            std::thread::spawn(move || {
                let mut c =
                    RawConn::new(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap());
                let mut args = vec!["BLPOP".to_string()];
                args.extend((0..keys.len()).map(|j| keys[(i + j) % keys.len()].clone()));
                args.push("10".into());
                c.cmd(&args)
            })
        })
        .collect();
    let mut p = srv.raw_conn();
    wait_blocked(&mut p, n as i64);
    for i in 0..n {
        p.cmd(&["RPUSH", &keys[i % keys.len()], &format!("v{i}")]);
    }
    let mut got: Vec<String> = handles
        .into_iter()
        .map(|h| match h.join().unwrap() {
            Resp::Array(v) => String::from_utf8(v[1].as_bytes().unwrap().to_vec()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    got.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    want.sort();
    assert_eq!(got, want);
    for k in &keys {
        assert_eq!(p.cmd(&["EXISTS", k]).as_int(), Some(0));
    }
}
