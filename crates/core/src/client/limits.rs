//! Client memory limits: Redis's `client-output-buffer-limit` (hard and soft, per client class)
//! and `client-query-buffer-limit`, and how a connection's buffers are counted for them, for
//! CLIENT LIST (`qbuf`, `omem`, `tot-mem`) and for INFO. The session (`session.rs`) applies
//! them; see docs/design/memory-limits.md ("Client memory").

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::config::{Config, ObufClass, ObufLimit};

/// Redis keeps the first 16 KiB of a client's pending replies in a fixed per-client buffer
/// (`PROTO_REPLY_CHUNK_BYTES`) and counts as output buffer memory (`omem`, what the limits
/// compare with) only what spills past it. Damselfly has one growable reply buffer and counts the
/// same way: unwritten reply bytes beyond the first 16 KiB.
pub const STATIC_REPLY_BUF: usize = 16 * 1024;

/// When the client's class has no hard limit (the normal class's default `0 0 0`), a connection
/// whose unwritten replies reach this stops executing its pipeline (and so stops reading: its
/// query buffer and the kernel's socket buffers fill, and TCP pushes back on the client) until
/// the client has read them down to half of it. Redis would buffer without bound; this keeps a
/// client that pipelines gigabytes of GETs without reading from taking the server down.
pub const PAUSE_OUTPUT: usize = 64 << 20;

/// DEBUG REPLYBUFFER RESIZING: whether a reply buffer grown past `REPLY_SHRINK_ABOVE` goes
/// back to a small one once written (tests that compare clients' sizes turn it off).
static REPLY_RESIZING: AtomicBool = AtomicBool::new(true);
/// See `REPLY_RESIZING`.
pub const REPLY_SHRINK_ABOVE: usize = 4 * 1024 * 1024;

pub fn set_reply_resizing(on: bool) {
    REPLY_RESIZING.store(on, Ordering::Relaxed);
}

#[inline]
pub fn reply_resizing() -> bool {
    REPLY_RESIZING.load(Ordering::Relaxed)
}

/// Unauthenticated clients may not pile up more than this (Redis: `authRequired` in
/// `checkClientOutputBufferLimits`).
const UNAUTH_LIMIT: u64 = 1024;

/// What spills past the fixed buffer Redis holds in a list of blocks: 16 KiB asked for plus the
/// block header, which jemalloc serves from its 20480-byte class, so 20464 bytes of data each;
/// every block counts its whole data size plus the list node and block header (40 bytes), the
/// last one too, however full.
const REPLY_BLOCK_DATA: usize = 20464;
const REPLY_BLOCK_OVERHEAD: usize = 40;

/// Redis's reply blocks a connection's `unwritten` reply bytes would take (`oll`).
#[inline]
pub fn reply_blocks(unwritten: usize) -> usize {
    unwritten
        .saturating_sub(STATIC_REPLY_BUF)
        .div_ceil(REPLY_BLOCK_DATA)
}

/// Per-connection output memory as Redis counts it (`getClientOutputBufferMemoryUsage`): the
/// reply blocks its unwritten bytes would take in Redis.
#[inline]
pub fn output_memory(unwritten: usize) -> usize {
    reply_blocks(unwritten) * (REPLY_BLOCK_DATA + REPLY_BLOCK_OVERHEAD)
}

/// Redis's `checkClientOutputBufferLimits`, with the soft limit's state of one connection.
#[derive(Default, Debug)]
pub struct ObufState {
    /// Since when the soft limit has been exceeded without interruption.
    soft_since: Option<Instant>,
}

impl ObufState {
    /// Is a connection with `used` bytes of output memory over `limit`? The hard limit closes at
    /// once; the soft limit once it has been exceeded continuously for more than its seconds.
    /// Output memory that falls below the soft limit (say, the client read some) restarts the
    /// count.
    pub fn over(&mut self, limit: ObufLimit, used: u64, unauthenticated: bool) -> bool {
        self.over_at(limit, used, unauthenticated, Instant::now())
    }

    fn over_at(&mut self, limit: ObufLimit, used: u64, unauth: bool, now: Instant) -> bool {
        if unauth && used > UNAUTH_LIMIT {
            return true;
        }
        let hard = limit.hard != 0 && used >= limit.hard;
        let mut soft = limit.soft != 0 && used >= limit.soft;
        if soft {
            match self.soft_since {
                None => {
                    self.soft_since = Some(now);
                    soft = false;
                }
                Some(t) => soft = now.duration_since(t) > Duration::from_secs(limit.soft_secs),
            }
        } else {
            self.soft_since = None;
        }
        hard || soft
    }

    /// Is the soft limit's count running?
    #[inline]
    pub fn armed(&self) -> bool {
        self.soft_since.is_some()
    }

    /// When the soft limit, exceeded since `soft_since`, will have lasted too long: the
    /// connection checks again then even if nothing else happens (Redis's `clientsCron`).
    pub fn soft_deadline(&self, limit: ObufLimit) -> Option<Instant> {
        self.soft_since
            .map(|t| t + Duration::from_secs(limit.soft_secs) + Duration::from_millis(1))
    }
}

/// The output buffer limit of a client's class (Redis's `getClientType`): `replica` for a
/// replica's connection, `pubsub` while it is subscribed to anything, `normal` otherwise. A
/// replica's hard limit is never below `repl-backlog-size`, as in Redis: a partial resync sends
/// up to that much at once, and a lower limit would drop the replica right after accepting it.
#[inline]
pub fn class_limit(config: &Config, replica: bool, subscribed: bool) -> ObufLimit {
    if replica {
        let mut l = config.obuf_limit(ObufClass::Replica);
        if l.hard != 0 {
            l.hard = l.hard.max(config.repl_backlog_size() as u64);
        }
        return l;
    }
    config.obuf_limit(if subscribed {
        ObufClass::PubSub
    } else {
        ObufClass::Normal
    })
}

/// For reply generators whose output does not depend on the data's size (HRANDFIELD,
/// SRANDMEMBER, ZRANDMEMBER with a negative count: any number of repetitions of few members):
/// the reply length past which they stop, given the length `base` before their first element.
/// Past it, their output alone passes the normal class's hard limit, so the client is closed
/// after the command and its reply never sent (Redis stops them on `CLIENT_CLOSE_ASAP`).
/// `usize::MAX` when there is no hard limit.
#[inline]
pub fn generation_cap(config: &Config, base: usize) -> usize {
    match config.obuf_limit(ObufClass::Normal).hard {
        0 => usize::MAX,
        h => base
            .saturating_add(h as usize)
            .saturating_add(STATIC_REPLY_BUF),
    }
}

/// Up to `max` bytes in double quotes with escapes, as Redis's `sdscatrepr` (log lines).
pub fn repr(bytes: &[u8], max: usize) -> String {
    crate::config::file::sdscatrepr(&bytes[..bytes.len().min(max)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(hard: u64, soft: u64, soft_secs: u64) -> ObufLimit {
        ObufLimit {
            hard,
            soft,
            soft_secs,
        }
    }

    #[test]
    fn output_memory_excludes_the_fixed_buffer() {
        assert_eq!(output_memory(0), 0);
        assert_eq!(output_memory(STATIC_REPLY_BUF), 0);
        assert_eq!(output_memory(STATIC_REPLY_BUF + 10), 20504);
        assert_eq!(output_memory(STATIC_REPLY_BUF + 20464), 20504);
        assert_eq!(output_memory(STATIC_REPLY_BUF + 20465), 2 * 20504);
        assert_eq!(reply_blocks(STATIC_REPLY_BUF + 20465), 2);
    }

    #[test]
    fn hard_limit_closes_at_once() {
        let mut s = ObufState::default();
        let t = Instant::now();
        assert!(!s.over_at(lim(100, 0, 0), 99, false, t));
        assert!(s.over_at(lim(100, 0, 0), 100, false, t));
        assert!(!s.over_at(lim(0, 0, 0), u64::MAX, false, t));
    }

    #[test]
    fn soft_limit_needs_its_seconds_without_interruption() {
        let mut s = ObufState::default();
        let l = lim(0, 100, 2);
        let t0 = Instant::now();
        assert!(!s.over_at(l, 150, false, t0));
        assert_eq!(s.soft_deadline(l), Some(t0 + Duration::from_millis(2001)));
        assert!(!s.over_at(l, 150, false, t0 + Duration::from_secs(2)));
        // Below the soft limit: the count starts again.
        assert!(!s.over_at(l, 50, false, t0 + Duration::from_millis(2500)));
        assert_eq!(s.soft_deadline(l), None);
        let t1 = t0 + Duration::from_secs(3);
        assert!(!s.over_at(l, 150, false, t1));
        assert!(!s.over_at(l, 150, false, t1 + Duration::from_secs(2)));
        assert!(s.over_at(l, 150, false, t1 + Duration::from_millis(2001)));
    }

    #[test]
    fn unauthenticated_clients_get_one_kilobyte() {
        let mut s = ObufState::default();
        let t = Instant::now();
        assert!(!s.over_at(lim(0, 0, 0), 1024, true, t));
        assert!(s.over_at(lim(0, 0, 0), 1025, true, t));
    }

    #[test]
    fn repr_escapes_like_sdscatrepr() {
        assert_eq!(
            repr(b"*1\r\n$4\r\nPING\x00", 64),
            "\"*1\\r\\n$4\\r\\nPING\\x00\""
        );
        assert_eq!(repr(b"abcdef", 3), "\"abc\"");
    }
}
