//! Connection side of blocking commands (shard side and the protocol: `engine::waiters`).
//!
//! `serve_or_block` first visits every shard of the command's keys; each shard, in one step,
//! either serves the client from the first ready key (claiming the waiter) or registers the
//! waiter on its keys. If nobody could serve, the connection waits for a shard's wake-up, the
//! timeout, or CLIENT UNBLOCK — whichever claims the waiter first.

use std::sync::Arc;
use std::time::Duration;

use crate::commands::ConnCtx;
use crate::engine::waiters::{Serve, Waiter};

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
    // The client id doubles as the wait id (a client blocks once at a time; ids are unique
    // server-wide), so CLIENT UNBLOCK can find the waiter from the id it is given.
    let id = cx.client.id;
    let (tx, mut rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
    let waiter = Waiter::new(worker.id, id, Box::new(Shared(serve.clone())));
    worker.park(id, tx, waiter.clone());

    // The command's earlier hops (a non-blocking attempt) are over: this is a new round.
    cx.coord.new_round(&worker);
    // Each shard, in one step: serve from its first ready key (argument order) or register.
    let w = waiter.clone();
    let sv = serve.clone();
    let parts = cx
        .hops()
        .per_shard_of(keys, 1, move |c, ks, ()| {
            let now = c.now;
            let db = c.db();
            for k in ks {
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
            for k in ks {
                db.blocking.register(k, w.clone());
            }
            c.shard.block_waiters += 1;
            None
        })
        .run()
        .await;
    let immediate = parts.into_iter().rev().find_map(|p| p.result);
    // Whatever the command does after being served (BLMOVE's push) is a new round of hops.
    cx.coord.new_round(&worker);
    if immediate.is_some() {
        worker.unpark(id);
        return immediate;
    }
    // Wait for the reply, the timeout, or the client going away (peer closed / CLIENT KILL,
    // checked every 100 ms: Redis unblocks a client when it disconnects, so a closed client
    // must not stay registered and consume the next element pushed).
    cx.flush_before_block();
    let fd = {
        let mut info = cx.client.info.borrow_mut();
        // CLIENT LIST flag 'b': blocked in a blocking command.
        info.flags.push('b');
        info.fd
    };
    let deadline = timeout.and_then(|d| tokio::time::Instant::now().checked_add(d));
    let got = loop {
        let tick = tokio::time::sleep(Duration::from_millis(100));
        tokio::select! {
            r = &mut rx => break r.ok(),
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => break None,
            _ = tick => {
                if cx.client.killed.get() || peer_closed(fd) {
                    break None;
                }
            }
        }
    };
    {
        let mut info = cx.client.info.borrow_mut();
        if let Some(i) = info.flags.find('b') {
            info.flags.remove(i);
        }
    }
    if got.is_some() {
        worker.unpark(id);
        // CLIENT UNBLOCK ... TIMEOUT delivers an empty reply: answer as on timeout.
        return got.filter(|r| !r.is_empty());
    }
    // Timed out (or unblocked): claim so no shard serves us later; if a shard already claimed,
    // its reply is on the way — take it.
    if waiter.claim() {
        worker.unpark(id);
        return None;
    }
    let r = rx.await.ok();
    worker.unpark(id);
    r.filter(|r| !r.is_empty())
}

/// Has the peer of socket `fd` closed its side (a 1-byte MSG_PEEK reads EOF or fails)?
fn peer_closed(fd: i32) -> bool {
    if fd < 0 {
        return false;
    }
    let mut b = [0u8; 1];
    // SAFETY: `fd` is the connection's socket, open for as long as its command runs; a
    // non-blocking peek reads nothing out of it.
    let n = unsafe {
        libc::recv(
            fd,
            b.as_mut_ptr() as *mut libc::c_void,
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n == 0 {
        return true;
    }
    if n < 0 {
        let e = std::io::Error::last_os_error().raw_os_error();
        return !matches!(e, Some(libc::EAGAIN) | Some(libc::EINTR));
    }
    false
}
