//! A client session (one connection): read → parse every complete command in the buffer → execute each
//! (inline on this thread, or hop to the owning shard) → flush all replies with one write.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use damselfly_protocol::{Parser, ParserLimits, Reply};
use smallvec::SmallVec;

use tokio::io::AsyncReadExt;

use super::stream::{ReadHalf, Stream, WriteHalf};
use crate::client::evict;
use crate::client::limits::{self, ObufState, PAUSE_OUTPUT, STATIC_REPLY_BUF};
use crate::client::{ClientHandle, ClientInfo, ClientMem};
use crate::commands::{self, ConnCtx, Handler, ReplyMode};
use crate::engine::Worker;

/// Initial read buffer and the minimum free space before a read.
const READ_CHUNK: usize = 16 * 1024;
/// Flush replies mid-batch beyond this, so one huge pipeline can't buffer unbounded output.
const FLUSH_THRESHOLD: usize = 256 * 1024;
/// Commands parsed ahead of execution per batch.
const MAX_BATCH: usize = 64;
/// Below this many commands in a batch, prefetching costs more than it saves.
const PREFETCH_MIN_BATCH: usize = 4;
/// At most this many keys of one `numkeys` command are prefetched.
const PREFETCH_KEYNUM: usize = 16;

/// Argument byte ranges of one parsed command inside the read buffer.
type ArgRanges = SmallVec<[(usize, usize); 4]>;

/// Grow toward a large bulk in steps no bigger than this: memory follows bytes actually received,
/// so a client announcing a 512 MB bulk and sending nothing costs nothing.
const MAX_RESERVE_STEP: usize = 4 * 1024 * 1024;

pub const DENIED_MSG: &str = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.";

fn limits(w: &Worker) -> ParserLimits {
    ParserLimits {
        max_bulk_len: w.shared.config.proto_max_bulk_len(),
        ..ParserLimits::default()
    }
}

/// Serves one accepted socket until it closes.
/// What a layer above the network does when one of its connections goes (pub/sub forgets
/// the subscriptions, replication the replica): `(thread's worker, client id, its handle)`.
pub type OnDisconnect = fn(&Rc<Worker>, u64, &ClientHandle);

static ON_DISCONNECT: std::sync::OnceLock<Vec<OnDisconnect>> = std::sync::OnceLock::new();

/// Installs the disconnect hooks, run in order when a RESP connection ends (lib.rs does, before
/// the listeners start; the first call wins).
pub fn install_disconnect_hooks(hooks: &[OnDisconnect]) {
    let _ = ON_DISCONNECT.set(hooks.to_vec());
}

pub async fn serve(worker: Rc<Worker>, stream: Stream) {
    serve_as(worker, stream, false).await
}

/// Serves a connection of the main port, or (`admin`) of `--admin_port`: an operator's way in
/// that `maxclients` does not count against, authenticated already with `--admin_nopass`,
/// serving HTTP as well.
pub async fn serve_as(worker: Rc<Worker>, stream: Stream, admin: bool) {
    let shared = worker.shared.clone();
    stream.tune(shared.config.tcp_keepalive_secs());
    let addrs = stream.addrs();
    let fd = stream.raw_fd();
    // The loop reads through its half while the replies' half lives in the context, so a
    // command that blocks can still send what was answered before it.
    let (mut reader, writer) = stream.into_split();
    shared.total_connections.fetch_add(1, Ordering::Relaxed);

    // Refusals are written on plain connections only: Redis writes them before a TLS
    // handshake could have completed, so a TLS client just sees the connection close.
    let refuse = |msg: String| {
        let writer = &writer;
        async move {
            if !matches!(writer, WriteHalf::Tls(_)) {
                let _ = write_all(writer, msg.as_bytes()).await;
            }
        }
    };
    // Protected mode: no password → loopback clients only.
    if shared.config.protected_mode() && !shared.config.has_password() && !addrs.is_local {
        refuse(format!("-{DENIED_MSG}\r\n")).await;
        shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let connected = shared.connected_clients.fetch_add(1, Ordering::Relaxed) + 1;
    if connected > shared.config.maxclients() && !admin {
        refuse("-ERR max number of clients reached\r\n".into()).await;
        shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
        shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return;
    }

    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let handle = Rc::new(ClientHandle::new(ClientInfo {
        addr: addrs.peer,
        laddr: addrs.local,
        local: addrs.is_local,
        fd,
        flags: if addrs.unix { "U" } else { "" }.to_string(),
        ..ClientInfo::new(id, worker.id)
    }));
    crate::client::register(handle.clone());

    let mut cx = ConnCtx::new(
        worker.clone(),
        handle.clone(),
        Output::new(Rc::new(writer)),
        !crate::acl::auth_required() || (admin && shared.config.admin_nopass()),
    );
    // Unregisters the client even if a command panics and tokio drops this task mid-way.
    struct Cleanup(Rc<Worker>, u64, Rc<ClientHandle>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            evict::account(&self.2, 0);
            for hook in ON_DISCONNECT.get().map(Vec::as_slice).unwrap_or(&[]) {
                hook(&self.0, self.1, &self.2);
            }
            self.2.pushes.borrow_mut().clear();
            crate::client::unregister(self.1);
            self.0
                .shared
                .connected_clients
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
    let _cleanup = Cleanup(worker.clone(), id, handle.clone());
    let _ = run(&mut cx, &mut reader, admin).await;
}

/// The socket side of a connection's replies: `reply.buf[written..]` is not written yet.
///
/// Why output never blocks input: a client may pipeline a million commands in one write and read
/// nothing until it has sent them all. Blocking on a full socket while it blocks on our full
/// receive window would deadlock both, so unwritten replies stay buffered (as in Redis, where a
/// normal client's output buffer has no limit by default) while reading and executing go on.
pub struct Output {
    stream: Rc<WriteHalf>,
    written: usize,
    /// Mid-batch, try writing again once the reply buffer reaches this length (another
    /// FLUSH_THRESHOLD past a write the socket refused: no syscall per command for a client
    /// that does not read).
    flush_at: usize,
    /// The output buffer limit's soft-limit state.
    obuf: ObufState,
}

impl Output {
    pub fn new(stream: Rc<WriteHalf>) -> Self {
        Output {
            stream,
            written: 0,
            flush_at: FLUSH_THRESHOLD,
            obuf: ObufState::default(),
        }
    }

    /// Reply bytes not written to the socket yet.
    #[inline]
    pub fn unwritten(&self, reply: &Reply) -> usize {
        reply.len() - self.written
    }

    /// Cheap test before the output buffer limit check: is anything counted as output memory
    /// (or was it, for the soft limit's state)?
    #[inline]
    fn limit_due(&self, reply: &Reply) -> bool {
        self.unwritten(reply) > STATIC_REPLY_BUF || self.obuf.armed()
    }

    /// Mid-batch: has enough output piled up to try writing some?
    #[inline]
    pub fn due(&self, reply: &Reply) -> bool {
        reply.len() >= self.flush_at
    }

    /// Output not on the socket yet: unwritten replies, or TLS records written but held back
    /// by a full socket.
    #[inline]
    pub fn pending(&self, reply: &Reply) -> bool {
        reply.len() > self.written || self.stream.backlogged()
    }

    /// Writes what the socket takes now, without waiting.
    pub fn try_flush(&mut self, reply: &mut Reply, worker: &Worker) -> std::io::Result<()> {
        self.stream.flush_backlog()?;
        while self.written < reply.len() {
            match self.stream.try_write(&reply.buf[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    worker.stats().net_output_bytes += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        self.flush_at = reply.len() + FLUSH_THRESHOLD;
        if self.written == reply.len() {
            self.written = 0;
            self.flush_at = FLUSH_THRESHOLD;
            reply.clear();
            // Don't keep a huge buffer around after one big reply.
            if reply.buf.capacity() > limits::REPLY_SHRINK_ABOVE && limits::reply_resizing() {
                reply.buf.shrink_to(READ_CHUNK);
            }
        } else if self.written >= READ_CHUNK && self.written * 2 >= reply.len() {
            // Mostly written: drop the written prefix so the buffer follows what is pending.
            reply.buf.drain(..self.written);
            self.flush_at -= self.written;
            self.written = 0;
        }
        Ok(())
    }

    /// Writes everything, waiting for the socket (before closing the connection).
    pub(crate) async fn flush_all(
        &mut self,
        reply: &mut Reply,
        worker: &Worker,
    ) -> std::io::Result<()> {
        while self.pending(reply) {
            self.stream.writable().await?;
            self.try_flush(reply, worker)?;
        }
        Ok(())
    }
}

/// Writes all of `data`, waiting for the socket as needed.
pub async fn write_all(stream: &WriteHalf, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() || stream.backlogged() {
        stream.writable().await?;
        stream.flush_backlog()?;
        match stream.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn run(cx: &mut ConnCtx, reader: &mut ReadHalf, admin: bool) -> std::io::Result<()> {
    let writer = cx.output.stream.clone();
    // Buffers are allocated on the first bytes, so idle connections hold none.
    let mut rbuf: Vec<u8> = Vec::new();
    let mut parser = Parser::new(limits(&cx.worker));
    let mut start = 0usize;
    let mut first_read = true;
    let mut batch: Vec<ArgRanges> = Vec::with_capacity(MAX_BATCH);
    let mut prefetched: Vec<(usize, usize, u64)> = Vec::with_capacity(MAX_BATCH);
    // CLIENT KILL's wake-up, created once: building and dropping a `Notified` around every read
    // showed up as ~1.5% of a P=1 profile. It is re-armed only after it fires.
    let client = cx.client.clone();
    let mut wake = std::pin::pin!(client.wake.notified());
    // Start offset in `rbuf` of each command of `batch` (for `qbuf` as CLIENT LIST shows it).
    let mut starts: Vec<usize> = Vec::with_capacity(MAX_BATCH);
    loop {
        // `timeout`: close a client idle for that many seconds (an async block, so that the
        // default of no timeout costs no timer per read).
        let idle = cx.shared().config.timeout_secs();
        let idle_limit = async {
            if idle == 0 {
                std::future::pending::<()>().await
            } else {
                tokio::time::sleep(std::time::Duration::from_secs(idle)).await
            }
        };
        // (A replica's queued stream counts: it goes out as the socket takes it.)
        let pending_out = cx.output.pending(&cx.reply)
            || (cx.is_replica
                && !cx.client.hold_pushes.get()
                && !cx.client.pushes.borrow().is_empty());
        // The soft output limit, once exceeded, is checked again when its time is up even if
        // the connection sees no traffic (Redis's clientsCron).
        let soft_deadline = if cx.output.obuf.armed() {
            cx.output.obuf.soft_deadline(obuf_limit(cx))
        } else {
            None
        };
        let soft_timer = async {
            match soft_deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending::<()>().await,
            }
        };
        // Room for the read, reserving toward a large bulk in bounded steps. A connection that
        // has never sent anything holds no buffer: it waits for readability first.
        let want = parser
            .bulk_remaining()
            .unwrap_or(0)
            .clamp(READ_CHUNK, MAX_RESERVE_STEP);
        let read = async {
            if rbuf.capacity() == 0 {
                reader.readable().await?;
            }
            if rbuf.capacity() - rbuf.len() < want / 2 {
                // Exact, not doubling: a buffer that just received a 1 MB argument and reads
                // on for the rest of its command grows by an eighth, not to 2 MB (what it
                // holds is what client eviction and CLIENT LIST count). Growing by at least an
                // eighth keeps the copying linear for a command made of many small arguments.
                rbuf.reserve_exact(want.max(rbuf.len() / 8));
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
                if let Some(target) = client.resize_qbuf.take() {
                    resize_query_buffer(&mut rbuf, start, &parser, target);
                    let mem = measure(cx, &rbuf, start, &parser);
                    evict::account(&cx.client, mem.tot());
                    cx.client.info.borrow_mut().mem = mem;
                }
                if !client.pushes.borrow().is_empty() && !client.hold_pushes.get() {
                    // Redis writes a subscriber once per event loop iteration, after every
                    // readable publisher ran. The same here: step aside until this thread has
                    // run its other ready tasks and polled for I/O (tokio defers a yielding
                    // task's wake-up until then), so that the messages of every publisher
                    // ready now go out in one write instead of one write per publisher batch.
                    tokio::task::yield_now().await;
                    if client.killed.get() {
                        return Ok(());
                    }
                }
                if drain_pushes(cx) {
                    cx.try_flush()?;
                    if cx.output.limit_due(&cx.reply) && obuf_over(cx, true) {
                        return Ok(());
                    }
                    if !publish(cx, measure(cx, &rbuf, start, &parser)).await {
                        return Ok(());
                    }
                }
                continue;
            }
            r = writer.writable(), if pending_out => {
                r?;
                cx.try_flush()?;
                // A replica's stream waits queued until what went before is written.
                while cx.is_replica && !cx.output.pending(&cx.reply) && drain_pushes(cx) {
                    cx.try_flush()?;
                }
                if cx.output.limit_due(&cx.reply) && obuf_over(cx, false) {
                    return Ok(());
                }
                account_output(cx);
                continue;
            }
            _ = soft_timer => {
                if obuf_over(cx, false) {
                    return Ok(());
                }
                continue;
            }
            r = read => r?,
            _ = idle_limit => {
                crate::log_verbose!("Closing idle client (timeout {idle} s)");
                return Ok(());
            }
        };
        if n == 0 || cx.client.killed.get() {
            return Ok(());
        }
        cx.worker.stats().net_input_bytes += n as u64;
        client
            .qbuf_peak
            .set(client.qbuf_peak.get().max(rbuf.len() - start));
        if rbuf.len() as u64 > cx.shared().config.query_buffer_limit() {
            // Redis's readQueryFromClient: checked on every read, before parsing.
            cx.client.info.borrow_mut().mem = measure(cx, &rbuf, start, &parser);
            let line = cx.client.info.borrow().line();
            crate::log_warning!(
                "Closing client that reached max query buffer length: {line} (qbuf initial bytes: {})",
                limits::repr(&rbuf[start..], 64)
            );
            cx.worker.stats().qbuf_limit_disconnections += 1;
            return Ok(());
        }
        if !publish(cx, measure(cx, &rbuf, start, &parser)).await {
            return Ok(());
        }
        // Messages that arrived before these commands go out before their replies.
        drain_pushes(cx);
        cx.now_ms = crate::clock::unix_ms();
        let batch_start = Instant::now();
        // Commands run from this read (see the write below).
        let mut ran = 0usize;

        if first_read {
            first_read = false;
            if super::http::looks_like_http(&rbuf)
                && (admin || cx.shared().config.primary_port_http_enabled())
            {
                let open = admin && cx.shared().config.admin_nopass();
                return super::http::serve(cx, reader, &writer, rbuf, open).await;
            }
        }

        // Parse a batch of complete commands, prefetch the memory they will touch, execute them
        // in order, and write the replies once.
        loop {
            batch.clear();
            starts.clear();
            let mut parse_err = None;
            let mut immediate: Option<(usize, usize)> = None;
            // A connection that must authenticate gets Redis's tighter limits, and its commands
            // are parsed one at a time (AUTH changes the limits for what follows it).
            let unauth = !cx.authed && crate::acl::auth_required();
            if parser.limits().unauthenticated != unauth {
                parser.set_limits(ParserLimits {
                    unauthenticated: unauth,
                    ..parser.limits()
                });
            }
            let max_batch = if unauth { 1 } else { MAX_BATCH };
            while batch.len() < max_batch {
                let end = rbuf.len();
                match parser.next(&rbuf[start..end]) {
                    Ok(Some(consumed)) => {
                        let base = rbuf.as_ptr() as usize;
                        let mut ranges: ArgRanges = SmallVec::new();
                        let mut in_buf = true;
                        for a in parser.args(&rbuf[start..start + consumed]) {
                            let off = (a.as_ptr() as usize).wrapping_sub(base);
                            if off.checked_add(a.len()).is_none_or(|e| e > rbuf.len()) {
                                in_buf = false;
                                break;
                            }
                            ranges.push((off, off + a.len()));
                        }
                        let cmd_start = start;
                        start += consumed;
                        if !in_buf {
                            // Inline command with unescaped args in the parser's scratch space:
                            // run it before the parser is asked for the next command.
                            immediate = Some((cmd_start, consumed));
                            break;
                        }
                        if !ranges.is_empty() {
                            batch.push(ranges);
                            starts.push(cmd_start);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        parse_err = Some(e);
                        break;
                    }
                }
            }
            // With several shards, squashed runs prefetch on the shard that executes them
            // (commands::coordinator::squash), so only the single-shard case prefetches here.
            if batch.len() >= PREFETCH_MIN_BATCH && cx.threads() == 1 {
                prefetch_batch(cx, &rbuf, &batch, &mut prefetched);
            }
            ran += batch.len();
            let mut i = 0;
            while i < batch.len() {
                let args: SmallVec<[&[u8]; 8]> =
                    batch[i].iter().map(|&(a, b)| &rbuf[a..b]).collect();
                cx.qbuf_now = rbuf.len() - starts[i];
                i += 1;
                if cx.threads() > 1 && !cx.is_replica {
                    // Squash a run of single-key commands into one hop per shard.
                    match commands::coordinator::squash::classify(cx, &args) {
                        Some(how) => {
                            let mut run =
                                vec![commands::coordinator::squash::Squashed { args, how }];
                            while i < batch.len() && run.len() < MAX_BATCH {
                                let a: SmallVec<[&[u8]; 8]> =
                                    batch[i].iter().map(|&(a, b)| &rbuf[a..b]).collect();
                                match commands::coordinator::squash::classify(cx, &a) {
                                    Some(how) => {
                                        run.push(commands::coordinator::squash::Squashed {
                                            args: a,
                                            how,
                                        });
                                        i += 1;
                                    }
                                    None => break,
                                }
                            }
                            if run.len() >= 2 {
                                commands::coordinator::squash::execute_run(cx, &run).await;
                                cx.client.info.borrow_mut().last_cmd = cx.cmd_name;
                            } else {
                                exec_one(cx, &run[0].args).await;
                            }
                        }
                        None => exec_one(cx, &args).await,
                    }
                } else {
                    exec_one(cx, &args).await;
                }
                if cx.close {
                    break;
                }
                if cx.output.limit_due(&cx.reply)
                    && !output_room(cx, &client, wake.as_mut()).await?
                {
                    return Ok(());
                }
                if cx.output.due(&cx.reply) {
                    cx.try_flush()?;
                }
            }
            if cx.close {
                break;
            }
            if let Some((s0, n)) = immediate {
                let args: SmallVec<[&[u8]; 8]> = parser.args(&rbuf[s0..s0 + n]).collect();
                if !args.is_empty() {
                    cx.qbuf_now = rbuf.len() - s0;
                    exec_one(cx, &args).await;
                }
                if cx.close {
                    break;
                }
                if cx.output.limit_due(&cx.reply)
                    && !output_room(cx, &client, wake.as_mut()).await?
                {
                    return Ok(());
                }
                continue;
            }
            if let Some(e) = parse_err {
                cx.reply.error(&format!("ERR {e}"));
                cx.close = true;
                break;
            }
            if batch.len() < max_batch {
                break;
            }
        }
        cx.client.info.borrow_mut().last_interaction = batch_start;
        if cx.client.killed.get() {
            // Killed or evicted: gone at once, whatever it has not read (it may never read).
            return Ok(());
        }
        if cx.close {
            cx.output.flush_all(&mut cx.reply, &cx.worker).await?;
            return Ok(());
        }
        // Redis writes replies once per event loop iteration (`beforeSleep`): after every
        // client that was readable ran, before it polls for I/O again. The same here for
        // pipelined batches: step behind the tasks already queued on this thread (the
        // connections the last poll found readable), then write. Back-to-back writes wake a
        // client process that waits for several connections once; a write after each batch
        // woke it once per batch, and that wake-up (the kernel's, charged to the writer) was 15%
        // of this thread's time under 50 pipelining clients (docs/benchmarks.md). Not tokio's
        // `yield_now`: it waits for the next poll for I/O as well, so every reply also waited
        // for the connections that poll found readable and for one more epoll_wait per round,
        // and a client keeping its pipeline full (memtier) saw 1.7x the latency (issue 43;
        // docs/design/reply-timing.md). A single command writes at once.
        if ran > 1 && cx.output.pending(&cx.reply) {
            requeue().await;
            if cx.client.killed.get() {
                return Ok(());
            }
        }
        cx.try_flush()?;
        if cx.output.limit_due(&cx.reply) && obuf_over(cx, true) {
            return Ok(());
        }
        // Everything executed is dropped; the buffer keeps its size until the client cron
        // resizes it (client/cron.rs), as Redis's query buffer does.
        if start == rbuf.len() {
            rbuf.clear();
            start = 0;
        } else if start > 0 {
            rbuf.drain(..start);
            start = 0;
        }
        if !publish(cx, measure(cx, &rbuf, start, &parser)).await {
            return Ok(());
        }
    }
}

/// Appends the Pub/Sub messages queued for this connection to its replies; true if there were
/// any.
#[inline]
pub(crate) fn drain_pushes(cx: &mut ConnCtx) -> bool {
    if cx.client.pushes.borrow().is_empty() || cx.client.hold_pushes.get() {
        return false;
    }
    // A replica's stream stays in the backlog's shared batches until its socket can take it
    // (Redis 7's replicas point into the one replication buffer): copied into the reply buffer
    // a bounded piece at a time, once what went before is written, so a slow replica holds no
    // copy of its own and the backlog (`mem_total_replication_buffers`) shows what it needs.
    if cx.is_replica && cx.output.pending(&cx.reply) {
        return false;
    }
    let client = cx.client.clone();
    let mut q = client.pushes.borrow_mut();
    if q.is_empty() {
        return false;
    }
    if cx.is_replica {
        let mut taken = 0;
        while cx.reply.len() < REPLICA_PIECE {
            let Some(d) = q.pop_front() else { break };
            taken += d.bytes();
            d.write(&mut cx.reply);
        }
        client
            .repl_queued
            .set(client.repl_queued.get().saturating_sub(taken));
        return true;
    }
    for d in q.drain(..) {
        d.write(&mut cx.reply);
    }
    client.repl_queued.set(0);
    true
}

/// How much of its queued stream a replica's connection copies into its reply buffer at once:
/// enough per write, and small beside the shared buffer it copies from (this copy is the only
/// memory of its stream a replica holds that `mem_not_counted_for_evict` leaves counted).
const REPLICA_PIECE: usize = 64 * 1024;

/// Redis moves an argument of this size or more out of its query buffer once its header is
/// read (PROTO_MBULK_BIG_ARG); CLIENT LIST's `qbuf` then counts only that argument.
const BIG_ARG: usize = 32 * 1024;

/// The connection's memory now (CLIENT LIST's fields): `rbuf[start..]` is not executed yet.
fn measure(cx: &ConnCtx, rbuf: &Vec<u8>, start: usize, parser: &Parser) -> ClientMem {
    let mut m = cx.client.info.borrow().mem;
    let pending = rbuf.len() - start;
    match parser.bulk_progress() {
        Some((pos, len)) if len >= BIG_ARG && pos <= pending => {
            m.qbuf = pending - pos;
            m.argv_mem = pos;
        }
        _ => {
            m.qbuf = pending;
            m.argv_mem = 0;
        }
    }
    m.qbuf_free = rbuf.capacity() - rbuf.len();
    m.unwritten = cx.output.unwritten(&cx.reply);
    m.reply_cap = cx.reply.buf.capacity();
    (m.multi_mem, m.watch_mem) = cx.tx_mem();
    // Subscriptions and BCAST prefixes (each held here and in every thread's replica).
    if cx.client.special.get() {
        m.pubsub_mem = cx.client.subs.borrow().mem
            + cx.client
                .tracking
                .borrow()
                .prefixes
                .iter()
                .map(|p| p.len() + 48)
                .sum::<usize>();
    }
    m
}

/// Counts the connection's memory for client eviction, evicts clients if that puts them over
/// `maxmemory-clients`, and only then shows it in CLIENT LIST (see client/evict.rs).
/// False: this connection was evicted.
async fn publish(cx: &ConnCtx, mem: ClientMem) -> bool {
    evict::account(&cx.client, mem.tot());
    if evict::over(&cx.worker) {
        evict::evict(&cx.worker).await;
    }
    cx.client.info.borrow_mut().mem = mem;
    !cx.client.killed.get()
}

/// Shows the reply buffer in CLIENT LIST (`omem`, `tot-mem`) and counts it.
pub(crate) fn account_output(cx: &ConnCtx) {
    let mut info = cx.client.info.borrow_mut();
    info.mem.unwritten = cx.output.unwritten(&cx.reply);
    info.mem.reply_cap = cx.reply.buf.capacity();
    let tot = info.mem.tot();
    drop(info);
    evict::account(&cx.client, tot);
}

/// Resizes the read buffer as the client cron decided (`target` bytes), never below what it
/// holds or what the bulk argument being received needs; an empty buffer asked to hold
/// nothing is freed.
fn resize_query_buffer(rbuf: &mut Vec<u8>, start: usize, parser: &Parser, target: usize) {
    let mut keep = target.max(rbuf.len());
    if let Some((pos, len)) = parser.bulk_progress() {
        keep = keep.max(start + pos + len + 2);
    }
    if keep == 0 {
        *rbuf = Vec::new();
    } else if keep < rbuf.capacity() {
        rbuf.shrink_to(keep);
    }
}

/// Redis's `closeClientOnOutputBufferLimitReached`: is the connection over its class's output
/// buffer limit (then it is logged and counted, and the caller closes it without sending
/// anything more)? `asap`: found while executing commands (Redis schedules the close; its log
/// line says so) rather than while waiting.
/// The connection's `client-output-buffer-limit` (its class: replica, pubsub or normal).
fn obuf_limit(cx: &ConnCtx) -> crate::config::ObufLimit {
    limits::class_limit(
        &cx.shared().config,
        cx.is_replica,
        cx.client.subs.borrow().active(),
    )
}

fn obuf_over(cx: &mut ConnCtx, asap: bool) -> bool {
    let used = limits::output_memory(cx.output.unwritten(&cx.reply)) as u64;
    let limit = obuf_limit(cx);
    if !cx
        .output
        .obuf
        .over(limit, used, !cx.authed && crate::acl::auth_required())
    {
        return false;
    }
    account_output(cx);
    let line = cx.client.info.borrow().line();
    if asap {
        crate::log_warning!(
            "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
        );
    } else {
        crate::log_warning!("Client {line} closed for overcoming of output buffer limits.");
    }
    cx.worker.stats().obuf_limit_disconnections += 1;
    true
}

/// After a command whose replies made output memory: enforces the output buffer limit, and
/// without a hard limit, waits (executing nothing more, so reading nothing more) while the
/// unwritten replies are over `PAUSE_OUTPUT`, until the client has read them down to half of it.
/// False: close the connection now (over the limit, killed, or the soft limit ran out while
/// waiting).
async fn output_room<'a>(
    cx: &mut ConnCtx,
    client: &'a ClientHandle,
    mut wake: std::pin::Pin<&mut crate::client::notify::Notified<'a>>,
) -> std::io::Result<bool> {
    if obuf_over(cx, true) {
        return Ok(false);
    }
    if cx.output.unwritten(&cx.reply) < PAUSE_OUTPUT || obuf_limit(cx).hard != 0 {
        return Ok(true);
    }
    let writer = cx.output.stream.clone();
    crate::log_verbose!(
        "Client id={} paused: {} bytes of replies unread",
        cx.client.id,
        cx.output.unwritten(&cx.reply)
    );
    loop {
        cx.try_flush()?;
        account_output(cx);
        if cx.output.unwritten(&cx.reply) <= PAUSE_OUTPUT / 2 {
            return Ok(true);
        }
        let soft_deadline = cx.output.obuf.soft_deadline(obuf_limit(cx));
        tokio::select! {
            _ = wake.as_mut() => {
                wake.set(client.wake.notified());
                if client.killed.get() {
                    return Ok(false);
                }
            }
            r = writer.writable() => r?,
            _ = async {
                match soft_deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending::<()>().await,
                }
            } => {}
        }
        if obuf_over(cx, false) {
            return Ok(false);
        }
    }
}

async fn exec_one(cx: &mut ConnCtx, args: &[&[u8]]) {
    let mark = cx.reply.len();
    cx.pushed = false;
    let was_replica = cx.is_replica;
    commands::execute(cx, args).await;
    if was_replica && cx.reply.len() > mark {
        replica_replied(cx, mark);
        return;
    }
    {
        let mut info = cx.client.info.borrow_mut();
        info.last_cmd = cx.cmd_name;
        info.db = cx.db;
    }
    // Pub/Sub confirmations are pushes: sent whatever CLIENT REPLY says.
    let keep = cx.pushed;
    match cx.reply_mode {
        ReplyMode::On => {}
        ReplyMode::Off if keep => {}
        ReplyMode::Off => cx.reply.buf.truncate(mark),
        ReplyMode::Skip => {
            if !keep {
                cx.reply.buf.truncate(mark);
            }
            cx.reply_mode = ReplyMode::On;
        }
        ReplyMode::SkipNext => cx.reply_mode = ReplyMode::Skip,
    }
}

/// A replica's connection carries its stream: a command of the replica that produced a reply
/// (anything but REPLCONF ACK) would insert it there. As Redis: the reply is dropped, logged,
/// and the replica disconnected (it reconnects and resyncs).
fn replica_replied(cx: &mut ConnCtx, mark: usize) {
    let reply = cx.reply.buf.split_off(mark);
    if let Some(err) = reply.strip_prefix(b"-") {
        let end = err
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(err.len());
        crate::log_warning!(
            "== CRITICAL == This master is sending an error to its replica: '{}' after processing the command '{}'",
            String::from_utf8_lossy(&err[..end]),
            cx.cmd_name
        );
    }
    let line = cx.client.info.borrow().line();
    crate::log_warning!(
        "Replica generated a reply to command '{}', disconnecting it: {line}",
        cx.cmd_name
    );
    cx.close = true;
}

/// Valkey-style batched prefetch: for every command of the batch whose keys live on this
/// thread's shard, load the bucket metadata, then the matching slots, then the value, each stage
/// across the whole batch, so that the cache misses of a pipeline overlap. The keys: a shard
/// command's first, and up to [`PREFETCH_KEYNUM`] of a `numkeys` command (EVALSHA's KEYS, looked
/// up by the script's calls; on a one-key INCR script this only moved the miss from the INCR
/// here, neutral in throughput both times it was measured, and it is kept for scripts whose
/// several keys' misses then overlap).
fn prefetch_batch(
    cx: &ConnCtx,
    rbuf: &[u8],
    batch: &[ArgRanges],
    keys: &mut Vec<(usize, usize, u64)>,
) {
    use commands::spec::KeySpec;
    let reg = commands::registry();
    let threads = cx.threads();
    let me = cx.worker.id;
    keys.clear();
    let mut add = |(a, b): (usize, usize)| {
        let key = &rbuf[a..b];
        if threads == 1 || crate::engine::shard_of(key, threads) == me {
            keys.push((a, b, damselfly_dash::hash_key(key)));
        }
    };
    for r in batch {
        if r.len() < 2 {
            continue;
        }
        let Some(e) = reg.lookup(&rbuf[r[0].0..r[0].1]) else {
            continue;
        };
        match e.spec.keys {
            KeySpec::Keynum {
                numkeys_at,
                first,
                step,
            } => {
                let n = r
                    .get(numkeys_at)
                    .and_then(|&(a, b)| std::str::from_utf8(&rbuf[a..b]).ok())
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                for i in 0..n.min(PREFETCH_KEYNUM) {
                    if let Some(&k) = r.get(numkeys_at + first + i * step.max(1)) {
                        add(k);
                    }
                }
            }
            _ if matches!(e.spec.handler, Handler::Shard(_)) && e.spec.first_key() == 1 => {
                add(r[1]);
            }
            _ => {}
        }
    }
    let Some(shard) = cx.worker.try_shard() else {
        return;
    };
    let Some(db) = shard.dbs.get(cx.db) else {
        return;
    };
    db.prefetch_hashed(keys.iter().map(|&(a, b, h)| (&rbuf[a..b], h)));
}

/// Steps aside once, behind the tasks already queued on this thread, without waiting for the
/// next poll for I/O (tokio's `yield_now` defers its wake-up until after that poll). On a
/// `LocalSet` the self-wake is a push onto the thread's own queue: no syscall.
async fn requeue() {
    let mut done = false;
    std::future::poll_fn(|cx| {
        if done {
            return std::task::Poll::Ready(());
        }
        done = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}
