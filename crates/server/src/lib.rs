//! Damselfly server: a multi-threaded, shared-nothing, Redis- and Memcached-compatible store.
//!
//! Where things live:
//! - `config`   — flags, flagfile, `DFLY_*` env, CONFIG GET/SET registry.
//! - `engine`   — shards (one per thread), databases with expiry, cross-thread inboxes, routing.
//! - `types`    — compact representations (`KeyStr` keys, `CompactStr` string values, `Value`).
//! - `server`   — listeners, connections, client registry, HTTP console.
//! - `commands` — the command table and one module per family (`string.rs`, `keys.rs`, ...).
//! - `stats`    — per-thread counters behind INFO.

pub mod commands;
pub mod config;
pub mod engine;
pub mod log;
pub mod net;
pub mod rand;
pub mod stats;
pub mod types;

use std::net::TcpListener as StdListener;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use config::Config;
use engine::{Shared, Worker};

/// Starts the server and blocks until SHUTDOWN or a termination signal.
pub fn start(cfg: Config) -> std::io::Result<()> {
    engine::clock::init();
    engine::guard::install_panic_hook();
    if let Some(level) = cfg.get("loglevel").as_deref().and_then(log::Level::parse) {
        log::set_level(level);
    }
    if let Some(path) = cfg.get("logfile").filter(|p| !p.is_empty()) {
        log::open_file(&path)?;
    }
    adjust_open_files_limit(&cfg);
    let cfg = Arc::new(cfg);
    let shared = Shared::new(cfg.clone());
    let bind = cfg.get("bind").unwrap_or_default();
    let port = cfg.port();
    let listeners = net::listener::bind_all(&bind, port).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot listen on {bind}:{port}: {e}"))
    })?;
    crate::log_notice!(
        "damselfly v{} starting: port {} ({}), {} shard threads, pid {}",
        env!("CARGO_PKG_VERSION"),
        port,
        bind,
        shared.threads,
        std::process::id()
    );
    let cpus = allowed_cpus();
    let pin = cfg.bool("pin_threads");
    // Why SCHED_BATCH when shard threads outnumber CPUs: then two shard threads share a CPU, and
    // under the default policy every cross-shard message wakes its receiver *and preempts the
    // sender*, so the two threads ping-pong one message at a time (measured: 0.64 context
    // switches per op for MSETs whose keys all live on the other thread's shard). A SCHED_BATCH
    // wakee does not preempt; it runs when the sender blocks or its slice ends, and then handles
    // everything queued for it in one go.
    let batch = match cfg.get("shard_sched_batch").as_deref() {
        Some("yes") => true,
        Some("no") => false,
        _ => !cpus.is_empty() && shared.threads > cpus.len(),
    };
    if batch {
        crate::log_notice!("more shard threads than CPUs: shard threads run under SCHED_BATCH");
    }
    let mut listeners = Some(listeners);
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
                .spawn(move || thread_main(i, shared, ls, cpu, batch))?,
        );
    }
    crate::log_notice!("Ready to accept connections");
    for h in handles {
        let _ = h.join();
    }
    crate::log_notice!("bye");
    Ok(())
}

fn thread_main(
    id: usize,
    shared: Arc<Shared>,
    listeners: Vec<StdListener>,
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
        for l in listeners {
            tokio::task::spawn_local(net::listener::accept_loop(w.clone(), l));
        }
        if id == 0 {
            tokio::task::spawn_local(watch_signals(w.clone()));
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

/// Makes every shard thread leave its event loop; `start` then returns.
pub fn request_shutdown(shared: &Shared) {
    shared.shutdown.store(true, Ordering::SeqCst);
    shared.shutdown_notify.notify_waiters();
}

async fn watch_signals(w: Rc<Worker>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
    crate::log_warning!("Received termination signal, shutting down");
    request_shutdown(&w.shared);
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
