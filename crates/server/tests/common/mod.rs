//! Shared integration-test harness: start the real `damselfly` binary (or a reference
//! `redis-server`) on a free loopback port, talk to it with the `redis` crate or raw bytes, and kill
//! it when the handle drops.
//!
//! ```ignore
//! mod common;
//! let srv = common::Server::start(&["--proactor_threads=4"]);
//! let mut con = srv.client();
//! assert_eq!(srv.raw(b"PING\r\n"), b"+PONG\r\n");
//! ```
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a server gets to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Default patience when reading replies.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A running server process (damselfly or redis-server), killed on drop.
pub struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
    name: &'static str,
    /// The private `--dir` [`Server::start`] made, removed on drop.
    own_dir: Option<PathBuf>,
    /// How it was started (for [`Server::restart`]).
    bin: PathBuf,
    argv: Vec<String>,
}

/// Reference Redis for differential tests.
pub struct RedisServer;

impl RedisServer {
    /// Starts `redis-server --port P --bind 127.0.0.1 --save '' --appendonly no`.
    /// Panics with a clear message when redis-server is not installed.
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    pub fn start_with(extra: &[&str]) -> Server {
        if Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            panic!(
                "redis-server is not installed but this test compares against it; install it \
                 (`apt-get install -y redis-server`, which ./scripts/test.sh does when run as root)"
            );
        }
        let mut args: Vec<String> = vec![
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--enable-debug-command".into(),
            "yes".into(),
            "--daemonize".into(),
            "no".into(),
        ];
        // A private working directory, as damselfly's (`Server::start`): a redis-server that
        // writes a snapshot (a replica's full sync, SAVE, DEBUG RELOAD) must never leave a
        // `dump.rdb` that another test's redis-server loads at start. A test's own --dir comes
        // later and wins.
        let dir = private_dir("redis");
        args.extend(["--dir".to_string(), dir.display().to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut srv = Server::spawn("redis-server", "redis-server".into(), &args);
        srv.own_dir = Some(dir);
        srv
    }
}

/// The damselfly binary under test (`DFLY_TEST_BIN` overrides the one cargo built).
pub fn dfly_bin() -> PathBuf {
    std::env::var_os("DFLY_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_damselfly").into())
}

/// True when `DFLY_TEST_TARGET=redis`: tests run against redis-server (see [`Server::start`]).
pub fn against_redis() -> bool {
    std::env::var("DFLY_TEST_TARGET").is_ok_and(|v| v == "redis")
}

/// A port that was free a moment ago (bind :0, read it, release it).
pub fn free_port() -> u16 {
    // Ports handed out by bind(":0") come from the ephemeral range that client sockets of other
    // tests running in parallel also use, so one could be taken before the server binds it. Use
    // ports below that range (Linux: 32768+), distinct per test process and per call instead.
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((std::process::id() % 397) * 29 + n) % 12_000;
        if TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
    panic!("no free loopback port in 20000..32000")
}

impl Server {
    /// Starts the damselfly binary under test with `--port P --bind 127.0.0.1` plus `args`.
    ///
    /// With `DFLY_TEST_TARGET=redis` in the environment a real redis-server is started instead
    /// (damselfly-only flags dropped): a quick way to check that a test's expectations are
    /// Redis's own behaviour. `DFLY_TEST_BIN=/path/to/damselfly` runs another build (e.g. release).
    pub fn start(args: &[&str]) -> Server {
        if against_redis() {
            return RedisServer::start();
        }
        // A private working directory, so that a snapshot one test saves (SAVE, DEBUG RELOAD,
        // SHUTDOWN) is never loaded by another test's server; a test's own --dir comes later
        // and wins.
        let dir = private_dir("damselfly");
        let mut all = vec!["--dir".to_string(), dir.display().to_string()];
        all.extend(args.iter().map(|s| s.to_string()));
        let mut srv = Server::spawn("damselfly", dfly_bin(), &all);
        srv.own_dir = Some(dir);
        srv
    }

    /// Starts damselfly as `damselfly <config> --port P --bind 127.0.0.1 ... args`, the way
    /// `redis-server /path/redis.conf` is started (the file's port is overridden).
    pub fn start_config(config: &std::path::Path, args: &[&str]) -> Server {
        // A private working directory as for `start` (the default save points write a snapshot
        // at shutdown), unless the file or the test's options name one (a --dir given here
        // would override the file's).
        let names_dir = std::fs::read_to_string(config)
            .is_ok_and(|t| t.lines().any(|l| l.trim_start().starts_with("dir ")))
            || args.contains(&"--dir");
        let mut all = vec![config.display().to_string()];
        let dir = (!names_dir).then(|| {
            let dir = private_dir("damselfly");
            all.extend(["--dir".to_string(), dir.display().to_string()]);
            dir
        });
        all.extend(args.iter().map(|s| s.to_string()));
        let mut srv = Server::spawn("damselfly", dfly_bin(), &all);
        srv.own_dir = dir;
        srv
    }

    /// [`Server::start`] with `--proactor_threads=threads` ahead of `args`.
    pub fn start_threads(threads: usize, args: &[&str]) -> Server {
        let flag = format!("--proactor_threads={threads}");
        let mut all = vec![flag.as_str()];
        all.extend_from_slice(args);
        Server::start(&all)
    }

    fn spawn(name: &'static str, bin: PathBuf, args: &[String]) -> Server {
        // A configuration file (first, as redis-server takes it) stays first.
        let (leading, args) = match args.first() {
            Some(a) if !a.starts_with('-') => (Some(a.clone()), &args[1..]),
            _ => (None, args),
        };
        // A port can be taken between probing and binding; retry a few times on early exit.
        let mut last_err = String::new();
        for _ in 0..5 {
            let port = free_port();
            let log = std::env::temp_dir().join(format!(
                "{name}-test-{}-{}-{port}.log",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            let logf = std::fs::File::create(&log).expect("cannot create server log file");
            let logf2 = logf.try_clone().expect("cannot dup log file");
            let mut argv: Vec<String> = leading.iter().cloned().collect();
            argv.extend([
                "--port".to_string(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                // Tests use DEBUG (off by default, as in Redis 7); a test's own args come
                // later and win.
                "--enable-debug-command".into(),
                "yes".into(),
            ]);
            argv.extend(args.iter().cloned());
            let child = Command::new(&bin)
                .args(&argv)
                .stdin(Stdio::null())
                .stdout(logf)
                .stderr(logf2)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", bin.display()));
            let mut srv = Server {
                child,
                port,
                log,
                name,
                own_dir: None,
                bin: bin.clone(),
                argv,
            };
            match srv.wait_ready() {
                Ok(()) => return srv,
                Err(e) => {
                    last_err = format!(
                        "{name} ({} {:?}) did not answer PING on port {port}: {e}\n--- its output ---\n{}",
                        bin.display(),
                        args,
                        srv.output()
                    );
                    // Exited (most likely the port was taken): try another port.
                    if matches!(srv.child.try_wait(), Ok(Some(_))) {
                        continue;
                    }
                    break;
                }
            }
        }
        panic!("{last_err}");
    }

    /// Starts damselfly as [`Server::start`] does (a private `--dir`, `--port`, `--bind`; a
    /// configuration file first in `args` stays first) with `env` set and `unset` removed from
    /// its environment, and returns at once: for tests that watch start-up itself
    /// (supervision). [`Server::wait_ready`] waits until it answers.
    pub fn launch(args: &[&str], env: &[(&str, &str)], unset: &[&str]) -> Server {
        let dir = private_dir("damselfly");
        let port = free_port();
        let log = std::env::temp_dir().join(format!(
            "damselfly-test-{}-{}-{port}.log",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let (leading, args) = match args.first() {
            Some(a) if !a.starts_with('-') => (Some(a.to_string()), &args[1..]),
            _ => (None, args),
        };
        let mut argv: Vec<String> = leading.into_iter().collect();
        argv.extend([
            "--dir".to_string(),
            dir.display().to_string(),
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--enable-debug-command".into(),
            "yes".into(),
        ]);
        argv.extend(args.iter().map(|s| s.to_string()));
        let logf = std::fs::File::create(&log).expect("cannot create server log file");
        let logf2 = logf.try_clone().expect("cannot dup log file");
        let bin = dfly_bin();
        let mut cmd = Command::new(&bin);
        cmd.args(&argv)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(logf)
            .stderr(logf2);
        for k in unset {
            cmd.env_remove(k);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", bin.display()));
        Server {
            child,
            port,
            log,
            name: "damselfly",
            own_dir: Some(dir),
            bin,
            argv,
        }
    }

    /// Waits until the server answers PING on its port (or says why not).
    pub fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("process exited early with {st}"));
            }
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                if s.write_all(b"PING\r\n").is_ok() {
                    let mut buf = [0u8; 64];
                    if let Ok(n) = s.read(&mut buf) {
                        // `-NOAUTH`: the server runs with a password (`--requirepass`). The
                        // answer may come from another test's server that took the port first
                        // (ours then fails to bind and exits): only ours counts.
                        let answered =
                            buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH");
                        if answered && listens_on(self.child.id(), self.port) != Some(false) {
                            return Ok(());
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(format!("timed out after {START_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `kill -9`: the process dies at once, with whatever it had not saved.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the same command line again (same port, same directory) after [`kill9`] or an
    /// exit; its output goes on in the same log.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let logf = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .expect("cannot reopen server log file");
        let logf2 = logf.try_clone().expect("cannot dup log file");
        self.child = Command::new(&self.bin)
            .args(&self.argv)
            .stdin(Stdio::null())
            .stdout(logf)
            .stderr(logf2)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", self.bin.display()));
        if let Err(e) = self.wait_ready() {
            panic!(
                "restarted {} did not come up: {e}\n{}",
                self.name,
                self.output()
            );
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Everything the process printed so far (stdout + stderr).
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Is the process still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `timeout` for the process to exit; its exit status, or None if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A synchronous `redis` crate connection.
    pub fn client(&self) -> redis::Connection {
        let c = redis::Client::open(self.url()).expect("bad url");
        c.get_connection_with_timeout(READ_TIMEOUT)
            .unwrap_or_else(|e| panic!("cannot connect to {} on {}: {e}", self.name, self.port))
    }

    /// A fresh TCP connection with a read timeout.
    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port))
            .unwrap_or_else(|e| panic!("cannot connect to {} on {}: {e}", self.name, self.port));
        s.set_read_timeout(Some(READ_TIMEOUT)).ok();
        s.set_nodelay(true).ok();
        s
    }

    /// A raw RESP connection (see [`RawConn`]).
    pub fn raw_conn(&self) -> RawConn {
        RawConn::new(self.connect())
    }

    /// Sends `bytes` on a fresh connection and returns what came back until the server closed the
    /// connection or stayed quiet for a while (see [`raw_exchange`]).
    pub fn raw(&self, bytes: &[u8]) -> Vec<u8> {
        self.raw_ex(bytes).data
    }

    /// Like [`Server::raw`] but also tells whether the server closed the connection.
    pub fn raw_ex(&self, bytes: &[u8]) -> RawReply {
        raw_exchange(self.connect(), bytes, Duration::from_millis(300))
    }

    /// For input that should get no reply at all: waits only `first` for a first byte.
    pub fn raw_ex_quiet(&self, bytes: &[u8], first: Duration) -> RawReply {
        raw_exchange_with(self.connect(), bytes, first, Duration::from_millis(300))
    }

    /// Current resident set size of the server process in KiB (Linux).
    pub fn rss_kb(&self) -> u64 {
        let st =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        st.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// Does process `pid` hold the socket listening on loopback `port`? None where `/proc` cannot
/// tell (not Linux).
pub fn listens_on(pid: u32, port: u16) -> Option<bool> {
    let mut inodes = Vec::new();
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?
        + &std::fs::read_to_string("/proc/net/tcp6").unwrap_or_default();
    for l in text.lines().filter(|l| !l.trim_start().starts_with("sl")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = f.get(1).and_then(|a| a.rsplit(':').next());
        // State 0A is LISTEN; field 9 is the socket's inode.
        if f.len() > 9 && f[3] == "0A" && local_port == Some(&format!("{port:04X}")[..]) {
            inodes.push(format!("socket:[{}]", f[9]));
        }
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|t| inodes.iter().any(|i| t.as_os_str() == &i[..]))
    }))
}

/// A new empty working directory for one test server (`<kind>-test-dir-<pid>-<n>`), removed
/// when the server is dropped: a snapshot one test writes is never loaded by another's server.
fn private_dir(kind: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "{kind}-test-dir-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.own_dir {
            let _ = std::fs::remove_dir_all(d);
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        } else {
            eprintln!(
                "[{} on port {} output kept at {}]",
                self.name,
                self.port,
                self.log.display()
            );
        }
    }
}

/// Result of [`raw_exchange`].
#[derive(Debug)]
pub struct RawReply {
    pub data: Vec<u8>,
    /// The server closed the connection (EOF or reset).
    pub closed: bool,
}

/// Writes `bytes`, then reads until EOF, or until nothing more arrives for `idle` (50 ms once what
/// arrived parses as complete replies), or for `first` before any byte at all.
pub fn raw_exchange_with(
    mut s: TcpStream,
    bytes: &[u8],
    first: Duration,
    idle: Duration,
) -> RawReply {
    let _ = s.write_all(bytes);
    let mut data = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let wait = if data.is_empty() {
            first
        } else if complete_replies(&data) {
            idle.min(Duration::from_millis(50))
        } else {
            idle
        };
        s.set_read_timeout(Some(wait)).ok();
        match s.read(&mut buf) {
            Ok(0) => return RawReply { data, closed: true },
            Ok(n) => data.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return RawReply {
                    data,
                    closed: false,
                }
            }
            Err(_) => return RawReply { data, closed: true },
        }
    }
}

/// [`raw_exchange_with`] waiting up to 10 s for the first byte.
pub fn raw_exchange(s: TcpStream, bytes: &[u8], idle: Duration) -> RawReply {
    raw_exchange_with(s, bytes, READ_TIMEOUT, idle)
}

/// Does `buf` consist of whole RESP replies (at least one) and nothing else?
pub fn complete_replies(mut buf: &[u8]) -> bool {
    if buf.is_empty() {
        return false;
    }
    while !buf.is_empty() {
        match parse_resp(buf) {
            Ok(Some((_, n))) => buf = &buf[n..],
            _ => return false,
        }
    }
    true
}

// ---------------------------------------------------------------------------------------------
// RESP values and a raw connection that parses replies.

/// One parsed RESP2/RESP3 reply.
#[derive(Clone, PartialEq)]
pub enum Resp {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1` / `*-1` / `_`.
    Nil,
    NilArray,
    Array(Vec<Resp>),
    Double(Vec<u8>),
    Bool(bool),
    BigNum(Vec<u8>),
    Verbatim(Vec<u8>),
    Map(Vec<(Resp, Resp)>),
    Set(Vec<Resp>),
    Push(Vec<Resp>),
}

impl Resp {
    pub fn is_error(&self) -> bool {
        matches!(self, Resp::Error(_))
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Resp::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Resp::Bulk(b) | Resp::Simple(b) | Resp::Verbatim(b) => Some(b),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Resp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Quotes bytes like redis-cli does.
pub fn quote(b: &[u8]) -> String {
    let mut s = String::from("\"");
    for &c in b {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

impl std::fmt::Display for Resp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resp::Simple(b) => write!(f, "+{}", String::from_utf8_lossy(b)),
            Resp::Error(b) => write!(f, "(error) {}", String::from_utf8_lossy(b)),
            Resp::Int(i) => write!(f, "(integer) {i}"),
            Resp::Bulk(b) => write!(f, "{}", quote(b)),
            Resp::Nil => write!(f, "(nil)"),
            Resp::NilArray => write!(f, "(nil array)"),
            Resp::Double(b) => write!(f, "(double) {}", String::from_utf8_lossy(b)),
            Resp::Bool(b) => write!(f, "(bool) {b}"),
            Resp::BigNum(b) => write!(f, "(bignum) {}", String::from_utf8_lossy(b)),
            Resp::Verbatim(b) => write!(f, "(verbatim) {}", quote(b)),
            Resp::Array(v) | Resp::Set(v) | Resp::Push(v) => {
                write!(f, "[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
            Resp::Map(v) => {
                write!(f, "{{")?;
                for (i, (k, x)) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k}: {x}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

/// Parses one reply from the front of `buf`: `Ok(Some((value, consumed)))`, `Ok(None)` when more
/// bytes are needed, `Err` on malformed input.
pub fn parse_resp(buf: &[u8]) -> Result<Option<(Resp, usize)>, String> {
    fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let rest = buf.get(at..)?;
        let p = rest.windows(2).position(|w| w == b"\r\n")?;
        Some((&rest[..p], at + p + 2))
    }
    fn num(b: &[u8]) -> Result<i64, String> {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad number {}", quote(b)))
    }
    fn parse_at(buf: &[u8], at: usize) -> Result<Option<(Resp, usize)>, String> {
        let Some(&t) = buf.get(at) else {
            return Ok(None);
        };
        let Some((l, next)) = line(buf, at + 1) else {
            return Ok(None);
        };
        let agg = |n: i64, mut next: usize| -> Result<Option<(Vec<Resp>, usize)>, String> {
            let mut v = Vec::with_capacity(n.clamp(0, 1024) as usize);
            for _ in 0..n {
                match parse_at(buf, next)? {
                    Some((x, nx)) => {
                        v.push(x);
                        next = nx;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((v, next)))
        };
        let blob = |n: i64| -> Option<(Vec<u8>, usize)> {
            let n = n as usize;
            if buf.len() < next + n + 2 {
                return None;
            }
            Some((buf[next..next + n].to_vec(), next + n + 2))
        };
        Ok(match t {
            b'+' => Some((Resp::Simple(l.to_vec()), next)),
            b'-' => Some((Resp::Error(l.to_vec()), next)),
            b':' => Some((Resp::Int(num(l)?), next)),
            b',' => Some((Resp::Double(l.to_vec()), next)),
            b'(' => Some((Resp::BigNum(l.to_vec()), next)),
            b'#' => Some((Resp::Bool(l == b"t"), next)),
            b'_' => Some((Resp::Nil, next)),
            b'$' | b'!' | b'=' => {
                let n = num(l)?;
                if n < 0 {
                    Some((Resp::Nil, next))
                } else {
                    blob(n).map(|(b, nx)| {
                        let v = match t {
                            b'$' => Resp::Bulk(b),
                            b'!' => Resp::Error(b),
                            _ => Resp::Verbatim(b),
                        };
                        (v, nx)
                    })
                }
            }
            b'*' | b'~' | b'>' => {
                let n = num(l)?;
                if n < 0 {
                    Some((Resp::NilArray, next))
                } else {
                    agg(n, next)?.map(|(v, nx)| {
                        let r = match t {
                            b'*' => Resp::Array(v),
                            b'~' => Resp::Set(v),
                            _ => Resp::Push(v),
                        };
                        (r, nx)
                    })
                }
            }
            b'%' => {
                let n = num(l)?;
                agg(n * 2, next)?.map(|(v, nx)| {
                    let mut it = v.into_iter();
                    let mut m = Vec::new();
                    while let (Some(k), Some(x)) = (it.next(), it.next()) {
                        m.push((k, x));
                    }
                    (Resp::Map(m), nx)
                })
            }
            other => return Err(format!("unexpected RESP type byte {:?}", other as char)),
        })
    }
    parse_at(buf, 0)
}

/// Encodes a command as a RESP multibulk.
pub fn encode(args: &[impl AsRef<[u8]>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A TCP connection speaking RESP: send commands, read parsed replies.
pub struct RawConn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    pub fn new(stream: TcpStream) -> RawConn {
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .expect("write to server failed");
    }

    pub fn send(&mut self, args: &[impl AsRef<[u8]>]) {
        self.send_raw(&encode(args));
    }

    /// Reads one reply (panics on timeout / EOF / malformed reply).
    pub fn read(&mut self) -> Resp {
        self.try_read().unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_read(&mut self) -> Result<Resp, String> {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some((v, n)) = parse_resp(&self.buf)? {
                self.buf.drain(..n);
                return Ok(v);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(format!("connection closed (pending {})", quote(&self.buf))),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("read failed: {e} (pending {})", quote(&self.buf))),
            }
        }
    }

    /// Sends one command and reads its reply.
    pub fn cmd(&mut self, args: &[impl AsRef<[u8]>]) -> Resp {
        self.send(args);
        self.read()
    }

    /// `cmd` for string arguments split on spaces: `c.q("SET a b")`.
    pub fn q(&mut self, line: &str) -> Resp {
        let args: Vec<&str> = line.split_whitespace().collect();
        self.cmd(&args)
    }
}

/// Convenience for assertions: `bulk("x")`.
pub fn bulk(s: &str) -> Resp {
    Resp::Bulk(s.as_bytes().to_vec())
}

pub fn ok() -> Resp {
    Resp::Simple(b"OK".to_vec())
}

pub fn err(s: &str) -> Resp {
    Resp::Error(s.as_bytes().to_vec())
}

/// Runs the damselfly binary with `args` until it exits (start-up failures); its status and
/// output.
pub fn run_to_exit(args: &[&str]) -> (std::process::ExitStatus, String) {
    let port = free_port().to_string();
    let out = std::process::Command::new(dfly_bin())
        .args(["--port", &port])
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status, text)
}

/// A small deterministic generator for test data (xorshift; no rand dependency).
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}
