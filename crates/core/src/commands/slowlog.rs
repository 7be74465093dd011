//! The slow log's record stage: a command that ran longer than `slowlog-log-slower-than` is
//! kept in its thread's log (`stats::SlowEntry`), its arguments trimmed as Redis trims them.
//! SLOWLOG GET/LEN/RESET (admin) read and clear these logs on every thread.

use std::sync::atomic::{AtomicU64, Ordering};

use super::ConnCtx;
use crate::clock;
use crate::stats::SlowEntry;

const SLOWLOG_MAX_ARGC: usize = 32;
const SLOWLOG_MAX_STRING: usize = 128;

/// Records a slow command in this thread's slow log (argument trimming as Redis does).
pub fn record(cx: &mut ConnCtx, args: &[&[u8]], usec: u64) {
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);
    let max = cx.shared().config.slowlog_max_len();
    if max == 0 {
        return;
    }
    let argc = args.len();
    let slargc = argc.min(SLOWLOG_MAX_ARGC);
    let mut sargs = Vec::with_capacity(slargc);
    for (j, a) in args.iter().take(slargc).enumerate() {
        if slargc != argc && j == slargc - 1 {
            sargs.push(format!("... ({} more arguments)", argc - slargc + 1).into_bytes());
        } else if a.len() > SLOWLOG_MAX_STRING {
            let mut v = a[..SLOWLOG_MAX_STRING].to_vec();
            v.extend_from_slice(
                format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_STRING).as_bytes(),
            );
            sargs.push(v);
        } else {
            sargs.push(a.to_vec());
        }
    }
    let info = cx.client.info.borrow();
    let entry = SlowEntry {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        unix_secs: clock::unix_ms() / 1000,
        usec,
        args: sargs,
        addr: info.addr.clone(),
        name: info.name.clone(),
    };
    drop(info);
    let mut st = cx.worker.stats();
    st.slowlog.push_front(entry);
    while st.slowlog.len() > max {
        st.slowlog.pop_back();
    }
}
