//! Writing a snapshot file: shards serialize, one writer thread writes (design:
//! docs/design/snapshots.md).
//!
//! Every shard turns its own databases into self-contained chunks (each starts with `SELECTDB`,
//! so chunks of different shards may interleave in the file in any order) and hands them to one
//! writer thread over a bounded channel: memory stays at a few chunks however big the dataset,
//! and a shard never touches another's data. The writer owns the file: it writes header and aux
//! fields, the chunks as they come, then EOF and the CRC64, and makes the file durable and
//! visible atomically (temporary file, fsync, rename, fsync of the directory), so a crash at any
//! moment leaves the previous snapshot intact. A diskless full sync uses the same writer with a
//! socket-bound channel instead of the file (`start_stream_writer`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use damselfly_dash::{BucketId, Pos, FLAG_B};

use crate::engine::db::{ExpireTable, PrimeTable, FLAG_EXPIRE};
use crate::engine::mcstate::{McTable, FLAG_MC};
use crate::engine::shard::Shard;
use damselfly_types::rdb::object::{write_object, EncLimits, Pieces};
use damselfly_types::rdb::wire::Parts;
use damselfly_types::rdb::Writer;

/// A chunk is handed to the writer once it holds this much.
const CHUNK_BYTES: usize = Parts::PART_BYTES;
/// Redis's REDIS_AUTOSYNC_BYTES.
const INCREMENTAL_FSYNC_BYTES: u64 = 32 << 20;
/// Chunks in flight between the shards and the writer (bounds the memory a save takes).
const CHANNEL_CHUNKS: usize = 16;

/// Buffers the writer writes back to back, nothing between them: usually one (about
/// [`CHUNK_BYTES`]), or the pieces of one big value (kept apart so it never sits in one huge
/// buffer that grows by copying).
pub type Chunk = Vec<Vec<u8>>;

/// What the writer thread receives.
pub enum Msg {
    Chunk(Chunk),
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
    fn send(&self, chunk: Chunk) -> bool {
        self.tx.send(Msg::Chunk(chunk)).is_ok()
    }

    /// Sends a chunk without blocking the thread: while the writer is behind (the disk is
    /// slower than serializing) the calling task sleeps and the shard serves its clients.
    pub async fn send_async(&self, chunk: Chunk) -> bool {
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
    /// Function libraries' code, saved after the aux fields as Redis 7 does (FUNCTION2).
    pub functions: Vec<std::sync::Arc<str>>,
    /// A full sync's snapshot: the `repl-stream-db` aux field (see `load::Dataset`).
    pub repl_stream_db: Option<usize>,
    /// A replica's snapshot: where in its primary's history it stands (`repl-id`,
    /// `repl-offset`), for a partial resync after a restart.
    pub repl_position: Option<(String, u64)>,
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
    let target = path.to_path_buf();
    let incremental = header.incremental_fsync;
    spawn_writer(
        BufWriter::with_capacity(1 << 20, file),
        header,
        move |w, rx| {
            let res = write_file(w, rx, &tmp, &target, incremental);
            if res.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            res
        },
    )
}

/// Starts the writer thread of a snapshot that goes to a socket instead of a file (diskless
/// replication): the RDB bytes arrive on `out` in pieces of about a megabyte, header first;
/// nothing touches the disk. The bounded channel makes the shards wait for a slow replica as
/// they wait for a slow disk. Fails with `BrokenPipe` once `out`'s receiver is gone.
pub fn start_stream_writer(
    header: Header,
    out: tokio::sync::mpsc::Sender<Vec<u8>>,
) -> io::Result<(ChunkSink, tokio::sync::oneshot::Receiver<io::Result<Saved>>)> {
    let pipe = ChannelWrite {
        out,
        buf: Vec::with_capacity(STREAM_PIECE),
    };
    spawn_writer(pipe, header, |mut w, rx| {
        write_chunks(&mut w, rx, |_| Ok(()))?;
        let bytes = w.bytes_written() + 9;
        w.finish()?.flush()?;
        Ok(Saved { bytes })
    })
}

/// Bytes a stream writer hands on at a time.
const STREAM_PIECE: usize = 1 << 20;

/// `Write` into a bounded channel of byte buffers (the stream writer's output), for the writer
/// thread only: it blocks while the channel is full.
struct ChannelWrite {
    out: tokio::sync::mpsc::Sender<Vec<u8>>,
    buf: Vec<u8>,
}

impl ChannelWrite {
    fn hand_on(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let piece = std::mem::replace(&mut self.buf, Vec::with_capacity(STREAM_PIECE));
        self.out
            .blocking_send(piece)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the replica went away"))
    }
}

impl Write for ChannelWrite {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= STREAM_PIECE {
            self.hand_on()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.hand_on()
    }
}

/// The writer thread, whatever the output: writes the header, then hands the chunk channel to
/// `body`, whose result is the save's.
fn spawn_writer<W: Write + Send + 'static>(
    out: W,
    header: Header,
    body: impl FnOnce(Writer<W>, Receiver<Msg>) -> io::Result<Saved> + Send + 'static,
) -> io::Result<(ChunkSink, tokio::sync::oneshot::Receiver<io::Result<Saved>>)> {
    let mut w = Writer::new(out);
    w.set_compression(header.compression);
    w.set_checksum(header.checksum);
    let begun = write_header(&mut w, &header);
    let (tx, rx) = sync_channel(CHANNEL_CHUNKS);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("rdb-writer".into())
        .spawn(move || {
            let res = begun.and_then(|_| body(w, rx));
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
    w.write_aux_int(b"ctime", (crate::clock::unix_ms() / 1000) as i64)?;
    w.write_aux_int(b"used-mem", h.used_mem as i64)?;
    w.write_aux_int(b"aof-base", 0)?;
    if let Some(db) = h.repl_stream_db {
        w.write_aux_int(b"repl-stream-db", db as i64)?;
    }
    if let Some((id, offset)) = &h.repl_position {
        w.write_aux(b"repl-id", id.as_bytes())?;
        w.write_aux_int(b"repl-offset", *offset as i64)?;
    }
    for code in &h.functions {
        w.write_u8(damselfly_types::rdb::wire::opcode::FUNCTION2)?;
        w.write_string(code.as_bytes())?;
    }
    Ok(())
}

/// Writes the shards' chunks as they come until every shard is done, calling `after_chunk`
/// after each.
fn write_chunks<W: Write>(
    w: &mut Writer<W>,
    rx: Receiver<Msg>,
    mut after_chunk: impl FnMut(&mut Writer<W>) -> io::Result<()>,
) -> io::Result<()> {
    loop {
        match rx.recv() {
            Ok(Msg::Chunk(parts)) => {
                for p in parts {
                    w.write_raw(&p)?;
                }
                after_chunk(w)?;
            }
            Ok(Msg::Done) => return Ok(()),
            // Every sender dropped without Done: the save was abandoned.
            Err(_) => return Err(io::Error::other("snapshot abandoned")),
        }
    }
}

/// The file writer's body: chunks (with incremental fsync), trailer, then the commit.
fn write_file(
    mut w: Writer<BufWriter<File>>,
    rx: Receiver<Msg>,
    tmp: &Path,
    target: &Path,
    incremental_fsync: bool,
) -> io::Result<Saved> {
    let mut synced = 0u64;
    write_chunks(&mut w, rx, |w| {
        if incremental_fsync && w.bytes_written() - synced >= INCREMENTAL_FSYNC_BYTES {
            w.get_mut().flush()?;
            w.get_mut().get_ref().sync_data()?;
            synced = w.bytes_written();
        }
        Ok(())
    })?;
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
    /// `rdbcompression`.
    pub compression: bool,
    /// `rdb-key-save-delay` (0: none).
    pub key_delay: i64,
    pub sink: ChunkSink,
    /// Shards still writing; the last one to finish tells the writer.
    remaining: AtomicUsize,
    /// Keys written, all shards (each adds its count when it is done).
    pub keys: Arc<AtomicU64>,
    /// A shard could not write its part (logged where it happened): the file is never
    /// committed.
    failed: AtomicBool,
}

impl Job {
    pub fn new(
        lim: EncLimits,
        compression: bool,
        key_delay: i64,
        sink: ChunkSink,
        shards: usize,
    ) -> Arc<Job> {
        Arc::new(Job {
            lim,
            compression,
            key_delay,
            sink,
            remaining: AtomicUsize::new(shards),
            keys: Arc::new(AtomicU64::new(0)),
            failed: AtomicBool::new(false),
        })
    }

    /// A shard sent its last chunk (`keys` in all): the last shard to get here ends the file.
    pub fn finish_shard(&self, keys: u64) {
        self.keys.fetch_add(keys, Ordering::Relaxed);
        // A failed job never sends Done: once every shard dropped it, the writer sees the
        // channel close and removes its temporary file.
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1
            && !self.failed.load(Ordering::Relaxed)
        {
            self.sink.done();
        }
    }
}

/// A flushed db's tables a running snapshot keeps to finish them (main, expiry, memcache).
type Detached = (PrimeTable, ExpireTable, Option<Box<McTable>>);

/// The AUX field carrying the client flags of the memcache item that follows it.
pub const MC_FLAGS_AUX: &[u8] = b"mc-flags";

/// A db's tables beside the main one that a snapshot reads entries' extras from.
#[derive(Clone, Copy)]
pub struct Sides<'a> {
    pub expire: &'a ExpireTable,
    /// Memcache item state (client flags), when the db has any.
    pub mc: Option<&'a McTable>,
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
    detached: Option<Box<Detached>>,
    out: Writer<Vec<u8>>,
    /// Full chunks waiting for the shard's task to send them.
    ready: Vec<Chunk>,
    /// Big collections being written a piece per step of the walk, the first one in progress
    /// (the others wait with only their head written). Each is flagged PENDING in the table.
    big: Vec<BigValue>,
    /// Keys written by the walk since the last step ended (for `rdb-key-save-delay`).
    walked_keys: u64,
    keys: u64,
}

/// A big collection the walk writes across steps: its own chunk (SELECTDB, expiry, head,
/// elements so far), handed to the writer whole once complete, so no other chunk can come
/// between its pieces in the file.
struct BigValue {
    key: Vec<u8>,
    out: Writer<Parts>,
    pieces: Pieces,
}

/// Collections with more elements than this are written in pieces by the walk.
const BIG_ELEMENTS: usize = 4096;
/// Elements the walk writes per piece (a few hundred microseconds at most).
const PIECE_ELEMENTS: usize = 256;

/// Slot flag of an entry the running snapshot must skip: already written on its own before a
/// change, or inserted after the snapshot began (only ever set in buckets the walk has not
/// written; writing a bucket clears it).
const FLAG_SAVED: u8 = FLAG_B;
/// The same bit in a bucket the walk has written: a big collection whose writing is under way
/// (`DbSnap::big`); a change to it first finishes writing it. Entries never move between
/// written and unwritten buckets while a snapshot runs, so the two meanings never meet.
const FLAG_PENDING: u8 = FLAG_B;

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
            big: Vec::new(),
            walked_keys: 0,
            keys: 0,
        }
    }

    /// Writes one entry into the current chunk (expired ones too, as Redis: the loader counts
    /// and drops them); returns the keys written (0 or 1). With `split`, a big collection is
    /// only begun: its head goes to a chunk of its own, the walk writes the rest in pieces, and
    /// true comes back second (the caller flags it PENDING).
    fn write_entry(
        &mut self,
        prime: &PrimeTable,
        sides: Sides<'_>,
        pos: Pos,
        split: bool,
    ) -> (u64, bool) {
        let (k, v) = prime.at(pos);
        let at = if prime.flags(pos) & FLAG_EXPIRE != 0 {
            sides.expire.get(k.key()).map(|(_, at)| *at)
        } else {
            None
        };
        // A memcache item's client flags ride in an AUX field just before it: redis-server
        // skips AUX fields it does not know, our loader gives them to the next key.
        if prime.flags(pos) & FLAG_MC != 0 {
            if let Some(f) = sides
                .mc
                .and_then(|t| t.get(k.key()))
                .map(|(_, st)| st.flags)
                .filter(|&f| f != 0)
            {
                let _ = self.out.write_aux_int(MC_FLAGS_AUX, f as i64);
            }
        }
        if split && elements(v) > BIG_ELEMENTS {
            let mut out = Writer::new(Parts::default());
            out.set_compression(self.job.compression)
                .set_checksum(false);
            // Writes into memory cannot fail.
            let _ = out.write_selectdb(self.dbi as u64);
            if let Some(at) = at {
                let _ = out.write_expire_ms(at as i64);
            }
            if let Ok(Some(pieces)) = Pieces::begin(&mut out, Some(k.key()), v, &self.job.lim) {
                self.big.push(BigValue {
                    key: k.key().to_vec(),
                    out,
                    pieces,
                });
                return (0, true);
            }
        }
        if let Some(at) = at {
            let _ = self.out.write_expire_ms(at as i64);
        }
        let _ = write_object(&mut self.out, Some(k.key()), v, &self.job.lim);
        self.keys += 1;
        if self.out.get_ref().len() >= CHUNK_BYTES {
            let fresh = chunk_writer(self.dbi, self.job.compression, CHUNK_BYTES);
            self.ready
                .push(vec![std::mem::replace(&mut self.out, fresh).into_inner()]);
        }
        (1, false)
    }

    /// Writes up to `max` more elements of the big collection `i` (`v` is its value, found
    /// by key); once complete its chunk is ready and true comes back.
    fn write_big(&mut self, i: usize, v: &damselfly_types::Value, max: usize) -> bool {
        let big = &mut self.big[i];
        match big.pieces.write_more(&mut big.out, Some(&big.key), v, max) {
            Ok(false) => false,
            Ok(true) => {
                let big = self.big.remove(i);
                self.ready.push(big.out.into_inner().parts());
                self.keys += 1;
                true
            }
            Err(e) => {
                let big = self.big.remove(i);
                self.fail(&format!(
                    "writing {}: {e}",
                    String::from_utf8_lossy(&big.key)
                ));
                true
            }
        }
    }

    fn fail(&self, why: &str) {
        crate::log_warning!("Snapshot failed: {why}");
        self.job.failed.store(true, Ordering::Relaxed);
    }

    /// Continues the big collection in progress for one piece; true when it is complete.
    fn walk_big(&mut self, prime: &mut PrimeTable) -> bool {
        let Some(pos) = prime.find(&self.big[0].key[..]) else {
            // Every change to a PENDING entry finishes it first: this cannot happen.
            self.fail("a big value vanished while it was written");
            self.big.remove(0);
            return true;
        };
        let done = self.write_big(0, prime.at(pos).1, PIECE_ELEMENTS);
        if done {
            let f = prime.flags(pos);
            prime.set_flags(pos, f & !FLAG_PENDING);
        }
        done
    }

    /// Writes bucket `b` unless this snapshot already did (entries saved on their own before
    /// a change or inserted after the snapshot began are skipped), clears its SAVED flags and
    /// marks it written; returns the keys written. The walk (`walk`) leaves big collections
    /// begun and PENDING; a write hook writes everything whole.
    fn write_bucket(
        &mut self,
        prime: &mut PrimeTable,
        sides: Sides<'_>,
        b: BucketId,
        walk: bool,
    ) -> u64 {
        if prime.version_of(b) >= self.version {
            return 0;
        }
        let mut todo: smallvec::SmallVec<[Pos; damselfly_dash::SLOTS]> = smallvec::SmallVec::new();
        prime.bucket_entries(b, |pos, _, _| {
            if prime.flags(pos) & FLAG_SAVED == 0 {
                todo.push(pos);
            }
        });
        let mut n = 0;
        let mut pending: smallvec::SmallVec<[Pos; 2]> = smallvec::SmallVec::new();
        for pos in todo {
            let (k, split) = self.write_entry(prime, sides, pos, walk);
            n += k;
            if split {
                pending.push(pos);
            }
        }
        prime.clear_bucket_flags(b, FLAG_SAVED);
        prime.set_version_of(b, self.version);
        for pos in pending {
            let f = prime.flags(pos);
            prime.set_flags(pos, f | FLAG_PENDING);
        }
        n
    }

    /// Before the entry at `pos` of the live table changes or goes: if the walk has not
    /// written its bucket, write the entry as it is now (alone: a bucket holds about a dozen
    /// entries, and a write should not pay for all of them) and flag it SAVED so the walk
    /// skips it.
    /// A big collection the walk is writing in pieces (PENDING) is finished first.
    #[inline]
    pub fn before_write(&mut self, prime: &mut PrimeTable, sides: Sides<'_>, pos: Pos) {
        if self.detached.is_some() {
            return;
        }
        let f = prime.flags(pos);
        if prime.version_of(pos.bucket_id()) < self.version {
            if f & FLAG_SAVED == 0 {
                self.write_entry(prime, sides, pos, false);
                prime.set_flags(pos, f | FLAG_SAVED);
            }
        } else if f & FLAG_PENDING != 0 {
            self.finish_big(prime, pos);
        }
    }

    /// Writes the rest of the PENDING big collection at `pos` in one go.
    #[cold]
    fn finish_big(&mut self, prime: &mut PrimeTable, pos: Pos) {
        let (k, v) = prime.at(pos);
        if let Some(i) = self.big.iter().position(|b| b.key[..] == *k.key()) {
            self.write_big(i, v, usize::MAX);
        }
        let f = prime.flags(pos);
        prime.set_flags(pos, f & !FLAG_PENDING);
    }

    /// Before `key` is inserted into the live table: when the insert may move entries
    /// (displacement, stash, split), write every bucket involved first.
    pub fn before_insert(&mut self, prime: &mut PrimeTable, sides: Sides<'_>, key: &[u8]) {
        if self.detached.is_some() {
            return;
        }
        let mut touched: smallvec::SmallVec<[BucketId; 16]> = smallvec::SmallVec::new();
        prime.insert_buckets(damselfly_dash::hash_key(key), |b| touched.push(b));
        for b in touched {
            self.write_bucket(prime, sides, b, false);
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

    /// A snapshot that stops before its walk ends leaves no SAVED or PENDING flag behind
    /// (the next one would skip those entries).
    pub fn abandon(&mut self, prime: &mut PrimeTable) {
        if self.detached.is_none() && !self.walked() {
            prime.clear_flags_everywhere(FLAG_SAVED | FLAG_PENDING);
        }
    }

    /// Every bucket and every big collection is written.
    fn walked(&self) -> bool {
        self.cursor.is_none() && self.big.is_empty()
    }

    /// FLUSHDB while the walk is on: the snapshot keeps the old tables and finishes them; the
    /// db starts afresh (nothing in it is part of the snapshot). False when the snapshot
    /// already has its own tables (the live ones are newer than it) or is done with this db: the
    /// caller empties them.
    pub fn detach(
        &mut self,
        prime: &mut PrimeTable,
        expire: &mut ExpireTable,
        mc: &mut Option<Box<McTable>>,
    ) -> bool {
        if self.detached.is_some() || self.walked() {
            return false;
        }
        self.detached = Some(Box::new((
            std::mem::take(prime),
            std::mem::take(expire),
            mc.take(),
        )));
        prime.set_rebase(crate::engine::access::rebase);
        true
    }

    /// Walks on from where it stopped: stops at `deadline`, when enough chunks wait, or (with
    /// `rdb-key-save-delay`) after every bucket that held keys. True once every bucket is
    /// written.
    pub fn walk(
        &mut self,
        prime: &mut PrimeTable,
        sides: Sides<'_>,
        deadline: Option<Instant>,
    ) -> bool {
        if let Some(mut t) = self.detached.take() {
            let sides = Sides {
                expire: &t.1,
                mc: t.2.as_deref(),
            };
            let done = self.walk_tables(&mut t.0, sides, deadline);
            self.detached = Some(t);
            return done;
        }
        self.walk_tables(prime, sides, deadline)
    }

    fn walk_tables(
        &mut self,
        prime: &mut PrimeTable,
        sides: Sides<'_>,
        deadline: Option<Instant>,
    ) -> bool {
        let delay = self.job.key_delay != 0;
        loop {
            let n = if !self.big.is_empty() {
                u64::from(self.walk_big(prime))
            } else if let Some(b) = self.cursor {
                if !prime.has_bucket(b) {
                    self.cursor = None;
                    break;
                }
                self.cursor = prime.next_bucket_id(b);
                self.write_bucket(prime, sides, b, true)
            } else {
                break;
            };
            self.walked_keys += n;
            if self.ready.len() >= STEP_CHUNKS
                || (delay && n > 0)
                || deadline.is_some_and(|d| Instant::now() >= d)
            {
                break;
            }
        }
        self.walked()
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
    pub chunks: Vec<Chunk>,
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
                    step.chunks.push(vec![last]);
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

/// Elements of a collection (0 for a string): what decides whether the walk writes it in
/// pieces.
fn elements(v: &damselfly_types::Value) -> usize {
    use damselfly_types::value::ValueRef;
    match v.view() {
        ValueRef::Str(_) => 0,
        ValueRef::List(l) => l.len(),
        ValueRef::Hash(h) => h.len(),
        ValueRef::Set(s) => s.len(),
        ValueRef::ZSet(z) => z.len(),
        // Written whole (node by node) by `write_object`.
        ValueRef::Stream(_) => 0,
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
    use damselfly_types::{CompactStr, Value};
    use std::collections::BTreeMap;
    use std::sync::mpsc::Receiver;

    fn new_job() -> (Arc<Job>, Receiver<Msg>) {
        let (tx, rx) = sync_channel(1 << 16);
        let job = Job::new(EncLimits::default(), true, 0, ChunkSink { tx }, 1);
        (job, rx)
    }

    /// The file the chunks received so far make, parsed back.
    fn received(rx: &Receiver<Msg>) -> Vec<crate::engine::rdb_load::Entry> {
        let mut w = Writer::new(Vec::new());
        w.write_header().unwrap();
        while let Ok(m) = rx.try_recv() {
            if let Msg::Chunk(parts) = m {
                for p in parts {
                    w.write_raw(&p).unwrap();
                }
            }
        }
        let file = w.finish().unwrap();
        let ds = crate::engine::rdb_load::parse(&file, 1, 16, 0, &EncLimits::default()).unwrap();
        ds.shards.into_iter().flatten().collect()
    }

    /// db 0's keys and string values in the chunks received so far.
    fn contents(rx: &Receiver<Msg>) -> BTreeMap<Vec<u8>, Vec<u8>> {
        received(rx)
            .into_iter()
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

    /// Every value the chunks received so far hold, as digests by key (all dbs).
    fn digests(rx: &Receiver<Msg>) -> BTreeMap<Vec<u8>, [u8; 20]> {
        let mut out = BTreeMap::new();
        for e in received(rx) {
            let d = damselfly_types::digest::value_digest(&e.value);
            assert!(
                out.insert(e.key.key().to_vec(), d).is_none(),
                "a key written twice"
            );
        }
        out
    }

    fn digests_of(shard: &mut Shard) -> BTreeMap<Vec<u8>, [u8; 20]> {
        shard
            .db(0)
            .iter()
            .map(|(k, v)| {
                let d = damselfly_types::digest::value_digest(v);
                (k.key().to_vec(), d)
            })
            .collect()
    }

    /// Big collections of every type: the walk writes them a piece per step (a step ends with
    /// one half-written), and writes meanwhile (to a big value being written, to one not yet
    /// begun, deleting one, small keys) still give the dataset as it was at the start.
    #[test]
    fn big_values_are_written_in_pieces_at_their_start_state() {
        use damselfly_types::hash::Hash;
        use damselfly_types::list::{Fill, List};
        use damselfly_types::set::Set;
        use damselfly_types::zset::ZSet;
        use damselfly_types::Limits;
        let lim = Limits {
            entries: 128,
            value: 64,
        };
        let n = 3 * BIG_ELEMENTS;
        let members: Vec<Vec<u8>> = (0..n).map(|i| format!("member:{i}").into_bytes()).collect();
        let mut shard = Shard::new(0, 16);
        for t in 0..3 {
            let db = shard.db(0);
            let items = members.iter().map(|m| &m[..]);
            db.set(
                format!("set{t}").as_bytes(),
                Value::set(Set::from_members(items.clone(), 512)),
                TtlMode::Clear,
                0,
            );
            db.set(
                format!("list{t}").as_bytes(),
                Value::list(List::from_iter(items, Fill::new(-2))),
                TtlMode::Clear,
                0,
            );
            let mut h = Hash::default();
            for m in &members {
                h.set(m, b"value", lim, false);
            }
            db.set(
                format!("hash{t}").as_bytes(),
                Value::hash(h),
                TtlMode::Clear,
                0,
            );
            let sorted: Vec<(Vec<u8>, f64)> = (0..n)
                .map(|i| (format!("m{i:08}").into_bytes(), i as f64))
                .collect();
            db.set(
                format!("zset{t}").as_bytes(),
                Value::zset(ZSet::from_sorted(&sorted, &lim)),
                TtlMode::Clear,
                0,
            );
        }
        for i in 0..2000 {
            set(&mut shard, &format!("k{i}"), &format!("v{i}"));
        }
        let start = digests_of(&mut shard);
        let (job, rx) = new_job();
        begin_shard(&mut shard, &job);
        let (mut steps, mut mid_value, mut i) = (0, 0, 0u64);
        loop {
            let step = step_shard(&mut shard, Some(Instant::now()));
            steps += 1;
            for c in step.chunks {
                assert!(job.sink.send(c));
            }
            if step.done {
                assert_eq!(step.total_keys, 2000 + 12);
                break;
            }
            if let Some(big) = shard.dbs[0].snap.as_ref().and_then(|s| s.big.first()) {
                mid_value += 1;
                // Every few steps, change the value being written: the hook finishes it first.
                if mid_value % 7 == 3 {
                    let key = big.key.clone();
                    let v = shard.db(0).get_mut(&key, 0).unwrap();
                    match v.view() {
                        damselfly_types::value::ValueRef::Set(_) => {
                            v.as_set_mut().unwrap().add(b"new", 512);
                        }
                        damselfly_types::value::ValueRef::List(_) => {
                            v.as_list_mut().unwrap().push_back(b"new", Fill::new(-2));
                        }
                        damselfly_types::value::ValueRef::Hash(_) => {
                            v.as_hash_mut().unwrap().set(b"new", b"new", lim, false);
                        }
                        damselfly_types::value::ValueRef::ZSet(_) => {
                            v.as_zset_mut().unwrap().insert(b"new", -1.0, &lim);
                        }
                        damselfly_types::value::ValueRef::Str(_)
                        | damselfly_types::value::ValueRef::Stream(_) => unreachable!(),
                    }
                }
            }
            // Writes everywhere else between steps.
            match i % 4 {
                0 => set(&mut shard, &format!("k{}", i * 7 % 2000), "changed"),
                1 => set(&mut shard, &format!("new{i}"), "new"),
                2 => {
                    shard
                        .db(0)
                        .remove(format!("k{}", i * 11 % 2000).as_bytes(), 0);
                }
                _ => {
                    if i == 3 {
                        shard.db(0).remove(b"zset2", 0);
                    }
                    if let Some(v) = shard.db(0).get_mut(b"set2", 0) {
                        v.as_set_mut()
                            .unwrap()
                            .remove(format!("member:{i}").as_bytes());
                    }
                }
            }
            i += 1;
        }
        assert!(
            mid_value > 20,
            "only {mid_value} of {steps} steps ended inside a big value: not written in pieces"
        );
        assert_eq!(digests(&rx), start);
        // No flag left behind: a second snapshot, taken whole, has every key as it is now.
        let now = digests_of(&mut shard);
        let (job, rx) = new_job();
        assert!(serialize_shard(&mut shard, &job, &AtomicBool::new(false)));
        assert_eq!(digests(&rx), now);
    }
}
