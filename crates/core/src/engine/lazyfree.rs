//! Lazy freeing (Redis's `lazyfree.c`): a deleted value that would take long to free (many
//! allocations) is handed to one background thread, so UNLINK of a million-element set does
//! not stall the shard thread that owns it. Small values are freed in place, as Redis does
//! below `LAZYFREE_THRESHOLD`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use damselfly_types::{Value, ValueRef};

/// Redis's LAZYFREE_THRESHOLD: values costing more allocations than this go to the thread.
pub const THRESHOLD: usize = 64;

static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

/// Roughly how many allocations freeing `v` takes (Redis's `lazyfreeGetFreeEffort`): one for
/// packed encodings, one per element of a table or skiplist, per node of a list or stream
/// (plus its consumer groups' pending entries).
pub fn effort(v: &Value) -> usize {
    match v.view() {
        ValueRef::Str(_) => 1,
        ValueRef::List(l) => l.node_count(),
        ValueRef::Set(s) if !s.is_intset() => s.len(),
        ValueRef::Hash(h) if !h.is_listpack() => h.len(),
        ValueRef::ZSet(z) if z.encoding_name() == "skiplist" => z.len(),
        ValueRef::Stream(s) => {
            // Redis estimates every group's pending list by the first one's.
            let groups = s
                .groups
                .values()
                .next()
                .map_or(0, |g| s.groups.len() * (1 + g.pel.len()));
            s.node_count() + groups
        }
        _ => 1,
    }
}

fn sender() -> &'static Sender<Value> {
    static TX: OnceLock<Sender<Value>> = OnceLock::new();
    TX.get_or_init(|| {
        let (tx, rx) = channel::<Value>();
        std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                for v in rx {
                    drop(v);
                    PENDING.fetch_sub(1, Ordering::AcqRel);
                    FREED.fetch_add(1, Ordering::Relaxed);
                }
            })
            .expect("spawn the lazyfree thread");
        tx
    })
}

/// Frees `v`: on the background thread when it is big, here otherwise.
pub fn free(v: Value) {
    if effort(&v) <= THRESHOLD {
        return;
    }
    PENDING.fetch_add(1, Ordering::AcqRel);
    if let Err(e) = sender().send(v) {
        // No thread (cannot happen once spawned): free here.
        PENDING.fetch_sub(1, Ordering::AcqRel);
        drop(e.0);
    }
}

/// INFO `lazyfree_pending_objects`.
pub fn pending() -> u64 {
    PENDING.load(Ordering::Acquire)
}

/// INFO `lazyfreed_objects` (since start or CONFIG RESETSTAT).
pub fn freed() -> u64 {
    FREED.load(Ordering::Relaxed)
}

pub fn reset_stats() {
    FREED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use damselfly_types::set::Set;
    use damselfly_types::stream::{NodeLimits, Stream, StreamId};

    #[test]
    fn effort_counts_allocations() {
        assert_eq!(
            effort(&Value::str(damselfly_types::CompactStr::from_bytes(b"x"))),
            1
        );
        let mut s = Set::new();
        for i in 0..1000 {
            s.add(format!("m{i}").as_bytes(), 512);
        }
        assert_eq!(effort(&Value::set(s)), 1000);
        let mut st = Stream::new();
        let lim = NodeLimits {
            max_bytes: 4096,
            max_entries: 5,
        };
        for i in 1..=100u64 {
            st.append(StreamId::new(i, 0), &[b"f", b"v"], lim).unwrap();
        }
        assert_eq!(effort(&Value::stream(st)), 20);
    }
}
