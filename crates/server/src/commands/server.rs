//! Server commands: INFO CONFIG COMMAND DEBUG MEMORY SLOWLOG ... and the HTTP console pages.

use super::{CommandSpec, ConnCtx};

pub static COMMANDS: &[CommandSpec] = &[];

/// Records a slow command in this thread's slow log.
pub fn slowlog_record(cx: &mut ConnCtx, args: &[&[u8]], usec: u64) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);
    let max = cx.shared().config.slowlog_max_len();
    if max == 0 {
        return;
    }
    let info = cx.client.info.borrow();
    let entry = crate::stats::SlowEntry {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        unix_secs: crate::engine::clock::unix_ms() / 1000,
        usec,
        args: args
            .iter()
            .take(32)
            .map(|a| a[..a.len().min(128)].to_vec())
            .collect(),
        addr: info.addr.clone(),
        name: info.name.clone(),
    };
    drop(info);
    let mut st = cx.worker.stats.borrow_mut();
    st.slowlog.push_front(entry);
    while st.slowlog.len() > max {
        st.slowlog.pop_back();
    }
}

/// Prometheus text exposition for `/metrics`.
pub async fn prometheus_metrics(cx: &mut ConnCtx) -> String {
    let keys = super::util::on_all_shards(cx, |c| c.shard.keys_total() as u64).await;
    format!("# HELP dragonfly_db_keys Total number of keys\n# TYPE dragonfly_db_keys gauge\ndragonfly_db_keys {}\n", keys.iter().sum::<u64>())
}

/// The HTML console at `/`.
pub async fn console_page(_cx: &mut ConnCtx) -> String {
    format!(
        "<html><body><h1>damselfly v{}</h1><a href=\"/metrics\">metrics</a></body></html>\n",
        env!("CARGO_PKG_VERSION")
    )
}
