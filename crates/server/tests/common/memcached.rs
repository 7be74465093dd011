//! Memcached-protocol test targets: a real `memcached` (the reference, 1.6.18) and damselfly started
//! with `--memcached_port`. Included next to `common` by the memcache tests:
//!
//! ```ignore
//! mod common;
//! #[path = "common/memcached.rs"]
//! mod memcached;
//! let t = memcached::McTarget::start(memcached::Which::from_env("MC_TEST_TARGET"));
//! let mut c = t.conn();
//! ```
//!
//! Extra damselfly arguments can be given with `MC_DFLY_ARGS="--flag value ..."` (split on
//! whitespace), e.g. the max-item-size flag once it exists.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, Server};

/// A running `memcached -U 0 -t 1 -p PORT -l 127.0.0.1`, killed on drop.
pub struct MemcachedServer {
    child: Child,
    port: u16,
}

impl MemcachedServer {
    /// Starts memcached with the default settings plus `extra` (e.g. `["-I", "2m"]`).
    /// Panics with a clear message when memcached is not installed.
    pub fn start(extra: &[&str]) -> MemcachedServer {
        if Command::new("memcached")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_err()
        {
            panic!(
                "memcached is not installed but this test compares against it; install it \
                 (`apt-get install -y memcached`, which ./scripts/test.sh does when run as root)"
            );
        }
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let p = port.to_string();
            // `-u root` only matters when running as root (memcached refuses root otherwise);
            // it is ignored for other users.
            let mut args = vec![
                "-U",
                "0",
                "-t",
                "1",
                "-p",
                &p,
                "-l",
                "127.0.0.1",
                "-u",
                "root",
            ];
            args.extend_from_slice(extra);
            let child = Command::new("memcached")
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot spawn memcached: {e}"));
            let mut srv = MemcachedServer { child, port };
            let pid = srv.child.id();
            match wait_mc_ready(port, pid, Some(&mut srv.child)) {
                Ok(()) => return srv,
                Err(e) => {
                    let _ = srv.child.kill();
                    let mut err = String::new();
                    if let Some(mut s) = srv.child.stderr.take() {
                        let _ = s.read_to_string(&mut err);
                    }
                    last = format!("memcached on {port}: {e}: {err}");
                }
            }
        }
        panic!("{last}")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for MemcachedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until process `owner` answers `version` on `port`; `child` (when given) is that
/// process, and its early exit ends the wait. An answer from a socket some other process holds
/// does not count: when another test's server took the port first, ours fails to bind, and a
/// test that went on would share that server's keys (seen as rare divergences under load).
pub fn wait_mc_ready(port: u16, owner: u32, mut child: Option<&mut Child>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(c) = child.as_deref_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(format!("exited early with {st}"));
            }
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            if s.write_all(b"version\r\n").is_ok() {
                let mut buf = [0u8; 64];
                if let Ok(n) = s.read(&mut buf) {
                    if buf[..n].starts_with(b"VERSION ") {
                        match crate::common::listens_on(owner, port) {
                            Some(false) => return Err(format!("port {port} is another process's")),
                            _ => return Ok(()),
                        }
                    }
                }
            }
        }
        if Instant::now() > deadline {
            return Err("did not answer `version` within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Which server a memcache test talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Damselfly,
    Memcached,
}

impl Which {
    /// `memcached` in the variable `var` selects real memcached; anything else (or unset)
    /// damselfly.
    pub fn from_env(var: &str) -> Which {
        match std::env::var(var).as_deref() {
            Ok("memcached") => Which::Memcached,
            _ => Which::Damselfly,
        }
    }
}

/// damselfly's extra arguments from `MC_DFLY_ARGS`.
pub fn dfly_extra_args() -> Vec<String> {
    std::env::var("MC_DFLY_ARGS")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// A server speaking the memcached protocol on [`McTarget::mc_port`].
pub enum McTarget {
    /// damselfly, with its RESP port ([`Server`]) and its memcached port.
    Damselfly(Server, u16),
    Memcached(MemcachedServer),
}

impl McTarget {
    pub fn start(which: Which) -> McTarget {
        match which {
            Which::Memcached => McTarget::Memcached(MemcachedServer::start(&[])),
            Which::Damselfly => McTarget::damselfly(&["--proactor_threads", "2"]),
        }
    }

    /// damselfly with `--memcached_port <free>` plus `args` plus `MC_DFLY_ARGS`.
    pub fn damselfly(args: &[&str]) -> McTarget {
        let extra = dfly_extra_args();
        let mut last = String::new();
        // A new port each try: the one picked may be taken by another test's server first.
        for _ in 0..5 {
            let mport = free_port();
            let p = mport.to_string();
            let mut all: Vec<&str> = vec!["--memcached_port", &p];
            all.extend_from_slice(args);
            all.extend(extra.iter().map(String::as_str));
            let srv = Server::start(&all);
            match wait_mc_ready(mport, srv.pid(), None) {
                Ok(()) => return McTarget::Damselfly(srv, mport),
                Err(e) => {
                    last = format!(
                        "damselfly's memcached port {mport}: {e}\n--- its output ---\n{}",
                        srv.output()
                    )
                }
            }
        }
        panic!("{last}")
    }

    pub fn name(&self) -> &'static str {
        match self {
            McTarget::Damselfly(..) => "damselfly",
            McTarget::Memcached(_) => "memcached",
        }
    }

    pub fn mc_port(&self) -> u16 {
        match self {
            McTarget::Damselfly(_, p) => *p,
            McTarget::Memcached(m) => m.port(),
        }
    }

    /// damselfly's RESP side; None for memcached.
    pub fn resp(&self) -> Option<&Server> {
        match self {
            McTarget::Damselfly(s, _) => Some(s),
            McTarget::Memcached(_) => None,
        }
    }

    pub fn is_damselfly(&self) -> bool {
        matches!(self, McTarget::Damselfly(..))
    }

    pub fn pid(&self) -> u32 {
        match self {
            McTarget::Damselfly(s, _) => s.pid(),
            McTarget::Memcached(m) => m.pid(),
        }
    }

    pub fn stream(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.mc_port()))
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.name()));
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s.set_nodelay(true).ok();
        s
    }

    pub fn conn(&self) -> McConn {
        McConn::new(self.stream())
    }
}

/// A memcached-protocol connection that reads whole replies.
pub struct McConn {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

impl McConn {
    pub fn new(stream: TcpStream) -> McConn {
        McConn {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write failed");
    }

    fn fill(&mut self) -> Result<(), String> {
        let mut chunk = vec![0u8; 256 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err("connection closed".into()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) => Err(format!("read failed: {e}")),
        }
    }

    /// Reads one line (without its `\r\n`).
    pub fn line(&mut self) -> Vec<u8> {
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = self.buf[..p].to_vec();
                self.buf.drain(..p + 2);
                return l;
            }
            if let Err(e) = self.fill() {
                panic!("{e} (pending {})", crate::common::quote(&self.buf));
            }
        }
    }

    /// Reads exactly `n` bytes plus `\r\n`.
    pub fn block(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n + 2 {
            if let Err(e) = self.fill() {
                panic!("{e} (pending {} bytes)", self.buf.len());
            }
        }
        assert_eq!(&self.buf[n..n + 2], b"\r\n", "data block not ended by CRLF");
        let d = self.buf[..n].to_vec();
        self.buf.drain(..n + 2);
        d
    }

    /// Reads one reply unit as text: a line, plus the data block for `VALUE`/`VA` lines
    /// (appended as `\r\n<data>`).
    pub fn reply(&mut self) -> String {
        let l = self.line();
        let s = String::from_utf8_lossy(&l).into_owned();
        let toks: Vec<&str> = s.split(' ').collect();
        let n = match toks[0] {
            "VALUE" if toks.len() >= 4 => toks[3].parse::<usize>().ok(),
            "VA" if toks.len() >= 2 => toks[1].parse::<usize>().ok(),
            _ => None,
        };
        match n {
            Some(n) => {
                let d = self.block(n);
                format!("{s}\r\n{}", String::from_utf8_lossy(&d))
            }
            None => s,
        }
    }

    /// Sends `cmd` and reads one reply line.
    pub fn cmd(&mut self, cmd: &str) -> String {
        self.send(cmd.as_bytes());
        self.line_str()
    }

    pub fn line_str(&mut self) -> String {
        String::from_utf8_lossy(&self.line()).into_owned()
    }

    /// Sends a retrieval command and reads `VALUE` units until `END`: every unit as read.
    pub fn get_all(&mut self, cmd: &str) -> Vec<String> {
        self.send(cmd.as_bytes());
        let mut out = Vec::new();
        loop {
            let r = self.reply();
            if r == "END" {
                return out;
            }
            let stop = !r.starts_with("VALUE ");
            out.push(r);
            if stop {
                return out;
            }
        }
    }

    /// Reads until the server closes the connection or stays quiet for `idle`: (data, closed).
    pub fn drain(&mut self, idle: Duration) -> (Vec<u8>, bool) {
        let mut data = std::mem::take(&mut self.buf);
        let mut chunk = vec![0u8; 64 * 1024];
        self.stream.set_read_timeout(Some(idle)).ok();
        let closed = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(n) => data.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break false
                }
                Err(_) => break true,
            }
        };
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok();
        (data, closed)
    }
}
