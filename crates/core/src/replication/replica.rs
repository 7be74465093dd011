//! The replica's side: REPLICAOF's link to a primary (Redis's replication handshake, full and
//! partial resynchronization, applying the command stream).
//!
//! The link is one task on the thread that ran REPLICAOF. It connects, handshakes (`PING`,
//! `AUTH` with `masterauth`, `REPLCONF listening-port`, `REPLCONF capa eof capa psync2`),
//! asks `PSYNC <replid> <offset+1>` (`? -1` the first time), then either loads the snapshot
//! that follows `+FULLRESYNC` (written to a temporary file, loaded into every shard with the
//! loader RDB files use) or continues after `+CONTINUE`. The stream is parsed with the client
//! protocol's parser and each command runs through `commands::execute` as the *master client*
//! (exempt from `replica-read-only`), one at a time, in stream order; its replies are
//! discarded. The offset counts the stream's bytes, `REPLCONF ACK <offset>` goes back every
//! second and on `REPLCONF GETACK`. A dropped link reconnects and continues with PSYNC.
//!
//! The bytes applied are forwarded verbatim to this server's own stream (`emit_forwarded`),
//! so the replication id and offsets stay the primary's, as Redis's replicas keep them.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use crate::net::stream::{ReadHalf, Stream, WriteHalf};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::commands::ConnCtx;
use crate::config::{PropagationErrorBehavior, ReplDisklessLoad};
use crate::engine::Worker;

/// Where the link stands (INFO's `master_link_status`, ROLE's state).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    Connecting,
    /// Connected, PING/AUTH/REPLCONF/PSYNC not answered yet.
    Handshake,
    Sync,
    Connected,
}

impl State {
    /// ROLE's words.
    pub fn role_word(self) -> &'static str {
        match self {
            State::Connecting => "connecting",
            State::Handshake => "handshake",
            State::Sync => "sync",
            State::Connected => "connected",
        }
    }
}

pub struct Link {
    pub host: String,
    pub port: u16,
    pub state: State,
    /// Bumped by every REPLICAOF: a link task whose generation is gone stops.
    pub gen: u64,
    pub last_io_ms: u64,
    /// Unix ms the link went down (INFO's `master_link_down_since_seconds`).
    pub down_since_ms: u64,
}

static LINK: LazyLock<Mutex<Option<Link>>> = LazyLock::new(|| Mutex::new(None));
static GEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn link() -> MutexGuard<'static, Option<Link>> {
    LINK.lock().unwrap_or_else(|e| e.into_inner())
}

pub use crate::engine::role::is_replica;

/// Is the link up (replicas of a replica sync only then)?
pub fn link_up() -> bool {
    link().as_ref().is_some_and(|l| l.state == State::Connected)
}

/// REPLICAOF host port: (re)starts the link on this thread. False when already replicating
/// that primary.
pub fn start(w: &Rc<Worker>, host: String, port: u16) -> bool {
    let mut l = link();
    if l.as_ref().is_some_and(|x| x.host == host && x.port == port) {
        return false;
    }
    let gen = GEN.fetch_add(1, Ordering::SeqCst) + 1;
    *l = Some(Link {
        host: host.clone(),
        port,
        state: State::Connecting,
        gen,
        last_io_ms: 0,
        down_since_ms: crate::clock::unix_ms(),
    });
    drop(l);
    crate::engine::role::set_link_up(false);
    crate::engine::role::set_replica(true);
    crate::process::oom_role_changed();
    // Writes applied from the primary are its stream, forwarded as they are: this server's
    // journal stops (its shards stop journaling at their next command: `journal::suspend`).
    crate::engine::journal::suspend();
    tokio::task::spawn_local(run(w.clone(), gen, host, port));
    true
}

/// REPLICAOF NO ONE: the link stops; this server becomes a primary that continues the
/// history (the old id stays valid as `replid2` up to the offset reached, so the old primary
/// and other replicas can continue with PSYNC).
pub fn stop() -> bool {
    let mut l = link();
    if l.is_none() {
        return false;
    }
    *l = None;
    GEN.fetch_add(1, Ordering::SeqCst);
    drop(l);
    crate::engine::role::set_link_up(false);
    crate::engine::role::set_replica(false);
    crate::process::oom_role_changed();
    let mut m = super::master();
    m.replid2 = std::mem::replace(&mut m.replid, super::new_replid());
    m.second_offset = m.offset as i64 + 1;
    true
}

/// The database the primary's stream is in (kept across the link's reconnections).
static STREAM_DB: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A replica of ours asks for a full sync: the link stops applying at a batch boundary until
/// the snapshot's point is taken, so the snapshot and the forwarded offset agree.
static PAUSE_WANTED: AtomicBool = AtomicBool::new(false);
static PAUSED: AtomicBool = AtomicBool::new(false);
static PAUSE_WAKE: LazyLock<tokio::sync::Notify> = LazyLock::new(tokio::sync::Notify::new);
static RESUME: LazyLock<tokio::sync::Notify> = LazyLock::new(tokio::sync::Notify::new);

/// Stops the link between two batches, outside a transaction of the stream (returns once it
/// stopped, or at once when no link is applying). False when it did not stop within 10 s (the
/// caller gives up; [`resume`] either way).
pub async fn pause() -> bool {
    PAUSE_WANTED.store(true, Ordering::SeqCst);
    PAUSE_WAKE.notify_one();
    for _ in 0..10_000 {
        if PAUSED.load(Ordering::SeqCst) || !link_is_up() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    false
}

pub fn resume() {
    PAUSE_WANTED.store(false, Ordering::SeqCst);
    RESUME.notify_waiters();
}

/// In the link, between batches: wait while a full sync of a replica of ours takes its point.
async fn honour_pause() {
    while PAUSE_WANTED.load(Ordering::SeqCst) {
        let resumed = RESUME.notified();
        PAUSED.store(true, Ordering::SeqCst);
        if !PAUSE_WANTED.load(Ordering::SeqCst) {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), resumed).await;
    }
    PAUSED.store(false, Ordering::SeqCst);
}

fn current(gen: u64) -> bool {
    GEN.load(Ordering::SeqCst) == gen
}

/// A replica restarted from its own snapshot continues its primary's history from there
/// (Redis's `replicationCacheMasterUsingMyself` after loading `repl-id`/`repl-offset`): the
/// next PSYNC asks for what follows.
pub fn resume_from_snapshot(replid: String, offset: u64, db: usize) {
    let mut m = super::master();
    m.replid = replid;
    m.offset = offset;
    drop(m);
    STREAM_DB.store(db, Ordering::Relaxed);
}

/// The database the applied stream is in now (a paused link's is stable).
pub fn stream_db() -> usize {
    STREAM_DB.load(Ordering::Relaxed)
}

pub use crate::engine::role::link_is_up;

fn set_state(gen: u64, st: State) {
    if let Some(l) = link().as_mut().filter(|l| l.gen == gen) {
        crate::engine::role::set_link_up(st == State::Connected);
        if st != State::Connected && l.state == State::Connected {
            l.down_since_ms = crate::clock::unix_ms();
        }
        l.state = st;
        l.last_io_ms = crate::clock::unix_ms();
    }
}

/// Why a link attempt ended.
type LinkError = String;

/// The link task: connects and syncs until REPLICAOF changes, reconnecting after a second
/// when the link drops, at once when a snapshot transfer failed or the handshake timed out
/// (Redis's `cancelReplicationHandshake(1)`: a primary cutting transfers short, as the suite's
/// "diskless loading short read" does a hundred times, must not cost a second each).
async fn run(w: Rc<Worker>, gen: u64, host: String, port: u16) {
    while current(gen) {
        set_state(gen, State::Connecting);
        let at_once = match session(&w, gen, &host, port).await {
            Ok(()) => false,
            Err(e) => {
                if current(gen) {
                    crate::log_warning!("Replication link with {host}:{port}: {e}");
                }
                state_of(gen) == Some(State::Sync) || e == TIMEOUT_HANDSHAKE
            }
        };
        if !current(gen) {
            break;
        }
        set_state(gen, State::Connecting);
        if at_once {
            crate::log_notice!("Reconnecting to MASTER {host}:{port} after failure");
        } else {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// The state of link `gen`, if it is still the current one.
fn state_of(gen: u64) -> Option<State> {
    link().as_ref().filter(|l| l.gen == gen).map(|l| l.state)
}

/// `repl-timeout`, read at every wait so a CONFIG SET reaches a link already up (Redis's cron
/// reads `server.repl_timeout` each time).
pub fn repl_timeout(cfg: &crate::config::Config) -> Duration {
    cfg.repl_timeout()
}

/// Awaits `fut` while `repl-timeout` (read again every 100 ms, as Redis's cron reads it) has
/// not passed since the call.
async fn within_repl_timeout<F: std::future::Future>(
    cfg: &crate::config::Config,
    fut: F,
    on_timeout: &str,
) -> Result<F::Output, LinkError> {
    let started = std::time::Instant::now();
    tokio::pin!(fut);
    loop {
        tokio::select! {
            out = &mut fut => return Ok(out),
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                if started.elapsed() > repl_timeout(cfg) {
                    return Err(on_timeout.to_string());
                }
            }
        }
    }
}

/// Redis's log lines for a link that timed out, by where it was.
const TIMEOUT_HANDSHAKE: &str = "Timeout connecting to the MASTER...";
const TIMEOUT_TRANSFER: &str = "Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value.";
const TIMEOUT_STREAM: &str = "MASTER timeout: no data nor PING received...";

/// One reply line of the handshake (or the snapshot's header), skipping the newlines a primary
/// sends while it prepares the snapshot.
async fn read_line(
    r: &mut BufReader<ReadHalf>,
    cfg: &crate::config::Config,
    on_timeout: &str,
) -> Result<String, LinkError> {
    loop {
        let mut line = String::new();
        let n = within_repl_timeout(cfg, r.read_line(&mut line), on_timeout)
            .await?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the primary closed the connection".into());
        }
        let l = line.trim_end_matches(['\r', '\n']).to_string();
        // The primary sends newlines to keep the link alive while it prepares the snapshot.
        if !l.is_empty() {
            return Ok(l);
        }
    }
}

async fn command(
    wr: &mut WriteHalf,
    r: &mut BufReader<ReadHalf>,
    cfg: &crate::config::Config,
    args: &[&[u8]],
) -> Result<String, LinkError> {
    wr.write_all(&crate::engine::journal::encode(args))
        .await
        .map_err(|e| e.to_string())?;
    read_line(r, cfg, TIMEOUT_HANDSHAKE).await
}

/// One connection to the primary: handshake, sync, stream. Returns when it drops.
async fn session(w: &Rc<Worker>, gen: u64, host: &str, port: u16) -> Result<(), LinkError> {
    let tls = w.shared.config.tls_replication();
    let stream = Stream::connect(host, port, tls, Duration::from_secs(10))
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    crate::log_notice!("MASTER <-> REPLICA sync started");
    set_state(gen, State::Handshake);
    let addrs = stream.addrs();
    let (rd, mut wr) = stream.into_split();
    let mut r = BufReader::with_capacity(64 * 1024, rd);
    let cfg = w.shared.config.clone();
    let pong = command(&mut wr, &mut r, &cfg, &[b"PING"]).await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    if let Some(pass) = cfg.masterauth() {
        let user = cfg.masteruser();
        let reply = match &user {
            Some(u) => {
                command(
                    &mut wr,
                    &mut r,
                    &cfg,
                    &[b"AUTH", u.as_bytes(), pass.as_bytes()],
                )
                .await?
            }
            None => command(&mut wr, &mut r, &cfg, &[b"AUTH", pass.as_bytes()]).await?,
        };
        if reply.starts_with('-') {
            return Err(format!("Unable to AUTH to MASTER: {reply}"));
        }
    }
    let my_port = cfg.port().to_string();
    let reply = command(
        &mut wr,
        &mut r,
        &cfg,
        &[b"REPLCONF", b"listening-port", my_port.as_bytes()],
    )
    .await?;
    if reply.starts_with('-') {
        crate::log_notice!(
            "(Non critical) Master does not understand REPLCONF listening-port: {reply}"
        );
    }
    let _ = command(
        &mut wr,
        &mut r,
        &cfg,
        &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
    )
    .await?;
    // The snapshot loading at start-up may say where our history ends: wait for it.
    while w.shared.persist.loading.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Continue where this server's history ends, if it has one (a replica before, or a
    // primary demoted: its own id and offset).
    let (replid, next) = {
        let m = super::master();
        if m.offset > 0 || m.backlog.is_some() {
            (m.replid.clone(), (m.offset + 1).to_string())
        } else {
            ("?".to_string(), "-1".to_string())
        }
    };
    // A primary handing over to us (FAILOVER): the target promotes itself on `FAILOVER`.
    let failover = super::failover::phase() == super::failover::Phase::InProgress;
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), next.as_bytes()];
    if failover {
        psync.push(b"FAILOVER");
    }
    let reply = command(&mut wr, &mut r, &cfg, &psync).await?;
    if failover {
        let accepted = reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE");
        super::failover::psync_answered(w, accepted).await;
        if !accepted {
            return Err(format!("failover target refused PSYNC: {reply}"));
        }
    }
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut it = rest.split_whitespace();
        let id = it.next().unwrap_or_default().to_string();
        let off: u64 = it.next().and_then(|o| o.parse().ok()).unwrap_or(0);
        set_state(gen, State::Sync);
        crate::log_notice!("Full resync from master: {id}:{off}");
        // Our replicas followed the old history: they must resync from the new one.
        super::disconnect_replicas(w);
        // The stream starts in the snapshot's `repl-stream-db` (a replica primary's stream
        // carries no SELECT where we join it), else in db 0 (a primary selects first).
        let same_history = super::master().replid == id;
        let db = full_sync(w, &mut r, &cfg, same_history).await?;
        STREAM_DB.store(db.unwrap_or(0), Ordering::Relaxed);
        let mut m = super::master();
        m.replid = id;
        m.replid2 = "0".repeat(40);
        m.second_offset = -1;
        m.offset = off;
        let size = cfg.repl_backlog_size();
        // A new history: the backlog starts over (sub-replicas must full-sync again).
        m.backlog = Some(super::Backlog::new(size));
        drop(m);
        crate::process::supervise::status(
            "MASTER <-> REPLICA sync: Finished with success. Ready to accept connections in \
             read-write mode.",
        );
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new_id = rest.trim();
        crate::log_notice!("Successful partial resynchronization with master.");
        crate::process::supervise::status(
            "MASTER <-> REPLICA sync: Partial Resynchronization accepted. Ready to accept \
             connections in read-write mode.",
        );
        // Restarted from our snapshot, we have no backlog yet: the offset counts only bytes
        // a backlog or a replica takes (Redis creates it here too).
        super::master().ensure_backlog(cfg.repl_backlog_size());
        if !new_id.is_empty() {
            let mut m = super::master();
            if m.replid != new_id {
                m.replid2 = std::mem::replace(&mut m.replid, new_id.to_string());
                m.second_offset = m.offset as i64 + 1;
                drop(m);
                // Our replicas must learn the new id: they reconnect and continue (Redis's
                // disconnectSlaves here).
                super::disconnect_replicas(w);
            }
        }
    } else {
        return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
    }
    crate::log_notice!("MASTER <-> REPLICA sync: Finished with success");
    set_state(gen, State::Connected);
    apply_stream(w, gen, r, wr, addrs).await
}

/// Receives the snapshot (`$<len>` or the diskless `$EOF:<mark>` form) into a temporary file
/// and loads it into every shard, replacing the dataset.
async fn full_sync(
    w: &Rc<Worker>,
    r: &mut BufReader<ReadHalf>,
    cfg: &crate::config::Config,
    same_history: bool,
) -> Result<Option<usize>, LinkError> {
    let head = read_line(r, cfg, TIMEOUT_TRANSFER).await?;
    let Some(spec) = head.strip_prefix('$') else {
        return Err(format!(
            "Bad protocol from MASTER, the first byte is not '$': {head}"
        ));
    };
    let path = std::path::PathBuf::from(format!(
        "temp-{}.{}.rdb",
        std::process::id(),
        crate::clock::unix_ms()
    ));
    // (Plain file writes: a chunk at a time, they cost this thread microseconds.)
    let mut file = std::fs::File::create(&path).map_err(|e| {
        format!("Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}")
    })?;
    // INFO's `loading`, and `-LOADING` for clients, as Redis has them: from the first byte of
    // the snapshot when Redis would load it straight from the socket (`repl-diskless-load`
    // swapdb or on-empty-db), else while the received file loads. A failed transfer leaves
    // the old dataset as it was (the file never replaced it).
    struct Loading<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Loading<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }
    // Within one history (`swapdb`, the primary's id is ours), Redis loads in the background
    // and serves the old dataset meanwhile (`async_loading`); ours stays served until the
    // received snapshot replaces it anyway, so only the flag differs.
    let loading_flag = if same_history && cfg.repl_diskless_load() == ReplDisklessLoad::Swapdb {
        &w.shared.persist.async_loading
    } else {
        &w.shared.persist.loading
    };
    let mut loading = None;
    let diskless_load = cfg.repl_diskless_load() != ReplDisklessLoad::Disabled;
    if diskless_load {
        // Redis's log from here on is a socket load's (tools and tests wait for its lines).
        crate::log_notice!("MASTER <-> REPLICA sync: Loading DB in memory");
        loading_flag.store(true, Ordering::SeqCst);
        loading = Some(Loading(loading_flag));
    } else if spec.starts_with("EOF:") {
        crate::log_notice!(
            "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk"
        );
    } else {
        crate::log_notice!("MASTER <-> REPLICA sync: receiving {spec} bytes from master to disk");
    }
    let mut received: u64 = 0;
    let mut transferred = false;
    let res = async {
        if let Some(mark) = spec.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            let mut tail: Vec<u8> = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = read_bulk(r, &mut buf, cfg).await?;
                received += n as u64;
                if n == 0 {
                    return Err("the primary closed the connection during the snapshot".to_string());
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.len() >= mark.len() && tail.ends_with(&mark) {
                    let keep = tail.len() - mark.len();
                    std::io::Write::write_all(&mut file, &tail[..keep])
                        .map_err(|e| e.to_string())?;
                    break;
                }
                // Everything but the last mark-length bytes is surely data.
                if tail.len() > mark.len() {
                    let keep = tail.len() - mark.len();
                    std::io::Write::write_all(&mut file, &tail[..keep])
                        .map_err(|e| e.to_string())?;
                    tail.drain(..keep);
                }
            }
        } else {
            let mut left: u64 = spec
                .parse()
                .map_err(|_| format!("Bad snapshot length from MASTER: {spec}"))?;
            let mut buf = vec![0u8; 64 * 1024];
            while left > 0 {
                let want = (left as usize).min(buf.len());
                let n = read_bulk(r, &mut buf[..want], cfg).await?;
                received += n as u64;
                if n == 0 {
                    return Err("the primary closed the connection during the snapshot".to_string());
                }
                std::io::Write::write_all(&mut file, &buf[..n]).map_err(|e| e.to_string())?;
                left -= n as u64;
            }
        }
        file.sync_all().map_err(|e| e.to_string())?;
        drop(file);
        if !diskless_load {
            crate::log_notice!("MASTER <-> REPLICA sync: Loading DB in memory");
            loading_flag.store(true, Ordering::SeqCst);
            loading = Some(Loading(loading_flag));
        }
        transferred = true;
        let mut cx = ConnCtx::internal(w.clone());
        crate::persistence::commands::load_replacing(&mut cx, &path)
            .await
            .map_err(|e| {
                format!("Failed trying to load the MASTER synchronization DB from disk: {e}")
            })
    }
    .await;
    drop(loading);
    let _ = std::fs::remove_file(&path);
    if diskless_load && !transferred && res.is_err() {
        // The load Redis does from the socket fails on the short read (its RDB reader's
        // error); the old dataset stays.
        crate::log_warning!(
            "Internal error in RDB reading offset {received}: Unexpected EOF reading RDB file"
        );
        crate::log_warning!(
            "Failed trying to load the MASTER synchronization DB from socket, check server logs."
        );
    }
    res
}

/// One read of the snapshot's bytes, within `repl-timeout`.
async fn read_bulk(
    r: &mut BufReader<ReadHalf>,
    buf: &mut [u8],
    cfg: &crate::config::Config,
) -> Result<usize, LinkError> {
    within_repl_timeout(cfg, r.read(buf), TIMEOUT_TRANSFER)
        .await?
        .map_err(|e| e.to_string())
}

/// Applies the primary's stream until the link drops or REPLICAOF changes.
async fn apply_stream(
    w: &Rc<Worker>,
    gen: u64,
    mut r: BufReader<ReadHalf>,
    mut wr: WriteHalf,
    addrs: crate::net::stream::Addrs,
) -> Result<(), LinkError> {
    use damselfly_protocol::{Parser, ParserLimits};
    let mut cx = ConnCtx::internal(w.clone());
    cx.is_master = true;
    // The stream's database carries over a reconnection: a partial resync continues the
    // stream where it was, without a SELECT (Redis keeps its cached master's db). A full sync's
    // stream starts with one.
    cx.db = STREAM_DB.load(Ordering::Relaxed);
    crate::engine::role::set_master_client(cx.client_id());
    // The link is a client as Redis shows it: flag M, the primary's address; CLIENT KILL
    // (by address, id or TYPE master) drops it and it reconnects.
    {
        let mut info = cx.client.info.borrow_mut();
        info.addr = addrs.peer;
        info.laddr = addrs.local;
        info.flags = "M".into();
        info.name = String::new();
        info.local = true;
    }
    crate::client::register(cx.client.clone());
    struct Unregister(u64);
    impl Drop for Unregister {
        fn drop(&mut self) {
            crate::client::unregister(self.0);
        }
    }
    let _registered = Unregister(cx.client_id());
    let killed = cx.client.clone();
    let mut parser = Parser::new(ParserLimits::default());
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    // Whatever the reader buffered past the handshake is stream already.
    buf.extend_from_slice(r.buffer());
    let consumed = r.buffer().len();
    r.consume(consumed);
    let mut rd = r.into_inner();
    let mut ack = tokio::time::interval(Duration::from_secs(1));
    let mut chunk = vec![0u8; 64 * 1024];
    let mut last_read = std::time::Instant::now();
    loop {
        if killed.killed.get() {
            return Err("connection with master killed (CLIENT KILL)".into());
        }
        // Apply every complete command buffered, pipelined as a client's commands are
        // (consecutive single-key commands squashed into one message per shard).
        let mut start = 0;
        loop {
            if !current(gen) {
                return Ok(());
            }
            let mut cmds: Vec<Vec<(usize, usize)>> = Vec::new();
            let mut end = start;
            let mut getack: Option<usize> = None;
            while cmds.len() < 256 {
                match parser.next(&buf[end..]) {
                    Ok(Some(consumed)) => {
                        let base = buf.as_ptr() as usize;
                        let ranges: Vec<(usize, usize)> = parser
                            .args(&buf[end..end + consumed])
                            .map(|a| {
                                let off = a.as_ptr() as usize - base;
                                (off, off + a.len())
                            })
                            .collect();
                        let at = end;
                        end += consumed;
                        let is_getack = ranges.len() >= 2
                            && buf[ranges[0].0..ranges[0].1].eq_ignore_ascii_case(b"replconf")
                            && buf[ranges[1].0..ranges[1].1].eq_ignore_ascii_case(b"getack");
                        if is_getack {
                            getack = Some(at);
                            break;
                        }
                        if !ranges.is_empty() {
                            cmds.push(ranges);
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return Err(format!("protocol error in the primary's stream: {e:?}")),
                }
            }
            if end == start {
                break;
            }
            // A script past its busy threshold here: the stream waits, buffered, instead of
            // getting `-BUSY` (Redis stops reading its master client then too).
            while crate::engine::busy::busy().is_some() {
                if !current(gen) {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cx.now_ms = crate::clock::unix_ms();
            apply(&mut cx, &buf, &cmds).await;
            cx.reply.clear();
            STREAM_DB.store(cx.db, Ordering::Relaxed);
            if let Some(at) = getack {
                // Acknowledges what came before it (as Redis's replicas do).
                super::emit_forwarded(w, &buf[start..at]);
                send_ack(&mut wr).await?;
                super::emit_forwarded(w, &buf[at..end]);
            } else {
                super::emit_forwarded(w, &buf[start..end]);
            }
            start = end;
        }
        buf.drain(..start);
        // (Never inside the stream's MULTI: a snapshot there would hold half a transaction.)
        if !cx.in_multi() {
            honour_pause().await;
        }
        tokio::select! {
            _ = PAUSE_WAKE.notified() => {
                continue;
            }
            _ = killed.wake.notified() => {
                continue;
            }
            n = rd.read(&mut chunk) => {
                let n = n.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("the primary closed the connection".into());
                }
                last_read = std::time::Instant::now();
                buf.extend_from_slice(&chunk[..n]);
                set_state(gen, State::Connected);
            }
            _ = ack.tick() => {
                if !current(gen) {
                    return Ok(());
                }
                if last_read.elapsed() > repl_timeout(&w.shared.config) {
                    return Err(TIMEOUT_STREAM.into());
                }
                send_ack(&mut wr).await?;
            }
        }
    }
}

/// A command of the primary's stream failed here: the data may diverge. Logged as Redis logs
/// it, and with `propagation-error-behavior panic`/`panic-on-replicas` a read-only replica
/// stops.
fn stream_error(cx: &ConnCtx, args: &[&[u8]]) {
    let Some(err) = cx.reply.buf.strip_prefix(b"-") else {
        return;
    };
    let end = err
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(err.len());
    let msg = String::from_utf8_lossy(&err[..end]);
    let name = String::from_utf8_lossy(args.first().copied().unwrap_or(b"")).to_lowercase();
    crate::log_warning!(
        "== CRITICAL == This replica is sending an error to its master: '{msg}' after processing the command '{name}'"
    );
    let behavior = cx.worker.shared.config.propagation_error_behavior();
    // As Redis: only a read-only replica stops (a writable one may hold keys of its own that
    // the stream's commands meet).
    let read_only = cx.worker.shared.config.replica_read_only();
    if read_only && behavior != PropagationErrorBehavior::Ignore {
        let behavior = behavior.name();
        crate::log_warning!(
            "Replica stopped (propagation-error-behavior {behavior}): the command failed on the replica; the data may have diverged from the master"
        );
        std::process::exit(1);
    }
}

/// The length of the first complete RESP2/RESP3 reply in `b`.
fn reply_len(b: &[u8]) -> Option<usize> {
    let eol = b.windows(2).position(|w| w == b"\r\n")?;
    let head = &b[1..eol];
    let num = || std::str::from_utf8(head).ok()?.parse::<i64>().ok();
    let mut at = eol + 2;
    match *b.first()? {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Some(at),
        b'$' | b'=' | b'!' => {
            let n = num()?;
            Some(if n < 0 { at } else { at + n as usize + 2 })
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = num()?;
            let items = if matches!(b[0], b'%' | b'|') {
                n * 2
            } else {
                n
            };
            for _ in 0..items.max(0) {
                at += reply_len(&b[at..])?;
            }
            Some(at)
        }
        _ => None,
    }
}

/// Runs the parsed commands (argument ranges into `buf`) in order, squashing runs of
/// single-key commands as a pipelining client's are.
async fn apply(cx: &mut ConnCtx, buf: &[u8], cmds: &[Vec<(usize, usize)>]) {
    use crate::commands::coordinator::squash::{classify, execute_run, Squashed};
    use smallvec::SmallVec;
    let args_of = |c: &Vec<(usize, usize)>| -> SmallVec<[&[u8]; 8]> {
        c.iter().map(|&(a, b)| &buf[a..b]).collect()
    };
    let mut i = 0;
    while i < cmds.len() {
        let args = args_of(&cmds[i]);
        i += 1;
        if cx.threads() > 1 {
            if let Some(how) = classify(cx, &args) {
                let mut run = vec![Squashed { args, how }];
                while i < cmds.len() {
                    let a = args_of(&cmds[i]);
                    match classify(cx, &a) {
                        Some(how) => {
                            run.push(Squashed { args: a, how });
                            i += 1;
                        }
                        None => break,
                    }
                }
                if run.len() >= 2 {
                    execute_run(cx, &run).await;
                    // The run's replies, one per command, in order: report any error.
                    let replies = std::mem::take(&mut cx.reply.buf);
                    let mut at = 0;
                    for c in &run {
                        let Some(n) = reply_len(&replies[at..]) else {
                            break;
                        };
                        if replies[at] == b'-' {
                            cx.reply.buf.clear();
                            cx.reply.buf.extend_from_slice(&replies[at..at + n]);
                            stream_error(cx, &c.args);
                        }
                        at += n;
                    }
                } else {
                    crate::commands::execute(cx, &run[0].args).await;
                    stream_error(cx, &run[0].args);
                }
                cx.reply.clear();
                continue;
            }
        }
        crate::commands::execute(cx, &args).await;
        stream_error(cx, &args);
        cx.reply.clear();
    }
}

async fn send_ack(wr: &mut WriteHalf) -> Result<(), LinkError> {
    let off = super::master().offset.to_string();
    wr.write_all(&crate::engine::journal::encode(&[
        b"REPLCONF",
        b"ACK",
        off.as_bytes(),
    ]))
    .await
    .map_err(|e| e.to_string())
}
