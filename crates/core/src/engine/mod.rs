//! The shared-nothing engine: one shard per thread, cross-thread calls through inboxes.

pub mod access;
pub mod busy;
pub mod db;
pub mod evict;
pub mod guard;
pub mod inbox;
pub mod journal;
pub mod lazyfree;
pub mod mcstate;
pub mod memory;
pub mod notify;
pub mod pause;
pub mod persist;
pub mod rdb_load;
pub mod role;
pub mod router;
pub mod shard;
pub mod snapshot;
pub mod tracking;
pub mod vll;
pub mod waiters;
pub mod worker;

pub use router::shard_of;

/// DEBUG PAUSE-CRON: the periodic work of every thread (active expiry, eviction share, the
/// tracking table limit, the client cron) stops while set.
pub static CRON_PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
pub use worker::{Shared, Worker};

/// The engine's configuration hooks (config::hooks): eviction, memory accounting, access
/// statistics, client-side caching and keyspace notifications read their parameters here.
pub const CONFIG_HOOKS: &[crate::config::hooks::Hook] = {
    use crate::config::hooks::Hook;
    fn num(v: &str) -> u64 {
        v.parse().unwrap_or(0)
    }
    &[
        Hook {
            apply: Some(|v| {
                evict::set_maxmemory(num(v));
                memory::set_counting(num(v) != 0);
            }),
            ..Hook::new("maxmemory")
        },
        Hook {
            apply: Some(|v| {
                if let Some(p) = evict::Policy::parse(v) {
                    evict::set_policy(p);
                }
            }),
            ..Hook::new("maxmemory-policy")
        },
        Hook {
            apply: Some(|v| evict::set_samples(num(v))),
            ..Hook::new("maxmemory-samples")
        },
        Hook {
            apply: Some(|v| evict::set_tenacity(num(v))),
            ..Hook::new("maxmemory-eviction-tenacity")
        },
        Hook {
            apply: Some(|v| evict::set_cache_mode(v == "yes")),
            ..Hook::new("cache_mode")
        },
        Hook {
            apply: Some(|v| access::set_lfu_log_factor(num(v) as u32)),
            ..Hook::new("lfu-log-factor")
        },
        Hook {
            apply: Some(|v| access::set_lfu_decay_time(num(v) as u32)),
            ..Hook::new("lfu-decay-time")
        },
        Hook {
            apply: Some(|v| tracking::set_max_keys(num(v))),
            ..Hook::new("tracking-table-max-keys")
        },
        Hook {
            check: Some(|v| {
                notify::parse(v)
                    .map(notify::to_string)
                    .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
            }),
            apply: Some(|v| notify::set_flags(notify::parse(v).unwrap_or(0))),
            ..Hook::new("notify-keyspace-events")
        },
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Owners' hooks check what only they know and hear of stored values: a bad
    /// notification class or cron expression is refused with the owner's reason, a good one is
    /// canonicalised by it and reaches the owner's state.
    #[test]
    fn owner_hooks_check_and_apply() {
        crate::install_for_tests();
        let c = crate::config::Config::new();
        match c.set("notify-keyspace-events", "KQ") {
            Err(crate::config::ConfigError::BadValue { why, .. }) => {
                assert!(why.contains("event class"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        assert!(c.set("snapshot_cron", "61 * * * *").is_err());
        c.set("notify-keyspace-events", "Eg").unwrap();
        assert_eq!(c.get("notify-keyspace-events").as_deref(), Some("gE"));
        assert!(notify::enabled(notify::GENERIC));
        c.set("notify-keyspace-events", "").unwrap();
        assert!(!notify::enabled(notify::GENERIC));
    }
}
