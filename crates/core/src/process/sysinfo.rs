//! Process and system probes behind INFO, DEBUG/MEMORY and the HTTP pages: jemalloc memory
//! statistics with the process RSS and peak, system memory, CPU times, `uname`.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default, Clone, Copy)]
pub struct MemStats {
    /// used_memory: the counting allocator's figure (engine/memory.rs).
    pub allocated: u64,
    /// jemalloc's own `stats.allocated` (thread caches included).
    pub allocator: u64,
    pub active: u64,
    pub resident: u64,
    pub rss: u64,
    pub peak: u64,
}

static PEAK: AtomicU64 = AtomicU64::new(0);

pub fn reset_peak() {
    PEAK.store(0, Ordering::Relaxed);
}

/// jemalloc's view (after advancing its stats epoch) plus the process RSS.
pub fn mem_stats() -> MemStats {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let allocated = tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64;
    let allocator = allocated;
    let active = tikv_jemalloc_ctl::stats::active::read().unwrap_or(0) as u64;
    let resident = tikv_jemalloc_ctl::stats::resident::read().unwrap_or(0) as u64;
    let rss = process_rss();
    // used_memory is the counting allocator's exact figure (what maxmemory is enforced against);
    // outside the server binary (unit tests) nothing counts: fall back to jemalloc, then RSS.
    // The exact count while maxmemory is set, else jemalloc's figure less its thread caches.
    let counted = crate::engine::memory::used();
    let allocated = if counted != 0 {
        counted
    } else if allocated != 0 {
        allocated
    } else {
        rss
    };
    let peak = PEAK.fetch_max(allocated, Ordering::Relaxed).max(allocated);
    MemStats {
        allocated,
        allocator,
        active,
        resident,
        rss,
        peak,
    }
}

/// Current used bytes (jemalloc allocated).
pub fn used_memory() -> u64 {
    mem_stats().allocated
}

pub fn process_rss() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

pub fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64) * (page.max(0) as u64)
}

/// Redis `bytesToHuman`.
pub fn human_bytes(n: u64) -> String {
    let d = n as f64;
    const K: f64 = 1024.0;
    if n < 1024 {
        format!("{n}B")
    } else if d < K * K {
        format!("{:.2}K", d / K)
    } else if d < K * K * K {
        format!("{:.2}M", d / (K * K))
    } else if d < K * K * K * K {
        format!("{:.2}G", d / (K * K * K))
    } else if d < K * K * K * K * K {
        format!("{:.2}T", d / (K * K * K * K))
    } else {
        format!("{:.2}P", d / (K * K * K * K * K))
    }
}

/// (system, user) CPU seconds of the process.
pub fn cpu_times() -> (String, String) {
    let (sys, user) = cpu_usec(libc::RUSAGE_SELF);
    (
        format!("{}.{:06}", sys / 1_000_000, sys % 1_000_000),
        format!("{}.{:06}", user / 1_000_000, user % 1_000_000),
    )
}

/// (system, user) CPU microseconds of the process (`RUSAGE_SELF`) or of the calling thread
/// (`RUSAGE_THREAD`).
pub fn cpu_usec(who: libc::c_int) -> (u64, u64) {
    // SAFETY: getrusage fills the zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_stime), us(ru.ru_utime))
}

/// "sysname release machine", as `uname -srm`.
pub fn uname() -> String {
    // SAFETY: uname fills the zeroed struct we own; fields are NUL-terminated C strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".into();
        }
        let f = |s: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(s.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(941056), "919.00K");
        assert_eq!(human_bytes(7151616), "6.82M");
    }
}
