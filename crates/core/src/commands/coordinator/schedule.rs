//! `Coord`: one connection's coordination state for the command it is executing — the
//! command's lock plan, the transaction its hops run in once one is scheduled (its own or
//! EXEC's), and which shards it has concluded on. Command code never touches it directly: it
//! reaches shards through `hops.rs`, and `execute`/EXEC drive the command's begin and end.
//!
//! Scheduling (the coordinator half of VLL; the shard half is `engine::vll`): a transaction
//! gets a global id and is queued with its locks on every shard of its plan before any hop of
//! it runs; a shard refuses an id older than one it already ran, and the coordinator retries
//! with a new id, so every shard orders conflicting transactions alike.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use smallvec::SmallVec;

use super::plan::{group_width, LockPlan};
use crate::commands::spec::CommandSpec;
use crate::engine::shard_of;
use crate::engine::vll::{self, Locks, Sched, SchedHop, ShardLock};
use crate::engine::worker::Call;
use crate::engine::{guard, Worker};

/// A scheduled transaction.
struct Scheduled {
    id: u64,
    shards: SmallVec<[usize; 4]>,
    /// Shards where it concluded already (inside a hop).
    concluded: SmallVec<[usize; 4]>,
    /// A single-hop transaction's shard that schedules itself in its hop (see
    /// `Coord::begin_single_hop`), with what the others were scheduled with.
    deferred: Option<Box<Deferred>>,
}

struct Deferred {
    shard: usize,
    locks: Locks,
    shard_lock: ShardLock,
    others: SmallVec<[(usize, Locks); 2]>,
}

/// See the module docs.
#[derive(Default)]
pub struct Coord {
    /// The command being executed and its lock plan.
    spec: Option<&'static CommandSpec>,
    plan: LockPlan,
    tx: Option<Scheduled>,
    /// The transaction belongs to EXEC: the queued commands' hops never conclude it.
    exec: bool,
    /// The current command ran its final chain.
    finished: bool,
    /// The transaction is journaled (docs/design/replication.md): a command's own
    /// transaction keeps its locks past its final hops until `end_command`, so that its record
    /// enters the journal while it holds them.
    journaled: bool,
    /// EXEC's or a script's replication records, pushed as one group before it concludes.
    pub group: Option<Vec<crate::engine::journal::Record>>,
    /// A script's transaction started but not queued yet (`begin_exec_unqueued`).
    unqueued: Option<(Locks, ShardLock)>,
}

impl Coord {
    /// A new command (or a queued command inside EXEC) with lock plan `plan`.
    pub fn begin_command(&mut self, spec: &'static CommandSpec, plan: LockPlan) {
        debug_assert!(
            self.tx.is_none() || self.exec,
            "a command began while another's transaction was open"
        );
        self.spec = Some(spec);
        self.plan = plan;
        self.finished = false;
    }

    /// The command is over: conclude its own transaction wherever it has not concluded yet
    /// (a command that ended early, or whose final hops did not cover every planned shard).
    pub fn end_command(&mut self, w: &Rc<Worker>) {
        if !self.exec {
            self.conclude(w);
        }
        self.finished = false;
    }

    /// A blocking command starts over after it waited: its earlier hops concluded, the next
    /// chain plans its locks afresh.
    pub fn new_round(&mut self, w: &Rc<Worker>) {
        if !self.exec {
            self.conclude(w);
        }
        self.finished = false;
    }

    #[inline]
    pub fn plan(&self) -> &LockPlan {
        &self.plan
    }

    #[inline]
    pub fn finished(&self) -> bool {
        self.finished
    }

    #[inline]
    pub fn in_transaction(&self) -> bool {
        self.tx.is_some()
    }

    /// Does the current command own its transaction (not EXEC's)?
    #[inline]
    pub fn owns_transaction(&self) -> bool {
        self.tx.is_some() && !self.exec
    }

    /// Is a transaction (EXEC's, for queued commands) running this command?
    #[inline]
    pub fn in_exec(&self) -> bool {
        self.exec
    }

    /// Collects the command's key groups in `args` (its own arguments) as its key spec places
    /// them: (argument index of the key, its shard) in argument order; returns how many
    /// arguments each group has (MSET: key and value). From the lock plan when it has them.
    pub fn key_groups(
        &self,
        args: &[&[u8]],
        threads: usize,
        groups: &mut SmallVec<[(usize, usize); 16]>,
    ) -> usize {
        let Some(spec) = self.spec else {
            return 1;
        };
        match (self.plan.key_args(), spec.keys.range(args.len())) {
            (Some(it), _) => groups.extend(it),
            (None, Some((first, last, step))) => groups.extend(
                (first..=last)
                    .step_by(step)
                    .map(|i| (i, shard_of(args[i], threads))),
            ),
            (None, None) => groups.extend(
                spec.keys
                    .positions(args)
                    .into_iter()
                    .map(|i| (i, shard_of(args[i], threads))),
            ),
        }
        group_width(spec)
    }

    /// A final chain ran: mark the command finished and conclude its own transaction.
    pub fn finish_command(&mut self, w: &Rc<Worker>) {
        self.finished = true;
        if !self.exec && !self.journaled {
            self.conclude(w);
        }
    }

    /// Does the current command's own transaction journal its record (`execute` pushes it
    /// before `end_command` concludes)?
    #[inline]
    pub fn journaled(&self) -> bool {
        self.journaled && !self.exec
    }

    /// The running transaction is journaled (EXEC's, a script's, or the command's own).
    #[inline]
    pub fn tx_journaled(&self) -> bool {
        self.journaled
    }

    /// EXEC: schedules one transaction over every queued command's plan (`plan`); the queued
    /// commands then run inside it, and `end_exec` concludes it.
    pub async fn begin_exec(&mut self, w: &Rc<Worker>, plan: LockPlan) {
        self.plan = plan;
        self.schedule_plan(w).await;
        self.exec = true;
        self.group = self.journaled.then(Vec::new);
    }

    /// A script's transaction on this thread's shard alone, when that shard is free: started
    /// without entering the shard's queue or lock table (`TxShard::schedule_single_hop`), as
    /// one hop that lasts while the script runs without waiting. Nothing else runs on this
    /// thread meanwhile, so nothing can conflict; the first time the script would wait (a
    /// command elsewhere, a busy script letting clients in), the caller queues it with
    /// `vll::enqueue_started` (what `take_unqueued` hands over).
    /// Concluding is the same either way (`vll::finish` of an id never queued only serves
    /// the blocked clients). `Err(plan)`, nothing done, when the shard is not free.
    pub fn begin_exec_unqueued(&mut self, w: &Rc<Worker>, plan: LockPlan) -> Result<(), LockPlan> {
        let sl = plan.shard_lock();
        let locks = plan.locks_for(w.id);
        if plan.shards(w.threads()).as_slice() != [w.id] || !w.vll().quick_ok(&locks, sl) {
            return Err(plan);
        }
        let id = w.shared.next_txid.fetch_add(1, Ordering::Relaxed);
        {
            let mut t = w.vll_mut();
            if matches!(t.schedule_single_hop(id, &locks, sl), SchedHop::RunNow) {
                t.unqueued = id;
            } else {
                // (Not reached: a free shard runs a fresh id at once. Were it queued,
                // concluding it would still release it.)
                debug_assert!(false, "a free shard queued a fresh transaction");
            }
        }
        self.plan = plan;
        self.journaled = crate::engine::journal::journaled_id(id);
        self.tx = Some(Scheduled {
            id,
            shards: smallvec::smallvec![w.id],
            concluded: SmallVec::new(),
            deferred: None,
        });
        self.exec = true;
        self.group = self.journaled.then(Vec::new);
        self.unqueued = Some((locks, sl));
        Ok(())
    }

    /// Takes the transaction `begin_exec_unqueued` started and not yet queued: its id, locks
    /// and shard lock, for the caller to queue (`vll::enqueue_started`), or to give back with
    /// `keep_unqueued` if it did not need to.
    pub fn take_unqueued(&mut self) -> Option<(u64, Locks, ShardLock)> {
        let id = self.tx.as_ref()?.id;
        let (locks, sl) = self.unqueued.take()?;
        Some((id, locks, sl))
    }

    /// Gives back what `take_unqueued` took: still not queued.
    pub fn keep_unqueued(&mut self, locks: Locks, sl: ShardLock) {
        self.unqueued = Some((locks, sl));
    }

    /// A script starts over: what its first run captured was undone.
    pub fn drop_group(&mut self) {
        if let Some(g) = self.group.as_mut() {
            g.clear();
        }
    }

    /// The shards of EXEC's transaction.
    pub fn exec_shards(&self) -> SmallVec<[usize; 4]> {
        self.tx
            .as_ref()
            .map(|t| t.shards.clone())
            .unwrap_or_default()
    }

    /// Starts EXEC's transaction here when its only shard is this thread's and nothing
    /// earlier there conflicts: what a barrier hop would wait for, without the hop. False
    /// otherwise (then the caller hops).
    pub fn try_start_local(&mut self, w: &Rc<Worker>) -> bool {
        match &self.tx {
            Some(t) if t.deferred.is_none() && t.shards.as_slice() == [w.id] => {
                vll::try_start_hop(w, t.id)
            }
            _ => false,
        }
    }

    /// Concludes EXEC's transaction on every shard.
    pub fn end_exec(&mut self, w: &Rc<Worker>) {
        self.exec = false;
        if let Some(g) = self.group.take() {
            // (Not when the server became a replica meanwhile: REPLICAOF inside EXEC.)
            if !g.is_empty() && crate::engine::journal::active() {
                crate::engine::journal::push(crate::engine::journal::Item::Group(g));
            }
        }
        self.conclude(w);
        self.finished = false;
    }

    /// Schedules the current command's own transaction on every shard of its plan.
    pub async fn begin_transaction(&mut self, w: &Rc<Worker>) {
        self.schedule_plan(w).await;
        // Only a command that may leave a record (`journal_command`) keeps its locks for it: a
        // background save under journaling held its shared lock on every shard until the
        // snapshot was written, and every write waited for the whole save.
        let may_record = self.spec.is_some_and(|s| {
            s.flags & (crate::commands::flags::WRITE | crate::commands::flags::MAY_REPLICATE) != 0
        });
        if !may_record {
            self.journaled = false;
        }
    }

    async fn schedule_plan(&mut self, w: &Rc<Worker>) {
        let sl = self.plan.shard_lock();
        let shards = self.plan.shards(w.threads());
        let parts: SmallVec<[(usize, Locks); 2]> = shards
            .iter()
            .map(|&s| (s, self.plan.locks_for(s)))
            .collect();
        let id = schedule_on(w, &parts, sl).await;
        self.journaled = crate::engine::journal::journaled_id(id);
        self.tx = Some(Scheduled {
            id,
            shards,
            concluded: SmallVec::new(),
            deferred: None,
        });
    }

    /// Like `begin_transaction` for a final chain that touches each shard once, saving a round
    /// trip: shard `deferred` is left unscheduled, and `schedule_and_hop` sends it one message
    /// that schedules the transaction there and runs its hop.
    ///
    /// Why this keeps VLL's guarantee: no hop may run before the transaction is scheduled on
    /// all its shards. The deferred shard is scheduled last, in the message that runs its hop,
    /// and the other shards' hops are sent only after that message's answer. If the deferred
    /// shard refuses the id, nothing has run anywhere yet: the others are scheduled again under
    /// a new id and the message is sent again.
    pub async fn begin_single_hop(&mut self, w: &Rc<Worker>, deferred: usize) {
        let sl = self.plan.shard_lock();
        let shards = self.plan.shards(w.threads());
        let others: SmallVec<[(usize, Locks); 2]> = shards
            .iter()
            .filter(|&&s| s != deferred)
            .map(|&s| (s, self.plan.locks_for(s)))
            .collect();
        let locks = self.plan.locks_for(deferred);
        let id = schedule_on(w, &others, sl).await;
        // Journaled chains do not take this path (hops.rs); an id journaled anyway raced the
        // first activation: its record still goes in, late (docs/design/replication.md).
        self.journaled = crate::engine::journal::journaled_id(id);
        self.tx = Some(Scheduled {
            id,
            shards,
            concluded: SmallVec::new(),
            deferred: Some(Box::new(Deferred {
                shard: deferred,
                locks,
                shard_lock: sl,
                others,
            })),
        });
    }

    /// The deferred shard refused the id: cancel the transaction on the other shards and
    /// schedule it there again under a new id (nothing of it has run yet).
    pub async fn reschedule_deferred(&mut self, w: &Rc<Worker>) {
        let Some(t) = self.tx.as_ref() else { return };
        let Some(d) = t.deferred.as_ref() else { return };
        let old = t.id;
        for &(s, _) in &d.others {
            w.post(s, move |w| vll::finish(w, old));
        }
        let (others, sl) = (d.others.clone(), d.shard_lock);
        let id = schedule_on(w, &others, sl).await;
        if let Some(t) = self.tx.as_mut() {
            t.id = id;
        }
    }

    /// The deferred shard's message: schedule the transaction there and run `job` as its only
    /// hop, concluding it in place. `Err(job)` when the shard refuses the id: nothing ran.
    pub async fn schedule_and_hop<R, J>(
        &mut self,
        w: &Rc<Worker>,
        shard: usize,
        job: J,
    ) -> Result<R, J>
    where
        R: Send + 'static,
        J: FnOnce(&Rc<Worker>) -> R + Send + 'static,
    {
        let (id, locks, sl) = match self
            .tx
            .as_ref()
            .and_then(|t| t.deferred.as_ref().map(|d| (t.id, d)))
        {
            Some((id, d)) => {
                debug_assert_eq!(d.shard, shard);
                (id, d.locks.clone(), d.shard_lock)
            }
            None => unreachable!("schedule_and_hop without a deferred shard"),
        };
        let r = w
            .call_deferred::<Result<R, J>, _>(shard, move |w, resp| {
                let sched = w.vll_mut().schedule_single_hop(id, &locks, sl);
                match sched {
                    SchedHop::TooOld => resp.send(w, Err::<R, J>(job)),
                    SchedHop::RunNow => {
                        // A panicking job drops `resp` unanswered: the coordinator sees it.
                        if let Ok(r) = guard::contain(|| job(w)) {
                            resp.send(w, Ok::<R, J>(r));
                        }
                        w.serve_blocked();
                    }
                    SchedHop::Queued => vll::hop(w, id, move |w| {
                        let r = guard::contain(|| job(w));
                        // Concluded even when the job panicked (`resp`, dropped unanswered,
                        // tells the coordinator).
                        vll::finish(w, id);
                        if let Ok(r) = r {
                            resp.send(w, Ok::<R, J>(r));
                        }
                    }),
                }
            })
            .await;
        if r.is_ok() {
            if let Some(t) = self.tx.as_mut() {
                t.deferred = None;
                t.concluded.push(shard);
            }
        }
        r
    }

    /// Runs `job` on `shard` as a hop of the current command: inside its transaction when
    /// the shard is part of it (releasing the transaction there when `conclude`), or at once
    /// when the shard is outside it (keyless work nothing can conflict with), or, with no
    /// transaction at all, as an unlocked call.
    pub fn hop<R, F>(&mut self, w: &Rc<Worker>, shard: usize, conclude: bool, job: F) -> Call<R>
    where
        R: Send + 'static,
        F: FnOnce(&Rc<Worker>) -> R + Send + 'static,
    {
        let Some(t) = self.tx.as_mut().filter(|t| t.shards.contains(&shard)) else {
            return w.call(shard, job);
        };
        debug_assert!(
            t.deferred.is_none(),
            "a single-hop transaction runs its deferred shard first"
        );
        debug_assert!(
            !t.concluded.contains(&shard),
            "hop on a shard where the command's transaction already concluded"
        );
        let id = t.id;
        let conclude = conclude && !self.exec;
        if conclude {
            t.concluded.push(shard);
        }
        if shard == w.id && vll::try_start_hop(w, id) {
            // This thread's hop may run now: inline, without a reply slot. A panic still
            // concludes the shard it was to conclude, then goes on to the command boundary.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(w)));
            if conclude {
                vll::finish(w, id);
            }
            return match r {
                Ok(r) => Call::ready(r),
                Err(payload) => std::panic::resume_unwind(payload),
            };
        }
        w.call_deferred(shard, move |w, resp| {
            vll::hop(w, id, move |w| {
                let r = guard::contain(|| job(w));
                if conclude {
                    vll::finish(w, id);
                }
                // A panicked job drops `resp` unanswered: the coordinator sees the panic.
                if let Ok(r) = r {
                    resp.send(w, r);
                }
            })
        })
    }

    /// May the current command's hop on `shard` run right here, right now (its shard is this
    /// thread's and nothing earlier there conflicts)? Then it counts as started, and the caller
    /// runs it inline, with borrowed data, and calls `end_inline` afterwards.
    pub fn start_inline(&mut self, w: &Rc<Worker>, shard: usize) -> bool {
        if shard != w.id {
            return false;
        }
        match self.tx.as_ref().filter(|t| t.shards.contains(&shard)) {
            // No transaction, or keyless work outside it: runs at once.
            None => true,
            Some(t) => {
                debug_assert!(
                    !t.concluded.contains(&shard),
                    "hop on a shard where the command's transaction already concluded"
                );
                vll::try_start_hop(w, t.id)
            }
        }
    }

    /// After an inline hop (`start_inline`): conclude the transaction on `shard` if this was
    /// its last hop there.
    pub fn end_inline(&mut self, w: &Rc<Worker>, shard: usize, conclude: bool) {
        let exec = self.exec;
        if let Some(t) = self.tx.as_mut().filter(|t| t.shards.contains(&shard)) {
            if conclude && !exec {
                t.concluded.push(shard);
                vll::finish(w, t.id);
            }
        }
    }

    /// Concludes the transaction on every shard where it has not concluded (fire and forget:
    /// per-pair queues are FIFO, so the conclusion arrives after this connection's hops).
    fn conclude(&mut self, w: &Rc<Worker>) {
        self.unqueued = None;
        // (Read in place and cleared after: `take` would copy the whole state out first.)
        if let Some(t) = &self.tx {
            let id = t.id;
            // A deferred shard that was never reached was never scheduled.
            let unscheduled = t.deferred.as_ref().map(|d| d.shard);
            for &s in t
                .shards
                .iter()
                .filter(|s| !t.concluded.contains(s) && Some(**s) != unscheduled)
            {
                w.post(s, move |w| vll::finish(w, id));
            }
            self.tx = None;
        }
        self.journaled = false;
    }
}

/// Schedules a new transaction id on `parts` (shard, locks), retrying with a new id until no
/// shard refuses it. Returns the id.
async fn schedule_on(w: &Rc<Worker>, parts: &[(usize, Locks)], sl: ShardLock) -> u64 {
    let next_id = || w.shared.next_txid.fetch_add(1, Ordering::Relaxed);
    if let [(s, locks)] = parts {
        if *s == w.id {
            // Only this thread's shard: a fresh id is younger than anything that already ran
            // here, so scheduling cannot be refused.
            let id = next_id();
            if let Sched::Ok(_) = w.vll_mut().schedule(id, locks.clone(), sl) {
                return id;
            }
        }
    }
    loop {
        let id = next_id();
        let calls: SmallVec<[(usize, Call<Sched>); 2]> = parts
            .iter()
            .map(|(s, locks)| {
                let locks = locks.clone();
                (*s, w.call(*s, move |w| w.vll_mut().schedule(id, locks, sl)))
            })
            .collect();
        let mut ok: SmallVec<[usize; 4]> = SmallVec::new();
        let mut retry = false;
        for (s, c) in calls {
            match c.await {
                Sched::Ok(_) => ok.push(s),
                Sched::TooOld => retry = true,
            }
        }
        if !retry {
            return id;
        }
        for s in ok {
            w.post(s, move |w| vll::finish(w, id));
        }
    }
}

/// A connection that goes away mid-command (a panic unwinding through its task) must not
/// leave locks behind.
impl Coord {
    pub fn abandon(&mut self, w: &Rc<Worker>) {
        self.exec = false;
        self.conclude(w);
    }
}
