//! Replication with Redis's protocol (design: docs/design/replication.md).
//!
//! - `engine::journal` (in the core, below this module): where writes leave their records, in an
//!   order the primary could have run them; `engine::role` holds the node's role flags.
//! - this module: the primary's side of the stream. One feeder task (thread 0) turns journal
//!   records into the stream's bytes (inserting `SELECT` when the database changes, MULTI/EXEC
//!   around groups), counts the offset, keeps the backlog and hands the bytes to every attached
//!   replica's connection, which writes them between its other work.
//! - `replica`: the replica's side (REPLICAOF): the link to a primary, full and partial
//!   resynchronization, applying the stream.
//! - `replication/commands.rs`: SYNC, PSYNC, REPLCONF, REPLICAOF, ROLE, WAIT.
//!
//! The state here (`MASTER`) is behind a mutex: the feeder takes it once per batch of records,
//! PSYNC/REPLCONF/INFO rarely. Shards never take it: they only push to the journal.

pub mod commands;
pub mod failover;
pub mod replica;

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use crate::engine::journal::{self, Attach};
use crate::engine::{role, Worker};

/// An attached replica, as INFO and WAIT see it.
pub struct ReplicaInfo {
    pub client: u64,
    pub tid: usize,
    pub ip: String,
    /// REPLCONF listening-port.
    pub port: u16,
    /// Sent its snapshot (`online`), or still receiving it (`wait_bgsave`).
    pub online: bool,
    pub ack_offset: u64,
    pub ack_ms: u64,
    /// Acknowledges the stream (asked with PSYNC): `repl-timeout` applies to it.
    pub psync: bool,
}

/// The primary's replication state (Redis's `master_replid`, offsets, backlog, replicas).
pub struct Master {
    pub replid: String,
    pub replid2: String,
    /// The offset up to which `replid2` is valid (-1: none).
    pub second_offset: i64,
    /// Bytes of stream produced (`master_repl_offset`).
    pub offset: u64,
    pub backlog: Option<Backlog>,
    pub replicas: Vec<ReplicaInfo>,
    /// The database the stream is in (None: the next record selects one).
    seldb: Option<usize>,
    /// Unix ms since when no replica has been attached (for `repl-backlog-ttl`).
    pub lonely_since_ms: u64,
}

static MASTER: LazyLock<Mutex<Master>> = LazyLock::new(|| {
    Mutex::new(Master {
        replid: new_replid(),
        replid2: "0".repeat(40),
        second_offset: -1,
        offset: 0,
        backlog: None,
        replicas: Vec::new(),
        seldb: None,
        lonely_since_ms: 0,
    })
});

/// INFO stats' `sync_full`, `sync_partial_ok`, `sync_partial_err`.
pub struct SyncStats {
    pub full: std::sync::atomic::AtomicU64,
    pub partial_ok: std::sync::atomic::AtomicU64,
    pub partial_err: std::sync::atomic::AtomicU64,
}

impl SyncStats {
    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.full.store(0, Relaxed);
        self.partial_ok.store(0, Relaxed);
        self.partial_err.store(0, Relaxed);
    }
}

pub static STATS: SyncStats = SyncStats {
    full: std::sync::atomic::AtomicU64::new(0),
    partial_ok: std::sync::atomic::AtomicU64::new(0),
    partial_err: std::sync::atomic::AtomicU64::new(0),
};

/// Replicas attached now (a cheap check for connections closing).
static REPLICAS: AtomicUsize = AtomicUsize::new(0);

pub fn master() -> MutexGuard<'static, Master> {
    MASTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// CONFIG SET repl-backlog-size: the backlog (if any) takes the new size.
pub fn resize_backlog(size: usize) {
    if let Some(b) = master().backlog.as_mut() {
        b.resize(size);
    }
}

/// A random 40-hex-digit replication id.
pub fn new_replid() -> String {
    let mut s = String::with_capacity(40);
    while s.len() < 40 {
        s.push_str(&format!("{:016x}", damselfly_types::rand::entropy()));
    }
    s.truncate(40);
    s
}

/// The stream's recent history, shared with the replicas' connections (Redis 7's one
/// replication buffer): a queue of the byte batches the feeder produced, each an `Arc` that the
/// connections of replicas still to write it hold too. The backlog keeps the last
/// `repl-backlog-size` bytes, and beyond them every batch some replica has not taken yet (one
/// waiting for its snapshot holds all it was sent), so N replicas cost one copy of the stream,
/// not N, and a replica behind by more than the configured size can still continue from it
/// (PSYNC). Trimmed from the front as batches are let go.
pub struct Backlog {
    chunks: std::collections::VecDeque<Arc<[u8]>>,
    /// Bytes of the first chunk already let go of (trimming splits a batch no replica holds,
    /// so that an unreferenced backlog keeps exactly its size, whatever its batches' sizes).
    skip: usize,
    /// `repl-backlog-size`.
    size: usize,
    /// Bytes of history held (`repl_backlog_histlen`: the chunks' lengths less `skip`).
    len: usize,
    /// Memory the chunks take, as the allocator counts it (see [`chunk_memory`]).
    mem: usize,
}

/// What one batch takes: its `Arc` block (the counts and the bytes, rounded up to the
/// allocator's size class, as `used_memory` counts it) and its slot in the queue.
fn chunk_memory(c: &Arc<[u8]>) -> usize {
    crate::engine::memory::block_size(16 + c.len()) + std::mem::size_of::<Arc<[u8]>>()
}

impl Drop for Backlog {
    fn drop(&mut self) {
        crate::engine::memory::set_not_counted(0);
    }
}

impl Backlog {
    pub fn new(size: usize) -> Backlog {
        Backlog {
            chunks: std::collections::VecDeque::new(),
            skip: 0,
            size: size.max(16 * 1024),
            len: 0,
            mem: 0,
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn histlen(&self) -> usize {
        self.len
    }

    /// The memory the stream's buffers hold (`mem_total_replication_buffers`).
    pub fn memory(&self) -> usize {
        self.mem
    }

    fn append(&mut self, chunk: Arc<[u8]>) {
        self.len += chunk.len();
        self.mem += chunk_memory(&chunk);
        self.chunks.push_back(chunk);
        self.trim();
    }

    /// Lets go of the oldest history beyond the configured size, up to the first batch a
    /// replica's connection still holds (it has not written it yet, or has not gone yet).
    fn trim(&mut self) {
        while self.len > self.size {
            let Some(front) = self.chunks.front() else {
                break;
            };
            if Arc::strong_count(front) > 1 {
                break;
            }
            let excess = self.len - self.size;
            let rest = front.len() - self.skip;
            if excess >= rest {
                self.len -= rest;
                self.skip = 0;
                if let Some(c) = self.chunks.pop_front() {
                    self.mem -= chunk_memory(&c);
                }
                continue;
            }
            self.skip += excess;
            self.len -= excess;
            // A large batch mostly let go of: keep a copy of what is left instead.
            if self.skip * 2 > front.len() {
                let kept: Arc<[u8]> = front[self.skip..].into();
                self.mem = self.mem - chunk_memory(front) + chunk_memory(&kept);
                self.chunks[0] = kept;
                self.skip = 0;
            }
            break;
        }
        self.publish_not_counted();
    }

    /// What passes the configured size is the replicas' share, which eviction leaves out.
    fn publish_not_counted(&self) {
        crate::engine::memory::set_not_counted(self.memory().saturating_sub(self.size));
    }

    /// A new size (CONFIG SET): a smaller backlog covers less, so a replica further behind gets
    /// a full sync, as in Redis.
    fn resize(&mut self, size: usize) {
        self.size = size.max(16 * 1024);
        self.trim();
    }

    /// The last `n` bytes (n ≤ histlen).
    fn tail(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        let mut skip = self.skip + (self.len - n);
        for c in &self.chunks {
            if skip >= c.len() {
                skip -= c.len();
                continue;
            }
            out.extend_from_slice(&c[skip..]);
            skip = 0;
        }
        out
    }
}

impl Master {
    /// Redis's `repl_backlog_first_byte_offset`.
    pub fn backlog_first_byte(&self) -> u64 {
        match &self.backlog {
            Some(b) => self.offset + 1 - b.histlen() as u64,
            None => 0,
        }
    }

    /// Creates the backlog if there is none (the first replica): a new history, so a new
    /// replication id, as Redis does.
    pub fn ensure_backlog(&mut self, size: usize) {
        if self.backlog.is_none() {
            self.backlog = Some(Backlog::new(size));
            if self.offset == 0 {
                self.replid = new_replid();
                self.replid2 = "0".repeat(40);
                self.second_offset = -1;
            }
        }
    }

    /// PSYNC `replid offset`: the bytes to continue from, when the backlog covers them
    /// (Redis's `masterTryPartialResynchronization`).
    pub fn partial(&self, replid: &str, psync_offset: i64) -> Option<Vec<u8>> {
        let b = self.backlog.as_ref()?;
        let same =
            replid == self.replid || (replid == self.replid2 && psync_offset <= self.second_offset);
        if !same || psync_offset < 0 {
            return None;
        }
        let first = self.backlog_first_byte() as i64;
        let end = self.offset as i64;
        if psync_offset < first || psync_offset > end + 1 {
            return None;
        }
        let n = (end + 1 - psync_offset) as usize;
        Some(b.tail(n))
    }

    /// A full sync's replica joins at the stream's offset now (sent to it), receiving its
    /// snapshot until it is online.
    fn attach(&mut self, a: Attach) {
        self.add_replica(ReplicaInfo {
            client: a.client,
            tid: a.tid,
            ip: a.ip,
            port: 0,
            online: false,
            ack_offset: 0,
            ack_ms: crate::clock::unix_ms(),
            psync: a.psync,
        });
        let _ = a.offset.send(self.offset);
    }

    fn add_replica(&mut self, r: ReplicaInfo) {
        self.replicas.retain(|x| x.client != r.client);
        self.replicas.push(r);
        REPLICAS.store(self.replicas.len(), Ordering::Relaxed);
    }

    /// Stream bytes produced: count them, keep them, and send them to every replica.
    fn emit(&mut self, w: &Rc<Worker>, bytes: &[u8]) {
        // Nobody to keep or send them for (no backlog, no replica): as Redis's
        // replicationFeedSlaves, the offset does not move either.
        if bytes.is_empty() || (self.backlog.is_none() && self.replicas.is_empty()) {
            return;
        }
        self.offset += bytes.len() as u64;
        let shared: Arc<[u8]> = bytes.into();
        for r in &self.replicas {
            let (id, data) = (r.client, shared.clone());
            w.post(r.tid, move |w| deliver(w, id, data));
        }
        if let Some(b) = self.backlog.as_mut() {
            b.append(shared);
        }
    }

    /// Lets go of the backlog's batches that no replica needs any more (see [`Backlog`]).
    pub fn trim(&mut self) {
        if let Some(b) = self.backlog.as_mut() {
            b.trim();
        }
    }

    /// INFO memory's `mem_total_replication_buffers`, and its split into
    /// (`mem_replication_backlog`, `mem_clients_slaves`) as Redis 7.0 makes it: what passes
    /// the configured backlog size counts as the replicas' while there are any.
    pub fn buffer_memory(&mut self) -> (usize, usize, usize) {
        self.trim();
        let Some(b) = &self.backlog else {
            return (0, 0, 0);
        };
        let total = b.memory();
        if !self.replicas.is_empty() && total > b.size() {
            (total, b.size(), total - b.size())
        } else {
            (total, total, 0)
        }
    }
}

/// On the replica connection's thread: queue the bytes on it. What is queued is the
/// replica's output buffer (written once it has its snapshot): past its class's
/// `client-output-buffer-limit`, the replica is dropped, as Redis drops one whose share of the
/// replication buffer grew too large (and the backlog can let go of that share).
fn deliver(w: &Worker, id: u64, data: Arc<[u8]>) {
    let mut gone = true;
    let mut over = false;
    crate::client::with_local(id, |h| {
        if h.killed.get() {
            return;
        }
        gone = false;
        let queued = h.repl_queued.get() + data.len();
        h.repl_queued.set(queued);
        h.push(crate::pubsub::Delivery::Repl(data));
        let limit = crate::client::limits::class_limit(&w.shared.config, true, false);
        let used = crate::client::limits::output_memory(queued) as u64;
        if h.repl_obuf.borrow_mut().over(limit, used, false) {
            over = true;
            let line = h.info.borrow().line();
            crate::log_warning!(
                "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
            );
            w.stats().obuf_limit_disconnections += 1;
            h.killed.set(true);
            h.pushes.borrow_mut().clear();
            h.repl_queued.set(0);
            h.wake.notify_one();
        }
    });
    if gone || over {
        // Not inline: on the feeder's own thread `post` runs this inside `emit`, under the
        // lock `forget` takes.
        tokio::task::spawn_local(async move { forget(id) });
    }
}

/// Registers a replica that continues from the backlog (PSYNC +CONTINUE): it gets every
/// byte produced after `master()` was locked by the caller.
pub fn attach_partial(m: &mut Master, client: u64, tid: usize, ip: String, port: u16) {
    m.add_replica(ReplicaInfo {
        client,
        tid,
        ip,
        port,
        online: true,
        ack_offset: 0,
        ack_ms: crate::clock::unix_ms(),
        psync: true,
    });
}

/// Attaches a replica at the stream's offset now (a replica of ours while we replicate: the
/// caller paused the link, so nothing is being applied or forwarded).
pub fn attach_now(a: Attach, backlog_size: usize) {
    let mut m = master();
    if m.backlog.is_none() {
        m.backlog = Some(Backlog::new(backlog_size));
    }
    m.attach(a);
}

/// Drops every replica's connection (our history changed: a full sync of our own, a new
/// primary); they reconnect and resync.
pub fn disconnect_replicas(w: &Rc<Worker>) {
    let ids: Vec<(u64, usize)> = master()
        .replicas
        .iter()
        .map(|r| (r.client, r.tid))
        .collect();
    for (id, tid) in ids {
        close_replica(w, id, tid);
        forget(id);
    }
}

/// Closes a replica's connection (on its thread).
fn close_replica(w: &Rc<Worker>, id: u64, tid: usize) {
    w.post(tid, move |_| {
        crate::client::with_local(id, |h| {
            h.killed.set(true);
            h.wake.notify_one();
        });
    });
}

/// `repl-timeout` on the primary's side (Redis's replicationCron): an online replica that
/// acknowledged nothing for that long is dropped (it reconnects with PSYNC when it can). Only
/// replicas that acknowledge: a plain SYNC reader (redis-cli --replica) never does.
fn drop_silent_replicas(w: &Rc<Worker>, m: &mut Master) {
    let limit = replica::repl_timeout(&w.shared.config).as_millis() as u64;
    let now = crate::clock::unix_ms();
    let silent = |r: &ReplicaInfo| r.online && r.psync && now.saturating_sub(r.ack_ms) > limit;
    if !m.replicas.iter().any(silent) {
        return;
    }
    for r in m.replicas.iter().filter(|r| silent(r)) {
        crate::log_warning!(
            "Disconnecting timedout replica (streaming sync): {}:{}",
            r.ip,
            r.port
        );
        close_replica(w, r.client, r.tid);
    }
    m.replicas.retain(|r| !silent(r));
    if m.replicas.is_empty() {
        m.lonely_since_ms = now;
    }
    REPLICAS.store(m.replicas.len(), Ordering::Relaxed);
}

/// A connection closed: if it was a replica, it is one no more.
pub fn forget(client: u64) {
    if REPLICAS.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut m = master();
    let before = m.replicas.len();
    m.replicas.retain(|r| r.client != client);
    // What only this replica still held can go now.
    m.trim();
    if m.replicas.len() != before && m.replicas.is_empty() {
        m.lonely_since_ms = crate::clock::unix_ms();
    }
    REPLICAS.store(m.replicas.len(), Ordering::Relaxed);
}

/// A replica's connection announced something about itself.
pub fn with_replica(client: u64, f: impl FnOnce(&mut ReplicaInfo)) {
    if let Some(r) = master().replicas.iter_mut().find(|r| r.client == client) {
        f(r);
    }
}

/// Ports replicas announced with REPLCONF listening-port before their SYNC.
/// What a connection told us with REPLCONF before its SYNC/PSYNC.
#[derive(Clone, Copy, Default)]
pub struct Announced {
    /// `listening-port` (0: not told).
    pub port: u16,
    /// `capa eof`: it reads the diskless `$EOF:` form.
    pub capa_eof: bool,
}

static ANNOUNCED: LazyLock<Mutex<std::collections::HashMap<u64, Announced>>> =
    LazyLock::new(|| Mutex::new(std::collections::HashMap::new()));

/// Records what `client` announced (REPLCONF).
pub fn announce(client: u64, f: impl FnOnce(&mut Announced)) {
    let mut p = ANNOUNCED.lock().unwrap_or_else(|e| e.into_inner());
    // (Bounded: entries of connections that never synced are dropped past a few thousand.)
    if p.len() > 4096 {
        p.clear();
    }
    f(p.entry(client).or_default());
}

/// What `client` announced, consumed by its SYNC/PSYNC.
pub fn announced(client: u64) -> Announced {
    ANNOUNCED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&client)
        .unwrap_or_default()
}

/// A primary restarted from its own snapshot continues the replication history recorded there
/// (`repl-id`, `repl-offset`), as Redis 7.0 does: a new id, the saved one as `replid2` valid
/// up to the saved offset, and an empty backlog from there, so that the replicas that followed
/// it continue with PSYNC (and take the new id). The caller turns journaling on everywhere
/// before the first write.
pub fn restore_primary(replid: String, offset: u64, backlog: usize) {
    let mut m = master();
    m.replid = new_replid();
    m.replid2 = replid;
    m.second_offset = offset as i64 + 1;
    m.offset = offset;
    m.seldb = None;
    m.backlog = Some(Backlog::new(backlog));
    m.lonely_since_ms = crate::clock::unix_ms();
}

/// The stream's offset once everything journaled so far is in it (WAIT's target).
pub async fn settled_offset() -> u64 {
    if !journal::active() {
        return master().offset;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    journal::push(journal::Item::Fence(tx));
    match rx.await {
        Ok(off) => off,
        Err(_) => master().offset,
    }
}

/// Shutdowns waiting in [`before_shutdown`] (INFO counts them as blocked clients), whether
/// SHUTDOWN ABORT asked them to stop, and when the wait ends (unix ms, 0: none; INFO's
/// `shutdown_in_milliseconds`).
static SHUTDOWN_WAITERS: AtomicUsize = AtomicUsize::new(0);
static SHUTDOWN_ABORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static SHUTDOWN_DEADLINE_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Shutdowns waiting for replicas now.
pub fn shutdown_waiters() -> usize {
    SHUTDOWN_WAITERS.load(Ordering::Relaxed)
}

/// Milliseconds left to a shutdown's wait for its replicas, while one waits.
pub fn shutdown_in_ms() -> Option<u64> {
    match SHUTDOWN_DEADLINE_MS.load(Ordering::Relaxed) {
        0 => None,
        d => Some(d.saturating_sub(crate::clock::unix_ms())),
    }
}

/// Redis 7's `shutdown-timeout`: a shutdown without NOW (`now` false) first gives its replicas
/// up to that many seconds to acknowledge the whole stream, with writes paused and `REPLCONF
/// GETACK` sent to hurry them, so that a replica promoted after it has every acknowledged
/// write. True once they all caught up or the time ran out (the laggards logged, as Redis's
/// finishShutdown does for every shutdown), false when SHUTDOWN ABORT stopped it (writes go on
/// then).
pub async fn before_shutdown(cfg: &crate::config::Config, now: bool) -> bool {
    let secs = cfg.shutdown_timeout_secs();
    if master().replicas.is_empty() {
        return true;
    }
    let caught_up = |target: u64| master().replicas.iter().all(|r| r.ack_offset >= target);
    // Counted as blocked (INFO `blocked_clients`) and abortable from the start, as Redis's
    // client blocks in the command itself: finding the offset to wait for hops to every thread.
    let waiting = (!now && secs > 0).then(ShutdownWaiter::begin);
    // Everything written so far: what the replicas must have acknowledged.
    let mut target = settled_offset().await;
    if waiting.is_some() && SHUTDOWN_ABORTED.load(Ordering::SeqCst) {
        // SHUTDOWN ABORT while the offset was being found (it was told OK).
        return false;
    }
    if waiting.is_some() && !caught_up(target) {
        crate::engine::pause::shutdown_pause(true);
        // (Writes that ran before the pause took hold count too.)
        target = settled_offset().await;
        if journal::active() {
            journal::push(journal::Item::Raw(journal::encode(&[
                b"REPLCONF",
                b"GETACK",
                b"*",
            ])));
        }
        crate::log_notice!("Waiting for replicas before shutting down.");
        let deadline = crate::clock::unix_ms() + secs * 1000;
        SHUTDOWN_DEADLINE_MS.store(deadline, Ordering::Relaxed);
        let aborted = loop {
            if SHUTDOWN_ABORTED.load(Ordering::SeqCst) {
                break true;
            }
            if caught_up(target) || crate::clock::unix_ms() >= deadline {
                break false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        if aborted {
            crate::engine::pause::shutdown_pause(false);
            return false;
        }
    }
    drop(waiting);
    let m = master();
    let now_ms = crate::clock::unix_ms();
    let mut lagging = 0;
    for r in m.replicas.iter().filter(|r| r.ack_offset < target) {
        lagging += 1;
        let lag = if r.online {
            now_ms.saturating_sub(r.ack_ms) / 1000
        } else {
            0
        };
        crate::log_warning!(
            "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={}.",
            r.ip,
            r.port,
            target - r.ack_offset,
            if r.online { "online" } else { "wait_bgsave" }
        );
    }
    crate::log_notice!(
        "{} of {} replicas are in sync when shutting down.",
        m.replicas.len() - lagging,
        m.replicas.len()
    );
    true
}

/// A SHUTDOWN waiting for its replicas, from its start to its end (a dropped connection's
/// too): the last one out clears the abort and the deadline for the next SHUTDOWN.
struct ShutdownWaiter;

impl ShutdownWaiter {
    fn begin() -> ShutdownWaiter {
        SHUTDOWN_WAITERS.fetch_add(1, Ordering::SeqCst);
        ShutdownWaiter
    }
}

impl Drop for ShutdownWaiter {
    fn drop(&mut self) {
        if SHUTDOWN_WAITERS.fetch_sub(1, Ordering::SeqCst) == 1 {
            SHUTDOWN_ABORTED.store(false, Ordering::SeqCst);
            SHUTDOWN_DEADLINE_MS.store(0, Ordering::Relaxed);
        }
    }
}

/// SHUTDOWN ABORT: stops the shutdowns waiting for replicas; false when none is.
pub fn abort_shutdown() -> bool {
    if SHUTDOWN_WAITERS.load(Ordering::SeqCst) == 0 {
        return false;
    }
    SHUTDOWN_ABORTED.store(true, Ordering::SeqCst);
    crate::log_warning!("Shutdown manually aborted.");
    true
}

pub use crate::engine::role::too_few_replicas;

static MIN_TO_WRITE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static MAX_LAG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(10);

/// The configuration changed `min-replicas-to-write` / `min-replicas-max-lag`: takes effect
/// for the next write.
pub fn set_min_replicas(to_write: Option<u64>, max_lag: Option<u64>) {
    if let Some(n) = to_write {
        MIN_TO_WRITE.store(n, Ordering::Relaxed);
    }
    if let Some(l) = max_lag {
        MAX_LAG.store(l, Ordering::Relaxed);
    }
    refresh_good_replicas(&master());
}

/// `min-replicas-to-write`: are enough replicas acknowledging within `min-replicas-max-lag`
/// seconds for writes to be accepted? Stored for [`too_few_replicas`].
fn refresh_good_replicas(m: &Master) {
    let need = MIN_TO_WRITE.load(Ordering::Relaxed) as usize;
    let lag = MAX_LAG.load(Ordering::Relaxed);
    let enough = need == 0 || lag == 0 || {
        let now = crate::clock::unix_ms();
        m.replicas
            .iter()
            .filter(|r| r.online && now.saturating_sub(r.ack_ms) / 1000 <= lag)
            .count()
            >= need
    };
    crate::engine::role::set_too_few_replicas(!enough);
}

/// Replicas whose acknowledged offset reached `offset` (WAIT).
pub fn acked(offset: u64) -> usize {
    master()
        .replicas
        .iter()
        .filter(|r| r.online && r.ack_offset >= offset)
        .count()
}

/// Stream bytes that arrived from our own primary (a replica forwards them verbatim to its
/// replicas, so offsets agree along a chain).
pub fn emit_forwarded(w: &Rc<Worker>, bytes: &[u8]) {
    let mut m = master();
    m.emit(w, bytes);
}

/// The feeder: turns journal records into stream bytes (thread 0, for the server's life).
/// The most stream the feeder gathers before handing it on. A feeder whose thread was busy
/// finds many records queued: gathered whole, they would be copied into one buffer twice the
/// size (and once more for the backlog), memory eviction counts (a stopped replica's stream
/// beyond the backlog is what it leaves out), enough to make the shards evict.
const FEED_CHUNK: usize = 64 * 1024;

pub async fn feed(w: Rc<Worker>) {
    let mut last_ping = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = journal::WAKE.notified() => {
                // As Redis writes its replicas once per event-loop iteration: let this
                // thread's other ready connections run first, so one batch (one write per
                // replica) carries all of their records.
                tokio::task::yield_now().await;
            }
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
        }
        let period = w.shared.config.repl_ping_replica_period_secs().max(1);
        let mut buf: Vec<u8> = Vec::new();
        let mut m = master();
        refresh_good_replicas(&m);
        // Batches the replicas wrote since (Redis trims incrementally in its cron too).
        m.trim();
        drop_silent_replicas(&w, &mut m);
        // `repl-backlog-ttl`: a primary without replicas that long frees its backlog (a new
        // history starts with the next replica), as Redis does; a replica keeps its own.
        let ttl = w.shared.config.repl_backlog_ttl_secs();
        if m.backlog.is_some()
            && m.replicas.is_empty()
            && ttl > 0
            && !replica::is_replica()
            && m.lonely_since_ms != 0
            && crate::clock::unix_ms().saturating_sub(m.lonely_since_ms) / 1000 >= ttl
        {
            crate::log_notice!(
                "Replication backlog freed after {ttl} seconds without connected replicas."
            );
            m.backlog = None;
            m.lonely_since_ms = 0;
            // (Journaling goes on: the shards keep their flags; the bytes just go nowhere.)
        }
        // No PING while writes are paused (CLIENT PAUSE, FAILOVER): the stream must stand
        // still for a replica to catch up with it, as Redis's does. Nor from a replica: its
        // replicas get its primary's stream exactly (PINGs included), so that offsets agree
        // along a chain; one of its own would put it ahead of its primary, whose PSYNC then
        // refuses it after a reconnection (Redis's replicationFeedSlaves returns at once on a
        // replica).
        if !m.replicas.is_empty()
            && !replica::is_replica()
            && last_ping.elapsed().as_secs() >= period
            && !crate::engine::pause::writes_paused()
        {
            last_ping = std::time::Instant::now();
            buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        }
        while let Some(item) = journal::pop() {
            match item {
                journal::Item::One(r) => add(&mut m, &mut buf, &r),
                journal::Item::Group(rs) => match rs.len() {
                    0 => {}
                    1 => add(&mut m, &mut buf, &rs[0]),
                    _ => {
                        add(
                            &mut m,
                            &mut buf,
                            &journal::Record {
                                db: rs[0].db,
                                resp: journal::encode(&[b"MULTI"]),
                            },
                        );
                        for r in &rs {
                            add(&mut m, &mut buf, r);
                        }
                        let db = rs[rs.len() - 1].db;
                        add(
                            &mut m,
                            &mut buf,
                            &journal::Record {
                                db,
                                resp: journal::encode(&[b"EXEC"]),
                            },
                        );
                    }
                },
                journal::Item::Raw(bytes) => buf.extend_from_slice(&bytes),
                journal::Item::Fence(tx) => {
                    m.emit(&w, &buf);
                    buf.clear();
                    let _ = tx.send(m.offset);
                }
                journal::Item::Attach(a) => {
                    m.emit(&w, &buf);
                    buf.clear();
                    // The new replica's stream starts here, in no known database.
                    m.seldb = None;
                    m.attach(*a);
                }
            }
            if buf.len() >= FEED_CHUNK {
                m.emit(&w, &buf);
                buf.clear();
            }
        }
        m.emit(&w, &buf);
        drop(m);
    }
}

fn add(m: &mut Master, buf: &mut Vec<u8>, r: &journal::Record) {
    if m.seldb != Some(r.db) {
        let db = r.db.to_string();
        buf.extend_from_slice(&journal::encode(&[b"SELECT", db.as_bytes()]));
        m.seldb = Some(r.db);
    }
    buf.extend_from_slice(&r.resp);
}

/// Replication's configuration hooks (config::hooks).
pub const CONFIG_HOOKS: &[crate::config::hooks::Hook] = {
    use crate::config::hooks::Hook;
    fn num(v: &str) -> u64 {
        v.parse().unwrap_or(0)
    }
    &[
        Hook {
            apply: Some(|v| role::set_read_only(v == "yes")),
            ..Hook::new("replica-read-only")
        },
        Hook {
            apply: Some(|v| set_min_replicas(Some(num(v)), None)),
            ..Hook::new("min-replicas-to-write")
        },
        Hook {
            apply: Some(|v| set_min_replicas(None, Some(num(v)))),
            ..Hook::new("min-replicas-max-lag")
        },
        Hook {
            // Redis's rewriteConfigReplicaOfOption: the primary followed now (REPLICAOF
            // changes it at run time), none for a primary.
            rewrite: Some(|_| {
                replica::link()
                    .as_ref()
                    .map(|l| format!("{} {}", l.host, l.port))
                    .unwrap_or_default()
            }),
            ..Hook::new("replicaof")
        },
    ]
};

/// A connection went (net::session's disconnect hook): if it was a replica, it is forgotten.
/// Its queued share of the stream goes first: the backlog, trimmed when the replica is
/// forgotten, can then let go of it.
pub fn on_disconnect(_: &Rc<Worker>, conn: u64, h: &crate::client::ClientHandle) {
    h.pushes.borrow_mut().clear();
    forget(conn);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(data: &[u8], size: usize) -> Vec<Arc<[u8]>> {
        data.chunks(size).map(Arc::from).collect()
    }

    #[test]
    fn backlog_keeps_the_tail() {
        let mut b = Backlog::new(16 * 1024);
        let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
        for c in chunks(&data[..10_000], 1000) {
            b.append(c);
        }
        assert_eq!(b.tail(10), data[9_990..10_000].to_vec());
        for c in chunks(&data[10_000..], 1000) {
            b.append(c);
        }
        assert_eq!(b.histlen(), 16 * 1024);
        assert_eq!(b.tail(16 * 1024), data[40_000 - 16 * 1024..].to_vec());
        assert_eq!(b.tail(5), data[40_000 - 5..].to_vec());
    }

    #[test]
    fn backlog_keeps_what_a_replica_still_holds() {
        let mut b = Backlog::new(16 * 1024);
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let cs = chunks(&data, 1000);
        // A replica waiting for its snapshot holds every batch from the 10th on.
        let held: Vec<Arc<[u8]>> = cs[10..].to_vec();
        for c in cs {
            b.append(c);
        }
        assert_eq!(b.histlen(), 90_000);
        assert_eq!(b.tail(90_000), data[10_000..].to_vec());
        // It wrote them (or went away): back to the configured size.
        drop(held);
        b.trim();
        assert_eq!(b.histlen(), 16 * 1024);
        assert_eq!(b.tail(16 * 1024), data[100_000 - 16 * 1024..].to_vec());
        // One batch larger than the backlog keeps only the backlog's size of it.
        let big: Vec<u8> = (0..50_000u32).map(|i| (i % 7) as u8).collect();
        b.append(Arc::from(&big[..]));
        assert_eq!(b.histlen(), 16 * 1024);
        assert_eq!(b.tail(16 * 1024), big[50_000 - 16 * 1024..].to_vec());
        assert!(
            b.memory() < 21 * 1024,
            "the rest of the big batch was let go"
        );
        // A smaller size trims at once.
        let mut b2 = Backlog::new(64 * 1024);
        for c in chunks(&data, 1000) {
            b2.append(c);
        }
        b2.resize(20 * 1024);
        assert_eq!(b2.histlen(), 20 * 1024);
        assert_eq!(b2.tail(20 * 1024), data[100_000 - 20 * 1024..].to_vec());
    }
}
