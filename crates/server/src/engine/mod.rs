//! The shared-nothing engine: one shard per thread, cross-thread calls through inboxes.

pub mod access;
pub mod clock;
pub mod db;
pub mod evict;
pub mod guard;
pub mod inbox;
pub mod lazyfree;
pub mod mcstate;
pub mod memory;
pub mod notify;
pub mod pause;
pub mod router;
pub mod shard;
pub mod tracking;
pub mod vll;
pub mod waiters;
pub mod worker;

pub use router::shard_of;

/// DEBUG PAUSE-CRON: the periodic work of every thread (active expiry, eviction share, the
/// tracking table limit, the client cron) stops while set.
pub static CRON_PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
pub use worker::{Shared, Worker};
