//! Writing a snapshot file: shards serialize, one writer thread writes (design:
//! docs/design/snapshots.md).
//!
//! Every shard turns its own databases into self-contained chunks (each starts with `SELECTDB`,
//! so chunks of different shards may interleave in the file in any order) and hands them to one
//! writer thread over a bounded channel: memory stays at a few chunks however big the dataset,
//! and a shard never touches another's data. The writer owns the file: it writes header and aux
//! fields, the chunks as they come, then EOF and the CRC64, and makes the file durable and
//! visible atomically (temporary file, fsync, rename, fsync of the directory), so a crash at any
//! moment leaves the previous snapshot intact.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use damselfly_dash::{BucketId, Pos, FLAG_B};

use super::rdb::object::{write_object, EncLimits};
use super::rdb::Writer;
use crate::engine::db::{ExpireTable, PrimeTable, FLAG_EXPIRE};
use crate::engine::shard::Shard;

/// A chunk is handed to the writer once it holds this much.
const CHUNK_BYTES: usize = 256 << 10;
/// Redis's REDIS_AUTOSYNC_BYTES.
const INCREMENTAL_FSYNC_BYTES: u64 = 32 << 20;
/// Chunks in flight between the shards and the writer (bounds the memory a save takes).
const CHANNEL_CHUNKS: usize = 16;

/// What the writer thread receives.
pub enum Msg {
    Chunk(Vec<u8>),
    /// Every shard is done: finish and commit the file.
    Done,
}

/// What a finished save reports.
#[derive(Debug, Clone, Copy)]
pub struct Saved {
    pub bytes: u64,
}

/// The shards' end of a save: cloneable into every shard's closure.
#[derive(Clone)]
pub struct ChunkSink {
    tx: SyncSender<Msg>,
}

impl ChunkSink {
    /// Sends a chunk, waiting while the writer is behind; false when the writer is gone (it
    /// failed: stop serializing).
    fn send(&self, chunk: Vec<u8>) -> bool {
        self.tx.send(Msg::Chunk(chunk)).is_ok()
    }

    /// Sends a chunk without blocking the thread: while the writer is behind (the disk is
    /// slower than serializing) the calling task sleeps and the shard serves its clients.
    pub async fn send_async(&self, chunk: Vec<u8>) -> bool {
        let mut msg = Msg::Chunk(chunk);
        loop {
            match self.tx.try_send(msg) {
                Ok(()) => return true,
                Err(std::sync::mpsc::TrySendError::Full(m)) => {
                    msg = m;
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return false,
            }
        }
    }

    /// Tells the writer that every chunk has been sent.
    pub fn done(&self) {
        let _ = self.tx.send(Msg::Done);
    }
}

/// Aux fields a snapshot starts with (what redis-server 7.0 writes; `redis-check-rdb` prints
/// them).
pub struct Header {
    /// `rdb-save-incremental-fsync`: sync the file every 32 MiB while writing, so the kernel
    /// never has a huge dirty backlog to flush at once.
    pub incremental_fsync: bool,
    /// The `redis-ver` aux field: the Redis version we answer as.
    pub redis_ver: &'static str,
    pub used_mem: u64,
    pub compression: bool,
    pub checksum: bool,
}

/// Starts the writer thread for a snapshot that will be renamed to `path` when complete. The
/// file is created (and its header written) before this returns, so a bad directory is an
/// error here, not after the shards did their work. The result arrives on the returned
/// channel once [`ChunkSink::done`] was called and the file is committed.
pub fn start_writer(
    path: &Path,
    header: Header,
) -> io::Result<(ChunkSink, tokio::sync::oneshot::Receiver<io::Result<Saved>>)> {
    let tmp = temp_path(path);
    let file = File::create(&tmp).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
                tmp.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            ),
        )
    })?;
    let mut w = Writer::new(BufWriter::with_capacity(1 << 20, file));
    w.set_compression(header.compression);
    w.set_checksum(header.checksum);
    let begun = write_header(&mut w, &header);
    let (tx, rx) = sync_channel(CHANNEL_CHUNKS);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let target = path.to_path_buf();
    let incremental = header.incremental_fsync;
    std::thread::Builder::new()
        .name("rdb-writer".into())
        .spawn(move || {
            let res = begun.and_then(|_| write_all(w, rx, &tmp, &target, incremental));
            if res.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            let _ = done_tx.send(res);
        })?;
    Ok((ChunkSink { tx }, done_rx))
}

/// `temp-<pid>.rdb` next to the target, as Redis names it.
fn temp_path(path: &Path) -> PathBuf {
    let name = format!("temp-{}.rdb", std::process::id());
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.join(name),
        _ => PathBuf::from(name),
    }
}

fn write_header<W: Write>(w: &mut Writer<W>, h: &Header) -> io::Result<()> {
    w.write_header()?;
    w.write_aux(b"redis-ver", h.redis_ver.as_bytes())?;
    w.write_aux_int(b"redis-bits", 64)?;
    w.write_aux_int(b"ctime", (crate::engine::clock::unix_ms() / 1000) as i64)?;
    w.write_aux_int(b"used-mem", h.used_mem as i64)?;
    w.write_aux_int(b"aof-base", 0)
}

fn write_all(
    mut w: Writer<BufWriter<File>>,
    rx: Receiver<Msg>,
    tmp: &Path,
    target: &Path,
    incremental_fsync: bool,
) -> io::Result<Saved> {
    let mut synced = 0u64;
    loop {
        match rx.recv() {
            Ok(Msg::Chunk(c)) => {
                w.write_raw(&c)?;
                if incremental_fsync && w.bytes_written() - synced >= INCREMENTAL_FSYNC_BYTES {
                    w.get_mut().flush()?;
                    w.get_mut().get_ref().sync_data()?;
                    synced = w.bytes_written();
                }
            }
            Ok(Msg::Done) => break,
            // Every sender dropped without Done: the save was abandoned.
            Err(_) => return Err(io::Error::other("snapshot abandoned")),
        }
    }
    let bytes = w.bytes_written() + 9;
    let buf = w.finish()?;
    let file = buf.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(tmp, target)?;
    sync_dir(target)?;
    Ok(Saved { bytes })
}

/// fsync of the directory holding `path`, so that the rename itself survives a power loss.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    File::open(dir)?.sync_all()
}

/// One running snapshot, shared by every shard's part of it.
pub struct Job {
    pub lim: EncLimits,
    /// Keys whose deadline had passed when the snapshot began are left out.
    pub now: u64,
    /// `rdbcompression`.
    pub compression: bool,
    /// `rdb-key-save-delay` (0: none).
    pub key_delay: i64,
    pub sink: ChunkSink,
    /// Shards still writing; the last one to finish tells the writer.
    remaining: AtomicUsize,
    /// Keys written, all shards (each adds its count when it is done).
    pub keys: Arc<AtomicU64>,
}

impl Job {
    pub fn new(
        lim: EncLimits,
        now: u64,
        compression: bool,
        key_delay: i64,
        sink: ChunkSink,
        shards: usize,
    ) -> Arc<Job> {
        Arc::new(Job {
            lim,
            now,
            compression,
            key_delay,
            sink,
            remaining: AtomicUsize::new(shards),
            keys: Arc::new(AtomicU64::new(0)),
        })
    }

    /// A shard sent its last chunk (`keys` in all): the last shard to get here ends the file.
    pub fn finish_shard(&self, keys: u64) {
        self.keys.fetch_add(keys, Ordering::Relaxed);
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.sink.done();
        }
    }
}

/// A db's part of the running snapshot (`Db::snap`): the walk's place, the chunk being filled,
/// and, after a FLUSHDB, the tables as they were (the walk finishes them; the live tables then
/// hold only data newer than the snapshot).
///
/// The snapshot is a point in time without stopping the shard: the walk writes buckets in
/// physical order, marking each with the snapshot's version; a write to a bucket the walk has
/// not reached writes that bucket first (`before_write`, `before_insert`), so every entry goes
/// to the file exactly once, as it was when the snapshot began (design:
/// docs/design/snapshots.md).
pub struct DbSnap {
    job: Arc<Job>,
    dbi: usize,
    version: u64,
    /// Next bucket of the walk; None once every bucket was written.
    cursor: Option<BucketId>,
    detached: Option<Box<(PrimeTable, ExpireTable)>>,
    out: Writer<Vec<u8>>,
    /// Full chunks waiting for the shard's task to send them.
    ready: Vec<Vec<u8>>,
    /// Keys written by the walk since the last step ended (for `rdb-key-save-delay`).
    walked_keys: u64,
    keys: u64,
}

/// Slot flag of an entry the running snapshot must skip: already written on its own before a
/// change, or inserted after the snapshot began (only ever set in buckets the walk has not
/// written; writing a bucket clears it).
const FLAG_SAVED: u8 = FLAG_B;

/// A step ends once this many chunks wait to be sent (bounds what a step holds in memory).
const STEP_CHUNKS: usize = 4;

impl DbSnap {
    fn new(job: Arc<Job>, dbi: usize, version: u64) -> DbSnap {
        let out = chunk_writer(dbi, job.compression, 0);
        DbSnap {
            job,
            dbi,
            version,
            cursor: Some(BucketId::FIRST),
            detached: None,
            out,
            ready: Vec::new(),
            walked_keys: 0,
            keys: 0,
        }
    }

    /// Writes one entry into the current chunk unless its deadline had passed when the
    /// snapshot began; returns the keys written (0 or 1).
    fn write_entry(&mut self, prime: &PrimeTable, expire: &ExpireTable, pos: Pos) -> u64 {
        let (k, v) = prime.at(pos);
        let at = if prime.flags(pos) & FLAG_EXPIRE != 0 {
            expire.get(k.key()).map(|(_, at)| *at)
        } else {
            None
        };
        if at.is_some_and(|at| at <= self.job.now) {
            return 0;
        }
        // Writes into a Vec cannot fail.
        if let Some(at) = at {
            let _ = self.out.write_expire_ms(at as i64);
        }
        let _ = write_object(&mut self.out, Some(k.key()), v, &self.job.lim);
        self.keys += 1;
        if self.out.get_ref().len() >= CHUNK_BYTES {
            let fresh = chunk_writer(self.dbi, self.job.compression, CHUNK_BYTES);
            self.ready
                .push(std::mem::replace(&mut self.out, fresh).into_inner());
        }
        1
    }

    /// Writes bucket `b` unless this snapshot already did (entries saved on their own before
    /// a change or inserted after the snapshot began are skipped), clears its SAVED flags and marks it written; returns the keys
    /// written.
    fn write_bucket(&mut self, prime: &mut PrimeTable, expire: &ExpireTable, b: BucketId) -> u64 {
        if prime.version_of(b) >= self.version {
            return 0;
        }
        let mut todo: smallvec::SmallVec<[Pos; damselfly_dash::SLOTS]> = smallvec::SmallVec::new();
        prime.bucket_entries(b, |pos, _, _| {
            if prime.flags(pos) & FLAG_SAVED == 0 {
                todo.push(pos);
            }
        });
        let n = todo
            .into_iter()
            .map(|pos| self.write_entry(prime, expire, pos))
            .sum();
        prime.clear_bucket_flags(b, FLAG_SAVED);
        prime.set_version_of(b, self.version);
        n
    }

    /// Before the entry at `pos` of the live table changes or goes: if the walk has not
    /// written its bucket, write the entry as it is now (alone: a bucket holds about a dozen
    /// entries, and a write should not pay for all of them) and flag it SAVED so the walk
    /// skips it.
    #[inline]
    pub fn before_write(&mut self, prime: &mut PrimeTable, expire: &ExpireTable, pos: Pos) {
        if self.detached.is_none()
            && prime.version_of(pos.bucket_id()) < self.version
            && prime.flags(pos) & FLAG_SAVED == 0
        {
            self.write_entry(prime, expire, pos);
            let f = prime.flags(pos);
            prime.set_flags(pos, f | FLAG_SAVED);
        }
    }

    /// Before `key` is inserted into the live table: when the insert may move entries
    /// (displacement, stash, split), write every bucket involved first.
    pub fn before_insert(&mut self, prime: &mut PrimeTable, expire: &ExpireTable, key: &[u8]) {
        if self.detached.is_some() {
            return;
        }
        let mut touched: smallvec::SmallVec<[BucketId; 16]> = smallvec::SmallVec::new();
        prime.insert_buckets(damselfly_dash::hash_key(key), |b| touched.push(b));
        for b in touched {
            self.write_bucket(prime, expire, b);
        }
    }

    /// After an insert into the live table: an entry newer than the snapshot that landed in
    /// a bucket the walk has not written is flagged SAVED, so the walk leaves it out.
    #[inline]
    pub fn after_insert(&mut self, prime: &mut PrimeTable, pos: Pos) {
        if self.detached.is_none() && prime.version_of(pos.bucket_id()) < self.version {
            let f = prime.flags(pos);
            prime.set_flags(pos, f | FLAG_SAVED);
        }
    }

    /// A snapshot that stops before its walk ends leaves no SAVED flag behind (the next one
    /// would skip those entries).
    pub fn abandon(&mut self, prime: &mut PrimeTable) {
        if self.detached.is_none() && self.cursor.is_some() {
            prime.clear_flags_everywhere(FLAG_SAVED);
        }
    }

    /// FLUSHDB while the walk is on: the snapshot keeps the old tables and finishes them; the
    /// db starts afresh (nothing in it is part of the snapshot). False when the snapshot
    /// already has its own tables (the live ones are newer than it) or is done with this db: the
    /// caller empties them.
    pub fn detach(&mut self, prime: &mut PrimeTable, expire: &mut ExpireTable) -> bool {
        if self.detached.is_some() || self.cursor.is_none() {
            return false;
        }
        self.detached = Some(Box::new((std::mem::take(prime), std::mem::take(expire))));
        true
    }

    /// Walks on from where it stopped: stops at `deadline`, when enough chunks wait, or (with
    /// `rdb-key-save-delay`) after every bucket that held keys. True once every bucket is
    /// written.
    pub fn walk(
        &mut self,
        prime: &mut PrimeTable,
        expire: &ExpireTable,
        deadline: Option<Instant>,
    ) -> bool {
        if let Some(mut t) = self.detached.take() {
            let done = self.walk_tables(&mut t.0, &t.1, deadline);
            self.detached = Some(t);
            return done;
        }
        self.walk_tables(prime, expire, deadline)
    }

    fn walk_tables(
        &mut self,
        prime: &mut PrimeTable,
        expire: &ExpireTable,
        deadline: Option<Instant>,
    ) -> bool {
        let delay = self.job.key_delay != 0;
        while let Some(b) = self.cursor {
            if !prime.has_bucket(b) {
                self.cursor = None;
                break;
            }
            let n = self.write_bucket(prime, expire, b);
            self.walked_keys += n;
            self.cursor = prime.next_bucket_id(b);
            if self.ready.len() >= STEP_CHUNKS
                || (delay && n > 0)
                || deadline.is_some_and(|d| Instant::now() >= d)
            {
                break;
            }
        }
        self.cursor.is_none()
    }
}

/// Starts this shard's part of `job` (inside the snapshot's transaction hop, so every shard
/// starts at the same point of the transaction order): every db gets its [`DbSnap`] with a
/// version newer than any its buckets carry.
pub fn begin_shard(shard: &mut Shard, job: &Arc<Job>) {
    shard.snapshot_epoch += 1;
    let version = shard.snapshot_epoch;
    for (dbi, db) in shard.dbs.iter_mut().enumerate() {
        db.snap = Some(Box::new(DbSnap::new(job.clone(), dbi, version)));
    }
}

/// What one step of a shard's walk produced.
pub struct Step {
    /// Chunks to hand to the writer, in order.
    pub chunks: Vec<Vec<u8>>,
    /// Every db is written (the chunks hold the last of it); the shard's part is over.
    pub done: bool,
    /// Keys the walk wrote in this step (for `rdb-key-save-delay` and INFO).
    pub walked_keys: u64,
    /// With `done`: every key the shard wrote (walk and write hooks).
    pub total_keys: u64,
}

/// One step of the shard's walk: walks its dbs in order until `deadline`, collecting the
/// chunks that are ready (those the write hooks filled meanwhile included). On the last step
/// every db's snapshot state is dropped.
pub fn step_shard(shard: &mut Shard, deadline: Option<Instant>) -> Step {
    let mut step = Step {
        chunks: Vec::new(),
        done: true,
        walked_keys: 0,
        total_keys: 0,
    };
    let mut walking = true;
    for db in shard.dbs.iter_mut() {
        let done = walking && db.snapshot_walk(deadline);
        let Some(s) = db.snap.as_deref_mut() else {
            continue;
        };
        step.walked_keys += std::mem::take(&mut s.walked_keys);
        step.chunks.append(&mut s.ready);
        if !done {
            // Later dbs wait for this one (their hooks still write what changes).
            walking = false;
            step.done = false;
        }
    }
    if step.done {
        for db in shard.dbs.iter_mut() {
            if let Some(s) = db.snap.take() {
                step.total_keys += s.keys;
                let last = s.out.into_inner();
                if last.len() > 2 {
                    step.chunks.push(last);
                }
            }
        }
    }
    step
}

/// Stops this shard's part of a snapshot (FLUSHALL, a failed writer): its state and the
/// tables a FLUSHDB left to it are dropped.
pub fn abandon_shard(shard: &mut Shard) {
    for db in shard.dbs.iter_mut() {
        db.snapshot_abandon();
    }
}

/// SAVE's way: the shard's whole part in one go, on the shard's thread (the caller holds
/// locks on every shard), handing chunks to the writer as they fill. False when the writer
/// went away or the save was aborted.
pub fn serialize_shard(shard: &mut Shard, job: &Arc<Job>, abort: &AtomicBool) -> bool {
    begin_shard(shard, job);
    loop {
        if abort.load(Ordering::Relaxed) {
            abandon_shard(shard);
            return false;
        }
        let step = step_shard(shard, None);
        if job.key_delay != 0 && step.walked_keys > 0 {
            debug_delay(job.key_delay.saturating_mul(step.walked_keys as i64));
        }
        for c in step.chunks {
            if !job.sink.send(c) {
                abandon_shard(shard);
                return false;
            }
        }
        if step.done {
            job.finish_shard(step.total_keys);
            return true;
        }
    }
}

/// A chunk for db `dbi`, starting with its SELECTDB. No checksum: the file's writer computes
/// the CRC64 of everything it writes.
fn chunk_writer(dbi: usize, compression: bool, capacity: usize) -> Writer<Vec<u8>> {
    let mut w = Writer::new(Vec::with_capacity(capacity));
    w.set_compression(compression).set_checksum(false);
    let _ = w.write_selectdb(dbi as u64);
    w
}

/// `rdb-key-save-delay` / `key-load-delay` (Redis debugging knobs the test suite uses to make
/// saves and loads slow):
/// positive values are microseconds, negative ones nanoseconds.
pub fn debug_delay(v: i64) {
    let d = if v > 0 {
        std::time::Duration::from_micros(v as u64)
    } else {
        std::time::Duration::from_nanos(v.unsigned_abs())
    };
    std::thread::sleep(d);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::db::TtlMode;
    use crate::types::{CompactStr, Value};
    use std::collections::BTreeMap;
    use std::sync::mpsc::Receiver;

    fn new_job() -> (Arc<Job>, Receiver<Msg>) {
        let (tx, rx) = sync_channel(1 << 16);
        let job = Job::new(EncLimits::default(), 0, true, 0, ChunkSink { tx }, 1);
        (job, rx)
    }

    /// The file the chunks received so far make, parsed back: db 0's keys and string values.
    fn contents(rx: &Receiver<Msg>) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut w = Writer::new(Vec::new());
        w.write_header().unwrap();
        while let Ok(m) = rx.try_recv() {
            if let Msg::Chunk(c) = m {
                w.write_raw(&c).unwrap();
            }
        }
        let file = w.finish().unwrap();
        let ds = super::super::load::parse(&file, 1, 16, 0, &EncLimits::default()).unwrap();
        ds.shards
            .into_iter()
            .flatten()
            .map(|e| {
                assert_eq!(e.db, 0);
                (e.key.key().to_vec(), e.value.as_str().unwrap().to_vec())
            })
            .collect()
    }

    fn set(shard: &mut Shard, k: &str, v: &str) {
        let v = Value::str(CompactStr::from_value(v.as_bytes()));
        shard.db(0).set(k.as_bytes(), v, TtlMode::Clear, 0);
    }

    fn dataset(shard: &mut Shard) -> BTreeMap<Vec<u8>, Vec<u8>> {
        shard
            .db(0)
            .iter()
            .map(|(k, v)| (k.key().to_vec(), v.as_str().unwrap().to_vec()))
            .collect()
    }

    /// A walk in small steps with writes of every kind between them gives the dataset as it
    /// was at the start.
    #[test]
    fn stepped_walk_under_writes_is_the_start_state() {
        let mut shard = Shard::new(0, 16);
        for i in 0..5000 {
            set(&mut shard, &format!("k{i}"), &format!("v{i}"));
        }
        let start = dataset(&mut shard);
        let (job, rx) = new_job();
        begin_shard(&mut shard, &job);
        let mut i = 0;
        loop {
            let step = step_shard(&mut shard, Some(Instant::now()));
            for c in step.chunks {
                assert!(job.sink.send(c));
            }
            if step.done {
                assert_eq!(step.total_keys, 5000);
                break;
            }
            for _ in 0..3 {
                match i % 3 {
                    0 => set(&mut shard, &format!("k{}", i * 7 % 5000), "changed"),
                    1 => {
                        shard
                            .db(0)
                            .remove(format!("k{}", i * 11 % 5000).as_bytes(), 0);
                    }
                    _ => set(&mut shard, &format!("new{i}"), "new"),
                }
                i += 1;
            }
        }
        assert!(
            i > 1000,
            "the walk took {i} writes: too few steps to prove anything"
        );
        assert_eq!(contents(&rx), start);
        assert!(shard.dbs.iter().all(|d| d.snap.is_none()));
    }

    /// A snapshot abandoned halfway leaves no SAVED flag behind: the next one has every key.
    #[test]
    fn abandoned_walk_leaves_the_table_clean() {
        let mut shard = Shard::new(0, 16);
        for i in 0..3000 {
            set(&mut shard, &format!("k{i}"), "v");
        }
        let (job, _rx) = new_job();
        begin_shard(&mut shard, &job);
        for _ in 0..20 {
            step_shard(&mut shard, Some(Instant::now()));
        }
        // Changes only: inserts would split segments, whose buckets are then written whole
        // (which clears their flags anyway).
        for i in 0..3000 {
            if i % 2 == 0 {
                set(&mut shard, &format!("k{i}"), "changed");
            }
        }
        abandon_shard(&mut shard);
        let now = dataset(&mut shard);
        assert_eq!(now.len(), 3000);
        let (job, rx) = new_job();
        assert!(serialize_shard(&mut shard, &job, &AtomicBool::new(false)));
        assert_eq!(contents(&rx), now);
    }
}
