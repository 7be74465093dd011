//! Pipeline squashing (Dragonfly's term): a run of consecutive pipelined single-key commands is
//! executed with one hop per target shard instead of one hop per command. The shards work in
//! parallel, each runs its commands in pipeline order, and the replies are put back in order.
//!
//! Only plain single-key shard commands join a run (GET, SET, INCR...); anything else — multi-key
//! commands, MULTI, connection commands, errors the dispatcher must produce — is a barrier and
//! goes through `execute` as usual, so semantics don't change.

use smallvec::SmallVec;

use damselfly_protocol::Reply;

use super::plan;
use crate::clock::Ticks;
use crate::commands::{
    flags, record_call, registry, run_shard_cmd, ConnCtx, Entry, KeySpec, ReplyMode, ShardFn,
};
use crate::engine::shard_of;
use crate::engine::vll::{self, KeyLock, Locks, ShardLock};

/// A command admitted to a squashed run.
pub struct Squashed<'a> {
    pub args: SmallVec<[&'a [u8]; 8]>,
    pub how: Route,
}

/// Where and how a squashable command runs.
#[derive(Clone, Copy)]
pub struct Route {
    entry: &'static Entry,
    f: ShardFn,
    shard: usize,
    /// The argument index of its key.
    key_at: usize,
}

/// Per-shard results of a run: the replies' bytes and where each reply ends.
type ShardReplies = Option<(Vec<u8>, SmallVec<[usize; 16]>)>;

/// Can this command join a squashed run? (Arity and auth already valid, single key.)
pub fn classify(cx: &ConnCtx, args: &[&[u8]]) -> Option<Route> {
    if cx.coord.in_transaction()
        || cx.reply_mode != ReplyMode::On
        || cx.squash_barrier()
        // CLIENT PAUSE: `execute` makes paused commands wait.
        || crate::engine::pause::maybe_paused()
        || cx
            .worker
            .shared
            .persist
            .writes_refused(&cx.worker.shared.config)
        || cx
            .worker
            .shared
            .persist
            .loading
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        return None;
    }
    let entry = registry().lookup(args[0])?;
    let spec = entry.spec;
    // A replica's read-only and stale-data rules, `min-replicas-to-write`: `execute` answers
    // (a pipelined write must not slip past them in a run).
    if (crate::engine::role::too_few_replicas() || crate::engine::role::is_replica())
        && crate::commands::replication_refusal(cx, spec).is_some()
    {
        return None;
    }
    // A tracking connection's reads must register their keys first (`execute`).
    if cx.client.tracking.borrow().on {
        return None;
    }
    let f = spec.shard_fn(args.len())?;
    // Refused over maxmemory: `execute` answers it.
    if crate::commands::rejected_for_memory(cx, spec) {
        return None;
    }
    let argc = args.len() as i32;
    let arity_ok =
        (spec.arity > 0 && argc == spec.arity) || (spec.arity < 0 && argc >= -spec.arity);
    let auth_ok = cx.authed || spec.flags & flags::NO_AUTH != 0 || !crate::acl::auth_required();
    let single_key = match spec.keys {
        KeySpec::Range { first, .. } if first > 0 => {
            matches!(spec.keys.range(args.len()), Some((f, l, _)) if f == l && f == first as usize)
        }
        _ => false,
    };
    // (A `plan` hook locks more than the key spec says: MOVE's key in the other db.)
    if !spec.subcommands.is_empty() || spec.plan.is_some() || !arity_ok || !auth_ok || !single_key {
        return None;
    }
    // ACL: a restricted user's allowed command joins the run too (checked here, on the
    // connection's thread); a refused one, or any after a change of the users, goes through
    // `execute`, which answers and logs it.
    if !cx.acl.fast_ok()
        && (cx.acl.version != crate::acl::version() || cx.acl.user.check(entry, args).is_err())
    {
        return None;
    }
    let key_at = spec.first_key() as usize;
    let shard = shard_of(args[key_at], cx.threads());
    Some(Route {
        entry,
        f,
        shard,
        key_at,
    })
}

/// Executes a run: one message per remote shard, local commands inline meanwhile.
pub async fn execute_run(cx: &mut ConnCtx, run: &[Squashed<'_>]) {
    let db = cx.db;
    let calls: SmallVec<[Call<'_>; 16]> = run
        .iter()
        .map(|c| Call {
            shard: c.how.shard,
            lock: plan::key_lock(c.how.entry.spec, db, c.args[c.how.key_at]),
            f: c.how.f,
            name: c.how.entry.static_name,
            key_at: c.how.key_at,
            args: &c.args,
        })
        .collect();
    let t0 = Ticks::now();
    let mut ranges: SmallVec<[(usize, usize); 16]> = SmallVec::new();
    run_calls(cx, &calls, |cx, _, bytes| {
        let start = cx.reply.len();
        cx.reply.raw(bytes);
        ranges.push((start, cx.reply.len()));
    })
    .await;
    let usec_each = Ticks::to_us(Ticks::now().wrapping_sub(t0)) / run.len().max(1) as u64;
    for (c, &(start, _)) in run.iter().zip(ranges.iter()) {
        cx.cmd_name = c.how.entry.static_name;
        record_call(cx, c.how.entry, &c.args, start, usec_each);
    }
}

/// One single-key shard command of a squashed run (RESP's, or a memcache request's).
pub struct Call<'a> {
    pub shard: usize,
    /// The lock its key needs (`plan::key_lock`).
    pub lock: KeyLock,
    pub f: ShardFn,
    /// Its name (fault reports, the replication journal's rewrites).
    pub name: &'static str,
    /// The argument index of its key.
    pub key_at: usize,
    pub args: &'a [&'a [u8]],
}

/// Runs `calls` with one message per remote shard (each runs its share in call order, under
/// its keys' locks, no transaction) and this thread's share inline meanwhile; then hands each
/// call's reply bytes to `each` in call order.
pub async fn run_calls(
    cx: &mut ConnCtx,
    calls: &[Call<'_>],
    mut each: impl FnMut(&mut ConnCtx, usize, &[u8]),
) {
    let threads = cx.threads();
    let me = cx.worker.id;
    let mut groups: Vec<SmallVec<[usize; 16]>> = vec![SmallVec::new(); threads];
    for (i, c) in calls.iter().enumerate() {
        groups[c.shard].push(i);
    }
    let (ver, db, now) = (cx.reply.ver, cx.db, cx.now_ms);
    let client = cx.client_id();
    // Remote shards first so they work while this thread runs its own part.
    let order = (0..threads).filter(|&s| s != me).chain(std::iter::once(me));
    let mut pending = Vec::new();
    let mut parts: Vec<ShardReplies> = (0..threads).map(|_| None).collect();
    for s in order {
        let idxs = &groups[s];
        if idxs.is_empty() {
            continue;
        }
        if s == me && {
            let t = cx.worker.vll();
            t.idle() || {
                let locks: Locks = idxs.iter().map(|&i| calls[i].lock).collect();
                t.quick_ok(&locks, ShardLock::None)
            }
        } {
            // This thread's share with no queued transaction in its way: run it here and
            // now, on the arguments where they are (what `vll::quick` would do, without the
            // copy and the message).
            let w = cx.worker.clone();
            let mut reply = Reply::new(ver);
            let mut ends: SmallVec<[usize; 16]> = SmallVec::new();
            for &i in idxs {
                let c = &calls[i];
                run_shard_cmd(&w, c.name, c.f, db, now, client, &mut reply, c.args, None);
                w.serve_blocked();
                ends.push(reply.len());
            }
            parts[s] = Some((reply.take(), ends));
            continue;
        }
        let owned = crate::commands::util::OwnedArgs::collect(
            idxs.iter().flat_map(|&i| calls[i].args.iter().copied()),
        );
        let counts: SmallVec<[usize; 16]> = idxs.iter().map(|&i| calls[i].args.len()).collect();
        let fns: SmallVec<[ShardFn; 16]> = idxs.iter().map(|&i| calls[i].f).collect();
        let names: SmallVec<[&'static str; 16]> = idxs.iter().map(|&i| calls[i].name).collect();
        let kpos: SmallVec<[usize; 16]> = idxs.iter().map(|&i| calls[i].key_at).collect();
        let locks: Locks = idxs.iter().map(|&i| calls[i].lock).collect();
        let call = cx.worker.call_deferred(s, move |w, resp| {
            vll::quick(w, locks, ShardLock::None, move |w| {
                let all = owned.slices();
                let mut reply = Reply::new(ver);
                let mut ends: SmallVec<[usize; 16]> = SmallVec::new();
                if fns.len() >= 4 {
                    prefetch_group(w, db, &all, &counts, &kpos);
                }
                let mut at = 0usize;
                for ((f, &n), &name) in fns.iter().zip(counts.iter()).zip(names.iter()) {
                    let args = &all[at..at + n];
                    at += n;
                    run_shard_cmd(w, name, *f, db, now, client, &mut reply, args, None);
                    // Clients blocked on a key this command wrote are served before the next
                    // command of the run can see it.
                    w.serve_blocked();
                    ends.push(reply.len());
                }
                resp.send(w, (reply.take(), ends));
            })
        });
        pending.push((s, call));
    }
    for (s, call) in pending {
        parts[s] = Some(call.await);
    }
    let mut next = vec![0usize; threads];
    for (i, c) in calls.iter().enumerate() {
        let Some((buf, ends)) = &parts[c.shard] else {
            continue;
        };
        let k = next[c.shard];
        next[c.shard] += 1;
        let from = if k == 0 { 0 } else { ends[k - 1] };
        each(cx, i, &buf[from..ends[k]]);
    }
    if crate::engine::tracking::bcast_active() {
        Box::pin(crate::commands::flush_bcast(cx)).await;
    }
}

/// Loads the group's keys into cache before executing them (see `Db::prefetch_keys`), so the
/// group's cache misses overlap.
fn prefetch_group(
    w: &crate::engine::Worker,
    db: usize,
    all: &[&[u8]],
    counts: &[usize],
    kpos: &[usize],
) {
    let Some(shard) = w.try_shard() else {
        return;
    };
    let Some(d) = shard.dbs.get(db) else { return };
    let mut at = 0usize;
    d.prefetch_keys(counts.iter().zip(kpos).map(|(&n, &k)| {
        let key = all[at + k];
        at += n;
        key
    }));
}
