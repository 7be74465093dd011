//! Hash commands: HSET HSETNX HGET HMGET HMSET HDEL HEXISTS HLEN HSTRLEN HKEYS HVALS HGETALL
//! HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN, and the Redis 7.4 field-expiry commands HEXPIRE
//! HPEXPIRE HEXPIREAT HPEXPIREAT HTTL HPTTL HEXPIRETIME HPEXPIRETIME HPERSIST.
//!
//! Semantics, replies and error texts follow Redis `t_hash.c` (7.0 for the classic commands,
//! 7.4 for field expiry). All are single-key `Handler::Shard` commands. Every lookup first
//! drops the hash's due fields (see [`Hash::expire_fields`]), so an expired field is never
//! visible, and a hash emptied by expiry or HDEL is deleted.

use damselfly_core::commands::propagate;
use damselfly_dash::Pos;
use damselfly_protocol::Reply;

use crate::string::{incr_by_float, FloatIncrError};
use damselfly_core::commands::scan;
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::CmdCtx;
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_types::compact::{fmt_i64, IntBuf};
use damselfly_types::hash::{HVal, Hash, Limits};
use damselfly_types::Value;

const G: Group = Group::Hash;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("hset", -4, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(hset))
        .doc(G, "1.0.0", "Creates or modifies the value of a field in a hash."),
    cmd("hsetnx", 4, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(hsetnx))
        .doc(G, "1.0.0", "Sets the value of a field in a hash only when the field doesn't exist."),
    cmd("hmset", -4, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(hmset))
        .doc(G, "1.0.0", "Sets the values of multiple fields."),
    cmd("hget", 3, READONLY | FAST, range(1, 1, 1), Shard(hget))
        .doc(G, "1.0.0", "Returns the value of a field in a hash."),
    cmd("hmget", -3, READONLY | FAST, range(1, 1, 1), Shard(hmget))
        .doc(G, "1.0.0", "Returns the values of all fields in a hash."),
    cmd("hdel", -3, WRITE | FAST, range(1, 1, 1), Shard(hdel))
        .doc(G, "1.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain."),
    cmd("hexists", 3, READONLY | FAST, range(1, 1, 1), Shard(hexists))
        .doc(G, "1.0.0", "Determines whether a field exists in a hash."),
    cmd("hlen", 2, READONLY | FAST, range(1, 1, 1), Shard(hlen))
        .doc(G, "1.0.0", "Returns the number of fields in a hash."),
    cmd("hstrlen", 3, READONLY | FAST, range(1, 1, 1), Shard(hstrlen))
        .doc(G, "1.0.0", "Returns the length of the value of a field."),
    cmd("hkeys", 2, READONLY, range(1, 1, 1), Shard(hkeys))
        .doc(G, "1.0.0", "Returns all fields in a hash."),
    cmd("hvals", 2, READONLY, range(1, 1, 1), Shard(hvals))
        .doc(G, "1.0.0", "Returns all values in a hash."),
    cmd("hgetall", 2, READONLY, range(1, 1, 1), Shard(hgetall))
        .doc(G, "1.0.0", "Returns all fields and values in a hash."),
    cmd("hincrby", 4, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(hincrby))
        .doc(G, "1.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist."),
    cmd("hincrbyfloat", 4, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(hincrbyfloat)).propagate(propagate::hincrbyfloat)
        .doc(G, "1.0.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist."),
    cmd("hrandfield", -2, READONLY, range(1, 1, 1), Shard(hrandfield))
        .doc(G, "1.0.0", "Returns one or more random fields from a hash."),
    cmd("hscan", -3, READONLY, range(1, 1, 1), Shard(hscan))
        .doc(G, "1.0.0", "Iterates over fields and values of a hash."),
    cmd("hexpire", -6, WRITE | FAST, range(1, 1, 1), Shard(hexpire))
        .doc(G, "1.0.0", "Set expiry for hash field using relative time to expire (seconds)"),
    cmd("hpexpire", -6, WRITE | FAST, range(1, 1, 1), Shard(hpexpire))
        .doc(G, "1.0.0", "Set expiry for hash field using relative time to expire (milliseconds)"),
    cmd("hexpireat", -6, WRITE | FAST, range(1, 1, 1), Shard(hexpireat))
        .doc(G, "1.0.0", "Set expiry for hash field using an absolute Unix timestamp (seconds)"),
    cmd("hpexpireat", -6, WRITE | FAST, range(1, 1, 1), Shard(hpexpireat))
        .doc(G, "1.0.0", "Set expiry for hash field using an absolute Unix timestamp (milliseconds)"),
    cmd("httl", -5, READONLY | FAST, range(1, 1, 1), Shard(httl))
        .doc(G, "1.0.0", "Returns the TTL in seconds of a hash field."),
    cmd("hpttl", -5, READONLY | FAST, range(1, 1, 1), Shard(hpttl))
        .doc(G, "1.0.0", "Returns the TTL in milliseconds of a hash field."),
    cmd("hexpiretime", -5, READONLY | FAST, range(1, 1, 1), Shard(hexpiretime))
        .doc(G, "1.0.0", "Returns the expiration time of a hash field as a Unix timestamp, in seconds."),
    cmd("hpexpiretime", -5, READONLY | FAST, range(1, 1, 1), Shard(hpexpiretime))
        .doc(G, "1.0.0", "Returns the expiration time of a hash field as a Unix timestamp, in msec."),
    cmd("hpersist", -5, WRITE | FAST, range(1, 1, 1), Shard(hpersist))
        .doc(G, "1.0.0", "Removes the expiration time for each specified field"),
];

// ---------------------------------------------------------------------------------------------
// Lookup helpers
// ---------------------------------------------------------------------------------------------

fn limits(cx: &CmdCtx<'_>) -> Limits {
    let c = &cx.shared.config;
    Limits {
        entries: c.enc_limit(EncLimit::HashMaxListpackEntries).max(0) as usize,
        value: c.enc_limit(EncLimit::HashMaxListpackValue).max(0) as usize,
    }
}

#[inline]
fn parts<'b>(cx: &'b mut CmdCtx<'_>) -> (&'b mut Db, &'b mut Reply, u64) {
    (&mut cx.shard.dbs[cx.db], &mut *cx.reply, cx.now)
}

enum Found {
    Missing,
    WrongType,
    Hash(Pos),
}

/// Finds the hash at `key`, dropping its due fields first (and the key when that empties it).
fn lookup(db: &mut Db, key: &[u8], now: u64, read: bool) -> Found {
    let pos = if read {
        db.find_read(key, now)
    } else {
        db.find(key, now)
    };
    let Some(pos) = pos else {
        return Found::Missing;
    };
    let (due, next) = match db.at(pos).1.as_hash() {
        None => return Found::WrongType,
        Some(h) => (h.needs_sweep(now), h.next_field_deadline()),
    };
    if next.is_none() {
        return Found::Hash(pos);
    }
    let mut next = next;
    if due {
        if let Some(h) = db.at_mut_quiet(pos).as_hash_mut() {
            h.expire_fields(now);
            next = h.next_field_deadline();
            if h.is_empty() {
                db.remove_at(pos);
                db.hfe.set(key, None);
                return Found::Missing;
            }
        }
    }
    // Keeps the active-expiry index right even for hashes that arrived by RENAME/MOVE/COPY.
    db.hfe.set(key, next);
    Found::Hash(pos)
}

/// Read access: Ok(None) for a missing key; Err after writing WRONGTYPE.
fn read<'d>(
    db: &'d mut Db,
    reply: &mut Reply,
    key: &[u8],
    now: u64,
) -> Result<Option<&'d Hash>, WrongType> {
    match lookup(db, key, now, true) {
        Found::Missing => Ok(None),
        Found::WrongType => {
            reply.error(ERR_WRONGTYPE);
            Err(WrongType)
        }
        Found::Hash(pos) => Ok(db.at(pos).1.as_hash()),
    }
}

/// Write access: runs `f` on the hash at `key` (a fresh one when missing and `create`; Ok(None)
/// when missing otherwise). `f` returns its result and whether it changed the hash. The key is
/// deleted when left empty, marked modified (WATCH) when changed, and registered for active
/// field expiry when it has field TTLs. Err after writing WRONGTYPE. A change publishes the
/// keyspace event `event` (none when empty), and a deletion `del` after it, as Redis.
fn write<R>(
    cx: &mut CmdCtx<'_>,
    key: &[u8],
    create: bool,
    event: &str,
    f: impl FnOnce(&mut Hash, Limits, u64) -> (R, bool),
) -> Result<Option<R>, WrongType> {
    let lim = limits(cx);
    let (db, reply, now) = parts(cx);
    let dbi = db.index;
    let changed_event = || {
        if !event.is_empty() {
            ev::emit(ev::HASH, event, dbi, key);
        }
    };
    match lookup(db, key, now, false) {
        Found::WrongType => {
            reply.error(ERR_WRONGTYPE);
            Err(WrongType)
        }
        Found::Missing => {
            if !create {
                return Ok(None);
            }
            let mut h = Hash::default();
            let (r, _) = f(&mut h, lim, now);
            if !h.is_empty() {
                let next = h.next_field_deadline();
                db.insert_new(key, Value::hash(h), TtlMode::Keep);
                if next.is_some() {
                    db.hfe.set(key, next);
                }
                changed_event();
            }
            Ok(Some(r))
        }
        Found::Hash(pos) => {
            let Some(h) = db.at_mut_quiet(pos).as_hash_mut() else {
                return Ok(None);
            };
            let (r, changed) = f(h, lim, now);
            let next = h.next_field_deadline();
            if changed {
                changed_event();
            }
            if h.is_empty() {
                db.remove_at(pos);
                if !db.hfe.is_empty() {
                    db.hfe.set(key, None);
                }
                ev::emit(ev::GENERIC, "del", dbi, key);
            } else {
                if changed {
                    db.touch_key(key);
                }
                if next.is_some() || !db.hfe.is_empty() {
                    db.hfe.set(key, next);
                }
            }
            Ok(Some(r))
        }
    }
}

#[inline]
fn bulk_val(reply: &mut Reply, v: HVal<'_>) {
    let mut b: IntBuf = [0; 20];
    reply.bulk(v.bytes(&mut b));
}

// ---------------------------------------------------------------------------------------------
// Set / get
// ---------------------------------------------------------------------------------------------

fn hset_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], name: &str) -> Option<i64> {
    if !args.len().is_multiple_of(2) {
        cx.reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return None;
    }
    let pairs = &args[2..];
    write(cx, args[1], true, "hset", |h, lim, _| {
        h.prepare_for(pairs, lim);
        let mut created = 0i64;
        for p in pairs.chunks_exact(2) {
            if h.set(p[0], p[1], lim, false) {
                created += 1;
            }
        }
        (created, true)
    })
    .ok()
    .flatten()
}

fn hset(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if let Some(n) = hset_generic(cx, args, "hset") {
        cx.reply.int(n);
    }
}

fn hmset(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if hset_generic(cx, args, "hmset").is_some() {
        cx.reply.ok();
    }
}

fn hsetnx(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (f, v) = (args[2], args[3]);
    let r = write(cx, args[1], true, "hset", |h, lim, _| {
        if h.contains(f) {
            (0, false)
        } else {
            h.prepare_for(&[f, v], lim);
            h.set(f, v, lim, false);
            (1, true)
        }
    });
    if let Ok(Some(n)) = r {
        cx.reply.int(n);
    }
}

fn hget(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (db, reply, now) = parts(cx);
    match read(db, reply, args[1], now) {
        Ok(Some(h)) => match h.get(args[2]) {
            Some(v) => bulk_val(reply, v),
            None => reply.null(),
        },
        Ok(None) => reply.null(),
        Err(WrongType) => {}
    }
}

fn hmget(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (db, reply, now) = parts(cx);
    let Ok(h) = read(db, reply, args[1], now) else {
        return;
    };
    reply.array(args.len() - 2);
    for f in &args[2..] {
        match h.and_then(|h| h.get(f)) {
            Some(v) => bulk_val(reply, v),
            None => reply.null(),
        }
    }
}

fn hdel(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let fields = &args[2..];
    let r = write(cx, args[1], false, "hdel", |h, _, _| {
        let mut n = 0i64;
        for f in fields {
            if h.remove(f) {
                n += 1;
            }
        }
        (n, n > 0)
    });
    if let Ok(n) = r {
        cx.reply.int(n.unwrap_or(0));
    }
}

fn hexists(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (db, reply, now) = parts(cx);
    if let Ok(h) = read(db, reply, args[1], now) {
        reply.int(h.is_some_and(|h| h.contains(args[2])) as i64);
    }
}

fn hlen(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (db, reply, now) = parts(cx);
    if let Ok(h) = read(db, reply, args[1], now) {
        reply.int(h.map_or(0, |h| h.len()) as i64);
    }
}

fn hstrlen(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (db, reply, now) = parts(cx);
    if let Ok(h) = read(db, reply, args[1], now) {
        reply.int(h.and_then(|h| h.get(args[2])).map_or(0, |v| v.len()) as i64);
    }
}

/// HKEYS (keys), HVALS (values), HGETALL (both, as a map).
fn hget_all(cx: &mut CmdCtx<'_>, args: &[&[u8]], keys: bool, vals: bool) {
    let (db, reply, now) = parts(cx);
    let Ok(h) = read(db, reply, args[1], now) else {
        return;
    };
    let n = h.map_or(0, |h| h.len());
    if keys && vals {
        reply.map(n);
    } else {
        reply.array(n);
    }
    if let Some(h) = h {
        h.for_each(|k, v| {
            if keys {
                reply.bulk(k);
            }
            if vals {
                bulk_val(reply, v);
            }
        });
    }
}

fn hkeys(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    hget_all(cx, args, true, false)
}

fn hvals(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    hget_all(cx, args, false, true)
}

fn hgetall(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    hget_all(cx, args, true, true)
}

// ---------------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------------

fn hincrby(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(by) = int_arg(cx.reply, args[3]) else {
        return;
    };
    let f = args[2];
    let r = write(cx, args[1], true, "hincrby", |h, lim, _| {
        let cur = match h.get(f) {
            None => 0,
            Some(v) => {
                let mut b: IntBuf = [0; 20];
                match parse_i64(v.bytes(&mut b)) {
                    Some(x) => x,
                    None => return (Err("ERR hash value is not an integer"), false),
                }
            }
        };
        let Some(new) = cur.checked_add(by) else {
            return (Err(ERR_OVERFLOW), false);
        };
        let mut b: IntBuf = [0; 20];
        h.set(f, fmt_i64(new, &mut b), lim, true);
        (Ok(new), true)
    });
    match r {
        Ok(Some(Ok(n))) => cx.reply.int(n),
        Ok(Some(Err(e))) => cx.reply.error(e),
        _ => {}
    }
}

fn hincrbyfloat(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let incr = args[3];
    // The increment alone: not a float, or NaN/Infinity (checked before the key, like Redis).
    match incr_by_float(Some(b"0"), incr) {
        Ok(_) => {}
        Err(FloatIncrError::NotFloat) => {
            cx.reply.error(ERR_NOT_FLOAT);
            return;
        }
        Err(FloatIncrError::NanOrInf) => {
            cx.reply.error("ERR value is NaN or Infinity");
            return;
        }
    }
    let f = args[2];
    let r = write(cx, args[1], true, "hincrbyfloat", |h, lim, _| {
        let cur = h.get(f).map(|v| v.to_vec());
        match incr_by_float(cur.as_deref(), incr) {
            Ok(v) => {
                h.set(f, &v, lim, true);
                (Ok(v), true)
            }
            Err(FloatIncrError::NotFloat) => (Err("ERR hash value is not a float"), false),
            Err(FloatIncrError::NanOrInf) => {
                (Err("ERR increment would produce NaN or Infinity"), false)
            }
        }
    });
    match r {
        Ok(Some(Ok(v))) => cx.reply.bulk(&v),
        Ok(Some(Err(e))) => cx.reply.error(e),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// HRANDFIELD
// ---------------------------------------------------------------------------------------------

fn hrandfield(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let mut rng = cx.shard.fork_rng();
    if args.len() == 2 {
        let (db, reply, now) = parts(cx);
        match read(db, reply, args[1], now) {
            Ok(Some(h)) => match h.sampler().pick(&mut rng) {
                Some((f, _)) => reply.bulk(f),
                None => reply.null(),
            },
            Ok(None) => reply.null(),
            Err(WrongType) => {}
        }
        return;
    }
    let Some(l) = parse_i64(args[2]) else {
        cx.reply.error(ERR_NOT_INT);
        return;
    };
    if l == i64::MIN {
        cx.reply.error(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        );
        return;
    }
    let withvalues = if args.len() > 4 || (args.len() == 4 && !eq_ic(args[3], "withvalues")) {
        cx.reply.error(ERR_SYNTAX);
        return;
    } else {
        args.len() == 4
    };
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        cx.reply.error("ERR value is out of range");
        return;
    }
    let config = &cx.shared.config;
    let (db, reply, now) = parts(cx);
    let h = match read(db, reply, args[1], now) {
        Ok(Some(h)) => h,
        Ok(None) => {
            reply.empty_array();
            return;
        }
        Err(WrongType) => return,
    };
    if l == 0 {
        reply.empty_array();
        return;
    }
    let resp3 = reply.is_resp3();
    let header = |reply: &mut Reply, n: usize| {
        reply.array(if withvalues && !resp3 { n * 2 } else { n });
    };
    let emit = |reply: &mut Reply, f: &[u8], v: HVal<'_>| {
        if withvalues && resp3 {
            reply.array(2);
        }
        reply.bulk(f);
        if withvalues {
            bulk_val(reply, v);
        }
    };
    let sampler = h.sampler();
    if l < 0 {
        // Repetitions allowed: `-l` independent picks, streamed (nothing sized by the count).
        let n = l.unsigned_abs() as usize;
        // Past the output buffer limit the client is closed: stop (see `generation_cap`).
        let cap = damselfly_core::client::limits::generation_cap(config, reply.len());
        header(reply, n);
        for _ in 0..n {
            if reply.len() > cap {
                break;
            }
            match sampler.pick(&mut rng) {
                Some((f, v)) => emit(reply, f, v),
                None => reply.null(),
            }
        }
        return;
    }
    let count = l as usize;
    if count >= h.len() {
        header(reply, h.len());
        h.for_each(|f, v| emit(reply, f, v));
        return;
    }
    let picked = sampler.distinct(count, &mut rng);
    header(reply, picked.len());
    for (f, v) in picked {
        emit(reply, f, v);
    }
}

// ---------------------------------------------------------------------------------------------
// HSCAN
// ---------------------------------------------------------------------------------------------

/// HSCAN, with Redis 7.4's NOVALUES (see [`scan`]).
fn hscan(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(cursor) = scan::cursor_arg(cx.reply, args[2]) else {
        return;
    };
    let (db, reply, now) = parts(cx);
    let h = match read(db, reply, args[1], now) {
        Ok(Some(h)) => h,
        Ok(None) => return scan::reply_empty(reply),
        Err(WrongType) => return,
    };
    scan::scan_value(reply, args, scan::Target::Hash, |o, items| {
        h.scan(cursor, o.count, |f, v| {
            if o.matches(f) {
                items.push(f.to_vec());
                if !o.novalues {
                    items.push(v.to_vec());
                }
            }
        })
    });
}

// ---------------------------------------------------------------------------------------------
// Field expiry (Redis 7.4)
// ---------------------------------------------------------------------------------------------

/// Redis `HFE_MAX_ABS_TIME_MSEC` (EB_EXPIRE_TIME_MAX >> 2).
const HFE_MAX_ABS_TIME_MSEC: i64 = ((1i64 << 48) - 1) >> 2;

const ERR_FIELDS_KEYWORD: &str =
    "ERR Mandatory argument FIELDS is missing or not at the right position";
const ERR_NUMFIELDS_MISMATCH: &str =
    "ERR The `numfields` parameter must match the number of arguments";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    None,
    Nx,
    Xx,
    Gt,
    Lt,
}

/// Parses `FIELDS numfields field...` starting at `at` (the FIELDS keyword). Returns the index
/// of the first field, or None after writing the error.
fn parse_fields(reply: &mut Reply, args: &[&[u8]], at: usize, bad_count: &str) -> Option<usize> {
    if at + 1 >= args.len() || !eq_ic(args[at], "fields") {
        reply.error(ERR_FIELDS_KEYWORD);
        return None;
    }
    let n = match parse_i64(args[at + 1]) {
        Some(n) if n >= 1 => n as u64,
        _ => {
            reply.error(bad_count);
            return None;
        }
    };
    if n != (args.len() - at - 2) as u64 {
        reply.error(ERR_NUMFIELDS_MISMATCH);
        return None;
    }
    Some(at + 2)
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT.
fn hexpire_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], name: &str, secs: bool, relative: bool) {
    let now = cx.now;
    {
        let (db, reply, now) = parts(cx);
        if let Found::WrongType = lookup(db, args[1], now, false) {
            reply.error(ERR_WRONGTYPE);
            return;
        }
    }
    let Some(mut t) = int_arg(cx.reply, args[2]) else {
        return;
    };
    if t < 0 {
        cx.reply.error("ERR invalid expire time, must be >= 0");
        return;
    }
    let bad_time = format!("ERR invalid expire time in '{name}' command");
    if secs {
        if t > HFE_MAX_ABS_TIME_MSEC / 1000 {
            cx.reply.error(&bad_time);
            return;
        }
        t *= 1000;
    }
    let base = if relative { now as i64 } else { 0 };
    if t > HFE_MAX_ABS_TIME_MSEC - base {
        cx.reply.error(&bad_time);
        return;
    }
    let at = (t + base) as u64;
    let cond = match args[3].to_ascii_lowercase().as_slice() {
        b"nx" => Cond::Nx,
        b"xx" => Cond::Xx,
        b"gt" => Cond::Gt,
        b"lt" => Cond::Lt,
        _ => Cond::None,
    };
    let fields_kw = if cond == Cond::None { 3 } else { 4 };
    let Some(first) = parse_fields(
        cx.reply,
        args,
        fields_kw,
        "ERR Parameter `numFields` should be greater than 0",
    ) else {
        return;
    };
    let fields = &args[first..];
    let r = write(cx, args[1], false, "", |h, _, now| {
        let mut codes = Vec::with_capacity(fields.len());
        let mut changed = false;
        for f in fields {
            if !h.contains(f) {
                codes.push(-2);
                continue;
            }
            let ok = match (h.field_ttl(f), cond) {
                (_, Cond::None) => true,
                (None, Cond::Xx | Cond::Gt) => false,
                (None, _) => true,
                (Some(_), Cond::Nx) => false,
                (Some(p), Cond::Gt) => at > p,
                (Some(p), Cond::Lt) => at < p,
                (Some(_), Cond::Xx) => true,
            };
            if !ok {
                codes.push(0);
                continue;
            }
            changed = true;
            if at <= now {
                h.remove(f);
                codes.push(2);
            } else {
                h.set_field_ttl(f, at);
                codes.push(1);
            }
        }
        (codes, changed)
    });
    match r {
        Ok(Some(codes)) => {
            cx.reply.array(codes.len());
            for c in codes {
                cx.reply.int(c);
            }
        }
        Ok(None) => {
            cx.reply.array(fields.len());
            for _ in fields {
                cx.reply.int(-2);
            }
        }
        Err(WrongType) => {}
    }
}

fn hexpire(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    hexpire_generic(cx, args, "hexpire", true, true)
}

fn hpexpire(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    hexpire_generic(cx, args, "hpexpire", false, true)
}

fn hexpireat(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    hexpire_generic(cx, args, "hexpireat", true, false)
}

fn hpexpireat(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    hexpire_generic(cx, args, "hpexpireat", false, false)
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME.
fn httl_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], secs: bool, relative: bool) {
    let (db, reply, now) = parts(cx);
    let Ok(h) = read(db, reply, args[1], now) else {
        return;
    };
    let Some(first) = parse_fields(
        reply,
        args,
        2,
        "ERR Number of fields must be a positive integer",
    ) else {
        return;
    };
    let base = if relative { now } else { 0 };
    reply.array(args.len() - first);
    for f in &args[first..] {
        let code = match h {
            Some(h) if h.contains(f) => match h.field_ttl(f) {
                None => -1,
                Some(at) if at <= now => -2,
                Some(at) => {
                    if secs {
                        ((at + 999 - base) / 1000) as i64
                    } else {
                        (at - base) as i64
                    }
                }
            },
            _ => -2,
        };
        reply.int(code);
    }
}

fn httl(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    httl_generic(cx, args, true, true)
}

fn hpttl(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    httl_generic(cx, args, false, true)
}

fn hexpiretime(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    httl_generic(cx, args, true, false)
}

fn hpexpiretime(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    httl_generic(cx, args, false, false)
}

fn hpersist(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    {
        let (db, reply, now) = parts(cx);
        if let Found::WrongType = lookup(db, args[1], now, false) {
            reply.error(ERR_WRONGTYPE);
            return;
        }
    }
    let Some(first) = parse_fields(
        cx.reply,
        args,
        2,
        "ERR Number of fields must be a positive integer",
    ) else {
        return;
    };
    let fields = &args[first..];
    let r = write(cx, args[1], false, "", |h, _, _| {
        let mut changed = false;
        let codes: Vec<i64> = fields
            .iter()
            .map(|f| {
                if !h.contains(f) {
                    -2
                } else if h.clear_field_ttl(f) {
                    changed = true;
                    1
                } else {
                    -1
                }
            })
            .collect();
        (codes, changed)
    });
    match r {
        Ok(Some(codes)) => {
            cx.reply.array(codes.len());
            for c in codes {
                cx.reply.int(c);
            }
        }
        Ok(None) => {
            cx.reply.array(fields.len());
            for _ in fields {
                cx.reply.int(-2);
            }
        }
        Err(WrongType) => {}
    }
}
