//! The process around the server, as `redis-server` runs it: daemonizing, the pid file,
//! transparent huge pages, jemalloc's background thread, and the start-up and shutdown log lines
//! that tools and Redis's test runner wait for (" PID: <pid>", "Ready to accept connections").
//! `supervise` tells systemd or upstart when the server is ready and when it stops.

pub mod supervise;
pub mod sysinfo;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::Config;

static STARTED: AtomicBool = AtomicBool::new(false);

/// Has `start` begun? (Process-wide settings are applied by `start`, then by CONFIG SET.)
pub fn started() -> bool {
    STARTED.load(Ordering::Relaxed)
}

pub fn mark_started() {
    STARTED.store(true, Ordering::Relaxed);
}

/// `daemonize yes`: fork, let the parent exit, start a new session, and point the standard
/// descriptors at /dev/null (the log goes to `logfile`, or nowhere, as with Redis). Must run
/// while the process has one thread.
pub fn daemonize() -> std::io::Result<()> {
    // SAFETY: called before any thread is spawned, so the child is a complete copy; the parent
    // only calls `_exit`.
    unsafe {
        match libc::fork() {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => {}
            _ => libc::_exit(0),
        }
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if fd >= 0 {
            libc::dup2(fd, 0);
            libc::dup2(fd, 1);
            libc::dup2(fd, 2);
            if fd > 2 {
                libc::close(fd);
            }
        }
    }
    Ok(())
}

/// The pid file: written at start-up, removed at shutdown. As Redis, a server that went to the
/// background (`daemonize yes` and not supervised) without a `pidfile` writes
/// /var/run/redis.pid, and a pid file that cannot be written is a warning.
pub struct PidFile(Option<PathBuf>);

impl PidFile {
    pub fn create(cfg: &Config, background: bool) -> PidFile {
        let path = cfg.pidfile();
        let path = if path.is_empty() && background {
            "/var/run/redis.pid".to_string()
        } else {
            path
        };
        if path.is_empty() {
            return PidFile(None);
        }
        match std::fs::write(&path, format!("{}\n", std::process::id())) {
            Ok(()) => PidFile(Some(crate::config::file::absolute(path.as_ref()))),
            Err(e) => {
                crate::log_warning!("Failed to write PID file: {e}");
                PidFile(None)
            }
        }
    }

    pub fn remove(&mut self) {
        if let Some(p) = self.0.take() {
            crate::log_notice!("Removing the pid file.");
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `disable-thp yes`: transparent huge pages off for this process (huge pages inflate memory of
/// sparse heaps and make copy-on-write expensive).
pub fn apply_thp(cfg: &Config) {
    if cfg.disable_thp() {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if rc != 0 {
            crate::log_verbose!(
                "cannot disable transparent huge pages: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// What `oom-score-adj` last applied (Redis's `setOOMScoreAdj`): the mode and the values by
/// class, and the process's own score from before the server first changed it (`base`:
/// restored when the mode goes back to `no`; `relative` adds to it).
struct Oom {
    mode: String,
    values: [i64; 3],
    base: Option<i64>,
}

static OOM: std::sync::Mutex<Oom> = std::sync::Mutex::new(Oom {
    mode: String::new(),
    values: [0, 200, 800],
    base: None,
});

/// Where Linux keeps the process's OOM-killer adjustment.
const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// `oom-score-adj` (`no`, `yes`/`relative`, `absolute`) with `oom-score-adj-values` (primary,
/// replica, background child: the child class is unused, as no child process exists) applied
/// to this process for its current role. At start-up, on CONFIG SET (whose rollback calls it
/// again with the old values) and on a role change (`oom_role_changed`).
pub fn apply_oom_score_adj(mode: &str, values: &str) -> Result<(), String> {
    let mut o = OOM.lock().unwrap_or_else(|e| e.into_inner());
    o.mode = mode.to_ascii_lowercase();
    for (slot, v) in o.values.iter_mut().zip(values.split_whitespace()) {
        *slot = v.parse().unwrap_or(0);
    }
    write_oom(&mut o)
}

/// REPLICAOF made this server a replica or a primary: the class's value applies.
pub fn oom_role_changed() {
    let mut o = OOM.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = write_oom(&mut o) {
        crate::log_warning!("{e}");
    }
}

fn write_oom(o: &mut Oom) -> Result<(), String> {
    let val = if o.mode != "no" && !o.mode.is_empty() {
        let base = match o.base {
            Some(b) => b,
            None => {
                let text = std::fs::read_to_string(OOM_SCORE_ADJ)
                    .map_err(|e| format!("Unable to read oom_score_adj: {e}"))?;
                let b = text.trim().parse().unwrap_or(0);
                o.base = Some(b);
                b
            }
        };
        let class = usize::from(crate::engine::role::is_replica());
        let mut v = o.values[class];
        if o.mode != "absolute" {
            v += base;
        }
        v.clamp(-1000, 1000)
    } else if let Some(base) = o.base.take() {
        base
    } else {
        return Ok(());
    };
    std::fs::write(OOM_SCORE_ADJ, format!("{val}\n"))
        .map_err(|e| format!("Unable to write oom_score_adj: {e}"))
}

/// `jemalloc-bg-thread`: jemalloc purges freed pages from its own thread instead of on the
/// allocating threads. Only meaningful when jemalloc is the allocator (the server binary).
pub fn apply_jemalloc_bg_thread(on: bool) {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(on) {
        crate::log_verbose!("jemalloc background_thread: {e}");
    }
}

/// The first lines of the log.
pub fn log_starting(cfg: &Config) {
    crate::log_warning!("oO0OoO0OoO0Oo Damselfly is starting oO0OoO0OoO0Oo");
    crate::log_warning!(
        "Damselfly version={}, redis_version={}, bits={}, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        crate::version::REDIS_VERSION,
        usize::BITS,
        std::process::id()
    );
    match cfg.config_file() {
        Some(f) => crate::log_warning!("Configuration loaded from {}", f.display()),
        None => crate::log_warning!(
            "Warning: no config file specified, using the default config. In order to specify a config file use damselfly /path/to/redis.conf"
        ),
    }
}

/// The banner: a logo with port, threads and PID when `always-show-logo yes` (Redis's test
/// runner waits for its " PID: <pid>"), otherwise one line.
pub fn log_banner(cfg: &Config, port: u16, threads: usize) {
    let pid = std::process::id();
    if cfg.always_show_logo() {
        let version = format!(
            "Damselfly {} (Redis {} compatible) {} bit",
            env!("CARGO_PKG_VERSION"),
            crate::version::REDIS_VERSION,
            usize::BITS
        );
        let logo = format!(
            "\n\
             \x20    \\ | /          {version}\n\
             \x20  <==(o)==>         Running in standalone mode, {threads} shard threads\n\
             \x20      |=|           Port: {port}\n\
             \x20      |=|           PID: {pid}\n\
             \x20      '-'\n\n"
        );
        crate::log::raw(crate::log::Level::Notice, &logo);
    } else {
        crate::log_notice!(
            "Running mode=standalone, port={port}, shard threads={threads}, PID: {pid}."
        );
    }
}

/// The process's configuration hooks (config::hooks).
pub const CONFIG_HOOKS: &[crate::config::hooks::Hook] = &[crate::config::hooks::Hook {
    // At start-up `start` applies it; afterwards CONFIG SET does, here.
    apply: Some(|v| {
        if started() {
            apply_jemalloc_bg_thread(v == "yes")
        }
    }),
    ..crate::config::hooks::Hook::new("jemalloc-bg-thread")
}];
