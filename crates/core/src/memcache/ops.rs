//! What each memcache request does on the shard that owns its key (memcached 1.6.18's
//! semantics: `do_store_item`, `do_add_delta`, the meta commands' flag handling).
//!
//! A request travels to its shard as the argument list of one squashed call
//! (`coordinator::squash::run_calls`): `[name, key, params, data, meta flags...]`, where
//! `params` is [`Params`] packed into bytes and each meta flag is its letter followed by its
//! token. The handler writes the complete memcache reply (or nothing, for `noreply` / `q`) into
//! the call's reply buffer, and, when a replica listens, journals the effect in Redis's terms
//! (`SET key value [PXAT ms]` or `DEL key`), so replicas and snapshots see plain strings.

use damselfly_dash::Pos;

use super::proto::{deadline_ms, Cmd};
use super::stats::count;
use crate::commands::CmdCtx;
use crate::engine::db::{Db, TtlMode};
use crate::engine::journal;
use crate::engine::mcstate::McState;
use crate::engine::notify as ev;
use damselfly_types::compact::IntBuf;
use damselfly_types::{CompactStr, Value, ValueRef};

/// A request's scalar fields, packed for the trip to the shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub cmd: Cmd,
    pub flags: u32,
    pub exptime: i64,
    pub cas: u64,
    pub num: u64,
    pub noreply: bool,
    /// Meta: the key arrived base64-encoded (`b`): echo it that way.
    pub key_binary: bool,
}

const CMDS: [Cmd; 25] = [
    Cmd::Get,
    Cmd::Gets,
    Cmd::Gat,
    Cmd::Gats,
    Cmd::Set,
    Cmd::Add,
    Cmd::Replace,
    Cmd::Append,
    Cmd::Prepend,
    Cmd::Cas,
    Cmd::Delete,
    Cmd::Incr,
    Cmd::Decr,
    Cmd::Touch,
    Cmd::FlushAll,
    Cmd::Version,
    Cmd::Verbosity,
    Cmd::Stats,
    Cmd::Quit,
    Cmd::MetaGet,
    Cmd::MetaSet,
    Cmd::MetaDelete,
    Cmd::MetaArithmetic,
    Cmd::MetaNoop,
    Cmd::MetaDebug,
];

/// Packed size of [`Params`].
pub const PARAMS_LEN: usize = 31;

impl Params {
    pub fn encode(&self) -> [u8; PARAMS_LEN] {
        let mut b = [0u8; PARAMS_LEN];
        b[0] = CMDS.iter().position(|&c| c == self.cmd).unwrap_or(0) as u8;
        b[1..5].copy_from_slice(&self.flags.to_le_bytes());
        b[5..13].copy_from_slice(&self.exptime.to_le_bytes());
        b[13..21].copy_from_slice(&self.cas.to_le_bytes());
        b[21..29].copy_from_slice(&self.num.to_le_bytes());
        b[29] = self.noreply as u8;
        b[30] = self.key_binary as u8;
        b
    }

    pub fn decode(b: &[u8]) -> Option<Params> {
        if b.len() != PARAMS_LEN {
            return None;
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(Params {
            cmd: *CMDS.get(b[0] as usize)?,
            flags: u32::from_le_bytes(b[1..5].try_into().ok()?),
            exptime: u64_at(5) as i64,
            cas: u64_at(13),
            num: u64_at(21),
            noreply: b[29] != 0,
            key_binary: b[30] != 0,
        })
    }
}

/// The shard handler of every keyed memcache request (see the module docs for `args`).
pub fn exec(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (Some(&key), Some(p), Some(&data)) = (
        args.get(1),
        args.get(2).and_then(|b| Params::decode(b)),
        args.get(3),
    ) else {
        c.reply.raw(b"SERVER_ERROR internal request encoding\r\n");
        return;
    };
    let meta = Meta(&args[4..]);
    if matches!(
        p.cmd,
        Cmd::MetaGet | Cmd::MetaSet | Cmd::MetaDelete | Cmd::MetaArithmetic | Cmd::MetaDebug
    ) {
        count(|s| s.cmd_meta += 1);
    }
    match p.cmd {
        Cmd::Get | Cmd::Gets | Cmd::Gat | Cmd::Gats => retrieve(c, key, &p),
        Cmd::Set | Cmd::Add | Cmd::Replace | Cmd::Append | Cmd::Prepend | Cmd::Cas => {
            let r = store(c, key, data, &p, p.cmd, p.flags, at(c, p.exptime));
            count(|s| s.cmd_set += 1);
            if !p.noreply {
                c.reply.raw(r.text());
            }
        }
        Cmd::Delete => {
            let found = delete(c, key);
            count(|s| {
                if found {
                    s.delete_hits += 1
                } else {
                    s.delete_misses += 1
                }
            });
            if !p.noreply {
                c.reply.raw(if found {
                    b"DELETED\r\n"
                } else {
                    b"NOT_FOUND\r\n"
                });
            }
        }
        Cmd::Incr | Cmd::Decr => {
            let r = delta(c, key, p.cmd == Cmd::Incr, p.num);
            if !p.noreply {
                match r {
                    Delta::Done(v, _) => {
                        let mut b = itoa(v);
                        b.extend_from_slice(b"\r\n");
                        c.reply.raw(&b);
                    }
                    Delta::NotFound => c.reply.raw(b"NOT_FOUND\r\n"),
                    Delta::NonNumeric => c.reply.raw(NON_NUMERIC),
                    Delta::CasMismatch => c.reply.raw(b"EXISTS\r\n"),
                }
            }
        }
        Cmd::Touch => {
            let a = at(c, p.exptime);
            let hit = touch(c, key, a);
            count(|s| {
                s.cmd_touch += 1;
                if hit {
                    s.touch_hits += 1
                } else {
                    s.touch_misses += 1
                }
            });
            if !p.noreply {
                c.reply.raw(if hit {
                    b"TOUCHED\r\n"
                } else {
                    b"NOT_FOUND\r\n"
                });
            }
        }
        Cmd::MetaGet => meta_get(c, key, &p, &meta),
        Cmd::MetaSet => meta_set(c, key, data, &p, &meta),
        Cmd::MetaDelete => meta_delete(c, key, &p, &meta),
        Cmd::MetaArithmetic => meta_arith(c, key, &p, &meta),
        Cmd::MetaDebug => meta_debug(c, key),
        _ => c.reply.raw(b"ERROR\r\n"),
    }
}

const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";

/// An expiration time as a deadline at this step's clock.
fn at(c: &CmdCtx<'_>, exptime: i64) -> Option<u64> {
    deadline_ms(exptime, c.now)
}

/// A meta flag's TTL token as a deadline (`T30`, `N0`...).
fn ttl_token(t: &[u8], now: u64) -> Option<u64> {
    std::str::from_utf8(t)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .and_then(|e| deadline_ms(e, now))
}

/// Formats numbers for reply lines without allocating.
struct NumBuf([u8; 21]);

impl NumBuf {
    fn new() -> Self {
        NumBuf([0; 21])
    }

    /// `sep` then `v` in decimal.
    fn fmt(&mut self, sep: u8, mut v: u64) -> &[u8] {
        let mut i = self.0.len();
        loop {
            i -= 1;
            self.0[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        i -= 1;
        self.0[i] = sep;
        &self.0[i..]
    }
}

fn itoa(v: u64) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// A live string item's position (other types are not memcache items: a miss).
fn find_item(db: &mut Db, key: &[u8], now: u64) -> Option<Pos> {
    let pos = db.find(key, now)?;
    matches!(db.at(pos).1.view(), ValueRef::Str(_)).then_some(pos)
}

/// The item's bytes.
fn item_bytes(db: &Db, pos: Pos) -> Vec<u8> {
    match db.at(pos).1.view() {
        ValueRef::Str(s) => {
            let mut b: IntBuf = [0u8; 20];
            s.bytes(&mut b).to_vec()
        }
        _ => Vec::new(),
    }
}

fn item_len(db: &Db, pos: Pos) -> usize {
    match db.at(pos).1.view() {
        ValueRef::Str(s) => s.len(),
        _ => 0,
    }
}

/// Seconds left to live as memcached's `t` flag prints them (-1: no expiry).
fn ttl_secs(db: &Db, pos: Pos, now: u64) -> i64 {
    match db.expire_at(pos) {
        None => -1,
        Some(at) => (at.saturating_sub(now) / 1000) as i64,
    }
}

/// Journals the key's state after a write, as Redis commands.
fn propagate(c: &mut CmdCtx<'_>, key: &[u8]) {
    if !journal::here() {
        return;
    }
    let now = c.now;
    let db = &mut c.shard.dbs[c.db];
    let cmd: Vec<Vec<u8>> = match find_item(db, key, now) {
        Some(pos) => {
            let mut v = vec![b"SET".to_vec(), key.to_vec(), item_bytes(db, pos)];
            if let Some(at) = db.expire_at(pos) {
                v.push(b"PXAT".to_vec());
                v.push(at.to_string().into_bytes());
            }
            v
        }
        None => vec![b"DEL".to_vec(), key.to_vec()],
    };
    journal::rewrite(vec![cmd]);
}

// ---------------------------------------------------------------------------------------------
// Storage

/// memcached's `store_item_type`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[allow(clippy::enum_variant_names)] // memcached's names: STORED, NOT_STORED...
enum Stored {
    Stored,
    NotStored,
    Exists,
    NotFound,
}

impl Stored {
    fn text(self) -> &'static [u8] {
        match self {
            Stored::Stored => b"STORED\r\n",
            Stored::NotStored => b"NOT_STORED\r\n",
            Stored::Exists => b"EXISTS\r\n",
            Stored::NotFound => b"NOT_FOUND\r\n",
        }
    }

    fn meta(self) -> &'static [u8] {
        match self {
            Stored::Stored => b"HD",
            Stored::NotStored => b"NS",
            Stored::Exists => b"EX",
            Stored::NotFound => b"NF",
        }
    }
}

/// Options of a meta store beyond the text commands'.
#[derive(Clone, Copy, Default)]
struct StoreExtra {
    /// `E`: the CAS value the stored item gets.
    new_cas: Option<u64>,
    /// `C` given: compare (also for append/prepend/add, as `ms` does).
    compare: Option<u64>,
    /// `I` with `C`: a CAS older than the item's stores the item marked stale instead of
    /// failing.
    invalidate: bool,
    /// `ms` with a base64 key: the item remembers it (see `McState::KEY_BINARY`).
    key_binary: bool,
}

/// Stores `data` under `key` (memcached's `do_store_item`); `mode` is the storage command
/// (`set`, `add`, `replace`, `append`, `prepend`, `cas`) the request amounts to. Returns the outcome; on success
/// the item's state holds `flags` and, when asked, a CAS.
fn store(
    c: &mut CmdCtx<'_>,
    key: &[u8],
    data: &[u8],
    p: &Params,
    mode: Cmd,
    flags: u32,
    at: Option<u64>,
) -> Stored {
    let extra = StoreExtra {
        compare: (mode == Cmd::Cas).then_some(p.cas),
        ..Default::default()
    };
    store_ex(c, key, data, mode, flags, at, extra).0
}

/// `store` with the meta options; also returns the item's position when stored.
fn store_ex(
    c: &mut CmdCtx<'_>,
    key: &[u8],
    data: &[u8],
    mode: Cmd,
    flags: u32,
    at: Option<u64>,
    x: StoreExtra,
) -> (Stored, Option<Pos>) {
    let now = c.now;
    let threads = c.shared.threads;
    let db = &mut c.shard.dbs[c.db];
    let old = db.find(key, now);
    let old_is_str = old.is_some_and(|pos| matches!(db.at(pos).1.view(), ValueRef::Str(_)));
    let st = old.map(|pos| db.mc_state(pos)).unwrap_or_default();
    // memcached's CAS comparison. An item with no CAS handed out changed after every CAS a
    // client holds, so for the stale rule its CAS counts as the next one to be handed out.
    let item_cas = if st.cas != 0 {
        st.cas
    } else {
        c.shard.peek_cas(threads)
    };
    let db = &mut c.shard.dbs[c.db];
    let cas_ok = |want: u64| st.cas != 0 && st.cas == want;
    let mut stale = false;
    if mode == Cmd::Cas {
        let want = x.compare.unwrap_or(0);
        if old.is_none() {
            count(|s| s.cas_misses += 1);
            return (Stored::NotFound, None);
        }
        if !cas_ok(want) {
            if x.invalidate && want < item_cas {
                stale = true;
            } else {
                count(|s| s.cas_badval += 1);
                return (Stored::Exists, None);
            }
        }
        count(|s| s.cas_hits += 1);
    } else if let (Some(want), Some(_), true) = (
        x.compare.filter(|&w| w != 0),
        old,
        matches!(mode, Cmd::Append | Cmd::Prepend),
    ) {
        // Append and prepend check a non-zero CAS once the item is known to exist.
        if !cas_ok(want) {
            return (Stored::Exists, None);
        }
    }
    let value: Vec<u8>;
    let (bytes, flags, keep_ttl): (&[u8], u32, bool) = match mode {
        Cmd::Add => {
            if old.is_some() {
                return (Stored::NotStored, None);
            }
            (data, flags, false)
        }
        Cmd::Replace => {
            if old.is_none() {
                return (Stored::NotStored, None);
            }
            (data, flags, false)
        }
        Cmd::Append | Cmd::Prepend => match old {
            Some(pos) if old_is_str => {
                let cur = item_bytes(db, pos);
                value = if mode == Cmd::Append {
                    [cur.as_slice(), data].concat()
                } else {
                    [data, cur.as_slice()].concat()
                };
                // Appends keep the item's flags and expiry.
                (&value, st.flags, true)
            }
            Some(_) => return (Stored::NotStored, None),
            None => return (Stored::NotStored, None),
        },
        // Set and cas (the mode is one of the storage commands).
        _ => (data, flags, false),
    };
    // A stale store (`ms ... I` with an older CAS) replaces the value but keeps the item's TTL
    // (and its win token, below), as memcached does.
    let ttl = if keep_ttl || stale {
        TtlMode::Keep
    } else {
        match at {
            Some(at) => TtlMode::At(at),
            None => TtlMode::Clear,
        }
    };
    let v = Value::str(CompactStr::from_value(bytes));
    let pos = match old {
        Some(pos) => {
            *db.at_mut(pos) = v;
            match ttl {
                TtlMode::Keep => {}
                TtlMode::Clear => db.set_expire(pos, None),
                TtlMode::At(a) => db.set_expire(pos, Some(a)),
            }
            pos
        }
        None => db.insert_new(key, v, ttl),
    };
    let mut new = McState {
        flags,
        ..Default::default()
    };
    if let Some(cas) = x.new_cas {
        new.cas = cas;
    }
    // (An append or prepend makes a new item of old and new data, which memcached allocates
    // without the request item's binary-key mark.)
    if x.key_binary && !matches!(mode, Cmd::Append | Cmd::Prepend) {
        new.marks |= McState::KEY_BINARY;
    }
    if stale {
        new.marks |= McState::STALE | (st.marks & McState::WIN_SENT);
        if new.cas == 0 {
            new.cas = c.shard.next_cas(threads);
        }
    }
    let db = &mut c.shard.dbs[c.db];
    db.set_mc_state(pos, new);
    ev::emit(ev::STRING, "set", c.db, key);
    count(|s| s.total_items += 1);
    // An item stored already expired (negative or past exptime) is gone at once.
    if let TtlMode::At(a) = ttl {
        if a <= now {
            db.remove_at(pos);
            propagate(c, key);
            return (Stored::Stored, None);
        }
    }
    propagate(c, key);
    (Stored::Stored, Some(pos))
}

/// The item's CAS, handing one out if it has none yet.
fn cas_of(c: &mut CmdCtx<'_>, pos: Pos) -> u64 {
    let threads = c.shared.threads;
    let db = &mut c.shard.dbs[c.db];
    let mut st = db.mc_state(pos);
    if st.cas == 0 {
        st.cas = c.shard.next_cas(threads);
        c.shard.dbs[c.db].set_mc_state(pos, st);
    }
    st.cas
}

fn delete(c: &mut CmdCtx<'_>, key: &[u8]) -> bool {
    let now = c.now;
    let db = &mut c.shard.dbs[c.db];
    match find_item(db, key, now) {
        Some(pos) => {
            db.remove_at(pos);
            ev::emit(ev::GENERIC, "del", c.db, key);
            propagate(c, key);
            true
        }
        None => false,
    }
}

fn touch(c: &mut CmdCtx<'_>, key: &[u8], at: Option<u64>) -> bool {
    let now = c.now;
    let db = &mut c.shard.dbs[c.db];
    let Some(pos) = find_item(db, key, now) else {
        return false;
    };
    db.set_expire(pos, at);
    if at.is_some_and(|a| a <= now) {
        db.remove_at(pos);
    } else {
        ev::emit(ev::GENERIC, "expire", c.db, key);
    }
    propagate(c, key);
    true
}

// ---------------------------------------------------------------------------------------------
// incr / decr

enum Delta {
    /// The new value and the item's position (None: stored already expired).
    Done(u64, Option<Pos>),
    NotFound,
    NonNumeric,
    CasMismatch,
}

/// memcached's `safe_strtoull` on an item's data: optional leading whitespace and sign,
/// digits, then the end or whitespace; no overflow, no negative values.
pub fn parse_counter(b: &[u8]) -> Option<u64> {
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let start = i;
    let mut v: u64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add((b[i] - b'0') as u64)?;
        i += 1;
    }
    if i == start || (i < b.len() && !b[i].is_ascii_whitespace()) {
        return None;
    }
    if neg {
        let n = v.wrapping_neg();
        // strtoull negates; memcached refuses what then looks negative.
        if (n as i64) < 0 {
            return None;
        }
        return Some(n);
    }
    Some(v)
}

/// memcached's `do_add_delta`: incr wraps at 2^64, decr stops at 0; a shorter result is
/// written over the old digits padded with spaces (as memcached does in place).
fn delta(c: &mut CmdCtx<'_>, key: &[u8], incr: bool, by: u64) -> Delta {
    delta_ex(c, key, incr, by, None)
}

fn delta_ex(c: &mut CmdCtx<'_>, key: &[u8], incr: bool, by: u64, compare: Option<u64>) -> Delta {
    let now = c.now;
    let db = &mut c.shard.dbs[c.db];
    let Some(pos) = find_item(db, key, now) else {
        count(|s| {
            if incr {
                s.incr_misses += 1
            } else {
                s.decr_misses += 1
            }
        });
        return Delta::NotFound;
    };
    let st = db.mc_state(pos);
    // memcached refuses an empty or a chunked (over half a slab page) item before it compares
    // the CAS, anything else after.
    let len = item_len(db, pos);
    if len == 0 || len + key.len() + 56 > 512 * 1024 {
        return Delta::NonNumeric;
    }
    if let Some(want) = compare {
        if st.cas == 0 || st.cas != want {
            return Delta::CasMismatch;
        }
    }
    let cur = item_bytes(db, pos);
    let Some(v) = parse_counter(&cur) else {
        return Delta::NonNumeric;
    };
    let v = if incr {
        v.wrapping_add(by)
    } else {
        v.saturating_sub(by)
    };
    count(|s| {
        if incr {
            s.incr_hits += 1
        } else {
            s.decr_hits += 1
        }
    });
    let mut digits = itoa(v);
    // A result that fits is written over the old digits, padded with spaces, and the item
    // keeps its marks (stale, win, fetched); a longer one is a new item.
    let in_place = digits.len() <= cur.len();
    let fetched = db.mc_fetched(pos);
    if in_place {
        digits.resize(cur.len(), b' ');
    }
    *db.at_mut(pos) = Value::str(CompactStr::from_value(&digits));
    // The value changed (new CAS on demand); the client flags stay.
    db.set_mc_state(
        pos,
        McState {
            flags: st.flags,
            marks: if in_place { st.marks } else { 0 },
            cas: 0,
        },
    );
    if in_place && fetched {
        db.mc_fetch(pos);
    }
    ev::emit(
        ev::STRING,
        if incr { "incrby" } else { "decrby" },
        c.db,
        key,
    );
    propagate(c, key);
    Delta::Done(v, Some(pos))
}

// ---------------------------------------------------------------------------------------------
// Retrieval (text)

fn retrieve(c: &mut CmdCtx<'_>, key: &[u8], p: &Params) {
    let now = c.now;
    let touch_too = matches!(p.cmd, Cmd::Gat | Cmd::Gats);
    let with_cas = matches!(p.cmd, Cmd::Gets | Cmd::Gats);
    let db = &mut c.shard.dbs[c.db];
    let Some(pos) = find_item(db, key, now) else {
        db.stats.misses += 1;
        count(|s| {
            s.cmd_get += 1;
            s.get_misses += 1;
            if touch_too {
                s.cmd_touch += 1;
                s.touch_misses += 1;
            }
        });
        return;
    };
    // gat with an expiration already past answers the item, then it is gone.
    let mut gone = false;
    if touch_too {
        let a = deadline_ms(p.exptime, now);
        db.set_expire(pos, a);
        gone = a.is_some_and(|a| a <= now);
        if !gone {
            propagate(c, key);
        }
    }
    let db = &mut c.shard.dbs[c.db];
    db.stats.hits += 1;
    db.mc_fetch(pos);
    let flags = db.mc_state(pos).flags;
    let cas = if with_cas { Some(cas_of(c, pos)) } else { None };
    let db = &c.shard.dbs[c.db];
    let mut num = NumBuf::new();
    c.reply.raw(b"VALUE ");
    c.reply.raw(key);
    c.reply.raw(num.fmt(b' ', flags as u64));
    c.reply.raw(num.fmt(b' ', item_len(db, pos) as u64));
    if let Some(cas) = cas {
        c.reply.raw(num.fmt(b' ', cas));
    }
    c.reply.raw(b"\r\n");
    if let ValueRef::Str(s) = db.at(pos).1.view() {
        let mut b: IntBuf = [0u8; 20];
        c.reply.raw(s.bytes(&mut b));
    }
    c.reply.raw(b"\r\n");
    if gone {
        c.shard.dbs[c.db].remove_at(pos);
        propagate(c, key);
    }
    count(|s| {
        s.cmd_get += 1;
        s.get_hits += 1;
        if touch_too {
            s.cmd_touch += 1;
            s.touch_hits += 1;
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Meta commands

/// The request's meta flags, as `[letter, token...]` arguments in request order.
struct Meta<'a>(&'a [&'a [u8]]);

impl<'a> Meta<'a> {
    fn iter(&self) -> impl Iterator<Item = (u8, &'a [u8])> + '_ {
        self.0
            .iter()
            .filter(|a| !a.is_empty())
            .map(|a| (a[0], &a[1..]))
    }

    fn has(&self, c: u8) -> bool {
        self.iter().any(|(l, _)| l == c)
    }

    fn tok(&self, c: u8) -> Option<&'a [u8]> {
        self.iter().find(|&(l, _)| l == c).map(|(_, t)| t)
    }

    fn int(&self, c: u8) -> Option<i64> {
        std::str::from_utf8(self.tok(c)?).ok()?.parse().ok()
    }

    fn uint(&self, c: u8) -> Option<u64> {
        std::str::from_utf8(self.tok(c)?).ok()?.parse().ok()
    }
}

/// Appends ` <letter><value>` to a meta reply line.
fn flag(out: &mut Vec<u8>, c: u8, v: &[u8]) {
    out.push(b' ');
    out.push(c);
    out.extend_from_slice(v);
}

/// The `k` return flag: the key as sent (base64 again when it came that way, then ` b`).
fn key_flag(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    if binary {
        flag(out, b'k', crate::base64::encode(key).as_bytes());
        out.extend_from_slice(b" b");
    } else {
        flag(out, b'k', key);
    }
}

/// `O` and `k`, the only return flags of a reply without an item.
fn echo_flags(out: &mut Vec<u8>, key: &[u8], p: &Params, meta: &Meta<'_>) {
    for (l, t) in meta.iter() {
        match l {
            b'O' => {
                out.push(b' ');
                out.push(b'O');
                out.extend_from_slice(t);
            }
            b'k' => key_flag(out, key, p.key_binary),
            _ => {}
        }
    }
}

fn end_line(c: &mut CmdCtx<'_>, mut line: Vec<u8>) {
    line.extend_from_slice(b"\r\n");
    c.reply.raw(&line);
}

fn meta_get(c: &mut CmdCtx<'_>, key: &[u8], p: &Params, meta: &Meta<'_>) {
    let now = c.now;
    let threads = c.shared.threads;
    let quiet = meta.has(b'q');
    let with_value = meta.has(b'v');
    let db = &mut c.shard.dbs[c.db];
    let mut pos = find_item(db, key, now);
    let mut created = false;
    if pos.is_none() && meta.has(b'N') {
        // Autovivify: an empty item that the first client wins the right to fill (its TTL is
        // set where `N` comes in the flags, as memcached does: a `t` before it sees none).
        let np = db.insert_new(key, Value::str(CompactStr::from_value(b"")), TtlMode::Clear);
        let cas = c.shard.next_cas(threads);
        c.shard.dbs[c.db].set_mc_state(
            np,
            McState {
                cas,
                ..Default::default()
            },
        );
        propagate(c, key);
        pos = Some(np);
        created = true;
    }
    let ttl_set = meta.has(b'T');
    let Some(pos) = pos else {
        count(|s| {
            if ttl_set {
                s.cmd_touch += 1;
                s.touch_misses += 1;
            } else {
                s.cmd_get += 1;
                s.get_misses += 1;
            }
        });
        c.shard.dbs[c.db].stats.misses += 1;
        if quiet {
            return;
        }
        let mut line = b"EN".to_vec();
        echo_flags(&mut line, key, p, meta);
        end_line(c, line);
        return;
    };
    let db = &mut c.shard.dbs[c.db];
    db.stats.hits += 1;
    let len = item_len(db, pos);
    let mut line = if with_value {
        format!("VA {len}").into_bytes()
    } else {
        b"HD".to_vec()
    };
    let mut won = created;
    // Fetched is read before this request counts as a fetch (`u`: it does not count).
    let fetched_before = if meta.has(b'u') {
        db.mc_fetched(pos)
    } else {
        db.mc_fetch(pos)
    };
    let idle = db.idle_secs(pos, now);
    let mut st = db.mc_state(pos);
    for (l, t) in meta.iter() {
        match l {
            b'T' => {
                let db = &mut c.shard.dbs[c.db];
                db.set_expire(pos, ttl_token(t, now));
                propagate(c, key);
            }
            b'N' if created => {
                let db = &mut c.shard.dbs[c.db];
                db.set_expire(pos, ttl_token(t, now));
                propagate(c, key);
            }
            b'R' => {
                let db = &c.shard.dbs[c.db];
                if st.marks & McState::WIN_SENT == 0 && !created {
                    if let (Some(at), Some(r)) = (db.expire_at(pos), meta.int(b'R')) {
                        let left = at.saturating_sub(now) / 1000;
                        if (left as i64) < r {
                            won = true;
                        }
                    }
                }
            }
            b's' => flag(&mut line, b's', len.to_string().as_bytes()),
            b't' => {
                let db = &c.shard.dbs[c.db];
                flag(
                    &mut line,
                    b't',
                    ttl_secs(db, pos, now).to_string().as_bytes(),
                )
            }
            b'c' => {
                let cas = cas_of(c, pos);
                st.cas = cas;
                flag(&mut line, b'c', cas.to_string().as_bytes())
            }
            b'f' => flag(&mut line, b'f', st.flags.to_string().as_bytes()),
            b'l' => flag(&mut line, b'l', idle.to_string().as_bytes()),
            b'h' => flag(&mut line, b'h', if fetched_before { b"1" } else { b"0" }),
            b'O' => {
                line.push(b' ');
                line.push(b'O');
                line.extend_from_slice(t);
            }
            b'k' => key_flag(&mut line, key, st.marks & McState::KEY_BINARY != 0),
            _ => {}
        }
    }
    let db = &mut c.shard.dbs[c.db];
    let mut st = db.mc_state(pos);
    if st.marks & McState::WIN_SENT != 0 {
        line.extend_from_slice(b" Z");
    }
    if st.marks & McState::STALE != 0 {
        line.extend_from_slice(b" X");
        if st.marks & McState::WIN_SENT == 0 {
            won = true;
        }
    }
    if won {
        line.extend_from_slice(b" W");
        st.marks |= McState::WIN_SENT;
        db.set_mc_state(pos, st);
    }
    count(|s| {
        if ttl_set {
            s.cmd_touch += 1;
            s.touch_hits += 1;
        } else {
            s.cmd_get += 1;
            s.get_hits += 1;
        }
    });
    end_line(c, line);
    if with_value {
        let db = &c.shard.dbs[c.db];
        if let ValueRef::Str(s) = db.at(pos).1.view() {
            let mut b: IntBuf = [0u8; 20];
            c.reply.raw(s.bytes(&mut b));
        }
        c.reply.raw(b"\r\n");
    }
}

fn meta_set(c: &mut CmdCtx<'_>, key: &[u8], data: &[u8], p: &Params, meta: &Meta<'_>) {
    let now = c.now;
    let mut mode = match meta.tok(b'M').and_then(|t| t.first()) {
        Some(b'E') | Some(b'e') => Cmd::Add,
        // (`N` is accepted, but memcached 1.6.18 does not vivify an append or prepend on a
        // miss: NS, as it answers.)
        Some(b'A') | Some(b'a') => Cmd::Append,
        Some(b'P') | Some(b'p') => Cmd::Prepend,
        Some(b'R') | Some(b'r') => Cmd::Replace,
        _ => Cmd::Set,
    };
    let compare = meta.uint(b'C');
    if compare.is_some() && matches!(mode, Cmd::Set | Cmd::Replace) {
        mode = Cmd::Cas;
    }
    let exptime = meta.int(b'T').unwrap_or(0);
    let x = StoreExtra {
        new_cas: meta.uint(b'E'),
        compare,
        invalidate: meta.has(b'I'),
        key_binary: p.key_binary,
    };
    let flags = meta.uint(b'F').unwrap_or(0) as u32;
    let (r, pos) = store_ex(c, key, data, mode, flags, deadline_ms(exptime, now), x);
    count(|s| s.cmd_set += 1);
    if r == Stored::Stored && meta.has(b'q') {
        return;
    }
    let mut line = r.meta().to_vec();
    for (l, t) in meta.iter() {
        match l {
            b'O' => {
                line.push(b' ');
                line.push(b'O');
                line.extend_from_slice(t);
            }
            b'k' => key_flag(&mut line, key, p.key_binary),
            b'c' => {
                if let Some(pos) = pos {
                    let cas = cas_of(c, pos);
                    flag(&mut line, b'c', cas.to_string().as_bytes());
                } else if r == Stored::Stored {
                    // Stored already expired: memcached still reports the CAS it assigned.
                    let threads = c.shared.threads;
                    let cas = c.shard.next_cas(threads);
                    flag(&mut line, b'c', cas.to_string().as_bytes());
                } else {
                    flag(&mut line, b'c', b"0");
                }
            }
            _ => {}
        }
    }
    end_line(c, line);
}

fn meta_delete(c: &mut CmdCtx<'_>, key: &[u8], p: &Params, meta: &Meta<'_>) {
    let now = c.now;
    let threads = c.shared.threads;
    let quiet = meta.has(b'q');
    let db = &mut c.shard.dbs[c.db];
    let code: &[u8] = match find_item(db, key, now) {
        None => {
            count(|s| s.delete_misses += 1);
            b"NF"
        }
        Some(pos) => {
            let st = db.mc_state(pos);
            match meta.uint(b'C') {
                Some(want) if st.cas == 0 || st.cas != want => {
                    count(|s| s.delete_misses += 1);
                    b"EX"
                }
                _ if meta.has(b'I') => {
                    // Invalidate: keep the item, stale, with a new CAS (and TTL if given).
                    if let Some(t) = meta.int(b'T') {
                        db.set_expire(pos, deadline_ms(t, now));
                    }
                    let cas = c.shard.next_cas(threads);
                    let db = &mut c.shard.dbs[c.db];
                    db.set_mc_state(
                        pos,
                        McState {
                            flags: st.flags,
                            // Stale, and the next client may win again.
                            marks: (st.marks | McState::STALE) & !McState::WIN_SENT,
                            cas,
                        },
                    );
                    propagate(c, key);
                    b"HD"
                }
                _ => {
                    db.remove_at(pos);
                    ev::emit(ev::GENERIC, "del", c.db, key);
                    propagate(c, key);
                    count(|s| s.delete_hits += 1);
                    b"HD"
                }
            }
        }
    };
    if quiet && code == b"HD" {
        return;
    }
    let mut line = code.to_vec();
    echo_flags(&mut line, key, p, meta);
    end_line(c, line);
}

fn meta_arith(c: &mut CmdCtx<'_>, key: &[u8], p: &Params, meta: &Meta<'_>) {
    let now = c.now;
    let incr = !matches!(
        meta.tok(b'M').and_then(|t| t.first()),
        Some(b'D') | Some(b'd') | Some(b'-')
    );
    let by = meta.uint(b'D').unwrap_or(1);
    let quiet = meta.has(b'q');
    let mut created = false;
    // (A zero CAS compares nothing, as memcached's `do_add_delta`.)
    let r = match delta_ex(c, key, incr, by, meta.uint(b'C').filter(|&w| w != 0)) {
        Delta::NotFound if meta.has(b'N') => {
            // Created without a TTL: `N`'s applies where it comes in the flags.
            let initial = meta.uint(b'J').unwrap_or(0);
            let (r, pos) = store_ex(
                c,
                key,
                &itoa(initial),
                Cmd::Add,
                0,
                None,
                StoreExtra::default(),
            );
            match r {
                Stored::Stored => {
                    created = true;
                    Delta::Done(initial, pos)
                }
                _ => Delta::NotFound,
            }
        }
        r => r,
    };
    let mut line: Vec<u8>;
    match r {
        Delta::NonNumeric => {
            c.reply.raw(NON_NUMERIC);
            return;
        }
        Delta::NotFound | Delta::CasMismatch => {
            line = if matches!(r, Delta::NotFound) {
                b"NF".to_vec()
            } else {
                b"EX".to_vec()
            };
            echo_flags(&mut line, key, p, meta);
        }
        Delta::Done(v, pos) => {
            let digits = itoa(v);
            line = if meta.has(b'v') {
                format!("VA {}", digits.len()).into_bytes()
            } else {
                b"HD".to_vec()
            };
            for (l, t) in meta.iter() {
                match l {
                    b'c' => {
                        let cas = match pos {
                            Some(pos) => cas_of(c, pos),
                            None => {
                                let threads = c.shared.threads;
                                c.shard.next_cas(threads)
                            }
                        };
                        flag(&mut line, b'c', cas.to_string().as_bytes());
                    }
                    b't' => {
                        let db = &c.shard.dbs[c.db];
                        let t = pos.map_or(-1, |pos| ttl_secs(db, pos, now));
                        flag(&mut line, b't', t.to_string().as_bytes());
                    }
                    b'N' if created => {
                        if let Some(pos) = pos {
                            c.shard.dbs[c.db].set_expire(pos, ttl_token(t, now));
                            propagate(c, key);
                        }
                    }
                    b'T' => {
                        let Some(pos) = pos else { continue };
                        let a = std::str::from_utf8(t)
                            .ok()
                            .and_then(|s| s.parse::<i64>().ok())
                            .and_then(|e| deadline_ms(e, now));
                        c.shard.dbs[c.db].set_expire(pos, a);
                        propagate(c, key);
                    }
                    b'O' => {
                        line.push(b' ');
                        line.push(b'O');
                        line.extend_from_slice(t);
                    }
                    b'k' => key_flag(&mut line, key, p.key_binary),
                    _ => {}
                }
            }
            if meta.has(b'v') {
                line.extend_from_slice(b"\r\n");
                line.extend_from_slice(&digits);
            }
            // Quiet: a counter updated says nothing (after its flags took effect).
            if quiet && !created {
                return;
            }
        }
    }
    end_line(c, line);
}

/// `me <key>`: memcached's debug line, with the fields that have a meaning here.
fn meta_debug(c: &mut CmdCtx<'_>, key: &[u8]) {
    let now = c.now;
    let db = &mut c.shard.dbs[c.db];
    let Some(pos) = find_item(db, key, now) else {
        c.reply.raw(b"EN\r\n");
        return;
    };
    let exp = match db.expire_at(pos) {
        None => -1,
        Some(at) => (at.saturating_sub(now) / 1000) as i64,
    };
    let la = db.idle_secs(pos, now);
    let fetched = db.mc_fetch(pos);
    let len = item_len(db, pos);
    let cas = cas_of(c, pos);
    let mut line = b"ME ".to_vec();
    line.extend_from_slice(key);
    line.extend_from_slice(
        format!(
            " exp={exp} la={la} cas={cas} fetch={} cls=1 size={}",
            if fetched { "yes" } else { "no" },
            len + key.len() + 50
        )
        .as_bytes(),
    );
    end_line(c, line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip() {
        for &cmd in CMDS.iter() {
            let p = Params {
                cmd,
                flags: u32::MAX,
                exptime: -5,
                cas: u64::MAX - 1,
                num: 42,
                noreply: true,
                key_binary: false,
            };
            assert_eq!(Params::decode(&p.encode()), Some(p));
        }
        assert_eq!(Params::decode(b"short"), None);
    }

    #[test]
    fn counters_parse_as_memcached() {
        assert_eq!(parse_counter(b"12"), Some(12));
        assert_eq!(parse_counter(b"99 "), Some(99));
        assert_eq!(parse_counter(b" 7"), Some(7));
        assert_eq!(parse_counter(b"+5"), Some(5));
        assert_eq!(parse_counter(b"-0"), Some(0));
        assert_eq!(parse_counter(b"-1"), None);
        assert_eq!(parse_counter(b""), None);
        assert_eq!(parse_counter(b"12x"), None);
        assert_eq!(parse_counter(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter(b"18446744073709551616"), None);
    }
}
