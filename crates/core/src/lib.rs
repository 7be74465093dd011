//! Damselfly's server below the data families: the engine (shards, VLL transactions, the
//! journal, the snapshot walk), the command framework (execute, registry, coordinator and hop
//! API), clients and the network, and the subsystems with their own commands (persistence,
//! replication, scripting, pub/sub, ACL, admin). The data families are `damselfly-families`,
//! above this crate; `damselfly` (crates/server) wires both together and is the binary.
//! docs/architecture.md has the map and the layering rules.
//!
//! - `config`   — flags, flagfile, `DFLY_*` env, redis.conf, CONFIG GET/SET; owners hear of
//!   their parameters through `config::hooks`.
//! - `engine`   — shards (one per thread), databases with expiry, cross-thread inboxes, routing,
//!   VLL locks; the snapshot walk and RDB loader, the journal of writes, the node's role.
//! - `client`   — clients apart from their sockets: handles and their push queues, output
//!   limits, client eviction, the client cron.
//! - `commands` — the command framework (execute, registry, coordinator and hop API) and the
//!   connection-level families (connection, MULTI, pub/sub, DUMP/RESTORE, MIGRATE); it names no
//!   subsystem above it, and no data family.
//! - `net`, `memcache` — listeners, sessions, TLS, the HTTP console; the memcached protocols.
//! - `persistence` — snapshot files, schedules, SAVE/BGSAVE; `replication` — the primary's
//!   stream, the replica's link, SYNC/PSYNC/REPLICAOF; `scripting`, `pubsub`, `acl` — their
//!   subsystems, each with its own commands (`<subsystem>/commands.rs`).
//! - `admin` — server commands over every subsystem (INFO, CONFIG, DEBUG...), `/metrics`.
//! - `clock`, `log`, `latency`, `stats`, `version` — leaves every layer may use.
//!
//! Values and their encodings (RDB included) are the `damselfly_types` crate, below this one.

pub mod acl;
pub mod admin;
pub mod base64;
pub mod client;
pub mod clock;
pub mod commands;
pub mod config;
pub mod engine;
pub mod latency;
pub mod log;
pub mod memcache;
pub mod net;
pub mod persistence;
pub mod process;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod stats;
pub mod version;

/// Makes every shard thread leave its event loop; `damselfly::start` then returns.
pub fn request_shutdown(shared: &engine::Shared) {
    shared
        .shutdown
        .store(true, std::sync::atomic::Ordering::SeqCst);
    shared.shutdown_notify.notify_waiters();
}

/// Installs what the network layer runs for the layers above it: the memcached protocol's
/// sessions and the disconnect hooks (before the listeners start).
pub fn install_network_hooks() {
    client::set_context_size(std::mem::size_of::<commands::ConnCtx>());
    net::listener::install_memcache(|w, s| Box::pin(memcache::session::serve(w, s)));
    net::http::install_pages(net::http::Pages {
        metrics: |cx| Box::pin(admin::prometheus_metrics(cx)),
        console: |cx| Box::pin(admin::console_page(cx)),
    });
    net::session::install_disconnect_hooks(&[pubsub::on_disconnect, replication::on_disconnect]);
}

/// Core's own wiring, before anything starts (`damselfly::install` calls it after installing
/// the command table): every module's configuration hooks (config::hooks) and what a snapshot
/// asks of replication (persistence sits below replication). Later calls change nothing.
pub fn install() {
    persistence::commands::install_replication_hooks(persistence::commands::ReplicationHooks {
        pause_link: || Box::pin(replication::replica::pause()),
        resume_link: replication::replica::resume,
        replica_position: || {
            let m = replication::master();
            (
                m.replid.clone(),
                m.offset,
                replication::replica::stream_db(),
            )
        },
        primary_position: || {
            Box::pin(async {
                let offset = replication::settled_offset().await;
                (replication::master().replid.clone(), offset)
            })
        },
    });
    config::hooks::install(&[
        engine::CONFIG_HOOKS,
        replication::CONFIG_HOOKS,
        acl::CONFIG_HOOKS,
        persistence::CONFIG_HOOKS,
        process::CONFIG_HOOKS,
        commands::registry::CONFIG_HOOKS,
    ]);
}

/// The command lists core declares: the connection-level families (connection, MULTI, pub/sub,
/// DUMP/RESTORE, MIGRATE) and the subsystems' commands. The data families are above this crate
/// (`damselfly-families`); `damselfly::install` puts both in the table.
pub fn core_commands() -> Vec<&'static [commands::CommandSpec]> {
    #[allow(unused_mut)]
    let mut v: Vec<&'static [commands::CommandSpec]> = vec![
        commands::connection::COMMANDS,
        acl::commands::COMMANDS,
        admin::COMMANDS,
        commands::multi::COMMANDS,
        persistence::commands::COMMANDS,
        commands::dump::COMMANDS,
        commands::migrate::COMMANDS,
        replication::commands::COMMANDS,
        scripting::commands::COMMANDS,
        commands::pubsub::COMMANDS,
    ];
    // Test-only commands that panic on purpose (never in a release build's table).
    #[cfg(any(debug_assertions, feature = "fault-injection"))]
    v.push(commands::fault::COMMANDS);
    v
}

/// Core's unit tests build the table without the data families.
#[cfg(test)]
pub(crate) fn install_for_tests() {
    commands::registry::install(core_commands());
    install();
}
