//! Persistence commands: SAVE BGSAVE, and the snapshot steps DEBUG RELOAD and
//! SHUTDOWN SAVE share (`save_snapshot`, `reload`). The format and file handling live in
//! `crate::persistence`.
//!
//! A snapshot is one chain over every shard under a whole-shard lock (the command's plan hook
//! asks for it): all shards serialize at the same point of the transaction order, so no
//! MULTI/EXEC or multi-key command is split by the snapshot.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::clock;
use crate::commands::spec::prelude::*;
use crate::commands::util::*;
use crate::commands::{BoxFut, CmdCtx, ConnCtx};
use crate::engine::rdb_load::{self as load, Entry, LoadError};
use crate::engine::snapshot::{self, Header};
use crate::engine::Worker;
use crate::persistence::{self as persist};

const G: Group = Group::Server;
const SAVE_FLAGS: u32 = ADMIN | NOSCRIPT | NO_ASYNC_LOADING;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("save", 1, SAVE_FLAGS | NO_MULTI, NOKEYS, Conn(save)).plan(snapshot_plan).acl(acl::DANGEROUS)
        .doc(G, "1.0.0", "Synchronously saves the database(s) to disk."),
    cmd("bgsave", -1, SAVE_FLAGS, NOKEYS, Local(bgsave)).acl(acl::DANGEROUS)
        .doc(G, "1.0.0", "Asynchronously saves the database(s) to disk."),
];

/// Every shard, shared: all shards serialize at one point of the transaction order.
pub fn snapshot_plan(_args: &[&[u8]], plan: &mut dyn PlanSink) {
    plan.lock_all_shards(false);
}

/// The error of a save FLUSHALL stopped: not a failure of the disk (no MISCONF follows).
const ABORTED: &str = "aborted by FLUSHALL";

/// Why a snapshot failed (logged; clients get Redis's terse `-ERR`).
pub type SaveError = String;

/// How a snapshot runs on the shards.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SaveMode {
    /// SAVE, DEBUG RELOAD, SHUTDOWN, FLUSHALL: every shard writes its whole part at once
    /// under the command's locks (the server waits, as Redis's SAVE blocks it).
    Blocking,
    /// BGSAVE and save points: the snapshot begins at one point of the transaction order, then
    /// every shard walks its table in small steps between its other work, and writes to parts
    /// not yet written save those parts first (docs/design/snapshots.md).
    Background,
}

/// Serializes every shard into a new snapshot file and commits it. With `keep_locks` (only
/// blocking saves) the command's whole-shard locks stay held for a following chain (DEBUG
/// RELOAD loads under them). The caller holds the save slot (`State::try_begin`).
pub async fn save_snapshot(
    cx: &mut ConnCtx,
    keep_locks: bool,
    mode: SaveMode,
) -> Result<std::path::PathBuf, SaveError> {
    save_snapshot_at(cx, keep_locks, mode, None)
        .await
        .map(|p| p.unwrap_or_default())
}

/// What a full sync does at its snapshot's point (every shard held): starts the shards'
/// journals and attaches the replica there (`replication`).
pub type AtBarrier = Box<dyn FnOnce()>;

/// The replica's link, stopped for a snapshot's point, goes on when this is dropped (on every
/// way out of the save).
struct LinkPause(bool);

impl Drop for LinkPause {
    fn drop(&mut self) {
        if let (true, Some(h)) = (self.0, REPLICATION.get()) {
            (h.resume_link)();
        }
    }
}

/// A future a hook returns (on the connection's thread).
pub type HookFut<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T>>>;

/// What a snapshot asks of replication: persistence sits below it (a full sync is a
/// snapshot), so the crate root installs these ([`install_replication_hooks`]) and nothing here
/// names the replication layer. Without them a snapshot records no replication position.
pub struct ReplicationHooks {
    /// A replica's link stops between two batches of its primary's stream (true once stopped);
    /// `resume_link` lets it go on.
    pub pause_link: fn() -> HookFut<bool>,
    pub resume_link: fn(),
    /// Where a (paused) replica's stream stands: the primary's replication id, the offset,
    /// the database the stream is in.
    pub replica_position: fn() -> (String, u64, usize),
    /// A primary's replication id and the offset everything journaled so far reached.
    pub primary_position: fn() -> HookFut<(String, u64)>,
}

static REPLICATION: std::sync::OnceLock<ReplicationHooks> = std::sync::OnceLock::new();

pub fn install_replication_hooks(hooks: ReplicationHooks) {
    let _ = REPLICATION.set(hooks);
}

/// A full sync's snapshot: the hook at its point, and where it goes.
pub struct ForReplica {
    pub at_barrier: AtBarrier,
    /// Diskless (`repl-diskless-sync`): the RDB bytes go to this channel (the replica's
    /// socket) instead of the snapshot file, which stays as it was.
    pub stream: Option<tokio::sync::mpsc::Sender<Vec<u8>>>,
    /// The database the replica's stream is in where it starts (`repl-stream-db`).
    pub stream_db: usize,
}

/// [`save_snapshot`], for a replica (background saves only): runs its hook while every shard
/// holds the snapshot's point, and writes to its stream when it has one. The file's path, None
/// for a stream.
pub async fn save_snapshot_at(
    cx: &mut ConnCtx,
    keep_locks: bool,
    mode: SaveMode,
    replica: Option<ForReplica>,
) -> Result<Option<std::path::PathBuf>, SaveError> {
    let shared = cx.worker.shared.clone();
    let path = persist::snapshot_path(&shared.config);
    let (at_barrier, stream, repl_stream_db) = match replica {
        Some(r) => (Some(r.at_barrier), r.stream, Some(r.stream_db)),
        None => (None, None, None),
    };
    let to_file = stream.is_none();
    // A replica's own snapshot records where in its primary's history it stands, so that
    // after a restart it continues with PSYNC (Redis's `repl-id`/`repl-offset` aux fields):
    // the link stops between two batches until the snapshot's point is taken.
    let mut link = LinkPause(false);
    let mut repl_position = None;
    let mut own_stream_db = None;
    // Not for a save that holds locks already (FLUSHALL's, DEBUG RELOAD's) or that the link
    // itself runs (the primary's FLUSHALL): the link could not reach a batch boundary then.
    let hooks = REPLICATION.get();
    if let (None, true, false, false, Some(h)) = (
        &at_barrier,
        crate::engine::role::is_replica(),
        cx.is_master,
        cx.coord.in_transaction(),
        hooks,
    ) {
        link.0 = true;
        if (h.pause_link)().await {
            let (replid, offset, stream_db) = (h.replica_position)();
            if offset > 0 {
                repl_position = Some((replid, offset));
                own_stream_db = Some(stream_db);
            }
        }
    }
    // A primary's snapshot records its replication id and the stream's offset at the
    // snapshot's point, so that after a restart from it its replicas continue with PSYNC
    // (Redis 7.0 saves a master's `repl-id`/`repl-offset` too): every shard is held (an empty
    // first hop of the save's transaction, which the save's own hops continue) while a fence
    // in the journal answers with the offset everything before it reached.
    if let (None, None, false, false, true, Some(h)) = (
        &at_barrier,
        &repl_position,
        cx.coord.in_transaction(),
        crate::engine::role::is_replica(),
        crate::engine::journal::active(),
        hooks,
    ) {
        cx.hops().all_shards(|_, ()| ()).run_more().await;
        repl_position = Some((h.primary_position)().await);
        own_stream_db = Some(0);
    }
    let header = Header {
        redis_ver: crate::version::REDIS_VERSION,
        used_mem: crate::process::sysinfo::mem_stats().allocated,
        compression: shared.config.rdbcompression(),
        checksum: shared.config.rdbchecksum(),
        incremental_fsync: shared.config.rdb_save_incremental_fsync(),
        functions: crate::scripting::functions::all()
            .iter()
            .map(|l| l.code.clone())
            .collect(),
        repl_stream_db: repl_stream_db.or(own_stream_db),
        repl_position,
    };
    let lim = shared.config.enc_limits();
    let key_delay = shared.config.rdb_key_save_delay();
    let writes = shared.persist.writes();
    let (sink, done) = match stream {
        Some(out) => snapshot::start_stream_writer(header, out),
        None => snapshot::start_writer(&path, header),
    }
    .map_err(|e| e.to_string())?;
    shared.persist.keys_processed.store(0, Ordering::Relaxed);
    shared.persist.keys_total.store(0, Ordering::Relaxed);
    let job = snapshot::Job::new(
        lim,
        shared.config.rdbcompression(),
        key_delay,
        sink,
        cx.threads(),
    );
    let shard_job = job.clone();
    match mode {
        SaveMode::Blocking => {
            // Always as a non-final chain: a final one that touches every shard once runs as
            // a single-hop transaction, whose first remote part is awaited before the others
            // start (right for MSET, serial for a snapshot). The shards all serialize at once
            // this way, and an empty final step concludes them when no chain follows.
            cx.hops()
                .all_shards(move |c, ()| {
                    let abort = &c.shared.persist.abort;
                    snapshot::serialize_shard(c.shard, &shard_job, abort);
                })
                .run_more()
                .await;
            drop(std::mem::replace(&mut link, LinkPause(false)));
            if !keep_locks {
                cx.hops().all_shards(|_, ()| ()).run().await;
            }
        }
        SaveMode::Background => {
            let journal = at_barrier.is_some();
            let chain = cx.hops().all_shards(move |c, ()| {
                c.shared
                    .persist
                    .keys_total
                    .fetch_add(c.shard.keys_total() as u64, Ordering::Relaxed);
                snapshot::begin_shard(c.shard, &shard_job);
                if journal {
                    crate::engine::journal::enable_here();
                }
                if let Some(w) = Worker::current() {
                    tokio::task::spawn_local(drive_shard(w, shard_job.clone()));
                }
            });
            match at_barrier {
                None => {
                    chain.run().await;
                    drop(std::mem::replace(&mut link, LinkPause(false)));
                }
                Some(f) => {
                    // The shards stay held until the hook ran, then conclude.
                    chain.run_more().await;
                    f();
                    cx.hops().all_shards(|_, ()| ()).run().await;
                }
            }
        }
    }
    // The shards hold the job (and with it the writer's channel) until they are done: once
    // all dropped it, the writer has its Done, or knows the save was abandoned.
    let keys = job.keys.clone();
    drop(job);
    let saved = done.await;
    if cx.shared().persist.abort.swap(false, Ordering::Relaxed) {
        return Err(SaveError::from(ABORTED));
    }
    let saved = saved
        .map_err(|_| "the snapshot writer stopped".to_string())?
        .map_err(|e| e.to_string())?;
    let keys = keys.load(Ordering::Relaxed);
    if !to_file {
        // As Redis's socket saves: the dataset on disk did not change, nor did LASTSAVE.
        crate::log_notice!(
            "Snapshot for a replica sent ({keys} keys, {} bytes)",
            saved.bytes
        );
        return Ok(None);
    }
    let st = &cx.shared().persist;
    st.last_save
        .store(clock::unix_ms() / 1000, Ordering::Relaxed);
    st.saves.fetch_add(1, Ordering::Relaxed);
    st.writes_at_save.store(writes, Ordering::Relaxed);
    crate::log_notice!("DB saved on disk ({keys} keys, {} bytes)", saved.bytes);
    Ok(Some(path))
}

/// Share of a busy shard thread's time a background snapshot's walk takes: each step walks
/// for a ninth of the CPU time the thread gave its clients since the previous step (10%), plus
/// all of the time it was idle meanwhile. A saturated thread keeps about 90% of its throughput
/// and the save takes longer; a lightly loaded one saves nearly as fast as SAVE, its clients
/// waiting at most one step. Writes to entries not yet walked write those entries themselves,
/// on top of this. Measured by scripts/bench-snapshot.sh and scripts/bench-bigvalue-save.sh
/// (docs/benchmarks.md).
const WALK_SHARE_DIVISOR: u32 = 9;
/// Pause between two steps of the walk on a busy thread.
const BUSY_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);
/// Longest single step of the walk.
const WALK_STEP_MAX: std::time::Duration = std::time::Duration::from_micros(250);
/// Shortest step on a busy thread (it walks at least one bucket anyway).
const WALK_STEP_MIN: std::time::Duration = std::time::Duration::from_micros(5);
/// The clients needed no more CPU than this since the last step: the thread is as good as
/// idle, the walk takes a full step.
const QUIET_CPU: std::time::Duration = std::time::Duration::from_micros(50);

/// A shard's part of a background snapshot: walks the shard's table in steps sized to leave
/// the thread to its clients (see [`WALK_SHARE_DIVISOR`]), hands the chunks to the writer
/// without blocking the thread, and tells the writer when the shard is done.
async fn drive_shard(worker: Rc<Worker>, job: Arc<snapshot::Job>) {
    use std::time::{Duration, Instant};
    let shared = worker.shared.clone();
    let (mut last_end, mut cpu_at_end) = (Instant::now(), clock::thread_cpu());
    loop {
        if shared.persist.abort.load(Ordering::Relaxed) {
            snapshot::abandon_shard(&mut worker.shard_mut());
            return;
        }
        let gap = last_end.elapsed();
        // CPU the thread spent on everything else since the last step; the rest of the gap it
        // had nothing to do.
        let others = clock::thread_cpu().saturating_sub(cpu_at_end);
        let quiet = others <= QUIET_CPU;
        let budget = if quiet {
            WALK_STEP_MAX
        } else {
            (gap.saturating_sub(others) + others / WALK_SHARE_DIVISOR)
                .clamp(WALK_STEP_MIN, WALK_STEP_MAX)
        };
        let step = snapshot::step_shard(&mut worker.shard_mut(), Some(Instant::now() + budget));
        shared
            .persist
            .keys_processed
            .fetch_add(step.walked_keys, Ordering::Relaxed);
        for c in step.chunks {
            if !job.sink.send_async(c).await {
                snapshot::abandon_shard(&mut worker.shard_mut());
                return;
            }
        }
        if step.done {
            job.finish_shard(step.total_keys);
            return;
        }
        (last_end, cpu_at_end) = (Instant::now(), clock::thread_cpu());
        if job.key_delay != 0 && step.walked_keys > 0 {
            let per_key = if job.key_delay > 0 {
                Duration::from_micros(job.key_delay as u64)
            } else {
                Duration::from_nanos(job.key_delay.unsigned_abs())
            };
            tokio::time::sleep(per_key.saturating_mul(step.walked_keys as u32)).await;
        } else if quiet || others < gap / 2 {
            // Mostly idle: come back as soon as the clients had their turn.
            tokio::task::yield_now().await;
        } else {
            // A busy thread: come back after a timer tick, having earned the next step.
            tokio::time::sleep(BUSY_PAUSE).await;
        }
    }
}

/// SAVE.
fn save<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if !cx.shared().persist.try_begin() {
            cx.reply.error("ERR Background save already in progress");
            return;
        }
        let res = save_snapshot(cx, false, SaveMode::Blocking).await;
        cx.shared().persist.end();
        match res {
            Ok(_) => cx.reply.ok(),
            Err(e) => {
                crate::log_warning!("Error saving DB on disk: {e}");
                cx.reply.error("ERR");
            }
        }
    })
}

/// BGSAVE [SCHEDULE]: starts [`background_save`] and answers at once; with SCHEDULE while a
/// save runs, the save-point job starts one when it ends.
fn bgsave(cx: &mut ConnCtx, args: &[&[u8]]) {
    let schedule = match args.len() {
        1 => false,
        2 if eq_ic(args[1], "schedule") => true,
        _ => {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
    };
    if start_background_save(&cx.worker) {
        cx.reply.simple("Background saving started");
    } else if schedule {
        cx.shared().persist.scheduled.store(true, Ordering::Relaxed);
        cx.reply.simple("Background saving scheduled");
    } else {
        cx.reply.error("ERR Background save already in progress");
    }
}

/// Claims the save slot and starts a background save on this thread; false when a save is
/// already running.
pub fn start_background_save(worker: &Rc<Worker>) -> bool {
    let st = &worker.shared.persist;
    if !st.try_begin() {
        return false;
    }
    st.bgsave_in_progress.store(true, Ordering::Relaxed);
    st.bgsave_started_ms
        .store(clock::unix_ms(), Ordering::Relaxed);
    crate::log_notice!("Background saving started");
    let w = worker.clone();
    tokio::task::spawn_local(async move {
        let _ = background_save(w, None).await;
    });
    true
}

/// A full sync's snapshot (replication): waits for the save slot, then saves in the
/// background as BGSAVE does, running the hook at the snapshot's point. The file's path (None
/// when it went to the replica's stream).
pub async fn save_for_replica(
    worker: &Rc<Worker>,
    replica: ForReplica,
) -> Result<Option<std::path::PathBuf>, SaveError> {
    let st = &worker.shared.persist;
    while !st.try_begin() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    st.bgsave_in_progress.store(true, Ordering::Relaxed);
    st.bgsave_started_ms
        .store(clock::unix_ms(), Ordering::Relaxed);
    let target = if replica.stream.is_some() {
        "replicas sockets"
    } else {
        "disk"
    };
    crate::log_notice!("Starting BGSAVE for SYNC with target: {target}");
    background_save(worker.clone(), Some(replica)).await
}

/// The save job of BGSAVE and of save points: a snapshot on an internal client, run as SAVE
/// (its lock plan). The shards serialize under a shared whole-shard lock, each in one step (the
/// server waits meanwhile: docs/design/snapshots.md), then the file is written and committed by the writer thread.
async fn background_save(
    worker: Rc<Worker>,
    replica: Option<ForReplica>,
) -> Result<Option<std::path::PathBuf>, SaveError> {
    let started = clock::unix_ms();
    // A diskless transfer that fails (its replica went away) is no failed save: as Redis's
    // socket target, it leaves `rdb_last_bgsave_status` (and MISCONF) alone.
    let to_socket = replica.as_ref().is_some_and(|r| r.stream.is_some());
    let mut cx = ConnCtx::internal(worker.clone());
    let res = cx
        .run_internal(&[b"save"], |cx| {
            Box::pin(save_snapshot_at(cx, false, SaveMode::Background, replica))
        })
        .await
        .unwrap_or_else(|| Err("the save failed with an internal error".into()));
    let st = &worker.shared.persist;
    let aborted = matches!(&res, Err(e) if e == ABORTED);
    if !to_socket {
        st.last_bgsave_ok
            .store(res.is_ok() || aborted, Ordering::Relaxed);
    }
    st.last_bgsave_secs.store(
        (clock::unix_ms().saturating_sub(started) / 1000) as i64,
        Ordering::Relaxed,
    );
    st.bgsave_in_progress.store(false, Ordering::Relaxed);
    st.end();
    match &res {
        Ok(_) => crate::log_notice!("Background saving terminated with success"),
        Err(e) => crate::log_warning!("Background saving error: {e}"),
    }
    res
}

/// Does FLUSHALL save the (now empty) dataset? As Redis: when save points are configured, so
/// that the old file is not loaded back after a restart.
pub fn flushall_saves(cx: &ConnCtx) -> bool {
    !cx.shared().persist.loading.load(Ordering::Relaxed)
        && !save_points(&cx.shared().config).is_empty()
}

/// FLUSHALL's foreground save, under FLUSHALL's own (exclusive, all-shard) locks; the chain
/// concludes them. Skipped (locks still concluded) when another save holds the slot.
pub async fn save_after_flushall(cx: &mut ConnCtx) {
    // A background save this FLUSHALL aborted ends within a step of its shards' walks (its
    // shards dropped it in FLUSHALL's hop): wait for its slot.
    let mut waited = 0;
    while !cx.shared().persist.try_begin() {
        let st = &cx.shared().persist;
        if !st.abort.load(Ordering::Relaxed) || waited >= 5000 {
            cx.hops().all_shards(|_, ()| ()).run().await;
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        waited += 1;
    }
    let res = save_snapshot(cx, false, SaveMode::Blocking).await;
    let st = &cx.shared().persist;
    st.end();
    match res {
        // FLUSHALL itself is counted as a write once it returns: it is part of this save.
        Ok(_) => {
            st.writes_at_save.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => crate::log_warning!("FLUSHALL: error saving the empty dataset: {e}"),
    }
}

/// Redis's retry delay after a failed automatic save.
const AUTO_SAVE_RETRY_MS: u64 = 5000;

/// Save points (`save <seconds> <changes> ...`) and BGSAVE SCHEDULE: checked ten times a second
/// on thread 0, as Redis's serverCron does.
pub async fn save_cron(worker: Rc<Worker>) {
    let shared = worker.shared.clone();
    let mut last_minute = clock::unix_ms() / 60_000;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if shared.shutdown.load(Ordering::Relaxed) {
            return;
        }
        let st = &shared.persist;
        if st.saving.load(Ordering::Relaxed) || st.loading.load(Ordering::Relaxed) {
            continue;
        }
        if st.scheduled.swap(false, Ordering::Relaxed) {
            start_background_save(&worker);
            continue;
        }
        let now = clock::unix_ms();
        // `snapshot_cron`: once per matching minute of local time.
        let minute = now / 60_000;
        if minute != last_minute {
            last_minute = minute;
            let expr = shared.config.snapshot_cron();
            if let Ok(c) = crate::persistence::cron::Cron::parse(&expr) {
                if c.matches(&crate::persistence::cron::local_tm((now / 1000) as i64)) {
                    crate::log_notice!("snapshot_cron '{expr}': starting a background save");
                    start_background_save(&worker);
                    continue;
                }
            }
        }
        let changes = st.changes_since_save();
        let since = (now / 1000).saturating_sub(st.last_save.load(Ordering::Relaxed));
        let failed_recently = !st.last_bgsave_ok.load(Ordering::Relaxed)
            && now.saturating_sub(st.last_auto_try_ms.load(Ordering::Relaxed)) < AUTO_SAVE_RETRY_MS;
        if changes == 0 || failed_recently {
            continue;
        }
        let due = save_points(&shared.config)
            .into_iter()
            .find(|&(secs, min)| changes >= min && since >= secs);
        if let Some((secs, min)) = due {
            crate::log_notice!("{min} changes in {secs} seconds. Saving...");
            st.last_auto_try_ms.store(now, Ordering::Relaxed);
            start_background_save(&worker);
        }
    }
}

/// The configured save points as (seconds, changes) pairs.
pub fn save_points(cfg: &crate::config::Config) -> Vec<(u64, u64)> {
    cfg.save_points()
}

/// The snapshot of a shutdown (SHUTDOWN SAVE, or SHUTDOWN / SIGTERM with save points), on `cx`
/// (a client's, or an internal one for signals). Waits for a running background save first, as
/// Redis kills its child and saves anew.
pub async fn shutdown_save(cx: &mut ConnCtx) -> Result<(), SaveError> {
    if cx.shared().persist.loading.load(Ordering::SeqCst) {
        // As Redis: a partly loaded dataset must never replace the file it comes from.
        crate::log_warning!("Not saving: the dataset is still loading.");
        return Ok(());
    }
    crate::log_notice!("Saving the final RDB snapshot before exiting.");
    crate::process::supervise::status("Saving the final RDB snapshot");
    let st = &cx.shared().persist;
    let mut waited = 0;
    if st.bgsave_in_progress.load(Ordering::Relaxed) {
        // As Redis kills its saving child: the running background save stops (its shards
        // drop it at their next step) and a fresh one is taken.
        crate::log_notice!("There is a background save in progress: stopping it.");
        st.abort.store(true, Ordering::Relaxed);
    }
    while !st.try_begin() {
        if waited >= 600 {
            return Err("a save is still in progress".into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        waited += 1;
    }
    let res = cx
        .run_internal(&[b"save"], |cx| {
            Box::pin(save_snapshot(cx, false, SaveMode::Blocking))
        })
        .await
        .unwrap_or_else(|| Err("the save failed with an internal error".into()));
    cx.shared().persist.end();
    res.map(|_| ())
}

/// DEBUG RELOAD [NOSAVE] [NOFLUSH] [MERGE]: saves (unless NOSAVE), empties the dataset (unless
/// NOFLUSH) and loads the file back, all under the command's whole-shard locks. The file is
/// parsed completely before anything is flushed: a bad file leaves the dataset as it was.
pub async fn reload(cx: &mut ConnCtx, args: &[&[u8]]) {
    let (mut nosave, mut noflush, mut merge) = (false, false, false);
    for a in args {
        if eq_ic(a, "nosave") {
            nosave = true;
        } else if eq_ic(a, "noflush") {
            noflush = true;
        } else if eq_ic(a, "merge") {
            merge = true;
        } else {
            cx.reply
                .error("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.");
            return;
        }
    }
    let st = &cx.shared().persist;
    if st.loading.load(Ordering::SeqCst) {
        cx.reply.error(crate::commands::ERR_LOADING);
        return;
    }
    if !st.try_begin() {
        cx.reply.error("ERR Background save already in progress");
        return;
    }
    let path = if nosave {
        Ok(persist::load_path(&cx.shared().config))
    } else {
        save_snapshot(cx, true, SaveMode::Blocking).await
    };
    let res = match path {
        Err(e) => Err(format!("Error trying to save the DB: {e}")),
        Ok(path) => {
            let shared = cx.shared();
            let lim = shared.config.enc_limits();
            match load::load_path(&path, cx.threads(), shared.config.dbnum(), cx.now_ms, &lim) {
                Ok(Some(ds)) => Ok(ds),
                Ok(None) => Err(format!(
                    "Error trying to load the RDB dump: {} not found",
                    path.display()
                )),
                Err(e) => Err(format!("Error trying to load the RDB dump: {e}")),
            }
        }
    };
    let ds = match res {
        Ok(ds) => ds,
        Err(e) => {
            cx.shared().persist.end();
            crate::log_warning!("{e}");
            cx.reply.error(&format!("ERR {e}"));
            return;
        }
    };
    let (loaded, expired) = (ds.keys_loaded, ds.keys_expired);
    // Function libraries first (Redis's rdbLoad): without NOFLUSH they replace the current
    // ones; with it, a library that exists already fails the load (unless MERGE).
    let codes = library_codes(&ds.functions);
    if let Err(e) = crate::scripting::functions::load_all(&cx.worker, codes, !noflush, merge).await
    {
        cx.shared().persist.end();
        crate::log_warning!("Error trying to load the RDB dump: {e}");
        cx.reply
            .error(&format!("ERR Error trying to load the RDB dump: {e}"));
        return;
    }
    let batches: Arc<Vec<Mutex<Vec<Entry>>>> =
        Arc::new(ds.shards.into_iter().map(Mutex::new).collect());
    let results = cx
        .hops()
        .all_shards(move |c, ()| {
            if !noflush {
                for db in c.shard.dbs.iter_mut() {
                    db.clear();
                }
            }
            let batch = take_batch(&batches, c.shard.id);
            apply_batch(c, batch, merge)
        })
        .run()
        .await;
    let st = &cx.shared().persist;
    st.end();
    st.last_load_keys_loaded.store(loaded, Ordering::Relaxed);
    st.last_load_keys_expired.store(expired, Ordering::Relaxed);
    match results.into_iter().find_map(Result::err) {
        None => {
            crate::log_notice!("DB reloaded by DEBUG RELOAD (MERGE={})", merge as u8);
            cx.reply.ok()
        }
        Some(e) => {
            crate::log_warning!("Error trying to load the RDB dump: {e}");
            cx.reply
                .error(&format!("ERR Error trying to load the RDB dump: {e}"));
        }
    }
}

/// A loaded file's function libraries, as code.
fn library_codes(functions: &[Vec<u8>]) -> Vec<String> {
    functions
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

/// Shard `shard`'s part of a loaded file (each shard takes its own, once).
fn take_batch(batches: &[Mutex<Vec<Entry>>], shard: usize) -> Vec<Entry> {
    std::mem::take(&mut *batches[shard].lock().unwrap_or_else(|e| e.into_inner()))
}

/// A replica's full sync: replaces the whole dataset (and the function libraries) with the
/// snapshot at `path`, in every shard at once, under an exclusive lock of every shard.
/// The file's `repl-stream-db` when it has one.
pub async fn load_replacing(
    cx: &mut ConnCtx,
    path: &std::path::Path,
) -> Result<Option<usize>, String> {
    let shared = cx.shared();
    let lim = shared.config.enc_limits();
    let ds = match load::load_path(path, cx.threads(), shared.config.dbnum(), cx.now_ms, &lim) {
        Ok(Some(ds)) => ds,
        Ok(None) => return Err(format!("{} not found", path.display())),
        Err(e) => return Err(e.to_string()),
    };
    let codes = library_codes(&ds.functions);
    let stream_db = ds.repl_stream_db;
    crate::scripting::functions::load_all(&cx.worker, codes, true, false)
        .await
        .map_err(|e| e.to_string())?;
    let batches: Arc<Vec<Mutex<Vec<Entry>>>> =
        Arc::new(ds.shards.into_iter().map(Mutex::new).collect());
    let results = cx
        .run_internal(&[b"flushall"], move |cx| {
            Box::pin(async move {
                cx.hops()
                    .all_shards(move |c, ()| {
                        for db in c.shard.dbs.iter_mut() {
                            db.clear();
                        }
                        load::apply(c.shard, take_batch(&batches, c.shard.id))
                    })
                    .run()
                    .await
            })
        })
        .await
        .ok_or_else(|| "internal error while loading".to_string())?;
    match results.into_iter().find_map(Result::err) {
        None => Ok(stream_db),
        Some(e) => Err(e.to_string()),
    }
}

/// A shard's part of a load into a live dataset: with `merge` an existing key is replaced (as
/// Redis's DEBUG RELOAD MERGE), otherwise it is a duplicate and fails the load.
fn apply_batch(c: &mut CmdCtx<'_>, batch: Vec<Entry>, merge: bool) -> Result<(), LoadError> {
    if merge {
        for e in &batch {
            let db = c.shard.db(e.db);
            if let Some(pos) = db.prime().find(e.key.key()) {
                db.remove_at(pos);
            }
        }
    }
    load::apply(c.shard, batch)
}
