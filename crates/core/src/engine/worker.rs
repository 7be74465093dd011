//! Per-thread worker: one Tokio current-thread runtime, one shard, the connections accepted onto
//! this thread, and the machinery to run closures on other threads and get results back.
//!
//! A call to another shard pushes a closure into the destination's inbox; the destination runs it
//! and pushes the completion back into the caller's inbox, where the caller's inbox task resolves
//! a local slot and wakes the waiting connection with a same-thread (syscall-free) wake.

use std::any::Any;
use std::cell::{Cell, Ref, RefCell, RefMut};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::guard::{self, RemotePanic};
use super::inbox::{Inbox, Msg, Task};
use super::shard::Shard;
use crate::clock;
use crate::config::Config;
use crate::stats::ThreadStats;

/// State shared by all threads: read-mostly, and only atomics or the inboxes on hot paths.
pub struct Shared {
    pub threads: usize,
    pub inboxes: Vec<Inbox>,
    pub config: Arc<Config>,
    pub next_client_id: AtomicU64,
    pub connected_clients: AtomicUsize,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub started: Instant,
    pub started_unix_ms: u64,
    pub shutdown: AtomicBool,
    pub shutdown_notify: tokio::sync::Notify,
    pub run_id: String,
    /// Snapshot bookkeeping (LASTSAVE, INFO persistence, one save at a time).
    pub persist: super::persist::State,
    pub next_conn_thread: AtomicUsize,
    /// Global transaction id counter (only multi-shard or contended transactions take one).
    pub next_txid: AtomicU64,
}

impl Shared {
    pub fn new(config: Arc<Config>) -> Arc<Self> {
        let threads = config.threads();
        let now = clock::unix_ms();
        Arc::new(Shared {
            threads,
            // One queue per shard thread plus one for outside senders (the main thread).
            inboxes: (0..threads).map(|_| Inbox::new(threads + 1)).collect(),
            config,
            next_client_id: AtomicU64::new(1),
            connected_clients: AtomicUsize::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            started: Instant::now(),
            started_unix_ms: now,
            shutdown: AtomicBool::new(false),
            shutdown_notify: tokio::sync::Notify::new(),
            run_id: make_run_id(now),
            persist: super::persist::State::new(now, threads),
            next_conn_thread: AtomicUsize::new(0),
            next_txid: AtomicU64::new(1),
        })
    }

    /// Sends `f` to run on thread `dst` without waiting for a result. `src` is the sending thread
    /// id, or `threads` for the main thread.
    pub fn post(&self, src: usize, dst: usize, f: Task) {
        self.inboxes[dst].push(src, Msg::Run(f));
    }

    /// Delivers the result of call `slot` made by thread `dst`.
    fn post_done(&self, src: usize, dst: usize, slot: usize, v: Box<dyn Any + Send>) {
        self.inboxes[dst].push(src, Msg::Done(slot, v));
    }
}

fn make_run_id(seed: u64) -> String {
    let mut rng = damselfly_types::rand::Rng::new(seed ^ damselfly_types::rand::entropy());
    (0..40)
        .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
        .collect()
}

enum Slot {
    Free(usize),
    Waiting(Option<Waker>),
    Done(Box<dyn Any + Send>),
    Abandoned,
}

/// Outstanding cross-thread calls made by this thread.
struct Pending {
    slots: Vec<Slot>,
    free: usize,
}

const NO_SLOT: usize = usize::MAX;

impl Pending {
    fn alloc(&mut self) -> usize {
        if self.free != NO_SLOT {
            let i = self.free;
            self.free = match self.slots[i] {
                Slot::Free(next) => next,
                _ => NO_SLOT,
            };
            self.slots[i] = Slot::Waiting(None);
            i
        } else {
            self.slots.push(Slot::Waiting(None));
            self.slots.len() - 1
        }
    }

    fn release(&mut self, i: usize) {
        self.slots[i] = Slot::Free(self.free);
        self.free = i;
    }
}

/// One thread's worker. Its state is private: the shard's data is reached only through the
/// accessors below, from this thread (other threads send closures with `post`/`call`).
pub struct Worker {
    pub id: usize,
    pub shared: Arc<Shared>,
    shard: RefCell<Shard>,
    /// Transaction queue and intent locks of this shard (see `engine::vll`).
    vll: RefCell<super::vll::TxShard>,
    pending: RefCell<Pending>,
    stats: RefCell<ThreadStats>,
    /// Set while a DEBUG SLEEP-like operation blocks this thread, for diagnostics.
    busy: Cell<bool>,
    /// Connections of this thread parked in a blocking command: wait id → wake-up channel and
    /// waiter (the waiter lets CLIENT UNBLOCK claim it before a shard does).
    parked: RefCell<HashMap<u64, Parked>>,
}

struct Parked {
    wake: tokio::sync::oneshot::Sender<Vec<u8>>,
    waiter: Arc<super::waiters::Waiter>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Worker>>> = const { RefCell::new(None) };
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>) -> Rc<Self> {
        let dbnum = shared.config.dbnum();
        let w = Rc::new(Worker {
            id,
            shard: RefCell::new(Shard::new(id, dbnum)),
            vll: RefCell::new(super::vll::TxShard::default()),
            shared,
            pending: RefCell::new(Pending {
                slots: Vec::new(),
                free: NO_SLOT,
            }),
            stats: RefCell::new(ThreadStats::default()),
            busy: Cell::new(false),
            parked: RefCell::new(HashMap::new()),
        });
        CURRENT.with(|c| *c.borrow_mut() = Some(w.clone()));
        w
    }

    /// This thread's shard (its data, only ever touched from this thread).
    #[inline]
    pub fn shard(&self) -> Ref<'_, Shard> {
        self.shard.borrow()
    }

    #[inline]
    pub fn shard_mut(&self) -> RefMut<'_, Shard> {
        self.shard.borrow_mut()
    }

    /// The shard, unless something on this thread already holds it mutably (best-effort
    /// readers such as prefetching skip their work then).
    #[inline]
    pub fn try_shard(&self) -> Option<Ref<'_, Shard>> {
        self.shard.try_borrow().ok()
    }

    /// This shard's lock table and transaction queue.
    #[inline]
    pub fn vll(&self) -> Ref<'_, super::vll::TxShard> {
        self.vll.borrow()
    }

    #[inline]
    pub fn vll_mut(&self) -> RefMut<'_, super::vll::TxShard> {
        self.vll.borrow_mut()
    }

    /// This thread's counters (commands, slow log, network bytes).
    #[inline]
    pub fn stats(&self) -> RefMut<'_, ThreadStats> {
        self.stats.borrow_mut()
    }

    /// Marks the thread as busy in a long-running operation (DEBUG SLEEP), for diagnostics.
    pub fn set_busy(&self, busy: bool) {
        self.busy.set(busy);
    }

    pub fn is_busy(&self) -> bool {
        self.busy.get()
    }

    /// Parks connection `id` in a blocking command until a shard serves it (`wake_blocked`),
    /// CLIENT UNBLOCK (`unblock`) or its own timeout (`unpark`).
    pub fn park(
        &self,
        id: u64,
        wake: tokio::sync::oneshot::Sender<Vec<u8>>,
        waiter: Arc<super::waiters::Waiter>,
    ) {
        self.parked.borrow_mut().insert(id, Parked { wake, waiter });
    }

    /// Forgets parked connection `id` (served, timed out or gone).
    pub fn unpark(&self, id: u64) {
        self.parked.borrow_mut().remove(&id);
    }

    /// Connections parked on this thread.
    pub fn parked(&self) -> usize {
        self.parked.borrow().len()
    }

    /// CLIENT UNBLOCK on this thread: claims the waiter of connection `id` if it is parked here
    /// and wakes it with `reply` (empty = as on timeout). True when it was parked and claimed.
    pub fn unblock(&self, id: u64, reply: Vec<u8>) -> bool {
        let mut parked = self.parked.borrow_mut();
        if !parked.get(&id).is_some_and(|p| p.waiter.claim()) {
            return false;
        }
        if let Some(p) = parked.remove(&id) {
            let _ = p.wake.send(reply);
        }
        true
    }

    /// Wakes every connection parked on this thread with `reply` (a primary turned replica:
    /// Redis's `disconnectAllBlockedClients`, whose pops would otherwise run on a replica).
    /// Returns how many it woke.
    pub fn unblock_all(&self, reply: &[u8]) -> usize {
        let mut parked = self.parked.borrow_mut();
        let ids: Vec<u64> = parked
            .iter()
            .filter(|(_, p)| p.waiter.claim())
            .map(|(&id, _)| id)
            .collect();
        for id in &ids {
            if let Some(p) = parked.remove(id) {
                let _ = p.wake.send(reply.to_vec());
            }
        }
        ids.len()
    }

    /// Delivers a parked connection's reply (sent by the shard that served it).
    pub fn wake_blocked(&self, id: u64, reply: Vec<u8>) {
        if let Some(p) = self.parked.borrow_mut().remove(&id) {
            let _ = p.wake.send(reply);
        }
    }

    /// After a command ran on this thread's shard: serve clients blocked on keys it wrote.
    #[inline]
    pub fn serve_blocked(self: &Rc<Self>) {
        let mut served = Vec::new();
        {
            let Ok(mut sh) = self.shard.try_borrow_mut() else {
                return;
            };
            if sh.block_waiters == 0 {
                return;
            }
            let now = clock::unix_ms();
            let tx = self.vll.try_borrow().ok();
            for (i, db) in sh.dbs.iter_mut().enumerate() {
                if db.blocking.has_ready() {
                    let locked = |k: &[u8]| match &tx {
                        Some(t) => t.key_locked(i, k),
                        None => true,
                    };
                    super::waiters::serve_ready(db, now, &locked, &mut served);
                }
            }
        }
        for s in served {
            let (id, reply) = (s.id, s.reply);
            self.post(s.origin, move |ow| ow.wake_blocked(id, reply));
        }
    }

    /// The worker of the calling thread (inside a shard thread).
    pub fn current() -> Option<Rc<Worker>> {
        CURRENT.with(|c| c.borrow().clone())
    }

    #[inline]
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Fire-and-forget: run `f` on thread `dst` (or right away if it is this thread).
    pub fn post<F>(self: &Rc<Self>, dst: usize, f: F)
    where
        F: FnOnce(&Rc<Worker>) + Send + 'static,
    {
        if dst == self.id {
            f(self);
        } else {
            self.shared
                .post(self.id, dst, Box::new(move |w: &Worker| with_rc(w, f)));
        }
    }

    /// Runs `f` on thread `dst` and returns a future of its result. The message is sent before
    /// this returns, so several calls issued back to back run in parallel on their shards.
    pub fn call<R, F>(self: &Rc<Self>, dst: usize, f: F) -> Call<R>
    where
        R: Send + 'static,
        F: FnOnce(&Rc<Worker>) -> R + Send + 'static,
    {
        if dst == self.id {
            return Call {
                state: CallState::Ready(Some(f(self))),
            };
        }
        let slot = self.pending.borrow_mut().alloc();
        let origin = self.id;
        self.shared.post(
            self.id,
            dst,
            Box::new(move |w: &Worker| {
                // A panicking command must not leave the caller waiting forever: ship the panic
                // back and re-raise it on the caller's side, where the command boundary turns
                // it into an error reply (see `engine::guard`).
                let boxed: Box<dyn Any + Send> = match guard::contain(|| with_rc(w, f)) {
                    Ok(r) => Box::new(r),
                    Err(_) => Box::new(RemotePanic),
                };
                w.shared.post_done(w.id, origin, slot, boxed);
            }),
        );
        Call {
            state: CallState::Remote {
                worker: self.clone(),
                slot,
                _r: std::marker::PhantomData,
            },
        }
    }

    /// Like `call`, but `f` answers through a `Responder` whenever it is ready — possibly later,
    /// from parked work (transactions waiting for their turn).
    pub fn call_deferred<R, F>(self: &Rc<Self>, dst: usize, f: F) -> Call<R>
    where
        R: Send + 'static,
        F: FnOnce(&Rc<Worker>, Responder) + Send + 'static,
    {
        let slot = self.pending.borrow_mut().alloc();
        let resp = Responder {
            origin: self.id,
            slot,
            sent: false,
        };
        if dst == self.id {
            f(self, resp);
        } else {
            self.shared.post(
                self.id,
                dst,
                Box::new(move |w: &Worker| with_rc(w, |w| f(w, resp))),
            );
        }
        Call {
            state: CallState::Remote {
                worker: self.clone(),
                slot,
                _r: std::marker::PhantomData,
            },
        }
    }

    /// Lets every thread's connections take in what has already reached their sockets before
    /// the caller looks at them (INFO's client counts): a command sent on one connection before
    /// INFO on another has been read, as on Redis's one event loop. Each thread yields once,
    /// and tokio resumes a yielded task only after polling for I/O, behind the connections it
    /// woke.
    pub async fn settle(self: &Rc<Self>) {
        let remote: Vec<Call<()>> = (0..self.threads())
            .filter(|&t| t != self.id)
            .map(|t| {
                self.call_deferred(t, |_, resp| {
                    tokio::task::spawn_local(async move {
                        tokio::task::yield_now().await;
                        if let Some(w) = Worker::current() {
                            resp.send(&w, ());
                        }
                    });
                })
            })
            .collect();
        tokio::task::yield_now().await;
        for c in remote {
            c.await;
        }
    }

    /// Runs `f` on every shard thread, in parallel, and returns the results in shard order.
    pub async fn broadcast<R, F>(self: &Rc<Self>, f: F) -> Vec<R>
    where
        R: Send + 'static,
        F: Fn(&Rc<Worker>) -> R + Send + Sync + Clone + 'static,
    {
        let mut calls: Vec<Call<R>> = Vec::with_capacity(self.threads());
        // Remote shards first so they work while we run the local part.
        for t in 0..self.threads() {
            if t != self.id {
                calls.push(self.call(t, f.clone()));
            }
        }
        let local = f(self);
        let mut out = Vec::with_capacity(self.threads());
        let mut remote = calls.into_iter();
        for t in 0..self.threads() {
            if t == self.id {
                out.push(None);
            } else if let Some(c) = remote.next() {
                out.push(Some(c.await));
            }
        }
        let mut local = Some(local);
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| local.take().expect("one local result")))
            .collect()
    }

    fn complete(&self, slot: usize, value: Box<dyn Any + Send>) {
        let mut p = self.pending.borrow_mut();
        match std::mem::replace(&mut p.slots[slot], Slot::Done(value)) {
            Slot::Waiting(w) => {
                drop(p);
                if let Some(w) = w {
                    w.wake();
                }
            }
            Slot::Abandoned => p.release(slot),
            _ => debug_assert!(false, "completion for a slot that was not waiting"),
        }
    }

    /// Runs on each thread: executes messages from other threads.
    pub async fn run_inbox(self: Rc<Self>) {
        let inbox = &self.shared.inboxes[self.id];
        let mut batch: Vec<Msg> = Vec::with_capacity(64);
        loop {
            inbox.begin_drain();
            loop {
                let all_empty = inbox.pop_batch(256, &mut batch);
                for m in batch.drain(..) {
                    match m {
                        Msg::Done(slot, v) => self.complete(slot, v),
                        // Command code inside a message runs under its own containment
                        // (hops, quick operations, calls); a panic that gets here came from
                        // the engine itself.
                        Msg::Run(f) => guard::or_exit("cross-thread message", || f(&self)),
                    }
                }
                if all_empty {
                    break;
                }
                // Let this thread's connections run between large batches.
                tokio::task::yield_now().await;
            }
            inbox.wait().await;
        }
    }

    /// Runs on each thread: periodic shard maintenance at `--hz`.
    pub async fn run_ticker(self: Rc<Self>) {
        loop {
            let clients = self.shared.connected_clients.load(Ordering::Relaxed);
            let hz = self.shared.config.effective_hz(clients);
            tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
            if self.shared.shutdown.load(Ordering::Relaxed) {
                return;
            }
            if super::CRON_PAUSED.load(Ordering::Relaxed) {
                continue;
            }
            let now = clock::unix_ms();
            // Active expiry must not delete keys that an in-flight transaction has locked
            // between two of its hops (Redis freezes time during EXEC): while transactions are
            // queued here, expire on a later tick instead.
            let tx_idle = self.vll.borrow().idle();
            let mut shard = self.shard.borrow_mut();
            let active = shard.active_expire;
            if !tx_idle {
                shard.active_expire = false;
            }
            guard::or_exit("shard maintenance tick", || shard.tick(now));
            shard.active_expire = active;
            drop(shard);
            super::tracking::limit_keys();
            let maxmemory = self.shared.config.maxmemory();
            if maxmemory != 0 && super::evict::evicts() {
                self.evict_share(maxmemory);
            }
        }
    }

    /// Frees memory while the process is over `maxmemory` (engine/evict.rs), before a command
    /// runs. This shard evicts the whole excess at once (so memory is back under the limit
    /// before the command, as in Redis) unless it has already evicted more than its share: a
    /// shard that serves many writers must not be drained while the others keep colder keys
    /// (`evict::ahead`). Then, at most once a millisecond, the excess is divided among the other
    /// shards, which evict it when they read the message. Keys a queued transaction holds are
    /// left alone. Returns false when nothing can be evicted anywhere (every shard found nothing
    /// when it last tried): the command then gets -OOM.
    pub fn evict(self: &Rc<Self>, maxmemory: u64) -> bool {
        let n = self.threads();
        let limit = super::evict::limit(maxmemory, n);
        let used = super::memory::used_for_limit();
        super::evict::note_over(used > limit);
        if used <= limit {
            return true;
        }
        let excess = used - limit;
        if !super::evict::ahead(self.id, n, maxmemory) && self.evict_bytes(excess) > 0 {
            return true;
        }
        if n > 1 && super::evict::broadcast_due() {
            let share = excess / (n - 1) as u64 + 1;
            for dst in (0..n).filter(|&d| d != self.id) {
                self.post(dst, move |w| {
                    w.evict_bytes(share);
                });
            }
        }
        super::evict::any_may_evict(n)
    }

    /// Still over `maxmemory` after `evict` (this shard had nothing it may evict, or had done
    /// more than its share): the other shards evict the excess now, and this returns once they
    /// have, so that the command about to run starts under the limit as in Redis. Each
    /// recomputes the excess when it runs, so the first one that frees enough stops the rest.
    pub async fn evict_elsewhere(self: &Rc<Self>, maxmemory: u64) {
        let n = self.threads();
        if n <= 1 || !super::memory::over_limit(super::evict::limit(maxmemory, n)) {
            return;
        }
        let me = self.id;
        self.broadcast(move |w| {
            if w.id == me {
                return;
            }
            let limit = super::evict::limit(maxmemory, w.threads());
            let used = super::memory::used_for_limit();
            if used > limit {
                w.evict_bytes(used - limit);
            }
        })
        .await;
    }

    /// From the periodic tick: evicts this shard's share of the excess over `maxmemory`.
    fn evict_share(&self, maxmemory: u64) {
        let limit = super::evict::limit(maxmemory, self.threads());
        let used = super::memory::used_for_limit();
        super::evict::note_over(used > limit);
        if used > limit {
            self.evict_bytes((used - limit) / self.threads().max(1) as u64 + 1);
        }
    }

    /// Evicts about `bytes` from this shard; returns the keys evicted.
    fn evict_bytes(&self, bytes: u64) -> usize {
        let Ok(mut shard) = self.shard.try_borrow_mut() else {
            return 0;
        };
        let Ok(tx) = self.vll.try_borrow() else {
            return 0;
        };
        let now = clock::unix_ms();
        let started = std::time::Instant::now();
        let keys = guard::or_exit("eviction", || {
            super::evict::run(&mut shard, Some(&tx), bytes, now)
        })
        .keys;
        // Redis's latencyAddSampleIfNeeded("eviction-cycle", ...) in performEvictions.
        crate::latency::add_sample_if_needed(
            "eviction-cycle",
            started.elapsed().as_millis() as u64,
        );
        keys
    }
}

fn with_rc<R>(w: &Worker, f: impl FnOnce(&Rc<Worker>) -> R) -> R {
    let rc = CURRENT.with(|c| c.borrow().clone());
    match rc {
        Some(rc) if rc.id == w.id => f(&rc),
        _ => panic!("message executed outside its worker thread"),
    }
}

/// Completes a `call_deferred` from whichever thread the work finally runs on.
pub struct Responder {
    origin: usize,
    slot: usize,
    sent: bool,
}

impl Responder {
    pub fn send<R: Send + 'static>(mut self, w: &Worker, r: R) {
        self.sent = true;
        self.deliver(w, Box::new(r));
    }

    fn deliver(&self, w: &Worker, v: Box<dyn Any + Send>) {
        let slot = self.slot;
        if w.id == self.origin {
            w.complete(slot, v);
        } else {
            w.shared.post_done(w.id, self.origin, slot, v);
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        // Dropped unanswered (the work panicked): wake the caller with a panic marker.
        if !self.sent {
            if let Some(w) = Worker::current() {
                self.deliver(&w, Box::new(RemotePanic));
            }
        }
    }
}

impl<R> Call<R> {
    /// A call whose result is already known (work that ran inline on this thread).
    pub fn ready(r: R) -> Self {
        Call {
            state: CallState::Ready(Some(r)),
        }
    }
}

enum CallState<R> {
    Ready(Option<R>),
    Remote {
        worker: Rc<Worker>,
        slot: usize,
        _r: std::marker::PhantomData<R>,
    },
    Finished,
}

/// Future of a cross-thread call.
pub struct Call<R> {
    state: CallState<R>,
}

impl<R> Unpin for Call<R> {}

impl<R: 'static> Future for Call<R> {
    type Output = R;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        // SAFETY-free: Call is Unpin (no self-references).
        let this = self.get_mut();
        match &mut this.state {
            CallState::Ready(r) => {
                let r = r.take().expect("polled after completion");
                this.state = CallState::Finished;
                Poll::Ready(r)
            }
            CallState::Remote { worker, slot, .. } => {
                let slot = *slot;
                let mut p = worker.pending.borrow_mut();
                match std::mem::replace(&mut p.slots[slot], Slot::Abandoned) {
                    Slot::Done(v) => {
                        p.release(slot);
                        drop(p);
                        this.state = CallState::Finished;
                        match v.downcast::<R>() {
                            Ok(r) => Poll::Ready(*r),
                            // Not `panic!`: the hook already logged it on the shard thread.
                            Err(v) if v.is::<RemotePanic>() => std::panic::resume_unwind(v),
                            Err(_) => panic!("cross-thread call returned the wrong type"),
                        }
                    }
                    Slot::Waiting(_) => {
                        p.slots[slot] = Slot::Waiting(Some(cx.waker().clone()));
                        Poll::Pending
                    }
                    _ => panic!("cross-thread call slot in a bad state"),
                }
            }
            CallState::Finished => panic!("Call polled after completion"),
        }
    }
}

impl<R> Drop for Call<R> {
    fn drop(&mut self) {
        if let CallState::Remote { worker, slot, .. } = &self.state {
            let mut p = worker.pending.borrow_mut();
            match p.slots[*slot] {
                // The result arrived but nobody took it: free the slot now.
                Slot::Done(_) => p.release(*slot),
                // Still in flight: the completion will free it.
                _ => p.slots[*slot] = Slot::Abandoned,
            }
        }
    }
}
