//! Client-supplied numbers at the edges of their types: counts, indexes, offsets, numkeys, DB
//! indexes and encoding thresholds, where a narrowing or sign-changing conversion would wrap. Every
//! expected reply is the byte-exact reply of Redis 7.0.15 to the same commands; check them with
//! `DFLY_TEST_TARGET=redis cargo test -p damselfly --test casts_bounds`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{complete_replies, encode, Server};

/// Sends one command (arguments split on spaces) and returns the raw bytes of its reply.
fn exchange(s: &mut TcpStream, line: &str) -> Vec<u8> {
    let args: Vec<&str> = line.split_whitespace().collect();
    s.write_all(&encode(&args)).expect("write failed");
    let mut data = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while !complete_replies(&data) {
        let n = s
            .read(&mut chunk)
            .unwrap_or_else(|e| panic!("`{line}`: read failed: {e}"));
        assert!(n > 0, "`{line}`: connection closed");
        data.extend_from_slice(&chunk[..n]);
    }
    data
}

/// Runs `cases` in order on one connection and reports every reply that differs.
fn check(s: &mut TcpStream, cases: &[(&str, &[u8])]) {
    let mut bad = Vec::new();
    for (line, want) in cases {
        let got = exchange(s, line);
        if got != *want {
            bad.push(format!(
                "`{line}`\n    want {}\n    got  {}",
                common::quote(want),
                common::quote(&got)
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} mismatches:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

fn start() -> (Server, TcpStream) {
    let srv = Server::start(&["--proactor_threads=4"]);
    let s = srv.connect();
    (srv, s)
}

/// SELECT, MOVE and COPY ... DB read a C `int` (Redis `getIntFromObjectOrReply`): an integer
/// outside it is a range error, not "DB index is out of range" (which is what a 64-bit compare
/// against the database count answered before).
#[test]
fn db_index_is_a_c_int() {
    let (_srv, mut s) = start();
    check(
        &mut s,
        &[
            (
                "SELECT 4294967296",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            (
                "SELECT 2147483648",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            (
                "SELECT -2147483649",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            (
                "SELECT -9223372036854775808",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            ("SELECT 2147483647", b"-ERR DB index is out of range\r\n"),
            ("SELECT -2147483648", b"-ERR DB index is out of range\r\n"),
            ("SELECT -1", b"-ERR DB index is out of range\r\n"),
            (
                "SELECT abc",
                b"-ERR value is not an integer or out of range\r\n",
            ),
            ("SET k v", b"+OK\r\n"),
            (
                "MOVE k 4294967296",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            (
                "MOVE k -2147483649",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            ("MOVE k 2147483647", b"-ERR DB index is out of range\r\n"),
            (
                "MOVE k abc",
                b"-ERR value is not an integer or out of range\r\n",
            ),
            ("MOVE k -1", b"-ERR DB index is out of range\r\n"),
            (
                "COPY k k2 DB 2147483648",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            (
                "COPY k k2 DB -9223372036854775808",
                b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ),
            (
                "COPY k k2 DB 2147483647",
                b"-ERR DB index is out of range\r\n",
            ),
            (
                "COPY k k2 DB abc",
                b"-ERR value is not an integer or out of range\r\n",
            ),
            ("SWAPDB 4294967296 0", b"-ERR invalid first DB index\r\n"),
            ("SWAPDB 0 -2147483649", b"-ERR invalid second DB index\r\n"),
            ("SWAPDB 0 2147483647", b"-ERR DB index is out of range\r\n"),
            ("MOVE k 1", b":1\r\n"),
            ("SELECT 1", b"+OK\r\n"),
            ("GET k", b"$1\r\nv\r\n"),
        ],
    );
}

/// LPOS RANK -9223372036854775808: Redis 7.0 negates the rank in a C long (LONG_MIN stays
/// negative), so it behaves as RANK -1 whose COUNT never stops the scan. We used to reject it with
/// Redis 7.2's range error.
#[test]
fn lpos_rank_long_min() {
    let (_srv, mut s) = start();
    check(
        &mut s,
        &[
            ("RPUSH l c a c b c d c", b":7\r\n"),
            ("LPOS l c RANK -9223372036854775808", b":6\r\n"),
            (
                "LPOS l c RANK -9223372036854775808 COUNT 1",
                b"*4\r\n:6\r\n:4\r\n:2\r\n:0\r\n",
            ),
            (
                "LPOS l c RANK -9223372036854775808 COUNT 2",
                b"*4\r\n:6\r\n:4\r\n:2\r\n:0\r\n",
            ),
            (
                "LPOS l c RANK -9223372036854775808 COUNT 0",
                b"*4\r\n:6\r\n:4\r\n:2\r\n:0\r\n",
            ),
            (
                "LPOS l c RANK -9223372036854775808 COUNT 1 MAXLEN 3",
                b"*2\r\n:6\r\n:4\r\n",
            ),
            ("LPOS l c RANK -9223372036854775808 MAXLEN 1", b":6\r\n"),
            ("LPOS l x RANK -9223372036854775808 COUNT 1", b"*0\r\n"),
            ("LPOS l x RANK -9223372036854775808", b"$-1\r\n"),
            ("LPOS l c RANK -9223372036854775807 COUNT 1", b"*0\r\n"),
            ("LPOS l c RANK -1 COUNT 1", b"*1\r\n:6\r\n"),
            (
                "LPOS l c RANK -2 COUNT 9223372036854775807",
                b"*3\r\n:4\r\n:2\r\n:0\r\n",
            ),
            ("LPOS nokey c RANK -9223372036854775808", b"$-1\r\n"),
            ("LPOS nokey c RANK -9223372036854775808 COUNT 1", b"*0\r\n"),
        ],
    );
}

/// zset-max-listpack-entries can be raised far past 65535 and Redis then keeps a 70000-member
/// zset listpack-encoded. Our compact encoding counts entries in a u16 header: it now saturates
/// (and is counted by walking) instead of capping the encoding at 65535 entries (OBJECT ENCODING
/// said skiplist) or wrapping.
#[test]
fn zset_listpack_past_65535_entries() {
    let (_srv, mut s) = start();
    // The source is built as a skiplist (default thresholds), which is fast to fill.
    for chunk in 0..70 {
        let mut line = String::from("ZADD src");
        for i in chunk * 1000..(chunk + 1) * 1000 {
            line.push_str(&format!(" {i} m{i:06}"));
        }
        assert_eq!(exchange(&mut s, &line), b":1000\r\n");
    }
    check(
        &mut s,
        &[
            ("OBJECT ENCODING src", b"$8\r\nskiplist\r\n"),
            ("CONFIG SET zset-max-listpack-entries 100000", b"+OK\r\n"),
            ("ZUNIONSTORE z 1 src", b":70000\r\n"),
            ("OBJECT ENCODING z", b"$8\r\nlistpack\r\n"),
            ("ZCARD z", b":70000\r\n"),
            (
                "ZRANGE z 65534 65537 WITHSCORES",
                b"*8\r\n$7\r\nm065534\r\n$5\r\n65534\r\n$7\r\nm065535\r\n$5\r\n65535\r\n\
                  $7\r\nm065536\r\n$5\r\n65536\r\n$7\r\nm065537\r\n$5\r\n65537\r\n",
            ),
            ("ZSCORE z m069999", b"$5\r\n69999\r\n"),
            ("ZRANK z m066000", b":66000\r\n"),
            ("ZADD z 0.5 extra", b":1\r\n"),
            ("ZCARD z", b":70001\r\n"),
            ("OBJECT ENCODING z", b"$8\r\nlistpack\r\n"),
            ("ZRANK z m065535", b":65536\r\n"),
            ("ZREM z extra m000001", b":2\r\n"),
            ("ZCARD z", b":69999\r\n"),
            (
                "ZPOPMIN z 2",
                b"*4\r\n$7\r\nm000000\r\n$1\r\n0\r\n$7\r\nm000002\r\n$1\r\n2\r\n",
            ),
            ("ZREMRANGEBYRANK z 0 4463", b":4464\r\n"),
            ("ZCARD z", b":65533\r\n"),
            (
                "ZRANGE z 0 1 WITHSCORES",
                b"*4\r\n$7\r\nm004467\r\n$4\r\n4467\r\n$7\r\nm004468\r\n$4\r\n4468\r\n",
            ),
            ("ZADD z -1 a -2 b -3 c", b":3\r\n"),
            ("ZCARD z", b":65536\r\n"),
            (
                "ZRANGE z -2 -1 WITHSCORES",
                b"*4\r\n$7\r\nm069998\r\n$5\r\n69998\r\n$7\r\nm069999\r\n$5\r\n69999\r\n",
            ),
            // Past the threshold it converts, as before.
            ("CONFIG SET zset-max-listpack-entries 65536", b"+OK\r\n"),
            ("ZADD z -6 f", b":1\r\n"),
            ("OBJECT ENCODING z", b"$8\r\nskiplist\r\n"),
            ("ZCARD z", b":65537\r\n"),
        ],
    );
}

/// Extreme COUNT / LIMIT / index / offset / numkeys values on the commands whose conversions were
/// audited and found correct (they clamp or range-check before converting): pins those replies.
#[test]
fn extreme_counts_indexes_and_offsets() {
    let (_srv, mut s) = start();
    check(
        &mut s,
        &[
        ("RPUSH l a b c d e f g", b":7\r\n"),
        ("LRANGE l -9223372036854775808 9223372036854775807", b"*7\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"),
        ("LRANGE l 9223372036854775807 -9223372036854775808", b"*0\r\n"),
        ("LRANGE l -9223372036854775808 -9223372036854775807", b"*0\r\n"),
        ("LINDEX l -9223372036854775808", b"$-1\r\n"),
        ("LINDEX l 9223372036854775807", b"$-1\r\n"),
        ("LSET l -9223372036854775808 x", b"-ERR index out of range\r\n"),
        ("LSET l 9223372036854775807 x", b"-ERR index out of range\r\n"),
        ("LPOS l c COUNT 9223372036854775807 MAXLEN 9223372036854775807", b"*1\r\n:2\r\n"),
        ("LPOS l c RANK 9223372036854775807", b"$-1\r\n"),
        ("LPOS l c RANK -9223372036854775807", b"$-1\r\n"),
        ("LPOS l c COUNT -1", b"-ERR COUNT can't be negative\r\n"),
        ("LPOS l c MAXLEN -9223372036854775808", b"-ERR MAXLEN can't be negative\r\n"),
        ("LPOP l 0", b"*0\r\n"),
        ("LPOP l -1", b"-ERR value is out of range, must be positive\r\n"),
        ("LPOP l 9223372036854775808", b"-ERR value is out of range, must be positive\r\n"),
        ("LMPOP 9223372036854775807 l LEFT", b"-ERR syntax error\r\n"),
        ("LMPOP 9223372036854775806 l LEFT", b"-ERR syntax error\r\n"),
        ("LMPOP 2147483648 l LEFT", b"-ERR syntax error\r\n"),
        ("LMPOP 0 l LEFT", b"-ERR numkeys should be greater than 0\r\n"),
        ("LMPOP 1 l LEFT COUNT 0", b"-ERR count should be greater than 0\r\n"),
        ("LMPOP 1 l LEFT COUNT -9223372036854775808", b"-ERR count should be greater than 0\r\n"),
        ("LMPOP 1 l LEFT COUNT 9223372036854775807", b"*2\r\n$1\r\nl\r\n*7\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"),
        ("RPUSH l a b c d e f g", b":7\r\n"),
        ("SORT l LIMIT 2 9223372036854775807 ALPHA", b"*5\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"),
        ("SORT l LIMIT 9223372036854775807 9223372036854775807 ALPHA", b"*0\r\n"),
        ("SORT l LIMIT -9223372036854775808 2 ALPHA", b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        ("SORT l LIMIT 3 -9223372036854775808 ALPHA", b"*4\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"),
        ("SORT l LIMIT 3 9223372036854775808 ALPHA", b"-ERR value is not an integer or out of range\r\n"),
        ("LREM l -9223372036854775808 a", b":1\r\n"),
        ("LTRIM l -9223372036854775807 9223372036854775807", b"+OK\r\n"),
        ("LRANGE l 0 -1", b"*6\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"),
        ("LTRIM l 9223372036854775807 -9223372036854775808", b"+OK\r\n"),
        ("EXISTS l", b":0\r\n"),
        ("SET s foobar", b"+OK\r\n"),
        ("GETRANGE s -9223372036854775808 9223372036854775807", b"$6\r\nfoobar\r\n"),
        ("GETRANGE s 9223372036854775807 -9223372036854775808", b"$0\r\n\r\n"),
        ("GETRANGE s -9223372036854775808 -9223372036854775807", b"$1\r\nf\r\n"),
        ("SETRANGE s 9223372036854775807 x", b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"),
        ("SETRANGE s -1 x", b"-ERR offset is out of range\r\n"),
        ("SETRANGE s 536870912 x", b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"),
        ("BITCOUNT s -9223372036854775808 9223372036854775807", b":26\r\n"),
        ("BITCOUNT s -9223372036854775808 9223372036854775807 BIT", b":26\r\n"),
        ("BITCOUNT s 9223372036854775807 -9223372036854775808 BIT", b":0\r\n"),
        ("BITCOUNT s 1152921504606846976 9223372036854775807 BIT", b":0\r\n"),
        ("BITPOS s 1 -9223372036854775808 9223372036854775807", b":1\r\n"),
        ("BITPOS s 0 -9223372036854775808 9223372036854775807 BIT", b":0\r\n"),
        ("BITPOS s 1 1152921504606846976", b":-1\r\n"),
        ("BITPOS s 0 0 -9223372036854775808 BIT", b":0\r\n"),
        ("SETBIT s 4294967296 1", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("SETBIT s -1 1", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("SETBIT s 9223372036854775807 1", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("GETBIT s 9223372036854775807", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("BITFIELD s GET u8 9223372036854775807", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("BITFIELD s GET u8 #1152921504606846976", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("BITFIELD s GET u8 #-1", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("BITFIELD s GET i64 #2305843009213693952", b"*1\r\n:7381240782615871488\r\n"),
        ("BITFIELD s GET i64 #144115188075855872", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("BITFIELD s GET i64 #-9223372036854775808", b"*1\r\n:7381240782615871488\r\n"),
        ("BITFIELD s GET i2 #4611686018427387904", b"-ERR bit offset is not an integer or out of range\r\n"),
        ("BITFIELD s SET i64 0 -9223372036854775808", b"*1\r\n:7381240782615871488\r\n"),
        ("BITFIELD s INCRBY i64 0 -1", b"*1\r\n:9223372036854775807\r\n"),
        ("BITFIELD s OVERFLOW SAT INCRBY i64 0 -9223372036854775808", b"*1\r\n:-1\r\n"),
        ("BITFIELD s OVERFLOW FAIL INCRBY u63 0 9223372036854775807", b"*1\r\n$-1\r\n"),
        ("BITFIELD s OVERFLOW WRAP INCRBY u63 0 -9223372036854775808", b"*1\r\n:9223372036854775807\r\n"),
        ("BITFIELD s GET u4294967304 0", b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"),
        ("BITFIELD s GET i18446744073709551617 0", b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"),
        ("HSET h a 1 b 2 c 3", b":3\r\n"),
        ("HRANDFIELD h -9223372036854775808", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"),
        ("HRANDFIELD h -4611686018427387904 WITHVALUES", b"-ERR value is out of range\r\n"),
        ("HRANDFIELD h 4611686018427387904 WITHVALUES", b"-ERR value is out of range\r\n"),
        ("HRANDFIELD h 0", b"*0\r\n"),
        ("HSCAN h 0 COUNT 9223372036854775807", b"*2\r\n$1\r\n0\r\n*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"),
        ("HSCAN h 0 COUNT -9223372036854775808", b"-ERR syntax error\r\n"),
        ("SADD s2 1 2 3", b":3\r\n"),
        ("SRANDMEMBER s2 -9223372036854775808", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"),
        ("SRANDMEMBER s2 0", b"*0\r\n"),
        ("SPOP s2 -1", b"-ERR value is out of range, must be positive\r\n"),
        ("SSCAN s2 0 COUNT 9223372036854775807", b"*2\r\n$1\r\n0\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"),
        ("SINTERCARD 9223372036854775807 s2", b"-ERR Number of keys can't be greater than number of args\r\n"),
        ("SINTERCARD 0 s2", b"-ERR numkeys should be greater than 0\r\n"),
        ("SINTERCARD 1 s2 LIMIT 9223372036854775807", b":3\r\n"),
        ("SINTERCARD 1 s2 LIMIT -9223372036854775808", b"-ERR LIMIT can't be negative\r\n"),
        ("SPOP s2 9223372036854775807", b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"),
        ("ZADD z 1 a 2 b 3 c 4 d", b":4\r\n"),
        ("ZRANDMEMBER z -9223372036854775808", b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"),
        ("ZRANDMEMBER z -4611686018427387904 WITHSCORES", b"-ERR value is out of range\r\n"),
        ("ZRANDMEMBER z 0", b"*0\r\n"),
        ("ZRANGE z -9223372036854775808 9223372036854775807", b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
        ("ZRANGE z -9223372036854775808 -9223372036854775807 REV", b"*0\r\n"),
        ("ZRANGE z -inf +inf BYSCORE LIMIT -1 9223372036854775807", b"*0\r\n"),
        ("ZRANGE z -inf +inf BYSCORE LIMIT 9223372036854775807 9223372036854775807", b"*0\r\n"),
        ("ZRANGE z -inf +inf BYSCORE LIMIT 1 -9223372036854775808", b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
        ("ZRANGE z +inf -inf BYSCORE REV LIMIT 9223372036854775807 1", b"*0\r\n"),
        ("ZRANGEBYLEX z - + LIMIT 1 9223372036854775807", b"*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"),
        ("ZREVRANGE z -9223372036854775808 9223372036854775807", b"*4\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"),
        ("ZREMRANGEBYRANK z 9223372036854775807 -9223372036854775808", b":0\r\n"),
        ("ZRANGESTORE d z -9223372036854775808 9223372036854775807", b":4\r\n"),
        ("ZSCAN z 0 COUNT 9223372036854775807", b"*2\r\n$1\r\n0\r\n*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n"),
        ("ZUNIONSTORE d 9223372036854775807 z", b"-ERR syntax error\r\n"),
        ("ZUNIONSTORE d -9223372036854775808 z", b"-ERR at least 1 input key is needed for 'zunionstore' command\r\n"),
        ("ZUNION 2147483648 z", b"-ERR syntax error\r\n"),
        ("ZINTERCARD 9223372036854775807 z", b"-ERR syntax error\r\n"),
        ("ZINTERCARD 1 z LIMIT -1", b"-ERR LIMIT can't be negative\r\n"),
        ("ZINTERCARD 1 z LIMIT 9223372036854775807", b":4\r\n"),
        ("ZMPOP 9223372036854775807 z MIN", b"-ERR syntax error\r\n"),
        ("ZPOPMIN z -1", b"-ERR value is out of range, must be positive\r\n"),
        ("ZMPOP 1 z MIN COUNT 9223372036854775807", b"*2\r\n$1\r\nz\r\n*4\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n"),
        ("SCAN 0 COUNT -9223372036854775808", b"-ERR syntax error\r\n"),
        ("SCAN 0 COUNT 0", b"-ERR syntax error\r\n"),
        ("SCAN 18446744073709551616", b"-ERR invalid cursor\r\n"),
        ("SLOWLOG GET -2", b"-ERR count should be greater than or equal to -1\r\n"),
        ("SLOWLOG GET 9223372036854775808", b"-ERR count should be greater than or equal to -1\r\n"),
        ],
    );
}

/// A blocking timeout just below 2^63 ms is accepted by Redis (the client blocks). BZPOPMIN used
/// to cut its f64 -> i64 conversion at 9.2e18 ms and answered "timeout is negative" instead.
#[test]
fn huge_blocking_timeout_blocks() {
    let (srv, mut s) = start();
    for cmd in [
        "BZPOPMIN emptyz 9223372036854774",
        "BLPOP emptyl 9223372036854774",
        "BZPOPMAX emptyz 9223372036854",
    ] {
        let id = exchange(&mut s, "CLIENT ID");
        let id = std::str::from_utf8(&id[1..id.len() - 2])
            .unwrap()
            .to_string();
        let args: Vec<&str> = cmd.split_whitespace().collect();
        s.write_all(&encode(&args)).unwrap();
        // Wait until the server lists the client as blocked, then unblock it.
        let mut other = srv.connect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let info = exchange(&mut other, "INFO clients");
            if String::from_utf8_lossy(&info).contains("blocked_clients:1") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "`{cmd}` did not block: {}",
                common::quote(&exchange(&mut s, "PING"))
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(
            exchange(&mut other, &format!("CLIENT UNBLOCK {id}")),
            b":1\r\n",
            "{cmd}"
        );
        let mut data = Vec::new();
        let mut chunk = [0u8; 256];
        while !complete_replies(&data) {
            let n = s.read(&mut chunk).unwrap();
            assert!(n > 0);
            data.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(data, b"*-1\r\n", "{cmd}");
    }
    check(
        &mut s,
        &[
            (
                "BZPOPMIN emptyz 9223372036854776",
                b"-ERR timeout is negative\r\n",
            ),
            (
                "BLPOP emptyl 9223372036854776",
                b"-ERR timeout is negative\r\n",
            ),
            ("BZPOPMIN emptyz -1", b"-ERR timeout is negative\r\n"),
        ],
    );
}
