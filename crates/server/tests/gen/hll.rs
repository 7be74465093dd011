//! Differential generators for the HyperLogLog commands (see `gen/mod.rs`; run by
//! `differential.rs` and `pipeline_fuzz.rs`). Every reply is compared exactly, and `pfget`
//! compares the HLL bytes themselves (sparse and dense forms must be Redis's byte for byte).
//!
//! The commands mostly use keys of their own ([`HLL_KEYS`]), which the string generators never
//! SETRANGE: on a corrupted HLL Redis's sparse code reads the string's NUL terminator and its
//! results are not something to copy byte for byte (corrupted HLLs are covered by Redis's own
//! fuzz test in unit/hyperloglog: an error, never a crash). One time in six they use the
//! shared keys, for the type errors.

use super::*;

pub static SPECS: &[Spec] = &[
    s("pfadd", 10, g_pfadd),
    s("pfcount", 6, g_pfcount),
    s("pfmerge", 3, g_pfmerge),
    s("pfdebug", 2, g_pfdebug),
    s("pfget", 3, g_pfget),
];

pub const HLL_KEYS: &[&str] = &["h0", "h1", "h2", "{t}h"];

/// GET of an HLL key: the bytes compared exactly.
fn g_pfget(g: &mut G) -> Vec<Vec<u8>> {
    g.own_keys(HLL_KEYS, |g| cmd("GET", vec![g.key()]))
}

/// An element: a small pool (so adds often change nothing), numbers, or generic values.
fn element(g: &mut G) -> Vec<u8> {
    match g.below(10) {
        0..=3 => g.pk(&["a", "b", "c", "d", "e", "", "\x00"]),
        4..=6 => g.range(0, 100_000).to_string().into_bytes(),
        _ => g.value(),
    }
}

fn g_pfadd(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![g.own_keys(HLL_KEYS, |g| g.key())];
    // Mostly a few elements; sometimes enough to outgrow the sparse form (3000 bytes).
    let n = match g.below(10) {
        0 => 0,
        1 => 300 + g.below(900),
        _ => 1 + g.below(8),
    };
    for _ in 0..n {
        rest.push(element(g));
    }
    cmd("pfadd", rest)
}

fn g_pfcount(g: &mut G) -> Vec<Vec<u8>> {
    let keys = g.own_keys(HLL_KEYS, |g| g.keys(1, 3));
    cmd("pfcount", keys)
}

fn g_pfmerge(g: &mut G) -> Vec<Vec<u8>> {
    let keys = g.own_keys(HLL_KEYS, |g| g.keys(1, 4));
    cmd("pfmerge", keys)
}

fn g_pfdebug(g: &mut G) -> Vec<Vec<u8>> {
    let sub = g.pk(&[
        "encoding", "decode", "todense", "ENCODING", "getreg", "nosuch",
    ]);
    let key = g.own_keys(HLL_KEYS, |g| g.key());
    cmd("pfdebug", vec![sub, key])
}
