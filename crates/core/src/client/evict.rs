//! Client eviction (`maxmemory-clients`, Redis 7's `evictClients`): when all client
//! connections together hold more than the limit, the biggest evictable ones are disconnected
//! until the total is back under it. See docs/design/memory-limits.md ("Client eviction").
//!
//! Accounting: every connection adds what it holds (`ClientMem::tot`) to its thread's total
//! whenever its buffers change (after each read and each batch of commands); the totals are
//! atomics a thread only adds to for its own connections, so the check is a sum of a few
//! counters. Choosing the victims needs every thread's clients: one broadcast gathers them,
//! the biggest go first, and a second broadcast kills them. One eviction runs at a time;
//! a connection that finds the total over the limit while another is choosing waits for it and
//! checks again.
//!
//! A connection re-checks the limit *before* CLIENT LIST can show its grown buffers (the
//! session publishes its memory only after this check), so nobody observes a client over the
//! limit that the limit was about to remove, as in single-threaded Redis.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::client::{self, ClientHandle};
use crate::engine::Worker;

/// Per-thread client memory totals (threads beyond this share slots: the counters only ever
/// get deltas added, so sharing is still exact).
const SLOTS: usize = 64;

#[repr(align(64))]
struct Slot(AtomicUsize);

static THREAD_MEM: [Slot; SLOTS] = [const { Slot(AtomicUsize::new(0)) }; SLOTS];

/// An eviction round is choosing victims.
static EVICTING: AtomicBool = AtomicBool::new(false);

/// The total when the last round found only clients it may not evict (no-evict ones) over
/// the limit: rounds are skipped until the total grows past it (0: none).
static FUTILE_AT: AtomicUsize = AtomicUsize::new(0);

/// Clients disconnected by client eviction (INFO `evicted_clients`).
pub static EVICTED_CLIENTS: AtomicU64 = AtomicU64::new(0);

/// Records that connection `h` now holds `mem` bytes (0 once it is killed or closed): its
/// thread's total follows.
pub fn account(h: &ClientHandle, mem: usize) {
    let mem = if h.killed.get() { 0 } else { mem };
    let old = h.counted.replace(mem);
    let slot = &THREAD_MEM[h.tid % SLOTS].0;
    if mem > old {
        slot.fetch_add(mem - old, Ordering::Relaxed);
    } else if mem < old {
        slot.fetch_sub(old - mem, Ordering::Relaxed);
    }
}

/// Something changed that may make a round useful again although the clients did not grow
/// (CLIENT NO-EVICT off, a new limit).
pub fn reconsider() {
    FUTILE_AT.store(0, Ordering::Relaxed);
}

/// All connections' memory, as last accounted.
pub fn total() -> usize {
    THREAD_MEM.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
}

/// Is client eviction on and the total over its limit? Cheap: called after every read.
#[inline]
pub fn over(worker: &Worker) -> bool {
    let limit = worker.shared.config.client_eviction_limit();
    limit != 0 && total() as u64 > limit
}

/// Disconnects the biggest evictable clients (not CLIENT NO-EVICT) until all clients together
/// hold no more than the limit. Returns once the round that covers the caller's last
/// accounting is over (the caller may be among the victims: it then finds itself killed).
pub async fn evict(worker: &Rc<Worker>) {
    while over(worker) && total() > FUTILE_AT.load(Ordering::Relaxed) {
        if EVICTING.swap(true, Ordering::AcqRel) {
            // Another connection is choosing, maybe without our latest numbers: wait for it
            // and look again.
            while EVICTING.load(Ordering::Acquire) {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            continue;
        }
        struct Done;
        impl Drop for Done {
            fn drop(&mut self) {
                EVICTING.store(false, Ordering::Release);
            }
        }
        let _done = Done;
        let limit = worker.shared.config.client_eviction_limit() as usize;
        let clients: Vec<(u64, usize, bool)> = worker
            .broadcast(|_| {
                let mut v = Vec::new();
                client::for_each_local(|id, h| {
                    if !h.killed.get() {
                        v.push((id, h.counted.get(), h.no_evict.get()));
                    }
                });
                v
            })
            .await
            .into_iter()
            .flatten()
            .collect();
        let (victims, still_over) = choose(&clients, limit);
        if still_over {
            // Nothing more can go: don't look again until the clients grow past this.
            FUTILE_AT.store(total(), Ordering::Relaxed);
            if !victims.is_empty() {
                crate::log_warning!("Over client maxmemory after evicting all evictable clients");
            }
        } else {
            FUTILE_AT.store(0, Ordering::Relaxed);
        }
        if victims.is_empty() {
            return;
        }
        let victims = Arc::new(victims);
        worker
            .broadcast(move |_| {
                client::for_each_local(|id, h| {
                    if victims.contains(&id) && !h.killed.get() {
                        let line = h.info.borrow().line();
                        crate::log_notice!("Evicting client: {line}");
                        h.killed.set(true);
                        account(h, 0);
                        h.wake.notify_one();
                        EVICTED_CLIENTS.fetch_add(1, Ordering::Relaxed);
                    }
                });
            })
            .await;
        return;
    }
}

/// The clients to disconnect, biggest first, so that the rest total at most `limit`, and
/// whether the rest are still over it (only unevictable clients left).
fn choose(clients: &[(u64, usize, bool)], limit: usize) -> (Vec<u64>, bool) {
    let mut total: usize = clients.iter().map(|c| c.1).sum();
    let mut evictable: Vec<&(u64, usize, bool)> = clients.iter().filter(|c| !c.2).collect();
    evictable.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut victims = Vec::new();
    for (id, mem, _) in evictable {
        if total <= limit {
            break;
        }
        total -= mem;
        victims.push(*id);
    }
    (victims, total > limit)
}

#[cfg(test)]
mod tests {
    use super::choose;

    #[test]
    fn biggest_first_and_only_until_under_the_limit() {
        let clients = [
            (1, 100, false),
            (2, 300, false),
            (3, 200, false),
            (4, 50, true),
        ];
        // 650 in all: removing 300 leaves 350.
        assert_eq!(choose(&clients, 400), (vec![2], false));
        assert_eq!(choose(&clients, 350), (vec![2], false));
        assert_eq!(choose(&clients, 349), (vec![2, 3], false));
        assert_eq!(choose(&clients, 650), (vec![], false));
        // Only the no-evict client would be left and it is still over: all evictable go.
        assert_eq!(choose(&clients, 10), (vec![2, 3, 1], true));
        assert_eq!(choose(&[(4, 50, true)], 10), (vec![], true));
    }
}
