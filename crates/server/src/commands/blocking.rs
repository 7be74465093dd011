//! Connection side of blocking commands (shard side and the protocol: `engine::blocking`).
//!
//! `serve_or_block` first visits every shard of the command's keys; each shard, in one step,
//! either serves the client from the first ready key (claiming the waiter) or registers the
//! waiter on its keys. If nobody could serve, the connection waits for a shard's wake-up, the
//! timeout, or CLIENT UNBLOCK — whichever claims the waiter first.

use std::sync::Arc;
use std::time::Duration;

use super::util::on_shard;
use super::ConnCtx;
use crate::engine::blocking::{Serve, Waiter};
use crate::engine::shard_of;

/// Lets one `Serve` implementation be shared by the registrations on several shards.
struct Shared(Arc<dyn Serve>);

impl Serve for Shared {
    fn ready(&self, db: &mut crate::engine::db::Db, key: &[u8], now: u64) -> bool {
        self.0.ready(db, key, now)
    }
    fn take(&self, db: &mut crate::engine::db::Db, key: &[u8], now: u64) -> Vec<u8> {
        self.0.take(db, key, now)
    }
}

/// Serves the client from the first ready key, or blocks until a write makes one ready.
/// Returns the reply bytes, or None on timeout / CLIENT UNBLOCK. `timeout` None = forever.
pub async fn serve_or_block(
    cx: &mut ConnCtx,
    keys: &[&[u8]],
    serve: Arc<dyn Serve>,
    timeout: Option<Duration>,
) -> Option<Vec<u8>> {
    let worker = cx.worker.clone();
    let id = worker.next_wait_id();
    let (tx, mut rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
    let waiter = Waiter::new(worker.id, id, Box::new(Shared(serve.clone())));
    worker
        .blocked
        .borrow_mut()
        .insert(id, (tx, Some(waiter.clone())));

    // Keys grouped by shard, each group in argument order.
    let threads = cx.threads();
    let mut groups: Vec<Vec<Vec<u8>>> = vec![Vec::new(); threads];
    for k in keys {
        groups[shard_of(k, threads)].push(k.to_vec());
    }
    let mut calls = Vec::new();
    for (s, ks) in groups.into_iter().enumerate() {
        if ks.is_empty() {
            continue;
        }
        let (w, sv) = (waiter.clone(), serve.clone());
        calls.push(on_shard(cx, s, move |c| {
            let now = c.now;
            let db = c.db();
            for k in &ks {
                if w.is_claimed() {
                    return None;
                }
                if sv.ready(db, k, now) {
                    return if w.claim() {
                        Some(sv.take(db, k, now))
                    } else {
                        None
                    };
                }
            }
            for k in &ks {
                db.blocking.register(k, w.clone());
            }
            c.shard.block_waiters += 1;
            None
        }));
    }
    let mut immediate = None;
    for c in calls {
        if let Some(r) = c.await {
            immediate = Some(r);
        }
    }
    if immediate.is_some() {
        worker.blocked.borrow_mut().remove(&id);
        return immediate;
    }
    let got = match timeout {
        Some(d) => tokio::time::timeout(d, &mut rx)
            .await
            .ok()
            .and_then(|r| r.ok()),
        None => (&mut rx).await.ok(),
    };
    if got.is_some() {
        worker.blocked.borrow_mut().remove(&id);
        return got;
    }
    // Timed out (or unblocked): claim so no shard serves us later; if a shard already claimed,
    // its reply is on the way — take it.
    if waiter.claim() {
        worker.blocked.borrow_mut().remove(&id);
        return None;
    }
    let r = rx.await.ok();
    worker.blocked.borrow_mut().remove(&id);
    r
}
