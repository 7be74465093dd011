//! One logical database (SELECT n) inside a shard: the main Dash table plus an expiry table.
//!
//! Expiry: keys with a TTL carry `FLAG_EXPIRE` in their main-table slot, and their absolute
//! deadline (unix ms) lives in a second Dash table keyed by the same key. Keys without a TTL cost
//! nothing extra and reads of them never touch the expiry table. Active expiry walks the expiry
//! table (only volatile keys) with a stateless cursor, so it never scans the whole keyspace.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use damselfly_dash::{DashTable, Pos, FLAG_A};

use super::mcstate::{McState, McTable, FLAG_FETCHED, FLAG_MC};
use super::snapshot::{DbSnap, Sides};
use super::{access, notify, tracking};
use super::{journal, role};

thread_local! {
    /// The lookup running is a read's (a replica keeps a stale key for reads: `find_notouch`).
    static READ_LOOKUP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[inline]
fn as_read<R>(f: impl FnOnce() -> R) -> R {
    if !role::is_replica() {
        return f();
    }
    let prev = READ_LOOKUP.with(|r| r.replace(true));
    let out = f();
    READ_LOOKUP.with(|r| r.set(prev));
    out
}
use damselfly_types::{KeyStr, Value};

/// Slot flag: the key has an entry in the expiry table.
pub const FLAG_EXPIRE: u8 = FLAG_A;

/// How many of a bucket neighbourhood's best candidates cache mode's sample keeps.
const NEAR_BEST: usize = 4;

/// What happens to an existing TTL when a key is overwritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlMode {
    /// Drop any TTL (plain SET).
    Clear,
    /// Keep the current TTL (SET KEEPTTL, in-place updates).
    Keep,
    /// Set this absolute deadline in unix ms.
    At(u64),
}

#[derive(Default, Clone, Copy, Debug)]
pub struct DbStats {
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
}

/// The main table: 24-byte `(KeyStr, Value)` slots, with as many buckets per segment as fill
/// its allocation size class (see `damselfly_dash::buckets_for`).
pub type PrimeTable = DashTable<KeyStr, Value, { damselfly_dash::buckets_for::<KeyStr, Value>() }>;
/// The expiry table: key -> deadline (unix ms).
pub type ExpireTable = DashTable<KeyStr, u64, { damselfly_dash::buckets_for::<KeyStr, u64>() }>;

pub struct Db {
    /// This db's number (keyspace notifications name it).
    pub index: usize,
    prime: PrimeTable,
    expire: ExpireTable,
    expire_cursor: u64,
    pub stats: DbStats,
    /// Clients blocked on keys of this db (see `engine::waiters`).
    pub blocking: super::waiters::Blocking,
    /// WATCHed keys of this db (stays with the db index: SWAPDB does not move it).
    watched: Watched,
    /// Hashes with field TTLs, for active field expiry (see `damselfly_families::hash`).
    pub hfe: damselfly_types::hash::HfeIndex,
    /// The running snapshot's state for this db, if one runs: every change to the table goes
    /// through `pre_write` / `pre_insert` first (persistence/snapshot.rs).
    pub snap: Option<Box<DbSnap>>,
    /// Unix ms of the latest lookup: the access time inserts record (they follow a lookup of
    /// the same command).
    now: u64,
    /// On a writable replica: keys its own clients gave a TTL. Only these expire here by
    /// themselves (Redis's `slaveKeysWithExpire`); the primary's keys wait for its DEL.
    replica_ttl: Option<std::collections::HashSet<Box<[u8]>>>,
    /// Memcache item state (client flags, CAS) of the keys with `FLAG_MC`; allocated on first
    /// use (engine/mcstate.rs).
    mc: Option<Box<McTable>>,
}

/// A connection's WATCH dirty flag: set by any shard that modifies one of its watched keys.
pub type WatchFlag = Arc<AtomicBool>;

/// One connection's registration on one key.
struct Watcher {
    /// Dead once the connection dropped its flag (UNWATCH, EXEC, DISCARD, RESET, close).
    flag: Weak<AtomicBool>,
    /// The key existed but was already logically expired at WATCH time (Redis 7.0
    /// `watchedKey.expired`): its deletion by expiry is not a change.
    stale: bool,
}

/// Watch registry: key → connections watching it. Empty (one branch per write) when nobody
/// watches.
#[derive(Default)]
struct Watched {
    map: HashMap<Box<[u8]>, Vec<Watcher>>,
}

impl Watched {
    #[inline]
    fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Marks every connection watching `key` dirty. `present`: does the key exist (in the table,
    /// expired or not) after the modification?
    #[cold]
    fn touch(&mut self, key: &[u8], present: bool) {
        let Some(ws) = self.map.get_mut(key) else {
            return;
        };
        ws.retain_mut(|w| {
            let Some(flag) = w.flag.upgrade() else {
                return false;
            };
            if w.stale && !present {
                // The stale key was deleted: logically no change.
                w.stale = false;
                return true;
            }
            flag.store(true, Ordering::Release);
            // Dirty: this registration has done its job.
            false
        });
        if ws.is_empty() {
            self.map.remove(key);
        }
    }

    fn sweep(&mut self) {
        self.map.retain(|_, ws| {
            ws.retain(|w| w.flag.strong_count() > 0);
            !ws.is_empty()
        });
    }
}

impl Default for Db {
    fn default() -> Self {
        Self::new()
    }
}

/// Result of one active-expiry step on a db.
#[derive(Default, Clone, Copy, Debug)]
pub struct ExpireStep {
    pub checked: usize,
    pub expired: usize,
    /// The cursor wrapped around: every volatile key was looked at once.
    pub wrapped: bool,
}

impl Db {
    pub fn new() -> Self {
        let mut prime = PrimeTable::new();
        prime.set_rebase(access::rebase);
        Db {
            index: 0,
            prime,
            expire: DashTable::new(),
            expire_cursor: 0,
            stats: DbStats::default(),
            blocking: Default::default(),
            watched: Watched::default(),
            hfe: Default::default(),
            snap: None,
            now: 0,
            replica_ttl: None,
            mc: None,
        }
    }

    /// Snapshot hook: the entry at `pos` is about to change or go (one branch when no
    /// snapshot runs).
    #[inline]
    fn pre_write(&mut self, pos: Pos) {
        if let Some(s) = self.snap.as_deref_mut() {
            let sides = Sides {
                expire: &self.expire,
                mc: self.mc.as_deref(),
            };
            s.before_write(&mut self.prime, sides, pos);
        }
    }

    /// Snapshot hook: `key` is about to be inserted.
    #[inline]
    fn pre_insert(&mut self, key: &[u8]) {
        if let Some(s) = self.snap.as_deref_mut() {
            let sides = Sides {
                expire: &self.expire,
                mc: self.mc.as_deref(),
            };
            s.before_insert(&mut self.prime, sides, key);
        }
    }

    /// Snapshot hook: an entry was inserted at `pos`.
    #[inline]
    fn post_insert(&mut self, pos: Pos) {
        if let Some(s) = self.snap.as_deref_mut() {
            s.after_insert(&mut self.prime, pos);
        }
    }

    /// Drops the running snapshot's state (it stopped early), leaving the table clean.
    pub fn snapshot_abandon(&mut self) {
        if let Some(mut s) = self.snap.take() {
            s.abandon(&mut self.prime);
        }
    }

    /// One step of the running snapshot's walk over this db (see `DbSnap::walk`); true when
    /// it is done or none runs.
    pub fn snapshot_walk(&mut self, deadline: Option<std::time::Instant>) -> bool {
        match self.snap.as_deref_mut() {
            Some(s) => {
                let sides = Sides {
                    expire: &self.expire,
                    mc: self.mc.as_deref(),
                };
                s.walk(&mut self.prime, sides, deadline)
            }
            None => true,
        }
    }

    // -----------------------------------------------------------------------------------------
    // WATCH support.

    /// Registers `flag` as watching `key` (WATCH). Idempotent per flag.
    pub fn watch(&mut self, key: &[u8], flag: &WatchFlag, now: u64) {
        let stale = self.is_stale(key, now);
        let ws = self.watched.map.entry(key.into()).or_default();
        ws.retain(|w| w.flag.strong_count() > 0);
        let weak = Arc::downgrade(flag);
        if ws.iter().any(|w| w.flag.ptr_eq(&weak)) {
            return;
        }
        ws.push(Watcher { flag: weak, stale });
    }

    /// EXEC-time check (Redis `isWatchedKeyExpired`): the key was live when `flag` started
    /// watching it and is now logically expired (but not yet deleted).
    pub fn watched_key_expired(&self, key: &[u8], flag: &WatchFlag, now: u64) -> bool {
        let Some(ws) = self.watched.map.get(key) else {
            return false;
        };
        let weak = Arc::downgrade(flag);
        match ws.iter().find(|w| w.flag.ptr_eq(&weak)) {
            Some(w) if !w.stale => self.is_stale(key, now),
            _ => false,
        }
    }

    /// Number of keys with watchers (INFO `watching_keys`-style statistics, tests).
    pub fn watched_keys(&self) -> usize {
        self.watched.map.len()
    }

    /// Drops registrations of connections that stopped watching (periodic, from `Shard::tick`).
    pub fn watch_sweep(&mut self) {
        if !self.watched.is_empty() {
            self.watched.sweep();
        }
    }

    /// The key is in the table but its deadline has passed.
    fn is_stale(&self, key: &[u8], now: u64) -> bool {
        match self.prime.find(key) {
            Some(pos) => self.expire_at(pos).is_some_and(|at| at <= now),
            None => false,
        }
    }

    #[inline]
    fn touch(&mut self, key: &[u8]) {
        journal::touched();
        if !self.watched.is_empty() {
            let present = self.prime.find(key).is_some();
            self.watched.touch(key, present);
        }
        tracking::modified(key);
    }

    #[inline]
    fn touch_at(&mut self, pos: Pos) {
        journal::touched();
        if !self.watched.is_empty() {
            let key = self.prime.at(pos).0.key();
            self.watched.touch(key, true);
        }
        if tracking::active() {
            tracking::modified(self.prime.at(pos).0.key());
        }
    }

    /// FLUSHDB / SWAPDB (Redis `touchAllWatchedKeysInDb`): `self` is being emptied and replaced
    /// with `with`'s contents (None: emptied).
    fn touch_all(&mut self, with: Option<&Db>, now: u64) {
        if self.watched.is_empty() {
            return;
        }
        let prime = &self.prime;
        self.watched.map.retain(|key, ws| {
            let in_self = prime.find(key).is_some();
            let in_with = with.is_some_and(|d| d.prime.find(key).is_some());
            if !in_self && !in_with {
                return true;
            }
            let with_stale = with.is_some_and(|d| d.is_stale(key, now));
            ws.retain_mut(|w| {
                let Some(flag) = w.flag.upgrade() else {
                    return false;
                };
                if w.stale {
                    if !in_with {
                        w.stale = false;
                        return true;
                    }
                    if with_stale {
                        return true;
                    }
                } else if !in_self && with_stale {
                    w.stale = true;
                    return true;
                }
                flag.store(true, Ordering::Release);
                false
            });
            !ws.is_empty()
        });
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.prime.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.prime.is_empty()
    }

    #[inline]
    pub fn expires_len(&self) -> usize {
        self.expire.len()
    }

    /// Bytes used by table structures (not values).
    pub fn table_mem(&self) -> usize {
        self.prime.mem_usage()
            + self.expire.mem_usage()
            + self.mc.as_ref().map_or(0, |t| t.mem_usage())
    }

    // -----------------------------------------------------------------------------------------
    // Memcache item state (engine/mcstate.rs)

    /// The value at `pos` is about to change: its memcache state (CAS, flags, fetched) goes.
    #[inline]
    fn mc_changed(&mut self, pos: Pos) {
        let f = self.prime.flags(pos);
        if f & (FLAG_MC | FLAG_FETCHED) != 0 {
            self.mc_drop(pos, f);
        }
    }

    #[cold]
    fn mc_drop(&mut self, pos: Pos, f: u8) {
        if f & FLAG_MC != 0 {
            if let Some(t) = self.mc.as_deref_mut() {
                t.remove(self.prime.at(pos).0.key());
            }
        }
        self.prime.set_flags(pos, f & !(FLAG_MC | FLAG_FETCHED));
    }

    /// The memcache state of the item at `pos` (all zero when it has none).
    #[inline]
    pub fn mc_state(&self, pos: Pos) -> McState {
        if self.prime.flags(pos) & FLAG_MC == 0 {
            return McState::default();
        }
        let key = self.prime.at(pos).0.key();
        self.mc
            .as_deref()
            .and_then(|t| t.get(key))
            .map(|(_, v)| *v)
            .unwrap_or_default()
    }

    /// Replaces the memcache state of the item at `pos` (an empty state removes it). Not a
    /// modification of the value: call it after the write it goes with.
    pub fn set_mc_state(&mut self, pos: Pos, st: McState) {
        let f = self.prime.flags(pos);
        let key = self.prime.at(pos).0.key();
        if st.is_empty() {
            if f & FLAG_MC != 0 {
                if let Some(t) = self.mc.as_deref_mut() {
                    t.remove(key);
                }
                self.prime.set_flags(pos, f & !FLAG_MC);
            }
            return;
        }
        let t = self.mc.get_or_insert_with(|| Box::new(McTable::new()));
        if f & FLAG_MC != 0 {
            if let Some((_, v)) = t.get_mut(key) {
                *v = st;
                return;
            }
        }
        t.insert(KeyStr::from_bytes(key), st);
        self.prime.set_flags(pos, f | FLAG_MC);
    }

    /// Was the item at `pos` fetched since it was written?
    #[inline]
    pub fn mc_fetched(&self, pos: Pos) -> bool {
        self.prime.flags(pos) & FLAG_FETCHED != 0
    }

    /// Marks the item at `pos` fetched; returns whether it already was (`mg ... h`).
    #[inline]
    pub fn mc_fetch(&mut self, pos: Pos) -> bool {
        let f = self.prime.flags(pos);
        if f & FLAG_FETCHED == 0 {
            self.prime.set_flags(pos, f | FLAG_FETCHED);
        }
        f & FLAG_FETCHED != 0
    }

    pub fn prime(&self) -> &PrimeTable {
        &self.prime
    }

    /// Prefetch stages for a batch of lookups (pipelines): call `prefetch_1` for every key of the
    /// batch, then `prefetch_2` for every key, then `prefetch_3`, then execute. Each stage only
    /// issues cache-line loads, so the misses of the whole batch overlap.
    #[inline]
    pub fn prefetch_1(&self, hash: u64) {
        self.prime.prefetch_meta(hash);
    }

    #[inline]
    pub fn prefetch_2(&self, hash: u64) {
        self.prime.prefetch_slots(hash);
    }

    #[inline]
    pub fn prefetch_3(&self, key: &[u8], hash: u64) {
        if let Some(pos) = self.prime.find_hashed(key, hash) {
            self.prime.at(pos).1.prefetch();
        }
    }

    /// The three prefetch stages over a batch of `(key, damselfly_dash::hash_key(key))` pairs,
    /// each stage across the whole batch (bucket metadata, then the matching slots, then the
    /// values), so that the batch's cache misses overlap. Walks `keys` three times.
    pub fn prefetch_hashed<'k>(&self, keys: impl Iterator<Item = (&'k [u8], u64)> + Clone) {
        for (_, h) in keys.clone() {
            self.prefetch_1(h);
        }
        for (_, h) in keys.clone() {
            self.prefetch_2(h);
        }
        for (k, h) in keys {
            self.prefetch_3(k, h);
        }
    }

    /// [`Db::prefetch_hashed`] for keys not hashed yet (each key is hashed once).
    pub fn prefetch_keys<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        let hashed: smallvec::SmallVec<[(&[u8], u64); 16]> =
            keys.map(|k| (k, damselfly_dash::hash_key(k))).collect();
        self.prefetch_hashed(hashed.iter().copied());
    }

    /// Write hook for blocked clients: remember `key` if somebody is blocked on it (one branch
    /// when nobody is).
    #[inline]
    fn wrote(&mut self, key: &[u8]) {
        if !self.blocking.is_empty() {
            self.blocking.note_write(key);
        }
    }

    /// Finds a live key and records the access (LRU time or LFU counter), removing it first if
    /// its deadline has passed (passive expiry).
    #[inline]
    pub fn find(&mut self, key: &[u8], now: u64) -> Option<Pos> {
        let pos = self.find_notouch(key, now)?;
        access::touch(&mut self.prime, pos, now);
        Some(pos)
    }

    /// `find` without recording an access: Redis's LOOKUP_NOTOUCH (TYPE, TTL, EXISTS, OBJECT).
    #[inline]
    pub fn find_notouch(&mut self, key: &[u8], now: u64) -> Option<Pos> {
        self.now = now;
        let pos = self.prime.find(key)?;
        if self.prime.flags(pos) & FLAG_EXPIRE != 0 {
            if let Some(&at) = self.expire.get(key).map(|(_, v)| v) {
                if at <= now {
                    if let Some(alive) = role::stale_key_alive() {
                        // The primary's commands see it; a read sees it gone and leaves it;
                        // a write of the replica's own clients (writable replica) deletes
                        // it first, as Redis's write lookups do.
                        if alive {
                            return Some(pos);
                        }
                        if READ_LOOKUP.with(|r| r.get()) || !role::writable_replica() {
                            return None;
                        }
                    }
                    // During CLIENT PAUSE nothing expires: the key reads as gone and stays.
                    if crate::engine::pause::expiry_paused() {
                        return None;
                    }
                    // The expiration is its own record, not the command's write.
                    let (k, _) = journal::quietly(|| self.remove_at(pos));
                    journal::deleted(self.index, k.key());
                    self.stats.expired += 1;
                    notify::emit(notify::EXPIRED, "expired", self.index, k.key());
                    return None;
                }
            }
        }
        Some(pos)
    }

    /// Lookup for a read command: counts keyspace hits/misses like Redis's lookupKeyRead.
    #[inline]
    pub fn find_read(&mut self, key: &[u8], now: u64) -> Option<Pos> {
        let r = as_read(|| self.find(key, now));
        if r.is_some() {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
            notify::emit(notify::KEY_MISS, "keymiss", self.index, key);
        }
        r
    }

    /// `find_read` without recording an access (LOOKUP_NOTOUCH, still counted as hit/miss).
    #[inline]
    pub fn find_read_notouch(&mut self, key: &[u8], now: u64) -> Option<Pos> {
        let r = as_read(|| self.find_notouch(key, now));
        if r.is_some() {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
            notify::emit(notify::KEY_MISS, "keymiss", self.index, key);
        }
        r
    }

    /// Seconds since the key at `pos` was last accessed (OBJECT IDLETIME, LRU policies).
    pub fn idle_secs(&self, pos: Pos, now: u64) -> u64 {
        access::idle_secs(&self.prime, pos, now)
    }

    /// The key's LFU counter, decayed to `now` (OBJECT FREQ, LFU policies).
    pub fn freq(&mut self, pos: Pos, now: u64) -> u8 {
        access::freq(&mut self.prime, pos, now)
    }

    /// Sets the access data of the key at `pos` (RESTORE ... IDLETIME / FREQ).
    pub fn set_access(&mut self, pos: Pos, now: u64, idle: Option<u64>, freq: Option<u8>) {
        if let Some(i) = idle {
            access::set_idle(&mut self.prime, pos, now, i);
        }
        if let Some(f) = freq {
            access::set_freq(&mut self.prime, pos, now, f);
        }
    }

    /// Eviction rank of the key at `pos` under LRU/LFU (higher: better victim).
    pub fn access_rank(&mut self, pos: Pos, now: u64) -> u64 {
        access::rank(&mut self.prime, pos, now)
    }

    /// Re-initialises every key's access data (the policy switched between LRU and LFU).
    pub fn reset_access(&mut self, now: u64) {
        access::reset_all(&mut self.prime, now);
    }

    // ---- eviction (engine/evict.rs) ------------------------------------------------------

    /// Bytes the entry at `pos` holds, as eviction counts them: its slot, its key and value
    /// blocks, and its expiry entry.
    fn entry_bytes(&self, pos: Pos) -> u64 {
        let (k, v) = self.prime.at(pos);
        let slot = std::mem::size_of::<(KeyStr, Value)>();
        let ttl = if self.prime.flags(pos) & FLAG_EXPIRE != 0 {
            slot + k.heap_size()
        } else {
            0
        };
        (slot + k.heap_size() + v.heap_size() + ttl) as u64
    }

    /// A random key (allkeys-random).
    pub fn random_key_any(&self, r: u64) -> Option<Box<[u8]>> {
        let p = self.prime.random_pos(r)?;
        Some(self.prime.at(p).0.key().into())
    }

    /// A random key with a TTL (volatile-random).
    pub fn random_volatile_key(&self, r: u64) -> Option<Box<[u8]>> {
        let p = self.expire.random_pos(r)?;
        Some(self.expire.at(p).0.key().into())
    }

    /// One eviction sample: a random key (with a TTL when `volatile`) and its rank as a victim
    /// (higher: better): nearest deadline first when `by_ttl`, else idle time or low counter.
    pub fn sample(
        &mut self,
        r: u64,
        volatile: bool,
        by_ttl: bool,
        now: u64,
    ) -> Option<(Box<[u8]>, u64)> {
        let key: Box<[u8]> = if volatile {
            let p = self.expire.random_pos(r)?;
            let (k, &at) = self.expire.at(p);
            if by_ttl {
                return Some((k.key().into(), u64::MAX - at));
            }
            k.key().into()
        } else {
            let p = self.prime.random_pos(r)?;
            self.prime.at(p).0.key().into()
        };
        let pos = self.prime.find(&key)?;
        let rank = access::rank(&mut self.prime, pos, now);
        Some((key, rank))
    }

    /// The current eviction rank of `key` (as [`Db::sample`] computes it), if it exists (and,
    /// when `volatile`, has a TTL).
    pub fn rank_of(&mut self, key: &[u8], volatile: bool, by_ttl: bool, now: u64) -> Option<u64> {
        let pos = self.prime.find(key)?;
        self.rank_at(pos, volatile, by_ttl, now)
    }

    /// The eviction rank of the entry at `pos`: nearest deadline first when `by_ttl`, else idle
    /// time or low counter; None when `volatile` and it has no TTL.
    fn rank_at(&mut self, pos: Pos, volatile: bool, by_ttl: bool, now: u64) -> Option<u64> {
        if (volatile || by_ttl) && self.prime.flags(pos) & FLAG_EXPIRE == 0 {
            return None;
        }
        if by_ttl {
            return self.expire_at(pos).map(|at| u64::MAX - at);
        }
        Some(access::rank(&mut self.prime, pos, now))
    }

    /// Evicts `key` if it is still there. Returns the bytes it held.
    pub fn evict_key(&mut self, key: &[u8], _now: u64) -> Option<u64> {
        let pos = self.prime.find(key)?;
        Some(self.evict_at(pos))
    }

    /// Deletes the entry at `pos` as DEL would (WATCH sees it, a running snapshot keeps the old
    /// value) and returns the bytes it held.
    fn evict_at(&mut self, pos: Pos) -> u64 {
        let bytes = self.entry_bytes(pos);
        let k = self.prime.at(pos).0.key().to_vec();
        self.wrote(&k);
        journal::quietly(|| self.remove_at(pos));
        journal::deleted(self.index, &k);
        notify::emit(notify::EVICTED, "evicted", self.index, &k);
        bytes
    }

    /// Cache mode's sample: the [`NEAR_BEST`] best-ranked keys among those sharing a random
    /// key's bucket neighbourhood (home bucket, neighbour, stash: what an insert there could
    /// use), with their ranks (`f(key, rank)`). Ranking reads only bucket metadata; only those
    /// few keys are copied out.
    pub fn sample_near(&mut self, r: u64, now: u64, mut f: impl FnMut(Box<[u8]>, u64)) {
        let Some(p) = self.prime.random_pos(r) else {
            return;
        };
        let hash = damselfly_dash::hash_key(self.prime.at(p).0.key());
        let mut cands: Vec<Pos> = Vec::with_capacity(64);
        self.prime.room_candidates(hash, |c| cands.push(c));
        // The best few, best first (insertion into a tiny sorted array).
        let mut best: Vec<(u64, Pos)> = Vec::with_capacity(NEAR_BEST + 1);
        for c in cands {
            let rank = access::rank(&mut self.prime, c, now);
            let at = best.partition_point(|&(r, _)| r >= rank);
            if at < NEAR_BEST {
                best.insert(at, (rank, c));
                best.truncate(NEAR_BEST);
            }
        }
        for (rank, c) in best {
            f(self.prime.at(c).0.key().into(), rank);
        }
    }

    /// Before inserting `key`: when an evicting policy is near `maxmemory` and the insert would
    /// split a table segment, evicts the best eligible key among those whose removal makes room
    /// (home bucket, neighbour, stash) instead, as Dragonfly's cache mode does. A split adds a
    /// 24 KiB segment that evicting small keys never gives back (tables do not shrink), so
    /// without this a workload of small keys creeps past the limit. Skipped while transactions
    /// are queued on this shard (their keys must not vanish between hops) or when no candidate
    /// is eligible (`volatile-*`: none has a TTL): the insert then splits and the eviction
    /// before the next command frees memory.
    fn make_room(&mut self, key: &[u8], volatile: bool) {
        let hash = damselfly_dash::hash_key(key);
        let prime_full = !self.prime.has_room(hash);
        let expire_full = volatile && !self.expire.has_room(hash);
        if !(prime_full || expire_full)
            || !super::evict::guard_split(PrimeTable::segment_bytes() as u64)
            || !super::worker::Worker::current().is_some_and(|w| w.vll().idle())
        {
            return;
        }
        let p = super::evict::effective_policy();
        let now = self.insert_time();
        if expire_full {
            // The key's TTL goes to the expiry table: make room there (its candidates all have
            // a TTL, so every policy may take them), ranked by their main-table entries.
            let mut keys: Vec<Box<[u8]>> = Vec::with_capacity(64);
            self.expire
                .room_candidates(hash, |c| keys.push(self.expire.at(c).0.key().into()));
            let cands: Vec<Pos> = keys.iter().filter_map(|k| self.prime.find(k)).collect();
            self.evict_best(p, cands, now);
            if !prime_full || self.prime.has_room(hash) {
                return;
            }
        }
        let mut cands: Vec<Pos> = Vec::with_capacity(64);
        self.prime.room_candidates(hash, |c| cands.push(c));
        self.evict_best(p, cands, now);
    }

    /// Evicts the best victim among `cands` under policy `p` (`make_room`), if one is eligible.
    fn evict_best(&mut self, p: super::evict::Policy, cands: Vec<Pos>, now: u64) {
        let mut best: Option<(u64, Pos)> = None;
        for (i, c) in cands.into_iter().enumerate() {
            let rank = if p.is_random() {
                // Any eligible key: the first one met (the neighbourhood is a random sample).
                (!p.only_volatile() || self.prime.flags(c) & FLAG_EXPIRE != 0)
                    .then(|| u64::MAX - i as u64)
            } else {
                self.rank_at(c, p.only_volatile(), p.by_ttl(), now)
            };
            if let Some(rank) = rank {
                if best.is_none_or(|(r, _)| rank > r) {
                    best = Some((rank, c));
                }
            }
        }
        if let Some((_, victim)) = best {
            self.evict_at(victim);
            super::evict::count_evicted(1);
        }
    }

    /// The time inserts record: that of the lookup before them, or the clock.
    #[inline]
    fn insert_time(&self) -> u64 {
        if self.now != 0 {
            self.now
        } else {
            crate::clock::unix_ms()
        }
    }

    #[inline]
    pub fn get(&mut self, key: &[u8], now: u64) -> Option<&Value> {
        let pos = self.find(key, now)?;
        Some(self.prime.at(pos).1)
    }

    #[inline]
    pub fn get_read(&mut self, key: &[u8], now: u64) -> Option<&Value> {
        let pos = self.find_read(key, now)?;
        Some(self.prime.at(pos).1)
    }

    #[inline]
    pub fn get_mut(&mut self, key: &[u8], now: u64) -> Option<&mut Value> {
        let pos = self.find(key, now)?;
        self.pre_write(pos);
        self.mc_changed(pos);
        self.wrote(key);
        self.touch_at(pos);
        Some(self.prime.at_mut(pos).1)
    }

    #[inline]
    pub fn at(&self, pos: Pos) -> (&KeyStr, &Value) {
        self.prime.at(pos)
    }

    /// Mutable value for an in-place update; counts as a modification for WATCH.
    #[inline]
    pub fn at_mut(&mut self, pos: Pos) -> &mut Value {
        self.pre_write(pos);
        self.mc_changed(pos);
        if !self.blocking.is_empty() {
            let key = self.prime.at(pos).0.key().to_vec();
            self.blocking.note_write(&key);
        }
        self.touch_at(pos);
        self.prime.at_mut(pos).1
    }

    /// Like `at_mut` for updates that may turn out to change nothing (Redis signals a modified
    /// key only on a real change: SETBIT to the same value, INCR of a non-integer...): the caller
    /// calls `touch_key` when it did change the value.
    #[inline]
    pub fn at_mut_quiet(&mut self, pos: Pos) -> &mut Value {
        self.pre_write(pos);
        // (A memcache CAS taken before an update that turns out to change nothing stops
        // matching: harmless, and it spares a lookup in `touch_key`.)
        self.mc_changed(pos);
        self.prime.at_mut(pos).1
    }

    /// Offers `key` to its blocked clients without counting as a modification for WATCH
    /// (Redis's `signalKeyAsReady` alone: XGROUP DESTROY wakes XREADGROUP waiters).
    #[inline]
    pub fn signal_ready(&mut self, key: &[u8]) {
        self.wrote(key);
    }

    /// Marks `key` modified for WATCH (after an `at_mut_quiet` update).
    #[inline]
    pub fn touch_key(&mut self, key: &[u8]) {
        self.wrote(key);
        self.touch(key);
    }

    #[inline]
    pub fn exists(&mut self, key: &[u8], now: u64) -> bool {
        self.find_notouch(key, now).is_some()
    }

    /// Absolute deadline (unix ms) of the key at `pos`, if it has one.
    #[inline]
    pub fn expire_at(&self, pos: Pos) -> Option<u64> {
        if self.prime.flags(pos) & FLAG_EXPIRE == 0 {
            return None;
        }
        let key = self.prime.at(pos).0.key();
        self.expire.get(key).map(|(_, v)| *v)
    }

    /// Sets or clears the deadline of the key at `pos`. Positions stay valid (the expiry table is
    /// a separate table).
    pub fn set_expire(&mut self, pos: Pos, at: Option<u64>) {
        self.pre_write(pos);
        let flags = self.prime.flags(pos);
        if at.is_some() || flags & FLAG_EXPIRE != 0 {
            self.touch_at(pos);
        }
        let key = self.prime.at(pos).0.key();
        if at.is_some() && role::local_write_on_replica() {
            self.replica_ttl
                .get_or_insert_with(Default::default)
                .insert(key.into());
        }
        match at {
            Some(at) => {
                if flags & FLAG_EXPIRE != 0 {
                    if let Some((_, v)) = self.expire.get_mut(key) {
                        *v = at;
                        return;
                    }
                }
                let k = KeyStr::from_bytes(key);
                self.expire.insert(k, at);
                self.prime.set_flags(pos, flags | FLAG_EXPIRE);
            }
            None => {
                if flags & FLAG_EXPIRE != 0 {
                    self.expire.remove(key);
                    self.prime.set_flags(pos, flags & !FLAG_EXPIRE);
                }
            }
        }
    }

    /// Inserts or overwrites `key`. Returns the position of the stored entry.
    #[inline]
    pub fn set(&mut self, key: &[u8], value: Value, ttl: TtlMode, now: u64) -> Pos {
        self.wrote(key);
        match self.find(key, now) {
            Some(pos) => {
                self.pre_write(pos);
                self.mc_changed(pos);
                self.touch_at(pos);
                *self.prime.at_mut(pos).1 = value;
                match ttl {
                    TtlMode::Keep => {}
                    TtlMode::Clear => self.set_expire(pos, None),
                    TtlMode::At(at) => self.set_expire(pos, Some(at)),
                }
                pos
            }
            None => self.insert_new(key, value, ttl),
        }
    }

    /// Inserts a key known to be absent (after `find` returned None).
    #[inline]
    pub fn insert_new(&mut self, key: &[u8], value: Value, ttl: TtlMode) -> Pos {
        self.make_room(key, matches!(ttl, TtlMode::At(_)));
        self.wrote(key);
        self.pre_insert(key);
        let pos = self.prime.insert_new(KeyStr::from_bytes(key), value);
        self.post_insert(pos);
        let t = self.insert_time();
        access::init(&mut self.prime, pos, t);
        if let TtlMode::At(at) = ttl {
            self.set_expire(pos, Some(at));
        }
        self.touch(key);
        notify::emit(notify::NEW, "new", self.index, key);
        pos
    }

    /// Inserts an owned key known to be absent (RENAME/MOVE keep the key object).
    pub fn insert_new_owned(&mut self, key: KeyStr, value: Value, at: Option<u64>) -> Pos {
        self.make_room(key.key(), at.is_some());
        self.wrote(key.key());
        self.pre_insert(key.key());
        let pos = self.prime.insert_new(key, value);
        self.post_insert(pos);
        let t = self.insert_time();
        access::init(&mut self.prime, pos, t);
        if at.is_some() {
            self.set_expire(pos, at);
        }
        self.touch_at(pos);
        if notify::enabled(notify::NEW) {
            let k = self.prime.at(pos).0.key().to_vec();
            notify::emit(notify::NEW, "new", self.index, &k);
        }
        pos
    }

    /// Removes the entry at `pos`, with its expiry.
    pub fn remove_at(&mut self, pos: Pos) -> (KeyStr, Value) {
        journal::touched();
        self.pre_write(pos);
        let f = self.prime.flags(pos);
        if f & FLAG_EXPIRE != 0 {
            let key = self.prime.at(pos).0.key();
            self.expire.remove(key);
        }
        if f & FLAG_MC != 0 {
            self.mc_drop(pos, f);
        }
        let kv = self.prime.remove_at(pos);
        if !self.watched.is_empty() {
            self.watched.touch(kv.0.key(), false);
        }
        // A deletion is news for a client blocked in XREADGROUP (its group went with the key).
        self.wrote(kv.0.key());
        tracking::modified(kv.0.key());
        kv
    }

    /// Removes a live key. Returns its value and deadline.
    pub fn remove(&mut self, key: &[u8], now: u64) -> Option<(KeyStr, Value, Option<u64>)> {
        let pos = self.find(key, now)?;
        let at = self.expire_at(pos);
        let (k, v) = self.remove_at(pos);
        Some((k, v, at))
    }

    pub fn clear(&mut self) {
        journal::touched();
        if !self.watched.is_empty() {
            self.touch_all(None, crate::clock::unix_ms());
        }
        // A running snapshot keeps the tables as they were and finishes them.
        let kept = self
            .snap
            .as_deref_mut()
            .is_some_and(|s| s.detach(&mut self.prime, &mut self.expire, &mut self.mc));
        if !kept {
            self.prime.clear();
            self.expire.clear();
        }
        self.expire_cursor = 0;
        self.hfe = Default::default();
        self.replica_ttl = None;
        self.mc = None;
        // Every waited-on key is gone (XREADGROUP waiters answer that).
        self.blocking.mark_all_ready();
    }

    /// Swaps contents with another db (SWAPDB within a shard).
    pub fn swap(&mut self, other: &mut Db) {
        journal::touched();
        if !self.watched.is_empty() || !other.watched.is_empty() {
            let now = crate::clock::unix_ms();
            self.touch_all(Some(other), now);
            other.touch_all(Some(self), now);
        }
        std::mem::swap(&mut self.prime, &mut other.prime);
        std::mem::swap(&mut self.expire, &mut other.expire);
        std::mem::swap(&mut self.expire_cursor, &mut other.expire_cursor);
        std::mem::swap(&mut self.hfe, &mut other.hfe);
        std::mem::swap(&mut self.replica_ttl, &mut other.replica_ttl);
        std::mem::swap(&mut self.mc, &mut other.mc);
        // A running snapshot's state follows its tables (it still writes them as the db
        // index they had when it began).
        std::mem::swap(&mut self.snap, &mut other.snap);
        // Waiters stay with their db index; the keys they wait on may exist now.
        self.blocking.mark_all_ready();
        other.blocking.mark_all_ready();
    }

    /// One SCAN step over the main table. `f` gets every visited live-or-stale entry with its
    /// deadline; callers filter expired ones.
    pub fn scan<F: FnMut(&KeyStr, &Value, Option<u64>)>(&self, cursor: u64, mut f: F) -> u64 {
        let expire = &self.expire;
        self.prime.scan(cursor, |pos, k, v| {
            let at = if self.prime.flags(pos) & FLAG_EXPIRE != 0 {
                expire.get(k.key()).map(|(_, v)| *v)
            } else {
                None
            };
            f(k, v, at)
        })
    }

    /// A random live key (RANDOMKEY). Expired keys met on the way are deleted.
    pub fn random_key(&mut self, mut rnd: impl FnMut() -> u64, now: u64) -> Option<KeyStr> {
        for _ in 0..100 {
            let pos = self.prime.random_pos(rnd())?;
            match self.expire_at(pos) {
                Some(at) if at <= now && crate::engine::role::is_replica() => continue,
                Some(at) if at <= now => {
                    // During CLIENT PAUSE nothing expires: the key reads as gone and stays.
                    if crate::engine::pause::expiry_paused() {
                        return None;
                    }
                    // The expiration is its own record, not the command's write.
                    let (k, _) = journal::quietly(|| self.remove_at(pos));
                    journal::deleted(self.index, k.key());
                    self.stats.expired += 1;
                    notify::emit(notify::EXPIRED, "expired", self.index, k.key());
                }
                _ => return Some(self.prime.at(pos).0.clone()),
            }
        }
        // Mostly-expired table: fall back to a full pass.
        let mut found = None;
        let mut dead = Vec::new();
        for (k, _) in self.prime.iter() {
            let at = self.expire.get(k.key()).map(|(_, v)| *v);
            match at {
                Some(at) if at <= now => dead.push(k.clone()),
                _ => {
                    found = Some(k.clone());
                    break;
                }
            }
        }
        if crate::engine::role::is_replica() {
            return found;
        }
        for k in dead {
            if let Some(pos) = self.prime.find(k.key()) {
                journal::quietly(|| self.remove_at(pos));
                journal::deleted(self.index, k.key());
                self.stats.expired += 1;
                notify::emit(notify::EXPIRED, "expired", self.index, k.key());
            }
        }
        found
    }

    /// Iterates all entries (no expiry filtering). For snapshots/debug.
    pub fn iter(&self) -> impl Iterator<Item = (&KeyStr, &Value)> + '_ {
        self.prime.iter()
    }
    /// Active hash-field expiry (Redis 7.4 field TTLs): drops the due fields of up to `budget`
    /// hashes whose earliest field deadline has passed, deleting hashes left empty. Returns the
    /// number of fields removed.
    pub fn active_expire_fields(&mut self, now: u64, budget: usize) -> usize {
        let mut removed = 0;
        for key in self.hfe.pop_due(now, budget) {
            let Some(pos) = self.find(&key, now) else {
                continue;
            };
            let Some(h) = self.at_mut_quiet(pos).as_hash_mut() else {
                continue;
            };
            removed += h.expire_fields(now);
            let next = h.next_field_deadline();
            if h.is_empty() {
                self.remove_at(pos);
            } else {
                self.hfe.set(&key, next);
            }
        }
        removed
    }

    /// A writable replica's own keys past their deadline go (the primary's keys wait for its
    /// DEL): Redis's `expireSlaveKeys`.
    pub fn expire_replica_keys(&mut self, now: u64) {
        let Some(set) = self.replica_ttl.as_mut() else {
            return;
        };
        let mut gone: Vec<Box<[u8]>> = Vec::new();
        set.retain(|k| {
            let at = self.expire.get(k).map(|(_, v)| *v);
            match at {
                None => false,
                Some(at) if at <= now => {
                    gone.push(k.clone());
                    false
                }
                Some(_) => true,
            }
        });
        for k in gone {
            if let Some(pos) = self.prime.find(&k) {
                journal::quietly(|| self.remove_at(pos));
                self.stats.expired += 1;
                notify::emit(notify::EXPIRED, "expired", self.index, &k);
            }
        }
    }

    /// Active expiry: walks the expiry table from where it stopped last time, looking at up to
    /// `max_checks` volatile keys and deleting the expired ones.
    pub fn active_expire(&mut self, now: u64, max_checks: usize) -> ExpireStep {
        let mut step = ExpireStep::default();
        if self.expire.is_empty() {
            self.expire_cursor = 0;
            step.wrapped = true;
            return step;
        }
        let mut dead: Vec<KeyStr> = Vec::new();
        while step.checked < max_checks {
            let cur = self.expire_cursor;
            let next = self.expire.scan(cur, |_, k, &at| {
                step.checked += 1;
                if at <= now {
                    dead.push(k.clone());
                }
            });
            self.expire_cursor = next;
            if next == 0 {
                step.wrapped = true;
                break;
            }
        }
        for k in dead {
            if let Some(pos) = self.prime.find(k.key()) {
                journal::quietly(|| self.remove_at(pos));
                journal::deleted(self.index, k.key());
                self.stats.expired += 1;
                step.expired += 1;
                notify::emit(notify::EXPIRED, "expired", self.index, k.key());
            } else {
                // Stale expiry entry without a main entry should not happen; heal it.
                self.expire.remove(k.key());
            }
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use damselfly_types::CompactStr;

    fn s(v: &[u8]) -> Value {
        Value::str(CompactStr::from_value(v))
    }

    #[test]
    fn passive_expiry() {
        let mut db = Db::new();
        db.set(b"a", s(b"1"), TtlMode::At(1000), 0);
        db.set(b"b", s(b"2"), TtlMode::Clear, 0);
        assert!(db.exists(b"a", 999));
        assert_eq!(db.expires_len(), 1);
        assert!(!db.exists(b"a", 1000));
        assert_eq!(db.len(), 1);
        assert_eq!(db.expires_len(), 0);
        assert_eq!(db.stats.expired, 1);
    }

    #[test]
    fn overwrite_clears_or_keeps_ttl() {
        let mut db = Db::new();
        db.set(b"a", s(b"1"), TtlMode::At(1000), 0);
        let p = db.set(b"a", s(b"2"), TtlMode::Keep, 0);
        assert_eq!(db.expire_at(p), Some(1000));
        let p = db.set(b"a", s(b"3"), TtlMode::Clear, 0);
        assert_eq!(db.expire_at(p), None);
        assert_eq!(db.expires_len(), 0);
    }

    fn flag() -> WatchFlag {
        Arc::new(AtomicBool::new(false))
    }

    fn dirty(f: &WatchFlag) -> bool {
        f.load(Ordering::Acquire)
    }

    #[test]
    fn watch_touch_and_cleanup() {
        let mut db = Db::new();
        let f = flag();
        db.watch(b"a", &f, 0);
        db.watch(b"a", &f, 0);
        assert_eq!(db.watched_keys(), 1);
        db.set(b"b", s(b"1"), TtlMode::Clear, 0);
        assert!(!dirty(&f));
        db.set(b"a", s(b"1"), TtlMode::Clear, 0);
        assert!(dirty(&f));
        // A dirty registration is dropped at once.
        assert_eq!(db.watched_keys(), 0);

        // Dropped flags are swept.
        let g = flag();
        db.watch(b"x", &g, 0);
        db.watch(b"y", &g, 0);
        drop(g);
        assert_eq!(db.watched_keys(), 2);
        db.watch_sweep();
        assert_eq!(db.watched_keys(), 0);

        // In-place updates, expiry changes, removal, flush.
        for op in 0..4 {
            let mut db = Db::new();
            db.set(b"k", s(b"1"), TtlMode::Clear, 0);
            let f = flag();
            db.watch(b"k", &f, 0);
            let pos = db.find(b"k", 0).expect("k");
            match op {
                0 => {
                    db.at_mut(pos);
                }
                1 => db.set_expire(pos, Some(100)),
                2 => {
                    db.remove(b"k", 0);
                }
                _ => db.clear(),
            }
            assert!(dirty(&f), "op {op}");
        }
        // Removing a TTL that isn't there is no change; neither is a quiet access.
        let mut db = Db::new();
        db.set(b"k", s(b"1"), TtlMode::Clear, 0);
        let f = flag();
        db.watch(b"k", &f, 0);
        let pos = db.find(b"k", 0).expect("k");
        db.set_expire(pos, None);
        db.at_mut_quiet(pos);
        assert!(!dirty(&f));
    }

    #[test]
    fn watch_expiry_semantics() {
        // Live at WATCH, expired later: passive deletion marks it; before deletion EXEC sees it.
        let mut db = Db::new();
        db.set(b"k", s(b"1"), TtlMode::At(100), 0);
        let f = flag();
        db.watch(b"k", &f, 50);
        assert!(!db.watched_key_expired(b"k", &f, 99));
        assert!(db.watched_key_expired(b"k", &f, 100));
        assert!(!db.exists(b"k", 100));
        assert!(dirty(&f));

        // Stale at WATCH: its deletion is no change, but a later write is.
        let mut db = Db::new();
        db.set(b"k", s(b"1"), TtlMode::At(100), 0);
        let f = flag();
        db.watch(b"k", &f, 200);
        assert!(!db.watched_key_expired(b"k", &f, 300));
        assert!(!db.exists(b"k", 200));
        assert!(!dirty(&f));
        db.set(b"k", s(b"2"), TtlMode::Clear, 200);
        assert!(dirty(&f));

        // FLUSHDB of a stale watched key is no change.
        let mut db = Db::new();
        db.set(b"k", s(b"1"), TtlMode::At(1), 0);
        let f = flag();
        db.watch(b"k", &f, crate::clock::unix_ms());
        db.clear();
        assert!(!dirty(&f));
    }

    #[test]
    fn watch_swapdb() {
        let now = crate::clock::unix_ms();
        // Missing key replaced by a live one: change.
        let (mut a, mut b) = (Db::new(), Db::new());
        b.set(b"k", s(b"1"), TtlMode::Clear, 0);
        let f = flag();
        a.watch(b"k", &f, now);
        a.swap(&mut b);
        assert!(dirty(&f));
        // The registry stays with the db index.
        assert_eq!(a.watched_keys(), 0);
        // Missing key replaced by a stale one: no change.
        let (mut a, mut b) = (Db::new(), Db::new());
        b.set(b"k", s(b"1"), TtlMode::At(1), 0);
        let f = flag();
        a.watch(b"k", &f, now);
        a.swap(&mut b);
        assert!(!dirty(&f));
        // Neither side has it: no change.
        let (mut a, mut b) = (Db::new(), Db::new());
        let f = flag();
        b.watch(b"k", &f, now);
        a.swap(&mut b);
        assert!(!dirty(&f));
        assert_eq!(b.watched_keys(), 1);
    }

    #[test]
    fn active_expiry_reaches_every_volatile_key() {
        let mut db = Db::new();
        for i in 0..10_000u32 {
            let k = format!("k{i}");
            let ttl = if i % 2 == 0 {
                TtlMode::At(500)
            } else {
                TtlMode::At(5000)
            };
            db.set(k.as_bytes(), s(b"v"), ttl, 0);
        }
        for i in 0..1000u32 {
            db.set(format!("p{i}").as_bytes(), s(b"v"), TtlMode::Clear, 0);
        }
        let mut total = 0;
        loop {
            let st = db.active_expire(1000, 100);
            assert!(st.checked <= 100 + 60 * 14, "a step is bounded");
            total += st.expired;
            if st.wrapped {
                break;
            }
        }
        assert_eq!(total, 5000);
        assert_eq!(db.len(), 6000);
        assert_eq!(db.expires_len(), 5000);
    }
}
