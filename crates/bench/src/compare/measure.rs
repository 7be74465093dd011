//! Running a scenario against one server: a fresh pinned server, the fill, the measured load
//! (this binary as the load generator, pinned to the load CPUs) with the server's CPU time and
//! peak RSS around it; and the memory scenario (RSS growth after DEBUG POPULATE).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::discovery::ServerSpec;
use super::process::{mc_stats, resp_command, start_server, stat_u64, Running};
use super::scenarios::{mc_memory_fill, Proto, Scenario};
use super::Outcome;
use crate::proto::ReplyKind;
use crate::sys;

#[derive(Clone, Debug, Default)]
pub(super) struct Measure {
    pub(super) ops_sec: f64,
    pub(super) units_sec: f64,
    pub(super) hits_sec: f64,
    pub(super) misses_sec: f64,
    pub(super) avg_ms: f64,
    pub(super) p50_ms: f64,
    pub(super) p99_ms: f64,
    pub(super) p999_ms: f64,
    pub(super) cpu_ns_per_unit: Option<f64>,
    pub(super) peak_rss: Option<u64>,
    pub(super) errors: u64,
}

#[derive(Clone, Debug)]
pub(super) struct MemMeasure {
    pub(super) keys: u64,
    pub(super) rss_before: u64,
    pub(super) rss_after: u64,
    pub(super) populate_secs: f64,
}

impl MemMeasure {
    pub(super) fn bytes_per_key(&self) -> f64 {
        self.rss_after.saturating_sub(self.rss_before) as f64 / self.keys.max(1) as f64
    }
}

/// The memcache memory scenario on one server: RSS before and after storing `items` items with
/// pipelined `set`s, and what the server's `stats` said afterwards.
#[derive(Clone, Debug)]
pub(super) struct McMemMeasure {
    pub(super) items: u64,
    /// `curr_items` after the load (checked equal to `items`).
    pub(super) curr_items: u64,
    /// `bytes` of `stats`: memcached's item bytes, damselfly's accounted memory.
    pub(super) stats_bytes: Option<u64>,
    pub(super) rss_before: u64,
    pub(super) rss_after: u64,
    pub(super) load_secs: f64,
}

impl McMemMeasure {
    pub(super) fn bytes_per_item(&self) -> f64 {
        self.rss_after.saturating_sub(self.rss_before) as f64 / self.items.max(1) as f64
    }
    pub(super) fn stats_bytes_per_item(&self) -> Option<f64> {
        self.stats_bytes
            .map(|b| b as f64 / self.curr_items.max(1) as f64)
    }
}

/// Where and how servers and the load generator run.
pub(super) struct Ctx {
    /// This binary: the load generator.
    pub(super) exe: PathBuf,
    pub(super) server_cpus: Vec<usize>,
    pub(super) load_cpus: Vec<usize>,
    pub(super) threads: usize,
    pub(super) workdir: PathBuf,
    /// Numbers the JSON result files.
    pub(super) seq: u64,
}

impl Ctx {
    /// Starts `spec`, runs `f` against it, then stops it.
    fn with_server<T>(
        &mut self,
        spec: &ServerSpec,
        need_mc: bool,
        debug_cmd: bool,
        f: impl FnOnce(&mut Ctx, &Running) -> Outcome<T>,
    ) -> Outcome<T> {
        let mut srv = start_server(spec, need_mc, &self.server_cpus, &self.workdir, debug_cmd)?;
        let result = f(self, &srv);
        srv.stop();
        result
    }

    /// Runs the load generator against `port`; its JSON result.
    fn run_load(&mut self, port: u16, args: &[String]) -> Outcome<Value> {
        self.seq += 1;
        let json = self.workdir.join(format!("run-{}.json", self.seq));
        let load_cpus: Vec<String> = self.load_cpus.iter().map(|c| c.to_string()).collect();
        let mut cmd = Command::new(&self.exe);
        cmd.args(["-s", "127.0.0.1", "-p", &port.to_string()])
            .args(["-t", &self.threads.to_string()])
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
}

/// The number at `path` in the JSON (0 when missing).
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

/// Runs `sc` against a fresh `spec` server.
pub(super) fn measure(ctx: &mut Ctx, spec: &ServerSpec, sc: &Scenario) -> Outcome<Measure> {
    let need_mc = sc.proto == Proto::Memcache;
    ctx.with_server(spec, need_mc, false, |ctx, srv| {
        let port = if need_mc {
            srv.mc_port.ok_or("server has no memcache port")?
        } else {
            srv.port
        };
        if let Some(fill) = &sc.fill {
            ctx.run_load(port, fill).map_err(|e| format!("fill: {e}"))?;
        }
        let cpu0 = sys::process_cpu_ns_precise(srv.pid());
        let v = ctx.run_load(port, &sc.load)?;
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
    })
}

/// RSS of a fresh `spec` server before and after `DEBUG POPULATE keys key value_size`.
pub(super) fn measure_memory(
    ctx: &mut Ctx,
    spec: &ServerSpec,
    keys: u64,
    value_size: u64,
) -> Outcome<MemMeasure> {
    ctx.with_server(spec, false, true, |_, srv| {
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
    })
}

/// RSS of a fresh `spec` server before and after storing `items` items of `value_size` bytes
/// over its memcache port (pipelined `set`s by the load generator; memcached has no DEBUG
/// POPULATE). Fails unless every set was stored: no error reply, `curr_items` equal to
/// `items` and no evictions, so that both servers hold the same data.
pub(super) fn measure_mc_memory(
    ctx: &mut Ctx,
    spec: &ServerSpec,
    items: u64,
    value_size: u64,
) -> Outcome<McMemMeasure> {
    ctx.with_server(spec, true, false, |ctx, srv| {
        let port = srv.mc_port.ok_or("server has no memcache port")?;
        std::thread::sleep(Duration::from_millis(200));
        let rss_before = sys::rss_bytes(srv.pid()).ok_or("cannot read RSS")?;
        let t0 = Instant::now();
        let v = ctx.run_load(port, &mc_memory_fill(items, value_size))?;
        let load_secs = t0.elapsed().as_secs_f64();
        let sets = jf(&v, &["ALL STATS", "Totals", "Count"]) as u64;
        let errors = jf(&v, &["ALL STATS", "Totals", "Errors"]) as u64;
        if errors > 0 || sets != items {
            let first = v
                .get("First error reply")
                .and_then(Value::as_str)
                .unwrap_or("-");
            return Err(format!(
                "{sets} sets sent for {items} items, {errors} error replies (first: {first})"
            ));
        }
        let stats = mc_stats(port)?;
        let curr_items = stat_u64(&stats, "curr_items").ok_or("stats has no curr_items")?;
        let evictions = stat_u64(&stats, "evictions").unwrap_or(0);
        if curr_items != items || evictions > 0 {
            return Err(format!(
                "stats after loading {items} items: curr_items {curr_items}, evictions {evictions}"
            ));
        }
        std::thread::sleep(Duration::from_millis(300));
        let rss_after = sys::rss_bytes(srv.pid()).ok_or("cannot read RSS")?;
        Ok(McMemMeasure {
            items,
            curr_items,
            stats_bytes: stat_u64(&stats, "bytes"),
            rss_before,
            rss_after,
            load_secs,
        })
    })
}
