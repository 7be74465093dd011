//! Lock plans: what a command (or an EXEC, or a squashed run) locks, computed once from the
//! command's declaration — its key spec, its global flags and its `plan` hook — and nowhere else.
//! Every path that schedules or lock-checks work uses `key_locks`: the per-command plan of
//! `execute`, EXEC's union plan, pipeline squashing and the blocking helper.

use smallvec::SmallVec;

use crate::commands::flags;
use crate::commands::spec::{CommandSpec, KeySpec, PlanSink};
use crate::engine::router::route;
use crate::engine::shard_of;
use crate::engine::vll::{KeyLock, Locks, ShardLock};

/// One key of a plan.
#[derive(Clone, Copy, Debug)]
pub struct PlannedKey {
    pub shard: usize,
    pub lock: KeyLock,
    /// Its argument index, for the key spec's keys (`per_shard` routes by it); `NO_ARG` for
    /// keys a `plan` hook adds.
    arg: u32,
}

const NO_ARG: u32 = u32::MAX;

/// What one command (or EXEC) needs locked, with the shard of every key.
#[derive(Clone, Debug, Default)]
pub struct LockPlan {
    /// Every key: the key spec's keys first, in argument order, then the `plan` hook's.
    pub keys: SmallVec<[PlannedKey; 2]>,
    pub global: Option<ShardLock>,
    /// Planning context: the number of shards, the db the next command's keys are in (EXEC: a
    /// queued SELECT switches it for the commands after it) and the number of dbs.
    threads: usize,
    db: usize,
    dbnum: usize,
}

/// Calls `f(shard, lock)` for every key of the command's key spec, in argument order, with the
/// key's argument index; returns the command's whole-shard lock if it is a global command.
/// The one computation of a command's locks (see the module docs).
#[inline]
pub fn key_locks(
    spec: &CommandSpec,
    args: &[&[u8]],
    db: usize,
    threads: usize,
    mut f: impl FnMut(usize, usize, KeyLock),
) -> Option<ShardLock> {
    let mut lock = |i: usize| {
        let (s, h) = route(args[i], threads);
        f(i, s, key_lock_hashed(spec, db, h));
    };
    if let Some((first, last, step)) = spec.keys.range(args.len()) {
        // The common case, without `positions`' Vec.
        for i in (first..=last).step_by(step) {
            lock(i);
        }
    } else if !matches!(spec.keys, KeySpec::None) {
        for i in spec.keys.positions(args) {
            lock(i);
        }
    }
    if spec.flags & flags::TX_GLOBAL_WRITE != 0 {
        Some(ShardLock::Excl)
    } else if spec.flags & flags::TX_GLOBAL_READ != 0 {
        Some(ShardLock::Shared)
    } else {
        None
    }
}

/// The lock of one key of `spec` in `db` (pipeline squashing locks single keys with it).
#[inline]
pub fn key_lock(spec: &CommandSpec, db: usize, key: &[u8]) -> KeyLock {
    key_lock_hashed(spec, db, damselfly_dash::hash_key(key))
}

#[inline]
fn key_lock_hashed(spec: &CommandSpec, db: usize, hash: u64) -> KeyLock {
    KeyLock::with_hash(db, hash, spec.flags & flags::WRITE != 0)
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
        let (db, threads) = (self.db, self.threads);
        if let Some((first, last, step)) = spec.keys.range(args.len()) {
            self.keys
                .reserve((last + 1).saturating_sub(first).div_ceil(step));
        }
        let keys = &mut self.keys;
        let global = key_locks(spec, args, db, threads, |i, shard, lock| {
            keys.push(PlannedKey {
                shard,
                lock,
                arg: i as u32,
            });
        });
        if let Some(g) = global {
            self.lock_all_shards(g == ShardLock::Excl);
        }
        if let Some(hook) = spec.plan {
            hook(args, self);
        }
    }

    /// No keys and no whole-shard lock.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.global.is_none()
    }

    /// The one shard of a plan whose keys all live there (and that locks no whole shard).
    pub fn single_shard(&self) -> Option<usize> {
        let first = self.keys.first()?.shard;
        (self.global.is_none() && self.keys.iter().all(|k| k.shard == first)).then_some(first)
    }

    /// Shards touched (sorted, unique). All shards for a global plan.
    pub fn shards(&self, threads: usize) -> SmallVec<[usize; 4]> {
        if self.global.is_some() {
            return (0..threads).collect();
        }
        let mut v: SmallVec<[usize; 4]> = SmallVec::new();
        for k in &self.keys {
            if let Err(at) = v.binary_search(&k.shard) {
                v.insert(at, k.shard);
            }
        }
        v
    }

    pub fn locks_for(&self, shard: usize) -> Locks {
        let n = self.keys.iter().filter(|k| k.shard == shard).count();
        let mut out = Locks::with_capacity(n);
        out.extend(
            self.keys
                .iter()
                .filter(|k| k.shard == shard)
                .map(|k| k.lock),
        );
        out
    }

    pub fn shard_lock(&self) -> ShardLock {
        self.global.unwrap_or(ShardLock::None)
    }

    /// The key spec's keys of the command this plan was made for, as (argument index, shard),
    /// if the plan has them (a plan skipped on one idle shard has none).
    pub fn key_args(&self) -> Option<impl Iterator<Item = (usize, usize)> + '_> {
        (!self.keys.is_empty()).then(|| {
            self.keys
                .iter()
                .take_while(|k| k.arg != NO_ARG)
                .map(|k| (k.arg as usize, k.shard))
        })
    }
}

/// The commands' `plan` hooks add their extra locks here (after the key spec's keys).
impl PlanSink for LockPlan {
    fn lock_key(&mut self, db: usize, key: &[u8], excl: bool) {
        self.keys.push(PlannedKey {
            shard: shard_of(key, self.threads),
            lock: KeyLock::new(db, key, excl),
            arg: NO_ARG,
        });
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

/// How `per_shard` splits a command's arguments: each key-spec key with the arguments up to the
/// next key (MSET: key and value; ZUNION's keys: the key alone). Several key specs split alike
/// when their members agree (ZUNIONSTORE's destination and sources: 1), else by single keys.
pub fn group_width(spec: &CommandSpec) -> usize {
    fn width(keys: &KeySpec) -> usize {
        match *keys {
            KeySpec::Range { step, .. } | KeySpec::Keyword { step, .. } => step.max(1) as usize,
            KeySpec::Keynum { step, .. } => step.max(1),
            KeySpec::Many(specs) => {
                let w = specs.first().map_or(1, width);
                if specs.iter().all(|s| width(s) == w) {
                    w
                } else {
                    1
                }
            }
            KeySpec::None | KeySpec::Custom { .. } => 1,
        }
    }
    width(&spec.keys)
}
