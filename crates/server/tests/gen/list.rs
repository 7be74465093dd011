//! Differential generators for the list commands (see `gen/mod.rs`; run by
//! `differential.rs` and `pipeline_fuzz.rs`).
//!
//! Elements come mostly from a small pool (so LREM/LPOS/LINSERT find them), sometimes integers
//! of every encoding width, random values or long strings; bulk pushes and a low-weight
//! `CONFIG SET list-max-listpack-size` make lists span many nodes (node splits and merges at
//! small fills). Blocking commands use short timeouts (never 0): with one client they answer at
//! once or time out identically on both servers.

use super::*;

pub static SPECS: &[Spec] = &[
    s("lpush", 6, g_lpush),
    s("rpush", 6, g_rpush),
    s("lpushx", 2, g_lpushx),
    s("rpushx", 2, g_rpushx),
    s("lpop", 3, g_lpop),
    s("rpop", 3, g_rpop),
    s("llen", 2, g_llen),
    s("lrange", 5, g_lrange),
    s("lindex", 3, g_lindex),
    s("lset", 3, g_lset),
    s("linsert", 3, g_linsert),
    s("lrem", 3, g_lrem),
    s("ltrim", 1, g_ltrim),
    s("lpos", 4, g_lpos),
    s("lmove", 2, g_lmove),
    s("rpoplpush", 2, g_rpoplpush),
    s("lmpop", 2, g_lmpop),
    s("blpop", 1, g_blpop),
    s("brpop", 1, g_brpop),
    s("blmove", 1, g_blmove),
    s("brpoplpush", 1, g_brpoplpush),
    s("blmpop", 1, g_blmpop),
    s("list_encoding", 1, g_list_encoding),
    s("list_fill", 1, g_list_fill),
];

const POOL: &[&str] = &["a", "b", "c", "1", "2", "-1", "10", "300", "x y", ""];

fn elem(g: &mut G) -> Vec<u8> {
    match g.below(12) {
        0..=6 => g.pk(POOL),
        7 => g.int_str(),
        8 => g.value(),
        9 => vec![b'L'; g.range(60, 400) as usize],
        10 => g.range(-70_000, 70_000).to_string().into_bytes(),
        _ => g.pk(POOL),
    }
}

fn elems(g: &mut G) -> Vec<Vec<u8>> {
    let n = if g.chance(10) {
        g.range(20, 80)
    } else {
        g.range(1, 5)
    };
    (0..n).map(|_| elem(g)).collect()
}

fn end(g: &mut G) -> Vec<u8> {
    if g.chance(3) {
        g.pk(&["UP", "middle"])
    } else {
        g.pk(&["LEFT", "RIGHT", "left", "right"])
    }
}

fn timeout(g: &mut G) -> Vec<u8> {
    match g.below(12) {
        0 => b("-1"),
        1 => b("x"),
        2 => b("0.001"),
        _ => b("0.01"),
    }
}

fn push(name: &str, g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    a.extend(elems(g));
    cmd(name, a)
}

fn g_lpush(g: &mut G) -> Vec<Vec<u8>> {
    push("LPUSH", g)
}
fn g_rpush(g: &mut G) -> Vec<Vec<u8>> {
    push("RPUSH", g)
}
fn g_lpushx(g: &mut G) -> Vec<Vec<u8>> {
    push("LPUSHX", g)
}
fn g_rpushx(g: &mut G) -> Vec<Vec<u8>> {
    push("RPUSHX", g)
}

fn pop(name: &str, g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    if g.chance(50) {
        a.push(match g.below(10) {
            0 => b("-1"),
            1 => b("x"),
            2 => b("0"),
            3 => b("9223372036854775807"),
            _ => g.range(1, 6).to_string().into_bytes(),
        });
        if g.chance(3) {
            a.push(b("1"));
        }
    }
    cmd(name, a)
}

fn g_lpop(g: &mut G) -> Vec<Vec<u8>> {
    pop("LPOP", g)
}
fn g_rpop(g: &mut G) -> Vec<Vec<u8>> {
    pop("RPOP", g)
}
fn g_llen(g: &mut G) -> Vec<Vec<u8>> {
    cmd("LLEN", vec![g.key()])
}
fn g_lrange(g: &mut G) -> Vec<Vec<u8>> {
    if g.chance(30) {
        return cmd("LRANGE", vec![g.key(), b("0"), b("-1")]);
    }
    cmd("LRANGE", vec![g.key(), g.index(), g.index()])
}
fn g_lindex(g: &mut G) -> Vec<Vec<u8>> {
    cmd("LINDEX", vec![g.key(), g.index()])
}
fn g_lset(g: &mut G) -> Vec<Vec<u8>> {
    cmd("LSET", vec![g.key(), g.index(), elem(g)])
}
fn g_linsert(g: &mut G) -> Vec<Vec<u8>> {
    let w = if g.chance(5) {
        b("AROUND")
    } else {
        g.pk(&["BEFORE", "AFTER", "before", "after"])
    };
    cmd("LINSERT", vec![g.key(), w, elem(g), elem(g)])
}
fn g_lrem(g: &mut G) -> Vec<Vec<u8>> {
    let c = match g.below(10) {
        0 => b("x"),
        _ => g.range(-3, 3).to_string().into_bytes(),
    };
    cmd("LREM", vec![g.key(), c, elem(g)])
}
fn g_ltrim(g: &mut G) -> Vec<Vec<u8>> {
    let (s, e) = if g.chance(60) {
        (
            g.range(0, 3).to_string().into_bytes(),
            g.range(-4, 30).to_string().into_bytes(),
        )
    } else {
        (g.index(), g.index())
    };
    cmd("LTRIM", vec![g.key(), s, e])
}
fn g_lpos(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), elem(g)];
    let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
    if g.chance(40) {
        opts.push(vec![
            b("RANK"),
            g.pk(&["1", "2", "3", "-1", "-2", "-4", "0", "x"]),
        ]);
    }
    if g.chance(40) {
        opts.push(vec![b("COUNT"), g.pk(&["0", "1", "2", "5", "-1", "x"])]);
    }
    if g.chance(30) {
        opts.push(vec![b("MAXLEN"), g.pk(&["0", "1", "3", "10", "-1", "x"])]);
    }
    if g.chance(4) {
        opts.push(vec![g.pk(&["RANK", "BOGUS", "count"])]);
    }
    for o in opts {
        a.extend(o);
    }
    cmd("LPOS", a)
}
fn g_lmove(g: &mut G) -> Vec<Vec<u8>> {
    cmd("LMOVE", vec![g.key(), g.key(), end(g), end(g)])
}
fn g_rpoplpush(g: &mut G) -> Vec<Vec<u8>> {
    cmd("RPOPLPUSH", vec![g.key(), g.key()])
}

fn mpop_args(g: &mut G) -> Vec<Vec<u8>> {
    let keys = g.keys(1, 3);
    let n = if g.chance(8) {
        g.pk(&["0", "-1", "x", "5"])
    } else {
        keys.len().to_string().into_bytes()
    };
    let mut a = vec![n];
    a.extend(keys);
    a.push(end(g));
    if g.chance(50) {
        a.push(b("COUNT"));
        a.push(match g.below(8) {
            0 => b("0"),
            1 => b("x"),
            _ => g.range(1, 10).to_string().into_bytes(),
        });
    }
    if g.chance(3) {
        a.push(b("COUNT"));
    }
    a
}

fn g_lmpop(g: &mut G) -> Vec<Vec<u8>> {
    cmd("LMPOP", mpop_args(g))
}
fn g_blpop(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = g.keys(1, 3);
    a.push(timeout(g));
    cmd("BLPOP", a)
}
fn g_brpop(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = g.keys(1, 3);
    a.push(timeout(g));
    cmd("BRPOP", a)
}
fn g_blmove(g: &mut G) -> Vec<Vec<u8>> {
    cmd("BLMOVE", vec![g.key(), g.key(), end(g), end(g), timeout(g)])
}
fn g_brpoplpush(g: &mut G) -> Vec<Vec<u8>> {
    cmd("BRPOPLPUSH", vec![g.key(), g.key(), timeout(g)])
}
fn g_blmpop(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![timeout(g)];
    a.extend(mpop_args(g));
    cmd("BLMPOP", a)
}
fn g_list_encoding(g: &mut G) -> Vec<Vec<u8>> {
    cmd("OBJECT", vec![b("ENCODING"), g.key()])
}
/// Node size changes (quicklist fill): tiny nodes make every push/insert/remove cross nodes.
fn g_list_fill(g: &mut G) -> Vec<Vec<u8>> {
    cmd(
        "CONFIG",
        vec![
            b("SET"),
            b("list-max-listpack-size"),
            g.pk(&["1", "2", "3", "5", "-1", "-2", "128"]),
        ],
    )
}
