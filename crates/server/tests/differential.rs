//! Differential test: seeded random command sequences sent to a real `redis-server` (the
//! reference) and to damselfly (`--proactor_threads=4`) over raw RESP connections; every reply is
//! parsed and compared structurally, normalising only values that depend on timing (TTLs) or
//! ordering (KEYS). Error texts are compared byte for byte.
//!
//! Knobs (environment variables):
//! - `DIFF_COMMANDS=get,set,incr` — only generate these commands (names as in `SPECS`).
//!   `DIFF_COMMANDS=all` also enables the optional (non-default) generators.
//! - `DIFF_SEEDS=N` (default 20), `DIFF_STEPS=N` (default 400), `DIFF_SEED=S` (run only seed S).
//! - `DIFF_THREADS=N` — damselfly's `--proactor_threads` (default 4).
//! - `DIFF_PARANOID=1` — after every command also compare GET of every pool key (DBSIZE is
//!   always compared after every command).
//! - `DIFF_KEEP_GOING=1` — don't stop at the first diverging seed: report the first mismatch of
//!   every seed at the end (useful to collect all differences at once).
//!
//! On the first mismatch the test panics with the seed, step, command, both replies and the
//! commands leading up to it, plus a command line that reproduces just that seed.
//!
//! To add a command: add a `Spec` row to `SPECS` with a generator function. Collection families
//! keep their generators in `differential/<family>.rs` (child modules: they see `G`, `cmd`,
//! `Spec`... through `use super::*`), each with its own `SPECS` table chained by `all_specs`.
//!
//! The final-state check dumps every pool key by its type on the reference side (GET, LRANGE,
//! HGETALL, SMEMBERS, ZRANGE WITHSCORES), so collection contents are compared too.

mod common;

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{quote, RawConn, RedisServer, Resp, Server};

#[path = "differential/hash.rs"]
mod hash;
#[path = "differential/list.rs"]
mod list;
#[path = "differential/set.rs"]
mod set;
#[path = "differential/zset.rs"]
mod zset;

/// Every family's table.
fn all_specs() -> impl Iterator<Item = &'static Spec> {
    SPECS
        .iter()
        .chain(list::SPECS)
        .chain(hash::SPECS)
        .chain(set::SPECS)
        .chain(zset::SPECS)
}

// ---------------------------------------------------------------------------------------------
// Deterministic generator.

struct G {
    state: u64,
    /// Unix seconds when the run started (for EXPIREAT-style absolute times).
    base_s: i64,
}

const KEYS: &[&str] = &[
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
    fn new(seed: u64, base_s: i64) -> G {
        G {
            state: seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xDEAD_BEEF,
            base_s,
        }
    }
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    /// True with probability `pct`%.
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    fn pk(&mut self, xs: &[&str]) -> Vec<u8> {
        xs[self.below(xs.len() as u64) as usize].as_bytes().to_vec()
    }
    fn key(&mut self) -> Vec<u8> {
        // Mostly the first few keys so commands interact.
        let n = if self.chance(80) { 6 } else { KEYS.len() };
        KEYS[self.below(n as u64) as usize].as_bytes().to_vec()
    }
    fn keys(&mut self, min: u64, max: u64) -> Vec<Vec<u8>> {
        let n = min + self.below(max - min + 1);
        (0..n).map(|_| self.key()).collect()
    }
    fn int_str(&mut self) -> Vec<u8> {
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
    fn float_str(&mut self) -> Vec<u8> {
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
    fn value(&mut self) -> Vec<u8> {
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
    fn secs(&mut self) -> Vec<u8> {
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
    fn millis(&mut self) -> Vec<u8> {
        match self.below(20) {
            0 => b"0".to_vec(),
            1 => b"-5".to_vec(),
            2 => b"x".to_vec(),
            3 => b"9223372036854775807".to_vec(),
            _ => self.range(100_000, 10_000_000_000).to_string().into_bytes(),
        }
    }
    /// Absolute unix seconds: past (deletes the key) or far future.
    fn at_secs(&mut self) -> Vec<u8> {
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
    fn at_millis(&mut self) -> Vec<u8> {
        match self.below(10) {
            0 => b"1000".to_vec(),
            1 => ((self.base_s - 1000) * 1000).to_string().into_bytes(),
            2 => b"nope".to_vec(),
            _ => ((self.base_s + self.range(100, 10_000_000)) * 1000 + self.range(0, 999))
                .to_string()
                .into_bytes(),
        }
    }
    fn index(&mut self) -> Vec<u8> {
        match self.below(12) {
            0 => b"x".to_vec(),
            1 => i64::MAX.to_string().into_bytes(),
            2 => i64::MIN.to_string().into_bytes(),
            3..=5 => self.range(-20, -1).to_string().into_bytes(),
            _ => self.range(0, 40).to_string().into_bytes(),
        }
    }
    fn db(&mut self) -> Vec<u8> {
        match self.below(20) {
            0 => b"16".to_vec(),
            1 => b"-1".to_vec(),
            2 => b"x".to_vec(),
            _ => self.range(0, 3).to_string().into_bytes(),
        }
    }
    fn bit_offset(&mut self) -> Vec<u8> {
        match self.below(16) {
            0 => b"-1".to_vec(),
            1 => b"4294967296".to_vec(),
            2 => b"x".to_vec(),
            _ => self.range(0, 300).to_string().into_bytes(),
        }
    }
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn cmd(name: &str, rest: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut v = vec![b(name)];
    v.extend(rest);
    v
}

// ---------------------------------------------------------------------------------------------
// Generators, one per command.

fn g_key_only(name: &'static str) -> impl Fn(&mut G) -> Vec<Vec<u8>> {
    move |g| cmd(name, vec![g.key()])
}

fn g_get(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("GET")(g)
}
fn g_set(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_setnx(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SETNX", vec![g.key(), g.value()])
}
fn g_setex(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SETEX", vec![g.key(), g.secs(), g.value()])
}
fn g_psetex(g: &mut G) -> Vec<Vec<u8>> {
    cmd("PSETEX", vec![g.key(), g.millis(), g.value()])
}
fn g_getex(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_getdel(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("GETDEL")(g)
}
fn g_getset(g: &mut G) -> Vec<Vec<u8>> {
    cmd("GETSET", vec![g.key(), g.value()])
}
fn g_mget(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MGET", g.keys(1, 6))
}
fn kv_pairs(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_mset(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MSET", kv_pairs(g))
}
fn g_msetnx(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MSETNX", kv_pairs(g))
}
fn g_append(g: &mut G) -> Vec<Vec<u8>> {
    cmd("APPEND", vec![g.key(), g.value()])
}
fn g_strlen(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("STRLEN")(g)
}
fn g_getrange(g: &mut G) -> Vec<Vec<u8>> {
    cmd("GETRANGE", vec![g.key(), g.index(), g.index()])
}
fn g_substr(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SUBSTR", vec![g.key(), g.index(), g.index()])
}
fn g_setrange(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_incr(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("INCR")(g)
}
fn g_decr(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("DECR")(g)
}
fn incr_amount(g: &mut G) -> Vec<u8> {
    if g.chance(10) {
        g.float_str()
    } else {
        g.int_str()
    }
}
fn g_incrby(g: &mut G) -> Vec<Vec<u8>> {
    cmd("INCRBY", vec![g.key(), incr_amount(g)])
}
fn g_decrby(g: &mut G) -> Vec<Vec<u8>> {
    cmd("DECRBY", vec![g.key(), incr_amount(g)])
}
fn g_incrbyfloat(g: &mut G) -> Vec<Vec<u8>> {
    cmd("INCRBYFLOAT", vec![g.key(), g.float_str()])
}
fn g_lcs(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_setbit(g: &mut G) -> Vec<Vec<u8>> {
    let v = g.pk(&["0", "1", "1", "0", "2", "x", "-1"]);
    cmd("SETBIT", vec![g.key(), g.bit_offset(), v])
}
fn g_getbit(g: &mut G) -> Vec<Vec<u8>> {
    let off = if g.chance(10) {
        b("4294967295")
    } else {
        g.bit_offset()
    };
    cmd("GETBIT", vec![g.key(), off])
}
fn byte_bit(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(40) {
        a.push(g.pk(&["BYTE", "BIT", "bit", "bogus"]));
    }
}
fn g_bitcount(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_bitpos(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_bitop(g: &mut G) -> Vec<Vec<u8>> {
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
fn bf_type(g: &mut G) -> Vec<u8> {
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
fn bf_offset(g: &mut G) -> Vec<u8> {
    match g.below(10) {
        0 => format!("#{}", g.range(0, 20)).into_bytes(),
        1 => b("-1"),
        2 => b("4294967296"),
        _ => g.range(0, 200).to_string().into_bytes(),
    }
}
fn bf_ops(g: &mut G, read_only: bool) -> Vec<Vec<u8>> {
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
fn g_bitfield(g: &mut G) -> Vec<Vec<u8>> {
    cmd("BITFIELD", bf_ops(g, false))
}
fn g_bitfield_ro(g: &mut G) -> Vec<Vec<u8>> {
    cmd("BITFIELD_RO", bf_ops(g, true))
}
fn g_del(g: &mut G) -> Vec<Vec<u8>> {
    cmd("DEL", g.keys(1, 4))
}
fn g_unlink(g: &mut G) -> Vec<Vec<u8>> {
    cmd("UNLINK", g.keys(1, 4))
}
fn g_exists(g: &mut G) -> Vec<Vec<u8>> {
    cmd("EXISTS", g.keys(1, 5))
}
fn g_touch(g: &mut G) -> Vec<Vec<u8>> {
    cmd("TOUCH", g.keys(1, 4))
}
fn g_type(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("TYPE")(g)
}
fn expire_opts(g: &mut G, a: &mut Vec<Vec<u8>>) {
    if g.chance(40) {
        a.push(g.pk(&["NX", "XX", "GT", "LT", "gt", "bogus"]));
        if g.chance(15) {
            a.push(g.pk(&["NX", "XX", "GT", "LT"]));
        }
    }
}
fn g_expire(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.secs()];
    expire_opts(g, &mut a);
    cmd("EXPIRE", a)
}
fn g_pexpire(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.millis()];
    expire_opts(g, &mut a);
    cmd("PEXPIRE", a)
}
fn g_expireat(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.at_secs()];
    expire_opts(g, &mut a);
    cmd("EXPIREAT", a)
}
fn g_pexpireat(g: &mut G) -> Vec<Vec<u8>> {
    let mut a = vec![g.key(), g.at_millis()];
    expire_opts(g, &mut a);
    cmd("PEXPIREAT", a)
}
fn g_persist(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("PERSIST")(g)
}
fn g_ttl(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("TTL")(g)
}
fn g_pttl(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("PTTL")(g)
}
fn g_expiretime(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("EXPIRETIME")(g)
}
fn g_pexpiretime(g: &mut G) -> Vec<Vec<u8>> {
    g_key_only("PEXPIRETIME")(g)
}
fn g_rename(g: &mut G) -> Vec<Vec<u8>> {
    cmd("RENAME", vec![g.key(), g.key()])
}
fn g_renamenx(g: &mut G) -> Vec<Vec<u8>> {
    cmd("RENAMENX", vec![g.key(), g.key()])
}
fn g_copy(g: &mut G) -> Vec<Vec<u8>> {
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
fn g_move(g: &mut G) -> Vec<Vec<u8>> {
    cmd("MOVE", vec![g.key(), g.db()])
}
fn g_dbsize(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("DBSIZE")]
}
fn g_flushdb(g: &mut G) -> Vec<Vec<u8>> {
    match g.below(4) {
        0 => vec![b("FLUSHDB"), b("ASYNC")],
        1 => vec![b("FLUSHDB"), b("SYNC")],
        2 if g.chance(30) => vec![b("FLUSHDB"), b("bogus")],
        _ => vec![b("FLUSHDB")],
    }
}
fn g_flushall(g: &mut G) -> Vec<Vec<u8>> {
    if g.chance(20) {
        vec![b("FLUSHALL"), b("SYNC")]
    } else {
        vec![b("FLUSHALL")]
    }
}
fn g_select(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SELECT", vec![g.db()])
}
fn g_swapdb(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SWAPDB", vec![g.db(), g.db()])
}
fn g_randomkey(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("RANDOMKEY")]
}
fn g_keys(g: &mut G) -> Vec<Vec<u8>> {
    let pat = g.pick(&[
        "*", "k*", "k[0-3]", "*a", "k?", "{t}*", "nomatch", "\\{t\\}*", "[a-",
    ]);
    cmd("KEYS", vec![b(pat)])
}
fn g_object_encoding(g: &mut G) -> Vec<Vec<u8>> {
    cmd("OBJECT", vec![b("ENCODING"), g.key()])
}
fn g_lpush(g: &mut G) -> Vec<Vec<u8>> {
    cmd("LPUSH", vec![g.key(), g.value()])
}
fn g_sadd(g: &mut G) -> Vec<Vec<u8>> {
    cmd("SADD", vec![g.key(), g.value()])
}
fn g_hset(g: &mut G) -> Vec<Vec<u8>> {
    cmd("HSET", vec![g.key(), b("f"), g.value()])
}

// Transactions: single client, so WATCH is invalidated by this client's own writes before MULTI
// (and by FLUSHDB/SWAPDB/MOVE/RENAME...). Replies inside EXEC are compared element-wise with
// the normalisation of the queued command (see `run_seed`).
fn g_multi(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("MULTI")]
}
fn g_exec(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("EXEC")]
}
fn g_discard(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("DISCARD")]
}
fn g_watch(g: &mut G) -> Vec<Vec<u8>> {
    cmd("WATCH", g.keys(1, 3))
}
fn g_unwatch(_: &mut G) -> Vec<Vec<u8>> {
    vec![b("UNWATCH")]
}

// ---------------------------------------------------------------------------------------------
// The table.

#[derive(Clone, Copy, PartialEq, Debug)]
enum Norm {
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
}

struct Spec {
    name: &'static str,
    /// Generated unless DIFF_COMMANDS picks a subset.
    default: bool,
    /// Relative frequency.
    weight: u32,
    norm: Norm,
    gen: fn(&mut G) -> Vec<Vec<u8>>,
}

const fn s(name: &'static str, weight: u32, gen: fn(&mut G) -> Vec<Vec<u8>>) -> Spec {
    Spec {
        name,
        default: true,
        weight,
        norm: Norm::Exact,
        gen,
    }
}
const fn sn(name: &'static str, weight: u32, norm: Norm, gen: fn(&mut G) -> Vec<Vec<u8>>) -> Spec {
    Spec {
        name,
        default: true,
        weight,
        norm,
        gen,
    }
}
const fn opt(name: &'static str, weight: u32, gen: fn(&mut G) -> Vec<Vec<u8>>) -> Spec {
    Spec {
        name,
        default: false,
        weight,
        norm: Norm::Exact,
        gen,
    }
}

static SPECS: &[Spec] = &[
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
    // optional: enable with DIFF_COMMANDS=all or by name
    opt("flushall", 1, g_flushall),
    opt("object", 1, g_object_encoding),
    opt("lpush", 2, g_lpush),
    opt("sadd", 2, g_sadd),
    opt("hset", 2, g_hset),
];

// ---------------------------------------------------------------------------------------------
// Runner.

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn selected_specs() -> Vec<&'static Spec> {
    match std::env::var("DIFF_COMMANDS") {
        Ok(list) if !list.trim().is_empty() => {
            let list = list.to_ascii_lowercase();
            if list.trim() == "all" {
                return all_specs().collect();
            }
            let names: BTreeSet<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            for n in &names {
                assert!(
                    all_specs().any(|s| s.name == *n),
                    "DIFF_COMMANDS: unknown command {n:?}; known: {}",
                    all_specs().map(|s| s.name).collect::<Vec<_>>().join(",")
                );
            }
            all_specs().filter(|s| names.contains(s.name)).collect()
        }
        _ => all_specs().filter(|s| s.default).collect(),
    }
}

fn fmt_cmd(args: &[Vec<u8>]) -> String {
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

fn norm_eq(norm: Norm, a: &Resp, b: &Resp, inner: &[Norm]) -> bool {
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
        _ => a == b,
    }
}

/// Randomly mangles a generated command: case changes, dropped or extra arguments (arity errors).
fn mangle(g: &mut G, mut args: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
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

struct Pair {
    redis: Server,
    dfly: Server,
    rc: RawConn,
    dc: RawConn,
}

fn start_pair(threads: u64) -> Pair {
    let redis = RedisServer::start();
    let t = format!("--proactor_threads={threads}");
    let dfly = Server::start(&[&t]);
    let rc = redis.raw_conn();
    let dc = dfly.raw_conn();
    Pair {
        redis,
        dfly,
        rc,
        dc,
    }
}

struct Mismatch {
    step: usize,
    cmd: String,
    redis: String,
    dfly: String,
}

fn run_seed(
    pair: &mut Pair,
    seed: u64,
    steps: usize,
    specs: &[&Spec],
    base_s: i64,
) -> Result<(), (Mismatch, Vec<String>)> {
    let mut g = G::new(seed, base_s);
    let total: u64 = specs.iter().map(|s| s.weight as u64).sum();
    let mut history: Vec<String> = Vec::new();
    let enabled = |n: &str| specs.iter().any(|s| s.name == n);
    let paranoid = std::env::var("DIFF_PARANOID").is_ok_and(|v| v != "0");
    // Norms of the commands queued since MULTI (for comparing EXEC's array).
    let mut queued: Vec<Norm> = Vec::new();
    let mut exchange = |args: &[Vec<u8>], norm: Norm, step: usize, history: &mut Vec<String>| {
        pair.rc.send(args);
        pair.dc.send(args);
        let r = pair.rc.try_read();
        let d = pair.dc.try_read();
        let shown = fmt_cmd(args);
        let ok = match (&r, &d) {
            (Ok(r), Ok(d)) => norm_eq(norm, r, d, &queued),
            _ => false,
        };
        let name = &args[0];
        let queued_reply = matches!(&r, Ok(Resp::Simple(s)) if s == b"QUEUED");
        if queued_reply {
            queued.push(norm);
        } else if name.eq_ignore_ascii_case(b"exec")
            || name.eq_ignore_ascii_case(b"discard")
            || name.eq_ignore_ascii_case(b"reset")
            || (name.eq_ignore_ascii_case(b"multi") && matches!(&r, Ok(Resp::Simple(_))))
        {
            // A successful MULTI starts a queue (a nested MULTI error keeps it); EXEC, DISCARD
            // and RESET end it.
            queued.clear();
        }
        let show = |x: &Result<Resp, String>| match x {
            Ok(v) => v.to_string(),
            Err(e) => format!("<{e}>"),
        };
        if !ok {
            return Err(Mismatch {
                step,
                cmd: shown,
                redis: show(&r),
                dfly: show(&d),
            });
        }
        history.push(format!("#{step} {shown} -> {}", show(&r)));
        Ok(r.ok())
    };

    for step in 0..steps {
        let mut pick = g.below(total);
        let mut spec = specs[0];
        for s in specs {
            if pick < s.weight as u64 {
                spec = s;
                break;
            }
            pick -= s.weight as u64;
        }
        let args = (spec.gen)(&mut g);
        let args = mangle(&mut g, args);
        exchange(&args, spec.norm, step, &mut history).map_err(|m| (m, history.clone()))?;
        // SET ... EXAT/PXAT with a past time leaves a logically expired key that Redis still
        // counts in DBSIZE until active expiry samples it (timing-dependent): touch it with
        // EXISTS so both sides reclaim it now.
        if args.len() > 1
            && args[0].eq_ignore_ascii_case(b"set")
            && args
                .iter()
                .any(|a| a.eq_ignore_ascii_case(b"exat") || a.eq_ignore_ascii_case(b"pxat"))
        {
            let a = vec![b("EXISTS"), args[1].clone()];
            exchange(&a, Norm::Exact, step, &mut history).map_err(|m| (m, history.clone()))?;
        }
        // Cheap divergence detector after every command, so a mismatch is reported at the step
        // that caused it rather than much later; DIFF_PARANOID=1 also compares every pool key.
        exchange(&[b("DBSIZE")], Norm::Exact, step, &mut history)
            .map_err(|m| (m, history.clone()))?;
        history.pop();
        if paranoid {
            for k in KEYS {
                let a = vec![b("GET"), k.as_bytes().to_vec()];
                exchange(&a, Norm::Exact, step, &mut history).map_err(|m| (m, history.clone()))?;
                history.pop();
            }
        }
    }
    // Leave a transaction left open by the generator (same reply on both sides either way).
    let mut step = steps;
    if enabled("multi") {
        exchange(&[b("DISCARD")], Norm::Exact, step, &mut history)
            .map_err(|m| (m, history.clone()))?;
        step += 1;
    }
    // Final state: every pool key in the first databases.
    for db in 0..4 {
        let sel = vec![b("SELECT"), db.to_string().into_bytes()];
        exchange(&sel, Norm::Exact, step, &mut history).map_err(|m| (m, history.clone()))?;
        step += 1;
        exchange(&[b("DBSIZE")], Norm::Exact, step, &mut history)
            .map_err(|m| (m, history.clone()))?;
        step += 1;
        for k in KEYS {
            let k = k.as_bytes().to_vec();
            // The reference says the type; both sides are then dumped by that type.
            let a = vec![b("TYPE"), k.clone()];
            let ty = match exchange(&a, Norm::Exact, step, &mut history)
                .map_err(|m| (m, history.clone()))?
            {
                Some(Resp::Simple(t)) => t,
                _ => b"string".to_vec(),
            };
            step += 1;
            let mut checks: Vec<(Vec<Vec<u8>>, Norm)> = Vec::new();
            let dump = match &ty[..] {
                b"list" => (vec![b("LRANGE"), k.clone(), b("0"), b("-1")], Norm::Exact),
                b"hash" => (vec![b("HGETALL"), k.clone()], Norm::SortedPairs),
                b"set" => (vec![b("SMEMBERS"), k.clone()], Norm::Sorted),
                b"zset" => (
                    vec![b("ZRANGE"), k.clone(), b("0"), b("-1"), b("WITHSCORES")],
                    Norm::Exact,
                ),
                _ => (vec![b("GET"), k.clone()], Norm::Exact),
            };
            checks.push(dump);
            if enabled("ttl") {
                checks.push((vec![b("TTL"), k.clone()], Norm::Ttl(2)));
            }
            for (args, norm) in checks {
                exchange(&args, norm, step, &mut history).map_err(|m| (m, history.clone()))?;
                step += 1;
            }
        }
    }
    Ok(())
}

#[test]
fn differential_against_redis() {
    let specs = selected_specs();
    assert!(!specs.is_empty(), "no commands selected");
    let seeds: Vec<u64> = match std::env::var("DIFF_SEED") {
        Ok(s) => vec![s.trim().parse().expect("DIFF_SEED must be a number")],
        Err(_) => (1..=env_u64("DIFF_SEEDS", 20)).collect(),
    };
    let steps = env_u64("DIFF_STEPS", 400) as usize;
    let threads = env_u64("DIFF_THREADS", 4);
    let base_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    eprintln!(
        "differential: {} seeds x {steps} steps over {} commands: {}",
        seeds.len(),
        names.len(),
        names.join(",")
    );
    let keep_going = std::env::var("DIFF_KEEP_GOING").is_ok_and(|v| v != "0");
    let mut failures: Vec<String> = Vec::new();
    for seed in seeds {
        // Fresh servers per seed: every seed starts from an empty keyspace on both sides.
        let mut pair = start_pair(threads);
        if let Err((m, history)) = run_seed(&mut pair, seed, steps, &specs, base_s) {
            let ctx: Vec<&String> = history.iter().rev().take(15).collect();
            let ctx: Vec<String> = ctx.into_iter().rev().cloned().collect();
            let report = format!(
                "\n==== differential mismatch ====\nseed {seed}, step {}\ncommand:   {}\nredis:     {}\ndamselfly: {}\n\
                 ---- preceding commands (reply from redis) ----\n{}\n\
                 reproduce: DIFF_SEED={seed} DIFF_STEPS={} DIFF_COMMANDS={} cargo test -p damselfly --test differential -- --nocapture\n\
                 damselfly log tail:\n{}",
                m.step,
                m.cmd,
                m.redis,
                m.dfly,
                ctx.join("\n"),
                steps,
                names.join(","),
                tail(&pair.dfly.output(), 20),
            );
            if !keep_going {
                panic!("{report}");
            }
            eprintln!("{report}");
            failures.push(format!(
                "seed {seed} step {}: {}\n    redis:     {}\n    damselfly: {}",
                m.step, m.cmd, m.redis, m.dfly
            ));
        }
        drop(pair.rc);
        drop(pair.dc);
        drop(pair.redis);
        drop(pair.dfly);
    }
    assert!(
        failures.is_empty(),
        "{} seed(s) diverged (first mismatch of each):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The generator is deterministic: same seed, same commands.
#[test]
fn generator_is_deterministic() {
    let specs = selected_specs();
    let gen = |seed| {
        let mut g = G::new(seed, 1_700_000_000);
        (0..200)
            .map(|_| {
                let s = specs[g.below(specs.len() as u64) as usize];
                let a = (s.gen)(&mut g);
                mangle(&mut g, a)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(gen(7), gen(7));
    assert_ne!(gen(7), gen(8));
}

// ---------------------------------------------------------------------------------------------
// Blocking interleavings: a second connection blocks (BLPOP, BLMOVE, BZPOPMIN, BLMPOP...) while
// the first runs random list / sorted-set / transaction commands and sometimes CLIENT UNBLOCKs
// it. After every command the blocked connection is polled on both servers: redis-server serves
// a blocked client before it answers the command that woke it, so whether (and with what) the
// blocked client was served must match step by step.

/// A blocking command with timeout 0 (forever) over the pool keys.
fn g_blocking(g: &mut G) -> Vec<Vec<u8>> {
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

/// One reply if it arrives within `wait`.
fn poll(c: &mut RawConn, wait: std::time::Duration) -> Option<Result<Resp, String>> {
    let _ = c.stream.set_read_timeout(Some(wait));
    let r = c.try_read();
    let _ = c
        .stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)));
    match r {
        Err(e) if e.contains("read failed") => None,
        other => Some(other),
    }
}

#[test]
fn differential_blocking_interleavings() {
    use std::time::Duration;
    let wanted = |s: &&Spec| {
        let blocking =
            s.name.starts_with("bl") || s.name.starts_with("br") || s.name.starts_with("bz");
        s.default && !blocking
    };
    let specs: Vec<&Spec> = list::SPECS
        .iter()
        .chain(zset::SPECS)
        .filter(wanted)
        .chain(
            SPECS
                .iter()
                .filter(|s| ["del", "multi", "exec", "rename"].contains(&s.name)),
        )
        .collect();
    let total: u64 = specs.iter().map(|s| s.weight as u64).sum();
    let seeds = env_u64("DIFF_BLOCK_SEEDS", 6);
    let steps = env_u64("DIFF_BLOCK_STEPS", 300) as usize;
    let threads = env_u64("DIFF_THREADS", 4);
    let quiet = Duration::from_millis(20);
    for seed in 1..=seeds {
        let mut pair = start_pair(threads);
        let (mut rb, mut db) = (pair.redis.raw_conn(), pair.dfly.raw_conn());
        let id = |c: &mut RawConn| match c.cmd(&["CLIENT", "ID"]) {
            Resp::Int(i) => i.to_string(),
            other => panic!("CLIENT ID: {other:?}"),
        };
        let (rid, did) = (id(&mut rb), id(&mut db));
        let mut g = G::new(seed * 7919, 1_700_000_000);
        let mut blocked: Option<String> = None;
        let mut log: Vec<String> = Vec::new();
        // Norms of the commands queued since MULTI, for comparing EXEC's array.
        let mut queued: Vec<Norm> = Vec::new();
        let fail = |log: &[String], what: String| -> ! {
            let n = env_u64("DIFF_BLOCK_CTX", 20) as usize;
            let ctx = &log[log.len().saturating_sub(n)..];
            panic!(
                "blocking differential, seed {seed}: {what}\n---- history ----\n{}\nreproduce: DIFF_BLOCK_SEEDS={seed} cargo test -p damselfly --test differential differential_blocking -- --nocapture",
                ctx.join("\n")
            )
        };
        // Both blocked connections: served now (and equally), or both still waiting.
        let check_b = |rb: &mut RawConn,
                       db: &mut RawConn,
                       blocked: &mut Option<String>,
                       log: &mut Vec<String>| {
            let Some(b_cmd) = blocked.clone() else {
                return;
            };
            match poll(rb, quiet) {
                Some(r) => {
                    let d = poll(db, Duration::from_secs(3));
                    let same = matches!((&r, &d), (Ok(x), Some(Ok(y))) if x == y);
                    if !same {
                        fail(log, format!("served {b_cmd}: redis {r:?}, damselfly {d:?}"));
                    }
                    log.push(format!("   [blocked {b_cmd} served: {r:?}]"));
                    *blocked = None;
                }
                None => {
                    if let Some(d) = poll(db, quiet) {
                        fail(
                            log,
                            format!("{b_cmd}: damselfly served {d:?}, redis still blocked"),
                        );
                    }
                }
            }
        };
        for step in 0..steps {
            if blocked.is_none() && g.chance(35) {
                let a = g_blocking(&mut g);
                rb.send(&a);
                db.send(&a);
                blocked = Some(fmt_cmd(&a));
                log.push(format!("#{step} B: {}", fmt_cmd(&a)));
                check_b(&mut rb, &mut db, &mut blocked, &mut log);
                continue;
            }
            if blocked.is_some() && g.chance(4) {
                let how: &[&str] = match g.below(3) {
                    0 => &[],
                    1 => &["TIMEOUT"],
                    _ => &["ERROR"],
                };
                let ra: Vec<&str> = [&["CLIENT", "UNBLOCK", rid.as_str()][..], how].concat();
                let da: Vec<&str> = [&["CLIENT", "UNBLOCK", did.as_str()][..], how].concat();
                let (r, d) = (pair.rc.cmd(&ra), pair.dc.cmd(&da));
                if matches!(&r, Resp::Simple(x) if x == b"QUEUED") {
                    queued.push(Norm::Exact);
                }
                log.push(format!(
                    "#{step} A: CLIENT UNBLOCK <id> {} -> {r}",
                    how.join(" ")
                ));
                if r != d {
                    fail(&log, format!("CLIENT UNBLOCK: redis {r}, damselfly {d}"));
                }
                check_b(&mut rb, &mut db, &mut blocked, &mut log);
                continue;
            }
            let mut pick = g.below(total);
            let mut spec = specs[0];
            for s in &specs {
                if pick < s.weight as u64 {
                    spec = s;
                    break;
                }
                pick -= s.weight as u64;
            }
            let a = (spec.gen)(&mut g);
            let (r, d) = (pair.rc.cmd(&a), pair.dc.cmd(&a));
            log.push(format!("#{step} A: {} -> {r}", fmt_cmd(&a)));
            let is = |n: &[u8]| a[0].eq_ignore_ascii_case(n);
            let norm = if is(b"exec") { Norm::Exec } else { spec.norm };
            let ok = norm_eq(norm, &r, &d, &queued);
            if matches!(&r, Resp::Simple(x) if x == b"QUEUED") {
                queued.push(spec.norm);
            } else if is(b"exec")
                || is(b"discard")
                || (is(b"multi") && r == Resp::Simple(b"OK".to_vec()))
            {
                queued.clear();
            }
            if !ok {
                fail(
                    &log,
                    format!("A: {}: redis {r}, damselfly {d}", fmt_cmd(&a)),
                );
            }
            check_b(&mut rb, &mut db, &mut blocked, &mut log);
        }
        // Leave nothing blocked: unblock B on both sides and compare the final lists/zsets.
        if blocked.is_some() {
            pair.rc.cmd(&["CLIENT", "UNBLOCK", rid.as_str()]);
            pair.dc.cmd(&["CLIENT", "UNBLOCK", did.as_str()]);
            check_b(&mut rb, &mut db, &mut blocked, &mut log);
        }
        pair.rc.cmd(&["DISCARD"]);
        pair.dc.cmd(&["DISCARD"]);
        for k in KEYS {
            for c in [
                vec!["LRANGE", k, "0", "-1"],
                vec!["ZRANGE", k, "0", "-1", "WITHSCORES"],
                vec!["TYPE", k],
            ] {
                let (r, d) = (pair.rc.cmd(&c), pair.dc.cmd(&c));
                if r != d {
                    fail(&log, format!("final {c:?}: redis {r}, damselfly {d}"));
                }
            }
        }
    }
}
