//! Persistence: RDB snapshots (SAVE, BGSAVE, load on start-up, save on shutdown) and DUMP /
//! RESTORE payloads, in Redis's RDB format so that files and payloads move between damselfly
//! and redis-server both ways (design: docs/design/snapshots.md).
//!
//! - `rdb`      — the format: byte-level codec (`wire`, packed blobs) and our values as objects
//!   (`object`).
//! - `snapshot` — writing: shards serialize their own data into chunks, one writer thread
//!   writes the file and commits it atomically.
//! - `load`     — reading a file into per-shard batches, all-or-nothing.
//!
//! The commands (SAVE, BGSAVE, DEBUG RELOAD, DUMP, RESTORE) live in `commands/persistence.rs`.

pub mod cron;
pub mod load;
pub mod rdb;
pub mod snapshot;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use crate::config::Config;

/// Process-wide snapshot bookkeeping (INFO persistence, LASTSAVE, one save at a time).
pub struct State {
    /// Unix seconds of the last successful save (LASTSAVE); start-up time before any.
    pub last_save: AtomicU64,
    /// The start-up snapshot is still loading: commands without the `loading` flag answer
    /// `-LOADING` (INFO `loading:1`).
    pub loading: AtomicBool,
    /// A replica loads its primary's snapshot while serving the old dataset (Redis's
    /// `async_loading`, `repl-diskless-load swapdb` within one history): only the
    /// `no_async_loading` commands answer `-LOADING`.
    pub async_loading: AtomicBool,
    /// A SAVE, BGSAVE or DEBUG RELOAD is running (only one at a time, as in Redis).
    pub saving: AtomicBool,
    /// The running save is a BGSAVE (`rdb_bgsave_in_progress`).
    pub bgsave_in_progress: AtomicBool,
    /// Unix ms the running BGSAVE started.
    pub bgsave_started_ms: AtomicU64,
    pub last_bgsave_ok: AtomicBool,
    /// Seconds the last BGSAVE took (-1: none yet).
    pub last_bgsave_secs: AtomicI64,
    /// Successful saves since start-up (`rdb_saves`).
    pub saves: AtomicU64,
    /// The write-command count at the last successful save (`rdb_changes_since_last_save` is
    /// the count now minus this).
    pub writes_at_save: AtomicU64,
    /// BGSAVE SCHEDULE was asked for while a save ran.
    pub scheduled: AtomicBool,
    /// FLUSHALL asks the running save to stop (Redis kills its child): shards check it per key.
    pub abort: AtomicBool,
    pub last_load_keys_loaded: AtomicU64,
    pub last_load_keys_expired: AtomicU64,
    /// Keys of the running save done so far / in all (`current_save_keys_*`).
    pub keys_processed: AtomicU64,
    pub keys_total: AtomicU64,
    /// Successful write commands per thread (Redis's dirty counter, approximated by commands):
    /// each thread bumps only its own cache line, so counting costs no contention.
    writes: Box<[PaddedCounter]>,
    /// Unix ms of the last automatic save attempt (a failed one is retried after a delay).
    pub last_auto_try_ms: AtomicU64,
}

#[repr(align(64))]
#[derive(Default)]
struct PaddedCounter(AtomicU64);

impl State {
    pub fn new(now_ms: u64, threads: usize) -> State {
        State {
            writes: (0..threads.max(1))
                .map(|_| PaddedCounter::default())
                .collect(),
            last_auto_try_ms: AtomicU64::new(0),
            last_save: AtomicU64::new(now_ms / 1000),
            loading: AtomicBool::new(false),
            async_loading: AtomicBool::new(false),
            saving: AtomicBool::new(false),
            bgsave_in_progress: AtomicBool::new(false),
            bgsave_started_ms: AtomicU64::new(0),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            writes_at_save: AtomicU64::new(0),
            scheduled: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            last_load_keys_loaded: AtomicU64::new(0),
            last_load_keys_expired: AtomicU64::new(0),
            keys_processed: AtomicU64::new(0),
            keys_total: AtomicU64::new(0),
        }
    }

    /// Claims the one save slot; false when a save is already running. (A FLUSHALL from now
    /// on aborts this save, even before its job starts.)
    pub fn try_begin(&self) -> bool {
        let won = self
            .saving
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if won {
            self.abort.store(false, Ordering::Relaxed);
        }
        won
    }

    pub fn end(&self) {
        self.saving.store(false, Ordering::Release);
    }

    /// A successful write command ran on `thread` (only that thread calls this for its slot).
    #[inline]
    pub fn count_write(&self, thread: usize) {
        if let Some(c) = self.writes.get(thread) {
            // Single writer per slot: a plain load and store, no locked instruction.
            c.0.store(c.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        }
    }

    /// Write commands since start-up, all threads.
    pub fn writes(&self) -> u64 {
        self.writes
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum()
    }

    /// Redis's MISCONF state: save points are configured, the last background save failed and
    /// `stop-writes-on-bgsave-error` is on, so write commands (and PING) are refused until a
    /// save succeeds. One relaxed load when all is well.
    #[inline]
    pub fn writes_refused(&self, cfg: &Config) -> bool {
        !self.last_bgsave_ok.load(Ordering::Relaxed)
            && cfg.bool("stop-writes-on-bgsave-error")
            && cfg.get("save").is_some_and(|s| !s.trim().is_empty())
    }

    /// `rdb_changes_since_last_save`.
    pub fn changes_since_save(&self) -> u64 {
        self.writes()
            .saturating_sub(self.writes_at_save.load(Ordering::Relaxed))
    }
}

/// Where snapshots go: `dbfilename` in the working directory (the process moved into `dir` at
/// start-up, as Redis does). As in Dragonfly, a name without an extension gets `.rdb`, and
/// `{timestamp}` is replaced by the save's local time (`2026-11-25T10:48:02`), so every save
/// keeps its own file; loading then picks the newest such file.
pub fn snapshot_path(cfg: &Config) -> PathBuf {
    let name = file_name(cfg);
    PathBuf::from(name.replace("{timestamp}", &timestamp()))
}

/// The configured file name with its extension.
fn file_name(cfg: &Config) -> String {
    let mut name = cfg.get("dbfilename").unwrap_or_default();
    if name.is_empty() {
        name = "dump".into();
    }
    let base = name.rsplit('/').next().unwrap_or(&name);
    if !base.contains('.') {
        name.push_str(".rdb");
    }
    name
}

/// The file to load at start-up: `dbfilename`, or with `{timestamp}` the newest file its
/// pattern matches (names sort by time).
pub fn load_path(cfg: &Config) -> PathBuf {
    let name = file_name(cfg);
    let Some((pre, post)) = name.split_once("{timestamp}") else {
        return PathBuf::from(name);
    };
    let (dir, pre) = match pre.rsplit_once('/') {
        Some((d, p)) => (
            PathBuf::from(if d.is_empty() { "/" } else { d }),
            p.to_string(),
        ),
        None => (PathBuf::from("."), pre.to_string()),
    };
    let newest = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&pre) && n.ends_with(post) && n.len() >= pre.len() + post.len())
        .max();
    match newest {
        Some(n) => dir.join(n),
        None => PathBuf::from(name.replace("{timestamp}", "")),
    }
}

/// Local time as `YYYY-MM-DDTHH:MM:SS`.
fn timestamp() -> String {
    let secs = (crate::engine::clock::unix_ms() / 1000) as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed struct we own.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}
