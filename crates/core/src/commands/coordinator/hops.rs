//! The hop API: the one way command code reaches shards.
//!
//! A command describes its work as a chain of steps, each running on a shard with the previous
//! step's result, then runs the chain:
//!
//! ```ignore
//! // RENAME: take the value off the source's shard, write it on the destination's.
//! let out = cx
//!     .hops()
//!     .on_key(src, move |c, ()| c.db().remove(&s, c.now))
//!     .on_key(dst, move |c, taken| { /* write it */ })
//!     .run()            // the command's last hops: its locks go with them
//!     .await;
//! ```
//!
//! Steps: [`Hops::on_key`] (the shard owning a key), [`Hops::per_shard`] (every shard owning
//! keys of the command, each with its slice of the arguments), [`Hops::per_shard_of`] (the
//! same for an explicit key list), [`Hops::all_shards`] and [`Hops::on_shard`] (keyless work).
//! The call site says whether these are the command's last hops: [`Hops::run`] concludes the
//! command on every shard, [`Hops::run_more`] keeps its locks for another chain (SORT reads,
//! then fetches patterns, then stores). A chain after `run` is a bug: an assertion (on in every
//! build) fails the command with an internal error instead of letting the hop run unlocked.
//!
//! How a chain runs is the framework's business, decided from the command's lock plan:
//! - all of the command's keys on one shard and `run`: the whole chain is one message to that
//!   shard (or runs inline on this thread), lock-checked like any single-shard command; no
//!   transaction, however many steps;
//! - keys on several shards, a whole-shard lock (KEYS, FLUSHALL, SORT BY patterns), `run_more`,
//!   or inside EXEC: a transaction (VLL) scheduled on the plan's shards, each step a hop; a
//!   shard concludes inside its last hop of a final chain. A final chain that touches each
//!   shard once (MSET, MGET, DEL...) folds one remote shard's scheduling into its hop;
//! - a command without keys or whole-shard lock (SCAN, INFO, RANDOMKEY): steps run unlocked.

use std::any::Any;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use damselfly_protocol::{Reply, RespVersion};
use smallvec::SmallVec;

use crate::commands::util::OwnedArgs;
use crate::commands::{CmdCtx, ConnCtx};
use crate::engine::vll::{self, Locks};
use crate::engine::{shard_of, Worker};

type Erased = Box<dyn Any + Send>;
type OneFn = Box<dyn FnOnce(&mut CmdCtx<'_>, Erased) -> Erased + Send>;
type FanFn = Arc<dyn Fn(&mut CmdCtx<'_>, &[&[u8]], Erased) -> Erased + Send + Sync>;
/// One shard's result of a fan-out step: (shard, argument groups it handled, its result).
type FanOut = (usize, Vec<usize>, Erased);

/// Result of one shard's part of a step over key groups.
#[derive(Clone, Debug)]
pub struct ShardPart<R> {
    pub shard: usize,
    /// Ordinals (0-based) of the key groups this shard handled, in argument order.
    pub groups: Vec<usize>,
    pub result: R,
}

/// One shard's share of a fan-out step.
struct FanPart<'c> {
    shard: usize,
    groups: Vec<usize>,
    args: PartArgs<'c>,
}

/// A part's arguments: still borrowed from the command (a part that runs on this thread never
/// copies them), or copied to travel to another thread.
enum PartArgs<'c> {
    /// `items[at..at + width]` (clipped) for each `at` of `starts`.
    Borrowed {
        items: &'c [&'c [u8]],
        starts: Vec<usize>,
        width: usize,
    },
    Owned(OwnedArgs),
}

impl PartArgs<'_> {
    fn into_owned(self) -> PartArgs<'static> {
        match self {
            PartArgs::Borrowed {
                items,
                starts,
                width,
            } => PartArgs::Owned(OwnedArgs::from_groups(items, starts.iter().copied(), width)),
            PartArgs::Owned(o) => PartArgs::Owned(o),
        }
    }

    /// Calls `f` with the part's argument slices.
    fn with_slices<R>(&self, f: impl FnOnce(&[&[u8]]) -> R) -> R {
        match self {
            PartArgs::Borrowed {
                items,
                starts,
                width,
            } => {
                let first = starts.first().copied().unwrap_or(0);
                let contiguous = starts
                    .iter()
                    .enumerate()
                    .all(|(i, &at)| at == first + i * width);
                if contiguous {
                    // (MSET's groups on one shard: the command's own argument range as it is.)
                    let end = (first + starts.len() * width).min(items.len());
                    f(&items[first.min(end)..end])
                } else {
                    let mut v: SmallVec<[&[u8]; 16]> = SmallVec::new();
                    for &at in starts {
                        v.extend_from_slice(&items[at..(at + width).min(items.len())]);
                    }
                    f(&v)
                }
            }
            PartArgs::Owned(o) => f(&o.slices()),
        }
    }
}

impl FanPart<'_> {
    fn into_owned(self) -> FanPart<'static> {
        FanPart {
            shard: self.shard,
            groups: self.groups,
            args: self.args.into_owned(),
        }
    }
}

enum Step<'c> {
    /// A pure transformation of the value (no shard): runs wherever the value is.
    Map(Box<dyn FnOnce(Erased) -> Erased + Send>),
    One {
        shard: usize,
        f: OneFn,
    },
    Fan {
        parts: Vec<FanPart<'c>>,
        f: FanFn,
        clone_in: fn(&Erased) -> Erased,
        assemble: fn(Vec<FanOut>) -> Erased,
    },
}

impl Step<'_> {
    /// The step with its arguments copied, to travel to another thread.
    fn into_owned(self) -> Step<'static> {
        match self {
            Step::Map(f) => Step::Map(f),
            Step::One { shard, f } => Step::One { shard, f },
            Step::Fan {
                parts,
                f,
                clone_in,
                assemble,
            } => Step::Fan {
                parts: parts.into_iter().map(FanPart::into_owned).collect(),
                f,
                clone_in,
                assemble,
            },
        }
    }

    fn shards(&self) -> SmallVec<[usize; 4]> {
        match self {
            Step::Map(_) => SmallVec::new(),
            Step::One { shard, .. } => smallvec::smallvec![*shard],
            Step::Fan { parts, .. } => parts.iter().map(|p| p.shard).collect(),
        }
    }
}

/// A chain of steps being described; see the module docs.
#[must_use = "a chain does nothing until it is `run`"]
pub struct Hops<'c, T> {
    cx: &'c mut ConnCtx,
    steps: Vec<Step<'c>>,
    _out: PhantomData<fn() -> T>,
}

impl ConnCtx {
    /// Starts a chain of hops for the current command.
    pub fn hops(&mut self) -> Hops<'_, ()> {
        Hops {
            cx: self,
            steps: Vec::new(),
            _out: PhantomData,
        }
    }
}

fn erase<T: Send + 'static>(t: T) -> Erased {
    Box::new(t)
}

fn unerase<T: 'static>(e: Erased) -> T {
    match e.downcast::<T>() {
        Ok(t) => *t,
        Err(_) => unreachable!("hop chain step output of an unexpected type"),
    }
}

fn clone_erased<T: Clone + Send + 'static>(e: &Erased) -> Erased {
    match e.downcast_ref::<T>() {
        Some(t) => Box::new(t.clone()),
        None => unreachable!("hop chain step input of an unexpected type"),
    }
}

fn assemble_parts<U: Send + 'static>(mut outs: Vec<FanOut>) -> Erased {
    if !outs.is_sorted_by_key(|o| o.0) {
        outs.sort_by_key(|o| o.0);
    }
    let mut parts: Vec<ShardPart<U>> = Vec::with_capacity(outs.len());
    for (shard, groups, r) in outs {
        parts.push(ShardPart {
            shard,
            groups,
            result: unerase::<U>(r),
        });
    }
    Box::new(parts)
}

fn assemble_all<U: Send + 'static>(mut outs: Vec<FanOut>) -> Erased {
    if !outs.is_sorted_by_key(|o| o.0) {
        outs.sort_by_key(|o| o.0);
    }
    let v: Vec<U> = outs.into_iter().map(|(_, _, r)| unerase::<U>(r)).collect();
    Box::new(v)
}

impl<'c, T: Send + 'static> Hops<'c, T> {
    fn then<U>(mut self, step: Step<'c>) -> Hops<'c, U> {
        self.steps.push(step);
        Hops {
            cx: self.cx,
            steps: self.steps,
            _out: PhantomData,
        }
    }

    /// Next step: turn the value into another without touching any shard (combine the parts
    /// of a `per_shard` step before the next step, e.g. MSETNX's "does any key exist").
    pub fn map<U, F>(self, f: F) -> Hops<'c, U>
    where
        U: Send + 'static,
        F: FnOnce(T) -> U + Send + 'static,
    {
        self.then(Step::Map(Box::new(move |v| erase(f(unerase::<T>(v))))))
    }

    /// Next step: `f` on the shard owning `key`, with the previous step's result.
    pub fn on_key<U, F>(self, key: &[u8], f: F) -> Hops<'c, U>
    where
        U: Send + 'static,
        F: FnOnce(&mut CmdCtx<'_>, T) -> U + Send + 'static,
    {
        let shard = shard_of(key, self.cx.threads());
        self.on_shard(shard, f)
    }

    /// Next step: `f` on shard `shard` (keyless work: SCAN's cursor names its shard).
    pub fn on_shard<U, F>(self, shard: usize, f: F) -> Hops<'c, U>
    where
        U: Send + 'static,
        F: FnOnce(&mut CmdCtx<'_>, T) -> U + Send + 'static,
    {
        let f: OneFn = Box::new(move |c, input| erase(f(c, unerase::<T>(input))));
        self.then(Step::One { shard, f })
    }

    /// Next step: `f` on every shard owning keys of the command, as its key spec places them,
    /// with that shard's slice of `args` (the command's arguments): each of its keys followed
    /// by the arguments that belong to it (MSET's value), in argument order. The result lists
    /// the shards' parts in shard order.
    pub fn per_shard<U, F>(self, args: &'c [&'c [u8]], f: F) -> Hops<'c, Vec<ShardPart<U>>>
    where
        T: Clone,
        U: Send + 'static,
        F: Fn(&mut CmdCtx<'_>, &[&[u8]], T) -> U + Send + Sync + 'static,
    {
        let mut groups = SmallVec::new();
        let width = self
            .cx
            .coord
            .key_groups(args, self.cx.threads(), &mut groups);
        let parts = fan_parts(args, width, &groups);
        self.fan(parts, f)
    }

    /// Next step: like [`per_shard`](Self::per_shard) for an explicit list of keys, each of
    /// `width` arguments (key first): keys computed by the command (WATCH without duplicates,
    /// LMPOP's keys after numkeys).
    pub fn per_shard_of<U, F>(
        self,
        items: &'c [&'c [u8]],
        width: usize,
        f: F,
    ) -> Hops<'c, Vec<ShardPart<U>>>
    where
        T: Clone,
        U: Send + 'static,
        F: Fn(&mut CmdCtx<'_>, &[&[u8]], T) -> U + Send + Sync + 'static,
    {
        let threads = self.cx.threads();
        let width = width.max(1);
        let groups: SmallVec<[(usize, usize); 16]> = (0..items.len())
            .step_by(width)
            .map(|i| (i, shard_of(items[i], threads)))
            .collect();
        let parts = fan_parts(items, width, &groups);
        self.fan(parts, f)
    }

    fn fan<U, F>(self, parts: Vec<FanPart<'c>>, f: F) -> Hops<'c, Vec<ShardPart<U>>>
    where
        T: Clone,
        U: Send + 'static,
        F: Fn(&mut CmdCtx<'_>, &[&[u8]], T) -> U + Send + Sync + 'static,
    {
        let f: FanFn = Arc::new(move |c, a, input| erase(f(c, a, unerase::<T>(input))));
        self.then(Step::Fan {
            parts,
            f,
            clone_in: clone_erased::<T>,
            assemble: assemble_parts::<U>,
        })
    }

    /// Next steps: the first of `keys` in argument order for which `probe` (on the key's shard)
    /// says something, then `act` on that key's shard with what `probe` said. `None` when no
    /// key qualifies. (LMPOP, BLPOP and ZMPOP's "first non-empty key", wherever the keys live.)
    pub fn first_of<K, R, P, A>(self, keys: &'c [&'c [u8]], probe: P, act: A) -> Hops<'c, Option<R>>
    where
        T: Clone,
        K: Clone + Send + 'static,
        R: Send + 'static,
        P: Fn(&mut CmdCtx<'_>, &[u8]) -> Option<K> + Send + Sync + 'static,
        A: Fn(&mut CmdCtx<'_>, &[u8], K) -> R + Send + Sync + 'static,
    {
        let owned: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        self.per_shard_of(keys, 1, move |c, ks, _| {
            ks.iter()
                .enumerate()
                .find_map(|(i, k)| probe(c, k).map(|v| (i, v)))
        })
        .map(move |parts| {
            // Local index to argument ordinal; the smallest wins.
            parts
                .into_iter()
                .filter_map(|p| p.result.map(|(i, v)| (p.groups[i], v)))
                .min_by_key(|(g, _)| *g)
                .map(|(g, v)| (owned[g].clone(), v))
        })
        .per_shard_of(keys, 1, move |c, ks, chosen: Option<(Vec<u8>, K)>| {
            let (key, v) = chosen?;
            ks.contains(&&key[..]).then(|| act(c, &key, v))
        })
        .map(|parts| parts.into_iter().find_map(|p| p.result))
    }

    /// Next step: `f` on every shard; the results in shard order.
    pub fn all_shards<U, F>(self, f: F) -> Hops<'c, Vec<U>>
    where
        T: Clone,
        U: Send + 'static,
        F: Fn(&mut CmdCtx<'_>, T) -> U + Send + Sync + 'static,
    {
        let all: Vec<usize> = (0..self.cx.threads()).collect();
        self.on_shards(&all, f)
    }

    /// Next step: `f` on each of `shards` (EXEC's barrier on its transaction's shards); the
    /// results in shard order.
    pub fn on_shards<U, F>(self, shards: &[usize], f: F) -> Hops<'c, Vec<U>>
    where
        T: Clone,
        U: Send + 'static,
        F: Fn(&mut CmdCtx<'_>, T) -> U + Send + Sync + 'static,
    {
        let parts = shards
            .iter()
            .map(|&shard| FanPart {
                shard,
                groups: Vec::new(),
                args: PartArgs::Owned(OwnedArgs::new(&[])),
            })
            .collect();
        let f: FanFn = Arc::new(move |c, _, input| erase(f(c, unerase::<T>(input))));
        self.then(Step::Fan {
            parts,
            f,
            clone_in: clone_erased::<T>,
            assemble: assemble_all::<U>,
        })
    }

    /// Runs the chain as the command's last hops: every shard of the command concludes (its
    /// locks are released) with its last hop here.
    pub async fn run(self) -> T {
        self.exec(true).await
    }

    /// Runs the chain and keeps the command's locks: another chain follows.
    pub async fn run_more(self) -> T {
        self.exec(false).await
    }

    async fn exec(self, last: bool) -> T {
        let Hops { cx, steps, .. } = self;
        unerase::<T>(execute_chain(cx, steps, last).await)
    }
}

/// Splits key groups by shard: group `g` is `items[at..at + width]` (clipped) owned by shard
/// `s`, for `groups[g] == (at, s)`.
fn fan_parts<'c>(
    items: &'c [&'c [u8]],
    width: usize,
    groups: &[(usize, usize)],
) -> Vec<FanPart<'c>> {
    let part = |shard: usize, gs: Vec<usize>| FanPart {
        shard,
        args: PartArgs::Borrowed {
            items,
            starts: gs.iter().map(|&g| groups[g].0).collect(),
            width,
        },
        groups: gs,
    };
    // The common case first: every group on one shard (one thread, or hashtagged keys).
    if let Some(&(_, shard)) = groups.first() {
        if groups.iter().all(|g| g.1 == shard) {
            return vec![part(shard, (0..groups.len()).collect())];
        }
    }
    // Two passes so that every shard's list is allocated once, at its final size.
    let mut count: SmallVec<[(usize, usize); 8]> = SmallVec::new();
    for &(_, s) in groups {
        match count.iter_mut().find(|(x, _)| *x == s) {
            Some(c) => c.1 += 1,
            None => count.push((s, 1)),
        }
    }
    count.sort_unstable_by_key(|(s, _)| *s);
    let mut per: SmallVec<[(usize, Vec<usize>); 8]> = count
        .iter()
        .map(|&(s, n)| (s, Vec::with_capacity(n)))
        .collect();
    for (g, &(_, s)) in groups.iter().enumerate() {
        if let Some((_, v)) = per.iter_mut().find(|(x, _)| *x == s) {
            v.push(g);
        }
    }
    per.into_iter().map(|(shard, gs)| part(shard, gs)).collect()
}

/// What every step of a chain runs with, wherever it runs.
#[derive(Clone)]
struct OnShard {
    db: usize,
    now: u64,
    client: u64,
    ver: RespVersion,
    /// While journaling: set when a step changed something (the command's record is pushed
    /// only then, as Redis propagates only commands that dirtied the dataset).
    dirty: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl OnShard {
    fn of(cx: &ConnCtx) -> Self {
        OnShard {
            db: cx.db,
            now: cx.now_ms,
            client: cx.client_id(),
            ver: cx.reply.ver,
            dirty: crate::engine::journal::active().then(|| cx.hop_dirty.clone()),
        }
    }

    /// Runs `f` with a command context over `w`'s shard.
    fn with<R>(
        &self,
        w: &Rc<Worker>,
        scratch: &mut Reply,
        f: impl FnOnce(&mut CmdCtx<'_>) -> R,
    ) -> R {
        use crate::engine::journal;
        let Some(d) = &self.dirty else {
            return CmdCtx::over(w, self.db, self.now, self.client, scratch, f);
        };
        let m = journal::mark();
        let r = CmdCtx::over(w, self.db, self.now, self.client, scratch, f);
        if journal::mark() != m {
            d.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }

    /// Runs `steps` (each targeting this thread's shard) in order, threading the value through.
    fn run(&self, w: &Rc<Worker>, steps: Vec<Step<'_>>, mut value: Erased) -> Erased {
        let mut scratch = Reply::new(self.ver);
        for step in steps {
            value = match step {
                Step::Map(f) => f(value),
                Step::One { f, .. } => self.with(w, &mut scratch, |c| f(c, value)),
                Step::Fan {
                    parts,
                    f,
                    clone_in,
                    assemble,
                } => {
                    let outs = parts
                        .into_iter()
                        .map(|p| self.part(w, &mut scratch, &f, p, clone_in(&value)))
                        .collect();
                    assemble(outs)
                }
            };
        }
        value
    }

    /// One shard's part of a fan step.
    fn part(
        &self,
        w: &Rc<Worker>,
        scratch: &mut Reply,
        f: &FanFn,
        p: FanPart<'_>,
        input: Erased,
    ) -> FanOut {
        let r = p
            .args
            .with_slices(|args| self.with(w, scratch, |c| f(c, args, input)));
        (p.shard, p.groups, r)
    }
}

/// How a chain runs (see the module docs).
enum Mode {
    /// The whole chain in one message to (or inline on) this shard, lock-checked.
    OneShard(usize),
    /// No keys and no whole-shard lock: every step runs at once where it says.
    Unlocked,
    /// Inside a transaction (scheduled now if the command has none yet).
    Transaction,
}

async fn execute_chain(cx: &mut ConnCtx, steps: Vec<Step<'_>>, last: bool) -> Erased {
    // A contract check, not a debug-only one: it costs a branch per chain, and a hop that ran
    // after its shards released their locks would corrupt data silently. The panic is
    // contained like any other bug in a command (the client gets an internal error).
    assert!(
        !cx.coord.finished(),
        "hop after the command's final hop (its locks are already released)"
    );
    let mut value: Erased = Box::new(());
    if steps.is_empty() {
        return value;
    }
    let on = OnShard::of(cx);
    match mode(cx, &steps, last) {
        Mode::OneShard(shard) => match run_one_shard(cx, on, shard, steps).await {
            Ok(v) => value = v,
            // Journaling began on that shard while the message travelled: run the chain as
            // a journaled transaction after all (nothing of it ran).
            Err(steps) => {
                let on = OnShard::of(cx);
                return run_transaction(cx, on, steps, value, last).await;
            }
        },
        Mode::Unlocked => {
            for step in steps {
                value = run_step(cx, on.clone(), step, value, &[]).await;
            }
            // No transaction concludes here to serve the clients blocked on what the chain
            // wrote (RENAME onto a key a BLPOP waits for, on a one-thread server).
            cx.worker.serve_blocked();
        }
        Mode::Transaction => return run_transaction(cx, on, steps, value, last).await,
    }
    if last {
        cx.coord.finish_command(&cx.worker);
    }
    value
}

/// A chain as (part of) the command's transaction, scheduled now when it has none yet.
async fn run_transaction(
    cx: &mut ConnCtx,
    on: OnShard,
    steps: Vec<Step<'_>>,
    mut value: Erased,
    last: bool,
) -> Erased {
    if !cx.coord.in_transaction() {
        // (Not while journaling: its shards conclude inside the hop, before the
        // command's record could enter the journal.)
        if last && single_fan(&steps) && !crate::engine::journal::active() {
            let Some(Step::Fan { .. }) = steps.first() else {
                unreachable!()
            };
            let mut steps = steps;
            let step = steps.pop().expect("one step");
            value = run_single_hop_fan(cx, on, step, value).await;
            cx.coord.finish_command(&cx.worker);
            return value;
        }
        let w = cx.worker.clone();
        Box::pin(cx.coord.begin_transaction(&w)).await;
    }
    // A shard concludes inside its last hop of a final chain (saves a message per
    // shard); inside EXEC, EXEC concludes.
    // A journaled command keeps them until its record is in (`execute`).
    let conclude_at: Vec<(usize, usize)> =
        if last && cx.coord.owns_transaction() && !cx.coord.journaled() {
            let mut at: Vec<(usize, usize)> = Vec::new();
            for (i, st) in steps.iter().enumerate() {
                for s in st.shards() {
                    match at.iter_mut().find(|(x, _)| *x == s) {
                        Some(e) => e.1 = i,
                        None => at.push((s, i)),
                    }
                }
            }
            at
        } else {
            Vec::new()
        };
    for (i, step) in steps.into_iter().enumerate() {
        let conclude: SmallVec<[usize; 4]> = conclude_at
            .iter()
            .filter(|(_, j)| *j == i)
            .map(|(s, _)| *s)
            .collect();
        value = run_step(cx, on.clone(), step, value, &conclude).await;
    }
    if last {
        cx.coord.finish_command(&cx.worker);
    }
    value
}

fn mode(cx: &ConnCtx, steps: &[Step<'_>], last: bool) -> Mode {
    let c = &cx.coord;
    if c.in_transaction() {
        return Mode::Transaction;
    }
    let plan = c.plan();
    if plan.global.is_none() && plan.keys.is_empty() {
        return Mode::Unlocked;
    }
    // While journaling, a chain on one shard is a transaction too: its record enters the
    // journal from the coordinator, which must still hold the keys then.
    if last && !crate::engine::journal::active() {
        if let Some(s) = plan.single_shard() {
            if steps.iter().all(|st| st.shards().iter().all(|&x| x == s)) {
                return Mode::OneShard(s);
            }
        }
    }
    Mode::Transaction
}

/// A final chain of one fan step over several shards (MSET, MGET, DEL...): each shard is
/// touched once.
fn single_fan(steps: &[Step<'_>]) -> bool {
    matches!(steps, [Step::Fan { parts, .. }] if parts.len() >= 2)
}

/// The whole chain on one shard: inline when it is this thread's and nothing there holds the
/// command's keys, otherwise one message that waits there for them. Hands the steps back,
/// unrun, when that shard began journaling after the chain was sent unjournaled (a full sync's
/// point passed there: the write must be journaled, by a transaction holding its keys).
async fn run_one_shard(
    cx: &mut ConnCtx,
    on: OnShard,
    shard: usize,
    steps: Vec<Step<'_>>,
) -> Result<Erased, Vec<Step<'static>>> {
    let plan = cx.coord.plan();
    let locks: Locks = plan.locks_for(shard);
    let sl = plan.shard_lock();
    let w = cx.worker.clone();
    if shard == w.id && w.vll().quick_ok(&locks, sl) {
        // (No race here: the decision and the run are one synchronous step of this thread.)
        let v = on.run(&w, steps, Box::new(()));
        w.serve_blocked();
        return Ok(v);
    }
    let steps: Vec<Step<'static>> = steps.into_iter().map(Step::into_owned).collect();
    w.call_deferred(shard, move |w, resp| {
        vll::quick(w, locks, sl, move |w| {
            if on.dirty.is_none() && crate::engine::journal::here() {
                resp.send(w, Err::<Erased, Vec<Step<'static>>>(steps));
                return;
            }
            let v = on.run(w, steps, Box::new(()));
            resp.send(w, Ok::<Erased, Vec<Step<'static>>>(v));
        })
    })
    .await
}

/// Runs one step: a hop on its shard, or its parts' hops in parallel. Hops on shards listed
/// in `conclude` release the command's transaction there.
async fn run_step(
    cx: &mut ConnCtx,
    on: OnShard,
    step: Step<'_>,
    value: Erased,
    conclude: &[usize],
) -> Erased {
    match step {
        Step::Map(f) => f(value),
        Step::One { shard, f } => {
            let c = conclude.contains(&shard);
            cx.coord
                .hop(&cx.worker, shard, c, move |w| {
                    let mut scratch = Reply::new(on.ver);
                    on.with(w, &mut scratch, |ctx| f(ctx, value))
                })
                .await
        }
        Step::Fan {
            parts,
            f,
            clone_in,
            assemble,
        } => {
            let w = cx.worker.clone();
            let mut outs = Vec::with_capacity(parts.len());
            let mut calls = Vec::with_capacity(parts.len());
            let mut local = None;
            // Other shards first, so they work while this thread runs its own part.
            for p in parts {
                if p.shard == w.id && local.is_none() {
                    local = Some(p);
                    continue;
                }
                let (f, input) = (f.clone(), clone_in(&value));
                let c = conclude.contains(&p.shard);
                let (shard, p) = (p.shard, p.into_owned());
                let on = on.clone();
                calls.push(cx.coord.hop(&w, shard, c, move |w| {
                    let mut scratch = Reply::new(on.ver);
                    on.part(w, &mut scratch, &f, p, input)
                }));
            }
            if let Some(p) = local {
                let c = conclude.contains(&p.shard);
                outs.push(run_local_part(cx, on, &f, p, clone_in(&value), c).await);
            }
            for c in calls {
                outs.push(c.await);
            }
            assemble(outs)
        }
    }
}

/// This thread's part of a fan step: inline, with the command's own (uncopied) arguments, when
/// it may run now; otherwise (queued behind a conflicting transaction) by the usual hop.
async fn run_local_part(
    cx: &mut ConnCtx,
    on: OnShard,
    f: &FanFn,
    p: FanPart<'_>,
    input: Erased,
    conclude: bool,
) -> FanOut {
    let w = cx.worker.clone();
    if cx.coord.start_inline(&w, p.shard) {
        let shard = p.shard;
        let mut scratch = Reply::new(on.ver);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            on.part(&w, &mut scratch, f, p, input)
        }));
        cx.coord.end_inline(&w, shard, conclude);
        return match r {
            Ok(out) => out,
            Err(payload) => std::panic::resume_unwind(payload),
        };
    }
    let (f, shard, p) = (f.clone(), p.shard, p.into_owned());
    cx.coord
        .hop(&w, shard, conclude, move |w| {
            let mut scratch = Reply::new(on.ver);
            on.part(w, &mut scratch, &f, p, input)
        })
        .await
}

/// A final chain that touches each of several shards once, as its own transaction: one remote
/// shard is scheduled by the same message that runs its part (see `Coord::schedule_single_hop`),
/// the others' parts conclude where they run.
async fn run_single_hop_fan(
    cx: &mut ConnCtx,
    on: OnShard,
    step: Step<'_>,
    value: Erased,
) -> Erased {
    let Step::Fan {
        parts,
        f,
        clone_in,
        assemble,
    } = step
    else {
        unreachable!("single-hop transactions are fan steps")
    };
    let me = cx.worker.id;
    let deferred = parts.iter().rev().map(|p| p.shard).find(|&s| s != me);
    let mut outs = Vec::with_capacity(parts.len());
    let mut rest = Vec::with_capacity(parts.len());
    let mut early = None;
    for p in parts {
        if Some(p.shard) == deferred && early.is_none() {
            early = Some(p);
        } else {
            rest.push(p);
        }
    }
    let Some(d) = early else {
        unreachable!("a multi-shard fan step has a remote shard")
    };
    cx.coord.begin_single_hop(&cx.worker, d.shard).await;
    // The deferred shard first: nothing else of the transaction may run before it is
    // scheduled there.
    let d_shard = d.shard;
    let d = d.into_owned();
    let (f2, input) = (f.clone(), clone_in(&value));
    let on2 = on.clone();
    let mut job = move |w: &Rc<Worker>| {
        let on = on2;
        let mut scratch = Reply::new(on.ver);
        on.part(w, &mut scratch, &f2, d, input)
    };
    let out = loop {
        match cx.coord.schedule_and_hop(&cx.worker, d_shard, job).await {
            Ok(out) => break out,
            Err(back) => {
                // Refused (that shard already ran a younger transaction): nothing ran
                // anywhere; again under a new id, with the job handed back untouched.
                job = back;
                cx.coord.reschedule_deferred(&cx.worker).await;
            }
        }
    };
    outs.push(out);
    let me = cx.worker.id;
    let mut calls = Vec::with_capacity(rest.len());
    let mut local = None;
    for p in rest {
        if p.shard == me && local.is_none() {
            local = Some(p);
            continue;
        }
        let (f, input) = (f.clone(), clone_in(&value));
        let (shard, p) = (p.shard, p.into_owned());
        let on = on.clone();
        calls.push(cx.coord.hop(&cx.worker, shard, true, move |w| {
            let mut scratch = Reply::new(on.ver);
            on.part(w, &mut scratch, &f, p, input)
        }));
    }
    if let Some(p) = local {
        outs.push(run_local_part(cx, on, &f, p, clone_in(&value), true).await);
    }
    for c in calls {
        outs.push(c.await);
    }
    assemble(outs)
}
