//! Differential generators for the set commands and SORT/SORT_RO (see `gen/mod.rs`; run by
//! `differential.rs` and `pipeline_fuzz.rs`).
//!
//! Replies whose order Redis leaves unspecified (SMEMBERS, SINTER/SUNION/SDIFF of hashtable
//! sets) use `Norm::Sorted`. SRANDMEMBER/SPOP are random, and the runner may drop their count
//! argument (`mangle`), so they are optional (`DIFF_COMMANDS=srandmember,spop,...`), with counts
//! that take the whole set. SSCAN (optional too) uses MATCH with one literal member and a huge
//! COUNT, so the reply holds at most one member whatever the table order. SORT forms are
//! deterministic except for one case: numeric sorts break ties on the bytes, BY nosort only
//! comes with STORE (a set is then sorted ALPHA), ALPHA never comes with a BY pattern (ties
//! would keep the set's own order); ALPHA without STORE compares with `strcoll`, where
//! elements equal up to a NUL byte tie in Redis's random table order (`Norm::SortTies`), so
//! its GET patterns start with `GET #` to keep the sorted elements in the reply.

use super::*;

pub static SPECS: &[Spec] = &[
    s("sadd", 10, g_sadd),
    s("srem", 5, g_srem),
    s("sismember", 3, g_sismember),
    s("smismember", 2, g_smismember),
    s("scard", 3, g_scard),
    sn("smembers", 3, Norm::Sorted, g_smembers),
    s("smove", 3, g_smove),
    sn("sinter", 2, Norm::Sorted, g_sinter),
    s("sintercard", 2, g_sintercard),
    s("sinterstore", 2, g_sinterstore),
    sn("sunion", 2, Norm::Sorted, g_sunion),
    s("sunionstore", 2, g_sunionstore),
    sn("sdiff", 2, Norm::Sorted, g_sdiff),
    s("sdiffstore", 2, g_sdiffstore),
    s("sencoding", 2, g_encoding),
    s("sort", 4, g_sort),
    s("sort_ro", 2, g_sort_ro),
    // optional: random replies, and SSCAN (a dropped COUNT/MATCH makes a partial scan of a
    // hashtable, whose order differs)
    opt("sscan", 2, g_sscan),
    Spec {
        name: "srandmember",
        default: false,
        weight: 2,
        norm: Norm::Sorted,
        gen: g_srandmember,
    },
    Spec {
        name: "spop",
        default: false,
        weight: 2,
        norm: Norm::Sorted,
        gen: g_spop,
    },
];

/// A set member: mostly a small pool (so commands interact and intsets stay intsets), some
/// non-canonical integers, long strings, 64-bit edge values and generic values.
fn member(g: &mut G) -> Vec<u8> {
    match g.below(20) {
        0..=7 => g.range(-5, 20).to_string().into_bytes(),
        8..=11 => g.pk(&["a", "b", "c", "d", "e", "f", "g", "h"]),
        12 => g.pk(&["007", "+1", "-0", " 1", "1.0", "", "*", "a?c", "[x]"]),
        13 => g.pk(&[
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "70000",
            "-40000",
            "4294967296",
        ]),
        14 => format!("member-long-{}", g.below(6)).into_bytes(),
        15 => vec![b'z'; 40 + g.below(3) as usize],
        _ => g.value(),
    }
}

fn members(g: &mut G, min: u64, max: u64) -> Vec<Vec<u8>> {
    let n = min + g.below(max - min + 1);
    (0..n).map(|_| member(g)).collect()
}

fn g_sadd(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    if g.chance(3) {
        // Enough integers to cross set-max-intset-entries (512).
        let base = g.range(-100, 100);
        let n = g.range(500, 530);
        a.extend((0..n).map(|i| (base + i).to_string().into_bytes()));
    } else {
        a.extend(members(g, 1, 5));
    }
    cmd("SADD", a)
}
fn g_srem(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    a.extend(members(g, 1, 4));
    cmd("SREM", a)
}
fn g_sismember(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SISMEMBER", vec![g.key(), member(g)])
}
fn g_smismember(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    a.extend(members(g, 1, 4));
    cmd("SMISMEMBER", a)
}
fn g_scard(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SCARD", vec![g.key()])
}
fn g_smembers(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SMEMBERS", vec![g.key()])
}
fn g_smove(g: &mut G) -> Vec<Vec<u8>> {
    let src = g.key();
    let dst = if g.chance(10) { src.clone() } else { g.key() };
    cmd("SMOVE", vec![src, dst, member(g)])
}
fn g_sinter(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SINTER", g.keys(1, 4))
}
fn g_sintercard(g: &mut G) -> Vec<Vec<u8>> {
    let keys = g.keys(1, 4);
    let numkeys = match g.below(12) {
        0 => b("0"),
        1 => b("x"),
        2 => (keys.len() + 1).to_string().into_bytes(),
        3 => b("-1"),
        _ => keys.len().to_string().into_bytes(),
    };
    let mut a = vec![numkeys];
    a.extend(keys);
    match g.below(6) {
        0 => a.extend([b("LIMIT"), g.range(0, 4).to_string().into_bytes()]),
        1 => a.extend([b("limit"), g.pk(&["-1", "x", "0"])]),
        2 => a.push(b("LIMIT")),
        _ => {}
    }
    cmd("SINTERCARD", a)
}
fn store_args(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    a.extend(g.keys(1, 3));
    a
}
fn g_sinterstore(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SINTERSTORE", store_args(g))
}
fn g_sunion(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SUNION", g.keys(1, 4))
}
fn g_sunionstore(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SUNIONSTORE", store_args(g))
}
fn g_sdiff(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SDIFF", g.keys(1, 4))
}
fn g_sdiffstore(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SDIFFSTORE", store_args(g))
}
/// Glob-escapes a member so MATCH selects exactly it.
fn literal(m: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(m.len() * 2);
    for &c in m {
        if matches!(c, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(c);
    }
    out
}
fn g_sscan(g: &mut G) -> Vec<Vec<u8>> {
    let key = g.key();
    match g.below(10) {
        0 => cmd(
            "SSCAN",
            vec![key, g.pk(&["x", "-1", "18446744073709551616"])],
        ),
        1 => cmd(
            "SSCAN",
            vec![key, b("0"), b("COUNT"), g.pk(&["0", "-3", "x"])],
        ),
        2 => cmd(
            "SSCAN",
            vec![key, b("0"), g.pk(&["MATCH", "TYPE", "bogus"])],
        ),
        _ => {
            let m = member(g);
            let mut a = vec![key, b("0"), b("MATCH"), literal(&m)];
            a.extend([b("COUNT"), b("100000")]);
            cmd("SSCAN", a)
        }
    }
}
fn g_encoding(g: &mut G) -> Vec<Vec<u8>> {
    cmd("OBJECT", vec![b("ENCODING"), g.key()])
}
fn g_srandmember(g: &mut G) -> Vec<Vec<u8>> {
    let count = match g.below(8) {
        0 => b("0"),
        1 => b("-9223372036854775808"),
        2 => b("x"),
        _ => g.pk(&["1000", "600", "100000"]),
    };
    cmd("SRANDMEMBER", vec![g.key(), count])
}
fn g_spop(g: &mut G) -> Vec<Vec<u8>> {
    let count = match g.below(8) {
        0 => b("0"),
        1 => b("-1"),
        2 => b("x"),
        _ => g.pk(&["1000", "600"]),
    };
    cmd("SPOP", vec![g.key(), count])
}

/// SORT/SORT_RO options in a shuffled order (deterministic forms only, see the module docs).
fn sort_args(g: &mut G, store: bool) -> Vec<Vec<u8>> {
    let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
    let by_pattern = g.chance(35);
    let nosort = !by_pattern && store && g.chance(30);
    if by_pattern {
        opts.push(vec![b("BY"), g.pk(&["k*", "*", "{t}*", "k*->f", "w_*"])]);
    } else if nosort {
        opts.push(vec![b("BY"), b("nosort")]);
    }
    if !by_pattern && g.chance(50) {
        opts.push(vec![g.pk(&["ALPHA", "alpha"])]);
    }
    if g.chance(40) {
        opts.push(vec![g.pk(&["DESC", "ASC", "desc"])]);
    }
    if g.chance(40) {
        let start = g.pk(&["0", "1", "2", "-1", "5", "x"]);
        let count = g.pk(&["0", "1", "2", "-1", "10", "9223372036854775807"]);
        opts.push(vec![b("LIMIT"), start, count]);
    }
    let gets = g.below(3);
    let alpha_ties = !store && opts.iter().any(|o| o[0].eq_ignore_ascii_case(b"alpha"));
    for i in 0..gets {
        let pattern = if i == 0 && alpha_ties {
            b("#")
        } else {
            g.pk(&["#", "k*", "*", "k*->f", "nostar", "{t}*"])
        };
        opts.push(vec![b("GET"), pattern]);
    }
    if store {
        opts.push(vec![b("STORE"), g.key()]);
    }
    if g.chance(3) {
        opts.push(vec![g.pk(&["BOGUS", "LIMIT", "BY", "GET"])]);
    }
    for _ in 0..opts.len() {
        let i = g.below(opts.len() as u64) as usize;
        let j = g.below(opts.len() as u64) as usize;
        opts.swap(i, j);
    }
    if nosort {
        // STORE before BY nosort: a truncated command never sorts a set by nosort without
        // STORE (unspecified order).
        if let Some(i) = opts.iter().position(|o| o[0] == b"STORE") {
            let o = opts.remove(i);
            opts.insert(0, o);
        }
    }
    let mut a = vec![g.key()];
    for o in opts {
        a.extend(o);
    }
    a
}
fn g_sort(g: &mut G) -> Vec<Vec<u8>> {
    let store = g.chance(40);
    cmd("SORT", sort_args(g, store))
}
fn g_sort_ro(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SORT_RO", sort_args(g, false))
}
