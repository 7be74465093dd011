//! CLIENT PAUSE (Redis 7.0 `pauseClients`): until a deadline or CLIENT UNPAUSE, normal
//! clients' commands wait before they run, counted in `blocked_clients` — every command with
//! `ALL`, those that write or may replicate with `WRITE` (EXEC by what it queued, scripts by
//! their flags). The primary's link and replicas are never paused, and while any pause lasts
//! no key expires, actively or on access (an expired key reads as missing and stays), so a
//! replica promoted during a failover sees exactly the primary's data.
//!
//! FAILOVER holds writes the same way while it waits for its replica, and a shutdown while it
//! waits for lagging replicas (`shutdown-timeout`) (pauses of their own,
//! without deadline, that CLIENT UNPAUSE leaves alone).
//!
//! Process-wide state in atomics: set by CLIENT PAUSE on any thread, read on every command
//! (two relaxed loads when no pause is in effect).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Unix ms the pause ends at; 0: no pause.
static END_MS: AtomicU64 = AtomicU64::new(0);
/// The pause covers every command (`ALL`), not only writes.
static ALL: AtomicBool = AtomicBool::new(false);
/// Pauses of writes held apart from CLIENT PAUSE (CLIENT UNPAUSE does not lift them), one bit
/// per holder: FAILOVER's (Redis's `PAUSE_DURING_FAILOVER`) until the failover ends, a
/// shutdown's (`PAUSE_DURING_SHUTDOWN`) while it waits for lagging replicas.
static HELD: AtomicU8 = AtomicU8::new(0);
const HELD_BY_FAILOVER: u8 = 1;
const HELD_BY_SHUTDOWN: u8 = 2;

fn wake() -> &'static tokio::sync::Notify {
    static N: OnceLock<tokio::sync::Notify> = OnceLock::new();
    N.get_or_init(tokio::sync::Notify::new)
}

thread_local! {
    /// Clients of this thread waiting in a pause (INFO `blocked_clients`).
    static WAITING: Cell<usize> = const { Cell::new(0) };
}

/// CLIENT PAUSE timeout [WRITE|ALL]: a pause in effect keeps its later deadline and its
/// stricter kind (Redis never shortens or relaxes a pause this way).
pub fn pause(now_ms: u64, timeout_ms: u64, all: bool) {
    let (end, all) = merged(
        END_MS.load(Ordering::Acquire),
        ALL.load(Ordering::Acquire),
        now_ms,
        timeout_ms,
        all,
    );
    ALL.store(all, Ordering::Release);
    END_MS.store(end, Ordering::Release);
}

/// The pause after a CLIENT PAUSE at `now`, given the one in effect (`end` 0 or past: none).
fn merged(end: u64, all: bool, now: u64, timeout: u64, new_all: bool) -> (u64, bool) {
    let new_end = now.saturating_add(timeout).max(1);
    if end == 0 || end <= now {
        return (new_end, new_all);
    }
    (end.max(new_end), all || new_all)
}

/// CLIENT UNPAUSE: every waiting client goes on (unless a failover holds writes).
pub fn unpause() {
    END_MS.store(0, Ordering::Release);
    ALL.store(false, Ordering::Release);
    wake().notify_waiters();
}

/// FAILOVER pauses writes until it ends (`on` false: the waiting writers go on).
pub fn failover_pause(on: bool) {
    hold(HELD_BY_FAILOVER, on);
}

/// A shutdown waiting for its replicas (`shutdown-timeout`) pauses writes; `on` false when the
/// shutdown was aborted or failed.
pub fn shutdown_pause(on: bool) {
    hold(HELD_BY_SHUTDOWN, on);
}

fn hold(bit: u8, on: bool) {
    if on {
        HELD.fetch_or(bit, Ordering::AcqRel);
    } else {
        HELD.fetch_and(!bit, Ordering::AcqRel);
        wake().notify_waiters();
    }
}

/// The pause in effect at `now_ms`: Some(true) for ALL, Some(false) for WRITE.
#[inline]
pub fn state(now_ms: u64) -> Option<bool> {
    let end = END_MS.load(Ordering::Acquire);
    if end == 0 || end <= now_ms {
        return (HELD.load(Ordering::Acquire) != 0).then_some(false);
    }
    Some(ALL.load(Ordering::Acquire))
}

/// Might a pause be in effect? Relaxed loads, no clock read: the per-command check.
#[inline]
pub fn maybe_paused() -> bool {
    END_MS.load(Ordering::Relaxed) != 0 || HELD.load(Ordering::Relaxed) != 0
}

/// Is a pause in effect (no key may expire)?
#[inline]
pub fn expiry_paused() -> bool {
    let end = END_MS.load(Ordering::Relaxed);
    (end != 0 && end > crate::clock::unix_ms()) || HELD.load(Ordering::Relaxed) != 0
}

/// Are writes held now (the stream must not grow: no PING, no GETACK to replicas)?
#[inline]
pub fn writes_paused() -> bool {
    maybe_paused() && state(crate::clock::unix_ms()).is_some()
}

/// Must a command that writes (`writes`) wait now?
#[inline]
pub fn blocks(writes: bool) -> bool {
    match state(crate::clock::unix_ms()) {
        None => false,
        Some(all) => all || writes,
    }
}

/// Clients of this thread waiting in a pause.
pub fn waiting_here() -> usize {
    WAITING.with(|w| w.get())
}

/// Waits until a command that writes (`writes`) may run: the pause ended, was lifted or
/// relaxed. Counted as a blocked client meanwhile.
pub async fn wait(writes: bool) {
    WAITING.with(|w| w.set(w.get() + 1));
    while blocks(writes) {
        let end = END_MS.load(Ordering::Acquire);
        let now = crate::clock::unix_ms();
        // A failover's pause has no deadline: it ends with a wake-up.
        let left = if end > now { end - now } else { 100 };
        let notified = wake().notified();
        // The deadline passing wakes nobody: sleep until it (or an UNPAUSE) at most.
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(Duration::from_millis(left.min(100))) => {}
        }
    }
    WAITING.with(|w| w.set(w.get() - 1));
}

#[cfg(test)]
mod tests {
    use super::merged;

    // (The process-wide state is exercised end to end by tests/pause.rs: a unit test here
    // would pause expiry for every other test of the library running beside it.)
    #[test]
    fn pauses_extend_and_tighten_never_shorten() {
        // No pause, or an expired one: the new one as asked.
        assert_eq!(merged(0, true, 100, 50, false), (150, false));
        assert_eq!(merged(90, true, 100, 50, false), (150, false));
        // In effect: the later end, the stricter kind.
        assert_eq!(merged(1000, false, 100, 50, true), (1000, true));
        assert_eq!(merged(1000, true, 100, 5000, false), (5100, true));
    }
}
