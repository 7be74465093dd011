//! HyperLogLog commands: PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST. The values are strings in
//! Redis's exact HLL format (`types/hll.rs`); semantics, replies and errors follow Redis 7.0
//! `hyperloglog.c`. PFCOUNT of one key caches the cardinality in the value (a write, as in
//! Redis); PFCOUNT of several keys and PFMERGE read every source on its shard (a copy of at
//! most 12 KiB each), merge the registers on the connection's thread and, for PFMERGE, write
//! the destination in a final hop under the transaction's locks.

use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::TtlMode;
use damselfly_dash::Pos;
use damselfly_types::compact::IntBuf;
use damselfly_types::hll::{self, Corrupt, ERR_INVALID, ERR_NOT_HLL, REGISTERS};
use damselfly_types::{CompactStr, Value, ValueRef};

const G: Group = Group::Hyperloglog;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("pfadd", -2, WRITE | DENYOOM | FAST, range(1, 1, 1), Shard(pfadd))
        .doc(G, "2.8.9", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist."),
    cmd("pfcount", -2, READONLY | MAY_REPLICATE, range(1, -1, 1), Conn(pfcount)).one_key(pfcount_one)
        .doc(G, "2.8.9", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s)."),
    cmd("pfmerge", -2, WRITE | DENYOOM, range(1, -1, 1), Conn(pfmerge))
        .doc(G, "2.8.9", "Merges one or more HyperLogLog values into a single key."),
    cmd("pfdebug", 3, WRITE | DENYOOM | ADMIN, range(2, 2, 1), Shard(pfdebug))
        .doc(G, "2.8.9", "Internal commands for debugging HyperLogLog values."),
    cmd("pfselftest", 1, ADMIN, NOKEYS, Local(pfselftest))
        .doc(G, "2.8.9", "An internal command for testing HyperLogLog values."),
];

/// `hll-sparse-max-bytes`.
fn sparse_max(c: &CmdCtx<'_>) -> usize {
    c.shared
        .config
        .enc_limit(EncLimit::HllSparseMaxBytes)
        .max(0) as usize
}

/// The bytes of `key`'s value if it is an HLL (Redis's `isHLLObjectOrReply`): `Ok(None)` for a
/// missing key, the error reply for a value that is not an HLL.
fn hll_at(c: &mut CmdCtx<'_>, key: &[u8]) -> Result<Option<Pos>, &'static str> {
    let now = c.now;
    let db = c.db();
    let Some(pos) = db.find_read(key, now) else {
        return Ok(None);
    };
    match db.at(pos).1.view() {
        ValueRef::Str(s) => {
            let mut buf: IntBuf = [0u8; 20];
            if hll::is_hll(s.bytes(&mut buf)) {
                Ok(Some(pos))
            } else {
                Err(ERR_NOT_HLL)
            }
        }
        _ => Err(ERR_WRONGTYPE),
    }
}

/// The bytes of the HLL at `pos` (checked by `hll_at`).
fn bytes_at<'a>(c: &'a mut CmdCtx<'_>, pos: Pos) -> &'a [u8] {
    match c.db().at(pos).1.as_str().and_then(|s| s.raw_bytes()) {
        Some(b) => b,
        None => &[],
    }
}

/// The HLL at `pos`, mutable in place (same length). Quiet: the caller marks the key modified
/// (`touch_key`) if it changed anything.
fn bytes_at_mut<'a>(c: &'a mut CmdCtx<'_>, pos: Pos) -> Option<&'a mut [u8]> {
    let v = c.db().at_mut_quiet(pos).as_str_mut()?;
    let len = v.len();
    Some(v.make_raw_mut(len))
}

/// A key's HLL bytes (a copy), `Ok(None)` for a missing key, or the error reply.
fn read_hll(c: &mut CmdCtx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, &'static str> {
    Ok(hll_at(c, key)?.map(|pos| bytes_at(c, pos).to_vec()))
}

/// Stores `bytes` as the value of existing key `key` (its expiry kept), or creates it.
fn write_hll(c: &mut CmdCtx<'_>, key: &[u8], bytes: &[u8]) {
    write_hll_as(c, key, bytes, true)
}

/// `write_hll`; `signal`: the change counts as a modification for WATCH (PFDEBUG's encoding
/// changes do not, as in Redis).
fn write_hll_as(c: &mut CmdCtx<'_>, key: &[u8], bytes: &[u8], signal: bool) {
    let now = c.now;
    let db = c.db();
    let value = Value::str(CompactStr::from_value_raw(bytes));
    match db.find(key, now) {
        Some(pos) if signal => *db.at_mut(pos) = value,
        Some(pos) => *db.at_mut_quiet(pos) = value,
        None => {
            db.insert_new(key, value, TtlMode::Clear);
        }
    }
}

/// PFADD key [element ...]
fn pfadd(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let key = args[1];
    let pos = match hll_at(c, key) {
        Ok(p) => p,
        Err(e) => return c.reply.error(e),
    };
    // A dense HLL changes in place (its length never changes); a sparse one is small: it is
    // edited as a copy and written back if it changed (it may grow, shrink or turn dense).
    if let Some(pos) = pos {
        if hll::encoding(bytes_at(c, pos)) == hll::DENSE {
            let mut updated = false;
            if let Some(b) = bytes_at_mut(c, pos) {
                for ele in &args[2..] {
                    updated |= hll::add_dense(&mut b[hll::HDR..], ele);
                }
                if updated {
                    hll::invalidate_cache(b);
                }
            }
            if updated {
                c.db().touch_key(key);
                ev::emit(ev::STRING, "pfadd", c.db, key);
            }
            return c.reply.int(updated as i64);
        }
    }
    let (mut bytes, mut updated) = match pos {
        Some(pos) => (bytes_at(c, pos).to_vec(), false),
        None => (hll::new_sparse(), true),
    };
    let max = sparse_max(c);
    for ele in &args[2..] {
        match hll::add(&mut bytes, ele, max) {
            Ok(true) => updated = true,
            Ok(false) => {}
            Err(Corrupt) => return c.reply.error(ERR_INVALID),
        }
    }
    if updated {
        hll::invalidate_cache(&mut bytes);
        write_hll(c, key, &bytes);
        ev::emit(ev::STRING, "pfadd", c.db, key);
    }
    c.reply.int(updated as i64);
}

/// The registers of several HLLs merged (`max` of each), in key order: the first key that is
/// not an HLL (or a corrupted one) gives its error. `dense`: some source was dense.
struct Merged {
    max: Box<[u8; REGISTERS]>,
    dense: bool,
}

/// One key read for a merge: its HLL bytes, nothing (missing), or the error reply.
type KeyRead = Result<Option<Vec<u8>>, &'static str>;

/// `last`: the command's final hops (PFCOUNT), else its locks stay for the write (PFMERGE).
async fn merge_sources(
    cx: &mut ConnCtx,
    keys: &[&[u8]],
    last: bool,
) -> Result<Merged, &'static str> {
    type Read = Vec<KeyRead>;
    let hops = cx.hops().per_shard_of(keys, 1, |c, ks, ()| -> Read {
        ks.iter().map(|k| read_hll(c, k)).collect()
    });
    let parts = if last {
        hops.run().await
    } else {
        hops.run_more().await
    };
    let mut values: Vec<Option<KeyRead>> = (0..keys.len()).map(|_| None).collect();
    for part in parts {
        for (g, r) in part.groups.into_iter().zip(part.result) {
            values[g] = Some(r);
        }
    }
    let mut merged = Merged {
        max: Box::new([0u8; REGISTERS]),
        dense: false,
    };
    for v in values {
        match v.unwrap_or(Ok(None))? {
            None => {}
            Some(b) => {
                merged.dense |= hll::encoding(&b) == hll::DENSE;
                hll::merge_into(&mut merged.max, &b).map_err(|_| ERR_INVALID)?;
            }
        }
    }
    Ok(merged)
}

/// PFCOUNT key [key ...]
fn pfcount<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if args.len() > 2 {
            // The cardinality of the union; nothing is cached.
            match merge_sources(cx, &args[1..], true).await {
                Ok(m) => cx.reply.int(hll::count_raw(&m.max) as i64),
                Err(e) => cx.reply.error(e),
            }
            return;
        }
        let key = args[1].to_vec();
        let r = cx
            .hops()
            .on_key(args[1], move |c, ()| count_one(c, &key))
            .run()
            .await;
        match r {
            Ok(n) => cx.reply.int(n as i64),
            Err(e) => cx.reply.error(e),
        }
    })
}

/// PFCOUNT of one key (`CommandSpec::one_key`).
fn pfcount_one(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    match count_one(c, args[1]) {
        Ok(n) => c.reply.int(n as i64),
        Err(e) => c.reply.error(e),
    }
}

/// PFCOUNT of one key: the cached cardinality, or a fresh one (then cached in the value, in
/// place: a modification, as Redis signals it).
fn count_one(c: &mut CmdCtx<'_>, key: &[u8]) -> Result<u64, &'static str> {
    let Some(pos) = hll_at(c, key)? else {
        return Ok(0);
    };
    let b = bytes_at(c, pos);
    if let Some(n) = hll::cached(b) {
        return Ok(n);
    }
    let n = hll::count(b).map_err(|_| ERR_INVALID)?;
    if let Some(b) = bytes_at_mut(c, pos) {
        hll::set_cache(b, n);
    }
    c.db().touch_key(key);
    Ok(n)
}

/// PFMERGE destkey [sourcekey ...]: the destination counts as a source too (Redis).
fn pfmerge<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let merged = match merge_sources(cx, &args[1..], false).await {
            Ok(m) => m,
            Err(e) => return cx.reply.error(e),
        };
        let dst = args[1].to_vec();
        let r = cx
            .hops()
            .on_key(args[1], move |c, ()| store_merged(c, &dst, &merged))
            .run()
            .await;
        match r {
            Ok(()) => cx.reply.ok(),
            Err(e) => cx.reply.error(e),
        }
    })
}

fn store_merged(c: &mut CmdCtx<'_>, dst: &[u8], m: &Merged) -> Result<(), &'static str> {
    // The destination was read as a source under the same locks: an HLL or missing.
    let mut bytes = read_hll(c, dst)?.unwrap_or_else(hll::new_sparse);
    if m.dense && hll::encoding(&bytes) == hll::SPARSE {
        bytes = hll::sparse_to_dense(&bytes).map_err(|_| ERR_INVALID)?;
    }
    let max = sparse_max(c);
    for (i, &v) in m.max.iter().enumerate() {
        if v != 0 {
            // Errors cannot happen here: the registers were just read (Redis ignores them).
            let _ = hll::raise(&mut bytes, i, v, max);
        }
    }
    hll::invalidate_cache(&mut bytes);
    write_hll(c, dst, &bytes);
    // A PFADD event: in theory a mass-add of elements (Redis).
    ev::emit(ev::STRING, "pfadd", c.db, dst);
    Ok(())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key
fn pfdebug(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let key = args[2];
    let mut bytes = match read_hll(c, key) {
        Ok(Some(b)) => b,
        Ok(None) => return c.reply.error("ERR The specified key does not exist"),
        Err(e) => return c.reply.error(e),
    };
    let sub = args[1];
    if eq_ic(sub, "getreg") {
        if hll::encoding(&bytes) == hll::SPARSE {
            match hll::sparse_to_dense(&bytes) {
                Ok(d) => bytes = d,
                Err(Corrupt) => return c.reply.error(ERR_INVALID),
            }
            write_hll_as(c, key, &bytes, false);
        }
        c.reply.array(REGISTERS);
        let regs = &bytes[hll::HDR..];
        for i in 0..REGISTERS {
            c.reply.int(hll::dense_get(regs, i) as i64);
        }
    } else if eq_ic(sub, "decode") {
        if hll::encoding(&bytes) != hll::SPARSE {
            return c.reply.error("ERR HLL encoding is not sparse");
        }
        match hll::decode(&bytes) {
            Ok(s) => c.reply.bulk(s.as_bytes()),
            Err(Corrupt) => c.reply.error(ERR_INVALID),
        }
    } else if eq_ic(sub, "encoding") {
        c.reply.simple(if hll::encoding(&bytes) == hll::DENSE {
            "dense"
        } else {
            "sparse"
        });
    } else if eq_ic(sub, "todense") {
        let mut converted = false;
        if hll::encoding(&bytes) == hll::SPARSE {
            match hll::sparse_to_dense(&bytes) {
                Ok(d) => {
                    write_hll_as(c, key, &d, false);
                    converted = true;
                }
                Err(Corrupt) => return c.reply.error(ERR_INVALID),
            }
        }
        c.reply.int(converted as i64);
    } else {
        let mut parts: Vec<&[u8]> = vec![b"ERR Unknown PFDEBUG subcommand '"];
        parts.push(cstr(sub, usize::MAX));
        parts.push(b"'");
        error_parts(c.reply, &parts);
    }
}

/// PFSELFTEST: Redis's self-test of the register code and the estimator (dense and sparse
/// side by side up to 10 million elements).
fn pfselftest(cx: &mut ConnCtx, _args: &[&[u8]]) {
    match selftest(
        cx.worker
            .shared
            .config
            .enc_limit(EncLimit::HllSparseMaxBytes)
            .max(0) as usize,
    ) {
        Ok(()) => cx.reply.ok(),
        Err(e) => cx.reply.error(&e),
    }
}

fn selftest(sparse_max: usize) -> Result<(), String> {
    let mut x = damselfly_types::rand::entropy() | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // 1: registers hold their values without touching their neighbours.
    let mut regs = vec![0u8; hll::DENSE_SIZE - hll::HDR];
    let mut want = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, w) in want.iter_mut().enumerate() {
            let r = (next() & 63) as u8;
            *w = r;
            hll::dense_set(&mut regs, i, r);
        }
        for (i, &w) in want.iter().enumerate() {
            let v = hll::dense_get(&regs, i);
            if v != w {
                return Err(format!("TESTFAILED Register {i} should be {w} but is {v}"));
            }
        }
    }
    // 2: the estimate stays within a few standard errors, dense and sparse agreeing.
    let mut dense = hll::sparse_to_dense(&hll::new_sparse()).map_err(|_| "TESTFAILED")?;
    let mut sparse = hll::new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = next();
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let _ = hll::add(&mut dense, &ele, sparse_max);
        let _ = hll::add(&mut sparse, &ele, sparse_max);
        if j != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max / 2 && hll::encoding(&sparse) != hll::SPARSE {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let d = hll::count(&dense).unwrap_or(0);
        if hll::count(&sparse).unwrap_or(u64::MAX) != d {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let mut maxerr = (relerr * 6.0 * checkpoint as f64).ceil() as u64;
        if j == 10 {
            maxerr = 1;
        }
        let abserr = (checkpoint as i64 - d as i64).unsigned_abs();
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}
