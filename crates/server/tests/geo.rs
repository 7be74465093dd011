//! Geo commands end to end, against a real redis-server 7.0: every command is sent to both
//! servers (damselfly with 4 shards) and the parsed replies must be identical, error texts
//! byte for byte. Coordinates, distances, hashes and the order of results (ties included, with
//! COUNT's partial sort) are Redis's own, so nothing is normalised.
//!
//! - `fixed_cases`: options, replies and error texts of every command, WRONGTYPE, odd scores.
//! - `randomized_against_redis`: seeded random geo sets (worldwide, near the poles, around the
//!   antimeridian, duplicate positions) and random searches with every option combination,
//!   STORE/STOREDIST across shards, malformed variants; RESP2 and RESP3.
//!   `GEO_SEEDS=a,b,c` and `GEO_STEPS=n` override the seeds and the length.
//! - `large_variadic_geoadd`: 10k members in one GEOADD, then searches over them.
//! - `store_across_shards_in_multi`: STORE forms with source and destination on different
//!   shards, inside MULTI/EXEC too.

mod common;

use common::{RawConn, RedisServer, Resp, Server};
use damselfly::engine::shard_of;

const THREADS: usize = 4;

/// One damselfly and one redis-server, with a RESP2 and a RESP3 connection to each.
struct Pair {
    _redis: Server,
    _dfly: Server,
    r2: RawConn,
    d2: RawConn,
    r3: RawConn,
    d3: RawConn,
    history: Vec<String>,
    /// Replies seen: (errors, arrays of two or more elements, all).
    stats: (usize, usize, usize),
}

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.is_empty() || s.contains(' ') {
                format!("{s:?}")
            } else {
                s.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Pair {
    fn start() -> Pair {
        let redis = RedisServer::start();
        let dfly = Server::start_threads(THREADS, &[]);
        let (r2, d2) = (redis.raw_conn(), dfly.raw_conn());
        let (mut r3, mut d3) = (redis.raw_conn(), dfly.raw_conn());
        for c in [&mut r3, &mut d3] {
            let hello = c.cmd(&["HELLO", "3"]);
            assert!(!hello.is_error(), "{hello}");
        }
        Pair {
            _redis: redis,
            _dfly: dfly,
            r2,
            d2,
            r3,
            d3,
            history: Vec::new(),
            stats: (0, 0, 0),
        }
    }

    /// Sends `args` to both servers (over RESP3 when `resp3`) and asserts equal replies.
    fn both_on(&mut self, args: &[Vec<u8>], resp3: bool, ctx: &str) -> Resp {
        let (r, d) = if resp3 {
            (&mut self.r3, &mut self.d3)
        } else {
            (&mut self.r2, &mut self.d2)
        };
        r.send(args);
        d.send(args);
        let rr = r.read();
        let dr = d.read();
        let line = format!("{}{}", if resp3 { "[3] " } else { "" }, show(args));
        if rr != dr {
            let tail: Vec<&String> = self.history.iter().rev().take(15).collect();
            panic!(
                "{ctx}: replies differ\ncommand: {line}\nredis: {}\ndfly : {}\nlast commands (newest first):\n{}",
                trunc(&rr.to_string()),
                trunc(&dr.to_string()),
                tail.iter()
                    .map(|s| format!("  {s}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        self.stats.2 += 1;
        match &rr {
            Resp::Error(e) => {
                self.stats.0 += 1;
                if std::env::var("GEO_DEBUG").is_ok() {
                    eprintln!("ERR {}", String::from_utf8_lossy(e));
                }
            }
            Resp::Array(v) if v.len() >= 2 => self.stats.1 += 1,
            _ => {}
        }
        let mut h = line;
        h.push_str(" -> ");
        h.push_str(&trunc(&rr.to_string()));
        self.history.push(h);
        if self.history.len() > 200 {
            self.history.drain(..100);
        }
        rr
    }

    fn both(&mut self, args: &[Vec<u8>]) -> Resp {
        self.both_on(args, false, "")
    }

    fn q(&mut self, line: &str) -> Resp {
        self.both(&words(line))
    }
}

fn trunc(s: &str) -> String {
    if s.len() > 3000 {
        let mut end = 3000;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &s[..end], s.len())
    } else {
        s.to_string()
    }
}

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

/// `n` distinct key names, each on a shard of its own when `n` <= THREADS (then repeating).
fn keys_on_shards(prefix: &str, n: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while out.len() < n {
        let k = format!("{prefix}:{i}");
        i += 1;
        let s = shard_of(k.as_bytes(), THREADS);
        let used = out
            .iter()
            .filter(|o| shard_of(o.as_bytes(), THREADS) == s)
            .count();
        if used * THREADS <= out.len() {
            out.push(k);
        }
    }
    out
}

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

const LAT_LIMIT: f64 = 85.05112878;

/// A coordinate as a client might type it: few or many decimals, or Rust's shortest form.
fn num(g: &mut Rng, v: f64) -> String {
    match g.below(4) {
        0 => format!("{v}"),
        1 => format!("{:.*}", g.below(4) as usize, v),
        _ => format!("{:.*}", 4 + g.below(11) as usize, v),
    }
}

/// Where points crowd (dense results, distance ties): near a pole, on the antimeridian, in
/// Sicily, at the origin.
const CLUSTERS: &[(f64, f64)] = &[
    (179.8, 0.0),
    (-179.9, 45.0),
    (0.0, 84.9),
    (120.0, -84.5),
    (13.36, 38.11),
    (0.0, 0.0),
];

/// A position: worldwide, near a pole, around the antimeridian, on an edge of the range, or
/// around one of the [`CLUSTERS`].
fn position(g: &mut Rng) -> (f64, f64) {
    if g.chance(0.35) {
        let (cx, cy) = *g.pick(CLUSTERS);
        let spread = *g.pick(&[0.01, 0.1, 0.5]);
        let mut x = cx + g.between(-spread, spread);
        if x > 180.0 {
            x -= 360.0;
        } else if x < -180.0 {
            x += 360.0;
        }
        let y = (cy + g.between(-spread, spread)).clamp(-LAT_LIMIT, LAT_LIMIT);
        return (x, y);
    }
    match g.below(10) {
        0 | 1 => (g.between(-180.0, 180.0), g.between(78.0, LAT_LIMIT)),
        2 => (g.between(-180.0, 180.0), -g.between(78.0, LAT_LIMIT)),
        3 | 4 => {
            let lon = 180.0 - g.between(0.0, 1.5);
            let lon = if g.chance(0.5) { lon } else { -lon };
            (lon, g.between(-LAT_LIMIT, LAT_LIMIT))
        }
        5 => (
            *g.pick(&[-180.0, 180.0, 0.0, 179.9999999, -179.9999999]),
            *g.pick(&[LAT_LIMIT, -LAT_LIMIT, 0.0, 85.0, -85.0, 66.0, 80.0]),
        ),
        _ => (g.between(-180.0, 180.0), g.between(-LAT_LIMIT, LAT_LIMIT)),
    }
}

fn position_args(g: &mut Rng) -> (String, String) {
    let (lon, lat) = position(g);
    (num(g, lon), num(g, lat))
}

/// A distance of random magnitude (a few meters to the whole planet) in a random unit.
fn distance(g: &mut Rng) -> (String, &'static str) {
    let meters = if g.chance(0.05) {
        0.0
    } else if g.chance(0.2) {
        10f64.powf(g.between(0.0, 3.0))
    } else {
        10f64.powf(g.between(3.0, 7.3))
    };
    let (unit, per) = *g.pick(&[("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)]);
    let unit = if g.chance(0.1) {
        match unit {
            "km" => "KM",
            "mi" => "Mi",
            u => u,
        }
    } else {
        unit
    };
    (num(g, meters / per), unit)
}

fn member_name(g: &mut Rng, n: usize) -> String {
    format!("m{}", g.below(n as u64))
}

/// The keys of a randomized run: geo sets (on different shards), STORE destinations (on every
/// shard), and how many member names there are.
struct World {
    keys: Vec<String>,
    dsts: Vec<String>,
    members: usize,
    /// Names GEOADDed to each key (some maybe refused or removed since).
    added: Vec<Vec<String>>,
}

impl World {
    /// A member name for `key`: mostly one added to it, sometimes any (maybe missing).
    fn member_of(&self, g: &mut Rng, key: &str) -> String {
        let i = self.keys.iter().position(|k| k == key);
        match i.map(|i| &self.added[i]) {
            Some(v) if !v.is_empty() && g.chance(0.85) => g.pick(v).clone(),
            _ => member_name(g, self.members + 3),
        }
    }
}

/// Random search options (WITH*, ASC/DESC, COUNT [ANY], STORE key / STOREDIST key from
/// `store`, GEOSEARCHSTORE's bare STOREDIST), shuffled. WITH* options come with a STORE only
/// rarely (an error).
fn options(
    g: &mut Rng,
    storing: bool,
    store: Option<&[String]>,
    storedist_flag: bool,
) -> Vec<Vec<String>> {
    let mut opts: Vec<Vec<String>> = Vec::new();
    if !storing || g.chance(0.05) {
        for w in ["WITHDIST", "WITHHASH", "WITHCOORD"] {
            if g.chance(0.4) {
                opts.push(vec![if g.chance(0.2) {
                    w.to_lowercase()
                } else {
                    w.to_string()
                }]);
            }
        }
    }
    match g.below(4) {
        0 => opts.push(vec!["ASC".into()]),
        1 => opts.push(vec!["DESC".into()]),
        _ => {}
    }
    if g.chance(0.5) {
        let n = if g.chance(0.8) {
            1 + g.below(12)
        } else {
            1 + g.below(5000)
        };
        let mut c = vec!["COUNT".to_string(), n.to_string()];
        if g.chance(0.4) {
            c.push("ANY".into());
        }
        opts.push(c);
    }
    if let Some(dsts) = store.filter(|d| !d.is_empty()) {
        let kw = if g.chance(0.5) { "STORE" } else { "STOREDIST" };
        opts.push(vec![kw.to_string(), g.pick(dsts).clone()]);
    }
    if storedist_flag && g.chance(0.5) {
        opts.push(vec!["STOREDIST".into()]);
    }
    // Shuffle.
    for i in (1..opts.len()).rev() {
        let j = g.below(i as u64 + 1) as usize;
        opts.swap(i, j);
    }
    opts
}

fn flatten(head: Vec<String>, opts: Vec<Vec<String>>) -> Vec<Vec<u8>> {
    head.into_iter()
        .chain(opts.into_iter().flatten())
        .map(String::into_bytes)
        .collect()
}

/// One random search command (any of the seven search commands).
fn search_command(g: &mut Rng, w: &World) -> Vec<Vec<u8>> {
    let key = g.pick(&w.keys).clone();
    let member = w.member_of(g, &key);
    let shape = |g: &mut Rng| -> Vec<String> {
        if g.chance(0.5) {
            let (d, u) = distance(g);
            vec!["BYRADIUS".into(), d, u.into()]
        } else {
            let (wd, u) = distance(g);
            // The same unit for both sides.
            let (h, _) = distance(g);
            vec!["BYBOX".into(), wd, h, u.into()]
        }
    };
    let from = |g: &mut Rng, member: &str| -> Vec<String> {
        if g.chance(0.4) {
            vec!["FROMMEMBER".into(), member.to_string()]
        } else {
            let (x, y) = position_args(g);
            vec!["FROMLONLAT".into(), x, y]
        }
    };
    match g.below(7) {
        0 | 1 => {
            let mut head = vec!["GEOSEARCH".to_string(), key];
            let (a, b) = (from(g, &member), shape(g));
            if g.chance(0.5) {
                head.extend(a);
                let o = options(g, false, None, false);
                return flatten(head.into_iter().chain(b).collect(), o);
            }
            head.extend(b);
            head.extend(a);
            let o = options(g, false, None, false);
            flatten(head, o)
        }
        2 => {
            let dst = g.pick(&w.dsts).clone();
            let mut head = vec!["GEOSEARCHSTORE".to_string(), dst, key];
            head.extend(from(g, &member));
            head.extend(shape(g));
            let o = options(g, true, None, true);
            flatten(head, o)
        }
        3 | 4 => {
            let name = if g.chance(0.3) {
                "GEORADIUS_RO"
            } else {
                "GEORADIUS"
            };
            let (x, y) = position_args(g);
            let (d, u) = distance(g);
            let store = (name == "GEORADIUS" && g.chance(0.35)).then_some(&w.dsts[..]);
            let o = options(g, store.is_some(), store, false);
            flatten(vec![name.into(), key, x, y, d, u.into()], o)
        }
        _ => {
            let name = if g.chance(0.3) {
                "GEORADIUSBYMEMBER_RO"
            } else {
                "GEORADIUSBYMEMBER"
            };
            let (d, u) = distance(g);
            let store = (name == "GEORADIUSBYMEMBER" && g.chance(0.35)).then_some(&w.dsts[..]);
            let o = options(g, store.is_some(), store, false);
            flatten(vec![name.into(), key, member, d, u.into()], o)
        }
    }
}

/// Breaks a command now and then: an argument dropped, replaced or added.
fn mangle(g: &mut Rng, mut cmd: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    const JUNK: &[&str] = &[
        "x",
        "-1",
        "0",
        "inf",
        "-inf",
        "1e400",
        "nan",
        "",
        "store",
        "storedist",
        "count",
        "any",
        "withdist",
        "bybox",
        "byradius",
        "frommember",
        "fromlonlat",
        "km",
        "asc",
        "181",
        "-86",
        "str",
    ];
    match g.below(3) {
        0 if cmd.len() > 2 => {
            let i = 1 + g.below(cmd.len() as u64 - 1) as usize;
            cmd.remove(i);
        }
        1 => {
            let i = 1 + g.below(cmd.len() as u64 - 1) as usize;
            cmd[i] = g.pick(JUNK).as_bytes().to_vec();
        }
        _ => {
            let i = 1 + g.below(cmd.len() as u64) as usize;
            cmd.insert(i, g.pick(JUNK).as_bytes().to_vec());
        }
    }
    cmd
}

/// GEOADD of `n` random members (some at the same position as others: distance ties). A
/// `fill` always succeeds (no options, coordinates in their exact shortest form); otherwise
/// options come at random and rounded coordinates may fall out of range.
fn geoadd_command(
    g: &mut Rng,
    key: &str,
    (members, n, fill): (usize, usize, bool),
    names: &mut Vec<String>,
) -> Vec<Vec<u8>> {
    let mut cmd = vec!["GEOADD".to_string(), key.to_string()];
    for o in ["NX", "XX", "CH"] {
        if !fill && g.chance(0.15) {
            cmd.push(o.into());
        }
    }
    let mut last: Option<(String, String)> = None;
    for _ in 0..n {
        let (x, y) = match &last {
            Some(p) if g.chance(0.15) => p.clone(),
            _ if fill => {
                let (x, y) = position(g);
                (format!("{x}"), format!("{y}"))
            }
            _ => position_args(g),
        };
        cmd.push(x.clone());
        cmd.push(y.clone());
        let m = member_name(g, members);
        names.push(m.clone());
        cmd.push(m);
        last = Some((x, y));
    }
    cmd.into_iter().map(String::into_bytes).collect()
}

fn seeds() -> Vec<u64> {
    match std::env::var("GEO_SEEDS") {
        Ok(s) => s.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![1, 2, 3, 4, 5],
    }
}

fn steps() -> usize {
    std::env::var("GEO_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600)
}

#[test]
fn randomized_against_redis() {
    let mut p = Pair::start();
    for seed in seeds() {
        let mut g = Rng::new(seed);
        p.q("FLUSHALL");
        let mut w = World {
            keys: keys_on_shards(&format!("geo{seed}"), 3),
            dsts: keys_on_shards(&format!("dst{seed}"), 5),
            members: 200,
            added: vec![Vec::new(); 3],
        };
        p.q("SET str value");
        // Fill: one small set (listpack), two large ones (skiplist).
        for i in 0..w.keys.len() {
            let n = if i == 0 { 60 } else { 700 };
            let key = w.keys[i].clone();
            let cmd = geoadd_command(&mut g, &key, (w.members, n, true), &mut w.added[i]);
            p.both_on(&cmd, false, &format!("seed {seed} fill"));
        }
        let ctx = format!("seed {seed} (GEO_SEEDS={seed} reproduces it)");
        for _ in 0..steps() {
            let resp3 = g.chance(0.25);
            let cmd = match g.below(20) {
                0 | 1 => {
                    let i = g.below(w.keys.len() as u64) as usize;
                    let n = 1 + g.below(8) as usize;
                    let key = w.keys[i].clone();
                    geoadd_command(&mut g, &key, (w.members, n, false), &mut w.added[i])
                }
                2 => {
                    let key = g.pick(&w.keys).clone();
                    let mut c = vec![b"GEODIST".to_vec(), key.clone().into_bytes()];
                    let (a, b) = (w.member_of(&mut g, &key), w.member_of(&mut g, &key));
                    c.push(a.into_bytes());
                    c.push(b.into_bytes());
                    if g.chance(0.7) {
                        c.push(
                            g.pick(&["m", "km", "ft", "mi", "KM", "yd"])
                                .as_bytes()
                                .to_vec(),
                        );
                    }
                    c
                }
                3 => {
                    let key = g.pick(&w.keys).clone();
                    let name = if g.chance(0.5) { "GEOPOS" } else { "GEOHASH" };
                    let mut c = vec![name.as_bytes().to_vec(), key.clone().into_bytes()];
                    for _ in 0..1 + g.below(5) {
                        c.push(w.member_of(&mut g, &key).into_bytes());
                    }
                    c
                }
                4 => {
                    // A destination read back, or a member removed.
                    if g.chance(0.5) {
                        let d = g.pick(&w.dsts).clone();
                        words(&format!("ZRANGE {d} 0 -1 WITHSCORES"))
                    } else {
                        let key = g.pick(&w.keys).clone();
                        let m = member_name(&mut g, w.members);
                        words(&format!("ZREM {key} {m}"))
                    }
                }
                5 => {
                    // Wrong type, missing keys.
                    let mut c = search_command(&mut g, &w);
                    let at = if c[0] == b"GEOSEARCHSTORE" { 2 } else { 1 };
                    c[at] = if g.chance(0.5) {
                        b"str".to_vec()
                    } else {
                        b"nokey".to_vec()
                    };
                    c
                }
                _ => search_command(&mut g, &w),
            };
            let cmd = if g.chance(0.08) {
                mangle(&mut g, cmd)
            } else {
                cmd
            };
            p.both_on(&cmd, resp3, &ctx);
        }
        // Final state: every key, member by member.
        for k in w.keys.iter().chain(w.dsts.iter()) {
            p.both_on(&words(&format!("ZRANGE {k} 0 -1 WITHSCORES")), false, &ctx);
            p.both_on(&words(&format!("TYPE {k}")), false, &ctx);
        }
    }
    // The generator must keep producing real results, not just errors and empty replies.
    let (errors, multi, all) = p.stats;
    eprintln!("{all} replies compared: {errors} errors, {multi} with several elements");
    assert!(
        multi * 5 > all,
        "too few multi-element replies: {multi} of {all}"
    );
    assert!(errors * 50 > all, "too few errors: {errors} of {all}");
}

#[test]
fn fixed_cases() {
    let mut p = Pair::start();
    let script = r#"
        GEOADD nyc -73.9454966 40.747533 lic_market
        GEOADD nyc -73.9733487 40.7648057 central_park -73.9903085 40.7362513 union_square -74.0131604 40.7126674 wtc_one -73.7858139 40.6428986 jfk -73.9375699 40.7498929 q4 -73.9564142 40.7480973 4545
        ZRANGE nyc 0 -1 WITHSCORES
        GEOADD nyc CH 40.747533 -73.9454966 lic_market
        GEOADD nyc NX -73.9454966 40.747533 lic_market
        GEOADD nyc XX -83.9454966 40.747533 lic_market
        GEOADD nyc CH NX -73.9454966 40.747533 lic_market
        GEOADD nyc CH XX -73.9454966 40.747533 lic_market
        GEOADD nyc xx nx -73.9454966 40.747533 lic_market
        GEOADD nyc ch xx foo -73.9454966 40.747533 lic_market
        GEOADD nyc -73.9454966 40.747533 lic_market foo bar luck_market
        GEOADD nyc -73.9454966 40.747533 lic_market 181 0 x
        GEOADD nyc -73.9454966 40.747533 lic_market 0 85.06 x
        GEOADD nyc 1 2
        GEOADD nyc ch ch ch
        GEOADD nyc GT 1 2 a
        GEOADD nyc 1 2 a 3
        GEOADD nyc 1
        GEOADD newkey XX 1 2 a
        EXISTS newkey
        GEOADD edges 180 85.05112878 ne -180 -85.05112878 sw 0 0 zero -0 -0 negzero
        ZRANGE edges 0 -1 WITHSCORES
        GEOPOS edges ne sw zero negzero missing
        GEOHASH edges ne sw zero negzero missing
        GEORADIUS nyc -73.9798091 40.7598464 3 km asc
        GEORADIUS nyc -73.9798091 40.7598464 3 km WITHDIST WITHHASH WITHCOORD
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 3
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 3 ANY
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 3 ANY ASC
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 2 DESC
        GEORADIUS nyc -73.9798091 40.7598464 10 km ANY ASC
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT 0
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT -3
        GEORADIUS nyc -73.9798091 40.7598464 10 km COUNT x
        GEORADIUS nyc -73.9798091 40.7598464 10 km foo
        GEORADIUS nyc -73.9798091 40.7598464 10 km STORE
        GEORADIUS nyc -73.9798091 40.7598464 10 km STORE out WITHDIST
        GEORADIUS nyc -73.9798091 40.7598464 10 km STORE out WITHHASH
        GEORADIUS nyc -73.9798091 40.7598464 10 km STORE out WITHCOORD
        GEORADIUS nyc -73.9798091 40.7598464 10 km STORE out
        ZRANGE out 0 -1 WITHSCORES
        GEORADIUS nyc -73.9798091 40.7598464 10 km STOREDIST out COUNT 2 DESC
        ZRANGE out 0 -1 WITHSCORES
        GEORADIUS nyc 0 0 1 km STORE out
        EXISTS out
        GEORADIUS nyc 200 0 1 km
        GEORADIUS nyc 0 90 1 km
        GEORADIUS nyc x 0 1 km
        GEORADIUS nyc 0 y 1 km
        GEORADIUS nyc 0 0 -1 km
        GEORADIUS nyc 0 0 r km
        GEORADIUS nyc 0 0 1 parsec
        GEORADIUS nyc 0 0 inf km COUNT 2
        GEORADIUS nyc 0 0 1e400 km
        GEORADIUS nyc 0 0 nan km
        GEORADIUS nyc 0 0 1 km ANY
        GEORADIUS_RO nyc 0 0 1 km STORE out
        GEORADIUS_RO nyc -73.9798091 40.7598464 10 km WITHDIST
        GEORADIUSBYMEMBER nyc wtc_one 7 km
        GEORADIUSBYMEMBER nyc wtc_one 7 km withdist
        GEORADIUSBYMEMBER nyc nosuch 7 km
        GEORADIUSBYMEMBER nyc wtc_one -7 km
        GEORADIUSBYMEMBER nyc wtc_one 7 km STOREDIST out
        ZRANGE out 0 -1 WITHSCORES
        GEORADIUSBYMEMBER_RO nyc wtc_one 7 km STOREDIST out
        GEORADIUSBYMEMBER nokey m x y
        GEORADIUSBYMEMBER nokey m 1 km STORE out
        EXISTS out
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX 6 6 km ASC
        GEOSEARCH nyc FROMMEMBER wtc_one BYBOX 14 14 km
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 FROMMEMBER xxx BYBOX 6 6 km
        GEOSEARCH nyc FROMMEMBER wtc_one FROMMEMBER jfk BYRADIUS 6 km
        GEOSEARCH nyc BYBOX 3 3 km ASC DESC WITHHASH WITHDIST WITHCOORD
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYRADIUS 3 km BYBOX 3 3 km
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYRADIUS 3 km BYRADIUS 30 km
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 ASC
        geosearch nyc FROMLONLAT -73.9798091 40.7598464 ASC
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX 6 6 km STOREDIST
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX 6 6 km STORE x
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX -6 6 km
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX w 6 km
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX 6 h km
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX 6 6 cm
        GEOSEARCH nyc FROMLONLAT -73.9798091 40.7598464 BYBOX 6 6
        GEOSEARCH nyc FROMMEMBER nosuch BYBOX 6 6 km
        GEOSEARCH nokey FROMMEMBER nosuch BYBOX 6 6 km
        GEOSEARCH nyc FROMLONLAT 1 2 BYRADIUS 1 km COUNT 1 ANY WITHDIST
        GEOSEARCHSTORE out nyc FROMMEMBER jfk BYBOX 100 100 km STOREDIST
        ZRANGE out 0 -1 WITHSCORES
        GEOSEARCHSTORE out nyc FROMMEMBER jfk BYBOX 100 100 km WITHDIST
        GEOSEARCHSTORE out nyc FROMMEMBER jfk BYBOX 100 100 km STORE out
        GEOSEARCHSTORE out nyc FROMMEMBER jfk BYBOX 100 100 km COUNT 2
        ZRANGE out 0 -1 WITHSCORES
        GEOSEARCHSTORE out nokey FROMMEMBER jfk BYBOX 100 100 km
        EXISTS out
        GEODIST nyc jfk q4
        GEODIST nyc jfk q4 km
        GEODIST nyc jfk q4 FT
        GEODIST nyc jfk q4 mi
        GEODIST nyc jfk q4 yd
        GEODIST nyc jfk q4 km extra
        GEODIST nyc jfk nosuch
        GEODIST nyc jfk jfk
        GEODIST nokey jfk q4
        GEODIST nokey jfk q4 yd
        SET str value
        GEOADD str 1 1 a
        GEOADD str 181 1 a
        GEOPOS str a
        GEOHASH str a
        GEODIST str a b
        GEODIST str a b yd
        GEORADIUS str 0 0 1 km
        GEORADIUS str 0 0 1 km STORE out
        GEORADIUS str 200 0 1 km
        GEORADIUSBYMEMBER str a 1 km
        GEOSEARCH str FROMMEMBER a BYBOX 1 1 km
        GEOSEARCH str FROMLONLAT 1 1 BYBOX 1 1 km COUNT 0
        GEOSEARCHSTORE out str FROMMEMBER a BYBOX 1 1 km
        GEOSEARCHSTORE str nyc FROMMEMBER jfk BYBOX 100 100 km
        TYPE str
        ZADD weird -1 a inf b -inf c 1e19 d 0.5 e 4503599627370496 f 4503599627370495 g
        GEOPOS weird a b c d e f g
        GEOHASH weird a b c d e f g
        GEODIST weird a b
        GEORADIUS weird 0 0 50000 km WITHHASH WITHCOORD
        GEOSEARCH weird FROMMEMBER f BYRADIUS 1 m WITHCOORD WITHHASH
        GEOADD Sicily 12.758489 38.788135 edge1 17.241510 38.788135 edge2 17.250000 35.202000 edge3 12.750000 35.202000 edge4 12.748489955781654 37 edge5 15 38.798135872540925 edge6 17.251510044218346 37 edge7 15 35.201864127459075 edge8 12.692799634687903 38.798135872540925 corner1 12.692799634687903 38.798135872540925 corner2 17.200560937451133 35.201864127459075 corner3 12.799439062548865 35.201864127459075 corner4
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHDIST
        GEOADD points 179.5 36 point1 -179.5 36 point2
        GEOSEARCH points FROMLONLAT 179 37 BYBOX 400 400 km ASC
        GEOSEARCH points FROMLONLAT -179 37 BYBOX 400 400 km ASC WITHCOORD
        GEOADD k1 45 65 n1 -135 85.05 n2
        GEORADIUSBYMEMBER k1 n1 5009431 m
        GEOADD ties 10 10 a 10 10 b 10 10 c 10 10 d 10 10 e 10 10 f 10 10 g 10 10 h 11 11 z
        GEOSEARCH ties FROMLONLAT 10.5 10.5 BYRADIUS 500 km ASC
        GEOSEARCH ties FROMLONLAT 10.5 10.5 BYRADIUS 500 km DESC
        GEOSEARCH ties FROMLONLAT 10.5 10.5 BYRADIUS 500 km COUNT 3 DESC
        GEOSEARCH ties FROMLONLAT 10.5 10.5 BYRADIUS 500 km COUNT 3
        GEOSEARCH ties FROMLONLAT 10.5 10.5 BYRADIUS 500 km COUNT 3 ANY
    "#;
    for resp3 in [false, true] {
        p.q("FLUSHALL");
        for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
            p.both_on(&words(line), resp3, "fixed_cases");
        }
    }
    // Arity errors.
    for line in [
        "GEOADD k 1 2",
        "GEODIST k a",
        "GEOHASH",
        "GEOPOS",
        "GEORADIUS k 1 2 3",
        "GEORADIUS_RO k 1 2 3",
        "GEORADIUSBYMEMBER k m 1",
        "GEORADIUSBYMEMBER_RO k m 1",
        "GEOSEARCH k FROMLONLAT 1 2",
        "GEOSEARCHSTORE d k FROMLONLAT 1 2 BYRADIUS",
    ] {
        p.q(line);
    }
    // Keyspace notifications for GEOADD and the STORE forms.
    p.q("FLUSHALL");
    p.q("CONFIG SET notify-keyspace-events KEA");
    let mut rs = p._redis.raw_conn();
    let mut ds = p._dfly.raw_conn();
    for c in [&mut rs, &mut ds] {
        c.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    }
    for line in [
        "GEOADD n 1 1 a 2 2 b",
        "GEOADD n NX 1 1 a",
        "GEORADIUS n 1 1 500 km STORE d1",
        "GEOSEARCHSTORE d2 n FROMLONLAT 1 1 BYRADIUS 500 km STOREDIST",
        "GEOSEARCHSTORE d2 n FROMLONLAT 50 50 BYRADIUS 1 km",
        "GEORADIUSBYMEMBER n a 1 m STOREDIST d1",
        "GEORADIUSBYMEMBER nokey a 1 m STOREDIST d1",
        "GEOADD n 3 3 c",
    ] {
        p.q(line);
    }
    p.both(&[
        b"CONFIG".to_vec(),
        b"SET".to_vec(),
        b"notify-keyspace-events".to_vec(),
        Vec::new(),
    ]);
    // Reads events until the reply to a PING and, when `want` is given, until that many
    // events came: damselfly's events raised on other shards' threads may reach the
    // subscriber after its PING's reply (redis-server's are in order).
    let events = |c: &mut RawConn, want: Option<usize>| -> Vec<String> {
        let mut out = Vec::new();
        let mut ponged = false;
        c.send(&["PING"]);
        while !ponged || want.is_some_and(|n| out.len() < n) {
            let m = c.read();
            let (Resp::Array(v) | Resp::Push(v)) = &m else {
                panic!("{m}")
            };
            if v.first().and_then(Resp::as_bytes) == Some(b"pong") {
                ponged = true;
                continue;
            }
            let parts: Vec<String> = v
                .iter()
                .skip(2)
                .map(|x| String::from_utf8_lossy(x.as_bytes().unwrap_or(b"?")).into_owned())
                .collect();
            out.push(parts.join(" "));
        }
        out
    };
    // Compared as sets: events raised on different shards may arrive in another order.
    let mut re = events(&mut rs, None);
    let mut de = events(&mut ds, Some(re.len()));
    re.sort();
    de.sort();
    assert_eq!(de, re, "keyspace events: damselfly (left) vs redis");
    assert!(re.iter().any(|e| e.ends_with(" n") && e.contains(":zadd")));
    assert!(re.iter().any(|e| e.contains(":georadiusstore")));
    assert!(re.iter().any(|e| e.contains(":geosearchstore")));
}

#[test]
fn large_variadic_geoadd() {
    let mut p = Pair::start();
    let mut g = Rng::new(77);
    let mut cmd: Vec<Vec<u8>> = words("GEOADD big");
    let mut names = Vec::new();
    for i in 0..10_000 {
        // (Shortest round-trip text: always inside the limits, unlike a rounded one.)
        let (x, y) = position(&mut g);
        cmd.push(format!("{x}").into_bytes());
        cmd.push(format!("{y}").into_bytes());
        let name = format!("member:{i}");
        cmd.push(name.clone().into_bytes());
        names.push(name);
    }
    assert_eq!(p.both(&cmd), Resp::Int(10_000));
    // The same again: nothing new, nothing changed (CH).
    cmd.insert(2, b"CH".to_vec());
    assert_eq!(p.both(&cmd), Resp::Int(0));
    p.q("ZCARD big");
    p.q("ZRANGE big 0 -1 WITHSCORES");
    let dsts = keys_on_shards("bigdst", 4);
    for step in 0..150 {
        let (x, y) = position_args(&mut g);
        let (d, u) = distance(&mut g);
        let line = match step % 6 {
            0 => format!("GEOSEARCH big FROMLONLAT {x} {y} BYRADIUS {d} {u} WITHDIST WITHCOORD"),
            1 => format!("GEOSEARCH big FROMLONLAT {x} {y} BYBOX {d} {d} {u} ASC COUNT 25"),
            2 => format!("GEORADIUS big {x} {y} {d} {u} DESC COUNT 40 WITHHASH"),
            3 => format!(
                "GEORADIUSBYMEMBER big {} {d} {u} COUNT 10 ANY WITHDIST",
                g.pick(&names)
            ),
            4 => format!(
                "GEORADIUS big {x} {y} {d} {u} COUNT 500 STOREDIST {}",
                g.pick(&dsts)
            ),
            _ => format!(
                "GEOSEARCHSTORE {} big FROMMEMBER {} BYBOX {d} {d} {u} DESC",
                g.pick(&dsts),
                g.pick(&names)
            ),
        };
        p.q(&line);
    }
    let mut pos = words("GEOPOS big");
    let mut hash = words("GEOHASH big");
    for n in names.iter().step_by(7) {
        pos.push(n.clone().into_bytes());
        hash.push(n.clone().into_bytes());
    }
    p.both(&pos);
    p.both(&hash);
    for d in &dsts {
        p.q(&format!("ZRANGE {d} 0 -1 WITHSCORES"));
    }
    // Everything within reach: every member, sorted (ties in Redis's order).
    p.q("GEOSEARCH big FROMLONLAT 0 0 BYRADIUS 30000 km ASC COUNT 10000 WITHDIST");
    p.q("GEORADIUS big 0 0 30000 km DESC COUNT 9999");
}

#[test]
fn store_across_shards_in_multi() {
    let mut p = Pair::start();
    let keys = keys_on_shards("src", 4);
    let (src, d1, d2, d3) = (&keys[0], &keys[1], &keys[2], &keys[3]);
    p.q(&format!(
        "GEOADD {src} 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 2.35 48.85 Paris"
    ));
    for line in [
        format!("GEORADIUS {src} 15 37 200 km STORE {d1}"),
        format!("ZRANGE {d1} 0 -1 WITHSCORES"),
        format!("GEORADIUSBYMEMBER {src} Palermo 2000 km STOREDIST {d2} DESC"),
        format!("ZRANGE {d2} 0 -1 WITHSCORES"),
        format!("GEOSEARCHSTORE {d3} {src} FROMMEMBER Paris BYRADIUS 5000 km STOREDIST COUNT 2"),
        format!("ZRANGE {d3} 0 -1 WITHSCORES"),
        // The last STORE/STOREDIST wins: the first destination stays untouched.
        format!("DEL {d1} {d2} {d3}"),
        format!("GEORADIUS {src} 15 37 5000 km STORE {d1} STOREDIST {d2} STORE {d3}"),
        format!("EXISTS {d1}"),
        format!("EXISTS {d2}"),
        format!("ZRANGE {d3} 0 -1 WITHSCORES"),
        format!("GEORADIUSBYMEMBER {src} Paris 1 km STORE {d1} STORE {d2} STOREDIST {d1}"),
        format!("ZRANGE {d1} 0 -1 WITHSCORES"),
        // An empty result deletes the destination.
        format!("GEORADIUS {src} 0 0 1 km STORE {d3}"),
        format!("EXISTS {d3}"),
        format!("EXPIRE {d1} 1000"),
        format!("GEORADIUS {src} 15 37 5000 km STORE {d1}"),
        format!("TTL {d1}"),
        "MULTI".to_string(),
        format!("GEORADIUS {src} 15 37 200 km STORE {d1}"),
        format!("GEOSEARCHSTORE {d2} {src} FROMLONLAT 15 37 BYBOX 3000 3000 km STOREDIST"),
        format!("GEORADIUSBYMEMBER {src} Paris 10 km STOREDIST {d3} STORE {d1}"),
        format!("ZRANGE {d2} 0 -1 WITHSCORES"),
        format!("GEORADIUS {src} 15 37 200 km WITHDIST"),
        "EXEC".to_string(),
        format!("ZRANGE {d1} 0 -1 WITHSCORES"),
        // The source as its own destination.
        format!(
            "GEOADD {d1} 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 2.35 48.85 Paris"
        ),
        format!("GEORADIUS {d1} 15 37 500 km STOREDIST {d1}"),
        format!("ZRANGE {d1} 0 -1 WITHSCORES"),
        format!("GEOSEARCHSTORE {src} {src} FROMMEMBER Paris BYRADIUS 5000 km COUNT 2 DESC"),
        format!("ZRANGE {src} 0 -1 WITHSCORES"),
        format!("COMMAND GETKEYS GEORADIUS {src} 0 0 1 km STORE {d1} STOREDIST {d2}"),
        format!("COMMAND GETKEYS GEOSEARCHSTORE {d1} {src} FROMLONLAT 0 0 BYRADIUS 1 km"),
    ] {
        p.q(&line);
    }
    // From a script.
    let script = "return redis.call('georadius', KEYS[1], 15, 37, 5000, 'km', 'store', KEYS[2])";
    let eval: Vec<Vec<u8>> = ["EVAL", script, "2", src, d2]
        .iter()
        .map(|a| a.as_bytes().to_vec())
        .collect();
    assert_eq!(p.both(&eval), Resp::Int(2));
    p.q(&format!("ZRANGE {d2} 0 -1 WITHSCORES"));
}
