//! Keyspace notifications (`notify-keyspace-events`, Redis's notify.c): the event classes, the
//! configured set, and `emit`, which commands and the engine (expiry, eviction, new keys,
//! misses) call. Emitting publishes `__keyspace@<db>__:<key>` → event and
//! `__keyevent@<db>__:<event>` → key through the Pub/Sub layer (installed as the sink at
//! start-up, so the engine does not depend on it). With no class enabled, `emit` is one relaxed
//! load. Design: docs/design/pubsub.md ("Keyspace notifications").

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
/// Excluded from `A` on purpose, as in Redis.
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 13;
pub const NEW: u32 = 1 << 14;
/// `A`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

static FLAGS: AtomicU32 = AtomicU32::new(0);

/// Where events go: publishes `payload` on `channel` (the Pub/Sub layer).
pub type Sink = fn(channel: &[u8], payload: &[u8]);
static SINK: OnceLock<Sink> = OnceLock::new();

pub fn set_sink(sink: Sink) {
    let _ = SINK.set(sink);
}

pub fn set_flags(flags: u32) {
    FLAGS.store(flags, Ordering::Relaxed);
}

/// Is any of `class` enabled (so that callers can skip building an event)?
#[inline]
pub fn enabled(class: u32) -> bool {
    FLAGS.load(Ordering::Relaxed) & class != 0
}

/// Redis's `keyspaceEventsStringToFlags`: None for an unknown character.
pub fn parse(s: &str) -> Option<u32> {
    let mut flags = 0;
    for c in s.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Redis's `keyspaceEventsFlagsToString` (what CONFIG GET shows). One difference: Redis
/// prints nothing for `n` when `A` is set (`KEAn` shows as `AKE`, and its CONFIG REWRITE loses
/// `n`); here it is `AnKE`, so the value read back is the value set.
pub fn to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
        if flags & NEW != 0 {
            s.push('n');
        }
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

/// Redis's `notifyKeyspaceEvent`: `event` of `class` happened to `key` in db `db`.
#[inline]
pub fn emit(class: u32, event: &str, db: usize, key: &[u8]) {
    let flags = FLAGS.load(Ordering::Relaxed);
    if flags & class == 0 {
        return;
    }
    emit_slow(flags, event, db, key);
}

#[cold]
fn emit_slow(flags: u32, event: &str, db: usize, key: &[u8]) {
    let Some(sink) = SINK.get() else {
        return;
    };
    if flags & KEYSPACE != 0 {
        let mut ch = format!("__keyspace@{db}__:").into_bytes();
        ch.extend_from_slice(key);
        sink(&ch, event.as_bytes());
    }
    if flags & KEYEVENT != 0 {
        let ch = format!("__keyevent@{db}__:{event}").into_bytes();
        sink(&ch, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_as_redis_prints_them() {
        for (given, shown) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
            ("Ex", "xE"),
            ("KEAm", "AKEm"),
            ("En", "nE"),
            ("KEAn", "AnKE"),
        ] {
            assert_eq!(to_string(parse(given).unwrap()), shown, "{given}");
        }
        assert_eq!(parse("KEQ"), None);
        assert_eq!(parse("A").unwrap() & KEY_MISS, 0);
    }
}
