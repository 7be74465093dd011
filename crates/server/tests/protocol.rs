//! Bad and unusual input against the real binary: Redis protocol errors (exact text, connection
//! closed afterwards), inline commands, truncated requests, huge pipelines, memory safety of huge
//! bulk headers, arity / unknown-command errors.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{bulk, err, ok, Resp, Server};

fn server() -> Server {
    Server::start(&["--proactor_threads=4"])
}

/// (input, expected reply bytes, connection closed afterwards?) — checked against damselfly here
/// and, in `protocol_errors_match_redis`, against a real redis-server.
fn error_cases() -> Vec<(Vec<u8>, Vec<u8>, bool)> {
    let pe = |m: &str| format!("-ERR Protocol error: {m}\r\n").into_bytes();
    let mut v: Vec<(Vec<u8>, Vec<u8>, bool)> = vec![
        (b"*abc\r\n".to_vec(), pe("invalid multibulk length"), true),
        (
            b"*3000000000\r\n".to_vec(),
            pe("invalid multibulk length"),
            true,
        ),
        (b"*1\r\nfoo\r\n".to_vec(), pe("expected '$', got 'f'"), true),
        (
            b"*1\r\n$4\r\nping\r\n*1\r\n:1\r\n".to_vec(),
            [b"+PONG\r\n".to_vec(), pe("expected '$', got ':'")].concat(),
            true,
        ),
        (b"*1\r\n$-1\r\n".to_vec(), pe("invalid bulk length"), true),
        (b"*1\r\n$abc\r\n".to_vec(), pe("invalid bulk length"), true),
        (
            b"*1\r\n$536870913\r\n".to_vec(),
            pe("invalid bulk length"),
            true,
        ),
        (
            b"set a \"b\r\n".to_vec(),
            pe("unbalanced quotes in request"),
            true,
        ),
        (
            b"ping 'a'b\r\n".to_vec(),
            pe("unbalanced quotes in request"),
            true,
        ),
        (vec![b'x'; 70_000], pe("too big inline request"), true),
        (
            [b"*".to_vec(), vec![b'1'; 70_000]].concat(),
            pe("too big mbulk count string"),
            true,
        ),
        (
            [b"*1\r\n$".to_vec(), vec![b'1'; 70_000]].concat(),
            pe("too big bulk count string"),
            true,
        ),
        (
            b"*1\r\n$4\r\nPING\r\n*x\r\n".to_vec(),
            [b"+PONG\r\n".to_vec(), pe("invalid multibulk length")].concat(),
            true,
        ),
        // Not errors: empty/negative multibulk counts and blank lines are skipped.
        (b"*-1\r\nPING\r\n".to_vec(), b"+PONG\r\n".to_vec(), false),
        (b"*0\r\nPING\r\n".to_vec(), b"+PONG\r\n".to_vec(), false),
        (b"\r\n\r\nPING\r\n".to_vec(), b"+PONG\r\n".to_vec(), false),
        (b"\n".to_vec(), b"".to_vec(), false),
        (
            b"*1\r\n$0\r\n\r\n".to_vec(),
            b"-ERR unknown command '', with args beginning with: \r\n".to_vec(),
            false,
        ),
    ];
    // Partial trailing command: the complete one is answered, the rest waits.
    v.push((
        b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPIN".to_vec(),
        b"+PONG\r\n".to_vec(),
        false,
    ));
    v
}

fn check_cases(srv: &Server) {
    for (input, want, closed) in error_cases() {
        let got = if want.is_empty() {
            srv.raw_ex_quiet(&input, Duration::from_millis(500))
        } else {
            srv.raw_ex(&input)
        };
        let shown = common::quote(&input[..input.len().min(40)]);
        assert_eq!(
            common::quote(&got.data),
            common::quote(&want),
            "{}: reply to {shown}",
            srv.name()
        );
        assert_eq!(
            got.closed,
            closed,
            "{}: connection closed after {shown}?",
            srv.name()
        );
    }
}

#[test]
fn protocol_errors_exact_and_close() {
    let srv = server();
    // A long-lived client on the side must keep working throughout.
    let mut side = srv.raw_conn();
    assert_eq!(side.q("PING"), Resp::Simple(b"PONG".to_vec()));
    check_cases(&srv);
    assert_eq!(side.q("PING"), Resp::Simple(b"PONG".to_vec()));
    assert_eq!(srv.raw(b"PING\r\n"), b"+PONG\r\n");
}

#[test]
fn protocol_errors_match_redis() {
    let redis = common::RedisServer::start();
    check_cases(&redis);
}

#[test]
fn inline_commands() {
    let srv = server();
    assert_eq!(srv.raw(b"PING\r\n"), b"+PONG\r\n");
    assert_eq!(srv.raw(b"ping hello\r\n"), b"$5\r\nhello\r\n");
    assert_eq!(
        srv.raw(b"set a b\r\nget a\r\n"),
        b"+OK\r\n$1\r\nb\r\n".to_vec()
    );
    // Bare \n terminates an inline command too.
    assert_eq!(srv.raw(b"get a\n"), b"$1\r\nb\r\n");
    // Quoted arguments with escapes.
    assert_eq!(
        srv.raw(b"set \"a b\" \"c\\x41\\n\"\r\nget \"a b\"\r\n"),
        b"+OK\r\n$3\r\ncA\n\r\n".to_vec()
    );
    assert_eq!(srv.raw(b"echo 'a\\'b'\r\n"), b"$3\r\na'b\r\n");
    assert_eq!(srv.raw(b"echo \"\\xzz\"\r\n"), b"$3\r\nxzz\r\n");
    // Inline and multibulk mixed in one write.
    assert_eq!(
        srv.raw(b"PING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n"),
        b"+PONG\r\n$2\r\nhi\r\n+PONG\r\n".to_vec()
    );
}

#[test]
fn unknown_command_and_arity() {
    let srv = server();
    let mut c = srv.raw_conn();
    assert_eq!(
        c.q("foo a b"),
        err("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        c.q("foo"),
        err("ERR unknown command 'foo', with args beginning with: ")
    );
    assert_eq!(
        c.q("get"),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.q("GET a b"),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.q("set a"),
        err("ERR wrong number of arguments for 'set' command")
    );
    assert_eq!(
        c.q("ECHO"),
        err("ERR wrong number of arguments for 'echo' command")
    );
    // The connection stays usable after command errors.
    assert_eq!(c.q("SET k v"), ok());
    assert_eq!(c.q("GET k"), bulk("v"));
}

#[test]
fn truncated_requests_do_not_hurt() {
    let srv = server();
    let mut side = srv.raw_conn();
    for chunk in [
        &b"*2\r\n$3\r\nSET\r\n"[..],
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nhalf a bulk",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nxx",
        b"*5",
        b"set a \"unterminated",
        b"$",
    ] {
        let mut s = srv.connect();
        s.write_all(chunk).unwrap();
        drop(s); // close mid-request
    }
    // Also: close while the server is writing a large reply.
    {
        let mut s = srv.connect();
        let pipe: Vec<u8> = b"PING\r\n".repeat(50_000);
        s.write_all(&pipe).unwrap();
        let mut b = [0u8; 16];
        let _ = s.read(&mut b);
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(side.q("PING"), Resp::Simple(b"PONG".to_vec()));
    assert_eq!(side.q("SET k v"), ok());
    assert_eq!(side.q("GET k"), bulk("v"));
    assert_eq!(srv.raw(b"PING\r\n"), b"+PONG\r\n");
}

#[test]
fn pipeline_10k_in_one_write() {
    let srv = server();
    let mut c = srv.raw_conn();
    let n = 10_000;
    let mut buf = Vec::new();
    for i in 0..n {
        match i % 3 {
            0 => buf.extend(common::encode(&[
                "SET",
                &format!("key:{i}"),
                &i.to_string(),
            ])),
            1 => buf.extend(common::encode(&["GET", &format!("key:{}", i - 1)])),
            _ => buf.extend(common::encode(&["ECHO", &format!("e{i}")])),
        }
    }
    c.send_raw(&buf);
    for i in 0..n {
        let r = c.read();
        let want = match i % 3 {
            0 => ok(),
            1 => bulk(&(i - 1).to_string()),
            _ => bulk(&format!("e{i}")),
        };
        assert_eq!(r, want, "reply #{i}");
    }
    // Same with inline commands.
    let inline: Vec<u8> = (0..n)
        .flat_map(|i| format!("ECHO {i}\r\n").into_bytes())
        .collect();
    c.send_raw(&inline);
    for i in 0..n {
        assert_eq!(c.read(), bulk(&i.to_string()), "inline reply #{i}");
    }
}

#[test]
fn huge_bulk_header_does_not_allocate() {
    let srv = server();
    let before = srv.rss_kb();
    let mut conns = Vec::new();
    for _ in 0..8 {
        let mut s = srv.connect();
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\n")
            .unwrap();
        s.write_all(&[b'x'; 1000]).unwrap();
        conns.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(srv.raw(b"PING\r\n"), b"+PONG\r\n");
    let after = srv.rss_kb();
    assert!(
        after < before + 64 * 1024,
        "RSS grew from {before} KiB to {after} KiB after 8 clients announced 512MB bulks"
    );
    drop(conns);
    assert_eq!(srv.raw(b"PING\r\n"), b"+PONG\r\n");
}

#[test]
fn large_bulk_values_roundtrip() {
    let srv = server();
    let mut c = srv.raw_conn();
    let big = vec![b'z'; 3 * 1024 * 1024 + 7];
    assert_eq!(c.cmd(&[&b"SET"[..], b"big", &big]), ok());
    assert_eq!(c.cmd(&["GET", "big"]), Resp::Bulk(big.clone()));
    // Sent byte by byte in small pieces.
    let enc = common::encode(&[&b"SET"[..], b"big2", &big[..100_000]]);
    for piece in enc.chunks(4093) {
        c.send_raw(piece);
    }
    assert_eq!(c.read(), ok());
    assert_eq!(c.cmd(&["STRLEN", "big2"]), Resp::Int(100_000));
}

#[test]
fn config_set_proto_max_bulk_len() {
    let srv = server();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("CONFIG SET proto-max-bulk-len 1mb"), ok());
    // New connection: a bulk over the limit is a protocol error.
    let r = srv.raw_ex(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n");
    assert_eq!(
        common::quote(&r.data),
        common::quote(b"-ERR Protocol error: invalid bulk length\r\n")
    );
    assert!(r.closed);
    // At the limit is fine.
    let v = vec![b'v'; 1024 * 1024];
    let mut c2 = srv.raw_conn();
    assert_eq!(c2.cmd(&[&b"SET"[..], b"k", &v]), ok());
    assert_eq!(c.q("CONFIG SET proto-max-bulk-len 512mb"), ok());
}

#[test]
fn many_clients_while_one_misbehaves() {
    let srv = server();
    let port = srv.port();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let mut c = common::RawConn::new(s);
                for i in 0..300 {
                    let k = format!("t{t}:{i}");
                    assert_eq!(c.cmd(&["SET", &k, "x"]), ok());
                    assert_eq!(c.cmd(&["GET", &k]), bulk("x"));
                }
            })
        })
        .collect();
    for _ in 0..50 {
        let r = srv.raw_ex(b"*1\r\n$-5\r\n");
        assert!(r.closed);
        let mut s = srv.connect();
        let _ = s.write_all(b"*2\r\n$3\r\nGET\r\n$10\r\nabc");
    }
    for h in handles {
        h.join().expect("client thread failed");
    }
}
