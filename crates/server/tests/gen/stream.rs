//! Differential generators for the stream commands (see `gen/mod.rs`; run by
//! `differential.rs` and `pipeline_fuzz.rs`). Replies are compared exactly, so the generators
//! avoid what depends on the clock: IDs are explicit (`ms-seq` or `ms-*`, never `*`), and the
//! replies that report idle or delivery times (XPENDING's extended form, XINFO STREAM FULL,
//! XINFO CONSUMERS) are left to the integration tests. XINFO STREAM is left out too: its
//! `radix-tree-nodes` counts the nodes of Redis's radix tree, which we do not have.
//!
//! The commands mostly use keys of their own ([`STREAM_KEYS`]); one time in six they use the
//! shared keys, for the type errors.

use super::*;

pub static SPECS: &[Spec] = &[
    s("xadd", 12, g_xadd),
    s("xrange", 4, g_xrange),
    s("xrevrange", 3, g_xrevrange),
    s("xlen", 2, g_xlen),
    s("xdel", 3, g_xdel),
    s("xtrim", 3, g_xtrim),
    s("xsetid", 1, g_xsetid),
    s("xgroup", 5, g_xgroup),
    s("xreadgroup", 6, g_xreadgroup),
    s("xread", 3, g_xread),
    s("xack", 3, g_xack),
    s("xpending", 2, g_xpending),
    s("xclaim", 2, g_xclaim),
    s("xautoclaim", 2, g_xautoclaim),
    s("xinfo", 2, g_xinfo),
];

pub const STREAM_KEYS: &[&str] = &["x0", "x1", "{t}x", "{t}y"];

fn key(g: &mut G) -> Vec<u8> {
    g.own_keys(STREAM_KEYS, |g| g.key())
}

/// An ID: small ms so streams grow and collide; sometimes partial or odd.
fn id(g: &mut G) -> Vec<u8> {
    match g.below(12) {
        0 => b"0-0".to_vec(),
        1 => b"18446744073709551615-18446744073709551615".to_vec(),
        2 => g.range(0, 60).to_string().into_bytes(),
        3 => b"bad-id".to_vec(),
        _ => format!("{}-{}", g.range(0, 60), g.range(0, 3)).into_bytes(),
    }
}

/// A range bound: `-`, `+`, an ID, or an exclusive one.
fn bound(g: &mut G) -> Vec<u8> {
    match g.below(8) {
        0 => b"-".to_vec(),
        1 => b"+".to_vec(),
        2 => [b"(".to_vec(), id(g)].concat(),
        _ => id(g),
    }
}

fn group(g: &mut G) -> Vec<u8> {
    g.pk(&["g1", "g2", "nog"])
}

fn consumer(g: &mut G) -> Vec<u8> {
    g.pk(&["alice", "bob", "carol"])
}

fn field_values(g: &mut G, out: &mut Vec<Vec<u8>>) {
    let n = 1 + g.below(3);
    for _ in 0..n {
        out.push(g.pk(&["f", "g", "h", "123", ""]));
        out.push(g.value());
    }
}

/// MAXLEN/MINID with `=`/`~`, sometimes LIMIT.
fn trim_args(g: &mut G, out: &mut Vec<Vec<u8>>) {
    if g.chance(50) {
        out.push(b("MAXLEN"));
        if g.chance(50) {
            out.push(g.pk(&["~", "="]));
        }
        out.push(g.range(-1, 12).to_string().into_bytes());
    } else {
        out.push(b("MINID"));
        if g.chance(50) {
            out.push(g.pk(&["~", "="]));
        }
        out.push(id(g));
    }
    if g.chance(20) {
        out.push(b("LIMIT"));
        out.push(g.range(-1, 5).to_string().into_bytes());
    }
}

fn g_xadd(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g)];
    if g.chance(10) {
        rest.push(b("NOMKSTREAM"));
    }
    if g.chance(25) {
        trim_args(g, &mut rest);
    }
    // Mostly growing IDs (ms-* after the last one usually succeeds).
    let i = match g.below(4) {
        0 => id(g),
        _ => format!("{}-*", g.range(0, 60)).into_bytes(),
    };
    rest.push(i);
    field_values(g, &mut rest);
    if g.chance(3) {
        rest.pop();
    }
    cmd("xadd", rest)
}

fn g_xrange(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), bound(g), bound(g)];
    if g.chance(30) {
        rest.push(b("COUNT"));
        rest.push(g.range(-1, 5).to_string().into_bytes());
    }
    cmd("xrange", rest)
}

fn g_xrevrange(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), bound(g), bound(g)];
    if g.chance(30) {
        rest.push(b("COUNT"));
        rest.push(g.range(0, 5).to_string().into_bytes());
    }
    cmd("xrevrange", rest)
}

fn g_xlen(g: &mut G) -> Vec<Vec<u8>> {
    cmd("xlen", vec![key(g)])
}

fn g_xdel(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g)];
    for _ in 0..1 + g.below(3) {
        rest.push(id(g));
    }
    cmd("xdel", rest)
}

fn g_xtrim(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g)];
    trim_args(g, &mut rest);
    cmd("xtrim", rest)
}

fn g_xsetid(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), id(g)];
    if g.chance(30) {
        rest.push(b("ENTRIESADDED"));
        rest.push(g.range(-1, 100).to_string().into_bytes());
    }
    if g.chance(30) {
        rest.push(b("MAXDELETEDID"));
        rest.push(id(g));
    }
    cmd("xsetid", rest)
}

fn g_xgroup(g: &mut G) -> Vec<Vec<u8>> {
    let k = key(g);
    match g.below(6) {
        0 | 1 => {
            let start = if g.chance(40) { b("$") } else { id(g) };
            let mut rest = vec![b("CREATE"), k, group(g), start];
            if g.chance(40) {
                rest.push(b("MKSTREAM"));
            }
            if g.chance(15) {
                rest.push(b("ENTRIESREAD"));
                rest.push(g.range(-2, 10).to_string().into_bytes());
            }
            cmd("xgroup", rest)
        }
        2 => {
            let start = if g.chance(40) { b("$") } else { id(g) };
            let mut rest = vec![b("SETID"), k, group(g), start];
            if g.chance(30) {
                rest.push(b("ENTRIESREAD"));
                rest.push(g.range(-1, 10).to_string().into_bytes());
            }
            cmd("xgroup", rest)
        }
        3 => cmd("xgroup", vec![b("DESTROY"), k, group(g)]),
        4 => cmd(
            "xgroup",
            vec![b("CREATECONSUMER"), k, group(g), consumer(g)],
        ),
        _ => cmd("xgroup", vec![b("DELCONSUMER"), k, group(g), consumer(g)]),
    }
}

fn g_xreadgroup(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![b("GROUP"), group(g), consumer(g)];
    if g.chance(40) {
        rest.push(b("COUNT"));
        rest.push(g.range(0, 4).to_string().into_bytes());
    }
    if g.chance(15) {
        rest.push(b("NOACK"));
    }
    rest.push(b("STREAMS"));
    let n = 1 + g.below(2);
    let keys: Vec<Vec<u8>> = (0..n).map(|_| key(g)).collect();
    rest.extend(keys);
    for _ in 0..n {
        rest.push(if g.chance(70) { b(">") } else { id(g) });
    }
    cmd("xreadgroup", rest)
}

fn g_xread(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![];
    if g.chance(40) {
        rest.push(b("COUNT"));
        rest.push(g.range(0, 4).to_string().into_bytes());
    }
    rest.push(b("STREAMS"));
    let n = 1 + g.below(3);
    let keys: Vec<Vec<u8>> = (0..n).map(|_| key(g)).collect();
    rest.extend(keys);
    for _ in 0..n {
        rest.push(if g.chance(20) { b("$") } else { id(g) });
    }
    cmd("xread", rest)
}

fn g_xack(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), group(g)];
    for _ in 0..1 + g.below(3) {
        rest.push(id(g));
    }
    cmd("xack", rest)
}

fn g_xpending(g: &mut G) -> Vec<Vec<u8>> {
    cmd("xpending", vec![key(g), group(g)])
}

fn g_xclaim(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), group(g), consumer(g), b("0")];
    for _ in 0..1 + g.below(3) {
        rest.push(id(g));
    }
    rest.push(b("JUSTID"));
    if g.chance(30) {
        rest.push(b("FORCE"));
    }
    if g.chance(20) {
        rest.push(b("RETRYCOUNT"));
        rest.push(g.range(0, 5).to_string().into_bytes());
    }
    if g.chance(20) {
        rest.push(b("LASTID"));
        rest.push(id(g));
    }
    cmd("xclaim", rest)
}

fn g_xautoclaim(g: &mut G) -> Vec<Vec<u8>> {
    let mut rest = vec![key(g), group(g), consumer(g), b("0"), bound(g)];
    if g.chance(50) {
        rest.push(b("COUNT"));
        rest.push(g.range(0, 4).to_string().into_bytes());
    }
    rest.push(b("JUSTID"));
    cmd("xautoclaim", rest)
}

fn g_xinfo(g: &mut G) -> Vec<Vec<u8>> {
    match g.below(3) {
        0 => cmd("xinfo", vec![b("GROUPS"), key(g)]),
        1 => cmd("xinfo", vec![b("HELP")]),
        _ => cmd("xinfo", vec![b("NOSUCH"), key(g)]),
    }
}
