//! A memcache connection: read → frame every complete request (`proto::parse`) → run the keyed
//! ones as one squashed run (one message per shard, replies back in request order, the same
//! path RESP pipelines take) → answer the keyless ones on this thread → write all replies once.
//!
//! A `get` of many keys becomes one call per key, so its keys are fetched on their shards in
//! parallel, and `END` follows the last one. Keyless requests (`flush_all`, `stats`, `mn`,
//! errors) are barriers: what came before them is answered first.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use smallvec::SmallVec;
use tokio::io::AsyncReadExt;

use super::ops::{self, Params};
use super::proto::{self, Cmd, Parse, Request};
use super::stats;
use crate::client::{ClientHandle, ClientInfo};
use crate::commands::coordinator::squash::{run_calls, Call};
use crate::commands::ConnCtx;
use crate::engine::vll::KeyLock;
use crate::engine::Worker;
use crate::net::session::{write_all, Output};
use crate::net::stream::{ReadHalf, Stream};

/// Read buffer growth step.
const READ_CHUNK: usize = 16 * 1024;
/// Requests framed ahead of execution per batch.
const MAX_BATCH: usize = 128;
/// Flush replies mid-batch beyond this.
const FLUSH_THRESHOLD: usize = 256 * 1024;
/// Unwritten reply bytes beyond which the connection is not read (see `run`).
const MAX_UNWRITTEN: usize = 4 * 1024 * 1024;
/// The version `version` reports: the memcached protocol level we implement.
pub const VERSION: &str = "1.6.18";

/// Serves one accepted memcache socket until it closes.
pub async fn serve(worker: Rc<Worker>, stream: Stream) {
    let shared = worker.shared.clone();
    stream.tune(shared.config.tcp_keepalive_secs());
    let addrs = stream.addrs();
    let fd = stream.raw_fd();
    let (mut reader, writer) = stream.into_split();
    let writer = Rc::new(writer);
    stats::TOTAL_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
    let connected = shared.connected_clients.fetch_add(1, Ordering::Relaxed) + 1;
    if connected > shared.config.maxclients() {
        let _ = write_all(&writer, b"SERVER_ERROR Too many open connections\r\n").await;
        shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
        shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return;
    }
    stats::CURR_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let handle = Rc::new(ClientHandle::new(ClientInfo {
        addr: addrs.peer,
        laddr: addrs.local,
        local: addrs.is_local,
        fd,
        name: "memcache".into(),
        ..ClientInfo::new(id, worker.id)
    }));
    crate::client::register(handle.clone());
    struct Cleanup(Rc<Worker>, u64);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            crate::client::unregister(self.1);
            stats::CURR_CONNECTIONS.fetch_sub(1, Ordering::Relaxed);
            self.0
                .shared
                .connected_clients
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
    let _cleanup = Cleanup(worker.clone(), id);
    // Memcache has no AUTH in its text protocol: a memcache port is open to whoever reaches it
    // (as memcached's and Dragonfly's); bind it to a trusted interface.
    let mut cx = ConnCtx::new(worker, handle, Output::new(writer.clone()), true);
    let _ = run(&mut cx, &mut reader, &writer).await;
}

/// One framed request and what its shard calls need to outlive the batch.
struct Job<'a> {
    req: Request<'a>,
    params: [u8; ops::PARAMS_LEN],
    /// Meta flags as `[letter, token...]`.
    meta: SmallVec<[Vec<u8>; 4]>,
}

impl Job<'_> {
    /// The argument list of the shard call for one of the request's keys (see `ops`).
    fn call_args<'s>(&'s self, key: &'s [u8]) -> CallArgs<'s> {
        let mut a: CallArgs<'s> = SmallVec::new();
        a.push(b"mc");
        a.push(key);
        a.push(&self.params);
        a.push(self.req.data);
        for m in &self.meta {
            a.push(m);
        }
        a
    }
}

/// `[name, key, params, data, meta flags...]`.
type CallArgs<'s> = SmallVec<[&'s [u8]; 8]>;

/// What a batch holds, in request order.
enum Item<'a> {
    /// A keyed request (its `get` keys included).
    Keyed(Job<'a>),
    /// A reply known without touching the keyspace (framing errors).
    Reply(std::borrow::Cow<'static, [u8]>, bool),
    /// A keyless request answered on this thread.
    Local(Request<'a>),
}

async fn run(
    cx: &mut ConnCtx,
    reader: &mut ReadHalf,
    writer: &Rc<crate::net::stream::WriteHalf>,
) -> std::io::Result<()> {
    let mut rbuf: Vec<u8> = Vec::new();
    let mut start = 0usize;
    // Bytes of a refused data block still to drop (they may not have arrived yet).
    let mut swallow = 0usize;
    let limits = proto::Limits {
        max_item_size: cx.shared().config.memcached_max_item_size(),
    };
    let client = cx.client.clone();
    let mut wake = std::pin::pin!(client.wake.notified());
    loop {
        let pending_out = cx.output.pending(&cx.reply);
        // Backpressure as memcached's: a client that does not read its replies stops being
        // read once this much is unwritten, so its output cannot grow without bound.
        let can_read = cx.output.unwritten(&cx.reply) < MAX_UNWRITTEN;
        let read = async {
            if rbuf.capacity() == 0 {
                reader.readable().await?;
            }
            if rbuf.capacity() - rbuf.len() < READ_CHUNK / 2 {
                rbuf.reserve(READ_CHUNK.max(rbuf.len() / 8));
            }
            reader.read_buf(&mut rbuf).await
        };
        let n = tokio::select! {
            biased;
            _ = &mut wake => {
                wake.set(client.wake.notified());
                if client.killed.get() {
                    return Ok(());
                }
                continue;
            }
            r = writer.writable(), if pending_out => {
                r?;
                flush(cx)?;
                continue;
            }
            r = read, if can_read => r?,
        };
        if n == 0 || client.killed.get() {
            return Ok(());
        }
        stats::count(|s| s.bytes_read += n as u64);
        cx.worker.stats().net_input_bytes += n as u64;
        if swallow > 0 {
            let drop = swallow.min(rbuf.len() - start);
            start += drop;
            swallow -= drop;
        }
        cx.now_ms = crate::clock::unix_ms();
        let mut close = false;
        while !close && swallow == 0 {
            // Frame a batch.
            let mut items: Vec<Item<'_>> = Vec::new();
            let mut at = start;
            while items.len() < MAX_BATCH {
                match proto::parse(&rbuf[at..], &limits) {
                    Parse::Incomplete => break,
                    Parse::Request(req, used) => {
                        at += used;
                        items.push(classify(req));
                        if matches!(items.last(), Some(Item::Local(_))) {
                            break;
                        }
                    }
                    Parse::TooLarge {
                        key,
                        reply,
                        consumed,
                    } => {
                        // The key's current item goes first (quietly), as memcached does.
                        let mut req = Request::new(Cmd::Delete);
                        req.keys.push(key);
                        req.noreply = true;
                        items.push(classify(req));
                        stats::count(|s| s.store_too_large += 1);
                        (at, swallow) = skip(rbuf.len(), at, consumed);
                        items.push(Item::Reply(std::borrow::Cow::Borrowed(reply), false));
                        break;
                    }
                    Parse::Error {
                        reply,
                        consumed,
                        close: c,
                    } => {
                        (at, swallow) = skip(rbuf.len(), at, consumed);
                        items.push(Item::Reply(reply, c));
                        break;
                    }
                }
            }
            if items.is_empty() {
                break;
            }
            let full = items.len() >= MAX_BATCH;
            close = execute(cx, items).await;
            start = at;
            if cx.reply.len() >= FLUSH_THRESHOLD {
                flush(cx)?;
                // A few requests may ask for a lot (a line of gets of big items): go on only
                // once the client has taken most of it.
                while cx.output.unwritten(&cx.reply) >= MAX_UNWRITTEN {
                    tokio::select! {
                        _ = &mut wake => {
                            wake.set(client.wake.notified());
                            if client.killed.get() {
                                return Ok(());
                            }
                        }
                        r = writer.writable() => {
                            r?;
                            flush(cx)?;
                        }
                    }
                }
            }
            if !full && !close && swallow == 0 {
                // The batch ended at a barrier, an error or the end of the input: go on
                // framing what follows it.
                continue;
            }
        }
        if close {
            cx.output.flush_all(&mut cx.reply, &cx.worker).await?;
            return Ok(());
        }
        flush(cx)?;
        if start >= rbuf.len() {
            rbuf.clear();
            start = 0;
        } else if start > 0 {
            rbuf.drain(..start);
            start = 0;
        }
    }
}

/// Drops `consumed` bytes of a refused request from `at` in a buffer of `len` bytes: the new
/// position, and how many bytes still to come must be swallowed.
fn skip(len: usize, at: usize, consumed: usize) -> (usize, usize) {
    let avail = len - at;
    if consumed > avail {
        (len, consumed - avail)
    } else {
        (at + consumed, 0)
    }
}

/// Writes what the socket takes now, counting it for `stats`.
fn flush(cx: &mut ConnCtx) -> std::io::Result<()> {
    let before = cx.output.unwritten(&cx.reply);
    cx.try_flush()?;
    let n = before - cx.output.unwritten(&cx.reply);
    stats::count(|s| s.bytes_written += n as u64);
    Ok(())
}

/// Sorts a framed request into keyed (shard) work or local work.
fn classify(req: Request<'_>) -> Item<'_> {
    match req.cmd {
        Cmd::FlushAll | Cmd::Version | Cmd::Verbosity | Cmd::Stats | Cmd::Quit | Cmd::MetaNoop => {
            Item::Local(req)
        }
        _ => {
            let p = Params {
                cmd: req.cmd,
                flags: req.flags,
                exptime: req.exptime,
                cas: req.cas,
                num: req.num,
                noreply: req.noreply,
                key_binary: req.meta.iter().any(|f| f.c == b'b'),
            };
            let meta = req
                .meta
                .iter()
                .map(|f| {
                    let mut v = Vec::with_capacity(1 + f.tok.len());
                    v.push(f.c);
                    v.extend_from_slice(f.tok);
                    v
                })
                .collect();
            Item::Keyed(Job {
                params: p.encode(),
                meta,
                req,
            })
        }
    }
}

/// Is this request a write (an exclusive key lock, refused on a read-only replica or over
/// maxmemory)?
fn writes(cmd: Cmd) -> bool {
    !matches!(cmd, Cmd::Get | Cmd::Gets | Cmd::MetaDebug)
}

/// Can this request make the dataset bigger?
fn grows(cmd: Cmd) -> bool {
    matches!(
        cmd,
        Cmd::Set
            | Cmd::Add
            | Cmd::Replace
            | Cmd::Append
            | Cmd::Prepend
            | Cmd::Cas
            | Cmd::Incr
            | Cmd::Decr
            | Cmd::MetaSet
            | Cmd::MetaArithmetic
    )
}

/// Runs a batch in order; true when the connection must close after writing its replies.
async fn execute(cx: &mut ConnCtx, items: Vec<Item<'_>>) -> bool {
    let mut i = 0;
    while i < items.len() {
        // A run of keyed requests: one squashed run.
        let run_end = items[i..]
            .iter()
            .position(|it| !matches!(it, Item::Keyed(_)))
            .map_or(items.len(), |p| i + p);
        if run_end > i {
            let run = &items[i..run_end];
            // CLIENT PAUSE holds memcache requests as it holds RESP commands.
            if crate::engine::pause::maybe_paused() {
                let w = run
                    .iter()
                    .any(|it| matches!(it, Item::Keyed(j) if writes(j.req.cmd)));
                if crate::engine::pause::blocks(w) {
                    crate::engine::pause::wait(w).await;
                }
            }
            run_keyed(cx, run).await;
            i = run_end;
            continue;
        }
        match &items[i] {
            Item::Reply(r, close) => {
                cx.reply.raw(r);
                if *close {
                    return true;
                }
            }
            Item::Local(req) => {
                if local(cx, req).await {
                    return true;
                }
            }
            Item::Keyed(_) => {}
        }
        i += 1;
    }
    false
}

/// The replies of requests refused before reaching a shard.
fn refusal(cx: &ConnCtx, cmd: Cmd) -> Option<&'static [u8]> {
    let shared = cx.shared();
    if shared.persist.loading.load(Ordering::Relaxed) {
        return Some(b"SERVER_ERROR loading the dataset in memory\r\n");
    }
    if !writes(cmd) {
        return None;
    }
    if crate::engine::role::is_replica() && shared.config.replica_read_only() {
        return Some(b"SERVER_ERROR READONLY You can't write against a read only replica.\r\n");
    }
    // Over maxmemory only what grows the dataset is refused (as Redis's DENYOOM: deletes and
    // TTL changes go through).
    if shared.config.maxmemory() == 0 || !grows(cmd) {
        return None;
    }
    let spec = crate::commands::registry().lookup_original(b"set")?.spec;
    if crate::commands::rejected_for_memory(cx, spec) {
        stats::count(|s| s.store_no_memory += 1);
        return Some(b"SERVER_ERROR out of memory storing object\r\n");
    }
    None
}

/// Runs keyed requests as one squashed run and appends their replies in order.
async fn run_keyed(cx: &mut ConnCtx, jobs: &[Item<'_>]) {
    let threads = cx.threads();
    let db = 0usize;
    cx.db = db;
    if run_here(cx, jobs) {
        if crate::engine::tracking::bcast_active() {
            Box::pin(crate::commands::flush_bcast(cx)).await;
        }
        return;
    }
    // Every call's argument list: [name, key, params, data, meta...].
    let mut argv: Vec<CallArgs<'_>> = Vec::new();
    // Per call: its request (for END after a retrieval's last key) and whether it is refused.
    let mut owner: Vec<(usize, bool)> = Vec::new();
    let mut refused: Vec<Option<&'static [u8]>> = Vec::new();
    for (j, it) in jobs.iter().enumerate() {
        let Item::Keyed(job) = it else { continue };
        let r = refusal(cx, job.req.cmd);
        refused.push(r);
        let n = job.req.keys.len();
        for (k, key) in job.req.keys.iter().enumerate() {
            argv.push(job.call_args(key));
            owner.push((j, k + 1 == n));
        }
    }
    let calls: Vec<Call<'_>> = argv
        .iter()
        .zip(owner.iter())
        .filter(|(_, &(j, _))| refused[j].is_none())
        .map(|(a, &(j, _))| {
            let Item::Keyed(job) = &jobs[j] else {
                unreachable!("only keyed jobs have calls")
            };
            let key = a[1];
            Call {
                shard: crate::engine::shard_of(key, threads),
                lock: KeyLock::new(db, key, writes(job.req.cmd)),
                f: ops::exec,
                name: name_of(job.req.cmd),
                key_at: 1,
                args: a,
            }
        })
        .collect();
    // Map each call back to its request; refused requests answer in their place.
    let call_owner: Vec<(usize, bool)> = owner
        .iter()
        .copied()
        .filter(|&(j, _)| refused[j].is_none())
        .collect();
    if refused.iter().all(Option::is_none) {
        // The usual case: replies go out as they come, in request order.
        run_calls(cx, &calls, |cx, i, bytes| {
            let (j, last) = call_owner[i];
            cx.reply.raw(bytes);
            if last && is_retrieval(&jobs[j]) {
                cx.reply.raw(b"END\r\n");
            }
        })
        .await;
        return;
    }
    let mut replies: Vec<Vec<u8>> = vec![Vec::new(); jobs.len()];
    run_calls(cx, &calls, |_, i, bytes| {
        let (j, last) = call_owner[i];
        replies[j].extend_from_slice(bytes);
        if last && is_retrieval(&jobs[j]) {
            replies[j].extend_from_slice(b"END\r\n");
        }
    })
    .await;
    for (j, it) in jobs.iter().enumerate() {
        if let Item::Keyed(job) = it {
            match refused[j] {
                Some(r) if !job.req.noreply => cx.reply.raw(r),
                Some(_) => {}
                None => {
                    if job.req.keys.is_empty() && is_retrieval(it) {
                        cx.reply.raw(b"END\r\n");
                    }
                    cx.reply.raw(&replies[j]);
                }
            }
        }
    }
}

/// The common case run without messages, copies or lists: every key of the run lives on
/// this thread's shard, nothing refuses the requests, and no queued transaction holds a lock
/// there (what RESP's inline path checks). False when the run must go the general way.
fn run_here(cx: &mut ConnCtx, jobs: &[Item<'_>]) -> bool {
    let (me, threads) = (cx.worker.id, cx.threads());
    for it in jobs {
        let Item::Keyed(job) = it else { continue };
        if refusal(cx, job.req.cmd).is_some()
            || (threads > 1
                && job
                    .req
                    .keys
                    .iter()
                    .any(|k| crate::engine::shard_of(k, threads) != me))
        {
            return false;
        }
    }
    let w = cx.worker.clone();
    {
        let t = w.vll();
        if !t.idle() {
            let locks: crate::engine::vll::Locks = jobs
                .iter()
                .filter_map(|it| match it {
                    Item::Keyed(j) => Some(j),
                    _ => None,
                })
                .flat_map(|j| {
                    let wr = writes(j.req.cmd);
                    j.req.keys.iter().map(move |k| KeyLock::new(0, k, wr))
                })
                .collect();
            if !t.quick_ok(&locks, crate::engine::vll::ShardLock::None) {
                return false;
            }
        }
    }
    let (now, client) = (cx.now_ms, cx.client_id());
    for it in jobs {
        let Item::Keyed(job) = it else { continue };
        let name = name_of(job.req.cmd);
        for key in job.req.keys.iter() {
            let a = job.call_args(key);
            crate::commands::run_shard_cmd(
                &w,
                name,
                ops::exec,
                0,
                now,
                client,
                &mut cx.reply,
                &a,
                None,
            );
            w.serve_blocked();
        }
        if is_retrieval(it) {
            cx.reply.raw(b"END\r\n");
        }
    }
    true
}

fn is_retrieval(it: &Item<'_>) -> bool {
    matches!(it, Item::Keyed(j) if matches!(j.req.cmd, Cmd::Get | Cmd::Gets | Cmd::Gat | Cmd::Gats))
}

fn name_of(cmd: Cmd) -> &'static str {
    match cmd {
        Cmd::Get => "mc.get",
        Cmd::Gets => "mc.gets",
        Cmd::Gat => "mc.gat",
        Cmd::Gats => "mc.gats",
        Cmd::Set => "mc.set",
        Cmd::Add => "mc.add",
        Cmd::Replace => "mc.replace",
        Cmd::Append => "mc.append",
        Cmd::Prepend => "mc.prepend",
        Cmd::Cas => "mc.cas",
        Cmd::Delete => "mc.delete",
        Cmd::Incr => "mc.incr",
        Cmd::Decr => "mc.decr",
        Cmd::Touch => "mc.touch",
        Cmd::MetaGet => "mc.mg",
        Cmd::MetaSet => "mc.ms",
        Cmd::MetaDelete => "mc.md",
        Cmd::MetaArithmetic => "mc.ma",
        Cmd::MetaDebug => "mc.me",
        _ => "mc",
    }
}

/// Keyless requests; true when the connection closes.
async fn local(cx: &mut ConnCtx, req: &Request<'_>) -> bool {
    match req.cmd {
        Cmd::Quit => return true,
        Cmd::MetaNoop => cx.reply.raw(b"MN\r\n"),
        Cmd::Version => cx.reply.raw(format!("VERSION {VERSION}\r\n").as_bytes()),
        Cmd::Verbosity => {
            if !req.noreply {
                cx.reply.raw(b"OK\r\n");
            }
        }
        Cmd::FlushAll => {
            stats::count(|s| s.cmd_flush += 1);
            // The delay is an expiration time like any other: relative seconds, or an
            // absolute unix time beyond 30 days.
            let now = cx.now_ms;
            let delay_ms =
                proto::deadline_ms(req.exptime, now).map_or(0, |at| at.saturating_sub(now));
            if delay_ms == 0 {
                flush_db0(cx).await;
            } else {
                // memcached invalidates what exists when the delay ends.
                let worker = cx.worker.clone();
                tokio::task::spawn_local(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                    let mut icx = ConnCtx::internal(worker);
                    flush_db0(&mut icx).await;
                });
            }
            if !req.noreply {
                cx.reply.raw(b"OK\r\n");
            }
        }
        Cmd::Stats => {
            let text = super::stats::render(cx, &req.args).await;
            cx.reply.raw(&text);
        }
        _ => cx.reply.raw(b"ERROR\r\n"),
    }
    false
}

/// `flush_all`: FLUSHDB of database 0, through the command itself (its locks, replication and
/// notifications), its RESP reply dropped.
async fn flush_db0(cx: &mut ConnCtx) {
    let (db, mark) = (cx.db, cx.reply.len());
    cx.db = 0;
    crate::commands::execute(cx, &[b"flushdb"]).await;
    cx.reply.buf.truncate(mark);
    cx.db = db;
}
