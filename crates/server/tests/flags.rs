//! No flag is accepted and ignored: a value that needs a feature damselfly does not have yet
//! stops the server at startup with a message naming the flag (and CONFIG SET refuses it: see
//! admin.rs), and the flags that are accepted do what they say.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Server;

fn bin() -> std::path::PathBuf {
    std::env::var_os("DFLY_TEST_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_damselfly").into())
}

/// Runs the binary with `args` on a free port; returns (exit status, output) if it exits within
/// 10 s, or None if it is still running (then it is killed).
fn run_briefly(args: &[&str]) -> Option<(std::process::ExitStatus, String)> {
    let port = common::free_port().to_string();
    let mut child = Command::new(bin())
        .args(["--port", &port, "--bind", "127.0.0.1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn damselfly");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            let mut out = String::new();
            if let Some(mut o) = child.stdout.take() {
                let _ = o.read_to_string(&mut out);
            }
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut out);
            }
            return Some((st, out));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn flags_needing_missing_features_stop_the_server_with_a_message() {
    let refused: &[(&[&str], &str)] = &[
        (&["--appendonly", "yes"], "appendonly"),
        (&["--activedefrag", "yes"], "activedefrag"),
    ];
    for (args, name) in refused {
        let (st, out) =
            run_briefly(args).unwrap_or_else(|| panic!("{args:?} was accepted: still running"));
        assert!(!st.success(), "{args:?}: exit status {st}");
        assert!(
            out.contains(name) && out.contains("not implemented yet"),
            "{args:?}: the message names the flag and why:\n{out}"
        );
    }
}

#[test]
fn the_same_flags_with_values_that_need_nothing_missing_work() {
    let srv = Server::start(&[
        "--appendonly",
        "no",
        "--save",
        "",
        "--snapshot_cron",
        "",
        "--nocache_mode",
        "--memcached_port",
        "0",
        "--maxmemory",
        "50mb",
        "--maxmemory-policy",
        "noeviction",
    ]);
    let mut c = srv.raw_conn();
    assert_eq!(c.q("PING"), common::Resp::Simple(b"PONG".to_vec()));
}

#[test]
fn help_lists_each_flag_once() {
    let out = Command::new(bin())
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut seen = std::collections::HashSet::new();
    for line in text.lines().filter(|l| l.starts_with("  --")) {
        let first = line.split_whitespace().next().unwrap_or("");
        assert!(
            seen.insert(first.to_string()),
            "{first} listed twice:\n{text}"
        );
    }
    assert!(seen.len() > 30, "{text}");
}

#[test]
fn timeout_closes_idle_clients() {
    let srv = Server::start(&["--timeout", "1"]);
    let mut idle = srv.connect();
    let mut busy = srv.raw_conn();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    // The busy client keeps talking and stays connected; the idle one is closed after ~1 s.
    let mut buf = [0u8; 16];
    let n = loop {
        assert_eq!(busy.q("PING"), common::Resp::Simple(b"PONG".to_vec()));
        idle.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        match idle.read(&mut buf) {
            Ok(n) => break n,
            Err(_) if t0.elapsed() < Duration::from_secs(5) => continue,
            Err(e) => panic!("idle client still open after 5 s: {e}"),
        }
    };
    assert_eq!(n, 0, "EOF");
    assert!(t0.elapsed() >= Duration::from_millis(900));
    // CONFIG SET timeout 0 turns it off for new waits.
    assert_eq!(busy.q("CONFIG SET timeout 0"), common::ok());
    let mut idle2 = srv.connect();
    std::thread::sleep(Duration::from_millis(1500));
    idle2.write_all(b"PING\r\n").unwrap();
    idle2
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let n = idle2.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"+PONG\r\n");
}

#[test]
fn logfile_and_loglevel_are_honoured() {
    let dir = std::env::temp_dir();
    let notice = dir.join(format!("dfly-log-notice-{}.log", std::process::id()));
    let warning = dir.join(format!("dfly-log-warning-{}.log", std::process::id()));
    for (path, level) in [(&notice, "notice"), (&warning, "warning")] {
        let _ = std::fs::remove_file(path);
        let p = path.display().to_string();
        let srv = Server::start(&["--logfile", &p, "--loglevel", level]);
        let mut c = srv.raw_conn();
        assert!(c.q("DEBUG LOG hello-from-the-test").as_bytes().is_some());
        drop(srv);
    }
    let n = std::fs::read_to_string(&notice).unwrap();
    let w = std::fs::read_to_string(&warning).unwrap();
    // Redis's format: "pid:M 25 Nov 2026 01:02:03.456 * Ready to accept connections".
    let ready = n
        .lines()
        .find(|l| l.ends_with("* Ready to accept connections"))
        .unwrap_or_else(|| panic!("no ready line in\n{n}"));
    assert!(ready.contains(":M "), "{ready}");
    assert!(n.contains("# DEBUG LOG: hello-from-the-test"), "{n}");
    assert!(!w.contains("Ready to accept connections"), "{w}");
    assert!(w.contains("# DEBUG LOG: hello-from-the-test"), "{w}");
    let _ = std::fs::remove_file(notice);
    let _ = std::fs::remove_file(warning);
}

#[test]
fn http_admin_console_flag() {
    let get = |srv: &Server, path: &str| {
        let mut s = srv.connect();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.lines().next().unwrap_or_default().to_string()
    };
    let on = Server::start(&[]);
    assert!(get(&on, "/").contains("200"));
    let off = Server::start(&["--http_admin_console=no"]);
    assert!(get(&off, "/").contains("404"));
    assert!(get(&off, "/metrics").contains("200"));
}
