//! The process around the server, as `redis-server` runs it: daemonizing, the pid file,
//! transparent huge pages, jemalloc's background thread, and the start-up and shutdown log lines
//! that tools and Redis's test runner wait for (" PID: <pid>", "Ready to accept connections").

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

/// The pid file: written at start-up, removed at shutdown. As Redis, a daemonized server without
/// a `pidfile` writes /var/run/redis.pid, and a pid file that cannot be written is a warning.
pub struct PidFile(Option<PathBuf>);

impl PidFile {
    pub fn create(cfg: &Config) -> PidFile {
        let path = cfg.get("pidfile").unwrap_or_default();
        let path = if path.is_empty() && cfg.bool("daemonize") {
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
    if cfg.bool("disable-thp") {
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
        crate::commands::connection::REDIS_VERSION,
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
    if cfg.bool("always-show-logo") {
        let version = format!(
            "Damselfly {} (Redis {} compatible) {} bit",
            env!("CARGO_PKG_VERSION"),
            crate::commands::connection::REDIS_VERSION,
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
