//! Generic keyspace commands: DEL UNLINK EXISTS TOUCH TYPE, the EXPIRE/TTL family, PERSIST,
//! RENAME RENAMENX COPY MOVE, KEYS SCAN RANDOMKEY, OBJECT, and the database-wide DBSIZE FLUSHDB
//! FLUSHALL SWAPDB.
//!
//! Single-key commands are shard handlers. Commands whose keys may live on different shards
//! (RENAME, RENAMENX, COPY) are coordinators that run each step as a closure on one shard
//! ("hops"): when both keys share a shard the whole command is one hop, otherwise the source is
//! read/removed on its shard and written on the destination shard by a second hop. Keeping every
//! hop a self-contained closure lets the transaction framework schedule them atomically later.

use damselfly_core::commands::propagate;
use std::sync::Arc;

use damselfly_protocol::Reply;

use damselfly_core::commands::scan;
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::glob;
use damselfly_core::engine::db::Db;
use damselfly_types::{KeyStr, Value};

const ERR_SAME_OBJECT: &str = "ERR source and destination objects are the same";
const ERR_LFU_FREQ: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const ERR_LFU_IDLE: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

/// SCAN cursor layout: shard index in the top 8 bits, the shard's table cursor below.
const SCAN_SHARD_SHIFT: u32 = 56;
const SCAN_CURSOR_MASK: u64 = (1 << SCAN_SHARD_SHIFT) - 1;

/// Redis's OBJ_SHARED_REFCOUNT / OBJ_SHARED_INTEGERS.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
const SHARED_INTEGERS: i64 = 10_000;

const G: Group = Group::Generic;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("del", -2, WRITE, range(1, -1, 1), Conn(del)).one_key(del_one)
        .doc(G, "1.0.0", "Delete a key"),
    cmd("unlink", -2, WRITE | FAST, range(1, -1, 1), Conn(unlink)).one_key(unlink_one)
        .doc(G, "4.0.0", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking."),
    cmd("exists", -2, READONLY | FAST, range(1, -1, 1), Conn(exists)).one_key(exists_one)
        .doc(G, "1.0.0", "Determine if a key exists"),
    cmd("touch", -2, READONLY | FAST, range(1, -1, 1), Conn(touch)).one_key(touch_one)
        .doc(G, "3.2.1", "Alters the last access time of a key(s). Returns the number of existing keys specified."),
    cmd("type", 2, READONLY | FAST, range(1, 1, 1), Shard(type_cmd))
        .doc(G, "1.0.0", "Determine the type stored at key"),
    cmd("expire", -3, WRITE | FAST, range(1, 1, 1), Shard(expire)).propagate(propagate::expire)
        .doc(G, "1.0.0", "Set a key's time to live in seconds"),
    cmd("pexpire", -3, WRITE | FAST, range(1, 1, 1), Shard(pexpire)).propagate(propagate::expire)
        .doc(G, "2.6.0", "Set a key's time to live in milliseconds"),
    cmd("expireat", -3, WRITE | FAST, range(1, 1, 1), Shard(expireat)).propagate(propagate::expire)
        .doc(G, "1.2.0", "Set the expiration for a key as a UNIX timestamp"),
    cmd("pexpireat", -3, WRITE | FAST, range(1, 1, 1), Shard(pexpireat)).propagate(propagate::expire)
        .doc(G, "2.6.0", "Set the expiration for a key as a UNIX timestamp specified in milliseconds"),
    cmd("ttl", 2, READONLY | FAST, range(1, 1, 1), Shard(ttl))
        .doc(G, "1.0.0", "Get the time to live for a key in seconds"),
    cmd("pttl", 2, READONLY | FAST, range(1, 1, 1), Shard(pttl))
        .doc(G, "2.6.0", "Get the time to live for a key in milliseconds"),
    cmd("expiretime", 2, READONLY | FAST, range(1, 1, 1), Shard(expiretime))
        .doc(G, "7.0.0", "Get the expiration Unix timestamp for a key"),
    cmd("pexpiretime", 2, READONLY | FAST, range(1, 1, 1), Shard(pexpiretime))
        .doc(G, "7.0.0", "Get the expiration Unix timestamp for a key in milliseconds"),
    cmd("persist", 2, WRITE | FAST, range(1, 1, 1), Shard(persist))
        .doc(G, "2.2.0", "Remove the expiration from a key"),
    cmd("rename", 3, WRITE, range(1, 2, 1), Conn(rename))
        .doc(G, "1.0.0", "Rename a key"),
    cmd("renamenx", 3, WRITE | FAST, range(1, 2, 1), Conn(renamenx))
        .doc(G, "1.0.0", "Rename a key, only if the new key does not exist"),
    cmd("copy", -3, WRITE | DENYOOM, range(1, 2, 1), Conn(copy)).plan(copy_plan)
        .doc(G, "6.2.0", "Copy a key"),
    cmd("move", 3, WRITE | FAST, range(1, 1, 1), Shard(move_cmd)).plan(move_plan)
        .doc(G, "1.0.0", "Move a key to another database"),
    cmd("keys", 2, READONLY | TX_GLOBAL_READ, NOKEYS, Conn(keys)).acl(acl::DANGEROUS)
        .doc(G, "1.0.0", "Find all keys matching the given pattern"),
    cmd("scan", -2, READONLY, NOKEYS, Conn(scan))
        .doc(G, "2.8.0", "Incrementally iterate the keys space"),
    cmd("randomkey", 1, READONLY, NOKEYS, Conn(randomkey))
        .doc(G, "1.0.0", "Return a random key from the keyspace"),
    container("object", -2, OBJECT_SUBCOMMANDS)
        .doc(G, "2.2.3", "A container for object introspection commands"),
    cmd("dbsize", 1, READONLY | FAST | TX_GLOBAL_READ, NOKEYS, Conn(dbsize)).acl(acl::KEYSPACE)
        .doc(Group::Server, "1.0.0", "Return the number of keys in the selected database"),
    cmd("flushdb", -1, WRITE | TX_GLOBAL_WRITE, NOKEYS, Conn(flushdb)).acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc(Group::Server, "1.0.0", "Remove all keys from the current database"),
    cmd("flushall", -1, WRITE | TX_GLOBAL_WRITE, NOKEYS, Conn(flushall)).acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc(Group::Server, "1.0.0", "Remove all keys from all databases"),
    cmd("swapdb", 3, WRITE | FAST | TX_GLOBAL_WRITE, NOKEYS, Conn(swapdb)).acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc(Group::Server, "4.0.0", "Swaps two Redis databases"),
];

#[rustfmt::skip]
static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    cmd("encoding", 3, READONLY, range(2, 2, 1), Shard(object_encoding))
        .doc(G, "2.2.3", "Inspect the internal encoding of a Redis object"),
    cmd("freq", 3, READONLY, range(2, 2, 1), Shard(object_freq))
        .doc(G, "4.0.0", "Get the logarithmic access frequency counter of a Redis object"),
    cmd("idletime", 3, READONLY, range(2, 2, 1), Shard(object_idletime))
        .doc(G, "2.2.3", "Get the time since a Redis object was last accessed"),
    cmd("refcount", 3, READONLY, range(2, 2, 1), Shard(object_refcount))
        .doc(G, "2.2.3", "Get the number of references to the value of the key"),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(object_help))
        .doc(G, "6.2.0", "Show helpful text about the different subcommands"),
];

/// MOVE key db: the key is locked in the target db too.
fn move_plan(args: &[&[u8]], plan: &mut dyn PlanSink) {
    if args.len() == 3 {
        if let Some(db) = parse_i64(args[2]).filter(|&n| n >= 0) {
            plan.lock_key(db as usize, args[1], true);
        }
    }
}

/// COPY src dst ... DB n: the destination is locked in db n.
fn copy_plan(args: &[&[u8]], plan: &mut dyn PlanSink) {
    if args.len() < 5 {
        return;
    }
    let mut j = 3;
    while j + 1 < args.len() {
        if eq_ic(args[j], "db") {
            if let Some(db) = parse_i64(args[j + 1]).filter(|&n| n >= 0) {
                plan.lock_key(db as usize, args[2], true);
            }
        }
        j += 1;
    }
}

/// Parses a DB index argument like Redis's `getIntFromObjectOrReply` (32-bit int).
fn parse_int32(a: &[u8]) -> Option<i64> {
    parse_i64(a).filter(|v| (i32::MIN as i64..=i32::MAX as i64).contains(v))
}

fn valid_db(cx: &ConnCtx, id: i64) -> bool {
    id >= 0 && (id as usize) < cx.shared().config.dbnum()
}

// ---------------------------------------------------------------------------------------------
// DEL UNLINK EXISTS TOUCH TYPE

/// Runs `f` on every key argument on its shard and replies with how many it returned true for
/// (duplicates counted each time): the shape DEL, UNLINK, EXISTS and TOUCH share.
fn count_keys<'a>(
    cx: &'a mut ConnCtx,
    args: &'a [&'a [u8]],
    f: fn(&mut damselfly_core::engine::db::Db, &[u8], u64) -> bool,
) -> BoxFut<'a> {
    Box::pin(async move {
        let parts = cx
            .hops()
            .per_shard(args, move |c, keys, ()| {
                let now = c.now;
                let db = c.db();
                keys.iter().filter(|k| f(db, k, now)).count() as i64
            })
            .run()
            .await;
        cx.reply.int(parts.iter().map(|p| p.result).sum());
    })
}

fn del<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    count_keys(cx, args, del_key)
}

fn del_key(db: &mut damselfly_core::engine::db::Db, k: &[u8], now: u64) -> bool {
    let gone = db.remove(k, now).is_some();
    if gone {
        ev::emit(ev::GENERIC, "del", db.index, k);
    }
    gone
}

/// UNLINK: DEL whose big values are freed by the lazyfree thread (`engine::lazyfree`).
fn unlink<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    count_keys(cx, args, unlink_key)
}

fn unlink_key(db: &mut damselfly_core::engine::db::Db, k: &[u8], now: u64) -> bool {
    match db.remove(k, now) {
        Some((_, v, _)) => {
            damselfly_core::engine::lazyfree::free(v);
            ev::emit(ev::GENERIC, "del", db.index, k);
            true
        }
        None => false,
    }
}

/// EXISTS counts every argument that names a live key, duplicates included (no access recorded).
fn exists<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    count_keys(cx, args, exists_key)
}

fn exists_key(db: &mut damselfly_core::engine::db::Db, k: &[u8], now: u64) -> bool {
    db.find_read_notouch(k, now).is_some()
}

/// TOUCH: counts like EXISTS, and records an access to each key.
fn touch<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    count_keys(cx, args, touch_key)
}

fn touch_key(db: &mut damselfly_core::engine::db::Db, k: &[u8], now: u64) -> bool {
    db.find(k, now).is_some()
}

/// DEL/UNLINK, EXISTS, TOUCH of one key (`CommandSpec::one_key`): the same count, on the
/// key's shard.
fn count_one(
    c: &mut CmdCtx<'_>,
    k: &[u8],
    f: fn(&mut damselfly_core::engine::db::Db, &[u8], u64) -> bool,
) {
    let now = c.now;
    let n = f(c.db(), k, now) as i64;
    c.reply.int(n);
}

fn del_one(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    count_one(c, args[1], del_key)
}

fn unlink_one(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    count_one(c, args[1], unlink_key)
}

fn exists_one(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    count_one(c, args[1], exists_key)
}

fn touch_one(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    count_one(c, args[1], touch_key)
}

fn type_cmd(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.find_read_notouch(args[1], now).map(|p| db.at(p).1) {
        Some(v) => cx.reply.simple(v.type_name()),
        None => cx.reply.simple("none"),
    }
}

// ---------------------------------------------------------------------------------------------
// EXPIRE family

#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_flags(reply: &mut Reply, opts: &[&[u8]]) -> Option<ExpireFlags> {
    let mut f = ExpireFlags::default();
    for o in opts {
        if eq_ic(o, "nx") {
            f.nx = true;
        } else if eq_ic(o, "xx") {
            f.xx = true;
        } else if eq_ic(o, "gt") {
            f.gt = true;
        } else if eq_ic(o, "lt") {
            f.lt = true;
        } else {
            reply.error_bytes(&[&b"ERR Unsupported option "[..], cstr(o, o.len())].concat());
            return None;
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        reply.error("ERR NX and XX, GT or LT options at the same time are not compatible");
        return None;
    }
    if f.gt && f.lt {
        reply.error("ERR GT and LT options at the same time are not compatible");
        return None;
    }
    Some(f)
}

/// Redis `expireGenericCommand`: `relative` adds the current time, `secs` scales by 1000.
fn expire_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], relative: bool, secs: bool, name: &str) {
    let Some(flags) = parse_expire_flags(cx.reply, &args[3..]) else {
        return;
    };
    let Some(mut when) = int_arg(cx.reply, args[2]) else {
        return;
    };
    let invalid = |reply: &mut Reply| {
        reply.error(&format!("ERR invalid expire time in '{name}' command"));
    };
    if secs {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            invalid(cx.reply);
            return;
        }
        when *= 1000;
    }
    let now = cx.now;
    let base = if relative { now as i64 } else { 0 };
    if when > i64::MAX - base {
        invalid(cx.reply);
        return;
    }
    when += base;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find(args[1], now) else {
        cx.reply.int(0);
        return;
    };
    let current = db.expire_at(pos).map(|t| t as i64);
    let refused = (flags.nx && current.is_some())
        || (flags.xx && current.is_none())
        || (flags.gt && current.is_none_or(|c| when <= c))
        || (flags.lt && current.is_some_and(|c| when >= c));
    if refused {
        cx.reply.int(0);
        return;
    }
    if when <= now as i64 {
        db.remove_at(pos);
        ev::emit(ev::GENERIC, "del", db.index, args[1]);
    } else {
        db.set_expire(pos, Some(when as u64));
        ev::emit(ev::GENERIC, "expire", db.index, args[1]);
    }
    cx.reply.int(1);
}

fn expire(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    expire_generic(cx, args, true, true, "expire");
}

fn pexpire(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    expire_generic(cx, args, true, false, "pexpire");
}

fn expireat(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    expire_generic(cx, args, false, true, "expireat");
}

fn pexpireat(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    expire_generic(cx, args, false, false, "pexpireat");
}

/// Redis `ttlGenericCommand`.
fn ttl_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], ms: bool, abs: bool) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find_read_notouch(args[1], now) else {
        cx.reply.int(-2);
        return;
    };
    match db.expire_at(pos) {
        None => cx.reply.int(-1),
        Some(at) => {
            let at = at.min(i64::MAX as u64) as i64;
            let t = if abs { at } else { (at - now as i64).max(0) };
            // `t` is never negative; unsigned rounding matches Redis even at the top of the range.
            cx.reply.int(if ms {
                t
            } else {
                ((t as u64 + 500) / 1000) as i64
            });
        }
    }
}

fn ttl(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    ttl_generic(cx, args, false, false);
}

fn pttl(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    ttl_generic(cx, args, true, false);
}

fn expiretime(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    ttl_generic(cx, args, false, true);
}

fn pexpiretime(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    ttl_generic(cx, args, true, true);
}

fn persist(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.find(args[1], now) {
        Some(pos) if db.expire_at(pos).is_some() => {
            db.set_expire(pos, None);
            ev::emit(ev::GENERIC, "persist", db.index, args[1]);
            cx.reply.int(1);
        }
        _ => cx.reply.int(0),
    }
}

// ---------------------------------------------------------------------------------------------
// RENAME RENAMENX COPY MOVE

/// Why a rename did not happen.
#[derive(Debug, PartialEq, Eq)]
enum RenameErr {
    NoSuchKey,
    /// RENAMENX and the destination exists.
    Exists,
}

/// Writes `value` under `key`, replacing any current value and TTL.
fn put_replace(db: &mut Db, key: &[u8], value: Value, at: Option<u64>, now: u64) {
    db.remove(key, now);
    db.insert_new_owned(KeyStr::from_bytes(key), value, at);
}

fn rename_reply(reply: &mut Reply, r: Result<(), RenameErr>, nx: bool) {
    match r {
        Err(RenameErr::NoSuchKey) => reply.error(ERR_NO_KEY),
        Err(RenameErr::Exists) => reply.int(0),
        Ok(()) if nx => reply.int(1),
        Ok(()) => reply.ok(),
    }
}

fn rename<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(rename_generic(cx, args, false))
}

fn renamenx<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(rename_generic(cx, args, true))
}

/// RENAME/RENAMENX: look at the destination, take the source off its shard, write it at the
/// destination (one message when both keys share a shard, a transaction otherwise).
async fn rename_generic(cx: &mut ConnCtx, args: &[&[u8]], nx: bool) {
    let (src, dst) = (args[1].to_vec(), args[2].to_vec());
    let d = dst.clone();
    let r = cx
        .hops()
        .on_key(args[2], move |c, ()| {
            let now = c.now;
            c.db().exists(&d, now)
        })
        .on_key(args[1], move |c, dst_exists| {
            let now = c.now;
            let db = c.db();
            if db.find(&src, now).is_none() {
                return Err(RenameErr::NoSuchKey);
            }
            if src == dst {
                // Redis answers without touching the key.
                return if nx { Err(RenameErr::Exists) } else { Ok(None) };
            }
            if nx && dst_exists {
                return Err(RenameErr::Exists);
            }
            Ok(db.remove(&src, now).map(|(_, v, at)| (v, at, src, dst)))
        })
        .on_key(args[2], move |c, taken| {
            if let Some((value, at, src, dst)) = taken? {
                let now = c.now;
                put_replace(c.db(), &dst, value, at, now);
                ev::emit(ev::GENERIC, "rename_from", c.db, &src);
                ev::emit(ev::GENERIC, "rename_to", c.db, &dst);
            }
            Ok(())
        })
        .run()
        .await;
    rename_reply(&mut cx.reply, r, nx);
}

fn copy<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let src_db = cx.db;
        let mut dst_db = cx.db;
        let mut replace = false;
        let mut j = 3;
        while j < args.len() {
            let more = args.len() - j - 1;
            if eq_ic(args[j], "replace") {
                replace = true;
            } else if eq_ic(args[j], "db") && more >= 1 {
                let Some(id) = int32_arg(&mut cx.reply, args[j + 1]) else {
                    return;
                };
                let id = i64::from(id);
                if !valid_db(cx, id) {
                    cx.reply.error(ERR_DB_INDEX);
                    return;
                }
                dst_db = id as usize;
                j += 1;
            } else {
                cx.reply.error(ERR_SYNTAX);
                return;
            }
            j += 1;
        }
        if src_db == dst_db && args[1] == args[2] {
            cx.reply.error(ERR_SAME_OBJECT);
            return;
        }
        // Look at the destination, read the source (a keyspace hit or miss), write the copy.
        let (src, dst) = (args[1].to_vec(), args[2].to_vec());
        let d = dst.clone();
        let copied = cx
            .hops()
            .on_key(args[2], move |c, ()| {
                let now = c.now;
                c.shard.dbs[dst_db].exists(&d, now)
            })
            .on_key(args[1], move |c, dst_exists| {
                let now = c.now;
                let db = &mut c.shard.dbs[src_db];
                let pos = db.find_read(&src, now)?;
                if !replace && dst_exists {
                    return None;
                }
                Some((db.at(pos).1.clone(), db.expire_at(pos)))
            })
            .on_key(args[2], move |c, got| {
                let Some((value, at)) = got else {
                    return false;
                };
                let now = c.now;
                put_replace(&mut c.shard.dbs[dst_db], &dst, value, at, now);
                ev::emit(ev::GENERIC, "copy_to", dst_db, &dst);
                true
            })
            .run()
            .await;
        cx.reply.int(copied as i64);
    })
}

/// MOVE key db: both databases of one key live on the key's shard, so this is a shard handler.
fn move_cmd(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(id) = int32_arg(cx.reply, args[2]) else {
        return;
    };
    if id < 0 || id as usize >= cx.shard.dbs.len() {
        cx.reply.error(ERR_DB_INDEX);
        return;
    }
    let dst_db = id as usize;
    if dst_db == cx.db {
        cx.reply.error(ERR_SAME_OBJECT);
        return;
    }
    let now = cx.now;
    let key = args[1];
    if !cx.shard.dbs[cx.db].exists(key, now) {
        cx.reply.int(0);
        return;
    }
    if cx.shard.dbs[dst_db].exists(key, now) {
        cx.reply.int(0);
        return;
    }
    let Some((k, v, at)) = cx.shard.dbs[cx.db].remove(key, now) else {
        cx.reply.int(0);
        return;
    };
    cx.shard.dbs[dst_db].insert_new_owned(k, v, at);
    ev::emit(ev::GENERIC, "move_from", cx.db, key);
    ev::emit(ev::GENERIC, "move_to", dst_db, key);
    cx.reply.int(1);
}

// ---------------------------------------------------------------------------------------------
// KEYS SCAN RANDOMKEY

fn keys<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let limit = cx.shared().config.keys_output_limit();
        let pattern: Arc<Vec<u8>> = Arc::new(args[1].to_vec());
        let all = pattern.as_slice() == b"*";
        let per_shard = cx
            .hops()
            .all_shards(move |c, ()| {
                let now = c.now;
                let db = c.db();
                let mut out: Vec<Vec<u8>> = Vec::new();
                let mut cur = 0u64;
                loop {
                    cur = db.scan(cur, |k, _, at| {
                        if out.len() >= limit || at.is_some_and(|t| t <= now) {
                            return;
                        }
                        let key = k.key();
                        if all || glob::matches(&pattern, key, false) {
                            out.push(key.to_vec());
                        }
                    });
                    if cur == 0 || out.len() >= limit {
                        break;
                    }
                }
                out
            })
            .run()
            .await;
        let total: usize = per_shard.iter().map(|v| v.len()).sum::<usize>().min(limit);
        cx.reply.array(total);
        for k in per_shard.iter().flatten().take(total) {
            cx.reply.bulk(k);
        }
    })
}

/// The part of one SCAN call done on one shard.
struct ScanStep {
    next: u64,
    visited: usize,
    keys: Vec<Vec<u8>>,
}

/// Scans one shard's db from `cursor`, stopping after `opts.count` visited entries, after
/// `opts.count * 10` table steps (sparse tables, like Redis's empty-bucket limit) or at its end.
/// Expired entries are skipped and deleted, like Redis's SCAN.
fn scan_shard(c: &mut CmdCtx<'_>, cursor: u64, opts: &scan::Opts<'_>) -> ScanStep {
    let budget = opts.count;
    let now = c.now;
    let db = c.db();
    let mut step = ScanStep {
        next: cursor,
        visited: 0,
        keys: Vec::new(),
    };
    let mut dead: Vec<Vec<u8>> = Vec::new();
    let max_steps = budget.saturating_mul(10);
    let mut steps = 0usize;
    loop {
        steps += 1;
        step.next = db.scan(step.next, |k, v, at| {
            step.visited += 1;
            let key = k.key();
            if at.is_some_and(|t| t <= now) {
                dead.push(key.to_vec());
                return;
            }
            if opts.matches(key) && opts.type_matches(v.type_name()) {
                step.keys.push(key.to_vec());
            }
        });
        if step.next == 0 || step.visited >= budget || steps >= max_steps {
            break;
        }
    }
    // Removing entries never moves others, so the cursor stays valid.
    for k in dead {
        db.find(&k, now);
    }
    step
}

fn scan<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let Some(cursor) = scan::cursor_arg(&mut cx.reply, args[1]) else {
            return;
        };
        let Some(opts) = scan::Opts::parse(&mut cx.reply, &args[2..], scan::Target::Keys) else {
            return;
        };
        let threads = cx.threads();
        let mut sid = (cursor >> SCAN_SHARD_SHIFT) as usize;
        let mut cur = cursor & SCAN_CURSOR_MASK;
        let budget = opts.count;
        let mut visited = 0usize;
        let mut keys: Vec<Vec<u8>> = Vec::new();
        // The hops own their copy of the options.
        let pattern: Option<Arc<[u8]>> = opts.pattern.map(Arc::from);
        let type_name: Option<Arc<[u8]>> = opts.type_name.map(Arc::from);
        while sid < threads {
            let p = pattern.clone();
            let t = type_name.clone();
            let left = budget - visited;
            // (A keyless command: its hops run unlocked, so `run_more` costs nothing.)
            let step = cx
                .hops()
                .on_shard(sid, move |c, ()| {
                    let opts = scan::Opts {
                        count: left,
                        pattern: p.as_deref(),
                        type_name: t.as_deref(),
                        novalues: false,
                    };
                    scan_shard(c, cur, &opts)
                })
                .run_more()
                .await;
            visited += step.visited;
            keys.extend(step.keys);
            cur = step.next;
            if cur != 0 {
                // The shard stopped early: resume there next call.
                break;
            }
            sid += 1;
            if visited >= budget {
                break;
            }
        }
        let next = if sid >= threads {
            0
        } else {
            ((sid as u64) << SCAN_SHARD_SHIFT) | cur
        };
        scan::reply_page(&mut cx.reply, next, &keys);
    })
}

fn randomkey<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let mut rng = damselfly_types::rand::Rng::from_entropy();
        for _ in 0..8 {
            let sizes = cx
                .hops()
                .all_shards(|c, ()| c.db().len() as u64)
                .run_more()
                .await;
            let total: u64 = sizes.iter().sum();
            if total == 0 {
                break;
            }
            let mut r = rng.below(total);
            let mut target = 0;
            for (i, &n) in sizes.iter().enumerate() {
                if r < n {
                    target = i;
                    break;
                }
                r -= n;
            }
            let key = cx
                .hops()
                .on_shard(target, |c, ()| {
                    let now = c.now;
                    let mut rng = c.shard.fork_rng();
                    c.db()
                        .random_key(|| rng.next_u64(), now)
                        .map(|k| k.key().to_vec())
                })
                .run_more()
                .await;
            if let Some(k) = key {
                cx.reply.bulk(&k);
                return;
            }
        }
        cx.reply.null();
    })
}

// ---------------------------------------------------------------------------------------------
// OBJECT

/// Is an LFU policy selected (access data are counters, not times)?
fn lfu_policy() -> bool {
    damselfly_core::engine::access::lfu()
}

fn object_encoding(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.find_read_notouch(args[2], now).map(|p| db.at(p).1) {
        Some(v) => cx.reply.bulk_str(v.encoding_name()),
        None => cx.reply.null(),
    }
}

fn object_freq(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find_read_notouch(args[2], now) else {
        cx.reply.null();
        return;
    };
    if !lfu_policy() {
        cx.reply.error(ERR_LFU_FREQ);
        return;
    }
    let f = db.freq(pos, now);
    cx.reply.int(f as i64);
}

fn object_idletime(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let Some(pos) = db.find_read_notouch(args[2], now) else {
        cx.reply.null();
        return;
    };
    if lfu_policy() {
        cx.reply.error(ERR_LFU_IDLE);
        return;
    }
    let idle = db.idle_secs(pos, now);
    cx.reply.int(idle as i64);
}

fn object_refcount(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let shared_ints = {
        let cfg = &cx.shared.config;
        // Redis stops sharing integers when maxmemory evicts by LRU/LFU (they need per-object
        // access data).
        !(cfg.maxmemory() > 0 && cfg.maxmemory_policy().by_access())
    };
    match cx.shard.dbs[cx.db].get_read(args[2], now) {
        None => cx.reply.null(),
        Some(v)
            if shared_ints
                && v.as_str()
                    .and_then(|s| s.as_int())
                    .is_some_and(|v| (0..SHARED_INTEGERS).contains(&v)) =>
        {
            cx.reply.int(SHARED_REFCOUNT)
        }
        Some(_) => cx.reply.int(1),
    }
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

fn object_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    cx.reply.array(OBJECT_HELP.len());
    for l in OBJECT_HELP {
        cx.reply.simple(l);
    }
}

// ---------------------------------------------------------------------------------------------
// DBSIZE FLUSHDB FLUSHALL SWAPDB

fn dbsize<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let sizes = cx
            .hops()
            .all_shards(|c, ()| c.db().len() as i64)
            .run()
            .await;
        cx.reply.int(sizes.iter().sum());
    })
}

/// Redis `getFlushCommandFlags`: nothing, ASYNC or SYNC.
fn flush_flags_ok(reply: &mut Reply, args: &[&[u8]]) -> bool {
    match args.len() {
        1 => true,
        2 if eq_ic(args[1], "async") || eq_ic(args[1], "sync") => true,
        _ => {
            reply.error(ERR_SYNTAX);
            false
        }
    }
}

/// After a FLUSHDB/FLUSHALL without ASYNC, freed pages go back to the OS at once (Redis's
/// `jemalloc_purge`), so RSS drops with the data.
fn purge_unless_async(args: &[&[u8]]) {
    if !args
        .iter()
        .skip(1)
        .any(|a| a.eq_ignore_ascii_case(b"async"))
    {
        damselfly_core::engine::memory::purge();
    }
}

fn flushdb<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if !flush_flags_ok(&mut cx.reply, args) {
            return;
        }
        cx.hops()
            .all_shards(|c, ()| {
                c.db().clear();
                damselfly_core::engine::tracking::forget_all();
            })
            .run()
            .await;
        damselfly_core::pubsub::tracking::flushed(&cx.worker).await;
        purge_unless_async(args);
        cx.reply.ok();
    })
}

/// FLUSHALL's save of the empty dataset when save points are configured (Redis's
/// `flushallCommand` calls `rdbSave`): persistence's, installed by the crate root, as the
/// keyspace family names no layer above the framework.
pub struct FlushallSave {
    /// Does this FLUSHALL save?
    pub saves: fn(&ConnCtx) -> bool,
    /// Saves under FLUSHALL's own all-shard locks, and concludes them.
    pub save: for<'a> fn(&'a mut ConnCtx) -> BoxFut<'a>,
}

static FLUSHALL_SAVE: std::sync::OnceLock<FlushallSave> = std::sync::OnceLock::new();

pub fn install_flushall_save(hook: FlushallSave) {
    let _ = FLUSHALL_SAVE.set(hook);
}

fn flushall<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if !flush_flags_ok(&mut cx.reply, args) {
            return;
        }
        // As Redis kills its saving child: a running snapshot stops (it would hold FLUSHALL's
        // shard locks until done) and fails; the previous file stays.
        if cx
            .shared()
            .persist
            .saving
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            cx.shared()
                .persist
                .abort
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let save = FLUSHALL_SAVE.get().filter(|h| (h.saves)(cx));
        let clear = cx.hops().all_shards(|c, ()| {
            if c.shared
                .persist
                .abort
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                damselfly_core::engine::snapshot::abandon_shard(c.shard);
            }
            for db in c.shard.dbs.iter_mut() {
                db.clear();
            }
            damselfly_core::engine::tracking::forget_all();
        });
        if let Some(h) = save {
            clear.run_more().await;
            (h.save)(cx).await;
        } else {
            clear.run().await;
        }
        damselfly_core::pubsub::tracking::flushed(&cx.worker).await;
        purge_unless_async(args);
        cx.reply.ok();
    })
}

fn swapdb<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let Some(a) = parse_int32(args[1]) else {
            cx.reply.error("ERR invalid first DB index");
            return;
        };
        let Some(b) = parse_int32(args[2]) else {
            cx.reply.error("ERR invalid second DB index");
            return;
        };
        if !valid_db(cx, a) || !valid_db(cx, b) {
            cx.reply.error(ERR_DB_INDEX);
            return;
        }
        if a != b {
            let (lo, hi) = (a.min(b) as usize, a.max(b) as usize);
            cx.hops()
                .all_shards(move |c, ()| {
                    let (l, r) = c.shard.dbs.split_at_mut(hi);
                    l[lo].swap(&mut r[0]);
                })
                .run()
                .await;
        }
        cx.reply.ok();
    })
}
