//! Differential generators for the HyperLogLog commands (see `gen/mod.rs`; run by
//! `differential.rs` and `pipeline_fuzz.rs`). Every reply is compared exactly, and the string
//! generators' GET/GETRANGE/SETRANGE on the same keys compare and corrupt the HLL bytes
//! themselves (sparse and dense forms must be Redis's byte for byte; a corrupted one must give
//! the same error).

use super::*;

pub static SPECS: &[Spec] = &[
    s("pfadd", 10, g_pfadd),
    s("pfcount", 6, g_pfcount),
    s("pfmerge", 3, g_pfmerge),
    s("pfdebug", 2, g_pfdebug),
];

/// An element: a small pool (so adds often change nothing), numbers, or generic values.
fn element(g: &mut G) -> Vec<u8> {
    match g.below(10) {
        0..=3 => g.pk(&["a", "b", "c", "d", "e", "", "\x00"]),
        4..=6 => g.range(0, 100_000).to_string().into_bytes(),
        _ => g.value(),
    }
}

fn g_pfadd(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![g.key()];
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
    cmd("pfcount", g.keys(1, 3))
}

fn g_pfmerge(g: &mut G) -> Vec<Vec<u8>> {
    cmd("pfmerge", g.keys(1, 4))
}

fn g_pfdebug(g: &mut G) -> Vec<Vec<u8>> {
    let sub = g.pk(&[
        "encoding", "decode", "todense", "ENCODING", "getreg", "nosuch",
    ]);
    cmd("pfdebug", vec![sub, g.key()])
}
