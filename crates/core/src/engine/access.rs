//! Per-key access data for eviction and `OBJECT IDLETIME` / `OBJECT FREQ`
//! (docs/design/eviction.md).
//!
//! The table slot (24 bytes: key and value) has no spare bits, so each Dash bucket carries one
//! access byte per slot plus a 32-bit bucket clock the bytes are relative to (the metadata grew
//! from 32 to 48 bytes per 14 slots: 84.2 instead of 84.0 bytes a key after DEBUG POPULATE 1M). Like Redis's 24 `lru` bits, the
//! byte means one of two things, by policy:
//!
//! - **LRU** (every policy but `*-lfu`): the bucket clock is a time in seconds. A byte below
//!   [`FINE`] is an access `byte` seconds after the clock; a byte `FINE + k` is an access
//!   [`old_age`]`(k)` seconds before it: exact up to 64 s, then in steps of 12% up to about four
//!   years. When a key of the bucket is touched 64 s or more after the clock, the clock moves to
//!   now and the bucket's other bytes are re-expressed as ages (rounded up or down at random in
//!   proportion, so ages stay right on average however often they are re-expressed).
//!   `OBJECT IDLETIME` is exact for keys touched in the last minute or so and within the step
//!   beyond.
//! - **LFU**: the byte is Redis's logarithmic counter (`lfu-log-factor`, starting at 5) and the
//!   bucket clock counts `lfu-decay-time` periods. Redis decrements a key's counter by the
//!   periods elapsed since its own last access; here the first access to a bucket in a new
//!   period decrements every counter of the bucket by the periods elapsed since the bucket's
//!   clock, which adds up to the same decrements.
//!
//! The mode is process-wide (the policy is); a shard re-initialises its bytes when it changes.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use damselfly_dash::{BucketId, Pos, SLOTS};

use super::db::PrimeTable;

/// Redis's LFU_INIT_VAL: the counter of a new key.
pub const LFU_INIT_VAL: u8 = 5;

/// Bytes below this are fine-grained (seconds after the bucket clock).
pub const FINE: u8 = 64;
/// Number of age classes (bytes `FINE..=255`).
const OLD_CLASSES: usize = 256 - FINE as usize;

/// Ages in seconds of the classes: 1..=64 exact, then growing by 12% a class.
const OLD: [u32; OLD_CLASSES] = {
    let mut t = [0u32; OLD_CLASSES];
    let mut k = 0;
    while k < OLD_CLASSES {
        t[k] = if k < 64 {
            k as u32 + 1
        } else {
            let p = t[k - 1] as u64;
            let n = p + p * 31 / 256;
            if n > u32::MAX as u64 {
                u32::MAX
            } else {
                n as u32
            }
        };
        k += 1;
    }
    t
};

/// Age in seconds of class `k` (byte `FINE + k`).
#[inline]
pub fn old_age(k: u8) -> u32 {
    OLD[k as usize]
}

static MODE_LFU: AtomicU8 = AtomicU8::new(0);
/// Bumped whenever the mode changes: shards compare it with theirs and reset their bytes.
static MODE_EPOCH: AtomicU64 = AtomicU64::new(0);
static LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
static DECAY_MINUTES: AtomicU32 = AtomicU32::new(1);

/// Sets the mode from the policy (`*-lfu` counts frequency, everything else recency).
pub fn set_lfu(lfu: bool) {
    if MODE_LFU.swap(lfu as u8, Ordering::Relaxed) != lfu as u8 {
        MODE_EPOCH.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn set_lfu_log_factor(v: u32) {
    LOG_FACTOR.store(v, Ordering::Relaxed);
}

pub fn set_lfu_decay_time(minutes: u32) {
    DECAY_MINUTES.store(minutes, Ordering::Relaxed);
}

#[inline]
pub fn lfu() -> bool {
    MODE_LFU.load(Ordering::Relaxed) != 0
}

/// The mode's epoch: a shard whose bytes were set under another epoch resets them.
pub fn epoch() -> u64 {
    MODE_EPOCH.load(Ordering::Relaxed)
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0x2545_F491_4F6C_DD1D) };
}

/// Cheap per-thread randomness (xorshift) for rounding and the LFU counter.
#[inline]
fn rand() -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    })
}

/// The bucket clock value for `now_ms` in the current mode.
#[inline]
fn clock_now(now_ms: u64) -> u32 {
    if lfu() {
        let d = DECAY_MINUTES.load(Ordering::Relaxed) as u64;
        // lfu-decay-time 0: counters never decay (the clock stands still).
        (now_ms / 60_000).checked_div(d).unwrap_or(0) as u32
    } else {
        (now_ms / 1000) as u32
    }
}

// ---- LRU ----------------------------------------------------------------------------------

/// Access time (seconds) a byte stands for, relative to `clock`.
#[inline]
fn lru_time(byte: u8, clock: u32) -> i64 {
    if byte < FINE {
        clock as i64 + byte as i64
    } else {
        clock as i64 - OLD[(byte - FINE) as usize] as i64
    }
}

/// The byte for an access `age` (>= 1) seconds before the clock, rounded to a neighbouring
/// class at random in proportion (`rnd`), so repeated re-expression does not drift.
fn age_byte(age: u64, rnd: u64) -> u8 {
    if age >= OLD[OLD_CLASSES - 1] as u64 {
        return 255;
    }
    let age = age.max(1) as u32;
    // Largest k with OLD[k] <= age.
    let k = OLD.partition_point(|&d| d <= age) - 1;
    let (lo, hi) = (OLD[k], OLD[k + 1]);
    let up = age > lo && (rnd % (hi - lo) as u64) < (age - lo) as u64;
    FINE + (k + up as usize) as u8
}

/// The byte for access time `t` relative to a bucket clock `clock`.
fn lru_byte(t: i64, clock: u32, rnd: u64) -> u8 {
    let d = t - clock as i64;
    if d >= 0 {
        d.min(FINE as i64 - 1) as u8
    } else {
        age_byte((-d) as u64, rnd)
    }
}

/// Moves an LRU bucket's clock to `now` (seconds), re-expressing the other bytes.
fn lru_advance(clock: &mut u32, bytes: &mut [u8; SLOTS], busy: u16, now: u32) {
    let mut m = busy;
    while m != 0 {
        let s = m.trailing_zeros() as usize;
        m &= m - 1;
        let t = lru_time(bytes[s], *clock);
        bytes[s] = lru_byte(t, now, rand());
    }
    *clock = now;
}

// ---- LFU ----------------------------------------------------------------------------------

/// Applies the periods elapsed since the bucket clock to every counter of the bucket.
fn lfu_decay(clock: &mut u32, bytes: &mut [u8; SLOTS], busy: u16, now: u32) {
    if now > *clock {
        let d = (now - *clock).min(255) as u8;
        let mut m = busy;
        while m != 0 {
            let s = m.trailing_zeros() as usize;
            m &= m - 1;
            bytes[s] = bytes[s].saturating_sub(d);
        }
    }
    *clock = now;
}

/// Redis's LFULogIncr: the counter grows with probability 1 / ((counter - 5) * factor + 1).
fn lfu_incr(counter: u8) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * LOG_FACTOR.load(Ordering::Relaxed) as f64 + 1.0);
    let r = (rand() >> 11) as f64 / (1u64 << 53) as f64;
    if r < p {
        counter + 1
    } else {
        counter
    }
}

// ---- the table-facing operations -----------------------------------------------------------

/// Brings the bucket of `pos` up to `now_ms` (LRU: clock moved if 64 s behind; LFU: decayed) and
/// returns its parts.
#[inline]
fn bucket(t: &mut PrimeTable, b: BucketId, now_ms: u64) -> (&mut [u8; SLOTS], u32) {
    let now = clock_now(now_ms);
    let lfu = lfu();
    let (clock, bytes, busy) = t.bucket_access_mut(b);
    if lfu {
        if now != *clock {
            lfu_decay(clock, bytes, busy, now);
        }
    } else if now >= *clock + FINE as u32 || (*clock == 0 && now != 0) {
        lru_advance(clock, bytes, busy, now);
    }
    let c = *clock;
    (bytes, c)
}

/// Records an access to the key at `pos` (lookups that Redis's LOOKUP_NOTOUCH does not exempt).
#[inline]
pub fn touch(t: &mut PrimeTable, pos: Pos, now_ms: u64) {
    let lfu = lfu();
    let (bytes, clock) = bucket(t, pos.bucket_id(), now_ms);
    let s = pos.slot();
    bytes[s] = if lfu {
        lfu_incr(bytes[s])
    } else {
        lru_byte((now_ms / 1000) as i64, clock, 0)
    };
}

/// Sets the access data of a key just inserted at `pos`: accessed now, or Redis's initial LFU
/// counter.
#[inline]
pub fn init(t: &mut PrimeTable, pos: Pos, now_ms: u64) {
    let lfu = lfu();
    let (bytes, clock) = bucket(t, pos.bucket_id(), now_ms);
    bytes[pos.slot()] = if lfu {
        LFU_INIT_VAL
    } else {
        lru_byte((now_ms / 1000) as i64, clock, 0)
    };
}

/// Seconds since the key at `pos` was last accessed (LRU mode).
pub fn idle_secs(t: &PrimeTable, pos: Pos, now_ms: u64) -> u64 {
    let (byte, clock) = t.access(pos);
    ((now_ms / 1000) as i64 - lru_time(byte, clock)).max(0) as u64
}

/// Sets the idle time of the key at `pos` (RESTORE ... IDLETIME, LRU mode).
pub fn set_idle(t: &mut PrimeTable, pos: Pos, now_ms: u64, idle: u64) {
    let (bytes, clock) = bucket(t, pos.bucket_id(), now_ms);
    let at = (now_ms / 1000) as i64 - idle.min(i64::MAX as u64 / 2) as i64;
    bytes[pos.slot()] = lru_byte(at, clock, 0);
}

/// The decayed LFU counter of the key at `pos` (LFU mode).
pub fn freq(t: &mut PrimeTable, pos: Pos, now_ms: u64) -> u8 {
    let (bytes, _) = bucket(t, pos.bucket_id(), now_ms);
    bytes[pos.slot()]
}

/// Sets the LFU counter of the key at `pos` (RESTORE ... FREQ).
pub fn set_freq(t: &mut PrimeTable, pos: Pos, now_ms: u64, f: u8) {
    let (bytes, _) = bucket(t, pos.bucket_id(), now_ms);
    bytes[pos.slot()] = f;
}

/// Eviction rank of the key at `pos`: higher is a better victim (idle seconds in LRU mode,
/// `255 - counter` in LFU mode).
pub fn rank(t: &mut PrimeTable, pos: Pos, now_ms: u64) -> u64 {
    if lfu() {
        255 - freq(t, pos, now_ms) as u64
    } else {
        idle_secs(t, pos, now_ms)
    }
}

/// The table's [`damselfly_dash::Rebase`]: re-expresses a byte when an entry moves to a bucket
/// with another clock.
pub fn rebase(a: u8, from: u32, to: u32) -> u8 {
    if from == to {
        return a;
    }
    if lfu() {
        if to > from {
            a.saturating_sub((to - from).min(255) as u8)
        } else {
            a
        }
    } else {
        lru_byte(lru_time(a, from), to, rand())
    }
}

/// Resets every key of the table to "accessed now" (LRU) or the initial counter (LFU): after the
/// mode changed, the old bytes mean nothing in the new one.
pub fn reset_all(t: &mut PrimeTable, now_ms: u64) {
    let now = clock_now(now_ms);
    let fill = if lfu() { LFU_INIT_VAL } else { 0 };
    let mut b = Some(BucketId::FIRST);
    while let Some(id) = b {
        if !t.has_bucket(id) {
            break;
        }
        let (clock, bytes, _) = t.bucket_access_mut(id);
        *clock = now;
        *bytes = [fill; SLOTS];
        b = t.next_bucket_id(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_exact_then_geometric() {
        assert_eq!(OLD[0], 1);
        assert_eq!(OLD[63], 64);
        for k in 64..OLD_CLASSES {
            assert!(OLD[k] > OLD[k - 1]);
            let step = OLD[k] as f64 / OLD[k - 1] as f64;
            assert!(step < 1.13, "class {k}: step {step}");
        }
        // Four years and more.
        assert!(OLD[OLD_CLASSES - 1] as u64 > 4 * 365 * 86400);
    }

    #[test]
    fn ages_round_trip_exactly_up_to_a_minute() {
        for age in 1..=64u64 {
            let b = age_byte(age, 12345);
            assert_eq!(lru_time(b, 1000), 1000 - age as i64);
        }
        for d in 0..FINE as i64 {
            assert_eq!(lru_time(lru_byte(1000 + d, 1000, 0), 1000), 1000 + d);
        }
    }

    #[test]
    fn repeated_re_expression_does_not_drift() {
        // An entry idle in a bucket whose clock moves every 64 s for a day: the age it ends with
        // stays close to the truth on average.
        let mut total = 0f64;
        let runs = 200;
        for _ in 0..runs {
            let mut clock = 1_000_000u32;
            let mut bytes = [0u8; SLOTS];
            bytes[0] = 0; // accessed at the clock
            let start = clock as i64;
            for _ in 0..(86400 / 64) {
                let now = clock + 64;
                lru_advance(&mut clock, &mut bytes, 1, now);
            }
            let age = clock as i64 - lru_time(bytes[0], clock);
            let truth = clock as i64 - start;
            total += age as f64 / truth as f64;
        }
        let mean = total / runs as f64;
        assert!((0.9..1.1).contains(&mean), "mean ratio {mean}");
    }

    #[test]
    fn lfu_counter_grows_logarithmically() {
        set_lfu_log_factor(10);
        let mut c = LFU_INIT_VAL;
        for _ in 0..1000 {
            c = lfu_incr(c);
        }
        // Redis's table: factor 10 reaches about 18 after 1k hits (100 after 1M).
        assert!((12..=30).contains(&c), "counter {c}");
        assert_eq!(lfu_incr(255), 255);
    }

    #[test]
    fn lfu_decay_subtracts_elapsed_periods() {
        let mut clock = 10;
        let mut bytes = [0u8; SLOTS];
        bytes[0] = 20;
        bytes[1] = 3;
        lfu_decay(&mut clock, &mut bytes, 0b11, 15);
        assert_eq!((bytes[0], bytes[1], clock), (15, 0, 15));
    }
}
