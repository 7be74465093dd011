//! The used-memory figure `maxmemory` is enforced against (docs/design/memory-limits.md).
//!
//! It is the count of live bytes the process allocated (keys, values, tables, connection
//! buffers, everything), kept by the global allocator [`Counting`] in per-thread counters, as
//! Redis's `used_memory` is zmalloc's count. One process-wide figure, not a per-shard budget: a
//! shard with more keys than its neighbours can use memory they do not need, and nothing is
//! stranded.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicIsize, AtomicUsize, Ordering};

/// Per-thread counters of live bytes, summed on read. Each thread adds to its own cache line,
/// so counting costs an uncontended add per allocation; a thread past the first [`COUNTERS`]
/// shares a slot (still exact: the adds are atomic).
const COUNTERS: usize = 64;

#[repr(align(64))]
struct Counter(AtomicI64);

static LIVE: [Counter; COUNTERS] = [const { Counter(AtomicI64::new(0)) }; COUNTERS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
/// Counting is on while `maxmemory` is set: with no limit an allocation costs only this load.
static COUNTING: AtomicBool = AtomicBool::new(false);
/// jemalloc's allocated bytes when counting was switched on: the counters count from there.
static BASE: AtomicI64 = AtomicI64::new(0);

/// Is the exact count on (`maxmemory` set)?
pub fn counting() -> bool {
    COUNTING.load(Ordering::Relaxed)
}

/// Switches counting on (re-reading the base from jemalloc) or off. On from `maxmemory`'s
/// setting: the blocks alive at that moment are in the base, so frees of them later subtract
/// from a figure that included them. What other threads allocate between reading the base and
/// the switch is missed: bytes, once.
pub fn set_counting(on: bool) {
    if on == COUNTING.load(Ordering::Relaxed) {
        return;
    }
    if on {
        for c in LIVE.iter() {
            c.0.store(0, Ordering::Relaxed);
        }
        BASE.store(allocated() as i64, Ordering::Relaxed);
    }
    COUNTING.store(on, Ordering::Release);
}

thread_local! {
    // Const-initialised and without a destructor: usable inside the allocator at any time,
    // thread exit included.
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn count(delta: i64) {
    if !COUNTING.load(Ordering::Relaxed) {
        return;
    }
    let slot = SLOT
        .try_with(|s| {
            let mut v = s.get();
            if v == usize::MAX {
                v = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % COUNTERS;
                s.set(v);
            }
            v
        })
        .unwrap_or(0);
    LIVE[slot].0.fetch_add(delta, Ordering::Relaxed);
}

/// The global allocator of the server binary: jemalloc, counting (while `maxmemory` is set) the
/// usable size of every block it hands out and takes back (as Redis's zmalloc counts
/// `used_memory`). The count is
/// exact at every instant, where jemalloc's own `stats.allocated` moves in steps of its thread
/// caches' fills and flushes (tens of KiB); see docs/design/memory-limits.md.
pub struct Counting;

// SAFETY: every call is forwarded to jemalloc with the caller's arguments; the counting only
// reads the block's usable size, which jemalloc's `sallocx` allows for any live block.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { tikv_jemallocator::Jemalloc.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            // SAFETY: p is a live jemalloc block.
            count(unsafe { tikv_jemalloc_sys::sallocx(p as _, 0) } as i64);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { tikv_jemallocator::Jemalloc.alloc_zeroed(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            // SAFETY: p is a live jemalloc block.
            count(unsafe { tikv_jemalloc_sys::sallocx(p as _, 0) } as i64);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            // SAFETY: ptr is a live block of ours (caller contract).
            count(-(unsafe { tikv_jemalloc_sys::sallocx(ptr as _, 0) } as i64));
        }
        // SAFETY: forwarded as received.
        unsafe { tikv_jemallocator::Jemalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !COUNTING.load(Ordering::Relaxed) {
            // SAFETY: forwarded as received.
            return unsafe { tikv_jemallocator::Jemalloc.realloc(ptr, layout, new_size) };
        }
        // SAFETY: ptr is a live block of ours (caller contract).
        let old = unsafe { tikv_jemalloc_sys::sallocx(ptr as _, 0) } as i64;
        // SAFETY: forwarded as received.
        let p = unsafe { tikv_jemallocator::Jemalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // SAFETY: p is a live jemalloc block.
            count(unsafe { tikv_jemalloc_sys::sallocx(p as _, 0) } as i64 - old);
        }
        p
    }
}

/// Used memory in bytes. While `maxmemory` is set: what the process has allocated and not
/// freed, to the byte, summing the per-thread counters (tens of nanoseconds). Otherwise
/// jemalloc's `stats.allocated` (microseconds; read by INFO only). 0 in unit tests, where
/// jemalloc is not the allocator.
pub fn used() -> u64 {
    if !COUNTING.load(Ordering::Acquire) {
        return allocated();
    }
    let live: i64 = LIVE.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
    (BASE.load(Ordering::Relaxed) + live).max(0) as u64
}

/// jemalloc's allocated bytes less what its thread caches hold (freed blocks jemalloc still
/// counts), read fresh: 0 where jemalloc is not the allocator (unit tests).
pub fn allocated() -> u64 {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64;
    // Blocks freed into the threads' caches still count as allocated for jemalloc; its
    // merged statistics say how many bytes those caches hold ("arenas.4096": all arenas).
    // SAFETY: a NUL-terminated name of a size_t statistic.
    let cached = unsafe {
        tikv_jemalloc_ctl::raw::read::<usize>(b"stats.arenas.4096.tcache_bytes\0").unwrap_or(0)
    } as u64;
    allocated.saturating_sub(cached)
}

/// The bytes an allocation of `bytes` takes (jemalloc's size class), for structures that
/// account for their own memory.
pub fn block_size(bytes: usize) -> usize {
    if bytes == 0 {
        return 0;
    }
    // SAFETY: nallocx only computes a size class; flags 0 asks for no alignment.
    match unsafe { tikv_jemalloc_sys::nallocx(bytes, 0) } {
        0 => bytes,
        n => n,
    }
}

/// Bytes of used memory that eviction leaves out (`mem_not_counted_for_evict`): the part of
/// the replication buffer beyond `repl-backlog-size`, which is there only while replicas have
/// not taken it. Redis leaves it out too (`freeMemoryGetNotCountedMemory`): evicting keys
/// because a replica is slow would delete data to make room for a copy of writes that is about
/// to go away, and the evictions would themselves be more stream.
static NOT_COUNTED: AtomicUsize = AtomicUsize::new(0);

/// Set by the replication backlog whenever what it holds changes.
pub fn set_not_counted(bytes: usize) {
    NOT_COUNTED.store(bytes, Ordering::Relaxed);
}

/// Stream records on their way from the shards to the replication feeder (the journal's
/// queue), which eviction leaves out as well: they become the replication buffer as soon as
/// the feeder's thread runs, and a feeder that falls behind for a moment (its thread busy)
/// must not make the shards evict (each eviction being more stream).
static IN_TRANSIT: AtomicIsize = AtomicIsize::new(0);

/// The journal's queue grew (or shrank, negative) by `bytes`.
pub fn in_transit(bytes: isize) {
    IN_TRANSIT.fetch_add(bytes, Ordering::Relaxed);
}

/// Both parts: the replicas' share of the buffer and the stream in transit.
pub fn not_counted() -> u64 {
    NOT_COUNTED.load(Ordering::Relaxed) as u64 + IN_TRANSIT.load(Ordering::Relaxed).max(0) as u64
}

/// The used memory `maxmemory` is enforced against: [`used`] less [`not_counted`].
#[inline]
pub fn used_for_limit() -> u64 {
    used().saturating_sub(not_counted())
}

/// Is used memory over `maxmemory` (0: no limit)? The check a command that may grow memory
/// passes before it runs.
#[inline]
pub fn over_limit(maxmemory: u64) -> bool {
    maxmemory != 0 && used_for_limit() > maxmemory
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
