//! Pipelined differential fuzzer: seeded random pipelines, each sent as ONE write to a real
//! `redis-server` (the reference) and to damselfly (`--proactor_threads=4`); then every reply is
//! read and compared one by one with the differential test's normalisation (`gen::norm_eq`:
//! RESP parsed structurally, error texts byte for byte, only timing/order-dependent values
//! normalised).
//!
//! This is the test for pipeline squashing (`commands/coordinator/squash.rs`), which runs consecutive
//! single-key commands of one pipeline as one batch per shard: a pipeline holds
//! - 1 to several hundred commands drawn from every `Spec` of the differential generators
//!   (`gen/`), optional ones included (see `UNMANGLED` and `norm_for` for the random ones),
//!   mostly mangled like in `differential.rs` (arity errors, case), plus unknown commands and
//!   unknown subcommands;
//! - variadic commands with argument counts around 256 (255/256/257), 512, 1024, anywhere up to
//!   5000, and rarely around 65536 (65535/65536/65537): RPUSH/LPUSH/SADD/SREM/SMISMEMBER/HSET/HDEL/
//!   HMGET/ZADD/ZREM/ZMSCORE on one key, MSET/MGET/DEL/EXISTS/TOUCH/UNLINK/WATCH/BITOP over many
//!   keys, SINTERSTORE/SUNION/SINTERCARD.../ZUNIONSTORE numkeys [WEIGHTS].../LMPOP/ZMPOP, LPOS
//!   COUNT 0 (big replies). Every seed has one command of 65535..65540 arguments in one of its
//!   first `HUGE_WITHIN` pipelines;
//! - keys from a mixed pool spread over all shards (plain keys, long keys, binary keys) with
//!   hashtag groups (`{a}`, `{b}`, `{t}`); some commands draw all their keys from one group so
//!   multi-key commands on a single shard occur too;
//! - MULTI/EXEC/DISCARD/WATCH/UNWATCH anywhere (a transaction can span pipelines);
//! - the replication commands a client may send a primary (WAIT, REPLCONF, ROLE, REPLICAOF NO
//!   ONE and bad REPLICAOF/SYNC/PSYNC forms), see `misc`;
//! - blocking commands with timeout 0 (BLPOP/BRPOP/BLMOVE/BRPOPLPUSH/BLMPOP/BZPOPMIN/BZPOPMAX/
//!   BZMPOP) only where they cannot block: right after a push/add to their first key in the
//!   same pipeline, or inside a MULTI ... EXEC/DISCARD unit (queued commands never block).
//!
//! After every pipeline DBSIZE of databases 0-3 is compared, and every `PIPE_DUMP_EVERY`
//! pipelines (and at the end) the whole keyspace: KEYS * per database, then every key by its type
//! (GET, LRANGE, HGETALL, SMEMBERS, ZRANGE WITHSCORES) and its TTL, so silent corruption is caught.
//! These checks use a second connection, so the fuzzed connection's state (selected database,
//! MULTI, WATCH) is untouched and the generated commands don't depend on how often they run.
//!
//! Knobs (environment variables):
//! - `PIPE_SEED=S` — run only seed S; `PIPE_SEEDS=N` — seeds 1..=N (default 4);
//! - `PIPE_PIPELINES=N` — pipelines per seed (default 25);
//! - `PIPE_THREADS=N` — damselfly's `--proactor_threads` (default 4);
//! - `PIPE_DUMP_EVERY=N` — full keyspace comparison every N pipelines (default 5);
//! - `PIPE_MINUTES=N` — run fresh (time-derived) seeds for N minutes instead, printing each seed
//!   and at the end the total number of commands sent: for long manual runs;
//! - `PIPE_CTX=N` — how many preceding commands a mismatch report shows (default 25);
//! - `PIPE_TRACE=FILE` — write every command with both replies to FILE (a divergence's origin);
//! - `PIPE_HOLD=N` — on a mismatch, keep both servers up N seconds (ports printed) to inspect;
//!   `PIPE_HOLD_END=N` does the same after a seed's last pipeline;
//!
//! Bugs it found (fixed): error replies that echo client bytes (unknown command, unknown
//! subcommand) repaired invalid UTF-8 into U+FFFD and kept bytes after a NUL; Redis echoes the
//! raw bytes up to the first NUL (`%.128s`).
//!
//! On the first mismatch the test panics with the seed, pipeline index, the diverging command,
//! both replies, the commands before it, and a command line that reproduces just that seed.

mod common;
#[path = "gen/mod.rs"]
mod gen;

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{encode, RawConn, RedisServer, Resp, Server};
use damselfly::engine::shard_of;
use gen::*;

// ---------------------------------------------------------------------------------------------
// Keys.

/// The fuzzer's key pool: the first `HOT` keys are drawn 80% of the time. Plain keys land on
/// every shard (checked at startup), the hashtag groups each on one shard.
const POOL: &[&str] = &[
    "k0",
    "k1",
    "k2",
    "k3",
    "k4",
    "k5",
    "k6",
    "k7",
    "{a}0",
    "{a}1",
    "{a}2",
    "{b}0",
    "{b}1",
    "{t}a",
    "{t}b",
    // cold
    "k8",
    "k9",
    "k10",
    "k11",
    "{a}3",
    "{b}2",
    "",
    "bin\x00\u{7f}",
    "a-key-longer-than-sixteen-bytes:0",
    "a-key-longer-than-sixteen-bytes:1",
];
const HOT: usize = 15;

/// Hashtag groups: a command drawing all its keys from one of them runs on one shard.
const GROUPS: &[&[&str]] = &[
    &["{a}0", "{a}1", "{a}2", "{a}3"],
    &["{b}0", "{b}1", "{b}2"],
    &["{t}a", "{t}b"],
];

/// Keys a family's commands prefer (half of the time), so that fewer of them fail with
/// WRONGTYPE: each set spans several shards and hashtag groups.
const STRING_KEYS: &[&str] = &[
    "k0",
    "k1",
    "{a}0",
    "{b}0",
    "k8",
    "a-key-longer-than-sixteen-bytes:0",
];
const LIST_KEYS: &[&str] = &["k2", "k3", "{a}1", "{b}1", "k9", ""];
const HASH_KEYS: &[&str] = &[
    "k4",
    "{a}2",
    "{t}a",
    "k10",
    "a-key-longer-than-sixteen-bytes:1",
];
const SET_KEYS: &[&str] = &["k5", "k6", "{a}3", "{b}2", "k11"];
const ZSET_KEYS: &[&str] = &["k7", "{t}b", "k1", "bin\x00\u{7f}", "{a}0"];

/// The preferred keys of the family whose table holds `spec`.
fn family_keys(spec: &Spec) -> &'static [&'static str] {
    let has = |t: &[Spec]| t.iter().any(|x| std::ptr::eq(x, spec));
    if has(list::SPECS) {
        LIST_KEYS
    } else if has(hash::SPECS) {
        HASH_KEYS
    } else if has(set::SPECS) {
        SET_KEYS
    } else if has(zset::SPECS) {
        ZSET_KEYS
    } else {
        STRING_KEYS
    }
}

/// Elements of the small collections the family generators build (so big commands hit them).
const SMALL: &[&str] = &["a", "b", "c", "d", "1", "2", "-1", "10", "300", "x y", ""];

/// Optional specs whose replies are deterministic (or normalised by `norm_for`) only as
/// generated: the runner's mangling could drop a count and make them random, so they are sent
/// unmangled. (ZRANK/ZREVRANK: Redis 7.0's arity, see `gen/zset.rs`.)
const UNMANGLED: &[&str] = &[
    "zrank",
    "zrevrank",
    "hrandfield",
    "hrandfield_values",
    "hscan",
    "sscan",
    "srandmember",
    "spop",
    "zrandmember",
    "zrandmember_ws",
    "zrandmember_edge",
    "zscan",
];

/// A pipeline with a forced 65535..65540-argument command is one of a seed's first this many.
const HUGE_WITHIN: u64 = 10;

fn bs(s: String) -> Vec<u8> {
    s.into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Pipeline generation.

/// One command of a pipeline.
#[derive(Clone, PartialEq, Debug)]
struct Cmd {
    args: Vec<Vec<u8>>,
    norm: Norm,
    /// What produced it: a spec name or one of the fuzzer's own kinds.
    what: &'static str,
}

fn c(args: Vec<Vec<u8>>, what: &'static str) -> Cmd {
    Cmd {
        args,
        norm: Norm::Exact,
        what,
    }
}

fn cn(args: Vec<Vec<u8>>, norm: Norm, what: &'static str) -> Cmd {
    Cmd { args, norm, what }
}

/// The spec tables as the fuzzer uses them.
struct Specs {
    all: Vec<&'static Spec>,
    total: u64,
    /// Everything but MULTI/EXEC/DISCARD (for the inside of a MULTI unit).
    inner: Vec<&'static Spec>,
    inner_total: u64,
}

impl Specs {
    fn new() -> Specs {
        let all: Vec<&Spec> = all_specs().collect();
        let inner: Vec<&Spec> = all
            .iter()
            .copied()
            .filter(|s| !["multi", "exec", "discard"].contains(&s.name))
            .collect();
        let sum = |v: &[&Spec]| v.iter().map(|s| s.weight as u64).sum();
        Specs {
            total: sum(&all),
            inner_total: sum(&inner),
            all,
            inner,
        }
    }
}

fn pick_spec(g: &mut G, specs: &[&'static Spec], total: u64) -> &'static Spec {
    let mut pick = g.below(total);
    for s in specs {
        if pick < s.weight as u64 {
            return s;
        }
        pick -= s.weight as u64;
    }
    specs[0]
}

fn positive(a: Option<&Vec<u8>>) -> Option<i64> {
    let n: i64 = std::str::from_utf8(a?).ok()?.parse().ok()?;
    (n > 0).then_some(n)
}

/// The norm for a generated command: the spec's, except for the random-reply optional specs,
/// whose sound normalisations depend on the count asked for (their collections can be far
/// bigger than the count here, so a reply can be a random subset or a partial scan).
fn norm_for(spec: &Spec, args: &[Vec<u8>]) -> Norm {
    let withvalues = args.len() > 3;
    match spec.name {
        "srandmember" | "zrandmember" => positive(args.get(2)).map_or(spec.norm, Norm::Sample),
        "hrandfield" if !withvalues => positive(args.get(2)).map_or(spec.norm, Norm::Sample),
        "hrandfield_values" | "zrandmember_ws" => {
            positive(args.get(2)).map_or(spec.norm, Norm::SamplePairs)
        }
        "hscan" | "zscan" | "sscan" => Norm::Scan {
            pairs: spec.name != "sscan",
            from_start: args.get(2).is_some_and(|c| c == b"0"),
        },
        _ => norm_of(spec, args),
    }
}

/// One command from the spec tables (sometimes with all its keys in one hashtag group or among
/// its family's keys), mangled like the differential test's unless it is in `UNMANGLED`.
fn regular(g: &mut G, specs: &[&'static Spec], total: u64) -> Vec<Cmd> {
    let spec = pick_spec(g, specs, total);
    match g.below(100) {
        0..=14 => {
            let grp = *g.pick(GROUPS);
            g.focus(Some(grp));
        }
        15..=59 => g.focus(Some(family_keys(spec))),
        _ => {}
    }
    let mut args = (spec.gen)(g);
    g.focus(None);
    if !UNMANGLED.contains(&spec.name) {
        args = mangle(g, args);
    }
    if spec.name == "spop" && positive(args.get(2)).is_some() {
        // SPOP with a count below the set's size pops random members (the states would
        // diverge): ask for more than any set here has, which pops the whole set.
        args[2] = b("1000000");
    }
    let norm = norm_for(spec, &args);
    let mut out = vec![cn(args, norm, spec.name)];
    // As in differential.rs: SET ... EXAT/PXAT in the past leaves a logically expired key that
    // Redis counts in DBSIZE until active expiry samples it; EXISTS reclaims it on both sides.
    let a = &out[0].args;
    if a.len() > 1
        && a[0].eq_ignore_ascii_case(b"set")
        && a.iter()
            .any(|x| x.eq_ignore_ascii_case(b"exat") || x.eq_ignore_ascii_case(b"pxat"))
    {
        let k = a[1].clone();
        out.push(c(vec![b("EXISTS"), k], "exists-after-set-exat"));
    }
    out
}

/// Argument count to aim for: around 256 (255/256/257), 512, 1024, anywhere up to 5000, or
/// (`huge`) 65535..65539.
fn target_argc(g: &mut G, huge: bool) -> usize {
    if huge {
        return (65535 + g.range(0, 4)) as usize;
    }
    (match g.below(20) {
        0..=7 => 256 + g.range(-3, 3),
        8..=10 => 512 + g.range(-2, 2),
        11 => 1024 + g.range(-2, 2),
        _ => g.range(258, 5000),
    }) as usize
}

/// How many variadic items (of `per` arguments each) make at least `argc` arguments (at most
/// `per - 1` more) after `fixed`.
fn items(argc: usize, fixed: usize, per: usize) -> usize {
    argc.saturating_sub(fixed).div_ceil(per).max(1)
}

/// Element shapes for big collections: integers (intsets, listpack ints), `m<i mod n>`
/// (duplicates), the small generators' elements, `many<i>` (hash.rs's field names).
struct Elems {
    style: u64,
    base: i64,
    modulo: usize,
}

impl Elems {
    fn new(g: &mut G) -> Elems {
        Elems {
            style: g.below(5),
            base: if g.chance(20) {
                1 << 40
            } else {
                g.range(-100, 100)
            },
            modulo: g.range(50, 20_000) as usize,
        }
    }
    fn get(&self, g: &mut G, i: usize) -> Vec<u8> {
        match self.style {
            0 => bs((self.base + i as i64).to_string()),
            1 => bs(format!("m{}", i % self.modulo)),
            2 => g.pk(SMALL),
            3 => bs(format!("many{}", i % 530)),
            _ => bs(format!("e{i}")),
        }
    }
}

/// `n` keys for a multi-key command. Pool keys (all of them or, for set/zset algebra whose cost
/// grows with every existing input, at most `live`) and missing keys for the rest; with a
/// group, all in that hashtag group (one shard).
fn key_list(
    g: &mut G,
    n: usize,
    live: usize,
    group: Option<&'static [&'static str]>,
) -> Vec<Vec<u8>> {
    let tag = group.map_or("", |grp| &grp[0][..3]);
    let mut left = live;
    (0..n)
        .map(|_| {
            if left > 0 && (n <= live || (g.below(n as u64) as usize) < live) {
                left -= 1;
                match group {
                    Some(grp) => g.pk(grp),
                    None => g.key(),
                }
            } else {
                bs(format!("{tag}nokey:{}", g.below(40)))
            }
        })
        .collect()
}

fn zscore(g: &mut G, i: usize) -> Vec<u8> {
    match g.below(4) {
        0 => bs(g.range(-5, 10).to_string()),
        1 => bs(format!("{}.5", i % 1000)),
        _ => bs(i.to_string()),
    }
}

/// A push/add making `key` non-empty (or failing with WRONGTYPE), so a blocking pop of it
/// right after cannot block.
fn feed(g: &mut G, key: &[u8], zset: bool) -> Cmd {
    if zset {
        let m = g.pk(SMALL);
        let s = g.range(-5, 10).to_string();
        c(vec![b("ZADD"), key.to_vec(), bs(s), m], "feed")
    } else {
        let name = if g.chance(50) { "RPUSH" } else { "LPUSH" };
        let mut a = vec![b(name), key.to_vec()];
        for _ in 0..g.range(1, 3) {
            a.push(g.pk(SMALL));
        }
        c(a, "feed")
    }
}

/// A variadic command of about `target_argc` arguments (a unit of one or two commands).
fn big(g: &mut G, huge: bool) -> Vec<Cmd> {
    let argc = target_argc(g, huge);
    let el = Elems::new(g);
    let group = if g.chance(20) {
        Some(*g.pick(GROUPS))
    } else {
        None
    };
    // (A huge command is never an LPOS, whose arguments are few.)
    let kind = loop {
        let k = g.below(40);
        if !(huge && (36..=37).contains(&k)) {
            break k;
        }
    };
    // Half of the time the family's keys (fewer WRONGTYPE errors), unless in a hashtag group.
    let fam = match kind {
        0..=3 | 36..=37 => Some(LIST_KEYS),
        4..=9 | 28..=30 => Some(SET_KEYS),
        10..=15 => Some(HASH_KEYS),
        16..=21 | 31..=33 => Some(ZSET_KEYS),
        22..=23 => Some(STRING_KEYS),
        _ => None,
    };
    if group.is_none() && g.chance(50) {
        g.focus(fam);
    }
    let out = big_kind(g, kind, argc, &el, group, huge);
    g.focus(None);
    out
}

/// `big`'s commands by kind.
fn big_kind(
    g: &mut G,
    kind: u64,
    argc: usize,
    el: &Elems,
    group: Option<&'static [&'static str]>,
    huge: bool,
) -> Vec<Cmd> {
    let key = |g: &mut G| match group {
        Some(grp) => g.pk(grp),
        None => g.key(),
    };
    // One command in 30 with the last argument dropped (pairs become odd: arity/syntax errors).
    let drop_last = |g: &mut G, mut a: Vec<Vec<u8>>| {
        if !huge && g.chance(3) {
            a.pop();
        }
        a
    };
    match kind {
        // Single-key variadic writes and reads: the commands squashing batches.
        0..=3 => {
            let name = *g.pick(&["RPUSH", "LPUSH", "RPUSH", "LPUSH", "RPUSHX", "LPUSHX"]);
            let mut a = vec![b(name), key(g)];
            for i in 0..items(argc, 2, 1) {
                a.push(el.get(g, i));
            }
            vec![c(a, "big-push")]
        }
        4..=9 => {
            let name = *g.pick(&["SADD", "SADD", "SREM", "SMISMEMBER"]);
            let mut a = vec![b(name), key(g)];
            for i in 0..items(argc, 2, 1) {
                a.push(el.get(g, i));
            }
            vec![c(a, "big-set")]
        }
        10..=15 => {
            let name = *g.pick(&["HSET", "HSET", "HMSET", "HDEL", "HMGET"]);
            let mut a = vec![b(name), key(g)];
            if name.starts_with("HD") || name.starts_with("HMG") {
                for i in 0..items(argc, 2, 1) {
                    a.push(el.get(g, i));
                }
                vec![c(a, "big-hash")]
            } else {
                for i in 0..items(argc, 2, 2) {
                    a.push(el.get(g, i));
                    a.push(if g.chance(90) {
                        bs(i.to_string())
                    } else {
                        g.value()
                    });
                }
                vec![c(drop_last(g, a), "big-hash")]
            }
        }
        16..=21 => {
            let name = *g.pick(&["ZADD", "ZADD", "ZREM", "ZMSCORE"]);
            let mut a = vec![b(name), key(g)];
            if name == "ZADD" {
                if g.chance(15) {
                    a.push(g.pk(&["NX", "XX", "GT", "LT", "CH"]));
                }
                let bad = if g.chance(3) {
                    Some(g.below(items(argc, a.len(), 2) as u64) as usize)
                } else {
                    None
                };
                for i in 0..items(argc, a.len(), 2) {
                    a.push(if bad == Some(i) {
                        b("notafloat")
                    } else {
                        zscore(g, i)
                    });
                    a.push(el.get(g, i));
                }
                vec![c(drop_last(g, a), "big-zset")]
            } else {
                for i in 0..items(argc, 2, 1) {
                    a.push(el.get(g, i));
                }
                vec![c(a, "big-zset")]
            }
        }
        // Multi-key commands over many keys.
        22..=23 => {
            let name = *g.pick(&["MSET", "MSET", "MSETNX"]);
            let n = items(argc, 1, 2);
            let keys = key_list(g, n, n, group);
            let mut a = vec![b(name)];
            for (i, k) in keys.into_iter().enumerate() {
                a.push(k);
                a.push(if g.chance(90) {
                    bs(i.to_string())
                } else {
                    g.value()
                });
            }
            vec![c(drop_last(g, a), "big-mset")]
        }
        24..=27 => {
            let name = *g.pick(&[
                "MGET",
                "MGET",
                "DEL",
                "EXISTS",
                "TOUCH",
                "UNLINK",
                "WATCH",
                "PUBSUB NUMSUB",
                "PUBSUB SHARDNUMSUB",
            ]);
            let mut a: Vec<Vec<u8>> = name.split(' ').map(b).collect();
            let n = items(argc, a.len(), 1);
            a.extend(key_list(g, n, n, group));
            vec![c(a, "big-keys")]
        }
        28..=30 => {
            let name = *g.pick(&[
                "SINTERSTORE",
                "SUNIONSTORE",
                "SDIFFSTORE",
                "SUNION",
                "SINTER",
                "SDIFF",
                "SINTERCARD",
            ]);
            let mut a = vec![b(name)];
            if name.ends_with("STORE") {
                a.push(key(g));
            }
            let card = name == "SINTERCARD";
            let n = items(argc, a.len() + card as usize, 1);
            if card {
                a.push(bs(n.to_string()));
            }
            a.extend(key_list(g, n, 12, group));
            if card && g.chance(40) {
                a.push(b("LIMIT"));
                a.push(bs(g.range(0, 5).to_string()));
            }
            let norm = if name.ends_with("STORE") || card {
                Norm::Exact
            } else {
                Norm::Sorted
            };
            vec![cn(a, norm, "big-setop")]
        }
        31..=33 => {
            let name = *g.pick(&[
                "ZUNIONSTORE",
                "ZINTERSTORE",
                "ZDIFFSTORE",
                "ZUNION",
                "ZINTER",
                "ZDIFF",
                "ZINTERCARD",
            ]);
            let mut a = vec![b(name)];
            if name.ends_with("STORE") {
                a.push(key(g));
            }
            let weights = !name.starts_with("ZDIFF") && name != "ZINTERCARD" && g.chance(40);
            let n = items(argc, a.len() + 1, if weights { 2 } else { 1 });
            a.push(bs(n.to_string()));
            a.extend(key_list(g, n, 12, group));
            if weights {
                a.push(b("WEIGHTS"));
                for _ in 0..n {
                    a.push(bs(g.range(-2, 3).to_string()));
                }
                if g.chance(30) {
                    a.push(b("AGGREGATE"));
                    a.push(g.pk(&["SUM", "MIN", "MAX"]));
                }
            }
            if !name.ends_with("STORE") && name != "ZINTERCARD" && g.chance(40) {
                a.push(b("WITHSCORES"));
            }
            vec![c(a, "big-zsetop")]
        }
        34 => {
            let (name, end) = if g.chance(50) {
                ("LMPOP", g.pk(&["LEFT", "RIGHT"]))
            } else {
                ("ZMPOP", g.pk(&["MIN", "MAX"]))
            };
            let n = items(argc, 3, 1);
            let mut a = vec![b(name), bs(n.to_string())];
            a.extend(key_list(g, n, n, group));
            a.push(end);
            if g.chance(50) {
                a.push(b("COUNT"));
                a.push(bs(g.range(1, 600).to_string()));
            }
            vec![c(a, "big-mpop")]
        }
        35 => {
            // Blocking pops over many keys, timeout 0, right after a push to the first key.
            let n = items(argc, 2, 1);
            let keys = key_list(g, n, n, group);
            let first = keys[0].clone();
            let (a, zset) = match g.below(4) {
                0 => (
                    [vec![g.pk(&["BLPOP", "BRPOP"])], keys, vec![b("0")]].concat(),
                    false,
                ),
                1 => (
                    [vec![g.pk(&["BZPOPMIN", "BZPOPMAX"])], keys, vec![b("0")]].concat(),
                    true,
                ),
                2 => (
                    [
                        vec![b("BLMPOP"), b("0"), bs(n.to_string())],
                        keys,
                        vec![g.pk(&["LEFT", "RIGHT"])],
                    ]
                    .concat(),
                    false,
                ),
                _ => (
                    [
                        vec![b("BZMPOP"), b("0"), bs(n.to_string())],
                        keys,
                        vec![g.pk(&["MIN", "MAX"]), b("COUNT"), b("3")],
                    ]
                    .concat(),
                    true,
                ),
            };
            vec![feed(g, &first, zset), c(a, "big-blocking")]
        }
        36..=37 => {
            // Big replies from one command: LPOS ... COUNT 0 on a (maybe big) list.
            let i = g.below(600) as usize;
            let mut a = vec![b("LPOS"), key(g), el.get(g, i)];
            if g.chance(40) {
                a.push(b("RANK"));
                a.push(g.pk(&["1", "-1", "2", "-3"]));
            }
            a.push(b("COUNT"));
            a.push(b("0"));
            if g.chance(30) {
                a.push(b("MAXLEN"));
                a.push(g.pk(&["0", "100", "1000"]));
            }
            vec![c(a, "big-lpos")]
        }
        _ => {
            let op = g.pk(&["AND", "OR", "XOR"]);
            let n = items(argc, 3, 1);
            let mut a = vec![b("BITOP"), op, key(g)];
            a.extend(key_list(g, n, n, group));
            vec![c(a, "big-bitop")]
        }
    }
}

/// The first key a blocking command waits on.
fn first_blocking_key(a: &[Vec<u8>]) -> Vec<u8> {
    let name = a[0].to_ascii_uppercase();
    if name == b"BLMPOP" || name == b"BZMPOP" {
        a[3].clone()
    } else {
        a[1].clone()
    }
}

/// A blocking command with timeout 0 right after a push/add to its first key.
fn blocking_pair(g: &mut G) -> Vec<Cmd> {
    let a = g_blocking(g);
    let zset = a[0].starts_with(b"BZ");
    let first = first_blocking_key(&a);
    vec![feed(g, &first, zset), c(a, "blocking0")]
}

/// MULTI, a few commands, a blocking command with timeout 0 (queued: never blocks), EXEC or
/// DISCARD. Safe inside an open transaction too (the nested MULTI is an error, the rest queue).
fn multi_unit(g: &mut G, specs: &Specs) -> Vec<Cmd> {
    let mut out = vec![c(vec![b("MULTI")], "multi-unit")];
    for _ in 0..g.below(4) {
        out.extend(regular(g, &specs.inner, specs.inner_total));
    }
    out.push(c(g_blocking(g), "blocking0"));
    if g.chance(85) {
        out.push(cn(vec![b("EXEC")], Norm::Exec, "multi-unit"));
    } else {
        out.push(c(vec![b("DISCARD")], "multi-unit"));
    }
    out
}

/// Unknown commands and subcommands, connection commands (squashing barriers). Their error
/// texts echo the arguments byte for byte.
fn misc(g: &mut G) -> Vec<Cmd> {
    let a = match g.below(10) {
        // Replication commands a client may send a primary without becoming a replica (SYNC
        // and PSYNC only with wrong arities; REPLCONF ACK has no reply).
        8 | 9 => {
            let line = g.pk(&[
                "WAIT 0 0",
                "WAIT 1 1",
                "WAIT -1 0",
                "WAIT x 0",
                "WAIT 0 -1",
                "WAIT 0 x",
                "REPLCONF",
                "REPLCONF a",
                "REPLCONF listening-port 6380",
                "REPLCONF listening-port x",
                "REPLCONF capa eof capa psync2",
                "REPLCONF bogus x",
                "ROLE",
                "ROLE x",
                "REPLICAOF NO ONE",
                "SLAVEOF no one",
                "REPLICAOF 127.0.0.1 notaport",
                "REPLICAOF 127.0.0.1 70000",
                "REPLICAOF a",
                "PSYNC a",
                "SYNC x",
                // FAILOVER without replicas: only its argument checks and refusals.
                "FAILOVER",
                "FAILOVER ABORT",
                "FAILOVER TIMEOUT 0",
                "FAILOVER TIMEOUT x",
                "FAILOVER TIMEOUT 10 TIMEOUT 20",
                "FAILOVER TO 127.0.0.1 x",
                "FAILOVER TO 127.0.0.1",
                "FAILOVER FORCE FORCE",
                "FAILOVER FORCE",
                "FAILOVER bogus",
            ]);
            line.split(|&c| c == b' ').map(|w| w.to_vec()).collect()
        }
        0..=3 => {
            let name = g.pk(&[
                "NOSUCHCMD",
                "GETT",
                "hsett",
                "x",
                "LPUSHH",
                "ZADD2",
                "FOO.BAR",
                "FOO\u{e9}",
            ]);
            let mut a = vec![name];
            for _ in 0..g.below(4) {
                a.push(if g.chance(50) { g.key() } else { g.value() });
            }
            a
        }
        4 => vec![b("OBJECT"), g.pk(&["BOGUS", "encodingx"]), g.key()],
        5 => vec![b("PING")],
        6 => vec![b("ECHO"), g.value()],
        _ => vec![b("PING"), g.value()],
    };
    vec![c(a, "misc")]
}

/// One pipeline: about `depth` commands in units that are never split; with `huge`, one unit
/// is a command of 65535..65540 arguments.
fn gen_pipeline(g: &mut G, specs: &Specs, huge: bool) -> Vec<Cmd> {
    let depth = match g.below(10) {
        0..=2 => g.range(1, 10),
        3..=6 => g.range(10, 100),
        _ => g.range(100, 500),
    } as usize;
    let mut units: Vec<Vec<Cmd>> = Vec::new();
    let mut n = 0;
    while n < depth {
        let unit = match g.below(1000) {
            0..=39 => {
                let huge = g.below(1000) < 3;
                big(g, huge)
            }
            40..=59 => blocking_pair(g),
            60..=69 => multi_unit(g, specs),
            70..=84 => misc(g),
            _ => regular(g, &specs.all, specs.total),
        };
        n += unit.len();
        units.push(unit);
    }
    if huge {
        let at = g.below(units.len() as u64 + 1) as usize;
        let unit = big(g, true);
        units.insert(at, unit);
    }
    units.into_iter().flatten().collect()
}

// ---------------------------------------------------------------------------------------------
// Running.

struct Pair {
    /// Kept alive (killed on drop).
    _redis: Server,
    dfly: Server,
    /// The fuzzed connections.
    rc: RawConn,
    dc: RawConn,
    /// Connections for the state checks.
    rchk: RawConn,
    dchk: RawConn,
}

fn start_pair(threads: u64) -> Pair {
    let redis = RedisServer::start();
    let t = format!("--proactor_threads={threads}");
    let dfly = Server::start(&[&t]);
    let conn = |s: &Server| {
        let c = s.raw_conn();
        c.stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .expect("set_write_timeout");
        c
    };
    Pair {
        rc: conn(&redis),
        dc: conn(&dfly),
        rchk: conn(&redis),
        dchk: conn(&dfly),
        _redis: redis,
        dfly,
    }
}

type Replies = Vec<Result<Resp, String>>;

fn read_n(conn: &mut RawConn, n: usize) -> Replies {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match conn.try_read() {
            Ok(r) => out.push(Ok(r)),
            Err(e) => {
                out.push(Err(e));
                while out.len() < n {
                    out.push(Err("not read (an earlier reply failed)".into()));
                }
            }
        }
    }
    out
}

/// Sends `cmds` as one write to each side (from writer threads, so neither side's replies can
/// stall the other's input), then reads all replies of both.
fn exchange(rc: &mut RawConn, dc: &mut RawConn, cmds: &[Vec<Vec<u8>>]) -> (Replies, Replies) {
    let mut bytes = Vec::new();
    for a in cmds {
        bytes.extend(encode(a));
    }
    let rs = rc.stream.try_clone().expect("clone stream");
    let ds = dc.stream.try_clone().expect("clone stream");
    std::thread::scope(|s| {
        let bytes = &bytes;
        let wr = s.spawn(move || (&rs).write_all(bytes));
        let wd = s.spawn(move || (&ds).write_all(bytes));
        let r = read_n(rc, cmds.len());
        let d = read_n(dc, cmds.len());
        let _ = wr.join();
        let _ = wd.join();
        (r, d)
    })
}

fn show(x: &Result<Resp, String>) -> String {
    let s = match x {
        // (Error texts with odd bytes quoted, so they show which bytes differ.)
        Ok(Resp::Error(e)) if !e.iter().all(|c| (0x20..0x7f).contains(c)) => {
            format!("(error) {}", common::quote(e))
        }
        Ok(v) => v.to_string(),
        Err(e) => format!("<{e}>"),
    };
    clip(s, 1500)
}

fn clip(s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} chars)", &s[..cut], s.len())
}

/// A command for humans: long ones abbreviated with their argument count.
fn fmt_short(args: &[Vec<u8>]) -> String {
    if args.len() <= 16 {
        return clip(fmt_cmd(args), 600);
    }
    format!(
        "{} ... {} [{} args]",
        clip(fmt_cmd(&args[..10]), 400),
        clip(fmt_cmd(&args[args.len() - 3..]), 200),
        args.len()
    )
}

/// Per-run counters, printed at the end.
#[derive(Default)]
struct Stats {
    seeds: u64,
    pipelines: u64,
    commands: u64,
    bytes: u64,
    max_depth: usize,
    /// Commands with 256+ arguments, 65535+ arguments, and the largest count.
    big: u64,
    huge: u64,
    max_argc: usize,
    /// Replies that were errors (from the reference), and how many of them WRONGTYPE.
    errors: u64,
    wrongtype: u64,
    /// Blocking commands with timeout 0 sent.
    blocking0: u64,
    /// Single-key commands with 256+ arguments run outside MULTI next to a single-key command
    /// on another shard (what pipeline squashing batches), and the pipelines holding one.
    squash_big: u64,
    squash_big_pipelines: u64,
    full_checks: u64,
    /// SORTs where Redis 7.0's stale-errno bug answered an error (see `redis_stale_errno_sort`).
    redis_errno_sorts: u64,
}

/// Damselfly's key positions (from COMMAND): name -> first key index for commands whose keys
/// are exactly one argument (first == last, no movable keys) — the ones squashing batches.
fn single_key_commands(conn: &mut RawConn) -> HashMap<Vec<u8>, usize> {
    let mut out = HashMap::new();
    if let Resp::Array(cmds) = conn.cmd(&["COMMAND"]) {
        for e in cmds {
            let Resp::Array(v) = e else { continue };
            let (Some(name), Some(first), Some(last)) = (
                v.first().and_then(|x| x.as_bytes()),
                v.get(3).and_then(|x| x.as_int()),
                v.get(4).and_then(|x| x.as_int()),
            ) else {
                continue;
            };
            let movable = matches!(v.get(2), Some(Resp::Array(f))
                if f.iter().any(|x| x.as_bytes() == Some(&b"movablekeys"[..])));
            if first > 0 && first == last && !movable {
                out.insert(name.to_ascii_lowercase(), first as usize);
            }
        }
    }
    out
}

/// Counts the squashable big commands of a pipeline (see `Stats::squash_big`).
fn note_squash(
    stats: &mut Stats,
    single: &HashMap<Vec<u8>, usize>,
    threads: usize,
    cmds: &[Cmd],
    replies: &Replies,
) {
    // Shard of each command that squashing could batch (single key, arity ok, not queued).
    let shard: Vec<Option<usize>> = cmds
        .iter()
        .zip(replies)
        .map(|(cmd, r)| {
            let first = *single.get(&cmd.args[0].to_ascii_lowercase())?;
            let queued = matches!(r, Ok(Resp::Simple(s)) if s == b"QUEUED");
            let arity = matches!(r, Ok(Resp::Error(e)) if e.starts_with(b"ERR wrong number"));
            if queued || arity || first >= cmd.args.len() {
                return None;
            }
            Some(shard_of(&cmd.args[first], threads))
        })
        .collect();
    let mut found = false;
    for i in 0..cmds.len() {
        let Some(me) = shard[i] else { continue };
        if cmds[i].args.len() < 256 {
            continue;
        }
        let other = |j: usize| matches!(shard.get(j), Some(Some(s)) if *s != me);
        if (i > 0 && other(i - 1)) || other(i + 1) {
            stats.squash_big += 1;
            found = true;
        }
    }
    stats.squash_big_pipelines += found as u64;
}

struct Ctx<'a> {
    seed: u64,
    pipeline: u64,
    pipelines: u64,
    threads: u64,
    cmds: &'a [Cmd],
    redis_replies: &'a Replies,
}

impl Ctx<'_> {
    /// The report for a mismatch at command `at` of the pipeline (or after it: `at == len`).
    fn report(&self, what: String, at: usize, dfly_log: &str) -> String {
        let n = env_u64("PIPE_CTX", 25) as usize;
        let ctx: Vec<String> = (at.saturating_sub(n)..at.min(self.cmds.len()))
            .map(|i| {
                format!(
                    "#{i} {} -> {}",
                    fmt_short(&self.cmds[i].args),
                    clip(show(&self.redis_replies[i]), 200)
                )
            })
            .collect();
        let lines: Vec<&str> = dfly_log.lines().collect();
        format!(
            "\n==== pipeline fuzz mismatch ====\nseed {}, pipeline {} ({} commands)\n{what}\n\
             ---- preceding commands of this pipeline (reply from redis) ----\n{}\n\
             reproduce: PIPE_SEED={} PIPE_PIPELINES={} PIPE_THREADS={} cargo test -p damselfly --test pipeline_fuzz -- --nocapture\n\
             damselfly log tail:\n{}",
            self.seed,
            self.pipeline,
            self.cmds.len(),
            ctx.join("\n"),
            self.seed,
            self.pipelines,
            self.threads,
            lines[lines.len().saturating_sub(20)..].join("\n"),
        )
    }
}

/// Redis 7.0's SORT checks `errno == ERANGE` after `strtod` without clearing errno first, so
/// after any earlier command left ERANGE behind (a cursor or number out of range, e.g.
/// `SSCAN k 18446744073709551616`; errno survives until some other libc call fails, so an
/// earlier pipeline of the same connection counts too), a numeric SORT of perfectly valid
/// elements fails with "One or more scores can't be converted into double" (reproduce:
/// `SADD s 18`, then in one write `SSCAN x 18446744073709551616` and `SORT s`). Damselfly sorts
/// them. Accepted only in exactly that shape: a SORT/SORT_RO, Redis's error, damselfly's array,
/// and an out-of-range number among the earlier arguments (this pipeline's, or `tainted`: an
/// earlier pipeline had one).
fn redis_stale_errno_sort(
    tainted: bool,
    before: &[Cmd],
    args: &[Vec<u8>],
    redis: &Result<Resp, String>,
    dfly: &Result<Resp, String>,
) -> bool {
    let is_sort = args[0].eq_ignore_ascii_case(b"sort") || args[0].eq_ignore_ascii_case(b"sort_ro");
    let scores_err = matches!(redis, Ok(Resp::Error(e))
        if e == b"ERR One or more scores can't be converted into double");
    is_sort
        && scores_err
        && matches!(dfly, Ok(Resp::Array(_)))
        && (tainted || before.iter().any(sets_erange))
}

/// Does `cmd` carry a number that a C parser rejects with ERANGE (19+ digits, or an exponent of
/// 3+ digits)? See `redis_stale_errno_sort`.
fn sets_erange(cmd: &Cmd) -> bool {
    let out_of_range = |a: &[u8]| {
        let digits = a.strip_prefix(b"-").unwrap_or(a);
        let long_int = digits.len() >= 19 && digits.iter().all(u8::is_ascii_digit);
        let big_exp = a
            .iter()
            .position(|&c| c == b'e' || c == b'E')
            .is_some_and(|p| {
                let e = &a[p + 1..];
                let e = e.strip_prefix(b"-").or(e.strip_prefix(b"+")).unwrap_or(e);
                e.len() >= 3 && e.iter().all(u8::is_ascii_digit)
            });
        long_int || big_exp
    };
    cmd.args.iter().skip(1).any(|a| out_of_range(a))
}

/// For a mismatch report: the type and contents, on both sides, of every argument of the
/// diverging command that names a key now (after the whole pipeline ran).
fn describe_keys(pair: &mut Pair, args: &[Vec<u8>]) -> String {
    let mut out = String::from("---- keys named by that command, after the pipeline ----");
    for a in args.iter().skip(1).take(8) {
        let ty = |c: &mut RawConn| match c.cmd(&[b("TYPE"), a.clone()]) {
            Resp::Simple(t) => t,
            _ => b"?".to_vec(),
        };
        let (rt, dt) = (ty(&mut pair.rchk), ty(&mut pair.dchk));
        if rt == b"none" && dt == b"none" {
            continue;
        }
        let (rq, _) = dump_cmd(&rt, a);
        let (dq, _) = dump_cmd(&dt, a);
        out.push_str(&format!(
            "\n{}: redis {} {}; damselfly {} {}",
            common::quote(a),
            String::from_utf8_lossy(&rt),
            pair.rchk.cmd(&rq),
            String::from_utf8_lossy(&dt),
            pair.dchk.cmd(&dq)
        ));
    }
    out
}

/// DBSIZE of databases 0-3 on both sides (the check connections).
fn check_dbsize(pair: &mut Pair) -> Result<(), String> {
    let mut cmds = Vec::new();
    for db in 0..4 {
        cmds.push(vec![b("SELECT"), bs(db.to_string())]);
        cmds.push(vec![b("DBSIZE")]);
    }
    let (r, d) = exchange(&mut pair.rchk, &mut pair.dchk, &cmds);
    for i in 0..cmds.len() {
        if r[i] != d[i] || r[i].is_err() {
            return Err(format!(
                "after the pipeline: {} (db {}): redis {}, damselfly {}",
                fmt_cmd(&cmds[i]),
                i / 2,
                show(&r[i]),
                show(&d[i])
            ));
        }
    }
    Ok(())
}

/// The whole keyspace of databases 0-3: KEYS *, then every key's type, value and TTL.
fn check_all(pair: &mut Pair) -> Result<(), String> {
    for db in 0..4 {
        let sel = vec![b("SELECT"), bs(db.to_string())];
        let cmds = vec![sel.clone(), vec![b("KEYS"), b("*")]];
        let (r, d) = exchange(&mut pair.rchk, &mut pair.dchk, &cmds);
        let same = matches!((&r[1], &d[1]), (Ok(x), Ok(y)) if norm_eq(Norm::Sorted, x, y, &[]));
        if !same {
            return Err(format!(
                "state check, db {db}: KEYS *: redis {}, damselfly {}",
                show(&r[1]),
                show(&d[1])
            ));
        }
        let Ok(Resp::Array(keys)) = &r[1] else {
            return Err(format!("state check: KEYS * answered {}", show(&r[1])));
        };
        let keys: Vec<Vec<u8>> = keys
            .iter()
            .filter_map(|k| k.as_bytes())
            .map(<[u8]>::to_vec)
            .collect();
        // Types first (the reference's type picks the dump command), then values and TTLs.
        let mut cmds = vec![sel.clone()];
        cmds.extend(keys.iter().map(|k| vec![b("TYPE"), k.clone()]));
        let (r, d) = exchange(&mut pair.rchk, &mut pair.dchk, &cmds);
        let mut dumps = vec![(sel, Norm::Exact)];
        for (i, k) in keys.iter().enumerate() {
            if r[i + 1] != d[i + 1] || r[i + 1].is_err() {
                return Err(format!(
                    "state check, db {db}: TYPE {}: redis {}, damselfly {}",
                    fmt_cmd(std::slice::from_ref(k)),
                    show(&r[i + 1]),
                    show(&d[i + 1])
                ));
            }
            let ty = match &r[i + 1] {
                Ok(Resp::Simple(t)) => t.clone(),
                _ => b("string"),
            };
            dumps.push(dump_cmd(&ty, k));
            dumps.push((vec![b("TTL"), k.clone()], Norm::Ttl(2)));
        }
        let cmds: Vec<Vec<Vec<u8>>> = dumps.iter().map(|(a, _)| a.clone()).collect();
        let (r, d) = exchange(&mut pair.rchk, &mut pair.dchk, &cmds);
        for (i, (a, norm)) in dumps.iter().enumerate() {
            let ok = matches!((&r[i], &d[i]), (Ok(x), Ok(y)) if norm_eq(*norm, x, y, &[]));
            if !ok {
                return Err(format!(
                    "state check, db {db}: {}: redis {}, damselfly {}",
                    fmt_short(a),
                    show(&r[i]),
                    show(&d[i])
                ));
            }
        }
    }
    Ok(())
}

struct Opts {
    pipelines: u64,
    threads: u64,
    dump_every: u64,
}

/// Runs one seed on fresh servers; the mismatch report on failure.
fn run_seed(seed: u64, opts: &Opts, specs: &Specs, stats: &mut Stats) -> Result<(), String> {
    let base_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut pair = start_pair(opts.threads);
    let single = single_key_commands(&mut pair.dchk);
    let mut g = G::with_pool(seed, base_s, POOL, HOT);
    let huge_at = g.below(HUGE_WITHIN);
    // Norms of the commands queued since MULTI (for comparing EXEC's array).
    let mut queued: Vec<Norm> = Vec::new();
    let mut trace = std::env::var_os("PIPE_TRACE")
        .map(|path| std::fs::File::create(path).expect("PIPE_TRACE file"));
    stats.seeds += 1;
    // An earlier pipeline sent a number that leaves ERANGE in Redis's errno.
    let mut erange = false;
    for p in 0..opts.pipelines {
        let cmds = gen_pipeline(&mut g, specs, p == huge_at);
        let args: Vec<Vec<Vec<u8>>> = cmds.iter().map(|c| c.args.clone()).collect();
        let (r, d) = exchange(&mut pair.rc, &mut pair.dc, &args);
        if let Some(log) = trace.as_mut() {
            // PIPE_TRACE=file: every command with both replies, for hunting a divergence that
            // started in an earlier pipeline.
            for (i, a) in args.iter().enumerate() {
                let _ = writeln!(
                    log,
                    "p{p} #{i} {} -> redis {} | damselfly {}",
                    fmt_short(a),
                    show(&r[i]),
                    show(&d[i])
                );
            }
        }
        let ctx = Ctx {
            seed,
            pipeline: p,
            pipelines: opts.pipelines,
            threads: opts.threads,
            cmds: &cmds,
            redis_replies: &r,
        };
        stats.pipelines += 1;
        stats.max_depth = stats.max_depth.max(cmds.len());
        for (i, cmd) in cmds.iter().enumerate() {
            stats.commands += 1;
            stats.bytes += cmd.args.iter().map(|a| a.len() as u64).sum::<u64>();
            let argc = cmd.args.len();
            stats.big += (argc >= 256) as u64;
            stats.huge += (argc >= 65535) as u64;
            stats.max_argc = stats.max_argc.max(argc);
            stats.blocking0 += (cmd.what == "blocking0" || cmd.what == "big-blocking") as u64;
            stats.errors += matches!(r[i], Ok(Resp::Error(_))) as u64;
            stats.wrongtype +=
                matches!(&r[i], Ok(Resp::Error(e)) if e.starts_with(b"WRONGTYPE")) as u64;
            let mut ok = match (&r[i], &d[i]) {
                (Ok(x), Ok(y)) => norm_eq(cmd.norm, x, y, &queued),
                _ => false,
            };
            if !ok && redis_stale_errno_sort(erange, &cmds[..i], &cmd.args, &r[i], &d[i]) {
                stats.redis_errno_sorts += 1;
                ok = true;
            }
            if !ok {
                let what = format!(
                    "command #{i} ({}): {}\nredis:     {}\ndamselfly: {}",
                    cmd.what,
                    fmt_short(&cmd.args),
                    show(&r[i]),
                    show(&d[i])
                );
                let what = format!("{what}\n{}", describe_keys(&mut pair, &cmd.args));
                if let Some(secs) = std::env::var("PIPE_HOLD").ok().and_then(|v| v.parse().ok()) {
                    // PIPE_HOLD=N: keep both servers up N seconds to inspect them by hand.
                    eprintln!(
                        "holding for {secs} s: redis on port {}, damselfly on port {}",
                        pair._redis.port(),
                        pair.dfly.port()
                    );
                    std::thread::sleep(Duration::from_secs(secs));
                }
                return Err(ctx.report(what, i, &pair.dfly.output()));
            }
            track_queue(&mut queued, &cmd.args, cmd.norm, r[i].as_ref().ok());
        }
        erange |= cmds.iter().any(sets_erange);
        note_squash(stats, &single, opts.threads as usize, &cmds, &r);
        let full = (p + 1) % opts.dump_every == 0 || p + 1 == opts.pipelines;
        let checked = check_dbsize(&mut pair).and_then(|()| {
            if full {
                stats.full_checks += 1;
                check_all(&mut pair)
            } else {
                Ok(())
            }
        });
        if let Err(what) = checked {
            return Err(ctx.report(what, cmds.len(), &pair.dfly.output()));
        }
    }
    if let Some(secs) = std::env::var("PIPE_HOLD_END")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        // PIPE_HOLD_END=N: keep both servers up N seconds after the seed's last pipeline.
        eprintln!(
            "holding for {secs} s: redis on port {}, damselfly on port {}",
            pair._redis.port(),
            pair.dfly.port()
        );
        std::thread::sleep(Duration::from_secs(secs));
    }
    if !pair.dfly.alive() {
        return Err(format!(
            "seed {seed}: damselfly exited\n{}",
            pair.dfly.output()
        ));
    }
    Ok(())
}

#[test]
fn pipeline_fuzz_against_redis() {
    let opts = Opts {
        pipelines: env_u64("PIPE_PIPELINES", 25),
        threads: env_u64("PIPE_THREADS", 4),
        dump_every: env_u64("PIPE_DUMP_EVERY", 5).max(1),
    };
    let minutes = env_u64("PIPE_MINUTES", 0);
    let one = std::env::var("PIPE_SEED")
        .ok()
        .map(|s| s.trim().parse::<u64>().expect("PIPE_SEED must be a number"));
    // Sanity: the hot keys spread over every shard (else "consecutive commands on different
    // shards" would not hold). Checked for the CI configuration; other thread counts just say.
    let shards = |keys: &[&str]| {
        keys.iter()
            .map(|k| shard_of(k.as_bytes(), opts.threads as usize))
            .collect::<std::collections::BTreeSet<usize>>()
            .len()
    };
    if opts.threads == 4 {
        assert_eq!(
            shards(&POOL[..HOT]),
            4,
            "the hot keys miss a shard: change POOL"
        );
    } else if shards(POOL) < opts.threads as usize {
        eprintln!(
            "note: the key pool covers {} of {} shards",
            shards(POOL),
            opts.threads
        );
    }
    let specs = Specs::new();
    let mut stats = Stats::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(minutes * 60);
    let seeds: Box<dyn Iterator<Item = u64>> = match (one, minutes) {
        (Some(s), _) => Box::new(std::iter::once(s)),
        (None, 0) => Box::new(1..=env_u64("PIPE_SEEDS", 4)),
        (None, _) => {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let mut g = G::new(t ^ std::process::id() as u64, 0);
            Box::new(std::iter::repeat_with(move || g.next() % 1_000_000_000_000))
        }
    };
    eprintln!(
        "pipeline fuzz: {} pipelines per seed, {} threads, {} specs{}",
        opts.pipelines,
        opts.threads,
        specs.all.len(),
        if minutes > 0 && one.is_none() {
            format!(", fresh seeds for {minutes} minutes")
        } else {
            String::new()
        }
    );
    for seed in seeds {
        if minutes > 0 && one.is_none() && Instant::now() >= deadline {
            break;
        }
        let before = stats.commands;
        if let Err(report) = run_seed(seed, &opts, &specs, &mut stats) {
            panic!(
                "{report}\n(commands sent before the failure: {})",
                stats.commands
            );
        }
        eprintln!(
            "  seed {seed}: ok, {} commands ({:.1}s elapsed)",
            stats.commands - before,
            started.elapsed().as_secs_f64()
        );
    }
    eprintln!(
        "pipeline fuzz: {} seeds, {} pipelines (deepest {}), {} commands sent ({:.1} MB of \
         arguments) in {:.1}s; {} with 256+ arguments, {} with 65535+ (largest {}); \
         {} squashable single-key commands with 256+ arguments next to a single-key command on \
         another shard, in {} pipelines; {} zero-timeout blocking commands; {} error replies ({} WRONGTYPE); \
         {} full keyspace comparisons; {} SORTs hit Redis's stale-errno bug",
        stats.seeds,
        stats.pipelines,
        stats.max_depth,
        stats.commands,
        stats.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        stats.big,
        stats.huge,
        stats.max_argc,
        stats.squash_big,
        stats.squash_big_pipelines,
        stats.blocking0,
        stats.errors,
        stats.wrongtype,
        stats.full_checks,
        stats.redis_errno_sorts,
    );
    // The run must have exercised what it exists for (a generator change that loses it fails).
    if opts.pipelines >= HUGE_WITHIN && opts.threads > 1 {
        assert!(
            stats.huge >= stats.seeds,
            "a seed sent no 65535+ argument command"
        );
        assert!(
            stats.squash_big_pipelines >= stats.seeds,
            "too few pipelines with squashable big commands"
        );
    }
}

/// Same seed, same pipelines.
#[test]
fn pipelines_are_deterministic() {
    let specs = Specs::new();
    let gen = |seed| {
        let mut g = G::with_pool(seed, 1_700_000_000, POOL, HOT);
        (0..8)
            .map(|p| gen_pipeline(&mut g, &specs, p == 3))
            .collect::<Vec<_>>()
    };
    let a = gen(7);
    assert_eq!(a, gen(7));
    assert_ne!(a, gen(8));
    assert!(a[3].iter().any(|c| c.args.len() >= 65535));
}

/// SORT ... ALPHA without STORE: Redis's order of elements that tie under `strcoll` ("a" and
/// "a\0b") is its hash table's, random per process (seen as a divergence in a long run:
/// `SORT k DESC ALPHA` of a sorted set {"a\0b", "", "a"} answered in either order). The norm
/// accepts exactly those permutations.
#[test]
fn sort_alpha_ties_norm() {
    let spec = Specs::new()
        .all
        .iter()
        .copied()
        .find(|s| s.name == "sort")
        .expect("a SORT spec");
    let args = |line: &str| -> Vec<Vec<u8>> {
        line.split(' ')
            .map(|a| a.replace("\\0", "\0").into_bytes())
            .collect()
    };
    let arr = |items: &[&str]| {
        Resp::Array(
            items
                .iter()
                .map(|s| common::bulk(&s.replace("\\0", "\0")))
                .collect(),
        )
    };
    let eq = |line: &str, x: &[&str], y: &[&str]| {
        let n = norm_of(spec, &args(line));
        norm_eq(n, &arr(x), &arr(y), &[])
    };
    // Tied elements in either order; nothing else moves.
    assert!(eq(
        "SORT k DESC ALPHA",
        &["a", "a\\0b", ""],
        &["a\\0b", "a", ""]
    ));
    assert!(!eq("SORT k DESC ALPHA", &["a", "b", ""], &["b", "a", ""]));
    assert!(!eq(
        "SORT k DESC ALPHA",
        &["a", "a\\0b", ""],
        &["a\\0b", "a"]
    ));
    assert!(!eq("SORT k ALPHA", &["a", "a\\0b"], &["a", "a\\0c"]));
    // Binary comparison with STORE, and numeric sorts, stay exact.
    assert!(!eq(
        "SORT k ALPHA STORE d",
        &["a", "a\\0b"],
        &["a\\0b", "a"]
    ));
    assert!(!eq("SORT k", &["a", "a\\0b"], &["a\\0b", "a"]));
    // BY a pattern without `*` does not sort: a set comes in its table order (found by a long
    // run: a mangled `SORT_RO {a}3 BY junk` of a 250-member set). Same members in any order; a
    // LIMIT window of that order has only its length to compare.
    assert!(eq("SORT k BY junk", &["a", "b", "c"], &["c", "a", "b"]));
    assert!(!eq("SORT k BY junk", &["a", "b", "c"], &["c", "a", "d"]));
    assert!(eq("SORT k BY nosort LIMIT 0 2", &["a", "b"], &["c", "a"]));
    assert!(!eq("SORT k BY nosort LIMIT 0 2", &["a", "b"], &["c"]));
    assert!(!eq("SORT k BY w_*", &["a", "b"], &["b", "a"]));
    // With GET: chunks move together, the GET # column decides.
    assert!(eq(
        "SORT k ALPHA GET w_* GET #",
        &["1", "a", "2", "a\\0b"],
        &["2", "a\\0b", "1", "a"]
    ));
    assert!(!eq(
        "SORT k ALPHA GET w_* GET #",
        &["1", "a", "2", "a\\0b"],
        &["1", "a\\0b", "2", "a"]
    ));
    // With LIMIT the window may hold either tied element.
    assert!(eq("SORT k ALPHA LIMIT 0 1", &["a"], &["a\\0b"]));
    assert!(!eq("SORT k ALPHA LIMIT 0 1", &["a"], &["b"]));
}
