//! TLS against the real binary: `redis-cli --tls` with client certificates, `tls-auth-clients`
//! (a client without a certificate is refused under `yes`), certificates reloaded by CONFIG SET,
//! large and pipelined traffic, a plain client on the TLS port, Dragonfly's `--tls` (memcache
//! port and HTTPS console too), and replication over TLS both ways with real redis-server.
//! Certificates are made per test run with the `openssl` command line tool.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{encode, free_port, parse_resp, RedisServer, Resp, Server};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A CA, a server certificate for 127.0.0.1, a client certificate, and a second server
/// certificate (other subject) for the reload test.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command line tool is needed (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn certs() -> &'static Certs {
    static CERTS: OnceLock<Certs> = OnceLock::new();
    CERTS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("damselfly-tls-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("ext.cnf"),
            "[server]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n\
             [client]\nextendedKeyUsage=clientAuth\n",
        )
        .unwrap();
        openssl(&dir, &["genrsa", "-out", "ca.key", "2048"]);
        openssl(
            &dir,
            &[
                "req", "-x509", "-new", "-nodes", "-sha256", "-key", "ca.key", "-days", "30",
                "-subj", "/O=Damselfly Test/CN=Test CA", "-out", "ca.crt",
            ],
        );
        for (name, cn, ext) in [
            ("server", "server-one", "server"),
            ("server2", "server-two", "server"),
            ("client", "client", "client"),
        ] {
            openssl(&dir, &["genrsa", "-out", &format!("{name}.key"), "2048"]);
            openssl(
                &dir,
                &[
                    "req", "-new", "-sha256", "-key", &format!("{name}.key"), "-subj",
                    &format!("/O=Damselfly Test/CN={cn}"), "-out", &format!("{name}.csr"),
                ],
            );
            openssl(
                &dir,
                &[
                    "x509", "-req", "-sha256", "-in", &format!("{name}.csr"), "-CA", "ca.crt",
                    "-CAkey", "ca.key", "-CAcreateserial", "-days", "30", "-extfile", "ext.cnf",
                    "-extensions", ext, "-out", &format!("{name}.crt"),
                ],
            );
        }
        Certs { dir }
    })
}

/// The server-side TLS flags with our certificates.
fn tls_flags(c: &Certs) -> Vec<String> {
    vec![
        "--tls-cert-file".into(),
        c.path("server.crt"),
        "--tls-key-file".into(),
        c.path("server.key"),
        "--tls-ca-cert-file".into(),
        c.path("ca.crt"),
    ]
}

/// Starts damselfly with a plain port (for the harness) and a TLS port; returns it and the TLS
/// port.
fn start_tls(extra: &[&str]) -> (Server, u16) {
    let c = certs();
    let tls_port = free_port();
    let mut args: Vec<String> = tls_flags(c);
    args.extend(["--tls-port".into(), tls_port.to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    (Server::start(&argv), tls_port)
}

fn client_config(with_cert: bool) -> Arc<rustls::ClientConfig> {
    let c = certs();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(c.path("ca.crt")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    Arc::new(if with_cert {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(c.path("client.crt"))
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
        let key = PrivateKeyDer::from_pem_file(c.path("client.key")).unwrap();
        b.with_client_auth_cert(chain, key).unwrap()
    } else {
        b.with_no_client_auth()
    })
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A TLS connection (server verified against our CA, name 127.0.0.1) that has completed its
/// handshake, or the handshake's error.
fn tls_connect(port: u16, with_cert: bool) -> Result<Tls, String> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(client_config(with_cert), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock).map_err(|e| e.to_string())?;
    }
    Ok(s)
}

/// Sends `args` and reads `n` replies.
fn exchange(s: &mut Tls, cmds: &[Vec<u8>], n: usize) -> Result<Vec<Resp>, String> {
    let mut out = Vec::new();
    for c in cmds {
        out.extend_from_slice(c);
    }
    s.write_all(&out).map_err(|e| e.to_string())?;
    s.flush().map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut replies = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while replies.len() < n {
        while let Some((r, used)) = parse_resp(&buf)? {
            replies.push(r);
            buf.drain(..used);
            if replies.len() == n {
                return Ok(replies);
            }
        }
        let got = s.read(&mut chunk).map_err(|e| e.to_string())?;
        if got == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&chunk[..got]);
    }
    Ok(replies)
}

fn cmd(s: &mut Tls, args: &[&str]) -> Result<Resp, String> {
    exchange(s, &[encode(args)], 1).map(|mut v| v.remove(0))
}

fn redis_cli(port: u16, cert: bool, args: &[&str]) -> String {
    let c = certs();
    let mut argv: Vec<String> = vec![
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
        "--tls".into(),
        "--cacert".into(),
        c.path("ca.crt"),
    ];
    if cert {
        argv.extend([
            "--cert".into(),
            c.path("client.crt"),
            "--key".into(),
            c.path("client.key"),
        ]);
    }
    argv.extend(args.iter().map(|s| s.to_string()));
    let out = Command::new("redis-cli")
        .args(&argv)
        .output()
        .expect("redis-cli (apt-get install redis-tools)");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .trim()
    .to_string()
}

#[test]
fn redis_cli_with_client_certificates_and_auth_clients_modes() {
    let (s, port) = start_tls(&[]);
    assert_eq!(redis_cli(port, true, &["SET", "k", "v"]), "OK");
    assert_eq!(redis_cli(port, true, &["GET", "k"]), "v");
    // tls-auth-clients yes (the default): no certificate, no connection.
    let refused = redis_cli(port, false, &["PING"]);
    assert_ne!(refused, "PONG", "a client without a certificate got in");
    assert!(tls_connect(port, false)
        .and_then(|mut t| cmd(&mut t, &["PING"]))
        .is_err());

    let mut plain = s.raw_conn();
    assert_eq!(
        plain.q("CONFIG SET tls-auth-clients optional"),
        common::ok()
    );
    assert_eq!(redis_cli(port, false, &["PING"]), "PONG");
    assert_eq!(redis_cli(port, true, &["PING"]), "PONG");
    assert_eq!(plain.q("CONFIG SET tls-auth-clients no"), common::ok());
    assert_eq!(redis_cli(port, false, &["GET", "k"]), "v");
    assert_eq!(plain.q("CONFIG SET tls-auth-clients yes"), common::ok());
    assert_ne!(redis_cli(port, false, &["PING"]), "PONG");
    assert_eq!(
        plain.q("CONFIG GET tls-auth-clients"),
        Resp::Array(vec![common::bulk("tls-auth-clients"), common::bulk("yes")])
    );
}

#[test]
fn plain_client_on_the_tls_port_is_closed_without_a_reply() {
    let (_s, port) = start_tls(&[]);
    let mut t = TcpStream::connect(("127.0.0.1", port)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).ok();
    t.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 64];
    // Closed (or reset) with nothing for a RESP client to misread.
    assert!(matches!(t.read(&mut buf), Ok(0) | Err(_)));
}

#[test]
fn large_values_and_deep_pipelines_over_tls() {
    let (s, port) = start_tls(&["--proactor_threads", "3"]);
    let mut t = tls_connect(port, true).unwrap();
    // A value much larger than a TLS record and than the socket buffers.
    let big: Vec<u8> = (0..6_000_000u32).map(|i| b'a' + (i % 23) as u8).collect();
    let set = encode(&[b"SET".as_slice(), b"big", &big]);
    assert_eq!(exchange(&mut t, &[set], 1).unwrap()[0], common::ok());
    let got = exchange(&mut t, &[encode(&["GET", "big"])], 1).unwrap();
    assert_eq!(got[0], Resp::Bulk(big.clone()));
    // 20000 pipelined commands over keys on every shard, written before any reply is read.
    let mut cmds = Vec::new();
    for i in 0..10_000 {
        cmds.push(encode(&["SET", &format!("key:{i}"), &format!("value:{i}")]));
        cmds.push(encode(&["GET", &format!("key:{i}")]));
    }
    let replies = exchange(&mut t, &cmds, cmds.len()).unwrap();
    for i in 0..10_000 {
        assert_eq!(replies[2 * i], common::ok());
        assert_eq!(replies[2 * i + 1], common::bulk(&format!("value:{i}")));
    }
    // The plain port sees the same data.
    assert_eq!(s.raw_conn().q("DBSIZE"), Resp::Int(10_001));
}

#[test]
fn config_set_reloads_the_certificate_for_new_connections() {
    let (s, port) = start_tls(&[]);
    let c = certs();
    let first = tls_connect(port, true).unwrap();
    let der = |f: &str| CertificateDer::from_pem_file(c.path(f)).unwrap();
    let served = |t: &Tls| t.conn.peer_certificates().unwrap()[0].clone();
    assert_eq!(served(&first), der("server.crt"));

    let mut plain = s.raw_conn();
    let r = plain.cmd(&[
        "CONFIG",
        "SET",
        "tls-cert-file",
        &c.path("server2.crt"),
        "tls-key-file",
        &c.path("server2.key"),
    ]);
    assert_eq!(r, common::ok());
    let second = tls_connect(port, true).unwrap();
    assert_eq!(served(&second), der("server2.crt"));
    // The connection made before the reload goes on.
    let mut first = first;
    assert_eq!(
        cmd(&mut first, &["PING"]).unwrap(),
        Resp::Simple(b"PONG".to_vec())
    );

    // A bad file changes nothing: the error, the old values, the old certificate.
    let r = plain.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent/cert.pem"]);
    assert_eq!(
        r,
        common::err(
            "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
        )
    );
    assert_eq!(
        plain.q("CONFIG GET tls-cert-file"),
        Resp::Array(vec![
            common::bulk("tls-cert-file"),
            common::bulk(&c.path("server2.crt"))
        ])
    );
    // A key that does not match the certificate is refused too.
    let r = plain.cmd(&["CONFIG", "SET", "tls-key-file", &c.path("server.key")]);
    assert!(r.is_error(), "{r}");
    let third = tls_connect(port, true).unwrap();
    assert_eq!(served(&third), der("server2.crt"));
    // Protocol and cipher settings: refused when not supported, in force when accepted.
    assert!(plain.q("CONFIG SET tls-protocols TLSv1.1").is_error());
    assert!(plain.q("CONFIG SET tls-ciphers AES128-SHA").is_error());
    assert_eq!(plain.q("CONFIG SET tls-protocols TLSv1.2"), common::ok());
    let t = tls_connect(port, true).unwrap();
    assert_eq!(
        t.conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    assert_eq!(
        plain.q("CONFIG SET tls-ciphers ECDHE-RSA-CHACHA20-POLY1305"),
        common::ok()
    );
    let t = tls_connect(port, true).unwrap();
    assert_eq!(
        t.conn.negotiated_cipher_suite().map(|s| s.suite()),
        Some(rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256)
    );
}

/// Waits for `f` to hold (up to 20 s).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn dragonfly_tls_flag_covers_main_memcache_and_http() {
    let c = certs();
    let dir = std::env::temp_dir().join(format!("damselfly-tls-flag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (port, mc) = (free_port(), free_port());
    let child = Command::new(common::dfly_bin())
        .args(tls_flags(c))
        .args([
            "--tls",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--memcached_port",
            &mc.to_string(),
            "--requirepass",
            "s3cret",
            "--dir",
            &dir.display().to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _kill = Kill(child);
    eventually("the TLS main port", || tls_connect(port, true).is_ok());
    let mut t = tls_connect(port, true).unwrap();
    assert!(cmd(&mut t, &["PING"]).unwrap().is_error());
    assert_eq!(cmd(&mut t, &["AUTH", "s3cret"]).unwrap(), common::ok());
    assert_eq!(cmd(&mut t, &["SET", "mk", "hello"]).unwrap(), common::ok());

    // The memcache port speaks TLS too.
    let mut m = tls_connect(mc, true).unwrap();
    m.write_all(b"get mk\r\nset other 0 0 3\r\nabc\r\n")
        .unwrap();
    m.flush().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.ends_with(b"STORED\r\n") {
        let n = m.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "memcache connection closed: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"VALUE mk 0 5\r\nhello\r\nEND\r\nSTORED\r\n");

    // HTTPS console on the main port, behind the password.
    let mut h = tls_connect(port, true).unwrap();
    h.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    h.flush().unwrap();
    let mut resp = Vec::new();
    let _ = h.read_to_end(&mut resp);
    let resp = String::from_utf8_lossy(&resp);
    assert!(resp.starts_with("HTTP/1.1 401"), "{resp}");
    let mut h = tls_connect(port, true).unwrap();
    // user "default", password "s3cret"
    h.write_all(
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ZGVmYXVsdDpzM2NyZXQ=\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    h.flush().unwrap();
    let mut resp = Vec::new();
    let _ = h.read_to_end(&mut resp);
    let resp = String::from_utf8_lossy(&resp);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("dragonfly_version"), "{resp}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn info_field(s: &Server, field: &str) -> String {
    let Resp::Bulk(b) = s.raw_conn().q("INFO replication") else {
        panic!("INFO")
    };
    let text = String::from_utf8_lossy(&b).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_default()
}

/// Writes a few keys of several types on `primary` and checks that `replica` gets them over its
/// TLS link.
fn check_replicates(primary: &Server, replica: &Server) {
    eventually("master_link_status:up", || {
        info_field(replica, "master_link_status") == "up"
    });
    let mut p = primary.raw_conn();
    for i in 0..200 {
        p.cmd(&["SET", &format!("s{i}"), &format!("v{i}")]);
    }
    p.q("RPUSH list a b c");
    p.q("HSET hash f1 v1 f2 v2");
    p.q("ZADD zset 1 a 2 b");
    p.q("SET last done");
    let mut r = replica.raw_conn();
    eventually("the writes on the replica", || {
        r.q("GET last") == common::bulk("done")
    });
    assert_eq!(r.q("GET s123"), common::bulk("v123"));
    assert_eq!(
        r.q("LRANGE list 0 -1"),
        Resp::Array(vec![
            common::bulk("a"),
            common::bulk("b"),
            common::bulk("c")
        ])
    );
    assert_eq!(r.q("HGET hash f2"), common::bulk("v2"));
    assert_eq!(r.q("ZSCORE zset b"), common::bulk("2"));
    assert_eq!(r.q("DBSIZE"), p.q("DBSIZE"));
}

fn replica_args(c: &Certs) -> Vec<String> {
    let mut a = tls_flags(c);
    a.extend([
        "--tls-replication".into(),
        "yes".into(),
        "--tls-client-cert-file".into(),
        c.path("client.crt"),
        "--tls-client-key-file".into(),
        c.path("client.key"),
    ]);
    a
}

#[test]
fn damselfly_replica_of_damselfly_over_tls() {
    let (primary, tls_port) = start_tls(&[]);
    let args = replica_args(certs());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let replica = Server::start(&argv);
    replica
        .raw_conn()
        .cmd(&["REPLICAOF", "127.0.0.1", &tls_port.to_string()]);
    check_replicates(&primary, &replica);
}

#[test]
fn redis_server_and_damselfly_replicate_each_other_over_tls() {
    let c = certs();
    // redis-server replica of a damselfly primary.
    let (primary, tls_port) = start_tls(&[]);
    let args = replica_args(c);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let redis_replica = RedisServer::start_with(&argv);
    redis_replica
        .raw_conn()
        .cmd(&["REPLICAOF", "127.0.0.1", &tls_port.to_string()]);
    check_replicates(&primary, &redis_replica);

    // damselfly replica of a redis-server primary (the migration path), over TLS.
    let redis_tls = free_port();
    let mut rargs = tls_flags(c);
    rargs.extend(["--tls-port".into(), redis_tls.to_string()]);
    let rargv: Vec<&str> = rargs.iter().map(String::as_str).collect();
    let redis_primary = RedisServer::start_with(&rargv);
    let replica = Server::start(&argv);
    replica
        .raw_conn()
        .cmd(&["REPLICAOF", "127.0.0.1", &redis_tls.to_string()]);
    check_replicates(&redis_primary, &replica);
}

#[test]
fn config_set_moves_the_plain_and_tls_ports() {
    let (s, tls_port) = start_tls(&[]);
    let plain_port = s.port();
    let mut plain = s.raw_conn();
    // The TLS port moves: the old one stops accepting, the new one serves TLS.
    let moved = free_port();
    assert_eq!(
        plain.cmd(&["CONFIG", "SET", "tls-port", &moved.to_string()]),
        common::ok()
    );
    assert!(TcpStream::connect(("127.0.0.1", tls_port)).is_err());
    let mut t = tls_connect(moved, true).unwrap();
    assert_eq!(
        cmd(&mut t, &["PING"]).unwrap(),
        Resp::Simple(b"PONG".to_vec())
    );
    // The plain port off, then on another number; connections already open go on.
    assert_eq!(plain.q("CONFIG SET port 0"), common::ok());
    assert!(TcpStream::connect(("127.0.0.1", plain_port)).is_err());
    assert_eq!(plain.q("PING"), Resp::Simple(b"PONG".to_vec()));
    assert_eq!(
        cmd(&mut t, &["CONFIG", "SET", "port", &plain_port.to_string()]).unwrap(),
        common::ok()
    );
    assert_eq!(s.raw_conn().q("PING"), Resp::Simple(b"PONG".to_vec()));
    // A port in use: Redis's error, and the old port still listens.
    let busy = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let busy_port = busy.local_addr().unwrap().port().to_string();
    assert_eq!(
        plain.cmd(&["CONFIG", "SET", "port", &busy_port]),
        common::err("ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.")
    );
    assert_eq!(
        plain.q("CONFIG GET port"),
        Resp::Array(vec![
            common::bulk("port"),
            common::bulk(&plain_port.to_string())
        ])
    );
    assert_eq!(s.raw_conn().q("PING"), Resp::Simple(b"PONG".to_vec()));
    // A bind address this host does not have: refused, the listeners stay.
    assert_eq!(
        plain.q("CONFIG SET bind 999.999.999.999"),
        common::err("ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.")
    );
    assert_eq!(s.raw_conn().q("PING"), Resp::Simple(b"PONG".to_vec()));
    assert!(tls_connect(moved, true).is_ok());
}
