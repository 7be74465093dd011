//! Client-side caching, the connection side: delivering invalidations (the sink of
//! `engine::tracking`) to a tracking connection or its redirection, remembering the keys a
//! tracking connection reads, and FLUSHALL/FLUSHDB's null invalidation. Design:
//! docs/design/pubsub.md ("Client-side caching").

use std::rc::Rc;
use std::sync::Arc;

use super::Delivery;
use crate::client::{self, ClientHandle};
use crate::engine::tracking::{self, Target};
use crate::engine::{shard_of, Worker};

/// Invalidated keys (None: everything) as one message.
pub use crate::client::push::Keys;

/// `engine::tracking`'s sink, on the shard's thread: hands the invalidation to the tracking
/// connection's thread.
pub fn sink(target: Target, keys: Option<Vec<Box<[u8]>>>, writers: Vec<u64>, bcast: bool) {
    let Some(w) = Worker::current() else {
        return;
    };
    w.post(target.thread, move |w| {
        deliver(w, target.conn, keys, &writers, bcast);
    });
}

/// A finished command's BCAST batches (`engine::tracking::take_bcast` on every shard), queued on
/// their connections before this returns: the writer's reply goes out after the invalidation
/// reached the tracking connection, as Redis sends BCAST batches before the replies of the event
/// loop iteration, so a client that saw the write acknowledged then asks the tracking
/// connection anything gets the invalidation first.
pub async fn deliver_batches(w: &Rc<Worker>, batches: Vec<tracking::Batch>) {
    for (target, keys, writers) in batches {
        w.call(target.thread, move |w| {
            deliver(w, target.conn, Some(keys), &writers, true);
        })
        .await;
    }
}

/// On the tracking connection's thread: applies its settings (BCAST, NOLOOP, redirection) and
/// queues the message where it goes.
fn deliver(w: &Rc<Worker>, conn: u64, keys: Option<Vec<Box<[u8]>>>, writers: &[u64], bcast: bool) {
    let mut forward: Option<(u64, usize, Keys, bool)> = None;
    client::with_local(conn, |h| {
        let t = h.tracking.borrow();
        // A batch for the other mode is stale: a table entry from before BCAST, or a prefix
        // whose removal had not reached the shard yet.
        if !t.on || (keys.is_some() && bcast != t.bcast) {
            return;
        }
        let keys: Keys = match keys {
            None => None,
            Some(ks) => {
                let ks: Vec<Box<[u8]>> = if t.noloop {
                    ks.into_iter()
                        .zip(writers.iter())
                        .filter(|(_, &w)| w != conn)
                        .map(|(k, _)| k)
                        .collect()
                } else {
                    ks
                };
                if ks.is_empty() {
                    return;
                }
                Some(Arc::new(ks))
            }
        };
        let resp3 = h.info.borrow().resp == 3;
        match t.redirect {
            None => {
                // RESP2 without a redirection has nowhere to receive them.
                if resp3 {
                    h.push(Delivery::Invalidate(keys, false, true));
                }
            }
            Some((rid, rthread)) => forward = Some((rid, rthread, keys, resp3)),
        }
    });
    if let Some((rid, rthread, keys, null3)) = forward {
        if rthread == w.id {
            if !to_redirect(rid, keys, null3) {
                broken(conn, rid);
            }
        } else {
            let origin = w.id;
            w.post(rthread, move |w| {
                if !to_redirect(rid, keys, null3) {
                    w.post(origin, move |_| broken(conn, rid));
                }
            });
        }
    }
}

/// Queues the invalidation on the redirection's connection `rid` (this thread): a push in
/// RESP3, a `__redis__:invalidate` message in RESP2 when it is subscribed. False: gone.
fn to_redirect(rid: u64, keys: Keys, null3: bool) -> bool {
    let mut found = false;
    client::with_local(rid, |r| {
        if r.killed.get() || r.closing.get() {
            return;
        }
        found = true;
        if r.info.borrow().resp == 3 {
            r.push(Delivery::Invalidate(keys, false, null3));
        } else if r.subs.borrow().active() {
            r.push(Delivery::Invalidate(keys, true, null3));
        }
    });
    found
}

/// The redirection is gone: the tracking connection is told once (RESP3) and flagged.
fn broken(conn: u64, rid: u64) {
    client::with_local(conn, |h| {
        let resp3 = h.info.borrow().resp == 3;
        let mut t = h.tracking.borrow_mut();
        if !t.on {
            return;
        }
        t.broken = true;
        drop(t);
        h.info.borrow_mut().set_flag('R', true);
        if resp3 {
            h.push(Delivery::RedirBroken(rid));
        }
    });
}

/// Before a read command of tracking connection `conn` runs: its keys are registered on their
/// shards. Sent ahead of the command's own messages to those shards (queues between threads are
/// FIFO), so no write can slip between the read and the registration.
pub fn remember(w: &Rc<Worker>, conn: u64, keys: impl Iterator<Item = Vec<u8>>) {
    let target = Target { thread: w.id, conn };
    for key in keys {
        let shard = shard_of(&key, w.threads());
        w.post(shard, move |_| tracking::remember(target, &key));
    }
}

/// CLIENT TRACKING off, RESET, disconnect: connection `h` (on this thread) stops tracking and
/// leaves its BCAST prefixes on every thread.
pub fn disable(w: &Rc<Worker>, h: &ClientHandle) {
    let t = std::mem::take(&mut *h.tracking.borrow_mut());
    if !t.on {
        return;
    }
    tracking::client_disabled();
    if t.bcast {
        let target = Target {
            thread: w.id,
            conn: h.id,
        };
        for th in 0..w.threads() {
            w.post(th, move |w| tracking::remove_prefixes(target, w.id == 0));
        }
    }
    if let Ok(mut info) = h.info.try_borrow_mut() {
        info.set_flag('t', false);
        info.set_flag('R', false);
        info.redir = -1;
    }
}

/// FLUSHALL / FLUSHDB: every tracking connection gets the null invalidation, on every thread.
pub async fn flushed(w: &Rc<Worker>) {
    if !tracking::active() {
        return;
    }
    w.broadcast(|w| {
        let mut conns = Vec::new();
        client::for_each_local(|id, h| {
            if h.tracking.borrow().on {
                conns.push(id);
            }
        });
        for c in conns {
            deliver(w, c, None, &[], false);
        }
    })
    .await;
}
