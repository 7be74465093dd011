//! Integration tests for SORT / SORT_RO against the real binary (4 shard threads), with Redis
//! 7.0's exact replies. Tests over lists, sorted sets and hashes skip themselves while those
//! families are not built into the binary. `DFLY_TEST_TARGET=redis` runs them against
//! redis-server.

mod common;

use common::{bulk, err, RawConn, Resp, Server};
use damselfly::engine::shard_of;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SCORES: &str = "ERR One or more scores can't be converted into double";

fn start() -> Server {
    Server::start(&["--proactor_threads=4"])
}

fn int(n: i64) -> Resp {
    Resp::Int(n)
}

fn arr(xs: &[&str]) -> Resp {
    Resp::Array(xs.iter().map(|x| bulk(x)).collect())
}

/// Does the server know this command (families built in parallel may be missing)?
fn has(c: &mut RawConn, line: &str) -> bool {
    match c.q(line) {
        Resp::Error(e) => !e.starts_with(b"ERR unknown command"),
        _ => true,
    }
}

/// A key on a different shard (of 4) than `of`.
fn other_shard(of: &str, prefix: &str) -> String {
    let s = shard_of(of.as_bytes(), 4);
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| shard_of(k.as_bytes(), 4) != s)
        .unwrap()
}

#[test]
fn numeric_alpha_limit_desc_on_sets() {
    let s = start();
    let mut c = s.raw_conn();
    c.q("SADD s 3 1 2 10 -5");
    assert_eq!(c.q("SORT s"), arr(&["-5", "1", "2", "3", "10"]));
    assert_eq!(c.q("SORT s DESC"), arr(&["10", "3", "2", "1", "-5"]));
    assert_eq!(c.q("SORT s ALPHA"), arr(&["-5", "1", "10", "2", "3"]));
    assert_eq!(c.q("SORT s LIMIT 1 2"), arr(&["1", "2"]));
    assert_eq!(c.q("SORT s LIMIT -1 2"), arr(&["-5", "1"]));
    assert_eq!(c.q("SORT s LIMIT 1 -1"), arr(&["1", "2", "3", "10"]));
    assert_eq!(c.q("SORT s LIMIT 10 2"), arr(&[]));
    assert_eq!(c.q("SORT s LIMIT 0 0"), arr(&[]));
    assert_eq!(c.q("SORT s DESC LIMIT 0 2 ALPHA"), arr(&["3", "2"]));
    assert_eq!(c.q("SORT_RO s LIMIT 0 1"), arr(&["-5"]));
    c.q("SADD t a b 1");
    assert_eq!(c.q("SORT t"), err(SCORES));
    assert_eq!(c.q("SORT t ALPHA"), arr(&["1", "a", "b"]));
    // strtod semantics: leading spaces, hex, inf are numbers; NaN and trailing junk are not.
    c.cmd(&["SADD", "f", " 2", "0x10", "-inf", "1.5"]);
    assert_eq!(c.q("SORT f"), arr(&["-inf", "1.5", " 2", "0x10"]));
    c.cmd(&["SADD", "g", "1", "nan"]);
    assert_eq!(c.q("SORT g"), err(SCORES));
    c.cmd(&["SADD", "h", "1", "2 "]);
    assert_eq!(c.q("SORT h"), err(SCORES));
    // Equal scores tie-break on the bytes.
    c.cmd(&["SADD", "e", "1.0", "1", "01"]);
    assert_eq!(c.q("SORT e"), arr(&["01", "1", "1.0"]));
    assert_eq!(c.q("SORT e DESC"), arr(&["1.0", "1", "01"]));
}

#[test]
fn errors() {
    let s = start();
    let mut c = s.raw_conn();
    c.q("SET str x");
    c.q("SADD s 1");
    assert_eq!(c.q("SORT str"), err(WRONGTYPE));
    assert_eq!(c.q("SORT_RO str"), err(WRONGTYPE));
    assert_eq!(c.q("SORT s FOO"), err("ERR syntax error"));
    assert_eq!(c.q("SORT s LIMIT 1"), err("ERR syntax error"));
    assert_eq!(
        c.q("SORT s LIMIT x 1"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q("SORT s BY"), err("ERR syntax error"));
    assert_eq!(c.q("SORT_RO s STORE d"), err("ERR syntax error"));
    // Syntax errors come before the type check.
    assert_eq!(c.q("SORT str FOO"), err("ERR syntax error"));
    assert_eq!(c.q("SORT nokey"), arr(&[]));
    assert_eq!(c.q("SORT nokey STORE d"), int(0));
    assert_eq!(c.q("EXISTS d"), int(0));
    assert_eq!(
        c.q("COMMAND GETKEYS SORT s BY w_* STORE d GET # STORE d2"),
        arr(&["s", "d2"])
    );
    assert_eq!(c.q("COMMAND GETKEYS SORT_RO s BY w_*"), arr(&["s"]));
}

#[test]
fn by_and_get_patterns_across_shards() {
    let s = start();
    let mut c = s.raw_conn();
    c.q("SADD s 1 2 3");
    c.q("MSET w_1 30 w_2 20 w_3 10 o_1 one o_3 three");
    assert_eq!(c.q("SORT s BY w_*"), arr(&["3", "2", "1"]));
    assert_eq!(c.q("SORT s BY w_* DESC"), arr(&["1", "2", "3"]));
    assert_eq!(c.q("SORT s BY w_* LIMIT 0 1"), arr(&["3"]));
    assert_eq!(
        c.q("SORT s BY w_* GET o_* GET #"),
        Resp::Array(vec![
            bulk("three"),
            bulk("3"),
            Resp::Nil,
            bulk("2"),
            bulk("one"),
            bulk("1")
        ])
    );
    assert_eq!(
        c.q("SORT_RO s GET nostar"),
        Resp::Array(vec![Resp::Nil, Resp::Nil, Resp::Nil])
    );
    // A constant BY pattern does not sort: sets then come out in their own order, and with
    // STORE they are sorted ALPHA.
    assert_eq!(c.q("SORT s BY nosort STORE d"), int(3));
    assert_eq!(c.q("TYPE d"), Resp::Simple(b"list".to_vec()));
    assert_eq!(c.q("SORT d BY nosort"), arr(&["1", "2", "3"]));
    assert_eq!(c.q("SORT d BY nosort DESC"), arr(&["3", "2", "1"]));
    assert_eq!(c.q("SORT d BY nosort LIMIT 1 5"), arr(&["2", "3"]));
    assert_eq!(c.q("SORT d BY nosort DESC LIMIT 1 1"), arr(&["2"]));
    // Missing weights count as 0 (numeric) or sort first (ALPHA).
    c.q("SADD m 1 2 3 4");
    assert_eq!(c.q("SORT m BY w_*"), arr(&["4", "3", "2", "1"]));
    c.q("SET w_4 abc");
    assert_eq!(c.q("SORT m BY w_*"), err(SCORES));
    assert_eq!(c.q("SORT m BY w_* ALPHA"), arr(&["3", "2", "1", "4"]));
    // STORE with GET: missing values become empty strings; the destination on another shard
    // loses its old type and TTL.
    let dst = other_shard("s", "dst");
    c.cmd(&["SET", &dst, "x", "EX", "100"]);
    assert_eq!(
        c.cmd(&["SORT", "s", "BY", "w_*", "GET", "o_*", "STORE", &dst]),
        int(3)
    );
    assert_eq!(c.cmd(&["TTL", &dst]), int(-1));
    assert_eq!(
        c.cmd(&["SORT", &dst, "BY", "nosort"]),
        arr(&["three", "", "one"])
    );
    assert_eq!(
        c.cmd(&["SORT", "s", "STORE", &dst, "LIMIT", "5", "5"]),
        int(0)
    );
    assert_eq!(c.cmd(&["EXISTS", &dst]), int(0));
    // Inside MULTI.
    c.q("MULTI");
    c.q("SORT s BY w_* GET o_*");
    c.cmd(&["SORT", "s", "BY", "w_*", "STORE", &dst]);
    assert_eq!(
        c.q("EXEC"),
        Resp::Array(vec![
            Resp::Array(vec![bulk("three"), Resp::Nil, bulk("one")]),
            int(3)
        ])
    );
}

/// BY/GET lookups see one consistent snapshot while another client swaps the weights with an
/// atomic MSET across shards.
#[test]
fn pattern_lookups_are_atomic() {
    let s = start();
    let mut c = s.raw_conn();
    c.q("SADD s a b");
    c.q("MSET w_a 1 w_b 2");
    let mut w = s.raw_conn();
    let writer = std::thread::spawn(move || {
        for i in 0..400 {
            if i % 2 == 0 {
                w.q("MSET w_a 2 w_b 1");
            } else {
                w.q("MSET w_a 1 w_b 2");
            }
        }
    });
    for _ in 0..400 {
        let r = c.q("SORT s BY w_* GET w_*");
        assert_eq!(r, arr(&["1", "2"]));
    }
    writer.join().unwrap();
}

#[test]
fn lists_zsets_and_hash_fields() {
    let s = start();
    let mut c = s.raw_conn();
    if !has(&mut c, "RPUSH l 3 1 2") {
        eprintln!("skipped: no list commands in this build");
        return;
    }
    assert_eq!(c.q("SORT l"), arr(&["1", "2", "3"]));
    assert_eq!(c.q("SORT l BY nosort"), arr(&["3", "1", "2"]));
    assert_eq!(c.q("SORT l BY nosort DESC"), arr(&["2", "1", "3"]));
    assert_eq!(c.q("SORT l BY nosort LIMIT 1 1"), arr(&["1"]));
    assert_eq!(c.q("SORT l BY nosort DESC LIMIT 1 5"), arr(&["1", "3"]));
    assert_eq!(c.q("SORT l DESC STORE l2"), int(3));
    assert_eq!(c.q("LRANGE l2 0 -1"), arr(&["3", "2", "1"]));
    if has(&mut c, "ZADD z 3 a 1 b 2 c") {
        assert_eq!(c.q("SORT z ALPHA"), arr(&["a", "b", "c"]));
        assert_eq!(c.q("SORT z BY nosort"), arr(&["b", "c", "a"]));
        assert_eq!(c.q("SORT z BY nosort DESC LIMIT 0 2"), arr(&["a", "c"]));
        assert_eq!(c.q("SORT z BY nosort LIMIT 1 1"), arr(&["c"]));
    }
    if has(&mut c, "HSET h_1 f 20 g x") {
        c.q("HSET h_2 f 10");
        c.q("RPUSH hl 1 2");
        assert_eq!(c.q("SORT hl BY h_*->f"), arr(&["2", "1"]));
        assert_eq!(
            c.q("SORT hl BY h_*->f GET h_*->g GET #"),
            Resp::Array(vec![Resp::Nil, bulk("2"), bulk("x"), bulk("1")])
        );
        // A field pattern against a string, or a string pattern against a hash: nil.
        c.q("SET s_1 v");
        assert_eq!(
            c.q("SORT hl GET s_*->f GET h_*"),
            Resp::Array(vec![Resp::Nil, Resp::Nil, Resp::Nil, Resp::Nil])
        );
    }
}
