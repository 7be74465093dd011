//! Sorted set commands (Redis 7.0 `t_zset.c` semantics, replies and error texts; ZRANK/ZREVRANK
//! also take 7.2's WITHSCORE).
//!
//! Single-key commands are `Handler::Shard`. Commands over several keys (ZUNION/ZINTER/ZDIFF and
//! their STORE forms, ZINTERCARD, ZRANGESTORE, ZMPOP) run on the connection: when all their keys
//! live on one shard everything happens in one hop; otherwise sources are read in one hop per
//! shard, the result is computed here and written in a last hop, all inside the transaction the
//! dispatcher opened for the keys. BZPOPMIN/BZPOPMAX/BZMPOP first try in key order, then (outside
//! MULTI/EXEC) block through `commands::coordinator::wait::serve_or_block`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use damselfly_protocol::double::{fmt_g17, parse_f64};
use damselfly_protocol::{Reply, RespVersion};

use damselfly_core::commands::scan;
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_core::engine::waiters::Serve;
use damselfly_types::zset::pack::cmp_entry;
use damselfly_types::zset::{Limits, ZSet};
use damselfly_types::{Kind, Value, ValueRef};

/// (member, score) pairs in score order.
type Items = Vec<(Vec<u8>, f64)>;

const G: Group = Group::SortedSet;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("zadd", -4, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(zadd))
        .doc(G, "1.0.0", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist."),
    cmd("zincrby", 4, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(zincrby))
        .doc(G, "1.0.0", "Increments the score of a member in a sorted set."),
    cmd("zrem", -3, WRITE | FAST, range(1, 1, 1), Shard(zrem))
        .doc(G, "1.0.0", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed."),
    cmd("zcard", 2, READONLY | FAST, range(1, 1, 1), Shard(zcard))
        .doc(G, "1.0.0", "Returns the number of members in a sorted set."),
    cmd("zscore", 3, READONLY | FAST, range(1, 1, 1), Shard(zscore))
        .doc(G, "1.0.0", "Returns the score of a member in a sorted set."),
    cmd("zmscore", -3, READONLY | FAST, range(1, 1, 1), Shard(zmscore))
        .doc(G, "1.0.0", "Returns the score of one or more members in a sorted set."),
    cmd("zrank", -3, READONLY | FAST, range(1, 1, 1), Shard(zrank))
        .doc(G, "1.0.0", "Returns the index of a member in a sorted set ordered by ascending scores."),
    cmd("zrevrank", -3, READONLY | FAST, range(1, 1, 1), Shard(zrevrank))
        .doc(G, "1.0.0", "Returns the index of a member in a sorted set ordered by descending scores."),
    cmd("zcount", 4, READONLY | FAST, range(1, 1, 1), Shard(zcount))
        .doc(G, "1.0.0", "Returns the count of members in a sorted set that have scores within a range."),
    cmd("zlexcount", 4, READONLY | FAST, range(1, 1, 1), Shard(zlexcount))
        .doc(G, "1.0.0", "Returns the number of members in a sorted set within a lexicographical range."),
    cmd("zrange", -4, READONLY, range(1, 1, 1), Shard(zrange))
        .doc(G, "1.0.0", "Returns members in a sorted set within a range of indexes."),
    cmd("zrangestore", -5, WRITE | DENYOOM, range(1, 2, 1), Conn(zrangestore))
        .doc(G, "1.0.0", "Stores a range of members from sorted set in a key."),
    cmd("zrevrange", -4, READONLY, range(1, 1, 1), Shard(zrevrange))
        .doc(G, "1.0.0", "Returns members in a sorted set within a range of indexes in reverse order."),
    cmd("zrangebyscore", -4, READONLY, range(1, 1, 1), Shard(zrangebyscore))
        .doc(G, "1.0.0", "Returns members in a sorted set within a range of scores."),
    cmd("zrevrangebyscore", -4, READONLY, range(1, 1, 1), Shard(zrevrangebyscore))
        .doc(G, "1.0.0", "Returns members in a sorted set within a range of scores in reverse order."),
    cmd("zrangebylex", -4, READONLY, range(1, 1, 1), Shard(zrangebylex))
        .doc(G, "1.0.0", "Returns members in a sorted set within a lexicographical range."),
    cmd("zrevrangebylex", -4, READONLY, range(1, 1, 1), Shard(zrevrangebylex))
        .doc(G, "1.0.0", "Returns members in a sorted set within a lexicographical range in reverse order."),
    cmd("zremrangebyrank", 4, WRITE, range(1, 1, 1), Shard(zremrangebyrank))
        .doc(G, "1.0.0", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed."),
    cmd("zremrangebyscore", 4, WRITE, range(1, 1, 1), Shard(zremrangebyscore))
        .doc(G, "1.0.0", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed."),
    cmd("zremrangebylex", 4, WRITE, range(1, 1, 1), Shard(zremrangebylex))
        .doc(G, "1.0.0", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed."),
    cmd("zpopmin", -2, WRITE | FAST, range(1, 1, 1), Shard(zpopmin))
        .doc(G, "1.0.0", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    cmd("zpopmax", -2, WRITE | FAST, range(1, 1, 1), Shard(zpopmax))
        .doc(G, "1.0.0", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    cmd("zmpop", -4, WRITE | PROP_SELF, keynum(1, 1, 1), Conn(zmpop))
        .doc(G, "1.0.0", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped."),
    cmd("bzpopmin", -3, WRITE | PROP_SELF | NOSCRIPT | BLOCKING | FAST, range(1, -2, 1), Conn(bzpopmin))
        .doc(G, "1.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped."),
    cmd("bzpopmax", -3, WRITE | PROP_SELF | NOSCRIPT | BLOCKING | FAST, range(1, -2, 1), Conn(bzpopmax))
        .doc(G, "1.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped."),
    cmd("bzmpop", -5, WRITE | PROP_SELF | BLOCKING, keynum(2, 1, 1), Conn(bzmpop))
        .doc(G, "1.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped."),
    cmd("zrandmember", -2, READONLY, range(1, 1, 1), Shard(zrandmember))
        .doc(G, "1.0.0", "Returns one or more random members from a sorted set."),
    cmd("zunion", -3, READONLY, keynum(1, 1, 1), Conn(zunion))
        .doc(G, "1.0.0", "Returns the union of multiple sorted sets."),
    cmd("zinter", -3, READONLY, keynum(1, 1, 1), Conn(zinter))
        .doc(G, "1.0.0", "Returns the intersect of multiple sorted sets."),
    cmd("zdiff", -3, READONLY, keynum(1, 1, 1), Conn(zdiff))
        .doc(G, "1.0.0", "Returns the difference between multiple sorted sets."),
    cmd("zintercard", -3, READONLY, keynum(1, 1, 1), Conn(zintercard))
        .doc(G, "1.0.0", "Returns the number of members of the intersect of multiple sorted sets."),
    cmd("zunionstore", -4, WRITE | DENYOOM, STORE_KEYS, Conn(zunionstore))
        .doc(G, "1.0.0", "Stores the union of multiple sorted sets in a key."),
    cmd("zinterstore", -4, WRITE | DENYOOM, STORE_KEYS, Conn(zinterstore))
        .doc(G, "1.0.0", "Stores the intersect of multiple sorted sets in a key."),
    cmd("zdiffstore", -4, WRITE | DENYOOM, STORE_KEYS, Conn(zdiffstore))
        .doc(G, "1.0.0", "Stores the difference of multiple sorted sets in a key."),
    cmd("zscan", -3, READONLY, range(1, 1, 1), Shard(zscan))
        .doc(G, "1.0.0", "Iterates over members and scores of a sorted set."),
];

/// Key specs of ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE (dst numkeys key...): the destination, then
/// the sources, as Redis declares them.
const STORE_KEYS: KeySpec = many(&[range(1, 1, 1), keynum(2, 1, 1)]);

// ---------------------------------------------------------------------------------------------
// Shared helpers.

const ERR_MINMAX: &str = "ERR min or max is not a float";
const ERR_LEX: &str = "ERR min or max not valid string range item";
const ERR_NAN: &str = "ERR resulting score is not a number (NaN)";
const ERR_POSITIVE: &str = "ERR value is out of range, must be positive";

fn limits_of(shared: &damselfly_core::engine::Shared) -> Limits {
    let c = &shared.config;
    Limits {
        entries: c.enc_limit(EncLimit::ZsetMaxListpackEntries).max(0) as usize,
        value: c.enc_limit(EncLimit::ZsetMaxListpackValue).max(0) as usize,
    }
}

/// A zset to read: Ok(None) when missing, Err when the key holds another type.
fn zget<'a>(db: &'a mut Db, key: &[u8], now: u64) -> Result<Option<&'a ZSet>, WrongType> {
    match db.get_read(key, now).map(|v| v.view()) {
        None => Ok(None),
        Some(ValueRef::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(WrongType),
    }
}

/// Position of a zset to modify: Ok(None) when missing, Err when the key holds another type.
fn zpos(db: &mut Db, key: &[u8], now: u64) -> Result<Option<damselfly_dash::Pos>, WrongType> {
    match db.find(key, now) {
        None => Ok(None),
        Some(p) if db.at(p).1.kind() == Kind::ZSet => Ok(Some(p)),
        Some(_) => Err(WrongType),
    }
}

fn zmut(db: &mut Db, pos: damselfly_dash::Pos) -> &mut ZSet {
    match db.at_mut_quiet(pos).as_zset_mut() {
        Some(z) => z,
        // zpos checked the kind.
        None => unreachable!("zpos checked the kind"),
    }
}

/// After a modification: signal it (keyspace event `event`), and delete the key when the
/// zset became empty (then `del` too).
fn finish_write(db: &mut Db, key: &[u8], pos: damselfly_dash::Pos, changed: bool, event: &str) {
    if !changed {
        // (ZADD on a missing key made an empty zset first: it goes again.)
        if db.at(pos).1.as_zset().is_some_and(|z| z.is_empty()) {
            db.remove_at(pos);
        }
        return;
    }
    db.touch_key(key);
    ev::emit(ev::ZSET, event, db.index, key);
    if db.at(pos).1.as_zset().is_some_and(|z| z.is_empty()) {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", db.index, key);
    }
}

/// Writes `items` (sorted by score, member) at `dst`, replacing it (keyspace event `event`);
/// deletes `dst` when empty.
fn store_sorted(
    db: &mut Db,
    dst: &[u8],
    items: &[(Vec<u8>, f64)],
    lim: &Limits,
    now: u64,
    event: &str,
) {
    if items.is_empty() {
        if db.remove(dst, now).is_some() {
            db.touch_key(dst);
            ev::emit(ev::GENERIC, "del", db.index, dst);
        }
        return;
    }
    let z = ZSet::from_sorted(items, lim);
    db.set(dst, Value::zset(z), TtlMode::Clear, now);
    ev::emit(ev::ZSET, event, db.index, dst);
}

/// Member/score pairs: RESP3 nests each pair, RESP2 flattens (ZRANGE WITHSCORES, ZPOPMIN count...).
fn pairs_header(r: &mut Reply, n: usize, withscores: bool) {
    if withscores && !r.is_resp3() {
        r.array(n * 2);
    } else {
        r.array(n);
    }
}

fn pair(r: &mut Reply, m: &[u8], s: f64, withscores: bool) {
    if withscores {
        if r.is_resp3() {
            r.array(2);
        }
        r.bulk(m);
        r.double(s);
    } else {
        r.bulk(m);
    }
}

/// Always-nested pairs (ZMPOP/BZMPOP).
fn nested_pairs(r: &mut Reply, items: &[(Vec<u8>, f64)]) {
    r.array(items.len());
    for (m, s) in items {
        r.array(2);
        r.bulk(m);
        r.double(*s);
    }
}

/// C `strtod` over the whole argument, as Redis's range parsing uses it: leading whitespace
/// allowed, overflow to ±inf accepted, NaN rejected, an empty string is 0.
fn strtod_full(a: &[u8]) -> Option<f64> {
    if a.is_empty() {
        return Some(0.0);
    }
    let t = {
        let i = a
            .iter()
            .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
            .unwrap_or(a.len());
        &a[i..]
    };
    if t.is_empty() {
        return None;
    }
    if let Some(v) = parse_f64(t) {
        return Some(v);
    }
    // Overflow / underflow (strtod returns ±HUGE_VAL or 0 and Redis keeps it).
    let s = std::str::from_utf8(t).ok()?;
    let ok = s
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !ok {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

#[derive(Clone, Copy, Debug)]
struct ScoreRange {
    min: f64,
    max: f64,
    minex: bool,
    maxex: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let one = |a: &[u8]| -> Option<(f64, bool)> {
            match a.first() {
                Some(b'(') => strtod_full(&a[1..]).map(|v| (v, true)),
                _ => strtod_full(a).map(|v| (v, false)),
            }
        };
        let (min, minex) = one(min)?;
        let (max, maxex) = one(max)?;
        Some(ScoreRange {
            min,
            max,
            minex,
            maxex,
        })
    }
    #[inline]
    fn below_min(&self, s: f64) -> bool {
        if self.minex {
            s <= self.min
        } else {
            s < self.min
        }
    }
    #[inline]
    fn le_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }
    /// Ranks `lo..hi` of the members in range.
    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        if self.min > self.max || (self.min == self.max && (self.minex || self.maxex)) {
            return (0, 0);
        }
        let lo = z.count_where(|s, _| self.below_min(s));
        let hi = z.count_where(|s, _| self.le_max(s));
        (lo, hi.max(lo))
    }
}

#[derive(Clone, Debug)]
enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

impl LexBound {
    fn parse(a: &[u8]) -> Option<LexBound> {
        match a.first()? {
            b'+' if a.len() == 1 => Some(LexBound::PosInf),
            b'-' if a.len() == 1 => Some(LexBound::NegInf),
            b'(' => Some(LexBound::Excl(a[1..].to_vec())),
            b'[' => Some(LexBound::Incl(a[1..].to_vec())),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        Some(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }
    fn below_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(x) => m < &x[..],
            LexBound::Excl(x) => m <= &x[..],
        }
    }
    fn le_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(x) => m <= &x[..],
            LexBound::Excl(x) => m < &x[..],
        }
    }
    fn ranks(&self, z: &ZSet) -> (usize, usize) {
        let lo = z.count_where(|_, m| self.below_min(m));
        let hi = z.count_where(|_, m| self.le_max(m));
        (lo, hi.max(lo))
    }
}

/// Rank window for a rank range (ZRANGE start stop), Redis's index sanitizing.
fn rank_window(len: usize, start: i64, end: i64) -> (usize, usize) {
    let n = len as i64;
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s = s.saturating_add(n);
    }
    if e < 0 {
        e = e.saturating_add(n);
    }
    if s < 0 {
        s = 0;
    }
    if s > e || s >= n {
        return (0, 0);
    }
    if e >= n {
        e = n - 1;
    }
    (s as usize, e as usize + 1)
}

// ---------------------------------------------------------------------------------------------
// ZADD / ZINCRBY

const Z_NX: u32 = 1;
const Z_XX: u32 = 2;
const Z_GT: u32 = 4;
const Z_LT: u32 = 8;
const Z_CH: u32 = 16;
const Z_INCR: u32 = 32;

fn zadd(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let mut fl = 0;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        let f = if eq_ic(a, "nx") {
            Z_NX
        } else if eq_ic(a, "xx") {
            Z_XX
        } else if eq_ic(a, "gt") {
            Z_GT
        } else if eq_ic(a, "lt") {
            Z_LT
        } else if eq_ic(a, "ch") {
            Z_CH
        } else if eq_ic(a, "incr") {
            Z_INCR
        } else {
            break;
        };
        fl |= f;
        i += 1;
    }
    let elements = args.len() - i;
    if !elements.is_multiple_of(2) || elements == 0 {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    if fl & Z_NX != 0 && fl & Z_XX != 0 {
        cx.reply
            .error("ERR XX and NX options at the same time are not compatible");
        return;
    }
    let (nx, gt, lt) = (fl & Z_NX != 0, fl & Z_GT != 0, fl & Z_LT != 0);
    if [gt, lt, nx].iter().filter(|&&x| x).count() > 1 {
        cx.reply
            .error("ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if fl & Z_INCR != 0 && elements > 2 {
        cx.reply
            .error("ERR INCR option supports a single increment-element pair");
        return;
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    for p in args[i..].chunks(2) {
        let Some(s) = parse_f64(p[0]) else {
            cx.reply.error(ERR_NOT_FLOAT);
            return;
        };
        pairs.push((s, p[1]));
    }
    zadd_core(cx, args[1], fl, &pairs);
}

fn zincrby(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(s) = parse_f64(args[2]) else {
        cx.reply.error(ERR_NOT_FLOAT);
        return;
    };
    zadd_core(cx, args[1], Z_INCR, &[(s, args[3])]);
}

fn zadd_core(cx: &mut CmdCtx<'_>, key: &[u8], fl: u32, pairs: &[(f64, &[u8])]) {
    let lim = limits_of(cx.shared);
    let now = cx.now;
    let incr = fl & Z_INCR != 0;
    let (nx, xx, gt, lt) = (
        fl & Z_NX != 0,
        fl & Z_XX != 0,
        fl & Z_GT != 0,
        fl & Z_LT != 0,
    );
    let db = cx.db();
    let pos = match zpos(db, key, now) {
        Err(WrongType) => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
        Ok(Some(p)) => p,
        Ok(None) => {
            if xx {
                if incr {
                    cx.reply.null();
                } else {
                    cx.reply.int(0);
                }
                return;
            }
            db.insert_new(key, Value::zset(ZSet::default()), TtlMode::Clear)
        }
    };
    let z = zmut(db, pos);
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last = 0.0;
    let mut nan = false;
    for &(score, m) in pairs {
        match z.score(m) {
            Some(cur) => {
                if nx {
                    continue;
                }
                let mut new = score;
                if incr {
                    new = cur + score;
                    if new.is_nan() {
                        nan = true;
                        break;
                    }
                }
                if (lt && new >= cur) || (gt && new <= cur) {
                    continue;
                }
                processed += 1;
                last = new;
                if new != cur {
                    z.update(m, new);
                    updated += 1;
                }
            }
            None => {
                if xx {
                    continue;
                }
                z.insert(m, score, &lim);
                added += 1;
                processed += 1;
                last = score;
            }
        }
    }
    finish_write(
        db,
        key,
        pos,
        added + updated > 0,
        if incr { "zincr" } else { "zadd" },
    );
    if nan {
        cx.reply.error(ERR_NAN);
    } else if incr {
        if processed > 0 {
            cx.reply.double(last);
        } else {
            cx.reply.null();
        }
    } else if fl & Z_CH != 0 {
        cx.reply.int(added + updated);
    } else {
        cx.reply.int(added);
    }
}

// ---------------------------------------------------------------------------------------------
// Simple reads and removals.

fn zrem(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = cx.db();
    let pos = match zpos(db, args[1], now) {
        Err(WrongType) => return cx.reply.error(ERR_WRONGTYPE),
        Ok(None) => return cx.reply.int(0),
        Ok(Some(p)) => p,
    };
    let z = zmut(db, pos);
    let mut n = 0;
    for m in &args[2..] {
        if z.remove(m).is_some() {
            n += 1;
            if z.is_empty() {
                break;
            }
        }
    }
    finish_write(db, args[1], pos, n > 0, "zrem");
    cx.reply.int(n);
}

fn zcard(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    match zget(cx.db(), args[1], now) {
        Err(WrongType) => cx.reply.error(ERR_WRONGTYPE),
        Ok(z) => {
            let n = z.map_or(0, |z| z.len());
            cx.reply.int(n as i64)
        }
    }
}

fn zscore(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    match zget(cx.db(), args[1], now) {
        Err(WrongType) => cx.reply.error(ERR_WRONGTYPE),
        Ok(z) => match z.and_then(|z| z.score(args[2])) {
            Some(s) => cx.reply.double(s),
            None => cx.reply.null(),
        },
    }
}

fn zmscore(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let reply = &mut *cx.reply;
    match zget(&mut cx.shard.dbs[cx.db], args[1], now) {
        Err(WrongType) => reply.error(ERR_WRONGTYPE),
        Ok(z) => {
            reply.array(args.len() - 2);
            for m in &args[2..] {
                match z.and_then(|z| z.score(m)) {
                    Some(s) => reply.double(s),
                    None => reply.null(),
                }
            }
        }
    }
}

fn zrank(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    rank_generic(cx, args, false)
}

fn zrevrank(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    rank_generic(cx, args, true)
}

fn rank_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], rev: bool) {
    let withscore = match args.len() {
        3 => false,
        4 if eq_ic(args[3], "withscore") => true,
        // Redis 7.0's arity (3) for anything but 7.2's WITHSCORE.
        _ => {
            let name = if rev { "zrevrank" } else { "zrank" };
            return cx.reply.error(&format!(
                "ERR wrong number of arguments for '{name}' command"
            ));
        }
    };
    let now = cx.now;
    let reply = &mut *cx.reply;
    match zget(&mut cx.shard.dbs[cx.db], args[1], now) {
        Err(WrongType) => reply.error(ERR_WRONGTYPE),
        Ok(z) => match z.and_then(|z| z.rank(args[2]).map(|(r, s)| (r, s, z.len()))) {
            Some((r, s, n)) => {
                let r = if rev { n - 1 - r } else { r };
                if withscore {
                    reply.array(2);
                    reply.int(r as i64);
                    reply.double(s);
                } else {
                    reply.int(r as i64);
                }
            }
            None if withscore => reply.null_array(),
            None => reply.null(),
        },
    }
}

fn zcount(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(r) = ScoreRange::parse(args[2], args[3]) else {
        return cx.reply.error(ERR_MINMAX);
    };
    let now = cx.now;
    match zget(cx.db(), args[1], now) {
        Err(WrongType) => cx.reply.error(ERR_WRONGTYPE),
        Ok(z) => {
            let n = z.map_or(0, |z| {
                let (a, b) = r.ranks(z);
                b - a
            });
            cx.reply.int(n as i64)
        }
    }
}

fn zlexcount(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(r) = LexRange::parse(args[2], args[3]) else {
        return cx.reply.error(ERR_LEX);
    };
    let now = cx.now;
    match zget(cx.db(), args[1], now) {
        Err(WrongType) => cx.reply.error(ERR_WRONGTYPE),
        Ok(z) => {
            let n = z.map_or(0, |z| {
                let (a, b) = r.ranks(z);
                b - a
            });
            cx.reply.int(n as i64)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ZRANGE family.

#[derive(Clone, Debug)]
enum RangeBy {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

#[derive(Clone, Debug)]
struct RangeReq {
    by: RangeBy,
    rev: bool,
    offset: i64,
    limit: i64,
    withscores: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Auto {
    Unset,
    Rank,
    Score,
    Lex,
}

/// Redis `zrangeGenericCommand` argument handling. `first` is the index of the source key;
/// min/max follow it.
fn parse_range(
    args: &[&[u8]],
    first: usize,
    store: bool,
    fixed: Auto,
    fixed_rev: Option<bool>,
) -> Result<RangeReq, String> {
    let mut by = fixed;
    let mut rev = fixed_rev;
    let mut withscores = false;
    let mut offset = 0i64;
    let mut limit = -1i64;
    let mut j = first + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if !store && eq_ic(a, "withscores") {
            withscores = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            let (Some(o), Some(l)) = (parse_i64(args[j + 1]), parse_i64(args[j + 2])) else {
                return Err(ERR_NOT_INT.into());
            };
            offset = o;
            limit = l;
            j += 2;
        } else if rev.is_none() && eq_ic(a, "rev") {
            rev = Some(true);
        } else if by == Auto::Unset && eq_ic(a, "bylex") {
            by = Auto::Lex;
        } else if by == Auto::Unset && eq_ic(a, "byscore") {
            by = Auto::Score;
        } else {
            return Err(ERR_SYNTAX.into());
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if by == Auto::Unset {
        by = Auto::Rank;
    }
    if limit != -1 && by == Auto::Rank {
        return Err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
                .into(),
        );
    }
    if withscores && by == Auto::Lex {
        return Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX".into());
    }
    let (mut lo, mut hi) = (args[first + 1], args[first + 2]);
    if rev && by != Auto::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let by = match by {
        Auto::Score => RangeBy::Score(ScoreRange::parse(lo, hi).ok_or(ERR_MINMAX)?),
        Auto::Lex => RangeBy::Lex(LexRange::parse(lo, hi).ok_or(ERR_LEX)?),
        _ => {
            let (Some(s), Some(e)) = (parse_i64(lo), parse_i64(hi)) else {
                return Err(ERR_NOT_INT.into());
            };
            RangeBy::Rank(s, e)
        }
    };
    Ok(RangeReq {
        by,
        rev,
        offset,
        limit,
        withscores,
    })
}

/// The ranks to emit: `a..b`, descending when `req.rev`.
fn resolve(z: &ZSet, req: &RangeReq) -> (usize, usize) {
    let (lo, hi) = match &req.by {
        RangeBy::Rank(s, e) => {
            let (a, b) = rank_window(z.len(), *s, *e);
            if a >= b {
                return (0, 0);
            }
            return if req.rev {
                (z.len() - b, z.len() - a)
            } else {
                (a, b)
            };
        }
        RangeBy::Score(r) => r.ranks(z),
        RangeBy::Lex(r) => r.ranks(z),
    };
    if lo >= hi || req.offset < 0 {
        return (0, 0);
    }
    let span = hi - lo;
    let off = req.offset as u64;
    if off >= span as u64 {
        return (0, 0);
    }
    let off = off as usize;
    let take = if req.limit < 0 {
        span - off
    } else {
        (req.limit as u64).min((span - off) as u64) as usize
    };
    if req.rev {
        (hi - off - take, hi - off)
    } else {
        (lo + off, lo + off + take)
    }
}

fn range_reply(cx: &mut CmdCtx<'_>, key: &[u8], req: &RangeReq) {
    let now = cx.now;
    let reply = &mut *cx.reply;
    match zget(&mut cx.shard.dbs[cx.db], key, now) {
        Err(WrongType) => reply.error(ERR_WRONGTYPE),
        Ok(None) => reply.empty_array(),
        Ok(Some(z)) => {
            let (a, b) = resolve(z, req);
            pairs_header(reply, b - a, req.withscores);
            z.range(a, b, req.rev, |m, s| pair(reply, m, s, req.withscores));
        }
    }
}

fn range_cmd(cx: &mut CmdCtx<'_>, args: &[&[u8]], fixed: Auto, rev: Option<bool>) {
    match parse_range(args, 1, false, fixed, rev) {
        Err(e) => cx.reply.error(&e),
        Ok(req) => range_reply(cx, args[1], &req),
    }
}

fn zrange(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    range_cmd(cx, args, Auto::Unset, None)
}
fn zrevrange(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    range_cmd(cx, args, Auto::Rank, Some(true))
}
fn zrangebyscore(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    range_cmd(cx, args, Auto::Score, Some(false))
}
fn zrevrangebyscore(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    range_cmd(cx, args, Auto::Score, Some(true))
}
fn zrangebylex(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    range_cmd(cx, args, Auto::Lex, Some(false))
}
fn zrevrangebylex(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    range_cmd(cx, args, Auto::Lex, Some(true))
}

/// Collects a range of `src` ascending (for storing). Err = wrong type.
fn range_collect(
    db: &mut Db,
    src: &[u8],
    req: &RangeReq,
    now: u64,
) -> Result<Vec<(Vec<u8>, f64)>, WrongType> {
    let Some(z) = zget(db, src, now)? else {
        return Ok(Vec::new());
    };
    let (a, b) = resolve(z, req);
    let mut v = Vec::with_capacity(b - a);
    z.range(a, b, false, |m, s| v.push((m.to_vec(), s)));
    Ok(v)
}

fn zrangestore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let req = match parse_range(args, 2, true, Auto::Unset, None) {
            Ok(r) => r,
            Err(e) => return cx.reply.error(&e),
        };
        let lim = limits_of(cx.shared());
        let (dst, src) = (args[1].to_vec(), args[2].to_vec());
        let r: Result<usize, WrongType> = cx
            .hops()
            .on_key(args[2], move |c, ()| {
                let now = c.now;
                range_collect(c.db(), &src, &req, now)
            })
            .on_key(args[1], move |c, got| {
                let items = got?;
                let now = c.now;
                store_sorted(c.db(), &dst, &items, &lim, now, "zrangestore");
                Ok(items.len())
            })
            .run()
            .await;
        match r {
            Err(WrongType) => cx.reply.error(ERR_WRONGTYPE),
            Ok(n) => cx.reply.int(n as i64),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// ZREMRANGEBY*

fn zrem_range(cx: &mut CmdCtx<'_>, key: &[u8], by: RangeBy) {
    let now = cx.now;
    let db = cx.db();
    let pos = match zpos(db, key, now) {
        Err(WrongType) => return cx.reply.error(ERR_WRONGTYPE),
        Ok(None) => return cx.reply.int(0),
        Ok(Some(p)) => p,
    };
    let z = zmut(db, pos);
    let (a, b) = match &by {
        RangeBy::Rank(s, e) => rank_window(z.len(), *s, *e),
        RangeBy::Score(r) => r.ranks(z),
        RangeBy::Lex(r) => r.ranks(z),
    };
    let n = z.remove_range(a, b);
    let event = match by {
        RangeBy::Rank(..) => "zremrangebyrank",
        RangeBy::Score(_) => "zremrangebyscore",
        RangeBy::Lex(_) => "zremrangebylex",
    };
    finish_write(db, key, pos, n > 0, event);
    cx.reply.int(n as i64);
}

fn zremrangebyrank(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (Some(s), Some(e)) = (parse_i64(args[2]), parse_i64(args[3])) else {
        return cx.reply.error(ERR_NOT_INT);
    };
    zrem_range(cx, args[1], RangeBy::Rank(s, e))
}

fn zremrangebyscore(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(r) = ScoreRange::parse(args[2], args[3]) else {
        return cx.reply.error(ERR_MINMAX);
    };
    zrem_range(cx, args[1], RangeBy::Score(r))
}

fn zremrangebylex(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(r) = LexRange::parse(args[2], args[3]) else {
        return cx.reply.error(ERR_LEX);
    };
    zrem_range(cx, args[1], RangeBy::Lex(r))
}

// ---------------------------------------------------------------------------------------------
// Pops.

/// Pops up to `count` members from the min (or max) end of the zset at `key`. Err = wrong
/// type; Ok(None) = missing key.
fn pop_from(
    db: &mut Db,
    key: &[u8],
    max: bool,
    count: u64,
    now: u64,
) -> Result<Option<Items>, WrongType> {
    let Some(pos) = zpos(db, key, now)? else {
        return Ok(None);
    };
    let z = zmut(db, pos);
    let n = (count.min(z.len() as u64)) as usize;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let r = if max { z.len() - 1 } else { 0 };
        match z.pop_at(r) {
            Some(x) => out.push(x),
            None => break,
        }
    }
    finish_write(
        db,
        key,
        pos,
        !out.is_empty(),
        if max { "zpopmax" } else { "zpopmin" },
    );
    Ok(Some(out))
}

fn zpop_cmd(cx: &mut CmdCtx<'_>, args: &[&[u8]], max: bool) {
    if args.len() > 3 {
        return cx.reply.error(ERR_SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(n) if n >= 0 => Some(n as u64),
            _ => return cx.reply.error(ERR_POSITIVE),
        },
    };
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    // Wrong type is reported even for COUNT 0.
    match zpos(db, args[1], now) {
        Err(WrongType) => return cx.reply.error(ERR_WRONGTYPE),
        Ok(None) => return cx.reply.empty_array(),
        Ok(Some(_)) => {}
    }
    if count == Some(0) {
        return cx.reply.empty_array();
    }
    let items = match pop_from(db, args[1], max, count.unwrap_or(1), now) {
        Err(WrongType) => return cx.reply.error(ERR_WRONGTYPE),
        Ok(v) => v.unwrap_or_default(),
    };
    let reply = &mut *cx.reply;
    if count.is_none() {
        reply.array(items.len() * 2);
        for (m, s) in &items {
            reply.bulk(m);
            reply.double(*s);
        }
    } else {
        pairs_header(reply, items.len(), true);
        for (m, s) in &items {
            pair(reply, m, *s, true);
        }
    }
}

fn zpopmin(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    zpop_cmd(cx, args, false)
}

fn zpopmax(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    zpop_cmd(cx, args, true)
}

/// Parsed ZMPOP/BZMPOP arguments after numkeys.
struct MpopArgs {
    keys: Vec<Vec<u8>>,
    max: bool,
    count: u64,
}

fn parse_mpop(args: &[&[u8]], numkeys_idx: usize) -> Result<MpopArgs, &'static str> {
    let numkeys = match parse_i64(args[numkeys_idx]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err("ERR numkeys should be greater than 0"),
    };
    let where_idx = (numkeys_idx as u64)
        .saturating_add(numkeys)
        .saturating_add(1);
    if where_idx >= args.len() as u64 {
        return Err(ERR_SYNTAX);
    }
    let where_idx = where_idx as usize;
    let max = if eq_ic(args[where_idx], "min") {
        false
    } else if eq_ic(args[where_idx], "max") {
        true
    } else {
        return Err(ERR_SYNTAX);
    };
    let mut count: Option<u64> = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if count.is_none() && eq_ic(args[j], "count") && more > 0 {
            j += 1;
            match parse_i64(args[j]) {
                Some(n) if n >= 1 => count = Some(n as u64),
                _ => return Err("ERR count should be greater than 0"),
            }
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 1;
    }
    Ok(MpopArgs {
        keys: args[numkeys_idx + 1..where_idx]
            .iter()
            .map(|k| k.to_vec())
            .collect(),
        max,
        count: count.unwrap_or(1),
    })
}

/// Outcome of trying keys in order.
enum Popped {
    None,
    WrongType,
    Got(Vec<u8>, Vec<(Vec<u8>, f64)>),
}

/// Pops from the first of `keys` (argument order) that exists, wherever the keys live
/// (WRONGTYPE if that key is not a zset).
async fn pop_first(
    cx: &mut ConnCtx,
    keys: &[Vec<u8>],
    max: bool,
    count: u64,
    mpop: bool,
) -> Popped {
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    cx.hops()
        .first_of(
            &refs,
            |c, k| {
                let now = c.now;
                match zpos(c.db(), k, now) {
                    Ok(Some(_)) => Some(true),
                    Err(WrongType) => Some(false),
                    Ok(None) => None,
                }
            },
            move |c, key, is_zset| {
                if !is_zset {
                    return Popped::WrongType;
                }
                let now = c.now;
                match pop_from(c.db(), key, max, count, now) {
                    Err(WrongType) => Popped::WrongType,
                    Ok(Some(items)) if !items.is_empty() => {
                        journal_pop(c.db, key, max, mpop.then_some(items.len()));
                        Popped::Got(key.to_vec(), items)
                    }
                    Ok(_) => Popped::None,
                }
            },
        )
        .run()
        .await
        .unwrap_or(Popped::None)
}

/// A pop of ZMPOP/BZPOP*/BZMPOP, replicated as the ZPOPMIN/ZPOPMAX it was (Redis's rewrite:
/// with the count actually popped for the MPOP forms), from the shard holding the key (these
/// commands declare `PROP_SELF`).
fn journal_pop(db: usize, key: &[u8], max: bool, popped: Option<usize>) {
    use damselfly_core::engine::journal;
    if !journal::here() {
        return;
    }
    let cmd: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
    let resp = match popped {
        None => journal::encode(&[cmd, key]),
        Some(n) => journal::encode(&[cmd, key, n.to_string().as_bytes()]),
    };
    journal::push(journal::Item::One(journal::Record { db, resp }));
}

fn mpop_reply(r: &mut Reply, key: &[u8], items: &[(Vec<u8>, f64)]) {
    r.array(2);
    r.bulk(key);
    nested_pairs(r, items);
}

fn bzpop_reply(r: &mut Reply, key: &[u8], items: &[(Vec<u8>, f64)]) {
    match items.first() {
        Some((m, s)) => {
            r.array(3);
            r.bulk(key);
            r.bulk(m);
            r.double(*s);
        }
        None => r.null_array(),
    }
}

fn zmpop<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let a = match parse_mpop(args, 1) {
            Ok(a) => a,
            Err(e) => return cx.reply.error(e),
        };
        match pop_first(cx, &a.keys, a.max, a.count, true).await {
            Popped::None => cx.reply.null_array(),
            Popped::WrongType => cx.reply.error(ERR_WRONGTYPE),
            Popped::Got(k, items) => mpop_reply(&mut cx.reply, &k, &items),
        }
    })
}

/// Blocked-client side of BZPOPMIN/BZPOPMAX/BZMPOP.
struct ZPopServe {
    ver: RespVersion,
    max: bool,
    count: u64,
    mpop: bool,
}

impl Serve for ZPopServe {
    fn ready(&self, db: &mut Db, key: &[u8], now: u64) -> bool {
        db.get(key, now)
            .and_then(|v| v.as_zset())
            .is_some_and(|z| !z.is_empty())
    }
    fn take(&self, db: &mut Db, key: &[u8], now: u64) -> Vec<u8> {
        let mut r = Reply::new(self.ver);
        match pop_from(db, key, self.max, self.count, now) {
            Ok(Some(items)) if !items.is_empty() => {
                journal_pop(db.index, key, self.max, self.mpop.then_some(items.len()));
                if self.mpop {
                    mpop_reply(&mut r, key, &items)
                } else {
                    bzpop_reply(&mut r, key, &items)
                }
            }
            _ => r.null_array(),
        }
        r.take()
    }
}

async fn block_generic(
    cx: &mut ConnCtx,
    keys: Vec<Vec<u8>>,
    max: bool,
    count: u64,
    mpop: bool,
    timeout: Option<Duration>,
) {
    match pop_first(cx, &keys, max, count, mpop).await {
        Popped::WrongType => return cx.reply.error(ERR_WRONGTYPE),
        Popped::Got(k, items) => {
            if mpop {
                mpop_reply(&mut cx.reply, &k, &items)
            } else {
                bzpop_reply(&mut cx.reply, &k, &items)
            }
            return;
        }
        Popped::None => {}
    }
    if cx.in_exec() {
        return cx.reply.null_array();
    }
    let serve = Arc::new(ZPopServe {
        ver: cx.reply.ver,
        max,
        count,
        mpop,
    });
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    match damselfly_core::commands::coordinator::wait::serve_or_block(cx, &refs, serve, timeout)
        .await
    {
        Some(bytes) => cx.reply.raw(&bytes),
        None => cx.reply.null_array(),
    }
}

fn bzpop_generic<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]], max: bool) -> BoxFut<'a> {
    Box::pin(async move {
        let timeout = match parse_timeout(args[args.len() - 1]) {
            Ok(t) => t,
            Err(e) => return cx.reply.error(e),
        };
        let keys: Vec<Vec<u8>> = args[1..args.len() - 1].iter().map(|k| k.to_vec()).collect();
        block_generic(cx, keys, max, 1, false, timeout).await
    })
}

fn bzpopmin<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    bzpop_generic(cx, args, false)
}

fn bzpopmax<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    bzpop_generic(cx, args, true)
}

fn bzmpop<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let a = match parse_mpop(args, 2) {
            Ok(a) => a,
            Err(e) => return cx.reply.error(e),
        };
        let timeout = match parse_timeout(args[1]) {
            Ok(t) => t,
            Err(e) => return cx.reply.error(e),
        };
        block_generic(cx, a.keys, a.max, a.count, true, timeout).await
    })
}

// ---------------------------------------------------------------------------------------------
// ZRANDMEMBER

fn zrandmember(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if args.len() > 4 {
        return cx.reply.error(ERR_SYNTAX);
    }
    let mut withscores = false;
    let mut count = None;
    if args.len() >= 3 {
        let Some(c) = parse_i64(args[2]) else {
            return cx.reply.error(ERR_NOT_INT);
        };
        if c == i64::MIN {
            return cx.reply.error(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            );
        }
        if args.len() == 4 {
            if !eq_ic(args[3], "withscores") {
                return cx.reply.error(ERR_SYNTAX);
            }
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&c) {
                return cx.reply.error("ERR value is out of range");
            }
            withscores = true;
        }
        count = Some(c);
    }
    let now = cx.now;
    let mut rng = cx.shard.fork_rng();
    let shared = cx.shared;
    let reply = &mut *cx.reply;
    let z = match zget(&mut cx.shard.dbs[cx.db], args[1], now) {
        Err(WrongType) => return reply.error(ERR_WRONGTYPE),
        Ok(None) => {
            return if count.is_some() {
                reply.empty_array()
            } else {
                reply.null()
            }
        }
        Ok(Some(z)) => z,
    };
    let len = z.len();
    let Some(c) = count else {
        match z.at(rng.index(len)) {
            Some((m, _)) => reply.bulk(&m),
            None => reply.null(),
        }
        return;
    };
    if c == 0 {
        return reply.empty_array();
    }
    if c < 0 {
        // Repetitions allowed: stream the picks.
        let n = c.unsigned_abs() as usize;
        // Past the output buffer limit the client is closed: stop (see `generation_cap`).
        let cap = damselfly_core::client::limits::generation_cap(&shared.config, reply.len());
        pairs_header(reply, n, withscores);
        for _ in 0..n {
            if reply.len() > cap {
                break;
            }
            if let Some((m, s)) = z.at(rng.index(len)) {
                pair(reply, &m, s, withscores);
            }
        }
        return;
    }
    let c = c as usize;
    if c >= len {
        // The whole set: Redis 7.0 walks it from the highest score down (both encodings).
        pairs_header(reply, len, withscores);
        z.range(0, len, true, |m, s| pair(reply, m, s, withscores));
        return;
    }
    // Distinct picks.
    let picks: Vec<usize> = if c * 3 > len {
        let mut idx: Vec<usize> = (0..len).collect();
        rng.partial_shuffle(&mut idx, c);
        idx.truncate(c);
        idx
    } else {
        let mut seen = std::collections::HashSet::with_capacity(c);
        let mut v = Vec::with_capacity(c);
        while v.len() < c {
            let r = rng.index(len);
            if seen.insert(r) {
                v.push(r);
            }
        }
        v
    };
    pairs_header(reply, c, withscores);
    for r in picks {
        if let Some((m, s)) = z.at(r) {
            pair(reply, &m, s, withscores);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ZSCAN

/// How a listpack keeps a score (integral values as integers), as ZSCAN prints it.
fn packed_score_text(s: f64) -> String {
    let half = (i64::MAX / 2) as f64;
    if s.fract() == 0.0 && s >= -half && s <= half {
        (s as i64).to_string()
    } else {
        fmt_g17(s)
    }
}

/// ZSCAN (see [`scan`]).
fn zscan(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(cursor) = scan::cursor_arg(cx.reply, args[2]) else {
        return;
    };
    let now = cx.now;
    let reply = &mut *cx.reply;
    let z = match zget(&mut cx.shard.dbs[cx.db], args[1], now) {
        Err(WrongType) => return reply.error(ERR_WRONGTYPE),
        Ok(None) => return scan::reply_empty(reply),
        Ok(Some(z)) => z,
    };
    let pack = z.is_pack();
    scan::scan_value(reply, args, scan::Target::ZSet, |o, items| {
        z.scan(cursor, o.count, |m, s| {
            if o.matches(m) {
                items.push(m.to_vec());
                let t = if pack {
                    packed_score_text(s)
                } else {
                    fmt_g17(s)
                };
                items.push(t.into_bytes());
            }
        })
    });
}

// ---------------------------------------------------------------------------------------------
// ZUNION / ZINTER / ZDIFF (+STORE), ZINTERCARD

#[derive(Clone, Copy, PartialEq, Debug)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// A source read from a shard.
enum Src {
    Z(Vec<(Vec<u8>, f64)>),
    S(Vec<Vec<u8>>),
}

impl Src {
    fn len(&self) -> usize {
        match self {
            Src::Z(v) => v.len(),
            Src::S(v) => v.len(),
        }
    }
    fn items(&self) -> Box<dyn Iterator<Item = (&[u8], f64)> + '_> {
        match self {
            Src::Z(v) => Box::new(v.iter().map(|(m, s)| (&m[..], *s))),
            Src::S(v) => Box::new(v.iter().map(|m| (&m[..], 1.0))),
        }
    }
}

/// Members of a set source (score 1). MERGE NOTE: this branch has the placeholder set type
/// (no members can exist); with the set family merged the body is `s.to_vecs()`.
fn set_members(s: &damselfly_types::set::Set) -> Vec<Vec<u8>> {
    s.to_vecs()
}

/// Reads a source key. Err = neither a zset nor a set.
fn read_src(db: &mut Db, key: &[u8], now: u64) -> Result<Option<Src>, WrongType> {
    match db.get_read(key, now).map(|v| v.view()) {
        None => Ok(None),
        Some(ValueRef::ZSet(z)) => {
            let mut v = Vec::with_capacity(z.len());
            z.range(0, usize::MAX, false, |m, s| v.push((m.to_vec(), s)));
            Ok(Some(Src::Z(v)))
        }
        Some(ValueRef::Set(s)) => Ok(Some(Src::S(set_members(s)))),
        Some(_) => Err(WrongType),
    }
}

#[derive(Clone, Debug)]
struct SetOpts {
    weights: Vec<f64>,
    agg: Agg,
    withscores: bool,
    limit: u64,
}

/// Options after the keys (parsed up front; their errors are reported after WRONGTYPE, as in
/// Redis where the keys are looked up first).
fn parse_setopts(
    args: &[&[u8]],
    mut j: usize,
    n: usize,
    op: SetOp,
    store: bool,
    card: bool,
) -> Result<SetOpts, String> {
    let mut o = SetOpts {
        weights: vec![1.0; n],
        agg: Agg::Sum,
        withscores: false,
        limit: 0,
    };
    while j < args.len() {
        let remaining = args.len() - j;
        let a = args[j];
        if op != SetOp::Diff && !card && remaining > n && eq_ic(a, "weights") {
            j += 1;
            for i in 0..n {
                match parse_f64(args[j]) {
                    Some(w) => o.weights[i] = w,
                    None => return Err("ERR weight value is not a float".into()),
                }
                j += 1;
            }
        } else if op != SetOp::Diff && !card && remaining >= 2 && eq_ic(a, "aggregate") {
            let v = args[j + 1];
            o.agg = if eq_ic(v, "sum") {
                Agg::Sum
            } else if eq_ic(v, "min") {
                Agg::Min
            } else if eq_ic(v, "max") {
                Agg::Max
            } else {
                return Err(ERR_SYNTAX.into());
            };
            j += 2;
        } else if !store && !card && eq_ic(a, "withscores") {
            o.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && eq_ic(a, "limit") {
            match parse_i64(args[j + 1]) {
                Some(l) if l >= 0 => o.limit = l as u64,
                _ => return Err("ERR LIMIT can't be negative".into()),
            }
            j += 2;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    Ok(o)
}

#[inline]
fn agg(a: Agg, t: &mut f64, v: f64) {
    match a {
        Agg::Sum => {
            *t += v;
            if t.is_nan() {
                *t = 0.0;
            }
        }
        Agg::Min => {
            if v < *t {
                *t = v
            }
        }
        Agg::Max => {
            if v > *t {
                *t = v
            }
        }
    }
}

#[inline]
fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Computes the result, sorted by (score, member); for ZINTERCARD only the count matters.
fn compute(
    op: SetOp,
    srcs: &[Option<Src>],
    o: &SetOpts,
    card: bool,
) -> (Vec<(Vec<u8>, f64)>, usize) {
    let mut order: Vec<usize> = (0..srcs.len()).collect();
    let size = |i: &usize| srcs[*i].as_ref().map_or(0, |s| s.len());
    let mut out: Vec<(Vec<u8>, f64)> = Vec::new();
    match op {
        SetOp::Union => {
            order.sort_by_key(size);
            let mut acc: HashMap<&[u8], f64> = HashMap::new();
            let mut seq: Vec<&[u8]> = Vec::new();
            for &i in &order {
                let Some(s) = &srcs[i] else { continue };
                for (m, sc) in s.items() {
                    let v = weighted(o.weights[i], sc);
                    match acc.get_mut(m) {
                        Some(t) => agg(o.agg, t, v),
                        None => {
                            acc.insert(m, v);
                            seq.push(m);
                        }
                    }
                }
            }
            out = seq.into_iter().map(|m| (m.to_vec(), acc[m])).collect();
        }
        SetOp::Inter => {
            order.sort_by_key(size);
            if order.iter().any(|i| size(i) == 0) {
                return (out, 0);
            }
            let maps: Vec<HashMap<&[u8], f64>> = order[1..]
                .iter()
                .map(|&i| {
                    srcs[i]
                        .as_ref()
                        .map_or_else(HashMap::new, |s| s.items().collect())
                })
                .collect();
            let first = order[0];
            let mut n = 0usize;
            if let Some(s) = &srcs[first] {
                'outer: for (m, sc) in s.items() {
                    let mut t = weighted(o.weights[first], sc);
                    for (k, map) in maps.iter().enumerate() {
                        match map.get(m) {
                            // Redis maps NaN to 0 only for the first source here.
                            Some(&v) => agg(o.agg, &mut t, v * o.weights[order[k + 1]]),
                            None => continue 'outer,
                        }
                    }
                    n += 1;
                    if card {
                        if o.limit > 0 && n as u64 >= o.limit {
                            break;
                        }
                        continue;
                    }
                    out.push((m.to_vec(), t));
                }
            }
            if card {
                return (out, n);
            }
        }
        SetOp::Diff => {
            let Some(Some(base)) = srcs.first() else {
                return (out, 0);
            };
            let others: Vec<HashMap<&[u8], f64>> = srcs[1..]
                .iter()
                .flatten()
                .map(|s| s.items().collect())
                .collect();
            for (m, sc) in base.items() {
                if !others.iter().any(|o| o.contains_key(m)) {
                    out.push((m.to_vec(), sc));
                }
            }
        }
    }
    out.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
    let n = out.len();
    (out, n)
}

/// What a set-op command does with its result.
enum SetOpResult {
    WrongType,
    Err(String),
    Items(Vec<(Vec<u8>, f64)>, bool),
    Count(usize),
}

fn setop_finish(
    op: SetOp,
    srcs: Result<Vec<Option<Src>>, WrongType>,
    opts: &Result<SetOpts, String>,
    card: bool,
) -> Result<(Items, usize, bool), SetOpResult> {
    let Ok(srcs) = srcs else {
        return Err(SetOpResult::WrongType);
    };
    let o = match opts {
        Ok(o) => o,
        Err(e) => return Err(SetOpResult::Err(e.clone())),
    };
    let (items, n) = compute(op, &srcs, o, card);
    Ok((items, n, o.withscores))
}

async fn setop_generic(cx: &mut ConnCtx, args: &[&[u8]], op: SetOp, store: bool, card: bool) {
    let nk_idx = if store { 2 } else { 1 };
    let Some(numkeys) = parse_i64(args[nk_idx]) else {
        return cx.reply.error(ERR_NOT_INT);
    };
    if numkeys < 1 {
        let msg = format!(
            "ERR at least 1 input key is needed for '{}' command",
            cx.cmd_name
        );
        return cx.reply.error(&msg);
    }
    if numkeys as u64 > (args.len() - nk_idx - 1) as u64 {
        return cx.reply.error(ERR_SYNTAX);
    }
    let n = numkeys as usize;
    let first = nk_idx + 1;
    let opts = parse_setopts(args, first + n, n, op, store, card);
    let lim = limits_of(cx.shared());
    // Every source read on its shard, then computed (and stored on the destination's shard).
    let hops = cx
        .hops()
        .per_shard_of(&args[first..first + n], 1, |c, ks, ()| {
            let now = c.now;
            let db = c.db();
            ks.iter()
                .map(|k| read_src(db, k, now))
                .collect::<Vec<Result<Option<Src>, WrongType>>>()
        })
        .map(move |parts| {
            let mut slots: Vec<Option<Result<Option<Src>, WrongType>>> =
                (0..n).map(|_| None).collect();
            for p in parts {
                for (g, r) in p.groups.into_iter().zip(p.result) {
                    slots[g] = Some(r);
                }
            }
            let srcs: Result<Vec<Option<Src>>, WrongType> =
                slots.into_iter().map(|s| s.unwrap_or(Ok(None))).collect();
            setop_finish(op, srcs, &opts, card)
        });
    let res: SetOpResult = if store {
        let dst = args[1].to_vec();
        hops.on_key(args[1], move |c, done| match done {
            Err(r) => r,
            Ok((items, _, _)) => {
                let now = c.now;
                let event = match op {
                    SetOp::Union => "zunionstore",
                    SetOp::Inter => "zinterstore",
                    SetOp::Diff => "zdiffstore",
                };
                store_sorted(c.db(), &dst, &items, &lim, now, event);
                SetOpResult::Count(items.len())
            }
        })
        .run()
        .await
    } else {
        match hops.run().await {
            Err(r) => r,
            Ok((_, cnt, _)) if card => SetOpResult::Count(cnt),
            Ok((items, _, ws)) => SetOpResult::Items(items, ws),
        }
    };
    let r = &mut cx.reply;
    match res {
        SetOpResult::WrongType => r.error(ERR_WRONGTYPE),
        SetOpResult::Err(e) => r.error(&e),
        SetOpResult::Count(n) => r.int(n as i64),
        SetOpResult::Items(items, ws) => {
            pairs_header(r, items.len(), ws);
            for (m, s) in &items {
                pair(r, m, *s, ws);
            }
        }
    }
}

fn zunion<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(setop_generic(cx, args, SetOp::Union, false, false))
}
fn zinter<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(setop_generic(cx, args, SetOp::Inter, false, false))
}
fn zdiff<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(setop_generic(cx, args, SetOp::Diff, false, false))
}
fn zintercard<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(setop_generic(cx, args, SetOp::Inter, false, true))
}
fn zunionstore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(setop_generic(cx, args, SetOp::Union, true, false))
}
fn zinterstore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(setop_generic(cx, args, SetOp::Inter, true, false))
}
fn zdiffstore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(setop_generic(cx, args, SetOp::Diff, true, false))
}
