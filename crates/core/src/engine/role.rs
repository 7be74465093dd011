//! Which role this server plays, as the engine needs to know it: whether it is a replica, and
//! whether the shard work running now is its primary's stream. In the core so that the engine
//! names no subsystem; the link itself (`replication::replica`) sets it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// This server replicates a primary (one relaxed load on every write command).
static REPLICA: AtomicBool = AtomicBool::new(false);

/// The link starts (true) or stops (false) following a primary.
pub fn set_replica(on: bool) {
    REPLICA.store(on, Ordering::SeqCst);
}

/// `replica-read-only` (mirrored from the configuration).
static READ_ONLY: AtomicBool = AtomicBool::new(true);

pub fn set_read_only(v: bool) {
    READ_ONLY.store(v, Ordering::Relaxed);
}

/// A replica whose own clients may write (`replica-read-only no`).
#[inline]
pub fn writable_replica() -> bool {
    is_replica() && !READ_ONLY.load(Ordering::Relaxed)
}

/// A write on a replica by one of its own clients (not the primary's stream)?
#[inline]
pub fn local_write_on_replica() -> bool {
    is_replica() && !APPLYING.with(|a| a.get())
}

/// The client id of the context applying the primary's stream.
static MASTER_CLIENT: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The shard work running now is the primary's stream being applied.
    static APPLYING: Cell<bool> = const { Cell::new(false) };
}

#[inline]
pub fn is_replica() -> bool {
    REPLICA.load(Ordering::Relaxed)
}

pub fn set_master_client(id: u64) {
    MASTER_CLIENT.store(id, Ordering::Relaxed);
}

/// Shard work for `client` begins (`CmdCtx::over`): is it the primary's? Returns the previous
/// state, for [`end_work`].
#[inline]
pub fn begin_work(client: u64) -> bool {
    let from_master = is_replica() && client == MASTER_CLIENT.load(Ordering::Relaxed);
    APPLYING.with(|a| a.replace(from_master))
}

/// Is the shard work running now the primary's stream (Redis's `mustObeyClient`)?
#[inline]
pub fn applying() -> bool {
    APPLYING.with(|a| a.get())
}

#[inline]
pub fn end_work(prev: bool) {
    APPLYING.with(|a| a.set(prev));
}

/// A replica never expires keys itself, as in Redis: its primary's `DEL` does (otherwise a
/// write of the primary that found the key alive could meet it expired here). Its primary's
/// commands see a key past its deadline as alive, other clients as gone; nobody deletes it.
/// `Some(alive)` on a replica, `None` on a primary (expire as usual).
#[inline]
pub fn stale_key_alive() -> Option<bool> {
    if !is_replica() {
        return None;
    }
    Some(APPLYING.with(|a| a.get()))
}

/// Writes are refused now for want of good replicas (`min-replicas-to-write`): refreshed by the
/// replication feeder every 100 ms, so a write command pays one relaxed load.
static TOO_FEW_REPLICAS: AtomicBool = AtomicBool::new(false);

#[inline]
pub fn too_few_replicas() -> bool {
    TOO_FEW_REPLICAS.load(Ordering::Relaxed)
}

pub fn set_too_few_replicas(v: bool) {
    TOO_FEW_REPLICAS.store(v, Ordering::Relaxed);
}

/// A replica's link to its primary is up (one relaxed load for `replica-serve-stale-data no`).
static LINK_UP: AtomicBool = AtomicBool::new(false);

#[inline]
pub fn link_is_up() -> bool {
    LINK_UP.load(Ordering::Relaxed)
}

pub fn set_link_up(v: bool) {
    LINK_UP.store(v, Ordering::Relaxed);
}
