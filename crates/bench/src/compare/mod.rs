//! `damselfly-bench compare`: start every server found (one at a time, on a free
//! loopback port, pinned to its own CPUs), run the seed scenarios with this same
//! binary pinned to other CPUs, and write a markdown report plus PNG charts.
//!
//! - `discovery.rs`: the servers known and finding their binaries.
//! - `process.rs`: starting/stopping a pinned server, admin probes (RESP, memcache).
//! - `scenarios.rs`: the scenario definitions and which are selected.
//! - `measure.rs`: running a scenario (or a memory scenario) against one server.
//! - `report.rs`: charts and the markdown tables.

mod discovery;
mod measure;
mod process;
mod report;
mod scenarios;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Parser;

use crate::opts::{parse_cpu_list, CpuList};
use crate::sys;
use discovery::{discover, Kind, ServerSpec};
use measure::{measure, measure_mc_memory, measure_memory, Ctx, McMemMeasure, Measure, MemMeasure};
use scenarios::{
    mc_memory_selected, memory_selected, scenario_selected, scenarios, Proto, Scenario,
    MEMORY_VALUE_SIZES,
};

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
    /// read_p30, mix_1_15, mc_write, mc_read, mc_mget, mset_1000, mset_10000,
    /// set_expire_1000, set_expire_10000, kv_sweep, memory, mc_memory.
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

    /// Keys created with DEBUG POPULATE for the memory scenario (and items stored with
    /// memcache `set`s for mc_memory).
    #[arg(long, default_value_t = 1_000_000)]
    pub memory_keys: u64,

    /// Load-generator threads (default: number of load CPUs).
    #[arg(long)]
    pub threads: Option<usize>,

    /// Keep the per-run JSON files and server logs in this directory.
    #[arg(long)]
    pub keep_json: Option<PathBuf>,
}

type Outcome<T> = Result<T, String>;

/// (value size, per-server outcome) of the memory scenario.
type MemRow = (u64, Vec<(Kind, Outcome<MemMeasure>)>);

/// (value size, per-server outcome) of the memcache memory scenario.
type McMemRow = (u64, Vec<(Kind, Outcome<McMemMeasure>)>);

fn a(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// What a run found: the setup, the servers, and every outcome, for the report.
struct Findings {
    ncpu: usize,
    server_cpus: Vec<usize>,
    load_cpus: Vec<usize>,
    threads: usize,
    servers: Vec<ServerSpec>,
    /// Servers skipped, and why.
    notes: Vec<String>,
    /// The selected scenarios, in run order.
    scenarios: Vec<Scenario>,
    /// Scenario id -> outcome per server.
    results: BTreeMap<String, Vec<(Kind, Outcome<Measure>)>>,
    mem: Vec<MemRow>,
    mc_mem: Vec<McMemRow>,
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
    let selected: Vec<Scenario> = scenarios(c)
        .into_iter()
        .filter(|s| scenario_selected(c, s))
        .collect();

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
                    report::fmt_num(m.units_sec),
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
        for vs in MEMORY_VALUE_SIZES {
            let mut row = Vec::new();
            for spec in servers.iter().filter(|s| s.kind.speaks_redis()) {
                eprint!("[memory {vs} B] {} ... ", spec.kind.display());
                let _ = std::io::stderr().flush();
                let r = measure_memory(&mut ctx, spec, keys, vs);
                match &r {
                    Ok(m) => eprintln!("{:.1} bytes/key", m.bytes_per_key()),
                    Err(e) => eprintln!("failed: {e}"),
                }
                row.push((spec.kind, r));
            }
            mem.push((vs, row));
        }
    }

    let mut mc_mem: Vec<McMemRow> = Vec::new();
    if mc_memory_selected(c) {
        let items = if c.quick { 10_000 } else { c.memory_keys };
        for vs in MEMORY_VALUE_SIZES {
            let mut row = Vec::new();
            for spec in servers.iter().filter(|s| s.kind.speaks_memcache()) {
                eprint!("[mc_memory {vs} B] {} ... ", spec.kind.display());
                let _ = std::io::stderr().flush();
                let r = measure_mc_memory(&mut ctx, spec, items, vs);
                match &r {
                    Ok(m) => eprintln!("{:.1} bytes/item", m.bytes_per_item()),
                    Err(e) => eprintln!("failed: {e}"),
                }
                row.push((spec.kind, r));
            }
            mc_mem.push((vs, row));
        }
    }

    report::write(
        c,
        &Findings {
            ncpu,
            server_cpus,
            load_cpus,
            threads,
            servers,
            notes,
            scenarios: selected,
            results,
            mem,
            mc_mem,
        },
    )?;
    if c.keep_json.is_none() {
        let _ = std::fs::remove_dir_all(&workdir);
    }
    Ok(())
}
