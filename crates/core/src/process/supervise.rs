//! Supervision (`supervised no|auto|systemd|upstart`), as redis-server 7.0 does it: a service
//! manager learns when the server is ready and when it stops, so that units ordered after it
//! start against a server that answers. systemd gets sd_notify datagrams on `$NOTIFY_SOCKET`
//! (written here: one `sendto` on a unix datagram socket, not worth libsystemd's C library);
//! upstart's `expect stop` waits for the process to stop itself with SIGSTOP.
//!
//! The messages and the places they are sent are Redis's (server.c, replication.c):
//! `STATUS=Damselfly is loading...` at start-up, `STATUS=Ready to accept connections` (a
//! replica: `... in read-only mode. Waiting for MASTER <-> REPLICA sync`) and `READY=1` once
//! the listeners accept and the snapshot is loaded, `STOPPING=1` when a shutdown begins, STATUS
//! lines for the final save and a replica's syncs. Redis sends no `RELOADING=1` or `MAINPID=`,
//! so neither does damselfly. docs/design/supervision.md has the details.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::config::{Config, Supervised};

/// Who supervises the process.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Systemd,
    Upstart,
}

impl Mode {
    /// The `supervised` value (and INFO's `process_supervised`) for this mode.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Systemd => "systemd",
            Mode::Upstart => "upstart",
        }
    }
}

/// What start-up decided ([`setup`]).
#[derive(Debug)]
struct State {
    /// The supervisor whose hand-shake worked at start-up: INFO's `process_supervised`, and
    /// upstart's stop when ready.
    supervised: Option<Mode>,
    /// Send systemd messages. As Redis: `supervised systemd` keeps sending (and logging why it
    /// cannot) even when the first message failed; `auto` only once systemd answered.
    systemd: bool,
}

static STATE: OnceLock<State> = OnceLock::new();

/// STATUS lines other threads sent before [`ready`] ran (None once it has): they go out after
/// READY=1. Redis, single-threaded, cannot send one earlier (its replica link and commands run
/// in the event loop it enters after READY=1); here a replica's link runs on thread 0 while
/// start-up finishes.
static EARLY: Mutex<Option<Vec<String>>> = Mutex::new(Some(Vec::new()));

/// How long one message may wait for room in the supervisor's queue: a supervisor that stops
/// reading costs a thread at most this, never the server.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// Why an sd_notify message did not reach systemd.
#[derive(Debug)]
pub enum NotifyError {
    /// `$NOTIFY_SOCKET` is not set: no systemd is listening.
    NoSocket,
    /// `$NOTIFY_SOCKET` is neither a path (`/...`) nor an abstract socket name (`@...`).
    BadAddress(String),
    /// The socket could not be made or the datagram not sent.
    Io(std::io::Error),
}

impl std::fmt::Display for NotifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotifyError::NoSocket => write!(f, "NOTIFY_SOCKET is not set"),
            NotifyError::BadAddress(a) => write!(f, "NOTIFY_SOCKET '{a}' is not a socket address"),
            NotifyError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for NotifyError {}

/// Start-up (Redis's `redisIsSupervised`): resolves `auto` (UPSTART_JOB first, then
/// NOTIFY_SOCKET), sends systemd its first status or checks upstart's variable, and says whether
/// the process is supervised, in which case it must stay in the foreground (no `daemonize`:
/// the supervisor follows this pid). Must run while the process has one thread (it may unset
/// UPSTART_JOB).
pub fn setup(cfg: &Config) -> bool {
    let configured = cfg.supervised();
    let auto = configured == Supervised::Auto;
    let mode = match configured {
        Supervised::Systemd => Some(Mode::Systemd),
        Supervised::Upstart => Some(Mode::Upstart),
        Supervised::Auto if std::env::var_os("UPSTART_JOB").is_some() => {
            crate::log_verbose!("Upstart supervision detected.");
            Some(Mode::Upstart)
        }
        Supervised::Auto if std::env::var_os("NOTIFY_SOCKET").is_some() => {
            crate::log_verbose!("Systemd supervision detected.");
            Some(Mode::Systemd)
        }
        _ => None,
    };
    let ok = match mode {
        Some(Mode::Upstart) => setup_upstart(),
        Some(Mode::Systemd) => setup_systemd(),
        None => false,
    };
    let supervised = mode.filter(|_| ok);
    if let (Some(m), true) = (supervised, auto) {
        // As Redis, whose `supervised` is the mode it found: CONFIG GET says `systemd`.
        let _ = cfg.set_startup("supervised", m.name());
    }
    let _ = STATE.set(State {
        supervised,
        systemd: configured == Supervised::Systemd || supervised == Some(Mode::Systemd),
    });
    ok
}

fn setup_upstart() -> bool {
    if std::env::var_os("UPSTART_JOB").is_none() {
        crate::log_warning!("upstart supervision requested, but UPSTART_JOB not found!");
        return false;
    }
    crate::log_notice!("supervised by upstart, will stop to signal readiness.");
    // Redis unsets it after its stop; here, while the process has one thread (setting the
    // environment is not thread-safe). Only children would have seen it.
    std::env::remove_var("UPSTART_JOB");
    true
}

fn setup_systemd() -> bool {
    if !communicate("STATUS=Damselfly is loading...\n") {
        return false;
    }
    crate::log_notice!(
        "Supervised by systemd. Please make sure you set appropriate values for \
         TimeoutStartSec and TimeoutStopSec in your service unit."
    );
    true
}

/// The supervisor found at start-up, for INFO's `process_supervised` (`no` when none).
pub fn supervised_name() -> &'static str {
    STATE
        .get()
        .and_then(|s| s.supervised)
        .map_or("no", Mode::name)
}

fn systemd() -> bool {
    STATE.get().is_some_and(|s| s.systemd)
}

/// Every listener accepts and the snapshot is loaded: systemd gets its status and `READY=1`
/// (a replica's status says it waits for its primary, as Redis's), upstart sees the process
/// stop itself; it goes on when the supervisor sends SIGCONT.
pub fn ready(replica: bool) {
    if systemd() {
        let mut early = EARLY.lock().unwrap_or_else(|e| e.into_inner());
        if replica {
            communicate(
                "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> \
                 REPLICA sync\n",
            );
        } else {
            communicate("STATUS=Ready to accept connections\n");
        }
        communicate("READY=1\n");
        for msg in early.take().unwrap_or_default() {
            communicate(&msg);
        }
    }
    if STATE.get().and_then(|s| s.supervised) == Some(Mode::Upstart) {
        // SAFETY: raise() with a signal number; SIGSTOP stops every thread of the process.
        unsafe {
            libc::raise(libc::SIGSTOP);
        }
    }
}

/// A shutdown begins (Redis's prepareForShutdown): systemd gets `STOPPING=1`.
pub fn stopping() {
    if systemd() {
        communicate("STOPPING=1\n");
    }
}

/// A status line for systemd (`systemctl status` shows it), where Redis sends one; before
/// READY=1 it waits for it ([`EARLY`]).
pub fn status(text: &str) {
    if systemd() {
        let msg = format!("STATUS={text}\n");
        let mut early = EARLY.lock().unwrap_or_else(|e| e.into_inner());
        match early.as_mut() {
            Some(queue) => queue.push(msg),
            None => {
                communicate(&msg);
            }
        }
    }
}

/// Sends `msg` to systemd and logs why not when it cannot (Redis's redisCommunicateSystemd).
fn communicate(msg: &str) -> bool {
    match sd_notify(msg) {
        Ok(()) => true,
        Err(NotifyError::NoSocket) => {
            crate::log_warning!("systemd supervision error: NOTIFY_SOCKET not found!");
            false
        }
        Err(e) => {
            crate::log_warning!("systemd supervision error: sd_notify: {e}");
            false
        }
    }
}

/// sd_notify(3): one datagram with `msg` to the socket `$NOTIFY_SOCKET` names.
pub fn sd_notify(msg: &str) -> Result<(), NotifyError> {
    let addr = std::env::var_os("NOTIFY_SOCKET")
        .filter(|a| !a.is_empty())
        .ok_or(NotifyError::NoSocket)?;
    notify_to(&addr, msg.as_bytes())
}

/// Sends `msg` to `addr`: a path, or `@name` for a socket in the abstract namespace (systemd's
/// own notify socket is a path; containers and tests use either).
pub fn notify_to(addr: &OsStr, msg: &[u8]) -> Result<(), NotifyError> {
    let bytes = addr.as_bytes();
    let sock = UnixDatagram::unbound().map_err(NotifyError::Io)?;
    sock.set_write_timeout(Some(SEND_TIMEOUT))
        .map_err(NotifyError::Io)?;
    let sent = match bytes {
        [b'/', ..] => sock.send_to(msg, addr),
        [b'@', name @ ..] if !name.is_empty() => {
            use std::os::linux::net::SocketAddrExt;
            let a = std::os::unix::net::SocketAddr::from_abstract_name(name)
                .map_err(NotifyError::Io)?;
            sock.send_to_addr(msg, &a)
        }
        _ => {
            return Err(NotifyError::BadAddress(
                String::from_utf8_lossy(bytes).into_owned(),
            ))
        }
    };
    match sent {
        Ok(n) if n == msg.len() => Ok(()),
        Ok(n) => Err(NotifyError::Io(std::io::Error::other(format!(
            "sent {n} of {} bytes",
            msg.len()
        )))),
        Err(e) => Err(NotifyError::Io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(s: &UnixDatagram) -> Vec<u8> {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 256];
        let n = s.recv(&mut buf).unwrap();
        buf[..n].to_vec()
    }

    #[test]
    fn sends_to_a_path() {
        let dir = std::env::temp_dir().join(format!("sd-notify-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let s = UnixDatagram::bind(&path).unwrap();
        notify_to(path.as_os_str(), b"READY=1\n").unwrap();
        assert_eq!(recv(&s), b"READY=1\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sends_to_an_abstract_name() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("damselfly-sd-test-{}", std::process::id());
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let s = UnixDatagram::bind_addr(&a).unwrap();
        notify_to(OsStr::new(&format!("@{name}")), b"STOPPING=1\n").unwrap();
        assert_eq!(recv(&s), b"STOPPING=1\n");
    }

    #[test]
    fn refuses_other_addresses() {
        for a in ["relative.sock", "@", "vsock:2:1"] {
            assert!(
                matches!(
                    notify_to(OsStr::new(a), b"READY=1\n"),
                    Err(NotifyError::BadAddress(_))
                ),
                "{a}"
            );
        }
        // Nobody listening there: the error says why.
        assert!(matches!(
            notify_to(OsStr::new("/nonexistent/notify.sock"), b"READY=1\n"),
            Err(NotifyError::Io(_))
        ));
    }
}
