//! Bounded integration tests against a real `redis-server` (and `memcached` when
//! installed). CI installs redis-server; without it these tests fail loudly.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_damselfly-bench");

fn free_port() -> u16 {
    // Below the ephemeral range (see damselfly_bench's sys::free_port for why).
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

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

/// A server started by [`start_server`]; killed on drop. Its stdout/stderr go to `log`, which is
/// removed on drop unless the test is panicking (then its path is printed).
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "[server on port {} output kept at {}]",
                self.port,
                self.log.display()
            );
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Starts `program` with `args(port)` on a fresh port and waits until it is ready. Another test
/// may take the port between [`free_port`] and the child's bind (the child then exits), so a
/// failed start is retried on a new port a few times; the last failure panics with the child's
/// exit status and output.
fn start_server(
    program: &str,
    args: impl Fn(u16) -> Vec<String>,
    probe: &[u8],
    expect: &[u8],
) -> Server {
    let mut last_err = String::new();
    for attempt in 1..=5 {
        let port = free_port();
        let log = std::env::temp_dir().join(format!(
            "dfbench-it-{program}-{}-{port}.log",
            std::process::id()
        ));
        let out = std::fs::File::create(&log).expect("cannot create server log file");
        let err = out.try_clone().expect("cannot dup server log file");
        let child = Command::new(program)
            .args(args(port))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start {program}: {e}"));
        let mut srv = Server { child, port, log };
        match wait_ready(&mut srv, probe, expect) {
            Ok(()) => return srv,
            Err(e) => {
                let _ = srv.child.kill();
                let _ = srv.child.wait();
                last_err = format!(
                    "{program} on port {port} (attempt {attempt}/5): {e}\n--- its output ---\n{}",
                    std::fs::read_to_string(&srv.log).unwrap_or_default()
                );
                eprintln!("{last_err}");
            }
        }
    }
    panic!("{program} did not start: {last_err}");
}

/// Ready = the child is running, answers `probe` with `expect`, and holds the listening socket
/// itself: an answer from another test's server that took the port first does not count.
fn wait_ready(srv: &mut Server, probe: &[u8], expect: &[u8]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut someone_else = false;
    loop {
        if let Ok(Some(st)) = srv.child.try_wait() {
            return Err(format!("exited early with {st}"));
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", srv.port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            if s.write_all(probe).is_ok() {
                let mut buf = [0u8; 64];
                if let Ok(n) = s.read(&mut buf) {
                    if buf[..n].starts_with(expect) {
                        if listens_on(srv.child.id(), srv.port) != Some(false) {
                            return Ok(());
                        }
                        someone_else = true;
                    }
                }
            }
        }
        if Instant::now() > deadline {
            let who = if someone_else {
                " (the port was answered by another process)"
            } else {
                ""
            };
            return Err(format!("not ready within 10 s{who}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Does process `pid` hold the socket listening on loopback `port`? None where `/proc` cannot
/// tell (not Linux). Copy of `listens_on` in crates/server/tests/common/mod.rs.
fn listens_on(pid: u32, port: u16) -> Option<bool> {
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

fn start_redis() -> (Server, u16) {
    assert!(
        on_path("redis-server"),
        "redis-server is not on PATH: install it (apt-get install redis-server) to run these tests"
    );
    let srv = start_server(
        "redis-server",
        |port| {
            let port = port.to_string();
            ["--port", &port, "--bind", "127.0.0.1", "--save", ""]
                .into_iter()
                .chain(["--appendonly", "no"])
                .map(String::from)
                .collect()
        },
        b"PING\r\n",
        b"+PONG",
    );
    let port = srv.port;
    (srv, port)
}

fn bench(port: u16, extra: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(["-s", "127.0.0.1", "-p", &port.to_string()])
        .args(["-t", "1", "-c", "2", "-n", "200", "--key-maximum", "500"])
        .args(extra)
        .output()
        .expect("failed to run damselfly-bench");
    assert!(
        out.status.success(),
        "damselfly-bench {extra:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Value of the Ops/sec column of the row starting with `row`.
fn ops_of(stdout: &str, row: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("no '{row}' row in output:\n{stdout}"));
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("bad row: {line}"))
}

fn assert_memtier_table(stdout: &str) {
    for needle in [
        "ALL STATS",
        "Type",
        "Ops/sec",
        "Hits/sec",
        "Misses/sec",
        "Avg. Latency",
        "p50 Latency",
        "p99 Latency",
        "p99.9 Latency",
        "KB/sec",
        "Sets",
        "Gets",
        "Totals",
    ] {
        assert!(stdout.contains(needle), "missing '{needle}' in:\n{stdout}");
    }
    assert!(ops_of(stdout, "Totals") > 0.0, "zero throughput:\n{stdout}");
}

#[test]
fn write_read_pipelined_against_redis() {
    let (_srv, port) = start_redis();
    let tmp = std::env::temp_dir().join(format!("dfbench-it-{}.json", std::process::id()));

    // Write-only, with JSON output.
    let out = bench(
        port,
        &[
            "--ratio",
            "1:0",
            "--key-pattern",
            "S:S",
            "--hide-histogram",
            "--json-out-file",
            tmp.to_str().unwrap(),
        ],
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert_memtier_table(&s);
    assert!(ops_of(&s, "Sets") > 0.0);
    assert_eq!(ops_of(&s, "Gets"), 0.0);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tmp).unwrap()).unwrap();
    assert_eq!(json["ALL STATS"]["Sets"]["Count"], 400);
    assert!(json["ALL STATS"]["Totals"]["Ops/sec"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_file(&tmp);

    // Read-only after the sequential fill above: every GET of keys 0..199 hits.
    let out = bench(
        port,
        &[
            "--ratio",
            "0:1",
            "--key-pattern",
            "S:S",
            "--key-maximum",
            "199",
        ],
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert_memtier_table(&s);
    assert!(s.contains("Request Latency Distribution"));
    let gets = s.lines().find(|l| l.starts_with("Gets")).unwrap();
    let cols: Vec<&str> = gets.split_whitespace().collect();
    assert!(cols[2].parse::<f64>().unwrap() > 0.0, "no hits: {gets}");
    assert_eq!(cols[3].parse::<f64>().unwrap(), 0.0, "misses: {gets}");

    // Pipelined mixed run and RESP3.
    let out = bench(
        port,
        &["--pipeline", "10", "--ratio", "1:1", "--hide-histogram"],
    );
    assert_memtier_table(&String::from_utf8_lossy(&out.stdout));
    let out = bench(port, &["--protocol", "resp3", "--hide-histogram"]);
    assert_memtier_table(&String::from_utf8_lossy(&out.stdout));

    // Command templates: MSET batches and SET+EXPIRE pairs.
    let out = bench(
        port,
        &[
            "--command",
            "MSET __key__ __data__",
            "--batch",
            "50",
            "-n",
            "5",
            "--hide-histogram",
        ],
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(ops_of(&s, "Mset") > 0.0, "{s}");
    let out = bench(
        port,
        &[
            "--command",
            "SET __key__ __data__;EXPIRE __key__ 100",
            "--pipeline",
            "20",
            "--hide-histogram",
        ],
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(ops_of(&s, "Set+Expire") > 0.0, "{s}");
    assert!(!s.contains("WARNING"), "{s}");

    // A time-bounded run stops on time.
    let t0 = Instant::now();
    let out = one_second_run(port, &[]);
    assert!(out.status.success());
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_memtier_table(&String::from_utf8_lossy(&out.stdout));
}

/// A `--test-time 1` run of two connections over 100 keys.
fn one_second_run(port: u16, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args([
            "-p",
            &port.to_string(),
            "-t",
            "1",
            "-c",
            "2",
            "--test-time",
            "1",
        ])
        .args(["--hide-histogram", "--key-maximum", "100"])
        .args(extra)
        .output()
        .unwrap()
}

/// `--rate-limiting` grants memtier's budget per interval (here 2 requests every 20 ms per
/// connection), so however fast the server, a run cannot send more than the intervals that
/// elapsed allow; `--eager-writes` (write at once instead of at the next poll) still runs.
#[test]
fn rate_limiting_caps_requests_and_eager_writes_run() {
    let (_srv, port) = start_redis();
    let json = std::env::temp_dir().join(format!("dfbench-rate-{}.json", std::process::id()));
    let json_s = json.to_string_lossy().to_string();
    let t0 = Instant::now();
    let out = one_second_run(
        port,
        &["--rate-limiting", "100", "--json-out-file", &json_s],
    );
    let elapsed_ms = t0.elapsed().as_millis() as u64;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let count = v["ALL STATS"]["Totals"]["Count"].as_u64().unwrap();
    // 2 connections x (the first budget + one budget per 20 ms interval that elapsed).
    let most = 2 * (2 + 2 * (elapsed_ms / 20 + 1));
    assert!(
        count > 0 && count <= most,
        "{count} requests, at most {most} allowed"
    );

    let out = bench(
        port,
        &["--pipeline", "10", "--eager-writes", "--hide-histogram"],
    );
    assert_memtier_table(&String::from_utf8_lossy(&out.stdout));
    let out = Command::new(BIN)
        .args(["-p", &port.to_string(), "--rate-limiting", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "--rate-limiting 0 was accepted");
}

#[test]
fn connection_refused_is_an_error_not_a_hang() {
    let port = free_port();
    let out = Command::new(BIN)
        .args(["-p", &port.to_string(), "-t", "1", "-c", "1", "-n", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("connect"));
}

#[test]
fn memcache_text_against_memcached() {
    assert!(
        on_path("memcached"),
        "memcached is not installed (scripts/test.sh installs it; or apt-get install memcached)"
    );
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let srv = start_server(
        "memcached",
        |port| {
            let mut args: Vec<String> = ["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1"]
                .into_iter()
                .map(String::from)
                .collect();
            if root {
                args.extend(["-u".into(), "root".into()]);
            }
            args
        },
        b"version\r\n",
        b"VERSION",
    );
    let port = srv.port;
    let out = bench(
        port,
        &[
            "--protocol",
            "memcache_text",
            "--ratio",
            "1:1",
            "--hide-histogram",
        ],
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert_memtier_table(&s);
    assert!(ops_of(&s, "Gets") > 0.0);

    // Pipelined multi-get (`--batch 5`: `get k1 .. k5`) after filling keys 1..=100: every key
    // hits, and hits count keys (5 per request), not requests.
    let range = ["--key-minimum", "1", "--key-maximum", "100"];
    let mc = ["--protocol", "memcache_text", "--hide-histogram"];
    let fill = ["--ratio", "1:0", "-n", "allkeys", "--key-pattern", "P:P"];
    bench(port, &[&mc[..], &fill[..], &range[..]].concat());
    let json = std::env::temp_dir().join(format!("dfbench-mget-{}.json", std::process::id()));
    let json_s = json.to_string_lossy().to_string();
    let mget = [
        "--ratio",
        "0:1",
        "--batch",
        "5",
        "--pipeline",
        "4",
        "-n",
        "50",
        "--json-out-file",
        &json_s,
    ];
    let out = bench(port, &[&mc[..], &mget[..], &range[..]].concat());
    assert_memtier_table(&String::from_utf8_lossy(&out.stdout));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let gets = &v["ALL STATS"]["Gets"];
    assert_eq!(gets["Count"].as_u64(), Some(100), "{gets}");
    let (ops, hits) = (
        gets["Ops/sec"].as_f64().unwrap(),
        gets["Hits/sec"].as_f64().unwrap(),
    );
    assert!((hits / ops - 5.0).abs() < 1e-6, "{gets}");
    assert_eq!(gets["Misses/sec"].as_f64(), Some(0.0), "{gets}");
}

fn png_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "png"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn compare_quick_writes_tables_and_charts() {
    assert!(
        on_path("redis-server"),
        "redis-server is not on PATH: install it (apt-get install redis-server) to run these tests"
    );
    let dir = std::env::temp_dir().join(format!("dfbench-cmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let md = dir.join("compare.md");
    let img = dir.join("img");
    let out = Command::new(BIN)
        .args([
            "compare",
            "--quick",
            "--servers",
            "redis,memcached,damselfly",
        ])
        .args([
            "--scenarios",
            "write,read,read_p10,mc_read,mc_mget,mset_1000,memory,mc_memory",
        ])
        .args(["--damselfly", "/nonexistent/damselfly"])
        // Discovery falls back to $DAMSELFLY_BIN and ./target/release/damselfly: run where
        // neither applies, so damselfly is skipped whichever directory the test starts in.
        .env_remove("DAMSELFLY_BIN")
        .current_dir(&dir)
        .arg("--out")
        .arg(&md)
        .arg("--img")
        .arg(&img)
        .output()
        .expect("failed to run compare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "compare failed: {stderr}");
    assert!(stderr.contains("skip damselfly"), "{stderr}");
    let text = std::fs::read_to_string(&md).expect("no markdown written");
    assert!(text.contains("| server |"), "{text}");
    assert!(text.contains("| redis-server |"), "{text}");
    assert!(text.contains("Memory efficiency"), "{text}");
    if on_path("memcached") {
        assert!(text.contains("### `mc_mget`"), "{text}");
        assert!(
            text.contains("Memory efficiency (memcache protocol)"),
            "{text}"
        );
        assert!(!text.contains(" memcached | failed"), "{text}");
    }
    assert!(!text.contains("| redis-server | failed"), "{text}");
    let pngs = png_files(&img);
    assert!(
        pngs.iter().any(|p| p.ends_with("throughput.png")),
        "{pngs:?}"
    );
    for p in &pngs {
        let bytes = std::fs::read(p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{} is not a PNG", p.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
