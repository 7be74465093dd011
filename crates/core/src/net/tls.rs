//! TLS on a TCP connection (rustls with the ring provider), and the server's TLS settings.
//!
//! rustls is sans-I/O: it encrypts into and decrypts from buffers, and this module moves the
//! ciphertext over the socket. That lets a TLS connection use the same split halves, the same
//! `try_write`/`writable` output path and the same session code as a plain one (`stream.rs`):
//! both halves share one [`TlsIo`] through an `Rc` (a connection lives on one thread).
//!
//! Settings follow Redis's `tls-*` parameters (design note: `docs/design/security.md`). They are
//! built into rustls configurations at start-up and again on every CONFIG SET of a `tls-*`
//! parameter; a connection takes the configuration current when it is accepted or opened.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring as provider, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, StoresServerSessions, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{
    ClientConfig, ClientConnection, Connection, DigitallySignedStruct, RootCertStore, ServerConfig,
    ServerConnection, SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};
use tokio::io::ReadBuf;
use tokio::net::TcpStream;

use crate::config::{Config, TlsAuthClients};

/// How long a peer may take to complete the handshake before the connection is dropped (a
/// connection that never handshakes holds a socket but is no client yet, so no `timeout` or
/// `maxclients` applies to it).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What rustls asks the socket for per `read_tls` (its deframer's read size).
const RUSTLS_READ: usize = 4096;

/// Plaintext decrypted ahead per wake-up (see `poll_fill`).
const PLAIN_AHEAD: usize = 8 * 1024;

/// Plaintext encrypted per `try_write`: bounds the ciphertext a full socket leaves buffered.
const MAX_PLAIN_WRITE: usize = 64 * 1024;

/// One TLS connection: the socket and rustls's state, shared by the reading and writing halves.
pub struct TlsIo {
    tcp: TcpStream,
    conn: RefCell<Connection>,
    /// The socket reached end of file (with or without the peer's close_notify).
    eof: Cell<bool>,
}

/// `std::io` over the non-blocking socket, for rustls's `read_tls`/`write_tls`.
struct Sock<'a>(&'a TcpStream);

impl Read for Sock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsIo {
    fn new(tcp: TcpStream, conn: Connection) -> TlsIo {
        TlsIo {
            tcp,
            conn: RefCell::new(conn),
            eof: Cell::new(false),
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Sends buffered ciphertext without waiting: true when none is left.
    fn flush(&self) -> io::Result<bool> {
        let mut c = self.conn.borrow_mut();
        while c.wants_write() {
            match c.write_tls(&mut Sock(&self.tcp)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Ciphertext is waiting for the socket (see `WriteHalf::backlogged`).
    #[inline]
    pub fn backlogged(&self) -> bool {
        self.conn.borrow().wants_write()
    }

    /// Sends what an earlier write left buffered; a full socket is not an error.
    pub fn flush_backlog(&self) -> io::Result<()> {
        self.flush().map(|_| ())
    }

    /// Encrypts and sends plaintext without waiting. Earlier ciphertext goes first: while any is
    /// left, nothing new is taken (`WouldBlock`), so a slow reader's output stays in the
    /// caller's reply buffer, where output limits see it, not in rustls.
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        if !self.flush()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self
            .conn
            .borrow_mut()
            .writer()
            .write(&buf[..buf.len().min(MAX_PLAIN_WRITE)])?;
        self.flush()?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    pub async fn writable(&self) -> io::Result<()> {
        self.tcp.writable().await
    }

    /// Plaintext is ready or the connection has ended (so a read will not wait).
    fn ready_to_read(&self) -> io::Result<bool> {
        let st = self
            .conn
            .borrow_mut()
            .process_new_packets()
            .map_err(tls_error)?;
        Ok(st.plaintext_bytes_to_read() > 0 || st.peer_has_closed() || self.eof.get())
    }

    pub async fn readable(&self) -> io::Result<()> {
        if !self.ready_to_read()? {
            self.tcp.readable().await?;
        }
        Ok(())
    }

    /// Reads ciphertext the socket has into rustls and processes it. Pending until the socket
    /// has some.
    fn poll_fill(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.tcp.poll_read_ready(cx))?;
            // rustls reads at most 4 KB at a time: go on while little plaintext is ready, so that
            // a pipelining client's commands arrive in batches about as large as over plain TCP
            // (and rustls's plaintext limit is never reached: a read starts below PLAIN_AHEAD).
            let mut got = false;
            loop {
                let r = self.conn.borrow_mut().read_tls(&mut Sock(&self.tcp));
                // A read shorter than rustls's 4 KB asked for emptied the socket: stop there
                // instead of paying a syscall for the EAGAIN (a -P 30 client's batch is one
                // such read).
                let drained = match r {
                    Ok(0) => {
                        self.eof.set(true);
                        true
                    }
                    Ok(n) => n < RUSTLS_READ,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Poll::Ready(Err(e)),
                };
                got = true;
                let processed = self.conn.borrow_mut().process_new_packets();
                match processed {
                    Ok(st) if st.plaintext_bytes_to_read() < PLAIN_AHEAD && !drained => {}
                    Ok(_) => break,
                    Err(e) => {
                        // The alert, unless the peer does not speak TLS at all (as OpenSSL: a
                        // plain client gets the connection closed, not binary it cannot read).
                        if !matches!(e, rustls::Error::InvalidMessage(_)) {
                            let _ = self.flush();
                        }
                        return Poll::Ready(Err(tls_error(e)));
                    }
                }
            }
            if !got {
                continue;
            }
            // Alerts, key updates, session tickets: whatever the peer's records call for.
            self.flush()?;
            return Poll::Ready(Ok(()));
        }
    }

    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let st = self
                .conn
                .borrow_mut()
                .process_new_packets()
                .map_err(tls_error)?;
            let avail = st.plaintext_bytes_to_read();
            if avail > 0 && buf.remaining() > 0 {
                // Only as much of the buffer as there is plaintext is initialised: session
                // buffers are large and mostly uninitialised.
                let dst = buf.initialize_unfilled_to(avail.min(buf.remaining()));
                let n = self.conn.borrow_mut().reader().read(dst)?;
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            // End of stream: the peer's close_notify, or a plain close (clients rarely send
            // close_notify; Redis treats both as the client going away).
            if st.peer_has_closed() || self.eof.get() || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            ready!(self.poll_fill(cx))?;
        }
    }

    /// Runs the handshake to completion (bounded by [`HANDSHAKE_TIMEOUT`]).
    async fn handshake(&self) -> io::Result<()> {
        let run = async {
            loop {
                while !self.flush()? {
                    self.tcp.writable().await?;
                }
                if !self.conn.borrow().is_handshaking() {
                    return Ok(());
                }
                std::future::poll_fn(|cx| self.poll_fill(cx)).await?;
                if self.eof.get() && self.conn.borrow().is_handshaking() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed during the TLS handshake",
                    ));
                }
            }
        };
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, run).await {
            Ok(r) => r,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }
}

/// Accepts a TLS client on `tcp` with the current server settings.
pub async fn accept(tcp: TcpStream) -> io::Result<TlsIo> {
    let config = server_config()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "TLS is not configured"))?;
    let conn = ServerConnection::new(config).map_err(tls_error)?;
    let io = TlsIo::new(tcp, Connection::Server(conn));
    io.handshake().await?;
    Ok(io)
}

/// Opens TLS to a server (a primary, a MIGRATE target) on `tcp`, presenting our client
/// certificate. As Redis, the peer's chain is verified against our CA but its name is not.
pub async fn connect(tcp: TcpStream, host: &str) -> io::Result<TlsIo> {
    let config = client_config().map_err(|e| io::Error::new(io::ErrorKind::NotConnected, e))?;
    let name = ServerName::try_from(host.to_string())
        .unwrap_or(ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    let conn = ClientConnection::new(config, name).map_err(tls_error)?;
    let io = TlsIo::new(tcp, Connection::Client(conn));
    io.handshake().await?;
    Ok(io)
}

// ---------------------------------------------------------------------------------------------
// Settings.

struct Configs {
    server: Option<Arc<ServerConfig>>,
    client: Option<Arc<ClientConfig>>,
}

/// The configurations in force. Read once per accepted or opened TLS connection, written by
/// start-up and CONFIG SET: never on a command's path.
static CURRENT: Mutex<Configs> = Mutex::new(Configs {
    server: None,
    client: None,
});

fn current() -> std::sync::MutexGuard<'static, Configs> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn server_config() -> Option<Arc<ServerConfig>> {
    current().server.clone()
}

fn client_config() -> Result<Arc<ClientConfig>, String> {
    current()
        .client
        .clone()
        .ok_or_else(|| "TLS is not configured".to_string())
}

/// Does this configuration use TLS anywhere (a TLS listener or TLS links)?
pub fn wanted(cfg: &Config) -> bool {
    cfg.tls_port() != 0 || cfg.tls_on_all_ports() || cfg.tls_replication() || cfg.tls_cluster()
}

/// Builds the TLS configurations from the `tls-*` parameters and puts them in force; on error
/// the previous ones stay. Nothing is built when no TLS is in use.
pub fn configure(cfg: &Config) -> Result<(), String> {
    if !wanted(cfg) {
        *current() = Configs {
            server: None,
            client: None,
        };
        return Ok(());
    }
    let server = build_server(cfg)?;
    let client = build_client(cfg)?;
    *current() = Configs {
        server: Some(Arc::new(server)),
        client: Some(Arc::new(client)),
    };
    Ok(())
}

fn load_certs(path: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("Failed to load {what} '{path}': {e}"))?;
    if certs.is_empty() {
        return Err(format!("Failed to load {what} '{path}': no certificate"));
    }
    Ok(certs)
}

/// Loads an unencrypted private key; `pass` is the value of `pass_param` (refused when set).
fn load_key(path: &str, pass_param: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    if !pass.is_empty() {
        return Err(format!(
            "{pass_param} is set: encrypted private keys are not supported, give an unencrypted key"
        ));
    }
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| format!("Failed to load private key '{path}': {e}"))
}

/// The CA certificates: `tls-ca-cert-file` and every certificate file in `tls-ca-cert-dir`.
fn load_roots(cfg: &Config) -> Result<Arc<RootCertStore>, String> {
    let file = cfg.tls_ca_cert_file();
    let dir = cfg.tls_ca_cert_dir();
    if file.is_empty() && dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified".into());
    }
    let mut roots = RootCertStore::empty();
    if !file.is_empty() {
        for c in load_certs(&file, "CA certificate file")? {
            roots
                .add(c)
                .map_err(|e| format!("Invalid CA certificate in '{file}': {e}"))?;
        }
    }
    if !dir.is_empty() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("Failed to read tls-ca-cert-dir: {e}"))?;
        for entry in entries.flatten() {
            // As OpenSSL's hashed directories: files that are not certificates are skipped.
            if let Ok(it) = CertificateDer::pem_file_iter(entry.path()) {
                for c in it.flatten() {
                    let _ = roots.add(c);
                }
            }
        }
    }
    if roots.is_empty() {
        return Err("No CA certificate found".into());
    }
    Ok(Arc::new(roots))
}

/// `tls-protocols`: space-separated names, empty for rustls's (TLSv1.2 and TLSv1.3).
fn versions(cfg: &Config) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let spec = cfg.tls_protocols();
    if spec.trim().is_empty() {
        return Ok(rustls::ALL_VERSIONS.to_vec());
    }
    let mut out = Vec::new();
    for word in spec.split_whitespace() {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => out.push(&rustls::version::TLS12),
            "tlsv1.3" => out.push(&rustls::version::TLS13),
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                "{word} is not supported: TLSv1.2 and TLSv1.3 are (TLS 1.0 and 1.1 are obsolete)"
            ))
            }
            _ => return Err(format!("Invalid tls-protocols specified: {word}")),
        }
    }
    Ok(out)
}

/// OpenSSL's names for the suites rustls has (TLS 1.3 names are the RFC's).
const SUITES: &[(&str, SupportedCipherSuite)] = &[
    (
        "TLS_AES_256_GCM_SHA384",
        provider::cipher_suite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_AES_128_GCM_SHA256",
        provider::cipher_suite::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        provider::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        provider::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        provider::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        provider::cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        provider::cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        provider::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        provider::cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

fn is_tls13(s: &SupportedCipherSuite) -> bool {
    matches!(s, SupportedCipherSuite::Tls13(_))
}

/// The suites of one version allowed by `list` (colon-separated OpenSSL names; `DEFAULT`,
/// `HIGH` and `ALL` name every suite rustls has, all of them AEAD with forward secrecy; `!x` or
/// `-x` removes x). Empty means every suite. Other OpenSSL cipher strings (CBC suites, `+x`,
/// `@STRENGTH`) are refused, not approximated.
fn suites(list: &str, tls13: bool, name: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = || {
        SUITES
            .iter()
            .filter(|(_, s)| is_tls13(s) == tls13)
            .map(|(_, s)| *s)
    };
    if list.trim().is_empty() {
        return Ok(all().collect());
    }
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for item in list.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        if let Some(name) = item.strip_prefix(['!', '-']) {
            // OpenSSL's removal: a suite rustls does not have is not offered anyway.
            if matches!(name, "DEFAULT" | "HIGH" | "ALL") {
                out.clear();
                continue;
            }
            out.retain(|s| {
                !SUITES
                    .iter()
                    .any(|(n, x)| x == s && n.eq_ignore_ascii_case(name))
            });
            continue;
        }
        if matches!(item, "DEFAULT" | "HIGH" | "ALL") {
            for s in all() {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
            continue;
        }
        match SUITES
            .iter()
            .find(|(n, s)| n.eq_ignore_ascii_case(item) && is_tls13(s) == tls13)
        {
            Some((_, s)) if !out.contains(s) => out.push(*s),
            Some(_) => {}
            None => {
                let known: Vec<&str> = SUITES
                    .iter()
                    .filter(|(_, s)| is_tls13(s) == tls13)
                    .map(|(n, _)| *n)
                    .collect();
                return Err(format!(
                    "{name}: unsupported cipher '{item}' (supported: DEFAULT, {})",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(out)
}

/// The ring provider limited to the suites `tls-ciphers` (TLS 1.2) and `tls-ciphersuites`
/// (TLS 1.3) allow.
fn provider(cfg: &Config) -> Result<Arc<CryptoProvider>, String> {
    let mut p = provider::default_provider();
    let mut chosen = suites(&cfg.tls_ciphersuites(), true, "tls-ciphersuites")?;
    chosen.extend(suites(&cfg.tls_ciphers(), false, "tls-ciphers")?);
    p.cipher_suites = chosen;
    Ok(Arc::new(p))
}

fn build_server(cfg: &Config) -> Result<ServerConfig, String> {
    let cert_file = cfg.tls_cert_file();
    let key_file = cfg.tls_key_file();
    if cert_file.is_empty() {
        return Err("No tls-cert-file configured!".into());
    }
    if key_file.is_empty() {
        return Err("No tls-key-file configured!".into());
    }
    let chain = load_certs(&cert_file, "certificate")?;
    let key = load_key(&key_file, "tls-key-file-pass", &cfg.tls_key_file_pass())?;
    check_dh_params(cfg)?;
    let provider = provider(cfg)?;
    let provider_ref = provider.clone();
    let roots = load_roots(cfg)?;
    let verifier = match cfg.tls_auth_clients() {
        TlsAuthClients::No => WebPkiClientVerifier::no_client_auth(),
        mode => {
            let b = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            let b = if mode == TlsAuthClients::Optional {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build()
                .map_err(|e| format!("Invalid CA certificates: {e}"))?
        }
    };
    let mut sc = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(cfg)?)
        .map_err(|e| format!("Invalid TLS settings: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(certified_key(chain, key, &provider_ref)?));
    sc.ignore_client_order = cfg.tls_prefer_server_ciphers();
    if cfg.tls_session_caching() {
        let size = cfg.tls_session_cache_size();
        let secs = cfg.tls_session_cache_timeout();
        sc.session_storage = Arc::new(SessionCache::new(size, Duration::from_secs(secs)));
        // Stateless tickets, as OpenSSL's default: resumption costs the server no memory per
        // connection (TLS 1.3 clients and TLS 1.2 clients that ask for tickets); the cache
        // above serves the other TLS 1.2 clients.
        let inner = provider::Ticketer::new().map_err(|e| format!("TLS tickets: {e}"))?;
        sc.ticketer = Arc::new(TimedTickets {
            inner,
            ttl: secs.min(u32::MAX as u64) as u32,
        });
    } else {
        sc.session_storage = Arc::new(NoServerSessionStorage {});
        sc.send_tls13_tickets = 0;
    }
    Ok(sc)
}

/// `tls-dh-params-file`: only finite-field DHE suites use DH parameters, and rustls has none
/// (key exchange is always ECDHE), so the file cannot change a handshake. It is still read and
/// checked, so a wrong path fails here as it does in Redis.
fn check_dh_params(cfg: &Config) -> Result<(), String> {
    let path = cfg.tls_dh_params_file();
    if path.is_empty() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("Failed to load DH params file {path}: {e}"))?;
    if !text.contains("-----BEGIN DH PARAMETERS-----") {
        return Err(format!(
            "Failed to load DH params file {path}: no DH parameters"
        ));
    }
    Ok(())
}

fn build_client(cfg: &Config) -> Result<ClientConfig, String> {
    // As Redis: the client certificate is tls-client-cert-file, or tls-cert-file without one.
    let (cert_file, key_file, pass_param, pass) = match cfg.tls_client_cert_file() {
        c if !c.is_empty() => (
            c,
            cfg.tls_client_key_file(),
            "tls-client-key-file-pass",
            cfg.tls_client_key_file_pass(),
        ),
        _ => (
            cfg.tls_cert_file(),
            cfg.tls_key_file(),
            "tls-key-file-pass",
            cfg.tls_key_file_pass(),
        ),
    };
    let provider = provider(cfg)?;
    let provider_ref = provider.clone();
    let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
        load_roots(cfg)?,
        provider.clone(),
    )
    .build()
    .map_err(|e| format!("Invalid CA certificates: {e}"))?;
    let b = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(cfg)?)
        .map_err(|e| format!("Invalid TLS settings: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)));
    if cert_file.is_empty() {
        return Ok(b.with_no_client_auth());
    }
    let chain = load_certs(&cert_file, "client certificate")?;
    let key = load_key(&key_file, pass_param, &pass)?;
    let ck = certified_key(chain, key, &provider_ref)?;
    Ok(b.with_client_cert_resolver(Arc::new(ck)))
}

/// A certificate chain with its key, checked to match. X.509 v1 certificates (what `openssl x509
/// -req` makes without extensions, such as the suite's `redis.crt`) cannot be parsed for that
/// check, and OpenSSL serves them: so does this, unchecked (a mismatched key then fails the
/// handshake instead of the start-up).
fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<SingleCertAndKey, String> {
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("Invalid private key: {e}"))?;
    let ck = CertifiedKey::new(chain, signing);
    match ck.keys_match() {
        Ok(()) => {}
        Err(e) if format!("{e:?}").contains("UnsupportedCertVersion") => {
            crate::log_verbose!("TLS: an X.509 v1 certificate: its key match is not checked");
        }
        Err(e) => return Err(format!("Invalid certificate or key: {e}")),
    }
    Ok(SingleCertAndKey::from(ck))
}

/// Verifies a server's chain against our CAs, not its name: Redis (OpenSSL with
/// `SSL_VERIFY_PEER` and no host check) connects to primaries by address, and test and
/// deployment certificates seldom name the address.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Tickets valid for `tls-session-cache-timeout` seconds: the issue time is sealed inside
/// (rustls's ticketer alone keeps a ticket valid as long as its key, hours).
#[derive(Debug)]
struct TimedTickets {
    inner: Arc<dyn rustls::server::ProducesTickets>,
    ttl: u32,
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl rustls::server::ProducesTickets for TimedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.ttl
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut v = Vec::with_capacity(8 + plain.len());
        v.extend_from_slice(&unix_secs().to_be_bytes());
        v.extend_from_slice(plain);
        self.inner.encrypt(&v)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let plain = self.inner.decrypt(cipher)?;
        let (issued, rest) = plain.split_at_checked(8)?;
        let issued = u64::from_be_bytes(issued.try_into().ok()?);
        (unix_secs().saturating_sub(issued) <= u64::from(self.ttl)).then(|| rest.to_vec())
    }
}

/// Session id → (encoded session, when stored).
type Sessions = HashMap<Vec<u8>, (Vec<u8>, Instant)>;

/// Server-side session cache for resumption: `tls-session-cache-size` entries, each valid for
/// `tls-session-cache-timeout` (rustls's own cache has no expiry).
#[derive(Debug)]
struct SessionCache {
    max: usize,
    ttl: Duration,
    entries: Mutex<Sessions>,
}

impl SessionCache {
    fn new(max: usize, ttl: Duration) -> SessionCache {
        SessionCache {
            max,
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        if self.max == 0 {
            return false;
        }
        let now = Instant::now();
        let mut m = self.lock();
        if m.len() >= self.max {
            m.retain(|_, (_, at)| now.duration_since(*at) < self.ttl);
        }
        if m.len() >= self.max {
            // Still full of live sessions: drop an arbitrary one (OpenSSL drops the oldest;
            // either way a client just does a full handshake next time).
            if let Some(k) = m.keys().next().cloned() {
                m.remove(&k);
            }
        }
        m.insert(key, (value, now));
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let m = self.lock();
        m.get(key)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(v, _)| v.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.lock()
            .remove(key)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(v, _)| v)
    }

    fn can_cache(&self) -> bool {
        self.max > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[SupportedCipherSuite]) -> Vec<&'static str> {
        v.iter()
            .map(|s| {
                SUITES
                    .iter()
                    .find(|(_, x)| x == s)
                    .map(|(n, _)| *n)
                    .expect("a known suite")
            })
            .collect()
    }

    #[test]
    fn cipher_lists_as_openssl_names_them() {
        assert_eq!(suites("", false, "tls-ciphers").unwrap().len(), 6);
        assert_eq!(suites("", true, "tls-ciphersuites").unwrap().len(), 3);
        assert_eq!(
            names(
                &suites(
                    "ECDHE-RSA-CHACHA20-POLY1305:ecdhe-rsa-aes128-gcm-sha256",
                    false,
                    "x"
                )
                .unwrap()
            ),
            ["ECDHE-RSA-CHACHA20-POLY1305", "ECDHE-RSA-AES128-GCM-SHA256"]
        );
        // Removal, of a suite we have and of one rustls never offers (a CBC suite).
        let v = suites(
            "DEFAULT:!ECDHE-RSA-AES128-GCM-SHA256:-AES128-SHA256",
            false,
            "x",
        )
        .unwrap();
        assert_eq!(v.len(), 5);
        assert!(!names(&v).contains(&"ECDHE-RSA-AES128-GCM-SHA256"));
        assert!(suites("-ALL", false, "x").unwrap().is_empty());
        // A TLS 1.3 name in the TLS 1.2 list, a CBC suite, OpenSSL's other operators: refused.
        assert!(suites("TLS_AES_128_GCM_SHA256", false, "x").is_err());
        assert!(suites("AES128-SHA256", false, "x").is_err());
        assert!(suites("+ECDHE-RSA-AES128-GCM-SHA256", false, "x").is_err());
        assert_eq!(
            names(&suites("TLS_CHACHA20_POLY1305_SHA256", true, "x").unwrap()),
            ["TLS_CHACHA20_POLY1305_SHA256"]
        );
    }

    /// "Encrypts" by copying, so that a test can forge the issue time.
    #[derive(Debug)]
    struct Clear;
    impl rustls::server::ProducesTickets for Clear {
        fn enabled(&self) -> bool {
            true
        }
        fn lifetime(&self) -> u32 {
            0
        }
        fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
            Some(plain.to_vec())
        }
        fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
            Some(cipher.to_vec())
        }
    }

    #[test]
    fn tickets_expire_after_the_session_timeout() {
        use rustls::server::ProducesTickets;
        let t = TimedTickets {
            inner: Arc::new(Clear),
            ttl: 300,
        };
        assert_eq!(t.lifetime(), 300);
        let sealed = t.encrypt(b"session").unwrap();
        assert_eq!(t.decrypt(&sealed), Some(b"session".to_vec()));
        let mut old = (unix_secs() - 301).to_be_bytes().to_vec();
        old.extend_from_slice(b"session");
        assert_eq!(t.decrypt(&old), None);
        assert_eq!(t.decrypt(b"short"), None);
        // The real ticketer round-trips through the wrapper.
        let real = TimedTickets {
            inner: provider::Ticketer::new().unwrap(),
            ttl: 300,
        };
        let sealed = real.encrypt(b"session").unwrap();
        assert_eq!(real.decrypt(&sealed), Some(b"session".to_vec()));
    }

    #[test]
    fn session_cache_bounds_and_expiry() {
        let c = SessionCache::new(2, Duration::from_secs(3600));
        assert!(c.put(b"a".to_vec(), b"1".to_vec()));
        assert!(c.put(b"b".to_vec(), b"2".to_vec()));
        assert!(c.put(b"c".to_vec(), b"3".to_vec()));
        assert_eq!(c.lock().len(), 2);
        assert_eq!(c.get(b"c"), Some(b"3".to_vec()));
        assert_eq!(c.take(b"c"), Some(b"3".to_vec()));
        assert_eq!(c.get(b"c"), None);
        let expired = SessionCache::new(10, Duration::ZERO);
        expired.put(b"a".to_vec(), b"1".to_vec());
        assert_eq!(expired.get(b"a"), None);
        assert!(!SessionCache::new(0, Duration::from_secs(1)).can_cache());
    }
}
