//! The coordinator: how a command's work reaches the shards that own its keys, atomically.
//!
//! - `plan.rs`: lock plans, computed from the command's declaration (key spec, global flags,
//!   `plan` hook) by `execute` for every command, by EXEC for its queue, by squashing per run.
//! - `hops.rs`: the hop API command code uses (`cx.hops().on_key(..).per_shard(..).run()`).
//! - `schedule.rs`: `Coord`, the connection's coordination state, and transaction scheduling
//!   (the coordinator half of VLL; the shard half is `engine::vll`).
//! - `squash.rs`: a pipeline's consecutive single-key commands, one message per shard.
//! - `wait.rs`: blocking commands (BLPOP...) waiting on shards.
//!
//! Single-shard commands run on their shard at once (inline when it is this thread's) unless a
//! queued transaction holds one of their keys, in which case they wait there for it. Commands
//! whose keys span shards, global commands (FLUSHALL, DBSIZE, KEYS, SORT with BY/GET patterns)
//! and EXEC run as transactions: scheduled on every shard of their plan before any hop runs, so
//! no other client ever observes a half-applied MSET or RENAME.

pub mod hops;
pub mod plan;
pub mod schedule;
pub mod squash;
pub mod wait;

pub use hops::{Hops, ShardPart};
pub use plan::LockPlan;
pub use schedule::Coord;

use super::spec::CommandSpec;
use super::{flags, ConnCtx};

/// The lock plan of the current command. Empty when there is one shard and no transaction is
/// queued on it (nothing to lock or check, and nothing to route).
pub fn plan_command(cx: &ConnCtx, spec: &CommandSpec, args: &[&[u8]]) -> LockPlan {
    let threads = cx.threads();
    let global = spec.flags & (flags::TX_GLOBAL_READ | flags::TX_GLOBAL_WRITE) != 0;
    if !global && threads == 1 && cx.worker.vll().idle() {
        return LockPlan::default();
    }
    let mut plan = LockPlan::new(threads, cx.db, cx.shared().config.dbnum());
    plan.add_command(spec, args);
    plan
}

/// A connection that goes away mid-command (a panicking command unwinds through the
/// connection task) must not leave locks behind: conclude its transaction on every shard.
impl Drop for ConnCtx {
    fn drop(&mut self) {
        let w = self.worker.clone();
        self.coord.abandon(&w);
    }
}
