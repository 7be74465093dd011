//! SCAN, HSCAN, SSCAN and ZSCAN cursor and option parsing, byte for byte (Redis 7.0's
//! `parseScanCursorOrReply` and `scanGenericCommand`): invalid cursors, COUNT 0 / negative /
//! huge / not a number, MATCH "*" and binary patterns, TYPE for SCAN only, C-string semantics of
//! cursors and option names (an argument ends at its first NUL), the order of checks (cursor,
//! then key lookup, then options) and the replies of the compact encodings.
//! `DFLY_TEST_TARGET=redis` runs the same assertions against redis-server.
//!
//! SCAN's cursors are not compared: the keyspace is split over shards, so a SCAN of a small db
//! may take several calls where Redis needs one; its results are compared over a whole
//! iteration (every page checked for shape), its errors byte for byte.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{complete_replies, encode, parse_resp, quote, Resp, Server};

const SYNTAX: &[u8] = b"-ERR syntax error\r\n";
const NOT_INT: &[u8] = b"-ERR value is not an integer or out of range\r\n";
const BAD_CURSOR: &[u8] = b"-ERR invalid cursor\r\n";
const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
/// Redis `shared.emptyscan`.
const EMPTY: &[u8] = b"*2\r\n$1\r\n0\r\n*0\r\n";

/// One connection returning each reply's raw bytes.
struct Conn(TcpStream);

impl Conn {
    fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.0.write_all(&encode(args)).expect("write");
        let mut data = Vec::new();
        let mut buf = [0u8; 65536];
        while !complete_replies(&data) {
            let n = self.0.read(&mut buf).expect("read");
            assert!(n > 0, "connection closed after {}", quote(&data));
            data.extend_from_slice(&buf[..n]);
        }
        data
    }

    fn check(&mut self, args: &[&[u8]], want: &[u8]) {
        let got = self.cmd(args);
        let shown: Vec<String> = args.iter().map(|a| quote(a)).collect();
        assert_eq!(
            quote(&got),
            quote(want),
            "reply to {} differs",
            shown.join(" ")
        );
    }
}

impl Conn {
    /// Runs `SCAN <cursor> <opts>` from cursor 0 until it returns 0; the keys, sorted.
    fn scan_all(&mut self, opts: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut cursor = b"0".to_vec();
        let mut keys = Vec::new();
        for _ in 0..10_000 {
            let mut args: Vec<&[u8]> = vec![b"SCAN", &cursor];
            args.extend_from_slice(opts);
            let raw = self.cmd(&args);
            let page = match parse_resp(&raw) {
                Ok(Some((Resp::Array(v), n))) if n == raw.len() && v.len() == 2 => v,
                _ => panic!("SCAN {}: not a scan page: {}", quote(&cursor), quote(&raw)),
            };
            let next = page[0].as_bytes().expect("cursor").to_vec();
            let Resp::Array(items) = &page[1] else {
                panic!("SCAN: items not an array: {}", quote(&raw));
            };
            keys.extend(items.iter().map(|k| k.as_bytes().expect("key").to_vec()));
            if next == b"0" {
                keys.sort();
                return keys;
            }
            cursor = next;
        }
        panic!("SCAN {opts:?} did not end");
    }

    fn check_scan(&mut self, opts: &[&[u8]], want: &[&[u8]]) {
        let mut want: Vec<Vec<u8>> = want.iter().map(|k| k.to_vec()).collect();
        want.sort();
        let shown: Vec<String> = opts.iter().map(|a| quote(a)).collect();
        assert_eq!(
            self.scan_all(opts),
            want,
            "keys of SCAN {} differ",
            shown.join(" ")
        );
    }
}

/// A scan reply `[cursor, items]`.
fn page(cursor: &str, items: &[&[u8]]) -> Vec<u8> {
    let mut out = format!(
        "*2\r\n${}\r\n{cursor}\r\n*{}\r\n",
        cursor.len(),
        items.len()
    )
    .into_bytes();
    for it in items {
        out.extend_from_slice(format!("${}\r\n", it.len()).as_bytes());
        out.extend_from_slice(it);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn start() -> (Server, Conn) {
    let srv = Server::start(&["--proactor_threads=4"]);
    let mut c = Conn(srv.connect());
    c.check(&[b"FLUSHALL"], b"+OK\r\n");
    (srv, c)
}

#[test]
fn cursor_parsing() {
    let (_srv, mut c) = start();
    // (cursor, valid). The keyspace is empty, so a valid cursor ends the scan; the cursor is
    // checked before the key is looked up.
    let cases: &[(&[u8], bool)] = &[
        (b"0", true),
        (b"", true),
        (b"+0", true),
        (b"7", true),
        (b"-1", true),
        (b"18446744073709551615", true),
        (b"-18446744073709551615", true),
        (b"12\0junk", true),
        (b"\0", true),
        (b"\x001", true),
        (b"abc", false),
        (b"18446744073709551616", false),
        (b"-18446744073709551616", false),
        (b"99999999999999999999999", false),
        (b"-", false),
        (b"+", false),
        (b" 1", false),
        (b"1 ", false),
        (b"0x10", false),
        (b"1.0", false),
        (b"\t0", false),
    ];
    let scans: [&[&[u8]]; 4] = [
        &[b"SCAN"],
        &[b"HSCAN", b"nokey"],
        &[b"SSCAN", b"nokey"],
        &[b"ZSCAN", b"nokey"],
    ];
    for &(cur, valid) in cases {
        for scan in scans {
            let mut args = scan.to_vec();
            args.push(cur);
            c.check(&args, if valid { EMPTY } else { BAD_CURSOR });
        }
    }
}

#[test]
fn count_and_unknown_options() {
    let (_srv, mut c) = start();
    c.check(&[b"HSET", b"h", b"f", b"v"], b":1\r\n");
    c.check(&[b"SADD", b"s", b"1"], b":1\r\n");
    c.check(&[b"ZADD", b"z", b"1", b"m"], b":1\r\n");
    let scans: [&[&[u8]]; 4] = [
        &[b"SCAN", b"0"],
        &[b"HSCAN", b"h", b"0"],
        &[b"SSCAN", b"s", b"0"],
        &[b"ZSCAN", b"z", b"0"],
    ];
    let cases: &[(&[&[u8]], &[u8])] = &[
        (&[b"COUNT", b"0"], SYNTAX),
        (&[b"COUNT", b"-1"], SYNTAX),
        (&[b"count", b"-9223372036854775808"], SYNTAX),
        (&[b"COUNT", b"abc"], NOT_INT),
        (&[b"COUNT", b"1.5"], NOT_INT),
        (&[b"COUNT", b""], NOT_INT),
        (&[b"COUNT", b" 1"], NOT_INT),
        (&[b"COUNT", b"9223372036854775808"], NOT_INT),
        (&[b"COUNT"], SYNTAX),
        (&[b"MATCH"], SYNTAX),
        (&[b"COUNT", b"5", b"COUNT", b"0"], SYNTAX),
        (&[b"COUNT", b"5", b"BOGUS"], SYNTAX),
        (&[b"MATCH", b"*", b"COUNT"], SYNTAX),
        (&[b"LIMIT", b"5"], SYNTAX),
        (&[b"count\0x", b"0"], SYNTAX),
    ];
    for scan in scans {
        for (opts, want) in cases {
            let args: Vec<&[u8]> = scan.iter().chain(opts.iter()).copied().collect();
            c.check(&args, want);
        }
    }
    // Valid counts, whatever their size (C strings: "count\0x" is COUNT).
    c.check_scan(&[b"MATCH", b"f*", b"COUNT", b"1000000000000"], &[]);
    c.check_scan(&[b"count\0x", b"1", b"MATCH", b"?"], &[b"h", b"s", b"z"]);
    c.check(
        &[b"HSCAN", b"h", b"0", b"count\0x", b"9223372036854775807"],
        &page("0", &[b"f", b"v"]),
    );
    c.check(&[b"SSCAN", b"s", b"0", b"CoUnT", b"1"], &page("0", &[b"1"]));
    c.check(
        &[b"ZSCAN", b"z", b"0", b"COUNT", b"1000000000000"],
        &page("0", &[b"m", b"1"]),
    );
}

#[test]
fn type_is_for_scan_only() {
    let (_srv, mut c) = start();
    c.check(&[b"SET", b"str", b"1"], b"+OK\r\n");
    c.check(&[b"HSET", b"h", b"f", b"v"], b":1\r\n");
    c.check(&[b"SADD", b"s", b"a"], b":1\r\n");
    c.check(&[b"ZADD", b"z", b"1", b"m"], b":1\r\n");
    c.check(&[b"RPUSH", b"l", b"x"], b":1\r\n");
    for (t, key) in [
        (&b"string"[..], &b"str"[..]),
        (b"STRING", b"str"),
        (b"string\0junk", b"str"),
        (b"hash", b"h"),
        (b"set", b"s"),
        (b"zset", b"z"),
        (b"List", b"l"),
    ] {
        c.check_scan(&[b"TYPE", t], &[key]);
        c.check_scan(&[b"TYPE", t, b"MATCH", b"*"], &[key]);
        c.check_scan(&[b"MATCH", key, b"TYPE", t, b"COUNT", b"1"], &[key]);
    }
    // Redis 7.0: an unknown type matches nothing (no error).
    c.check_scan(&[b"TYPE", b"nosuchtype"], &[]);
    c.check_scan(&[b"TYPE", b"str"], &[]);
    c.check_scan(&[], &[b"str", b"h", b"s", b"z", b"l"]);
    c.check(&[b"SCAN", b"0", b"TYPE"], SYNTAX);
    for (scan, key) in [
        (&b"HSCAN"[..], &b"h"[..]),
        (b"SSCAN", b"s"),
        (b"ZSCAN", b"z"),
    ] {
        c.check(&[scan, key, b"0", b"TYPE", b"hash"], SYNTAX);
        c.check(&[scan, key, b"0", b"TYPE", b"string"], SYNTAX);
        // Missing key: the empty scan, options unread; wrong type: WRONGTYPE first.
        c.check(&[scan, b"nokey", b"0", b"TYPE", b"hash"], EMPTY);
        c.check(&[scan, b"nokey", b"0", b"COUNT", b"0"], EMPTY);
        c.check(&[scan, b"str", b"0", b"TYPE", b"hash"], WRONGTYPE);
        c.check(&[scan, b"str", b"0", b"COUNT", b"0"], WRONGTYPE);
        c.check(&[scan, b"str", b"0"], WRONGTYPE);
    }
}

#[test]
fn match_patterns_and_compact_encodings() {
    let (_srv, mut c) = start();
    // Keys and a listpack hash, an intset, a hashtable set and a listpack zset, with binary
    // strings.
    c.check(&[b"SET", b"k\0\xff", b"1"], b"+OK\r\n");
    c.check(&[b"SET", b"k1", b"1"], b"+OK\r\n");
    c.check(
        &[
            b"HSET", b"h", b"a", b"1", b"b", b"2", b"\0bin", b"v\0", b"c", b"3",
        ],
        b":4\r\n",
    );
    c.check(&[b"SADD", b"is", b"3", b"-1", b"2"], b":3\r\n");
    c.check(&[b"SADD", b"ts", b"a\0b", b"xyz", b"abc"], b":3\r\n");
    c.check(
        &[
            b"ZADD", b"z", b"1", b"a", b"1.5", b"b", b"-2", b"\0c", b"3", b"x*",
        ],
        b":4\r\n",
    );

    c.check_scan(&[b"MATCH", b"k\0*"], &[b"k\0\xff"]);
    c.check_scan(&[b"MATCH", b"k?\xff"], &[b"k\0\xff"]);
    c.check_scan(&[b"MATCH", b"k[0-9]"], &[b"k1"]);
    c.check_scan(&[b"MATCH", b"k*", b"COUNT", b"2"], &[b"k1", b"k\0\xff"]);
    c.check_scan(&[b"MATCH", b""], &[]);
    c.check_scan(&[b"MATCH", b"nothing*"], &[]);

    // A listpack hash answers everything in insertion order with cursor 0, whatever the cursor
    // and COUNT; MATCH applies to fields.
    let all: &[&[u8]] = &[b"a", b"1", b"b", b"2", b"\0bin", b"v\0", b"c", b"3"];
    for cur in [&b"0"[..], b"5", b"18446744073709551615"] {
        c.check(&[b"HSCAN", b"h", cur], &page("0", all));
        c.check(&[b"HSCAN", b"h", cur, b"COUNT", b"1"], &page("0", all));
        c.check(&[b"HSCAN", b"h", cur, b"MATCH", b"*"], &page("0", all));
    }
    c.check(
        &[b"HSCAN", b"h", b"0", b"MATCH", b"\0*"],
        &page("0", &[b"\0bin", b"v\0"]),
    );
    c.check(
        &[b"HSCAN", b"h", b"0", b"MATCH", b"[ac]"],
        &page("0", &[b"a", b"1", b"c", b"3"]),
    );
    c.check(&[b"HSCAN", b"h", b"0", b"MATCH", b"1"], &page("0", &[]));
    // The last MATCH wins.
    c.check(
        &[b"HSCAN", b"h", b"0", b"MATCH", b"b", b"MATCH", b"a"],
        &page("0", &[b"a", b"1"]),
    );

    // An intset answers everything, ascending; MATCH sees the decimal text.
    c.check(&[b"SSCAN", b"is", b"0"], &page("0", &[b"-1", b"2", b"3"]));
    c.check(
        &[b"SSCAN", b"is", b"0", b"MATCH", b"-*"],
        &page("0", &[b"-1"]),
    );
    c.check(
        &[b"SSCAN", b"is", b"99", b"COUNT", b"1"],
        &page("0", &[b"-1", b"2", b"3"]),
    );
    // A small hashtable set: one call with the default COUNT covers it.
    c.check(
        &[b"SSCAN", b"ts", b"0", b"MATCH", b"a\0*"],
        &page("0", &[b"a\0b"]),
    );
    c.check(
        &[b"SSCAN", b"ts", b"0", b"MATCH", b"?b?"],
        &page("0", &[b"abc"]),
    );

    // A listpack zset: by score, integral scores printed as integers.
    c.check(
        &[b"ZSCAN", b"z", b"0"],
        &page("0", &[b"\0c", b"-2", b"a", b"1", b"b", b"1.5", b"x*", b"3"]),
    );
    c.check(
        &[b"ZSCAN", b"z", b"0", b"MATCH", b"\0?"],
        &page("0", &[b"\0c", b"-2"]),
    );
    c.check(
        &[b"ZSCAN", b"z", b"0", b"MATCH", b"x\\*"],
        &page("0", &[b"x*", b"3"]),
    );
    c.check(
        &[b"ZSCAN", b"z", b"7", b"COUNT", b"1"],
        &page("0", &[b"\0c", b"-2", b"a", b"1", b"b", b"1.5", b"x*", b"3"]),
    );
}

#[test]
fn novalues_is_hscan_only() {
    let (_srv, mut c) = start();
    c.check(&[b"HSET", b"h", b"a", b"1", b"b", b"2"], b":2\r\n");
    c.check(&[b"SADD", b"s", b"1"], b":1\r\n");
    c.check(&[b"ZADD", b"z", b"1", b"m"], b":1\r\n");
    if common::against_redis() {
        // NOVALUES came with Redis 7.4.
        c.check(&[b"HSCAN", b"h", b"0", b"NOVALUES"], SYNTAX);
    } else {
        c.check(
            &[b"HSCAN", b"h", b"0", b"NOVALUES"],
            &page("0", &[b"a", b"b"]),
        );
        c.check(
            &[
                b"HSCAN",
                b"h",
                b"0",
                b"novalues",
                b"MATCH",
                b"b",
                b"COUNT",
                b"3",
            ],
            &page("0", &[b"b"]),
        );
        c.check(&[b"HSCAN", b"h", b"0", b"NOVALUES", b"COUNT", b"0"], SYNTAX);
    }
    c.check(&[b"SCAN", b"0", b"NOVALUES"], SYNTAX);
    c.check(&[b"SSCAN", b"s", b"0", b"NOVALUES"], SYNTAX);
    c.check(&[b"ZSCAN", b"z", b"0", b"NOVALUES"], SYNTAX);
}

/// Big encodings: a COUNT larger than the collection returns all of it in one call.
#[test]
fn huge_count_returns_big_collections_whole() {
    let (_srv, mut c) = start();
    let n = 1000;
    let mut hset: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"bh".to_vec()];
    let mut sadd: Vec<Vec<u8>> = vec![b"SADD".to_vec(), b"bs".to_vec()];
    let mut zadd: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), b"bz".to_vec()];
    for i in 0..n {
        hset.push(format!("f{i}").into_bytes());
        hset.push(format!("v{i}").into_bytes());
        sadd.push(format!("m{i}").into_bytes());
        zadd.push(i.to_string().into_bytes());
        zadd.push(format!("m{i}").into_bytes());
    }
    for cmd in [&hset, &sadd, &zadd] {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_slice()).collect();
        assert_eq!(c.cmd(&args), format!(":{n}\r\n").into_bytes());
    }
    for (args, items) in [
        (
            &[&b"HSCAN"[..], b"bh", b"0", b"COUNT", b"1000000000000"][..],
            2 * n,
        ),
        (
            &[b"SSCAN", b"bs", b"0", b"COUNT", b"9223372036854775807"],
            n,
        ),
        (&[b"ZSCAN", b"bz", b"0", b"COUNT", b"1000000000000"], 2 * n),
    ] {
        let got = c.cmd(args);
        let head = format!("*2\r\n$1\r\n0\r\n*{items}\r\n");
        assert!(
            got.starts_with(head.as_bytes()),
            "{:?}: {}",
            args,
            quote(&got[..got.len().min(80)])
        );
    }
    c.check_scan(&[b"COUNT", b"1000000000000"], &[b"bh", b"bs", b"bz"]);
}
