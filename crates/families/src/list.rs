//! LIST commands, with Redis 7.0's replies and error texts (`t_list.c`).
//!
//! Single-key commands are shard handlers. LMOVE/RPOPLPUSH/LMPOP are connection handlers whose
//! hops run inside the command's transaction when their keys span shards (the key spec of LMOVE
//! covers both keys; LMPOP/BLMPOP have a keynum key spec), so they apply atomically.
//!
//! Blocking commands (BLPOP BRPOP BLMPOP BLMOVE BRPOPLPUSH) first try the non-blocking variant
//! (inside the transaction, in argument order, so the first non-empty key wins as in Redis). When
//! nothing is ready they release the transaction and block through `serve_or_block`: the pop
//! then happens in `Serve::take` on the source key's shard, atomically with the write that made
//! it ready. BLMOVE whose destination lives on another shard pushes there from the connection
//! right after the wake-up (a short window in which the element is in neither list; if the
//! destination turned out not to be a list, the element goes back to the end it came from and
//! the client gets WRONGTYPE, like Redis which leaves the source untouched). Inside MULTI/EXEC
//! blocking commands never block: they answer as on timeout.

use std::sync::Arc;
use std::time::Duration;

use damselfly_protocol::{Reply, RespVersion};

use damselfly_core::commands::coordinator::wait::serve_or_block;
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_core::engine::waiters::Serve;
use damselfly_types::list::{Entry, Fill, List, Needle};
use damselfly_types::{Value, ValueRef};

const G: Group = Group::List;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("lpush", -3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(lpush))
        .doc(G, "1.0.0", "Prepend one or multiple elements to a list"),
    cmd("rpush", -3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(rpush))
        .doc(G, "1.0.0", "Append one or multiple elements to a list"),
    cmd("lpushx", -3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(lpushx))
        .doc(G, "2.2.0", "Prepend an element to a list, only if the list exists"),
    cmd("rpushx", -3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(rpushx))
        .doc(G, "2.2.0", "Append an element to a list, only if the list exists"),
    cmd("lpop", -2, WRITE | FAST, range(1, 1, 1), Shard(lpop))
        .doc(G, "1.0.0", "Remove and get the first elements in a list"),
    cmd("rpop", -2, WRITE | FAST, range(1, 1, 1), Shard(rpop))
        .doc(G, "1.0.0", "Remove and get the last elements in a list"),
    cmd("llen", 2, READONLY | FAST, range(1, 1, 1), Shard(llen))
        .doc(G, "1.0.0", "Get the length of a list"),
    cmd("lrange", 4, READONLY, range(1, 1, 1), Shard(lrange))
        .doc(G, "1.0.0", "Get a range of elements from a list"),
    cmd("lindex", 3, READONLY, range(1, 1, 1), Shard(lindex))
        .doc(G, "1.0.0", "Get an element from a list by its index"),
    cmd("lset", 4, WRITE | DENYOOM, range(1, 1, 1), Shard(lset))
        .doc(G, "1.0.0", "Set the value of an element in a list by its index"),
    cmd("linsert", 5, WRITE | DENYOOM, range(1, 1, 1), Shard(linsert))
        .doc(G, "2.2.0", "Insert an element before or after another element in a list"),
    cmd("lrem", 4, WRITE, range(1, 1, 1), Shard(lrem))
        .doc(G, "1.0.0", "Remove elements from a list"),
    cmd("ltrim", 4, WRITE, range(1, 1, 1), Shard(ltrim))
        .doc(G, "1.0.0", "Trim a list to the specified range"),
    cmd("lpos", -3, READONLY, range(1, 1, 1), Shard(lpos))
        .doc(G, "6.0.6", "Return the index of matching elements on a list"),
    cmd("lmove", 5, WRITE | DENYOOM, range(1, 2, 1), Conn(lmove))
        .doc(G, "6.2.0", "Pop an element from a list, push it to another list and return it"),
    cmd("rpoplpush", 3, WRITE | DENYOOM, range(1, 2, 1), Conn(rpoplpush))
        .doc(G, "1.2.0", "Remove the last element in a list, prepend it to another list and return it"),
    cmd("lmpop", -4, WRITE | PROP_SELF, keynum(1, 1, 1), Conn(lmpop))
        .doc(G, "7.0.0", "Pop elements from a list"),
    cmd("blpop", -3, WRITE | PROP_SELF | NOSCRIPT | BLOCKING, range(1, -2, 1), Conn(blpop))
        .doc(G, "2.0.0", "Remove and get the first element in a list, or block until one is available"),
    cmd("brpop", -3, WRITE | PROP_SELF | NOSCRIPT | BLOCKING, range(1, -2, 1), Conn(brpop))
        .doc(G, "2.0.0", "Remove and get the last element in a list, or block until one is available"),
    cmd("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, range(1, 2, 1), Conn(blmove))
        .doc(G, "6.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available"),
    cmd("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, range(1, 2, 1), Conn(brpoplpush))
        .doc(G, "2.2.0", "Pop an element from a list, push it to another list and return it; or block until one is available"),
    cmd("blmpop", -5, WRITE | PROP_SELF | BLOCKING, keynum(2, 1, 1), Conn(blmpop))
        .doc(G, "7.0.0", "Pop elements from a list, or block until one is available"),
];

// ---------------------------------------------------------------------------------------------
// Helpers

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    Left,
    Right,
}

fn parse_end(a: &[u8]) -> Option<End> {
    if eq_ic(a, "left") {
        Some(End::Left)
    } else if eq_ic(a, "right") {
        Some(End::Right)
    } else {
        None
    }
}

#[inline]
fn fill_of(cx: &CmdCtx<'_>) -> Fill {
    Fill::new(cx.shared.config.enc_limit(EncLimit::ListMaxListpackSize))
}

#[inline]
fn conn_fill(cx: &ConnCtx) -> Fill {
    Fill::new(cx.shared().config.enc_limit(EncLimit::ListMaxListpackSize))
}

#[inline]
fn bulk_entry(r: &mut Reply, e: Entry<'_>) {
    match e {
        Entry::Int(v) => r.bulk_int(v),
        Entry::Str(s) => r.bulk(s),
    }
}

#[inline]
fn push_end(l: &mut List, end: End, v: &[u8], fill: Fill) {
    match end {
        End::Left => l.push_front(v, fill),
        End::Right => l.push_back(v, fill),
    }
}

/// Pops one element from `end`, writing it as a bulk string. False when empty.
#[inline]
fn pop_to_reply(l: &mut List, end: End, r: &mut Reply) -> bool {
    let e = match end {
        End::Left => l.front(),
        End::Right => l.back(),
    };
    match e {
        Some(e) => {
            bulk_entry(r, e);
            match end {
                End::Left => l.pop_front(),
                End::Right => l.pop_back(),
            }
        }
        None => false,
    }
}

/// Pops one element from `end` as owned bytes.
fn pop_owned(l: &mut List, end: End) -> Option<Vec<u8>> {
    let v = match end {
        End::Left => l.front(),
        End::Right => l.back(),
    }?
    .to_vec();
    match end {
        End::Left => l.pop_front(),
        End::Right => l.pop_back(),
    };
    Some(v)
}

/// Kind of what `key` holds: None = missing, Some(true) = a list, Some(false) = another type.
fn list_kind(db: &mut Db, key: &[u8], now: u64) -> Option<bool> {
    db.get(key, now).map(|v| v.as_list().is_some())
}

/// Pushes `v` on `end` of the list at `key`, creating it. The key must hold a list or nothing.
fn push_create(db: &mut Db, key: &[u8], end: End, v: &[u8], fill: Fill, now: u64) {
    if let Some(l) = db.get_mut(key, now).and_then(|v| v.as_list_mut()) {
        push_end(l, end, v, fill);
        return;
    }
    if db.find(key, now).is_some() {
        return; // not a list: callers checked the type first
    }
    let mut l = List::new();
    push_end(&mut l, end, v, fill);
    db.insert_new(key, Value::list(l), TtlMode::Clear);
}

/// Deletes `key` when it holds an empty list (Redis never keeps empty lists); true if it did.
fn drop_if_empty(db: &mut Db, key: &[u8], now: u64) -> bool {
    if let Some(pos) = db.find(key, now) {
        if db.at(pos).1.as_list().is_some_and(|l| l.is_empty()) {
            db.remove_at(pos);
            return true;
        }
    }
    false
}

/// The events of an element moved from `src` (emptied: deleted) to `dst`, in Redis's order
/// (the push first).
fn move_events(db: usize, src: &[u8], dst: &[u8], wf: End, wt: End, emptied: bool) {
    ev::emit(ev::LIST, push_event(wt), db, dst);
    ev::emit(ev::LIST, pop_event(wf), db, src);
    if emptied {
        ev::emit(ev::GENERIC, "del", db, src);
    }
}

/// The data of an encoded bulk string reply (`$n\r\n...\r\n`).
fn decode_bulk(b: &[u8]) -> Option<&[u8]> {
    if b.first() != Some(&b'$') {
        return None;
    }
    let nl = b.iter().position(|&c| c == b'\r')?;
    let n: usize = std::str::from_utf8(&b[1..nl]).ok()?.parse().ok()?;
    b.get(nl + 2..nl + 2 + n)
}

// ---------------------------------------------------------------------------------------------
// Push / pop

fn lpush(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    push_generic(cx, args, End::Left, false)
}

fn rpush(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    push_generic(cx, args, End::Right, false)
}

fn lpushx(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    push_generic(cx, args, End::Left, true)
}

fn rpushx(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    push_generic(cx, args, End::Right, true)
}

fn push_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], end: End, xx: bool) {
    let fill = fill_of(cx);
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let key = args[1];
    match db.find(key, now) {
        None => {
            if xx {
                cx.reply.int(0);
                return;
            }
            let mut l = List::new();
            for v in &args[2..] {
                push_end(&mut l, end, v, fill);
            }
            let n = l.len();
            db.insert_new(key, Value::list(l), TtlMode::Clear);
            ev::emit(ev::LIST, push_event(end), cx.db, key);
            cx.reply.int(n as i64);
        }
        Some(pos) => {
            if db.at(pos).1.as_list().is_none() {
                cx.reply.error(ERR_WRONGTYPE);
                return;
            }
            let Some(l) = db.at_mut(pos).as_list_mut() else {
                return;
            };
            for v in &args[2..] {
                push_end(l, end, v, fill);
            }
            cx.reply.int(l.len() as i64);
            ev::emit(ev::LIST, push_event(end), cx.db, key);
        }
    }
}

fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Left => "lpop",
        End::Right => "rpop",
    }
}

fn lpop(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    pop_generic(cx, args, End::Left)
}

fn rpop(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    pop_generic(cx, args, End::Right)
}

fn pop_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], end: End) {
    if args.len() > 3 {
        let name = if end == End::Left { "lpop" } else { "rpop" };
        cx.reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return;
    }
    let count = if args.len() == 3 {
        match parse_i64(args[2]).filter(|&c| c >= 0) {
            Some(c) => Some(c as u64),
            None => {
                cx.reply
                    .error("ERR value is out of range, must be positive");
                return;
            }
        }
    } else {
        None
    };
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(args[1], now) else {
        if count.is_some() {
            cx.reply.null_array();
        } else {
            cx.reply.null();
        }
        return;
    };
    if db.at(pos).1.as_list().is_none() {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    }
    if count == Some(0) {
        cx.reply.empty_array();
        return;
    }
    let Some(l) = db.at_mut(pos).as_list_mut() else {
        return;
    };
    match count {
        None => {
            pop_to_reply(l, end, cx.reply);
        }
        Some(c) => {
            let n = (c as usize).min(l.len());
            cx.reply.array(n);
            for _ in 0..n {
                pop_to_reply(l, end, cx.reply);
            }
        }
    }
    let empty = l.is_empty();
    ev::emit(ev::LIST, pop_event(end), cx.db, args[1]);
    if empty {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", cx.db, args[1]);
    }
}

// ---------------------------------------------------------------------------------------------
// Reads

fn llen(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.get_read(args[1], now).map(|v| v.view()) {
        None => cx.reply.int(0),
        Some(ValueRef::List(l)) => cx.reply.int(l.len() as i64),
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

/// Redis's LRANGE/LTRIM index normalisation: the inclusive range, or None when empty.
fn norm_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    };
    let mut end = if end < 0 {
        end.saturating_add(len)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

fn lrange(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(start) = int_arg(cx.reply, args[2]) else {
        return;
    };
    let Some(end) = int_arg(cx.reply, args[3]) else {
        return;
    };
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.get_read(args[1], now).map(|v| v.view()) {
        None => cx.reply.empty_array(),
        Some(ValueRef::List(l)) => match norm_range(start, end, l.len()) {
            None => cx.reply.empty_array(),
            Some((s, e)) => {
                let n = e - s + 1;
                cx.reply.array(n);
                for x in l.iter_from(s).take(n) {
                    bulk_entry(cx.reply, x);
                }
            }
        },
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

/// A Redis list index (negative from the tail) as a position, if in range.
fn norm_index(idx: i64, len: usize) -> Option<usize> {
    let i = if idx < 0 {
        (len as i64).checked_add(idx)?
    } else {
        idx
    };
    (i >= 0 && (i as u64) < len as u64).then_some(i as usize)
}

fn lindex(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.get_read(args[1], now).map(|v| v.view()) {
        None => cx.reply.null(),
        Some(ValueRef::List(l)) => {
            let Some(idx) = int_arg(cx.reply, args[2]) else {
                return;
            };
            match norm_index(idx, l.len()).and_then(|i| l.get(i)) {
                Some(e) => bulk_entry(cx.reply, e),
                None => cx.reply.null(),
            }
        }
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

fn lpos(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let mut rank: i64 = 1;
    let mut count: i64 = -1;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq_ic(args[j], "rank") && more > 0 {
            j += 1;
            let Some(r) = parse_i64(args[j]) else {
                cx.reply.error(ERR_NOT_INT);
                return;
            };
            // Redis 7.0 takes any long here, RANK LONG_MIN included (see `rank_min` below).
            if r == 0 {
                cx.reply.error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                );
                return;
            }
            rank = r;
        } else if eq_ic(args[j], "count") && more > 0 {
            j += 1;
            match parse_i64(args[j]).filter(|&c| c >= 0) {
                Some(c) => count = c,
                None => {
                    cx.reply.error("ERR COUNT can't be negative");
                    return;
                }
            }
        } else if eq_ic(args[j], "maxlen") && more > 0 {
            j += 1;
            match parse_i64(args[j]).filter(|&c| c >= 0) {
                Some(c) => maxlen = c,
                None => {
                    cx.reply.error("ERR MAXLEN can't be negative");
                    return;
                }
            }
        } else {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
        j += 1;
    }
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let l = match db.get_read(args[1], now).map(|v| v.view()) {
        None => {
            if count != -1 {
                cx.reply.empty_array();
            } else {
                cx.reply.null();
            }
            return;
        }
        Some(ValueRef::List(l)) => l,
        Some(_) => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
    };
    let needle = Needle::new(args[2]);
    let len = l.len();
    let limit = if maxlen == 0 {
        len
    } else {
        (maxlen as u64).min(len as u64) as usize
    };
    let from_tail = rank < 0;
    // Redis 7.0 negates the rank in a C long: LONG_MIN stays LONG_MIN, so `matches >= rank` holds
    // from the first match (as for RANK -1) and `matches - rank + 1 >= count` wraps negative, so
    // COUNT never stops the scan: every match from the tail (within MAXLEN). Redis 7.2 rejects
    // LONG_MIN instead; 7.0 is our reference. `unsigned_abs` keeps the magnitude (2^63) exact.
    let rank_min = rank == i64::MIN;
    let mut skip = if rank_min { 0 } else { rank.unsigned_abs() - 1 };
    let want = if count == 0 || rank_min {
        u64::MAX
    } else {
        count as u64
    };
    let handle = if count != -1 {
        Some(cx.reply.begin_array_deferred())
    } else {
        None
    };
    let mut matches = 0u64;
    let mut visit = |i: usize, e: Entry<'_>, reply: &mut Reply| -> bool {
        if e.matches(&needle) {
            if skip == 0 {
                reply.int(i as i64);
                matches += 1;
                if matches >= want || count == -1 {
                    return false;
                }
            } else {
                skip -= 1;
            }
        }
        true
    };
    if from_tail {
        for (k, e) in l.iter_rev().take(limit).enumerate() {
            if !visit(len - 1 - k, e, cx.reply) {
                break;
            }
        }
    } else {
        for (k, e) in l.iter().take(limit).enumerate() {
            if !visit(k, e, cx.reply) {
                break;
            }
        }
    }
    match handle {
        Some(h) => cx.reply.end_array_deferred(h, matches as usize),
        None => {
            if matches == 0 {
                cx.reply.null();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// In-place updates

fn lset(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let fill = fill_of(cx);
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(args[1], now) else {
        cx.reply.error(ERR_NO_KEY);
        return;
    };
    let Some(l) = db.at(pos).1.as_list() else {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    };
    let Some(idx) = int_arg(cx.reply, args[2]) else {
        return;
    };
    let Some(i) = norm_index(idx, l.len()) else {
        cx.reply.error("ERR index out of range");
        return;
    };
    if let Some(l) = db.at_mut(pos).as_list_mut() {
        l.set(i, args[3], fill);
    }
    ev::emit(ev::LIST, "lset", cx.db, args[1]);
    cx.reply.ok();
}

fn linsert(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let after = if eq_ic(args[2], "after") {
        true
    } else if eq_ic(args[2], "before") {
        false
    } else {
        cx.reply.error(ERR_SYNTAX);
        return;
    };
    let fill = fill_of(cx);
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(args[1], now) else {
        cx.reply.int(0);
        return;
    };
    let Some(l) = db.at(pos).1.as_list() else {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    };
    let pivot = Needle::new(args[3]);
    let Some(at) = l.iter().position(|e| e.matches(&pivot)) else {
        cx.reply.int(-1);
        return;
    };
    let Some(l) = db.at_mut(pos).as_list_mut() else {
        return;
    };
    l.insert(if after { at + 1 } else { at }, args[4], fill);
    cx.reply.int(l.len() as i64);
    ev::emit(ev::LIST, "linsert", cx.db, args[1]);
}

fn lrem(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(count) = int_arg(cx.reply, args[2]) else {
        return;
    };
    let fill = fill_of(cx);
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(args[1], now) else {
        cx.reply.int(0);
        return;
    };
    if db.at(pos).1.as_list().is_none() {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    }
    let needle = Needle::new(args[3]);
    let Some(l) = db.at_mut_quiet(pos).as_list_mut() else {
        return;
    };
    let removed = l.remove_matching(&needle, count, fill);
    let empty = l.is_empty();
    if removed > 0 {
        db.touch_key(args[1]);
        ev::emit(ev::LIST, "lrem", cx.db, args[1]);
        if empty {
            db.remove_at(pos);
            ev::emit(ev::GENERIC, "del", cx.db, args[1]);
        }
    }
    cx.reply.int(removed as i64);
}

fn ltrim(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(start) = int_arg(cx.reply, args[2]) else {
        return;
    };
    let Some(end) = int_arg(cx.reply, args[3]) else {
        return;
    };
    let fill = fill_of(cx);
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(args[1], now) else {
        cx.reply.ok();
        return;
    };
    if db.at(pos).1.as_list().is_none() {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    }
    let Some(l) = db.at_mut(pos).as_list_mut() else {
        return;
    };
    let len = l.len();
    match norm_range(start, end, len) {
        None => l.remove_range(0, len, fill),
        Some((s, e)) => {
            l.remove_range(e + 1, len - e - 1, fill);
            l.remove_range(0, s, fill);
        }
    }
    let empty = l.is_empty();
    ev::emit(ev::LIST, "ltrim", cx.db, args[1]);
    if empty {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", cx.db, args[1]);
    }
    cx.reply.ok();
}

// ---------------------------------------------------------------------------------------------
// LMOVE / RPOPLPUSH

enum MoveOutcome {
    /// The source does not exist (nil, or block for BLMOVE).
    Missing,
    /// Reply written (the moved element or WRONGTYPE).
    Done,
}

/// LMOVE with both keys in one db.
#[allow(clippy::too_many_arguments)]
fn lmove_in_db(
    db: &mut Db,
    src: &[u8],
    dst: &[u8],
    wf: End,
    wt: End,
    fill: Fill,
    now: u64,
    r: &mut Reply,
) -> MoveOutcome {
    match list_kind(db, src, now) {
        None => return MoveOutcome::Missing,
        Some(false) => {
            r.error(ERR_WRONGTYPE);
            return MoveOutcome::Done;
        }
        Some(true) => {}
    }
    if list_kind(db, dst, now) == Some(false) {
        r.error(ERR_WRONGTYPE);
        return MoveOutcome::Done;
    }
    let Some(l) = db.get_mut(src, now).and_then(|v| v.as_list_mut()) else {
        return MoveOutcome::Missing;
    };
    let Some(v) = pop_owned(l, wf) else {
        return MoveOutcome::Missing;
    };
    let emptied = if src == dst {
        push_end(l, wt, &v, fill);
        false
    } else {
        let emptied = drop_if_empty(db, src, now);
        push_create(db, dst, wt, &v, fill, now);
        emptied
    };
    move_events(db.index, src, dst, wf, wt, emptied);
    r.bulk(&v);
    MoveOutcome::Done
}

fn lmove<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let (Some(wf), Some(wt)) = (parse_end(args[3]), parse_end(args[4])) else {
            cx.reply.error(ERR_SYNTAX);
            return;
        };
        move_generic(cx, args[1], args[2], wf, wt, None).await;
    })
}

fn rpoplpush<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        move_generic(cx, args[1], args[2], End::Right, End::Left, None).await;
    })
}

fn blmove<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let (Some(wf), Some(wt)) = (parse_end(args[3]), parse_end(args[4])) else {
            cx.reply.error(ERR_SYNTAX);
            return;
        };
        let timeout = match parse_timeout(args[5]) {
            Ok(t) => t,
            Err(e) => {
                cx.reply.error(e);
                return;
            }
        };
        move_generic(cx, args[1], args[2], wf, wt, Some(timeout)).await;
    })
}

fn brpoplpush<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let timeout = match parse_timeout(args[3]) {
            Ok(t) => t,
            Err(e) => {
                cx.reply.error(e);
                return;
            }
        };
        move_generic(cx, args[1], args[2], End::Right, End::Left, Some(timeout)).await;
    })
}

/// Where an LMOVE got to.
enum Moved {
    Missing,
    WrongType,
    /// Popped from the source (emptied: deleted), not pushed yet (the destination is on
    /// another shard).
    Popped(Vec<u8>, bool),
    Done(Vec<u8>),
}

/// LMOVE family. `block`: Some(timeout) for BLMOVE/BRPOPLPUSH.
async fn move_generic(
    cx: &mut ConnCtx,
    src: &[u8],
    dst: &[u8],
    wf: End,
    wt: End,
    block: Option<Option<Duration>>,
) {
    let fill = conn_fill(cx);
    // The destination's type, then pop from the source, then push to the destination (one
    // message when both keys share a shard, a transaction otherwise).
    let (s, d, d2, s2) = (src.to_vec(), dst.to_vec(), dst.to_vec(), src.to_vec());
    let same_key = src == dst;
    let moved = cx
        .hops()
        .on_key(dst, move |c, ()| {
            let now = c.now;
            list_kind(c.db(), &d, now) == Some(false)
        })
        .on_key(src, move |c, dst_wrong| {
            let now = c.now;
            let db = c.db();
            match list_kind(db, &s, now) {
                None => return Moved::Missing,
                Some(false) => return Moved::WrongType,
                Some(true) if dst_wrong => return Moved::WrongType,
                Some(true) => {}
            }
            let Some(l) = db.get_mut(&s, now).and_then(|v| v.as_list_mut()) else {
                return Moved::Missing;
            };
            let Some(v) = pop_owned(l, wf) else {
                return Moved::Missing;
            };
            if same_key {
                push_end(l, wt, &v, fill);
                move_events(c.db, &s, &s, wf, wt, false);
                return Moved::Done(v);
            }
            let emptied = drop_if_empty(db, &s, now);
            Moved::Popped(v, emptied)
        })
        .on_key(dst, move |c, moved| match moved {
            Moved::Popped(v, emptied) => {
                let now = c.now;
                push_create(c.db(), &d2, wt, &v, fill, now);
                move_events(c.db, &s2, &d2, wf, wt, emptied);
                Moved::Done(v)
            }
            other => other,
        })
        .run()
        .await;
    let missing = match moved {
        Moved::Missing => true,
        Moved::WrongType => {
            cx.reply.error(ERR_WRONGTYPE);
            false
        }
        Moved::Done(v) | Moved::Popped(v, _) => {
            cx.reply.bulk(&v);
            false
        }
    };
    if !missing {
        return;
    }
    let Some(timeout) = block else {
        cx.reply.null();
        return;
    };
    if cx.in_exec() {
        cx.reply.null();
        return;
    }
    // With both keys on one shard the wake-up moves the element itself (atomically, as Redis
    // does); otherwise it pops, and the push follows here.
    let one_shard = cx.keys_on_one_shard();
    let serve = Arc::new(BMove {
        dst: dst.to_vec(),
        wf,
        wt,
        fill,
        same_shard: one_shard,
        ver: cx.reply.ver,
    });
    let Some(bytes) = serve_or_block(cx, &[src], serve, timeout).await else {
        cx.reply.null_array();
        return;
    };
    if one_shard {
        cx.reply.raw(&bytes);
        return;
    }
    let Some(v) = decode_bulk(&bytes).map(|v| v.to_vec()) else {
        cx.reply.raw(&bytes);
        return;
    };
    // Popped on the source shard by the wake-up: push it to the destination now, or back to
    // the source if the destination became something else meanwhile.
    let (d, s) = (dst.to_vec(), src.to_vec());
    let pushed = cx
        .hops()
        .on_key(dst, move |c, ()| {
            let now = c.now;
            let db = c.db();
            if list_kind(db, &d, now) == Some(false) {
                return Err(v);
            }
            push_create(db, &d, wt, &v, fill, now);
            ev::emit(ev::LIST, push_event(wt), c.db, &d);
            Ok(v)
        })
        .on_key(src, move |c, pushed| {
            if let Err(v) = &pushed {
                let now = c.now;
                let db = c.db();
                if list_kind(db, &s, now) != Some(false) {
                    push_create(db, &s, wf, v, fill, now);
                    ev::emit(ev::LIST, push_event(wf), c.db, &s);
                }
            }
            pushed
        })
        .run()
        .await;
    match pushed {
        Ok(v) => cx.reply.bulk(&v),
        Err(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

/// BLMOVE / BRPOPLPUSH waiter: serves from the source key.
struct BMove {
    dst: Vec<u8>,
    wf: End,
    wt: End,
    fill: Fill,
    same_shard: bool,
    ver: RespVersion,
}

impl Serve for BMove {
    fn ready(&self, db: &mut Db, key: &[u8], now: u64) -> bool {
        list_kind(db, key, now) == Some(true)
    }

    fn take(&self, db: &mut Db, key: &[u8], now: u64) -> Vec<u8> {
        let mut r = Reply::new(self.ver);
        if self.same_shard {
            if let MoveOutcome::Missing =
                lmove_in_db(db, key, &self.dst, self.wf, self.wt, self.fill, now, &mut r)
            {
                r.null_array();
            }
            return r.take();
        }
        let v = db
            .get_mut(key, now)
            .and_then(|v| v.as_list_mut())
            .and_then(|l| pop_owned(l, self.wf));
        let emptied = drop_if_empty(db, key, now);
        if v.is_some() {
            // The push follows on the destination's shard.
            ev::emit(ev::LIST, pop_event(self.wf), db.index, key);
            if emptied {
                ev::emit(ev::GENERIC, "del", db.index, key);
            }
        }
        match v {
            Some(v) => r.bulk(&v),
            None => r.null_array(),
        }
        r.take()
    }
}

// ---------------------------------------------------------------------------------------------
// Multi-key pops: BLPOP BRPOP LMPOP BLMPOP

/// How a pop from the first ready key is answered.
#[derive(Clone, Copy)]
enum PopStyle {
    /// BLPOP/BRPOP: `[key, element]`.
    One,
    /// LMPOP/BLMPOP: `[key, [elements...]]` with up to `count` elements.
    Many(u64),
}

/// Pops from `key` (a non-empty list) and writes the reply; deletes the emptied list.
fn pop_reply(db: &mut Db, key: &[u8], now: u64, end: End, style: PopStyle, r: &mut Reply) -> bool {
    let Some(pos) = db.find(key, now) else {
        return false;
    };
    if db.at(pos).1.as_list().is_none_or(|l| l.is_empty()) {
        return false;
    }
    let Some(l) = db.at_mut(pos).as_list_mut() else {
        return false;
    };
    r.array(2);
    r.bulk(key);
    let mut popped = 1;
    match style {
        PopStyle::One => {
            pop_to_reply(l, end, r);
        }
        PopStyle::Many(c) => {
            let n = (c.min(l.len() as u64)) as usize;
            popped = n;
            r.array(n);
            for _ in 0..n {
                pop_to_reply(l, end, r);
            }
        }
    }
    let empty = l.is_empty();
    ev::emit(ev::LIST, pop_event(end), db.index, key);
    if empty {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", db.index, key);
    }
    // Replicated as the non-blocking pop it was (Redis's rewrite of BLPOP, LMPOP...), from
    // this shard, which holds the key now (these commands declare `PROP_SELF`).
    if damselfly_core::engine::journal::here() {
        let cmd: &[u8] = if matches!(end, End::Left) {
            b"LPOP"
        } else {
            b"RPOP"
        };
        let resp = match style {
            PopStyle::One => damselfly_core::engine::journal::encode(&[cmd, key]),
            // (The count popped, as Redis propagates it.)
            PopStyle::Many(_) => {
                let c = popped.to_string();
                damselfly_core::engine::journal::encode(&[cmd, key, c.as_bytes()])
            }
        };
        damselfly_core::engine::journal::push(damselfly_core::engine::journal::Item::One(
            damselfly_core::engine::journal::Record { db: db.index, resp },
        ));
    }
    true
}

/// The non-blocking multi-key pop, in argument order: Some(reply bytes) when a key holds a
/// list (or another type: WRONGTYPE), None when no key exists.
async fn mpop_now(cx: &mut ConnCtx, keys: &[&[u8]], end: End, style: PopStyle) -> Option<Vec<u8>> {
    cx.hops()
        .first_of(
            keys,
            |c, k| {
                let now = c.now;
                list_kind(c.db(), k, now)
            },
            move |c, key, is_list| {
                if is_list {
                    let now = c.now;
                    let db = &mut c.shard.dbs[c.db];
                    if !pop_reply(db, key, now, end, style, c.reply) {
                        c.reply.null_array();
                    }
                } else {
                    c.reply.error(ERR_WRONGTYPE);
                }
                c.reply.take()
            },
        )
        .run()
        .await
}

/// BLPOP/BRPOP/BLMPOP waiter.
struct BPop {
    end: End,
    style: PopStyle,
    ver: RespVersion,
}

impl Serve for BPop {
    fn ready(&self, db: &mut Db, key: &[u8], now: u64) -> bool {
        list_kind(db, key, now) == Some(true)
    }

    fn take(&self, db: &mut Db, key: &[u8], now: u64) -> Vec<u8> {
        let mut r = Reply::new(self.ver);
        if !pop_reply(db, key, now, self.end, self.style, &mut r) {
            r.null_array();
        }
        r.take()
    }
}

/// The blocking multi-key pop after argument parsing.
async fn bpop_generic(
    cx: &mut ConnCtx,
    keys: &[&[u8]],
    end: End,
    style: PopStyle,
    timeout: Option<Duration>,
) {
    if let Some(bytes) = mpop_now(cx, keys, end, style).await {
        cx.reply.raw(&bytes);
        return;
    }
    if cx.in_exec() {
        cx.reply.null_array();
        return;
    }
    let serve = Arc::new(BPop {
        end,
        style,
        ver: cx.reply.ver,
    });
    match serve_or_block(cx, keys, serve, timeout).await {
        Some(bytes) => cx.reply.raw(&bytes),
        None => cx.reply.null_array(),
    }
}

fn blpop<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(bpop_cmd(cx, args, End::Left))
}

fn brpop<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(bpop_cmd(cx, args, End::Right))
}

async fn bpop_cmd(cx: &mut ConnCtx, args: &[&[u8]], end: End) {
    let n = args.len();
    let timeout = match parse_timeout(args[n - 1]) {
        Ok(t) => t,
        Err(e) => {
            cx.reply.error(e);
            return;
        }
    };
    bpop_generic(cx, &args[1..n - 1], end, PopStyle::One, timeout).await
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT n]` starting at `args[at]`.
fn parse_mpop(r: &mut Reply, args: &[&[u8]], at: usize) -> Option<(usize, End, u64)> {
    let numkeys = match parse_i64(args[at]) {
        Some(n) if n >= 1 => n as u64,
        _ => {
            r.error("ERR numkeys should be greater than 0");
            return None;
        }
    };
    let where_idx = (at as u64).saturating_add(numkeys).saturating_add(1);
    if where_idx >= args.len() as u64 {
        r.error(ERR_SYNTAX);
        return None;
    }
    let where_idx = where_idx as usize;
    let Some(end) = parse_end(args[where_idx]) else {
        r.error(ERR_SYNTAX);
        return None;
    };
    let mut count: Option<u64> = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if count.is_none() && eq_ic(args[j], "count") && more > 0 {
            j += 1;
            match parse_i64(args[j]) {
                Some(c) if c >= 1 => count = Some(c as u64),
                _ => {
                    r.error("ERR count should be greater than 0");
                    return None;
                }
            }
        } else {
            r.error(ERR_SYNTAX);
            return None;
        }
        j += 1;
    }
    Some((numkeys as usize, end, count.unwrap_or(1)))
}

fn lmpop<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let Some((n, end, count)) = parse_mpop(&mut cx.reply, args, 1) else {
            return;
        };
        match mpop_now(cx, &args[2..2 + n], end, PopStyle::Many(count)).await {
            Some(bytes) => cx.reply.raw(&bytes),
            None => cx.reply.null_array(),
        }
    })
}

fn blmpop<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        // Redis parses the timeout after the other arguments.
        let Some((n, end, count)) = parse_mpop(&mut cx.reply, args, 2) else {
            return;
        };
        let timeout = match parse_timeout(args[1]) {
            Ok(t) => t,
            Err(e) => {
                cx.reply.error(e);
                return;
            }
        };
        bpop_generic(cx, &args[3..3 + n], end, PopStyle::Many(count), timeout).await
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_like_redis() {
        assert_eq!(norm_range(0, -1, 3), Some((0, 2)));
        assert_eq!(norm_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(norm_range(2, 1, 3), None);
        assert_eq!(norm_range(3, 5, 3), None);
        assert_eq!(norm_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(norm_index(-1, 3), Some(2));
        assert_eq!(norm_index(-4, 3), None);
        assert_eq!(norm_index(i64::MIN, 3), None);
        assert_eq!(norm_index(3, 3), None);
    }

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout(b"0"), Ok(None));
        assert_eq!(parse_timeout(b"0.5"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(parse_timeout(b"-1"), Err("ERR timeout is negative"));
        assert_eq!(parse_timeout(b"inf"), Err("ERR timeout is negative"));
        assert_eq!(
            parse_timeout(b"abc"),
            Err("ERR timeout is not a float or out of range")
        );
        assert_eq!(decode_bulk(b"$3\r\nabc\r\n"), Some(&b"abc"[..]));
    }

    #[test]
    fn mpop_keys() {
        let keys = |name: &str| COMMANDS.iter().find(|c| c.name == name).unwrap().keys;
        let a: Vec<&[u8]> = vec![b"lmpop", b"2", b"a", b"b", b"left"];
        assert_eq!(keys("lmpop").positions(&a), vec![2, 3]);
        let a: Vec<&[u8]> = vec![b"lmpop", b"9", b"a", b"left"];
        assert_eq!(keys("lmpop").positions(&a), vec![2, 3]);
        let a: Vec<&[u8]> = vec![b"blmpop", b"0", b"1", b"a", b"left"];
        assert_eq!(keys("blmpop").positions(&a), vec![3]);
    }
}
