//! Eviction: freeing memory when `used_memory` passes `maxmemory` (docs/design/eviction.md).
//!
//! Each shard evicts its own keys, on its own thread: before a command runs on a connection
//! whose thread finds memory over the limit (like Redis's performEvictions), and from the shard's
//! periodic tick. The used-memory figure is process-wide, so whichever shard sees the excess
//! frees it; keys are spread evenly over shards, so each holds its share of candidates.
//!
//! Policies as Redis's: `allkeys-*` pick among every key, `volatile-*` among keys with a TTL;
//! `*-lru` the longest idle, `*-lfu` the lowest counter, `volatile-ttl` the nearest deadline,
//! `*-random` any. Like Redis, each round samples `maxmemory-samples` keys per db into a pool of
//! the 16 best candidates kept across rounds, and evicts the best one still there.
//!
//! Cache mode (`cache_mode`, after Dragonfly's) samples the table itself: each round's sample is
//! a random key's bucket neighbourhood (home bucket, neighbour, stash: the keys an insert there
//! could displace), ranked by the access bytes of those buckets, into the same pool. It starts
//! a little below the limit (see [`limit`]) and never answers -OOM.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use super::shard::Shard;
use super::vll::TxShard;

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Policy {
    NoEviction = 0,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub fn parse(name: &str) -> Option<Policy> {
        Some(match name {
            "noeviction" => Policy::NoEviction,
            "allkeys-lru" => Policy::AllkeysLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => return None,
        })
    }

    fn from_u8(v: u8) -> Policy {
        match v {
            1 => Policy::AllkeysLru,
            2 => Policy::AllkeysLfu,
            3 => Policy::AllkeysRandom,
            4 => Policy::VolatileLru,
            5 => Policy::VolatileLfu,
            6 => Policy::VolatileRandom,
            7 => Policy::VolatileTtl,
            _ => Policy::NoEviction,
        }
    }

    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllkeysRandom | Policy::VolatileRandom)
    }
}

static POLICY: AtomicU8 = AtomicU8::new(0);
/// `maxmemory`, mirrored for the insert path (`Db::make_room`), which has no config at hand.
static MAXMEMORY: AtomicU64 = AtomicU64::new(0);
static SAMPLES: AtomicU64 = AtomicU64::new(5);
static CACHE_MODE: AtomicU8 = AtomicU8::new(0);
/// Keys evicted since start (INFO stats `evicted_keys`).
static EVICTED: AtomicU64 = AtomicU64::new(0);
/// Microseconds spent over the limit (INFO `total_eviction_exceeded_time`), and when the
/// current stretch began (unix µs, 0: not over).
static EXCEEDED_US: AtomicU64 = AtomicU64::new(0);
static EXCEEDED_SINCE: AtomicU64 = AtomicU64::new(0);

pub fn set_policy(p: Policy) {
    POLICY.store(p as u8, Ordering::Relaxed);
    update_access_mode();
}

/// Access data count frequency under the `*-lfu` policies and in cache mode (it ranks by
/// frequency: a better hit ratio than recency on skewed workloads, docs/benchmarks.md), recency
/// otherwise.
fn update_access_mode() {
    let p = policy();
    super::access::set_lfu(cache_mode() || matches!(p, Policy::AllkeysLfu | Policy::VolatileLfu));
}

pub fn set_maxmemory(v: u64) {
    MAXMEMORY.store(v, Ordering::Relaxed);
}

/// The policy whose eligibility and ranks victims follow: cache mode ranks every key by its
/// access byte whatever `maxmemory-policy` says.
pub fn effective_policy() -> Policy {
    if cache_mode() {
        Policy::AllkeysLfu
    } else {
        policy()
    }
}

impl Policy {
    /// Only keys with a TTL are candidates.
    pub fn only_volatile(self) -> bool {
        self.volatile()
    }

    pub fn by_ttl(self) -> bool {
        self == Policy::VolatileTtl
    }

    pub fn is_random(self) -> bool {
        self.random()
    }
}

/// Should an insert that would split a table segment evict a neighbour instead? Yes when a
/// policy evicts and memory is within `grow` bytes of the limit (docs/design/eviction.md: a
/// split adds a segment that evicting small keys never gives back).
#[inline]
pub fn guard_split(grow: u64) -> bool {
    let maxmemory = MAXMEMORY.load(Ordering::Relaxed);
    maxmemory != 0 && evicts() && super::memory::used_for_limit() + grow > maxmemory
}

/// Counts keys evicted outside [`run`] (by the insert path).
pub fn count_evicted(n: u64) {
    EVICTED.fetch_add(n, Ordering::Relaxed);
}

pub fn policy() -> Policy {
    Policy::from_u8(POLICY.load(Ordering::Relaxed))
}

static TENACITY: AtomicU64 = AtomicU64::new(10);

/// `maxmemory-eviction-tenacity` (0..=100).
pub fn set_tenacity(t: u64) {
    TENACITY.store(t.min(100), Ordering::Relaxed);
}

/// Time one eviction call may take, as Redis's `evictionTimeLimitUs`: 50 µs per step up to 10
/// (500 µs by default), then growing 15% a step; 100 means no limit.
fn time_limit() -> Option<std::time::Duration> {
    let t = TENACITY.load(Ordering::Relaxed);
    if t >= 100 {
        return None;
    }
    let us = if t <= 10 {
        50.0 * t as f64
    } else {
        500.0 * 1.15f64.powi(t as i32 - 10)
    };
    Some(std::time::Duration::from_micros(us as u64))
}

pub fn set_samples(n: u64) {
    SAMPLES.store(n.max(1), Ordering::Relaxed);
}

pub fn set_cache_mode(on: bool) {
    CACHE_MODE.store(on as u8, Ordering::Relaxed);
    update_access_mode();
}

#[inline]
pub fn cache_mode() -> bool {
    CACHE_MODE.load(Ordering::Relaxed) != 0
}

/// Does memory over the limit get freed by evicting (rather than refused with -OOM)?
#[inline]
pub fn evicts() -> bool {
    cache_mode() || policy() != Policy::NoEviction
}

pub fn evicted_keys() -> u64 {
    EVICTED.load(Ordering::Relaxed)
}

/// CONFIG RESETSTAT: `evicted_keys` and the total exceeded time start again (a limit being
/// exceeded right now goes on counting from now).
pub fn reset_stats() {
    EVICTED.store(0, Ordering::Relaxed);
    EXCEEDED_US.store(0, Ordering::Relaxed);
    if EXCEEDED_SINCE.load(Ordering::Relaxed) != 0 {
        EXCEEDED_SINCE.store(crate::clock::unix_us().max(1), Ordering::Relaxed);
    }
}

/// (total, current) time spent over the limit, in ms, as INFO reports them.
pub fn exceeded_ms() -> (u64, u64) {
    let since = EXCEEDED_SINCE.load(Ordering::Relaxed);
    let cur = if since == 0 {
        0
    } else {
        crate::clock::unix_us().saturating_sub(since)
    };
    (
        (EXCEEDED_US.load(Ordering::Relaxed) + cur) / 1000,
        cur / 1000,
    )
}

/// Records whether memory is over the limit now (for the exceeded-time counters).
pub fn note_over(over: bool) {
    let since = EXCEEDED_SINCE.load(Ordering::Relaxed);
    if over && since == 0 {
        let _ = EXCEEDED_SINCE.compare_exchange(
            0,
            crate::clock::unix_us().max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    } else if !over
        && since != 0
        && EXCEEDED_SINCE
            .compare_exchange(since, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        EXCEEDED_US.fetch_add(
            crate::clock::unix_us().saturating_sub(since),
            Ordering::Relaxed,
        );
    }
}

/// Most keys one call evicts: the rest is left to the next command or tick so a client never
/// waits long (Redis bounds each call by time, `maxmemory-eviction-tenacity`).
const MAX_PER_CALL: usize = 2048;
/// Eviction pool size (Redis's EVPOOL_SIZE).
const POOL: usize = 16;

/// A candidate kept in the shard's pool: higher `rank` is a better victim.
pub struct Candidate {
    rank: u64,
    db: usize,
    key: Box<[u8]>,
}

/// The shard's eviction state.
#[derive(Default)]
pub struct Evictor {
    pool: Vec<Candidate>,
    /// Next db for the random policies (round robin, as Redis).
    next_db: usize,
}

/// What one call did.
#[derive(Default, Debug, Clone, Copy)]
pub struct Evicted {
    pub keys: usize,
    pub bytes: u64,
}

/// The figure eviction keeps memory under: `maxmemory`, or in cache mode a little below it
/// (two segments' worth per shard, and 1%) so that table growth does not cross the limit.
pub fn limit(maxmemory: u64, shards: usize) -> u64 {
    if cache_mode() {
        let headroom = 2 * super::db::PrimeTable::segment_bytes() as u64 * shards.max(1) as u64
            + maxmemory / 100;
        maxmemory.saturating_sub(headroom).max(1)
    } else {
        maxmemory
    }
}

/// Evicts about `to_free` bytes from `shard` (bounded per call), leaving alone keys locked by
/// a scheduled transaction. Returns what was freed; `keys == 0` means this shard had nothing
/// it may evict.
pub fn run(shard: &mut Shard, tx: Option<&TxShard>, to_free: u64, now: u64) -> Evicted {
    let mut done = Evicted::default();
    if !evicts() {
        return done;
    }
    let deadline = time_limit().map(|d| std::time::Instant::now() + d);
    while done.bytes < to_free && done.keys < MAX_PER_CALL {
        // Redis's maxmemory-eviction-tenacity: the time one call may spend (checked every 16
        // keys); the rest waits for the next command or tick.
        if done.keys % 16 == 15 && deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            break;
        }
        match evict_one(shard, tx, now) {
            Some(b) => {
                done.keys += 1;
                done.bytes += b;
            }
            None => break,
        }
    }
    if done.keys > 0 {
        EVICTED.fetch_add(done.keys as u64, Ordering::Relaxed);
        if shard.id < SHARD_SLOTS {
            EVICTED_BYTES[shard.id].fetch_add(done.bytes, Ordering::Relaxed);
        }
    }
    // Remember whether this shard has anything left to evict (shards 0..64; beyond, always
    // presumed to have).
    if shard.id < 64 {
        let bit = 1u64 << shard.id;
        if done.keys == 0 {
            NOTHING.fetch_or(bit, Ordering::Relaxed);
        } else {
            NOTHING.fetch_and(!bit, Ordering::Relaxed);
        }
    }
    done
}

/// Shards whose eviction totals are tracked for fairness (beyond, always fair).
const SHARD_SLOTS: usize = 64;
/// Bytes each shard has evicted since start.
static EVICTED_BYTES: [AtomicU64; SHARD_SLOTS] = [const { AtomicU64::new(0) }; SHARD_SLOTS];

/// Has shard `me` (of `n`) evicted more than its share: more than the average of the shards
/// that still have something to evict, by over `max(64 KiB, maxmemory / 64)`? Then it leaves
/// the excess to the others rather than drain its own keys.
pub fn ahead(me: usize, n: usize, maxmemory: u64) -> bool {
    if n <= 1 || me >= SHARD_SLOTS {
        return false;
    }
    let nothing = NOTHING.load(Ordering::Relaxed);
    let (mut sum, mut count) = (0u64, 0u64);
    for (i, bytes) in EVICTED_BYTES.iter().enumerate().take(n) {
        if i == me || nothing & (1 << i) == 0 {
            sum += bytes.load(Ordering::Relaxed);
            count += 1;
        }
    }
    let mine = EVICTED_BYTES[me].load(Ordering::Relaxed);
    let slack = (64u64 << 10).max(maxmemory / 64);
    mine > sum / count.max(1) + slack
}

/// Bit `i`: shard `i` found nothing to evict the last time it tried.
static NOTHING: AtomicU64 = AtomicU64::new(0);
/// Unix ms of the last request to every shard to evict.
static BROADCAST_MS: AtomicU64 = AtomicU64::new(0);

/// May any of the `n` shards still have something to evict?
pub fn any_may_evict(n: usize) -> bool {
    let nothing = NOTHING.load(Ordering::Relaxed);
    (0..n).any(|i| i >= 64 || nothing & (1 << i) == 0)
}

/// True at most once a millisecond: whether the caller should ask every shard to evict.
pub fn broadcast_due() -> bool {
    let now = crate::clock::unix_ms();
    let last = BROADCAST_MS.load(Ordering::Relaxed);
    now != last
        && BROADCAST_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

fn locked(tx: Option<&TxShard>, db: usize, key: &[u8]) -> bool {
    tx.is_some_and(|t| t.key_locked(db, key))
}

/// Evicts one key by the policy; returns the bytes it held (an estimate).
fn evict_one(shard: &mut Shard, tx: Option<&TxShard>, now: u64) -> Option<u64> {
    let p = effective_policy();
    let ndb = shard.dbs.len();
    if p.random() {
        for _ in 0..ndb {
            let dbi = shard.evictor.next_db % ndb;
            shard.evictor.next_db = shard.evictor.next_db.wrapping_add(1);
            let r = shard.rand();
            let db = &mut shard.dbs[dbi];
            let key = if p.volatile() {
                db.random_volatile_key(r)
            } else {
                db.random_key_any(r)
            };
            if let Some(k) = key {
                if !locked(tx, dbi, &k) {
                    return db.evict_key(&k, now);
                }
            }
        }
        return None;
    }
    // Fill the pool from every db, then take the best candidate that still exists.
    let samples = SAMPLES.load(Ordering::Relaxed) as usize;
    let cache = cache_mode();
    for dbi in 0..ndb {
        if shard.dbs[dbi].is_empty() || (p.volatile() && shard.dbs[dbi].expires_len() == 0) {
            continue;
        }
        if cache {
            // Cache mode: the sample is a random key's bucket neighbourhood, ranked from the
            // table's own metadata.
            let r = shard.rand();
            let pool = &mut shard.evictor.pool;
            shard.dbs[dbi].sample_near(r, now, |key, rank| {
                pool_add(pool, Candidate { rank, db: dbi, key })
            });
            continue;
        }
        for _ in 0..samples {
            let r = shard.rand();
            let db = &mut shard.dbs[dbi];
            let Some((key, rank)) = db.sample(r, p.volatile(), p == Policy::VolatileTtl, now)
            else {
                break;
            };
            pool_add(&mut shard.evictor.pool, Candidate { rank, db: dbi, key });
        }
    }
    // Candidates were ranked when sampled; one accessed since then has a lower rank now. Each
    // is re-ranked before it goes (Redis evicts on the old rank), so a key read a moment ago is
    // not evicted for having been idle before.
    let mut rechecks = POOL;
    while let Some(c) = shard.evictor.pool.pop() {
        if locked(tx, c.db, &c.key) {
            continue;
        }
        let db = &mut shard.dbs[c.db];
        let by_ttl = p == Policy::VolatileTtl && !cache;
        // (None too when a volatile policy meets a key without a TTL: the pool may hold
        // candidates sampled under an allkeys policy before a switch.)
        let Some(rank) = db.rank_of(&c.key, p.volatile(), by_ttl, now) else {
            continue;
        };
        if rank < c.rank && rechecks > 0 {
            rechecks -= 1;
            pool_add(&mut shard.evictor.pool, Candidate { rank, ..c });
            continue;
        }
        if let Some(b) = shard.dbs[c.db].evict_key(&c.key, now) {
            return Some(b);
        }
    }
    None
}

/// Keeps the pool sorted by rank (best last), without duplicates, at most [`POOL`] long.
fn pool_add(pool: &mut Vec<Candidate>, c: Candidate) {
    if let Some(i) = pool.iter().position(|o| o.db == c.db && o.key == c.key) {
        pool.remove(i);
    }
    if pool.len() >= POOL && pool[0].rank >= c.rank {
        return;
    }
    let at = pool.partition_point(|o| o.rank < c.rank);
    pool.insert(at, c);
    if pool.len() > POOL {
        pool.remove(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(rank: u64, k: &str) -> Candidate {
        Candidate {
            rank,
            db: 0,
            key: k.as_bytes().into(),
        }
    }

    #[test]
    fn pool_keeps_the_best_sorted_and_unique() {
        let mut p = Vec::new();
        for i in 0..40u64 {
            pool_add(&mut p, c(i * 7 % 41, &format!("k{i}")));
        }
        assert_eq!(p.len(), POOL);
        assert!(p.windows(2).all(|w| w[0].rank <= w[1].rank));
        let best = p.last().unwrap().rank;
        assert_eq!(best, (0..40u64).map(|i| i * 7 % 41).max().unwrap());
        // Re-adding a key replaces it.
        pool_add(&mut p, c(1000, "k1"));
        assert_eq!(p.iter().filter(|x| &*x.key == b"k1").count(), 1);
        assert_eq!(p.last().unwrap().rank, 1000);
    }

    #[test]
    fn policy_names() {
        for n in [
            "noeviction",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
        ] {
            let p = Policy::parse(n).unwrap();
            assert_eq!(Policy::from_u8(p as u8), p);
        }
        assert!(Policy::parse("lru").is_none());
    }
}
