//! Client-side caching (CLIENT TRACKING), the shard side: which clients read which keys here
//! (Redis's tracking table, one per shard thread), the BCAST prefixes (a replica on every
//! thread), and the invalidations a write of a key sends. Delivering an invalidation to a
//! connection (its redirection, RESP3 push or `__redis__:invalidate` message) is the connection
//! layer's (`pubsub::tracking`), installed as the sink at start-up. Design:
//! docs/design/pubsub.md ("Client-side caching").

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use smallvec::SmallVec;

/// A tracking connection: `conn` on thread `thread`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    pub thread: usize,
    pub conn: u64,
}

/// Where invalidations go: `keys` (None: everything, after a flush) were modified by
/// connection `writer` (0: by the server: expiry, eviction); `bcast`: a BCAST batch (else from
/// the tracking table). Runs on the shard's thread and must not block.
pub type Sink = fn(target: Target, keys: Option<Vec<Box<[u8]>>>, writers: Vec<u64>, bcast: bool);
static SINK: OnceLock<Sink> = OnceLock::new();

pub fn set_sink(sink: Sink) {
    let _ = SINK.set(sink);
}

/// Connections with tracking on, server-wide: with none, a write costs one relaxed load.
static CLIENTS: AtomicUsize = AtomicUsize::new(0);
/// Keys in every shard's table, and (key, client) pairs (INFO `tracking_total_keys`/`items`).
static TOTAL_KEYS: AtomicU64 = AtomicU64::new(0);
static TOTAL_ITEMS: AtomicU64 = AtomicU64::new(0);
/// Distinct BCAST prefixes (INFO `tracking_total_prefixes`).
static TOTAL_PREFIXES: AtomicUsize = AtomicUsize::new(0);
/// `tracking-table-max-keys` (0: no limit).
static MAX_KEYS: AtomicU64 = AtomicU64::new(1_000_000);

pub fn client_enabled() {
    CLIENTS.fetch_add(1, Ordering::Relaxed);
}

pub fn client_disabled() {
    CLIENTS.fetch_sub(1, Ordering::Relaxed);
}

/// Are the tables over `tracking-table-max-keys` (a lowered limit not applied yet)?
#[inline]
pub fn over_limit() -> bool {
    let max = MAX_KEYS.load(Ordering::Relaxed);
    max != 0 && TOTAL_KEYS.load(Ordering::Relaxed) > max
}

#[inline]
pub fn active() -> bool {
    CLIENTS.load(Ordering::Relaxed) != 0
}

pub fn clients() -> usize {
    CLIENTS.load(Ordering::Relaxed)
}

pub fn set_max_keys(n: u64) {
    MAX_KEYS.store(n, Ordering::Relaxed);
}

/// (tracking_total_keys, tracking_total_items, tracking_total_prefixes).
pub fn totals() -> (u64, u64, usize) {
    (
        TOTAL_KEYS.load(Ordering::Relaxed),
        TOTAL_ITEMS.load(Ordering::Relaxed),
        TOTAL_PREFIXES.load(Ordering::Relaxed),
    )
}

/// A BCAST registration in a thread's replica.
struct Prefix {
    prefix: Box<[u8]>,
    target: Target,
}

/// Keys written under a BCAST prefix since the last flush, with their writers.
type Pending = HashMap<(Target, Box<[u8]>), (Vec<Box<[u8]>>, Vec<u64>)>;

/// Key → the connections that read it (Redis's TrackingTable, this shard's part).
type Table = HashMap<Box<[u8]>, SmallVec<[Target; 2]>>;

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(HashMap::new());
    static PREFIXES: RefCell<Vec<Prefix>> = const { RefCell::new(Vec::new()) };
    /// The connection whose command runs on this shard right now (NOLOOP).
    static WRITER: Cell<u64> = const { Cell::new(0) };
    static PENDING: RefCell<Pending> = RefCell::new(HashMap::new());
    static FLUSH_SCHEDULED: Cell<bool> = const { Cell::new(false) };
}

/// Sets the connection running a command on this shard; returns the previous one.
#[inline]
pub fn set_writer(conn: u64) -> u64 {
    WRITER.with(|w| w.replace(conn))
}

/// On the key's shard: `target` read `key` (default mode); a later write of it invalidates.
pub fn remember(target: Target, key: &[u8]) {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let entry = t.entry(key.into()).or_insert_with(|| {
            TOTAL_KEYS.fetch_add(1, Ordering::Relaxed);
            SmallVec::new()
        });
        if !entry.contains(&target) {
            entry.push(target);
            TOTAL_ITEMS.fetch_add(1, Ordering::Relaxed);
        }
    });
    limit_keys();
}

/// One shard at a time gives up keys for the limit, so that together they stop exactly at it.
static LIMITING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `tracking-table-max-keys`: over it, this shard's table gives up keys (each invalidated for
/// its readers, as Redis's `trackingLimitUsedSlots`) until the total is back under the limit
/// or this shard has none left. Called when a key is remembered and from every shard's tick
/// (a lowered limit applies without traffic, as in Redis's cron).
pub fn limit_keys() {
    let max = MAX_KEYS.load(Ordering::Relaxed);
    if max == 0 || TOTAL_KEYS.load(Ordering::Relaxed) <= max {
        return;
    }
    if LIMITING.swap(true, Ordering::Acquire) {
        return;
    }
    while TOTAL_KEYS.load(Ordering::Relaxed) > max {
        let victim = TABLE.with(|t| t.borrow().keys().next().cloned());
        let Some(key) = victim else {
            break;
        };
        let prev = set_writer(0);
        invalidate_table(&key);
        set_writer(prev);
    }
    LIMITING.store(false, Ordering::Release);
}

/// A write of `key` on this shard (the engine's modification hook, as Redis's
/// `trackingInvalidateKey`): its readers are told once and forgotten; BCAST clients whose prefix
/// matches get it in the next batch.
#[inline]
pub fn modified(key: &[u8]) {
    if !active() {
        return;
    }
    invalidate_table(key);
    collect_bcast(key);
}

fn invalidate_table(key: &[u8]) {
    let targets = TABLE.with(|t| t.borrow_mut().remove(key));
    let Some(targets) = targets else {
        return;
    };
    TOTAL_KEYS.fetch_sub(1, Ordering::Relaxed);
    TOTAL_ITEMS.fetch_sub(targets.len() as u64, Ordering::Relaxed);
    let Some(sink) = SINK.get() else {
        return;
    };
    let writer = WRITER.with(|w| w.get());
    for t in targets {
        sink(t, Some(vec![key.into()]), vec![writer], false);
    }
}

fn collect_bcast(key: &[u8]) {
    let writer = WRITER.with(|w| w.get());
    let mut any = false;
    PREFIXES.with(|p| {
        for pr in p.borrow().iter() {
            if key.starts_with(&pr.prefix) {
                any = true;
                PENDING.with(|q| {
                    let mut q = q.borrow_mut();
                    let e = q.entry((pr.target, pr.prefix.clone())).or_default();
                    e.0.push(key.into());
                    e.1.push(writer);
                });
            }
        }
    });
    // A client's command is flushed when it completes (`flush_bcast`, sent by the command's
    // connection after its last hop: a transaction's or an MSET's keys under one prefix make
    // one message, as Redis sends a batch per event loop). The server's own writes (expiry,
    // eviction) go once this thread's current work is done.
    if any && writer == 0 && !FLUSH_SCHEDULED.with(|f| f.replace(true)) {
        tokio::task::spawn_local(async {
            tokio::task::yield_now().await;
            flush_bcast();
        });
    }
}

/// Are there BCAST clients (so that a finished command should flush the batches)?
#[inline]
pub fn bcast_active() -> bool {
    TOTAL_PREFIXES.load(Ordering::Relaxed) != 0
}

/// One BCAST batch: the keys written under one prefix a target follows, with their writers.
pub type Batch = (Target, Vec<Box<[u8]>>, Vec<u64>);

/// Takes this shard's pending BCAST batches, for the finished command's connection to deliver
/// before its reply (`pubsub::tracking::deliver_batches`).
pub fn take_bcast() -> Vec<Batch> {
    FLUSH_SCHEDULED.with(|f| f.set(false));
    let pending = PENDING.with(|q| std::mem::take(&mut *q.borrow_mut()));
    pending
        .into_iter()
        .map(|((target, _), (keys, writers))| (target, keys, writers))
        .collect()
}

/// Sends this shard's pending BCAST batches (the server's own writes: no reply to order them
/// before).
pub fn flush_bcast() {
    let pending = take_bcast();
    let Some(sink) = SINK.get() else {
        return;
    };
    for (target, keys, writers) in pending {
        sink(target, Some(keys), writers, true);
    }
}

/// FLUSHALL / FLUSHDB on this shard: the whole table goes (Redis's tracking table does not
/// distinguish databases); the connection layer sends the null invalidation.
pub fn forget_all() {
    let (keys, items) = TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let items: usize = t.values().map(|v| v.len()).sum();
        let keys = t.len();
        t.clear();
        (keys, items)
    });
    TOTAL_KEYS.fetch_sub(keys as u64, Ordering::Relaxed);
    TOTAL_ITEMS.fetch_sub(items as u64, Ordering::Relaxed);
}

/// This thread's replica: `target` follows the keys starting with `prefix` (BCAST).
pub fn add_prefix(target: Target, prefix: &[u8], first_thread: bool) {
    PREFIXES.with(|p| {
        let mut p = p.borrow_mut();
        if first_thread && !p.iter().any(|x| &x.prefix[..] == prefix) {
            TOTAL_PREFIXES.fetch_add(1, Ordering::Relaxed);
        }
        p.push(Prefix {
            prefix: prefix.into(),
            target,
        });
    });
}

/// This thread's replica: `target` stops following any prefix.
pub fn remove_prefixes(target: Target, first_thread: bool) {
    PREFIXES.with(|p| {
        let mut p = p.borrow_mut();
        let mine: Vec<Box<[u8]>> = p
            .iter()
            .filter(|x| x.target == target)
            .map(|x| x.prefix.clone())
            .collect();
        p.retain(|x| x.target != target);
        if first_thread {
            for m in mine {
                if !p.iter().any(|x| x.prefix == m) {
                    TOTAL_PREFIXES.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    });
}
