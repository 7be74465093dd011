//! CLIENT PAUSE / UNPAUSE end to end (Redis's unit/pause runs in the suite too): paused
//! commands wait and count as blocked clients, reads pass a WRITE pause, EXEC is judged by
//! what it queued, scripts by their flags, a pause ends on its own, and nothing expires while
//! clients are paused.

mod common;

use std::time::{Duration, Instant};

use common::{bulk, ok, Resp, Server};

fn info_int(c: &mut common::RawConn, field: &str) -> i64 {
    let Resp::Bulk(b) = c.cmd(&["INFO", "everything"]) else {
        panic!("INFO")
    };
    String::from_utf8_lossy(&b)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO"))
}

fn wait_blocked(c: &mut common::RawConn, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_int(c, "blocked_clients") != n {
        assert!(
            Instant::now() < deadline,
            "blocked_clients never reached {n}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn write_pause_holds_writes_until_unpause() {
    let srv = Server::start(&["--proactor_threads=2"]);
    let mut admin = srv.raw_conn();
    let mut w = srv.raw_conn();
    assert_eq!(admin.cmd(&["SET", "k", "old"]), ok());
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), ok());
    // Reads and admin commands go on.
    assert_eq!(w.cmd(&["GET", "k"]), bulk("old"));
    assert_eq!(w.cmd(&["PING"]), Resp::Simple(b"PONG".to_vec()));
    // A write waits, counted as blocked; so does a may-replicate command and a script.
    w.send(&["SET", "k", "new"]);
    let mut p = srv.raw_conn();
    p.send(&["PUBLISH", "ch", "m"]);
    let mut s = srv.raw_conn();
    s.send(&["EVAL", "return 1", "0"]);
    wait_blocked(&mut admin, 3);
    assert_eq!(admin.cmd(&["GET", "k"]), bulk("old"));
    // A read-only script and a no-writes script run.
    let mut r = srv.raw_conn();
    assert_eq!(r.cmd(&["EVAL_RO", "return 7", "0"]), Resp::Int(7));
    assert_eq!(
        r.cmd(&["EVAL", "#!lua flags=no-writes\nreturn 8", "0"]),
        Resp::Int(8)
    );
    // A syntax error answers at once.
    assert!(r.cmd(&["SET", "k"]).is_error());
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(w.read(), ok());
    assert_eq!(p.read(), Resp::Int(0));
    assert_eq!(s.read(), Resp::Int(1));
    assert_eq!(admin.cmd(&["GET", "k"]), bulk("new"));
    wait_blocked(&mut admin, 0);
}

#[test]
fn exec_is_judged_by_what_it_queued_and_pauses_end_on_their_own() {
    let srv = Server::start(&["--proactor_threads=2"]);
    let mut admin = srv.raw_conn();
    let mut rd = srv.raw_conn();
    assert_eq!(rd.cmd(&["MULTI"]), ok());
    assert_eq!(rd.cmd(&["GET", "x"]), Resp::Simple(b"QUEUED".to_vec()));
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), ok());
    // Only reads queued: EXEC runs.
    assert_eq!(rd.cmd(&["EXEC"]), Resp::Array(vec![Resp::Nil]));
    assert_eq!(rd.cmd(&["MULTI"]), ok());
    assert_eq!(rd.cmd(&["SET", "x", "1"]), Resp::Simple(b"QUEUED".to_vec()));
    rd.send(&["EXEC"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["CLIENT", "UNPAUSE"]);
    assert_eq!(rd.read(), Resp::Array(vec![ok()]));
    // A short ALL pause: even PING waits, then the pause ends by itself.
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "300", "ALL"]), ok());
    let t0 = Instant::now();
    assert_eq!(rd.cmd(&["PING"]), Resp::Simple(b"PONG".to_vec()));
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t0.elapsed()
    );
}

#[test]
fn nothing_expires_while_clients_are_paused() {
    let srv = Server::start(&["--proactor_threads=2"]);
    let mut c = srv.raw_conn();
    let before = info_int(&mut c, "expired_keys");
    assert_eq!(c.cmd(&["SET", "a", "1", "PX", "20"]), ok());
    assert_eq!(c.cmd(&["SET", "b", "1", "PX", "20"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), ok());
    std::thread::sleep(Duration::from_millis(300));
    // Read as gone, but neither deleted on access nor by the active cycle.
    assert_eq!(c.cmd(&["GET", "a"]), Resp::Nil);
    assert_eq!(info_int(&mut c, "expired_keys"), before);
    assert_eq!(c.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(c.cmd(&["GET", "a"]), Resp::Nil);
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_int(&mut c, "expired_keys") < before + 2 {
        assert!(
            Instant::now() < deadline,
            "keys never expired after the pause"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A pipeline of single-key writes (which runs as one squashed message per shard) waits for a
/// WRITE pause like a lone write does, and so does a memcache `set`.
#[test]
fn pipelined_and_memcache_writes_wait_too() {
    let mport = common::free_port();
    let mp = mport.to_string();
    let srv = Server::start(&["--proactor_threads=2", "--memcached_port", &mp]);
    let mut admin = srv.raw_conn();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "60000", "WRITE"]), ok());
    let mut w = srv.raw_conn();
    let mut pipe = Vec::new();
    for i in 0..20 {
        pipe.extend_from_slice(&common::encode(&["SET", &format!("p{i}"), "v"]));
    }
    w.send_raw(&pipe);
    let mut mc = std::net::TcpStream::connect(("127.0.0.1", mport)).unwrap();
    use std::io::{Read, Write};
    mc.write_all(b"set m 0 0 1\r\nx\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        admin.cmd(&["DBSIZE"]),
        Resp::Int(0),
        "nothing written while paused"
    );
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    for _ in 0..20 {
        assert_eq!(w.read(), ok());
    }
    let mut buf = [0u8; 8];
    mc.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    mc.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"STORED\r\n");
    assert_eq!(admin.cmd(&["DBSIZE"]), Resp::Int(21));
}
