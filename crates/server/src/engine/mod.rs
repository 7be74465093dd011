//! The shared-nothing engine: one shard per thread, cross-thread calls through inboxes.

pub mod access;
pub mod clock;
pub mod db;
pub mod evict;
pub mod guard;
pub mod inbox;
pub mod memory;
pub mod notify;
pub mod router;
pub mod shard;
pub mod vll;
pub mod waiters;
pub mod worker;

pub use router::shard_of;
pub use worker::{Shared, Worker};
