//! Accepting connections. Thread 0 accepts and hands sockets round-robin to the shard threads, so
//! connections spread evenly and each then lives on one thread for its whole life.

use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::os::unix::net::UnixListener as StdUnixListener;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, UnixListener};

use super::stream::Stream;

use crate::config::Config;
use crate::engine::Worker;

/// Binds every address of `bind` (space separated) on `port`, Redis-style: an address written
/// with a leading `-` is optional (skipped when this host does not have it, e.g. `-::1` without
/// IPv6).
pub fn bind_all(bind: &str, port: u16, backlog: i32) -> std::io::Result<Vec<StdListener>> {
    let mut out = Vec::new();
    let spec = if bind.trim().is_empty() {
        "0.0.0.0"
    } else {
        bind
    };
    for word in spec.split_whitespace() {
        let optional = word.starts_with('-');
        let host = word.trim_start_matches('-');
        let host = if host == "*" { "0.0.0.0" } else { host };
        match bind_host(host, port, backlog) {
            Ok(mut ls) => out.append(&mut ls),
            Err(e)
                if optional
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::EADDRNOTAVAIL | libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT)
                    ) =>
            {
                crate::log_verbose!("optional bind address {host} is not available: {e}");
            }
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "Could not create server TCP listening socket {host}:{port}: bind: {e}"
                    ),
                ))
            }
        }
    }
    Ok(out)
}

fn bind_host(host: &str, port: u16, backlog: i32) -> std::io::Result<Vec<StdListener>> {
    let addrs: Vec<SocketAddr> = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}").to_socket_addrs()?.collect()
    } else {
        (host, port).to_socket_addrs()?.collect()
    };
    let mut out = Vec::new();
    for addr in addrs {
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        sock.set_reuse_address(true)?;
        if addr.is_ipv6() {
            let _ = sock.set_only_v6(true);
        }
        sock.bind(&addr.into())?;
        sock.listen(backlog)?;
        sock.set_nonblocking(true)?;
        out.push(sock.into());
    }
    Ok(out)
}

/// Binds the unix socket `path` (replacing a stale socket file) with permissions `perm` (octal;
/// 0 = as created).
pub fn bind_unix(path: &str, perm: u32, backlog: i32) -> std::io::Result<StdUnixListener> {
    let _ = std::fs::remove_file(path);
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    sock.bind(&socket2::SockAddr::unix(path)?)?;
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(sock.into())
}

/// A bound listening socket, with what its connections speak.
pub struct Bound {
    pub socket: BoundSocket,
    pub role: Role,
    /// Connections start with a TLS handshake (`tls-port`, or Dragonfly's `--tls`).
    pub tls: bool,
    /// Which configured port it is (None: the unix socket), for CONFIG SET's rebinding.
    pub port: Option<Port>,
}

/// The TCP ports a configuration can ask for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Port {
    /// `port` (TLS with Dragonfly's `--tls`).
    Main,
    /// `tls-port`.
    Tls,
    /// `admin_port`, on `admin_bind`.
    Admin,
    /// `memcached_port`.
    Memcache,
}

impl Port {
    pub const ALL: [Port; 4] = [Port::Main, Port::Tls, Port::Admin, Port::Memcache];

    /// The ports a CONFIG SET of `name` moves (Redis: `port`, `tls-port`, `bind`).
    pub fn moved_by(name: &str) -> &'static [Port] {
        match name {
            "port" => &[Port::Main],
            "tls-port" => &[Port::Tls],
            "bind" => &[Port::Main, Port::Tls, Port::Memcache],
            _ => &[],
        }
    }

    /// Binds this port as the configuration says now: nothing when its number is 0. The
    /// error names the port as Redis's log line does (its test runner looks for the words).
    pub fn bind(self, cfg: &Config) -> std::io::Result<Vec<Bound>> {
        let bind = cfg.bind();
        // Dragonfly's `--tls`: the main, memcache and (unless `no_tls_on_admin_port`) admin
        // ports speak TLS. Redis's `tls-port` is a TLS port beside the plain one.
        let tls_all = cfg.tls_on_all_ports();
        let (addrs, port, role, tls, what) = match self {
            Port::Main => (bind, cfg.port(), Role::Resp, tls_all, ""),
            Port::Tls => (bind, cfg.tls_port(), Role::Resp, true, ""),
            Port::Admin => (
                cfg.admin_bind().unwrap_or(bind),
                cfg.admin_port(),
                Role::Admin,
                tls_all && !cfg.no_tls_on_admin_port(),
                "admin ",
            ),
            Port::Memcache => (
                bind,
                cfg.memcached_port(),
                Role::Memcache,
                tls_all,
                "memcached ",
            ),
        };
        if port == 0 {
            return Ok(Vec::new());
        }
        let backlog = cfg.tcp_backlog();
        match bind_all(&addrs, port, backlog) {
            Ok(ls) => Ok(ls
                .into_iter()
                .map(|l| Bound {
                    socket: BoundSocket::Tcp(l),
                    role,
                    tls,
                    port: Some(self),
                })
                .collect()),
            Err(e) => {
                crate::log_warning!("Warning: {e}");
                let proto = if self == Port::Tls { "TLS" } else { "TCP" };
                let msg = format!("Failed listening on {what}port {port} ({proto}), aborting.");
                crate::log_warning!("{msg}");
                Err(std::io::Error::new(e.kind(), msg))
            }
        }
    }
}

thread_local! {
    /// The accept loops running on this thread (thread 0), by the port they serve.
    static RUNNING: std::cell::RefCell<Vec<(Option<Port>, tokio::task::JoinHandle<()>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Starts accepting on `bound` (on thread 0, which accepts for every thread).
pub fn spawn(worker: Rc<Worker>, bound: Bound) {
    let port = bound.port;
    let h = tokio::task::spawn_local(accept_loop(worker, bound));
    RUNNING.with(|r| r.borrow_mut().push((port, h)));
}

/// Runs `f` as a task on thread 0, the accepting thread, and waits for its result (None when
/// that thread is gone).
pub fn on_accepting_thread<R, F, Fut>(
    w: &Rc<Worker>,
    f: F,
) -> impl std::future::Future<Output = Option<R>> + 'static
where
    R: Send + 'static,
    F: FnOnce(Rc<Worker>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    w.post(0, move |w| {
        let w = w.clone();
        tokio::task::spawn_local(async move {
            let _ = tx.send(f(w).await);
        });
    });
    async move { rx.await.ok() }
}

/// A shutdown (run on thread 0): closes every listener and waits until their sockets are
/// closed, before the SHUTDOWN's own connection closes, so that a client that saw it close is
/// refused, as when Redis has exited.
pub async fn stop_all() {
    let stopping: Vec<tokio::task::JoinHandle<()>> =
        RUNNING.with(|r| r.borrow_mut().drain(..).map(|(_, h)| h).collect());
    for h in &stopping {
        h.abort();
    }
    for h in stopping {
        let _ = h.await;
    }
}

/// CONFIG SET of `port`, `tls-port` or `bind` (run on thread 0): closes the listeners of
/// `ports`, waits until their sockets are closed, and binds them again as the configuration
/// says now. On error nothing listens on those ports; the caller puts the old values back and
/// calls this again. Open connections are not affected.
pub async fn rebind(worker: Rc<Worker>, ports: Vec<Port>) -> Result<(), String> {
    let stopping: Vec<tokio::task::JoinHandle<()>> = RUNNING.with(|r| {
        let mut r = r.borrow_mut();
        let (stop, keep): (Vec<_>, Vec<_>) = r
            .drain(..)
            .partition(|(p, _)| p.is_some_and(|p| ports.contains(&p)));
        *r = keep;
        stop.into_iter().map(|(_, h)| h).collect()
    });
    for h in &stopping {
        h.abort();
    }
    for h in stopping {
        // Returns once the task, and with it its listening socket, is dropped.
        let _ = h.await;
    }
    let mut new = Vec::new();
    for p in ports {
        new.extend(p.bind(&worker.shared.config).map_err(|e| e.to_string())?);
    }
    for b in new {
        spawn(worker.clone(), b);
    }
    Ok(())
}

pub enum BoundSocket {
    Tcp(StdListener),
    Unix(StdUnixListener),
}

/// The protocol and role of a listener's connections.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    Resp,
    /// The memcache port (`--memcached_port`): memcached's protocol.
    Memcache,
    /// The admin port (`--admin_port`): RESP and HTTP for operators (net/session.rs).
    Admin,
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Stream> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, _)| Stream::Tcp(s)),
            Listener::Unix(l) => l.accept().await.map(|(s, _)| Stream::Unix(s)),
        }
    }
}

/// Moves an accepted connection to another thread's runtime and back.
enum Portable {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Portable {
    fn from(s: Stream) -> std::io::Result<Portable> {
        Ok(match s {
            Stream::Tcp(s) => Portable::Tcp(s.into_std()?),
            Stream::Unix(s) => Portable::Unix(s.into_std()?),
            // Accepted connections move before their handshake.
            Stream::Tls(_) => return Err(std::io::ErrorKind::Unsupported.into()),
        })
    }

    fn adopt(self) -> std::io::Result<Stream> {
        Ok(match self {
            Portable::Tcp(s) => Stream::Tcp(tokio::net::TcpStream::from_std(s)?),
            Portable::Unix(s) => Stream::Unix(tokio::net::UnixStream::from_std(s)?),
        })
    }
}

/// Accept loop (runs on thread 0).
pub async fn accept_loop(worker: Rc<Worker>, bound: Bound) {
    let (role, tls) = (bound.role, bound.tls);
    let listener = match bound.socket {
        BoundSocket::Tcp(l) => TcpListener::from_std(l).map(Listener::Tcp),
        BoundSocket::Unix(l) => UnixListener::from_std(l).map(Listener::Unix),
    };
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            crate::log_warning!("listener setup failed: {e}");
            return;
        }
    };
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                crate::log_warning!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let threads = worker.threads();
        let target = worker
            .shared
            .next_conn_thread
            .fetch_add(1, Ordering::Relaxed)
            % threads;
        if target == worker.id {
            spawn_session(worker.clone(), stream, role, tls);
        } else {
            match Portable::from(stream) {
                Ok(p) => worker.post(target, move |w| match p.adopt() {
                    Ok(s) => spawn_session(w.clone(), s, role, tls),
                    Err(e) => crate::log_warning!("cannot adopt connection: {e}"),
                }),
                Err(e) => crate::log_warning!("cannot move connection: {e}"),
            }
        }
    }
}

/// Starts serving a connection on this thread, in the protocol of the port it came in on. A TLS
/// port's handshake runs here too, so handshakes spread over the threads like the connections.
fn spawn_session(worker: Rc<Worker>, stream: Stream, role: Role, tls: bool) {
    tokio::task::spawn_local(async move {
        let stream = match (tls, stream) {
            (true, Stream::Tcp(tcp)) => match super::tls::accept(tcp).await {
                Ok(io) => Stream::Tls(Rc::new(io)),
                Err(e) => {
                    // As Redis, at verbose level: port scanners and plain clients do this.
                    crate::log_verbose!("Error accepting a client connection: {e}");
                    return;
                }
            },
            (_, s) => s,
        };
        match role {
            Role::Memcache => match MEMCACHE.get() {
                Some(serve) => serve(worker, stream).await,
                None => crate::log_warning!("no memcached protocol installed: connection closed"),
            },
            Role::Admin => crate::net::session::serve_as(worker, stream, true).await,
            Role::Resp => crate::net::session::serve(worker, stream).await,
        }
    });
}

/// A connection's session in a protocol served above this layer (the memcached protocol).
pub type Serve = fn(Rc<Worker>, Stream) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

static MEMCACHE: std::sync::OnceLock<Serve> = std::sync::OnceLock::new();

/// Installs the memcached protocol's session for `--memcached_port` connections (lib.rs does,
/// before the listeners start: the network layer does not name the protocols above it).
pub fn install_memcache(serve: Serve) {
    let _ = MEMCACHE.set(serve);
}
