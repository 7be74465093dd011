//! The bad-input campaign: inputs at and past internal limits, abusive clients and clients that
//! vanish mid-command. Each test checks the reply, that the server keeps serving other clients,
//! and (where memory is at stake) that its RSS stays bounded. Protocol-level errors (malformed
//! RESP, huge bulk headers) are in protocol.rs; random pipelines in pipeline_fuzz.rs.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{bulk, encode, ok, RawConn, RedisServer, Resp, Server};

fn server() -> Server {
    Server::start(&["--proactor_threads=4"])
}

/// A second client still gets correct answers.
fn still_serving(srv: &Server) {
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["SET", "probe", "alive"]), ok());
    assert_eq!(c.cmd(&["GET", "probe"]), bulk("alive"));
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
}

/// Sends `bytes` in one write and returns exactly `n` parsed replies.
fn pipeline(c: &mut RawConn, bytes: &[u8], n: usize) -> Vec<Resp> {
    c.send_raw(bytes);
    (0..n).map(|_| c.read()).collect()
}

/// The reproduction: a variadic command with more than 255 arguments in a pipeline
/// between single-key commands on other shards. Redis's replies byte for byte, with 1, 2 and 4
/// shard threads, for argument counts around every narrow integer limit.
#[test]
fn pipelined_variadic_commands_match_redis_at_every_width() {
    let redis = RedisServer::start();
    let servers: Vec<Server> = ["1", "2", "4"]
        .iter()
        .map(|t| Server::start(&[&format!("--proactor_threads={t}")]))
        .collect();
    for n in [1usize, 254, 255, 256, 257, 300, 65_535, 65_536, 65_537] {
        let elems: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        let mut rpush = vec!["RPUSH".to_string(), "biglist".to_string()];
        rpush.extend(elems.iter().cloned());
        let mut sadd = vec!["SADD".to_string(), "bigset".to_string()];
        sadd.extend(elems.iter().cloned());
        let mut mget = vec!["MGET".to_string()];
        mget.extend((0..n.min(70_000)).map(|i| format!("k{}", i % 50)));
        let cmds: Vec<Vec<String>> = vec![
            vec!["DEL".into(), "biglist".into(), "bigset".into()],
            vec!["SET".into(), "other".into(), "1".into()],
            rpush,
            vec!["GET".into(), "other".into()],
            vec!["LLEN".into(), "biglist".into()],
            sadd,
            vec!["INCR".into(), "other".into()],
            vec!["SCARD".into(), "bigset".into()],
            mget,
            vec!["LINDEX".into(), "biglist".into(), "-1".into()],
        ];
        let bytes: Vec<u8> = cmds.iter().flat_map(|c| encode(c)).collect();
        let expected = pipeline(&mut redis.raw_conn(), &bytes, cmds.len());
        assert_eq!(expected[2], Resp::Int(n as i64), "redis sanity");
        for srv in &servers {
            let got = pipeline(&mut srv.raw_conn(), &bytes, cmds.len());
            assert_eq!(got, expected, "n={n}, server {}", srv.port());
        }
    }
}

#[test]
fn a_million_argument_command() {
    let srv = server();
    let mut c = srv.raw_conn();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let rss0 = srv.rss_kb();
    let mut args: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), b"list".to_vec()];
    args.extend((0..1_000_000u32).map(|i| i.to_string().into_bytes()));
    assert_eq!(c.cmd(&args), Resp::Int(1_000_000));
    args[0] = b"SADD".to_vec();
    args[1] = b"set".to_vec();
    assert_eq!(c.cmd(&args), Resp::Int(1_000_000));
    // A million keys of a multi-key command across every shard.
    let mut del: Vec<Vec<u8>> = vec![b"DEL".to_vec()];
    del.extend((0..1_000_000u32).map(|i| format!("absent:{i}").into_bytes()));
    del.push(b"list".to_vec());
    assert_eq!(c.cmd(&del), Resp::Int(1));
    assert_eq!(c.cmd(&["SCARD", "set"]), Resp::Int(1_000_000));
    still_serving(&srv);
    let grown = srv.rss_kb().saturating_sub(rss0);
    assert!(grown < 600 * 1024, "RSS grew by {grown} KiB");
}

#[test]
fn a_million_pings_in_one_write_while_the_client_reads_nothing() {
    let srv = server();
    let mut s = srv.connect();
    let n = 1_000_000;
    let one = b"*1\r\n$4\r\nPING\r\n";
    let data: Vec<u8> = one.iter().copied().cycle().take(one.len() * n).collect();
    // Write everything before reading a single byte: the server must keep reading while its
    // replies wait for us, or both sides block on full buffers forever.
    s.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(&data).expect("the server stopped reading");
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut tail = Vec::new();
    while got < 7 * n {
        let r = s.read(&mut buf).expect("read replies");
        assert!(r > 0, "closed after {got} bytes");
        got += r;
        tail = buf[..r].to_vec();
    }
    assert_eq!(got, 7 * n);
    assert!(tail.ends_with(b"+PONG\r\n"));
    still_serving(&srv);
    assert!(srv.rss_kb() < 300 * 1024, "RSS {} KiB", srv.rss_kb());
}

#[test]
fn slowloris_clients_cost_nothing_and_block_nobody() {
    let srv = server();
    let rss0 = srv.rss_kb();
    // 200 clients announce half-gigabyte bulks (and one multibulk of a billion arguments), send
    // a few bytes, and stall.
    let mut stalled: Vec<TcpStream> = Vec::new();
    for i in 0..200 {
        let mut s = srv.connect();
        let head: &[u8] = if i % 2 == 0 {
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nabc"
        } else {
            b"*1000000000\r\n$3\r\nSET\r\n"
        };
        s.write_all(head).unwrap();
        stalled.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        still_serving(&srv);
    }
    let grown = srv.rss_kb().saturating_sub(rss0);
    assert!(
        grown < 64 * 1024,
        "RSS grew by {grown} KiB for 200 stalled clients"
    );
    // They are still connected (no timeout is configured), and the server still answers them
    // if they finish... or when they go away.
    drop(stalled);
    still_serving(&srv);
}

fn raise_fd_limit(want: u64) {
    // SAFETY: getrlimit/setrlimit on a local struct, for this test process only.
    unsafe {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        if l.rlim_cur < want {
            l.rlim_cur = want.min(l.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

#[test]
fn ten_thousand_idle_connections_and_maxclients() {
    raise_fd_limit(12_000);
    let max = 10_000;
    let srv = Server::start(&["--proactor_threads=4", "--maxclients", &max.to_string()]);
    let rss0 = srv.rss_kb();
    let mut conns: Vec<TcpStream> = Vec::with_capacity(max);
    for i in 0..max {
        match TcpStream::connect(("127.0.0.1", srv.port())) {
            Ok(s) => conns.push(s),
            Err(e) => panic!("connection {i}: {e}"),
        }
    }
    // The server has registered them all (accept is asynchronous).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut probe = conns.pop().expect("one to probe with");
        probe
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        probe.write_all(b"INFO clients\r\n").unwrap();
        let mut r = RawConn::new(probe);
        let info = r.read();
        let text = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
        conns.push(r.stream);
        if text.contains(&format!("connected_clients:{max}")) {
            break;
        }
        assert!(Instant::now() < deadline, "not all connected:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // One more: Redis's error, then the connection is closed.
    let extra = srv.raw_ex(b"PING\r\n");
    assert_eq!(
        extra.data,
        b"-ERR max number of clients reached\r\n".to_vec()
    );
    assert!(extra.closed);
    let per_conn = srv.rss_kb().saturating_sub(rss0) * 1024 / max as u64;
    assert!(
        per_conn < 8 * 1024,
        "{per_conn} bytes of RSS per idle connection"
    );
    // Every idle connection still works.
    for s in conns.iter_mut().step_by(997) {
        s.write_all(b"PING\r\n").unwrap();
        let mut b = [0u8; 7];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"+PONG\r\n");
    }
    // Room again once some leave.
    conns.truncate(max - 10);
    std::thread::sleep(Duration::from_millis(200));
    still_serving(&srv);
}

#[test]
fn clients_vanishing_mid_command_leave_nothing_behind() {
    let srv = server();
    // Big multi-shard commands whose senders hang up right after sending (often before the
    // command has run): nothing may stay locked.
    let mut mset: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    for i in 0..50_000 {
        mset.push(format!("key:{i}").into_bytes());
        mset.push(b"v".to_vec());
    }
    let bytes = encode(&mset);
    for _ in 0..30 {
        let mut s = srv.connect();
        s.write_all(&bytes).unwrap();
        s.write_all(b"*3\r\n$4\r\nMGET\r\n$5\r\nkey:1\r\n$5\r\nkey:2\r\n")
            .unwrap();
        drop(s);
    }
    let mut c = srv.raw_conn();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    // Blocked clients (keys on two shards) that disconnect are unregistered; a later push is
    // not lost to them.
    let blocked = |c: &mut RawConn| {
        let info = c.cmd(&["INFO", "clients"]);
        let text = String::from_utf8_lossy(info.as_bytes().unwrap()).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .expect("blocked_clients in INFO")
    };
    let wait_for = |c: &mut RawConn, n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while blocked(c) != n {
            assert!(
                Instant::now() < deadline,
                "blocked_clients never became {n}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    for _ in 0..10 {
        let mut b = srv.raw_conn();
        b.send(&["BLPOP", "queue", "{q}other", "0"]);
        wait_for(&mut c, 1);
        drop(b);
        wait_for(&mut c, 0);
    }
    assert_eq!(c.cmd(&["RPUSH", "queue", "job"]), Resp::Int(1));
    assert_eq!(c.cmd(&["LLEN", "queue"]), Resp::Int(1));
    // The MSET keys are writable at once (no lock left behind) and the MSETs were atomic.
    assert_eq!(c.cmd(&mset), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), Resp::Int(50_001));
    assert_eq!(c.cmd(&["FLUSHALL"]), ok());
    still_serving(&srv);
}

#[test]
fn binary_keys_and_values_with_every_byte() {
    let srv = server();
    let mut c = srv.raw_conn();
    let all: Vec<u8> = (0..=255u8).collect();
    assert_eq!(c.cmd(&[&b"SET"[..], &all, &all]), ok());
    assert_eq!(c.cmd(&[&b"GET"[..], &all]), Resp::Bulk(all.clone()));
    // One key per byte value (spread over the shards), in one MSET and one MGET.
    let mut mset: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    let mut mget: Vec<Vec<u8>> = vec![b"MGET".to_vec()];
    for b in 0..=255u8 {
        mset.push(vec![b]);
        mset.push(vec![b, b, 0, b'\r', b'\n']);
        mget.push(vec![b]);
    }
    assert_eq!(c.cmd(&mset), ok());
    let expect: Vec<Resp> = (0..=255u8)
        .map(|b| Resp::Bulk(vec![b, b, 0, b'\r', b'\n']))
        .collect();
    assert_eq!(c.cmd(&mget), Resp::Array(expect));
    // Collections with binary members and fields.
    assert_eq!(c.cmd(&[&b"HSET"[..], b"coll:h", &all, &all]), Resp::Int(1));
    assert_eq!(
        c.cmd(&[&b"HGET"[..], b"coll:h", &all]),
        Resp::Bulk(all.clone())
    );
    assert_eq!(
        c.cmd(&[&b"SADD"[..], b"coll:s", &all, b"\x00"]),
        Resp::Int(2)
    );
    assert_eq!(c.cmd(&[&b"SISMEMBER"[..], b"coll:s", &all]), Resp::Int(1));
    assert_eq!(c.cmd(&[&b"ZADD"[..], b"coll:z", b"1", &all]), Resp::Int(1));
    assert_eq!(c.cmd(&[&b"ZSCORE"[..], b"coll:z", &all]), bulk("1"));
    assert_eq!(c.cmd(&[&b"RPUSH"[..], b"coll:l", &all, b""]), Resp::Int(2));
    assert_eq!(
        c.cmd(&["LRANGE", "coll:l", "0", "-1"]),
        Resp::Array(vec![Resp::Bulk(all.clone()), bulk("")])
    );
    assert_eq!(c.cmd(&["DBSIZE"]), Resp::Int(261));
    still_serving(&srv);
}

/// Replies to the commands pipelined before a blocking command are sent before it blocks (as
/// Redis does), not held back until it is served.
#[test]
fn replies_before_a_blocking_command_are_not_held_back() {
    let srv = server();
    let mut c = srv.raw_conn();
    c.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    c.send_raw(b"SET a 1\r\nINCR a\r\nBLPOP empty 0\r\n");
    assert_eq!(c.read(), ok());
    assert_eq!(c.read(), Resp::Int(2));
    let mut other = srv.raw_conn();
    assert_eq!(other.cmd(&["RPUSH", "empty", "x"]), Resp::Int(1));
    assert_eq!(c.read(), Resp::Array(vec![bulk("empty"), bulk("x")]));
}
