//! Differential generators for the hash commands (see `gen/mod.rs`; run by
//! `differential.rs` and `pipeline_fuzz.rs`).
//!
//! Fields come from a small pool so commands interact; now and then a field or value longer
//! than `hash-max-listpack-value` (64) or an HSET of ~520 fields (`hash-max-listpack-entries` is
//! 512 in Redis 7.0) converts a hash to the
//! `hashtable` encoding, whose iteration order differs from Redis's dict: whole-hash replies
//! (HKEYS/HVALS/HGETALL, HRANDFIELD with a count >= size) are compared sorted, HSCAN is asked
//! with a single-field MATCH so its reply has at most one pair. The field-expiry commands
//! (Redis 7.4) are not in the reference 7.0 and are covered by `tests/hashes.rs`.

use super::*;

const FIELDS: &[&str] = &["f0", "f1", "f2", "f3", "f4", "f5", "n", "", "12"];

fn field(g: &mut G) -> Vec<u8> {
    match g.below(30) {
        0 => vec![b'L'; 60 + g.below(10) as usize],
        1 => format!("many{}", g.below(530)).into_bytes(),
        _ => g.pk(FIELDS),
    }
}

fn hvalue(g: &mut G) -> Vec<u8> {
    if g.chance(70) {
        g.value()
    } else {
        g.int_str()
    }
}

fn pairs(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(4) {
        // Enough fields to reach or cross hash-max-listpack-entries (512).
        for i in 0..g.range(505, 525) {
            a.push(format!("many{i}").into_bytes());
            a.push(i.to_string().into_bytes());
        }
        return;
    }
    for _ in 0..g.range(1, 4) {
        a.push(field(g));
        a.push(hvalue(g));
    }
}

fn g_hset(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    pairs(g, &mut a);
    cmd("HSET", a)
}
fn g_hmset(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    pairs(g, &mut a);
    cmd("HMSET", a)
}
fn g_hsetnx(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HSETNX", vec![g.key(), field(g), hvalue(g)])
}
fn g_hget(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HGET", vec![g.key(), field(g)])
}
fn g_hmget(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    for _ in 0..g.range(1, 4) {
        a.push(field(g));
    }
    cmd("HMGET", a)
}
fn g_hdel(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    for _ in 0..g.range(1, 3) {
        a.push(field(g));
    }
    cmd("HDEL", a)
}
fn g_hexists(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HEXISTS", vec![g.key(), field(g)])
}
fn g_hlen(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HLEN", vec![g.key()])
}
fn g_hstrlen(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HSTRLEN", vec![g.key(), field(g)])
}
fn g_hkeys(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HKEYS", vec![g.key()])
}
fn g_hvals(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HVALS", vec![g.key()])
}
fn g_hgetall(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HGETALL", vec![g.key()])
}
fn g_hincrby(g: &mut G) -> Vec<Vec<u8>> {
    let by = match g.below(6) {
        0 => g.int_str(),
        1 => g.pk(&["x", "1.5", "", "9223372036854775808"]),
        _ => g.range(-100, 100).to_string().into_bytes(),
    };
    cmd("HINCRBY", vec![g.key(), field(g), by])
}
fn g_hincrbyfloat(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HINCRBYFLOAT", vec![g.key(), field(g), g.float_str()])
}
/// HRANDFIELD with a deterministic reply: no count on a missing key or a one-field hash is
/// still random in general, so the count forms used are 0, >= size (whole hash), or invalid.
fn g_hrandfield(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    match g.below(6) {
        0 => a.push(b("0")),
        1 => a.push(g.pk(&["x", "-9223372036854775808", "1.5"])),
        // (No huge negative count with WITHVALUES: truncated by the runner it would be a
        // valid count of -9e18 picks, which both servers would try to produce.)
        2 => {
            a.push(b("1"));
            a.push(b("WITHVALUES"));
            a.push(b("x"));
        }
        3 => {
            a.push(b("1000"));
            a.push(g.pk(&["withvalue", "x"]));
        }
        _ => a.push(b("1000")),
    }
    cmd("HRANDFIELD", a)
}
fn g_hrandfield_values(g: &mut G) -> Vec<Vec<u8>> {
    cmd(
        "HRANDFIELD",
        vec![g.key(), b("1000"), g.pk(&["WITHVALUES", "withvalues"])],
    )
}
/// HRANDFIELD without a count: any field of a non-empty hash; nil for a missing key.
fn g_hrandfield_one(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HRANDFIELD", vec![g.key()])
}
fn g_hscan(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    match g.below(10) {
        0 => {
            a.push(g.pk(&["x", "-1", "18446744073709551616"]));
            return cmd("HSCAN", a);
        }
        1 => {
            a.push(b("0"));
            a.push(b("COUNT"));
            a.push(g.pk(&["0", "-1", "x"]));
            return cmd("HSCAN", a);
        }
        2 => {
            a.push(b("0"));
            a.push(b("BOGUS"));
            return cmd("HSCAN", a);
        }
        _ => {}
    }
    a.push(b("0"));
    a.push(b("MATCH"));
    // One field at most, so the reply order is fixed whatever the encoding.
    let f = g.pk(&["f0", "f1", "f2", "n", "12", "nomatch", "many7", "many300"]);
    a.push(f);
    a.push(b("COUNT"));
    a.push(b("1000"));
    cmd("HSCAN", a)
}
fn g_hash_encoding(g: &mut G) -> Vec<Vec<u8>> {
    cmd("OBJECT", vec![b("ENCODING"), g.key()])
}

pub static SPECS: &[Spec] = &[
    s("hset", 8, g_hset),
    s("hmset", 2, g_hmset),
    s("hsetnx", 3, g_hsetnx),
    s("hget", 6, g_hget),
    s("hmget", 3, g_hmget),
    s("hdel", 4, g_hdel),
    s("hexists", 2, g_hexists),
    s("hlen", 3, g_hlen),
    s("hstrlen", 2, g_hstrlen),
    sn("hkeys", 2, Norm::Sorted, g_hkeys),
    sn("hvals", 2, Norm::Sorted, g_hvals),
    sn("hgetall", 3, Norm::SortedPairs, g_hgetall),
    s("hincrby", 4, g_hincrby),
    s("hincrbyfloat", 3, g_hincrbyfloat),
    sn("hrandfield_one", 1, Norm::AnyBulk, g_hrandfield_one),
    s("hash_encoding", 2, g_hash_encoding),
    // Optional (DIFF_COMMANDS=hrandfield,hrandfield_values,hscan): their replies are
    // deterministic as generated, but the runner's random argument truncation can turn them
    // into `HRANDFIELD k` / `HSCAN k 0`, whose replies are random / dict-ordered for a
    // hashtable-encoded hash, so they would make the default run flaky.
    Spec {
        name: "hrandfield",
        default: false,
        weight: 2,
        norm: Norm::Sorted,
        gen: g_hrandfield,
    },
    Spec {
        name: "hrandfield_values",
        default: false,
        weight: 1,
        norm: Norm::SortedPairs,
        gen: g_hrandfield_values,
    },
    opt("hscan", 3, g_hscan),
];
