//! Differential generators for the zset commands (see `gen/mod.rs`; run by
//! `differential.rs` and `pipeline_fuzz.rs`).
//!
//! Members come from a small pool so commands interact; ZADD sometimes adds many members or a
//! long one so the compact encoding converts (OBJECT ENCODING is generated too). Lex-range
//! commands use their own keys whose members all have score 0 (lex order over mixed scores is
//! unspecified in Redis). Random replies are generated only in deterministic forms.

use super::*;

const MEMBERS: &[&str] = &["a", "b", "c", "d", "e", "f", "g", "h", "", "a\x00b"];
const LEX_KEYS: &[&str] = &["zlex0", "zlex1"];

fn member(g: &mut G) -> Vec<u8> {
    match g.below(40) {
        0 => vec![b'm'; 65 + g.below(10) as usize],
        1 => g.value(),
        _ => g.pk(MEMBERS),
    }
}

fn score(g: &mut G) -> Vec<u8> {
    match g.below(30) {
        0 => b("inf"),
        1 => b("-inf"),
        2 => b("+inf"),
        3 => b("-0"),
        4 => b("nan"),
        5 => b("x"),
        6 => b("1e300"),
        7..=10 => g.float_str(),
        11 => b(" 1"),
        _ => g.range(-5, 10).to_string().into_bytes(),
    }
}

fn score_bound(g: &mut G) -> Vec<u8> {
    match g.below(24) {
        0 => b("-inf"),
        1 => b("+inf"),
        2 => b("inf"),
        3 => b("x"),
        4 => b("(x"),
        5 => b("("),
        6 => b("nan"),
        7 => b("(-inf"),
        8 => b("1.5"),
        9 => b("(2.5"),
        10 => b("-0"),
        11..=15 => format!("({}", g.range(-5, 10)).into_bytes(),
        _ => g.range(-5, 10).to_string().into_bytes(),
    }
}

fn lex_bound(g: &mut G) -> Vec<u8> {
    match g.below(14) {
        0 => b("-"),
        1 => b("+"),
        2 => b("x"),
        3 => b("["),
        4 => b("("),
        5 => b("+a"),
        _ => {
            let m = g.pk(MEMBERS);
            let mut v = vec![if g.chance(50) { b'[' } else { b'(' }];
            v.extend(m);
            v
        }
    }
}

fn g_zadd(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    for o in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
        if g.chance(8) {
            a.push(b(o));
        }
    }
    let n = match g.below(20) {
        0 => 0,
        1 => 70 + g.below(70),
        _ => 1 + g.below(4),
    };
    for i in 0..n {
        if n > 20 {
            a.push(g.range(-50, 50).to_string().into_bytes());
            a.push(format!("big{}", (i * 7) % 150).into_bytes());
        } else {
            a.push(score(g));
            a.push(member(g));
        }
    }
    if g.chance(3) {
        a.push(b("1"));
    }
    cmd("ZADD", a)
}

fn g_zincrby(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZINCRBY", vec![g.key(), score(g), member(g)])
}

fn g_zrem(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    for _ in 0..1 + g.below(3) {
        a.push(member(g));
    }
    cmd("ZREM", a)
}

fn g_zcard(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZCARD", vec![g.key()])
}

fn g_zscore(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZSCORE", vec![g.key(), member(g)])
}

fn g_zmscore(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    for _ in 0..1 + g.below(3) {
        a.push(member(g));
    }
    cmd("ZMSCORE", a)
}

fn g_zrank(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZRANK", vec![g.key(), member(g)])
}

fn g_zrevrank(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZREVRANK", vec![g.key(), member(g)])
}

fn g_zcount(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZCOUNT", vec![g.key(), score_bound(g), score_bound(g)])
}

fn lex_key(g: &mut G) -> Vec<u8> {
    // Pool keys may hold zsets of mixed scores (lex order unspecified): a missing key instead.
    if g.chance(5) {
        b("zlex-missing")
    } else {
        g.pk(LEX_KEYS)
    }
}

fn g_zlexcount(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZLEXCOUNT", vec![lex_key(g), lex_bound(g), lex_bound(g)])
}

fn g_zadd_lex(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.pk(LEX_KEYS)];
    for _ in 0..1 + g.below(4) {
        a.push(b("0"));
        a.push(member(g));
    }
    cmd("ZADD", a)
}

fn limit(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(30) {
        a.push(b("LIMIT"));
        a.push(g.range(-1, 4).to_string().into_bytes());
        a.push(g.range(-2, 5).to_string().into_bytes());
    }
}

fn g_zrange(g: &mut G) -> Vec<Vec<u8>> {
    let by = g.below(4);
    let mut a = vec![];
    match by {
        0 => {
            a.push(lex_key(g));
            a.push(lex_bound(g));
            a.push(lex_bound(g));
            a.push(b("BYLEX"));
        }
        1 => {
            a.push(g.key());
            a.push(score_bound(g));
            a.push(score_bound(g));
            a.push(b("BYSCORE"));
        }
        _ => {
            a.push(g.key());
            a.push(g.index());
            a.push(g.index());
        }
    }
    if g.chance(30) {
        a.push(b("REV"));
    }
    limit(g, &mut a);
    if g.chance(40) {
        a.push(b("WITHSCORES"));
    }
    if g.chance(3) {
        a.push(b("BYSCORE"));
    }
    cmd("ZRANGE", a)
}

fn g_zrangestore(g: &mut G) -> Vec<Vec<u8>> {
    let mut r = g_zrange(g);
    r.retain(|x| x != b"WITHSCORES" || g.chance(5));
    r[0] = b("ZRANGESTORE");
    r.insert(1, g.key());
    r
}

fn g_zrevrange(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.index(), g.index()];
    if g.chance(40) {
        a.push(b("WITHSCORES"));
    }
    cmd("ZREVRANGE", a)
}

fn by_score(g: &mut G, name: &str) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), score_bound(g), score_bound(g)];
    if g.chance(40) {
        a.push(b("WITHSCORES"));
    }
    limit(g, &mut a);
    cmd(name, a)
}

fn g_zrangebyscore(g: &mut G) -> Vec<Vec<u8>> {
    by_score(g, "ZRANGEBYSCORE")
}

fn g_zrevrangebyscore(g: &mut G) -> Vec<Vec<u8>> {
    by_score(g, "ZREVRANGEBYSCORE")
}

fn by_lex(g: &mut G, name: &str) -> Vec<Vec<u8>> {
    let mut a = vec![lex_key(g), lex_bound(g), lex_bound(g)];
    limit(g, &mut a);
    cmd(name, a)
}

fn g_zrangebylex(g: &mut G) -> Vec<Vec<u8>> {
    by_lex(g, "ZRANGEBYLEX")
}

fn g_zrevrangebylex(g: &mut G) -> Vec<Vec<u8>> {
    by_lex(g, "ZREVRANGEBYLEX")
}

fn g_zremrangebyrank(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZREMRANGEBYRANK", vec![g.key(), g.index(), g.index()])
}

fn g_zremrangebyscore(g: &mut G) -> Vec<Vec<u8>> {
    cmd(
        "ZREMRANGEBYSCORE",
        vec![g.key(), score_bound(g), score_bound(g)],
    )
}

fn g_zremrangebylex(g: &mut G) -> Vec<Vec<u8>> {
    cmd(
        "ZREMRANGEBYLEX",
        vec![lex_key(g), lex_bound(g), lex_bound(g)],
    )
}

fn pop_count(g: &mut G, a: &mut Vec<Vec<u8>>) {
    match g.below(6) {
        0 => {}
        1 => a.push(b("-1")),
        2 => a.push(b("0")),
        3 => a.push(b("x")),
        _ => a.push(g.range(1, 5).to_string().into_bytes()),
    }
}

fn g_zpopmin(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    pop_count(g, &mut a);
    cmd("ZPOPMIN", a)
}

fn g_zpopmax(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    pop_count(g, &mut a);
    cmd("ZPOPMAX", a)
}

fn numkeys(g: &mut G, a: &mut Vec<Vec<u8>>) {
    let n = 1 + g.below(3);
    let shown = match g.below(20) {
        0 => 0,
        1 => n + 3,
        2 => 0u64.wrapping_sub(1),
        _ => n,
    };
    a.push((shown as i64).to_string().into_bytes());
    for _ in 0..n {
        a.push(g.key());
    }
}

fn mpop_tail(g: &mut G, a: &mut Vec<Vec<u8>>) {
    a.push(b(if g.chance(50) { "MIN" } else { "MAX" }));
    match g.below(6) {
        0 => a.push(b("COUNT")),
        1 => {
            a.push(b("COUNT"));
            a.push(b("0"));
        }
        2 | 3 => {
            a.push(b("COUNT"));
            a.push(g.range(1, 4).to_string().into_bytes());
        }
        _ => {}
    }
}

fn g_zmpop(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![];
    numkeys(g, &mut a);
    mpop_tail(g, &mut a);
    cmd("ZMPOP", a)
}

fn timeout(g: &mut G) -> Vec<u8> {
    match g.below(10) {
        0 => b("-1"),
        1 => b("x"),
        _ => b("0.01"),
    }
}

fn g_bzpopmin(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = g.keys(1, 3);
    a.push(timeout(g));
    cmd("BZPOPMIN", a)
}

fn g_bzpopmax(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = g.keys(1, 3);
    a.push(timeout(g));
    cmd("BZPOPMAX", a)
}

fn g_bzmpop(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![timeout(g)];
    numkeys(g, &mut a);
    mpop_tail(g, &mut a);
    cmd("BZMPOP", a)
}

fn g_zrandmember_all(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZRANDMEMBER", vec![g.key(), b("1000")])
}

fn g_zrandmember_all_ws(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZRANDMEMBER", vec![g.key(), b("1000"), b("WITHSCORES")])
}

fn g_zrandmember_one(g: &mut G) -> Vec<Vec<u8>> {
    cmd("ZRANDMEMBER", vec![g.key()])
}

fn g_zrandmember_edge(g: &mut G) -> Vec<Vec<u8>> {
    let a = match g.below(6) {
        0 => vec![g.key(), b("0")],
        1 => vec![g.key(), b("x")],
        2 => vec![g.key(), b("-9223372036854775808")],
        3 => vec![g.key(), b("-9223372036854775807"), b("WITHSCORES")],
        4 => vec![g.key(), b("1"), b("WITHSCORE")],
        _ => vec![g.key(), b("1"), b("WITHSCORES"), b("x")],
    };
    cmd("ZRANDMEMBER", a)
}

/// Edge forms on a key that never exists (deterministic even when the runner drops arguments).
fn g_zrandmember_missing(g: &mut G) -> Vec<Vec<u8>> {
    let mut r = g_zrandmember_edge(g);
    r[1] = b("zrand-missing");
    r
}

fn setop_opts(g: &mut G, a: &mut Vec<Vec<u8>>, n: usize, weights: bool, ws: bool) {
    if weights && g.chance(30) {
        a.push(b("WEIGHTS"));
        for _ in 0..n {
            a.push(match g.below(8) {
                0 => b("x"),
                1 => b("inf"),
                2 => b("0"),
                3 => b("-1"),
                _ => g.range(1, 4).to_string().into_bytes(),
            });
        }
    }
    if weights && g.chance(30) {
        a.push(b("AGGREGATE"));
        a.push(g.pk(&["SUM", "MIN", "MAX", "avg", "max"]));
    }
    if ws && g.chance(40) {
        a.push(b("WITHSCORES"));
    }
}

fn setop(g: &mut G, name: &str, store: bool, weights: bool) -> Vec<Vec<u8>> {
    let mut a = vec![];
    if store {
        a.push(g.key());
    }
    let before = a.len();
    numkeys(g, &mut a);
    let n = a.len() - before - 1;
    setop_opts(g, &mut a, n, weights, !store);
    cmd(name, a)
}

fn g_zunion(g: &mut G) -> Vec<Vec<u8>> {
    setop(g, "ZUNION", false, true)
}
fn g_zinter(g: &mut G) -> Vec<Vec<u8>> {
    setop(g, "ZINTER", false, true)
}
fn g_zdiff(g: &mut G) -> Vec<Vec<u8>> {
    setop(g, "ZDIFF", false, false)
}
fn g_zunionstore(g: &mut G) -> Vec<Vec<u8>> {
    setop(g, "ZUNIONSTORE", true, true)
}
fn g_zinterstore(g: &mut G) -> Vec<Vec<u8>> {
    setop(g, "ZINTERSTORE", true, true)
}
fn g_zdiffstore(g: &mut G) -> Vec<Vec<u8>> {
    setop(g, "ZDIFFSTORE", true, false)
}

fn g_zintercard(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![];
    numkeys(g, &mut a);
    if g.chance(40) {
        a.push(b("LIMIT"));
        a.push(match g.below(5) {
            0 => b("-1"),
            1 => b("x"),
            _ => g.range(0, 3).to_string().into_bytes(),
        });
    }
    cmd("ZINTERCARD", a)
}

fn g_zscan(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), b("0")];
    match g.below(6) {
        0 => a.extend([b("MATCH"), b("[a-c]*")]),
        1 => a.extend([b("COUNT"), b("0")]),
        2 => a[1] = b("x"),
        _ => a.extend([b("COUNT"), b("1000")]),
    }
    cmd("ZSCAN", a)
}

fn g_zobject(g: &mut G) -> Vec<Vec<u8>> {
    cmd("OBJECT", vec![b("ENCODING"), g.key()])
}

const fn opt_norm(name: &'static str, norm: Norm, gen: fn(&mut G) -> Vec<Vec<u8>>) -> Spec {
    let mut s = sn(name, 1, norm, gen);
    s.default = false;
    s
}

pub static SPECS: &[Spec] = &[
    s("zadd", 10, g_zadd),
    s("zadd_lex", 3, g_zadd_lex),
    s("zincrby", 3, g_zincrby),
    s("zrem", 3, g_zrem),
    s("zcard", 2, g_zcard),
    s("zscore", 3, g_zscore),
    s("zmscore", 2, g_zmscore),
    // ZRANK/ZREVRANK take 7.2's WITHSCORE (arity -3), so the runner's junk argument inside
    // MULTI is QUEUED here where Redis 7.0 (arity 3) rejects it: optional.
    opt("zrank", 2, g_zrank),
    opt("zrevrank", 2, g_zrevrank),
    s("zcount", 2, g_zcount),
    s("zlexcount", 2, g_zlexcount),
    s("zrange", 5, g_zrange),
    s("zrangestore", 2, g_zrangestore),
    s("zrevrange", 2, g_zrevrange),
    s("zrangebyscore", 2, g_zrangebyscore),
    s("zrevrangebyscore", 2, g_zrevrangebyscore),
    s("zrangebylex", 2, g_zrangebylex),
    s("zrevrangebylex", 2, g_zrevrangebylex),
    s("zremrangebyrank", 1, g_zremrangebyrank),
    s("zremrangebyscore", 1, g_zremrangebyscore),
    s("zremrangebylex", 1, g_zremrangebylex),
    s("zpopmin", 2, g_zpopmin),
    s("zpopmax", 2, g_zpopmax),
    s("zmpop", 2, g_zmpop),
    s("bzpopmin", 1, g_bzpopmin),
    s("bzpopmax", 1, g_bzpopmax),
    s("bzmpop", 1, g_bzmpop),
    // The runner's argument mangling can drop the count (a random bulk reply then), so the
    // whole-set forms are optional.
    opt_norm("zrandmember", Norm::Sorted, g_zrandmember_all),
    opt_norm("zrandmember_ws", Norm::SortedPairs, g_zrandmember_all_ws),
    sn("zrandmember_one", 1, Norm::AnyBulk, g_zrandmember_one),
    opt("zrandmember_edge", 1, g_zrandmember_edge),
    s("zrandmember_missing", 1, g_zrandmember_missing),
    s("zunion", 2, g_zunion),
    s("zinter", 2, g_zinter),
    s("zdiff", 2, g_zdiff),
    s("zunionstore", 2, g_zunionstore),
    s("zinterstore", 2, g_zinterstore),
    s("zdiffstore", 2, g_zdiffstore),
    s("zintercard", 2, g_zintercard),
    // Listpack ZSCAN returns everything in order; skiplist order is unspecified, so the
    // generator is optional (run it with DIFF_COMMANDS=zscan,... and small sets).
    opt("zscan", 1, g_zscan),
    s("zobject", 1, g_zobject),
];
