//! Differential test: seeded random command sequences sent to a real `redis-server` (the
//! reference) and to damselfly (`--proactor_threads=4`) over raw RESP connections; every reply is
//! parsed and compared structurally, normalising only values that depend on timing (TTLs) or
//! ordering (KEYS). Error texts are compared byte for byte.
//!
//! Knobs (environment variables):
//! - `DIFF_COMMANDS=get,set,incr` — only generate these commands (names as in `SPECS`).
//!   `DIFF_COMMANDS=all` also enables the optional (non-default) generators.
//! - `DIFF_SEEDS=N` (default 20), `DIFF_STEPS=N` (default 400), `DIFF_SEED=S` (run only seed S).
//! - `DIFF_THREADS=N` — damselfly's `--proactor_threads` (default 4).
//! - `DIFF_PARANOID=1` — after every command also compare GET of every pool key (DBSIZE is
//!   always compared after every command).
//! - `DIFF_KEEP_GOING=1` — don't stop at the first diverging seed: report the first mismatch of
//!   every seed at the end (useful to collect all differences at once).
//! - `DIFF_TRACE=FILE` — append every command and the reference's reply to FILE.
//!
//! On the first mismatch the test panics with the seed, step, command, both replies and the
//! commands leading up to it, plus a command line that reproduces just that seed.
//!
//! The generators, the `Spec` tables, `Norm` and `mangle` live in `gen/` (shared with
//! `pipeline_fuzz.rs`). To add a command: add a `Spec` row to `SPECS` in `gen/mod.rs` (strings,
//! bitmaps, keys, transactions) or to the family's table in `gen/<family>.rs`.
//!
//! The final-state check dumps every pool key by its type on the reference side (GET, LRANGE,
//! HGETALL, SMEMBERS, ZRANGE WITHSCORES), so collection contents are compared too.

mod common;

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{RawConn, RedisServer, Resp, Server};

#[path = "gen/mod.rs"]
mod gen;
use gen::*;

// ---------------------------------------------------------------------------------------------
// Runner.

fn selected_specs() -> Vec<&'static Spec> {
    match std::env::var("DIFF_COMMANDS") {
        Ok(list) if !list.trim().is_empty() => {
            let list = list.to_ascii_lowercase();
            if list.trim() == "all" {
                return all_specs().collect();
            }
            let names: BTreeSet<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            for n in &names {
                assert!(
                    all_specs().any(|s| s.name == *n),
                    "DIFF_COMMANDS: unknown command {n:?}; known: {}",
                    all_specs().map(|s| s.name).collect::<Vec<_>>().join(",")
                );
            }
            all_specs().filter(|s| names.contains(s.name)).collect()
        }
        _ => all_specs().filter(|s| s.default).collect(),
    }
}

struct Pair {
    redis: Server,
    dfly: Server,
    rc: RawConn,
    dc: RawConn,
}

fn start_pair(threads: u64) -> Pair {
    let redis = RedisServer::start();
    let t = format!("--proactor_threads={threads}");
    let dfly = Server::start(&[&t]);
    let rc = redis.raw_conn();
    let dc = dfly.raw_conn();
    Pair {
        redis,
        dfly,
        rc,
        dc,
    }
}

struct Mismatch {
    step: usize,
    cmd: String,
    redis: String,
    dfly: String,
}

fn run_seed(
    pair: &mut Pair,
    seed: u64,
    steps: usize,
    specs: &[&Spec],
    base_s: i64,
) -> Result<(), (Mismatch, Vec<String>)> {
    let mut g = G::new(seed, base_s);
    let total: u64 = specs.iter().map(|s| s.weight as u64).sum();
    let mut history: Vec<String> = Vec::new();
    let enabled = |n: &str| specs.iter().any(|s| s.name == n);
    let paranoid = std::env::var("DIFF_PARANOID").is_ok_and(|v| v != "0");
    // DIFF_TRACE=FILE: every exchange with the reference's reply appended to FILE (to see what a
    // generator produces).
    let mut trace = std::env::var("DIFF_TRACE").ok().map(|f| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(f)
            .expect("DIFF_TRACE file")
    });
    // Norms of the commands queued since MULTI (for comparing EXEC's array).
    let mut queued: Vec<Norm> = Vec::new();
    let mut exchange = |args: &[Vec<u8>], norm: Norm, step: usize, history: &mut Vec<String>| {
        pair.rc.send(args);
        pair.dc.send(args);
        let r = pair.rc.try_read();
        let d = pair.dc.try_read();
        let shown = fmt_cmd(args);
        let ok = match (&r, &d) {
            (Ok(r), Ok(d)) => norm_eq(norm, r, d, &queued),
            _ => false,
        };
        track_queue(&mut queued, args, norm, r.as_ref().ok());
        let show = |x: &Result<Resp, String>| match x {
            Ok(v) => v.to_string(),
            Err(e) => format!("<{e}>"),
        };
        if !ok {
            return Err(Mismatch {
                step,
                cmd: shown,
                redis: show(&r),
                dfly: show(&d),
            });
        }
        let line = format!("#{step} {shown} -> {}", show(&r));
        if let Some(t) = trace.as_mut() {
            use std::io::Write;
            let _ = writeln!(t, "seed {seed} {line}");
        }
        history.push(line);
        Ok(r.ok())
    };

    for step in 0..steps {
        let mut pick = g.below(total);
        let mut spec = specs[0];
        for s in specs {
            if pick < s.weight as u64 {
                spec = s;
                break;
            }
            pick -= s.weight as u64;
        }
        let args = (spec.gen)(&mut g);
        let args = mangle(&mut g, args);
        exchange(&args, norm_of(spec, &args), step, &mut history)
            .map_err(|m| (m, history.clone()))?;
        // SET ... EXAT/PXAT with a past time leaves a logically expired key that Redis still
        // counts in DBSIZE until active expiry samples it (timing-dependent): touch it with
        // EXISTS so both sides reclaim it now.
        if args.len() > 1
            && args[0].eq_ignore_ascii_case(b"set")
            && args
                .iter()
                .any(|a| a.eq_ignore_ascii_case(b"exat") || a.eq_ignore_ascii_case(b"pxat"))
        {
            let a = vec![b("EXISTS"), args[1].clone()];
            exchange(&a, Norm::Exact, step, &mut history).map_err(|m| (m, history.clone()))?;
        }
        // Cheap divergence detector after every command, so a mismatch is reported at the step
        // that caused it rather than much later; DIFF_PARANOID=1 also compares every pool key.
        exchange(&[b("DBSIZE")], Norm::Exact, step, &mut history)
            .map_err(|m| (m, history.clone()))?;
        history.pop();
        if paranoid {
            for k in KEYS {
                let a = vec![b("GET"), k.as_bytes().to_vec()];
                exchange(&a, Norm::Exact, step, &mut history).map_err(|m| (m, history.clone()))?;
                history.pop();
            }
        }
    }
    // Leave a transaction left open by the generator (same reply on both sides either way).
    let mut step = steps;
    if enabled("multi") {
        exchange(&[b("DISCARD")], Norm::Exact, step, &mut history)
            .map_err(|m| (m, history.clone()))?;
        step += 1;
    }
    // Final state: every pool key in the first databases.
    for db in 0..4 {
        let sel = vec![b("SELECT"), db.to_string().into_bytes()];
        exchange(&sel, Norm::Exact, step, &mut history).map_err(|m| (m, history.clone()))?;
        step += 1;
        exchange(&[b("DBSIZE")], Norm::Exact, step, &mut history)
            .map_err(|m| (m, history.clone()))?;
        step += 1;
        for k in KEYS.iter().chain(gen::stream::STREAM_KEYS) {
            let k = k.as_bytes().to_vec();
            // The reference says the type; both sides are then dumped by that type.
            let a = vec![b("TYPE"), k.clone()];
            let ty = match exchange(&a, Norm::Exact, step, &mut history)
                .map_err(|m| (m, history.clone()))?
            {
                Some(Resp::Simple(t)) => t,
                _ => b"string".to_vec(),
            };
            step += 1;
            let mut checks: Vec<(Vec<Vec<u8>>, Norm)> = Vec::new();
            checks.push(dump_cmd(&ty, &k));
            if enabled("ttl") {
                checks.push((vec![b("TTL"), k.clone()], Norm::Ttl(2)));
            }
            for (args, norm) in checks {
                exchange(&args, norm, step, &mut history).map_err(|m| (m, history.clone()))?;
                step += 1;
            }
        }
    }
    Ok(())
}

#[test]
fn differential_against_redis() {
    let specs = selected_specs();
    assert!(!specs.is_empty(), "no commands selected");
    let seeds: Vec<u64> = match std::env::var("DIFF_SEED") {
        Ok(s) => vec![s.trim().parse().expect("DIFF_SEED must be a number")],
        Err(_) => (1..=env_u64("DIFF_SEEDS", 20)).collect(),
    };
    let steps = env_u64("DIFF_STEPS", 400) as usize;
    let threads = env_u64("DIFF_THREADS", 4);
    let base_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    eprintln!(
        "differential: {} seeds x {steps} steps over {} commands: {}",
        seeds.len(),
        names.len(),
        names.join(",")
    );
    let keep_going = std::env::var("DIFF_KEEP_GOING").is_ok_and(|v| v != "0");
    let mut failures: Vec<String> = Vec::new();
    for seed in seeds {
        // Fresh servers per seed: every seed starts from an empty keyspace on both sides.
        let mut pair = start_pair(threads);
        if let Err((m, history)) = run_seed(&mut pair, seed, steps, &specs, base_s) {
            let ctx: Vec<&String> = history.iter().rev().take(15).collect();
            let ctx: Vec<String> = ctx.into_iter().rev().cloned().collect();
            let report = format!(
                "\n==== differential mismatch ====\nseed {seed}, step {}\ncommand:   {}\nredis:     {}\ndamselfly: {}\n\
                 ---- preceding commands (reply from redis) ----\n{}\n\
                 reproduce: DIFF_SEED={seed} DIFF_STEPS={} DIFF_COMMANDS={} cargo test -p damselfly --test differential -- --nocapture\n\
                 damselfly log tail:\n{}",
                m.step,
                m.cmd,
                m.redis,
                m.dfly,
                ctx.join("\n"),
                steps,
                names.join(","),
                tail(&pair.dfly.output(), 20),
            );
            if !keep_going {
                panic!("{report}");
            }
            eprintln!("{report}");
            failures.push(format!(
                "seed {seed} step {}: {}\n    redis:     {}\n    damselfly: {}",
                m.step, m.cmd, m.redis, m.dfly
            ));
        }
        drop(pair.rc);
        drop(pair.dc);
        drop(pair.redis);
        drop(pair.dfly);
    }
    assert!(
        failures.is_empty(),
        "{} seed(s) diverged (first mismatch of each):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The generator is deterministic: same seed, same commands.
#[test]
fn generator_is_deterministic() {
    let specs = selected_specs();
    let gen = |seed| {
        let mut g = G::new(seed, 1_700_000_000);
        (0..200)
            .map(|_| {
                let s = specs[g.below(specs.len() as u64) as usize];
                let a = (s.gen)(&mut g);
                mangle(&mut g, a)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(gen(7), gen(7));
    assert_ne!(gen(7), gen(8));
}

// ---------------------------------------------------------------------------------------------
// Blocking interleavings: a second connection blocks (BLPOP, BLMOVE, BZPOPMIN, BLMPOP...) while
// the first runs random list / sorted-set / transaction commands and sometimes CLIENT UNBLOCKs
// it. After every command the blocked connection is polled on both servers: redis-server serves
// a blocked client before it answers the command that woke it, so whether (and with what) the
// blocked client was served must match step by step.

/// One reply if it arrives within `wait`.
fn poll(c: &mut RawConn, wait: std::time::Duration) -> Option<Result<Resp, String>> {
    let _ = c.stream.set_read_timeout(Some(wait));
    let r = c.try_read();
    let _ = c
        .stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)));
    match r {
        Err(e) if e.contains("read failed") => None,
        other => Some(other),
    }
}

#[test]
fn differential_blocking_interleavings() {
    use std::time::Duration;
    let wanted = |s: &&Spec| {
        let blocking =
            s.name.starts_with("bl") || s.name.starts_with("br") || s.name.starts_with("bz");
        s.default && !blocking
    };
    let specs: Vec<&Spec> = list::SPECS
        .iter()
        .chain(zset::SPECS)
        .filter(wanted)
        .chain(
            SPECS
                .iter()
                .filter(|s| ["del", "multi", "exec", "rename"].contains(&s.name)),
        )
        .collect();
    let total: u64 = specs.iter().map(|s| s.weight as u64).sum();
    let seeds = env_u64("DIFF_BLOCK_SEEDS", 6);
    let steps = env_u64("DIFF_BLOCK_STEPS", 300) as usize;
    let threads = env_u64("DIFF_THREADS", 4);
    let quiet = Duration::from_millis(20);
    for seed in 1..=seeds {
        let mut pair = start_pair(threads);
        let (mut rb, mut db) = (pair.redis.raw_conn(), pair.dfly.raw_conn());
        let id = |c: &mut RawConn| match c.cmd(&["CLIENT", "ID"]) {
            Resp::Int(i) => i.to_string(),
            other => panic!("CLIENT ID: {other:?}"),
        };
        let (rid, did) = (id(&mut rb), id(&mut db));
        let mut g = G::new(seed * 7919, 1_700_000_000);
        let mut blocked: Option<String> = None;
        let mut log: Vec<String> = Vec::new();
        // Norms of the commands queued since MULTI, for comparing EXEC's array.
        let mut queued: Vec<Norm> = Vec::new();
        let fail = |log: &[String], what: String| -> ! {
            let n = env_u64("DIFF_BLOCK_CTX", 20) as usize;
            let ctx = &log[log.len().saturating_sub(n)..];
            panic!(
                "blocking differential, seed {seed}: {what}\n---- history ----\n{}\nreproduce: DIFF_BLOCK_SEEDS={seed} cargo test -p damselfly --test differential differential_blocking -- --nocapture",
                ctx.join("\n")
            )
        };
        // Both blocked connections: served now (and equally), or both still waiting.
        let check_b = |rb: &mut RawConn,
                       db: &mut RawConn,
                       blocked: &mut Option<String>,
                       log: &mut Vec<String>| {
            let Some(b_cmd) = blocked.clone() else {
                return;
            };
            match poll(rb, quiet) {
                Some(r) => {
                    let d = poll(db, Duration::from_secs(3));
                    let same = matches!((&r, &d), (Ok(x), Some(Ok(y))) if x == y);
                    if !same {
                        fail(log, format!("served {b_cmd}: redis {r:?}, damselfly {d:?}"));
                    }
                    log.push(format!("   [blocked {b_cmd} served: {r:?}]"));
                    *blocked = None;
                }
                None => {
                    if let Some(d) = poll(db, quiet) {
                        fail(
                            log,
                            format!("{b_cmd}: damselfly served {d:?}, redis still blocked"),
                        );
                    }
                }
            }
        };
        for step in 0..steps {
            if blocked.is_none() && g.chance(35) {
                let a = g_blocking(&mut g);
                rb.send(&a);
                db.send(&a);
                blocked = Some(fmt_cmd(&a));
                log.push(format!("#{step} B: {}", fmt_cmd(&a)));
                check_b(&mut rb, &mut db, &mut blocked, &mut log);
                continue;
            }
            if blocked.is_some() && g.chance(4) {
                let how: &[&str] = match g.below(3) {
                    0 => &[],
                    1 => &["TIMEOUT"],
                    _ => &["ERROR"],
                };
                let ra: Vec<&str> = [&["CLIENT", "UNBLOCK", rid.as_str()][..], how].concat();
                let da: Vec<&str> = [&["CLIENT", "UNBLOCK", did.as_str()][..], how].concat();
                let (r, d) = (pair.rc.cmd(&ra), pair.dc.cmd(&da));
                if matches!(&r, Resp::Simple(x) if x == b"QUEUED") {
                    queued.push(Norm::Exact);
                }
                log.push(format!(
                    "#{step} A: CLIENT UNBLOCK <id> {} -> {r}",
                    how.join(" ")
                ));
                if r != d {
                    fail(&log, format!("CLIENT UNBLOCK: redis {r}, damselfly {d}"));
                }
                check_b(&mut rb, &mut db, &mut blocked, &mut log);
                continue;
            }
            let mut pick = g.below(total);
            let mut spec = specs[0];
            for s in &specs {
                if pick < s.weight as u64 {
                    spec = s;
                    break;
                }
                pick -= s.weight as u64;
            }
            let a = (spec.gen)(&mut g);
            let (r, d) = (pair.rc.cmd(&a), pair.dc.cmd(&a));
            log.push(format!("#{step} A: {} -> {r}", fmt_cmd(&a)));
            let is = |n: &[u8]| a[0].eq_ignore_ascii_case(n);
            let norm = if is(b"exec") {
                Norm::Exec
            } else {
                norm_of(spec, &a)
            };
            let ok = norm_eq(norm, &r, &d, &queued);
            if matches!(&r, Resp::Simple(x) if x == b"QUEUED") {
                queued.push(norm_of(spec, &a));
            } else if is(b"exec")
                || is(b"discard")
                || (is(b"multi") && r == Resp::Simple(b"OK".to_vec()))
            {
                queued.clear();
            }
            if !ok {
                fail(
                    &log,
                    format!("A: {}: redis {r}, damselfly {d}", fmt_cmd(&a)),
                );
            }
            check_b(&mut rb, &mut db, &mut blocked, &mut log);
        }
        // Leave nothing blocked: unblock B on both sides and compare the final lists/zsets.
        if blocked.is_some() {
            pair.rc.cmd(&["CLIENT", "UNBLOCK", rid.as_str()]);
            pair.dc.cmd(&["CLIENT", "UNBLOCK", did.as_str()]);
            check_b(&mut rb, &mut db, &mut blocked, &mut log);
        }
        pair.rc.cmd(&["DISCARD"]);
        pair.dc.cmd(&["DISCARD"]);
        for k in KEYS {
            for c in [
                vec!["LRANGE", k, "0", "-1"],
                vec!["ZRANGE", k, "0", "-1", "WITHSCORES"],
                vec!["TYPE", k],
            ] {
                let (r, d) = (pair.rc.cmd(&c), pair.dc.cmd(&c));
                if r != d {
                    fail(&log, format!("final {c:?}: redis {r}, damselfly {d}"));
                }
            }
        }
    }
}
