//! Stream commands: XADD XRANGE XREVRANGE XLEN XDEL XTRIM XSETID, consumer groups (XGROUP
//! XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM), XINFO, and XREAD.
//!
//! Semantics, replies and error texts follow Redis 7.0 `t_stream.c`. All but XREAD and
//! XREADGROUP are single-key shard handlers. Those two name many keys: they validate every key
//! (type, group) and then serve, in one chain, so on one shard they are one message and across
//! shards one transaction in which nothing is delivered when any key fails. When nothing can be
//! served and BLOCK was given, they wait through `coordinator::wait` like BLPOP; a stream
//! waiter is served by the XADD that makes its key ready, inside that XADD's shard step.
//!
//! Replication follows Redis's propagation: XADD with the ID it generated and trims made exact;
//! XREADGROUP, XCLAIM and XAUTOCLAIM as the XCLAIM / XGROUP SETID commands of their effects.

use std::sync::Arc;
use std::time::Duration;

use damselfly_dash::Pos;
use damselfly_protocol::{Reply, RespVersion};

use damselfly_core::commands::connection::help_reply;
use damselfly_core::commands::coordinator::wait;
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_core::engine::journal;
use damselfly_core::engine::waiters::Serve;
use damselfly_types::stream::{
    AddError, Fields, Group as CGroup, IdSpec, NodeLimits, Stream, StreamId, Trim,
    ENTRIES_READ_UNKNOWN,
};
use damselfly_types::Value;

const G: Group = Group::Stream;

const ERR_BAD_ID: &str = "ERR Invalid stream ID specified as stream command argument";
const ERR_ID_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
const ERR_EXHAUSTED: &str =
    "ERR The stream has exhausted the last possible ID, unable to add more items";

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("xadd", -5, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(xadd))
        .doc(G, "5.0.0", "Appends a new entry to a stream"),
    cmd("xrange", -4, READONLY, range(1, 1, 1), Shard(xrange))
        .doc(G, "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval"),
    cmd("xrevrange", -4, READONLY, range(1, 1, 1), Shard(xrevrange))
        .doc(G, "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE"),
    cmd("xlen", 2, READONLY | FAST, range(1, 1, 1), Shard(xlen))
        .doc(G, "5.0.0", "Return the number of entries in a stream"),
    cmd("xdel", -3, WRITE | FAST, range(1, 1, 1), Shard(xdel))
        .doc(G, "5.0.0", "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist."),
    cmd("xtrim", -4, WRITE, range(1, 1, 1), Shard(xtrim))
        .doc(G, "5.0.0", "Trims the stream to (approximately if '~' is passed) a certain size"),
    cmd("xsetid", -3, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(xsetid))
        .doc(G, "5.0.0", "An internal command for replicating stream values"),
    cmd("xread", -4, READONLY | BLOCKING, keyword("STREAMS", 1, -1, 1, 2), Conn(xread))
        .doc(G, "5.0.0", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block."),
    cmd("xreadgroup", -7, WRITE | BLOCKING | PROP_SELF, keyword("STREAMS", 4, -1, 1, 2), Conn(xreadgroup))
        .doc(G, "5.0.0", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block."),
    container("xgroup", -2, XGROUP_SUBS)
        .doc(G, "5.0.0", "A container for consumer groups commands"),
    cmd("xack", -4, WRITE | FAST, range(1, 1, 1), Shard(xack))
        .doc(G, "5.0.0", "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL."),
    cmd("xpending", -3, READONLY, range(1, 1, 1), Shard(xpending))
        .doc(G, "5.0.0", "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged."),
    cmd("xclaim", -6, WRITE | FAST, range(1, 1, 1), Shard(xclaim))
        .doc(G, "5.0.0", "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer."),
    cmd("xautoclaim", -6, WRITE | FAST, range(1, 1, 1), Shard(xautoclaim))
        .doc(G, "6.2.0", "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer."),
    container("xinfo", -2, XINFO_SUBS)
        .doc(G, "5.0.0", "A container for stream introspection commands"),
];

#[rustfmt::skip]
static XGROUP_SUBS: &[CommandSpec] = &[
    cmd("create", -5, WRITE | DENYOOM, range(2, 2, 1), Shard(xgroup_create))
        .doc(G, "5.0.0", "Create a consumer group."),
    cmd("setid", -5, WRITE, range(2, 2, 1), Shard(xgroup_setid))
        .doc(G, "5.0.0", "Set a consumer group to an arbitrary last delivered ID value."),
    cmd("destroy", 4, WRITE, range(2, 2, 1), Shard(xgroup_destroy))
        .doc(G, "5.0.0", "Destroy a consumer group."),
    cmd("createconsumer", 5, WRITE | DENYOOM, range(2, 2, 1), Shard(xgroup_createconsumer))
        .doc(G, "6.2.0", "Create a consumer in a consumer group."),
    cmd("delconsumer", 5, WRITE, range(2, 2, 1), Shard(xgroup_delconsumer))
        .doc(G, "5.0.0", "Delete a consumer from a consumer group."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(xgroup_help))
        .doc(G, "5.0.0", "Show helpful text about the different subcommands"),
];

#[rustfmt::skip]
static XINFO_SUBS: &[CommandSpec] = &[
    cmd("stream", -3, READONLY, range(2, 2, 1), Shard(xinfo_stream))
        .doc(G, "5.0.0", "Get information about a stream"),
    cmd("groups", 3, READONLY, range(2, 2, 1), Shard(xinfo_groups))
        .doc(G, "5.0.0", "List the consumer groups of a stream"),
    cmd("consumers", 4, READONLY, range(2, 2, 1), Shard(xinfo_consumers))
        .doc(G, "5.0.0", "List the consumers in a consumer group"),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(xinfo_help))
        .doc(G, "5.0.0", "Show helpful text about the different subcommands"),
];

// ---------------------------------------------------------------------------------------------
// Helpers

fn node_limits(cx: &CmdCtx<'_>) -> NodeLimits {
    let c = &cx.shared.config;
    NodeLimits {
        max_bytes: c.enc_limit(EncLimit::StreamNodeMaxBytes).max(0) as usize,
        max_entries: c.enc_limit(EncLimit::StreamNodeMaxEntries).max(0) as usize,
    }
}

enum Found {
    Missing,
    WrongType,
    Stream(Pos),
}

fn lookup(db: &mut Db, key: &[u8], now: u64, read: bool) -> Found {
    let pos = if read {
        db.find_read(key, now)
    } else {
        db.find(key, now)
    };
    match pos {
        None => Found::Missing,
        Some(p) if db.at(p).1.as_stream().is_some() => Found::Stream(p),
        Some(_) => Found::WrongType,
    }
}

/// The stream at `key` for a write, or the reply when there is none: `missing` for no key,
/// WRONGTYPE for another type (XDEL, XTRIM, XSETID).
fn write_target(cx: &mut CmdCtx<'_>, key: &[u8], missing: fn(&mut Reply)) -> Option<Pos> {
    let now = cx.now;
    match lookup(&mut cx.shard.dbs[cx.db], key, now, false) {
        Found::Missing => {
            missing(cx.reply);
            None
        }
        Found::WrongType => {
            cx.reply.error(ERR_WRONGTYPE);
            None
        }
        Found::Stream(p) => Some(p),
    }
}

fn stream_at(db: &Db, pos: Pos) -> &Stream {
    db.at(pos).1.as_stream().expect("a stream")
}

/// Mutable access without signalling a modification (callers signal what Redis signals).
fn stream_mut(db: &mut Db, pos: Pos) -> &mut Stream {
    db.at_mut_quiet(pos).as_stream_mut().expect("a stream")
}

fn reply_id(r: &mut Reply, id: StreamId) {
    let mut b = [0u8; 41];
    r.bulk(id.format(&mut b));
}

/// `[id, [field, value, ...]]`.
fn reply_entry(r: &mut Reply, id: StreamId, fields: &Fields<'_>) {
    r.array(2);
    reply_id(r, id);
    r.array(fields.len() * 2);
    for (f, v) in fields {
        r.bulk(f);
        r.bulk(v);
    }
}

/// Replies with the entries in `[start, end]`, at most `count` (0: all).
fn reply_range(r: &mut Reply, s: &Stream, start: StreamId, end: StreamId, rev: bool, count: usize) {
    let h = r.begin_array_deferred();
    let mut n = 0;
    s.range(start, end, rev, |id, f| {
        reply_entry(r, id, &f);
        n += 1;
        count == 0 || n < count
    });
    r.end_array_deferred(h, n);
}

/// A strict ID (`-`/`+` refused), or the error reply.
fn strict_id(r: &mut Reply, a: &[u8]) -> Option<StreamId> {
    match StreamId::parse(a, 0, true, false) {
        Some((id, _)) => Some(id),
        None => {
            r.error(ERR_BAD_ID);
            None
        }
    }
}

/// An interval bound: `(id` excludes (strict form), else `-`/`+`/`ms`/`ms-seq`.
fn interval_id(r: &mut Reply, a: &[u8], missing_seq: u64) -> Option<(StreamId, bool)> {
    let parsed = if a.len() > 1 && a[0] == b'(' {
        StreamId::parse(&a[1..], missing_seq, true, false).map(|(id, _)| (id, true))
    } else {
        StreamId::parse(a, missing_seq, false, false).map(|(id, _)| (id, false))
    };
    if parsed.is_none() {
        r.error(ERR_BAD_ID);
    }
    parsed
}

/// The start of an interval, moved past an exclusive bound.
fn interval_start(r: &mut Reply, a: &[u8]) -> Option<StreamId> {
    let (id, ex) = interval_id(r, a, 0)?;
    if !ex {
        return Some(id);
    }
    let next = id.incr();
    if next.is_none() {
        r.error("ERR invalid start ID for the interval");
    }
    next
}

fn interval_end(r: &mut Reply, a: &[u8]) -> Option<StreamId> {
    let (id, ex) = interval_id(r, a, u64::MAX)?;
    if !ex {
        return Some(id);
    }
    let prev = id.decr();
    if prev.is_none() {
        r.error("ERR invalid end ID for the interval");
    }
    prev
}

/// An error quoting names as Redis's `%s` does (cut at a NUL; the literal parts have none).
fn nogroup(r: &mut Reply, parts: &[&[u8]]) {
    let cut: Vec<&[u8]> = parts.iter().map(|p| cstr(p, usize::MAX)).collect();
    error_parts(r, &cut);
}

fn idstr(id: StreamId) -> Vec<u8> {
    id.to_bytes()
}

// ---------------------------------------------------------------------------------------------
// XADD / XTRIM

/// Parsed XADD/XTRIM options (`streamParseAddOrTrimArgsOrReply`).
struct TrimArgs {
    trim: Option<Trim>,
    approx: bool,
    limit: u64,
    /// Index of the MAXLEN/MINID threshold argument (rewritten for replication).
    threshold_at: usize,
    nomkstream: bool,
    /// XADD: the ID argument's index and what it says.
    id_at: usize,
    id: IdSpec,
}

fn parse_trim_args(cx: &mut CmdCtx<'_>, args: &[&[u8]], xadd: bool) -> Option<TrimArgs> {
    let r = &mut *cx.reply;
    let mut t = TrimArgs {
        trim: None,
        approx: false,
        limit: 0,
        threshold_at: 0,
        nomkstream: false,
        id_at: 0,
        id: IdSpec::Auto,
    };
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let o = args[i];
        if xadd && o == b"*" {
            t.id_at = i;
            t.id = IdSpec::Auto;
            break;
        } else if (eq_ic(o, "maxlen") || eq_ic(o, "minid")) && more > 0 {
            if t.trim.is_some() {
                r.error("ERR syntax error, MAXLEN and MINID options at the same time are not compatible");
                return None;
            }
            t.approx = false;
            let next = args[i + 1];
            if more >= 2 && (next == b"~" || next == b"=") {
                t.approx = next == b"~";
                i += 1;
            }
            let a = args[i + 1];
            if eq_ic(o, "maxlen") {
                let n = int_arg(r, a)?;
                if n < 0 {
                    r.error("ERR The MAXLEN argument must be >= 0.");
                    return None;
                }
                t.trim = Some(Trim::MaxLen(n as u64));
            } else {
                let id = strict_id(r, a)?;
                t.trim = Some(Trim::MinId(id));
            }
            i += 1;
            t.threshold_at = i;
        } else if eq_ic(o, "limit") && more > 0 {
            let n = int_arg(r, args[i + 1])?;
            if n < 0 {
                r.error("ERR The LIMIT argument must be >= 0.");
                return None;
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && eq_ic(o, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            let Some((id, seq_given)) = StreamId::parse(o, 0, true, true) else {
                r.error(ERR_BAD_ID);
                return None;
            };
            t.id_at = i;
            t.id = if seq_given {
                IdSpec::Exact(id)
            } else {
                IdSpec::Ms(id.ms)
            };
            break;
        } else {
            r.error(ERR_SYNTAX);
            return None;
        }
        i += 1;
    }
    if t.limit > 0 && t.trim.is_none() {
        r.error("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy");
        return None;
    }
    if !xadd && t.trim.is_none() {
        r.error("ERR syntax error, XTRIM must be called with a trimming strategy");
        return None;
    }
    if xadd && t.id_at == 0 {
        t.id_at = i;
    }
    if damselfly_core::engine::role::applying() {
        // A primary's stream says exactly what to trim.
        t.limit = 0;
    } else if limit_given {
        if !t.approx {
            r.error("ERR syntax error, LIMIT cannot be used without the special ~ option");
            return None;
        }
    } else if t.approx {
        let per_node = cx
            .shared
            .config
            .enc_limit(EncLimit::StreamNodeMaxEntries)
            .max(0) as u64;
        t.limit = (100 * per_node).clamp(1, 1_000_000);
        if per_node == 0 {
            t.limit = 10_000;
        }
    } else {
        t.limit = 0;
    }
    Some(t)
}

/// The propagated form of a trim Redis made exact: `~` becomes `=`, the threshold what the
/// stream now starts at (its length, or its first ID tombstones included).
fn rewrite_trim(args: &mut [Vec<u8>], t: &TrimArgs, s: &Stream) {
    if !t.approx || t.trim.is_none() {
        return;
    }
    args[t.threshold_at - 1] = b"=".to_vec();
    args[t.threshold_at] = match t.trim {
        Some(Trim::MaxLen(_)) => s.len().to_string().into_bytes(),
        _ => idstr(s.first_id_with_tombstones()),
    };
}

fn xadd(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(t) = parse_trim_args(cx, args, true) else {
        return;
    };
    let field_at = t.id_at + 1;
    let nfv = args.len().saturating_sub(field_at);
    if nfv < 2 || nfv % 2 == 1 {
        cx.reply
            .error("ERR wrong number of arguments for 'xadd' command");
        return;
    }
    if let IdSpec::Exact(id) = t.id {
        if id.is_zero() {
            cx.reply
                .error("ERR The ID specified in XADD must be greater than 0-0");
            return;
        }
    }
    let lim = node_limits(cx);
    let now = cx.now;
    let key = args[1];
    let db = &mut cx.shard.dbs[cx.db];
    let pos = match lookup(db, key, now, false) {
        Found::WrongType => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
        Found::Missing if t.nomkstream => {
            cx.reply.null();
            return;
        }
        Found::Missing => None,
        Found::Stream(p) => Some(p),
    };
    // The ID is checked before a new stream is created (an invalid XADD creates nothing).
    let fresh = Stream::new();
    let cur = pos.map_or(&fresh, |p| stream_at(db, p));
    if cur.last_id == StreamId::MAX {
        cx.reply.error(ERR_EXHAUSTED);
        return;
    }
    let id = match cur.next_id(t.id, now) {
        Ok(id) => id,
        Err(_) => {
            cx.reply.error(ERR_ID_SMALL);
            return;
        }
    };
    let total: usize = args[field_at..].iter().map(|a| a.len()).sum();
    if total > (1 << 30) {
        cx.reply.error("ERR Elements are too large to be stored");
        return;
    }
    let pos = match pos {
        Some(p) => p,
        None => db.insert_new(key, Value::stream(Stream::new()), TtlMode::Clear),
    };
    let s = stream_mut(db, pos);
    if let Err(AddError::TooLarge | AddError::TooSmall) = s.append(id, &args[field_at..], lim) {
        cx.reply.error("ERR Elements are too large to be stored");
        return;
    }
    reply_id(cx.reply, id);
    db.touch_key(key);
    ev::emit(ev::STREAM, "xadd", db.index, key);
    let s = stream_mut(db, pos);
    if let Some(how) = t.trim {
        if s.trim(how, t.approx, t.limit) > 0 {
            ev::emit(ev::STREAM, "xtrim", db.index, key);
        }
    }
    if journal::here() {
        let mut prop: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        prop[t.id_at] = idstr(id);
        rewrite_trim(&mut prop, &t, stream_at(db, pos));
        journal::rewrite(vec![prop]);
    }
}

fn xtrim(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(t) = parse_trim_args(cx, args, false) else {
        return;
    };
    let key = args[1];
    let Some(pos) = write_target(cx, key, |r| r.int(0)) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    let s = stream_mut(db, pos);
    let deleted = s.trim(t.trim.expect("checked"), t.approx, t.limit);
    if deleted > 0 {
        ev::emit(ev::STREAM, "xtrim", db.index, key);
        db.touch_key(key);
        if journal::here() && t.approx {
            let mut prop: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
            rewrite_trim(&mut prop, &t, stream_at(db, pos));
            journal::rewrite(vec![prop]);
        }
    }
    cx.reply.int(deleted as i64);
}

// ---------------------------------------------------------------------------------------------
// XRANGE XREVRANGE XLEN XDEL XSETID

fn xrange(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    xrange_generic(cx, args, false)
}

fn xrevrange(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    xrange_generic(cx, args, true)
}

fn xrange_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], rev: bool) {
    let r = &mut *cx.reply;
    let (sa, ea) = if rev {
        (args[3], args[2])
    } else {
        (args[2], args[3])
    };
    let Some(start) = interval_start(r, sa) else {
        return;
    };
    let Some(end) = interval_end(r, ea) else {
        return;
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if eq_ic(args[j], "count") && j + 1 < args.len() {
            let Some(n) = int_arg(r, args[j + 1]) else {
                return;
            };
            count = n.max(0);
            j += 2;
        } else {
            r.error(ERR_SYNTAX);
            return;
        }
    }
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match lookup(db, args[1], now, true) {
        Found::Missing => cx.reply.empty_array(),
        Found::WrongType => cx.reply.error(ERR_WRONGTYPE),
        Found::Stream(p) => {
            if count == 0 {
                cx.reply.null_array();
            } else {
                let n = if count < 0 { 0 } else { count as usize };
                reply_range(cx.reply, stream_at(db, p), start, end, rev, n);
            }
        }
    }
}

fn xlen(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match lookup(db, args[1], now, true) {
        Found::Missing => cx.reply.int(0),
        Found::WrongType => cx.reply.error(ERR_WRONGTYPE),
        Found::Stream(p) => cx.reply.int(stream_at(db, p).len() as i64),
    }
}

fn xdel(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let key = args[1];
    let Some(pos) = write_target(cx, key, |r| r.int(0)) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    let mut ids = Vec::with_capacity(args.len() - 2);
    for a in &args[2..] {
        let Some(id) = strict_id(cx.reply, a) else {
            return;
        };
        ids.push(id);
    }
    let s = stream_mut(db, pos);
    let mut deleted = 0;
    let mut first = false;
    for id in ids {
        if s.delete(id) {
            first |= id == s.first_id;
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.is_empty() {
            s.first_id = StreamId::MIN;
        } else if first {
            s.refresh_first_id();
        }
        db.touch_key(key);
        ev::emit(ev::STREAM, "xdel", db.index, key);
    }
    cx.reply.int(deleted);
}

fn xsetid(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let r = &mut *cx.reply;
    let Some(id) = strict_id(r, args[2]) else {
        return;
    };
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq_ic(args[i], "entriesadded") && more > 0 {
            let Some(n) = int_arg(r, args[i + 1]) else {
                return;
            };
            if n < 0 {
                r.error("ERR entries_added must be positive");
                return;
            }
            entries_added = n;
            i += 2;
        } else if eq_ic(args[i], "maxdeletedid") && more > 0 {
            let Some(m) = strict_id(r, args[i + 1]) else {
                return;
            };
            if id < m {
                r.error("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
                return;
            }
            max_xdel = m;
            i += 2;
        } else {
            r.error(ERR_SYNTAX);
            return;
        }
    }
    let key = args[1];
    let Some(pos) = write_target(cx, key, |r| r.error(ERR_NO_KEY)) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    let s = stream_at(db, pos);
    if !s.is_empty() {
        let max = s.last_live().unwrap_or(StreamId::MIN);
        if id < max {
            cx.reply
                .error("ERR The ID specified in XSETID is smaller than the target stream top item");
            return;
        }
        if entries_added != -1 && s.len() > entries_added as u64 {
            cx.reply.error("ERR The entries_added specified in XSETID is smaller than the target stream length");
            return;
        }
    }
    let s = stream_mut(db, pos);
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if !max_xdel.is_zero() {
        s.max_deleted_id = max_xdel;
    }
    journal::touched();
    ev::emit(ev::STREAM, "xsetid", db.index, key);
    cx.reply.ok();
}

// ---------------------------------------------------------------------------------------------
// XGROUP

/// The group subcommands' common lookup: the stream (None and replied when it must exist and
/// does not, or is another type).
fn group_stream(cx: &mut CmdCtx<'_>, key: &[u8], mkstream: bool) -> Option<Option<Pos>> {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match lookup(db, key, now, false) {
        Found::WrongType => {
            cx.reply.error(ERR_WRONGTYPE);
            None
        }
        Found::Stream(p) => Some(Some(p)),
        Found::Missing if mkstream => Some(None),
        Found::Missing => {
            cx.reply.error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
            None
        }
    }
}

/// ENTRIESREAD / MKSTREAM options from argument 5 on.
fn group_options(r: &mut Reply, args: &[&[u8]], create: bool) -> Option<(bool, i64)> {
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_UNKNOWN;
    let mut i = 5;
    while i < args.len() {
        if create && eq_ic(args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if eq_ic(args[i], "entriesread") && i + 1 < args.len() {
            let n = int_arg(r, args[i + 1])?;
            if n < 0 && n != ENTRIES_READ_UNKNOWN {
                r.error("ERR value for ENTRIESREAD must be positive or -1");
                return None;
            }
            entries_read = n;
            i += 2;
        } else {
            subcommand_syntax(r, args);
            return None;
        }
    }
    Some((mkstream, entries_read))
}

fn subcommand_syntax(r: &mut Reply, args: &[&[u8]]) {
    let sub = cstr(args.get(1).copied().unwrap_or(b""), 128);
    let top = args[0].to_ascii_uppercase();
    error_parts(
        r,
        &[
            b"ERR unknown subcommand or wrong number of arguments for '",
            sub,
            b"'. Try ",
            &top,
            b" HELP.",
        ],
    );
}

fn no_such_group(r: &mut Reply, group: &[u8], key: &[u8]) {
    nogroup(
        r,
        &[
            b"NOGROUP No such consumer group '",
            group,
            b"' for key name '",
            key,
            b"'",
        ],
    );
}

fn xgroup_create(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if args.len() > 8 {
        subcommand_syntax(cx.reply, args);
        return;
    }
    let Some((mkstream, entries_read)) = group_options(cx.reply, args, true) else {
        return;
    };
    let (key, name) = (args[2], args[3]);
    let Some(pos) = group_stream(cx, key, mkstream) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    let id = if args[4] == b"$" {
        pos.map_or(StreamId::MIN, |p| stream_at(db, p).last_id)
    } else {
        match StreamId::parse(args[4], 0, true, false) {
            Some((id, _)) => id,
            None => {
                cx.reply.error(ERR_BAD_ID);
                return;
            }
        }
    };
    let pos = match pos {
        Some(p) => {
            if stream_at(db, p).groups.contains_key(name) {
                cx.reply
                    .error("BUSYGROUP Consumer Group name already exists");
                return;
            }
            p
        }
        None => {
            let p = db.insert_new(key, Value::stream(Stream::new()), TtlMode::Clear);
            db.touch_key(key);
            p
        }
    };
    let s = stream_mut(db, pos);
    s.groups.insert(name.into(), CGroup::new(id, entries_read));
    journal::touched();
    ev::emit(ev::STREAM, "xgroup-create", db.index, key);
    cx.reply.ok();
}

fn xgroup_setid(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if args.len() != 5 && args.len() != 7 {
        subcommand_syntax(cx.reply, args);
        return;
    }
    let Some((_, entries_read)) = group_options(cx.reply, args, false) else {
        return;
    };
    let (key, name) = (args[2], args[3]);
    let Some(Some(pos)) = group_stream(cx, key, false) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    if !stream_at(db, pos).groups.contains_key(name) {
        no_such_group(cx.reply, name, key);
        return;
    }
    let id = if args[4] == b"$" {
        stream_at(db, pos).last_id
    } else {
        match StreamId::parse(args[4], 0, false, false) {
            Some((id, _)) => id,
            None => {
                cx.reply.error(ERR_BAD_ID);
                return;
            }
        }
    };
    let g = stream_mut(db, pos).groups.get_mut(name).expect("checked");
    g.last_id = id;
    g.entries_read = entries_read;
    journal::touched();
    ev::emit(ev::STREAM, "xgroup-setid", db.index, key);
    cx.reply.ok();
}

fn xgroup_destroy(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (key, name) = (args[2], args[3]);
    let Some(Some(pos)) = group_stream(cx, key, false) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    if stream_mut(db, pos).groups.remove(name).is_some() {
        journal::touched();
        ev::emit(ev::STREAM, "xgroup-destroy", db.index, key);
        // Clients blocked on the group get their NOGROUP error now.
        db.signal_ready(key);
        cx.reply.int(1);
    } else {
        cx.reply.int(0);
    }
}

fn xgroup_createconsumer(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (key, name, consumer) = (args[2], args[3], args[4]);
    let Some(Some(pos)) = group_stream(cx, key, false) else {
        return;
    };
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(g) = stream_mut(db, pos).groups.get_mut(name) else {
        no_such_group(cx.reply, name, key);
        return;
    };
    let (_, created) = g.consumer_or_create(consumer, now);
    if created {
        journal::touched();
        ev::emit(ev::STREAM, "xgroup-createconsumer", db.index, key);
    }
    cx.reply.int(created as i64);
}

fn xgroup_delconsumer(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (key, name, consumer) = (args[2], args[3], args[4]);
    let Some(Some(pos)) = group_stream(cx, key, false) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    let Some(g) = stream_mut(db, pos).groups.get_mut(name) else {
        no_such_group(cx.reply, name, key);
        return;
    };
    let pending = match g.delete_consumer(consumer) {
        Some(n) => {
            journal::touched();
            ev::emit(ev::STREAM, "xgroup-delconsumer", db.index, key);
            n
        }
        None => 0,
    };
    cx.reply.int(pending as i64);
}

fn xgroup_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
}

fn xinfo_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// XACK XPENDING XCLAIM XAUTOCLAIM

fn xack(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let (key, name) = (args[1], args[2]);
    let db = &mut cx.shard.dbs[cx.db];
    let pos = match lookup(db, key, now, true) {
        Found::WrongType => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
        Found::Missing => {
            cx.reply.int(0);
            return;
        }
        Found::Stream(p) => p,
    };
    if !stream_at(db, pos).groups.contains_key(name) {
        cx.reply.int(0);
        return;
    }
    let mut ids = Vec::with_capacity(args.len() - 3);
    for a in &args[3..] {
        let Some(id) = strict_id(cx.reply, a) else {
            return;
        };
        ids.push(id);
    }
    let g = stream_mut(db, pos).groups.get_mut(name).expect("checked");
    let acked = ids.into_iter().filter(|id| g.ack(*id)).count();
    if acked > 0 {
        journal::touched();
    }
    cx.reply.int(acked as i64);
}

fn xpending(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let r = &mut *cx.reply;
    let (key, name) = (args[1], args[2]);
    let justinfo = args.len() == 3;
    if args.len() != 3 && (args.len() < 6 || args.len() > 9) {
        r.error(ERR_SYNTAX);
        return;
    }
    let mut start = StreamId::MIN;
    let mut end = StreamId::MAX;
    let mut count: i64 = 0;
    let mut minidle: i64 = 0;
    let mut consumer: Option<&[u8]> = None;
    if args.len() >= 6 {
        let mut at = 3;
        if eq_ic(args[3], "idle") {
            let Some(n) = int_arg(r, args[4]) else {
                return;
            };
            minidle = n;
            if args.len() < 8 {
                r.error(ERR_SYNTAX);
                return;
            }
            at += 2;
        }
        let Some(c) = int_arg(r, args[at + 2]) else {
            return;
        };
        count = c.max(0);
        let Some(s) = interval_start(r, args[at]) else {
            return;
        };
        let Some(e) = interval_end(r, args[at + 1]) else {
            return;
        };
        start = s;
        end = e;
        consumer = args.get(at + 3).copied();
    }
    let now = cx.now;
    let Some(pos) = group_stream_or_reply(cx, key, name) else {
        return;
    };
    let g = &stream_at(&cx.shard.dbs[cx.db], pos).groups[name];
    let r = &mut *cx.reply;
    if justinfo {
        r.array(4);
        r.int(g.pel.len() as i64);
        if g.pel.is_empty() {
            r.null();
            r.null();
            r.null_array();
        } else {
            reply_id(r, *g.pel.keys().next().expect("non-empty"));
            reply_id(r, *g.pel.keys().next_back().expect("non-empty"));
            let with: Vec<_> = g
                .consumers
                .iter()
                .filter(|(_, c)| !c.pel.is_empty())
                .collect();
            r.array(with.len());
            for (n, c) in with {
                r.array(2);
                r.bulk(n);
                r.bulk(c.pel.len().to_string().as_bytes());
            }
        }
        return;
    }
    let ids: Box<dyn Iterator<Item = StreamId> + '_> = match consumer {
        Some(c) => match g.consumers.get(c) {
            Some(c) => Box::new(c.pel.range(start..=end.max(start)).copied()),
            None => {
                r.array(0);
                return;
            }
        },
        None => Box::new(g.pel.range(start..=end.max(start)).map(|(k, _)| *k)),
    };
    let h = r.begin_array_deferred();
    let mut n = 0;
    let mut left = count;
    if start <= end {
        for id in ids {
            if left == 0 {
                break;
            }
            let nack = &g.pel[&id];
            let idle = now as i64 - nack.delivery_time as i64;
            if minidle > 0 && idle < minidle {
                continue;
            }
            n += 1;
            left -= 1;
            r.array(4);
            reply_id(r, id);
            r.bulk(&nack.consumer);
            r.int(idle.max(0));
            r.int(nack.delivery_count as i64);
        }
    }
    r.end_array_deferred(h, n);
}

/// The stream at `key` when it has group `name`; otherwise replies WRONGTYPE or Redis's
/// "No such key or consumer group" (XPENDING, XCLAIM, XAUTOCLAIM).
fn group_stream_or_reply(cx: &mut CmdCtx<'_>, key: &[u8], name: &[u8]) -> Option<Pos> {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let pos = match lookup(db, key, now, true) {
        Found::WrongType => {
            cx.reply.error(ERR_WRONGTYPE);
            return None;
        }
        Found::Missing => None,
        Found::Stream(p) => Some(p),
    };
    if let Some(p) = pos.filter(|p| stream_at(db, *p).groups.contains_key(name)) {
        return Some(p);
    }
    nogroup(
        cx.reply,
        &[
            b"NOGROUP No such key '",
            key,
            b"' or consumer group '",
            name,
            b"'",
        ],
    );
    None
}

/// `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID last`: how a
/// delivery or claim is replicated (`streamPropagateXCLAIM`).
fn prop_xclaim(
    key: &[u8],
    group: &[u8],
    g: &CGroup,
    id: StreamId,
    consumer: &[u8],
    time: u64,
    count: u64,
) -> Vec<Vec<u8>> {
    vec![
        b"XCLAIM".to_vec(),
        key.to_vec(),
        group.to_vec(),
        consumer.to_vec(),
        b"0".to_vec(),
        idstr(id),
        b"TIME".to_vec(),
        time.to_string().into_bytes(),
        b"RETRYCOUNT".to_vec(),
        count.to_string().into_bytes(),
        b"FORCE".to_vec(),
        b"JUSTID".to_vec(),
        b"LASTID".to_vec(),
        idstr(g.last_id),
    ]
}

/// `XGROUP SETID key group last ENTRIESREAD n` (`streamPropagateGroupID`).
fn prop_setid(key: &[u8], group: &[u8], g: &CGroup) -> Vec<Vec<u8>> {
    vec![
        b"XGROUP".to_vec(),
        b"SETID".to_vec(),
        key.to_vec(),
        group.to_vec(),
        idstr(g.last_id),
        b"ENTRIESREAD".to_vec(),
        g.entries_read.to_string().into_bytes(),
    ]
}

/// The claim step XCLAIM and XAUTOCLAIM share (Redis's `xclaimCommand`,
/// `xautoclaimCommand`): a pending entry whose stream entry is gone is dropped, a claimed one
/// goes to the consumer (made on the first claim), each propagated as Redis propagates them
/// (an XCLAIM carrying the NACK's state).
struct Claimer<'a> {
    key: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    dbi: usize,
    now: u64,
    justid: bool,
    consumer_ready: bool,
    prop: Vec<Vec<Vec<u8>>>,
}

impl Claimer<'_> {
    /// `id` is pending but no longer in the stream: acknowledged, replicated as an XCLAIM of
    /// its NACK as it stands.
    fn drop_deleted(&mut self, g: &mut CGroup, id: StreamId) {
        let nack = g.pel[&id].clone();
        self.prop.push(prop_xclaim(
            self.key,
            self.group,
            g,
            id,
            &nack.consumer,
            nack.delivery_time,
            nack.delivery_count,
        ));
        g.ack(id);
    }

    /// Makes the consumer if it is new (once per command, with its notification).
    fn ready_consumer(&mut self, g: &mut CGroup) {
        if !self.consumer_ready {
            let (c, created) = g.consumer_or_create(self.consumer, self.now);
            c.seen_time = self.now;
            if created {
                ev::emit(ev::STREAM, "xgroup-createconsumer", self.dbi, self.key);
            }
            self.consumer_ready = true;
        }
    }

    /// Gives `id` to the consumer with this delivery time and count, and answers it (the ID
    /// alone with JUSTID).
    fn claim(
        &mut self,
        s: &Stream,
        g: &mut CGroup,
        id: StreamId,
        time: u64,
        count: u64,
        r: &mut Reply,
    ) {
        g.assign(id, self.consumer, time, count);
        if self.justid {
            reply_id(r, id);
        } else {
            let f = s.get(id).expect("exists");
            reply_entry(r, id, &f);
        }
        self.prop.push(prop_xclaim(
            self.key,
            self.group,
            g,
            id,
            self.consumer,
            time,
            count,
        ));
    }
}

fn xclaim(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let dbi = cx.db;
    let (key, name, cname) = (args[1], args[2], args[3]);
    let Some(pos) = group_stream_or_reply(cx, key, name) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    let r = &mut *cx.reply;
    let Some(minidle) = int_arg_msg(r, args[4], "ERR Invalid min-idle-time argument for XCLAIM")
    else {
        return;
    };
    let minidle = minidle.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match StreamId::parse(args[j], 0, true, false) {
            Some((id, _)) => ids.push(id),
            None => break,
        }
        j += 1;
    }
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    let mut force = false;
    let mut justid = false;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let o = args[j];
        if eq_ic(o, "force") {
            force = true;
        } else if eq_ic(o, "justid") {
            justid = true;
        } else if eq_ic(o, "idle") && more > 0 {
            j += 1;
            let Some(n) = int_arg_msg(r, args[j], "ERR Invalid IDLE option argument for XCLAIM")
            else {
                return;
            };
            deliverytime = (now as i64).wrapping_sub(n);
        } else if eq_ic(o, "time") && more > 0 {
            j += 1;
            let Some(n) = int_arg_msg(r, args[j], "ERR Invalid TIME option argument for XCLAIM")
            else {
                return;
            };
            deliverytime = n;
        } else if eq_ic(o, "retrycount") && more > 0 {
            j += 1;
            let Some(n) = int_arg_msg(
                r,
                args[j],
                "ERR Invalid RETRYCOUNT option argument for XCLAIM",
            ) else {
                return;
            };
            retrycount = n;
        } else if eq_ic(o, "lastid") && more > 0 {
            j += 1;
            let Some(id) = strict_id(r, args[j]) else {
                return;
            };
            last_id = id;
        } else {
            error_parts(
                r,
                &[
                    b"ERR Unrecognized XCLAIM option '",
                    cstr(o, usize::MAX),
                    b"'",
                ],
            );
            return;
        }
        j += 1;
    }
    let deliverytime = if deliverytime < 0 || deliverytime > now as i64 {
        now
    } else {
        deliverytime as u64
    };
    let s = stream_mut(db, pos);
    let mut g = s.groups.remove(name).expect("checked");
    let mut changed = false;
    let mut cl = Claimer {
        key,
        group: name,
        consumer: cname,
        dbi,
        now,
        justid,
        consumer_ready: false,
        prop: Vec::new(),
    };
    let mut propagate_last_id = false;
    if last_id > g.last_id {
        g.last_id = last_id;
        propagate_last_id = true;
        changed = true;
    }
    let h = r.begin_array_deferred();
    let mut n = 0;
    for id in ids {
        let exists = s.contains(id);
        let pending = g.pel.contains_key(&id);
        if !exists {
            if pending {
                cl.drop_deleted(&mut g, id);
                propagate_last_id = false;
                changed = true;
            }
            continue;
        }
        if !pending && !force {
            continue;
        }
        if pending && minidle > 0 {
            let nack = &g.pel[&id];
            if (now as i64 - nack.delivery_time as i64) < minidle {
                continue;
            }
        }
        cl.ready_consumer(&mut g);
        // A forced new entry starts at 1 (Redis's new NACK), then counts like the others.
        let base = g.pel.get(&id).map_or(1, |nk| nk.delivery_count);
        let count = if retrycount >= 0 {
            retrycount as u64
        } else if !justid {
            base + 1
        } else {
            base
        };
        cl.claim(s, &mut g, id, deliverytime, count, r);
        n += 1;
        propagate_last_id = false;
        changed = true;
    }
    if propagate_last_id {
        cl.prop.push(prop_setid(key, name, &g));
    }
    s.groups.insert(name.into(), g);
    r.end_array_deferred(h, n);
    if changed || cl.consumer_ready {
        journal::touched();
    }
    if journal::here() {
        journal::rewrite(cl.prop);
    }
}

fn int_arg_msg(r: &mut Reply, a: &[u8], msg: &str) -> Option<i64> {
    match parse_i64(a) {
        Some(n) => Some(n),
        None => {
            r.error(msg);
            None
        }
    }
}

fn xautoclaim(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let dbi = cx.db;
    let r = &mut *cx.reply;
    let (key, name, cname) = (args[1], args[2], args[3]);
    let Some(minidle) = int_arg_msg(
        r,
        args[4],
        "ERR Invalid min-idle-time argument for XAUTOCLAIM",
    ) else {
        return;
    };
    let minidle = minidle.max(0);
    let Some(start) = interval_start(r, args[5]) else {
        return;
    };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if eq_ic(args[j], "count") && more > 0 {
            let max = i64::MAX / 16;
            match parse_i64(args[j + 1]) {
                Some(n) if (1..=max).contains(&n) => count = n,
                _ => {
                    r.error("ERR COUNT must be > 0");
                    return;
                }
            }
            j += 1;
        } else if eq_ic(args[j], "justid") {
            justid = true;
        } else {
            r.error(ERR_SYNTAX);
            return;
        }
        j += 1;
    }
    let now = cx.now;
    let Some(pos) = group_stream_or_reply(cx, key, name) else {
        return;
    };
    let db = &mut cx.shard.dbs[cx.db];
    let r = &mut *cx.reply;
    let s = stream_mut(db, pos);
    let mut g = s.groups.remove(name).expect("checked");
    let mut attempts = count.saturating_mul(10);
    let mut left = count;
    let mut claimed: Vec<StreamId> = Vec::new();
    let mut deleted: Vec<StreamId> = Vec::new();
    let mut cl = Claimer {
        key,
        group: name,
        consumer: cname,
        dbi,
        now,
        justid,
        consumer_ready: false,
        prop: Vec::new(),
    };
    let mut cursor = start;
    let mut next_id = StreamId::MIN;
    let mut body = Reply::new(r.ver);
    while let Some((&id, _)) = g.pel.range(cursor..).next() {
        if attempts == 0 || left == 0 {
            next_id = id;
            break;
        }
        attempts -= 1;
        cursor = match id.incr() {
            Some(c) => c,
            None => StreamId::MAX,
        };
        if !s.contains(id) {
            cl.drop_deleted(&mut g, id);
            deleted.push(id);
            left -= 1;
        } else {
            let nack = &g.pel[&id];
            if minidle > 0 && (now as i64 - nack.delivery_time as i64) < minidle {
                if id == StreamId::MAX {
                    break;
                }
                continue;
            }
            cl.ready_consumer(&mut g);
            let nack = &g.pel[&id];
            let cnt = if justid {
                nack.delivery_count
            } else {
                nack.delivery_count + 1
            };
            cl.claim(s, &mut g, id, now, cnt, &mut body);
            claimed.push(id);
            left -= 1;
        }
        if id == StreamId::MAX {
            break;
        }
    }
    s.groups.insert(name.into(), g);
    // [next cursor, claimed entries, deleted IDs]
    r.array(3);
    reply_id(r, next_id);
    r.array(claimed.len());
    r.raw(&body.buf);
    r.array(deleted.len());
    for id in &deleted {
        reply_id(r, *id);
    }
    if !cl.prop.is_empty() || cl.consumer_ready {
        journal::touched();
    }
    if journal::here() {
        journal::rewrite(cl.prop);
    }
}

// ---------------------------------------------------------------------------------------------
// XINFO

fn xinfo_lookup<'d>(cx: &'d mut CmdCtx<'_>, key: &[u8]) -> Option<(&'d Stream, &'d mut Reply)> {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match lookup(db, key, now, true) {
        Found::Missing => {
            cx.reply.error(ERR_NO_KEY);
            None
        }
        Found::WrongType => {
            cx.reply.error(ERR_WRONGTYPE);
            None
        }
        Found::Stream(p) => Some((stream_at(db, p), &mut *cx.reply)),
    }
}

fn lag_reply(r: &mut Reply, s: &Stream, g: &CGroup) {
    match s.group_lag(g) {
        Some(l) => r.int(l),
        None => r.null(),
    }
}

fn entries_read_reply(r: &mut Reply, g: &CGroup) {
    if g.entries_read != ENTRIES_READ_UNKNOWN {
        r.int(g.entries_read);
    } else {
        r.null();
    }
}

fn xinfo_stream(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let opts = &args[3..];
    let mut full = false;
    let mut count: i64 = 10;
    if !opts.is_empty() {
        if (opts.len() != 1 && opts.len() != 3) || !eq_ic(opts[0], "full") {
            subcommand_syntax(cx.reply, args);
            return;
        }
        if opts.len() == 3 {
            if !eq_ic(opts[1], "count") {
                subcommand_syntax(cx.reply, args);
                return;
            }
            let Some(n) = int_arg(cx.reply, opts[2]) else {
                return;
            };
            count = if n < 0 { 10 } else { n };
        }
        full = true;
    }
    let Some((s, r)) = xinfo_lookup(cx, args[2]) else {
        return;
    };
    r.map(if full { 9 } else { 10 });
    r.bulk(b"length");
    r.int(s.len() as i64);
    r.bulk(b"radix-tree-keys");
    r.int(s.node_count() as i64);
    r.bulk(b"radix-tree-nodes");
    r.int(rax_nodes_estimate(s.node_count()) as i64);
    r.bulk(b"last-generated-id");
    reply_id(r, s.last_id);
    r.bulk(b"max-deleted-entry-id");
    reply_id(r, s.max_deleted_id);
    r.bulk(b"entries-added");
    r.int(s.entries_added as i64);
    r.bulk(b"recorded-first-entry-id");
    reply_id(r, s.first_id);
    let count = count as usize;
    if !full {
        r.bulk(b"groups");
        r.int(s.groups.len() as i64);
        r.bulk(b"first-entry");
        let mut any = false;
        s.range(StreamId::MIN, StreamId::MAX, false, |id, f| {
            reply_entry(r, id, &f);
            any = true;
            false
        });
        if !any {
            r.null();
        }
        r.bulk(b"last-entry");
        let mut any = false;
        s.range(StreamId::MIN, StreamId::MAX, true, |id, f| {
            reply_entry(r, id, &f);
            any = true;
            false
        });
        if !any {
            r.null();
        }
        return;
    }
    r.bulk(b"entries");
    reply_range(r, s, StreamId::MIN, StreamId::MAX, false, count);
    r.bulk(b"groups");
    r.array(s.groups.len());
    for (name, g) in &s.groups {
        r.map(7);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"last-delivered-id");
        reply_id(r, g.last_id);
        r.bulk(b"entries-read");
        entries_read_reply(r, g);
        r.bulk(b"lag");
        lag_reply(r, s, g);
        r.bulk(b"pel-count");
        r.int(g.pel.len() as i64);
        r.bulk(b"pending");
        let n = if count == 0 {
            g.pel.len()
        } else {
            g.pel.len().min(count)
        };
        r.array(n);
        for (id, nack) in g.pel.iter().take(n) {
            r.array(4);
            reply_id(r, *id);
            r.bulk(&nack.consumer);
            r.int(nack.delivery_time as i64);
            r.int(nack.delivery_count as i64);
        }
        r.bulk(b"consumers");
        r.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            r.map(4);
            r.bulk(b"name");
            r.bulk(cname);
            r.bulk(b"seen-time");
            r.int(c.seen_time as i64);
            r.bulk(b"pel-count");
            r.int(c.pel.len() as i64);
            r.bulk(b"pending");
            let n = if count == 0 {
                c.pel.len()
            } else {
                c.pel.len().min(count)
            };
            r.array(n);
            for id in c.pel.iter().take(n) {
                let nack = &g.pel[id];
                r.array(3);
                reply_id(r, *id);
                r.int(nack.delivery_time as i64);
                r.int(nack.delivery_count as i64);
            }
        }
    }
}

/// Redis reports its radix tree's node count; ours is a B-tree of the same keys. A rax of n
/// 16-byte keys sharing prefixes has roughly n + 1 nodes plus the shared-prefix chain.
fn rax_nodes_estimate(keys: usize) -> usize {
    if keys == 0 {
        1
    } else {
        keys + 1
    }
}

fn xinfo_groups(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some((s, r)) = xinfo_lookup(cx, args[2]) else {
        return;
    };
    r.array(s.groups.len());
    for (name, g) in &s.groups {
        r.map(6);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"consumers");
        r.int(g.consumers.len() as i64);
        r.bulk(b"pending");
        r.int(g.pel.len() as i64);
        r.bulk(b"last-delivered-id");
        reply_id(r, g.last_id);
        r.bulk(b"entries-read");
        entries_read_reply(r, g);
        r.bulk(b"lag");
        lag_reply(r, s, g);
    }
}

fn xinfo_consumers(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let (key, name) = (args[2], args[3]);
    let Some((s, r)) = xinfo_lookup(cx, key) else {
        return;
    };
    let Some(g) = s.groups.get(name) else {
        no_such_group(r, name, key);
        return;
    };
    r.array(g.consumers.len());
    for (cname, c) in &g.consumers {
        r.map(3);
        r.bulk(b"name");
        r.bulk(cname);
        r.bulk(b"pending");
        r.int(c.pel.len() as i64);
        r.bulk(b"idle");
        r.int((now as i64 - c.seen_time as i64).max(0));
    }
}

// ---------------------------------------------------------------------------------------------
// XREAD / XREADGROUP

/// What XREAD waits past on one key.
#[derive(Clone, Copy, Debug)]
enum Gt {
    Id(StreamId),
    /// `$`: the stream's last ID when the command ran.
    Last,
    /// XREADGROUP's `>`: entries never delivered to the group.
    New,
}

#[derive(Clone)]
struct ReadGroup {
    group: Box<[u8]>,
    consumer: Box<[u8]>,
    noack: bool,
}

/// A validated XREAD/XREADGROUP.
struct ReadArgs {
    block: Option<Option<Duration>>,
    count: usize,
    group: Option<ReadGroup>,
    /// Index of the first key.
    keys_at: usize,
    n: usize,
}

/// One key's state as the validation step found it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyCheck {
    Ok,
    WrongType,
    NoGroup,
}

fn xread<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(xread_generic(cx, args, false))
}

fn xreadgroup<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(xread_generic(cx, args, true))
}

fn parse_read_args(cx: &mut ConnCtx, args: &[&[u8]], grouped: bool) -> Option<ReadArgs> {
    let name = if grouped { "XREADGROUP" } else { "XREAD" };
    let r = &mut cx.reply;
    let mut a = ReadArgs {
        block: None,
        count: 0,
        group: None,
        keys_at: 0,
        n: 0,
    };
    let mut noack = false;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i];
        if eq_ic(o, "block") && more > 0 {
            if cx.in_script {
                r.error(&format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(args[0])
                ));
                return None;
            }
            i += 1;
            let Some(ms) = parse_i64(args[i]) else {
                r.error("ERR timeout is not an integer or out of range");
                return None;
            };
            if ms < 0 {
                r.error("ERR timeout is negative");
                return None;
            }
            a.block = Some((ms > 0).then(|| Duration::from_millis(ms as u64)));
        } else if eq_ic(o, "count") && more > 0 {
            i += 1;
            let n = int_arg(r, args[i])?;
            a.count = n.max(0) as usize;
        } else if eq_ic(o, "streams") && more > 0 {
            a.keys_at = i + 1;
            let rest = args.len() - a.keys_at;
            if !rest.is_multiple_of(2) {
                r.error("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.");
                return None;
            }
            a.n = rest / 2;
            break;
        } else if eq_ic(o, "group") && more >= 2 {
            if !grouped {
                r.error("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.");
                return None;
            }
            a.group = Some(ReadGroup {
                group: args[i + 1].into(),
                consumer: args[i + 2].into(),
                noack: false,
            });
            i += 2;
        } else if eq_ic(o, "noack") {
            if !grouped {
                r.error("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.");
                return None;
            }
            noack = true;
        } else {
            r.error(ERR_SYNTAX);
            return None;
        }
        i += 1;
    }
    if a.keys_at == 0 {
        r.error(ERR_SYNTAX);
        return None;
    }
    if grouped && a.group.is_none() {
        r.error("ERR Missing GROUP option for XREADGROUP");
        return None;
    }
    if let Some(g) = a.group.as_mut() {
        g.noack = noack;
    }
    let _ = name;
    Some(a)
}

/// An ID argument's meaning, or its error (checked after the key's own errors).
fn read_gt(arg: &[u8], grouped: bool) -> Result<Gt, &'static str> {
    if arg == b"$" {
        if grouped {
            return Err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
        }
        return Ok(Gt::Last);
    }
    if arg == b">" {
        if !grouped {
            return Err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
        }
        return Ok(Gt::New);
    }
    match StreamId::parse(arg, 0, true, false) {
        // Redis marks `>` with the largest ID, so XREADGROUP reads that ID as `>` too.
        Some((id, _)) if grouped && id == StreamId::MAX => Ok(Gt::New),
        Some((id, _)) => Ok(Gt::Id(id)),
        None => Err(ERR_BAD_ID),
    }
}

async fn xread_generic(cx: &mut ConnCtx, args: &[&[u8]], grouped: bool) {
    let Some(ra) = parse_read_args(cx, args, grouped) else {
        return;
    };
    let (n, at) = (ra.n, ra.keys_at);
    // Items as (key, id) pairs so each shard sees its keys with their IDs.
    let items: Vec<&[u8]> = (0..n)
        .flat_map(|i| [args[at + i], args[at + n + i]])
        .collect();
    let group = ra.group.clone();
    let g2 = group.clone();
    let count = ra.count;
    let ver = cx.reply.ver;
    // A blocking read parks first and registers in the same hop that found nothing to serve,
    // so a write right behind the command (another client's DEL or XADD) finds it waiting.
    let mut parked = None;
    let mut waiting: Option<Arc<StreamWait>> = None;
    if ra.block.is_some() && !cx.in_exec() && !cx.in_script {
        let sw = Arc::new(StreamWait {
            keys: (0..n)
                .map(|i| {
                    let gt = read_gt(args[at + n + i], grouped).unwrap_or(Gt::New);
                    (args[at + i].into(), gt, std::sync::OnceLock::new())
                })
                .collect(),
            group: ra.group.clone(),
            count: if ra.count == 0 { 1000 } else { ra.count },
            ver,
        });
        parked = wait::park(cx, sw.clone());
        if parked.is_some() {
            waiting = Some(sw);
        }
    }
    let w = parked.as_ref().map(|p| p.waiter.clone());
    let parts = cx
        .hops()
        .per_shard_of(&items, 2, move |c, kv, ()| {
            let now = c.now;
            let db = c.db();
            kv.chunks_exact(2)
                .map(|p| match lookup(db, p[0], now, true) {
                    Found::Missing if group.is_some() => KeyCheck::NoGroup,
                    Found::Missing => KeyCheck::Ok,
                    Found::WrongType => KeyCheck::WrongType,
                    Found::Stream(pos) => match &group {
                        Some(g) if !stream_at(db, pos).groups.contains_key(&g.group) => {
                            KeyCheck::NoGroup
                        }
                        _ => KeyCheck::Ok,
                    },
                })
                .collect::<Vec<_>>()
        })
        .map(move |parts| {
            let mut checks = vec![KeyCheck::Ok; n];
            for p in &parts {
                for (g, c) in p.groups.iter().zip(&p.result) {
                    checks[*g] = *c;
                }
            }
            checks
        })
        .per_shard_of(&items, 2, move |c, kv, checks: Vec<KeyCheck>| {
            // Nothing is served unless every key passed (the coordinator words the error).
            if checks.iter().any(|k| *k != KeyCheck::Ok)
                || kv
                    .chunks_exact(2)
                    .any(|p| read_gt(p[1], g2.is_some()).is_err())
            {
                return (checks, false, Vec::new());
            }
            let mut out = Vec::with_capacity(kv.len() / 2);
            for p in kv.chunks_exact(2) {
                let gt = read_gt(p[1], g2.is_some()).expect("checked");
                let now = c.now;
                let (bytes, last) =
                    serve_key(c.db(), now, p[0], gt, g2.as_ref(), count, ver, false);
                if let (Gt::Last, Some(sw)) = (gt, waiting.as_ref()) {
                    sw.resolve(p[0], last.unwrap_or(StreamId::MIN));
                }
                out.push(bytes);
            }
            let served = out.iter().any(|b| b.is_some());
            if !served {
                if let Some(w) = &w {
                    let keys: Vec<&[u8]> = kv.iter().step_by(2).copied().collect();
                    wait::register(c, &keys, w);
                }
            }
            (checks, served, out)
        })
        .run()
        .await;
    // Errors in argument order: a key's type or group, then its ID.
    let checks = parts
        .first()
        .map(|p| p.result.0.clone())
        .unwrap_or_default();
    let mut error: Option<Vec<u8>> = None;
    for (i, check) in checks.iter().enumerate() {
        let key = args[at + i];
        match check {
            KeyCheck::WrongType => error = Some(ERR_WRONGTYPE.as_bytes().to_vec()),
            KeyCheck::NoGroup => {
                let g = ra.group.as_ref().expect("grouped");
                error = Some(
                    [
                        &b"NOGROUP No such key '"[..],
                        cstr(key, usize::MAX),
                        b"' or consumer group '",
                        cstr(&g.group, usize::MAX),
                        b"' in XREADGROUP with GROUP option",
                    ]
                    .concat(),
                );
            }
            KeyCheck::Ok => {
                if let Err(e) = read_gt(args[at + n + i], grouped) {
                    error = Some(e.as_bytes().to_vec());
                }
            }
        }
        if error.is_some() {
            break;
        }
    }
    let served_any = parts.iter().any(|p| p.result.1);
    if error.is_some() || served_any {
        if let Some(p) = parked.take() {
            wait::cancel(cx, p);
        }
    }
    if let Some(e) = error {
        cx.reply.error_bytes(&e);
        return;
    }
    if served_any {
        // Each shard's served keys, back in argument order.
        let mut served: Vec<(usize, Vec<u8>)> = Vec::new();
        for p in parts {
            for (g, b) in p.groups.iter().zip(p.result.2) {
                if let Some(b) = b {
                    served.push((*g, b));
                }
            }
        }
        served.sort_by_key(|(g, _)| *g);
        if cx.reply.is_resp3() {
            cx.reply.map(served.len());
        } else {
            cx.reply.array(served.len());
        }
        for (_, b) in served {
            cx.reply.raw(&b);
        }
        return;
    }
    match parked {
        Some(p) => match wait::wait(cx, p, ra.block.flatten()).await {
            Some(bytes) => cx.reply.raw(&bytes),
            None => cx.reply.null_array(),
        },
        None => cx.reply.null_array(),
    }
}

/// Serves one key of XREAD/XREADGROUP on its shard: Some(`key, entries` reply bytes) when
/// there is something to serve (XREADGROUP history: always), and the key's last ID (what `$`
/// means). `blocked`: a waiter being served (the reply is wrapped as one key's).
#[allow(clippy::too_many_arguments)]
fn serve_key(
    db: &mut Db,
    now: u64,
    key: &[u8],
    gt: Gt,
    group: Option<&ReadGroup>,
    count: usize,
    ver: RespVersion,
    blocked: bool,
) -> (Option<Vec<u8>>, Option<StreamId>) {
    let dbi = db.index;
    let Found::Stream(pos) = lookup(db, key, now, true) else {
        return (None, None);
    };
    let s = stream_at(db, pos);
    let last = s.last_id;
    let last_live = s.last_live();
    let mut r = Reply::new(ver);
    let Some(rg) = group else {
        let after = match gt {
            Gt::Id(id) => id,
            Gt::Last => last,
            Gt::New => unreachable!("XREAD has no >"),
        };
        if last_live.is_none_or(|l| l <= after) {
            return (None, Some(last));
        }
        let Some(start) = after.incr() else {
            return (None, Some(last));
        };
        key_header(&mut r, key, blocked);
        reply_range(&mut r, s, start, StreamId::MAX, false, count);
        return (Some(r.take()), Some(last));
    };
    let Some(g) = s.groups.get(&*rg.group) else {
        return (None, Some(last));
    };
    let history = match gt {
        Gt::New => {
            if last_live.is_none_or(|l| l <= g.last_id) {
                return (None, Some(last));
            }
            None
        }
        Gt::Id(id) => Some(id),
        Gt::Last => unreachable!("XREADGROUP refuses $"),
    };
    let here = journal::here();
    let s = stream_mut(db, pos);
    let mut g = s.groups.remove(&*rg.group).expect("checked");
    let (_, created) = g.consumer_or_create(&rg.consumer, now);
    if let Some(c) = g.consumers.get_mut(&*rg.consumer) {
        c.seen_time = now;
    }
    if created {
        ev::emit(ev::STREAM, "xgroup-createconsumer", dbi, key);
    }
    let mut prop: Vec<Vec<Vec<u8>>> = Vec::new();
    if created && rg.noack {
        prop.push(vec![
            b"XGROUP".to_vec(),
            b"CREATECONSUMER".to_vec(),
            key.to_vec(),
            rg.group.to_vec(),
            rg.consumer.to_vec(),
        ]);
    }
    key_header(&mut r, key, blocked);
    match history {
        Some(after) => {
            // The consumer's own pending entries after `after`.
            let start = after.incr();
            let ids: Vec<StreamId> = match start {
                Some(st) => g.consumers[&*rg.consumer]
                    .pel
                    .range(st..)
                    .take(if count == 0 { usize::MAX } else { count })
                    .copied()
                    .collect(),
                None => Vec::new(),
            };
            r.array(ids.len());
            for id in ids {
                match s.get(id) {
                    Some(f) => {
                        reply_entry(&mut r, id, &f);
                        if let Some(n) = g.pel.get_mut(&id) {
                            n.delivery_time = now;
                            n.delivery_count += 1;
                        }
                    }
                    None => {
                        r.array(2);
                        reply_id(&mut r, id);
                        r.null_array();
                    }
                }
            }
        }
        None => {
            let start = g.last_id.incr().unwrap_or(StreamId::MAX);
            let mut got: Vec<StreamId> = Vec::new();
            let h = r.begin_array_deferred();
            s.range(start, StreamId::MAX, false, |id, f| {
                reply_entry(&mut r, id, &f);
                got.push(id);
                count == 0 || got.len() < count
            });
            r.end_array_deferred(h, got.len());
            for id in &got {
                s.group_delivered(&mut g, *id);
                if !rg.noack {
                    g.assign(*id, &rg.consumer, now, 1);
                    if here {
                        prop.push(prop_xclaim(key, &rg.group, &g, *id, &rg.consumer, now, 1));
                    }
                }
            }
            if rg.noack && !got.is_empty() {
                prop.push(prop_setid(key, &rg.group, &g));
            }
        }
    }
    s.groups.insert(rg.group.clone(), g);
    journal::touched();
    if here {
        for cmd in prop {
            let args: Vec<&[u8]> = cmd.iter().map(|a| &a[..]).collect();
            journal::push(journal::Item::One(journal::Record {
                db: dbi,
                resp: journal::encode(&args),
            }));
        }
    }
    (Some(r.take()), Some(last))
}

/// The head of one key's part of an XREAD reply (a served waiter's reply is a whole
/// one-key reply).
fn key_header(r: &mut Reply, key: &[u8], blocked: bool) {
    if blocked {
        if r.is_resp3() {
            r.map(1);
        } else {
            r.array(1);
        }
    }
    if !r.is_resp3() {
        r.array(2);
    }
    r.bulk(key);
}

/// A client blocked in XREAD/XREADGROUP.
struct StreamWait {
    /// Each key (the first occurrence counts, as in Redis), what it waits past, and for `$`
    /// the last ID the key's shard found when the command ran.
    keys: Vec<(Box<[u8]>, Gt, std::sync::OnceLock<StreamId>)>,
    group: Option<ReadGroup>,
    count: usize,
    ver: RespVersion,
}

impl StreamWait {
    fn gt(&self, key: &[u8]) -> Gt {
        match self.keys.iter().find(|(k, _, _)| &**k == key) {
            Some((_, Gt::Last, at)) => Gt::Id(at.get().copied().unwrap_or(StreamId::MIN)),
            Some((_, g, _)) => *g,
            None => Gt::New,
        }
    }

    /// `$` on `key` means `last` (set on the key's shard, before it registers).
    fn resolve(&self, key: &[u8], last: StreamId) {
        if let Some((_, _, at)) = self.keys.iter().find(|(k, _, _)| &**k == key) {
            let _ = at.set(last);
        }
    }
}

impl Serve for StreamWait {
    fn ready(&self, db: &mut Db, key: &[u8], now: u64) -> bool {
        let pos = db.find_read_notouch(key, now);
        let s = pos.and_then(|p| db.at(p).1.as_stream());
        match (&self.group, s) {
            // The key went away or changed type, or the group did: answered with an error.
            (Some(_), None) => true,
            (Some(rg), Some(s)) => match s.groups.get(&*rg.group) {
                None => true,
                Some(g) => s.last_live().is_some_and(|l| l > g.last_id),
            },
            (None, None) => false,
            (None, Some(s)) => match self.gt(key) {
                Gt::Id(id) => s.last_live().is_some_and(|l| l > id),
                _ => false,
            },
        }
    }

    fn take(&self, db: &mut Db, key: &[u8], now: u64) -> Vec<u8> {
        let mut r = Reply::new(self.ver);
        let pos = db.find_read_notouch(key, now);
        let s = pos.and_then(|p| db.at(p).1.as_stream());
        if let Some(rg) = &self.group {
            match s {
                None => {
                    r.error("UNBLOCKED the stream key no longer exists");
                    return r.take();
                }
                Some(s) if !s.groups.contains_key(&*rg.group) => {
                    r.error(
                        "NOGROUP the consumer group this client was blocked on no longer exists",
                    );
                    return r.take();
                }
                _ => {}
            }
        }
        let gt = self.gt(key);
        let served = serve_key(
            db,
            now,
            key,
            gt,
            self.group.as_ref(),
            self.count,
            self.ver,
            true,
        )
        .0;
        match served {
            Some(b) => b,
            None => {
                r.null_array();
                r.take()
            }
        }
    }

    fn own_readiness(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_ids_are_checked_like_redis() {
        assert!(matches!(read_gt(b"$", false), Ok(Gt::Last)));
        assert!(read_gt(b"$", true).is_err());
        assert!(matches!(read_gt(b">", true), Ok(Gt::New)));
        assert!(read_gt(b">", false).is_err());
        assert!(matches!(
            read_gt(b"5", false),
            Ok(Gt::Id(StreamId { ms: 5, seq: 0 }))
        ));
        assert_eq!(read_gt(b"+", false).unwrap_err(), ERR_BAD_ID);
    }
}
