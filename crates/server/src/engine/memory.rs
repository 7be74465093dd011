//! The used-memory figure `maxmemory` is enforced against (docs/design/memory-limits.md).
//!
//! It is the allocator's own count of live bytes (jemalloc `stats.allocated`: keys, values,
//! tables, connection buffers, everything the process allocated), as Redis's `used_memory` is
//! zmalloc's. One process-wide figure, not a per-shard budget: a shard with more keys than its
//! neighbours can use memory they do not need, and nothing is stranded. Reading jemalloc's
//! statistics costs microseconds (it merges every arena's counters), so the figure is
//! refreshed at most once a millisecond, by whichever thread asks first; every other check is
//! one atomic load. A burst of writes can therefore overshoot the limit by what one
//! millisecond of writes allocates.

use std::sync::atomic::{AtomicU64, Ordering};

use super::clock;

static USED: AtomicU64 = AtomicU64::new(0);
/// Unix ms of the last refresh (0: never).
static REFRESHED_MS: AtomicU64 = AtomicU64::new(0);

/// Used memory in bytes, at most about a millisecond old.
pub fn used() -> u64 {
    let now = clock::unix_ms();
    let last = REFRESHED_MS.load(Ordering::Relaxed);
    if now != last
        && REFRESHED_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        let v = allocated();
        USED.store(v, Ordering::Relaxed);
        return v;
    }
    USED.load(Ordering::Relaxed)
}

/// Takes `bytes` just freed (by eviction) off the figure until the next refresh reads the
/// allocator again, so checks in the same millisecond see the memory gone.
pub fn note_freed(bytes: u64) {
    let _ = USED.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(bytes))
    });
}

/// jemalloc's allocated bytes, read fresh (0 where jemalloc is not the allocator: unit tests,
/// where no limit is enforced then).
pub fn allocated() -> u64 {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64
}

/// Is used memory over `maxmemory` (0: no limit)? The check a command that may grow memory
/// passes before it runs.
#[inline]
pub fn over_limit(maxmemory: u64) -> bool {
    maxmemory != 0 && used() > maxmemory
}

/// Gives the pages of freed memory back to the OS now. jemalloc otherwise returns them over
/// about ten seconds of decay, and keeps them while there is no allocation traffic: after a
/// FLUSHALL of a big dataset RSS would stay where it was. Redis purges after a synchronous
/// FLUSHALL/FLUSHDB and on MEMORY PURGE; so do we. Takes milliseconds for a large heap.
pub fn purge() {
    // "arena.<MALLCTL_ARENAS_ALL>.purge": a void control (no old and no new value).
    // SAFETY: a NUL-terminated name and null pointers, as the control expects; it fails
    // harmlessly where jemalloc is not the allocator (unit tests).
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}
