//! A shard: the slice of the keyspace owned by one thread. Only that thread touches it, so it is a
//! plain single-threaded state machine (no locks); everything else reaches it through messages.

use super::db::Db;
use damselfly_types::rand::Rng;

/// Bounded work per active-expiry tick so a shard never stalls its connections.
const EXPIRE_CHECKS_PER_TICK: usize = 2000;

pub struct Shard {
    pub id: usize,
    pub dbs: Vec<Db>,
    /// DEBUG SET-ACTIVE-EXPIRE toggles this.
    pub active_expire: bool,
    rng: Rng,
    pub expire_cycles: u64,
    /// Waiter registrations made on this shard (an upper bound of live ones; reset by the
    /// sweep). Zero keeps the per-command blocking check to one branch.
    pub block_waiters: usize,
    /// Version of the latest snapshot begun on this shard (each one marks the buckets it
    /// wrote with its own, newer version: persistence/snapshot.rs).
    pub snapshot_epoch: u64,
    /// Eviction pool and cursor (engine/evict.rs).
    pub evictor: super::evict::Evictor,
    /// The access-data mode epoch this shard's bytes were set under (engine/access.rs).
    access_epoch: u64,
    /// CAS uniques handed out by this shard (engine/mcstate.rs).
    cas_count: u64,
}

impl Shard {
    pub fn new(id: usize, dbnum: usize) -> Self {
        Shard {
            id,
            dbs: (0..dbnum.max(1))
                .map(|i| {
                    let mut db = Db::new();
                    db.index = i;
                    db
                })
                .collect(),
            active_expire: true,
            cas_count: 0,
            rng: Rng::new(0x9E37_79B9_7F4A_7C15 ^ (id as u64).wrapping_mul(0xA076_1D64_78BD_642F)),
            expire_cycles: 0,
            block_waiters: 0,
            snapshot_epoch: 0,
            evictor: Default::default(),
            access_epoch: super::access::epoch(),
        }
    }

    /// The CAS unique `next_cas` would hand out now.
    #[inline]
    pub fn peek_cas(&self, threads: usize) -> u64 {
        (self.cas_count + 1) * threads.max(1) as u64 + self.id as u64
    }

    /// A new CAS unique: unique across the `threads` shards, never 0, increasing here.
    #[inline]
    pub fn next_cas(&mut self, threads: usize) -> u64 {
        self.cas_count += 1;
        self.cas_count * threads.max(1) as u64 + self.id as u64
    }

    #[inline]
    pub fn db(&mut self, i: usize) -> &mut Db {
        &mut self.dbs[i]
    }

    /// Cheap randomness for sampling (RANDOMKEY, eviction), not for security.
    #[inline]
    pub fn rand(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// A generator seeded from the shard's, for commands that draw while they borrow a db.
    #[inline]
    pub fn fork_rng(&mut self) -> Rng {
        self.rng.fork()
    }

    /// Periodic work driven by `--hz`: active expiry over every db, bounded per tick. If a db had
    /// many expired keys in its sample, it gets more budget next tick (like Redis's adaptive cycle).
    pub fn tick(&mut self, now: u64) {
        let epoch = super::access::epoch();
        if epoch != self.access_epoch {
            // The policy switched between LRU and LFU: the bytes mean nothing in the new mode.
            self.access_epoch = epoch;
            for db in self.dbs.iter_mut() {
                db.reset_access(now);
            }
        }
        if self.block_waiters > 0 {
            let mut live = 0;
            for db in self.dbs.iter_mut() {
                db.blocking.sweep();
                live += db.blocking.keys();
            }
            self.block_waiters = live;
        }
        // Forget WATCH registrations of connections that stopped watching.
        for db in self.dbs.iter_mut() {
            db.watch_sweep();
        }
        // (A replica's keys expire by its primary's DEL, but for those its own clients gave
        // a TTL: replication/role.rs.)
        if crate::engine::role::is_replica() {
            if self.active_expire {
                for db in self.dbs.iter_mut() {
                    db.expire_replica_keys(now);
                }
            }
            return;
        }
        if !self.active_expire {
            return;
        }
        self.expire_cycles += 1;
        let started = std::time::Instant::now();
        self.expire_cycle(now);
        // Redis's latencyAddSampleIfNeeded("expire-cycle", ...) in activeExpireCycle.
        crate::latency::add_sample_if_needed("expire-cycle", started.elapsed().as_millis() as u64);
    }

    /// One active expiry cycle over every db.
    fn expire_cycle(&mut self, now: u64) {
        // No active expiry while clients are paused (Redis's activeExpireCycle).
        if crate::engine::pause::expiry_paused() {
            return;
        }
        let per_db = (EXPIRE_CHECKS_PER_TICK / self.dbs.len().max(1)).max(64);
        for db in self.dbs.iter_mut() {
            if !db.hfe.is_empty() {
                db.active_expire_fields(now, per_db);
            }
            if db.expires_len() == 0 {
                continue;
            }
            let mut budget = per_db;
            loop {
                let st = db.active_expire(now, budget);
                // Keep going while more than a quarter of the sample was expired.
                if st.wrapped
                    || st.checked == 0
                    || st.expired * 4 < st.checked
                    || budget >= per_db * 8
                {
                    break;
                }
                budget *= 2;
            }
        }
    }

    pub fn keys_total(&self) -> usize {
        self.dbs.iter().map(|d| d.len()).sum()
    }
}
