//! The counters memcached's `stats` reports, kept per thread (shard steps count where they
//! run, connections where they live) and summed over threads when a client asks.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// One thread's counters (memcached's `thread_stats` names).
#[derive(Clone, Copy, Debug, Default)]
pub struct McStats {
    pub cmd_get: u64,
    pub get_hits: u64,
    pub get_misses: u64,
    pub get_expired: u64,
    pub get_flushed: u64,
    pub cmd_set: u64,
    pub cmd_flush: u64,
    pub cmd_touch: u64,
    pub cmd_meta: u64,
    pub touch_hits: u64,
    pub touch_misses: u64,
    pub delete_hits: u64,
    pub delete_misses: u64,
    pub incr_hits: u64,
    pub incr_misses: u64,
    pub decr_hits: u64,
    pub decr_misses: u64,
    pub cas_hits: u64,
    pub cas_misses: u64,
    pub cas_badval: u64,
    pub total_items: u64,
    pub store_too_large: u64,
    pub store_no_memory: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl McStats {
    pub fn add(&mut self, o: &McStats) {
        macro_rules! sum {
            ($($f:ident),*) => { $(self.$f += o.$f;)* };
        }
        sum!(
            cmd_get,
            get_hits,
            get_misses,
            get_expired,
            get_flushed,
            cmd_set,
            cmd_flush,
            cmd_touch,
            cmd_meta,
            touch_hits,
            touch_misses,
            delete_hits,
            delete_misses,
            incr_hits,
            incr_misses,
            decr_hits,
            decr_misses,
            cas_hits,
            cas_misses,
            cas_badval,
            total_items,
            store_too_large,
            store_no_memory,
            bytes_read,
            bytes_written
        );
    }
}

thread_local! {
    static STATS: RefCell<McStats> = RefCell::new(McStats::default());
}

/// Updates this thread's counters.
#[inline]
pub fn count(f: impl FnOnce(&mut McStats)) {
    STATS.with(|s| f(&mut s.borrow_mut()));
}

/// This thread's counters.
pub fn snapshot() -> McStats {
    STATS.with(|s| *s.borrow())
}

/// Resets this thread's counters (`stats reset`).
pub fn reset() {
    STATS.with(|s| *s.borrow_mut() = McStats::default());
}

/// Open memcache connections and connections ever accepted (process-wide).
pub static CURR_CONNECTIONS: AtomicU64 = AtomicU64::new(0);
pub static TOTAL_CONNECTIONS: AtomicU64 = AtomicU64::new(0);

pub fn connections() -> (u64, u64) {
    (
        CURR_CONNECTIONS.load(Ordering::Relaxed),
        TOTAL_CONNECTIONS.load(Ordering::Relaxed),
    )
}

/// The `stats [group]` reply: memcached's general statistics (the fields monitoring tools
/// read), `settings`, `items`/`slabs` as far as they mean something here, `reset`.
pub async fn render(cx: &mut crate::commands::ConnCtx, args: &[&[u8]]) -> Vec<u8> {
    use std::fmt::Write;
    let mut o = String::new();
    let shared = cx.worker.shared.clone();
    let cfg = &shared.config;
    let threads = shared.threads;
    let maxbytes = cfg.maxmemory();
    let group = args.first().copied().unwrap_or(b"");
    macro_rules! stat {
        ($($t:tt)*) => {{
            o.push_str("STAT ");
            let _ = write!(o, $($t)*);
            o.push_str("\r\n");
        }};
    }
    match group {
        b"" => {
            let per: Vec<(McStats, usize)> = cx
                .worker
                .broadcast(|w| {
                    let items = w.try_shard().and_then(|s| s.dbs.first().map(|d| d.len()));
                    (snapshot(), items.unwrap_or(0))
                })
                .await;
            let mut t = McStats::default();
            let mut items = 0usize;
            for (s, n) in &per {
                t.add(s);
                items += n;
            }
            let (curr, total) = connections();
            let uptime = shared.started.elapsed().as_secs();
            let now = crate::clock::unix_ms() / 1000;
            let (user, sys) = rusage();
            stat!("pid {}", std::process::id());
            stat!("uptime {uptime}");
            stat!("time {now}");
            stat!("version {}", super::session::VERSION);
            stat!("libevent damselfly");
            stat!("pointer_size {}", usize::BITS);
            stat!("rusage_user {user:.6}");
            stat!("rusage_system {sys:.6}");
            stat!("max_connections {}", cfg.maxclients());
            stat!("curr_connections {curr}");
            stat!("total_connections {total}");
            stat!(
                "rejected_connections {}",
                shared.rejected_connections.load(Ordering::Relaxed)
            );
            stat!("connection_structures {curr}");
            stat!("cmd_get {}", t.cmd_get);
            stat!("cmd_set {}", t.cmd_set);
            stat!("cmd_flush {}", t.cmd_flush);
            stat!("cmd_touch {}", t.cmd_touch);
            stat!("cmd_meta {}", t.cmd_meta);
            stat!("get_hits {}", t.get_hits);
            stat!("get_misses {}", t.get_misses);
            stat!("get_expired {}", t.get_expired);
            stat!("get_flushed {}", t.get_flushed);
            stat!("delete_misses {}", t.delete_misses);
            stat!("delete_hits {}", t.delete_hits);
            stat!("incr_misses {}", t.incr_misses);
            stat!("incr_hits {}", t.incr_hits);
            stat!("decr_misses {}", t.decr_misses);
            stat!("decr_hits {}", t.decr_hits);
            stat!("cas_misses {}", t.cas_misses);
            stat!("cas_hits {}", t.cas_hits);
            stat!("cas_badval {}", t.cas_badval);
            stat!("touch_hits {}", t.touch_hits);
            stat!("touch_misses {}", t.touch_misses);
            stat!("store_too_large {}", t.store_too_large);
            stat!("store_no_memory {}", t.store_no_memory);
            stat!("auth_cmds 0");
            stat!("auth_errors 0");
            stat!("bytes_read {}", t.bytes_read);
            stat!("bytes_written {}", t.bytes_written);
            stat!("limit_maxbytes {maxbytes}");
            stat!("accepting_conns 1");
            stat!("threads {threads}");
            stat!("conn_yields 0");
            stat!("bytes {}", crate::engine::memory::used());
            stat!("curr_items {items}");
            stat!("total_items {}", t.total_items);
            stat!("evictions {}", crate::engine::evict::evicted_keys());
            stat!("reclaimed 0");
        }
        b"settings" => {
            stat!("maxbytes {maxbytes}");
            stat!("maxconns {}", cfg.maxclients());
            stat!("tcpport {}", cfg.memcached_port());
            stat!("udpport 0");
            stat!(
                "evictions {}",
                if crate::engine::evict::evicts() {
                    "on"
                } else {
                    "off"
                }
            );
            stat!("num_threads {threads}");
            stat!("cas_enabled yes");
            stat!("item_size_max {}", cfg.memcached_max_item_size());
            stat!("binding_protocol ascii");
            stat!("meta_response_old no");
        }
        b"items" | b"slabs" | b"sizes" | b"conns" => {}
        b"reset" => {
            cx.worker.broadcast(|_| reset()).await;
            return b"RESET\r\n".to_vec();
        }
        _ => return b"ERROR\r\n".to_vec(),
    }
    o.push_str("END\r\n");
    o.into_bytes()
}

/// CPU seconds (user, system) of the process.
fn rusage() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}
