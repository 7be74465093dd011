//! The comparison report: PNG charts and the markdown file with the result tables.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::discovery::Kind;
use super::measure::{McMemMeasure, Measure, MemMeasure};
use super::scenarios::{mc_memory_fill, Group, Proto, Scenario};
use super::{CompareOpts, Findings, Outcome};
use crate::chart::{grouped_bars, BarChart};

/// (title, path) of each chart written.
type Charts = Vec<(String, PathBuf)>;

/// (file, title, y axis, scenarios, value) of a chart with a category per scenario.
type ScenarioChart<'a> = (
    &'a str,
    &'a str,
    &'a str,
    &'a [&'a Scenario],
    fn(&Measure) -> f64,
);

/// The successful result of server `k` in a per-server row.
fn found<T>(row: &[(Kind, Outcome<T>)], k: Kind) -> Option<&T> {
    row.iter()
        .find(|(kk, _)| *kk == k)
        .and_then(|(_, r)| r.as_ref().ok())
}

impl Findings {
    fn get(&self, id: &str, k: Kind) -> Option<&Measure> {
        self.results.get(id).and_then(|row| found(row, k))
    }
    fn kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        self.servers.iter().map(|s| s.kind)
    }
    fn group(&self, g: Group) -> Vec<&Scenario> {
        self.scenarios.iter().filter(|s| s.group == g).collect()
    }
}

/// Writes the charts into `c.img` and the markdown into `c.out`.
pub(super) fn write(c: &CompareOpts, f: &Findings) -> Result<(), String> {
    let charts = charts(c, f)?;
    let md = markdown(c, f, &charts);
    std::fs::write(&c.out, md).map_err(|e| format!("write {}: {e}", c.out.display()))?;
    eprintln!(
        "wrote {} and {} chart(s) in {}",
        c.out.display(),
        charts.len(),
        c.img.display()
    );
    Ok(())
}

/// One grouped bar chart with a series per server that has a value in some category (none
/// written when no server has).
fn chart(
    charts: &mut Charts,
    path: PathBuf,
    title: &str,
    y_desc: &str,
    categories: &[String],
    f: &Findings,
    values: impl Fn(Kind) -> Vec<Option<f64>>,
) -> Result<(), String> {
    let mut series = Vec::new();
    for k in f.kinds() {
        let vals = values(k);
        if vals.iter().any(Option::is_some) {
            series.push((k.display().to_string(), vals));
        }
    }
    if series.is_empty() {
        return Ok(());
    }
    grouped_bars(
        &path,
        &BarChart {
            title,
            y_desc,
            categories,
            series: &series,
        },
    )?;
    charts.push((title.to_string(), path));
    Ok(())
}

fn charts(c: &CompareOpts, f: &Findings) -> Result<Charts, String> {
    let mut charts = Charts::new();
    let core = f.group(Group::Core);
    let batch = f.group(Group::Batch);
    let sweep = f.group(Group::Sweep);
    let per_scenario: &[ScenarioChart] = &[
        (
            "throughput.png",
            "Throughput (higher is better; keys/sec for mc_mget)",
            "ops/sec",
            &core,
            |m| m.units_sec,
        ),
        (
            "latency_p50.png",
            "p50 latency (lower is better)",
            "msec",
            &core,
            |m| m.p50_ms,
        ),
        (
            "latency_p99.png",
            "p99 latency (lower is better)",
            "msec",
            &core,
            |m| m.p99_ms,
        ),
        (
            "cpu_per_op.png",
            "Server CPU per op (lower is better; per key for mc_mget)",
            "ns/op",
            &core,
            |m| m.cpu_ns_per_unit.unwrap_or(0.0),
        ),
        (
            "batch.png",
            "MSET vs pipelined SET+EXPIRE (keys/sec)",
            "keys/sec",
            &batch,
            |m| m.units_sec,
        ),
        (
            "kv_sweep.png",
            "MSET keys/sec by key size / value size (bytes)",
            "keys/sec",
            &sweep,
            |m| m.units_sec,
        ),
    ];
    for &(file, title, y_desc, scs, value) in per_scenario {
        if scs.is_empty() {
            continue;
        }
        let cats: Vec<String> = scs.iter().map(|s| s.short.clone()).collect();
        chart(
            &mut charts,
            c.img.join(file),
            title,
            y_desc,
            &cats,
            f,
            |k| scs.iter().map(|s| f.get(&s.id, k).map(value)).collect(),
        )?;
    }
    if !f.mem.is_empty() {
        let cats: Vec<String> = f
            .mem
            .iter()
            .map(|(vs, _)| format!("{vs} B values"))
            .collect();
        chart(
            &mut charts,
            c.img.join("memory.png"),
            "RSS per key after DEBUG POPULATE (lower is better)",
            "bytes/key",
            &cats,
            f,
            |k| {
                f.mem
                    .iter()
                    .map(|(_, row)| found(row, k).map(MemMeasure::bytes_per_key))
                    .collect()
            },
        )?;
    }
    if !f.mc_mem.is_empty() {
        let cats: Vec<String> = f
            .mc_mem
            .iter()
            .map(|(vs, _)| format!("{vs} B values"))
            .collect();
        chart(
            &mut charts,
            c.img.join("memory_mc.png"),
            "RSS per item after memcache sets (lower is better)",
            "bytes/item",
            &cats,
            f,
            |k| {
                f.mc_mem
                    .iter()
                    .map(|(_, row)| found(row, k).map(McMemMeasure::bytes_per_item))
                    .collect()
            },
        )?;
    }
    Ok(charts)
}

fn markdown(c: &CompareOpts, f: &Findings, charts: &Charts) -> String {
    let mut md = String::new();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    header(&mut md, c, f, charts, &argv);
    let sections = [
        (Group::Core, "Throughput and latency"),
        (Group::Batch, "seed-004: multi_set vs pipelined SET+EXPIRE"),
        (Group::Sweep, "seed-004: key size x value size sweep (MSET)"),
    ];
    for (g, gtitle) in sections {
        let scs = f.group(g);
        if scs.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## {gtitle}\n");
        if g == Group::Sweep {
            sweep_table(&mut md, f, &scs);
        } else {
            for sc in scs {
                scenario_table(&mut md, f, sc);
            }
        }
    }
    if !f.mem.is_empty() {
        memory_table(&mut md, f);
    }
    if !f.mc_mem.is_empty() {
        mc_memory_table(&mut md, f);
    }
    let _ = writeln!(
        md,
        "Reproduce: `cargo build --release -p damselfly-bench && target/release/damselfly-bench {}` (see docs/benchmarks-toolkit.md).",
        argv.join(" ")
    );
    md
}

/// Title, host and pinning, servers found and skipped, charts.
fn header(md: &mut String, c: &CompareOpts, f: &Findings, charts: &Charts, argv: &[String]) {
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
        "Host: {} CPUs ({}). Servers run one at a time on loopback, pinned to CPU {}; the load generator (`damselfly-bench`, {} thread(s)) is pinned to CPU {}. Every scenario starts a fresh server process. Ratios (`x`) are relative to redis-server measured in the same run (memcached for the memcache-protocol scenarios), because absolute numbers on shared machines are noisy. Server CPU is the on-CPU time of the server's threads (`/proc/PID/task/*/schedstat`, falling back to utime+stime from `/proc/PID/stat`) during the measured phase divided by the operations (keys for batch scenarios); peak RSS is `VmHWM`.\n",
        f.ncpu,
        cpu_model(),
        fmt_cpus(&f.server_cpus),
        f.threads,
        fmt_cpus(&f.load_cpus),
    );
    let _ = writeln!(md, "Servers:\n");
    for s in &f.servers {
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
    for n in &f.notes {
        let _ = writeln!(md, "- {n}");
    }
    let _ = writeln!(md);
    if !charts.is_empty() {
        let _ = writeln!(md, "## Charts\n");
        for (title, path) in charts {
            let _ = writeln!(md, "![{title}]({})\n", rel_path(&c.out, path));
        }
    }
}

/// The key size x value size sweep as one table: a row per cell, columns per RESP server.
fn sweep_table(md: &mut String, f: &Findings, scs: &[&Scenario]) {
    let kinds: Vec<Kind> = f.kinds().filter(|k| k.speaks_redis()).collect();
    let _ = write!(md, "| key B | value B |");
    for k in &kinds {
        let _ = write!(md, " {} keys/s | p99 ms | x redis |", k.display());
    }
    let _ = writeln!(md);
    let _ = write!(md, "|---:|---:|");
    for _ in &kinds {
        let _ = write!(md, "---:|---:|---:|");
    }
    let _ = writeln!(md);
    for sc in scs {
        let (ks, vs) = sc.short.split_once('/').unwrap_or(("?", "?"));
        let _ = write!(md, "| {ks} | {vs} |");
        let base = f.get(&sc.id, Kind::Redis).map(|m| m.units_sec);
        for &k in &kinds {
            match f.get(&sc.id, k) {
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
}

/// One scenario: its fill and load arguments, then a row per server.
fn scenario_table(md: &mut String, f: &Findings, sc: &Scenario) {
    // redis-server for RESP, memcached for the memcache protocol.
    let base_kind = match sc.proto {
        Proto::Redis => Kind::Redis,
        Proto::Memcache => Kind::Memcached,
    };
    let Some(rows) = f.results.get(&sc.id) else {
        return;
    };
    let base = f.get(&sc.id, base_kind);
    let _ = writeln!(md, "### `{}` — {}\n", sc.id, sc.title);
    if let Some(fill) = &sc.fill {
        let _ = writeln!(md, "Fill: `damselfly-bench {}`  ", quote_args(fill));
    }
    let _ = writeln!(md, "Load: `damselfly-bench {}`\n", quote_args(&sc.load));
    let unit = sc.unit;
    // Requests of several keys (MSET batches, memcache multi-get): requests/s as well.
    let multi = sc.units_per_op > 1.0;
    let _ = writeln!(
        md,
        "| server | {unit}/s | x {} |{} GET hit % | avg ms | p50 ms | p99 ms | p99.9 ms | server CPU ns/{} | x {} | peak RSS MiB |",
        base_kind.display(),
        if multi { " requests/s |" } else { "" },
        if unit == "keys" { "key" } else { "op" },
        base_kind.display()
    );
    let _ = writeln!(
        md,
        "|---|---:|---:|{}---:|---:|---:|---:|---:|---:|---:|---:|",
        if multi { "---:|" } else { "" }
    );
    for (k, r) in rows {
        match r {
            Ok(m) => {
                let cpu = m
                    .cpu_ns_per_unit
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "n/a".into());
                let cpu_ratio = match (m.cpu_ns_per_unit, base.and_then(|b| b.cpu_ns_per_unit)) {
                    (Some(x), Some(b)) => ratio(x, Some(b)),
                    _ => "n/a".into(),
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} |{} {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} |{}",
                    k.display(),
                    fmt_num(m.units_sec),
                    ratio(m.units_sec, base.map(|b| b.units_sec)),
                    if multi {
                        format!(" {} |", fmt_num(m.ops_sec))
                    } else {
                        String::new()
                    },
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
                    "| {} | failed: {} | | | | | | | | | |{}",
                    k.display(),
                    short_err(e),
                    if multi { " |" } else { "" }
                );
            }
        }
    }
    let _ = writeln!(md);
}

fn memory_table(md: &mut String, f: &Findings) {
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
    for (vs, row) in &f.mem {
        let base = found(row, Kind::Redis).map(MemMeasure::bytes_per_key);
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

/// The memcache memory scenario: a row per (value size, memcache server), ratios vs memcached.
fn mc_memory_table(md: &mut String, f: &Findings) {
    let _ = writeln!(md, "## Memory efficiency (memcache protocol)\n");
    let items = f
        .mc_mem
        .iter()
        .flat_map(|(_, row)| row.iter())
        .find_map(|(_, r)| r.as_ref().ok().map(|m| m.items));
    let _ = writeln!(
        md,
        "RSS growth of a fresh server (memcached `-m 8192`, so nothing is evicted) after storing every key once with pipelined memcache `set`s, divided by the number of items. A cell counts only when every set answered `STORED`, `stats` reports `curr_items` equal to the items loaded and `evictions` 0. `stats bytes/item` is the server's own `stats` `bytes` ÷ `curr_items` (memcached: item bytes in its slabs; damselfly: its accounted memory).\n"
    );
    if let Some(items) = items {
        let _ = writeln!(
            md,
            "Load: `damselfly-bench {}` (`-d` 32 and 1024)\n",
            quote_args(&mc_memory_fill(items, 32))
        );
    }
    let _ = writeln!(
        md,
        "| value size | server | items | curr_items | RSS before MiB | RSS after MiB | bytes/item | x memcached | stats bytes/item | load s |"
    );
    let _ = writeln!(md, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (vs, row) in &f.mc_mem {
        let base = found(row, Kind::Memcached).map(McMemMeasure::bytes_per_item);
        for (k, r) in row {
            match r {
                Ok(m) => {
                    let _ = writeln!(
                        md,
                        "| {vs} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {:.2} |",
                        k.display(),
                        fmt_num(m.items as f64),
                        fmt_num(m.curr_items as f64),
                        m.rss_before as f64 / 1048576.0,
                        m.rss_after as f64 / 1048576.0,
                        m.bytes_per_item(),
                        ratio(m.bytes_per_item(), base),
                        m.stats_bytes_per_item()
                            .map(|b| format!("{b:.1}"))
                            .unwrap_or_else(|| "n/a".into()),
                        m.load_secs
                    );
                }
                Err(e) => {
                    let _ = writeln!(
                        md,
                        "| {vs} | {} | failed: {} | | | | | | | |",
                        k.display(),
                        short_err(e)
                    );
                }
            }
        }
    }
    let _ = writeln!(md);
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

/// Thousands-grouped integer from 100 up, two decimals below.
pub(super) fn fmt_num(v: f64) -> String {
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
}
