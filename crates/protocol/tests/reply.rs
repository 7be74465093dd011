//! Reply encoding for RESP2 and RESP3, byte for byte.

use damselfly_protocol::{Reply, RespVersion};

fn enc(ver: RespVersion, f: impl FnOnce(&mut Reply)) -> Vec<u8> {
    let mut r = Reply::new(ver);
    f(&mut r);
    r.take()
}

/// Checks one encoder call in both protocol versions.
fn both(f: impl Fn(&mut Reply), resp2: &[u8], resp3: &[u8]) {
    let got2 = enc(RespVersion::Resp2, &f);
    assert_eq!(got2, resp2, "RESP2: {:?}", String::from_utf8_lossy(&got2));
    let got3 = enc(RespVersion::Resp3, &f);
    assert_eq!(got3, resp3, "RESP3: {:?}", String::from_utf8_lossy(&got3));
}

#[test]
fn scalars() {
    both(|r| r.ok(), b"+OK\r\n", b"+OK\r\n");
    both(|r| r.simple("PONG"), b"+PONG\r\n", b"+PONG\r\n");
    both(|r| r.simple("a\r\nb"), b"+a  b\r\n", b"+a  b\r\n");
    both(|r| r.int(0), b":0\r\n", b":0\r\n");
    both(|r| r.int(42), b":42\r\n", b":42\r\n");
    both(|r| r.int(-1), b":-1\r\n", b":-1\r\n");
    both(
        |r| r.int(i64::MAX),
        b":9223372036854775807\r\n",
        b":9223372036854775807\r\n",
    );
    both(
        |r| r.int(i64::MIN),
        b":-9223372036854775808\r\n",
        b":-9223372036854775808\r\n",
    );
    both(|r| r.bulk(b"hello"), b"$5\r\nhello\r\n", b"$5\r\nhello\r\n");
    both(|r| r.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n");
    both(
        |r| r.bulk(b"a\r\nb"),
        b"$4\r\na\r\nb\r\n",
        b"$4\r\na\r\nb\r\n",
    );
    both(
        |r| r.bulk_str("héllo"),
        b"$6\r\nh\xc3\xa9llo\r\n",
        b"$6\r\nh\xc3\xa9llo\r\n",
    );
    both(|r| r.bulk_int(-123), b"$4\r\n-123\r\n", b"$4\r\n-123\r\n");
    both(
        |r| r.bulk_int(i64::MIN),
        b"$20\r\n-9223372036854775808\r\n",
        b"$20\r\n-9223372036854775808\r\n",
    );
    both(|r| r.null(), b"$-1\r\n", b"_\r\n");
    both(|r| r.null_array(), b"*-1\r\n", b"_\r\n");
    both(|r| r.bool(true), b":1\r\n", b"#t\r\n");
    both(|r| r.bool(false), b":0\r\n", b"#f\r\n");
    both(
        |r| r.big_number("123456789012345678901234567890"),
        b"$30\r\n123456789012345678901234567890\r\n",
        b"(123456789012345678901234567890\r\n",
    );
    both(|r| r.raw(b"+RAW\r\n"), b"+RAW\r\n", b"+RAW\r\n");
}

#[test]
fn large_bulk_header() {
    let v = vec![b'x'; 12345];
    let got = enc(RespVersion::Resp2, |r| r.bulk(&v));
    assert!(got.starts_with(b"$12345\r\nxxx"));
    assert_eq!(got.len(), 8 + 12345 + 2);
    both(|r| r.bulk_header(10), b"$10\r\n", b"$10\r\n");
}

#[test]
fn doubles() {
    // Redis 7.0 addReplyDouble uses %.17g.
    both(
        |r| r.double(0.1),
        b"$19\r\n0.10000000000000001\r\n",
        b",0.10000000000000001\r\n",
    );
    both(|r| r.double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n");
    both(|r| r.double(3.0), b"$1\r\n3\r\n", b",3\r\n");
    both(|r| r.double(1e20), b"$5\r\n1e+20\r\n", b",1e+20\r\n");
    both(|r| r.double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n");
    both(
        |r| r.double(f64::NEG_INFINITY),
        b"$4\r\n-inf\r\n",
        b",-inf\r\n",
    );
    both(|r| r.double(-0.0), b"$2\r\n-0\r\n", b",-0\r\n");
}

#[test]
fn aggregates() {
    both(|r| r.array(3), b"*3\r\n", b"*3\r\n");
    both(|r| r.array(12), b"*12\r\n", b"*12\r\n");
    both(|r| r.empty_array(), b"*0\r\n", b"*0\r\n");
    both(|r| r.map(2), b"*4\r\n", b"%2\r\n");
    both(|r| r.map(0), b"*0\r\n", b"%0\r\n");
    both(|r| r.set(3), b"*3\r\n", b"~3\r\n");
    both(|r| r.push(3), b"*3\r\n", b">3\r\n");
    both(|r| r.attribute(1), b"", b"|1\r\n");
}

#[test]
fn verbatim() {
    both(
        |r| r.verbatim("txt", b"Some string"),
        b"$11\r\nSome string\r\n",
        b"=15\r\ntxt:Some string\r\n",
    );
    both(|r| r.verbatim("mkd", b""), b"$0\r\n\r\n", b"=4\r\nmkd:\r\n");
}

#[test]
fn deferred() {
    both(
        |r| {
            let h = r.begin_array_deferred();
            for i in 0..11 {
                r.int(i);
            }
            r.end_array_deferred(h, 11);
        },
        b"*11\r\n:0\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n:9\r\n:10\r\n",
        b"*11\r\n:0\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n:9\r\n:10\r\n",
    );
    both(
        |r| {
            r.ok();
            let outer = r.begin_map_deferred();
            r.bulk(b"k");
            let inner = r.begin_set_deferred();
            r.bulk(b"a");
            r.end_set_deferred(inner, 1);
            r.end_map_deferred(outer, 1);
            r.ok();
        },
        b"+OK\r\n*2\r\n$1\r\nk\r\n*1\r\n$1\r\na\r\n+OK\r\n",
        b"+OK\r\n%1\r\n$1\r\nk\r\n~1\r\n$1\r\na\r\n+OK\r\n",
    );
    // Empty deferred array.
    both(
        |r| {
            let h = r.begin_array_deferred();
            r.end_array_deferred(h, 0);
        },
        b"*0\r\n",
        b"*0\r\n",
    );
}

#[test]
fn errors_and_accounting() {
    let mut r = Reply::new(RespVersion::Resp2);
    assert_eq!(r.errors_written(), 0);
    assert_eq!(r.last_error_code(), None);
    r.error("ERR syntax error");
    assert_eq!(r.buf, b"-ERR syntax error\r\n");
    assert_eq!(r.last_error_code(), Some("ERR"));
    r.clear();
    r.error("WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(
        r.buf,
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(r.last_error_code(), Some("WRONGTYPE"));
    assert_eq!(r.errors_written(), 2, "clear() keeps error counters");
    r.clear();
    r.error("-NOSCRIPT No matching script");
    assert_eq!(
        r.buf, b"-NOSCRIPT No matching script\r\n",
        "leading '-' not doubled"
    );
    assert_eq!(r.last_error_code(), Some("NOSCRIPT"));
    r.clear();
    r.error("ERR bad\r\nthing");
    assert_eq!(r.buf, b"-ERR bad  thing\r\n");
    r.clear();
    // No space within the first 32 bytes: counted as ERR, like Redis.
    r.error("NOSPACEINTHISVERYLONGERRORMESSAGEATALL");
    assert_eq!(r.last_error_code(), Some("ERR"));
    r.error_bytes(b"ERR Protocol error: expected '$', got '\xff'");
    assert_eq!(r.last_error_code(), Some("ERR"));
    assert!(r.buf.ends_with(b"got '\xff'\r\n"));
    assert_eq!(r.errors_written(), 6);
    r.clear_error_count();
    assert_eq!(r.errors_written(), 0);
    assert_eq!(r.last_error_code(), None);
}

#[test]
fn buffer_management() {
    let mut r = Reply::with_capacity(RespVersion::Resp3, 256);
    assert!(r.is_resp3());
    assert!(r.is_empty());
    assert!(r.buf.capacity() >= 256);
    r.ok();
    assert_eq!(r.len(), 5);
    let taken = r.take();
    assert_eq!(taken, b"+OK\r\n");
    assert!(r.is_empty());
    assert_eq!(r.ver, RespVersion::Resp3);
    r.ok();
    r.clear();
    assert!(r.is_empty());
    assert!(!Reply::new(RespVersion::Resp2).is_resp3());
    assert_eq!(RespVersion::default(), RespVersion::Resp2);
    assert_eq!(Reply::default().ver, RespVersion::Resp2);
}
