//! MULTI / EXEC / DISCARD / WATCH / UNWATCH against the real binary with 4 shard threads.
//! Replies are checked at the RESP level against Redis 7.0's exact texts.

mod common;

use std::thread::sleep;
use std::time::Duration;

use common::{bulk, err, ok, RawConn, Resp, Server};
use damselfly::engine::shard_of;

const THREADS: usize = 4;

fn start() -> Server {
    Server::start(&["--proactor_threads=4"])
}

fn queued() -> Resp {
    Resp::Simple(b"QUEUED".to_vec())
}

fn int(i: i64) -> Resp {
    Resp::Int(i)
}

fn arr(v: Vec<Resp>) -> Resp {
    Resp::Array(v)
}

const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// `n` keys named `{prefix}{i}` that live on `n` different shards (n <= THREADS).
fn keys_on_distinct_shards(prefix: &str, n: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut used = Vec::new();
    for i in 0.. {
        let k = format!("{prefix}{i}");
        let s = shard_of(k.as_bytes(), THREADS);
        if !used.contains(&s) {
            used.push(s);
            out.push(k);
            if out.len() == n {
                break;
            }
        }
    }
    out
}

/// Runs `MULTI; PING; EXEC` and returns the EXEC reply.
fn exec_ping(c: &mut RawConn) -> Resp {
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("PING"), queued());
    c.q("EXEC")
}

fn pong_array() -> Resp {
    arr(vec![Resp::Simple(b"PONG".to_vec())])
}

#[test]
fn errors_and_texts() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("EXEC"), err("ERR EXEC without MULTI"));
    assert_eq!(c.q("DISCARD"), err("ERR DISCARD without MULTI"));
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("MULTI"), err("ERR MULTI calls can not be nested"));
    assert_eq!(c.q("WATCH x"), err("ERR WATCH inside MULTI is not allowed"));
    // Neither of those marks the transaction.
    assert_eq!(c.q("SET x 1"), queued());
    assert_eq!(c.q("EXEC"), arr(vec![ok()]));

    // Queue-time errors: unknown command, wrong arity, unknown subcommand, NO_MULTI.
    for bad in [
        "NOSUCHCMD a b",
        "GET",
        "SET onlykey",
        "CONFIG NOSUCHSUB",
        "SHUTDOWN",
    ] {
        assert!(!c.q("DEL x y").is_error());
        assert_eq!(c.q("MULTI"), ok());
        assert_eq!(c.q("SET x 2"), queued());
        let r = c.q(bad);
        assert!(r.is_error(), "{bad} -> {r}");
        assert_eq!(c.q("SET y 3"), queued());
        assert_eq!(c.q("EXEC"), err(EXECABORT), "after {bad}");
        assert_eq!(c.q("EXISTS x y"), int(0), "nothing ran after {bad}");
        // The MULTI state is cleared.
        assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
    }
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(
        c.q("SHUTDOWN"),
        err("ERR Command not allowed inside a transaction")
    );
    assert_eq!(
        c.q("GET"),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.q("NOSUCH 1"),
        err("ERR unknown command 'NOSUCH', with args beginning with: '1' ")
    );
    assert_eq!(c.q("DISCARD"), ok());
    assert_eq!(c.q("DISCARD"), err("ERR DISCARD without MULTI"));
}

#[test]
fn basics_and_runtime_errors() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("SET a 1"), queued());
    assert_eq!(c.q("INCR a"), queued());
    assert_eq!(c.q("SET s abc"), queued());
    assert_eq!(c.q("INCR s"), queued());
    assert_eq!(c.q("GET a"), queued());
    assert_eq!(c.q("GET nosuch"), queued());
    assert_eq!(c.q("PING"), queued());
    assert_eq!(
        c.q("EXEC"),
        arr(vec![
            ok(),
            int(2),
            ok(),
            err("ERR value is not an integer or out of range"),
            bulk("2"),
            Resp::Nil,
            Resp::Simple(b"PONG".to_vec()),
        ])
    );
    // Empty transaction.
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("EXEC"), arr(vec![]));
    // DISCARD drops the queue.
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("SET a 100"), queued());
    assert_eq!(c.q("DISCARD"), ok());
    assert_eq!(c.q("GET a"), bulk("2"));
    // Pipelined in one write.
    c.send_raw(b"MULTI\r\nINCR a\r\nINCR a\r\nEXEC\r\nGET a\r\n");
    assert_eq!(c.read(), ok());
    assert_eq!(c.read(), queued());
    assert_eq!(c.read(), queued());
    assert_eq!(c.read(), arr(vec![int(3), int(4)]));
    assert_eq!(c.read(), bulk("4"));
}

#[test]
fn raw_bytes_of_replies() {
    let srv = start();
    assert_eq!(
        srv.raw(b"MULTI\r\nSET k v\r\nGET k\r\nEXEC\r\n"),
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        srv.raw(b"WATCH k\r\nSET k w\r\nMULTI\r\nGET k\r\nEXEC\r\n"),
        b"+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n*-1\r\n"
    );
    // RESP3: the null is `_`.
    let out = srv.raw(b"HELLO 3\r\nWATCH k\r\nSET k x\r\nMULTI\r\nGET k\r\nEXEC\r\n");
    assert!(
        out.ends_with(b"+OK\r\n+OK\r\n+OK\r\n+QUEUED\r\n_\r\n"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    assert_eq!(
        srv.raw(b"MULTI\r\nFOO\r\nEXEC\r\n"),
        b"+OK\r\n-ERR unknown command 'FOO', with args beginning with: \r\n-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
}

#[test]
fn resp3_replies_inside_exec() {
    let srv = start();
    let mut c = srv.raw_conn();
    let h = c.q("HELLO 3");
    assert!(matches!(h, Resp::Map(_)), "{h}");
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("SET a 1"), queued());
    assert_eq!(c.q("GET nosuch"), queued());
    assert_eq!(c.q("INCRBYFLOAT a 1.5"), queued());
    assert_eq!(c.q("MGET a nosuch"), queued());
    c.send(&["EXEC"]);
    let r = c.read();
    assert_eq!(
        r,
        arr(vec![
            ok(),
            Resp::Nil,
            bulk("2.5"),
            arr(vec![bulk("2.5"), Resp::Nil]),
        ])
    );
}

#[test]
fn quit_and_reset_inside_multi() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("SET q 1"), queued());
    assert_eq!(c.q("RESET"), Resp::Simple(b"RESET".to_vec()));
    assert_eq!(c.q("EXEC"), err("ERR EXEC without MULTI"));
    assert_eq!(c.q("EXISTS q"), int(0));
    // RESET also unwatches.
    assert_eq!(c.q("WATCH q"), ok());
    assert_eq!(c.q("RESET"), Resp::Simple(b"RESET".to_vec()));
    assert_eq!(c.q("SET q 2"), ok());
    assert_eq!(exec_ping(&mut c), pong_array());

    let r = srv.raw_ex(b"MULTI\r\nSET q 3\r\nQUIT\r\nEXEC\r\n");
    assert_eq!(r.data, b"+OK\r\n+QUEUED\r\n+OK\r\n");
    assert!(r.closed);
    assert_eq!(c.q("GET q"), bulk("2"));
}

#[test]
fn select_inside_multi() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("SET a db0"), queued());
    assert_eq!(c.q("SELECT 3"), queued());
    assert_eq!(c.q("SET a db3"), queued());
    assert_eq!(c.q("SELECT 99"), queued());
    assert_eq!(c.q("GET a"), queued());
    assert_eq!(
        c.q("EXEC"),
        arr(vec![
            ok(),
            ok(),
            ok(),
            err("ERR DB index is out of range"),
            bulk("db3"),
        ])
    );
    // The connection stays in the db selected inside EXEC.
    assert_eq!(c.q("GET a"), bulk("db3"));
    assert_eq!(c.q("SELECT 0"), ok());
    assert_eq!(c.q("GET a"), bulk("db0"));
}

#[test]
fn cross_shard_commands_inside_exec() {
    let srv = start();
    let mut c = srv.raw_conn();
    let k = keys_on_distinct_shards("x", 4);
    let mut cmds: Vec<Vec<String>> = vec![
        vec![
            "MSET".into(),
            k[0].clone(),
            "10".into(),
            k[1].clone(),
            "20".into(),
            k[2].clone(),
            "30".into(),
        ],
        vec!["INCR".into(), k[0].clone()],
        vec!["INCR".into(), k[1].clone()],
        vec!["INCRBY".into(), k[2].clone(), "5".into()],
        vec!["RENAME".into(), k[2].clone(), k[3].clone()],
        vec![
            "MGET".into(),
            k[0].clone(),
            k[1].clone(),
            k[2].clone(),
            k[3].clone(),
        ],
        vec!["DEL".into(), k[0].clone(), k[1].clone()],
        vec!["DBSIZE".into()],
    ];
    assert_eq!(c.q("MULTI"), ok());
    for cmd in cmds.drain(..) {
        assert_eq!(c.cmd(&cmd), queued());
    }
    assert_eq!(
        c.q("EXEC"),
        arr(vec![
            ok(),
            int(11),
            int(21),
            int(35),
            ok(),
            arr(vec![bulk("11"), bulk("21"), Resp::Nil, bulk("35")]),
            int(2),
            int(1),
        ])
    );
    // FLUSHALL and KEYS inside EXEC (global commands).
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("KEYS *"), queued());
    assert_eq!(c.q("FLUSHALL"), queued());
    assert_eq!(c.q("DBSIZE"), queued());
    assert_eq!(c.q("EXEC"), arr(vec![arr(vec![bulk(&k[3])]), ok(), int(0)]));
}

/// Sets up `WATCH key` on `c` (after `prep` on `c`), runs `change` from another client, and
/// returns the EXEC reply of `MULTI; PING; EXEC`.
fn watch_then(srv: &Server, prep: &[&str], key: &str, change: &[&str]) -> Resp {
    let mut c = srv.raw_conn();
    let mut o = srv.raw_conn();
    assert_eq!(c.q("FLUSHALL"), ok());
    for p in prep {
        let r = c.q(p);
        assert!(!r.is_error(), "{p} -> {r}");
    }
    assert_eq!(c.cmd(&["WATCH", key]), ok());
    for ch in change {
        // Errors are part of some cases (INCR of a non-integer).
        let _ = o.q(ch);
    }
    exec_ping(&mut c)
}

#[test]
fn watch_invalidation_by_other_clients() {
    let srv = start();
    let nil = Resp::NilArray;
    let cases: &[(&[&str], &str, &[&str], bool)] = &[
        // (prep, watched key, other client's commands, EXEC fails?)
        (&["SET w 1"], "w", &["SET w 2"], true),
        (&["SET w 1"], "w", &["SET w 1"], true),
        (&[], "w", &["SET w 1"], true),
        (&["SET w 1"], "w", &["DEL w"], true),
        (&[], "w", &["DEL w"], false),
        (&["SET w 1"], "w", &["EXPIRE w 100"], true),
        (&["SET w 1"], "w", &["PERSIST w"], false),
        (&["SET w 1"], "w", &["INCR w"], true),
        (&["SET w 1"], "w", &["APPEND w x"], true),
        (&["SET w 1"], "w", &["SETRANGE w 0 x"], true),
        (&["SET w 1"], "w", &["SETBIT w 0 1"], true),
        // Like Redis: no change, no invalidation.
        (&["SET w 1"], "w", &["SETBIT w 3 1"], false),
        (&["SET w abc"], "w", &["INCR w"], false),
        (
            &["SET w 1"],
            "w",
            &["SET w 2 NX", "SET x 1 XX", "EXPIRE w 10 XX"],
            false,
        ),
        (&["SET w 1"], "w", &["BITFIELD w SET u8 0 255"], true),
        (&["SET w 1"], "w", &["RENAME w w"], false),
        (&["SET w 1"], "w", &["GETDEL w"], true),
        (&["SET w 1"], "w", &["GETEX w PX 100000"], true),
        (
            &["SET w 1"],
            "w",
            &["GET w", "EXISTS w", "TTL w", "STRLEN w"],
            false,
        ),
        (&["SET w 1"], "w", &["FLUSHDB"], true),
        (&["SET w 1"], "w", &["FLUSHALL"], true),
        (&[], "w", &["FLUSHDB", "FLUSHALL"], false),
        (&["SET w 1"], "w", &["SWAPDB 0 1"], true),
        (&[], "w", &["SELECT 1", "SET w 1", "SWAPDB 0 1"], true),
        (&[], "w", &["SWAPDB 0 1"], false),
        (&["SET w 1"], "w", &["RENAME w other"], true),
        (&["SET src 1"], "w", &["RENAME src w"], true),
        (&["SET w 1"], "w", &["MOVE w 2"], true),
        (&["SET src 1"], "w", &["COPY src w"], true),
        (&["SET w 1"], "w", &["MSET a 1 w 2 b 3 c 4 d 5"], true),
        (&[], "w", &["MSETNX w 1 a 2"], true),
        (&["SET w 1"], "w", &["SELECT 1", "SET w 2"], false),
        (&["SET w 1"], "w", &["SET other 2", "DEL other2"], false),
    ];
    for (prep, key, change, fails) in cases {
        let r = watch_then(&srv, prep, key, change);
        let want = if *fails { nil.clone() } else { pong_array() };
        assert_eq!(
            r, want,
            "prep {prep:?}, WATCH {key}, other client: {change:?}"
        );
    }
}

#[test]
fn watch_invalidation_by_expiry() {
    let srv = start();
    let mut c = srv.raw_conn();
    // Passive: the key expires after WATCH and is still in the table at EXEC.
    assert_eq!(c.q("DEBUG SET-ACTIVE-EXPIRE 0"), ok());
    assert_eq!(c.q("SET e 1 PX 100"), ok());
    assert_eq!(c.q("WATCH e"), ok());
    sleep(Duration::from_millis(150));
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("INCR e"), queued());
    assert_eq!(c.q("EXEC"), Resp::NilArray);
    // Watching an already expired (stale) key: its deletion is no change.
    assert_eq!(c.q("SET st 1 PX 1"), ok());
    sleep(Duration::from_millis(10));
    assert_eq!(c.q("WATCH st"), ok());
    assert_eq!(c.q("EXISTS st"), int(0));
    assert_eq!(exec_ping(&mut c), pong_array());
    assert_eq!(c.q("SET st 1 PX 1"), ok());
    sleep(Duration::from_millis(10));
    assert_eq!(c.q("WATCH st"), ok());
    assert_eq!(c.q("FLUSHDB"), ok());
    assert_eq!(exec_ping(&mut c), pong_array());
    assert_eq!(c.q("DEBUG SET-ACTIVE-EXPIRE 1"), ok());
    // Active expiry removes the key.
    assert_eq!(c.q("SET e 1 PX 50"), ok());
    assert_eq!(c.q("WATCH e"), ok());
    let mut o = srv.raw_conn();
    let mut gone = false;
    for _ in 0..100 {
        sleep(Duration::from_millis(20));
        if o.q("DBSIZE") == int(0) {
            gone = true;
            break;
        }
    }
    assert!(gone, "active expiry did not remove the key");
    assert_eq!(exec_ping(&mut c), Resp::NilArray);
}

#[test]
fn watch_bookkeeping() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut o = srv.raw_conn();
    // Not modified: EXEC runs.
    assert_eq!(c.q("WATCH a b c"), ok());
    assert_eq!(c.q("WATCH d"), ok());
    assert_eq!(exec_ping(&mut c), pong_array());
    // After EXEC (successful or not) nothing is watched.
    assert_eq!(c.q("SET x 30"), ok());
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(c.q("SET x 40"), ok());
    assert_eq!(exec_ping(&mut c), Resp::NilArray);
    assert_eq!(o.q("SET x 50"), ok());
    assert_eq!(exec_ping(&mut c), pong_array());
    // UNWATCH.
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(o.q("SET x 1"), ok());
    assert_eq!(c.q("UNWATCH"), ok());
    assert_eq!(c.q("UNWATCH"), ok());
    assert_eq!(exec_ping(&mut c), pong_array());
    // DISCARD clears the dirty flag and unwatches.
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(o.q("SET x 10"), ok());
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("DISCARD"), ok());
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("INCR x"), queued());
    assert_eq!(c.q("EXEC"), arr(vec![int(11)]));
    // The same client's own writes before MULTI invalidate too.
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(c.q("INCR x"), int(12));
    assert_eq!(exec_ping(&mut c), Resp::NilArray);
    // A watched key is per db.
    assert_eq!(c.q("SELECT 5"), ok());
    assert_eq!(c.q("SET x 30"), ok());
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(c.q("SELECT 1"), ok());
    assert_eq!(c.q("SET x 10"), ok());
    assert_eq!(c.q("SELECT 5"), ok());
    assert_eq!(exec_ping(&mut c), pong_array());
    // Keys watched in several dbs: a change in either fails EXEC.
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(c.q("SELECT 1"), ok());
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(o.q("SELECT 5"), ok());
    assert_eq!(o.q("SET x 31"), ok());
    assert_eq!(exec_ping(&mut c), Resp::NilArray);
    // EXECABORT also unwatches.
    assert_eq!(c.q("WATCH x"), ok());
    assert_eq!(c.q("MULTI"), ok());
    assert!(c.q("NOSUCH").is_error());
    assert_eq!(c.q("EXEC"), err(EXECABORT));
    assert_eq!(c.q("SET x 5"), ok());
    assert_eq!(exec_ping(&mut c), pong_array());
}

#[test]
fn watched_keys_on_different_shards() {
    let srv = start();
    let keys = keys_on_distinct_shards("ws", 4);
    for (i, victim) in keys.iter().enumerate() {
        let mut c = srv.raw_conn();
        let mut o = srv.raw_conn();
        let mut w = vec!["WATCH".to_string()];
        w.extend(keys.iter().cloned());
        assert_eq!(c.cmd(&w), ok());
        // Untouched: reads only.
        assert!(!o
            .cmd(&["MGET", &keys[0], &keys[1], &keys[2], &keys[3]])
            .is_error());
        assert_eq!(o.cmd(&["SET", victim, "v"]), ok());
        assert_eq!(c.q("MULTI"), ok());
        let mut mset = vec!["MSET".to_string()];
        for k in &keys {
            mset.push(k.clone());
            mset.push("from-tx".into());
        }
        assert_eq!(c.cmd(&mset), queued());
        assert_eq!(c.q("EXEC"), Resp::NilArray, "victim #{i} {victim}");
        assert_eq!(o.cmd(&["GET", victim]), bulk("v"));
        assert_eq!(o.q("FLUSHALL"), ok());
    }
    // None touched: the cross-shard MSET applies.
    let mut c = srv.raw_conn();
    let mut w = vec!["WATCH".to_string()];
    w.extend(keys.iter().cloned());
    assert_eq!(c.cmd(&w), ok());
    assert_eq!(c.q("MULTI"), ok());
    let mut mset = vec!["MSET".to_string()];
    for k in &keys {
        mset.push(k.clone());
        mset.push("from-tx".into());
    }
    assert_eq!(c.cmd(&mset), queued());
    assert_eq!(c.q("EXEC"), arr(vec![ok()]));
    assert_eq!(
        c.cmd(&["MGET", &keys[0], &keys[3]]),
        arr(vec![bulk("from-tx"), bulk("from-tx")])
    );
}

#[test]
fn client_list_shows_multi() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("SET a 1"), queued());
    assert_eq!(c.q("SET b 1"), queued());
    assert_eq!(c.q("CLIENT INFO"), queued());
    let r = c.q("EXEC");
    let Resp::Array(v) = r else { panic!("{r}") };
    let info = String::from_utf8_lossy(v[2].as_bytes().expect("bulk")).into_owned();
    // Like Redis, CLIENT INFO inside EXEC still sees the MULTI context.
    assert!(
        info.contains(" flags=x ") && info.contains(" multi=3 "),
        "{info}"
    );
    let after = c.q("CLIENT INFO");
    let after = String::from_utf8_lossy(after.as_bytes().expect("bulk")).into_owned();
    assert!(
        after.contains(" flags=N ") && after.contains(" multi=-1 "),
        "{after}"
    );
}

#[test]
fn many_watch_sessions_stay_bounded() {
    // WATCH/UNWATCH in a loop must not leak registrations (checked indirectly: it stays fast
    // and EXEC semantics hold at the end).
    let srv = start();
    let mut c = srv.raw_conn();
    let mut o = srv.raw_conn();
    for i in 0..2000 {
        c.send(&["WATCH", &format!("k{}", i % 50), "fixed"]);
        c.send(&["UNWATCH"]);
    }
    for _ in 0..4000 {
        assert_eq!(c.read(), ok());
    }
    assert_eq!(c.q("WATCH fixed"), ok());
    assert_eq!(o.q("SET fixed 1"), ok());
    assert_eq!(exec_ping(&mut c), Resp::NilArray);
}

#[test]
fn other_db_commands_inside_exec() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.q("SET m 1"), ok());
    assert_eq!(c.q("SET src v"), ok());
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("MOVE m 4"), queued());
    assert_eq!(c.q("COPY src dst DB 4"), queued());
    assert_eq!(c.q("SELECT 4"), queued());
    assert_eq!(c.q("MGET m dst"), queued());
    assert_eq!(c.q("SWAPDB 4 0"), queued());
    assert_eq!(c.q("SELECT 0"), queued());
    assert_eq!(c.q("MGET m dst src"), queued());
    assert_eq!(
        c.q("EXEC"),
        arr(vec![
            int(1),
            int(1),
            ok(),
            arr(vec![bulk("1"), bulk("v")]),
            ok(),
            ok(),
            arr(vec![bulk("1"), bulk("v"), Resp::Nil]),
        ])
    );
}
