//! Client memory against the real binary (2 shard threads): `client-output-buffer-limit` for
//! normal clients (hard limit at once, soft limit after its seconds), `client-query-buffer-limit`,
//! CLIENT LIST's buffer fields, a client that pipelines big GETs without reading while no
//! limit is set, client eviction (`maxmemory-clients`) and query buffer resizing. The server logs Redis's lines; other clients go on. Every expectation but the
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

/// A connection named `name` that has sent `bytes` bytes of an unfinished command (a 2-argument
/// command whose first argument is still arriving): its query buffer holds them.
fn partial_sender(srv: &Server, name: &str, bytes: usize) -> TcpStream {
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", name]), ok());
    let mut msg = format!("*2\r\n${}\r\n", bytes + 10).into_bytes();
    msg.extend(std::iter::repeat_n(b'v', bytes));
    c.stream.write_all(&msg).unwrap();
    c.stream
}

/// Waits until CLIENT LIST shows `name` holding at least `bytes` in its query buffer.
fn wait_qbuf(c: &mut RawConn, name: &str, bytes: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let l = client_line(c, name).unwrap_or_else(|| panic!("{name} is gone"));
        if field(&l, "qbuf") >= bytes {
            return;
        }
        assert!(Instant::now() < deadline, "qbuf never filled: {l}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn names_connected(c: &mut RawConn) -> Vec<String> {
    text(c.q("CLIENT LIST"))
        .lines()
        .filter_map(|l| {
            l.split(' ')
                .find_map(|kv| kv.strip_prefix("name="))
                .map(str::to_string)
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// `maxmemory-clients`: lowering the limit disconnects the biggest clients first, only as many
/// as needed, before CONFIG SET answers; CLIENT NO-EVICT clients are never chosen; the log and
/// INFO say so. The clients sit on both threads (2 shard threads).
#[test]
fn client_eviction_takes_the_biggest_clients_first() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "control"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    assert!(client_line(&mut c, "control")
        .unwrap()
        .contains(" flags=e "));
    let mut held = Vec::new();
    for (name, kb) in [("small", 100), ("medium", 300), ("large", 600)] {
        held.push(partial_sender(&srv, name, kb * 1000));
        wait_qbuf(&mut c, name, kb as u64 * 1000);
    }
    // All together a little over 1 MB with their buffers: 1 MB evicts the largest only.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-clients", "1mb"]), ok());
    let names = names_connected(&mut c);
    assert!(!names.contains(&"large".to_string()), "{names:?}");
    for n in ["small", "medium", "control"] {
        assert!(names.contains(&n.to_string()), "{n} evicted: {names:?}");
    }
    assert_eq!(info_u64(&mut c, "stats", "evicted_clients"), 1);
    assert!(
        srv.output().contains("Evicting client: id="),
        "no log line:\n{}",
        srv.output()
    );
    // "1" means Redis's floor of 128 KiB: with the unevictable control client, both
    // evictable ones must go.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-clients", "1"]), ok());
    let names = names_connected(&mut c);
    assert_eq!(names, vec!["control".to_string()], "{names:?}");
    assert_eq!(info_u64(&mut c, "stats", "evicted_clients"), 3);
    // The evicted connections are closed.
    for mut s in held {
        read_to_close(&mut s);
    }
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory-clients"]),
        Resp::Array(vec![bulk("maxmemory-clients"), bulk("1")])
    );
}

/// A client whose big argument passes the limit while it arrives is disconnected (the command
/// never runs); one that piles up unread replies too; others go on. A percentage applies to
/// maxmemory and CONFIG GET shows it as given.
#[test]
fn client_eviction_while_reading_and_while_replying() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-clients", "10%"]), ok());
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory-clients"]),
        Resp::Array(vec![bulk("maxmemory-clients"), bulk("10%")])
    );
    // No maxmemory: a percentage of nothing is no limit.
    let mut free = srv.raw_conn();
    assert_eq!(free.cmd(&["CLIENT", "SETNAME", "free"]), ok());
    let value = "z".repeat(3_000_000);
    assert_eq!(free.cmd(&["SET", "k", &value]), ok());
    free.stream.shutdown(std::net::Shutdown::Both).unwrap();
    wait_gone(&mut c, "free");
    // 1% of 200 MB: 2 MB.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "200mb"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-clients", "1%"]), ok());
    let mut big = srv.raw_conn();
    let mut msg = format!("*3\r\n$3\r\nSET\r\n$2\r\nk2\r\n${}\r\n", value.len()).into_bytes();
    msg.extend_from_slice(value.as_bytes());
    msg.extend_from_slice(b"\r\n");
    // The server may close while we are still writing.
    let _ = big.stream.write_all(&msg);
    read_to_close(&mut big.stream);
    others_go_on(&mut c);
    assert_eq!(c.cmd(&["EXISTS", "k2"]), Resp::Int(0));
    assert_eq!(info_u64(&mut c, "stats", "evicted_clients"), 1);

    // Unread replies of a 200 KB value: disconnected long before 500 of them (100 MB) pile up.
    assert_eq!(c.cmd(&["SET", "v", &"w".repeat(200_000)]), ok());
    let mut slow = slow_reader(&srv, "unread", &gets("v", 500));
    wait_gone(&mut c, "unread");
    let got = read_to_close(&mut slow);
    assert!(got < 500 * 200_000, "all {got} bytes of replies were sent");
    others_go_on(&mut c);
    assert_eq!(info_u64(&mut c, "stats", "evicted_clients"), 2);
}

/// Commands queued by MULTI and watched keys count as the client's memory (`multi-mem`,
/// `tot-mem`): a transaction that queues more than the limit disconnects its client.
#[test]
fn client_eviction_counts_queued_commands() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory-clients", "2mb"]), ok());
    let mut t = srv.raw_conn();
    assert_eq!(t.cmd(&["CLIENT", "SETNAME", "tx"]), ok());
    assert_eq!(t.cmd(&["MULTI"]), ok());
    let part = "q".repeat(500_000);
    assert_eq!(
        t.cmd(&["SET", "a", &part]),
        Resp::Simple(b"QUEUED".to_vec())
    );
    let l = client_line(&mut c, "tx").unwrap();
    assert!(field(&l, "multi-mem") >= 500_000, "{l}");
    assert!(field(&l, "tot-mem") >= field(&l, "multi-mem"), "{l}");
    for _ in 0..5 {
        t.stream
            .write_all(&format!("*3\r\n$3\r\nSET\r\n$1\r\na\r\n$500000\r\n{part}\r\n").into_bytes())
            .unwrap_or(());
    }
    read_to_close(&mut t.stream);
    wait_gone(&mut c, "tx");
    assert_eq!(c.cmd(&["EXISTS", "a"]), Resp::Int(0));
}

/// Query buffers follow use (Redis's client cron): one grown for a big argument shrinks toward
/// what the client recently sent, and an idle client's buffer is freed after 2 s.
#[test]
fn query_buffer_shrinks_after_a_big_argument_and_when_idle() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut b = srv.raw_conn();
    assert_eq!(b.cmd(&["CLIENT", "SETNAME", "qb"]), ok());
    assert_eq!(b.cmd(&["SET", "x", &"A".repeat(400_000)]), ok());
    let size = |c: &mut RawConn| {
        let l = client_line(c, "qb").unwrap();
        field(&l, "qbuf") + field(&l, "qbuf-free")
    };
    let grown = size(&mut c);
    assert!(grown > 32 * 1024, "{grown}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert_eq!(b.cmd(&["SET", "x", "small"]), ok());
        let now = size(&mut c);
        if now < grown {
            break;
        }
        assert!(Instant::now() < deadline, "query buffer stayed at {now}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while size(&mut c) != 0 {
        assert!(Instant::now() < deadline, "idle query buffer never freed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(b.cmd(&["GET", "x"]), bulk("small"));
}
