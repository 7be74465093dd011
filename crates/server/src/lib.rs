//! Damselfly server: a multi-threaded, shared-nothing, Redis- and Memcached-compatible store.
//!
//! This crate is the top of the stack: `damselfly-core` (engine, command framework, clients,
//! network, subsystems) below `damselfly-families` (the data commands), both wired together
//! here ([`install`], [`start`]) and run by the binary. The modules below are core's,
//! re-exported.
//!
//! Where things live (docs/architecture.md has the full map and the layering rules):
//! - `config`   — flags, flagfile, `DFLY_*` env, redis.conf, CONFIG GET/SET; owners hear of
//!   their parameters through `config::hooks` (installed by [`install`]).
//! - `engine`   — shards (one per thread), databases with expiry, cross-thread inboxes, routing,
//!   VLL locks; the snapshot walk and RDB loader, the journal of writes, the node's role.
//! - `client`   — clients apart from their sockets: handles and their push queues, output
//!   limits, client eviction, the client cron.
//! - `commands` — the command framework (execute, registry, coordinator and hop API) and one
//!   module per data family (`string.rs`, `keys.rs`, ...); it names no subsystem above it.
//! - `net`, `memcache` — listeners, sessions, TLS, the HTTP console; the memcached protocols.
//! - `persistence` — snapshot files, schedules, SAVE/BGSAVE; `replication` — the primary's
//!   stream, the replica's link, SYNC/PSYNC/REPLICAOF; `scripting`, `pubsub`, `acl` — their
//!   subsystems, each with its own commands (`<subsystem>/commands.rs`).
//! - `admin` — server commands over every subsystem (INFO, CONFIG, DEBUG...), `/metrics`.
//! - The root wires the layers: [`install`] hands the lower ones what the higher ones
//!   provide (command families, configuration owners' hooks, FLUSHALL's save, replication's
//!   snapshot position), before anything starts.
//! - `clock`, `log`, `latency`, `stats`, `version` — leaves every layer may use.
//!
//! Values and their encodings (RDB included) are the `damselfly_types` crate, below this one.

pub use damselfly_core::request_shutdown;
pub use damselfly_core::{
    acl, admin, base64, client, clock, commands, config, engine, latency, log, memcache, net,
    persistence, process, pubsub, replication, scripting, stats, version,
};
pub use damselfly_core::{log_at, log_notice, log_verbose, log_warning};
pub use damselfly_families as families;

#[cfg(test)]
mod table_tests;

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use config::Config;
use engine::{Shared, Worker};

/// Installs what the lower layers run for the higher ones before anything starts: every command
/// family's spec list (commands::registry), FLUSHALL's save, and core's own wiring
/// ([`damselfly_core::install`]: configuration owners' hooks, what a snapshot asks of
/// replication). Call before the first `Config` is made (`main` does, first thing; so may
/// tests); later calls change nothing.
pub fn install() {
    let mut table: Vec<&'static [commands::CommandSpec]> = vec![
        families::string::COMMANDS,
        families::bitmap::COMMANDS,
        families::keys::COMMANDS,
        families::list::COMMANDS,
        families::hash::COMMANDS,
        families::set::COMMANDS,
        families::zset::COMMANDS,
        families::geo::COMMANDS,
        families::hll::COMMANDS,
        families::stream::COMMANDS,
        families::sort::COMMANDS,
    ];
    table.extend(damselfly_core::core_commands());
    commands::registry::install(table);
    families::keys::install_flushall_save(families::keys::FlushallSave {
        saves: persistence::commands::flushall_saves,
        save: |cx| Box::pin(persistence::commands::save_after_flushall(cx)),
    });
    damselfly_core::install();
}

/// Starts the server and blocks until SHUTDOWN or a termination signal.
pub fn start(cfg: Config) -> std::io::Result<()> {
    crate::clock::init();
    engine::guard::install_panic_hook();
    if let Some(level) = cfg.loglevel() {
        log::set_level(level);
    }
    if let Some(path) = cfg.logfile() {
        log::open_file(&path)?;
    }
    // As Redis: a supervised server stays in the foreground whatever `daemonize` says (its
    // supervisor follows this very process).
    let supervised = process::supervise::setup(&cfg);
    let background = cfg.daemonize() && !supervised;
    if background {
        process::daemonize()?;
    }
    process::log_starting(&cfg);
    adjust_open_files_limit(&cfg);
    process::apply_thp(&cfg);
    if let Err(e) = process::apply_oom_score_adj(&cfg.oom_score_adj(), &cfg.oom_score_adj_values())
    {
        crate::log_warning!("{e}");
    }
    process::apply_jemalloc_bg_thread(cfg.jemalloc_bg_thread());
    if let Err(e) = acl::load_at_startup(&cfg.acl_users(), &cfg.aclfile()) {
        crate::log_warning!("Aborting Redis startup because of ACL errors: {e}");
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("Aborting Redis startup because of ACL errors: {e}"),
        ));
    }
    if let Err(e) = commands::registry::install_renames(&cfg.renames()) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e));
    }
    damselfly_core::install_network_hooks();
    process::mark_started();
    let cfg = Arc::new(cfg);
    let shared = Shared::new(cfg.clone());
    engine::notify::set_sink(pubsub::publish_event);
    engine::tracking::set_sink(pubsub::tracking::sink);
    let port = cfg.port();
    let backlog = cfg.tcp_backlog();
    let mut bound = Vec::new();
    let unixsocket = cfg.unixsocket();
    let tls_port = cfg.tls_port();
    let admin_port = cfg.admin_port();
    let mc_port = cfg.memcached_port();
    if port == 0 && tls_port == 0 && unixsocket.is_empty() && mc_port == 0 && admin_port == 0 {
        crate::log_warning!("Configured to not listen anywhere, exiting.");
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "Configured to not listen anywhere (port 0 and no unixsocket), exiting.",
        ));
    }
    if net::tls::wanted(&cfg) {
        if let Err(e) = net::tls::configure(&cfg) {
            crate::log_warning!("{e}");
            crate::log_warning!("Failed to configure TLS. Check logs for more info.");
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("Failed to configure TLS: {e}"),
            ));
        }
    }
    for p in net::listener::Port::ALL {
        bound.extend(p.bind(&cfg)?);
    }
    if !unixsocket.is_empty() {
        let perm = cfg.unixsocketperm();
        match net::listener::bind_unix(&unixsocket, perm, backlog) {
            Ok(l) => bound.push(net::listener::Bound {
                socket: net::listener::BoundSocket::Unix(l),
                role: net::listener::Role::Resp,
                tls: false,
                port: None,
            }),
            Err(e) => {
                crate::log_warning!("Failed opening Unix socket: {e}");
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("Failed opening Unix socket {unixsocket}: {e}"),
                ));
            }
        }
    }
    // After binding, so that a server that cannot listen leaves a running one's pid file alone.
    let mut pidfile = process::PidFile::create(&cfg, background);
    process::log_banner(&cfg, port, shared.threads);
    crate::log_notice!("Server initialized");
    let cpus = allowed_cpus();
    let pin = cfg.pin_threads();
    // Why SCHED_BATCH when shard threads outnumber CPUs: then two shard threads share a CPU, and
    // under the default policy every cross-shard message wakes its receiver *and preempts the
    // sender*, so the two threads ping-pong one message at a time (measured: 0.64 context
    // switches per op for MSETs whose keys all live on the other thread's shard). A SCHED_BATCH
    // wakee does not preempt; it runs when the sender blocks or its slice ends, and then handles
    // everything queued for it in one go.
    let batch = cfg
        .shard_sched_batch()
        .unwrap_or_else(|| !cpus.is_empty() && shared.threads > cpus.len());
    if batch {
        crate::log_notice!("more shard threads than CPUs: shard threads run under SCHED_BATCH");
    }
    // The snapshot loads while the server already answers: commands that need the data get
    // `-LOADING` until every shard has its keys (INFO, PING-free admin commands work), as in
    // Redis. Nothing is served from a partial dataset.
    let snapshot = persistence::load_path(&shared.config);
    let loading = snapshot.exists();
    shared.persist.loading.store(loading, Ordering::SeqCst);
    let mut listeners = Some(bound);
    let mut handles = Vec::new();
    for i in 0..shared.threads {
        let shared = shared.clone();
        let ls = if i == 0 {
            listeners.take().unwrap_or_default()
        } else {
            Vec::new()
        };
        let cpu = if pin && !cpus.is_empty() {
            Some(cpus[i % cpus.len()])
        } else {
            None
        };
        handles.push(
            std::thread::Builder::new()
                .name(format!("shard-{i}"))
                // Scripts run here: Lua's C calls and cjson/cmsgpack nesting (up to 1000
                // levels) recurse on this stack. Only the pages used are committed.
                .stack_size(16 << 20)
                .spawn(move || thread_main(i, shared, ls, cpu, batch))?,
        );
    }
    if loading {
        if let Err(e) = load_snapshot(&shared, &snapshot) {
            // The last line of the log says why (tools and Redis's tests read it).
            pidfile.remove();
            crate::log_warning!("{e}");
            std::process::exit(1);
        }
    }
    wait_accepting(&shared);
    crate::log_notice!("Ready to accept connections");
    if !unixsocket.is_empty() {
        crate::log_notice!("The server is now ready to accept connections at {unixsocket}");
    }
    process::supervise::ready(shared.config.has_replicaof());
    for h in handles {
        let _ = h.join();
    }
    pidfile.remove();
    if !unixsocket.is_empty() {
        crate::log_notice!("Removing the unix socket file.");
        let _ = std::fs::remove_file(&unixsocket);
    }
    crate::log_warning!("Damselfly is now ready to exit, bye bye...");
    Ok(())
}

/// Returns once thread 0, which accepts for every thread, runs its inbox: its accept loops are
/// spawned before it first waits, so from then on every listener accepts (and the kernel
/// completes connections since `listen`). What "ready" means for supervisors and the log.
fn wait_accepting(shared: &Shared) {
    let (tx, rx) = std::sync::mpsc::channel();
    shared.post(
        shared.threads,
        0,
        Box::new(move |_: &Worker| {
            let _ = tx.send(());
        }),
    );
    let _ = rx.recv();
}

/// Loads the snapshot at `path` into the running shards: the file is read and parsed
/// completely first (a bad file fails before any shard sees a key), then every shard inserts
/// its batch on its own thread; `loading` ends once all have.
fn load_snapshot(shared: &Shared, path: &std::path::Path) -> Result<(), String> {
    let started = std::time::Instant::now();
    let lim = shared.config.enc_limits();
    let delay = shared.config.key_load_delay();
    let fatal = |e: &dyn std::fmt::Display| {
        format!(
            "Fatal error loading the DB ({}): {e}. Exiting.",
            path.display()
        )
    };
    let ds = engine::rdb_load::load_path_slowly(
        path,
        shared.threads,
        shared.config.dbnum(),
        crate::clock::unix_ms(),
        &lim,
        delay,
    )
    .map_err(|e| fatal(&e))?;
    let Some(ds) = ds else {
        shared.persist.loading.store(false, Ordering::SeqCst);
        return Ok(());
    };
    // A replica's own snapshot: its link continues from where the snapshot stands. A
    // primary's: it continues its stream from there (journaling on every shard before any
    // write), so its replicas continue with PSYNC.
    let follows = shared.config.has_replicaof();
    let mut journal_everywhere = false;
    if let (Some((id, offset)), Some(db)) = (ds.repl_position.clone(), ds.repl_stream_db) {
        if id.len() == 40 {
            if follows {
                if offset > 0 {
                    replication::replica::resume_from_snapshot(id, offset, db);
                }
            } else {
                replication::restore_primary(id, offset, shared.config.repl_backlog_size());
                journal_everywhere = true;
            }
        }
    }
    // Function libraries: every thread loads them into its registry before serving.
    let codes: std::sync::Arc<Vec<String>> = std::sync::Arc::new(
        ds.functions
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..shared.threads {
        let (tx, codes) = (tx.clone(), codes.clone());
        shared.post(
            shared.threads,
            i,
            Box::new(move |_: &Worker| {
                if journal_everywhere {
                    engine::journal::enable_here();
                }
                let _ = tx.send(scripting::functions::load_here(&codes, true, false));
            }),
        );
    }
    drop(tx);
    for res in rx.iter() {
        res.map_err(|e| fatal(&e))?;
    }
    if journal_everywhere {
        engine::journal::begin(&shared.next_txid);
        // The keys that expired while the server was down leave the replicas too, before
        // anything else (Redis: DEL, or UNLINK with lazyfree-lazy-expire).
        let verb: &[u8] = if shared.config.lazyfree_lazy_expire() {
            b"UNLINK"
        } else {
            b"DEL"
        };
        engine::journal::push_records(
            ds.expired
                .iter()
                .map(|(db, key)| engine::journal::Record {
                    db: *db,
                    resp: engine::journal::encode(&[verb, key]),
                })
                .collect(),
        );
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, batch) in ds.shards.into_iter().enumerate() {
        let tx = tx.clone();
        shared.post(
            shared.threads,
            i,
            Box::new(move |w: &Worker| {
                let _ = tx.send(engine::rdb_load::apply(&mut w.shard_mut(), batch));
            }),
        );
    }
    drop(tx);
    for res in rx.iter() {
        res.map_err(|e| fatal(&e))?;
    }
    let p = &shared.persist;
    p.last_load_keys_loaded
        .store(ds.keys_loaded, Ordering::Relaxed);
    p.last_load_keys_expired
        .store(ds.keys_expired, Ordering::Relaxed);
    crate::log_notice!(
        "Done loading RDB, keys loaded: {}, keys expired: {}.",
        ds.keys_loaded,
        ds.keys_expired
    );
    // As Redis, once every key is in place (read, parse and insert).
    crate::log_notice!(
        "DB loaded from disk: {:.3} seconds",
        started.elapsed().as_secs_f64()
    );
    p.loading.store(false, Ordering::SeqCst);
    Ok(())
}

fn thread_main(
    id: usize,
    shared: Arc<Shared>,
    listeners: Vec<net::listener::Bound>,
    cpu: Option<usize>,
    batch: bool,
) {
    if let Some(cpu) = cpu {
        pin_to(cpu);
    }
    if batch {
        // SAFETY: changes the calling thread's scheduling policy only (no privilege needed to
        // move from SCHED_OTHER to SCHED_BATCH).
        unsafe {
            let p = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &p);
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::log_warning!("cannot start runtime on thread {id}: {e}");
            std::process::exit(1);
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let w = Worker::new(id, shared.clone());
        tokio::task::spawn_local(w.clone().run_inbox());
        tokio::task::spawn_local(w.clone().run_ticker());
        tokio::task::spawn_local(client::cron::run(w.clone()));
        for l in listeners {
            net::listener::spawn(w.clone(), l);
        }
        if id == 0 {
            tokio::task::spawn_local(watch_signals(w.clone()));
            tokio::task::spawn_local(persistence::commands::save_cron(w.clone()));
            tokio::task::spawn_local(replication::feed(w.clone()));
            // `replicaof <host> <port>` in the configuration: follow it from the start.
            if let Some((host, port)) = w.shared.config.replicaof() {
                replication::replica::start(&w, host, port);
            }
        }
        wait_shutdown(&w).await;
    });
}

/// Blocks until `request_shutdown` is called.
async fn wait_shutdown(w: &Rc<Worker>) {
    loop {
        let n = w.shared.shutdown_notify.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        if w.shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        n.await;
    }
}

async fn watch_signals(w: Rc<Worker>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    loop {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        crate::log_warning!("Received {name} scheduling shutdown...");
        crate::log_warning!("User requested shutdown...");
        process::supervise::stopping();
        // `shutdown-on-sigint` / `shutdown-on-sigterm` (Redis 7.0): by default the final
        // snapshot is taken when save points are configured, `save` / `nosave` decide instead;
        // the snapshot must succeed or the server keeps running (nothing acknowledged is lost
        // by exiting), unless `force`; lagging replicas first get `shutdown-timeout` seconds,
        // unless `now`.
        let flags = if name == "SIGINT" {
            w.shared.config.shutdown_on_sigint()
        } else {
            w.shared.config.shutdown_on_sigterm()
        };
        let has = |f: &str| flags.split(' ').any(|x| x == f);
        if !replication::before_shutdown(&w.shared.config, has("now")).await {
            crate::log_warning!(
                "{name} received but errors trying to shut down the server, check the \
                 logs for more information"
            );
            continue;
        }
        let save = if has("nosave") {
            false
        } else {
            has("save") || !persistence::commands::save_points(&w.shared.config).is_empty()
        };
        if save {
            let mut cx = commands::ConnCtx::internal(w.clone());
            if let Err(e) = persistence::commands::shutdown_save(&mut cx).await {
                if has("force") {
                    crate::log_warning!("Error trying to save the DB, exiting anyway (force): {e}");
                } else {
                    crate::log_warning!("Error trying to save the DB, can't exit: {e}");
                    process::supervise::status("Error trying to save the DB, can't exit.");
                    crate::engine::pause::shutdown_pause(false);
                    crate::log_warning!(
                        "{name} received but errors trying to shut down the server, check the \
                         logs for more information"
                    );
                    continue;
                }
            }
        }
        net::listener::stop_all().await;
        request_shutdown(&w.shared);
        return;
    }
}

/// Descriptors kept for listeners, logs and the runtime besides clients (Redis's
/// CONFIG_MIN_RESERVED_FDS).
const RESERVED_FDS: u64 = 32;

/// As Redis: raise the open-files limit to `maxclients` + reserved descriptors, and when the
/// operating system will not allow that, lower `maxclients` to what fits (with a warning), so
/// that `-ERR max number of clients reached` comes before the process runs out of descriptors.
fn adjust_open_files_limit(cfg: &Config) {
    let maxclients = cfg.maxclients() as u64;
    let wanted = maxclients + RESERVED_FDS;
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    if lim.rlim_cur >= wanted {
        return;
    }
    let target = wanted.min(lim.rlim_max);
    let raised = libc::rlimit {
        rlim_cur: target,
        rlim_max: lim.rlim_max,
    };
    let now = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        target
    } else {
        lim.rlim_cur
    };
    if now < wanted {
        let reduced = now.saturating_sub(RESERVED_FDS).max(1);
        crate::log_warning!(
            "You requested maxclients of {maxclients} requiring at least {wanted} max file \
             descriptors. Server can't set maximum open files to {wanted}; current maximum \
             open files is {now}. maxclients has been reduced to {reduced} to compensate for \
             low ulimit. If you need higher maxclients increase 'ulimit -n'."
        );
        let _ = cfg.set_startup("maxclients", &reduced.to_string());
    } else {
        crate::log_notice!(
            "Increased maximum number of open files to {now} (it was originally set to {}).",
            lim.rlim_cur
        );
    }
}

/// CPUs this process may run on (respects `taskset`), so pinning never escapes the given set.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: plain libc calls on a zeroed cpu_set_t owned by this frame.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_to(cpu: usize) {
    // SAFETY: as above; pins only the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
