//! Process-wide snapshot bookkeeping, in the core because the command path reads it on every
//! write (loading, MISCONF) and both persistence and replication update it.

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
            && cfg.stop_writes_on_bgsave_error()
            && cfg.has_save_points()
    }

    /// `rdb_changes_since_last_save`.
    pub fn changes_since_save(&self) -> u64 {
        self.writes()
            .saturating_sub(self.writes_at_save.load(Ordering::Relaxed))
    }
}
