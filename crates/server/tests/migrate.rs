//! MIGRATE between real servers: damselfly → damselfly (one key, KEYS across shards, COPY,
//! REPLACE, AUTH, destination db), damselfly ↔ redis-server 7.0 in both directions, the error
//! replies (NOKEY, IOERR, the target's errors, syntax), the connection cache
//! (`migrate_cached_sockets`), the replication of the move as DEL, and COMMAND INFO / GETKEYS.

mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{bulk, err, ok, RawConn, RedisServer, Resp, Server};

fn simple(s: &str) -> Resp {
    Resp::Simple(s.as_bytes().to_vec())
}

fn int(r: &Resp) -> i64 {
    r.as_int().unwrap_or_else(|| panic!("not an integer: {r}"))
}

/// `MIGRATE 127.0.0.1 <port> <rest...>` on `c`.
fn migrate(c: &mut RawConn, port: u16, rest: &[&str]) -> Resp {
    let p = port.to_string();
    let mut a = vec!["MIGRATE", "127.0.0.1", p.as_str()];
    a.extend_from_slice(rest);
    c.cmd(&a)
}

fn info_field(c: &mut RawConn, field: &str) -> String {
    let (Resp::Bulk(b) | Resp::Verbatim(b)) = c.cmd(&["INFO", "stats"]) else {
        panic!("INFO")
    };
    let s = String::from_utf8_lossy(&b).into_owned();
    s.lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {field} in INFO"))
}

#[test]
fn moves_string_list_hash_with_ttl() {
    let src = Server::start_threads(2, &[]);
    let dst = Server::start_threads(2, &[]);
    let mut s = src.raw_conn();
    let mut d = dst.raw_conn();
    s.q("SET str hello");
    s.q("PEXPIRE str 60000");
    s.q("RPUSH list a b c");
    s.q("HSET hash f1 v1 f2 v2");
    s.q("EXPIRE hash 100");
    for k in ["str", "list", "hash"] {
        assert_eq!(migrate(&mut s, dst.port(), &[k, "0", "5000"]), ok(), "{k}");
        assert_eq!(int(&s.cmd(&["EXISTS", k])), 0, "{k} left the source");
    }
    assert_eq!(d.q("GET str"), bulk("hello"));
    let pttl = int(&d.q("PTTL str"));
    assert!((50_000..=60_000).contains(&pttl), "pttl {pttl}");
    assert_eq!(
        d.q("LRANGE list 0 -1"),
        Resp::Array(vec![bulk("a"), bulk("b"), bulk("c")])
    );
    assert_eq!(int(&d.q("TTL list")), -1);
    assert_eq!(d.q("HGET hash f2"), bulk("v2"));
    let ttl = int(&d.q("TTL hash"));
    assert!((90..=100).contains(&ttl), "ttl {ttl}");
    assert_eq!(int(&s.q("DBSIZE")), 0);
}

#[test]
fn copy_replace_and_busykey() {
    let src = Server::start(&[]);
    let dst = Server::start(&[]);
    let mut s = src.raw_conn();
    let mut d = dst.raw_conn();
    s.q("RPUSH list a b c d");
    d.q("SET list other");
    // Without REPLACE the target's BUSYKEY comes back; nothing moves.
    assert_eq!(
        migrate(&mut s, dst.port(), &["list", "0", "5000", "COPY"]),
        err("ERR Target instance replied with error: BUSYKEY Target key name already exists.")
    );
    assert_eq!(
        migrate(&mut s, dst.port(), &["list", "0", "5000"]),
        err("ERR Target instance replied with error: BUSYKEY Target key name already exists.")
    );
    assert_eq!(int(&s.q("LLEN list")), 4, "a refused key stays");
    assert_eq!(d.q("GET list"), bulk("other"));
    // COPY REPLACE: replaced there, kept here.
    assert_eq!(
        migrate(
            &mut s,
            dst.port(),
            &["list", "0", "5000", "copy", "replace"]
        ),
        ok()
    );
    assert_eq!(int(&s.q("LLEN list")), 4);
    assert_eq!(s.q("LRANGE list 0 -1"), d.q("LRANGE list 0 -1"));
    // REPLACE alone: moved.
    s.q("RPUSH list e");
    assert_eq!(
        migrate(&mut s, dst.port(), &["list", "0", "5000", "REPLACE"]),
        ok()
    );
    assert_eq!(int(&s.q("EXISTS list")), 0);
    assert_eq!(int(&d.q("LLEN list")), 5);
}

#[test]
fn keys_on_several_shards() {
    let src = Server::start_threads(3, &[]);
    let dst = Server::start_threads(2, &[]);
    let mut s = src.raw_conn();
    let mut d = dst.raw_conn();
    let keys: Vec<String> = (0..20).map(|i| format!("key:{i}")).collect();
    for k in &keys {
        s.cmd(&["SET", k, &format!("v-{k}")]);
    }
    // Keys missing here are skipped; all missing: NOKEY.
    assert_eq!(
        migrate(
            &mut s,
            dst.port(),
            &["", "0", "5000", "KEYS", "nokey-1", "nokey-2"]
        ),
        simple("NOKEY")
    );
    let mut args = vec!["", "0", "5000", "KEYS", "nokey-1"];
    args.extend(keys.iter().map(String::as_str));
    args.push("nokey-2");
    assert_eq!(migrate(&mut s, dst.port(), &args), ok());
    assert_eq!(int(&s.q("DBSIZE")), 0);
    assert_eq!(int(&d.q("DBSIZE")), 20);
    for k in &keys {
        assert_eq!(d.cmd(&["GET", k]), bulk(&format!("v-{k}")));
    }
    // Two keys busy there and no REPLACE: the others move, those two stay.
    for k in &keys {
        s.cmd(&["SET", k, "again"]);
    }
    d.cmd(&["FLUSHDB"]);
    d.cmd(&["MSET", &keys[3], "_", &keys[11], "_"]);
    let mut args = vec!["", "0", "5000", "KEYS"];
    args.extend(keys.iter().map(String::as_str));
    let r = migrate(&mut s, dst.port(), &args);
    assert!(
        matches!(&r, Resp::Error(e) if e.starts_with(b"ERR Target instance replied with error: BUSYKEY")),
        "{r}"
    );
    assert_eq!(int(&s.q("DBSIZE")), 2);
    assert_eq!(int(&s.cmd(&["EXISTS", &keys[3], &keys[11]])), 2);
    assert_eq!(int(&d.q("DBSIZE")), 20);
    assert_eq!(d.cmd(&["GET", &keys[3]]), bulk("_"));
    assert_eq!(d.cmd(&["GET", &keys[4]]), bulk("again"));
}

/// Every argument after the first KEYS is a key, one named "keys" too (the key spec's
/// backwards search finds the last KEYS: the plan hook locks the others).
#[test]
fn a_key_named_keys() {
    let src = Server::start_threads(3, &[]);
    let dst = Server::start(&[]);
    let mut s = src.raw_conn();
    s.q("MSET a 1 keys 2 b 3");
    assert_eq!(
        migrate(
            &mut s,
            dst.port(),
            &["", "0", "5000", "KEYS", "a", "keys", "b"]
        ),
        ok()
    );
    assert_eq!(int(&s.q("DBSIZE")), 0);
    assert_eq!(dst.raw_conn().q("GET keys"), bulk("2"));
}

#[test]
fn auth_and_destination_db() {
    let src = Server::start(&[]);
    let dst = Server::start(&["--requirepass", "foobar"]);
    let mut s = src.raw_conn();
    let mut d = dst.raw_conn();
    assert_eq!(d.q("AUTH foobar"), ok());
    s.q("RPUSH list a b c d");
    // No AUTH: the target's NOAUTH.
    let r = migrate(&mut s, dst.port(), &["list", "9", "5000"]);
    assert!(
        matches!(&r, Resp::Error(e) if e.starts_with(b"ERR Target instance replied with error: NOAUTH")),
        "{r}"
    );
    assert_eq!(
        migrate(&mut s, dst.port(), &["list", "9", "5000", "AUTH", "foobar"]),
        ok()
    );
    assert_eq!(int(&s.q("EXISTS list")), 0);
    assert_eq!(d.q("SELECT 9"), ok());
    assert_eq!(
        d.q("LRANGE list 0 -1"),
        Resp::Array(vec![bulk("a"), bulk("b"), bulk("c"), bulk("d")])
    );
    assert_eq!(d.q("SELECT 0"), ok());
    assert_eq!(int(&d.q("EXISTS list")), 0);
    // A wrong password: WRONGPASS, and the key stays.
    s.q("SET k v");
    let r = migrate(&mut s, dst.port(), &["k", "3", "5000", "AUTH", "nope"]);
    assert!(
        matches!(&r, Resp::Error(e) if e.starts_with(b"ERR Target instance replied with error: WRONGPASS")),
        "{r}"
    );
    assert_eq!(s.q("GET k"), bulk("v"));
    // AUTH2 with the default user; the source's own db is the current one.
    s.q("SELECT 2");
    s.q("SET k2 v2");
    assert_eq!(
        migrate(
            &mut s,
            dst.port(),
            &["k2", "3", "5000", "AUTH2", "default", "foobar"]
        ),
        ok()
    );
    assert_eq!(d.q("SELECT 3"), ok());
    assert_eq!(d.q("GET k2"), bulk("v2"));
    // A database the target does not have.
    s.q("SET k3 v3");
    let r = migrate(&mut s, dst.port(), &["k3", "99", "5000", "AUTH", "foobar"]);
    assert!(
        matches!(&r, Resp::Error(e) if e.starts_with(b"ERR Target instance replied with error: ERR DB index is out of range")),
        "{r}"
    );
    assert_eq!(s.q("GET k3"), bulk("v3"));
}

#[test]
fn errors() {
    let src = Server::start(&[]);
    let mut s = src.raw_conn();
    let dead = common::free_port();
    // Nothing to move: NOKEY before any connection.
    assert_eq!(
        migrate(&mut s, dead, &["nokey", "0", "1000"]),
        simple("NOKEY")
    );
    s.q("SET k v");
    assert_eq!(
        migrate(&mut s, dead, &["k", "0", "1000"]),
        err("IOERR error or timeout connecting to the client")
    );
    assert_eq!(s.q("GET k"), bulk("v"));
    assert_eq!(
        migrate(&mut s, dead, &["k", "0", "1000", "bogus"]),
        err("ERR syntax error")
    );
    assert_eq!(
        migrate(&mut s, dead, &["k", "0", "1000", "AUTH"]),
        err("ERR syntax error")
    );
    assert_eq!(
        migrate(&mut s, dead, &["k", "0", "1000", "AUTH2", "u"]),
        err("ERR syntax error")
    );
    assert_eq!(
        migrate(&mut s, dead, &["NotEmpty", "0", "1000", "KEYS", "a", "b"]),
        err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string")
    );
    assert_eq!(
        migrate(&mut s, dead, &["k", "0", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        migrate(&mut s, dead, &["k", "x", "1000"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        s.q("MIGRATE a b c d"),
        err("ERR wrong number of arguments for 'migrate' command")
    );
}

/// A target that accepts the connection and never answers: the read times out.
#[test]
fn timeout_reading() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let (sock, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(2));
        drop(sock);
    });
    let src = Server::start(&[]);
    let mut s = src.raw_conn();
    s.q("SET k v");
    let t0 = Instant::now();
    assert_eq!(
        migrate(&mut s, port, &["k", "0", "300"]),
        err("IOERR error or timeout reading to target instance")
    );
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(s.q("GET k"), bulk("v"));
    // Other clients were served meanwhile (nothing blocks the thread); the key is usable.
    assert_eq!(s.q("PING"), simple("PONG"));
    held.join().unwrap();
}

#[test]
fn connections_are_cached_and_released() {
    let src = Server::start_threads(1, &[]);
    let dst = Server::start(&[]);
    let mut s = src.raw_conn();
    assert_eq!(info_field(&mut s, "migrate_cached_sockets"), "0");
    s.q("SET a 1");
    assert_eq!(migrate(&mut s, dst.port(), &["a", "0", "1000"]), ok());
    assert_eq!(info_field(&mut s, "migrate_cached_sockets"), "1");
    // The cached connection is reused (and remembers its db: no SELECT error here).
    s.q("SET b 2");
    assert_eq!(migrate(&mut s, dst.port(), &["b", "0", "1000"]), ok());
    assert_eq!(info_field(&mut s, "migrate_cached_sockets"), "1");
    assert_eq!(int(&dst.raw_conn().q("DBSIZE")), 2);
    // The target restarted: the cached connection fails, MIGRATE reconnects once.
    let mut dst = dst;
    dst.restart();
    s.q("SET c 3");
    assert_eq!(migrate(&mut s, dst.port(), &["c", "0", "1000"]), ok());
    assert_eq!(info_field(&mut s, "migrate_cached_sockets"), "1");
    // Released after 10 s idle.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if info_field(&mut s, "migrate_cached_sockets") == "0" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cached connection never released"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn damselfly_to_redis_and_back() {
    let dfly = Server::start_threads(3, &[]);
    let redis = RedisServer::start();
    let mut s = dfly.raw_conn();
    let mut r = redis.raw_conn();
    s.q("SET str hello");
    s.q("PEXPIRE str 60000");
    s.q("RPUSH list a b c");
    s.q("HSET hash f1 v1 f2 v2");
    s.q("SADD set x y z");
    s.q("ZADD zset 1 a 2 b");
    s.q("XADD stream 1-1 f v");
    let keys = ["str", "list", "hash", "set", "zset", "stream"];
    let mut args = vec!["", "4", "5000", "KEYS"];
    args.extend(keys);
    assert_eq!(migrate(&mut s, redis.port(), &args), ok());
    assert_eq!(int(&s.q("DBSIZE")), 0);
    assert_eq!(r.q("SELECT 4"), ok());
    assert_eq!(r.q("GET str"), bulk("hello"));
    assert!(int(&r.q("PTTL str")) > 50_000);
    assert_eq!(int(&r.q("SCARD set")), 3);
    assert_eq!(r.q("ZSCORE zset b"), bulk("2"));
    assert_eq!(int(&r.q("XLEN stream")), 1);
    // And back: redis-server's MIGRATE to our port.
    let mut args = vec!["", "1", "5000", "KEYS"];
    args.extend(keys);
    assert_eq!(migrate(&mut r, dfly.port(), &args), ok());
    assert_eq!(int(&r.q("DBSIZE")), 0);
    assert_eq!(s.q("SELECT 1"), ok());
    assert_eq!(s.q("GET str"), bulk("hello"));
    assert!(int(&s.q("PTTL str")) > 50_000);
    assert_eq!(
        s.q("LRANGE list 0 -1"),
        Resp::Array(vec![bulk("a"), bulk("b"), bulk("c")])
    );
    assert_eq!(s.q("HGET hash f1"), bulk("v1"));
    assert_eq!(int(&s.q("SCARD set")), 3);
    assert_eq!(s.q("ZSCORE zset b"), bulk("2"));
    assert_eq!(int(&s.q("XLEN stream")), 1);
    // redis-server's BUSYKEY without REPLACE, its REPLACE with.
    s.q("SET str mine");
    r.q("SET str theirs");
    assert_eq!(
        migrate(&mut s, redis.port(), &["str", "4", "5000"]),
        err("ERR Target instance replied with error: BUSYKEY Target key name already exists.")
    );
    assert_eq!(
        migrate(&mut s, redis.port(), &["str", "4", "5000", "REPLACE"]),
        ok()
    );
    assert_eq!(r.q("GET str"), bulk("mine"));
}

/// The move reaches a replica as DEL of the moved keys (a COPY as nothing).
#[test]
fn replicated_as_del() {
    let src = Server::start_threads(2, &["--repl-diskless-sync-delay", "0"]);
    let dst = Server::start(&[]);
    let replica = RedisServer::start();
    let mut s = src.raw_conn();
    let mut rep = replica.raw_conn();
    assert_eq!(
        rep.cmd(&["REPLICAOF", "127.0.0.1", &src.port().to_string()]),
        ok()
    );
    let wait_for = |rep: &mut RawConn, what: &str, want: i64| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let n = int(&rep.q(what));
            if n == want {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {n}, want {want}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    s.q("MSET a 1 b 2 c 3 keep 4");
    wait_for(&mut rep, "DBSIZE", 4);
    // COPY: nothing to replicate.
    assert_eq!(
        migrate(
            &mut s,
            dst.port(),
            &["", "0", "5000", "COPY", "KEYS", "a", "b"]
        ),
        ok()
    );
    assert_eq!(
        migrate(
            &mut s,
            dst.port(),
            &["", "0", "5000", "REPLACE", "KEYS", "a", "b", "c", "none"]
        ),
        ok()
    );
    wait_for(&mut rep, "DBSIZE", 1);
    assert_eq!(rep.q("GET keep"), bulk("4"));
    assert_eq!(int(&s.q("DBSIZE")), 1);
}

/// COMMAND INFO and GETKEYS as redis-server 7.0 answers them (the per-key-spec flags and tips
/// aside: damselfly derives those for every command).
#[test]
fn command_info_and_getkeys() {
    let srv = Server::start(&[]);
    let redis = RedisServer::start();
    let mut c = srv.raw_conn();
    let mut r = redis.raw_conn();
    let Resp::Array(ours) = c.q("COMMAND INFO migrate") else {
        panic!()
    };
    let Resp::Array(theirs) = r.q("COMMAND INFO migrate") else {
        panic!()
    };
    let (Resp::Array(o), Resp::Array(t)) = (&ours[0], &theirs[0]) else {
        panic!()
    };
    // Name, arity, flags, first/last/step, ACL categories.
    for i in [0, 1, 2, 3, 4, 5, 6] {
        assert_eq!(o[i], t[i], "COMMAND INFO field {i}");
    }
    // Two key specs: index 3, and KEYS searched from -2.
    let (Resp::Array(ok_specs), Resp::Array(rk)) = (&o[8], &t[8]) else {
        panic!()
    };
    assert_eq!(ok_specs.len(), rk.len());
    let strip = |s: &Resp| match s {
        Resp::Array(v) => v[2..].to_vec(),
        other => panic!("{other}"),
    };
    for (a, b) in ok_specs.iter().zip(rk) {
        assert_eq!(strip(a), strip(b));
    }
    for line in [
        vec!["migrate", "h", "p", "k", "0", "5"],
        vec!["migrate", "h", "p", "k", "0", "5", "copy", "replace"],
    ] {
        let mut a = vec!["COMMAND", "GETKEYS"];
        a.extend(line);
        assert_eq!(c.cmd(&a), r.cmd(&a));
    }
}
