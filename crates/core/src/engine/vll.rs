//! Shard side of the transaction framework (after Dragonfly's, which follows the VLL paper:
//! "VLL: a lock manager redesign for main memory database systems").
//!
//! There is no mutex anywhere: each shard thread owns a `TxShard` with
//! - intent locks: per (db, key-hash) counters of shared/exclusive holders, plus a whole-shard
//!   lock for global commands (FLUSHALL, DBSIZE...);
//! - a queue of scheduled transactions ordered by a global transaction id;
//! - `committed`: the highest id that has started executing here.
//!
//! Rules (see `commands::coordinator`):
//! 1. A multi-shard (or contended) transaction is scheduled on all its shards before any of it
//!    runs; a shard refuses an id lower than `committed` and the coordinator retries with a new
//!    id, so every shard orders conflicting transactions the same way.
//! 2. A hop of transaction T runs as soon as no *earlier* (lower id) transaction still queued on
//!    this shard conflicts with T. Non-conflicting transactions therefore run out of order and in
//!    parallel; conflicting ones run in id order on every shard. A transaction only ever waits for
//!    lower ids, so there are no deadlock cycles.
//! 3. Uncontended single-shard commands don't enter the queue: they run at once unless one of
//!    their keys is locked, in which case they wait until the conflicting locks are released.
//!
//! Locks are keyed by a 64-bit hash of the key: a collision can only make two transactions
//! serialize needlessly, never let conflicting ones interleave.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use super::worker::Worker;

/// One lock per key: an EXEC of 4000 writes to one key asks for its lock 4000 times, and
/// holder lists that long made every hop's conflict check quadratic. The merged lock is
/// exclusive when any request was.
fn merge_locks(mut locks: Locks) -> Locks {
    if locks.len() > 1 {
        locks.sort_unstable_by_key(|l| (l.db, l.hash, !l.excl));
        locks.dedup_by(|later, kept| later.db == kept.db && later.hash == kept.hash);
    }
    locks
}

/// One key lock request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyLock {
    pub db: u32,
    pub hash: u64,
    pub excl: bool,
}

impl KeyLock {
    pub fn new(db: usize, key: &[u8], excl: bool) -> Self {
        KeyLock {
            db: db as u32,
            hash: damselfly_dash::hash_key(key),
            excl,
        }
    }

    /// From the key's table hash, when the caller has it already (`router::route`).
    #[inline]
    pub fn with_hash(db: usize, hash: u64, excl: bool) -> Self {
        KeyLock {
            db: db as u32,
            hash,
            excl,
        }
    }
}

/// The key locks of one command or transaction on one shard (usually one or two keys).
pub type Locks = smallvec::SmallVec<[KeyLock; 2]>;

/// Whole-shard lock request of a global command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardLock {
    None,
    Shared,
    Excl,
}

/// Queued holders of one key lock: counts for conflict checks, ids for ordering checks.
#[derive(Default, Debug)]
struct Holders {
    counts: Counts,
    /// (txid, exclusive) of every queued transaction holding this lock.
    ids: smallvec::SmallVec<[(u64, bool); 2]>,
}

#[derive(Default, Clone, Copy, Debug)]
struct Counts {
    shared: u32,
    excl: u32,
}

impl Counts {
    fn conflicts(&self, excl: bool) -> bool {
        self.excl > 0 || (excl && self.shared > 0)
    }
    fn add(&mut self, excl: bool) {
        if excl {
            self.excl += 1
        } else {
            self.shared += 1
        }
    }
    fn sub(&mut self, excl: bool) {
        if excl {
            self.excl -= 1
        } else {
            self.shared -= 1
        }
    }
    fn is_zero(&self) -> bool {
        self.shared == 0 && self.excl == 0
    }
}

/// Work parked on this thread until it may run.
pub type Parked = Box<dyn FnOnce(&Rc<Worker>)>;

struct Entry {
    locks: Locks,
    shard_lock: ShardLock,
    pending: VecDeque<Parked>,
}

impl Entry {
    /// Do two transactions' lock sets conflict on this shard?
    fn conflicts(&self, other: &Entry) -> bool {
        use ShardLock::*;
        match (self.shard_lock, other.shard_lock) {
            (Excl, _) | (_, Excl) => return true,
            (Shared, Shared) => {}
            // A shared shard lock conflicts with exclusive key locks; key locks the global
            // transaction holds besides (MULTI with FLUSHDB and SET) are compared below.
            (Shared, None) if other.locks.iter().any(|l| l.excl) => return true,
            (None, Shared) if self.locks.iter().any(|l| l.excl) => return true,
            _ => {}
        }
        self.locks.iter().any(|a| {
            other
                .locks
                .iter()
                .any(|b| a.db == b.db && a.hash == b.hash && (a.excl || b.excl))
        })
    }
}

/// Hasher for lock-table keys, which are already uniformly distributed 64-bit key hashes: mixing
/// in the db with one multiply is enough (a byte-wise hash over them cost ~15 ns per lookup).
#[derive(Default)]
pub struct PreHashed(u64);

impl std::hash::Hasher for PreHashed {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(29) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type LockMap = HashMap<(u32, u64), Holders, std::hash::BuildHasherDefault<PreHashed>>;

#[derive(Default)]
pub struct TxShard {
    locks: LockMap,
    shard: Counts,
    queue: BTreeMap<u64, Entry>,
    /// Queued transactions holding a whole-shard lock (global commands), by id.
    globals: BTreeMap<u64, ShardLock>,
    committed: u64,
    /// Hops parked in queue entries (so `poll` skips walking the queue when there are none).
    parked: usize,
    waiting: VecDeque<(Locks, ShardLock, Parked)>,
    /// A transaction running here without being queued for longer than one command (a
    /// script's, `Coord::begin_exec_unqueued`): the shard is not idle meanwhile, so what waits
    /// for idleness (eviction before an insert) waits for it too. 0: none.
    pub unqueued: u64,
    /// Statistics for INFO.
    pub scheduled: u64,
    pub retries: u64,
    pub quick_waits: u64,
}

/// Outcome of `TxShard::schedule_single_hop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedHop {
    /// Run the hop now; nothing was queued or locked.
    RunNow,
    /// Queued with its locks: run the hop through `hop` and conclude with `finish`.
    Queued,
    /// The id is older than a transaction that already ran here: retry with a new id.
    TooOld,
}

/// Outcome of scheduling on one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sched {
    /// Locks taken; `true` when none conflicted with another holder.
    Ok(bool),
    /// The id is older than a transaction that already ran here: retry with a new id.
    TooOld,
}

impl TxShard {
    /// No locks and no queued transactions: the fast path for single-shard commands.
    #[inline]
    pub fn idle(&self) -> bool {
        self.locks.is_empty() && self.shard.is_zero() && self.queue.is_empty() && self.unqueued == 0
    }

    #[inline]
    fn key_conflicts(&self, l: &KeyLock) -> bool {
        if self.shard.conflicts(l.excl) {
            return true;
        }
        self.locks
            .get(&(l.db, l.hash))
            .is_some_and(|h| h.counts.conflicts(l.excl))
    }

    fn shard_conflicts(&self, s: ShardLock) -> bool {
        match s {
            ShardLock::None => false,
            // A shard lock conflicts with any conflicting shard lock and with key locks.
            ShardLock::Shared => {
                self.shard.excl > 0 || self.locks.values().any(|h| h.counts.excl > 0)
            }
            ShardLock::Excl => !self.shard.is_zero() || !self.locks.is_empty(),
        }
    }

    /// Does any queued transaction hold a lock on `key` (in db `db`)? Blocked clients are not
    /// served from such a key until the transaction concludes.
    pub fn key_locked(&self, db: usize, key: &[u8]) -> bool {
        !self.shard.is_zero()
            || (!self.locks.is_empty()
                && self
                    .locks
                    .contains_key(&(db as u32, damselfly_dash::hash_key(key))))
    }

    /// May a command with these locks run right now without a transaction?
    pub fn quick_ok(&self, locks: &[KeyLock], s: ShardLock) -> bool {
        self.idle() || (!self.shard_conflicts(s) && !locks.iter().any(|l| self.key_conflicts(l)))
    }

    fn acquire_shard(&mut self, txid: u64, s: ShardLock) {
        if s != ShardLock::None {
            self.globals.insert(txid, s);
        }
        match s {
            ShardLock::None => {}
            ShardLock::Shared => self.shard.add(false),
            ShardLock::Excl => self.shard.add(true),
        }
    }

    fn release(&mut self, txid: u64, locks: &[KeyLock], s: ShardLock) {
        for l in locks {
            if let std::collections::hash_map::Entry::Occupied(mut o) =
                self.locks.entry((l.db, l.hash))
            {
                let h = o.get_mut();
                h.counts.sub(l.excl);
                if let Some(i) = h.ids.iter().position(|&(id, x)| id == txid && x == l.excl) {
                    h.ids.swap_remove(i);
                }
                if h.counts.is_zero() {
                    o.remove();
                }
            }
        }
        if s != ShardLock::None {
            self.globals.remove(&txid);
        }
        match s {
            ShardLock::None => {}
            ShardLock::Shared => self.shard.sub(false),
            ShardLock::Excl => self.shard.sub(true),
        }
    }

    pub fn schedule(&mut self, txid: u64, locks: Locks, s: ShardLock) -> Sched {
        if txid < self.committed {
            self.retries += 1;
            return Sched::TooOld;
        }
        let locks = merge_locks(locks);
        // Conflict check and lock acquisition in one lookup per key.
        let mut granted = !self.shard_conflicts(s);
        let shard_held = self.shard;
        for l in &locks {
            let h = self.locks.entry((l.db, l.hash)).or_default();
            if granted
                && (shard_held.conflicts(l.excl)
                    || h.ids.iter().any(|&(id, x)| id != txid && (x || l.excl)))
            {
                granted = false;
            }
            h.counts.add(l.excl);
            h.ids.push((txid, l.excl));
        }
        self.acquire_shard(txid, s);
        self.queue.insert(
            txid,
            Entry {
                locks,
                shard_lock: s,
                pending: VecDeque::new(),
            },
        );
        self.scheduled += 1;
        Sched::Ok(granted)
    }

    /// Scheduling that will be followed at once by the transaction's only hop here: when none
    /// of its locks conflicts with any holder, the hop may run right now without entering the
    /// queue or the lock table (it runs and concludes before anything else happens on this
    /// thread, exactly as if queued, run and finished).
    pub fn schedule_single_hop(&mut self, txid: u64, locks: &Locks, s: ShardLock) -> SchedHop {
        if txid < self.committed {
            self.retries += 1;
            return SchedHop::TooOld;
        }
        self.scheduled += 1;
        if self.quick_ok(locks, s) {
            self.start(txid);
            return SchedHop::RunNow;
        }
        self.scheduled -= 1;
        match self.schedule(txid, locks.clone(), s) {
            Sched::Ok(_) => SchedHop::Queued,
            Sched::TooOld => SchedHop::TooOld,
        }
    }

    /// May a hop of `txid` run now? Only if no earlier queued transaction conflicts with it.
    ///
    /// Why per-key holder lists: with many clients, dozens of transactions sit in the queue, and
    /// comparing lock sets pairwise against every earlier one cost more than the hop itself.
    /// Looking up only this transaction's own keys costs O(its locks).
    fn runnable(&self, txid: u64) -> bool {
        let Some(e) = self.queue.get(&txid) else {
            return true;
        };
        if e.shard_lock != ShardLock::None {
            // Global commands are rare: compare with every earlier transaction.
            return !self.queue.range(..txid).any(|(_, u)| u.conflicts(e));
        }
        let any_excl = e.locks.iter().any(|l| l.excl);
        if self
            .globals
            .range(..txid)
            .any(|(_, &g)| g == ShardLock::Excl || any_excl)
        {
            return false;
        }
        !e.locks.iter().any(|l| {
            self.locks
                .get(&(l.db, l.hash))
                .is_some_and(|h| h.ids.iter().any(|&(id, x)| id < txid && (x || l.excl)))
        })
    }

    fn start(&mut self, txid: u64) {
        if txid > self.committed {
            self.committed = txid;
        }
    }

    /// Removes a transaction and releases its locks (conclude or cancel).
    fn finish(&mut self, txid: u64) {
        if self.unqueued == txid {
            self.unqueued = 0;
        }
        if let Some(e) = self.queue.remove(&txid) {
            self.parked -= e.pending.len();
            self.release(txid, &e.locks, e.shard_lock);
        }
    }
}

/// May a hop of `txid` run right now on this thread (nothing of it parked, no earlier
/// conflicting transaction)? If so it is marked started; the caller runs the hop inline.
pub fn try_start_hop(w: &Worker, txid: u64) -> bool {
    let mut t = w.vll_mut();
    let has_pending = t.queue.get(&txid).is_some_and(|e| !e.pending.is_empty());
    if has_pending || !t.runnable(txid) {
        return false;
    }
    t.start(txid);
    true
}

/// Queues transaction `txid`, started unqueued on this thread as a single hop
/// (`Coord::begin_exec_unqueued`) and still running, so that it keeps its locks while it
/// waits. Nothing ran here since it started, so nothing it conflicts with is queued.
pub fn enqueue_started(w: &Worker, txid: u64, locks: Locks, s: ShardLock) {
    let granted = w.vll_mut().schedule(txid, locks, s);
    debug_assert!(matches!(granted, Sched::Ok(true)), "{granted:?}");
}

/// Runs one hop of transaction `txid` on this thread (now, or when it becomes runnable).
pub fn hop<F: FnOnce(&Rc<Worker>) + 'static>(w: &Rc<Worker>, txid: u64, f: F) {
    {
        let mut t = w.vll_mut();
        let has_pending = t.queue.get(&txid).is_some_and(|e| !e.pending.is_empty());
        if has_pending || !t.runnable(txid) {
            if let Some(e) = t.queue.get_mut(&txid) {
                e.pending.push_back(Box::new(f));
                t.parked += 1;
                return;
            }
        }
        t.start(txid);
    }
    // Blocked clients are served when the transaction concludes (after EXEC, like Redis).
    run_contained(w, f);
}

/// Runs command work (a hop or quick operation) so that its panic stops at the command: the
/// work's `Responder` is dropped unanswered, which tells the coordinator, and this shard's
/// queue and locks stay consistent (see `engine::guard`).
fn run_contained<F: FnOnce(&Rc<Worker>)>(w: &Rc<Worker>, f: F) {
    let _ = super::guard::contain(|| f(w));
}

/// Concludes (or cancels) a transaction on this shard and lets waiting work proceed.
pub fn finish(w: &Rc<Worker>, txid: u64) {
    w.vll_mut().finish(txid);
    w.serve_blocked();
    poll(w);
}

/// Runs a lock-checked single-shard operation now, or parks it until its keys are free.
pub fn quick<F: FnOnce(&Rc<Worker>) + 'static>(w: &Rc<Worker>, locks: Locks, s: ShardLock, f: F) {
    {
        let mut t = w.vll_mut();
        if !t.quick_ok(&locks, s) {
            t.quick_waits += 1;
            t.waiting.push_back((locks, s, Box::new(f)));
            return;
        }
    }
    run_contained(w, f);
    w.serve_blocked();
}

/// Runs whatever became runnable: the queue head's parked hops, then parked quick operations.
pub fn poll(w: &Rc<Worker>) {
    loop {
        // (work, is it a quick operation?)
        let next: Option<(Parked, bool)> = {
            let mut t = w.vll_mut();
            if t.parked == 0 && t.waiting.is_empty() {
                return;
            }
            let mut found = None;
            // Any transaction whose hop is parked and that no earlier transaction blocks.
            let ids: Vec<u64> = t
                .queue
                .iter()
                .filter(|(_, e)| !e.pending.is_empty())
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                if t.runnable(id) {
                    t.start(id);
                    found = t
                        .queue
                        .get_mut(&id)
                        .and_then(|e| e.pending.pop_front())
                        .map(|f| (f, false));
                    if found.is_some() {
                        t.parked -= 1;
                    }
                    break;
                }
            }
            if found.is_none() {
                if let Some(i) = (0..t.waiting.len()).find(|&i| {
                    let (l, s, _) = &t.waiting[i];
                    t.quick_ok(l, *s)
                }) {
                    found = t.waiting.remove(i).map(|(_, _, f)| (f, true));
                }
            }
            found
        };
        match next {
            // A transaction's hop: blocked clients are served when it concludes (`finish`), as
            // Redis serves them after EXEC — never between two hops of one transaction.
            Some((f, false)) => run_contained(w, f),
            Some((f, true)) => {
                run_contained(w, f);
                w.serve_blocked();
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kl(k: &[u8], excl: bool) -> KeyLock {
        KeyLock::new(0, k, excl)
    }

    fn v(l: &[KeyLock]) -> Locks {
        l.iter().copied().collect()
    }

    #[test]
    fn grant_and_conflict() {
        let mut t = TxShard::default();
        assert!(t.idle());
        assert_eq!(
            t.schedule(1, v(&[kl(b"a", true)]), ShardLock::None),
            Sched::Ok(true)
        );
        assert_eq!(
            t.schedule(2, v(&[kl(b"a", false)]), ShardLock::None),
            Sched::Ok(false)
        );
        assert_eq!(
            t.schedule(3, v(&[kl(b"b", false)]), ShardLock::None),
            Sched::Ok(true)
        );
        assert!(!t.quick_ok(&[kl(b"a", false)], ShardLock::None));
        assert!(t.quick_ok(&[kl(b"b", false)], ShardLock::None));
        assert!(!t.quick_ok(&[kl(b"b", true)], ShardLock::None));
        assert!(t.runnable(1));
        assert!(!t.runnable(2), "2 waits for the earlier conflicting 1");
        assert!(
            t.runnable(3),
            "3 conflicts with nobody earlier: runs out of order"
        );
        t.start(3);
        assert_eq!(t.schedule(2, v(&[]), ShardLock::None), Sched::TooOld);
        t.finish(1);
        assert!(t.runnable(2));
        t.finish(2);
        t.finish(3);
        assert!(t.idle());
    }

    #[test]
    fn waiting_behind_is_not_a_deadlock() {
        // Both hold intent locks on k from scheduling; the earlier one must still run.
        let mut t = TxShard::default();
        assert_eq!(
            t.schedule(1, v(&[kl(b"k", true)]), ShardLock::None),
            Sched::Ok(true)
        );
        assert_eq!(
            t.schedule(2, v(&[kl(b"k", true)]), ShardLock::None),
            Sched::Ok(false)
        );
        assert!(t.runnable(1));
        assert!(!t.runnable(2));
        t.finish(1);
        assert!(t.runnable(2));
    }

    #[test]
    fn shard_locks() {
        let mut t = TxShard::default();
        assert_eq!(t.schedule(1, v(&[]), ShardLock::Excl), Sched::Ok(true));
        assert!(!t.quick_ok(&[kl(b"x", false)], ShardLock::None));
        assert_eq!(
            t.schedule(2, v(&[kl(b"x", false)]), ShardLock::None),
            Sched::Ok(false)
        );
        t.finish(1);
        assert!(t.runnable(2));
        assert!(!t.quick_ok(&[], ShardLock::Excl));
        assert!(t.quick_ok(&[], ShardLock::Shared));
        t.finish(2);
        assert!(t.idle());
    }
    /// The per-key holder lists give the same answer as comparing lock sets pairwise with every
    /// earlier queued transaction (the definition), over random schedules and conclusions.
    #[test]
    fn repeated_key_locks_merge() {
        let k = |hash, excl| KeyLock { db: 0, hash, excl };
        let m = merge_locks(
            [k(1, false), k(2, false), k(1, true), k(1, false)]
                .into_iter()
                .collect(),
        );
        assert_eq!(m.as_slice(), &[k(1, true), k(2, false)]);
    }

    #[test]
    fn runnable_matches_pairwise_definition() {
        let mut seed = 0x1234_5678_u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _round in 0..200 {
            let mut t = TxShard::default();
            let mut next_id = 1u64;
            let mut live: Vec<u64> = Vec::new();
            for _ in 0..60 {
                if live.is_empty() || rnd(3) > 0 {
                    let id = next_id + rnd(3);
                    next_id = id + 1;
                    let n = rnd(4) as usize;
                    let locks: Locks = (0..n)
                        .map(|_| KeyLock {
                            db: rnd(2) as u32,
                            hash: rnd(6),
                            excl: rnd(2) == 0,
                        })
                        .collect();
                    let sl = match rnd(12) {
                        0 => ShardLock::Excl,
                        1 => ShardLock::Shared,
                        _ => ShardLock::None,
                    };
                    if let Sched::Ok(_) = t.schedule(id, locks, sl) {
                        live.push(id);
                    }
                } else {
                    let i = rnd(live.len() as u64) as usize;
                    t.finish(live.swap_remove(i));
                }
                for &id in &live {
                    let e = &t.queue[&id];
                    let slow = !t.queue.range(..id).any(|(_, u)| u.conflicts(e));
                    assert_eq!(
                        t.runnable(id),
                        slow,
                        "tx {id}: {:?} queue {:?}",
                        (e.shard_lock, &e.locks),
                        t.queue
                            .iter()
                            .map(|(i, u)| (*i, u.shard_lock, u.locks.clone()))
                            .collect::<Vec<_>>()
                    );
                }
            }
            for id in live {
                t.finish(id);
            }
            assert!(t.idle());
            assert!(t.globals.is_empty());
        }
    }
}
