//! Replication commands: SYNC, PSYNC and REPLCONF (a replica talking to us), REPLICAOF and
//! SLAVEOF (us becoming one), ROLE and WAIT. The mechanisms live in `crate::replication`.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::commands::spec::prelude::*;
use crate::commands::util::*;
use crate::commands::{BoxFut, ConnCtx};
use crate::engine::journal;
use crate::engine::Worker;
use crate::persistence::commands::{save_for_replica, snapshot_plan, AtBarrier, ForReplica};
use crate::replication::{self as repl, replica};

const G: Group = Group::Server;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("sync", 1, ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING, NOKEYS, Conn(sync)).plan(snapshot_plan)
        .doc(G, "1.0.0", "An internal command used in replication."),
    cmd("psync", -3, ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING, NOKEYS, Conn(sync)).plan(snapshot_plan)
        .doc(G, "2.8.0", "An internal command used in replication."),
    cmd("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, NOKEYS, Local(replconf))
        .doc(G, "3.0.0", "An internal command for configuring the replication stream."),
    cmd("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, NOKEYS, Conn(replicaof)).acl(acl::DANGEROUS)
        .doc(G, "5.0.0", "Configures a server as replica of another, or promotes it to a master."),
    cmd("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, NOKEYS, Conn(replicaof)).acl(acl::DANGEROUS)
        .doc(G, "1.0.0", "Sets a Redis server as a replica of another, or promotes it to being a master."),
    cmd("role", 1, NOSCRIPT | LOADING | STALE | FAST, NOKEYS, Local(role)).acl(acl::ADMIN | acl::DANGEROUS)
        .doc(G, "2.8.12", "Returns the replication role."),
    cmd("failover", -1, ADMIN | NOSCRIPT | STALE, NOKEYS, Conn(failover)).acl(acl::DANGEROUS)
        .doc(G, "6.2.0", "Starts a coordinated failover from a server to one of its replicas."),
    cmd("wait", 3, NOSCRIPT, NOKEYS, Conn(wait)).family(acl::CONNECTION)
        .doc(Group::Generic, "3.0.0", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed."),
];

/// SYNC and PSYNC: a replica (or `redis-cli --replica`, or a test reading the stream) asks for
/// the stream. PSYNC continues from the backlog when it can (`+CONTINUE`); otherwise a full
/// sync: a background snapshot whose point is where the replica's stream starts.
fn sync<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let psync = eq_ic(args[0], "psync");
        // `PSYNC <replid> <offset> FAILOVER`: our primary hands its role to us (FAILOVER).
        // Our history is its history, so it continues as our replica.
        if psync && args.len() > 3 && eq_ic(args[3], "failover") {
            if args[1] != repl::master().replid.as_bytes() {
                cx.reply
                    .error("ERR PSYNC FAILOVER replid must match my replid.");
                return;
            }
            if replica::is_replica() {
                // A forced failover may hand over before we applied its last writes, which
                // are on our link still: take them first (up to a second), so that it
                // continues with +CONTINUE instead of a full sync.
                let want = parse_i64(args[2]).unwrap_or(0) - 1;
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
                while replica::link_is_up()
                    && (repl::master().offset as i64) < want
                    && std::time::Instant::now() < deadline
                {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
                unset_master(cx).await;
                let line = cx.client.info.borrow().line();
                crate::log_notice!("MASTER MODE enabled (failover request from '{line}')");
            }
        }
        // Replicas do not sync with a primary that is handing over.
        if repl::failover::phase() != repl::failover::Phase::None {
            cx.reply.error("NOMASTERLINK Can't SYNC while failing over");
            return;
        }
        // A replica serves replicas only from a live link (its data is its primary's then).
        if replica::is_replica() && !replica::link_is_up() {
            cx.reply
                .error("NOMASTERLINK Can't SYNC while not connected with my master");
            return;
        }
        if psync && parse_i64(args[2]).is_none() {
            let addr = cx.client.info.borrow().addr.clone();
            crate::log_warning!("Replica {addr} asks for synchronization but with a wrong offset");
            cx.reply.error(ERR_NOT_INT);
            return;
        }
        let (id, tid) = (cx.client_id(), cx.worker.id);
        let ip = {
            let info = cx.client.info.borrow();
            let addr = info.addr.clone();
            addr.rsplit_once(':')
                .map(|(h, _)| h.to_string())
                .unwrap_or(addr)
        };
        let announced = repl::announced(id);
        let port = announced.port;
        mark_replica(cx);
        if cx.shared().config.repl_disable_tcp_nodelay() {
            disable_nodelay(cx.client.info.borrow().fd);
        }
        if psync {
            let replid = String::from_utf8_lossy(args[1]).into_owned();
            let offset = parse_i64(args[2]).unwrap_or(-1);
            let mut m = repl::master();
            if let Some(data) = m.partial(&replid, offset) {
                repl::STATS.partial_ok.fetch_add(1, Ordering::Relaxed);
                repl::attach_partial(&mut m, id, tid, ip, port);
                let line = format!("+CONTINUE {}\r\n", m.replid);
                drop(m);
                crate::log_notice!(
                    "Partial resynchronization request from replica accepted. Sending {} bytes of backlog starting from offset {offset}.",
                    data.len()
                );
                cx.reply.raw(line.as_bytes());
                cx.reply.raw(&data);
                return;
            }
            if replid != "?" {
                repl::STATS.partial_err.fetch_add(1, Ordering::Relaxed);
            }
        }
        repl::STATS.full.fetch_add(1, Ordering::Relaxed);
        crate::log_notice!("Replica asks for synchronization; starting a full resynchronization");
        // As Redis: diskless only for replicas that read the EOF form (redis-cli --replica and
        // a plain SYNC get the file).
        let diskless = cx.shared().config.repl_diskless_sync() && announced.capa_eof;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let attach = journal::Attach {
            client: id,
            tid,
            ip,
            psync,
            offset: tx,
        };
        let to = Transfer {
            offset: rx,
            id,
            port,
            psync,
        };
        let sent = if diskless {
            let (pieces_tx, pieces) = tokio::sync::mpsc::channel(4);
            join_gathering(
                &cx.worker,
                Member {
                    attach,
                    pieces: pieces_tx,
                },
            );
            receive_diskless(cx, pieces, to).await
        } else {
            match start_point(&cx.worker, vec![attach]).await {
                Some((at_barrier, stream_db)) => {
                    let replica = ForReplica {
                        at_barrier,
                        stream: None,
                        stream_db,
                    };
                    send_from_disk(cx, replica, to).await
                }
                None => {
                    cx.reply
                        .error("ERR the link to the master is busy, try again");
                    Err("the link to our master did not pause".into())
                }
            }
        };
        if let Err(e) = sent {
            crate::log_warning!("Full sync failed: {e}");
            cx.close = true;
            // Its share of the stream goes with it (the backlog may let go of it now).
            cx.client.pushes.borrow_mut().clear();
            repl::forget(id);
            return;
        }
        // (Its silence counts from here, as Redis's replicaPutOnline: loading took what it took.)
        let now = crate::clock::unix_ms();
        repl::with_replica(id, |r| {
            r.online = true;
            r.ack_ms = now;
        });
        crate::log_notice!("Synchronization with replica succeeded");
    })
}

/// `repl-disable-tcp-nodelay yes`: the replica's socket batches small writes (Redis turns
/// TCP_NODELAY off on it in SYNC).
fn disable_nodelay(fd: i32) {
    if fd < 0 {
        return;
    }
    let off: libc::c_int = 0;
    // SAFETY: `fd` is this connection's open socket; the option value outlives the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &off as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// The connection is a replica's: CLIENT LIST shows `S`; its stream is never cut by the
/// normal clients' output limit.
fn mark_replica(cx: &mut ConnCtx) {
    cx.is_replica = true;
    let mut info = cx.client.info.borrow_mut();
    if !info.flags.contains('S') {
        info.flags.push('S');
    }
}

/// Where full syncs' streams start: the hook their snapshot runs at its point, attaching every
/// replica of `attaches` to the stream there, and the database the stream is in at that point.
/// None when a replica of ours (a chain) could not pause its link.
async fn start_point(
    worker: &Rc<Worker>,
    attaches: Vec<journal::Attach>,
) -> Option<(AtBarrier, usize)> {
    let backlog = worker.shared.config.repl_backlog_size();
    if replica::is_replica() {
        // A replica of a replica (a chain): the stream is our primary's, forwarded. The link
        // stops between two batches, the replicas attach at the offset reached, and the link
        // goes on once the snapshot's point is taken.
        if !replica::pause().await {
            replica::resume();
            crate::log_warning!("Full sync refused: the link to our master did not pause");
            return None;
        }
        let db = replica::stream_db();
        for a in attaches {
            repl::attach_now(a, backlog);
        }
        return Some((Box::new(replica::resume), db));
    }
    // A primary's stream selects a database first (db 0 is as good as any).
    journal::begin(&worker.shared.next_txid);
    repl::master().ensure_backlog(backlog);
    let hook: AtBarrier = Box::new(move || {
        for a in attaches {
            journal::push(journal::Item::Attach(Box::new(a)));
        }
    });
    Some((hook, 0))
}

/// A piece of a diskless snapshot for one replica; `None` once it ended well.
type Piece = Option<Arc<[u8]>>;

/// A replica waiting for a diskless snapshot.
struct Member {
    attach: journal::Attach,
    pieces: tokio::sync::mpsc::Sender<Piece>,
}

/// The replicas gathering for the next diskless snapshot: Redis makes one snapshot for all the
/// replicas that asked within `repl-diskless-sync-delay` seconds (cut short once
/// `repl-diskless-sync-max-replicas` wait) and streams it to all of them; so does this, and
/// their stream starts at one offset, its batches shared (`repl::Backlog`).
static GATHERING: std::sync::Mutex<Option<Vec<Member>>> = std::sync::Mutex::new(None);

fn gathering() -> std::sync::MutexGuard<'static, Option<Vec<Member>>> {
    GATHERING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Joins the gathering replicas, or starts a gathering (on this thread) when none is open.
fn join_gathering(worker: &Rc<Worker>, m: Member) {
    let mut g = gathering();
    match g.as_mut() {
        Some(members) => members.push(m),
        None => {
            *g = Some(vec![m]);
            tokio::task::spawn_local(run_gathering(worker.clone()));
        }
    }
}

/// A gathering's life: waits the delay, closes the gathering, makes one snapshot and sends
/// its pieces to every member still there (the slowest sets the pace, as the one pipe from
/// Redis's child does). A task of its own, so that no one replica's connection going away
/// stops the others' transfer.
async fn run_gathering(worker: Rc<Worker>) {
    let cfg = &worker.shared.config;
    let secs = cfg.repl_diskless_sync_delay_secs();
    let max = cfg.repl_diskless_sync_max_replicas();
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    while tokio::time::Instant::now() < until {
        let waiting = gathering().as_ref().map_or(0, Vec::len);
        if max > 0 && waiting >= max {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let members = gathering().take().unwrap_or_default();
    let (attaches, mut outs): (Vec<_>, Vec<_>) =
        members.into_iter().map(|m| (m.attach, m.pieces)).unzip();
    // (No start point: the members' channels close unanswered, and each fails its sync.)
    let Some((at_barrier, stream_db)) = start_point(&worker, attaches).await else {
        return;
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let replica = ForReplica {
        at_barrier,
        stream: Some(tx),
        stream_db,
    };
    let save = save_for_replica(&worker, replica);
    let fan_out = async {
        while let Some(piece) = rx.recv().await {
            let piece: Arc<[u8]> = piece.into();
            let mut i = 0;
            while i < outs.len() {
                if outs[i].send(Some(piece.clone())).await.is_ok() {
                    i += 1;
                } else {
                    outs.swap_remove(i);
                }
            }
            if outs.is_empty() {
                // Nobody left to send to: dropping the channel stops the snapshot.
                break;
            }
        }
        drop(rx);
    };
    let (saved, ()) = tokio::join!(save, fan_out);
    if saved.is_ok() {
        for o in &outs {
            let _ = o.send(None).await;
        }
    }
}

/// A full sync's snapshot on its way to one replica.
struct Transfer {
    /// The stream's offset at the snapshot's point (from the barrier's hook).
    offset: tokio::sync::oneshot::Receiver<u64>,
    id: u64,
    port: u16,
    psync: bool,
}

/// The offset is known: the replica's port, and `+FULLRESYNC` for PSYNC.
fn begin_transfer(cx: &mut ConnCtx, to: &Transfer, offset: u64) {
    repl::with_replica(to.id, |r| r.port = to.port);
    if to.psync {
        let replid = repl::master().replid.clone();
        cx.reply
            .raw(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes());
    }
}

/// Disk-based: the snapshot file, then `$<len>` and its bytes.
async fn send_from_disk(
    cx: &mut ConnCtx,
    replica: ForReplica,
    mut to: Transfer,
) -> Result<(), String> {
    let path = save_for_replica(&cx.worker, replica)
        .await?
        .ok_or("the snapshot went nowhere")?;
    let offset = (&mut to.offset).await.map_err(|_| "no snapshot point")?;
    begin_transfer(cx, &to, offset);
    send_file(cx, &path)
        .await
        .map_err(|e| format!("sending the snapshot to the replica: {e}"))
}

/// Diskless: the gathering's snapshot, as its pieces come, framed by Redis's EOF marks (the
/// replica cannot know its length in advance).
async fn receive_diskless(
    cx: &mut ConnCtx,
    mut pieces: tokio::sync::mpsc::Receiver<Piece>,
    mut to: Transfer,
) -> Result<(), String> {
    let mark = repl::new_replid();
    // The offset is known at the snapshot's point, before any byte is sent.
    let offset = watching(cx, &mut to.offset)
        .await?
        .map_err(|_| "no snapshot point")?;
    begin_transfer(cx, &to, offset);
    cx.reply.raw(format!("$EOF:{mark}\r\n").as_bytes());
    // Out now, as Redis's are: the replica is in its transfer from here (ROLE `sync`), however
    // long the first piece takes.
    flush_transfer(cx)
        .await
        .map_err(|e| format!("sending the snapshot to the replica: {e}"))?;
    loop {
        match watching(cx, pieces.recv()).await? {
            Some(Some(piece)) => {
                cx.reply.raw(&piece);
                flush_transfer(cx)
                    .await
                    .map_err(|e| format!("sending the snapshot to the replica: {e}"))?;
            }
            Some(None) => break,
            None => return Err("the snapshot failed".into()),
        }
    }
    // The stream waits for the replica's first ACK (it loaded the snapshot), as Redis's does
    // after an EOF-marked transfer.
    cx.client.hold_pushes.set(true);
    cx.reply.raw(mark.as_bytes());
    cx.flush_all()
        .await
        .map_err(|e| format!("sending the snapshot to the replica: {e}"))
}

/// Awaits `fut` for a replica waiting for its snapshot, giving up when its connection is
/// killed (CLIENT KILL stops its transfer at once) or its peer closed it: the session reads
/// nothing while SYNC runs, so without looking, a replica that went away would be counted (and
/// its share of the stream kept) until the next piece of a slow snapshot failed to go out.
async fn watching<T>(cx: &ConnCtx, fut: impl std::future::Future<Output = T>) -> Result<T, String> {
    let client = cx.client.clone();
    let fd = client.info.borrow().fd;
    let mut fut = std::pin::pin!(fut);
    loop {
        // (Checked first: the snapshot's next piece is often ready at once.)
        if client.killed.get() {
            return Err(ERR_KILLED.into());
        }
        tokio::select! {
            v = &mut fut => return Ok(v),
            _ = client.wake.notified() => {}
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {
                if peer_closed(fd) {
                    return Err("the replica closed the connection".into());
                }
            }
        }
    }
}

/// Has the other end of socket `fd` closed it (or reset it)? Asked without reading, so bytes
/// the peer sent stay for the session.
fn peer_closed(fd: i32) -> bool {
    if fd < 0 {
        return false;
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call's duration; a zero timeout never blocks.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// Sends the snapshot's bytes written so far, giving up on a replica that took none of them
/// for `repl-timeout` (one stopped, say, by SIGSTOP): its snapshot would otherwise hold the
/// save slot, and the shards' copies of what changed meanwhile, for as long as it sleeps.
async fn flush_transfer(cx: &mut ConnCtx) -> std::io::Result<()> {
    let limit = replica::repl_timeout(&cx.shared().config);
    match tokio::time::timeout(limit, cx.flush_all()).await {
        Ok(res) => res,
        Err(_) => {
            let addr = cx.client.info.borrow().addr.clone();
            crate::log_warning!("Disconnecting timedout replica (full sync): {addr}");
            Err(std::io::Error::other(
                "the replica took nothing for repl-timeout",
            ))
        }
    }
}

/// Why a transfer stopped early.
const ERR_KILLED: &str = "the replica's connection was killed";

/// Writes `$<len>\r\n` and the file, a chunk at a time as the socket takes it.
async fn send_file(cx: &mut ConnCtx, path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    cx.reply.raw(format!("${len}\r\n").as_bytes());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if cx.client.killed.get() {
            return Err(std::io::Error::other(ERR_KILLED));
        }
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        cx.reply.raw(&buf[..n]);
        flush_transfer(cx).await?;
    }
    flush_transfer(cx).await
}

/// REPLCONF <option> <value> ...: what a replica tells us about itself; `ACK <offset>` (no
/// reply) is how far it applied the stream.
fn replconf(cx: &mut ConnCtx, args: &[&[u8]]) {
    if args.len().is_multiple_of(2) {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    let id = cx.client_id();
    for pair in args[1..].chunks(2) {
        let (opt, val) = (pair[0], pair[1]);
        if eq_ic(opt, "listening-port") {
            match parse_i64(val) {
                Some(p) if (0..=65535).contains(&p) => {
                    repl::announce(id, |a| a.port = p as u16);
                    repl::with_replica(id, |r| r.port = p as u16);
                }
                _ => {
                    cx.reply
                        .error("ERR value is not an integer or out of range");
                    return;
                }
            }
        } else if eq_ic(opt, "ack") {
            if let Some(off) = parse_i64(val) {
                let now = crate::clock::unix_ms();
                repl::with_replica(id, |r| {
                    if off as u64 > r.ack_offset {
                        r.ack_offset = off as u64;
                    }
                    r.ack_ms = now;
                });
                if cx.client.hold_pushes.replace(false) {
                    cx.client.wake.notify_one();
                }
            }
            // Never answered (the replica does not read replies).
            return;
        } else if eq_ic(opt, "getack") {
            // Only meaningful from our primary (the link answers it); ignored otherwise.
            return;
        } else if eq_ic(opt, "capa") {
            if eq_ic(val, "eof") {
                repl::announce(id, |a| a.capa_eof = true);
            }
        } else if eq_ic(opt, "ip-address")
            || eq_ic(opt, "rdb-only")
            || eq_ic(opt, "rdb-filter-only")
        {
        } else {
            cx.reply.error(&format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            ));
            return;
        }
    }
    cx.reply.ok();
}

/// REPLICAOF host port | NO ONE.
fn replicaof<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if repl::failover::phase() != repl::failover::Phase::None {
            cx.reply
                .error("ERR REPLICAOF not allowed while failing over.");
            return;
        }
        if eq_ic(args[1], "no") && eq_ic(args[2], "one") {
            if replica::is_replica() {
                unset_master(cx).await;
                let line = cx.client.info.borrow().line();
                crate::log_notice!("MASTER MODE enabled (user request from '{line}')");
            }
            cx.reply.ok();
            return;
        }
        let Some(port) = parse_i64(args[2]).filter(|p| (0..=65535).contains(p)) else {
            cx.reply.error("ERR Invalid master port");
            return;
        };
        let host = String::from_utf8_lossy(args[1]).into_owned();
        // Our replicas must resync with the new history: drop them, as Redis does.
        disconnect_replicas(cx);
        let was_primary = !replica::is_replica();
        if replica::start(&cx.worker, host.clone(), port as u16) {
            if was_primary {
                // A client blocked in BLPOP here must not pop what the new primary's stream
                // pushes: Redis answers every blocked client with this error.
                cx.worker
                    .broadcast(|w| {
                        let mut r = damselfly_protocol::Reply::new(Default::default());
                        r.error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
                        w.unblock_all(&r.take())
                    })
                    .await;
            }
            crate::log_notice!("REPLICAOF {host}:{port} enabled (user request)");
            cx.reply.ok();
        } else {
            cx.reply.simple("OK Already connected to specified master");
        }
    })
}

/// Redis's `replicationUnsetMaster` (REPLICAOF NO ONE, a failover's target, a failover
/// aborted after its hand-over): the link stops, the history goes on under a new id (the
/// old one valid up to here as `replid2`), and the replicas reconnect to learn it.
pub(crate) async fn unset_master(cx: &mut ConnCtx) {
    if replica::stop() {
        promote(cx).await;
        repl::disconnect_replicas(&cx.worker);
    }
}

/// A promoted replica journals its own writes from now on: every shard starts at one point
/// (all held), and the stream goes on from the offset the link reached.
async fn promote(cx: &mut ConnCtx) {
    if cx.coord.in_exec() {
        // REPLICAOF NO ONE inside MULTI: EXEC already holds every shard (a keyless command
        // locks them all); a transaction of our own would wait for it forever.
        start_journal(cx).await;
        return;
    }
    let mut icx = ConnCtx::internal(cx.worker.clone());
    icx.run_internal(&[b"flushall"], move |cx| {
        Box::pin(async move {
            start_journal(cx).await;
            cx.hops().all_shards(|_, ()| ()).run().await;
        })
    })
    .await;
}

/// With every shard held by `cx`'s transaction: journaling starts on all of them at once.
async fn start_journal(cx: &mut ConnCtx) {
    cx.hops()
        .all_shards(|_, ()| journal::enable_here())
        .run_more()
        .await;
    journal::begin(&cx.shared().next_txid);
    journal::resume();
}

fn disconnect_replicas(cx: &ConnCtx) {
    repl::disconnect_replicas(&cx.worker);
}

/// ROLE.
fn role(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let r = &mut cx.reply;
    if let Some(l) = replica::link().as_ref() {
        let off = repl::master().offset;
        r.array(5);
        r.bulk(b"slave");
        r.bulk(l.host.as_bytes());
        r.int(l.port as i64);
        r.bulk(l.state.role_word().as_bytes());
        r.int(off as i64);
        return;
    }
    let m = repl::master();
    r.array(3);
    r.bulk(b"master");
    r.int(m.offset as i64);
    r.array(m.replicas.len());
    for s in &m.replicas {
        r.array(3);
        r.bulk(s.ip.as_bytes());
        r.bulk(s.port.to_string().as_bytes());
        r.bulk(s.ack_offset.to_string().as_bytes());
    }
}

/// WAIT numreplicas timeout: until that many replicas acknowledged the stream as it is now.
fn wait<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if replica::is_replica() {
            cx.reply
                .error("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
            return;
        }
        let Some(n) = parse_i64(args[1]) else {
            cx.reply
                .error("ERR value is not an integer or out of range");
            return;
        };
        let Some(timeout) = parse_i64(args[2]) else {
            cx.reply
                .error("ERR timeout is not an integer or out of range");
            return;
        };
        if timeout < 0 {
            cx.reply.error("ERR timeout is negative");
            return;
        }
        // Everything journaled before now is in the stream once the feeder ran.
        let target = repl::settled_offset().await;
        let mut got = repl::acked(target);
        if got as i64 >= n || cx.in_exec() {
            cx.reply.int(got as i64);
            return;
        }
        journal::push(journal::Item::Raw(journal::encode(&[
            b"REPLCONF",
            b"GETACK",
            b"*",
        ])));
        let deadline = (timeout > 0)
            .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout as u64));
        cx.flush_before_block();
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            got = repl::acked(target);
            if got as i64 >= n || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                break;
            }
            if cx.client.killed.get() {
                return;
            }
        }
        cx.reply.int(got as i64);
    })
}

/// INFO's replication section.
pub fn info(o: &mut String, cfg: &crate::config::Config) {
    use std::fmt::Write;
    let mut m = repl::master();
    // (`repl_backlog_histlen` without what no replica holds any more.)
    m.trim();
    let link = replica::link();
    o.push_str("# Replication\r\n");
    match link.as_ref() {
        Some(l) => {
            let now = crate::clock::unix_ms();
            let _ = write!(
                o,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\n",
                l.host, l.port
            );
            let up = l.state == replica::State::Connected;
            let _ = write!(
                o,
                "master_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
                if up { "up" } else { "down" },
                if up { (now.saturating_sub(l.last_io_ms) / 1000) as i64 } else { -1 },
                (l.state == replica::State::Sync) as u8,
                m.offset,
                m.offset
            );
            if !up {
                let _ = write!(
                    o,
                    "master_link_down_since_seconds:{}\r\n",
                    now.saturating_sub(l.down_since_ms) / 1000
                );
            }
            let _ = write!(
                o,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:1\r\n",
                cfg.replica_priority(),
                cfg.replica_read_only() as u8
            );
        }
        None => o.push_str("role:master\r\n"),
    }
    let _ = write!(o, "connected_slaves:{}\r\n", m.replicas.len());
    let now = crate::clock::unix_ms();
    for (i, r) in m.replicas.iter().enumerate() {
        let _ = write!(
            o,
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            r.ip,
            r.port,
            if r.online { "online" } else { "wait_bgsave" },
            r.ack_offset,
            now.saturating_sub(r.ack_ms) / 1000
        );
    }
    let _ = write!(
        o,
        "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\n",
        repl::failover::phase_word(),
        m.replid,
        m.replid2,
        m.offset,
        m.second_offset
    );
    let (active, size, first, hist) = match &m.backlog {
        Some(b) => (1, b.size(), m.backlog_first_byte(), b.histlen()),
        None => (0, cfg.repl_backlog_size(), 0, 0),
    };
    let _ = write!(
        o,
        "repl_backlog_active:{active}\r\nrepl_backlog_size:{size}\r\nrepl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{hist}\r\n"
    );
}

/// FAILOVER [TO host port [FORCE]] [TIMEOUT ms] | FAILOVER ABORT (Redis 6.2's checks and
/// errors, in its order). The mechanism is `replication::failover`.
fn failover<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    use repl::failover::{self as fo, Phase};
    Box::pin(async move {
        if args.len() == 2 && eq_ic(args[1], "abort") {
            if fo::phase() == Phase::None {
                cx.reply.error("ERR No failover in progress.");
                return;
            }
            fo::abort(&cx.worker, "Failover manually aborted").await;
            cx.reply.ok();
            return;
        }
        let mut timeout_ms: i64 = 0;
        let mut force = false;
        let mut target: Option<(String, i64)> = None;
        let mut j = 1;
        while j < args.len() {
            if eq_ic(args[j], "timeout") && j + 1 < args.len() && timeout_ms == 0 {
                let Some(t) = parse_i64(args[j + 1]) else {
                    cx.reply.error(ERR_NOT_INT);
                    return;
                };
                if t <= 0 {
                    cx.reply
                        .error("ERR FAILOVER timeout must be greater than 0");
                    return;
                }
                timeout_ms = t;
                j += 2;
            } else if eq_ic(args[j], "to") && j + 2 < args.len() && target.is_none() {
                let Some(port) = parse_i64(args[j + 2]) else {
                    cx.reply.error(ERR_NOT_INT);
                    return;
                };
                target = Some((String::from_utf8_lossy(args[j + 1]).into_owned(), port));
                j += 3;
            } else if eq_ic(args[j], "force") && !force {
                force = true;
                j += 1;
            } else {
                cx.reply.error(ERR_SYNTAX);
                return;
            }
        }
        if fo::phase() != Phase::None {
            cx.reply.error("ERR FAILOVER already in progress.");
            return;
        }
        if replica::is_replica() {
            cx.reply
                .error("ERR FAILOVER is not valid when server is a replica.");
            return;
        }
        if repl::master().replicas.is_empty() {
            cx.reply.error("ERR FAILOVER requires connected replicas.");
            return;
        }
        if force && (timeout_ms == 0 || target.is_none()) {
            cx.reply.error(
                "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
            );
            return;
        }
        let target = match target {
            Some((host, port)) => {
                let found = u16::try_from(port)
                    .ok()
                    .and_then(|p| fo::find_replica(&host, p).map(|online| (p, online)));
                match found {
                    None => {
                        cx.reply
                            .error("ERR FAILOVER target HOST and PORT is not a replica.");
                        return;
                    }
                    Some((_, false)) => {
                        cx.reply.error("ERR FAILOVER target replica is not online.");
                        return;
                    }
                    Some((p, true)) => {
                        crate::log_notice!("FAILOVER requested to {host}:{p}.");
                        Some((host, p))
                    }
                }
            }
            None => {
                crate::log_notice!("FAILOVER requested to any replica.");
                None
            }
        };
        fo::begin(
            &cx.worker,
            fo::Request {
                target,
                timeout_ms: timeout_ms as u64,
                force,
            },
        );
        cx.reply.ok();
    })
}
