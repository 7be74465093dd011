//! Shared generators for the differential tests (`differential.rs`: one command at a time;
//! `pipeline_fuzz.rs`: whole pipelines in one write). Both include this directory with
//! `#[path = "gen/mod.rs"] mod gen;`.
//!
//! - [`G`]: the seeded deterministic generator (keys, values, integers, floats, TTLs...). Its key
//!   pool is [`KEYS`] by default; [`G::with_pool`] gives another pool, and [`G::focus`] makes one
//!   command draw all its keys from a subset (e.g. one hashtag group, so it stays on one shard).
//! - [`Spec`] tables: one generator per command with its weight, whether it is on by default and
//!   the [`Norm`] its reply is compared with. This file holds strings, bitmaps, keys, expiry,
//!   databases and transactions; collection families keep their own tables in `gen/<family>.rs`
//!   (child modules: they see `G`, `cmd`, `Spec`... through `use super::*`), chained by
//!   [`all_specs`].
//! - [`norm_eq`] compares two replies under a `Norm`; [`mangle`] randomly breaks a command (case,
//!   dropped or extra arguments).
//!
//! To add a command: add a `Spec` row to a table with a generator function; both tests pick it
//! up.
#![allow(dead_code)]

use crate::common::{quote, Resp};

pub mod geo;
pub mod hash;
pub mod hll;
pub mod list;
pub mod set;
pub mod stream;
pub mod zset;

/// Every family's table.
pub fn all_specs() -> impl Iterator<Item = &'static Spec> {
    SPECS
        .iter()
        .chain(list::SPECS)
        .chain(hash::SPECS)
        .chain(set::SPECS)
        .chain(zset::SPECS)
        .chain(hll::SPECS)
        .chain(stream::SPECS)
        .chain(geo::SPECS)
}

// ---------------------------------------------------------------------------------------------
// Deterministic generator.

pub struct G {
    state: u64,
    /// Unix seconds when the run started (for EXPIREAT-style absolute times).
    base_s: i64,
    /// The keys `key()` draws from; the first `hot` of them 80% of the time.
    pool: &'static [&'static str],
    hot: usize,
    /// When set, `key()` draws only from these keys (see [`G::focus`]).
    focus: Option<&'static [&'static str]>,
}

pub const KEYS: &[&str] = &[
    "k0",
    "k1",
    "k2",
    "k3",
    "k4",
    "k5",
    "k6",
    "k7",
    "{t}a",
    "{t}b",
    "",
    "bin\x00\u{7f}",
];

impl G {
    /// A generator over [`KEYS`] (mostly the first 6).
    pub fn new(seed: u64, base_s: i64) -> G {
        G::with_pool(seed, base_s, KEYS, 6)
    }
    /// A generator over another key pool whose first `hot` keys are drawn 80% of the time.
    pub fn with_pool(seed: u64, base_s: i64, pool: &'static [&'static str], hot: usize) -> G {
        assert!(0 < hot && hot <= pool.len());
        G {
            state: seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xDEAD_BEEF,
            base_s,
            pool,
            hot,
            focus: None,
        }
    }
    /// Until reset with `None`, `key()` draws only from `keys` (e.g. one hashtag group, so a
    /// multi-key command stays on one shard). Draws the same random numbers as without focus
    /// would not: only for runners that want it.
    pub fn focus(&mut self, keys: Option<&'static [&'static str]>) {
        self.focus = keys;
    }
    /// Runs `f` with the keys drawn from a family's own `keys` five times in six (never when
    /// the runner focused the keys itself): families whose values other commands must not
    /// clobber (streams, HLLs, geo sets) mostly use keys of their own, and the shared ones
    /// for the type errors the rest of the time.
    pub fn own_keys<T>(&mut self, keys: &'static [&'static str], f: impl FnOnce(&mut G) -> T) -> T {
        let own = self.below(6) != 0 && self.focus.is_none();
        if own {
            self.focus(Some(keys));
        }
        let r = f(self);
        if own {
            self.focus(None);
        }
        r
    }
    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    /// True with probability `pct`%.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    pub fn pk(&mut self, xs: &[&str]) -> Vec<u8> {
        xs[self.below(xs.len() as u64) as usize].as_bytes().to_vec()
    }
    pub fn key(&mut self) -> Vec<u8> {
        if let Some(keys) = self.focus {
            return self.pk(keys);
        }
        // Mostly the first few keys so commands interact.
        let n = if self.chance(80) {
            self.hot
        } else {
            self.pool.len()
        };
        self.pool[self.below(n as u64) as usize].as_bytes().to_vec()
    }
    pub fn keys(&mut self, min: u64, max: u64) -> Vec<Vec<u8>> {
        let n = min + self.below(max - min + 1);
        (0..n).map(|_| self.key()).collect()
    }
    pub fn int_str(&mut self) -> Vec<u8> {
        let v: i64 = match self.below(10) {
            0 => i64::MAX,
            1 => i64::MIN,
            2 => i64::MAX - self.range(0, 3),
            3 => i64::MIN + self.range(0, 3),
            4..=6 => self.range(-20, 20),
            _ => self.range(-1_000_000, 1_000_000),
        };
        v.to_string().into_bytes()
    }
    pub fn float_str(&mut self) -> Vec<u8> {
        let fixed = [
            "0.1",
            "1.5",
            "-0.25",
            "3.0e3",
            "1e10",
            "5.0e-3",
            "-1",
            "0",
            "10.50",
            "1.0",
            "17179869184",
            "-1.1",
            "2.5e-5",
            "123456789.123",
            ".5",
            "5.",
            "1e300",
            "-1e300",
        ];
        match self.below(8) {
            0 => self
                .pick(&[
                    "inf", "-inf", "nan", "abc", "", " 1", "1 ", "0x10", "1e", "--1",
                ])
                .as_bytes()
                .to_vec(),
            1 => self.int_str(),
            _ => self.pick(&fixed).as_bytes().to_vec(),
        }
    }
    pub fn value(&mut self) -> Vec<u8> {
        match self.below(14) {
            0 => Vec::new(),
            1 | 2 => self.int_str(),
            3 => self.float_str(),
            4 => b"9223372036854775808".to_vec(),
            5 => b"00012".to_vec(),
            6 => (0..self.below(64)).map(|_| self.next() as u8).collect(),
            7 => vec![b'a' + self.below(26) as u8; self.below(300) as usize],
            8 => b"\xff\xf0\x00\x0f".to_vec(),
            9 => b"+1".to_vec(),
            _ => {
                let n = self.below(12) as usize;
                (0..n)
                    .map(|_| b"abcdefgh"[self.below(8) as usize])
                    .collect()
            }
        }
    }
    /// Relative seconds for EXPIRE/SET EX: mostly far in the future (so nothing expires during
    /// the run and GT/LT comparisons never tie), sometimes immediate-expiry or invalid values.
    pub fn secs(&mut self) -> Vec<u8> {
        match self.below(20) {
            0 => b"0".to_vec(),
            1 => b"-1".to_vec(),
            2 => b"abc".to_vec(),
            3 => b"1.5".to_vec(),
            4 => b"9223372036854775807".to_vec(),
            5 => b"9223372036854775".to_vec(),
            6 => b"-9223372036854775808".to_vec(),
            _ => self.range(100, 10_000_000).to_string().into_bytes(),
        }
    }
    pub fn millis(&mut self) -> Vec<u8> {
        match self.below(20) {
            0 => b"0".to_vec(),
            1 => b"-5".to_vec(),
            2 => b"x".to_vec(),
            3 => b"9223372036854775807".to_vec(),
            _ => self.range(100_000, 10_000_000_000).to_string().into_bytes(),
        }
    }
    /// Absolute unix seconds: past (deletes the key) or far future.
    pub fn at_secs(&mut self) -> Vec<u8> {
        match self.below(10) {
            0 => b"1".to_vec(),
            1 => (self.base_s - 1000).to_string().into_bytes(),
            2 => b"-3".to_vec(),
            3 => b"nope".to_vec(),
            _ => (self.base_s + self.range(100, 10_000_000))
                .to_string()
                .into_bytes(),
        }
    }
    pub fn at_millis(&mut self) -> Vec<u8> {
        match self.below(10) {
            0 => b"1000".to_vec(),
            1 => ((self.base_s - 1000) * 1000).to_string().into_bytes(),
            2 => b"nope".to_vec(),
            _ => ((self.base_s + self.range(100, 10_000_000)) * 1000 + self.range(0, 999))
                .to_string()
                .into_bytes(),
        }
    }
    pub fn index(&mut self) -> Vec<u8> {
        match self.below(12) {
            0 => b"x".to_vec(),
            1 => i64::MAX.to_string().into_bytes(),
            2 => i64::MIN.to_string().into_bytes(),
            3..=5 => self.range(-20, -1).to_string().into_bytes(),
            _ => self.range(0, 40).to_string().into_bytes(),
        }
    }
    pub fn db(&mut self) -> Vec<u8> {
        match self.below(20) {
            0 => b"16".to_vec(),
            1 => b"-1".to_vec(),
            2 => b"x".to_vec(),
            _ => self.range(0, 3).to_string().into_bytes(),
        }
    }
    pub fn bit_offset(&mut self) -> Vec<u8> {
        match self.below(16) {
            0 => b"-1".to_vec(),
            1 => b"4294967296".to_vec(),
            2 => b"x".to_vec(),
            _ => self.range(0, 300).to_string().into_bytes(),
        }
    }
}

pub fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

pub fn cmd(name: &str, rest: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut v = vec![b(name)];
    v.extend(rest);
    v
}

// ---------------------------------------------------------------------------------------------
// Generators, one per command.

pub fn g_key_only(name: &'static str) -> impl Fn(&mut G) -> Vec<Vec<u8>> {
    move |g| cmd(name, vec![g.key()])
}

pub fn g_get(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("GET")(g)
}
pub fn g_set(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.value()];
    let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
    if g.chance(25) {
        opts.push(vec![g.pk(&["NX", "XX", "nx"])]);
    }
    if g.chance(20) {
        opts.push(vec![g.pk(&["GET", "get"])]);
    }
    if g.chance(40) {
        opts.push(match g.below(5) {
            0 => vec![b("EX"), g.secs()],
            1 => vec![b("PX"), g.millis()],
            2 => vec![b("EXAT"), g.at_secs()],
            3 => vec![b("PXAT"), g.at_millis()],
            _ => vec![b("KEEPTTL")],
        });
    }
    if g.chance(5) {
        // Conflicting or malformed options.
        opts.push(match g.below(5) {
            0 => vec![b("EX"), b("100"), b("PX"), b("100000")],
            1 => vec![b("NX"), b("XX")],
            2 => vec![b("KEEPTTL"), b("EX"), b("100")],
            3 => vec![b("EX")],
            _ => vec![b("BOGUS")],
        });
    }
    for _ in 0..opts.len() {
        let i = g.below(opts.len() as u64) as usize;
        let j = g.below(opts.len() as u64) as usize;
        opts.swap(i, j);
    }
    for o in opts {
        a.extend(o);
    }
    cmd("SET", a)
}
pub fn g_setnx(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SETNX", vec![g.key(), g.value()])
}
pub fn g_setex(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SETEX", vec![g.key(), g.secs(), g.value()])
}
pub fn g_psetex(g: &mut G) -> Vec<Vec<u8>> {
    cmd("PSETEX", vec![g.key(), g.millis(), g.value()])
}
pub fn g_getex(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    match g.below(8) {
        0 => a.extend([b("EX"), g.secs()]),
        1 => a.extend([b("PX"), g.millis()]),
        2 => a.extend([b("EXAT"), g.at_secs()]),
        3 => a.extend([b("PXAT"), g.at_millis()]),
        4 => a.push(b("PERSIST")),
        5 => a.extend([b("EX"), b("100"), b("PERSIST")]),
        6 => a.push(g.pk(&["EX", "KEEPTTL", "bogus"])),
        _ => {}
    }
    cmd("GETEX", a)
}
pub fn g_getdel(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("GETDEL")(g)
}
pub fn g_getset(g: &mut G) -> Vec<Vec<u8>> {
    cmd("GETSET", vec![g.key(), g.value()])
}
pub fn g_mget(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MGET", g.keys(1, 6))
}
pub fn kv_pairs(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = Vec::new();
    for _ in 0..1 + g.below(4) {
        a.push(g.key());
        a.push(g.value());
    }
    if g.chance(5) {
        a.pop(); // odd number of arguments
    }
    a
}
pub fn g_mset(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MSET", kv_pairs(g))
}
pub fn g_msetnx(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MSETNX", kv_pairs(g))
}
pub fn g_append(g: &mut G) -> Vec<Vec<u8>> {
    cmd("APPEND", vec![g.key(), g.value()])
}
pub fn g_strlen(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("STRLEN")(g)
}
pub fn g_getrange(g: &mut G) -> Vec<Vec<u8>> {
    cmd("GETRANGE", vec![g.key(), g.index(), g.index()])
}
pub fn g_substr(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SUBSTR", vec![g.key(), g.index(), g.index()])
}
pub fn g_setrange(g: &mut G) -> Vec<Vec<u8>> {
    // (Offsets just below 512MB are valid and would allocate 512MB on both servers: avoided.)
    let off = match g.below(12) {
        0 => b("-1"),
        1 => b("536870912"),
        2 => b("x"),
        _ => g.range(0, 60).to_string().into_bytes(),
    };
    let v = if g.chance(15) { Vec::new() } else { g.value() };
    cmd("SETRANGE", vec![g.key(), off, v])
}
pub fn g_incr(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("INCR")(g)
}
pub fn g_decr(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("DECR")(g)
}
pub fn incr_amount(g: &mut G) -> Vec<u8> {
    if g.chance(10) {
        g.float_str()
    } else {
        g.int_str()
    }
}
pub fn g_incrby(g: &mut G) -> Vec<Vec<u8>> {
    cmd("INCRBY", vec![g.key(), incr_amount(g)])
}
pub fn g_decrby(g: &mut G) -> Vec<Vec<u8>> {
    cmd("DECRBY", vec![g.key(), incr_amount(g)])
}
pub fn g_incrbyfloat(g: &mut G) -> Vec<Vec<u8>> {
    cmd("INCRBYFLOAT", vec![g.key(), g.float_str()])
}
pub fn g_lcs(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.key()];
    match g.below(7) {
        0 => a.push(b("LEN")),
        1 => a.push(b("IDX")),
        2 => a.extend([
            b("IDX"),
            b("MINMATCHLEN"),
            g.range(0, 3).to_string().into_bytes(),
        ]),
        3 => a.extend([b("IDX"), b("WITHMATCHLEN")]),
        4 => a.extend([b("LEN"), b("IDX")]),
        5 => a.extend([b("MINMATCHLEN"), b("x")]),
        _ => {}
    }
    cmd("LCS", a)
}
pub fn g_setbit(g: &mut G) -> Vec<Vec<u8>> {
    let v = g.pk(&["0", "1", "1", "0", "2", "x", "-1"]);
    cmd("SETBIT", vec![g.key(), g.bit_offset(), v])
}
pub fn g_getbit(g: &mut G) -> Vec<Vec<u8>> {
    let off = if g.chance(10) {
        b("4294967295")
    } else {
        g.bit_offset()
    };
    cmd("GETBIT", vec![g.key(), off])
}
pub fn byte_bit(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(40) {
        a.push(g.pk(&["BYTE", "BIT", "bit", "bogus"]));
    }
}
pub fn g_bitcount(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    match g.below(4) {
        0 => {}
        1 => a.push(g.index()), // start without end: syntax error
        _ => {
            a.push(g.index());
            a.push(g.index());
            byte_bit(g, &mut a);
        }
    }
    cmd("BITCOUNT", a)
}
pub fn g_bitpos(g: &mut G) -> Vec<Vec<u8>> {
    let bit = g.pk(&["0", "1", "1", "0", "2", "x"]);
    let mut a = vec![g.key(), bit];
    match g.below(4) {
        0 => {}
        1 => a.push(g.index()),
        _ => {
            a.push(g.index());
            a.push(g.index());
            byte_bit(g, &mut a);
        }
    }
    cmd("BITPOS", a)
}
pub fn g_bitop(g: &mut G) -> Vec<Vec<u8>> {
    let op = g.pk(&["AND", "OR", "XOR", "NOT", "and", "not", "NAND"]);
    let mut a = vec![op.clone(), g.key()];
    let n = if op.eq_ignore_ascii_case(b"not") && g.chance(85) {
        1
    } else {
        1 + g.below(3)
    };
    for _ in 0..n {
        a.push(g.key());
    }
    cmd("BITOP", a)
}
pub fn bf_type(g: &mut G) -> Vec<u8> {
    match g.below(12) {
        0 => b("u64"),
        1 => b("i65"),
        2 => b("x8"),
        3 => b("i0"),
        4 => b("i64"),
        5 => b("u63"),
        _ => {
            let signed = g.chance(50);
            let bits = if signed {
                g.range(1, 64)
            } else {
                g.range(1, 63)
            };
            format!("{}{}", if signed { 'i' } else { 'u' }, bits).into_bytes()
        }
    }
}
pub fn bf_offset(g: &mut G) -> Vec<u8> {
    match g.below(10) {
        0 => format!("#{}", g.range(0, 20)).into_bytes(),
        1 => b("-1"),
        2 => b("4294967296"),
        _ => g.range(0, 200).to_string().into_bytes(),
    }
}
pub fn bf_ops(g: &mut G, read_only: bool) -> Vec<Vec<u8>> {
    let mut a = vec![g.key()];
    for _ in 0..1 + g.below(3) {
        let op = if read_only { 0 } else { g.below(5) };
        match op {
            0 => a.extend([b("GET"), bf_type(g), bf_offset(g)]),
            1 => a.extend([b("SET"), bf_type(g), bf_offset(g), g.int_str()]),
            2 => a.extend([b("INCRBY"), bf_type(g), bf_offset(g), g.int_str()]),
            3 => a.extend([
                b("OVERFLOW"),
                g.pk(&["WRAP", "SAT", "FAIL", "sat", "bogus"]),
            ]),
            _ => a.push(g.pk(&["GET", "SET", "bogus"])),
        }
    }
    if read_only && g.chance(10) {
        a.extend([b("SET"), b("u8"), b("0"), b("1")]);
    }
    a
}
pub fn g_bitfield(g: &mut G) -> Vec<Vec<u8>> {
    cmd("BITFIELD", bf_ops(g, false))
}
pub fn g_bitfield_ro(g: &mut G) -> Vec<Vec<u8>> {
    cmd("BITFIELD_RO", bf_ops(g, true))
}
pub fn g_del(g: &mut G) -> Vec<Vec<u8>> {
    cmd("DEL", g.keys(1, 4))
}
pub fn g_unlink(g: &mut G) -> Vec<Vec<u8>> {
    cmd("UNLINK", g.keys(1, 4))
}
pub fn g_exists(g: &mut G) -> Vec<Vec<u8>> {
    cmd("EXISTS", g.keys(1, 5))
}
pub fn g_touch(g: &mut G) -> Vec<Vec<u8>> {
    cmd("TOUCH", g.keys(1, 4))
}
pub fn g_type(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("TYPE")(g)
}
pub fn expire_opts(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(40) {
        a.push(g.pk(&["NX", "XX", "GT", "LT", "gt", "bogus"]));
        if g.chance(15) {
            a.push(g.pk(&["NX", "XX", "GT", "LT"]));
        }
    }
}
pub fn g_expire(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.secs()];
    expire_opts(g, &mut a);
    cmd("EXPIRE", a)
}
pub fn g_pexpire(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.millis()];
    expire_opts(g, &mut a);
    cmd("PEXPIRE", a)
}
pub fn g_expireat(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.at_secs()];
    expire_opts(g, &mut a);
    cmd("EXPIREAT", a)
}
pub fn g_pexpireat(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.at_millis()];
    expire_opts(g, &mut a);
    cmd("PEXPIREAT", a)
}
pub fn g_persist(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("PERSIST")(g)
}
pub fn g_ttl(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("TTL")(g)
}
pub fn g_pttl(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("PTTL")(g)
}
pub fn g_expiretime(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("EXPIRETIME")(g)
}
pub fn g_pexpiretime(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("PEXPIRETIME")(g)
}
pub fn g_rename(g: &mut G) -> Vec<Vec<u8>> {
    cmd("RENAME", vec![g.key(), g.key()])
}
pub fn g_renamenx(g: &mut G) -> Vec<Vec<u8>> {
    cmd("RENAMENX", vec![g.key(), g.key()])
}
pub fn g_copy(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.key()];
    if g.chance(40) {
        a.extend([b("DB"), g.db()]);
    }
    if g.chance(40) {
        a.push(b("REPLACE"));
    }
    if g.chance(5) {
        a.push(b("bogus"));
    }
    cmd("COPY", a)
}
pub fn g_move(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MOVE", vec![g.key(), g.db()])
}
pub fn g_dbsize(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("DBSIZE")]
}
pub fn g_flushdb(g: &mut G) -> Vec<Vec<u8>> {
    match g.below(4) {
        0 => vec![b("FLUSHDB"), b("ASYNC")],
        1 => vec![b("FLUSHDB"), b("SYNC")],
        2 if g.chance(30) => vec![b("FLUSHDB"), b("bogus")],
        _ => vec![b("FLUSHDB")],
    }
}
pub fn g_flushall(g: &mut G) -> Vec<Vec<u8>> {
    if g.chance(20) {
        vec![b("FLUSHALL"), b("SYNC")]
    } else {
        vec![b("FLUSHALL")]
    }
}
pub fn g_select(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SELECT", vec![g.db()])
}
pub fn g_swapdb(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SWAPDB", vec![g.db(), g.db()])
}
pub fn g_randomkey(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("RANDOMKEY")]
}
pub fn g_keys(g: &mut G) -> Vec<Vec<u8>> {
    let pat = g.pick(&[
        "*", "k*", "k[0-3]", "*a", "k?", "{t}*", "nomatch", "\\{t\\}*", "[a-",
    ]);
    cmd("KEYS", vec![b(pat)])
}
pub fn g_object_encoding(g: &mut G) -> Vec<Vec<u8>> {
    cmd("OBJECT", vec![b("ENCODING"), g.key()])
}
pub fn g_lpush(g: &mut G) -> Vec<Vec<u8>> {
    cmd("LPUSH", vec![g.key(), g.value()])
}
pub fn g_sadd(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SADD", vec![g.key(), g.value()])
}
pub fn g_hset(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HSET", vec![g.key(), b("f"), g.value()])
}

// Transactions: single client, so WATCH is invalidated by this client's own writes before MULTI
// (and by FLUSHDB/SWAPDB/MOVE/RENAME...). Replies inside EXEC are compared element-wise with
// the normalisation of the queued command (see `run_seed`).
/// PUBLISH / SPUBLISH (no subscribers in these tests: the count and errors are compared).
pub fn g_publish(g: &mut G) -> Vec<Vec<u8>> {
    let name = *g.pick(&["PUBLISH", "SPUBLISH"]);
    let (k, v) = (g.key(), g.value());
    cmd(name, vec![k, v])
}

/// EVAL / EVAL_RO of scripts that read and write their keys (on any shard), with good and bad
/// key counts. No `return redis.call(...)` tail calls: their error replies lack Redis's line
/// suffix (docs/design/scripting.md).
pub fn g_eval(g: &mut G) -> Vec<Vec<u8>> {
    let body = *g.pick(&[
        "local r = redis.call('get', KEYS[1]) return r",
        "local r = redis.call('set', KEYS[1], ARGV[1]) return r",
        "local r = redis.call('incr', KEYS[1]) return r",
        "local r = redis.pcall('lpush', KEYS[1], ARGV[1]) return r",
        "local n = redis.call('exists', KEYS[1], KEYS[2]) return n",
        "local v = redis.call('mget', KEYS[1], KEYS[2]) return v",
        "redis.call('del', KEYS[2]) local t = redis.call('type', KEYS[1]) return t",
        "return {KEYS[1], ARGV[1], #KEYS}",
        "local ok, e = pcall(redis.call, 'hget', KEYS[1], 'f') return {tostring(ok), e}",
        // Undeclared keys after a write: on several shards the run starts over under the
        // whole-keyspace lock, its writes undone (it must look like one run).
        "redis.call('incr', KEYS[1]) return redis.call('get', ARGV[1])",
        "redis.call('set', KEYS[1], ARGV[1]) redis.call('del', KEYS[2]) return {redis.call('exists', KEYS[1]), redis.call('type', ARGV[1])}",
        "local n = redis.call('append', KEYS[2], ARGV[1]) redis.call('set', ARGV[1], n) return n",
    ]);
    let name = if g.chance(15) { "EVAL_RO" } else { "EVAL" };
    if g.chance(5) {
        // Many arguments to one redis.call (more than 1000 travel in a table).
        let n = 900 + g.below(800) as usize;
        let mut a = vec![
            b("local r = redis.call('rpush', KEYS[1], unpack(ARGV)) return r"),
            b("1"),
            g.key(),
        ];
        a.extend((0..n).map(|i| i.to_string().into_bytes()));
        return cmd(name, a);
    }
    let numkeys = match g.below(12) {
        0 => b("-1"),
        1 => b("x"),
        2 => b("9"),
        _ => b("2"),
    };
    cmd(name, vec![b(body), numkeys, g.key(), g.key(), g.value()])
}

/// The library FUNCTION LOAD loads (functions reading, writing, read-only, and one that reaches
/// a key it did not declare).
/// (No `return redis.call(...)`: that tail call loses the function's line in error replies, a
/// known difference, docs/design/scripting.md.)
pub const DIFF_LIB: &str = "#!lua name=difflib\n\
redis.register_function('dget', function(keys, args) local r = redis.call('get', keys[1]) return r end)\n\
redis.register_function('dset', function(keys, args) local r = redis.call('set', keys[1], args[1]) return r end)\n\
redis.register_function{function_name='dro', callback=function(keys, args) local r = redis.call('exists', keys[1]) return r end, flags={'no-writes'}}\n\
redis.register_function('dmix', function(keys, args) redis.call('incr', keys[1]) local t = redis.call('type', args[1]) return t end)\n";

/// FUNCTION LOAD [REPLACE] / DELETE / FLUSH / STATS of the one test library.
pub fn g_function(g: &mut G) -> Vec<Vec<u8>> {
    let a = match g.below(10) {
        0..=3 => vec![b("LOAD"), b(DIFF_LIB)],
        4..=5 => vec![b("LOAD"), b("REPLACE"), b(DIFF_LIB)],
        6 => vec![b("DELETE"), g.pk(&["difflib", "nolib"])],
        // (FUNCTION LIST is left out: Redis lists a library's functions in its dict's order,
        // which a random hash seed changes per process.)
        7..=8 => vec![b("STATS")],
        _ => vec![b("FLUSH")],
    };
    cmd("FUNCTION", a)
}

/// FCALL / FCALL_RO of the library's functions (or of a missing one).
pub fn g_fcall(g: &mut G) -> Vec<Vec<u8>> {
    let f = g.pk(&["dget", "dset", "dro", "dmix", "nosuch"]);
    let name = if g.chance(20) { "FCALL_RO" } else { "FCALL" };
    let numkeys = match g.below(10) {
        0 => b("-1"),
        1 => b("5"),
        _ => b("1"),
    };
    cmd(name, vec![f, numkeys, g.key(), g.value()])
}

/// PUBSUB's subcommands, with good and bad arguments.
pub fn g_pubsub(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = match g.below(7) {
        0 => vec![b("NUMSUB")],
        1 => vec![b("SHARDNUMSUB")],
        2 => vec![b("NUMPAT")],
        3 => vec![b("CHANNELS")],
        4 => vec![b("SHARDCHANNELS")],
        5 => vec![b("HELP")],
        _ => vec![g.pk(&["NOPE", "numsub", "Channels"])],
    };
    if g.chance(60) {
        a.extend(g.keys(0, 3));
    }
    cmd("PUBSUB", a)
}

/// CLIENT TRACKINGINFO / GETREDIR / CACHING on a connection that is not tracking.
pub fn g_client_tracking(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.pk(&["TRACKINGINFO", "GETREDIR", "CACHING"])];
    if a[0] == b"CACHING" || g.chance(10) {
        a.push(g.pk(&["yes", "no", "maybe"]));
    }
    cmd("CLIENT", a)
}

pub fn g_multi(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("MULTI")]
}
pub fn g_exec(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("EXEC")]
}
pub fn g_discard(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("DISCARD")]
}
pub fn g_watch(g: &mut G) -> Vec<Vec<u8>> {
    cmd("WATCH", g.keys(1, 3))
}
pub fn g_unwatch(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("UNWATCH")]
}

// ---------------------------------------------------------------------------------------------
// The table.

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Norm {
    Exact,
    /// Integer replies: equal when both are negative and equal, or both >= 0 within the
    /// tolerance (timing-dependent TTLs).
    Ttl(i64),
    /// Array replies compared as sorted lists (KEYS, SMEMBERS).
    Sorted,
    /// Flat field/value arrays compared as sorted pairs (HGETALL of a hashtable-encoded hash,
    /// whose order is unspecified).
    SortedPairs,
    /// Any bulk equals any bulk (RANDOMKEY); nil must match nil.
    AnyBulk,
    /// EXEC: arrays compared element-wise with the norms of the queued commands.
    Exec,
    /// A random sample of distinct elements asked for with a positive count `n` (SRANDMEMBER,
    /// ZRANDMEMBER, HRANDFIELD): the lengths must match, and when the reply is shorter than `n`
    /// (the whole collection) the elements too, as sorted lists.
    Sample(i64),
    /// `Sample` with field/value (member/score) pairs: `n` counts pairs.
    SamplePairs(i64),
    /// One SCAN-family call, `[cursor, elements]` (elements in field/value or member/score
    /// pairs when `pairs`). When it started at cursor 0 (`from_start`) and both cursors are 0,
    /// the whole collection was scanned and the elements must match as sorted lists; otherwise
    /// what one call returns depends on the table layout and any two `[cursor, array]` replies
    /// are accepted.
    Scan {
        pairs: bool,
        from_start: bool,
    },
    /// SORT/SORT_RO ... ALPHA without STORE: Redis compares elements with `strcoll`, so two
    /// elements equal up to their first NUL byte ("a" and "a\0b") tie, and tied elements come in
    /// the order of its hash table (SORT turns a sorted set into a skiplist + dict and loads
    /// it from the dict; a set is a dict), which is random per process. Replies are cut in
    /// chunks of `width` (one per GET, or 1); `col` is the chunk column holding the sorted
    /// element itself (no GET, or GET #). Equal when they are, or when the chunk counts match,
    /// the `col` column holds the same C strings (the bytes before the first NUL) at every
    /// position, and, without LIMIT (`window` false), the chunks are the same multiset.
    SortTies {
        width: usize,
        col: Option<usize>,
        window: bool,
    },
}

/// The norm of one generated command: the spec's, except where the reply's shape depends on
/// the arguments (SORT ALPHA's ties, see `Norm::SortTies`).
pub fn norm_of(spec: &Spec, args: &[Vec<u8>]) -> Norm {
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    if matches!(spec.name, "sort" | "sort_ro") {
        let alpha = args.iter().skip(2).any(|a| is(a, "alpha"));
        let store = args.iter().skip(2).any(|a| is(a, "store"));
        // BY with a pattern without `*` does not sort: the elements come in the collection's
        // own order, which for a hashtable-encoded set is its random table order (a mangled
        // command can end in `BY junk`). Compare as multisets, or only the lengths of a LIMIT
        // window.
        let nosort = args
            .windows(2)
            .skip(1)
            .any(|w| is(&w[0], "by") && !w[1].contains(&b'*'));
        if nosort && !store {
            let window = args.iter().skip(2).any(|a| is(a, "limit"));
            return if window {
                Norm::Sample(0)
            } else {
                Norm::Sorted
            };
        }
        if alpha && !store {
            let gets: Vec<&Vec<u8>> = args
                .windows(2)
                .skip(1)
                .filter(|w| is(&w[0], "get"))
                .map(|w| &w[1])
                .collect();
            let (width, col) = if gets.is_empty() {
                (1, Some(0))
            } else {
                (gets.len(), gets.iter().position(|g| g.as_slice() == b"#"))
            };
            let window = args.iter().skip(2).any(|a| is(a, "limit"));
            return Norm::SortTies { width, col, window };
        }
    }
    spec.norm
}

pub struct Spec {
    pub name: &'static str,
    /// Generated unless DIFF_COMMANDS picks a subset.
    pub default: bool,
    /// Relative frequency.
    pub weight: u32,
    pub norm: Norm,
    pub gen: fn(&mut G) -> Vec<Vec<u8>>,
}

pub const fn s(name: &'static str, weight: u32, gen: fn(&mut G) -> Vec<Vec<u8>>) -> Spec {
    Spec {
        name,
        default: true,
        weight,
        norm: Norm::Exact,
        gen,
    }
}
pub const fn sn(
    name: &'static str,
    weight: u32,
    norm: Norm,
    gen: fn(&mut G) -> Vec<Vec<u8>>,
) -> Spec {
    Spec {
        name,
        default: true,
        weight,
        norm,
        gen,
    }
}
pub const fn opt(name: &'static str, weight: u32, gen: fn(&mut G) -> Vec<Vec<u8>>) -> Spec {
    Spec {
        name,
        default: false,
        weight,
        norm: Norm::Exact,
        gen,
    }
}

pub static SPECS: &[Spec] = &[
    // strings
    s("get", 8, g_get),
    s("set", 10, g_set),
    s("setnx", 2, g_setnx),
    s("setex", 2, g_setex),
    s("psetex", 2, g_psetex),
    s("getex", 3, g_getex),
    s("getdel", 2, g_getdel),
    s("getset", 2, g_getset),
    s("mget", 3, g_mget),
    s("mset", 3, g_mset),
    s("msetnx", 2, g_msetnx),
    s("append", 4, g_append),
    s("strlen", 2, g_strlen),
    s("getrange", 3, g_getrange),
    s("substr", 1, g_substr),
    s("setrange", 3, g_setrange),
    s("incr", 4, g_incr),
    s("decr", 2, g_decr),
    s("incrby", 3, g_incrby),
    s("decrby", 2, g_decrby),
    s("incrbyfloat", 4, g_incrbyfloat),
    s("lcs", 2, g_lcs),
    // bitmaps
    s("setbit", 4, g_setbit),
    s("getbit", 3, g_getbit),
    s("bitcount", 3, g_bitcount),
    s("bitpos", 3, g_bitpos),
    s("bitop", 2, g_bitop),
    s("bitfield", 4, g_bitfield),
    s("bitfield_ro", 1, g_bitfield_ro),
    // keys / expiry / databases
    s("del", 3, g_del),
    s("unlink", 1, g_unlink),
    s("exists", 3, g_exists),
    s("touch", 1, g_touch),
    s("type", 2, g_type),
    s("expire", 3, g_expire),
    s("pexpire", 2, g_pexpire),
    s("expireat", 2, g_expireat),
    s("pexpireat", 2, g_pexpireat),
    s("persist", 2, g_persist),
    sn("ttl", 3, Norm::Ttl(2), g_ttl),
    sn("pttl", 2, Norm::Ttl(2000), g_pttl),
    sn("expiretime", 1, Norm::Ttl(2), g_expiretime),
    sn("pexpiretime", 1, Norm::Ttl(2000), g_pexpiretime),
    s("rename", 2, g_rename),
    s("renamenx", 2, g_renamenx),
    s("copy", 2, g_copy),
    s("move", 2, g_move),
    s("dbsize", 2, g_dbsize),
    s("flushdb", 1, g_flushdb),
    s("select", 3, g_select),
    s("swapdb", 1, g_swapdb),
    sn("randomkey", 1, Norm::AnyBulk, g_randomkey),
    sn("keys", 1, Norm::Sorted, g_keys),
    // transactions
    s("multi", 3, g_multi),
    sn("exec", 3, Norm::Exec, g_exec),
    s("discard", 1, g_discard),
    s("watch", 3, g_watch),
    s("unwatch", 1, g_unwatch),
    // pub/sub and client-side caching queries
    s("publish", 2, g_publish),
    s("pubsub", 2, g_pubsub),
    s("client", 1, g_client_tracking),
    // scripting
    s("eval", 2, g_eval),
    s("function", 1, g_function),
    s("fcall", 2, g_fcall),
    // optional: enable with DIFF_COMMANDS=all or by name
    opt("flushall", 1, g_flushall),
    opt("object", 1, g_object_encoding),
    opt("lpush", 2, g_lpush),
    opt("sadd", 2, g_sadd),
    opt("hset", 2, g_hset),
];

// ---------------------------------------------------------------------------------------------
// Comparing replies, helpers for the runners.

/// A numeric environment knob.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A command as redis-cli would quote it.
pub fn fmt_cmd(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// Are replies `a` (reference) and `b` equal under `norm`? `inner`: the norms of the queued
/// commands, for `Norm::Exec`.
pub fn norm_eq(norm: Norm, a: &Resp, b: &Resp, inner: &[Norm]) -> bool {
    match (norm, a, b) {
        (Norm::Exec, Resp::Array(x), Resp::Array(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).enumerate().all(|(i, (p, q))| {
                    norm_eq(inner.get(i).copied().unwrap_or(Norm::Exact), p, q, &[])
                })
        }
        (Norm::Ttl(tol), Resp::Int(x), Resp::Int(y)) => {
            if *x < 0 || *y < 0 {
                x == y
            } else {
                (x - y).abs() <= tol
            }
        }
        (Norm::Sorted, Resp::Array(x), Resp::Array(y)) => {
            let mut x = x.clone();
            let mut y = y.clone();
            let key = |r: &Resp| r.as_bytes().map(|b| b.to_vec()).unwrap_or_default();
            x.sort_by_key(key);
            y.sort_by_key(key);
            x == y
        }
        (Norm::SortedPairs, Resp::Array(x), Resp::Array(y)) if x.len() % 2 == 0 => {
            let pairs = |v: &[Resp]| {
                let mut p: Vec<(Vec<u8>, Vec<u8>)> = v
                    .chunks(2)
                    .map(|c| {
                        let f = |r: &Resp| r.as_bytes().map(|b| b.to_vec()).unwrap_or_default();
                        (f(&c[0]), f(&c[1]))
                    })
                    .collect();
                p.sort();
                p
            };
            x.len() == y.len() && pairs(x) == pairs(y)
        }
        (Norm::AnyBulk, Resp::Bulk(_), Resp::Bulk(_)) => true,
        (Norm::Sample(n), Resp::Array(x), Resp::Array(y)) => {
            x.len() == y.len() && ((x.len() as i64) >= n || norm_eq(Norm::Sorted, a, b, &[]))
        }
        (Norm::SamplePairs(n), Resp::Array(x), Resp::Array(y)) => {
            x.len() == y.len()
                && ((x.len() as i64) / 2 >= n || norm_eq(Norm::SortedPairs, a, b, &[]))
        }
        (Norm::Scan { pairs, from_start }, Resp::Array(x), Resp::Array(y))
            if x.len() == 2 && y.len() == 2 =>
        {
            let zero = |r: &Resp| r.as_bytes() == Some(&b"0"[..]);
            let inner = if pairs {
                Norm::SortedPairs
            } else {
                Norm::Sorted
            };
            if from_start && zero(&x[0]) && zero(&y[0]) {
                norm_eq(inner, &x[1], &y[1], &[])
            } else {
                matches!((&x[1], &y[1]), (Resp::Array(_), Resp::Array(_)))
            }
        }
        (Norm::SortTies { width, col, window }, Resp::Array(x), Resp::Array(y)) => {
            if x == y {
                return true;
            }
            let width = width.max(1);
            if x.len() != y.len() || x.len() % width != 0 {
                return false;
            }
            let cstr = |r: &Resp| {
                let b = r.as_bytes().unwrap_or_default();
                b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())].to_vec()
            };
            let same_col = col.is_none_or(|c| {
                x.chunks(width)
                    .zip(y.chunks(width))
                    .all(|(p, q)| cstr(&p[c]) == cstr(&q[c]))
            });
            let same_set = window || {
                let mut p: Vec<&[Resp]> = x.chunks(width).collect();
                let mut q: Vec<&[Resp]> = y.chunks(width).collect();
                let key = |c: &&[Resp]| c.iter().map(|r| r.to_string()).collect::<Vec<_>>();
                p.sort_by_key(key);
                q.sort_by_key(key);
                p == q
            };
            same_col && same_set
        }
        _ => a == b,
    }
}

/// The command that dumps `key` whose TYPE is `ty` (GET, LRANGE, HGETALL, SMEMBERS, ZRANGE
/// WITHSCORES) and the norm to compare its reply with.
pub fn dump_cmd(ty: &[u8], key: &[u8]) -> (Vec<Vec<u8>>, Norm) {
    let k = key.to_vec();
    match ty {
        b"list" => (vec![b("LRANGE"), k, b("0"), b("-1")], Norm::Exact),
        b"hash" => (vec![b("HGETALL"), k], Norm::SortedPairs),
        b"set" => (vec![b("SMEMBERS"), k], Norm::Sorted),
        b"zset" => (
            vec![b("ZRANGE"), k, b("0"), b("-1"), b("WITHSCORES")],
            Norm::Exact,
        ),
        b"stream" => (vec![b("XRANGE"), k, b("-"), b("+")], Norm::Exact),
        _ => (vec![b("GET"), k], Norm::Exact),
    }
}

/// Keeps `queued` (the norms of the commands queued since MULTI, for comparing EXEC's array)
/// up to date after `args` got `reply` from the reference: a QUEUED reply queues `norm`; a
/// successful MULTI starts a queue (a nested MULTI error keeps it); EXEC, DISCARD and RESET end
/// it.
pub fn track_queue(queued: &mut Vec<Norm>, args: &[Vec<u8>], norm: Norm, reply: Option<&Resp>) {
    let name = &args[0];
    if matches!(reply, Some(Resp::Simple(s)) if s == b"QUEUED") {
        queued.push(norm);
    } else if name.eq_ignore_ascii_case(b"exec")
        || name.eq_ignore_ascii_case(b"discard")
        || name.eq_ignore_ascii_case(b"reset")
        || (name.eq_ignore_ascii_case(b"multi") && matches!(reply, Some(Resp::Simple(_))))
    {
        queued.clear();
    }
}

/// Randomly mangles a generated command: case changes, dropped or extra arguments (arity errors).
pub fn mangle(g: &mut G, mut args: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    if g.chance(10) {
        args[0] = args[0]
            .iter()
            .map(|c| {
                if g.chance(50) {
                    c.to_ascii_lowercase()
                } else {
                    *c
                }
            })
            .collect();
    }
    if args.len() > 1 && g.chance(3) {
        let keep = 1 + g.below(args.len() as u64 - 1) as usize;
        args.truncate(keep);
    } else if g.chance(2) {
        args.push(b("junk"));
    }
    args
}

/// A blocking command with timeout 0 (forever) over the pool keys (for runners that make sure
/// it cannot block forever).
pub fn g_blocking(g: &mut G) -> Vec<Vec<u8>> {
    let side = |g: &mut G, a: &str, b: &str| if g.chance(50) { a.into() } else { b.into() };
    let keys = |g: &mut G| g.keys(1, 3);
    let mpop = |g: &mut G, name: &str, ends: (&str, &str)| {
        let ks = keys(g);
        let mut a = vec![b(name), b("0"), ks.len().to_string().into_bytes()];
        a.extend(ks);
        a.push(side(g, ends.0, ends.1));
        if g.chance(40) {
            a.push(b("COUNT"));
            a.push(g.range(1, 4).to_string().into_bytes());
        }
        a
    };
    match g.below(8) {
        0 => cmd("BLPOP", [keys(g), vec![b("0")]].concat()),
        1 => cmd("BRPOP", [keys(g), vec![b("0")]].concat()),
        2 => {
            let (s, d) = (g.key(), g.key());
            let (x, y) = (side(g, "LEFT", "RIGHT"), side(g, "LEFT", "RIGHT"));
            cmd("BLMOVE", vec![s, d, x, y, b("0")])
        }
        3 => cmd("BRPOPLPUSH", vec![g.key(), g.key(), b("0")]),
        4 => mpop(g, "BLMPOP", ("LEFT", "RIGHT")),
        5 => cmd("BZPOPMIN", [keys(g), vec![b("0")]].concat()),
        6 => cmd("BZPOPMAX", [keys(g), vec![b("0")]].concat()),
        _ => mpop(g, "BZMPOP", ("MIN", "MAX")),
    }
}
