//! Set commands: SADD SREM SISMEMBER SMISMEMBER SCARD SMEMBERS SRANDMEMBER SPOP SSCAN (shard
//! handlers) and SMOVE SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE
//! (coordinators).
//!
//! Semantics, replies and error texts follow Redis 7.0 `t_set.c`. The multi-key commands run
//! in one hop when all their keys live on one shard; otherwise `execute` has put them in a
//! transaction over all their keys, and they read every source shard in one parallel hop
//! (cloning the source sets), compute on the connection's thread and write the destination in a
//! final hop, which is atomic under the transaction's locks.

use std::collections::HashSet;

use damselfly_protocol::Reply;

use super::scan;
use super::spec::prelude::*;
use super::util::*;
use super::{BoxFut, CmdCtx, ConnCtx};
use crate::config::EncLimit;
use crate::engine::db::{Db, TtlMode};
use crate::engine::shard_of;
use crate::types::compact::{parse_strict_i64, IntBuf};
use crate::types::set::{Member, Set};
use crate::types::Value;

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
    cmd("spop", -2, WRITE | FAST, range(1, 1, 1), Shard(spop))
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
pub(crate) fn intset_limit(shared: &crate::engine::Shared) -> usize {
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
            }
            cx.reply.int(added as i64);
        }
        None => {
            let mut s = Set::new();
            let added = args[2..].iter().filter(|m| s.add(m, max)).count();
            db.insert_new(key, Value::set(s), TtlMode::Clear);
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
    }
    if empty {
        db.remove_at(pos);
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
        reply.array(count);
        for _ in 0..count {
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
    if empty {
        db.remove_at(pos);
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
fn smove_take(db: &mut Db, src: &[u8], member: &[u8], dst: Dst, now: u64) -> Result<bool, ()> {
    let Some(pos) = db.find(src, now) else {
        return Ok(false);
    };
    let Some(s) = db.at_mut_quiet(pos).as_set_mut() else {
        return Err(());
    };
    if dst == Dst::Wrong {
        return Err(());
    }
    if !s.remove(member) {
        return Ok(false);
    }
    let empty = s.is_empty();
    db.touch_key(src);
    if empty {
        db.remove_at(pos);
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
            }
        }
        None => {
            let mut s = Set::new();
            s.add(member, max);
            db.insert_new(dst, Value::set(s), TtlMode::Clear);
        }
    }
}

fn smove<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let threads = cx.threads();
        let (ss, ds) = (shard_of(args[1], threads), shard_of(args[2], threads));
        let (src, dst, member) = (args[1].to_vec(), args[2].to_vec(), args[3].to_vec());
        let r: Result<i64, ()> = if ss == ds {
            on_shard(cx, ss, move |c| {
                let now = c.now;
                let max = intset_limit(c.shared);
                let db = c.db();
                let d = dst_state(db, &dst, now);
                if src == dst {
                    // Same key: a membership test (after the type checks).
                    return match lookup_read(db, &src, now) {
                        Found::Missing => Ok(0),
                        Found::Wrong => Err(()),
                        Found::Set(s) => Ok(s.contains(&member) as i64),
                    };
                }
                match smove_take(db, &src, &member, d, now)? {
                    false => Ok(0),
                    true => {
                        smove_put(db, &dst, &member, max, now);
                        Ok(1)
                    }
                }
            })
            .await
        } else {
            let d = dst.clone();
            let state = on_shard(cx, ds, move |c| {
                let now = c.now;
                dst_state(c.db(), &d, now)
            })
            .await;
            let m = member.clone();
            let taken = on_shard(cx, ss, move |c| {
                let now = c.now;
                smove_take(c.db(), &src, &m, state, now)
            })
            .await;
            match taken {
                Err(()) => Err(()),
                Ok(false) => Ok(0),
                Ok(true) => {
                    on_shard(cx, ds, move |c| {
                        let now = c.now;
                        let max = intset_limit(c.shared);
                        smove_put(c.db(), &dst, &member, max, now);
                    })
                    .await;
                    Ok(1)
                }
            }
        };
        match r {
            Ok(n) => cx.reply.int(n),
            Err(()) => cx.reply.error(ERR_WRONGTYPE),
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

/// Writes a STORE result: an empty result deletes the destination.
fn store(db: &mut Db, dst: &[u8], result: Option<Set>, now: u64) {
    match result {
        Some(s) if !s.is_empty() => {
            db.set(dst, Value::set(s), TtlMode::Clear, now);
        }
        _ => {
            if let Some(pos) = db.find(dst, now) {
                db.touch_key(dst);
                db.remove_at(pos);
            }
        }
    }
}

/// A source as fetched from its shard.
enum Fetched {
    Missing,
    Wrong,
    Set(Set),
}

/// Runs an algebra command over `keys`, storing into `dst` for `Mode::Store`.
async fn algebra(cx: &mut ConnCtx, op: Op, mode: Mode, keys: &[&[u8]], dst: Option<&[u8]>) {
    let threads = cx.threads();
    let first_shard = shard_of(keys[0], threads);
    let one_shard = keys
        .iter()
        .chain(dst.iter())
        .all(|k| shard_of(k, threads) == first_shard);
    let outcome = if one_shard {
        let owned = OwnedArgs::new(keys);
        let dst = dst.map(|d| d.to_vec());
        on_shard(cx, first_shard, move |c| {
            let now = c.now;
            let max = intset_limit(c.shared);
            let keys = owned.slices();
            let db = c.db();
            // Expire/lookup first (mutable), then borrow every source at once.
            let mut pos = Vec::with_capacity(keys.len());
            for k in &keys {
                pos.push(if mode == Mode::Store {
                    db.find(k, now)
                } else {
                    db.find_read(k, now)
                });
            }
            let mut sets: Vec<Option<&Set>> = Vec::with_capacity(keys.len());
            for p in &pos {
                match p {
                    None => sets.push(None),
                    Some(p) => match db.at(*p).1.as_set() {
                        Some(s) => sets.push(Some(s)),
                        None => return Outcome::WrongType,
                    },
                }
            }
            let (out, result) = compute(op, mode, &sets, max);
            drop(sets);
            if let Some(d) = dst {
                store(db, &d, result, now);
            }
            out
        })
        .await
    } else {
        // Read every source shard in parallel (one hop each), compute here, then write.
        let mut per: Vec<Vec<usize>> = vec![Vec::new(); threads];
        for (i, k) in keys.iter().enumerate() {
            per[shard_of(k, threads)].push(i);
        }
        let mut calls = Vec::new();
        for (s, idx) in per.into_iter().enumerate() {
            if idx.is_empty() {
                continue;
            }
            let owned = OwnedArgs::collect(idx.iter().map(|&i| keys[i]));
            let read = mode != Mode::Store;
            calls.push((
                idx,
                on_shard(cx, s, move |c| {
                    let now = c.now;
                    let db = c.db();
                    owned
                        .slices()
                        .iter()
                        .map(|k| {
                            let v = if read {
                                db.get_read(k, now)
                            } else {
                                db.get(k, now)
                            };
                            match v {
                                None => Fetched::Missing,
                                Some(v) => match v.as_set() {
                                    Some(s) => Fetched::Set(s.clone()),
                                    None => Fetched::Wrong,
                                },
                            }
                        })
                        .collect::<Vec<Fetched>>()
                }),
            ));
        }
        let mut fetched: Vec<Option<Fetched>> = (0..keys.len()).map(|_| None).collect();
        for (idx, call) in calls {
            for (i, f) in idx.into_iter().zip(call.await) {
                fetched[i] = Some(f);
            }
        }
        if fetched.iter().any(|f| matches!(f, Some(Fetched::Wrong))) {
            Outcome::WrongType
        } else {
            let max = intset_limit(cx.shared());
            let sets: Vec<Option<&Set>> = fetched
                .iter()
                .map(|f| match f {
                    Some(Fetched::Set(s)) => Some(s),
                    _ => None,
                })
                .collect();
            let (out, result) = compute(op, mode, &sets, max);
            if let Some(d) = dst {
                let d = d.to_vec();
                on_shard(cx, shard_of(&d, threads), move |c| {
                    let now = c.now;
                    store(c.db(), &d, result, now);
                })
                .await;
            }
            out
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
