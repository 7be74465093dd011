//! The journal: where writes leave their replication records (design:
//! docs/design/replication.md, "The one rule for ordering").
//!
//! A record enters the journal while its command still holds every lock it needs, so the
//! order of the journal is an order the primary's writes could have happened in. Producers are
//! every shard thread (single-shard commands, expirations, evictions) and every coordinator
//! (multi-shard commands, EXEC and scripts as one group); the one consumer is the feeder
//! (`replication::feed`), which turns records into the stream replicas read.
//!
//! Journaling starts when the first replica attaches and never stops (the backlog keeps
//! growing the stream). Whether a given command is journaled is decided where it is ordered
//! against the full sync's snapshot, so that every write is either in the snapshot or in the
//! stream after it, never both and never neither:
//! - on a shard thread, by the thread's own flag, which the snapshot's barrier turns on while
//!   it holds every shard ([`enable_here`]);
//! - for a multi-shard transaction, by its id: the first activation sets [`ID_BIT`] in the
//!   transaction id counter before the barrier takes its own id, so an id with the bit runs
//!   after the barrier on every shard it shares with it (VLL orders them), one without before.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::LazyLock;

use crossbeam_queue::SegQueue;

/// Set in every transaction id allocated after journaling began.
pub const ID_BIT: u64 = 1 << 62;

/// One command of the stream: its database and its arguments in RESP.
pub struct Record {
    pub db: usize,
    pub resp: Vec<u8>,
}

/// A full sync's request to attach its replica at the snapshot point (see `journal::Item`).
pub struct Attach {
    pub client: u64,
    pub tid: usize,
    pub ip: String,
    /// It asked with PSYNC, so it acknowledges (`REPLCONF ACK`); a SYNC reader never does.
    pub psync: bool,
    /// The stream offset at the snapshot point.
    pub offset: tokio::sync::oneshot::Sender<u64>,
}

/// What producers push.
pub enum Item {
    One(Record),
    /// A transaction's (EXEC's, a script's) commands, wrapped in MULTI/EXEC when more than one.
    Group(Vec<Record>),
    /// A full sync's snapshot point: everything before it is in the snapshot. The feeder
    /// answers with the stream offset there and attaches the replica from then on.
    Attach(Box<Attach>),
    /// Bytes for the stream as they are, in no database (`REPLCONF GETACK *`).
    Raw(Vec<u8>),
    /// Answered with the stream's offset once everything pushed before it is in the stream.
    Fence(tokio::sync::oneshot::Sender<u64>),
}

/// Journaling has begun somewhere (process-wide; per shard see [`here`]).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static QUEUE: LazyLock<SegQueue<Item>> = LazyLock::new(SegQueue::new);
/// Wakes the feeder.
pub static WAKE: LazyLock<tokio::sync::Notify> = LazyLock::new(tokio::sync::Notify::new);

thread_local! {
    /// This shard journals its commands (turned on by the first full sync's barrier).
    static HERE: Cell<bool> = const { Cell::new(false) };
    /// Modifications made on this thread (the engine's write hooks count them), so a command
    /// can tell whether it changed anything (Redis's `server.dirty`).
    static DIRTY: Cell<u64> = const { Cell::new(0) };
    /// What the running command propagates instead of its own arguments (set by handlers
    /// whose effect is not their command: SPOP → SREM, relative expiries as absolute).
    static REWRITE: RefCell<Option<Vec<Vec<Vec<u8>>>>> = const { RefCell::new(None) };
}

/// Has journaling begun (and not been suspended)?
#[inline]
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Does this shard thread journal its commands?
#[inline]
pub fn here() -> bool {
    HERE.with(|h| h.get()) && active()
}

/// This server became a replica: what it applies is its primary's stream, forwarded as it
/// is, so nothing is journaled (the shards' flags stay, `active` gates them). A later full
/// sync of a replica of ours, after a promotion, starts it again.
pub fn suspend() {
    ACTIVE.store(false, Ordering::SeqCst);
}

/// Begins journaling (the first full sync, before its barrier): from now on transaction ids
/// carry [`ID_BIT`].
pub fn begin(next_txid: &std::sync::atomic::AtomicU64) {
    if !ACTIVE.swap(true, Ordering::SeqCst) {
        next_txid.fetch_or(ID_BIT, Ordering::SeqCst);
    }
}

/// Resumes journaling after a promotion (REPLICAOF NO ONE), where shards journaled before.
pub fn resume() {
    ACTIVE.store(true, Ordering::SeqCst);
}

/// On a shard thread, inside the full sync's barrier.
pub fn enable_here() {
    HERE.with(|h| h.set(true));
}

/// Is the transaction with this id journaled?
#[inline]
pub fn journaled_id(id: u64) -> bool {
    id & ID_BIT != 0 && active()
}

/// The engine's write hook: something on this thread changed.
#[inline]
pub fn touched() {
    DIRTY.with(|d| d.set(d.get().wrapping_add(1)));
}

/// The modification count now (compare after a command).
#[inline]
pub fn mark() -> u64 {
    DIRTY.with(|d| d.get())
}

/// Runs `f` without its modifications counting as the running command's (an expiration found
/// by a lookup is its own record, not the command's).
#[inline]
pub fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let m = mark();
    let r = f();
    DIRTY.with(|d| d.set(m));
    r
}

/// The running command propagates `cmds` instead of its arguments (none: nothing). Called by
/// handlers only when [`here`] (cheap otherwise).
pub fn rewrite(cmds: Vec<Vec<Vec<u8>>>) {
    REWRITE.with(|r| *r.borrow_mut() = Some(cmds));
}

/// Adds one command to the running command's rewrite (for handlers that emit several).
pub fn rewrite_push(cmd: Vec<Vec<u8>>) {
    REWRITE.with(|r| r.borrow_mut().get_or_insert_with(Vec::new).push(cmd));
}

/// After a command ran on this thread (started at `mark`): its records, if it changed
/// anything. None when it did not (or the shard does not journal).
pub fn take(mark_before: u64, db: usize, args: &[&[u8]]) -> Option<Vec<Record>> {
    take_with(mark_before, db, args, |_| None)
}

/// [`take`], where `effects` may give the command's propagation form (`commands::propagate::effects`)
/// when it changed something and its handler set none.
pub fn take_with(
    mark_before: u64,
    db: usize,
    args: &[&[u8]],
    effects: impl FnOnce(&[&[u8]]) -> Option<Vec<Vec<Vec<u8>>>>,
) -> Option<Vec<Record>> {
    let mut rw = REWRITE.with(|r| r.borrow_mut().take());
    if rw.is_none() && mark() != mark_before {
        rw = effects(args);
    }
    if let Some(cmds) = rw {
        let recs: Vec<Record> = cmds
            .iter()
            .map(|c| Record {
                db,
                resp: encode_owned(c),
            })
            .collect();
        return (!recs.is_empty()).then_some(recs);
    }
    if mark() == mark_before {
        return None;
    }
    Some(vec![Record {
        db,
        resp: encode(args),
    }])
}

/// Clears what a command left without taking it (a command that is not journaled).
#[inline]
pub fn discard() {
    REWRITE.with(|r| {
        if r.borrow().is_some() {
            *r.borrow_mut() = None;
        }
    });
}

impl Item {
    /// The memory the item's records hold (their buffers' capacity), as the stream in transit
    /// that eviction leaves out (`memory::in_transit`).
    fn bytes(&self) -> usize {
        match self {
            Item::One(r) => r.resp.capacity(),
            Item::Group(rs) => {
                rs.iter().map(|r| r.resp.capacity()).sum::<usize>()
                    + rs.capacity() * std::mem::size_of::<Record>()
            }
            Item::Raw(b) => b.capacity(),
            Item::Attach(_) | Item::Fence(_) => 0,
        }
    }
}

pub fn push(item: Item) {
    crate::engine::memory::in_transit(item.bytes() as isize);
    QUEUE.push(item);
    WAKE.notify_one();
}

pub fn push_records(recs: Vec<Record>) {
    let bytes: usize = recs.iter().map(|r| r.resp.capacity()).sum();
    crate::engine::memory::in_transit(bytes as isize);
    for r in recs {
        QUEUE.push(Item::One(r));
    }
    WAKE.notify_one();
}

/// The feeder's end.
pub fn pop() -> Option<Item> {
    let item = QUEUE.pop()?;
    crate::engine::memory::in_transit(-(item.bytes() as isize));
    Some(item)
}

/// An expiration or eviction on this shard: `DEL key` goes into the stream now (the shard
/// holds the key at this moment), before the command that noticed it.
pub fn deleted(db: usize, key: &[u8]) {
    if here() {
        push(Item::One(Record {
            db,
            resp: encode(&[b"DEL", key]),
        }));
    }
}

/// A command in RESP (a multibulk of bulk strings).
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    append(&mut out, args.len(), args.iter().copied());
    out
}

pub fn encode_owned(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    append(&mut out, args.len(), args.iter().map(|a| a.as_slice()));
    out
}

fn append<'a>(out: &mut Vec<u8>, n: usize, args: impl Iterator<Item = &'a [u8]>) {
    // (Hand-rolled number formatting: `write!` was a tenth of a replicating primary's CPU.)
    let mut num = [0u8; 20];
    let mut head = |out: &mut Vec<u8>, tag: u8, v: usize| {
        let len = damselfly_protocol::double::write_u64(v as u64, &mut num);
        out.push(tag);
        out.extend_from_slice(&num[20 - len..]);
        out.extend_from_slice(b"\r\n");
    };
    head(out, b'*', n);
    for a in args {
        head(out, b'$', a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_resp() {
        assert_eq!(
            encode(&[b"SET", b"k", b""]),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn take_sees_modifications_and_rewrites() {
        let m = mark();
        assert!(take(m, 0, &[b"GET", b"k"]).is_none());
        touched();
        let r = take(m, 3, &[b"SET", b"k", b"v"]).unwrap();
        assert_eq!((r.len(), r[0].db), (1, 3));
        let m = mark();
        rewrite(vec![vec![b"SREM".to_vec(), b"s".to_vec(), b"a".to_vec()]]);
        let r = take(m, 0, &[b"SPOP", b"s"]).unwrap();
        assert!(r[0].resp.starts_with(b"*3\r\n$4\r\nSREM"));
        rewrite(vec![]);
        assert!(take(m, 0, &[b"X"]).is_none());
        let m = mark();
        quietly(touched);
        assert_eq!(mark(), m);
    }
}
