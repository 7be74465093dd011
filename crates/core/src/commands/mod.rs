//! Command table and dispatch.
//!
//! Every command is a `CommandSpec` (see `spec.rs`) in its family's module (`string.rs`,
//! `keys.rs`, ...). A spec says how to run it:
//! - `Handler::Shard`: touches one key (or none); runs on the thread owning that key — inline when
//!   that is this thread, otherwise the arguments are shipped there and the encoded reply comes back.
//! - `Handler::Local`: connection-level, synchronous (PING, SELECT, CLIENT SETNAME...).
//! - `Handler::Conn`: async coordinator on the connection's thread for multi-key / all-shard
//!   commands (MGET, DEL, DBSIZE, KEYS...); it reaches shards through `fan_out`/`broadcast`.

pub mod connection;
pub mod coordinator;
pub mod dump;
#[cfg(any(debug_assertions, feature = "fault-injection"))]
pub mod fault;
pub mod key_flags;
pub mod migrate;
pub mod multi;
pub mod propagate;
pub mod pubsub;
pub mod registry;
pub mod scan;
pub mod slowlog;
pub mod spec;
pub mod util;

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use damselfly_protocol::Reply;

use crate::client::ClientHandle;
use crate::clock;
use crate::engine::db::Db;
use crate::engine::guard;
use crate::engine::journal;
use crate::engine::shard::Shard;
use crate::engine::vll;
use crate::engine::{shard_of, Shared, Worker};
pub use registry::{registry, Entry};
pub use spec::{CommandSpec, Handler, KeySpec, PlanSink};

/// Command flags (names as COMMAND INFO reports them).
pub mod flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    pub const SENTINEL: u32 = 1 << 16;
    /// COMMAND GETKEYS of a call naming no key is an empty list, not an error (EVAL ... 0).
    pub const NO_MANDATORY_KEYS: u32 = 1 << 17;
    /// Refused (`-LOADING`) while a replica loads its primary's snapshot in the background
    /// and serves the old dataset meanwhile (`async_loading`).
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;
    /// Not Redis flags (never printed): a global command that must see all shards at one point
    /// in time (DBSIZE, KEYS) or change them at one point in time (FLUSHALL, SWAPDB).
    pub const TX_GLOBAL_READ: u32 = 1 << 24;
    pub const TX_GLOBAL_WRITE: u32 = 1 << 25;
    /// Not a Redis flag: refused like a write while snapshots fail (MISCONF), as Redis refuses
    /// PING then (so health checks see the disk error).
    pub const DENY_ON_DISK_ERROR: u32 = 1 << 26;
    /// Not a Redis flag: inside MULTI the command runs at once instead of being queued (EXEC
    /// DISCARD MULTI WATCH QUIT RESET).
    pub const RUNS_IN_MULTI: u32 = 1 << 27;
    /// Not a Redis flag: rejecting the command before it runs (wrong arity, NOAUTH) discards the
    /// transaction being queued, with an EXECABORT error (Redis's `execCommandAbort`; EXEC).
    pub const REJECT_EXECABORT: u32 = 1 << 28;
    /// Not a Redis flag: the command's replication records come from its shard steps (the
    /// pops of BLPOP, LMPOP, BZPOPMIN... as LPOP/ZPOPMIN) or its transaction's group (EVAL,
    /// FCALL), never from its own arguments.
    pub const PROP_SELF: u32 = 1 << 29;
    /// Not a Redis flag: the command runs a script whose flags (shebang, function flags)
    /// decide whether it writes, not the command's (CLIENT PAUSE WRITE, Redis's
    /// `evalGetCommandFlags`): see `scripting::call_writes`.
    pub const SCRIPT_CALL: u32 = 1 << 30;
    /// Not a Redis flag: allowed to a RESP2 connection in the Pub/Sub context ((P|S)SUBSCRIBE,
    /// (P|S)UNSUBSCRIBE, PING, QUIT, RESET).
    pub const PUBSUB_CONTEXT: u32 = 1 << 31;

    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Redis's reply while the dataset loads at start-up.
pub const ERR_LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// Redis's reply to writes while snapshots fail (`stop-writes-on-bgsave-error`).
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Over `maxmemory` (noeviction: nothing is evicted), Redis refuses what may grow memory: a
/// `denyoom` command, an EXEC whose queue holds one, and, inside MULTI, any command but those
/// that run at once (queueing itself takes memory). Reads and deletes go on. One atomic load
/// when no limit is set.
/// Redis's processCommand: over `maxmemory`, clients over `maxmemory-clients` are disconnected
/// before any key is evicted (their buffers may be what pushed memory over). True: this
/// connection was one of them and must not run the command.
async fn clients_evicted_first(cx: &mut ConnCtx) -> bool {
    let config = &cx.worker.shared.config;
    if config.client_eviction_limit() == 0 || !crate::engine::memory::over_limit(config.maxmemory())
    {
        return false;
    }
    crate::net::session::account_output(cx);
    if crate::client::evict::over(&cx.worker) {
        crate::client::evict::evict(&cx.worker).await;
        if cx.client.killed.get() {
            cx.close = true;
            return true;
        }
    }
    false
}

/// Before a command while `maxmemory` is set or the tracking table is over its limit: clients
/// first, then keys (Redis's processCommand order). Some(refused for memory), or None: this
/// connection was evicted and must not run the command.
async fn memory_before_command(
    cx: &mut ConnCtx,
    spec: &'static CommandSpec,
    maxmemory: u64,
) -> Option<bool> {
    if maxmemory != 0 && clients_evicted_first(cx).await {
        return None;
    }
    let refused = maxmemory != 0 && rejected_for_memory(cx, spec);
    if maxmemory != 0 && !refused {
        others_evict_if_still_over(cx).await;
    }
    if crate::engine::tracking::over_limit() {
        // Redis applies tracking-table-max-keys before every command: the keys given up are
        // invalidated before this command's reply.
        cx.worker
            .broadcast(|_| crate::engine::tracking::limit_keys())
            .await;
    }
    Some(refused)
}

/// After `rejected_for_memory` let a command through: if memory is still over the limit
/// (this shard could not free it), the other shards free it before the command runs.
async fn others_evict_if_still_over(cx: &ConnCtx) {
    let maxmemory = cx.worker.shared.config.maxmemory();
    if maxmemory != 0 && crate::engine::evict::evicts() && cx.threads() > 1 {
        cx.worker.evict_elsewhere(maxmemory).await;
    }
}

pub(crate) fn rejected_for_memory(cx: &ConnCtx, spec: &CommandSpec) -> bool {
    let maxmemory = cx.worker.shared.config.maxmemory();
    if maxmemory == 0 {
        return false;
    }
    // Like Redis's performEvictions before every command: free memory on this thread's shard
    // first. Only what is still over the limit afterwards refuses the command.
    if crate::engine::evict::evicts() {
        let progress = cx.worker.evict(maxmemory);
        // As Redis: a command is refused only when eviction can free nothing (a call that
        // freed some but stopped at its bound lets it through). Cache mode never answers -OOM.
        if progress || crate::engine::evict::cache_mode() {
            return false;
        }
    }
    let in_multi = cx.multi.as_ref();
    let grows = spec.flags & flags::DENYOOM != 0
        || (spec.flags & flags::REJECT_EXECABORT != 0
            && in_multi.is_some_and(|m| m.cmds.iter().any(|(_, s)| s.flags & flags::DENYOOM != 0)))
        || (in_multi.is_some() && spec.flags & flags::RUNS_IN_MULTI == 0);
    grows && crate::engine::memory::over_limit(maxmemory)
}

pub const ERR_MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

pub const ERR_NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

pub const ERR_READONLY: &str = "READONLY You can't write against a read only replica.";

pub const ERR_MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

pub type BoxFut<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;
pub type ShardFn = fn(&mut CmdCtx<'_>, &[&[u8]]);
pub type LocalFn = fn(&mut ConnCtx, &[&[u8]]);
pub type ConnFn = for<'a> fn(&'a mut ConnCtx, &'a [&'a [u8]]) -> BoxFut<'a>;

/// Shard-side context: what a command may touch on the shard it runs on.
pub struct CmdCtx<'a> {
    pub shard: &'a mut Shard,
    pub db: usize,
    /// Unix ms, read once per command.
    pub now: u64,
    pub shared: &'a Shared,
    pub reply: &'a mut Reply,
}

impl CmdCtx<'_> {
    /// Runs `f` with a command context over `w`'s shard: the one place shard work gets its
    /// context (single-key handlers, hops, squashed runs).
    #[inline]
    ///
    /// `client`: the connection the work is for (0: the server's own), known to the shard while
    /// it runs so that its writes' invalidations can skip a NOLOOP tracking client.
    pub(crate) fn over<R>(
        w: &Worker,
        db: usize,
        now: u64,
        client: u64,
        reply: &mut Reply,
        f: impl FnOnce(&mut CmdCtx<'_>) -> R,
    ) -> R {
        let mut shard = w.shard_mut();
        let mut c = CmdCtx {
            shard: &mut shard,
            db,
            now,
            shared: &w.shared,
            reply,
        };
        let prev = crate::engine::tracking::set_writer(client);
        let applying = crate::engine::role::begin_work(client);
        let r = f(&mut c);
        crate::engine::role::end_work(applying);
        crate::engine::tracking::set_writer(prev);
        r
    }

    /// Does this shard own `key`? (DEBUG POPULATE generates every key on every shard and keeps
    /// its own.)
    #[inline]
    pub fn owns(&self, key: &[u8]) -> bool {
        shard_of(key, self.shared.threads) == self.shard.id
    }

    #[inline]
    pub fn db(&mut self) -> &mut Db {
        &mut self.shard.dbs[self.db]
    }
}

/// CLIENT REPLY mode.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReplyMode {
    On,
    Off,
    Skip,
    /// Turned on by the current command (CLIENT REPLY SKIP applies to the *next* command).
    SkipNext,
}

/// Connection-side context.
pub struct ConnCtx {
    pub worker: Rc<Worker>,
    pub client: Rc<ClientHandle>,
    pub reply: Reply,
    pub db: usize,
    pub authed: bool,
    /// The ACL user this connection runs as (`crate::acl`).
    pub acl: crate::acl::ConnUser,
    /// Close the connection after flushing pending replies.
    pub close: bool,
    pub reply_mode: ReplyMode,
    pub no_touch: bool,
    /// Full name of the command being executed ("config|get"), for errors and CLIENT LIST.
    pub cmd_name: &'static str,
    /// Unix ms snapshot taken once per batch of pipelined commands (Redis also evaluates expiry
    /// against a per-command-call time snapshot rather than re-reading the clock per lookup).
    pub now_ms: u64,
    /// The current command's lock plan and transaction (see `coordinator`); command code
    /// reaches shards through `hops()`.
    pub coord: coordinator::Coord,
    /// Commands queued since MULTI (None outside MULTI).
    multi: Option<multi::MultiState>,
    /// The socket side of `reply` (what is written already).
    pub output: crate::net::session::Output,
    /// Query buffer bytes not executed yet, the current command included (CLIENT LIST's
    /// `qbuf` for the client running it).
    pub qbuf_now: usize,
    /// Keys watched since the first WATCH (None when nothing is watched).
    watch: Option<multi::WatchState>,
    /// The command's reply is a Pub/Sub confirmation, sent even under CLIENT REPLY OFF.
    pub pushed: bool,
    /// A script (EVAL, FCALL) of this connection is running: the command is its redis.call.
    pub in_script: bool,
    /// When the command being executed started (`clock::Ticks`, read once by `execute`: a
    /// script's busy clock starts there too).
    pub started: u64,
    /// The reply's error was counted in the error statistics already (see `record_call`).
    pub error_counted: bool,
    /// The replication link applying our primary's stream (exempt from `replica-read-only`).
    pub is_master: bool,
    /// A replica's connection (after SYNC/PSYNC): it may not touch the keyspace, and a reply
    /// to it would corrupt its stream (`net::session` drops it then).
    pub is_replica: bool,
    /// While journaling: a hop of the current command changed something (see `journal_command`).
    pub(crate) hop_dirty: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ConnCtx {
    /// Bytes held by queued MULTI commands and by watched keys (CLIENT LIST `multi-mem`,
    /// `tot-mem`).
    pub fn tx_mem(&self) -> (usize, usize) {
        (
            self.multi.as_ref().map_or(0, |m| m.mem),
            self.watch.as_ref().map_or(0, |w| w.mem),
        )
    }

    /// The connection's client id.
    #[inline]
    pub fn client_id(&self) -> u64 {
        self.client.id
    }

    /// A new connection's context on `worker`'s thread (RESP2, db 0, no transaction state).
    pub fn new(
        worker: Rc<Worker>,
        client: Rc<ClientHandle>,
        output: crate::net::session::Output,
        authed: bool,
    ) -> Self {
        ConnCtx {
            worker,
            client,
            reply: Reply::new(damselfly_protocol::RespVersion::Resp2),
            output,
            qbuf_now: 0,
            db: 0,
            authed,
            acl: crate::acl::ConnUser::default_user(),
            close: false,
            reply_mode: ReplyMode::On,
            no_touch: false,
            started: 0,
            cmd_name: "NULL",
            now_ms: crate::clock::unix_ms(),
            coord: Default::default(),
            multi: None,
            watch: None,
            pushed: false,
            in_script: false,
            error_counted: false,
            is_master: false,
            is_replica: false,
            hop_dirty: Default::default(),
        }
    }

    /// A context with no connection behind it, for work the server starts itself (background
    /// saves, save points): its replies are discarded and it is not in CLIENT LIST. Run a job
    /// on it with [`ConnCtx::run_internal`].
    pub fn internal(worker: Rc<Worker>) -> ConnCtx {
        let id = worker
            .shared
            .next_client_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let client = Rc::new(ClientHandle::new(crate::client::ClientInfo {
            local: true,
            name: "internal".into(),
            ..crate::client::ClientInfo::new(id, worker.id)
        }));
        let out = crate::net::session::Output::new(Rc::new(crate::net::stream::WriteHalf::Null));
        ConnCtx::new(worker, client, out, true)
    }

    /// Runs `job` as if it were command `args` (that command's lock plan and transaction
    /// boundaries, inside a fault boundary), for jobs the server starts itself on an
    /// [`internal`](ConnCtx::internal) context. None when the job panicked (its locks are
    /// released all the same).
    pub(crate) async fn run_internal<R>(
        &mut self,
        args: &[&[u8]],
        job: impl for<'c> FnOnce(&'c mut ConnCtx) -> Pin<Box<dyn Future<Output = R> + 'c>>,
    ) -> Option<R> {
        // (Jobs name declared commands, by their own names whatever rename-command did; an
        // unknown name runs nothing.)
        let entry = registry().lookup_original(args[0])?;
        let plan = coordinator::plan_command(self, entry.spec, args);
        self.coord.begin_command(entry.spec, plan);
        let res = guard::CatchUnwind::new(job(self)).await;
        let w = self.worker.clone();
        self.coord.end_command(&w);
        match res {
            Ok(r) => Some(r),
            Err(fault) => {
                let mut scratch = Reply::new(damselfly_protocol::RespVersion::Resp2);
                internal_error(&w, &mut scratch, entry.static_name, &fault);
                None
            }
        }
    }

    /// Is this command running inside EXEC (blocking commands then answer as on timeout)?
    pub fn in_exec(&self) -> bool {
        self.coord.in_exec()
    }

    /// Is the connection inside MULTI (queueing commands)?
    pub fn in_multi(&self) -> bool {
        self.multi.is_some()
    }

    /// Writes every pending reply, waiting for the socket (a replica's snapshot transfer).
    pub async fn flush_all(&mut self) -> std::io::Result<()> {
        self.output.flush_all(&mut self.reply, &self.worker).await
    }

    /// Writes what the socket takes of the pending replies now, without waiting.
    pub fn try_flush(&mut self) -> std::io::Result<()> {
        self.output.try_flush(&mut self.reply, &self.worker)
    }

    /// Before a command blocks the connection (BLPOP...): send the replies of the commands
    /// before it, as Redis does (what the socket takes now; the rest follows the blocked reply).
    pub fn flush_before_block(&mut self) {
        if self.output.pending(&self.reply) {
            let _ = self.try_flush();
        }
    }

    /// Do all of the current command's keys live on one shard? (Work there is atomic without a
    /// transaction: BLMOVE's wake-up moves the element in one step when it is.)
    pub fn keys_on_one_shard(&self) -> bool {
        self.threads() == 1 || self.coord.plan().single_shard().is_some()
    }

    /// True while the connection is in a state where commands must not be squashed (MULTI
    /// queueing and the like; extended by the transaction commands).
    #[inline]
    pub fn squash_barrier(&self) -> bool {
        // While MULTI is queueing, commands must be queued by `execute`, not run.
        self.multi.is_some()
    }

    #[inline]
    pub fn shared(&self) -> &Shared {
        &self.worker.shared
    }

    #[inline]
    pub fn threads(&self) -> usize {
        self.worker.shared.threads
    }

    /// Replication records of a command run inside EXEC's or a script's transaction: they join
    /// its group.
    fn capture(&mut self, recs: Vec<journal::Record>) {
        if recs.is_empty() {
            return;
        }
        match self.coord.group.as_mut() {
            Some(g) => g.extend(recs),
            None => journal::push_records(recs),
        }
    }

    /// Runs single-key shard handler `f` on shard `target`: inline when it is this thread's and
    /// none of the command's keys is locked there, otherwise by message (waiting there for the
    /// keys), or as a hop of the transaction running the command (EXEC).
    async fn run_on_shard(&mut self, f: ShardFn, target: usize, args: &[&[u8]]) {
        let name = self.cmd_name;
        let w = self.worker.clone();
        let (db, now, ver) = (self.db, self.now_ms, self.reply.ver);
        let client = self.client_id();
        if self.coord.in_transaction() {
            let owned = util::OwnedArgs::new(args);
            let (bytes, recs) = self
                .coord
                .hop(&w, target, false, move |w| {
                    let mut reply = Reply::new(ver);
                    let mut recs = Vec::new();
                    let a = owned.slices();
                    run_shard_cmd(w, name, f, db, now, client, &mut reply, &a, Some(&mut recs));
                    (reply.take(), recs)
                })
                .await;
            self.reply.raw(&bytes);
            self.capture(recs);
            return;
        }
        let plan = self.coord.plan();
        if target == w.id && {
            let t = w.vll();
            t.idle() || t.quick_ok(&plan.locks_for(target), plan.shard_lock())
        } {
            run_shard_cmd(&w, name, f, db, now, client, &mut self.reply, args, None);
            w.serve_blocked();
            return;
        }
        let (locks, sl) = (plan.locks_for(target), plan.shard_lock());
        let owned = util::OwnedArgs::new(args);
        let bytes = w
            .call_deferred::<Vec<u8>, _>(target, move |w, resp| {
                vll::quick(w, locks, sl, move |w| {
                    let mut reply = Reply::new(ver);
                    let a = owned.slices();
                    run_shard_cmd(w, name, f, db, now, client, &mut reply, &a, None);
                    resp.send(w, reply.take());
                })
            })
            .await;
        self.reply.raw(&bytes);
    }
}

/// Runs shard handler `f` on `w`'s shard with a fresh command context, appending its reply to
/// `reply`. The command boundary on the shard side: a panic inside `f` becomes this command's
/// `-ERR internal error` reply (see `engine::guard`), and nothing else is affected.
///
/// When this shard journals, the command's replication records go into the journal now (the
/// shard holds the key: the one rule of docs/design/replication.md), or into `capture` for a
/// transaction that propagates its commands as one group (EXEC, scripts).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn run_shard_cmd(
    w: &Rc<Worker>,
    name: &'static str,
    f: ShardFn,
    db: usize,
    now: u64,
    client: u64,
    reply: &mut Reply,
    args: &[&[u8]],
    capture: Option<&mut Vec<journal::Record>>,
) {
    let mark = reply.len();
    let dirty = journal::mark();
    let r = guard::contain(|| CmdCtx::over(w, db, now, client, &mut *reply, |c| f(c, args)));
    if let Err(fault) = r {
        reply.buf.truncate(mark);
        internal_error(w, reply, name, &fault);
    }
    if journal::here() {
        // The command's propagation form, as its declaration gives it (`name` is the one
        // the registry knows it by).
        let effects = |args: &[&[u8]]| {
            let form = registry()
                .by_original_fullname(name.as_bytes())?
                .spec
                .propagate?;
            let shard = w.shard_mut();
            let d = shard.dbs.get(db)?;
            form(d, args, &reply.buf[mark..])
        };
        if let Some(recs) = journal::take_with(dirty, db, args, effects) {
            match capture {
                Some(into) => into.extend(recs),
                None => journal::push_records(recs),
            }
        }
    }
}

/// Replies, logs and counts a contained internal error of command `name`.
fn internal_error(w: &Worker, reply: &mut Reply, name: &str, fault: &guard::Fault) {
    crate::log_warning!(
        "internal error in command '{name}' on thread {} contained: {}; the client got an \
         error reply and the server keeps serving",
        w.id,
        fault.text
    );
    w.stats().internal_errors += 1;
    reply.error(&format!(
        "ERR internal error in '{name}' command (details are in the server log)"
    ));
}

/// Runs `f` on this thread's shard, synchronously, as a hop of the command's transaction
/// when one may run here now (`None` otherwise).
pub(crate) fn inline_hop<R>(cx: &mut ConnCtx, f: impl FnOnce(&mut CmdCtx<'_>) -> R) -> Option<R> {
    let w = cx.worker.clone();
    if !cx.coord.in_transaction() || !cx.coord.start_inline(&w, w.id) {
        return None;
    }
    let mut scratch = Reply::new(cx.reply.ver);
    let r = CmdCtx::over(&w, cx.db, cx.now_ms, cx.client_id(), &mut scratch, f);
    cx.coord.end_inline(&w, w.id, false);
    Some(r)
}

/// A script's `redis.call` of a single-key command whose key lives on this thread's shard,
/// run synchronously inside the script's transaction (no hop, no future): `execute`'s path for
/// such a command, without its admission checks, which scripts skip (memory, BUSY, reads
/// tracking) or which cannot apply. Returns false, having done nothing, when the command needs
/// anything else (another shard, a coordinator handler, an error `execute` words): then the
/// caller runs it through `execute`.
///
/// `entry` is the command's (its subcommand's), already looked up and checked (arity
/// included) by the script's checks.
pub(crate) fn execute_inline(cx: &mut ConnCtx, entry: &Entry, args: &[&[u8]]) -> bool {
    let spec = entry.spec;
    let Some(f) = spec.shard_fn(args.len()) else {
        return false;
    };
    if cx.multi.is_some() || !cx.coord.in_transaction() {
        return false;
    }
    if refuses_writes(cx, spec) {
        return false;
    }
    let fk = spec.first_key();
    let target = if fk > 0 && (fk as usize) < args.len() {
        shard_of(args[fk as usize], cx.threads())
    } else {
        cx.worker.id
    };
    let w = cx.worker.clone();
    if target != w.id || !cx.coord.start_inline(&w, target) {
        return false;
    }
    cx.cmd_name = entry.static_name;
    let start_len = cx.reply.len();
    let t0 = clock::Ticks::now();
    let client = cx.client_id();
    let mut recs = Vec::new();
    run_shard_cmd(
        &w,
        entry.static_name,
        f,
        cx.db,
        cx.now_ms,
        client,
        &mut cx.reply,
        args,
        Some(&mut recs),
    );
    cx.coord.end_inline(&w, target, false);
    cx.capture(recs);
    let usec = clock::Ticks::to_us(clock::Ticks::now().wrapping_sub(t0));
    record_call(cx, entry, args, start_len, usec);
    true
}

/// What replication refuses now (Redis's `processCommand` and, for scripts,
/// `scriptPrepareForRun`): a write on a read-only replica, a write on a primary without
/// enough good replicas (`min-replicas-to-write`; never on a replica, as Redis's
/// `checkGoodReplicasStatus`), a call that needs fresh data on a replica whose link is down
/// with `replica-serve-stale-data no`. The primary's own stream is never refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplRefusal {
    ReadOnly,
    NoReplicas,
    MasterDown,
}

impl ReplRefusal {
    /// The error a refused command gets.
    pub fn error(self) -> &'static str {
        match self {
            ReplRefusal::ReadOnly => ERR_READONLY,
            ReplRefusal::NoReplicas => ERR_NOREPLICAS,
            ReplRefusal::MasterDown => ERR_MASTERDOWN,
        }
    }
}

/// See [`ReplRefusal`]: `write` for a call that writes, `deny_stale` for one that needs fresh
/// data.
pub fn repl_refusal(cx: &ConnCtx, write: bool, deny_stale: bool) -> Option<ReplRefusal> {
    if cx.is_master {
        return None;
    }
    let replica = crate::engine::role::is_replica();
    let cfg = &cx.worker.shared.config;
    if write && replica && cfg.replica_read_only() {
        return Some(ReplRefusal::ReadOnly);
    }
    if write && !replica && crate::engine::role::too_few_replicas() {
        return Some(ReplRefusal::NoReplicas);
    }
    if deny_stale
        && replica
        && !crate::engine::role::link_is_up()
        && !cfg.replica_serve_stale_data()
    {
        return Some(ReplRefusal::MasterDown);
    }
    None
}

/// Why replication refuses `spec` now, if it does ([`repl_refusal`]); EXEC counts as its
/// queued commands. A script's calls and a transaction's commands were checked as a whole.
pub(crate) fn replication_refusal(cx: &ConnCtx, spec: &CommandSpec) -> Option<&'static str> {
    if cx.in_script || cx.coord.in_exec() {
        return None;
    }
    let queued = |f: &dyn Fn(u32) -> bool| {
        spec.flags & flags::REJECT_EXECABORT != 0
            && cx
                .multi
                .as_ref()
                .is_some_and(|m| m.cmds.iter().any(|(_, s)| f(s.flags)))
    };
    let write = spec.flags & flags::WRITE != 0 || queued(&|f| f & flags::WRITE != 0);
    let deny_stale = spec.flags & flags::STALE == 0 || queued(&|f| f & flags::STALE == 0);
    repl_refusal(cx, write, deny_stale).map(ReplRefusal::error)
}

/// Is `spec` a write refused now that snapshots fail (`stop-writes-on-bgsave-error`: MISCONF)?
#[inline]
fn refuses_writes(cx: &ConnCtx, spec: &CommandSpec) -> bool {
    spec.flags & (flags::WRITE | flags::DENY_ON_DISK_ERROR) != 0
        && cx
            .worker
            .shared
            .persist
            .writes_refused(&cx.worker.shared.config)
}

/// Executes one parsed command, appending its reply to `cx.reply`, in named stages: lookup,
/// access control, admission, queueing (MULTI), CLIENT PAUSE, plan, run, propagate, record
/// (docs/architecture.md, "A command's path").
pub async fn execute(cx: &mut ConnCtx, args: &[&[u8]]) {
    // 1. Lookup: the command, or the subcommand of a container.
    let Some((top, entry)) = lookup(cx, args) else {
        return;
    };
    let spec = entry.spec;
    // 2. Access control: arity, authentication, ACL.
    if !access(cx, entry, args) {
        return;
    }
    // 3. Admission: memory (a rare path behind cheap tests, kept out of this future, boxed,
    // so that the common command's state machine stays small), then what refuses a command
    // now: a busy script, loading, replication, failing snapshots, the connection's kind.
    let maxmemory = cx.worker.shared.config.maxmemory();
    let mut over_memory = false;
    // A script's own commands skip these: it was admitted as a whole (Redis's scripts call
    // commands without processCommand).
    if (maxmemory != 0 || crate::engine::tracking::over_limit()) && !cx.in_script {
        match Box::pin(memory_before_command(cx, spec, maxmemory)).await {
            Some(r) => over_memory = r,
            None => return,
        }
    }
    // What eviction just invalidated (or anything else queued for this connection) goes
    // before this command's reply, as Redis does (never inside a transaction's reply).
    if !cx.coord.in_exec() {
        crate::net::session::drain_pushes(cx);
    }
    if over_memory {
        return refuse(cx, entry, ERR_OOM);
    }
    if !admit(cx, entry) {
        return;
    }
    // 4. Queueing: inside MULTI the command is queued, not run.
    if cx.multi.is_some() && multi::queue(cx, top, entry, args) {
        return;
    }
    // 5. CLIENT PAUSE: a paused command waits here, after its checks (a syntax error answers
    // at once), counted as a blocked client. Commands inside EXEC or a script run with it.
    if crate::engine::pause::maybe_paused()
        && crate::engine::pause::state(crate::clock::unix_ms()).is_some()
        && !cx.is_master
        && !cx.in_script
        && !cx.coord.in_exec()
        && !cx.client.info.borrow().flags.contains('S')
    {
        let writes = pause_writes(cx, spec, args);
        if crate::engine::pause::blocks(writes) {
            crate::engine::pause::wait(writes).await;
            // Redis processes a paused command anew: a failover may have made this server a
            // replica meanwhile (a paused write then gets -READONLY).
            if crate::engine::role::is_replica() {
                if let Some(err) = replication_refusal(cx, spec) {
                    reject(cx, entry.id, err);
                    multi::flag(cx);
                    return;
                }
            }
        }
    }
    let special = cx.client.special.get();
    // A script's reads are tracked as its declared keys, once it ran (scripting/commands.rs).
    if special && !cx.in_script {
        track_reads(cx, spec, args);
    }
    cx.cmd_name = entry.static_name;
    let start_len = cx.reply.len();
    let t0 = clock::Ticks::now();
    cx.started = t0;
    // 6. Plan: the command's locks (scripts plan their own transaction:
    // scripting/commands.rs, declared keys or all).
    let plan = if spec.flags & flags::SCRIPT_CALL != 0 {
        coordinator::LockPlan::default()
    } else {
        coordinator::plan_command(cx, spec, args)
    };
    cx.coord.begin_command(spec, plan);
    if journal::active() {
        cx.hop_dirty
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
    // 7. Run.
    run(cx, entry, args, start_len).await;
    // 8. Propagate: a connection-level command's records (a shard handler's went into the
    // journal on its shard, `run_shard_cmd`).
    let w = cx.worker.clone();
    if journal::active() && matches!(spec.handler, Handler::Conn(_) | Handler::Local(_)) {
        journal_command(cx, spec, args, start_len);
    }
    cx.coord.end_command(&w);
    // 9. Record: statistics, the slow log, MONITOR; then what follows a command.
    let usec = clock::Ticks::to_us(clock::Ticks::now().wrapping_sub(t0));
    record_call(cx, entry, args, start_len, usec);
    if crate::engine::tracking::bcast_active() && !cx.coord.in_exec() {
        // The command's BCAST invalidations go out as one batch per prefix (the messages to
        // the shards follow its hops there), delivered before its reply.
        Box::pin(flush_bcast(cx)).await;
    }
    // CLIENT CACHING yes|no applies to the next command only.
    if special {
        let mut t = cx.client.tracking.borrow_mut();
        if t.caching && entry.fullname != "client|caching" {
            t.caching = false;
        }
    }
}

/// `execute`'s lookup stage: the top-level entry and the one that runs (a subcommand's, or
/// the same). None: an unknown command or subcommand, or a container called bare, answered.
#[inline]
fn lookup(cx: &mut ConnCtx, args: &[&[u8]]) -> Option<(&'static Entry, &'static Entry)> {
    let Some(top) = registry().lookup(args[0]) else {
        unknown_command(cx, args);
        multi::flag(cx);
        return None;
    };
    if top.spec.subcommands.is_empty() {
        return Some((top, top));
    }
    if args.len() < 2 {
        // A container with its own handler (bare COMMAND) runs it; others need a subcommand.
        if !matches!(top.spec.handler, Handler::Container) {
            return Some((top, top));
        }
        arity_error(cx, &top.fullname, top.id);
        multi::flag(cx);
        return None;
    }
    match top.sub(args[1]) {
        Some(e) => Some((top, e)),
        None => {
            let name = top.spec.name.to_ascii_uppercase();
            util::error_parts(
                &mut cx.reply,
                &[
                    b"ERR unknown subcommand '",
                    util::cstr(args[1], 128),
                    b"'. Try ",
                    name.as_bytes(),
                    b" HELP.",
                ],
            );
            multi::flag(cx);
            None
        }
    }
}

/// Answers a command refused before it ran: inside MULTI, a command that aborts the
/// transaction (EXEC, `REJECT_EXECABORT`) gets EXECABORT; others are rejected and flag the
/// transaction being queued.
fn refuse(cx: &mut ConnCtx, entry: &Entry, msg: &str) {
    if entry.spec.flags & flags::REJECT_EXECABORT != 0 {
        multi::exec_abort(cx, entry.id, msg);
        return;
    }
    reject(cx, entry.id, msg);
    multi::flag(cx);
}

/// `execute`'s access stage: arity, authentication, then ACL (Redis's processCommand, and
/// execCommand per queued command). false: refused, answered.
#[inline]
fn access(cx: &mut ConnCtx, entry: &Entry, args: &[&[u8]]) -> bool {
    let spec = entry.spec;
    let argc = args.len() as i32;
    if (spec.arity > 0 && argc != spec.arity) || (spec.arity < 0 && argc < -spec.arity) {
        if spec.flags & flags::REJECT_EXECABORT != 0 {
            let msg = format!("wrong number of arguments for '{}' command", entry.fullname);
            multi::exec_abort(cx, entry.id, &msg);
            return false;
        }
        arity_error(cx, &entry.fullname, entry.id);
        multi::flag(cx);
        return false;
    }
    if !cx.authed && spec.flags & flags::NO_AUTH == 0 && crate::acl::auth_required() {
        refuse(cx, entry, "NOAUTH Authentication required.");
        return false;
    }
    // A script's commands are checked by the script (`scripting::check_call`); our
    // primary's stream has no user (Redis's master client runs anything).
    if !cx.acl.fast_ok() && !cx.in_script && !cx.is_master {
        if let Err(err) = crate::acl::commands::gate(cx, entry, args) {
            let Some(err) = err else { return false };
            if cx.in_exec() || spec.flags & flags::REJECT_EXECABORT == 0 {
                reject(cx, entry.id, &err);
                multi::flag(cx);
            } else {
                multi::exec_abort(cx, entry.id, &err);
            }
            return false;
        }
    }
    true
}

/// `execute`'s admission stage after memory: a script past its time limit, a loading
/// dataset, replication (READONLY, NOREPLICAS, MASTERDOWN), failing snapshots (MISCONF), a
/// replica's own connection, the RESP2 Pub/Sub context. false: refused, answered.
#[inline]
fn admit(cx: &mut ConnCtx, entry: &Entry) -> bool {
    let spec = entry.spec;
    if let Some(busy) = crate::engine::busy::busy() {
        // A script runs past busy-reply-threshold: only what Redis allows then (its own
        // redis.calls run inside its transaction).
        if spec.flags & flags::ALLOW_BUSY == 0 && !cx.in_script {
            refuse(cx, entry, busy);
            return false;
        }
    }
    // A loading dataset refuses what may not run meanwhile; a background (async) load only
    // the `no_async_loading` commands.
    let persist = &cx.worker.shared.persist;
    let relaxed = std::sync::atomic::Ordering::Relaxed;
    if (spec.flags & flags::LOADING == 0 && persist.loading.load(relaxed))
        || (spec.flags & flags::NO_ASYNC_LOADING != 0 && persist.async_loading.load(relaxed))
    {
        reject(cx, entry.id, ERR_LOADING);
        multi::flag(cx);
        return false;
    }
    // Replication's admission checks (Redis's processCommand): made when a command is
    // queued and for EXEC as a whole (with its queued commands' flags), not when EXEC runs
    // the queued commands.
    if crate::engine::role::too_few_replicas() || crate::engine::role::is_replica() {
        if let Some(err) = replication_refusal(cx, spec) {
            refuse(cx, entry, err);
            return false;
        }
    }
    if refuses_writes(cx, spec) {
        reject(cx, entry.id, ERR_MISCONF);
        multi::flag(cx);
        return false;
    }
    // Redis's check: a replica's connection only acknowledges; reading or writing keys there
    // would dodge CLIENT PAUSE, which replicas are exempt from.
    if cx.is_replica && spec.flags & (flags::READONLY | flags::WRITE | flags::MAY_REPLICATE) != 0 {
        cx.cmd_name = entry.static_name;
        reject(cx, entry.id, "ERR Replica can't interact with the keyspace");
        multi::flag(cx);
        return false;
    }
    if cx.client.special.get()
        && !cx.reply.is_resp3()
        && cx.client.subs.borrow().active()
        && spec.flags & flags::PUBSUB_CONTEXT == 0
    {
        // Redis: a RESP2 connection in the Pub/Sub context may only run these.
        reject(cx, entry.id, &format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            entry.fullname
        ));
        multi::flag(cx);
        return false;
    }
    true
}

/// `execute`'s run stage: the handler, on the key's shard (inline or one message) for a
/// single-key command outside a transaction, else as the coordinator on this thread. Each
/// path is a command boundary: a panic ends this command only (see `engine::guard`).
async fn run(cx: &mut ConnCtx, entry: &Entry, args: &[&[u8]], start_len: usize) {
    let spec = entry.spec;
    let target = |cx: &ConnCtx| {
        let fk = spec.first_key();
        if fk > 0 && (fk as usize) < args.len() {
            shard_of(args[fk as usize], cx.threads())
        } else {
            cx.worker.id
        }
    };
    let one_shard = if cx.coord.in_transaction() {
        None
    } else {
        spec.shard_fn(args.len())
    };
    // The common case: a single-key command (or a one-key call of a multi-key command)
    // outside a transaction. Its handler runs inside `run_shard_cmd`, its own boundary.
    if let Some(f) = one_shard {
        let t = target(cx);
        cx.run_on_shard(f, t, args).await;
        return;
    }
    let run = guard::CatchUnwind::new(async {
        match spec.handler {
            Handler::Shard(f) => {
                let t = target(cx);
                cx.run_on_shard(f, t, args).await;
            }
            Handler::Local(f) => f(cx, args),
            Handler::Conn(f) => f(cx, args).await,
            Handler::Container => {}
        }
    })
    .await;
    if let Err(fault) = run {
        cx.reply.buf.truncate(start_len);
        let w = cx.worker.clone();
        internal_error(&w, &mut cx.reply, entry.static_name, &fault);
    }
}

/// Takes every shard's pending BCAST batches and delivers them (kept out of `execute`'s future:
/// only BCAST tracking needs it).
pub(crate) async fn flush_bcast(cx: &ConnCtx) {
    let w = cx.worker.clone();
    let batches = w.broadcast(|_| crate::engine::tracking::take_bcast()).await;
    let batches: Vec<_> = batches.into_iter().flatten().collect();
    if !batches.is_empty() {
        crate::pubsub::tracking::deliver_batches(&w, batches).await;
    }
}

/// Does this call write, as CLIENT PAUSE WRITE judges it (Redis: write or may-replicate
/// flags; EXEC by its queued commands; scripts by their own flags)?
fn pause_writes(cx: &ConnCtx, spec: &CommandSpec, args: &[&[u8]]) -> bool {
    let one = |s: &CommandSpec, a: &[&[u8]]| {
        if let Some(writes) = s.writes_by {
            return writes(s, a);
        }
        s.flags & (flags::WRITE | flags::MAY_REPLICATE) != 0
    };
    if spec.flags & flags::REJECT_EXECABORT != 0 {
        if let Some(m) = cx.multi.as_ref() {
            return m.cmds.iter().any(|(a, s)| one(s, &a.slices()));
        }
    }
    one(spec, args)
}

/// The replication record of a coordinator command (shard commands leave theirs on their
/// shard: `run_shard_cmd`): its arguments, when it succeeded. It joins EXEC's or a script's
/// group, or enters the journal now while the command's own transaction still holds its locks
/// (the coordinator kept them: `Coord::journaled`), or now for a command without keys.
fn journal_command(cx: &mut ConnCtx, spec: &CommandSpec, args: &[&[u8]], start_len: usize) {
    if spec.flags & (flags::WRITE | flags::MAY_REPLICATE) == 0 || spec.flags & flags::PROP_SELF != 0
    {
        return;
    }
    if cx.reply.len() > start_len && cx.reply.buf[start_len] == b'-' {
        return;
    }
    // Blocking moves are replicated as the non-blocking move they became (Redis's rewrite).
    let resp = match spec.name {
        "blmove" if args.len() >= 5 => {
            journal::encode(&[b"LMOVE", args[1], args[2], args[3], args[4]])
        }
        "brpoplpush" if args.len() >= 3 => journal::encode(&[b"RPOPLPUSH", args[1], args[2]]),
        _ => journal::encode(args),
    };
    let plan = cx.coord.plan();
    let keyless = plan.keys.is_empty() && plan.global.is_none();
    // A command with keys is replicated when it changed something (DEL of missing keys is
    // not); a keyless one (PUBLISH, FUNCTION LOAD) when it succeeded.
    if !keyless && !cx.hop_dirty.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let rec = journal::Record { db: cx.db, resp };
    if let Some(g) = cx.coord.group.as_mut() {
        g.push(rec);
        return;
    }
    // (A blocking move served after it waited ran in a later round: its record follows.)
    if cx.coord.journaled() || keyless || spec.flags & flags::BLOCKING != 0 {
        journal::push(journal::Item::One(rec));
    }
}

/// Client-side caching: a tracking connection's read command registers its keys on their
/// shards before it runs (default mode; OPTIN only after CLIENT CACHING yes, OPTOUT unless
/// CLIENT CACHING no), as Redis's `trackingRememberKeys`.
fn track_reads(cx: &ConnCtx, spec: &CommandSpec, args: &[&[u8]]) {
    // EVAL_RO/FCALL_RO (read-only, yet holding every shard) track their declared keys only
    // when the script reads (scripting/commands.rs), not as a read command of their own.
    if spec.flags & flags::READONLY == 0
        || spec.flags & (flags::PUBSUB | flags::TX_GLOBAL_WRITE) != 0
    {
        return;
    }
    let t = cx.client.tracking.borrow();
    if !t.on || t.bcast || (t.optin && !t.caching) || (t.optout && t.caching) {
        return;
    }
    drop(t);
    track_keys(cx, spec, args);
}

/// Registers the keys `spec` finds in `args` for this tracking connection (its reads, or a
/// script's declared keys when the script read something, as Redis's scripts do).
pub(crate) fn track_keys(cx: &ConnCtx, spec: &CommandSpec, args: &[&[u8]]) {
    let keys = spec
        .keys
        .positions(args)
        .into_iter()
        .filter_map(|i| args.get(i).map(|k| k.to_vec()));
    crate::pubsub::tracking::remember(&cx.worker, cx.client_id(), keys);
}

/// Does this connection track reads now (default mode, OPTIN after CACHING yes, OPTOUT unless
/// CACHING no)?
pub(crate) fn tracks_reads(cx: &ConnCtx) -> bool {
    let t = cx.client.tracking.borrow();
    let skipped = t.bcast || (t.optin && !t.caching) || (t.optout && t.caching);
    t.on && !skipped
}

/// Command statistics, error statistics and the slow log for one executed command whose reply
/// starts at `start_len` in `cx.reply`.
pub(crate) fn record_call(
    cx: &mut ConnCtx,
    entry: &Entry,
    args: &[&[u8]],
    start_len: usize,
    usec: u64,
) {
    let failed = cx.reply.len() > start_len && cx.reply.buf[start_len] == b'-';
    // A script's error that a redis.call inside it counted already (Redis's
    // ERR_REPLY_FLAG_NO_STATS_UPDATE) counts as the script's failed call only.
    let counted = std::mem::take(&mut cx.error_counted);
    if !failed && entry.spec.flags & flags::WRITE != 0 {
        cx.worker.shared.persist.count_write(cx.worker.id);
    }
    let mut st = cx.worker.stats();
    st.commands_processed += 1;
    let cs = st.cmd_mut(entry.id);
    cs.calls += 1;
    cs.usec += usec;
    if failed {
        cs.failed += 1;
    }
    if crate::latency::tracking() {
        st.hist_mut(entry.id).record_ns(usec.saturating_mul(1000));
    }
    // Redis's "command" / "fast-command" latency events (a blocking command's wait is not
    // the server's latency).
    if usec >= 1000 && entry.spec.flags & flags::BLOCKING == 0 {
        let event = if entry.spec.flags & flags::FAST != 0 {
            "fast-command"
        } else {
            "command"
        };
        crate::latency::add_sample_if_needed(event, usec / 1000);
    }
    if failed && !counted {
        let code = error_code(&cx.reply.buf[start_len..]);
        *st.errors.entry(code).or_insert(0) += 1;
        st.total_error_replies += 1;
    }
    if crate::pubsub::monitor::active()
        && entry.spec.flags & (flags::SKIP_MONITOR | flags::ADMIN) == 0
    {
        feed_monitors(cx, args);
    }
    let slower = cx.worker.shared.config.slowlog_slower_than();
    if slower >= 0 && usec >= slower as u64 && entry.spec.flags & flags::SKIP_SLOWLOG == 0 {
        drop(st);
        slowlog::record(cx, args, usec);
    }
}

/// Shows `args`, run by this connection now, to the MONITOR clients; a script's commands show
/// as Redis's do, `[db lua]`.
pub(crate) fn feed_monitors(cx: &ConnCtx, args: &[&[u8]]) {
    let addr = if cx.in_script {
        "lua".to_string()
    } else {
        cx.client.info.borrow().addr.clone()
    };
    crate::pubsub::monitor::feed(&cx.worker, cx.db, &addr, args, crate::clock::unix_us());
}

fn error_code(buf: &[u8]) -> String {
    let end = buf
        .iter()
        .position(|&c| c == b' ' || c == b'\r')
        .unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[1..end.max(1)]).into_owned()
}

/// Counts a command refused before it ran: its `rejected_calls` (when it is known) and the
/// error reply in the error statistics.
/// Answers a command refused before it ran (Redis's `rejectCommand`): the error, counted in
/// the command's rejected calls and in the error statistics under its code.
fn reject(cx: &mut ConnCtx, id: usize, msg: &str) {
    cx.reply.error(msg);
    let code = msg.split(' ').next().unwrap_or("ERR");
    count_rejected(cx, Some(id), code);
}

pub(crate) fn count_rejected(cx: &ConnCtx, id: Option<usize>, code: &str) {
    let mut st = cx.worker.stats();
    if let Some(id) = id {
        st.cmd_mut(id).rejected += 1;
    }
    *st.errors.entry(code.to_string()).or_insert(0) += 1;
    st.total_error_replies += 1;
}

fn arity_error(cx: &mut ConnCtx, fullname: &str, id: usize) {
    cx.reply.error(&format!(
        "ERR wrong number of arguments for '{fullname}' command"
    ));
    count_rejected(cx, Some(id), "ERR");
}

/// Redis's text byte for byte: the name as `%.128s`, then `'arg' ` pieces while fewer than 128
/// bytes of them were written, each cut to the room left (and at a NUL).
fn unknown_command(cx: &mut ConnCtx, args: &[&[u8]]) {
    let mut rest: Vec<u8> = Vec::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push(b'\'');
        rest.extend_from_slice(util::cstr(a, room));
        rest.extend_from_slice(b"' ");
    }
    util::error_parts(
        &mut cx.reply,
        &[
            b"ERR unknown command '",
            util::cstr(args[0], 128),
            b"', with args beginning with: ",
            &rest,
        ],
    );
    count_rejected(cx, None, "ERR");
}
