//! Per-connection client metadata, kept in the registry of the thread that owns the connection.
//! CLIENT LIST / KILL broadcast to every thread and each answers for its own clients.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Instant;

use tokio::sync::Notify;

use super::limits;

/// A connection's own structures, counted in `tot-mem` besides its buffers.
const CONN_OVERHEAD: usize = std::mem::size_of::<ClientHandle>()
    + std::mem::size_of::<crate::commands::ConnCtx>()
    + std::mem::size_of::<damselfly_protocol::Parser>();

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
    /// Query buffer: bytes received and not yet executed (at a command's execution, that
    /// command included, as Redis shows it), and the buffer's free capacity.
    pub qbuf: usize,
    pub qbuf_free: usize,
    /// Reply bytes not yet written to the socket, and the reply buffer's capacity.
    pub unwritten: usize,
    pub reply_cap: usize,
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
            qbuf: 0,
            qbuf_free: 0,
            unwritten: 0,
            reply_cap: 0,
            flags: String::new(),
            user: "default".into(),
            tid,
        }
    }

    /// Output buffer memory as Redis counts it (`omem`, what the output buffer limits compare
    /// with): see `limits::output_memory`.
    pub fn omem(&self) -> usize {
        limits::output_memory(self.unwritten)
    }

    /// Everything the connection holds (`tot-mem`): query buffer, reply buffer (at least the
    /// 16 KiB Redis's fixed reply buffer takes) and the per-connection structures.
    pub fn tot_mem(&self) -> usize {
        self.qbuf
            + self.qbuf_free
            + self
                .reply_cap
                .max(self.unwritten)
                .max(limits::STATIC_REPLY_BUF)
            + CONN_OVERHEAD
    }

    /// One line of CLIENT LIST / CLIENT INFO in Redis 7's format. `obl`/`oll`: the unwritten
    /// replies as Redis would hold them, the first 16 KiB in its fixed buffer and the rest in
    /// reply blocks.
    pub fn line(&self) -> String {
        let now = Instant::now();
        let omem = self.omem();
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={} tid={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            self.name,
            now.duration_since(self.created).as_secs(),
            now.duration_since(self.last_interaction).as_secs(),
            if self.flags.is_empty() { "N" } else { &self.flags },
            self.db,
            self.multi,
            self.qbuf,
            self.qbuf_free,
            self.unwritten.min(limits::STATIC_REPLY_BUF),
            limits::reply_blocks(self.unwritten),
            omem,
            self.tot_mem(),
            self.last_cmd,
            self.user,
            self.resp,
            self.lib_name,
            self.lib_ver,
            self.tid,
        )
    }
}

/// Shared between a connection task and its thread's registry.
pub struct ClientHandle {
    pub info: RefCell<ClientInfo>,
    /// Set by CLIENT KILL (or shutdown); the connection closes at its next check.
    pub killed: Cell<bool>,
    /// Wakes the connection out of a blocking read when it is killed.
    pub wake: Notify,
}

thread_local! {
    /// The connections accepted onto this thread (CLIENT LIST/KILL and INFO visit every
    /// thread's registry). It belongs to the network layer, not to the shard: a shard's worker
    /// never looks at connections.
    static REGISTRY: RefCell<BTreeMap<u64, Rc<ClientHandle>>> = const { RefCell::new(BTreeMap::new()) };
}

/// Adds a connection to this thread's registry.
pub fn register(h: Rc<ClientHandle>) {
    let id = h.info.borrow().id;
    REGISTRY.with(|r| r.borrow_mut().insert(id, h));
}

/// Removes connection `id` from this thread's registry (tolerates being called while the
/// registry is borrowed, as when a connection task is dropped during a visit).
pub fn unregister(id: u64) {
    REGISTRY.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            r.remove(&id);
        }
    });
}

/// Connections on this thread.
pub fn local_count() -> usize {
    REGISTRY.with(|r| r.borrow().len())
}

/// Visits this thread's connections in id order.
pub fn for_each_local(mut f: impl FnMut(u64, &ClientHandle)) {
    REGISTRY.with(|r| {
        for (id, h) in r.borrow().iter() {
            f(*id, h);
        }
    });
}
