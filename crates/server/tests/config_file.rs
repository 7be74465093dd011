//! redis.conf files and redis-server's process behaviour: every directive damselfly supports
//! round-trips through a config file, CONFIG GET and CONFIG REWRITE; bad files stop the server
//! with the file, line and reason; pid file, unix socket, daemonize, signals and start-up lines
//! behave as redis-server's, and Debian's stock /etc/redis/redis.conf starts the server.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{dfly_bin, Resp, Server};
use damselfly::config::{Config, Kind, PARAMS};

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "dfly-conf-test-{tag}-{}-{}",
        std::process::id(),
        common::free_port()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bulk_pairs(r: Resp) -> HashMap<String, String> {
    let Resp::Array(items) = r else {
        panic!("not an array: {r:?}")
    };
    items
        .chunks(2)
        .map(|kv| match (&kv[0], &kv[1]) {
            (Resp::Bulk(k), Resp::Bulk(v)) => (
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ),
            other => panic!("bad pair {other:?}"),
        })
        .collect()
}

fn config_get(srv: &Server, name: &str) -> String {
    let mut c = srv.raw_conn();
    let m = bulk_pairs(c.cmd(&[&b"CONFIG"[..], b"GET", name.as_bytes()]));
    m.get(name)
        .cloned()
        .unwrap_or_else(|| panic!("CONFIG GET {name}: {m:?}"))
}

/// Directives whose non-default value the round trip cannot use, and why.
const NOT_IN_ROUND_TRIP: &[(&str, &str)] = &[
    ("port", "the harness picks a free port on the command line"),
    ("bind", "the harness binds 127.0.0.1 on the command line"),
    (
        "daemonize",
        "forks away from the harness: daemonize_writes_pid_file_and_detaches",
    ),
    (
        "requirepass",
        "would need AUTH for every check: tests/admin.rs covers it",
    ),
    (
        "logfile",
        "the harness reads the log from stdout: logfile_gets_the_log",
    ),
    (
        "maxclients",
        "may be lowered to the descriptor limit at start-up (with a warning)",
    ),
    // The switches that put TLS in use need real certificates (the other tls-* settings round
    // trip here: unused without them).
    (
        "tls",
        "turns TLS on: tests/tls.rs covers it with certificates",
    ),
    ("tls-port", "turns TLS on: tests/tls.rs"),
    ("tls-replication", "turns TLS on: tests/tls.rs"),
    ("tls-cluster", "turns TLS on: tests/tls.rs"),
];

/// A valid value other than the default for `p`, or None when every other value is one that
/// damselfly refuses until its feature exists (checked by the refusal tests).
fn other_value(p: &damselfly::config::Param, dir: &Path) -> Option<String> {
    damselfly::install();
    let cfg = Config::new();
    let candidates: Vec<String> = match p.name {
        "dir" => vec![dir.display().to_string()],
        "pidfile" => vec![dir.join("d.pid").display().to_string()],
        "unixsocket" => vec![dir.join("d.sock").display().to_string()],
        "proactor_threads" => vec!["3".into()],
        "unixsocketperm" => vec!["700".into()],
        "client-output-buffer-limit" => vec!["pubsub 64mb 16mb 90".into()],
        "oom-score-adj-values" => vec!["10 20 30".into()],
        "save" => vec!["900 1 300 10".into()],
        "snapshot_cron" => vec!["*/5 * * * *".into()],
        "bind" => vec![],
        // Extra listeners: free ports of their own, on loopback.
        "memcached_port" | "admin_port" => vec![common::free_port().to_string()],
        "admin_bind" => vec!["127.0.0.1".into()],
        // An ACL file the server can load.
        "aclfile" => {
            let f = dir.join("users.acl");
            std::fs::write(&f, "user default on nopass ~* &* +@all\n").unwrap();
            vec![f.display().to_string()]
        }
        _ => match p.kind {
            Kind::Int(min, max) => {
                let d: i64 = p.default.parse().unwrap_or(0);
                vec![(d + 1).min(max).to_string(), (d - 1).max(min).to_string()]
            }
            Kind::Mem | Kind::MemAtLeast(_) => {
                let d: u64 = p.default.parse().unwrap_or(0);
                vec![format!("{}", d.max(1 << 20) * 2), "2mb".into()]
            }
            Kind::Bool => vec![if p.default == "yes" { "no" } else { "yes" }.into()],
            Kind::Enum(opts) => opts.iter().map(|o| o.to_string()).collect(),
            Kind::Str => vec!["some value".into()],
            Kind::Octal(_) | Kind::Words(_) => vec![],
        },
    };
    candidates.into_iter().find(|v| {
        cfg.set_directive(p.name, &[v]).is_ok() && cfg.get(p.name).as_deref() != Some(p.default)
    })
}

/// The canonical value damselfly's own parser makes of `value` (what CONFIG GET must show).
fn canonical(name: &str, value: &str) -> String {
    damselfly::install();
    let c = Config::new();
    c.set_directive(name, &[value]).unwrap();
    c.get(name).unwrap()
}

#[test]
fn every_directive_round_trips_through_the_file_config_get_and_rewrite() {
    let dir = tmpdir("all");
    let mut text = String::from("# A config file naming every directive damselfly supports.\n\n");
    let mut expected: Vec<(&str, String)> = Vec::new();
    for p in PARAMS {
        if NOT_IN_ROUND_TRIP.iter().any(|(n, _)| *n == p.name) {
            continue;
        }
        let Some(v) = other_value(p, &dir) else {
            continue;
        };
        text.push_str(&format!(
            "# {}\n{} {}\n",
            p.help,
            p.name,
            damselfly::config::file::quote_arg(&v)
        ));
        let want = if p.name == "dir" {
            std::fs::canonicalize(&dir).unwrap().display().to_string()
        } else {
            canonical(p.name, &v)
        };
        expected.push((p.name, want));
    }
    // Enough of the table is covered that a new parameter cannot slip by unnoticed.
    assert!(
        expected.len() > 70,
        "only {} directives covered",
        expected.len()
    );
    let conf = dir.join("every.conf");
    std::fs::write(&conf, &text).unwrap();

    let srv = Server::start_config(&conf, &[]);
    for (name, want) in &expected {
        assert_eq!(&config_get(&srv, name), want, "CONFIG GET {name}");
    }
    // CONFIG SET two values, rewrite: same lines, in place, comments kept.
    let mut c = srv.raw_conn();
    assert_eq!(c.q("CONFIG SET hz 33 slowlog-max-len 77"), common::ok());
    assert_eq!(c.q("CONFIG REWRITE"), common::ok());
    let rewritten = std::fs::read_to_string(&conf).unwrap();
    let old_lines: Vec<&str> = text.lines().collect();
    let new_lines: Vec<&str> = rewritten.lines().collect();
    // What the command line set (the harness's port and bind) and the client-output-buffer-limit
    // classes beyond the first come after the marker, as Redis writes them.
    assert_eq!(
        new_lines.get(old_lines.len()),
        Some(&"# Generated by CONFIG REWRITE"),
        "{rewritten}"
    );
    for extra in &new_lines[old_lines.len() + 1..] {
        let name = extra.split(' ').next().unwrap();
        assert!(
            ["port", "bind", "maxclients", "client-output-buffer-limit"].contains(&name),
            "unexpected appended line {extra}"
        );
    }
    for (o, n) in old_lines.iter().zip(&new_lines) {
        if o.starts_with("hz ") {
            assert_eq!(*n, "hz 33");
        } else if o.starts_with("slowlog-max-len ") {
            assert_eq!(*n, "slowlog-max-len 77");
        } else if o.starts_with('#') || o.is_empty() {
            assert_eq!(o, n, "comments and blank lines are kept");
        } else {
            // Same directive, same position (the value may be written in canonical form).
            assert_eq!(o.split(' ').next(), n.split(' ').next());
        }
    }
    drop(c);
    drop(srv);

    // The rewritten file starts a server with the same configuration.
    let srv = Server::start_config(&conf, &[]);
    for (name, want) in &expected {
        let want = match *name {
            "hz" => "33".to_string(),
            "slowlog-max-len" => "77".to_string(),
            _ => want.clone(),
        };
        assert_eq!(
            config_get(&srv, name),
            want,
            "after rewrite: CONFIG GET {name}"
        );
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rewrite_appends_new_values_and_keeps_includes() {
    let dir = tmpdir("rw");
    let inc = dir.join("inc.conf");
    std::fs::write(&inc, "hz 40\n").unwrap();
    let conf = dir.join("r.conf");
    let text = format!(
        "# top comment\ninclude {}\ntimeout 5\n\n# end\n",
        inc.display()
    );
    std::fs::write(&conf, &text).unwrap();
    let srv = Server::start_config(&conf, &[]);
    assert_eq!(config_get(&srv, "hz"), "40");
    let mut c = srv.raw_conn();
    assert_eq!(
        c.q("CONFIG SET timeout 9 maxmemory-samples 7"),
        common::ok()
    );
    assert_eq!(c.q("CONFIG REWRITE"), common::ok());
    let got = std::fs::read_to_string(&conf).unwrap();
    let want = format!(
        "# top comment\ninclude {}\ntimeout 9\n\n# end\n# Generated by CONFIG REWRITE\nmaxmemory-samples 7\n",
        inc.display()
    );
    // The include's own directives stay in the include (hz 40 is its value, not rewritten).
    assert!(
        got.starts_with(&want[..want.find("# Generated").unwrap()]),
        "{got}"
    );
    assert!(got.contains("# Generated by CONFIG REWRITE\n"), "{got}");
    assert!(got.contains("\nmaxmemory-samples 7\n"), "{got}");
    assert!(
        got.contains("\nhz 40\n"),
        "the effective hz is written once: {got}"
    );
    assert_eq!(got.matches("timeout").count(), 1, "{got}");
    drop(c);
    drop(srv);

    // A relative config path still names the same file after `dir` moved the working
    // directory (Redis's test runner starts servers that way).
    let sub = dir.join("data");
    std::fs::create_dir_all(&sub).unwrap();
    let rel = dir.join("rel.conf");
    std::fs::write(&rel, format!("dir {}\n", sub.display())).unwrap();
    let mut child = std::process::Command::new(dfly_bin())
        .current_dir(&dir)
        .args(["rel.conf", "--bind", "127.0.0.1", "--port"])
        .arg(common::free_port().to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let port: u16 = {
        // Read the port back from the log's banner line.
        let mut out = child.stdout.take().unwrap();
        let mut log = String::new();
        let mut buf = [0u8; 4096];
        while !log.contains("Ready to accept") {
            let n = out.read(&mut buf).unwrap();
            assert!(n > 0, "{log}");
            log.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        log.split("port=")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"CONFIG SET hz 77\r\nCONFIG REWRITE\r\n")
        .unwrap();
    let mut got = [0u8; 10];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"+OK\r\n+OK\r\n");
    let _ = child.kill();
    let _ = child.wait();
    assert!(std::fs::read_to_string(&rel).unwrap().contains("hz 77"));
    assert!(!sub.join("rel.conf").exists());

    // Without a config file there is nothing to rewrite (Redis's error).
    let srv = Server::start(&[]);
    let mut c = srv.raw_conn();
    assert_eq!(
        c.q("CONFIG REWRITE"),
        Resp::Error(b"ERR The server is running without a config file".to_vec())
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Runs the binary with `args` and returns (exit status, stdout, stderr) if it exits within 10 s.
fn run_to_exit(args: &[&str], stdin: Option<&str>) -> (std::process::ExitStatus, String, String) {
    let mut child = Command::new(dfly_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut si = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        si.write_all(text.as_bytes()).unwrap();
    }
    drop(si);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            let (mut o, mut e) = (String::new(), String::new());
            child.stdout.take().unwrap().read_to_string(&mut o).unwrap();
            child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
            return (st, o, e);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{args:?} still running after 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bad_files_name_the_file_the_line_and_the_reason() {
    let dir = tmpdir("bad");
    let conf = dir.join("bad.conf");
    let cases: &[(&str, &str)] = &[
        (
            "nosuchdirective yes",
            "Bad directive or wrong number of arguments",
        ),
        ("port", "wrong number of arguments"),
        ("port 1 2", "wrong number of arguments"),
        ("hz fast", "argument couldn't be parsed into an integer"),
        ("daemonize maybe", "argument must be 'yes' or 'no'"),
        (
            "loglevel loud",
            "argument(s) must be one of the following: debug, verbose, notice, warning",
        ),
        ("save 900", "Invalid save parameters"),
        (
            "client-output-buffer-limit normal 0 0",
            "Wrong number of arguments in buffer limit configuration.",
        ),
        (
            "requirepass \"unbalanced",
            "Unbalanced quotes in configuration line",
        ),
        (
            "include /nonexistent/dir/x.conf",
            "can't open config file '/nonexistent/dir/x.conf': No such file or directory",
        ),
        (
            "appendonly yes",
            "the append-only file is not implemented yet",
        ),
    ];
    for (line, reason) in cases {
        std::fs::write(&conf, format!("# comment\nport 0\n{line}\n")).unwrap();
        let (st, _, err) = run_to_exit(&[conf.to_str().unwrap()], None);
        assert!(!st.success(), "{line}: exit {st}");
        assert!(err.contains("*** FATAL CONFIG FILE ERROR"), "{line}: {err}");
        assert!(
            err.contains(&format!("{}, at line 3", conf.display())),
            "{line}: names file and line: {err}"
        );
        assert!(
            err.contains(&format!(">>> '{line}'")),
            "{line}: quotes the line: {err}"
        );
        assert!(err.contains(reason), "{line}: says why ({reason}): {err}");
    }
    // Every bad line is reported in one go, not only the first.
    std::fs::write(&conf, "hz x\nport 0\nfoo bar\ntimeout -1\n").unwrap();
    let (st, _, err) = run_to_exit(&[conf.to_str().unwrap()], None);
    assert!(!st.success());
    assert_eq!(err.matches("FATAL CONFIG FILE ERROR").count(), 3, "{err}");
    for n in [1, 3, 4] {
        assert!(err.contains(&format!("at line {n}\n")), "{err}");
    }
    assert!(!err.contains("at line 2\n"), "{err}");
    // An unreadable config file.
    let (st, _, err) = run_to_exit(&["/nonexistent/redis.conf"], None);
    assert!(!st.success());
    assert!(
        err.contains("can't open config file '/nonexistent/redis.conf'"),
        "{err}"
    );
    // Command-line options after the file are checked the same way.
    std::fs::write(&conf, "port 0\n").unwrap();
    let (st, _, err) = run_to_exit(&[conf.to_str().unwrap(), "--hz", "x"], None);
    assert!(!st.success());
    assert!(
        err.contains("command line") && err.contains(">>> 'hz \"x\"'"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn config_from_stdin_and_version() {
    let port = common::free_port();
    let mut child = Command::new(dfly_bin())
        .args(["-", "--bind", "127.0.0.1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        let mut si = child.stdin.take().unwrap();
        si.write_all(format!("port {port}\nhz 42\n").as_bytes())
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let reply = loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(b"CONFIG GET hz\r\n").unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap();
            break buf[..n].to_vec();
        }
        assert!(Instant::now() < deadline, "no server on {port}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(reply, b"*2\r\n$2\r\nhz\r\n$2\r\n42\r\n");

    let (st, out, _) = run_to_exit(&["--version"], None);
    assert!(st.success());
    // `redis-server --version`'s shape: tools read `v=` from the third field.
    assert!(out.starts_with("Damselfly server v=7.0.15 sha="), "{out}");
    assert!(
        out.contains(concat!("damselfly=", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    let (st, out2, _) = run_to_exit(&["-v"], None);
    assert!(st.success());
    assert_eq!(out, out2);
}

fn wait_for(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn start_up_lines_pid_file_unix_socket_and_sigterm() {
    let dir = tmpdir("proc");
    let pidf = dir.join("s.pid");
    let sock = dir.join("s.sock");
    let conf = dir.join("s.conf");
    std::fs::write(
        &conf,
        format!(
            "always-show-logo yes\npidfile {}\nunixsocket {}\nunixsocketperm 700\nloglevel verbose\n",
            pidf.display(),
            sock.display()
        ),
    )
    .unwrap();
    let mut srv = Server::start_config(&conf, &[]);
    let pid = srv.pid();
    let log = srv.output();
    // What Redis's test runner and supervisors wait for.
    assert!(log.contains(&format!(" PID: {pid}")), "{log}");
    assert!(log.contains(&format!("Port: {}", srv.port())), "{log}");
    assert!(log.contains("Ready to accept connections"), "{log}");
    assert!(
        log.contains(&format!("Configuration loaded from {}", conf.display())),
        "{log}"
    );
    assert_eq!(std::fs::read_to_string(&pidf).unwrap(), format!("{pid}\n"));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
    // The unix socket serves clients; CLIENT LIST shows them as Redis does.
    let mut u = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    u.write_all(b"PING\r\nCLIENT LIST\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"\n\r\n") {
        let n = u.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("+PONG\r\n"), "{got}");
    assert!(got.contains(&format!("addr={}:0", sock.display())), "{got}");
    assert!(got.contains("flags=U"), "{got}");
    // SIGTERM: a clean exit (status 0) that removes the pid file and the socket.
    // SAFETY: signals our own child process.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let st = srv
        .wait_exit(Duration::from_secs(10))
        .expect("exits on SIGTERM");
    assert!(st.success(), "{st}");
    let log = srv.output();
    assert!(
        log.contains("Received SIGTERM scheduling shutdown..."),
        "{log}"
    );
    assert!(log.contains("Removing the pid file."), "{log}");
    assert!(log.contains("Removing the unix socket file."), "{log}");
    assert!(!pidf.exists() && !sock.exists());

    // SIGINT and SHUTDOWN end it the same way.
    let mut srv = Server::start_config(&conf, &[]);
    unsafe { libc::kill(srv.pid() as i32, libc::SIGINT) };
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exits")
        .success());
    assert!(srv
        .output()
        .contains("Received SIGINT scheduling shutdown..."));
    // SHUTDOWN SAVE writes the snapshot, and the next start loads it.
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let data_s = data.display().to_string();
    let mut srv = Server::start_config(&conf, &["--dir", &data_s]);
    let mut c = srv.raw_conn();
    assert_eq!(c.q("SET persisted yes"), Resp::Simple(b"OK".to_vec()));
    c.send_raw(b"SHUTDOWN SAVE\r\n");
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exits")
        .success());
    assert!(data.join("dump.rdb").exists());
    let mut srv = Server::start_config(&conf, &["--dir", &data_s]);
    let mut c = srv.raw_conn();
    assert_eq!(c.q("GET persisted"), Resp::Bulk(b"yes".to_vec()));
    // When the save fails (here: its directory is gone) SHUTDOWN SAVE is refused as in Redis
    // and the server keeps running; SHUTDOWN SAVE FORCE goes ahead (and says so in the log).
    std::fs::remove_dir_all(&data).unwrap();
    assert_eq!(
        c.q("SHUTDOWN SAVE"),
        Resp::Error(b"ERR Errors trying to SHUTDOWN. Check logs.".to_vec())
    );
    assert_eq!(c.q("PING"), Resp::Simple(b"PONG".to_vec()));
    assert!(srv.output().contains("Error trying to save the DB"));
    c.send_raw(b"SHUTDOWN SAVE FORCE\r\n");
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exits")
        .success());
    let mut srv = Server::start_config(&conf, &[]);
    let mut c = srv.raw_conn();
    c.send_raw(b"SHUTDOWN\r\n");
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exits")
        .success());
    assert!(srv.output().contains("User requested shutdown..."));
    assert!(!pidf.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn daemonize_writes_pid_file_and_detaches() {
    let dir = tmpdir("daemon");
    let pidf = dir.join("d.pid");
    let logf = dir.join("d.log");
    let port = common::free_port();
    let conf = dir.join("d.conf");
    std::fs::write(
        &conf,
        format!(
            "daemonize yes\nport {port}\nbind 127.0.0.1\npidfile {}\nlogfile {}\ndir {}\n",
            pidf.display(),
            logf.display(),
            dir.display()
        ),
    )
    .unwrap();
    // The foreground process exits at once; the daemon keeps serving.
    let (st, out, _) = run_to_exit(&[conf.to_str().unwrap()], None);
    assert!(st.success(), "{st}");
    assert!(out.is_empty(), "the log goes to the logfile: {out}");
    wait_for("the pid file", || {
        std::fs::read_to_string(&pidf).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid: i32 = std::fs::read_to_string(&pidf)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_for("PONG", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(2))).ok();
            let mut b = [0u8; 7];
            s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut b).is_ok() && &b == b"+PONG\r\n"
        })
    });
    // SAFETY: signal 0 only checks that the daemon exists; then it is asked to stop.
    assert_eq!(unsafe { libc::kill(pid, 0) }, 0);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"SHUTDOWN\r\n").unwrap();
    wait_for("the daemon to exit", || unsafe { libc::kill(pid, 0) } != 0);
    assert!(!pidf.exists(), "pid file removed at shutdown");
    let log = std::fs::read_to_string(&logf).unwrap();
    assert!(log.contains("Ready to accept connections"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn logfile_gets_the_log() {
    let dir = tmpdir("log");
    let logf = dir.join("x.log");
    let conf = dir.join("l.conf");
    std::fs::write(&conf, format!("logfile {}\n", logf.display())).unwrap();
    let srv = Server::start_config(&conf, &[]);
    let log = std::fs::read_to_string(&logf).unwrap();
    assert!(log.contains("Ready to accept connections"), "{log}");
    assert!(
        !srv.output().contains("Ready to accept"),
        "stdout stays quiet"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn debug_and_protected_configs_are_gated_as_in_redis() {
    let srv = Server::start(&["--enable-debug-command", "no"]);
    let mut c = srv.raw_conn();
    let Resp::Error(e) = c.q("DEBUG SLEEP 0") else {
        panic!("DEBUG allowed")
    };
    assert!(e.starts_with(b"ERR DEBUG command not allowed."));
    assert_eq!(
        c.q("CONFIG SET dir /tmp"),
        Resp::Error(
            b"ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
                .to_vec()
        )
    );
    drop(c);
    drop(srv);
    // `local`: loopback clients may.
    let srv = Server::start(&[
        "--enable-debug-command",
        "local",
        "--enable-protected-configs",
        "yes",
    ]);
    let mut c = srv.raw_conn();
    assert_eq!(c.q("DEBUG SLEEP 0"), common::ok());
    let tmp = std::env::temp_dir().display().to_string();
    assert_eq!(
        c.cmd(&[&b"CONFIG"[..], b"SET", b"dir", tmp.as_bytes()]),
        common::ok()
    );
}

/// Debian's stock /etc/redis/redis.conf (what `apt-get install redis-server` ships) starts
/// damselfly. Its paths (/var/log/redis, /var/lib/redis, /run/redis) and `daemonize yes` are
/// replaced on the command line so the test neither needs those directories nor loses the
/// process; `stock_config_with_its_own_paths` in the docs runs it unchanged.
#[test]
fn debian_stock_redis_conf_starts() {
    let stock = Path::new("/etc/redis/redis.conf");
    assert!(
        stock.exists(),
        "/etc/redis/redis.conf missing: install redis-server (./scripts/test.sh does)"
    );
    let dir = tmpdir("stock");
    let dirs = dir.display().to_string();
    let pidf = dir.join("r.pid").display().to_string();
    let srv = Server::start_config(
        stock,
        &[
            "--daemonize",
            "no",
            "--logfile",
            "",
            "--dir",
            &dirs,
            "--pidfile",
            &pidf,
        ],
    );
    let mut c = srv.raw_conn();
    assert_eq!(c.q("SET k v"), common::ok());
    assert_eq!(config_get(&srv, "hz"), "10");
    assert_eq!(config_get(&srv, "tcp-backlog"), "511");
    assert_eq!(
        config_get(&srv, "client-output-buffer-limit"),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn config_value(c: &mut common::RawConn, name: &str) -> String {
    bulk_pairs(c.q(&format!("CONFIG GET {name}")))
        .remove(name)
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn rename_command_as_redis() {
    let dir = tmpdir("rename");
    let conf = dir.join("r.conf");
    std::fs::write(
        &conf,
        "rename-command flushdb badger\n\
         rename-command config b840fc02d524045429941cc15f59e41cb7be6c52\n\
         rename-command save \"\"\n",
    )
    .unwrap();
    let mut srv = Server::start_config(&conf, &[]);
    let mut c = srv.raw_conn();
    assert_eq!(c.q("SET k v"), Resp::Simple(b"OK".to_vec()));
    let Resp::Error(e) = c.q("FLUSHDB") else {
        panic!("flushdb still reachable")
    };
    assert!(e.starts_with(b"ERR unknown command 'FLUSHDB'"), "{e:?}");
    assert!(matches!(c.q("SAVE"), Resp::Error(_)));
    // The new names (any case, longer than any command name) reach the commands; scripts see
    // the table the clients see.
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('badger')", "0"]),
        Resp::Simple(b"OK".to_vec())
    );
    assert_eq!(c.q("DBSIZE"), Resp::Int(0));
    let Resp::Array(v) = c.q("B840FC02D524045429941CC15F59E41CB7BE6C52 GET maxclients") else {
        panic!("renamed CONFIG")
    };
    assert_eq!(v.len(), 2);
    // CONFIG REWRITE keeps the directives, so a restart renames the same way.
    assert_eq!(
        c.q("b840fc02d524045429941cc15f59e41cb7be6c52 REWRITE"),
        Resp::Simple(b"OK".to_vec())
    );
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("rename-command flushdb badger"), "{text}");
    // The server's own uses of a renamed command still work: SHUTDOWN SAVE writes the
    // snapshot although SAVE has no name.
    assert_eq!(c.q("SET kept 1"), Resp::Simple(b"OK".to_vec()));
    c.send_raw(b"SHUTDOWN SAVE\r\n");
    assert!(srv
        .wait_exit(Duration::from_secs(10))
        .expect("exits")
        .success());
    let srv = Server::start_config(&conf, &[]);
    let mut c = srv.raw_conn();
    assert!(matches!(c.q("FLUSHDB"), Resp::Error(_)));
    drop(c);
    drop(srv);

    // Redis's errors for directives that cannot apply, at their line.
    for (line, why) in [
        (
            "rename-command nosuch x",
            "No such command in rename-command",
        ),
        (
            "rename-command get set",
            "Target command name already exists",
        ),
        ("rename-command get", "wrong number of arguments"),
    ] {
        let bad = dir.join("bad.conf");
        std::fs::write(&bad, format!("{line}\n")).unwrap();
        let (st, out, err) = run_to_exit(&[bad.to_str().unwrap()], None);
        assert!(!st.success());
        let text = format!("{out}{err}");
        assert!(text.contains(why) && text.contains(line), "{line}: {text}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn save_points_default_and_accumulate_as_in_redis() {
    let dir = tmpdir("save");
    let conf = dir.join("s.conf");
    // No `save`: Redis's built-in save points.
    std::fs::write(&conf, "hz 10\n").unwrap();
    let srv = Server::start_config(&conf, &[]);
    let mut c = srv.raw_conn();
    assert_eq!(config_value(&mut c, "save"), "3600 1 300 100 60 10000");
    drop(c);
    drop(srv);
    // The first `save` replaces them, later ones append, the command line's too; `save ""`
    // clears.
    std::fs::write(&conf, "save 900 1\nsave 300 10\n").unwrap();
    for (args, want) in [
        (&[][..], "900 1 300 10"),
        (&["--save", "100", "100"][..], "900 1 300 10 100 100"),
        (&["--save", ""][..], ""),
    ] {
        let srv = Server::start_config(&conf, args);
        let mut c = srv.raw_conn();
        assert_eq!(config_value(&mut c, "save"), want, "{args:?}");
        // CONFIG SET replaces.
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "save", "5 5"]),
            Resp::Simple(b"OK".to_vec())
        );
        assert_eq!(config_value(&mut c, "save"), "5 5");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn immutable_parameters_by_dragonfly_names_accept_their_own_value() {
    let srv = Server::start(&["--proactor_threads", "2"]);
    let mut c = srv.raw_conn();
    // A tool writing back every value of CONFIG GET * (Redis's "CONFIG sanity" test) works for
    // Dragonfly's start-up flags and aliases...
    for (name, v) in [
        ("proactor_threads", "2"),
        ("dbnum", "16"),
        ("tcp_backlog", "511"),
    ] {
        assert_eq!(
            c.q(&format!("CONFIG SET {name} {v}")),
            Resp::Simple(b"OK".to_vec()),
            "{name}"
        );
    }
    // ...a change is refused, and so is any CONFIG SET of Redis's own immutable parameters.
    for line in [
        "CONFIG SET proactor_threads 3",
        "CONFIG SET databases 16",
        "CONFIG SET tcp-backlog 511",
        "CONFIG SET daemonize no",
    ] {
        let Resp::Error(e) = c.q(line) else {
            panic!("{line} accepted")
        };
        assert!(
            String::from_utf8_lossy(&e).ends_with("can't set immutable config"),
            "{line}: {e:?}"
        );
    }
}

#[test]
fn oom_score_adj_follows_the_role_and_rolls_back() {
    let read = |pid: u32| -> i64 {
        std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let srv = Server::start(&[]);
    let pid = srv.pid();
    let base = read(pid);
    let mut c = srv.raw_conn();
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "oom-score-adj-values",
            "10 20 30",
            "oom-score-adj",
            "yes"
        ]),
        Resp::Simple(b"OK".to_vec())
    );
    assert_eq!(read(pid), base + 10);
    assert_eq!(c.q("REPLICAOF 127.0.0.1 1"), Resp::Simple(b"OK".to_vec()));
    assert_eq!(read(pid), base + 20, "the replica class");
    assert_eq!(c.q("REPLICAOF NO ONE"), Resp::Simple(b"OK".to_vec()));
    assert_eq!(read(pid), base + 10);
    assert_eq!(
        c.q("CONFIG SET oom-score-adj absolute"),
        Resp::Simple(b"OK".to_vec())
    );
    assert_eq!(read(pid), 10);
    // A CONFIG SET whose port cannot be bound takes everything back, the score included.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let port = port.to_string();
    let Resp::Error(e) = c.cmd(&[
        "CONFIG",
        "SET",
        "oom-score-adj-values",
        "50 60 70",
        "maxmemory",
        "10000001",
        "port",
        &port,
    ]) else {
        panic!("bound a taken port")
    };
    assert!(
        String::from_utf8_lossy(&e).contains("Unable to listen on this port"),
        "{e:?}"
    );
    assert_eq!(read(pid), 10);
    assert_eq!(config_value(&mut c, "oom-score-adj-values"), "10 20 30");
    assert_eq!(config_value(&mut c, "maxmemory"), "0");
    // `no` gives the process its own score back.
    assert_eq!(
        c.q("CONFIG SET oom-score-adj no"),
        Resp::Simple(b"OK".to_vec())
    );
    assert_eq!(read(pid), base);
}
