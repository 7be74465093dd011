//! String commands: GET SET SETNX SETEX PSETEX GETEX GETDEL GETSET MGET MSET MSETNX APPEND STRLEN
//! GETRANGE SUBSTR SETRANGE INCR DECR INCRBY DECRBY INCRBYFLOAT LCS.
//!
//! Semantics, replies and error texts follow Redis 7.0 `t_string.c`. Single-key commands are
//! `Handler::Shard` (they run on the thread owning the key); MGET/MSET/MSETNX/LCS coordinate
//! several shards from the connection's thread.

use damselfly_core::commands::propagate;
use std::os::raw::{c_char, c_int};

use damselfly_dash::Pos;

use damselfly_core::commands::coordinator::{Hops, ShardPart};
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_types::compact::{IntBuf, MAX_LEN};
use damselfly_types::{CompactStr, Value, ValueMut, ValueRef};

const G: Group = Group::String;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("get", 2, READONLY | FAST, range(1, 1, 1), Shard(get))
        .doc(G, "1.0.0", "Returns the string value of a key."),
    cmd("set", -3, WRITE | DENYOOM, range(1, 1, 1), Shard(set)).propagate(propagate::set)
        .doc(G, "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    cmd("setnx", 3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(setnx))
        .doc(G, "1.0.0", "Set the string value of a key only when the key doesn't exist."),
    cmd("setex", 4, WRITE | DENYOOM, range(1, 1, 1), Shard(setex)).propagate(propagate::setex)
        .doc(G, "1.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist."),
    cmd("psetex", 4, WRITE | DENYOOM, range(1, 1, 1), Shard(psetex)).propagate(propagate::setex)
        .doc(G, "1.0.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist."),
    cmd("getex", -2, WRITE | FAST, range(1, 1, 1), Shard(getex)).propagate(propagate::getex)
        .doc(G, "1.0.0", "Returns the string value of a key after setting its expiration time."),
    cmd("getdel", 2, WRITE | FAST, range(1, 1, 1), Shard(getdel)).propagate(propagate::getdel)
        .doc(G, "1.0.0", "Returns the string value of a key after deleting the key."),
    cmd("getset", 3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(getset)).propagate(propagate::getset)
        .doc(G, "1.0.0", "Returns the previous string value of a key after setting it to a new value."),
    cmd("mget", -2, READONLY | FAST, range(1, -1, 1), Conn(mget)).one_key(mget_one)
        .doc(G, "1.0.0", "Atomically returns the string values of one or more keys."),
    cmd("mset", -3, WRITE | DENYOOM, range(1, -1, 2), Conn(mset))
        .doc(G, "1.0.0", "Atomically creates or modifies the string values of one or more keys."),
    cmd("msetnx", -3, WRITE | DENYOOM, range(1, -1, 2), Conn(msetnx))
        .doc(G, "1.0.0", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
    cmd("append", 3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(append))
        .doc(G, "1.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist."),
    cmd("strlen", 2, READONLY | FAST, range(1, 1, 1), Shard(strlen))
        .doc(G, "1.0.0", "Returns the length of a string value."),
    cmd("getrange", 4, READONLY, range(1, 1, 1), Shard(getrange))
        .doc(G, "1.0.0", "Returns a substring of the string stored at a key."),
    cmd("substr", 4, READONLY, range(1, 1, 1), Shard(getrange))
        .doc(G, "1.0.0", "Returns a substring from a string value."),
    cmd("setrange", 4, WRITE | DENYOOM, range(1, 1, 1), Shard(setrange))
        .doc(G, "1.0.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."),
    cmd("incr", 2, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(incr))
        .doc(G, "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    cmd("decr", 2, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(decr))
        .doc(G, "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    cmd("incrby", 3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(incrby))
        .doc(G, "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    cmd("decrby", 3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(decrby))
        .doc(G, "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
    cmd("incrbyfloat", 3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(incrbyfloat)).propagate(propagate::incrbyfloat)
        .doc(G, "1.0.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    cmd("lcs", -3, READONLY, range(1, 2, 1), Conn(lcs))
        .doc(G, "1.0.0", "Finds the longest common substring."),
];

// ---------------------------------------------------------------------------------------------
// Shared helpers (also used by bitmap.rs)
// ---------------------------------------------------------------------------------------------

/// Redis compares option words as C strings: an embedded NUL ends the word.
#[inline]
pub(super) fn cstr(a: &[u8]) -> &[u8] {
    match a.iter().position(|&c| c == 0) {
        Some(i) => &a[..i],
        None => a,
    }
}

/// Case-insensitive option match with C-string semantics (`strcasecmp`).
#[inline]
pub(super) fn opt_is(a: &[u8], name: &str) -> bool {
    eq_ic(cstr(a), name)
}

/// Redis `checkStringLength`: the resulting string (`size + append` bytes) must fit in
/// proto-max-bulk-len (and in what a `CompactStr` can hold).
pub(super) fn check_string_length(cx: &mut CmdCtx<'_>, size: u64, append: u64) -> bool {
    let max = cx.shared.config.proto_max_bulk_len().min(MAX_LEN as u64);
    match size.checked_add(append) {
        Some(total) if total <= max => true,
        _ => {
            cx.reply
                .error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
            false
        }
    }
}

/// Stores `value` at `key`, given the result of a previous `find` (`pos`).
#[inline]
fn store(db: &mut Db, pos: Option<Pos>, key: &[u8], value: Value, ttl: TtlMode) {
    match pos {
        Some(pos) => {
            *db.at_mut(pos) = value;
            match ttl {
                TtlMode::Keep => {}
                TtlMode::Clear => db.set_expire(pos, None),
                TtlMode::At(at) => db.set_expire(pos, Some(at)),
            }
        }
        None => {
            db.insert_new(key, value, ttl);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// GET / SET family
// ---------------------------------------------------------------------------------------------

fn get(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.get_read(args[1], now).map(|v| v.view()) {
        None => cx.reply.null(),
        Some(ValueRef::Str(s)) => {
            let mut b: IntBuf = [0u8; 20];
            cx.reply.bulk(s.bytes(&mut b));
        }
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

const F_NX: u32 = 1;
const F_XX: u32 = 1 << 1;
const F_GET: u32 = 1 << 2;
const F_KEEPTTL: u32 = 1 << 3;
const F_PERSIST: u32 = 1 << 4;
const F_EX: u32 = 1 << 5;
const F_PX: u32 = 1 << 6;
const F_EXAT: u32 = 1 << 7;
const F_PXAT: u32 = 1 << 8;
const F_ANY_EXPIRE: u32 = F_EX | F_PX | F_EXAT | F_PXAT;

/// Redis `parseExtendedStringArgumentsOrReply` for SET (`is_set`) and GETEX. Returns the flags
/// and the expire argument, or None for a syntax error. Conflicting options are syntax errors;
/// repeating the same one is allowed (the last value wins).
fn parse_ext<'a>(args: &[&'a [u8]], start: usize, is_set: bool) -> Option<(u32, Option<&'a [u8]>)> {
    let mut flags = 0u32;
    let mut expire = None;
    let mut j = start;
    while j < args.len() {
        let opt = cstr(args[j]);
        let has_next = j + 1 < args.len();
        let up = |c: u8| c.to_ascii_uppercase();
        let word2 = |a: u8, b: u8| opt.len() == 2 && up(opt[0]) == a && up(opt[1]) == b;
        if is_set && word2(b'N', b'X') && flags & F_XX == 0 {
            flags |= F_NX;
        } else if is_set && word2(b'X', b'X') && flags & F_NX == 0 {
            flags |= F_XX;
        } else if is_set && eq_ic(opt, "get") {
            flags |= F_GET;
        } else if is_set && eq_ic(opt, "keepttl") && flags & (F_PERSIST | F_ANY_EXPIRE) == 0 {
            flags |= F_KEEPTTL;
        } else if !is_set && eq_ic(opt, "persist") && flags & (F_ANY_EXPIRE | F_KEEPTTL) == 0 {
            flags |= F_PERSIST;
        } else if word2(b'E', b'X')
            && flags & (F_KEEPTTL | F_PERSIST | F_EXAT | F_PX | F_PXAT) == 0
            && has_next
        {
            flags |= F_EX;
            expire = Some(args[j + 1]);
            j += 1;
        } else if word2(b'P', b'X')
            && flags & (F_KEEPTTL | F_PERSIST | F_EX | F_EXAT | F_PXAT) == 0
            && has_next
        {
            flags |= F_PX;
            expire = Some(args[j + 1]);
            j += 1;
        } else if eq_ic(opt, "exat")
            && flags & (F_KEEPTTL | F_PERSIST | F_EX | F_PX | F_PXAT) == 0
            && has_next
        {
            flags |= F_EXAT;
            expire = Some(args[j + 1]);
            j += 1;
        } else if eq_ic(opt, "pxat")
            && flags & (F_KEEPTTL | F_PERSIST | F_EX | F_EXAT | F_PX) == 0
            && has_next
        {
            flags |= F_PXAT;
            expire = Some(args[j + 1]);
            j += 1;
        } else {
            return None;
        }
        j += 1;
    }
    Some((flags, expire))
}

/// Redis `getExpireMillisecondsOrReply`: the absolute deadline in unix ms, or an error reply.
fn expire_ms(cx: &mut CmdCtx<'_>, arg: &[u8], flags: u32, cmd: &str) -> Option<u64> {
    let v = int_arg(cx.reply, arg)?;
    let seconds = flags & (F_EX | F_EXAT) != 0;
    let relative = flags & (F_EX | F_PX) != 0;
    let ms = if v <= 0 || (seconds && v > i64::MAX / 1000) {
        None
    } else {
        let ms = if seconds { v * 1000 } else { v };
        if relative {
            ms.checked_add(cx.now as i64)
        } else {
            Some(ms)
        }
    };
    match ms {
        Some(ms) if ms > 0 => Some(ms as u64),
        _ => {
            cx.reply
                .error(&format!("ERR invalid expire time in '{cmd}' command"));
            None
        }
    }
}

/// What SET-like commands reply when they set, or when NX/XX stops them.
#[derive(Clone, Copy)]
enum SetStyle {
    /// SET / SETEX / PSETEX: `+OK`, or nil when NX/XX aborts.
    Ok,
    /// SETNX: `:1` / `:0`.
    Int,
}

/// Redis `setGenericCommand` after the expire has been validated.
fn set_generic(
    cx: &mut CmdCtx<'_>,
    key: &[u8],
    val: &[u8],
    flags: u32,
    at: Option<u64>,
    style: SetStyle,
) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let get = flags & F_GET != 0;
    if get {
        match db.get_read(key, now).map(|v| v.view()) {
            None => cx.reply.null(),
            Some(ValueRef::Str(s)) => {
                let mut b: IntBuf = [0u8; 20];
                cx.reply.bulk(s.bytes(&mut b));
            }
            Some(_) => {
                cx.reply.error(ERR_WRONGTYPE);
                return;
            }
        }
    }
    let pos = db.find(key, now);
    if (flags & F_NX != 0 && pos.is_some()) || (flags & F_XX != 0 && pos.is_none()) {
        if !get {
            match style {
                SetStyle::Ok => cx.reply.null(),
                SetStyle::Int => cx.reply.int(0),
            }
        }
        return;
    }
    let ttl = match at {
        Some(at) => TtlMode::At(at),
        None if flags & F_KEEPTTL != 0 => TtlMode::Keep,
        None => TtlMode::Clear,
    };
    // A deadline already in the past is stored as is: the key is gone on its next access, like
    // Redis 7.0's setExpire with a past time.
    store(db, pos, key, Value::str(CompactStr::from_value(val)), ttl);
    ev::emit(ev::STRING, "set", cx.db, key);
    if at.is_some() {
        ev::emit(ev::GENERIC, "expire", cx.db, key);
    }
    if !get {
        match style {
            SetStyle::Ok => cx.reply.ok(),
            SetStyle::Int => cx.reply.int(1),
        }
    }
}

fn set(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some((flags, expire)) = parse_ext(args, 3, true) else {
        cx.reply.error(ERR_SYNTAX);
        return;
    };
    let at = match expire {
        Some(e) => match expire_ms(cx, e, flags, "set") {
            Some(at) => Some(at),
            None => return,
        },
        None => None,
    };
    set_generic(cx, args[1], args[2], flags, at, SetStyle::Ok);
}

fn setnx(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    set_generic(cx, args[1], args[2], F_NX, None, SetStyle::Int);
}

fn setex(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if let Some(at) = expire_ms(cx, args[2], F_EX, "setex") {
        set_generic(cx, args[1], args[3], F_EX, Some(at), SetStyle::Ok);
    }
}

fn psetex(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if let Some(at) = expire_ms(cx, args[2], F_PX, "psetex") {
        set_generic(cx, args[1], args[3], F_PX, Some(at), SetStyle::Ok);
    }
}

fn getex(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some((flags, expire)) = parse_ext(args, 2, false) else {
        cx.reply.error(ERR_SYNTAX);
        return;
    };
    let now = cx.now;
    let Some(pos) = cx.shard.dbs[cx.db].find_read(args[1], now) else {
        cx.reply.null();
        return;
    };
    if !cx.shard.dbs[cx.db].at(pos).1.is_str() {
        cx.reply.error(ERR_WRONGTYPE);
        return;
    }
    let at = match expire {
        Some(e) => match expire_ms(cx, e, flags, "getex") {
            Some(at) => Some(at),
            None => return,
        },
        None => None,
    };
    let db = &mut cx.shard.dbs[cx.db];
    if let Some(s) = db.at(pos).1.as_str() {
        let mut b: IntBuf = [0u8; 20];
        cx.reply.bulk(s.bytes(&mut b));
    }
    match at {
        Some(at) if flags & (F_EXAT | F_PXAT) != 0 && at <= now => {
            db.remove_at(pos);
            ev::emit(ev::GENERIC, "del", cx.db, args[1]);
        }
        Some(at) => {
            db.set_expire(pos, Some(at));
            ev::emit(ev::GENERIC, "expire", cx.db, args[1]);
        }
        None if flags & F_PERSIST != 0 && db.expire_at(pos).is_some() => {
            db.set_expire(pos, None);
            ev::emit(ev::GENERIC, "persist", cx.db, args[1]);
        }
        None => {}
    }
}

fn getdel(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find_read(args[1], now) else {
        cx.reply.null();
        return;
    };
    match db.at(pos).1.view() {
        ValueRef::Str(s) => {
            let mut b: IntBuf = [0u8; 20];
            cx.reply.bulk(s.bytes(&mut b));
        }
        _ => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
    }
    db.remove_at(pos);
    ev::emit(ev::GENERIC, "del", cx.db, args[1]);
}

fn getset(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    set_generic(cx, args[1], args[2], F_GET, None, SetStyle::Ok);
}

// ---------------------------------------------------------------------------------------------
// Multi-key: MGET MSET MSETNX
// ---------------------------------------------------------------------------------------------

/// MGET of one key (`CommandSpec::one_key`): an array of one reply.
fn mget_one(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    c.reply.array(1);
    mget_value(c, args[1]);
}

/// One key's MGET reply: its string, or nil (missing, or another type).
fn mget_value(c: &mut CmdCtx<'_>, k: &[u8]) {
    let now = c.now;
    match c.shard.dbs[c.db].get_read(k, now).map(|v| v.view()) {
        Some(ValueRef::Str(s)) => {
            let mut b: IntBuf = [0u8; 20];
            c.reply.bulk(s.bytes(&mut b));
        }
        _ => c.reply.null(),
    }
}

fn mget<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        // Each shard encodes its keys' replies into one buffer and says where each one ends;
        // the coordinator stitches them together in argument order.
        let parts = cx
            .hops()
            .per_shard(args, |c, keys, ()| {
                let mut ends = Vec::with_capacity(keys.len());
                for k in keys {
                    mget_value(c, k);
                    ends.push(c.reply.len());
                }
                (c.reply.take(), ends)
            })
            .run()
            .await;
        let n = args.len() - 1;
        let mut slot: Vec<(usize, usize)> = vec![(0, 0); n];
        for (pi, p) in parts.iter().enumerate() {
            for (i, &g) in p.groups.iter().enumerate() {
                slot[g] = (pi, i);
            }
        }
        cx.reply.array(n);
        for &(pi, i) in &slot {
            let (buf, ends) = &parts[pi].result;
            let start = if i == 0 { 0 } else { ends[i - 1] };
            cx.reply.raw(&buf[start..ends[i]]);
        }
    })
}

fn mset_arity(cx: &mut ConnCtx, args: &[&[u8]], name: &str) -> bool {
    if args.len() & 1 == 0 {
        cx.reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return false;
    }
    true
}

fn mset_pairs(c: &mut CmdCtx<'_>, kv: &[&[u8]]) {
    let now = c.now;
    let dbi = c.db;
    let db = c.db();
    for p in kv.chunks_exact(2) {
        db.set(
            p[0],
            Value::str(CompactStr::from_value(p[1])),
            TtlMode::Clear,
            now,
        );
        ev::emit(ev::STRING, "set", dbi, p[0]);
    }
}

fn mset<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if !mset_arity(cx, args, "mset") {
            return;
        }
        cx.hops()
            .per_shard(args, |c, kv, ()| mset_pairs(c, kv))
            .run()
            .await;
        cx.reply.ok();
    })
}

fn msetnx<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if !mset_arity(cx, args, "msetnx") {
            return;
        }
        // Check every key's shard, then set them all if none exists (on one shard: one
        // message; across shards: one transaction, so nobody slips in between).
        let parts = cx
            .hops()
            .per_shard(args, |c, kv, ()| {
                let now = c.now;
                let db = c.db();
                kv.chunks_exact(2).any(|p| db.exists(p[0], now))
            })
            .map(|parts| !parts.iter().any(|p| p.result))
            .per_shard(args, |c, kv, free| {
                if free {
                    mset_pairs(c, kv);
                }
                free
            })
            .run()
            .await;
        let set = parts.first().is_some_and(|p| p.result);
        cx.reply.int(set as i64);
    })
}

// ---------------------------------------------------------------------------------------------
// APPEND STRLEN GETRANGE SETRANGE
// ---------------------------------------------------------------------------------------------

fn append(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (key, add) = (args[1], args[2]);
    let now = cx.now;
    let Some(pos) = cx.shard.dbs[cx.db].find(key, now) else {
        cx.shard.dbs[cx.db].insert_new(
            key,
            Value::str(CompactStr::from_value(add)),
            TtlMode::Clear,
        );
        ev::emit(ev::STRING, "append", cx.db, key);
        cx.reply.int(add.len() as i64);
        return;
    };
    let old = match cx.shard.dbs[cx.db].at(pos).1.view() {
        ValueRef::Str(s) => s.len(),
        _ => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
    };
    if !check_string_length(cx, old as u64, add.len() as u64) {
        return;
    }
    let total = old + add.len();
    if let Some(s) = cx.shard.dbs[cx.db].at_mut(pos).as_str_mut() {
        let b = s.make_raw_mut(total);
        b[old..total].copy_from_slice(add);
    }
    ev::emit(ev::STRING, "append", cx.db, key);
    cx.reply.int(total as i64);
}

fn strlen(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    match cx.shard.dbs[cx.db].get_read(args[1], now).map(|v| v.view()) {
        None => cx.reply.int(0),
        Some(ValueRef::Str(s)) => cx.reply.int(s.len() as i64),
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

/// GETRANGE's index arithmetic (Redis 7.0): the byte range `[start, end]` of a string of
/// `len` bytes, or None for an empty result.
fn range_of(mut start: i64, mut end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    if start < 0 && end < 0 && start > end {
        return None;
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

fn getrange(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(start) = int_arg(cx.reply, args[2]) else {
        return;
    };
    let Some(end) = int_arg(cx.reply, args[3]) else {
        return;
    };
    let now = cx.now;
    match cx.shard.dbs[cx.db].get_read(args[1], now).map(|v| v.view()) {
        None => cx.reply.bulk(b""),
        Some(ValueRef::Str(s)) => {
            let mut b: IntBuf = [0u8; 20];
            let bytes = s.bytes(&mut b);
            match range_of(start, end, bytes.len()) {
                Some((s, e)) => cx.reply.bulk(&bytes[s..=e]),
                None => cx.reply.bulk(b""),
            }
        }
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

fn setrange(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (key, val) = (args[1], args[3]);
    let Some(offset) = int_arg(cx.reply, args[2]) else {
        return;
    };
    if offset < 0 {
        cx.reply.error("ERR offset is out of range");
        return;
    }
    let offset = offset as u64;
    let now = cx.now;
    let pos = cx.shard.dbs[cx.db].find(key, now);
    match pos {
        None => {
            if val.is_empty() {
                cx.reply.int(0);
                return;
            }
            if !check_string_length(cx, offset, val.len() as u64) {
                return;
            }
            let total = offset as usize + val.len();
            let mut s = CompactStr::empty();
            s.make_raw_mut(total)[offset as usize..].copy_from_slice(val);
            cx.shard.dbs[cx.db].insert_new(key, Value::str(s), TtlMode::Clear);
            ev::emit(ev::STRING, "setrange", cx.db, key);
            cx.reply.int(total as i64);
        }
        Some(pos) => {
            let old = match cx.shard.dbs[cx.db].at(pos).1.view() {
                ValueRef::Str(s) => s.len(),
                _ => {
                    cx.reply.error(ERR_WRONGTYPE);
                    return;
                }
            };
            if val.is_empty() {
                cx.reply.int(old as i64);
                return;
            }
            if !check_string_length(cx, offset, val.len() as u64) {
                return;
            }
            let end = offset as usize + val.len();
            if let Some(s) = cx.shard.dbs[cx.db].at_mut(pos).as_str_mut() {
                let b = s.make_raw_mut(end);
                b[offset as usize..end].copy_from_slice(val);
                let len = b.len();
                cx.reply.int(len as i64);
            }
            ev::emit(ev::STRING, "setrange", cx.db, key);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// INCR family
// ---------------------------------------------------------------------------------------------

fn incr_decr(cx: &mut CmdCtx<'_>, key: &[u8], by: i64) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(key, now) else {
        db.insert_new(key, Value::str(CompactStr::from_int(by)), TtlMode::Clear);
        ev::emit(ev::STRING, "incrby", cx.db, key);
        cx.reply.int(by);
        return;
    };
    // Quiet: errors leave the key (and WATCH) untouched.
    match db.at_mut_quiet(pos).view_mut() {
        ValueMut::Str(s) => {
            // Fast path: int-encoded values are never reparsed.
            let cur = match s.as_int() {
                Some(v) => v,
                None => match s.raw_bytes().and_then(parse_i64) {
                    Some(v) => v,
                    None => {
                        cx.reply.error(ERR_NOT_INT);
                        return;
                    }
                },
            };
            match cur.checked_add(by) {
                Some(v) => {
                    *s = CompactStr::from_int(v);
                    db.touch_key(key);
                    ev::emit(ev::STRING, "incrby", cx.db, key);
                    cx.reply.int(v);
                }
                None => cx.reply.error(ERR_OVERFLOW),
            }
        }
        _ => cx.reply.error(ERR_WRONGTYPE),
    }
}

fn incr(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    incr_decr(cx, args[1], 1);
}

fn decr(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    incr_decr(cx, args[1], -1);
}

fn incrby(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if let Some(by) = int_arg(cx.reply, args[2]) {
        incr_decr(cx, args[1], by);
    }
}

fn decrby(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(by) = int_arg(cx.reply, args[2]) else {
        return;
    };
    if by == i64::MIN {
        cx.reply.error("ERR decrement would overflow");
        return;
    }
    incr_decr(cx, args[1], -by);
}

extern "C" {
    fn dfly_incrbyfloat(
        cur: *const c_char,
        cur_len: usize,
        incr: *const c_char,
        incr_len: usize,
        out: *mut c_char,
        out_cap: usize,
        out_len: *mut usize,
    ) -> c_int;
}

/// Redis's MAX_LONG_DOUBLE_CHARS (size of the formatting buffer in csrc/ldouble.c).
const LD_MAX_CHARS: usize = 5 * 1024;

/// Error of [`incr_by_float`].
#[derive(Debug, PartialEq, Eq)]
pub enum FloatIncrError {
    NotFloat,
    NanOrInf,
}

/// `cur + incr` computed in C `long double` and formatted exactly like Redis's INCRBYFLOAT
/// (`%.17Lf`, trailing zeros stripped). `cur` is None for a missing key.
pub fn incr_by_float(cur: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, FloatIncrError> {
    let mut out = vec![0u8; LD_MAX_CHARS];
    let mut out_len = 0usize;
    let (cp, cl) = match cur {
        Some(c) => (c.as_ptr() as *const c_char, c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: every pointer/length pair describes a live buffer; the C side reads at most `len`
    // bytes of the inputs and writes at most `out.len()` bytes into `out`.
    let rc = unsafe {
        dfly_incrbyfloat(
            cp,
            cl,
            incr.as_ptr() as *const c_char,
            incr.len(),
            out.as_mut_ptr() as *mut c_char,
            out.len(),
            &mut out_len,
        )
    };
    match rc {
        0 => {
            out.truncate(out_len.min(LD_MAX_CHARS));
            Ok(out)
        }
        3 => Err(FloatIncrError::NanOrInf),
        _ => Err(FloatIncrError::NotFloat),
    }
}

fn incrbyfloat(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let pos = db.find(args[1], now);
    let result = match pos {
        None => incr_by_float(None, args[2]),
        Some(pos) => match db.at(pos).1.view() {
            ValueRef::Str(s) => {
                let mut b: IntBuf = [0u8; 20];
                incr_by_float(Some(s.bytes(&mut b)), args[2])
            }
            _ => {
                cx.reply.error(ERR_WRONGTYPE);
                return;
            }
        },
    };
    match result {
        Ok(v) => {
            // Redis stores the formatted text (embstr/raw, never int-encoded).
            store(
                db,
                pos,
                args[1],
                Value::str(CompactStr::from_bytes(&v)),
                TtlMode::Keep,
            );
            ev::emit(ev::STRING, "incrbyfloat", cx.db, args[1]);
            cx.reply.bulk(&v);
        }
        Err(FloatIncrError::NotFloat) => cx.reply.error(ERR_NOT_FLOAT),
        Err(FloatIncrError::NanOrInf) => cx
            .reply
            .error("ERR increment would produce NaN or Infinity"),
    }
}

// ---------------------------------------------------------------------------------------------
// LCS
// ---------------------------------------------------------------------------------------------

/// Value of a key read for a multi-shard command: missing, a string's bytes, or another type.
pub(super) enum ReadStr {
    Missing,
    Str(Vec<u8>),
    WrongType,
}

/// Adds a step reading the string values of `keys` on their shards (counting keyspace
/// hits/misses); `in_order` puts them back in argument order.
pub(super) fn read_strings<'c>(
    hops: Hops<'c, ()>,
    keys: &'c [&'c [u8]],
) -> Hops<'c, Vec<ShardPart<Vec<ReadStr>>>> {
    hops.per_shard_of(keys, 1, |c, ks, ()| {
        let now = c.now;
        let db = c.db();
        ks.iter()
            .map(|k| match db.get_read(k, now).map(|v| v.view()) {
                None => ReadStr::Missing,
                Some(ValueRef::Str(s)) => ReadStr::Str(s.to_vec()),
                Some(_) => ReadStr::WrongType,
            })
            .collect::<Vec<_>>()
    })
}

/// The values `read_strings` read, in argument order.
pub(super) fn in_order(parts: Vec<ShardPart<Vec<ReadStr>>>, n: usize) -> Vec<ReadStr> {
    let mut out: Vec<ReadStr> = (0..n).map(|_| ReadStr::Missing).collect();
    for p in parts {
        for (g, v) in p.groups.into_iter().zip(p.result) {
            out[g] = v;
        }
    }
    out
}

fn lcs<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let vals = in_order(read_strings(cx.hops(), &args[1..3]).run().await, 2);
        let mut it = vals.into_iter();
        let (a, b) = match (it.next(), it.next()) {
            (Some(a), Some(b)) => (a, b),
            _ => return,
        };
        let (a, b) = match (a, b) {
            (ReadStr::WrongType, _) | (_, ReadStr::WrongType) => {
                cx.reply
                    .error("ERR The specified keys must contain string values");
                return;
            }
            (a, b) => {
                let v = |r: ReadStr| match r {
                    ReadStr::Str(v) => v,
                    _ => Vec::new(),
                };
                (v(a), v(b))
            }
        };
        let mut getidx = false;
        let mut getlen = false;
        let mut withmatchlen = false;
        let mut minmatchlen: i64 = 0;
        let mut j = 3;
        while j < args.len() {
            let opt = args[j];
            let more = args.len() - 1 - j;
            if opt_is(opt, "idx") {
                getidx = true;
            } else if opt_is(opt, "len") {
                getlen = true;
            } else if opt_is(opt, "withmatchlen") {
                withmatchlen = true;
            } else if opt_is(opt, "minmatchlen") && more > 0 {
                let Some(v) = int_arg(&mut cx.reply, args[j + 1]) else {
                    return;
                };
                minmatchlen = v.max(0);
                j += 1;
            } else {
                cx.reply.error(ERR_SYNTAX);
                return;
            }
            j += 1;
        }
        if getidx && getlen {
            cx.reply
                .error("ERR If you want both the length and indexes, please just use IDX.");
            return;
        }
        if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
            cx.reply.error("ERR String too long for LCS");
            return;
        }
        let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
        let bytes = cells.saturating_mul(4);
        if bytes > cx.shared().config.proto_max_bulk_len() {
            cx.reply.error(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            );
            return;
        }
        let table = LcsTable::build(&a, &b);
        let mut out = LcsOut {
            reply: &mut cx.reply,
            getidx,
            withmatchlen,
            minmatchlen: minmatchlen as u64,
        };
        out.emit(&table, &a, &b, getlen);
    })
}

/// The dynamic-programming table of LCS lengths: `at(i, j)` = LCS length of `a[..i]`, `b[..j]`.
struct LcsTable {
    cells: Vec<u32>,
    cols: usize,
}

impl LcsTable {
    fn build(a: &[u8], b: &[u8]) -> Self {
        let cols = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * cols];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * cols + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * cols + j - 1] + 1
                } else {
                    cells[(i - 1) * cols + j].max(cells[i * cols + j - 1])
                };
            }
        }
        LcsTable { cells, cols }
    }

    #[inline]
    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.cols + j]
    }
}

struct LcsOut<'r> {
    reply: &'r mut damselfly_protocol::Reply,
    getidx: bool,
    withmatchlen: bool,
    minmatchlen: u64,
}

impl LcsOut<'_> {
    /// Walks the table back from the end like Redis's lcsCommand, collecting the LCS string and
    /// the matching ranges (emitted from the end of the strings towards the start).
    fn emit(&mut self, t: &LcsTable, a: &[u8], b: &[u8], getlen: bool) {
        let (alen, blen) = (a.len(), b.len());
        let total = t.at(alen, blen) as usize;
        let compute = self.getidx || !getlen;
        let mut result = vec![0u8; if compute { total } else { 0 }];
        let mut idx = total;
        let mut deferred = None;
        if self.getidx {
            self.reply.map(2);
            self.reply.bulk_str("matches");
            deferred = Some(self.reply.begin_array_deferred());
        }
        let mut arraylen = 0usize;
        // `arange_start == alen` means "no range open".
        let (mut arange_start, mut arange_end, mut brange_start, mut brange_end) = (alen, 0, 0, 0);
        let (mut i, mut j) = (alen, blen);
        while compute && i > 0 && j > 0 {
            let mut emit_range = false;
            if a[i - 1] == b[j - 1] {
                result[idx - 1] = a[i - 1];
                if arange_start == alen {
                    arange_start = i - 1;
                    arange_end = i - 1;
                    brange_start = j - 1;
                    brange_end = j - 1;
                } else if arange_start == i && brange_start == j {
                    arange_start -= 1;
                    brange_start -= 1;
                } else {
                    emit_range = true;
                }
                if arange_start == 0 || brange_start == 0 {
                    emit_range = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if t.at(i - 1, j) > t.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                if arange_start != alen {
                    emit_range = true;
                }
            }
            if emit_range {
                // A range is open whenever one is emitted, so arange_start <= arange_end.
                let match_len = (arange_end - arange_start + 1) as u64;
                if (self.minmatchlen == 0 || match_len >= self.minmatchlen) && self.getidx {
                    self.reply.array(2 + self.withmatchlen as usize);
                    self.reply.array(2);
                    self.reply.int(arange_start as i64);
                    self.reply.int(arange_end as i64);
                    self.reply.array(2);
                    self.reply.int(brange_start as i64);
                    self.reply.int(brange_end as i64);
                    if self.withmatchlen {
                        self.reply.int(match_len as i64);
                    }
                    arraylen += 1;
                }
                arange_start = alen;
            }
        }
        if let Some(h) = deferred {
            self.reply.end_array_deferred(h, arraylen);
            self.reply.bulk_str("len");
            self.reply.int(total as i64);
        } else if getlen {
            self.reply.int(total as i64);
        } else {
            self.reply.bulk(&result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(cur: Option<&str>, incr: &str) -> Result<String, FloatIncrError> {
        incr_by_float(cur.map(|c| c.as_bytes()), incr.as_bytes())
            .map(|v| String::from_utf8(v).unwrap_or_default())
    }

    #[test]
    fn incrbyfloat_formatting() {
        assert_eq!(f(Some("10.5"), "0.1").unwrap(), "10.6");
        assert_eq!(f(None, "0.1").unwrap(), "0.1");
        assert_eq!(f(Some("5.0e3"), "2.0e2").unwrap(), "5200");
        assert_eq!(f(Some("-0"), "0").unwrap(), "0");
        assert_eq!(f(Some("1"), "-1").unwrap(), "0");
        assert_eq!(f(Some("abc"), "1"), Err(FloatIncrError::NotFloat));
        assert_eq!(f(Some("1"), " 1"), Err(FloatIncrError::NotFloat));
        assert_eq!(f(Some("1"), ""), Err(FloatIncrError::NotFloat));
        assert_eq!(f(Some("1"), "nan"), Err(FloatIncrError::NotFloat));
        assert_eq!(f(Some("inf"), "1"), Err(FloatIncrError::NanOrInf));
        assert!(f(Some("3e300"), "0").unwrap().starts_with("3000000000"));
    }

    #[test]
    fn getrange_arithmetic() {
        assert_eq!(range_of(0, -1, 5), Some((0, 4)));
        assert_eq!(range_of(0, -100, 5), Some((0, 0)));
        assert_eq!(range_of(-1, -5, 5), None);
        assert_eq!(range_of(10, 20, 5), None);
        assert_eq!(range_of(0, 0, 0), None);
        assert_eq!(range_of(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }

    /// Runs shard handlers directly on a private shard (no server) and reads encodings back.
    struct Bench {
        shard: damselfly_core::engine::shard::Shard,
        shared: std::sync::Arc<damselfly_core::engine::Shared>,
    }

    impl Bench {
        fn new() -> Self {
            let cfg = std::sync::Arc::new(damselfly_core::config::Config::new());
            Bench {
                shard: damselfly_core::engine::shard::Shard::new(0, 1),
                shared: damselfly_core::engine::Shared::new(cfg),
            }
        }

        fn run(&mut self, f: damselfly_core::commands::ShardFn, args: &[&str]) -> String {
            let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
            let mut reply = damselfly_protocol::Reply::new(Default::default());
            let mut c = CmdCtx {
                shard: &mut self.shard,
                db: 0,
                now: damselfly_core::clock::unix_ms(),
                shared: &self.shared,
                reply: &mut reply,
            };
            f(&mut c, &a);
            String::from_utf8_lossy(&reply.take()).into_owned()
        }

        fn enc(&mut self, key: &str) -> &'static str {
            let now = damselfly_core::clock::unix_ms();
            match self.shard.dbs[0].get(key.as_bytes(), now) {
                Some(v) => v.encoding_name(),
                None => "none",
            }
        }
    }

    #[test]
    fn encodings_match_redis() {
        let mut b = Bench::new();
        b.run(set, &["set", "k", "1"]);
        assert_eq!(b.enc("k"), "int");
        b.run(set, &["set", "k", "hello"]);
        assert_eq!(b.enc("k"), "embstr");
        let long = "x".repeat(50);
        b.run(set, &["set", "k", &long]);
        assert_eq!(b.enc("k"), "raw");
        // APPEND: a new key is encoded like SET; an existing one becomes raw.
        b.run(append, &["append", "a", "1"]);
        assert_eq!(b.enc("a"), "int");
        assert_eq!(b.run(append, &["append", "a", "2"]), ":2\r\n");
        assert_eq!(b.enc("a"), "raw");
        assert_eq!(b.run(get, &["get", "a"]), "$2\r\n12\r\n");
        // SETRANGE with an empty value leaves the value alone.
        b.run(set, &["set", "r", "1234"]);
        assert_eq!(b.run(setrange, &["setrange", "r", "0", ""]), ":4\r\n");
        assert_eq!(b.enc("r"), "int");
        assert_eq!(b.run(setrange, &["setrange", "r", "0", "2"]), ":4\r\n");
        assert_eq!(b.enc("r"), "raw");
        assert_eq!(b.run(get, &["get", "r"]), "$4\r\n2234\r\n");
        b.run(setrange, &["setrange", "z", "2", "ab"]);
        assert_eq!(b.enc("z"), "raw");
        // INCR stores ints; INCRBYFLOAT stores text.
        b.run(incrbyfloat, &["incrbyfloat", "f", "1"]);
        assert_eq!(b.enc("f"), "embstr");
        assert_eq!(b.run(incr, &["incr", "f"]), ":2\r\n");
        assert_eq!(b.enc("f"), "int");
        b.run(set, &["set", "g", "12"]);
        assert_eq!(b.run(getset, &["getset", "g", "13"]), "$2\r\n12\r\n");
        assert_eq!(b.enc("g"), "int");
        // INCR on a raw string that holds a number still works.
        b.run(setrange, &["setrange", "n", "0", "41"]);
        assert_eq!(b.enc("n"), "raw");
        assert_eq!(b.run(incr, &["incr", "n"]), ":42\r\n");
        assert_eq!(b.enc("n"), "int");
    }

    #[test]
    fn set_option_parsing() {
        let a =
            |v: &[&'static str]| -> Vec<&'static [u8]> { v.iter().map(|s| s.as_bytes()).collect() };
        let args = a(&["set", "k", "v", "nx", "ex", "10", "get"]);
        let (fl, e) = parse_ext(&args, 3, true).unwrap();
        assert_eq!(fl, F_NX | F_EX | F_GET);
        assert_eq!(e, Some(&b"10"[..]));
        assert!(parse_ext(&a(&["set", "k", "v", "nx", "xx"]), 3, true).is_none());
        assert!(parse_ext(&a(&["set", "k", "v", "ex", "1", "px", "1"]), 3, true).is_none());
        assert!(parse_ext(&a(&["set", "k", "v", "ex"]), 3, true).is_none());
        assert!(parse_ext(&a(&["set", "k", "v", "keepttl", "ex", "1"]), 3, true).is_none());
        assert!(parse_ext(&a(&["set", "k", "v", "persist"]), 3, true).is_none());
        assert!(parse_ext(&a(&["getex", "k", "persist"]), 2, false).is_some());
        assert!(parse_ext(&a(&["getex", "k", "nx"]), 2, false).is_none());
        assert!(parse_ext(&a(&["getex", "k", "persist", "ex", "1"]), 2, false).is_none());
    }
}
