//! Pub/Sub: who is subscribed to what, and how a published message reaches subscribers on any
//! thread. Design: docs/design/pubsub.md.
//!
//! Every thread keeps its own replica of the whole subscription table (channels, patterns,
//! shard channels → subscribers). A (un)subscription is applied to every replica by a
//! broadcast that completes before the command answers, so a PUBLISH that starts after a
//! SUBSCRIBE's reply sees the subscriber, whichever thread either runs on. PUBLISH reads its
//! own thread's replica only: no lock, no atomic, no message to anyone but the threads that
//! hold subscribers. The message is built once (`Arc<Message>`) and the same allocation is
//! handed to every subscriber; each thread gets one message carrying all its deliveries, which
//! it puts in the subscribers' queues (`ClientHandle::pushes`) and wakes their connections.
//! Messages from one publisher to one subscriber keep their order: thread-to-thread queues are
//! FIFO and a publisher's thread sends them in publish order.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::engine::Worker;

pub mod monitor;
pub mod tracking;

pub use crate::client::push::{Delivery, Kind, Message, PatternMessage};

/// A subscriber: connection `conn` on thread `thread`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sub {
    pub thread: usize,
    pub conn: u64,
}

/// A replica's subscriber: where it is, and, on the subscriber's own thread, its connection
/// (so that a PUBLISH there reaches it without looking it up).
struct Entry {
    sub: Sub,
    handle: Option<Rc<crate::client::ClientHandle>>,
}

type Subscribers = HashMap<Box<[u8]>, Vec<Entry>, xxhash_rust::xxh3::Xxh3Builder>;

/// This thread's replica of every subscription of the server.
#[derive(Default)]
struct Table {
    channels: Subscribers,
    patterns: Subscribers,
    shard: Subscribers,
}

impl Table {
    fn of(&mut self, kind: Kind) -> &mut Subscribers {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn add(
        &mut self,
        kind: Kind,
        name: &[u8],
        sub: Sub,
        handle: Option<Rc<crate::client::ClientHandle>>,
    ) {
        let subs = self.of(kind).entry(name.into()).or_default();
        if !subs.iter().any(|e| e.sub == sub) {
            subs.push(Entry { sub, handle });
        }
    }

    fn remove(&mut self, kind: Kind, name: &[u8], sub: Sub) {
        let map = self.of(kind);
        if let Some(subs) = map.get_mut(name) {
            subs.retain(|e| e.sub != sub);
            if subs.is_empty() {
                map.remove(name);
            }
        }
    }
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table::default());
}

/// Adds (or removes) connection `conn`'s (on this thread) subscriptions to `names` in every
/// thread's replica; returns once all have it.
pub async fn update(worker: &Rc<Worker>, conn: u64, kind: Kind, names: Vec<Box<[u8]>>, add: bool) {
    let sub = Sub {
        thread: worker.id,
        conn,
    };
    let names = Arc::new(names);
    worker
        .broadcast(move |w| {
            let handle = if add && w.id == sub.thread {
                crate::client::with_lookup(|get| get(conn))
            } else {
                None
            };
            TABLE.with(|t| {
                let mut t = t.borrow_mut();
                for n in names.iter() {
                    if add {
                        t.add(kind, n, sub, handle.clone());
                    } else {
                        t.remove(kind, n, sub);
                    }
                }
            })
        })
        .await;
}

/// A closed connection's subscriptions leave every replica (fire and forget: nothing waits
/// on a connection that is gone; deliveries already under way find no one and are dropped).
pub fn forget(worker: &Rc<Worker>, conn: u64, subs: Vec<(Kind, Box<[u8]>)>) {
    if subs.is_empty() {
        return;
    }
    let sub = Sub {
        thread: worker.id,
        conn,
    };
    let subs = Arc::new(subs);
    let drop_from_replica = move |subs: &[(Kind, Box<[u8]>)]| {
        TABLE.with(|tab| {
            let mut tab = tab.borrow_mut();
            for (k, n) in subs {
                tab.remove(*k, n, sub);
            }
        })
    };
    // This thread's replica at once: it holds the connection itself, which must not be
    // delivered to (or counted) after it closed.
    drop_from_replica(&subs);
    for t in (0..worker.threads()).filter(|&t| t != worker.id) {
        let subs = subs.clone();
        worker.post(t, move |_| drop_from_replica(&subs));
    }
}

/// PUBLISH / SPUBLISH: hands the message to every subscriber of `channel` (and, for ordinary
/// channels, of every matching pattern), on whatever thread; returns how many received it.
///
/// The count comes from the subscribers' threads, not from the replica: each connection's own
/// subscription set decides at delivery (a connection that has just unsubscribed, or closed,
/// while the replicas were being told is neither sent the message nor counted), so PUBLISH
/// waits for the threads that hold subscribers. Its own thread's are served inline.
pub async fn publish(worker: &Rc<Worker>, shard: bool, channel: &[u8], payload: &[u8]) -> usize {
    let mut receivers = 0;
    // This thread's subscribers are served while routing, straight from the replica.
    let per_thread = route(shard, channel, payload, worker.id, |h, d| {
        receivers += deliver_to(h, d) as usize;
    });
    let mut calls = Vec::new();
    for (thread, deliveries) in per_thread.into_iter().enumerate() {
        if deliveries.is_empty() {
            continue;
        }
        if thread == worker.id {
            receivers += deliver_local(deliveries);
        } else {
            calls.push(worker.call(thread, move |_| deliver_local(deliveries)));
        }
    }
    for c in calls {
        receivers += c.await;
    }
    receivers
}

/// A keyspace notification (`engine::notify`'s sink): published from whatever thread the
/// event happened on, without waiting for anyone (nobody needs the count).
pub fn publish_event(channel: &[u8], payload: &[u8]) {
    let Some(worker) = Worker::current() else {
        return;
    };
    // Posted even to this thread: the event comes from inside a command's shard work.
    let nobody_inline = usize::MAX;
    let routed = route(false, channel, payload, nobody_inline, |_, _| {});
    for (thread, deliveries) in routed.into_iter().enumerate() {
        if !deliveries.is_empty() {
            worker.post(thread, move |_| {
                deliver_local(deliveries);
            });
        }
    }
}

/// The deliveries of one message, by subscriber thread (this thread's replica decides who).
/// Subscribers on thread `me` are handed to `local` instead, with their connection.
fn route(
    shard: bool,
    channel: &[u8],
    payload: &[u8],
    me: usize,
    mut local: impl FnMut(&crate::client::ClientHandle, Delivery),
) -> Vec<Vec<(u64, Delivery)>> {
    let mut per_thread: Vec<Vec<(u64, Delivery)>> = Vec::new();
    TABLE.with(|t| {
        let t = t.borrow();
        let direct = if shard { &t.shard } else { &t.channels };
        let subs = direct.get(channel);
        let mut msg: Option<Arc<Message>> = None;
        let mut message = || {
            msg.get_or_insert_with(|| {
                Arc::new(Message::new(
                    if shard { b"smessage" } else { b"message" },
                    channel,
                    payload,
                ))
            })
            .clone()
        };
        let mut deliver = |e: &Entry, d: Delivery| {
            let s = &e.sub;
            if s.thread == me {
                if let Some(h) = &e.handle {
                    local(h, d);
                    return;
                }
            }
            if per_thread.len() <= s.thread {
                per_thread.resize_with(s.thread + 1, Vec::new);
            }
            per_thread[s.thread].push((s.conn, d));
        };
        if let Some(subs) = subs {
            for s in subs {
                let m = message();
                deliver(
                    s,
                    if shard {
                        Delivery::Shard(m)
                    } else {
                        Delivery::Message(m)
                    },
                );
            }
        }
        if !shard {
            for (pattern, subs) in &t.patterns {
                if !crate::config::glob::matches(pattern, channel, false) {
                    continue;
                }
                let parts: [&[u8]; 4] = [b"pmessage", pattern, channel, payload];
                let p = Arc::new(PatternMessage::new(pattern.clone(), &parts));
                for s in subs {
                    deliver(s, Delivery::Pattern(p.clone()));
                }
            }
        }
    });
    per_thread
}

/// On the subscribers' thread: queues each delivery on its connection, if the connection is
/// still subscribed, and wakes it; returns how many were queued.
fn deliver_local(deliveries: Vec<(u64, Delivery)>) -> usize {
    let mut n = 0;
    let handles: Vec<Option<Rc<crate::client::ClientHandle>>> =
        crate::client::with_lookup(|get| deliveries.iter().map(|(c, _)| get(*c)).collect());
    for ((_, d), h) in deliveries.into_iter().zip(handles) {
        if let Some(h) = h {
            n += deliver_to(&h, d) as usize;
        }
    }
    n
}

/// Queues `d` on connection `h` (on this thread) if it is still subscribed, and wakes it.
#[inline]
fn deliver_to(h: &crate::client::ClientHandle, d: Delivery) -> bool {
    let wanted = {
        let subs = h.subs.borrow();
        // Outside an unsubscription the replica that routed this is exact.
        subs.leaving == 0
            || match &d {
                Delivery::Message(m) => subs.channels.contains(&m.channel),
                Delivery::Shard(m) => subs.shard.contains(&m.channel),
                Delivery::Pattern(p) => subs.patterns.iter().any(|q| *q == p.pattern),
                Delivery::Monitor(_)
                | Delivery::Invalidate(..)
                | Delivery::RedirBroken(_)
                | Delivery::Repl(_) => false,
            }
    };
    if wanted && !h.killed.get() {
        h.push(d);
        return true;
    }
    false
}

/// PUBSUB CHANNELS / SHARDCHANNELS: the channels with subscribers matching `pattern`.
pub fn channels(shard: bool, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
    TABLE.with(|t| {
        let t = t.borrow();
        let map = if shard { &t.shard } else { &t.channels };
        map.keys()
            .filter(|c| pattern.is_none_or(|p| crate::config::glob::matches(p, c, false)))
            .cloned()
            .collect()
    })
}

/// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of `channel`.
pub fn numsub(shard: bool, channel: &[u8]) -> usize {
    TABLE.with(|t| {
        let t = t.borrow();
        let map = if shard { &t.shard } else { &t.channels };
        map.get(channel).map_or(0, Vec::len)
    })
}

/// PUBSUB NUMPAT: distinct patterns with subscribers.
pub fn numpat() -> usize {
    TABLE.with(|t| t.borrow().patterns.len())
}

/// INFO `pubsub_channels` / `pubsub_patterns` / `pubsubshard_channels`.
pub fn counts() -> (usize, usize, usize) {
    TABLE.with(|t| {
        let t = t.borrow();
        (t.channels.len(), t.patterns.len(), t.shard.len())
    })
}

/// A connection went (net::session's disconnect hook): its subscriptions, MONITOR and
/// client-side caching go with it.
pub fn on_disconnect(w: &Rc<Worker>, conn: u64, h: &crate::client::ClientHandle) {
    let subs = h.subs.borrow_mut().take_all();
    forget(w, conn, subs);
    if h.monitor.replace(false) {
        monitor::remove(w, conn);
    }
    tracking::disable(w, h);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_keeps_one_entry_per_subscriber_and_drops_empty_names() {
        let mut t = Table::default();
        let a = Sub { thread: 0, conn: 1 };
        let b = Sub { thread: 1, conn: 2 };
        t.add(Kind::Channel, b"ch", a, None);
        t.add(Kind::Channel, b"ch", a, None);
        t.add(Kind::Channel, b"ch", b, None);
        let subs = |t: &Table| {
            t.channels[&b"ch"[..]]
                .iter()
                .map(|e| e.sub)
                .collect::<Vec<_>>()
        };
        assert_eq!(subs(&t), vec![a, b]);
        t.remove(Kind::Channel, b"ch", a);
        assert_eq!(subs(&t), vec![b]);
        t.remove(Kind::Channel, b"ch", b);
        assert!(t.channels.is_empty());
        t.remove(Kind::Pattern, b"none", b);
        assert!(t.patterns.is_empty());
    }
}
