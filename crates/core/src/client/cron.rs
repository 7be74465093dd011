//! The client cron (Redis's `clientsCron`): every 100 ms each thread looks at its own
//! connections. It resizes query buffers (Redis's `clientsCronResizeQueryBuffer`: one idle
//! for more than 2 s gives its free space back; one much bigger than its recent peak shrinks to
//! it) and gives client eviction a chance when the clients are over `maxmemory-clients`
//! without anyone reading or writing (a limit lowered, CLIENT NO-EVICT turned off).
//!
//! A read buffer belongs to its connection task, so the cron only decides: it leaves the size
//! in the client's handle and wakes the task, which resizes when it is between reads.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::client::{self, ClientHandle};
use crate::engine::Worker;

const PERIOD: Duration = Duration::from_millis(100);
/// Only a buffer wasting more than this is resized (Redis: 4 KiB).
const MIN_WASTE: usize = 4 * 1024;
/// A buffer above this shrinks when it is more than twice its recent peak
/// (Redis's PROTO_RESIZE_THRESHOLD).
const RESIZE_THRESHOLD: usize = 32 * 1024;
/// A connection idle this long gives back all its free query buffer space.
const IDLE: Duration = Duration::from_secs(2);

pub async fn run(worker: Rc<Worker>) {
    loop {
        tokio::time::sleep(PERIOD).await;
        if worker
            .shared
            .shutdown
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        if crate::engine::CRON_PAUSED.load(std::sync::atomic::Ordering::Relaxed) {
            continue;
        }
        let now = Instant::now();
        client::for_each_local(|_, h| resize_query_buffer(h, now));
        if super::evict::over(&worker) {
            super::evict::evict(&worker).await;
        }
    }
}

/// Redis's `clientsCronResizeQueryBuffer`, deciding only (see the module comment).
fn resize_query_buffer(h: &ClientHandle, now: Instant) {
    if h.killed.get() {
        return;
    }
    let (free, len, idle) = {
        let info = h.info.borrow();
        let m = &info.mem;
        (
            m.qbuf_free,
            m.qbuf + m.argv_mem,
            now.saturating_duration_since(info.last_interaction),
        )
    };
    let size = len + free;
    let peak = h.qbuf_peak.get();
    if idle > IDLE && len == 0 && size > 0 {
        // An idle connection holds no buffer at all (the session allocates on the first
        // bytes), even one already shrunk below MIN_WASTE to its last peak; Redis would keep
        // such a few-byte buffer.
        h.resize_qbuf.set(Some(0));
        h.wake.notify_one();
    } else if free > MIN_WASTE {
        let target = if idle > IDLE {
            Some(len)
        } else if size > RESIZE_THRESHOLD && size / 2 > peak {
            Some(len.max(peak))
        } else {
            None
        };
        if let Some(t) = target {
            h.resize_qbuf.set(Some(t));
            h.wake.notify_one();
        }
    }
    // The peak restarts from what the buffer holds now (the session raises it as it reads).
    h.qbuf_peak.set(len);
}
