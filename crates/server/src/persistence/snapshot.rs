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

use super::rdb::object::{write_object, EncLimits};
use super::rdb::Writer;
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
    /// Sends a chunk; false when the writer is gone (it failed: stop serializing).
    fn send(&self, chunk: Vec<u8>) -> bool {
        self.tx.send(Msg::Chunk(chunk)).is_ok()
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

/// Serializes every database of `shard` into chunks for `sink`: `[SELECTDB n] [EXPIRETIME_MS
/// at] type key value ...`. Keys already expired at `now` are left out. Returns the number of
/// keys written, or None when the writer went away or `abort` was raised (the save failed; the
/// caller reports it).
pub fn serialize_shard(
    shard: &Shard,
    now: u64,
    lim: &EncLimits,
    key_delay: i64,
    abort: &std::sync::atomic::AtomicBool,
    sink: &ChunkSink,
) -> Option<u64> {
    let mut keys = 0u64;
    for (dbi, db) in shard.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let mut w = chunk_writer(dbi);
        let mut cursor = 0u64;
        let mut failed = false;
        loop {
            cursor = db.scan(cursor, |k, v, at| {
                if failed || at.is_some_and(|at| at <= now) {
                    return;
                }
                if abort.load(std::sync::atomic::Ordering::Relaxed) {
                    failed = true;
                    return;
                }
                if let Some(at) = at {
                    let _ = w.write_expire_ms(at as i64);
                }
                // Writes into a Vec cannot fail.
                let _ = write_object(&mut w, Some(k.key()), v, lim);
                keys += 1;
                if key_delay != 0 {
                    debug_delay(key_delay);
                }
                if w.get_ref().len() >= CHUNK_BYTES {
                    let full = std::mem::replace(&mut w, chunk_writer(dbi)).into_inner();
                    failed = !sink.send(full);
                }
            });
            if failed {
                return None;
            }
            if cursor == 0 {
                break;
            }
        }
        let last = w.into_inner();
        if last.len() > 2 && !sink.send(last) {
            return None;
        }
    }
    Some(keys)
}

/// A chunk for db `dbi`, starting with its SELECTDB.
fn chunk_writer(dbi: usize) -> Writer<Vec<u8>> {
    let mut w = Writer::new(Vec::with_capacity(CHUNK_BYTES + (CHUNK_BYTES >> 2)));
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
