//! `damselfly-bench compare`: start every server found (one at a time, on a free
//! loopback port, pinned to its own CPUs), run the seed scenarios with this same
//! binary pinned to other CPUs, and write a markdown report plus PNG charts.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use serde_json::Value;

use crate::chart::{grouped_bars, BarChart};
use crate::opts::{parse_cpu_list, CpuList};
use crate::proto::{self, ReplyKind};
use crate::sys;

/// Side-by-side comparison runner: damselfly vs redis-server (and memcached,
/// valkey-server, keydb-server, dragonfly when installed).
#[derive(Parser, Debug, Clone)]
#[command(name = "damselfly-bench compare")]
pub struct CompareOpts {
    /// Markdown file for the result tables.
    #[arg(long, default_value = "docs/benchmarks-compare.md")]
    pub out: PathBuf,

    /// Directory for the PNG charts.
    #[arg(long, default_value = "docs/img")]
    pub img: PathBuf,

    /// Tiny request counts and key ranges (CI / smoke test; numbers are meaningless).
    #[arg(long)]
    pub quick: bool,

    /// Path of the damselfly server binary (default: $DAMSELFLY_BIN, then
    /// ./target/release/damselfly, then `damselfly` on PATH).
    #[arg(long)]
    pub damselfly: Option<PathBuf>,

    /// Scenarios to run, comma separated (default: all). Names: write, read, read_p10,
    /// read_p30, mix_1_15, mc_write, mc_read, mset_1000, mset_10000, set_expire_1000,
    /// set_expire_10000, kv_sweep, memory.
    #[arg(long, value_delimiter = ',')]
    pub scenarios: Vec<String>,

    /// Servers to try, comma separated (default: all). Names: damselfly, redis, valkey,
    /// keydb, dragonfly, memcached.
    #[arg(long, value_delimiter = ',')]
    pub servers: Vec<String>,

    /// CPUs for the server (default: the upper half of the CPUs, "1" on 2 CPUs).
    #[arg(long, value_parser = parse_cpu_list)]
    pub server_cpus: Option<CpuList>,

    /// CPUs for the load generator (default: the lower half, "0" on 2 CPUs).
    #[arg(long, value_parser = parse_cpu_list)]
    pub load_cpus: Option<CpuList>,

    /// Seconds per throughput scenario (ignored with --quick).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,

    /// Seconds per cell of the key-size x value-size sweep (ignored with --quick).
    #[arg(long, default_value_t = 2)]
    pub sweep_duration: u64,

    /// Keys in the key range / prefilled for the read scenarios.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,

    /// Keys created with DEBUG POPULATE for the memory scenario.
    #[arg(long, default_value_t = 1_000_000)]
    pub memory_keys: u64,

    /// Load-generator threads (default: number of load CPUs).
    #[arg(long)]
    pub threads: Option<usize>,

    /// Keep the per-run JSON files and server logs in this directory.
    #[arg(long)]
    pub keep_json: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Damselfly,
    Redis,
    Valkey,
    KeyDb,
    Dragonfly,
    Memcached,
}

impl Kind {
    fn all() -> [Kind; 6] {
        [
            Kind::Damselfly,
            Kind::Redis,
            Kind::Valkey,
            Kind::KeyDb,
            Kind::Dragonfly,
            Kind::Memcached,
        ]
    }
    fn short(self) -> &'static str {
        match self {
            Kind::Damselfly => "damselfly",
            Kind::Redis => "redis",
            Kind::Valkey => "valkey",
            Kind::KeyDb => "keydb",
            Kind::Dragonfly => "dragonfly",
            Kind::Memcached => "memcached",
        }
    }
    fn display(self) -> &'static str {
        match self {
            Kind::Damselfly => "damselfly",
            Kind::Redis => "redis-server",
            Kind::Valkey => "valkey-server",
            Kind::KeyDb => "keydb-server",
            Kind::Dragonfly => "dragonfly",
            Kind::Memcached => "memcached",
        }
    }
    fn exe(self) -> &'static str {
        match self {
            Kind::Damselfly => "damselfly",
            Kind::Redis => "redis-server",
            Kind::Valkey => "valkey-server",
            Kind::KeyDb => "keydb-server",
            Kind::Dragonfly => "dragonfly",
            Kind::Memcached => "memcached",
        }
    }
    fn speaks_redis(self) -> bool {
        self != Kind::Memcached
    }
    /// Damselfly and Dragonfly serve memcache on `--memcached_port`.
    fn speaks_memcache(self) -> bool {
        matches!(self, Kind::Memcached | Kind::Damselfly | Kind::Dragonfly)
    }
}

#[derive(Clone, Debug)]
struct ServerSpec {
    kind: Kind,
    bin: PathBuf,
    version: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Redis,
    Memcache,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Core,
    Batch,
    Sweep,
}

#[derive(Clone, Debug)]
struct Scenario {
    id: String,
    /// Category label in charts.
    short: String,
    title: String,
    group: Group,
    proto: Proto,
    fill: Option<Vec<String>>,
    load: Vec<String>,
    /// Keys (units) per request: 1000 for MSET of 1000 keys.
    units_per_op: f64,
    unit: &'static str,
}

#[derive(Clone, Debug, Default)]
struct Measure {
    ops_sec: f64,
    units_sec: f64,
    hits_sec: f64,
    misses_sec: f64,
    avg_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    cpu_ns_per_unit: Option<f64>,
    peak_rss: Option<u64>,
    errors: u64,
}

#[derive(Clone, Debug)]
struct MemMeasure {
    keys: u64,
    rss_before: u64,
    rss_after: u64,
    populate_secs: f64,
}

impl MemMeasure {
    fn bytes_per_key(&self) -> f64 {
        self.rss_after.saturating_sub(self.rss_before) as f64 / self.keys.max(1) as f64
    }
}

type Outcome<T> = Result<T, String>;

/// (value size, per-server outcome) of the memory scenario.
type MemRow = (u64, Vec<(Kind, Outcome<MemMeasure>)>);

fn a(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Key prefix, minimum and maximum so that every key is exactly `size` bytes.
fn sized_keys(size: usize, wanted: u64) -> (String, u64, u64) {
    let size = size.max(2);
    let digits = (size - 1).clamp(1, 9);
    let mut max_digits = 1usize;
    while max_digits < digits && 10u64.pow(max_digits as u32) < wanted * 10 {
        max_digits += 1;
    }
    let digits = digits.min(max_digits.max(1));
    let prefix = format!("k{}", "x".repeat(size - 1 - digits));
    let min = if digits == 1 {
        0
    } else {
        10u64.pow(digits as u32 - 1)
    };
    let max = 10u64.pow(digits as u32) - 1;
    (prefix, min, max)
}

fn scenarios(c: &CompareOpts) -> Vec<Scenario> {
    let q = c.quick;
    let keys = if q { 1000 } else { c.keys.max(1) };
    let time = |n_quick: u64, secs: u64| -> Vec<String> {
        if q {
            a(&["-n", &n_quick.to_string()])
        } else {
            a(&["--test-time", &secs.to_string()])
        }
    };
    let d = c.duration;
    let range = a(&["--key-minimum", "1", "--key-maximum", &keys.to_string()]);
    let fill = |size: u64, mc: bool| -> Vec<String> {
        let mut v = a(&[
            "--ratio",
            "1:0",
            "-n",
            "allkeys",
            "--key-pattern",
            "P:P",
            "--pipeline",
            "64",
            "-c",
            "4",
            "-d",
            &size.to_string(),
        ]);
        v.extend(range.clone());
        if mc {
            v.extend(a(&["--protocol", "memcache_text"]));
        }
        v
    };
    let mut out = Vec::new();
    let mut core = |id: &str, title: &str, proto: Proto, filled: Option<u64>, extra: &[&str]| {
        let mut load = a(extra);
        load.extend(range.clone());
        load.extend(time(200, d));
        if proto == Proto::Memcache {
            load.extend(a(&["--protocol", "memcache_text"]));
        }
        out.push(Scenario {
            id: id.into(),
            short: id.into(),
            title: title.into(),
            group: Group::Core,
            proto,
            fill: filled.map(|s| fill(s, proto == Proto::Memcache)),
            load,
            units_per_op: 1.0,
            unit: "ops",
        });
    };
    core(
        "write",
        "write-only: SET, 32 B values, random keys, 50 clients/thread",
        Proto::Redis,
        None,
        &[
            "--ratio",
            "1:0",
            "-d",
            "32",
            "-c",
            "50",
            "--key-pattern",
            "R:R",
        ],
    );
    core(
        "read",
        "read-only after fill (all hits): GET, 50 clients/thread",
        Proto::Redis,
        Some(32),
        &[
            "--ratio",
            "0:1",
            "-d",
            "32",
            "-c",
            "50",
            "--key-pattern",
            "R:R",
        ],
    );
    core(
        "read_p10",
        "pipelined read --pipeline=10 after fill, 50 clients/thread",
        Proto::Redis,
        Some(32),
        &["--ratio", "0:1", "-d", "32", "-c", "50", "--pipeline", "10"],
    );
    core(
        "read_p30",
        "pipelined read --pipeline=30 after fill, 50 clients/thread",
        Proto::Redis,
        Some(32),
        &["--ratio", "0:1", "-d", "32", "-c", "50", "--pipeline", "30"],
    );
    core(
        "mix_1_15",
        "centminmod mix: --ratio=1:15 -d 384 -c 100 after fill",
        Proto::Redis,
        Some(384),
        &["--ratio", "1:15", "-d", "384", "-c", "100"],
    );
    core(
        "mc_write",
        "memcache text protocol, write-only set, 32 B values, 50 clients/thread",
        Proto::Memcache,
        None,
        &["--ratio", "1:0", "-d", "32", "-c", "50"],
    );
    core(
        "mc_read",
        "memcache text protocol, read-only get after fill, 50 clients/thread",
        Proto::Memcache,
        Some(32),
        &["--ratio", "0:1", "-d", "32", "-c", "50"],
    );
    for (batch, clients) in [(1000u64, "8"), (10000u64, "2")] {
        let mut load = a(&[
            "--command",
            "MSET __key__ __data__",
            "--batch",
            &batch.to_string(),
            "-c",
            clients,
            "-d",
            "32",
        ]);
        load.extend(range.clone());
        load.extend(time(if batch > 1000 { 2 } else { 5 }, d));
        out.push(Scenario {
            id: format!("mset_{batch}"),
            short: format!("MSET {batch}"),
            title: format!(
                "multi_set: MSET of {batch} keys (32 B values), {clients} clients/thread"
            ),
            group: Group::Batch,
            proto: Proto::Redis,
            fill: None,
            load,
            units_per_op: batch as f64,
            unit: "keys",
        });
        let mut load = a(&[
            "--command",
            "SET __key__ __data__;EXPIRE __key__ 3600",
            "--pipeline",
            &batch.to_string(),
            "-c",
            clients,
            "-d",
            "32",
        ]);
        load.extend(range.clone());
        load.extend(time(if batch > 1000 { 10000 } else { 5000 }, d));
        out.push(Scenario {
            id: format!("set_expire_{batch}"),
            short: format!("SET+EXPIRE {batch}"),
            title: format!(
                "pipelined SET + EXPIRE of the same key, {batch} pairs in flight per connection, {clients} clients/thread"
            ),
            group: Group::Batch,
            proto: Proto::Redis,
            fill: None,
            load,
            units_per_op: 1.0,
            unit: "keys",
        });
    }
    let sizes: &[usize] = if q { &[8, 128] } else { &[8, 16, 32, 64, 128] };
    let batch = if q { 100 } else { 1000 };
    for &ks in sizes {
        for &vs in sizes {
            let (prefix, kmin, kmax) = sized_keys(ks, keys);
            let mut load = a(&[
                "--command",
                "MSET __key__ __data__",
                "--batch",
                &batch.to_string(),
                "-c",
                "4",
                "-d",
                &vs.to_string(),
                "--key-prefix",
                &prefix,
                "--key-minimum",
                &kmin.to_string(),
                "--key-maximum",
                &kmax.to_string(),
            ]);
            load.extend(time(3, c.sweep_duration));
            out.push(Scenario {
                id: format!("kv_k{ks}_v{vs}"),
                short: format!("{ks}/{vs}"),
                title: format!("MSET batch {batch}: key {ks} B, value {vs} B"),
                group: Group::Sweep,
                proto: Proto::Redis,
                fill: None,
                load,
                units_per_op: batch as f64,
                unit: "keys",
            });
        }
    }
    out
}

fn scenario_selected(c: &CompareOpts, s: &Scenario) -> bool {
    if c.scenarios.is_empty() {
        return true;
    }
    c.scenarios
        .iter()
        .any(|n| n == &s.id || (n == "kv_sweep" && s.group == Group::Sweep))
}

fn memory_selected(c: &CompareOpts) -> bool {
    c.scenarios.is_empty() || c.scenarios.iter().any(|n| n == "memory")
}

fn run_with_timeout(mut cmd: Command, secs: u64) -> Option<String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut s = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut s);
    }
    if s.trim().is_empty() {
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
    }
    Some(s.lines().next().unwrap_or("").trim().to_string())
}

fn discover(c: &CompareOpts, notes: &mut Vec<String>) -> Vec<ServerSpec> {
    let wanted = |k: Kind| c.servers.is_empty() || c.servers.iter().any(|s| s == k.short());
    let mut out = Vec::new();
    for k in Kind::all() {
        if !wanted(k) {
            continue;
        }
        let bin = if k == Kind::Damselfly {
            let candidates: Vec<PathBuf> = [
                c.damselfly.clone(),
                std::env::var_os("DAMSELFLY_BIN").map(PathBuf::from),
                Some(PathBuf::from("target/release/damselfly")),
            ]
            .into_iter()
            .flatten()
            .collect();
            // Absolute path: servers are spawned from other working directories.
            match candidates.iter().find(|p| p.is_file()) {
                Some(p) => Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
                None => sys::which(k.exe()),
            }
        } else {
            sys::which(k.exe())
        };
        let Some(bin) = bin else {
            let msg = if k == Kind::Damselfly {
                "skip damselfly: binary not found (give --damselfly PATH or DAMSELFLY_BIN, or build target/release/damselfly)".to_string()
            } else {
                format!("skip {}: `{}` not found on PATH", k.display(), k.exe())
            };
            eprintln!("{msg}");
            notes.push(msg);
            continue;
        };
        let version = match k {
            Kind::Damselfly => String::new(),
            Kind::Memcached => {
                let mut cmd = Command::new(&bin);
                cmd.arg("-V");
                run_with_timeout(cmd, 5).unwrap_or_default()
            }
            _ => {
                let mut cmd = Command::new(&bin);
                cmd.arg("--version");
                run_with_timeout(cmd, 5).unwrap_or_default()
            }
        };
        eprintln!("found {} at {} {}", k.display(), bin.display(), version);
        out.push(ServerSpec {
            kind: k,
            bin,
            version,
        });
    }
    out
}

fn redis_major(version: &str) -> Option<u32> {
    let i = version.find("v=")?;
    version[i + 2..].split('.').next()?.parse().ok()
}

struct Running {
    child: Child,
    port: u16,
    mc_port: Option<u16>,
    log: PathBuf,
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stop(&mut self) {
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn log_tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

fn start_server(
    spec: &ServerSpec,
    need_mc: bool,
    cpus: &[usize],
    workdir: &Path,
    debug_cmd: bool,
) -> Outcome<Running> {
    let port = sys::free_port().ok_or("no free port")?;
    let mut mc_port = None;
    let threads = cpus.len().max(1).to_string();
    let mut args: Vec<String> = Vec::new();
    match spec.kind {
        Kind::Damselfly | Kind::Dragonfly => {
            args.extend(a(&[
                "--port",
                &port.to_string(),
                "--proactor_threads",
                &threads,
            ]));
            if spec.kind == Kind::Dragonfly {
                args.extend(a(&["--bind", "127.0.0.1", "--dbfilename", ""]));
            }
            if need_mc {
                let m = sys::free_port().ok_or("no free port")?;
                args.extend(a(&["--memcached_port", &m.to_string()]));
                mc_port = Some(m);
            }
        }
        Kind::Redis | Kind::Valkey | Kind::KeyDb => {
            args.extend(a(&[
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--dir",
                &workdir.to_string_lossy(),
            ]));
            if debug_cmd && redis_major(&spec.version).unwrap_or(7) >= 7 && spec.kind != Kind::KeyDb
            {
                args.extend(a(&["--enable-debug-command", "yes"]));
            }
            if spec.kind == Kind::KeyDb {
                args.extend(a(&["--server-threads", &threads]));
            }
        }
        Kind::Memcached => {
            args.extend(a(&[
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-l",
                "127.0.0.1",
                "-t",
                &threads,
                "-m",
                "8192",
                "-c",
                "4096",
            ]));
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                args.extend(a(&["-u", "root"]));
            }
            mc_port = Some(port);
        }
    }
    let log = workdir.join(format!("{}-{port}.log", spec.kind.short()));
    let logf = std::fs::File::create(&log).map_err(|e| format!("log file: {e}"))?;
    let logf2 = logf.try_clone().map_err(|e| format!("log file: {e}"))?;
    let mut cmd = Command::new(&spec.bin);
    cmd.args(&args)
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stdout(logf)
        .stderr(logf2);
    let cpus_owned = cpus.to_vec();
    // SAFETY: the closure only calls sched_setaffinity (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if !cpus_owned.is_empty() {
                let _ = sys::set_affinity(0, &cpus_owned);
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("start {}: {e}", spec.bin.display()))?;
    let mut r = Running {
        child,
        port,
        mc_port,
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut redis_ready_at: Option<Instant> = None;
    loop {
        if let Ok(Some(st)) = r.child.try_wait() {
            return Err(format!(
                "{} exited at startup ({st}): {}",
                spec.kind.display(),
                log_tail(&r.log)
            ));
        }
        let ok_redis = !spec.kind.speaks_redis()
            || matches!(resp_command(port, &["PING"], 2), Ok((ReplyKind::Value, _)));
        let ok_mc = match r.mc_port {
            Some(m) => mc_ping(m).is_ok(),
            None => true,
        };
        if ok_redis && ok_mc {
            return Ok(r);
        }
        if ok_redis && spec.kind.speaks_redis() {
            let t = *redis_ready_at.get_or_insert_with(Instant::now);
            if t.elapsed() > Duration::from_secs(3) {
                r.stop();
                return Err(format!(
                    "{} serves RESP but nothing answers memcache on --memcached_port",
                    spec.kind.display()
                ));
            }
        }
        if Instant::now() > deadline {
            r.stop();
            return Err(format!(
                "{} did not answer within 15 s: {}",
                spec.kind.display(),
                log_tail(&r.log)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Blocking one-shot RESP command (admin path: PING, DEBUG POPULATE, FLUSHALL).
fn resp_command(port: u16, args: &[&str], timeout_s: u64) -> Outcome<(ReplyKind, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    let to = Some(Duration::from_secs(timeout_s));
    s.set_read_timeout(to).map_err(|e| e.to_string())?;
    s.set_write_timeout(to).map_err(|e| e.to_string())?;
    let refs: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    let mut out = Vec::new();
    proto::encode_command(&mut out, &refs);
    s.write_all(&out).map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let n = s.read(&mut tmp).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some((used, kind)) = proto::parse_resp(&buf).map_err(|e| e.to_string())? {
            let text = String::from_utf8_lossy(&buf[..used]).trim().to_string();
            return Ok((kind, text));
        }
    }
}

fn mc_ping(port: u16) -> Outcome<()> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"version\r\n").map_err(|e| e.to_string())?;
    let mut tmp = [0u8; 256];
    let n = s.read(&mut tmp).map_err(|e| e.to_string())?;
    if tmp[..n].starts_with(b"VERSION") {
        Ok(())
    } else {
        Err("unexpected reply to version".into())
    }
}

struct Ctx {
    exe: PathBuf,
    server_cpus: Vec<usize>,
    load_cpus: Vec<usize>,
    threads: usize,
    workdir: PathBuf,
    seq: u64,
}

fn run_load(ctx: &mut Ctx, port: u16, args: &[String]) -> Outcome<Value> {
    ctx.seq += 1;
    let json = ctx.workdir.join(format!("run-{}.json", ctx.seq));
    let load_cpus: Vec<String> = ctx.load_cpus.iter().map(|c| c.to_string()).collect();
    let mut cmd = Command::new(&ctx.exe);
    cmd.args(["-s", "127.0.0.1", "-p", &port.to_string()])
        .args(["-t", &ctx.threads.to_string()])
        .args(args)
        .args(["--hide-histogram", "--hide-progress"])
        .args(["--json-out-file", &json.to_string_lossy()]);
    if !load_cpus.is_empty() {
        cmd.args(["--cpus", &load_cpus.join(",")]);
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("spawn load generator: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "load generator failed: {}",
            err.lines().last().unwrap_or("").trim()
        ));
    }
    let body =
        std::fs::read_to_string(&json).map_err(|e| format!("read {}: {e}", json.display()))?;
    serde_json::from_str(&body).map_err(|e| format!("parse {}: {e}", json.display()))
}

fn jf(v: &Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        match cur.get(*p) {
            Some(x) => cur = x,
            None => return 0.0,
        }
    }
    cur.as_f64().unwrap_or(0.0)
}

fn measure(ctx: &mut Ctx, spec: &ServerSpec, sc: &Scenario) -> Outcome<Measure> {
    let need_mc = sc.proto == Proto::Memcache;
    let mut srv = start_server(spec, need_mc, &ctx.server_cpus, &ctx.workdir.clone(), false)?;
    let port = if need_mc {
        srv.mc_port.ok_or("server has no memcache port")?
    } else {
        srv.port
    };
    let result = (|| -> Outcome<Measure> {
        if let Some(fill) = &sc.fill {
            run_load(ctx, port, fill).map_err(|e| format!("fill: {e}"))?;
        }
        let cpu0 = sys::process_cpu_ns_precise(srv.pid());
        let v = run_load(ctx, port, &sc.load)?;
        let cpu1 = sys::process_cpu_ns_precise(srv.pid());
        let peak = sys::peak_rss_bytes(srv.pid());
        let t = |k: &str| jf(&v, &["ALL STATS", "Totals", k]);
        let tp = |k: &str| jf(&v, &["ALL STATS", "Totals", "Percentile Latencies", k]);
        let ops = t("Count");
        let units = ops * sc.units_per_op;
        let cpu = match (cpu0, cpu1) {
            (Some(a), Some(b)) if units > 0.0 => Some((b.saturating_sub(a)) as f64 / units),
            _ => None,
        };
        let errors = t("Errors") as u64;
        if ops > 0.0 && errors as f64 >= ops {
            let first = v
                .get("First error reply")
                .and_then(Value::as_str)
                .unwrap_or("?");
            return Err(format!("every request got an error reply: {first}"));
        }
        Ok(Measure {
            ops_sec: t("Ops/sec"),
            units_sec: t("Ops/sec") * sc.units_per_op,
            hits_sec: t("Hits/sec"),
            misses_sec: t("Misses/sec"),
            avg_ms: t("Average Latency"),
            p50_ms: tp("p50.00"),
            p99_ms: tp("p99.00"),
            p999_ms: tp("p99.90"),
            cpu_ns_per_unit: cpu,
            peak_rss: peak,
            errors,
        })
    })();
    srv.stop();
    result
}

fn measure_memory(ctx: &Ctx, spec: &ServerSpec, keys: u64, value_size: u64) -> Outcome<MemMeasure> {
    let mut srv = start_server(spec, false, &ctx.server_cpus, &ctx.workdir, true)?;
    let result = (|| -> Outcome<MemMeasure> {
        std::thread::sleep(Duration::from_millis(200));
        let rss_before = sys::rss_bytes(srv.pid()).ok_or("cannot read RSS")?;
        let t0 = Instant::now();
        let (kind, text) = resp_command(
            srv.port,
            &[
                "DEBUG",
                "POPULATE",
                &keys.to_string(),
                "key",
                &value_size.to_string(),
            ],
            600,
        )?;
        let populate_secs = t0.elapsed().as_secs_f64();
        if kind == ReplyKind::Error {
            return Err(format!("DEBUG POPULATE: {text}"));
        }
        let (_, dbsize) = resp_command(srv.port, &["DBSIZE"], 30)?;
        if !dbsize.contains(&keys.to_string()) {
            eprintln!("  note: DBSIZE after populate = {dbsize}");
        }
        std::thread::sleep(Duration::from_millis(300));
        let rss_after = sys::rss_bytes(srv.pid()).ok_or("cannot read RSS")?;
        Ok(MemMeasure {
            keys,
            rss_before,
            rss_after,
            populate_secs,
        })
    })();
    srv.stop();
    result
}

fn now_utc_string() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':').map(|x| x.1.trim().to_string()))
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        let n = v.round() as u64;
        let s = n.to_string();
        // Group digits by thousands from the right.
        let mut out: Vec<char> = Vec::new();
        for (i, ch) in s.chars().rev().enumerate() {
            if i > 0 && i % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        out.into_iter().rev().collect()
    } else {
        format!("{v:.2}")
    }
}

fn ratio(v: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 => format!("{:.2}x", v / b),
        _ => "n/a".into(),
    }
}

/// Path of `target` as seen from the directory holding `from_file` (for markdown links).
fn rel_path(from_file: &Path, target: &Path) -> String {
    let abs = |p: &Path| -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        }
    };
    let from_dir = abs(from_file)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let t = abs(target);
    let fc: Vec<_> = from_dir.components().collect();
    let tc: Vec<_> = t.components().collect();
    let common = fc.iter().zip(&tc).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = Vec::new();
    for _ in common..fc.len() {
        parts.push("..".into());
    }
    for c in &tc[common..] {
        parts.push(c.as_os_str().to_string_lossy().to_string());
    }
    parts.join("/")
}

pub fn run_compare(c: &CompareOpts) -> Result<(), String> {
    let ncpu = sys::available_cpus();
    let (def_server, def_load): (Vec<usize>, Vec<usize>) = if ncpu >= 2 {
        let half = ncpu / 2;
        ((half..ncpu).collect(), (0..half).collect())
    } else {
        (Vec::new(), Vec::new())
    };
    let server_cpus = c.server_cpus.clone().map(|x| x.0).unwrap_or(def_server);
    let load_cpus = c.load_cpus.clone().map(|x| x.0).unwrap_or(def_load);
    let threads = c.threads.unwrap_or(load_cpus.len().max(1));
    let workdir = match &c.keep_json {
        Some(p) => p.clone(),
        None => std::env::temp_dir().join(format!("damselfly-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&workdir).map_err(|e| format!("{}: {e}", workdir.display()))?;
    std::fs::create_dir_all(&c.img).map_err(|e| format!("{}: {e}", c.img.display()))?;
    if let Some(parent) = c.out.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut notes = Vec::new();
    let servers = discover(c, &mut notes);
    if servers.is_empty() {
        return Err("no server found to benchmark (need at least redis-server)".into());
    }
    let mut ctx = Ctx {
        exe,
        server_cpus: server_cpus.clone(),
        load_cpus: load_cpus.clone(),
        threads,
        workdir: workdir.clone(),
        seq: 0,
    };
    let all = scenarios(c);
    let selected: Vec<&Scenario> = all.iter().filter(|s| scenario_selected(c, s)).collect();

    // scenario id -> server display name -> outcome
    let mut results: BTreeMap<String, Vec<(Kind, Outcome<Measure>)>> = BTreeMap::new();
    for sc in &selected {
        for spec in &servers {
            let ok = match sc.proto {
                Proto::Redis => spec.kind.speaks_redis(),
                Proto::Memcache => spec.kind.speaks_memcache(),
            };
            if !ok {
                continue;
            }
            eprint!("[{}] {} ... ", sc.id, spec.kind.display());
            let _ = std::io::stderr().flush();
            let r = measure(&mut ctx, spec, sc);
            match &r {
                Ok(m) => eprintln!(
                    "{} {}/s, p99 {:.3} ms",
                    fmt_num(m.units_sec),
                    sc.unit,
                    m.p99_ms
                ),
                Err(e) => eprintln!("failed: {e}"),
            }
            results
                .entry(sc.id.clone())
                .or_default()
                .push((spec.kind, r));
        }
    }

    let mut mem: Vec<MemRow> = Vec::new();
    if memory_selected(c) {
        let keys = if c.quick { 10_000 } else { c.memory_keys };
        for vs in [32u64, 1024] {
            let mut row = Vec::new();
            for spec in servers.iter().filter(|s| s.kind.speaks_redis()) {
                eprint!("[memory {vs} B] {} ... ", spec.kind.display());
                let _ = std::io::stderr().flush();
                let r = measure_memory(&ctx, spec, keys, vs);
                match &r {
                    Ok(m) => eprintln!("{:.1} bytes/key", m.bytes_per_key()),
                    Err(e) => eprintln!("failed: {e}"),
                }
                row.push((spec.kind, r));
            }
            mem.push((vs, row));
        }
    }

    // ---- charts ----
    let mut charts: Vec<(String, PathBuf)> = Vec::new();
    let server_kinds: Vec<Kind> = servers.iter().map(|s| s.kind).collect();
    let get = |id: &str, k: Kind| -> Option<Measure> {
        results
            .get(id)
            .and_then(|v| v.iter().find(|(kk, _)| *kk == k))
            .and_then(|(_, r)| r.as_ref().ok().cloned())
    };
    let group_ids = |g: Group| -> Vec<&Scenario> {
        selected.iter().copied().filter(|s| s.group == g).collect()
    };
    let mut chart = |file: &str,
                     title: &str,
                     ydesc: &str,
                     scs: &[&Scenario],
                     f: &dyn Fn(&Measure) -> f64,
                     pcts: bool|
     -> Result<(), String> {
        if scs.is_empty() {
            return Ok(());
        }
        let cats: Vec<String> = scs.iter().map(|s| s.short.clone()).collect();
        let mut series = Vec::new();
        for &k in &server_kinds {
            let vals: Vec<Option<f64>> = scs.iter().map(|s| get(&s.id, k).map(|m| f(&m))).collect();
            if vals.iter().any(Option::is_some) {
                series.push((k.display().to_string(), vals));
            }
        }
        let _ = pcts;
        if series.is_empty() {
            return Ok(());
        }
        let path = c.img.join(file);
        grouped_bars(
            &path,
            &BarChart {
                title,
                y_desc: ydesc,
                categories: &cats,
                series: &series,
            },
        )?;
        charts.push((title.to_string(), path));
        Ok(())
    };
    let core = group_ids(Group::Core);
    chart(
        "throughput.png",
        "Throughput (higher is better)",
        "ops/sec",
        &core,
        &|m| m.ops_sec,
        false,
    )?;
    chart(
        "latency_p50.png",
        "p50 latency (lower is better)",
        "msec",
        &core,
        &|m| m.p50_ms,
        true,
    )?;
    chart(
        "latency_p99.png",
        "p99 latency (lower is better)",
        "msec",
        &core,
        &|m| m.p99_ms,
        true,
    )?;
    chart(
        "cpu_per_op.png",
        "Server CPU per op (lower is better)",
        "ns/op",
        &core,
        &|m| m.cpu_ns_per_unit.unwrap_or(0.0),
        false,
    )?;
    let batch = group_ids(Group::Batch);
    chart(
        "batch.png",
        "MSET vs pipelined SET+EXPIRE (keys/sec)",
        "keys/sec",
        &batch,
        &|m| m.units_sec,
        false,
    )?;
    let sweep = group_ids(Group::Sweep);
    chart(
        "kv_sweep.png",
        "MSET keys/sec by key size / value size (bytes)",
        "keys/sec",
        &sweep,
        &|m| m.units_sec,
        false,
    )?;
    if !mem.is_empty() {
        let cats: Vec<String> = mem.iter().map(|(vs, _)| format!("{vs} B values")).collect();
        let mut series = Vec::new();
        for &k in &server_kinds {
            let vals: Vec<Option<f64>> = mem
                .iter()
                .map(|(_, row)| {
                    row.iter()
                        .find(|(kk, _)| *kk == k)
                        .and_then(|(_, r)| r.as_ref().ok().map(MemMeasure::bytes_per_key))
                })
                .collect();
            if vals.iter().any(Option::is_some) {
                series.push((k.display().to_string(), vals));
            }
        }
        if !series.is_empty() {
            let path = c.img.join("memory.png");
            let title = "RSS per key after DEBUG POPULATE (lower is better)";
            grouped_bars(
                &path,
                &BarChart {
                    title,
                    y_desc: "bytes/key",
                    categories: &cats,
                    series: &series,
                },
            )?;
            charts.push((title.to_string(), path));
        }
    }

    // ---- markdown ----
    let mut md = String::new();
    use std::fmt::Write as _;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let _ = writeln!(md, "# Damselfly side-by-side benchmark\n");
    let _ = writeln!(
        md,
        "Generated by `damselfly-bench {}` on {}.{}\n",
        argv.join(" "),
        now_utc_string(),
        if c.quick {
            " **Quick mode: tiny runs, the numbers are not meaningful.**"
        } else {
            ""
        }
    );
    let fmt_cpus = |v: &[usize]| -> String {
        if v.is_empty() {
            "unpinned".into()
        } else {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    let _ = writeln!(
        md,
        "Host: {ncpu} CPUs ({}). Servers run one at a time on loopback, pinned to CPU {}; the load generator (`damselfly-bench`, {threads} thread(s)) is pinned to CPU {}. Every scenario starts a fresh server process. Ratios (`x`) are relative to redis-server measured in the same run (memcached for the memcache-protocol scenarios), because absolute numbers on shared machines are noisy. Server CPU is the on-CPU time of the server's threads (`/proc/PID/task/*/schedstat`, falling back to utime+stime from `/proc/PID/stat`) during the measured phase divided by the operations (keys for batch scenarios); peak RSS is `VmHWM`.\n",
        cpu_model(),
        fmt_cpus(&server_cpus),
        fmt_cpus(&load_cpus),
    );
    let _ = writeln!(md, "Servers:\n");
    for s in &servers {
        let _ = writeln!(
            md,
            "- {} — `{}`{}",
            s.kind.display(),
            s.bin.display(),
            if s.version.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.version)
            }
        );
    }
    for n in &notes {
        let _ = writeln!(md, "- {n}");
    }
    let _ = writeln!(md);
    if !charts.is_empty() {
        let _ = writeln!(md, "## Charts\n");
        for (title, path) in &charts {
            let _ = writeln!(md, "![{title}]({})\n", rel_path(&c.out, path));
        }
    }
    let baseline = |sc: &Scenario| -> Kind {
        match sc.proto {
            Proto::Redis => Kind::Redis,
            Proto::Memcache => Kind::Memcached,
        }
    };
    let sections = [
        (Group::Core, "Throughput and latency"),
        (Group::Batch, "seed-004: multi_set vs pipelined SET+EXPIRE"),
        (Group::Sweep, "seed-004: key size x value size sweep (MSET)"),
    ];
    for (g, gtitle) in sections {
        let scs: Vec<&Scenario> = selected.iter().copied().filter(|s| s.group == g).collect();
        if scs.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## {gtitle}\n");
        if g == Group::Sweep {
            // One compact table: rows = key/value sizes, columns = servers.
            let _ = write!(md, "| key B | value B |");
            for k in &server_kinds {
                if k.speaks_redis() {
                    let _ = write!(md, " {} keys/s | p99 ms | x redis |", k.display());
                }
            }
            let _ = writeln!(md);
            let _ = write!(md, "|---:|---:|");
            for k in &server_kinds {
                if k.speaks_redis() {
                    let _ = write!(md, "---:|---:|---:|");
                }
            }
            let _ = writeln!(md);
            for sc in &scs {
                let (ks, vs) = sc.short.split_once('/').unwrap_or(("?", "?"));
                let _ = write!(md, "| {ks} | {vs} |");
                let base = get(&sc.id, Kind::Redis).map(|m| m.units_sec);
                for &k in &server_kinds {
                    if !k.speaks_redis() {
                        continue;
                    }
                    match get(&sc.id, k) {
                        Some(m) => {
                            let _ = write!(
                                md,
                                " {} | {:.3} | {} |",
                                fmt_num(m.units_sec),
                                m.p99_ms,
                                ratio(m.units_sec, base)
                            );
                        }
                        None => {
                            let _ = write!(md, " failed | | |");
                        }
                    }
                }
                let _ = writeln!(md);
            }
            if let Some(sc) = scs.first() {
                let _ = writeln!(
                    md,
                    "\nLoad per cell (key prefix/range vary): `damselfly-bench {}`\n",
                    sc.load.join(" ")
                );
            }
            continue;
        }
        for sc in scs {
            let base_kind = baseline(sc);
            let Some(rows) = results.get(&sc.id) else {
                continue;
            };
            let base = get(&sc.id, base_kind);
            let _ = writeln!(md, "### `{}` — {}\n", sc.id, sc.title);
            if let Some(f) = &sc.fill {
                let _ = writeln!(md, "Fill: `damselfly-bench {}`  ", quote_args(f));
            }
            let _ = writeln!(md, "Load: `damselfly-bench {}`\n", quote_args(&sc.load));
            let unit = sc.unit;
            let _ = writeln!(
                md,
                "| server | {unit}/s | x {} | GET hit % | avg ms | p50 ms | p99 ms | p99.9 ms | server CPU ns/{} | x {} | peak RSS MiB |",
                base_kind.display(),
                if unit == "keys" { "key" } else { "op" },
                base_kind.display()
            );
            let _ = writeln!(
                md,
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for (k, r) in rows {
                match r {
                    Ok(m) => {
                        let cpu = m
                            .cpu_ns_per_unit
                            .map(|v| format!("{v:.0}"))
                            .unwrap_or_else(|| "n/a".into());
                        let cpu_ratio = match (
                            m.cpu_ns_per_unit,
                            base.as_ref().and_then(|b| b.cpu_ns_per_unit),
                        ) {
                            (Some(x), Some(b)) => ratio(x, Some(b)),
                            _ => "n/a".into(),
                        };
                        let _ = writeln!(
                            md,
                            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} |{}",
                            k.display(),
                            fmt_num(m.units_sec),
                            ratio(m.units_sec, base.as_ref().map(|b| b.units_sec)),
                            if m.hits_sec + m.misses_sec > 0.0 {
                                format!("{:.1}", 100.0 * m.hits_sec / (m.hits_sec + m.misses_sec))
                            } else {
                                "---".into()
                            },
                            m.avg_ms,
                            m.p50_ms,
                            m.p99_ms,
                            m.p999_ms,
                            cpu,
                            cpu_ratio,
                            m.peak_rss
                                .map(|b| format!("{:.1}", b as f64 / 1048576.0))
                                .unwrap_or_else(|| "n/a".into()),
                            if m.errors > 0 {
                                format!(" {} error replies", m.errors)
                            } else {
                                String::new()
                            }
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(
                            md,
                            "| {} | failed: {} | | | | | | | | | |",
                            k.display(),
                            short_err(e)
                        );
                    }
                }
            }
            let _ = writeln!(md);
        }
    }
    if !mem.is_empty() {
        let _ = writeln!(md, "## Memory efficiency\n");
        let _ = writeln!(
            md,
            "RSS growth after `DEBUG POPULATE <keys> key <value size>` on a fresh server, divided by the number of keys.\n"
        );
        let _ = writeln!(
            md,
            "| value size | server | keys | RSS before MiB | RSS after MiB | bytes/key | x redis-server | populate s |"
        );
        let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|");
        for (vs, row) in &mem {
            let base = row
                .iter()
                .find(|(k, _)| *k == Kind::Redis)
                .and_then(|(_, r)| r.as_ref().ok().map(MemMeasure::bytes_per_key));
            for (k, r) in row {
                match r {
                    Ok(m) => {
                        let _ = writeln!(
                            md,
                            "| {vs} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.2} |",
                            k.display(),
                            fmt_num(m.keys as f64),
                            m.rss_before as f64 / 1048576.0,
                            m.rss_after as f64 / 1048576.0,
                            m.bytes_per_key(),
                            ratio(m.bytes_per_key(), base),
                            m.populate_secs
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(
                            md,
                            "| {vs} | {} | failed: {} | | | | | |",
                            k.display(),
                            short_err(e)
                        );
                    }
                }
            }
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(
        md,
        "Reproduce: `cargo build --release -p damselfly-bench && target/release/damselfly-bench {}` (see docs/benchmarks-toolkit.md).",
        argv.join(" ")
    );
    std::fs::write(&c.out, md).map_err(|e| format!("write {}: {e}", c.out.display()))?;
    eprintln!(
        "wrote {} and {} chart(s) in {}",
        c.out.display(),
        charts.len(),
        c.img.display()
    );
    if c.keep_json.is_none() {
        let _ = std::fs::remove_dir_all(&workdir);
    }
    Ok(())
}

/// An error message fit for a table cell.
fn short_err(e: &str) -> String {
    let mut s: String = e.replace('|', "/").replace('`', "'");
    if s.chars().count() > 110 {
        s = s.chars().take(107).collect::<String>() + "...";
    }
    s
}

fn quote_args(v: &[String]) -> String {
    v.iter()
        .map(|s| {
            if s.is_empty() || s.contains(' ') || s.contains(';') {
                format!("\"{s}\"")
            } else {
                s.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_keys_have_exact_length() {
        for size in [8usize, 16, 32, 64, 128] {
            let (prefix, min, max) = sized_keys(size, 1_000_000);
            assert_eq!(prefix.len() + min.to_string().len(), size);
            assert_eq!(prefix.len() + max.to_string().len(), size);
        }
    }

    #[test]
    fn rel_paths() {
        assert_eq!(
            rel_path(Path::new("/a/docs/x.md"), Path::new("/a/docs/img/t.png")),
            "img/t.png"
        );
        assert_eq!(
            rel_path(Path::new("/a/out/x.md"), Path::new("/a/docs/img/t.png")),
            "../docs/img/t.png"
        );
    }

    #[test]
    fn version_parse() {
        assert_eq!(
            redis_major("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc"),
            Some(7)
        );
    }
}
