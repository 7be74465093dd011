//! DEBUG and MEMORY.

use std::time::Duration;

use crate::commands::connection::help_reply;
use crate::commands::util::*;
use crate::commands::{BoxFut, CmdCtx, ConnCtx};
use crate::engine::db::TtlMode;
use damselfly_types::compact::fmt_i64;
use damselfly_types::{CompactStr, Value, ValueRef};

use crate::process::sysinfo::{human_bytes, mem_stats};

const ERR_POSITIVE: &str = "ERR value is out of range, must be positive";

fn positive_arg(cx: &mut ConnCtx, a: &[u8]) -> Option<u64> {
    match parse_i64(a) {
        Some(v) if v >= 0 => Some(v as u64),
        _ => {
            cx.reply.error(ERR_POSITIVE);
            None
        }
    }
}

/// Lenient float like C's strtod on the leading number (DEBUG SLEEP never fails).
fn lenient_f64(a: &[u8]) -> f64 {
    let s = String::from_utf8_lossy(a);
    let s = s.trim();
    let mut end = 0;
    for (i, c) in s.char_indices() {
        if c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0) {
            end = i + 1;
        } else {
            break;
        }
    }
    s[..end].parse().unwrap_or(0.0)
}

fn subcommand_error(cx: &mut ConnCtx, sub: &[u8], cmd: &str) {
    error_parts(
        &mut cx.reply,
        &[
            b"ERR unknown subcommand or wrong number of arguments for '",
            cstr(sub, 128),
            b"'. Try ",
            cmd.as_bytes(),
            b" HELP.",
        ],
    );
}

/// `enable-debug-command`: DEBUG is refused unless `yes`, or `local` and the client is on
/// loopback or the unix socket (as Redis 7, where it is off by default).
fn debug_allowed(cx: &ConnCtx) -> bool {
    use crate::config::Allow;
    match cx.shared().config.enable_debug_command() {
        Allow::Yes => true,
        Allow::Local => cx.client.info.borrow().local,
        Allow::No => false,
    }
}

/// DEBUG RELOAD replaces the dataset at one point in time: every shard, exclusively.
pub fn debug_plan(args: &[&[u8]], plan: &mut dyn crate::commands::PlanSink) {
    if args
        .get(1)
        .is_some_and(|a| a.eq_ignore_ascii_case(b"reload"))
    {
        plan.lock_all_shards(true);
    }
}

pub fn debug<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if !debug_allowed(cx) {
            cx.reply.error(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
            );
            return;
        }
        let sub = args[1].to_ascii_lowercase();
        let n = args.len();
        match (sub.as_slice(), n) {
            (b"help", 2) => debug_help(cx),
            (b"populate", 3..=5) => debug_populate(cx, args).await,
            // DEBUG REPLICATE cmd [args...]: into the replication stream, not executed (to
            // test replicas' handling of commands they cannot run).
            (b"replicate", 3..) => {
                use crate::engine::journal;
                if journal::active() {
                    journal::push(journal::Item::One(journal::Record {
                        db: cx.db,
                        resp: journal::encode(&args[2..]),
                    }));
                }
                cx.reply.ok();
            }
            (b"protocol", 3) => debug_protocol(cx, args[2]),
            (b"wait-key", 4..) => debug_wait_key(cx, args).await,
            (b"sleep", 3) => {
                let secs = lenient_f64(args[2]);
                if secs.is_finite() && secs > 0.0 {
                    cx.worker.set_busy(true);
                    std::thread::sleep(Duration::from_secs_f64(secs.min(86_400.0)));
                    cx.worker.set_busy(false);
                }
                cx.reply.ok();
            }
            (b"object", 3) => {
                let key = args[2];
                let owned = OwnedArgs::new(args);
                let bytes = cx
                    .hops()
                    .on_key(key, move |c, ()| {
                        debug_object(c, &owned.slices());
                        c.reply.take()
                    })
                    .run()
                    .await;
                cx.reply.raw(&bytes);
            }
            (b"digest", 2) => {
                let parts = cx
                    .hops()
                    .all_shards(|c, ()| {
                        let mut acc = [0u8; 20];
                        for (i, db) in c.shard.dbs.iter().enumerate() {
                            let mut cursor = 0;
                            loop {
                                cursor = db.scan(cursor, |k, v, at| {
                                    let d =
                                        damselfly_types::digest::key_digest(i, k.as_bytes(), v, at);
                                    damselfly_types::digest::combine(&mut acc, &d);
                                });
                                if cursor == 0 {
                                    break;
                                }
                            }
                        }
                        acc
                    })
                    .run()
                    .await;
                let mut all = [0u8; 20];
                for p in &parts {
                    damselfly_types::digest::combine(&mut all, p);
                }
                cx.reply.simple(&damselfly_types::digest::hex(&all));
            }
            (b"digest-value", _) => {
                let mut out = Vec::with_capacity(n - 2);
                for (i, key) in args[2..].iter().enumerate() {
                    let owned = key.to_vec();
                    let hop = cx.hops().on_key(key, move |c, ()| {
                        let now = c.now;
                        let db = c.db();
                        db.find(&owned, now)
                            .map(|pos| damselfly_types::digest::value_digest(db.at(pos).1))
                            .unwrap_or([0; 20])
                    });
                    // One hop per key; only the last one ends the command.
                    let d = if i + 3 == n {
                        hop.run().await
                    } else {
                        hop.run_more().await
                    };
                    out.push(damselfly_types::digest::hex(&d));
                }
                cx.reply.array(out.len());
                for d in out {
                    cx.reply.simple(&d);
                }
            }
            (b"set-active-expire", 3) => {
                let on = parse_i64(args[2]).unwrap_or(0) != 0;
                cx.hops()
                    .all_shards(move |c, ()| c.shard.active_expire = on)
                    .run()
                    .await;
                cx.reply.ok();
            }
            (b"reload", _) => crate::persistence::commands::reload(cx, &args[2..]).await,
            (b"error", 3) => cx.reply.error_bytes(args[2]),
            (b"log", 3) => {
                crate::log_warning!("DEBUG LOG: {}", String::from_utf8_lossy(args[2]));
                cx.reply.ok();
            }
            // A new history: new master_replid, no second id (Redis's changeReplicationId +
            // clearReplicationId2), so replicas must resynchronize fully.
            (b"change-repl-id", 2) => {
                let mut m = crate::replication::master();
                m.replid = crate::replication::new_replid();
                m.replid2 = "0".repeat(40);
                m.second_offset = -1;
                drop(m);
                cx.reply.ok();
            }
            (b"quicklist-packed-threshold", 3) => {
                let ok = crate::config::parse_memory(&String::from_utf8_lossy(args[2]))
                    .is_some_and(damselfly_types::rdb::object::set_list_packed_threshold);
                if ok {
                    cx.reply.ok();
                } else {
                    cx.reply.error(
                        "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                    );
                }
            }
            (b"listpack", 3) | (b"quicklist", 3 | 4) => {
                let key = args[2].to_vec();
                let want_list = sub.as_slice() == b"quicklist";
                let parts: Option<(String, String)> = cx
                    .hops()
                    .on_key(args[2], move |c, ()| {
                        let now = c.now;
                        let db = c.db();
                        let pos = db.find_read_notouch(&key, now)?;
                        let v = db.at(pos).1;
                        Some((v.encoding_name().to_string(), describe_packed(v)))
                    })
                    .run()
                    .await;
                match parts {
                    None => cx.reply.error(ERR_NO_KEY),
                    Some((enc, text)) => {
                        let (kind, done) = if want_list {
                            ("quicklist", "Quicklist structure printed on stdout")
                        } else {
                            ("listpack", "Listpack structure printed on stdout")
                        };
                        if enc != kind {
                            cx.reply.error(&format!("ERR Not a {kind} encoded object."));
                        } else {
                            crate::log_notice!("DEBUG {}: {}", kind.to_uppercase(), text);
                            cx.reply.simple(done);
                        }
                    }
                }
            }
            (b"set-disable-deny-scripts", 3) => {
                crate::scripting::DENY_SCRIPT_OFF.store(
                    parse_i64(args[2]).unwrap_or(0) != 0,
                    std::sync::atomic::Ordering::Relaxed,
                );
                cx.reply.ok();
            }
            (b"pause-cron", 3) => {
                crate::engine::CRON_PAUSED.store(
                    parse_i64(args[2]).unwrap_or(0) != 0,
                    std::sync::atomic::Ordering::Relaxed,
                );
                cx.reply.ok();
            }
            (b"replybuffer", 4) if eq_ic(args[2], "resizing") => {
                crate::client::limits::set_reply_resizing(parse_i64(args[3]).unwrap_or(0) != 0);
                cx.reply.ok();
            }
            (b"replybuffer", 4) if eq_ic(args[2], "peak-reset-time") => cx.reply.error(
                "ERR damselfly does not resize reply buffers by their peak (only RESIZING applies)",
            ),
            (b"config-rewrite-force-all", 2) => {
                match crate::config::rewrite::rewrite(&cx.shared().config, true) {
                    Ok(()) => cx.reply.ok(),
                    Err(e) => cx
                        .reply
                        .error(&format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}")),
                }
            }
            _ => subcommand_error(cx, args[1], "DEBUG"),
        }
    })
}

fn debug_help(cx: &mut ConnCtx) {
    help_reply(
        cx,
        "DEBUG",
        &[
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "LISTPACK <key>",
            "    Show low level info about the listpack encoding of <key> (in the server log).",
            "QUICKLIST <key> [<0|1>]",
            "    Show low level info about the quicklist encoding of <key> (in the server log).",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    (here: the list elements a snapshot writes as PLAIN quicklist nodes).",
            "CONFIG-REWRITE-FORCE-ALL",
            "    Like CONFIG REWRITE but writes all configuration options, including",
            "    keywords not listed in original configuration file or default values.",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show low level info about the `key` and associated value.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ],
    );
}

/// DEBUG PROTOCOL <type>: one reply of each RESP type, for client tests (Redis's values).
fn debug_protocol(cx: &mut ConnCtx, name: &[u8]) {
    let r = &mut cx.reply;
    match name.to_ascii_lowercase().as_slice() {
        b"string" => r.bulk(b"Hello World"),
        b"integer" => r.int(12345),
        // Redis's test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => r.double(3.141),
        b"bignum" => r.big_number("1234567999999999999999999999999999999"),
        b"null" => r.null(),
        b"array" | b"set" => {
            if name.eq_ignore_ascii_case(b"array") {
                r.array(3);
            } else {
                r.set(3);
            }
            (0..3).for_each(|j| r.int(j));
        }
        b"map" => {
            r.map(3);
            for j in 0..3 {
                r.int(j);
                r.bool(j == 1);
            }
        }
        b"attrib" => {
            // An attribute is not a reply: a real one follows (RESP2 gets only that).
            if r.is_resp3() {
                r.attribute(1);
                r.bulk(b"key-popularity");
                r.array(2);
                r.bulk(b"key:123");
                r.int(90);
            }
            r.bulk(b"Some real reply following the attribute");
        }
        b"push" => {
            if !r.is_resp3() {
                return r.error("ERR RESP2 is not supported by this command");
            }
            r.push(2);
            r.bulk(b"server-cpu-usage");
            r.int(42);
            r.bulk(b"Some real reply following the push reply");
        }
        b"true" => r.bool(true),
        b"false" => r.bool(false),
        b"verbatim" => r.verbatim("txt", b"This is a verbatim\nstring"),
        _ => r.error(
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

/// DEBUG POPULATE: every shard walks all indices and inserts only the keys it owns, so the work
/// is spread over the shards and runs in parallel.
async fn debug_populate(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some(count) = positive_arg(cx, args[2]) else {
        return;
    };
    let prefix: Vec<u8> = if args.len() >= 4 {
        args[3].to_vec()
    } else {
        b"key".to_vec()
    };
    let size = if args.len() == 5 {
        match positive_arg(cx, args[4]) {
            Some(v) => v as usize,
            None => return,
        }
    } else {
        0
    };
    if count > (1 << 34) || size > (1 << 29) {
        cx.reply.error("ERR OOM in dictTryExpand");
        return;
    }
    cx.hops()
        .all_shards(move |c, ()| populate_shard(c, count, &prefix, size))
        .run()
        .await;
    cx.reply.ok();
}

fn populate_shard(c: &mut CmdCtx<'_>, count: u64, prefix: &[u8], size: usize) {
    let now = c.now;
    let mut key = Vec::with_capacity(prefix.len() + 24);
    let mut val = Vec::with_capacity(size.max(32));
    let mut ibuf = [0u8; 20];
    for j in 0..count {
        let digits = fmt_i64(j as i64, &mut ibuf);
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(digits);
        if !c.owns(&key) {
            continue;
        }
        let db = c.db();
        if db.find(&key, now).is_some() {
            continue;
        }
        val.clear();
        val.extend_from_slice(b"value:");
        val.extend_from_slice(digits);
        if size > 0 {
            val.resize(size, 0);
        }
        db.insert_new(
            &key,
            Value::str(CompactStr::from_value(&val)),
            TtlMode::Clear,
        );
    }
}

/// Bytes of an RDB length prefix.
fn rdb_len_bytes(len: usize) -> usize {
    if len < 64 {
        1
    } else if len < 16384 {
        2
    } else if len <= u32::MAX as usize {
        5
    } else {
        9
    }
}

/// DEBUG LISTPACK / QUICKLIST's text for the log: the encoding, the element count and the
/// elements (at most 64, each cut at 64 bytes).
fn describe_packed(v: &damselfly_types::Value) -> String {
    use damselfly_types::ValueRef;
    let mut items: Vec<String> = Vec::new();
    let show = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(64)]).into_owned();
    let n = match v.view() {
        ValueRef::List(l) => {
            for e in l.to_vecs().iter().take(64) {
                items.push(show(e));
            }
            l.len()
        }
        ValueRef::Hash(h) => {
            let mut buf = [0u8; 20];
            h.for_each(|f, val| {
                if items.len() < 64 {
                    items.push(show(f));
                    items.push(show(val.bytes(&mut buf)));
                }
            });
            h.len()
        }
        ValueRef::ZSet(z) => {
            z.range(0, z.len().min(32), false, |m, sc| {
                items.push(show(m));
                items.push(sc.to_string());
            });
            z.len()
        }
        _ => 0,
    };
    format!("{} entries: [{}]", n, items.join(", "))
}

fn debug_object(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let db = c.db();
    // As Redis's: the table as it is, a logically expired key included (not deleted here).
    let Some(pos) = db.prime().find(args[2]) else {
        c.reply.error(ERR_NO_KEY);
        return;
    };
    let (_, v) = db.at(pos);
    let ser = match v.view() {
        ValueRef::Str(s) => match s.as_int() {
            Some(i) if i8::try_from(i).is_ok() => 2,
            Some(i) if i16::try_from(i).is_ok() => 3,
            Some(i) if i32::try_from(i).is_ok() => 5,
            _ => rdb_len_bytes(s.len()) + s.len(),
        },
        _ => 0,
    };
    let line = format!(
        "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:0 lru_seconds_idle:0",
        v as *const Value,
        v.encoding_name(),
        ser
    );
    c.reply.simple(&line);
}

// ---------------------------------------------------------------------------------------------
// MEMORY.

/// Bytes a heap block of `n` bytes really costs (allocator size classes, roughly).
fn alloc_size(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.div_ceil(8) * 8
    }
}

pub fn memory_usage(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let mut j = 3;
    while j < args.len() {
        if eq_ic(args[j], "samples") && j + 1 < args.len() {
            match parse_i64(args[j + 1]) {
                Some(v) if v >= 0 => {}
                Some(_) => {
                    c.reply.error(ERR_SYNTAX);
                    return;
                }
                None => {
                    c.reply.error(ERR_NOT_INT);
                    return;
                }
            }
            j += 2;
        } else {
            c.reply.error(ERR_SYNTAX);
            return;
        }
    }
    let now = c.now;
    let db = c.db();
    let Some(pos) = db.find(args[2], now) else {
        c.reply.null();
        return;
    };
    let len = db.len().max(1);
    // The table's own bytes spread over its keys, capped so a near-empty table doesn't make one
    // small key look huge.
    let overhead = (db.table_mem() / len).min(32);
    let ttl = if db.expire_at(pos).is_some() { 32 } else { 0 };
    let (k, v) = db.at(pos);
    let total = 32 + overhead + ttl + alloc_size(k.heap_size()) + alloc_size(v.heap_size());
    c.reply.int(total as i64);
}

pub fn memory_stats<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let per_shard = cx
            .hops()
            .all_shards(|c, ()| {
                c.shard
                    .dbs
                    .iter()
                    .map(|d| {
                        let main = d.prime().mem_usage() as u64;
                        let total = d.table_mem() as u64;
                        (d.len() as u64, main, total.saturating_sub(main))
                    })
                    .collect::<Vec<_>>()
            })
            .run()
            .await;
        let mut dbs: Vec<(u64, u64, u64)> = Vec::new();
        for s in per_shard {
            if dbs.len() < s.len() {
                dbs.resize(s.len(), (0, 0, 0));
            }
            for (i, d) in s.iter().enumerate() {
                dbs[i].0 += d.0;
                dbs[i].1 += d.1;
                dbs[i].2 += d.2;
            }
        }
        let m = mem_stats();
        let keys: u64 = dbs.iter().map(|d| d.0).sum();
        let overhead: u64 = dbs.iter().map(|d| d.1 + d.2).sum::<u64>().min(m.allocated);
        let dataset = m.allocated - overhead;
        let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        enum V {
            I(i64),
            D(f64),
            Db(u64, u64),
        }
        let mut out: Vec<(String, V)> = vec![
            ("peak.allocated".into(), V::I(m.peak as i64)),
            ("total.allocated".into(), V::I(m.allocated as i64)),
            ("startup.allocated".into(), V::I(0)),
            ("replication.backlog".into(), V::I(0)),
            ("clients.slaves".into(), V::I(0)),
            (
                "clients.normal".into(),
                V::I(crate::client::evict::total() as i64),
            ),
            ("cluster.links".into(), V::I(0)),
            ("aof.buffer".into(), V::I(0)),
            ("lua.caches".into(), V::I(0)),
            ("functions.caches".into(), V::I(0)),
        ];
        for (i, d) in dbs.iter().enumerate().filter(|(_, d)| d.0 > 0) {
            out.push((format!("db.{i}"), V::Db(d.1, d.2)));
        }
        let per_key = m.allocated.checked_div(keys).unwrap_or(0);
        let signed = |a: u64, b: u64| a as i64 - b as i64;
        out.extend([
            ("overhead.total".into(), V::I(overhead as i64)),
            ("keys.count".into(), V::I(keys as i64)),
            ("keys.bytes-per-key".into(), V::I(per_key as i64)),
            ("dataset.bytes".into(), V::I(dataset as i64)),
            (
                "dataset.percentage".into(),
                V::D(ratio(dataset, m.allocated) * 100.0),
            ),
            (
                "peak.percentage".into(),
                V::D(ratio(m.allocated, m.peak) * 100.0),
            ),
            ("allocator.allocated".into(), V::I(m.allocator as i64)),
            ("allocator.active".into(), V::I(m.active as i64)),
            ("allocator.resident".into(), V::I(m.resident as i64)),
            (
                "allocator-fragmentation.ratio".into(),
                V::D(ratio(m.active, m.allocated)),
            ),
            (
                "allocator-fragmentation.bytes".into(),
                V::I(signed(m.active, m.allocated)),
            ),
            (
                "allocator-rss.ratio".into(),
                V::D(ratio(m.resident, m.active)),
            ),
            (
                "allocator-rss.bytes".into(),
                V::I(signed(m.resident, m.active)),
            ),
            ("rss-overhead.ratio".into(), V::D(ratio(m.rss, m.resident))),
            ("rss-overhead.bytes".into(), V::I(signed(m.rss, m.resident))),
            ("fragmentation".into(), V::D(ratio(m.rss, m.allocated))),
            (
                "fragmentation.bytes".into(),
                V::I(signed(m.rss, m.allocated)),
            ),
        ]);
        let r = &mut cx.reply;
        r.map(out.len());
        for (k, v) in out {
            r.bulk_str(&k);
            match v {
                V::I(i) => r.int(i),
                V::D(d) => r.double(d),
                V::Db(main, expires) => {
                    r.map(2);
                    r.bulk_str("overhead.hashtable.main");
                    r.int(main as i64);
                    r.bulk_str("overhead.hashtable.expires");
                    r.int(expires as i64);
                }
            }
        }
    })
}

pub fn memory_doctor(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let m = mem_stats();
    let text = if m.allocated < 5 * 1024 * 1024 {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting."
    } else {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base."
    };
    cx.reply.verbatim("txt", text.as_bytes());
}

pub fn memory_malloc_stats(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let m = mem_stats();
    let metadata = tikv_jemalloc_ctl::stats::metadata::read().unwrap_or(0);
    let mapped = tikv_jemalloc_ctl::stats::mapped::read().unwrap_or(0);
    let retained = tikv_jemalloc_ctl::stats::retained::read().unwrap_or(0);
    let text = format!(
        "___ Begin jemalloc statistics ___\nAllocated: {}, active: {}, metadata: {}, resident: {}, mapped: {}, retained: {}\nRSS: {} ({})\n--- End jemalloc statistics ---\n",
        m.allocated,
        m.active,
        metadata,
        m.resident,
        mapped,
        retained,
        m.rss,
        human_bytes(m.rss)
    );
    cx.reply.verbatim("txt", text.as_bytes());
}

pub fn memory_purge(cx: &mut ConnCtx, _args: &[&[u8]]) {
    crate::engine::memory::purge();
    cx.reply.ok();
}

pub fn memory_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
}

/// `DEBUG WAIT-KEY <timeout-seconds> key [key ...]`: a test hook for the blocking-command
/// machinery until the list types exist. Blocks until one of the keys holds a string (0 = wait
/// forever), then deletes it and replies `[key, value]` — atomically with the write that made it
/// ready, exactly once across shards, FIFO among waiters; a null array on timeout.
async fn debug_wait_key(cx: &mut ConnCtx, args: &[&[u8]]) {
    use crate::engine::db::Db;
    use crate::engine::waiters::Serve;

    struct GetDel(damselfly_protocol::RespVersion);
    impl Serve for GetDel {
        fn ready(&self, db: &mut Db, key: &[u8], now: u64) -> bool {
            db.get(key, now).is_some_and(|v| v.is_str())
        }
        fn take(&self, db: &mut Db, key: &[u8], now: u64) -> Vec<u8> {
            let mut r = damselfly_protocol::Reply::new(self.0);
            match db
                .remove(key, now)
                .and_then(|(_, v, _)| v.as_str().map(|s| s.to_vec()))
            {
                Some(v) => {
                    r.array(2);
                    r.bulk(key);
                    r.bulk(&v);
                }
                _ => r.null_array(),
            }
            r.take()
        }
    }

    let secs = std::str::from_utf8(args[2])
        .ok()
        .and_then(|s| s.parse::<f64>().ok());
    let Some(secs) = secs.filter(|s| s.is_finite() && *s >= 0.0) else {
        cx.reply.error("ERR timeout is not a float or out of range");
        return;
    };
    let timeout = (secs > 0.0).then(|| std::time::Duration::from_secs_f64(secs));
    let serve = std::sync::Arc::new(GetDel(cx.reply.ver));
    match crate::commands::coordinator::wait::serve_or_block(cx, &args[3..], serve, timeout).await {
        Some(bytes) => cx.reply.raw(&bytes),
        None => cx.reply.null_array(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_float() {
        assert_eq!(lenient_f64(b"1.5"), 1.5);
        assert_eq!(lenient_f64(b"0.25abc"), 0.25);
        assert_eq!(lenient_f64(b"abc"), 0.0);
        assert_eq!(lenient_f64(b""), 0.0);
    }

    #[test]
    fn rdb_lengths() {
        assert_eq!(rdb_len_bytes(10), 1);
        assert_eq!(rdb_len_bytes(100), 2);
        assert_eq!(rdb_len_bytes(20000), 5);
    }
}
