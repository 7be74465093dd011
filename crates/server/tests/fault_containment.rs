//! Fault containment (docs/design/fault-containment.md): a panic inside one command's execution
//! costs that command only — the client gets `-ERR internal error ...`, the event is logged and
//! counted, every other key and client keeps working — and a panic in engine code outside any
//! command makes the process exit at once with status 70.
//!
//! The faults are injected with the test-only `FAULT.*` commands (src/commands/fault.rs), which
//! exist in debug builds and with `--features fault-injection` only.

mod common;

use std::time::Duration;

use common::{bulk, ok, RawConn, Resp, Server};

fn start() -> Server {
    let srv = Server::start(&["--proactor_threads=4"]);
    let mut c = srv.raw_conn();
    let r = c.cmd(&["FAULT.SHARD", "probe"]);
    assert!(
        matches!(&r, Resp::Error(e) if e.starts_with(b"ERR internal error")),
        "the binary under test has no fault-injection commands (got {r}); debug builds have \
         them, release builds need `--features fault-injection` (scripts/test.sh passes it)"
    );
    srv
}

fn internal_error(cmd: &str) -> Resp {
    Resp::Error(
        format!("ERR internal error in '{cmd}' command (details are in the server log)")
            .into_bytes(),
    )
}

fn info_field(c: &mut RawConn, section: &str, field: &str) -> String {
    let r = c.cmd(&["INFO", section]);
    let text = String::from_utf8_lossy(r.as_bytes().expect("INFO is a bulk")).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}:\n{text}"))
        .trim()
        .to_string()
}

const KEYS: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];

#[test]
fn shard_command_panic_is_an_error_reply_and_everything_else_keeps_working() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut other = srv.raw_conn();
    for k in KEYS {
        assert_eq!(c.cmd(&["SET", k, "v"]), ok());
    }
    // Every key (so every shard, inline and by message) fails the same way, and leaves the
    // key, the shard and other clients intact.
    for k in KEYS {
        assert_eq!(c.cmd(&["FAULT.SHARD", k]), internal_error("fault.shard"));
        assert_eq!(other.cmd(&["GET", k]), bulk("v"));
        assert_eq!(other.cmd(&["APPEND", k, "w"]), Resp::Int(2));
        assert_eq!(c.cmd(&["GETDEL", k]), bulk("vw"));
    }
    assert_eq!(c.cmd(&["DBSIZE"]), Resp::Int(0));
    // probe + 10 keys.
    assert_eq!(info_field(&mut c, "stats", "internal_errors"), "11");
    assert_eq!(
        info_field(&mut c, "errorstats", "errorstat_ERR"),
        "count=11"
    );
    let log = srv.output();
    assert!(
        log.contains("internal error in command 'fault.shard'")
            && log.contains("fault injection: FAULT.SHARD a")
            && log.contains("src/commands/fault.rs"),
        "the log names the command, the panic and its location:\n{log}"
    );
}

#[test]
fn panic_inside_a_pipeline_affects_only_that_command() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut pipe = Vec::new();
    let big: Vec<String> = (0..300).map(|i| i.to_string()).collect();
    let mut rpush = vec!["RPUSH".to_string(), "biglist".to_string()];
    rpush.extend(big.iter().cloned());
    let cmds: Vec<Vec<String>> = vec![
        vec!["SET".into(), "other".into(), "1".into()],
        vec!["FAULT.SHARD".into(), "biglist".into()],
        rpush,
        vec!["FAULT.SHARD".into(), "other".into()],
        vec!["GET".into(), "other".into()],
        vec!["LLEN".into(), "biglist".into()],
        vec!["FAULT.SHARD".into(), "x".into()],
        vec!["INCR".into(), "other".into()],
    ];
    for cmd in &cmds {
        pipe.extend(common::encode(cmd));
    }
    c.send_raw(&pipe);
    let got: Vec<Resp> = cmds.iter().map(|_| c.read()).collect();
    assert_eq!(
        got,
        vec![
            ok(),
            internal_error("fault.shard"),
            Resp::Int(300),
            internal_error("fault.shard"),
            bulk("1"),
            Resp::Int(300),
            internal_error("fault.shard"),
            Resp::Int(2),
        ]
    );
}

#[test]
fn panic_inside_exec_fails_that_command_only() {
    let srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["MULTI"]), ok());
    for cmd in [
        &["SET", "m", "1"][..],
        &["FAULT.SHARD", "m"],
        &["FAULT.CONN"],
        &["INCR", "m"],
        &["MSET", "a", "1", "b", "2", "c", "3"],
    ] {
        assert_eq!(c.cmd(cmd), Resp::Simple(b"QUEUED".to_vec()));
    }
    assert_eq!(
        c.cmd(&["EXEC"]),
        Resp::Array(vec![
            ok(),
            internal_error("fault.shard"),
            internal_error("fault.conn"),
            Resp::Int(2),
            ok(),
        ])
    );
    assert_eq!(
        c.cmd(&["MGET", "m", "a", "b", "c"]),
        Resp::Array(vec![bulk("2"), bulk("1"), bulk("2"), bulk("3")])
    );
}

#[test]
fn panicking_hop_of_a_multi_shard_transaction_releases_its_locks() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut other = srv.raw_conn();
    // Ten keys span the four shards: a transaction is scheduled on all of them, one hop panics.
    let mut cmd = vec!["FAULT.KEYS"];
    cmd.extend(KEYS);
    assert_eq!(c.cmd(&cmd), internal_error("fault.keys"));
    // Nothing stays locked: writes, multi-key writes, transactions and global commands on the
    // same keys go through at once, from this client and another.
    let mut mset = vec!["MSET"];
    for k in KEYS {
        mset.push(k);
        mset.push("after");
    }
    other
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(other.cmd(&mset), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["DEL", "a", "b", "c"]),
        Resp::Simple(b"QUEUED".to_vec())
    );
    assert_eq!(c.cmd(&["EXEC"]), Resp::Array(vec![Resp::Int(3)]));
    assert_eq!(other.cmd(&["DBSIZE"]), Resp::Int(7));
    assert_eq!(other.cmd(&["FLUSHALL"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), Resp::Int(0));
}

#[test]
fn coordinator_panic_keeps_the_connection_and_blocked_clients_alive() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut blocked = srv.raw_conn();
    blocked.send(&["BLPOP", "queue", "0"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd(&["FAULT.CONN"]), internal_error("fault.conn"));
    assert_eq!(
        c.cmd(&["FAULT.SHARD", "queue"]),
        internal_error("fault.shard")
    );
    assert_eq!(c.cmd(&["PING"]), Resp::Simple(b"PONG".to_vec()));
    assert_eq!(c.cmd(&["RPUSH", "queue", "job"]), Resp::Int(1));
    assert_eq!(
        blocked.read(),
        Resp::Array(vec![bulk("queue"), bulk("job")])
    );
    assert_eq!(info_field(&mut c, "stats", "internal_errors"), "3");
}

#[test]
fn engine_panic_outside_a_command_exits_the_process_with_the_cause_logged() {
    let mut srv = start();
    let mut c = srv.raw_conn();
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["FAULT.ENGINE", "2"]), ok());
    let st = srv
        .wait_exit(Duration::from_secs(10))
        .expect("the process must exit, not linger half-dead");
    assert_eq!(st.code(), Some(70), "exit status {st}");
    let log = srv.output();
    assert!(
        log.contains("FATAL internal error outside any command")
            && log.contains("fault injection: FAULT.ENGINE"),
        "cause in the log:\n{log}"
    );
}

/// The hop API's contract: a command says which chain is its last (`run()`), and a hop after
/// that (its shards have released their locks) is a bug the framework catches — the command
/// fails with an internal error, its first chain's effects stay, and nothing stays locked.
#[test]
fn hop_after_the_final_hop_is_caught() {
    let srv = start();
    let mut c = srv.raw_conn();
    let mut other = srv.raw_conn();
    other
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // One key (a single-shard chain run as one message) and ten keys (a transaction).
    let mut many = vec!["FAULT.HOPS"];
    many.extend(KEYS);
    for cmd in [vec!["FAULT.HOPS", "solo"], many] {
        assert_eq!(c.cmd(&cmd), internal_error("fault.hops"));
        for k in &cmd[1..] {
            assert_eq!(other.cmd(&["GET", k]), bulk("final-hop"), "{k}");
        }
        let mut mset = vec!["MSET"];
        for k in &cmd[1..] {
            mset.push(k);
            mset.push("after");
        }
        assert_eq!(other.cmd(&mset), ok());
        assert_eq!(c.cmd(&["GET", cmd[1]]), bulk("after"));
    }
    // Two here plus start()'s probe.
    assert_eq!(info_field(&mut c, "stats", "internal_errors"), "3");
    let log = srv.output();
    assert!(
        log.contains("hop after the command's final hop"),
        "cause in the log:\n{log}"
    );
}
