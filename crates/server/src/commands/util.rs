//! Helpers shared by command families: argument parsing with Redis's error texts, owned argument
//! copies for cross-thread execution, and the multi-shard fan-out used by multi-key commands.

use damselfly_protocol::Reply;

use super::{CmdCtx, ConnCtx};
use crate::engine::shard_of;

pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_NO_KEY: &str = "ERR no such key";
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_DB_INDEX: &str = "ERR DB index is out of range";

/// Lossy, length-limited text of an argument for error messages.
pub fn trunc(a: &[u8], max: usize) -> String {
    let a = &a[..a.len().min(max)];
    String::from_utf8_lossy(a).into_owned()
}

#[inline]
pub fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Redis `string2ll` semantics.
#[inline]
pub fn parse_i64(a: &[u8]) -> Option<i64> {
    crate::types::compact::parse_strict_i64(a)
}

/// Parses an integer argument or writes Redis's error.
pub fn int_arg(reply: &mut Reply, a: &[u8]) -> Option<i64> {
    let v = parse_i64(a);
    if v.is_none() {
        reply.error(ERR_NOT_INT);
    }
    v
}

/// Arguments copied into one allocation so they can travel to another thread.
pub struct OwnedArgs {
    data: Vec<u8>,
    ends: Vec<u32>,
}

impl OwnedArgs {
    pub fn new(args: &[&[u8]]) -> Self {
        let total: usize = args.iter().map(|a| a.len()).sum();
        let mut data = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(args.len());
        for a in args {
            data.extend_from_slice(a);
            ends.push(data.len() as u32);
        }
        OwnedArgs { data, ends }
    }

    pub fn collect<'a>(args: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut data = Vec::new();
        let mut ends = Vec::new();
        for a in args {
            data.extend_from_slice(a);
            ends.push(data.len() as u32);
        }
        OwnedArgs { data, ends }
    }

    pub fn slices(&self) -> Vec<&[u8]> {
        let mut out = Vec::with_capacity(self.ends.len());
        let mut start = 0usize;
        for &e in &self.ends {
            out.push(&self.data[start..e as usize]);
            start = e as usize;
        }
        out
    }
}

/// Result of running one shard's part of a multi-key command.
pub struct ShardPart<R> {
    pub shard: usize,
    /// Ordinals (0-based) of the argument groups this shard handled.
    pub groups: Vec<usize>,
    pub result: R,
}

/// Runs `f` with a shard context on `shard`, inside the current command's transaction or
/// through the lock-checked quick path (see `commands::tx`). The one way handlers touch shards.
pub fn on_shard<R, F>(cx: &ConnCtx, shard: usize, f: F) -> crate::engine::worker::Call<R>
where
    R: Send + 'static,
    F: FnOnce(&mut CmdCtx<'_>) -> R + Send + 'static,
{
    let ver = cx.reply.ver;
    let db = cx.db;
    let now = cx.now_ms;
    cx.shard_exec(shard, move |w| {
        let mut scratch = Reply::new(ver);
        let mut sh = w.shard.borrow_mut();
        let mut c = CmdCtx {
            shard: &mut sh,
            db,
            now,
            shared: &w.shared,
            reply: &mut scratch,
        };
        f(&mut c)
    })
}

/// Splits `args[first..]` into groups of `width` arguments (the first of each group is the key),
/// runs `f` on every shard owning at least one key with that shard's groups flattened, in
/// parallel, and returns each shard's result. Used by MGET, MSET, DEL, EXISTS...
///
/// When the keys span several shards, `execute` has already put the command in a transaction,
/// so the parts apply atomically.
pub async fn fan_out<R, F>(
    cx: &ConnCtx,
    args: &[&[u8]],
    first: usize,
    width: usize,
    f: F,
) -> Vec<ShardPart<R>>
where
    R: Send + 'static,
    F: Fn(&mut CmdCtx<'_>, &[&[u8]]) -> R + Send + Sync + Clone + 'static,
{
    let threads = cx.threads();
    let mut per: Vec<Vec<usize>> = vec![Vec::new(); threads];
    let groups = args[first..].len() / width;
    for g in 0..groups {
        let key = args[first + g * width];
        per[shard_of(key, threads)].push(g);
    }
    let mut calls = Vec::new();
    for (s, gs) in per.iter_mut().enumerate() {
        if gs.is_empty() {
            continue;
        }
        let owned = OwnedArgs::collect(gs.iter().flat_map(|&g| {
            args[first + g * width..first + (g + 1) * width]
                .iter()
                .copied()
        }));
        let f = f.clone();
        calls.push((
            s,
            std::mem::take(gs),
            on_shard(cx, s, move |c| f(c, &owned.slices())),
        ));
    }
    let mut out = Vec::with_capacity(calls.len());
    for (shard, groups, call) in calls {
        out.push(ShardPart {
            shard,
            groups,
            result: call.await,
        });
    }
    out
}

/// Runs `f` with a shard context on every shard (DBSIZE, FLUSHDB, KEYS...), in parallel.
pub async fn on_all_shards<R, F>(cx: &ConnCtx, f: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(&mut CmdCtx<'_>) -> R + Send + Sync + Clone + 'static,
{
    let calls: Vec<_> = (0..cx.threads())
        .map(|s| on_shard(cx, s, f.clone()))
        .collect();
    let mut out = Vec::with_capacity(calls.len());
    for c in calls {
        out.push(c.await);
    }
    out
}
