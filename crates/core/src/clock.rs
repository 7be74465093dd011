//! Injectable clock. Commands read "now" once per command (like Redis's command time snapshot);
//! tests can freeze or shift time without sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Offset added to the wall clock, settable for deterministic tests (DEBUG JMAP-like control).
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

#[inline]
pub fn unix_ms() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_millis() as i64 + OFFSET_MS.load(Ordering::Relaxed)).max(0) as u64
}

#[inline]
pub fn unix_us() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_micros() as i64 + OFFSET_MS.load(Ordering::Relaxed) * 1000).max(0) as u64
}

/// Shifts the clock (used by tests through DEBUG commands only).
pub fn advance_ms(delta: i64) {
    OFFSET_MS.fetch_add(delta, Ordering::Relaxed);
}

/// Cheap monotonic tick counter for per-command timing (commandstats, slowlog). On x86_64 this
/// is the TSC (a few ns, no syscall), calibrated once against the monotonic clock.
pub struct Ticks;

#[cfg(target_arch = "x86_64")]
impl Ticks {
    #[inline]
    pub fn now() -> u64 {
        // SAFETY: rdtsc has no preconditions.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    /// Converts a tick delta to microseconds: a multiplication by a 32.32 fixed-point factor
    /// (a 128-bit division per command was measurable).
    #[inline]
    pub fn to_us(delta: u64) -> u64 {
        ((delta as u128 * us_per_tick_q32() as u128) >> 32) as u64
    }
}

/// Microseconds per tick in 32.32 fixed point (relative error under 1e-6 at GHz rates).
#[cfg(target_arch = "x86_64")]
fn us_per_tick_q32() -> u64 {
    use std::sync::OnceLock;
    static Q: OnceLock<u64> = OnceLock::new();
    *Q.get_or_init(|| ((1_000_000u128 << 32) / tsc_hz() as u128).max(1) as u64)
}

#[cfg(target_arch = "x86_64")]
fn tsc_hz() -> u64 {
    use std::sync::OnceLock;
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let t0 = std::time::Instant::now();
        // SAFETY: as above.
        let c0 = unsafe { core::arch::x86_64::_rdtsc() };
        std::thread::sleep(std::time::Duration::from_millis(20));
        let c1 = unsafe { core::arch::x86_64::_rdtsc() };
        let ns = t0.elapsed().as_nanos().max(1) as u64;
        ((c1.wrapping_sub(c0)) as u128 * 1_000_000_000 / ns as u128).max(1) as u64
    })
}

#[cfg(not(target_arch = "x86_64"))]
impl Ticks {
    #[inline]
    pub fn now() -> u64 {
        unix_us()
    }
    #[inline]
    pub fn to_us(delta: u64) -> u64 {
        delta
    }
}

/// Calibrates the tick counter (call once at startup, not on a hot path).
pub fn init() {
    #[cfg(target_arch = "x86_64")]
    let _ = us_per_tick_q32();
}

/// CPU time the calling thread has used: what a background job (a snapshot's walk) measures
/// to tell how much of its thread the clients needed since it last ran.
pub fn thread_cpu() -> std::time::Duration {
    // SAFETY: clock_gettime fills the zeroed struct we own.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn ticks_convert_to_microseconds() {
        let hz = tsc_hz();
        for secs in [0u64, 1, 60, 86_400] {
            let us = Ticks::to_us(hz * secs);
            let want = secs * 1_000_000;
            // The fixed-point factor is exact to well under a microsecond per second.
            assert!(us.abs_diff(want) <= secs.max(1), "{secs}s: {us} us");
        }
        assert_eq!(Ticks::to_us(0), 0);
    }
}
