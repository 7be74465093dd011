//! Client memory against the real binary (2 shard threads): `client-output-buffer-limit` for
//! normal clients (hard limit at once, soft limit after its seconds), `client-query-buffer-limit`,
//! CLIENT LIST's buffer fields, and a client that pipelines big GETs without reading while no
//! limit is set. The server logs Redis's lines; other clients go on. Every expectation but the
//! damselfly-only ones (INFO counters Redis 7.0 lacks, the pause without limits) is Redis's own
//! (`DFLY_TEST_TARGET=redis` runs this file against redis-server).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{against_redis, bulk, ok, RawConn, Resp, Server};

fn start() -> Server {
    Server::start(&["--proactor_threads=2"])
}

fn text(r: Resp) -> String {
    match r {
        Resp::Bulk(b) | Resp::Verbatim(b) | Resp::Simple(b) => String::from_utf8(b).unwrap(),
        r => panic!("expected text, got {r}"),
    }
}

/// The CLIENT LIST line of the client named `name`, if connected.
fn client_line(c: &mut RawConn, name: &str) -> Option<String> {
    let all = text(c.q("CLIENT LIST"));
    let needle = format!(" name={name} ");
    all.lines()
        .find(|l| l.contains(&needle))
        .map(str::to_string)
}

fn field(line: &str, name: &str) -> u64 {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

fn info_u64(c: &mut RawConn, section: &str, name: &str) -> u64 {
    let t = text(c.q(&format!("INFO {section}")));
    t.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

/// Waits (up to 20 s: generous, never a timing assertion) until the client named `name` is gone
/// from CLIENT LIST.
fn wait_gone(c: &mut RawConn, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while client_line(c, name).is_some() {
        assert!(Instant::now() < deadline, "client {name} was never closed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads until the server closes the connection; the bytes received.
fn read_to_close(s: &mut TcpStream) -> usize {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return total,
            Err(e) => panic!("the server did not close the connection: {e}"),
        }
    }
}

/// A named connection that sends `pipeline` and then reads nothing.
fn slow_reader(srv: &Server, name: &str, pipeline: &[u8]) -> TcpStream {
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", name]), ok());
    c.stream.write_all(pipeline).unwrap();
    c.stream
}

fn gets(key: &str, n: usize) -> Vec<u8> {
    format!("GET {key}\r\n").repeat(n).into_bytes()
}

/// Another client keeps working: writes and reads its own keys.
fn others_go_on(c: &mut RawConn) {
    for i in 0..50 {
        let k = format!("other:{i}");
        assert_eq!(c.cmd(&["SET", &k, "v"]), ok());
        assert_eq!(c.cmd(&["GET", &k]), bulk("v"));
    }
}

/// The acceptance test: a reader that pipelines GETs of a 100 KB value and reads nothing passes
/// the 1 MB hard limit and is disconnected (receiving less than its replies, then the close), the
/// log says why in Redis's words, and other clients go on meanwhile.
#[test]
fn slow_reader_over_the_hard_limit_is_disconnected_while_others_continue() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 0 0"
        ]),
        ok()
    );
    let value = "x".repeat(100_000);
    assert_eq!(c.cmd(&["SET", "big", &value]), ok());
    let n = 500; // 50 MB of replies: far past the limit and the socket buffers
    let mut slow = slow_reader(&srv, "slow", &gets("big", n));
    others_go_on(&mut c);
    wait_gone(&mut c, "slow");
    others_go_on(&mut c);
    let got = read_to_close(&mut slow);
    assert!(got < n * 100_000, "all {got} bytes of replies were sent");
    assert!(
        srv.output()
            .contains("scheduled to be closed ASAP for overcoming of output buffer limits."),
        "no log line:\n{}",
        srv.output()
    );
    if !against_redis() {
        // Redis 7.2's counter (7.0 has none).
        assert_eq!(
            info_u64(&mut c, "stats", "client_output_buffer_limit_disconnections"),
            1
        );
    }
    // A client that reads its replies is not affected by the limit: replies are written as
    // they come.
    for _ in 0..20 {
        assert_eq!(c.cmd(&["GET", "big"]), bulk(&value));
    }
}

/// The soft limit closes a client whose output stays over it for longer than its seconds, even
/// when nothing else happens on the connection.
#[test]
fn soft_limit_closes_after_its_seconds_without_traffic() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 1mb 1"
        ]),
        ok()
    );
    assert_eq!(c.cmd(&["SET", "big", &"x".repeat(100_000)]), ok());
    let mut slow = slow_reader(&srv, "soft", &gets("big", 500));
    wait_gone(&mut c, "soft");
    read_to_close(&mut slow);
    assert!(
        srv.output()
            .contains("for overcoming of output buffer limits."),
        "no log line:\n{}",
        srv.output()
    );
}

/// A transaction runs completely even when its replies pass the limit; the client is closed
/// after it, without the replies.
#[test]
fn transactions_run_completely_before_the_close() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 100000 0 0"
        ]),
        ok()
    );
    let item = "x".repeat(1000);
    for _ in 0..150 {
        c.cmd(&["RPUSH", "mylist", &item]);
    }
    let mut t = srv.raw_conn();
    assert_eq!(t.q("SET k1 v1"), ok());
    assert_eq!(t.q("MULTI"), ok());
    for cmd in [
        "SET k2 v2",
        "GET k2",
        "LRANGE mylist 0 -1",
        "SET k3 v3",
        "DEL k1",
    ] {
        assert_eq!(t.q(cmd), Resp::Simple(b"QUEUED".to_vec()));
    }
    t.send(&["EXEC"]);
    assert!(t.try_read().is_err(), "EXEC's reply was sent");
    assert_eq!(c.q("GET k1"), Resp::Nil);
    assert_eq!(c.q("GET k2"), bulk("v2"));
    assert_eq!(c.q("GET k3"), bulk("v3"));
}

/// Replies whose size does not depend on the data (HRANDFIELD with a huge negative count) stop
/// being built once past the limit: the client is closed and the server lives on.
#[test]
fn huge_generated_reply_stops_at_the_limit() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1000000 0 0"
        ]),
        ok()
    );
    assert_eq!(c.q("HSET myhash a b"), Resp::Int(1));
    assert_eq!(c.q("SADD myset a"), Resp::Int(1));
    assert_eq!(c.q("ZADD myzset 1 a"), Resp::Int(1));
    for cmd in [
        "HRANDFIELD myhash -999999999",
        "SRANDMEMBER myset -999999999",
        "ZRANDMEMBER myzset -999999999",
    ] {
        let mut t = srv.raw_conn();
        let r = {
            t.send(&cmd.split(' ').collect::<Vec<_>>());
            t.try_read()
        };
        assert!(r.is_err(), "{cmd}: got a reply");
    }
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
}

/// Past `client-query-buffer-limit` (a bulk bigger than it, sent slowly) the client is closed
/// with Redis's log line; others go on.
#[test]
fn query_buffer_limit_closes_the_client() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("CONFIG SET client-query-buffer-limit 1mb"), ok());
    let mut big = srv.raw_conn();
    assert_eq!(big.q("CLIENT SETNAME bigquery"), ok());
    let _ = big
        .stream
        .write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n");
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..32 {
        // 2 MB of the bulk: the server closes the connection on the way.
        if big.stream.write_all(&chunk).is_err() {
            break;
        }
    }
    wait_gone(&mut c, "bigquery");
    read_to_close(&mut big.stream);
    others_go_on(&mut c);
    assert!(
        srv.output()
            .contains("Closing client that reached max query buffer length: id="),
        "no log line:\n{}",
        srv.output()
    );
    // Redis shows the start of the big bulk (read into its own buffer); damselfly the start of
    // the command.
    assert!(srv.output().contains("(qbuf initial bytes: \""));
    assert_eq!(c.q("EXISTS k"), Resp::Int(0));
    if !against_redis() {
        assert_eq!(
            info_u64(&mut c, "stats", "client_query_buffer_limit_disconnections"),
            1
        );
    }
}

/// CLIENT LIST as Redis shows the caller: its own command in `qbuf`, no output memory yet.
#[test]
fn client_list_shows_the_buffers() {
    let srv = start();
    let mut c = srv.raw_conn();
    let me = text(c.q("CLIENT INFO"));
    assert_eq!(field(&me, "qbuf"), 26, "{me}");
    assert_eq!(field(&me, "omem"), 0, "{me}");
    assert_eq!(field(&me, "obl"), 0, "{me}");
    assert_eq!(field(&me, "oll"), 0, "{me}");
    assert!(field(&me, "tot-mem") >= 16384, "{me}");
    // A client with 10 MB of unread replies shows them as output memory.
    assert_eq!(c.cmd(&["SET", "big", &"x".repeat(1_000_000)]), ok());
    let _slow = slow_reader(&srv, "unread", &gets("big", 10));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let l = client_line(&mut c, "unread").expect("client closed without a limit");
        if field(&l, "omem") > 1_000_000 {
            assert!(field(&l, "tot-mem") > field(&l, "omem"), "{l}");
            break;
        }
        assert!(Instant::now() < deadline, "omem never grew: {l}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// With no output limit (the default), a client that pipelines GETs of a 1 MB value (300 MB of
/// replies) without reading does not make the server buffer them all: it stops executing that
/// client's commands while 64 MB are unread, other clients go on, and once the client reads,
/// every reply arrives, complete and in order. Damselfly only: Redis buffers them all.
#[test]
fn unread_pipeline_without_limit_pauses_instead_of_growing() {
    if against_redis() {
        return;
    }
    let srv = start();
    let mut c = srv.raw_conn();
    let value = "y".repeat(1 << 20);
    assert_eq!(c.cmd(&["SET", "big", &value]), ok());
    let base = info_u64(&mut c, "memory", "used_memory");
    let n = 300;
    let slow = slow_reader(&srv, "paused", &gets("big", n));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let l = client_line(&mut c, "paused").expect("client closed without a limit");
        if field(&l, "omem") >= 32 << 20 {
            break;
        }
        assert!(Instant::now() < deadline, "omem never grew: {l}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The server has stopped at the pause threshold; give it time to (wrongly) go on.
    std::thread::sleep(Duration::from_millis(500));
    others_go_on(&mut c);
    let l = client_line(&mut c, "paused").unwrap();
    assert!(
        field(&l, "omem") <= (64 << 20) + (2 << 20),
        "unread replies grew past the pause threshold: {l}"
    );
    let used = info_u64(&mut c, "memory", "used_memory");
    assert!(
        used < base + (160 << 20),
        "used_memory grew by {} MB for 300 MB of unread replies",
        (used - base) >> 20
    );
    let mut r = RawConn::new(slow.try_clone().unwrap());
    for i in 0..n {
        match r.read() {
            Resp::Bulk(b) => assert!(b == value.as_bytes(), "reply {i} differs"),
            other => panic!("reply {i}: {other}"),
        }
    }
    slow.shutdown(std::net::Shutdown::Both).ok();
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
}
