//! Helpers shared by command families: argument parsing with Redis's error texts, owned argument
//! copies for cross-thread execution, and the multi-shard fan-out used by multi-key commands.

use damselfly_protocol::Reply;

use super::{CmdCtx, ConnCtx};
use crate::engine::shard_of;
use crate::engine::vll::{self, SchedHop};

pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_NO_KEY: &str = "ERR no such key";
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_DB_INDEX: &str = "ERR DB index is out of range";

/// An argument as Redis's `%.<max>s` prints it into an error message: the raw bytes up to the
/// first NUL, at most `max` of them (no UTF-8 repair: replies echo the client's bytes).
pub fn cstr(a: &[u8], max: usize) -> &[u8] {
    let a = &a[..a.len().min(max)];
    match a.iter().position(|&c| c == 0) {
        Some(nul) => &a[..nul],
        None => a,
    }
}

/// An error reply assembled from byte pieces (for messages quoting client arguments, which
/// need not be UTF-8; see `cstr`).
pub fn error_parts(reply: &mut Reply, parts: &[&[u8]]) {
    reply.error_bytes(&parts.concat());
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
    /// End offset of each argument in `data` (full width: arguments and their total are bounded
    /// only by proto-max-bulk-len and the query buffer limit, both configurable past 4 GiB).
    ends: Vec<usize>,
}

impl OwnedArgs {
    pub fn new(args: &[&[u8]]) -> Self {
        let total: usize = args.iter().map(|a| a.len()).sum();
        let mut data = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(args.len());
        for a in args {
            data.extend_from_slice(a);
            ends.push(data.len());
        }
        OwnedArgs { data, ends }
    }

    /// Sized in a first pass over `args`: growing the buffers showed up as ~4% of an MSET.
    pub fn collect<'a>(args: impl Iterator<Item = &'a [u8]> + Clone) -> Self {
        let (n, total) = args.clone().fold((0, 0), |(n, t), a| (n + 1, t + a.len()));
        let mut data = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(n);
        for a in args {
            data.extend_from_slice(a);
            ends.push(data.len());
        }
        OwnedArgs { data, ends }
    }

    pub fn slices(&self) -> Vec<&[u8]> {
        let mut out = Vec::with_capacity(self.ends.len());
        let mut start = 0usize;
        for &e in &self.ends {
            out.push(&self.data[start..e]);
            start = e;
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
/// through the lock-checked quick path (see `commands::coordinator`). The one way handlers touch shards.
pub fn on_shard<R, F>(cx: &ConnCtx, shard: usize, f: F) -> crate::engine::worker::Call<R>
where
    R: Send + 'static,
    F: FnOnce(&mut CmdCtx<'_>) -> R + Send + 'static,
{
    cx.shard_exec(shard, shard_job(cx, f))
}

/// Wraps `f` into work for a shard thread: a command context over that thread's shard.
fn shard_job<R, F>(
    cx: &ConnCtx,
    f: F,
) -> impl FnOnce(&std::rc::Rc<crate::engine::Worker>) -> R + Send + 'static
where
    F: FnOnce(&mut CmdCtx<'_>) -> R + Send + 'static,
{
    let ver = cx.reply.ver;
    let db = cx.db;
    let now = cx.now_ms;
    move |w| {
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
    }
}

/// Splits `args[first..]` into groups of `width` arguments (the first of each group is the key),
/// runs `f` on every shard owning at least one key with that shard's groups flattened, in
/// parallel, and returns each shard's result. Used by MGET, MSET, DEL, EXISTS...
///
/// When the keys span several shards, `execute` has already put the command in a transaction,
/// so the parts apply atomically.
pub async fn fan_out<R, F>(
    cx: &mut ConnCtx,
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
    let groups = args[first..].len() / width;
    // Two passes so that every shard's group list is allocated once, at its final size.
    let owner: smallvec::SmallVec<[u16; 16]> = match cx.routes.get(args, first, width) {
        Some(r) => r.iter().copied().collect(),
        None => (0..groups)
            .map(|g| shard_of(args[first + g * width], threads) as u16)
            .collect(),
    };
    let mut count: smallvec::SmallVec<[usize; 8]> = smallvec::smallvec![0; threads];
    for &s in &owner {
        count[s as usize] += 1;
    }
    let mut per: Vec<Vec<usize>> = count.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (g, &s) in owner.iter().enumerate() {
        per[s as usize].push(g);
    }
    let owned_for = |gs: &[usize]| {
        OwnedArgs::collect(gs.iter().flat_map(|&g| {
            args[first + g * width..first + (g + 1) * width]
                .iter()
                .copied()
        }))
    };
    // A single-hop transaction with a deferred shard: run that shard's part first, in the same
    // message that schedules the transaction there; the other parts only after it (see
    // `ConnCtx::tx_begin_single_hop`).
    let mut early: Option<ShardPart<R>> = None;
    if let Some(d) = cx
        .tx
        .as_ref()
        .and_then(|t| t.deferred.as_ref())
        .map(|d| d.shard)
    {
        let gs = std::mem::take(&mut per[d]);
        let owned = owned_for(&gs);
        let f = f.clone();
        let mut job = shard_job(cx, move |c| f(c, &owned.slices()));
        let result = loop {
            match schedule_and_hop(cx, job).await {
                Ok(r) => break r,
                Err(back) => {
                    job = back;
                    cx.tx_reschedule_deferred().await;
                }
            }
        };
        if let Some(t) = cx.tx.as_mut() {
            t.deferred = None;
            t.concluded.borrow_mut().push(d);
        }
        early = Some(ShardPart {
            shard: d,
            groups: gs,
            result,
        });
    }
    let mut calls = Vec::new();
    for (s, gs) in per.iter_mut().enumerate() {
        if gs.is_empty() {
            continue;
        }
        let owned = owned_for(gs);
        let f = f.clone();
        calls.push((
            s,
            std::mem::take(gs),
            on_shard(cx, s, move |c| f(c, &owned.slices())),
        ));
    }
    let mut out = Vec::with_capacity(calls.len() + 1);
    for (shard, groups, call) in calls {
        out.push(ShardPart {
            shard,
            groups,
            result: call.await,
        });
    }
    if let Some(p) = early {
        let at = out.partition_point(|q| q.shard < p.shard);
        out.insert(at, p);
    }
    out
}

/// The deferred shard's message: schedule the current transaction there and run `job` as its
/// only hop, concluding it in place. `Err(job)` when the shard refuses the id (it already ran a
/// younger transaction): nothing ran, and the caller retries under a new id.
async fn schedule_and_hop<R, J>(cx: &ConnCtx, job: J) -> Result<R, J>
where
    R: Send + 'static,
    J: FnOnce(&std::rc::Rc<crate::engine::Worker>) -> R + Send + 'static,
{
    let (id, shard, locks, sl) = match cx.tx.as_ref() {
        Some(t) => match &t.deferred {
            Some(d) => (t.id, d.shard, d.locks.clone(), d.shard_lock),
            None => unreachable!("schedule_and_hop without a deferred shard"),
        },
        None => unreachable!("schedule_and_hop outside a transaction"),
    };
    cx.worker
        .call_deferred(shard, move |w, resp| {
            let sched = w.tx.borrow_mut().schedule_single_hop(id, &locks, sl);
            match sched {
                SchedHop::TooOld => resp.send(w, Err::<R, J>(job)),
                SchedHop::RunNow => {
                    // A panicking job drops `resp` unanswered: the coordinator sees the panic.
                    if let Ok(r) = crate::engine::guard::contain(|| job(w)) {
                        resp.send(w, Ok::<R, J>(r));
                    }
                    w.serve_blocked();
                }
                SchedHop::Queued => vll::hop(w, id, move |w| {
                    let r = job(w);
                    resp.send(w, Ok::<R, J>(r));
                    vll::finish(w, id);
                }),
            }
        })
        .await
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
