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
