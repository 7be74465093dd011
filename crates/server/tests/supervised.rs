//! `supervised systemd|upstart|auto` against the real binary, as redis-server 7.0 behaves: each
//! test binds its own unix datagram socket, starts damselfly with `NOTIFY_SOCKET` naming it and
//! checks every sd_notify message in order (READY=1 only once the port accepts and the snapshot
//! is loaded, STOPPING=1 when a shutdown begins); upstart's readiness is the process stopping
//! itself. docs/design/supervision.md.

mod common;

use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Resp, Server};

/// The variables a supervisor sets: removed from a server's environment unless a test sets one,
/// so that a test run under systemd or upstart itself sees only its own.
const SUPERVISOR_ENV: &[&str] = &["NOTIFY_SOCKET", "UPSTART_JOB"];

/// A notify socket as systemd's: a unix datagram socket the server sends its messages to.
struct Notify {
    sock: UnixDatagram,
    path: PathBuf,
    dir: PathBuf,
}

impl Notify {
    fn new(tag: &str) -> Notify {
        let dir = tmpdir(tag);
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Notify { sock, path, dir }
    }

    fn addr(&self) -> String {
        self.path.display().to_string()
    }

    /// The next message (panics when none comes).
    fn recv(&self, srv: &Server) -> String {
        let mut buf = [0u8; 4096];
        match self.sock.recv(&mut buf) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(e) => panic!(
                "no notify message ({e})\n--- server output ---\n{}",
                srv.output()
            ),
        }
    }

    /// The next messages are exactly `want`, in this order.
    fn expect(&self, srv: &Server, want: &[&str]) {
        for w in want {
            assert_eq!(
                self.recv(srv),
                *w,
                "--- server output ---\n{}",
                srv.output()
            );
        }
    }

    /// Nothing more is queued (call it once the server has exited: all it sent is queued).
    fn drained(&self) {
        self.sock.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 4096];
        match self.sock.recv(&mut buf) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!(
                "unexpected message: {:?}",
                other.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
            ),
        }
    }
}

impl Drop for Notify {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "damselfly-supervised-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts damselfly with `NOTIFY_SOCKET` naming `n`'s socket.
fn launch_notified(n: &Notify, args: &[&str]) -> Server {
    let addr = n.addr();
    Server::launch(args, &[("NOTIFY_SOCKET", addr.as_str())], &["UPSTART_JOB"])
}

/// A connection made at once (no retry): the server must already accept.
fn connect_now(srv: &Server) -> common::RawConn {
    let s = TcpStream::connect(("127.0.0.1", srv.port())).unwrap_or_else(|e| {
        panic!(
            "port {} refused right after readiness: {e}\n{}",
            srv.port(),
            srv.output()
        )
    });
    s.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    common::RawConn::new(s)
}

fn info_field(c: &mut common::RawConn, section: &str, field: &str) -> String {
    let Resp::Bulk(b) = c.q(&format!("INFO {section}")) else {
        panic!("INFO {section}")
    };
    let text = String::from_utf8_lossy(&b).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {text}"))
        .trim()
        .to_string()
}

fn config_get(c: &mut common::RawConn, name: &str) -> String {
    let Resp::Array(v) = c.q(&format!("CONFIG GET {name}")) else {
        panic!("CONFIG GET {name}")
    };
    match v.as_slice() {
        [_, Resp::Bulk(b)] => String::from_utf8_lossy(b).into_owned(),
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

fn exits_cleanly(srv: &mut Server) {
    let st = srv
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still running\n{}", srv.output()));
    assert!(st.success(), "{st}\n{}", srv.output());
}

const LOADING: &str = "STATUS=Damselfly is loading...\n";
const READY_STATUS: &str = "STATUS=Ready to accept connections\n";
const READY: &str = "READY=1\n";
const STOPPING: &str = "STOPPING=1\n";

/// The whole conversation of a server without data: loading, ready (only once the port
/// accepts: a connection made right after READY=1 is served), and STOPPING=1 on SHUTDOWN.
#[test]
fn systemd_ready_then_stopping_on_shutdown() {
    let n = Notify::new("basic");
    let mut srv = launch_notified(&n, &["--supervised", "systemd", "--save", ""]);
    n.expect(&srv, &[LOADING, READY_STATUS, READY]);
    let mut c = connect_now(&srv);
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
    assert_eq!(
        info_field(&mut c, "server", "process_supervised"),
        "systemd"
    );
    assert_eq!(config_get(&mut c, "supervised"), "systemd");
    assert!(srv.output().contains("Supervised by systemd."));
    c.send_raw(b"SHUTDOWN NOSAVE\r\n");
    n.expect(&srv, &[STOPPING]);
    exits_cleanly(&mut srv);
    n.drained();
}

/// With a snapshot to load, READY=1 comes once every key is in: the first command after it
/// sees them all (no -LOADING), and the loading status comes first.
#[test]
fn systemd_ready_after_the_snapshot_is_loaded() {
    let dir = tmpdir("snapshot");
    let d = dir.display().to_string();
    {
        let srv = Server::start(&["--dir", &d]);
        let mut c = srv.raw_conn();
        assert_eq!(c.q("DEBUG POPULATE 3000"), Resp::Simple(b"OK".to_vec()));
        assert_eq!(c.q("SAVE"), Resp::Simple(b"OK".to_vec()));
    }
    let n = Notify::new("snapshot");
    let mut srv = launch_notified(
        &n,
        &[
            "--supervised",
            "systemd",
            "--dir",
            &d,
            "--save",
            "",
            "--proactor_threads",
            "2",
            // Slow enough that a READY=1 sent before the load ends would be seen.
            "--key-load-delay",
            "200",
        ],
    );
    n.expect(&srv, &[LOADING, READY_STATUS, READY]);
    let mut c = connect_now(&srv);
    assert_eq!(c.q("DBSIZE"), Resp::Int(3000));
    assert!(srv.output().contains("DB loaded from disk"));
    c.send_raw(b"SHUTDOWN NOSAVE\r\n");
    n.expect(&srv, &[STOPPING]);
    exits_cleanly(&mut srv);
    n.drained();
    let _ = std::fs::remove_dir_all(dir);
}

/// `auto` with NOTIFY_SOCKET set is systemd (CONFIG GET then says so, as Redis's); SIGTERM
/// stops as SHUTDOWN does, and the final save is announced.
#[test]
fn auto_finds_systemd_and_sigterm_stops() {
    let n = Notify::new("auto");
    let mut srv = launch_notified(&n, &["--supervised", "auto", "--save", "3600 1"]);
    n.expect(&srv, &[LOADING, READY_STATUS, READY]);
    let mut c = connect_now(&srv);
    assert_eq!(
        info_field(&mut c, "server", "process_supervised"),
        "systemd"
    );
    assert_eq!(config_get(&mut c, "supervised"), "systemd");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(srv.pid() as i32, libc::SIGTERM) };
    n.expect(&srv, &[STOPPING, "STATUS=Saving the final RDB snapshot\n"]);
    exits_cleanly(&mut srv);
    n.drained();
}

/// A shutdown whose save fails says so (and the server keeps running); the next one goes.
#[test]
fn systemd_status_when_the_final_save_fails() {
    let n = Notify::new("savefail");
    let dir = tmpdir("savefail-dir");
    let d = dir.display().to_string();
    let mut srv = launch_notified(&n, &["--supervised", "systemd", "--dir", &d]);
    n.expect(&srv, &[LOADING, READY_STATUS, READY]);
    let mut c = connect_now(&srv);
    // The save cannot write its file once its directory is gone.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        c.q("SHUTDOWN SAVE"),
        Resp::Error(b"ERR Errors trying to SHUTDOWN. Check logs.".to_vec())
    );
    n.expect(
        &srv,
        &[
            STOPPING,
            "STATUS=Saving the final RDB snapshot\n",
            "STATUS=Error trying to save the DB, can't exit.\n",
        ],
    );
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
    c.send_raw(b"SHUTDOWN NOSAVE\r\n");
    n.expect(&srv, &[STOPPING]);
    exits_cleanly(&mut srv);
    n.drained();
}

/// A supervised server stays in the foreground even with `daemonize yes` (its supervisor
/// follows the pid it started), as Redis.
#[test]
fn supervised_server_does_not_daemonize() {
    let n = Notify::new("foreground");
    let mut srv = launch_notified(
        &n,
        &[
            "--supervised",
            "systemd",
            "--daemonize",
            "yes",
            "--save",
            "",
        ],
    );
    n.expect(&srv, &[LOADING, READY_STATUS, READY]);
    let mut c = connect_now(&srv);
    assert_eq!(
        info_field(&mut c, "server", "process_id"),
        srv.pid().to_string()
    );
    assert!(srv.alive());
    assert!(srv.output().contains("Ready to accept connections"));
    c.send_raw(b"SHUTDOWN NOSAVE\r\n");
    n.expect(&srv, &[STOPPING]);
    exits_cleanly(&mut srv);
}

/// A replica started with `replicaof` is ready at once, saying it waits for its primary (as
/// Redis 7.0), and says so again when the sync is done.
#[test]
fn systemd_replica_status() {
    let primary = Server::start(&["--save", ""]);
    let n = Notify::new("replica");
    let port = primary.port().to_string();
    let mut srv = launch_notified(
        &n,
        &[
            "--supervised",
            "systemd",
            "--save",
            "",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    n.expect(
        &srv,
        &[
            LOADING,
            "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> \
             REPLICA sync\n",
            READY,
            "STATUS=MASTER <-> REPLICA sync: Finished with success. Ready to accept \
             connections in read-write mode.\n",
        ],
    );
    let mut c = connect_now(&srv);
    assert_eq!(info_field(&mut c, "replication", "role"), "slave");
    c.send_raw(b"SHUTDOWN NOSAVE\r\n");
    n.expect(&srv, &[STOPPING]);
    exits_cleanly(&mut srv);
}

/// Debian's stock /etc/redis/redis.conf with the options its redis-server.service adds
/// (`--supervised systemd --daemonize no`) starts and reports ready; its save points make
/// SHUTDOWN save, which is announced. The file's log and pid file are moved to the test's
/// directory, not to touch the system's redis.
#[test]
fn debian_stock_redis_conf_supervised_by_systemd() {
    let stock = "/etc/redis/redis.conf";
    assert!(
        std::path::Path::new(stock).exists(),
        "{stock} missing: install redis-server (./scripts/test.sh does)"
    );
    let n = Notify::new("debian");
    let dir = tmpdir("debian-dir");
    let d = dir.display().to_string();
    let pidf = dir.join("r.pid").display().to_string();
    let mut srv = launch_notified(
        &n,
        &[
            stock,
            "--supervised",
            "systemd",
            "--daemonize",
            "no",
            "--dir",
            &d,
            "--logfile",
            "",
            "--pidfile",
            &pidf,
        ],
    );
    n.expect(&srv, &[LOADING, READY_STATUS, READY]);
    let mut c = connect_now(&srv);
    assert_eq!(c.q("SET k v"), Resp::Simple(b"OK".to_vec()));
    c.send_raw(b"SHUTDOWN\r\n");
    n.expect(&srv, &[STOPPING, "STATUS=Saving the final RDB snapshot\n"]);
    exits_cleanly(&mut srv);
    n.drained();
    assert!(dir.join("dump.rdb").exists());
    let _ = std::fs::remove_dir_all(dir);
}

/// `auto` without a supervisor: nothing to tell, a normal start (INFO says `no`, the setting
/// stays `auto`).
#[test]
fn auto_without_a_supervisor_starts_normally() {
    let mut srv = Server::launch(&["--supervised", "auto", "--save", ""], &[], SUPERVISOR_ENV);
    srv.wait_ready().unwrap();
    let mut c = srv.raw_conn();
    assert_eq!(info_field(&mut c, "server", "process_supervised"), "no");
    assert_eq!(config_get(&mut c, "supervised"), "auto");
    let out = srv.output();
    assert!(!out.contains("upervis"), "{out}");
}

/// `systemd` without NOTIFY_SOCKET: a warning, as Redis, and a normal start.
#[test]
fn systemd_without_notify_socket_warns() {
    let mut srv = Server::launch(
        &["--supervised", "systemd", "--save", ""],
        &[],
        SUPERVISOR_ENV,
    );
    srv.wait_ready().unwrap();
    let mut c = srv.raw_conn();
    assert_eq!(info_field(&mut c, "server", "process_supervised"), "no");
    assert!(srv
        .output()
        .contains("systemd supervision error: NOTIFY_SOCKET not found!"));
}

/// The state letter of /proc/PID/stat (R, S, T...).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Upstart (`expect stop`): the server stops itself once ready, and serves once continued.
#[test]
fn upstart_stops_itself_when_ready() {
    let mut srv = Server::launch(
        &["--supervised", "upstart", "--save", ""],
        &[("UPSTART_JOB", "damselfly-test")],
        &["NOTIFY_SOCKET"],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while proc_state(srv.pid()) != Some('T') {
        assert!(srv.alive(), "exited\n{}", srv.output());
        assert!(Instant::now() < deadline, "never stopped\n{}", srv.output());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Stopped when ready: its port already accepts (the reply waits for SIGCONT).
    let mut c = connect_now(&srv);
    c.send_raw(b"PING\r\n");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(srv.pid() as i32, libc::SIGCONT) };
    assert_eq!(c.read(), Resp::Simple(b"PONG".to_vec()));
    assert_eq!(
        info_field(&mut c, "server", "process_supervised"),
        "upstart"
    );
    assert!(srv
        .output()
        .contains("supervised by upstart, will stop to signal readiness."));
}

/// `upstart` without UPSTART_JOB: a warning, as Redis, and no stop.
#[test]
fn upstart_without_upstart_job_warns() {
    let mut srv = Server::launch(
        &["--supervised", "upstart", "--save", ""],
        &[],
        SUPERVISOR_ENV,
    );
    srv.wait_ready().unwrap();
    let mut c = srv.raw_conn();
    assert_eq!(info_field(&mut c, "server", "process_supervised"), "no");
    assert!(srv
        .output()
        .contains("upstart supervision requested, but UPSTART_JOB not found!"));
}
