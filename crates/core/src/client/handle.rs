//! Per-connection client metadata, kept in the registry of the thread that owns the connection.
//! CLIENT LIST / KILL broadcast to every thread and each answers for its own clients.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use super::notify::LocalNotify;

use super::limits;

/// A connection's own structures, counted in `tot-mem` besides its buffers.
/// (The command context's size is the network layer's to tell: [`set_context_size`].)
fn conn_overhead() -> usize {
    std::mem::size_of::<ClientHandle>()
        + CONTEXT_SIZE.load(std::sync::atomic::Ordering::Relaxed)
        + std::mem::size_of::<damselfly_protocol::Parser>()
}

static CONTEXT_SIZE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The size of the state a connection's commands run with (`commands::ConnCtx`), counted in
/// every client's `tot-mem`: set once at start-up by the layer that knows it.
pub fn set_context_size(bytes: usize) {
    CONTEXT_SIZE.store(bytes, std::sync::atomic::Ordering::Relaxed);
}

#[derive(Clone, Debug)]
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    /// Connected over loopback or a unix socket (`enable-debug-command local`).
    pub local: bool,
    pub fd: i32,
    pub name: String,
    pub lib_name: String,
    pub lib_ver: String,
    pub db: usize,
    pub created: Instant,
    pub last_interaction: Instant,
    pub last_cmd: &'static str,
    pub resp: u8,
    pub multi: i64,
    /// Subscribed channels, patterns and shard channels (`sub`, `psub`, `ssub`).
    pub sub: (usize, usize, usize),
    /// CLIENT TRACKING's redirection (`redir`, -1: none).
    pub redir: i64,
    /// What the connection's buffers and transaction state hold (CLIENT LIST's memory fields).
    pub mem: ClientMem,
    pub flags: String,
    pub user: String,
    /// Shard thread that owns the connection (extra CLIENT LIST field, like Dragonfly's).
    pub tid: usize,
}

impl ClientInfo {
    /// A fresh client's fields (db 0, RESP2, user default); callers set the address fields.
    pub fn new(id: u64, tid: usize) -> ClientInfo {
        let now = Instant::now();
        ClientInfo {
            id,
            addr: String::new(),
            laddr: String::new(),
            local: false,
            fd: -1,
            name: String::new(),
            lib_name: String::new(),
            lib_ver: String::new(),
            db: 0,
            created: now,
            last_interaction: now,
            last_cmd: "NULL",
            resp: 2,
            multi: -1,
            sub: (0, 0, 0),
            redir: -1,
            mem: ClientMem::default(),
            flags: String::new(),
            user: "default".into(),
            tid,
        }
    }

    /// Sets or clears one of CLIENT LIST's `flags` letters.
    pub fn set_flag(&mut self, flag: char, on: bool) {
        if on {
            if !self.flags.contains(flag) {
                self.flags.push(flag);
            }
        } else if self.flags.contains(flag) {
            self.flags.retain(|c| c != flag);
        }
    }

    /// One line of CLIENT LIST / CLIENT INFO in Redis 7's format. `obl`/`oll`: the unwritten
    /// replies as Redis would hold them, the first 16 KiB in its fixed buffer and the rest in
    /// reply blocks.
    pub fn line(&self) -> String {
        let now = Instant::now();
        let m = &self.mem;
        let omem = m.omem();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs=16384 rbp=0 obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={} tid={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            self.name,
            now.duration_since(self.created).as_secs(),
            now.duration_since(self.last_interaction).as_secs(),
            if self.flags.is_empty() { "N" } else { &self.flags },
            self.db,
            self.sub.0,
            self.sub.1,
            self.sub.2,
            self.multi,
            m.qbuf,
            m.qbuf_free,
            m.argv_mem,
            m.multi_mem,
            m.unwritten.min(limits::STATIC_REPLY_BUF),
            limits::reply_blocks(m.unwritten),
            omem,
            m.tot(),
            self.last_cmd,
            self.user,
            self.redir,
            self.resp,
            self.lib_name,
            self.lib_ver,
            self.tid,
        )
    }
}

/// A connection's CLIENT TRACKING settings (Redis's CLIENT_TRACKING_* flags).
#[derive(Default, Debug, Clone)]
pub struct Tracking {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING yes|no given for the next command (OPTIN / OPTOUT).
    pub caching: bool,
    /// REDIRECT: the client id and the thread it lives on.
    pub redirect: Option<(u64, usize)>,
    /// The redirection's client went away (`tracking-redir-broken` was sent).
    pub broken: bool,
    pub prefixes: Vec<Box<[u8]>>,
}

impl Tracking {
    /// CLIENT GETREDIR / TRACKINGINFO's `redirect`: -1 when tracking is off, 0 without a
    /// redirection.
    pub fn redirect_id(&self) -> i64 {
        match (self.on, self.redirect) {
            (false, _) => -1,
            (true, Some((id, _))) => id as i64,
            (true, None) => 0,
        }
    }
}

/// Channel names, hashed with xxh3: every delivery checks the subscriber's set (SipHash was a
/// tenth of a fan-out profile).
pub type NameSet = std::collections::HashSet<Box<[u8]>, xxhash_rust::xxh3::Xxh3Builder>;

/// A connection's Pub/Sub subscriptions (Redis's `pubsub_channels`, `pubsub_patterns`,
/// `pubsubshard_channels`).
#[derive(Default, Debug)]
pub struct Subscriptions {
    pub channels: NameSet,
    /// In subscription order, as Redis's list (PUNSUBSCRIBE without arguments replies in it).
    pub patterns: Vec<Box<[u8]>>,
    pub shard: NameSet,
    /// Bytes the names hold here and in every thread's subscription table (client eviction).
    pub mem: usize,
    /// Unsubscriptions still being applied to the threads' replicas. Only then can a message
    /// routed by a stale replica arrive for a name this connection left (a thread's delivery
    /// reaches us before its acknowledgement of the removal), so only then does a delivery
    /// check the sets.
    pub leaving: u32,
}

impl Subscriptions {
    /// Redis's CLIENT_PUBSUB flag: subscribed to anything (the `pubsub` output buffer class,
    /// and in RESP2 the restricted command set).
    pub fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }

    /// What SUBSCRIBE-family replies count: channels and patterns, or shard channels.
    pub fn count(&self, shard: bool) -> usize {
        if shard {
            self.shard.len()
        } else {
            self.channels.len() + self.patterns.len()
        }
    }

    /// Every subscription, emptying the set (disconnect, RESET).
    pub fn take_all(&mut self) -> Vec<(super::push::Kind, Box<[u8]>)> {
        use super::push::Kind;
        let mut all: Vec<(Kind, Box<[u8]>)> = Vec::new();
        all.extend(self.channels.drain().map(|c| (Kind::Channel, c)));
        all.extend(self.patterns.drain(..).map(|p| (Kind::Pattern, p)));
        all.extend(self.shard.drain().map(|c| (Kind::Shard, c)));
        self.mem = 0;
        all
    }
}

/// A connection's memory as CLIENT LIST shows it and client eviction (`maxmemory-clients`)
/// counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientMem {
    /// Query buffer: bytes received and not yet executed (at a command's execution, that
    /// command included, as Redis shows it), and the buffer's free capacity. While a big
    /// argument (32 KiB or more) is being received, `qbuf` starts at its payload and the bytes
    /// of the command before it are `argv_mem`, as in Redis, which moves them out of its query
    /// buffer into the argument vector.
    pub qbuf: usize,
    pub qbuf_free: usize,
    pub argv_mem: usize,
    /// Reply bytes not yet written to the socket, and the reply buffer's capacity.
    pub unwritten: usize,
    pub reply_cap: usize,
    /// Commands queued by MULTI (`multi-mem`), keys watched by WATCH, Pub/Sub subscriptions.
    pub multi_mem: usize,
    pub watch_mem: usize,
    pub pubsub_mem: usize,
}

impl ClientMem {
    /// Output buffer memory as Redis counts it (`omem`, what the output buffer limits compare
    /// with): see `limits::output_memory`.
    pub fn omem(&self) -> usize {
        limits::output_memory(self.unwritten)
    }

    /// Everything the connection holds (`tot-mem`): query buffer, reply buffer (at least the
    /// 16 KiB Redis's fixed reply buffer takes), transaction state and the per-connection
    /// structures.
    pub fn tot(&self) -> usize {
        self.qbuf
            + self.qbuf_free
            + self.argv_mem
            + self
                .reply_cap
                .max(self.unwritten)
                .max(limits::STATIC_REPLY_BUF)
            + self.multi_mem
            + self.watch_mem
            + self.pubsub_mem
            + conn_overhead()
    }
}

/// Shared between a connection task and its thread's registry.
pub struct ClientHandle {
    pub info: RefCell<ClientInfo>,
    /// The client id (`info.id`, readable without borrowing `info`).
    pub id: u64,
    /// Set once the connection subscribes, tracks or monitors (and never cleared): only such
    /// connections pay the per-command checks those features need (`commands::execute`).
    pub special: Cell<bool>,
    /// The owning thread (`info.tid`, readable without borrowing `info`).
    pub tid: usize,
    /// Set by CLIENT KILL, client eviction (or shutdown); the connection closes at its next
    /// check, and CLIENT LIST no longer shows it.
    pub killed: Cell<bool>,
    /// CLIENT NO-EVICT: never chosen by client eviction (its memory still counts).
    pub no_evict: Cell<bool>,
    /// The memory this connection last added to its thread's client total (`client_evict`).
    pub counted: Cell<usize>,
    /// Set by the client cron: the connection should resize its read buffer (to at least this
    /// many bytes) when it is next woken (`wake`).
    pub resize_qbuf: Cell<Option<usize>>,
    /// The largest query buffer length seen since the client cron last looked (Redis's
    /// `querybuf_peak`).
    pub qbuf_peak: Cell<usize>,
    /// Pub/Sub: what the connection is subscribed to, and messages waiting to be sent to it
    /// (queued by the publisher's delivery on this thread; the connection sends them when
    /// woken).
    pub subs: RefCell<Subscriptions>,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: Cell<bool>,
    /// QUIT: closing once its reply is written.
    pub closing: Cell<bool>,
    /// Queued pushes wait (a diskless replica's stream until its first `REPLCONF ACK`: after
    /// the `$EOF:` snapshot it cannot tell stream bytes from the end mark if both arrive in
    /// one read). Cleared with a wake-up.
    pub hold_pushes: Cell<bool>,
    /// CLIENT TRACKING state (client-side caching).
    pub tracking: RefCell<Tracking>,
    pub pushes: RefCell<std::collections::VecDeque<super::push::Delivery>>,
    /// Replication stream bytes queued in `pushes` (a replica waiting for its snapshot, or
    /// held until its first ACK), and the output limit's state for them: they are the
    /// replica's output buffer until written (`replication::deliver`).
    pub repl_queued: Cell<usize>,
    pub repl_obuf: RefCell<super::limits::ObufState>,
    /// Wakes the connection out of a blocking read when it is killed.
    pub wake: LocalNotify,
}

impl ClientHandle {
    /// Queues something the connection is to send between its commands (a Pub/Sub message, a
    /// MONITOR line, an invalidation) and wakes it; a connection with messages already queued
    /// has been woken.
    pub fn push(&self, d: super::push::Delivery) {
        let mut q = self.pushes.borrow_mut();
        let was_empty = q.is_empty();
        q.push_back(d);
        drop(q);
        if was_empty {
            self.wake.notify_one();
        }
    }

    pub fn new(info: ClientInfo) -> ClientHandle {
        ClientHandle {
            id: info.id,
            special: Cell::new(false),
            tid: info.tid,
            info: RefCell::new(info),
            killed: Cell::new(false),
            no_evict: Cell::new(false),
            counted: Cell::new(0),
            resize_qbuf: Cell::new(None),
            qbuf_peak: Cell::new(0),
            subs: RefCell::new(Subscriptions::default()),
            monitor: Cell::new(false),
            closing: Cell::new(false),
            hold_pushes: Cell::new(false),
            tracking: RefCell::new(Tracking::default()),
            pushes: RefCell::new(std::collections::VecDeque::new()),
            repl_queued: Cell::new(0),
            repl_obuf: RefCell::new(Default::default()),
            wake: LocalNotify::new(),
        }
    }
}

thread_local! {
    /// The connections accepted onto this thread (CLIENT LIST/KILL and INFO visit every
    /// thread's registry). It belongs to the network layer, not to the shard: a shard's worker
    /// never looks at connections.
    static REGISTRY: RefCell<BTreeMap<u64, Rc<ClientHandle>>> = const { RefCell::new(BTreeMap::new()) };
}

/// Adds a connection to this thread's registry.
pub fn register(h: Rc<ClientHandle>) {
    let id = h.id;
    REGISTRY.with(|r| r.borrow_mut().insert(id, h));
}

/// Removes connection `id` from this thread's registry (tolerates being called while the
/// registry is borrowed, as when a connection task is dropped during a visit).
pub fn unregister(id: u64) {
    REGISTRY.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            if let Some(h) = r.remove(&id) {
                super::evict::account(&h, 0);
            }
        }
    });
}

/// Connections on this thread that are clients, not replicas (INFO's `connected_clients`:
/// Redis counts its replicas apart, in `connected_slaves`).
pub fn local_clients() -> usize {
    REGISTRY.with(|r| {
        r.borrow()
            .values()
            .filter(|h| !h.info.borrow().flags.contains('S'))
            .count()
    })
}

/// Runs `f` with a lookup of this thread's connections by id (one registry borrow for many
/// lookups: a message's deliveries to every subscriber on this thread).
pub fn with_lookup<R>(f: impl FnOnce(&dyn Fn(u64) -> Option<Rc<ClientHandle>>) -> R) -> R {
    REGISTRY.with(|r| {
        let r = r.borrow();
        f(&|id| r.get(&id).cloned())
    })
}

/// Runs `f` on this thread's connection `id`, if it is still here.
pub fn with_local(id: u64, f: impl FnOnce(&ClientHandle)) {
    REGISTRY.with(|r| {
        if let Some(h) = r.borrow().get(&id) {
            f(h);
        }
    });
}

/// Visits this thread's connections in id order.
pub fn for_each_local(mut f: impl FnMut(u64, &ClientHandle)) {
    REGISTRY.with(|r| {
        for (id, h) in r.borrow().iter() {
            f(*id, h);
        }
    });
}
