//! Coordinator side of the transaction framework (shard side: `engine::vll`).
//!
//! `execute` plans every command from its key spec:
//! - keys on one shard (the common case): no transaction id; the work runs on the owning shard at
//!   once unless one of its keys is locked by a transaction, in which case it waits there;
//! - keys on several shards, or a global command (FLUSHALL, DBSIZE, KEYS...): a transaction is
//!   scheduled on every involved shard (intent locks + queue position), the handler's hops run
//!   inside it, and it concludes on every shard afterwards — so no other client ever observes a
//!   half-applied MSET or RENAME;
//! - MULTI/EXEC plans one transaction over all queued commands.
//!
//! Handlers reach shards only through `ConnCtx::shard_exec` (directly or via `fan_out`,
//! `on_all_shards`, `run_on_shard`), which routes each hop into the current transaction or
//! through the lock-checked quick path.

pub mod squash;
pub mod wait;

use std::rc::Rc;

use smallvec::SmallVec;

use super::{flags, CommandSpec, ConnCtx, PlanSink};
use crate::engine::router::route;
use crate::engine::vll::{self, KeyLock, Locks, Sched, ShardLock};
use crate::engine::worker::Call;
use crate::engine::{shard_of, Worker};

/// A scheduled transaction, held by the coordinating connection.
#[derive(Clone, Debug)]
pub struct TxState {
    pub id: u64,
    pub shards: SmallVec<[usize; 4]>,
    /// Every shard granted its locks without conflict at scheduling (statistics only: whether a
    /// hop may run early is decided per shard, see `engine::vll`).
    pub uncontended: bool,
    /// The command touches each shard once (`flags::TX_SINGLE_HOP`): conclude inside the hop.
    pub single_hop: bool,
    /// Shards where the transaction already concluded inside its hop.
    pub concluded: std::cell::RefCell<SmallVec<[usize; 4]>>,
    /// A single-hop transaction's last remote shard, not scheduled yet: `fan_out` schedules it
    /// and runs its hop in one message (see `ConnCtx::tx_begin_single_hop`).
    pub deferred: Option<Deferred>,
}

/// The shard whose scheduling a single-hop transaction folds into its hop, and what the others
/// were scheduled with (to schedule them again under a new id if that shard refuses the id).
#[derive(Clone, Debug)]
pub struct Deferred {
    pub shard: usize,
    pub locks: Locks,
    pub shard_lock: ShardLock,
    others: SmallVec<[(usize, Locks); 2]>,
}

/// What one command needs locked.
#[derive(Clone, Debug, Default)]
pub struct LockPlan {
    pub keys: Vec<(usize, KeyLock)>,
    pub global: Option<ShardLock>,
    /// Planning context: the number of shards, the db the next command's keys are in (EXEC: a
    /// queued SELECT switches it for the commands after it) and the number of dbs.
    threads: usize,
    db: usize,
    dbnum: usize,
}

impl LockPlan {
    pub fn new(threads: usize, db: usize, dbnum: usize) -> Self {
        LockPlan {
            threads,
            db,
            dbnum,
            ..Default::default()
        }
    }

    /// Adds the locks of one command: its key spec's keys (in the current db), the whole-shard
    /// lock of a global command, then whatever its `plan` hook adds (keys in another db, all
    /// shards for SORT's BY/GET patterns, SELECT's db switch).
    pub fn add_command(&mut self, spec: &CommandSpec, args: &[&[u8]]) {
        let excl = spec.flags & flags::WRITE != 0;
        if spec.flags & flags::TX_GLOBAL_WRITE != 0 {
            self.global = Some(ShardLock::Excl);
        } else if spec.flags & flags::TX_GLOBAL_READ != 0 && self.global.is_none() {
            self.global = Some(ShardLock::Shared);
        }
        let (db, threads) = (self.db, self.threads);
        let lock = |k: &[u8]| {
            let (s, h) = route(k, threads);
            (s, KeyLock::with_hash(db, h, excl))
        };
        if let Some((first, last, step)) = spec.keys.range(args.len()) {
            // The common case, without `positions`' Vec.
            self.keys
                .reserve((last + 1).saturating_sub(first).div_ceil(step));
            for i in (first..=last).step_by(step) {
                self.keys.push(lock(args[i]));
            }
        } else {
            for i in spec.keys.positions(args) {
                self.keys.push(lock(args[i]));
            }
        }
        if let Some(hook) = spec.plan {
            hook(args, self);
        }
    }

    /// Shards touched (sorted, unique). All shards for a global plan.
    pub fn shards(&self, threads: usize) -> SmallVec<[usize; 4]> {
        if self.global.is_some() {
            return (0..threads).collect();
        }
        let mut v: SmallVec<[usize; 4]> = SmallVec::new();
        for &(s, _) in &self.keys {
            if let Err(at) = v.binary_search(&s) {
                v.insert(at, s);
            }
        }
        v
    }

    pub fn locks_for(&self, shard: usize) -> Locks {
        let n = self.keys.iter().filter(|(s, _)| *s == shard).count();
        let mut out = Locks::with_capacity(n);
        out.extend(
            self.keys
                .iter()
                .filter(|(s, _)| *s == shard)
                .map(|(_, l)| *l),
        );
        out
    }

    pub fn shard_lock(&self) -> ShardLock {
        self.global.unwrap_or(ShardLock::None)
    }
}

/// The commands' `plan` hooks add their extra locks here (after the key spec's keys).
impl PlanSink for LockPlan {
    fn lock_key(&mut self, db: usize, key: &[u8], excl: bool) {
        self.keys
            .push((shard_of(key, self.threads), KeyLock::new(db, key, excl)));
    }

    fn lock_all_shards(&mut self, excl: bool) {
        if excl {
            self.global = Some(ShardLock::Excl);
        } else if self.global.is_none() {
            self.global = Some(ShardLock::Shared);
        }
    }

    fn select_db(&mut self, db: usize) {
        self.db = db;
    }

    fn dbnum(&self) -> usize {
        self.dbnum
    }
}

/// The shards of one command's keys as its lock plan computed them, for `fan_out` to reuse
/// instead of hashing every key again. Valid for the `args` it was recorded for only: identified
/// by the argument slice's address and length, and cleared after every command (buffers are
/// reused, so an address alone could match the next command).
#[derive(Default)]
pub struct Routes {
    args: (usize, usize),
    first: usize,
    step: usize,
    shards: SmallVec<[u16; 16]>,
}

impl Routes {
    pub fn clear(&mut self) {
        self.args = (0, 0);
        self.shards.clear();
    }

    /// Records the plan's key shards when they are exactly the key range of `spec`.
    fn record(&mut self, spec: &CommandSpec, args: &[&[u8]], plan: &LockPlan) {
        let Some((first, last, step)) = spec.keys.range(args.len()) else {
            return;
        };
        let n = (last + 1).saturating_sub(first).div_ceil(step);
        // Extra locks (MOVE's and COPY's other db) come after the range's keys.
        if n == 0 || plan.keys.len() < n {
            return;
        }
        self.args = (args.as_ptr() as usize, args.len());
        self.first = first;
        self.step = step;
        self.shards.clear();
        self.shards
            .extend(plan.keys[..n].iter().map(|&(s, _)| s as u16));
    }

    /// The shards of the keys at `first, first + step, ...` of `args`, if recorded for them.
    pub fn get(&self, args: &[&[u8]], first: usize, step: usize) -> Option<&[u16]> {
        let n = args.len().saturating_sub(first) / step.max(1);
        (self.args == (args.as_ptr() as usize, args.len())
            && self.first == first
            && self.step == step
            && self.shards.len() == n)
            .then_some(&self.shards[..])
    }
}

impl ConnCtx {
    /// Schedules a transaction on every shard of `plan` (retrying with a new id when a shard has
    /// already run a younger transaction) and makes it the current one.
    pub async fn tx_begin(&mut self, plan: &LockPlan) {
        let shards = plan.shards(self.threads());
        let sl = plan.shard_lock();
        let all: SmallVec<[(usize, Locks); 2]> =
            shards.iter().map(|&s| (s, plan.locks_for(s))).collect();
        let (id, granted) = self.schedule_on(&all, sl).await;
        self.tx = Some(TxState {
            id,
            shards,
            uncontended: granted,
            single_hop: false,
            concluded: Default::default(),
            deferred: None,
        });
    }

    /// Like `tx_begin` for a command that touches each shard once through `fan_out`
    /// (`flags::TX_SINGLE_HOP`), saving a round trip: one remote shard is left unscheduled and
    /// `fan_out` sends it a single message that schedules the transaction there and runs its hop.
    ///
    /// Why this keeps VLL's guarantee: no hop may run before the transaction is scheduled on all
    /// its shards. The deferred shard is scheduled last, in the same message that runs its hop,
    /// and `fan_out` starts the other shards' hops only after that message's answer. If the
    /// deferred shard refuses the id (it already ran a younger transaction), nothing has run
    /// anywhere yet, so the others are rescheduled under a new id and the message is sent again.
    pub async fn tx_begin_single_hop(&mut self, plan: &LockPlan) {
        let shards = plan.shards(self.threads());
        let sl = plan.shard_lock();
        let me = self.worker.id;
        let defer = (sl == ShardLock::None && shards.len() >= 2)
            .then(|| shards.iter().rev().copied().find(|&s| s != me))
            .flatten();
        let Some(d) = defer else {
            self.tx_begin(plan).await;
            if let Some(t) = self.tx.as_mut() {
                t.single_hop = true;
            }
            return;
        };
        let others: SmallVec<[(usize, Locks); 2]> = shards
            .iter()
            .filter(|&&s| s != d)
            .map(|&s| (s, plan.locks_for(s)))
            .collect();
        let (id, granted) = self.schedule_on(&others, sl).await;
        self.tx = Some(TxState {
            id,
            shards,
            uncontended: granted,
            single_hop: true,
            concluded: Default::default(),
            deferred: Some(Deferred {
                shard: d,
                locks: plan.locks_for(d),
                shard_lock: sl,
                others,
            }),
        });
    }

    /// The deferred shard refused the id: cancel the transaction on the other shards and
    /// schedule it there again under a new id (nothing of it has run yet).
    pub(crate) async fn tx_reschedule_deferred(&mut self) {
        let Some(t) = self.tx.as_ref() else { return };
        let Some(d) = t.deferred.clone() else { return };
        let old = t.id;
        for &(s, _) in &d.others {
            self.worker.post(s, move |w| vll::finish(w, old));
        }
        let (id, _) = self.schedule_on(&d.others, d.shard_lock).await;
        if let Some(t) = self.tx.as_mut() {
            t.id = id;
        }
    }

    /// Schedules a new transaction id on `parts` (shard, locks), retrying with a new id until no
    /// shard refuses it. Returns the id and whether every shard granted its locks at once.
    async fn schedule_on(&self, parts: &[(usize, Locks)], sl: ShardLock) -> (u64, bool) {
        if let [(s, locks)] = parts {
            if *s == self.worker.id {
                // Only this thread's shard: a fresh id is younger than anything that already
                // ran here, so scheduling cannot be refused.
                let id = self
                    .worker
                    .shared
                    .next_txid
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut t = self.worker.tx.borrow_mut();
                if let Sched::Ok(granted) = t.schedule(id, locks.clone(), sl) {
                    return (id, granted);
                }
            }
        }
        loop {
            let id = self
                .worker
                .shared
                .next_txid
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let calls: SmallVec<[(usize, Call<Sched>); 2]> = parts
                .iter()
                .map(|(s, locks)| {
                    let locks = locks.clone();
                    (
                        *s,
                        self.worker
                            .call(*s, move |w| w.tx.borrow_mut().schedule(id, locks, sl)),
                    )
                })
                .collect();
            let mut ok: SmallVec<[usize; 4]> = SmallVec::new();
            let mut granted = true;
            let mut retry = false;
            for (s, c) in calls {
                match c.await {
                    Sched::Ok(g) => {
                        ok.push(s);
                        granted &= g;
                    }
                    Sched::TooOld => retry = true,
                }
            }
            if retry {
                for s in ok {
                    self.worker.post(s, move |w| vll::finish(w, id));
                }
                continue;
            }
            return (id, granted);
        }
    }

    /// Concludes the current transaction on all its shards (fire and forget: per-pair queues are
    /// FIFO, so the conclusion reaches each shard after this connection's hops).
    pub fn tx_end(&mut self) {
        if let Some(t) = self.tx.take() {
            let id = t.id;
            let done = t.concluded.borrow();
            // A deferred shard that was never reached was never scheduled.
            let unscheduled = t.deferred.as_ref().map(|d| d.shard);
            for &s in t
                .shards
                .iter()
                .filter(|s| !done.contains(s) && Some(**s) != unscheduled)
            {
                self.worker.post(s, move |w| vll::finish(w, id));
            }
        }
    }

    /// Runs `f` on `shard` as part of the current command: inside its transaction when there is
    /// one, otherwise as a quick operation that waits only while its keys are locked.
    pub fn shard_exec<R, F>(&self, shard: usize, f: F) -> Call<R>
    where
        R: Send + 'static,
        F: FnOnce(&Rc<Worker>) -> R + Send + 'static,
    {
        match &self.tx {
            Some(t) if t.shards.contains(&shard) => {
                debug_assert!(
                    t.deferred.is_none(),
                    "a deferred single-hop transaction runs its hops through fan_out"
                );
                let id = t.id;
                let conclude = t.single_hop && !t.concluded.borrow().contains(&shard);
                if conclude {
                    t.concluded.borrow_mut().push(shard);
                }
                if shard == self.worker.id && vll::try_start_hop(&self.worker, id) {
                    // This thread's hop may run now: inline, without a reply slot.
                    let r = f(&self.worker);
                    if conclude {
                        vll::finish(&self.worker, id);
                    }
                    return Call::ready(r);
                }
                self.worker.call_deferred(shard, move |w, resp| {
                    vll::hop(w, id, move |w| {
                        let r = f(w);
                        resp.send(w, r);
                        if conclude {
                            // The only hop on this shard: release the locks right here, saving
                            // a separate conclusion message (and wake-up) per shard.
                            vll::finish(w, id);
                        }
                    })
                })
            }
            Some(_) => {
                // A shard outside the transaction's plan (keyless work): nothing of the
                // transaction can conflict there.
                self.worker.call(shard, f)
            }
            None => {
                let locks: Locks = self
                    .cmd_locks
                    .iter()
                    .filter(|(s, _)| *s == shard)
                    .map(|(_, l)| *l)
                    .collect();
                let sl = self.cmd_shard_lock;
                self.worker.call_deferred(shard, move |w, resp| {
                    vll::quick(w, locks, sl, move |w| {
                        let r = f(w);
                        resp.send(w, r);
                    })
                })
            }
        }
    }
}

/// Plans the current command for the quick path or a transaction. Returns the plan when the
/// command needs its own transaction.
pub fn plan_command(cx: &mut ConnCtx, spec: &CommandSpec, args: &[&[u8]]) -> Option<LockPlan> {
    cx.cmd_locks.clear();
    cx.routes.clear();
    cx.cmd_shard_lock = ShardLock::None;
    let threads = cx.threads();
    let global = spec.flags & (flags::TX_GLOBAL_READ | flags::TX_GLOBAL_WRITE) != 0;
    if !global && threads == 1 && cx.worker.tx.borrow().idle() {
        // Single shard with no transaction anywhere: nothing to lock or check.
        return None;
    }
    let mut plan = LockPlan::new(threads, cx.db, cx.shared().config.dbnum());
    plan.add_command(spec, args);
    cx.routes.record(spec, args, &plan);
    let multi_shard =
        global || plan.global.is_some() || plan.keys.iter().any(|(s, _)| *s != plan.keys[0].0);
    if multi_shard {
        return Some(plan);
    }
    cx.cmd_locks = plan.keys.into_iter().collect();
    None
}

/// A connection that goes away mid-transaction (a panicking command unwinds through the
/// connection task) must not leave its locks behind: conclude it on every shard.
impl Drop for ConnCtx {
    fn drop(&mut self) {
        self.tx_end();
    }
}
