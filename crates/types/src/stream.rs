//! Streams: entries with 128-bit IDs in packed nodes, consumer groups with pending entries.
//!
//! Redis keeps a stream as a radix tree of listpacks: each node holds a run of entries, delta
//! encoded against the node's first ("master") ID, with field names elided when they equal the
//! master entry's. We keep the same shape with a tighter byte format: a `BTreeMap` from the
//! master ID to a [`Node`] whose entries are varint-packed (`flags, ms delta, seq, values...`).
//! Nodes are cut exactly where Redis cuts its listpacks (`stream-node-max-entries` counting
//! deleted entries too, `stream-node-max-bytes` against the size Redis's listpack would have,
//! which each node tracks), so approximate trimming (`MAXLEN ~`) removes the same entries as
//! Redis and an RDB file carries the same nodes.
//!
//! Deleted entries stay in their node flagged (as in Redis) until the whole node is empty.

use std::collections::{BTreeMap, BTreeSet};

use smallvec::SmallVec;

use super::varint;
use crate::lpsize::{
    int_element_size, redis_entry_lp_bytes, redis_needs_new_node, redis_node_header_lp_bytes,
    STREAM_LISTPACK_MAX_SIZE,
};

/// A stream entry ID: milliseconds and sequence number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The 16-byte big-endian form Redis uses as radix-tree key (`streamEncodeID`), which
    /// sorts as the IDs do.
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    pub fn from_be_bytes(b: &[u8; 16]) -> StreamId {
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&b[..8]);
        seq.copy_from_slice(&b[8..]);
        StreamId {
            ms: u64::from_be_bytes(ms),
            seq: u64::from_be_bytes(seq),
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID (`streamIncrID`); None past the last possible one.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (`streamDecrID`); None before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    /// `ms-seq`, as replies show it.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut b = [0u8; 41];
        self.format(&mut b).to_vec()
    }

    /// `ms-seq` written into `buf` (no allocation: every reply line of XRANGE has one).
    pub fn format(self, buf: &mut [u8; 41]) -> &[u8] {
        fn put(buf: &mut [u8; 41], mut v: u64, n: &mut usize) {
            loop {
                *n -= 1;
                buf[*n] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
        }
        let mut n = 41;
        put(buf, self.seq, &mut n);
        n -= 1;
        buf[n] = b'-';
        put(buf, self.ms, &mut n);
        &buf[n..]
    }

    /// Parses an ID argument (`streamGenericParseIDOrReply`): `ms-seq`, or `ms` alone (seq =
    /// `missing_seq`); `-`/`+` unless `strict`; `ms-*` only when `star_seq` (XADD), reported as
    /// `seq_given = false`. None: Redis's "Invalid stream ID" error.
    pub fn parse(
        s: &[u8],
        missing_seq: u64,
        strict: bool,
        star_seq: bool,
    ) -> Option<(StreamId, bool)> {
        if s.len() > 127 {
            return None;
        }
        if s == b"-" || s == b"+" {
            if strict {
                return None;
            }
            return Some((
                if s == b"-" {
                    StreamId::MIN
                } else {
                    StreamId::MAX
                },
                true,
            ));
        }
        let (ms, rest) = match s.iter().position(|&b| b == b'-') {
            Some(i) => (&s[..i], Some(&s[i + 1..])),
            None => (s, None),
        };
        let ms = parse_u64(ms)?;
        let (seq, given) = match rest {
            None => (missing_seq, true),
            Some(b"*") if star_seq => (0, false),
            Some(r) => (parse_u64(r)?, true),
        };
        Some((StreamId::new(ms, seq), given))
    }
}

/// Redis's `string2ull`: a canonical `long long` that is not negative, or what `strtoull`
/// takes whole (leading spaces, a sign, leading zeros); negative values are refused.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    let t = std::str::from_utf8(s).ok()?;
    let t = t.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    if neg && v != 0 {
        return None;
    }
    Some(v)
}

/// Node size limits (`stream-node-max-bytes`, `stream-node-max-entries`; 0 = no limit).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    pub max_bytes: usize,
    pub max_entries: usize,
}

const F_DELETED: u8 = 1;
const F_SAME: u8 = 2;

/// A run of entries sharing a master ID (the map key) and master field names.
#[derive(Clone, Debug)]
struct Node {
    /// The master entry's field names: varint count, then (varint length, bytes) each.
    master: Box<[u8]>,
    /// Entries in ID order: `flags, varint ms-delta, varint seq (delta when ms-delta is 0),`
    /// then without F_SAME `varint n` and n (field, value) pairs, with it the values only;
    /// each string as varint length and bytes.
    buf: Vec<u8>,
    live: u32,
    deleted: u32,
    /// Bytes this node's listpack would have in Redis (header, master entry, entries).
    lp_bytes: u32,
}

/// An entry's field/value pairs, borrowed from its node.
pub type Fields<'a> = SmallVec<[(&'a [u8], &'a [u8]); 4]>;

fn read_str(buf: &[u8], off: usize) -> (&[u8], usize) {
    let (n, o) = varint::get(buf, off);
    let end = (o + n as usize).min(buf.len());
    (&buf[o..end], end)
}

fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    varint::push(out, s.len() as u64);
    out.extend_from_slice(s);
}

impl Node {
    /// An empty node whose master entry has these `n` field names.
    fn new<'f>(fields: impl Iterator<Item = &'f [u8]>, n: usize) -> Node {
        let mut master = Vec::new();
        varint::push(&mut master, n as u64);
        for f in fields {
            push_str(&mut master, f);
        }
        Node {
            master: master.into_boxed_slice(),
            buf: Vec::new(),
            live: 0,
            deleted: 0,
            lp_bytes: 0,
        }
    }

    fn master_fields(&self) -> SmallVec<[&[u8]; 4]> {
        let (n, mut o) = varint::get(&self.master, 0);
        let mut out = SmallVec::new();
        for _ in 0..n {
            let (s, next) = read_str(&self.master, o);
            out.push(s);
            o = next;
        }
        out
    }

    /// Appends entry `id` (`fv`: field, value, ...), keeping the Redis size in step.
    fn push_entry(&mut self, master_id: StreamId, id: StreamId, fv: &[&[u8]]) {
        let before = counts_bytes(self.live, self.deleted);
        let add = self.encode_entry(master_id, id, false, fv);
        self.live += 1;
        let after = counts_bytes(self.live, self.deleted);
        self.lp_bytes = (self.lp_bytes as usize + add + after - before) as u32;
    }

    /// Writes entry `id` (`fv`: field, value, ...) at the end of the buffer, field names
    /// elided when they are the master's; returns the bytes it adds to Redis's listpack.
    /// (Counts and sizes are the caller's.)
    fn encode_entry(
        &mut self,
        master_id: StreamId,
        id: StreamId,
        deleted: bool,
        fv: &[&[u8]],
    ) -> usize {
        let same = {
            let mf = self.master_fields();
            mf.len() * 2 == fv.len() && mf.iter().zip(fv.iter().step_by(2)).all(|(a, b)| a == b)
        };
        let buf = &mut self.buf;
        let mut flags = if same { F_SAME } else { 0 };
        if deleted {
            flags |= F_DELETED;
        }
        buf.push(flags);
        let msd = id.ms.wrapping_sub(master_id.ms);
        varint::push(buf, msd);
        varint::push(
            buf,
            if msd == 0 {
                id.seq.wrapping_sub(master_id.seq)
            } else {
                id.seq
            },
        );
        if same {
            for v in fv.iter().skip(1).step_by(2) {
                push_str(buf, v);
            }
        } else {
            varint::push(buf, (fv.len() / 2) as u64);
            for s in fv {
                push_str(buf, s);
            }
        }
        redis_entry_bytes(master_id, id, same, fv)
    }

    /// Redis's listpack bytes for this node's header and master entry at its current counts
    /// (decodes the master fields: for building a node; updates use [`counts_bytes`]).
    fn master_lp_bytes(&self) -> usize {
        redis_node_header_lp_bytes(self.live as u64, self.deleted as u64, &self.master_fields())
    }

    /// Decodes the entry at `off`: (flags, id, fields, offset of the next entry).
    fn entry_at<'a>(
        &'a self,
        master_id: StreamId,
        off: usize,
    ) -> (u8, StreamId, Fields<'a>, usize) {
        let buf = &self.buf;
        let flags = buf[off];
        let (msd, o) = varint::get(buf, off + 1);
        let (seqv, mut o) = varint::get(buf, o);
        let id = StreamId::new(
            master_id.ms.wrapping_add(msd),
            if msd == 0 {
                master_id.seq.wrapping_add(seqv)
            } else {
                seqv
            },
        );
        let mut fields = Fields::new();
        if flags & F_SAME != 0 {
            for f in self.master_fields() {
                let (v, next) = read_str(buf, o);
                fields.push((f, v));
                o = next;
            }
        } else {
            let (n, next) = varint::get(buf, o);
            o = next;
            for _ in 0..n {
                let (f, next) = read_str(buf, o);
                let (v, next) = read_str(buf, next);
                fields.push((f, v));
                o = next;
            }
        }
        (flags, id, fields, o)
    }

    /// Offsets of every entry (deleted ones too), in order.
    fn offsets(&self, master_id: StreamId) -> SmallVec<[usize; 128]> {
        let mut out = SmallVec::new();
        let mut off = 0;
        while off < self.buf.len() {
            out.push(off);
            off = self.skip(master_id, off);
        }
        out
    }

    /// Offset after the entry at `off`, without collecting its fields.
    fn skip(&self, _master_id: StreamId, off: usize) -> usize {
        let buf = &self.buf;
        let flags = buf[off];
        let (_, o) = varint::get(buf, off + 1);
        let (_, mut o) = varint::get(buf, o);
        let (n, strs) = if flags & F_SAME != 0 {
            let (n, _) = varint::get(&self.master, 0);
            (n, 1)
        } else {
            let (n, next) = varint::get(buf, o);
            o = next;
            (n, 2)
        };
        for _ in 0..n * strs {
            let (l, next) = varint::get(buf, o);
            o = next + l as usize;
        }
        o
    }

    /// The ID of the entry at `off`.
    fn id_at(&self, master_id: StreamId, off: usize) -> (u8, StreamId) {
        let buf = &self.buf;
        let (msd, o) = varint::get(buf, off + 1);
        let (seqv, _) = varint::get(buf, o);
        let id = StreamId::new(
            master_id.ms.wrapping_add(msd),
            if msd == 0 {
                master_id.seq.wrapping_add(seqv)
            } else {
                seqv
            },
        );
        (buf[off], id)
    }
}

/// The part of a Redis node's size that moves with its counts: the live and deleted count
/// elements of the master entry (rewritten in place, one byte more past 127...).
fn counts_bytes(live: u32, deleted: u32) -> usize {
    int_element_size(live as i64) + int_element_size(deleted as i64)
}

/// Bytes an entry adds to a Redis stream listpack (`streamAppendItem`'s appends).
fn redis_entry_bytes(master_id: StreamId, id: StreamId, same: bool, fv: &[&[u8]]) -> usize {
    let pairs: SmallVec<[(&[u8], &[u8]); 8]> = fv.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    redis_entry_lp_bytes(
        id.ms.wrapping_sub(master_id.ms) as i64,
        id.seq.wrapping_sub(master_id.seq) as i64,
        same,
        &pairs,
    )
}

/// One node as [`Stream::nodes`] decodes it.
pub struct NodeView<'a> {
    pub master_id: StreamId,
    pub master_fields: SmallVec<[&'a [u8]; 4]>,
    /// (ID, deleted, fields), in node order.
    pub entries: Vec<(StreamId, bool, Fields<'a>)>,
}

/// A pending (delivered, not acknowledged) entry of a consumer group.
#[derive(Clone, Debug)]
pub struct Nack {
    /// Last delivery, Unix milliseconds.
    pub delivery_time: u64,
    pub delivery_count: u64,
    pub consumer: Box<[u8]>,
}

#[derive(Clone, Debug, Default)]
pub struct Consumer {
    /// Last time the consumer was seen (read or claimed), Unix milliseconds.
    pub seen_time: u64,
    pub pel: BTreeSet<StreamId>,
}

/// Redis's SCG_INVALID_ENTRIES_READ.
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

#[derive(Clone, Debug)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries delivered so far counted from the first ever entry, or
    /// [`ENTRIES_READ_UNKNOWN`].
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Box<[u8]>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// The consumer named `name`, created (seen `now`) when missing; true when created.
    pub fn consumer_or_create(&mut self, name: &[u8], now: u64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        let c = self
            .consumers
            .entry(name.into())
            .or_insert_with(|| Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            });
        (c, created)
    }

    /// Removes a consumer and its pending entries (XGROUP DELCONSUMER); the count it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Acknowledges `id`: true when it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(n) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&n.consumer) {
            c.pel.remove(&id);
        }
        true
    }

    /// Makes `id` pending for `consumer` (which must exist), delivered at `now` with count
    /// `count`, moving it from its previous owner.
    pub fn assign(&mut self, id: StreamId, consumer: &[u8], now: u64, count: u64) {
        if let Some(old) = self.pel.get(&id) {
            if &*old.consumer != consumer {
                let prev = old.consumer.clone();
                if let Some(c) = self.consumers.get_mut(&prev) {
                    c.pel.remove(&id);
                }
            }
        }
        self.pel.insert(
            id,
            Nack {
                delivery_time: now,
                delivery_count: count,
                consumer: consumer.into(),
            },
        );
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }
}

/// A stream value.
#[derive(Clone, Debug, Default)]
#[repr(align(16))]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    length: u64,
    pub last_id: StreamId,
    /// First live entry (0-0 when empty), as Redis 7.0 keeps it.
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    /// Consumer groups by name (Redis's rax order).
    pub groups: BTreeMap<Box<[u8]>, Group>,
}

/// How XADD's ID is chosen.
#[derive(Clone, Copy, Debug)]
pub enum IdSpec {
    /// `*`: the clock, or the last ID's successor.
    Auto,
    /// `ms-*`.
    Ms(u64),
    /// `ms-seq`.
    Exact(StreamId),
}

/// Why an ID could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// Equal or smaller than the top item (or a sequence overflow).
    TooSmall,
    /// The field/value bytes would not fit a listpack.
    TooLarge,
}

/// XADD/XTRIM's trimming request.
#[derive(Clone, Copy, Debug)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Radix-tree nodes (XINFO STREAM FULL `radix-tree-nodes` is close to this; Redis counts
    /// rax nodes, which are more).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The ID XADD would use (`streamAppendItem`'s choice), or why none fits.
    pub fn next_id(&self, spec: IdSpec, now_ms: u64) -> Result<StreamId, AddError> {
        let id = match spec {
            IdSpec::Auto => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.incr().ok_or(AddError::TooSmall)?
                }
            }
            IdSpec::Ms(ms) => {
                if ms == self.last_id.ms {
                    if self.last_id.seq == u64::MAX {
                        return Err(AddError::TooSmall);
                    }
                    StreamId::new(ms, self.last_id.seq + 1)
                } else {
                    StreamId::new(ms, 0)
                }
            }
            IdSpec::Exact(id) => id,
        };
        if id <= self.last_id {
            return Err(AddError::TooSmall);
        }
        Ok(id)
    }

    /// Appends an entry with ID `id` (greater than `last_id`, see [`Stream::next_id`]) and
    /// `fv` = field, value, field, value...
    pub fn append(&mut self, id: StreamId, fv: &[&[u8]], lim: NodeLimits) -> Result<(), AddError> {
        debug_assert!(id > self.last_id || (self.last_id.is_zero() && self.entries_added == 0));
        let total: usize = fv.iter().map(|s| s.len()).sum();
        if total > STREAM_LISTPACK_MAX_SIZE {
            return Err(AddError::TooLarge);
        }
        // One walk down the tree per append (the tail is what XADD touches; a second lookup
        // was a measurable share of XADD's time with many streams).
        let tail = self.nodes.last_entry().and_then(|mut t| {
            let n = t.get_mut();
            let full = redis_needs_new_node(
                n.lp_bytes as usize,
                (n.live + n.deleted) as u64,
                total,
                lim.max_bytes,
                lim.max_entries as u64,
            );
            if full {
                // A sealed node never grows again (Redis's lpShrinkToFit).
                n.buf.shrink_to_fit();
                None
            } else {
                Some(t)
            }
        });
        match tail {
            Some(mut t) => {
                let master_id = *t.key();
                t.get_mut().push_entry(master_id, id, fv);
            }
            None => {
                let mut node = Node::new(fv.iter().step_by(2).copied(), fv.len() / 2);
                node.lp_bytes = node.master_lp_bytes() as u32;
                node.push_entry(id, id, fv);
                self.nodes.insert(id, node);
            }
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(())
    }

    /// Calls `f` with each live entry in `[start, end]` (descending when `rev`) until it
    /// returns false.
    pub fn range<'a>(
        &'a self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(StreamId, Fields<'a>) -> bool,
    ) {
        if start > end {
            return;
        }
        // The node holding `start` begins at or before it.
        let first_key = self
            .nodes
            .range(..=start)
            .next_back()
            .map(|(k, _)| *k)
            .unwrap_or(start);
        let nodes = self.nodes.range(first_key..=end);
        if !rev {
            for (&mid, node) in nodes {
                let mut off = 0;
                while off < node.buf.len() {
                    let (flags, id) = node.id_at(mid, off);
                    // (A tombstone may sit above later live IDs: XDEL of the top entry, XSETID
                    // below it, XADD. Only live IDs are ordered.)
                    if flags & F_DELETED == 0 && id > end {
                        return;
                    }
                    if flags & F_DELETED == 0 && id >= start {
                        let (_, _, fields, _) = node.entry_at(mid, off);
                        if !f(id, fields) {
                            return;
                        }
                    }
                    off = node.skip(mid, off);
                }
            }
        } else {
            for (&mid, node) in nodes.rev() {
                for &off in node.offsets(mid).iter().rev() {
                    let (flags, id) = node.id_at(mid, off);
                    if flags & F_DELETED == 0 && id < start {
                        return;
                    }
                    if flags & F_DELETED == 0 && id <= end {
                        let (_, _, fields, _) = node.entry_at(mid, off);
                        if !f(id, fields) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The live entry `id`'s fields.
    pub fn get(&self, id: StreamId) -> Option<Fields<'_>> {
        let mut out = None;
        self.range(id, id, false, |_, f| {
            out = Some(f);
            false
        });
        out
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.find(id).is_some()
    }

    /// (node key, offset) of live entry `id`.
    fn find(&self, id: StreamId) -> Option<(StreamId, usize)> {
        let (&mid, node) = self.nodes.range(..=id).next_back()?;
        let mut off = 0;
        while off < node.buf.len() {
            let (flags, eid) = node.id_at(mid, off);
            if flags & F_DELETED == 0 {
                if eid == id {
                    return Some((mid, off));
                }
                if eid > id {
                    return None;
                }
            }
            off = node.skip(mid, off);
        }
        None
    }

    /// Marks the entry at (node, offset) deleted; drops the node when nothing live is left.
    fn delete_at(&mut self, mid: StreamId, off: usize) {
        let node = self.nodes.get_mut(&mid).expect("node");
        let before = counts_bytes(node.live, node.deleted);
        node.buf[off] |= F_DELETED;
        node.live -= 1;
        node.deleted += 1;
        let after = counts_bytes(node.live, node.deleted);
        node.lp_bytes = (node.lp_bytes as usize + after - before) as u32;
        if node.live == 0 {
            self.nodes.remove(&mid);
        }
        self.length -= 1;
    }

    /// XDEL of one ID: true when it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((mid, off)) = self.find(id) else {
            return false;
        };
        self.delete_at(mid, off);
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        true
    }

    /// After deletions: Redis's first-ID update (`streamGetEdgeID(first, skip tombstones)`).
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.first_live().unwrap_or(StreamId::MIN);
    }

    fn first_live(&self) -> Option<StreamId> {
        let mut out = None;
        self.range(StreamId::MIN, StreamId::MAX, false, |id, _| {
            out = Some(id);
            false
        });
        out
    }

    /// The last live entry's ID.
    pub fn last_live(&self) -> Option<StreamId> {
        let mut out = None;
        self.range(StreamId::MIN, StreamId::MAX, true, |id, _| {
            out = Some(id);
            false
        });
        out
    }

    /// The first entry of the first node, deleted or not (`streamGetEdgeID(first, keep
    /// tombstones)`, what Redis propagates for an approximate MINID trim); 0-0 when empty.
    pub fn first_id_with_tombstones(&self) -> StreamId {
        match self.nodes.iter().next() {
            Some((&mid, node)) if !node.buf.is_empty() => node.id_at(mid, 0).1,
            _ => StreamId::MIN,
        }
    }

    /// `streamTrim`: whole nodes while they fit the request, then (exact trims only) entries
    /// of the next node; `limit` caps the entries removed (0 = none). Returns the count.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        loop {
            if let Trim::MaxLen(max) = how {
                if self.length <= max {
                    break;
                }
            }
            let Some((&mid, node)) = self.nodes.iter().next() else {
                break;
            };
            let entries = node.live as u64;
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let remove_node = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => {
                    let offs = node.offsets(mid);
                    let last = node.id_at(mid, *offs.last().expect("non-empty node")).1;
                    last < min
                }
            };
            if remove_node {
                self.nodes.remove(&mid);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let offs = node.offsets(mid);
            for off in offs {
                let stop = match how {
                    Trim::MaxLen(max) => self.length <= max,
                    Trim::MinId(min) => self.nodes[&mid].id_at(mid, off).1 >= min,
                };
                if stop {
                    break;
                }
                if self.nodes[&mid].buf[off] & F_DELETED == 0 {
                    self.delete_at(mid, off);
                    deleted += 1;
                }
            }
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// Is there a deleted entry in `[start, end]` that could matter for counting
    /// (`streamRangeHasTombstones`)?
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// `streamEstimateDistanceFromFirstEverEntry`: entries_read for a group at `id`, or
    /// [`ENTRIES_READ_UNKNOWN`].
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        }
        if id > self.last_id {
            return ENTRIES_READ_UNKNOWN;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return (self.entries_added - self.length) as i64;
            }
            if id == self.first_id {
                return (self.entries_added - self.length + 1) as i64;
            }
        }
        ENTRIES_READ_UNKNOWN
    }

    /// A group's lag (`streamReplyWithCGLag`); None when it cannot be known.
    pub fn group_lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_UNKNOWN
            && !self.range_has_tombstones(g.last_id, StreamId::MAX)
        {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let er = self.estimate_distance(g.last_id);
        (er != ENTRIES_READ_UNKNOWN).then(|| self.entries_added as i64 - er)
    }

    /// A group delivered `id` (XREADGROUP's `>` path): advance its last ID and entries_read.
    pub fn group_delivered(&self, g: &mut Group, id: StreamId) {
        if id <= g.last_id {
            return;
        }
        if g.entries_read != ENTRIES_READ_UNKNOWN && !self.range_has_tombstones(id, StreamId::MAX) {
            g.entries_read += 1;
        } else if self.entries_added > 0 {
            g.entries_read = self.estimate_distance(id);
        }
        g.last_id = id;
    }

    /// Approximate heap bytes (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        let nodes: usize = self
            .nodes
            .values()
            .map(|n| std::mem::size_of::<Node>() + 16 + n.master.len() + n.buf.capacity())
            .sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| {
                name.len()
                    + std::mem::size_of::<Group>()
                    + g.pel.len() * (16 + std::mem::size_of::<Nack>() + 16)
                    + g.consumers
                        .iter()
                        .map(|(n, c)| n.len() + 48 + c.pel.len() * 16)
                        .sum::<usize>()
            })
            .sum();
        nodes + groups
    }

    /// The nodes for a snapshot, decoded one at a time: master ID, master field names, every
    /// entry (deleted ones flagged) with its fields.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = NodeView<'_>> + '_ {
        self.nodes.iter().map(|(&mid, node)| {
            let mut entries = Vec::with_capacity((node.live + node.deleted) as usize);
            let mut off = 0;
            while off < node.buf.len() {
                let (flags, id, fields, next) = node.entry_at(mid, off);
                entries.push((id, flags & F_DELETED != 0, fields));
                off = next;
            }
            NodeView {
                master_id: mid,
                master_fields: node.master_fields(),
                entries,
            }
        })
    }

    /// Builds a node from a loaded image: master ID, master fields, entries in ID order.
    /// The caller sets the stream's metadata afterwards; `length` counts live entries here.
    pub fn push_node(
        &mut self,
        mid: StreamId,
        master_fields: &[&[u8]],
        entries: &[(StreamId, bool, Vec<&[u8]>)],
    ) {
        let mut node = Node::new(master_fields.iter().copied(), master_fields.len());
        let mut add = 0;
        for (id, deleted, fv) in entries {
            add += node.encode_entry(mid, *id, *deleted, fv);
            if *deleted {
                node.deleted += 1;
            } else {
                node.live += 1;
            }
        }
        node.lp_bytes = (node.master_lp_bytes() + add) as u32;
        node.buf.shrink_to_fit();
        self.length += node.live as u64;
        if node.live > 0 {
            self.nodes.insert(mid, node);
        }
    }

    /// Sets the live length after loading (the image's length field).
    pub fn loaded_length(&self) -> u64 {
        self.length
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: NodeLimits = NodeLimits {
        max_bytes: 4096,
        max_entries: 100,
    };

    fn add(s: &mut Stream, ms: u64, fv: &[&[u8]]) -> StreamId {
        let id = s.next_id(IdSpec::Ms(ms), 0).unwrap();
        s.append(id, fv, LIM).unwrap();
        id
    }

    fn ids(s: &Stream, rev: bool) -> Vec<StreamId> {
        let mut out = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, rev, |id, _| {
            out.push(id);
            true
        });
        out
    }

    #[test]
    fn ids_format() {
        assert_eq!(StreamId::new(0, 0).to_bytes(), b"0-0");
        assert_eq!(
            StreamId::new(1700000000000, 12).to_bytes(),
            b"1700000000000-12"
        );
        assert_eq!(
            StreamId::MAX.to_bytes(),
            b"18446744073709551615-18446744073709551615"
        );
    }

    #[test]
    fn ids_parse_like_redis() {
        assert_eq!(
            StreamId::parse(b"1-2", 0, false, false),
            Some((StreamId::new(1, 2), true))
        );
        assert_eq!(
            StreamId::parse(b"5", 9, false, false),
            Some((StreamId::new(5, 9), true))
        );
        assert_eq!(
            StreamId::parse(b"-", 0, false, false),
            Some((StreamId::MIN, true))
        );
        assert_eq!(StreamId::parse(b"+", 0, true, false), None);
        assert_eq!(
            StreamId::parse(b"5-*", 0, true, true),
            Some((StreamId::new(5, 0), false))
        );
        assert_eq!(StreamId::parse(b"5-*", 0, true, false), None);
        assert_eq!(StreamId::parse(b"-1", 0, false, false), None);
        assert_eq!(StreamId::parse(b"1-x", 0, false, false), None);
        assert_eq!(
            StreamId::parse(b"18446744073709551615-18446744073709551615", 0, true, false),
            Some((StreamId::MAX, true))
        );
        assert_eq!(
            StreamId::parse(b"18446744073709551616", 0, false, false),
            None
        );
    }

    #[test]
    fn append_range_and_delete() {
        let mut s = Stream::new();
        for i in 1..=250u64 {
            let v = i.to_string();
            if i % 3 == 0 {
                add(&mut s, i, &[b"a", v.as_bytes(), b"extra", b"x"]);
            } else {
                add(&mut s, i, &[b"a", v.as_bytes()]);
            }
        }
        assert_eq!(s.len(), 250);
        assert_eq!(s.node_count(), 3);
        let fwd = ids(&s, false);
        let mut rev = ids(&s, true);
        rev.reverse();
        assert_eq!(fwd, rev);
        assert_eq!(fwd.len(), 250);
        {
            let f = s.get(StreamId::new(9, 0)).unwrap();
            assert_eq!(
                f.as_slice(),
                &[(&b"a"[..], &b"9"[..]), (&b"extra"[..], &b"x"[..])]
            );
        }
        assert!(s.delete(StreamId::new(9, 0)));
        assert!(!s.delete(StreamId::new(9, 0)));
        assert!(s.get(StreamId::new(9, 0)).is_none());
        assert_eq!(s.len(), 249);
        assert_eq!(s.max_deleted_id, StreamId::new(9, 0));
        // Ranges inside a node.
        let mut got = Vec::new();
        s.range(StreamId::new(8, 0), StreamId::new(11, 0), true, |id, _| {
            got.push(id.ms);
            true
        });
        assert_eq!(got, [11, 10, 8]);
    }

    #[test]
    fn trimming_follows_redis_nodes() {
        let mut s = Stream::new();
        for i in 1..=1000u64 {
            add(&mut s, i, &[b"xitem", b"1"]);
        }
        // MAXLEN ~ 555 with 100-entry nodes keeps 600.
        let n = s.trim(Trim::MaxLen(555), true, 10_000);
        assert_eq!((n, s.len()), (400, 600));
        assert_eq!(s.first_id, StreamId::new(401, 0));
        let n = s.trim(Trim::MaxLen(555), false, 0);
        assert_eq!((n, s.len()), (45, 555));
        assert_eq!(s.first_id, StreamId::new(446, 0));
        let n = s.trim(Trim::MinId(StreamId::new(700, 0)), false, 0);
        assert_eq!(s.len(), 301);
        assert_eq!(n, 254);
        assert_eq!(ids(&s, false)[0], StreamId::new(700, 0));
    }

    #[test]
    fn auto_ids_never_go_back() {
        let mut s = Stream::new();
        let a = s.next_id(IdSpec::Auto, 100).unwrap();
        s.append(a, &[b"f", b"v"], LIM).unwrap();
        let b = s.next_id(IdSpec::Auto, 50).unwrap();
        assert_eq!(b, StreamId::new(100, 1));
        assert_eq!(
            s.next_id(IdSpec::Exact(StreamId::new(100, 0)), 0),
            Err(AddError::TooSmall)
        );
        assert_eq!(s.next_id(IdSpec::Ms(99), 0), Err(AddError::TooSmall));
        s.last_id = StreamId::MAX;
        assert_eq!(s.next_id(IdSpec::Auto, 0), Err(AddError::TooSmall));
    }

    #[test]
    fn node_bytes_limit_cuts_nodes() {
        let mut s = Stream::new();
        let lim = NodeLimits {
            max_bytes: 100,
            max_entries: 0,
        };
        for i in 1..=20u64 {
            let id = s.next_id(IdSpec::Ms(i), 0).unwrap();
            s.append(id, &[b"field", b"some value here"], lim).unwrap();
        }
        assert!(s.node_count() > 3);
        assert_eq!(ids(&s, false).len(), 20);
    }
}
