//! Differential generators for the geo commands (see `gen/mod.rs`; run by `differential.rs`
//! and `pipeline_fuzz.rs`). Replies are compared exactly: coordinates, distances, hashes and
//! the order of results (ties and COUNT's partial sort included) are Redis's own, as
//! `tests/geo.rs` checks in depth (polar and antimeridian sets, every option combination).
//! These generators add the geo commands to the random mixes and pipelines: interleaved with
//! the sorted-set commands on the same keys, type errors, malformed options, STORE destinations
//! on other shards.
//!
//! Members sit in a small cluster (a couple of degrees around one point), so searches of a few
//! hundred kilometres find some of them; one time in six the generators use the shared keys.

use super::*;

pub static SPECS: &[Spec] = &[
    s("geoadd", 14, g_geoadd),
    s("geopos", 3, g_geopos),
    s("geodist", 3, g_geodist),
    s("geohash", 2, g_geohash),
    s("geosearch", 5, g_geosearch),
    s("geosearchstore", 3, g_geosearchstore),
    s("georadius", 2, g_georadius),
    s("georadius_ro", 1, g_georadius_ro),
    s("georadiusbymember", 2, g_georadiusbymember),
    s("georadiusbymember_ro", 1, g_georadiusbymember_ro),
];

pub const GEO_KEYS: &[&str] = &["g0", "g1", "{t}g", "{t}h"];

fn key(g: &mut G) -> Vec<u8> {
    g.own_keys(GEO_KEYS, |g| g.key())
}

/// A member: mostly from a small pool (so adds update and searches find), sometimes odd.
fn member(g: &mut G) -> Vec<u8> {
    match g.below(12) {
        0 => g.value(),
        1 => b"".to_vec(),
        _ => format!("m{}", g.below(10)).into_bytes(),
    }
}

/// A longitude or latitude near the cluster's centre (13.4, 52.5), sometimes a limit, out of
/// range, or not a number.
fn coord(g: &mut G, centre: f64, limit: &str) -> Vec<u8> {
    match g.below(48) {
        0 => limit.as_bytes().to_vec(),
        1 => g.pk(&[
            "181",
            "-180.0000001",
            "85.06",
            "-90",
            "abc",
            "",
            "nan",
            "inf",
        ]),
        2 => g.float_str(),
        _ => {
            let v = centre + g.range(-2000, 2000) as f64 / 1000.0;
            format!("{v:.4}").into_bytes()
        }
    }
}

fn lon(g: &mut G) -> Vec<u8> {
    coord(g, 13.4, "180")
}

fn lat(g: &mut G) -> Vec<u8> {
    coord(g, 52.5, "85.05112878")
}

fn unit(g: &mut G) -> Vec<u8> {
    match g.below(12) {
        0 => g.pk(&["KM", "Mi", "yd", ""]),
        1..=4 => b"km".to_vec(),
        5..=7 => b"m".to_vec(),
        8..=9 => b"mi".to_vec(),
        _ => b"ft".to_vec(),
    }
}

/// A radius or box side in the unit that usually follows: a few hundred km, sometimes zero,
/// negative or not a number.
fn distance(g: &mut G) -> Vec<u8> {
    match g.below(14) {
        0 => g.pk(&["0", "-1", "abc", "1e400"]),
        1..=3 => g.range(1, 2000).to_string().into_bytes(),
        _ => format!("{}.{}", g.range(0, 300_000), g.below(10)).into_bytes(),
    }
}

fn g_geoadd(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g)];
    for opt in ["NX", "XX", "CH"] {
        if g.chance(8) {
            rest.push(opt.as_bytes().to_vec());
        }
    }
    let n = match g.below(20) {
        0 => 0,
        1 => 50 + g.below(200),
        _ => 1 + g.below(4),
    };
    for _ in 0..n {
        rest.push(lon(g));
        rest.push(lat(g));
        rest.push(member(g));
    }
    if g.chance(3) {
        rest.pop();
    }
    cmd("geoadd", rest)
}

fn members_after(g: &mut G, mut rest: Vec<Vec<u8>>, max: u64) -> Vec<Vec<u8>> {
    for _ in 0..g.below(max + 1) {
        rest.push(member(g));
    }
    rest
}

fn g_geopos(g: &mut G) -> Vec<Vec<u8>> {
    let k = key(g);
    cmd("geopos", members_after(g, vec![k], 5))
}

fn g_geohash(g: &mut G) -> Vec<Vec<u8>> {
    let k = key(g);
    cmd("geohash", members_after(g, vec![k], 5))
}

fn g_geodist(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), member(g), member(g)];
    if g.chance(70) {
        rest.push(unit(g));
    }
    if g.chance(3) {
        rest.push(b"extra".to_vec());
    }
    cmd("geodist", rest)
}

/// GEOSEARCH's centre, shape and options (after the key or keys), maybe shuffled a little and
/// sometimes broken. `store`: GEOSEARCHSTORE (WITH* are errors there, STOREDIST allowed).
fn search_args(g: &mut G, store: bool) -> Vec<Vec<u8>> {
    let mut parts: Vec<Vec<Vec<u8>>> = Vec::new();
    match g.below(10) {
        0 => {}
        1..=4 => parts.push(vec![b"FROMMEMBER".to_vec(), member(g)]),
        _ => parts.push(vec![b"FROMLONLAT".to_vec(), lon(g), lat(g)]),
    }
    if g.chance(4) {
        parts.push(vec![b"FROMMEMBER".to_vec(), member(g)]);
    }
    match g.below(10) {
        0 => {}
        1..=5 => parts.push(vec![b"BYRADIUS".to_vec(), distance(g), unit(g)]),
        _ => parts.push(vec![b"BYBOX".to_vec(), distance(g), distance(g), unit(g)]),
    }
    let mut tail: Vec<Vec<Vec<u8>>> = Vec::new();
    if g.chance(40) {
        tail.push(vec![g.pk(&["ASC", "DESC", "asc"])]);
    }
    if g.chance(40) {
        let n = match g.below(8) {
            0 => g.pk(&["0", "-1", "x"]),
            _ => g.range(1, 8).to_string().into_bytes(),
        };
        let mut c = vec![b"COUNT".to_vec(), n];
        if g.chance(25) {
            c.push(b"ANY".to_vec());
        }
        tail.push(c);
    }
    if store {
        if g.chance(30) {
            tail.push(vec![b"STOREDIST".to_vec()]);
        }
        if g.chance(4) {
            tail.push(vec![b"WITHDIST".to_vec()]);
        }
    } else {
        for w in ["WITHCOORD", "WITHDIST", "WITHHASH"] {
            if g.chance(30) {
                tail.push(vec![w.as_bytes().to_vec()]);
            }
        }
    }
    if g.chance(3) {
        tail.push(vec![g.pk(&["ANY", "STORE", "NOSUCH"])]);
    }
    // Options may come in any order; the shape and centre usually first.
    let n = tail.len() as u64;
    if n > 1 {
        for i in 0..n as usize {
            let j = g.below(n) as usize;
            tail.swap(i, j);
        }
    }
    if g.chance(10) && parts.len() > 1 {
        parts.swap(0, 1);
    }
    parts.into_iter().chain(tail).flatten().collect()
}

fn g_geosearch(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g)];
    rest.extend(search_args(g, false));
    cmd("geosearch", rest)
}

fn g_geosearchstore(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), key(g)];
    rest.extend(search_args(g, true));
    cmd("geosearchstore", rest)
}

/// GEORADIUS / GEORADIUSBYMEMBER options after the radius and unit; `store`: STORE/STOREDIST
/// allowed (not the _RO forms, where they are syntax errors; sometimes sent anyway).
fn radius_options(g: &mut G, mut rest: Vec<Vec<u8>>, store: bool) -> Vec<Vec<u8>> {
    rest.push(distance(g));
    rest.push(unit(g));
    for w in ["WITHCOORD", "WITHDIST", "WITHHASH"] {
        if g.chance(25) {
            rest.push(w.as_bytes().to_vec());
        }
    }
    if g.chance(35) {
        rest.push(b"COUNT".to_vec());
        rest.push(g.range(0, 6).to_string().into_bytes());
        if g.chance(20) {
            rest.push(b"ANY".to_vec());
        }
    }
    if g.chance(35) {
        rest.push(g.pk(&["ASC", "DESC"]));
    }
    if (store && g.chance(30)) || g.chance(3) {
        rest.push(g.pk(&["STORE", "STOREDIST"]));
        rest.push(key(g));
    }
    rest
}

fn g_georadius(g: &mut G) -> Vec<Vec<u8>> {
    let rest = vec![key(g), lon(g), lat(g)];
    cmd("georadius", radius_options(g, rest, true))
}

fn g_georadius_ro(g: &mut G) -> Vec<Vec<u8>> {
    let rest = vec![key(g), lon(g), lat(g)];
    cmd("georadius_ro", radius_options(g, rest, false))
}

fn g_georadiusbymember(g: &mut G) -> Vec<Vec<u8>> {
    let rest = vec![key(g), member(g)];
    cmd("georadiusbymember", radius_options(g, rest, true))
}

fn g_georadiusbymember_ro(g: &mut G) -> Vec<Vec<u8>> {
    let rest = vec![key(g), member(g)];
    cmd("georadiusbymember_ro", radius_options(g, rest, false))
}
