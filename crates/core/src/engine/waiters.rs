//! Infrastructure for blocking commands (the BLPOP/BZPOPMIN family arrives with the data types).
//!
//! A client that has to block registers a `Waiter` on the shard of every key it waits for, in the
//! same shard hop (or transaction) that found all its keys not ready — nothing can slip in
//! between the check and the registration. When a later command writes one of those keys, the
//! shard offers the key to its waiters in FIFO order right after that command and before anything
//! else runs there: a waiter's `Serve::take` performs the pop on the spot and encodes the reply, so
//! the client is served atomically with the write that woke it, as in Redis. A waiter registered
//! on several shards is served exactly once: whoever flips its `claimed` flag first (a shard
//! serving it, its timeout, CLIENT UNBLOCK) wins; the other registrations go stale and are dropped
//! when met or by the periodic sweep.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::db::Db;

/// What a blocked command does when one of its keys may be ready.
pub trait Serve: Send + Sync {
    /// Can the waiter be served from `key` now? Must not modify anything.
    fn ready(&self, db: &mut Db, key: &[u8], now: u64) -> bool;
    /// Serve it (e.g. pop) and return the encoded reply. Called right after `ready` said yes.
    fn take(&self, db: &mut Db, key: &[u8], now: u64) -> Vec<u8>;
    /// Whether readiness is the waiter's own (XREAD past its own ID) rather than the key's
    /// (a non-empty list): a waiter that is not ready then does not mean the ones behind it
    /// are not either.
    fn own_readiness(&self) -> bool {
        false
    }
}

pub struct Waiter {
    claimed: AtomicBool,
    /// Thread of the blocked connection, and its wait id there.
    pub origin: usize,
    pub id: u64,
    serve: Box<dyn Serve>,
}

impl Waiter {
    pub fn new(origin: usize, id: u64, serve: Box<dyn Serve>) -> Arc<Self> {
        Arc::new(Waiter {
            claimed: AtomicBool::new(false),
            origin,
            id,
            serve,
        })
    }

    /// True for exactly one caller over the waiter's life.
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }

    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }
}

/// Waiters of one db on one shard.
#[derive(Default)]
pub struct Blocking {
    waiters: HashMap<Box<[u8]>, VecDeque<Arc<Waiter>>>,
    /// Keys written since the last offer while somebody waited on them.
    ready: Vec<Box<[u8]>>,
}

impl Blocking {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    pub fn register(&mut self, key: &[u8], w: Arc<Waiter>) {
        self.waiters.entry(key.into()).or_default().push_back(w);
    }

    /// Write hook: remember `key` if somebody waits on it.
    #[inline]
    pub fn note_write(&mut self, key: &[u8]) {
        if self.waiters.contains_key(key) && !self.ready.iter().any(|k| &**k == key) {
            self.ready.push(key.into());
        }
    }

    /// Offers every key somebody waits on (SWAPDB brought in a whole new keyspace).
    pub fn mark_all_ready(&mut self) {
        for k in self.waiters.keys() {
            if !self.ready.iter().any(|r| r == k) {
                self.ready.push(k.clone());
            }
        }
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    pub fn waiting_on(&self, key: &[u8]) -> usize {
        self.waiters
            .get(key)
            .map_or(0, |q| q.iter().filter(|w| !w.is_claimed()).count())
    }

    /// Drops registrations of waiters already served, timed out or unblocked.
    pub fn sweep(&mut self) {
        self.waiters.retain(|_, q| {
            q.retain(|w| !w.is_claimed());
            !q.is_empty()
        });
    }

    /// Number of distinct keys with live waiters (INFO blocked_keys-like statistics).
    pub fn keys(&self) -> usize {
        self.waiters.len()
    }
}

/// A served waiter: send `reply` to wait `id` on thread `origin`.
pub struct Served {
    pub origin: usize,
    pub id: u64,
    pub reply: Vec<u8>,
}

/// Offers every ready key of `db` to its waiters in FIFO order, serving as many as the data
/// allows (an LPUSH of three elements can wake three clients).
///
/// Keys for which `locked` says yes (a transaction still holds them: an EXEC between two hops)
/// stay ready and are offered again when that transaction concludes, so a blocked client never
/// sees a transaction half-applied.
pub fn serve_ready(db: &mut Db, now: u64, locked: &dyn Fn(&[u8]) -> bool, out: &mut Vec<Served>) {
    // Keys are offered in the order they became ready (Redis serves an EXEC's LPUSH a / LPUSH b
    // in that order); serving may make more keys ready (BLMOVE pushes), appended at the end.
    let mut deferred: Vec<Box<[u8]>> = Vec::new();
    while !db.blocking.ready.is_empty() {
        let key = db.blocking.ready.remove(0);
        if locked(&key) {
            deferred.push(key);
            continue;
        }
        // A waiter that this key cannot serve (an XREAD waiting past the new entries) does
        // not hold up the ones behind it.
        let mut i = 0;
        loop {
            let Some(w) = db
                .blocking
                .waiters
                .get(&key)
                .and_then(|q| q.get(i).cloned())
            else {
                break;
            };
            if w.is_claimed() {
                remove_at(db, &key, i);
                continue;
            }
            if !w.serve.ready(db, &key, now) {
                if !w.serve.own_readiness() {
                    break;
                }
                i += 1;
                continue;
            }
            remove_at(db, &key, i);
            if w.claim() {
                let reply = w.serve.take(db, &key, now);
                out.push(Served {
                    origin: w.origin,
                    id: w.id,
                    reply,
                });
            }
        }
    }
    db.blocking.ready = deferred;
}

fn remove_at(db: &mut Db, key: &[u8], i: usize) {
    if let Some(q) = db.blocking.waiters.get_mut(key) {
        q.remove(i);
        if q.is_empty() {
            db.blocking.waiters.remove(key);
        }
    }
}
