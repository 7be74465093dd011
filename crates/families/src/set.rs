//! Set commands: SADD SREM SISMEMBER SMISMEMBER SCARD SMEMBERS SRANDMEMBER SPOP SSCAN (shard
//! handlers) and SMOVE SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE
//! (coordinators).
//!
//! Semantics, replies and error texts follow Redis 7.0 `t_set.c`. The multi-key commands run
//! in one hop when all their keys live on one shard; otherwise `execute` has put them in a
//! transaction over all their keys, and they read every source shard in one parallel hop
//! (cloning the source sets), compute on the connection's thread and write the destination in a
//! final hop, which is atomic under the transaction's locks.

use damselfly_core::commands::propagate;
use std::collections::HashSet;

use damselfly_protocol::Reply;

use damselfly_core::commands::coordinator::ShardPart;
use damselfly_core::commands::scan;
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_types::compact::{parse_strict_i64, IntBuf};
use damselfly_types::set::{Member, Set};
use damselfly_types::Value;

const ERR_POSITIVE: &str = "ERR value is out of range, must be positive";
const ERR_SRAND_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

const G: Group = Group::Set;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("sadd", -3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(sadd))
        .doc(G, "1.0.0", "Adds one or more members to a set. Creates the key if it doesn't exist."),
    cmd("srem", -3, WRITE | FAST, range(1, 1, 1), Shard(srem))
        .doc(G, "1.0.0", "Removes one or more members from a set. Deletes the set if the last member was removed."),
    cmd("smove", 4, WRITE | FAST, range(1, 2, 1), Conn(smove))
        .doc(G, "1.0.0", "Moves a member from one set to another."),
    cmd("sismember", 3, READONLY | FAST, range(1, 1, 1), Shard(sismember))
        .doc(G, "1.0.0", "Determines whether a member belongs to a set."),
    cmd("smismember", -3, READONLY | FAST, range(1, 1, 1), Shard(smismember))
        .doc(G, "6.2.0", "Determines whether multiple members belong to a set."),
    cmd("scard", 2, READONLY | FAST, range(1, 1, 1), Shard(scard))
        .doc(G, "1.0.0", "Returns the number of members in a set."),
    cmd("smembers", 2, READONLY, range(1, 1, 1), Shard(smembers))
        .doc(G, "1.0.0", "Returns all members of a set."),
    cmd("srandmember", -2, READONLY, range(1, 1, 1), Shard(srandmember))
        .doc(G, "1.0.0", "Get one or multiple random members from a set"),
    cmd("spop", -2, WRITE | FAST, range(1, 1, 1), Shard(spop)).propagate(propagate::spop)
        .doc(G, "1.0.0", "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped."),
    cmd("sscan", -3, READONLY, range(1, 1, 1), Shard(sscan))
        .doc(G, "2.8.0", "Iterates over members of a set."),
    cmd("sinter", -2, READONLY, range(1, -1, 1), Conn(sinter))
        .doc(G, "1.0.0", "Returns the intersect of multiple sets."),
    cmd("sintercard", -3, READONLY, custom((0, 0, 0), sintercard_keys), Conn(sintercard))
        .doc(G, "7.0.0", "Returns the number of members of the intersect of multiple sets."),
    cmd("sinterstore", -3, WRITE | DENYOOM, range(1, -1, 1), Conn(sinterstore))
        .doc(G, "1.0.0", "Stores the intersect of multiple sets in a key."),
    cmd("sunion", -2, READONLY, range(1, -1, 1), Conn(sunion))
        .doc(G, "1.0.0", "Returns the union of multiple sets."),
    cmd("sunionstore", -3, WRITE | DENYOOM, range(1, -1, 1), Conn(sunionstore))
        .doc(G, "1.0.0", "Stores the union of multiple sets in a key."),
    cmd("sdiff", -2, READONLY, range(1, -1, 1), Conn(sdiff))
        .doc(G, "1.0.0", "Returns the difference of multiple sets."),
    cmd("sdiffstore", -3, WRITE | DENYOOM, range(1, -1, 1), Conn(sdiffstore))
        .doc(G, "1.0.0", "Stores the difference of multiple sets in a key."),
];

// ---------------------------------------------------------------------------------------------
// Helpers

/// `set-max-intset-entries`.
pub(crate) fn intset_limit(shared: &damselfly_core::engine::Shared) -> usize {
    shared
        .config
        .enc_limit(EncLimit::SetMaxIntsetEntries)
        .max(0) as usize
}

fn reply_member(reply: &mut Reply, m: Member<'_>) {
    match m {
        Member::Int(v) => reply.bulk_int(v),
        Member::Str(b) => reply.bulk(b),
    }
}

/// What a key holds, for the set commands.
enum Found<'a> {
    Missing,
    Wrong,
    Set(&'a Set),
}

fn lookup_read<'a>(db: &'a mut Db, key: &[u8], now: u64) -> Found<'a> {
    match db.get_read(key, now) {
        None => Found::Missing,
        Some(v) => match v.as_set() {
            Some(s) => Found::Set(s),
            None => Found::Wrong,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Single-key commands

fn sadd(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let max = intset_limit(cx.shared);
    let now = cx.now;
    let key = args[1];
    let db = cx.db();
    match db.find(key, now) {
        Some(pos) => {
            let Some(s) = db.at_mut_quiet(pos).as_set_mut() else {
                cx.reply.error(ERR_WRONGTYPE);
                return;
            };
            let added = args[2..].iter().filter(|m| s.add(m, max)).count();
            if added > 0 {
                db.touch_key(key);
                ev::emit(ev::SET, "sadd", db.index, key);
            }
            cx.reply.int(added as i64);
        }
        None => {
            let mut s = Set::new();
            let added = args[2..].iter().filter(|m| s.add(m, max)).count();
            db.insert_new(key, Value::set(s), TtlMode::Clear);
            ev::emit(ev::SET, "sadd", db.index, key);
            cx.reply.int(added as i64);
        }
    }
}

fn srem(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let key = args[1];
    let db = cx.db();
    let Some(pos) = db.find(key, now) else {
        cx.reply.int(0);
        return;
    };
    let Some(s) = db.at_mut_quiet(pos).as_set_mut() else {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    };
    let mut removed = 0;
    for m in &args[2..] {
        if s.remove(m) {
            removed += 1;
            if s.is_empty() {
                break;
            }
        }
    }
    let empty = s.is_empty();
    if removed > 0 {
        db.touch_key(key);
        ev::emit(ev::SET, "srem", db.index, key);
    }
    if empty {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", db.index, key);
    }
    cx.reply.int(removed);
}

fn sismember(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    match lookup_read(cx.db(), args[1], now) {
        Found::Missing => cx.reply.int(0),
        Found::Wrong => cx.reply.error(ERR_WRONGTYPE),
        Found::Set(s) => {
            let r = s.contains(args[2]);
            cx.reply.int(r as i64)
        }
    }
}

fn smismember(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let set = match lookup_read(&mut cx.shard.dbs[cx.db], args[1], now) {
        Found::Wrong => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
        Found::Missing => None,
        Found::Set(s) => Some(s),
    };
    cx.reply.array(args.len() - 2);
    for m in &args[2..] {
        let r = set.is_some_and(|s| s.contains(m));
        cx.reply.int(r as i64);
    }
}

fn scard(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    match lookup_read(cx.db(), args[1], now) {
        Found::Missing => cx.reply.int(0),
        Found::Wrong => cx.reply.error(ERR_WRONGTYPE),
        Found::Set(s) => {
            let n = s.len();
            cx.reply.int(n as i64)
        }
    }
}

fn smembers(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    match lookup_read(&mut cx.shard.dbs[cx.db], args[1], now) {
        Found::Missing => cx.reply.set(0),
        Found::Wrong => cx.reply.error(ERR_WRONGTYPE),
        Found::Set(s) => {
            cx.reply.set(s.len());
            for m in s.iter() {
                reply_member(cx.reply, m);
            }
        }
    }
}

fn srandmember(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if args.len() > 3 {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    let now = cx.now;
    let mut rng = cx.shard.fork_rng();
    if args.len() == 2 {
        match lookup_read(&mut cx.shard.dbs[cx.db], args[1], now) {
            Found::Missing => cx.reply.null(),
            Found::Wrong => cx.reply.error(ERR_WRONGTYPE),
            Found::Set(s) => match s.random(&mut rng) {
                Some(m) => reply_member(cx.reply, m),
                None => cx.reply.null(),
            },
        }
        return;
    }
    let Some(l) = parse_i64(args[2]) else {
        cx.reply.error(ERR_NOT_INT);
        return;
    };
    if l == i64::MIN {
        cx.reply.error(ERR_SRAND_RANGE);
        return;
    }
    let s = match lookup_read(&mut cx.shard.dbs[cx.db], args[1], now) {
        Found::Missing => {
            cx.reply.empty_array();
            return;
        }
        Found::Wrong => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
        Found::Set(s) => s,
    };
    let reply = &mut *cx.reply;
    let count = l.unsigned_abs() as usize;
    if count == 0 || s.is_empty() {
        reply.empty_array();
        return;
    }
    // Negative count: with repetitions, streamed (never allocated by the count).
    if l < 0 || count == 1 {
        // Past the output buffer limit the client is closed: stop (see `generation_cap`).
        let cap = damselfly_core::client::limits::generation_cap(&cx.shared.config, reply.len());
        reply.array(count);
        for _ in 0..count {
            if reply.len() > cap {
                break;
            }
            if let Some(m) = s.random(&mut rng) {
                reply_member(reply, m);
            }
        }
        return;
    }
    let size = s.len();
    if count >= size {
        reply.array(size);
        for m in s.iter() {
            reply_member(reply, m);
        }
        return;
    }
    reply.array(count);
    if count * 3 > size {
        // Most of the set: drop random members from a copy of all of them.
        let mut all: Vec<Member<'_>> = s.iter().collect();
        while all.len() > count {
            let i = rng.index(all.len());
            all.swap_remove(i);
        }
        for m in all {
            reply_member(reply, m);
        }
    } else {
        // A small part of a big set: distinct random positions.
        let mut seen: HashSet<usize> = HashSet::with_capacity(count);
        while seen.len() < count {
            let p = s.random_pos(&mut rng);
            if seen.insert(p) {
                if let Some(m) = s.at_pos(p) {
                    reply_member(reply, m);
                }
            }
        }
    }
}

fn spop(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if args.len() > 3 {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    let now = cx.now;
    let key = args[1];
    let mut rng = cx.shard.fork_rng();
    let count = if args.len() == 3 {
        match parse_i64(args[2]) {
            Some(l) if l >= 0 => Some(l as u64),
            _ => {
                cx.reply.error(ERR_POSITIVE);
                return;
            }
        }
    } else {
        None
    };
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(key, now) else {
        match count {
            None => cx.reply.null(),
            Some(_) => cx.reply.set(0),
        }
        return;
    };
    let Some(s) = db.at_mut_quiet(pos).as_set_mut() else {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    };
    let reply = &mut *cx.reply;
    match count {
        None => match s.pop_random(&mut rng) {
            Some(m) => reply.bulk(&m),
            None => reply.null(),
        },
        Some(0) => {
            reply.set(0);
            return;
        }
        Some(n) => {
            let size = s.len();
            if n >= size as u64 {
                reply.set(size);
                for m in s.iter() {
                    reply_member(reply, m);
                }
                db.touch_key(key);
                db.remove_at(pos);
                ev::emit(ev::SET, "spop", db.index, key);
                ev::emit(ev::GENERIC, "del", db.index, key);
                return;
            }
            let n = n as usize;
            reply.set(n);
            if (size - n) * 5 > n {
                for _ in 0..n {
                    if let Some(m) = s.pop_random(&mut rng) {
                        reply.bulk(&m);
                    }
                }
            } else {
                // Most of the set goes: choose the members to pop by a partial shuffle.
                let mut all = s.to_vecs();
                rng.partial_shuffle(&mut all, n);
                for m in &all[..n] {
                    s.remove(m);
                    reply.bulk(m);
                }
            }
        }
    }
    let empty = s.is_empty();
    db.touch_key(key);
    ev::emit(ev::SET, "spop", db.index, key);
    if empty {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", db.index, key);
    }
}

/// SSCAN (see [`scan`]).
fn sscan(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(cursor) = scan::cursor_arg(cx.reply, args[2]) else {
        return;
    };
    let now = cx.now;
    let s = match lookup_read(&mut cx.shard.dbs[cx.db], args[1], now) {
        Found::Missing => return scan::reply_empty(cx.reply),
        Found::Wrong => return cx.reply.error(ERR_WRONGTYPE),
        Found::Set(s) => s,
    };
    scan::scan_value(cx.reply, args, scan::Target::Set, |o, items| {
        s.scan(cursor, o.count, |m| {
            let mut buf: IntBuf = [0; 20];
            let b = m.bytes(&mut buf);
            if o.matches(b) {
                items.push(b.to_vec());
            }
        })
    });
}

// ---------------------------------------------------------------------------------------------
// SMOVE

/// The destination's state as seen by SMOVE.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dst {
    Missing,
    Set,
    Wrong,
}

fn dst_state(db: &mut Db, key: &[u8], now: u64) -> Dst {
    match db.get(key, now) {
        None => Dst::Missing,
        Some(v) if v.as_set().is_some() => Dst::Set,
        Some(_) => Dst::Wrong,
    }
}

/// SMOVE's source side. Ok(true) = removed (caller adds to the destination).
fn smove_take(
    db: &mut Db,
    src: &[u8],
    member: &[u8],
    dst: Dst,
    now: u64,
) -> Result<bool, WrongType> {
    let Some(pos) = db.find(src, now) else {
        return Ok(false);
    };
    let Some(s) = db.at_mut_quiet(pos).as_set_mut() else {
        return Err(WrongType);
    };
    if dst == Dst::Wrong {
        return Err(WrongType);
    }
    if !s.remove(member) {
        return Ok(false);
    }
    let empty = s.is_empty();
    db.touch_key(src);
    ev::emit(ev::SET, "srem", db.index, src);
    if empty {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", db.index, src);
    }
    Ok(true)
}

fn smove_put(db: &mut Db, dst: &[u8], member: &[u8], max: usize, now: u64) {
    match db.find(dst, now) {
        Some(pos) => {
            // The destination counts as modified only when the member was new to it.
            let added = db
                .at_mut_quiet(pos)
                .as_set_mut()
                .is_some_and(|s| s.add(member, max));
            if added {
                db.touch_key(dst);
                ev::emit(ev::SET, "sadd", db.index, dst);
            }
        }
        None => {
            let mut s = Set::new();
            s.add(member, max);
            db.insert_new(dst, Value::set(s), TtlMode::Clear);
            ev::emit(ev::SET, "sadd", db.index, dst);
        }
    }
}

fn smove<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        // The destination's type, then take the member off the source, then add it to the
        // destination (one message when both keys share a shard, a transaction otherwise).
        let (src, dst, member) = (args[1].to_vec(), args[2].to_vec(), args[3].to_vec());
        let (d, m, dst_key) = (dst.clone(), member.clone(), dst.clone());
        let r: Result<i64, WrongType> = cx
            .hops()
            .on_key(args[2], move |c, ()| {
                let now = c.now;
                dst_state(c.db(), &d, now)
            })
            .on_key(args[1], move |c, state| {
                let now = c.now;
                let db = c.db();
                if src == dst_key {
                    // Same key: a membership test (after the type checks).
                    return match lookup_read(db, &src, now) {
                        Found::Missing => Ok(Some(0)),
                        Found::Wrong => Err(WrongType),
                        Found::Set(s) => Ok(Some(s.contains(&m) as i64)),
                    };
                }
                Ok(match smove_take(db, &src, &m, state, now)? {
                    false => Some(0),
                    true => None,
                })
            })
            .on_key(args[2], move |c, taken| {
                Ok(match taken? {
                    Some(n) => n,
                    None => {
                        let now = c.now;
                        let max = intset_limit(c.shared);
                        smove_put(c.db(), &dst, &member, max, now);
                        1
                    }
                })
            })
            .run()
            .await;
        match r {
            Ok(n) => cx.reply.int(n),
            Err(WrongType) => cx.reply.error(ERR_WRONGTYPE),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// What the command does with the result.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Reply,
    /// SINTERCARD with its LIMIT (0 = none).
    Card(usize),
    Store,
}

/// Result of an algebra command, computed where the sets are.
enum Outcome {
    WrongType,
    Members(Vec<Vec<u8>>),
    Count(usize),
}

/// Members of the intersection in the smallest set's order, stopping at `limit` (0 = all).
fn intersect(sets: &[&Set], limit: usize, mut f: impl FnMut(Member<'_>)) -> usize {
    let mut order: Vec<&Set> = sets.to_vec();
    order.sort_by_key(|s| s.len());
    let Some((first, rest)) = order.split_first() else {
        return 0;
    };
    let mut n = 0;
    for m in first.iter() {
        if rest
            .iter()
            .all(|o| std::ptr::eq(*o, *first) || o.contains_member(m))
        {
            f(m);
            n += 1;
            if limit != 0 && n >= limit {
                break;
            }
        }
    }
    n
}

/// Computes `op` over the sources (None = missing key). For `Mode::Store` the result set is
/// returned for writing; otherwise the outcome to reply with.
fn compute(op: Op, mode: Mode, sets: &[Option<&Set>], max: usize) -> (Outcome, Option<Set>) {
    match op {
        Op::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return match mode {
                    Mode::Reply => (Outcome::Members(Vec::new()), None),
                    _ => (Outcome::Count(0), None),
                };
            }
            let present: Vec<&Set> = sets.iter().flatten().copied().collect();
            match mode {
                Mode::Card(limit) => (Outcome::Count(intersect(&present, limit, |_| {})), None),
                Mode::Reply => {
                    let mut out = Vec::new();
                    intersect(&present, 0, |m| out.push(m.to_vec()));
                    (Outcome::Members(out), None)
                }
                Mode::Store => {
                    let mut dst = Set::new();
                    intersect(&present, 0, |m| {
                        let mut buf: IntBuf = [0; 20];
                        dst.add(m.bytes(&mut buf), max);
                    });
                    (Outcome::Count(dst.len()), Some(dst))
                }
            }
        }
        Op::Union | Op::Diff => {
            let mut dst = Set::new();
            let mut buf: IntBuf = [0; 20];
            if op == Op::Union {
                for s in sets.iter().flatten() {
                    for m in s.iter() {
                        dst.add(m.bytes(&mut buf), max);
                    }
                }
            } else if let Some(Some(first)) = sets.first() {
                let others: Vec<&Set> = sets[1..].iter().flatten().copied().collect();
                if !others.iter().any(|o| std::ptr::eq(*o, *first)) {
                    for m in first.iter() {
                        if !others.iter().any(|o| o.contains_member(m)) {
                            dst.add(m.bytes(&mut buf), max);
                        }
                    }
                }
            }
            match mode {
                Mode::Store => (Outcome::Count(dst.len()), Some(dst)),
                _ => (Outcome::Members(dst.to_vecs()), None),
            }
        }
    }
}

/// Writes a STORE result: an empty result deletes the destination. `event`: the command's
/// keyspace event.
fn store(db: &mut Db, dst: &[u8], result: Option<Set>, now: u64, event: &str) {
    match result {
        Some(s) if !s.is_empty() => {
            db.set(dst, Value::set(s), TtlMode::Clear, now);
            ev::emit(ev::SET, event, db.index, dst);
        }
        _ => {
            if let Some(pos) = db.find(dst, now) {
                db.touch_key(dst);
                db.remove_at(pos);
                ev::emit(ev::GENERIC, "del", db.index, dst);
            }
        }
    }
}

/// One shard's share of a set-algebra command: what it makes of the sources it holds, so
/// that only results travel, never the sources (with every key on one shard, its partial is the
/// answer).
enum Partial {
    /// A source of another type: the command fails with WRONGTYPE.
    Wrong,
    /// SINTER with a missing source: the intersection is empty.
    Empty,
    /// The combination of this shard's sources: their intersection (SINTER), union (SUNION,
    /// and SDIFF's shards that do not hold the first key) or the first key minus the others
    /// held here (SDIFF, on the first key's shard).
    Set { first: bool, set: Set },
}

/// Computes a shard's `Partial` over its sources `keys` (in argument order); `first_key` is the
/// command's first source.
fn partial(c: &mut CmdCtx<'_>, op: Op, read: bool, keys: &[&[u8]], first_key: &[u8]) -> Partial {
    let now = c.now;
    let max = intset_limit(c.shared);
    let db = c.db();
    // Expire/lookup first (mutable), then borrow every source at once.
    let mut pos = Vec::with_capacity(keys.len());
    for k in keys {
        pos.push(if read {
            db.find_read(k, now)
        } else {
            db.find(k, now)
        });
    }
    let mut sets: Vec<Option<&Set>> = Vec::with_capacity(keys.len());
    for p in &pos {
        match p {
            None => sets.push(None),
            Some(p) => match db.at(*p).1.as_set() {
                Some(s) => sets.push(Some(s)),
                None => return Partial::Wrong,
            },
        }
    }
    let first = keys.first().is_some_and(|k| *k == first_key);
    let local_op = match op {
        Op::Inter if sets.iter().any(|s| s.is_none()) => return Partial::Empty,
        Op::Diff if !first => Op::Union,
        op => op,
    };
    let (_, set) = compute(local_op, Mode::Store, &sets, max);
    Partial::Set {
        first,
        set: set.unwrap_or_default(),
    }
}

/// Combines the shards' partials into the command's outcome (and STORE's set).
fn merge(op: Op, mode: Mode, parts: &[ShardPart<Partial>], max: usize) -> (Outcome, Option<Set>) {
    if parts.iter().any(|p| matches!(p.result, Partial::Wrong)) {
        return (Outcome::WrongType, None);
    }
    let empty = parts.iter().any(|p| matches!(p.result, Partial::Empty));
    let mut sets: Vec<Option<&Set>> = Vec::with_capacity(parts.len());
    // SDIFF: the first key's partial first, the sets to subtract after it.
    for want_first in [true, false] {
        for p in parts {
            if let Partial::Set { first, set } = &p.result {
                if *first == want_first {
                    sets.push(Some(set));
                }
            }
        }
    }
    if empty {
        // (Only SINTER reports Empty: a missing source empties the intersection.)
        sets.push(None);
    }
    compute(op, mode, &sets, max)
}

/// Runs an algebra command over `keys`, storing into `dst` for `Mode::Store`: every source
/// shard computes its partial where its sources are, then the partials are combined (and the
/// result written on the destination's shard).
async fn algebra(cx: &mut ConnCtx, op: Op, mode: Mode, keys: &[&[u8]], dst: Option<&[u8]>) {
    let read = mode != Mode::Store;
    let first_key = keys[0].to_vec();
    let max = intset_limit(cx.shared());
    let hops = cx.hops().per_shard_of(keys, 1, move |c, ks, ()| {
        partial(c, op, read, ks, &first_key)
    });
    let outcome = match dst {
        None => {
            hops.map(move |parts| merge(op, mode, &parts, max).0)
                .run()
                .await
        }
        Some(d) => {
            let dst = d.to_vec();
            hops.on_key(d, move |c, parts| {
                let (out, result) = merge(op, mode, &parts, max);
                if !matches!(out, Outcome::WrongType) {
                    let now = c.now;
                    let event = match op {
                        Op::Inter => "sinterstore",
                        Op::Union => "sunionstore",
                        Op::Diff => "sdiffstore",
                    };
                    store(c.db(), &dst, result, now, event);
                }
                out
            })
            .run()
            .await
        }
    };
    match outcome {
        Outcome::WrongType => cx.reply.error(ERR_WRONGTYPE),
        Outcome::Count(n) => cx.reply.int(n as i64),
        Outcome::Members(ms) => {
            cx.reply.set(ms.len());
            for m in &ms {
                cx.reply.bulk(m);
            }
        }
    }
}

fn sinter<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(algebra(cx, Op::Inter, Mode::Reply, &args[1..], None))
}

fn sunion<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(algebra(cx, Op::Union, Mode::Reply, &args[1..], None))
}

fn sdiff<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(algebra(cx, Op::Diff, Mode::Reply, &args[1..], None))
}

fn sinterstore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(algebra(
        cx,
        Op::Inter,
        Mode::Store,
        &args[2..],
        Some(args[1]),
    ))
}

fn sunionstore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(algebra(
        cx,
        Op::Union,
        Mode::Store,
        &args[2..],
        Some(args[1]),
    ))
}

fn sdiffstore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(algebra(
        cx,
        Op::Diff,
        Mode::Store,
        &args[2..],
        Some(args[1]),
    ))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: the keys' positions (none when numkeys is
/// invalid; the handler reports the error).
fn sintercard_keys(args: &[&[u8]]) -> Vec<usize> {
    match args.get(1).and_then(|a| parse_i64(a)) {
        Some(n) if n > 0 && (n as usize) <= args.len().saturating_sub(2) => {
            (2..2 + n as usize).collect()
        }
        _ => Vec::new(),
    }
}

fn sintercard<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let n = match parse_strict_i64(args[1]) {
            Some(n) if n > 0 => n as u64,
            _ => {
                cx.reply.error("ERR numkeys should be greater than 0");
                return;
            }
        };
        if n > (args.len() - 2) as u64 {
            cx.reply
                .error("ERR Number of keys can't be greater than number of args");
            return;
        }
        let n = n as usize;
        let mut limit = 0usize;
        let mut j = 2 + n;
        while j < args.len() {
            if eq_ic(args[j], "limit") && j + 1 < args.len() {
                match parse_i64(args[j + 1]) {
                    Some(l) if l >= 0 => limit = l as usize,
                    _ => {
                        cx.reply.error("ERR LIMIT can't be negative");
                        return;
                    }
                }
                j += 2;
            } else {
                cx.reply.error(ERR_SYNTAX);
                return;
            }
        }
        algebra(cx, Op::Inter, Mode::Card(limit), &args[2..2 + n], None).await
    })
}
