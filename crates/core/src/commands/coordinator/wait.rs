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
    fn own_readiness(&self) -> bool {
        self.0.own_readiness()
    }
}

/// A client about to block: its waiter is parked on its thread (wake-ups, CLIENT UNBLOCK can
/// find it) and can be registered on shards; [`wait`] then waits for it, or [`cancel`] drops it
/// when the command was served after all.
pub struct Parked {
    pub waiter: Arc<Waiter>,
    rx: tokio::sync::oneshot::Receiver<Vec<u8>>,
    fd: i32,
}

/// Parks the client's waiter; None when the client already closed (it never blocks: its
/// pipelined commands still run after the peer is gone, as Redis frees a closed client with
/// its unread commands, and a parked one would count in `blocked_clients` until its close is
/// noticed).
pub fn park(cx: &mut ConnCtx, serve: Arc<dyn Serve>) -> Option<Parked> {
    let fd = cx.client.info.borrow().fd;
    if peer_closed(fd) {
        return None;
    }
    let worker = cx.worker.clone();
    // The client id doubles as the wait id (a client blocks once at a time; ids are unique
    // server-wide), so CLIENT UNBLOCK can find the waiter from the id it is given.
    let id = cx.client.id;
    let (tx, rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
    let waiter = Waiter::new(worker.id, id, Box::new(Shared(serve)));
    worker.park(id, tx, waiter.clone());
    Some(Parked { waiter, rx, fd })
}

/// Registers a parked waiter on `keys` of the shard running this hop (the hop that found
/// them not ready: nothing can slip in between).
pub fn register(c: &mut crate::commands::CmdCtx<'_>, keys: &[&[u8]], w: &Arc<Waiter>) {
    if w.is_claimed() {
        return;
    }
    let db = c.db();
    for k in keys {
        db.blocking.register(k, w.clone());
    }
    c.shard.block_waiters += 1;
}

/// The command was served without blocking: the waiter's registrations go stale.
pub fn cancel(cx: &mut ConnCtx, p: Parked) {
    p.waiter.claim();
    cx.worker.unpark(cx.client.id);
}

/// Serves the client from the first ready key, or blocks until a write makes one ready.
/// Returns the reply bytes, or None on timeout / CLIENT UNBLOCK. `timeout` None = forever.
pub async fn serve_or_block(
    cx: &mut ConnCtx,
    keys: &[&[u8]],
    serve: Arc<dyn Serve>,
    timeout: Option<Duration>,
) -> Option<Vec<u8>> {
    let parked = park(cx, serve.clone())?;
    let worker = cx.worker.clone();
    // The command's earlier hops (a non-blocking attempt) are over: this is a new round.
    cx.coord.new_round(&worker);
    // Each shard, in one step: serve from its first ready key (argument order) or register.
    let w = parked.waiter.clone();
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
            register(c, ks, &w);
            None
        })
        .run()
        .await;
    let immediate = parts.into_iter().rev().find_map(|p| p.result);
    // Whatever the command does after being served (BLMOVE's push) is a new round of hops.
    cx.coord.new_round(&worker);
    if immediate.is_some() {
        worker.unpark(cx.client.id);
        return immediate;
    }
    wait(cx, parked, timeout).await
}

/// Waits for a parked, registered client to be served: Some(reply), or None on timeout,
/// CLIENT UNBLOCK or the client going away.
pub async fn wait(cx: &mut ConnCtx, parked: Parked, timeout: Option<Duration>) -> Option<Vec<u8>> {
    let Parked { waiter, mut rx, fd } = parked;
    let worker = cx.worker.clone();
    let id = cx.client.id;
    // Wait for the reply, the timeout, or the client going away: Redis unblocks a client when it
    // disconnects, so a closed client must not stay registered (and counted in
    // `blocked_clients`) or consume the next element pushed. The peer's close is an event on the
    // socket; CLIENT KILL (and a close the event missed) is checked every 100 ms.
    cx.flush_before_block();
    // CLIENT LIST flag 'b': blocked in a blocking command.
    cx.client.info.borrow_mut().flags.push('b');
    let deadline = timeout.and_then(|d| tokio::time::Instant::now().checked_add(d));
    let hangup = HangupWatch::new(fd);
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
            _ = hangup.closed() => break None,
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

/// Watches a blocked connection's socket for the peer's close while its connection task waits
/// for a wake-up (nothing reads the socket then). Registers a duplicate of the descriptor, so
/// the connection's own registration is untouched; dropped when the wait ends.
struct HangupWatch(Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>);

impl HangupWatch {
    fn new(fd: i32) -> HangupWatch {
        if fd < 0 {
            return HangupWatch(None);
        }
        // SAFETY: `fd` is the connection's open socket for as long as its command runs;
        // F_DUPFD_CLOEXEC returns a new descriptor we own (or -1).
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return HangupWatch(None);
        }
        // SAFETY: `dup` is a fresh descriptor owned by nothing else.
        let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(dup) };
        // SAFETY: the OwnedFd stays open, and names the same descriptor, until the AsyncFd
        // that owns it drops.
        let afd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE)
        }
        .ok();
        HangupWatch(afd)
    }

    /// Completes when the peer has closed (or reset) the connection; pending forever when no
    /// watch could be set up (the 100 ms check still applies).
    async fn closed(&self) {
        let Some(afd) = &self.0 else {
            return std::future::pending().await;
        };
        loop {
            let Ok(mut guard) = afd.readable().await else {
                return std::future::pending().await;
            };
            // Pipelined commands behind the blocking one make the socket readable without a
            // close: only the read-closed flag (EPOLLRDHUP) or an EOF/error peek count.
            if guard.ready().is_read_closed()
                || peer_closed(std::os::fd::AsRawFd::as_raw_fd(afd.get_ref()))
            {
                return;
            }
            guard.clear_ready();
        }
    }
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
