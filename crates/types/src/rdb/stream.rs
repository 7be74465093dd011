//! Streams in RDB (`RDB_TYPE_STREAM_LISTPACKS`, `_2` and `_3`): a neutral image of a stream and
//! both directions, byte for byte as redis-server 7.0 writes them.
//!
//! A Redis stream is a radix tree of nodes keyed by their *master ID* (16 bytes, big-endian
//! ms then seq); each node is a listpack (`t_stream.c`, `streamAppendItem`):
//!
//! ```text
//! master entry: count deleted num-fields field_1 .. field_N 0
//! each entry:   flags ms-diff seq-diff num-fields field_1 value_1 .. field_N value_N lp-count
//!          or:  flags ms-diff seq-diff value_1 .. value_N lp-count         (SAMEFIELDS)
//! ```
//!
//! `count`/`deleted` are the node's live and deleted entries (deleted ones stay in the node,
//! flagged, until the whole node goes); `flags` is `DELETED = 1 | SAMEFIELDS = 2` (SAMEFIELDS
//! when the entry's field names are exactly the master's, which then are not repeated);
//! `ms-diff`/`seq-diff` are the ID minus the master ID, each part on its own, as wrapping
//! 64-bit differences; `lp-count` is the number of listpack elements of the entry before it
//! (3 + values, plus num-fields and names without SAMEFIELDS). Integers are written with
//! `lpAppendInteger` (smallest integer encoding), names and values with `lpAppend` (canonical
//! decimal integers stored as integers, so `"123"` comes back as `"123"`, `"007"` stays a
//! string).
//!
//! The object body (`rdbSaveObject`) is: the node count; per node the master ID as a 16-byte
//! string and the listpack as a string; the length, last ID, and (types 19 and 21) first ID,
//! max deleted ID and entries added; the consumer groups: name, last delivered ID, (19, 21)
//! entries read, the global PEL (raw 16-byte ID, delivery time in ms as 8 bytes LE, delivery
//! count), and the consumers: name, seen time (8 bytes LE), (21) active time, and the IDs of
//! their PEL. Type 15 lacks what 19 added; Redis derives it at load (see [`read_stream`]).
//! All IDs, names and PELs are written in radix-tree order (byte order of the key).
//!
//! Node cutting, for a caller that keeps its own nodes: see `crate::lpsize`
//! (`redis_needs_new_node` and the `redis_*_lp_bytes` functions give the sizes of Redis's node
//! listpacks exactly).

use std::io::{self, Write};

use super::listpack::{self, LpBuilder, PackedEntry};
use super::wire::{RdbError, RdbErrorKind, RdbType, Reader, Result, Writer};

/// `STREAM_ITEM_FLAG_DELETED`.
pub const FLAG_DELETED: i64 = 1;
/// `STREAM_ITEM_FLAG_SAMEFIELDS`.
pub const FLAG_SAMEFIELDS: i64 = 2;
/// `SCG_INVALID_ENTRIES_READ`: a group's entries-read counter is unknown.
pub const INVALID_ENTRIES_READ: i64 = -1;

/// A stream entry ID (the one type: `crate::stream::StreamId`).
pub use crate::stream::StreamId as Id;

/// One entry of a node (deleted entries are kept flagged, as Redis keeps them in a node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryImage {
    pub id: Id,
    pub deleted: bool,
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One radix-tree node: master ID (the node's key), the master entry's field names, the
/// entries in ID order.
///
/// What Redis writes, and what [`read_stream`] accepts: the first entry has the master ID
/// (it created the node; it may be deleted since), every later entry has a greater ID, at
/// least one entry is live, and the live entries of the whole stream are in strictly
/// increasing ID order. Deleted entries need not be in order: after `XDEL` of the top entry
/// and `XSETID` below it, the next `XADD` lands after the tombstone with a smaller ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeImage {
    pub master_id: Id,
    pub master_fields: Vec<Vec<u8>>,
    pub entries: Vec<EntryImage>,
}

/// The stream's scalar metadata (`stream` in `stream.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StreamMeta {
    /// Live entries.
    pub length: u64,
    pub last_id: Id,
    /// `first_id`, Redis's "recorded-first-entry-id": Redis 7.0 keeps it at the first live
    /// entry's ID, 0-0 when the stream is empty (but see [`read_stream`] for type 15).
    pub first_id: Id,
    pub max_deleted_id: Id,
    pub entries_added: u64,
}

/// One entry of a group's pending entries list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingImage {
    pub id: Id,
    /// Unix time in ms (Redis's `mstime_t`, written as 8 bytes LE; kept as its bits).
    pub delivery_time: u64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerImage {
    pub name: Vec<u8>,
    /// Unix time in ms (as its bits, like [`PendingImage::delivery_time`]).
    pub seen_time: u64,
    /// Only in `RDB_TYPE_STREAM_LISTPACKS_3` (Redis 7.2+): None when the payload did not have
    /// it (Redis 7.2 then uses `seen_time` as the estimate). Never written (we write type 19).
    pub active_time: Option<u64>,
    /// IDs of this consumer's pending entries; each one is in its group's `pending`.
    pub pending: Vec<Id>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupImage {
    pub name: Vec<u8>,
    pub last_id: Id,
    /// [`INVALID_ENTRIES_READ`] (-1) when unknown.
    pub entries_read: i64,
    pub pending: Vec<PendingImage>,
    pub consumers: Vec<ConsumerImage>,
}

/// A whole stream. [`read_stream`] returns groups and consumers sorted by name and PELs sorted
/// by ID (the radix-tree order Redis keeps them in and writes them in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamImage {
    pub nodes: Vec<NodeImage>,
    pub meta: StreamMeta,
    pub groups: Vec<GroupImage>,
}

// ---------------------------------------------------------------------------------------------
// Listpack sizes, for cutting nodes where Redis cuts them.

// ---------------------------------------------------------------------------------------------
// Writing.

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn same_fields(master: &[Vec<u8>], fields: &[(Vec<u8>, Vec<u8>)]) -> bool {
    master.len() == fields.len() && master.iter().zip(fields).all(|(m, (f, _))| m == f)
}

fn push_checked(lp: &mut LpBuilder, s: &[u8]) -> io::Result<()> {
    if s.len() > u32::MAX as usize {
        return Err(invalid("stream field or value too large for a listpack"));
    }
    lp.push_bytes(s);
    Ok(())
}

/// The listpack of one node, exactly as Redis builds it (see the module documentation).
///
/// # Errors
/// If a string or the listpack would exceed the 4 GiB a listpack can hold.
pub fn node_listpack(node: &NodeImage) -> io::Result<Vec<u8>> {
    let deleted = node.entries.iter().filter(|e| e.deleted).count();
    let live = node.entries.len() - deleted;
    let mut lp = LpBuilder::new();
    lp.push_int(live as i64);
    lp.push_int(deleted as i64);
    lp.push_int(node.master_fields.len() as i64);
    for f in &node.master_fields {
        push_checked(&mut lp, f)?;
    }
    lp.push_int(0);
    for e in &node.entries {
        let same = same_fields(&node.master_fields, &e.fields);
        let n = e.fields.len() as i64;
        let mut flags = 0;
        if e.deleted {
            flags |= FLAG_DELETED;
        }
        if same {
            flags |= FLAG_SAMEFIELDS;
        }
        lp.push_int(flags);
        lp.push_int(e.id.ms.wrapping_sub(node.master_id.ms) as i64);
        lp.push_int(e.id.seq.wrapping_sub(node.master_id.seq) as i64);
        let mut lp_count = n + 3;
        if !same {
            lp.push_int(n);
            lp_count += n + 1;
        }
        for (f, v) in &e.fields {
            if !same {
                push_checked(&mut lp, f)?;
            }
            push_checked(&mut lp, v)?;
        }
        lp.push_int(lp_count);
        if lp.bytes_len() > u32::MAX as usize {
            return Err(invalid("stream node too large for a listpack"));
        }
    }
    Ok(lp.finish())
}

/// References to `items` in the order `key` sorts them, borrowing when already sorted.
fn sorted_refs<'a, T, K: Ord>(items: &'a [T], key: impl Fn(&'a T) -> K) -> Vec<&'a T> {
    let mut v: Vec<&T> = items.iter().collect();
    if !v.windows(2).all(|w| key(w[0]) <= key(w[1])) {
        v.sort_by_key(|&a| key(a));
    }
    v
}

fn write_id<W: Write>(w: &mut Writer<W>, id: Id) -> io::Result<()> {
    w.write_len(id.ms)?;
    w.write_len(id.seq)
}

/// Writes the body (no type byte, no key) of an `RDB_TYPE_STREAM_LISTPACKS_2` object as
/// redis-server 7.0's `rdbSaveObject` does. The caller writes the type byte
/// ([`RdbType::StreamListpacks2`]).
///
/// `nodes` are streamed in key order, one listpack in memory at a time; `nodes.len()` is the
/// node count written first, so the caller must not pass nodes without a live entry (Redis
/// removes such nodes; filter them out before counting). Each node's first entry must have
/// the master ID (see [`NodeImage`]), and `meta.length` must be the number of live entries.
/// Groups, consumers and PELs are written in radix-tree order whatever their order in the
/// slices; every consumer's pending ID must be in its group's PEL. These are debug-asserted; in release a payload breaking them is written as
/// is (and [`read_stream`] or Redis rejects it).
///
/// # Errors
/// The writer's errors; `InvalidInput` if the iterator yields a different number of nodes
/// than its `len()` said (the count is already written then) or a listpack would exceed
/// 4 GiB.
pub fn write_stream<W: Write, I: ExactSizeIterator<Item = NodeImage>>(
    w: &mut Writer<W>,
    nodes: I,
    meta: &StreamMeta,
    groups: &[GroupImage],
) -> io::Result<()> {
    let count = nodes.len();
    w.write_len(count as u64)?;
    let mut written = 0usize;
    let mut prev: Option<Id> = None;
    let mut live = 0u64;
    for node in nodes {
        debug_assert!(
            node.entries.iter().any(|e| !e.deleted),
            "stream node {:?} has no live entry",
            node.master_id
        );
        debug_assert_eq!(
            node.entries.first().map(|e| e.id),
            Some(node.master_id),
            "first entry of a node must have the master ID"
        );
        debug_assert!(
            prev.is_none_or(|p| p < node.master_id),
            "nodes out of order"
        );
        prev = Some(node.master_id);
        live += node.entries.iter().filter(|e| !e.deleted).count() as u64;
        if written == count {
            return Err(invalid("stream node iterator longer than its len()"));
        }
        w.write_string(&node.master_id.to_be_bytes())?;
        w.write_string(&node_listpack(&node)?)?;
        written += 1;
    }
    if written != count {
        return Err(invalid("stream node iterator shorter than its len()"));
    }
    debug_assert_eq!(live, meta.length, "stream length is not its live entries");
    w.write_len(meta.length)?;
    write_id(w, meta.last_id)?;
    write_id(w, meta.first_id)?;
    write_id(w, meta.max_deleted_id)?;
    w.write_len(meta.entries_added)?;

    w.write_len(groups.len() as u64)?;
    for g in sorted_refs(groups, |g| &g.name[..]) {
        w.write_string(&g.name)?;
        write_id(w, g.last_id)?;
        w.write_len(g.entries_read as u64)?;
        let pel = sorted_refs(&g.pending, |p| p.id);
        w.write_len(pel.len() as u64)?;
        for p in &pel {
            w.write_raw(&p.id.to_be_bytes())?;
            w.write_millis(p.delivery_time as i64)?;
            w.write_len(p.delivery_count)?;
        }
        w.write_len(g.consumers.len() as u64)?;
        for c in sorted_refs(&g.consumers, |c| &c.name[..]) {
            w.write_string(&c.name)?;
            w.write_millis(c.seen_time as i64)?;
            w.write_len(c.pending.len() as u64)?;
            for id in sorted_refs(&c.pending, |id| *id) {
                debug_assert!(
                    pel.binary_search_by_key(id, |p| p.id).is_ok(),
                    "consumer pending ID {id:?} not in the group PEL"
                );
                w.write_raw(&id.to_be_bytes())?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// Field names copied into SAMEFIELDS entries may total this many times the input left when
/// reading started (plus [`CLONE_FLOOR`]): a node stores its master field names once, the
/// image once per entry, so without a cap a small payload (long names, many one-byte
/// values) could demand unbounded memory.
pub const CLONE_FACTOR: usize = 64;
/// See [`CLONE_FACTOR`].
pub const CLONE_FLOOR: usize = 16 << 20;

fn corrupt(at: u64, msg: &'static str) -> RdbError {
    RdbError::new(at, RdbErrorKind::Other(msg))
}

/// Capacity for `n` items each taking at least `min_bytes` of the input left.
fn cap(n: u64, r: &Reader<'_>, min_bytes: usize) -> usize {
    n.min((r.remaining() / min_bytes.max(1)) as u64) as usize
}

fn read_id(r: &mut Reader<'_>) -> Result<Id> {
    Ok(Id {
        ms: r.read_plain_len()?,
        seq: r.read_plain_len()?,
    })
}

fn read_raw_id(r: &mut Reader<'_>) -> Result<Id> {
    let b = r.read_bytes(16)?;
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ok(Id::from_be_bytes(&a))
}

/// Walks the elements of a node listpack.
struct Elems<'a, 'b> {
    items: &'b [PackedEntry<'a>],
    pos: usize,
}

impl<'a> Elems<'a, '_> {
    fn left(&self) -> usize {
        self.items.len() - self.pos
    }

    fn next(&mut self) -> Option<PackedEntry<'a>> {
        let e = self.items.get(self.pos).copied();
        self.pos += 1;
        e
    }

    /// An integer element (`lpGetIntegerIfValid`: integer encodings, or strings that are
    /// canonical integers).
    fn int(&mut self) -> std::result::Result<i64, &'static str> {
        self.next()
            .ok_or("stream listpack ends inside an entry")?
            .as_i64()
            .ok_or("stream listpack element is not an integer")
    }

    /// A count of following elements: at least 0, at most what is left.
    fn count(&mut self) -> std::result::Result<usize, &'static str> {
        let n = self.int()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.left())
            .ok_or("bad field count in stream listpack")
    }

    fn bytes(&mut self) -> std::result::Result<Vec<u8>, &'static str> {
        Ok(self
            .next()
            .ok_or("stream listpack ends inside an entry")?
            .to_bytes()
            .into_owned())
    }
}

/// Decodes and validates one node listpack (`streamValidateListpackIntegrity` with deep
/// checks, plus the ID rules of [`NodeImage`]). `last_live` is the last live ID seen in the
/// earlier nodes; `budget` the field-name bytes still allowed to be copied.
fn decode_node(
    master_id: Id,
    lp: &[u8],
    last_live: &mut Option<Id>,
    budget: &mut usize,
) -> std::result::Result<NodeImage, RdbErrorKind> {
    let items = listpack::decode(lp).map_err(RdbErrorKind::BadListpack)?;
    let other = RdbErrorKind::Other;
    if items.is_empty() {
        return Err(other("empty listpack inside stream"));
    }
    let mut el = Elems {
        items: &items,
        pos: 0,
    };
    let live = el.int().map_err(other)?;
    let deleted = el.int().map_err(other)?;
    if live < 0 || deleted < 0 {
        return Err(other("negative entry count in stream listpack"));
    }
    let nf = el.count().map_err(other)?;
    let mut master_fields = Vec::with_capacity(nf);
    let mut names_len = 0usize;
    for _ in 0..nf {
        let f = el.bytes().map_err(other)?;
        names_len += f.len();
        master_fields.push(f);
    }
    if el.int().map_err(other)? != 0 {
        return Err(other("stream master entry not terminated by 0"));
    }
    // Every entry takes at least 4 elements (flags, ms, seq, lp-count).
    let total = live
        .checked_add(deleted)
        .and_then(|t| usize::try_from(t).ok())
        .filter(|&t| t <= el.left() / 4)
        .ok_or(other(
            "stream listpack entry count larger than the listpack",
        ))?;
    let mut entries = Vec::with_capacity(total);
    let (mut n_live, mut n_deleted) = (0i64, 0i64);
    for i in 0..total {
        let flags = el.int().map_err(other)?;
        if flags & !(FLAG_DELETED | FLAG_SAMEFIELDS) != 0 {
            return Err(other("unknown stream entry flags"));
        }
        let ms_diff = el.int().map_err(other)?;
        let seq_diff = el.int().map_err(other)?;
        let id = Id {
            ms: master_id.ms.wrapping_add(ms_diff as u64),
            seq: master_id.seq.wrapping_add(seq_diff as u64),
        };
        let same = flags & FLAG_SAMEFIELDS != 0;
        let (n, lp_count) = if same {
            (nf, nf + 3)
        } else {
            let n = el.count().map_err(other)?;
            (n, 2 * n + 4)
        };
        if n > el.left() {
            return Err(other("stream entry values overrun the listpack"));
        }
        let mut fields = Vec::with_capacity(n);
        if same {
            *budget = budget.checked_sub(names_len).ok_or(other(
                "stream field names expand beyond the input size bound",
            ))?;
            for name in &master_fields {
                fields.push((name.clone(), el.bytes().map_err(other)?));
            }
        } else {
            for _ in 0..n {
                let f = el.bytes().map_err(other)?;
                let v = el.bytes().map_err(other)?;
                fields.push((f, v));
            }
        }
        if el.int().map_err(other)? != lp_count as i64 {
            return Err(other("bad lp-count in stream entry"));
        }
        if i == 0 {
            if id != master_id {
                return Err(other("stream node master ID differs from its first entry"));
            }
        } else if id <= master_id {
            return Err(other("stream entry ID not above its node's master ID"));
        }
        let is_deleted = flags & FLAG_DELETED != 0;
        if is_deleted {
            n_deleted += 1;
        } else {
            n_live += 1;
            if last_live.is_some_and(|l| id <= l) {
                return Err(other("stream entry IDs not increasing"));
            }
            *last_live = Some(id);
        }
        entries.push(EntryImage {
            id,
            deleted: is_deleted,
            fields,
        });
    }
    if el.left() != 0 {
        return Err(other("extra elements after the last stream entry"));
    }
    if n_live != live || n_deleted != deleted {
        return Err(other("stream master entry counts do not match the entries"));
    }
    if live == 0 {
        return Err(other("stream node without live entries"));
    }
    Ok(NodeImage {
        master_id,
        master_fields,
        entries,
    })
}

/// Redis's `streamEstimateDistanceFromFirstEverEntry`: the entries-read counter a group whose
/// last delivered ID is `id` gets when it is not stored (type 15 payloads, `XGROUP CREATE`,
/// `XGROUP SETID` without `ENTRIESREAD`). [`INVALID_ENTRIES_READ`] when unknown.
pub fn estimate_entries_read(meta: &StreamMeta, id: Id) -> i64 {
    if meta.entries_added == 0 {
        return 0;
    }
    if meta.length == 0 && id <= meta.last_id {
        return meta.entries_added as i64;
    }
    if id == meta.last_id {
        return meta.entries_added as i64;
    } else if id > meta.last_id {
        return INVALID_ENTRIES_READ;
    }
    if meta.max_deleted_id.is_zero() || meta.max_deleted_id < meta.first_id {
        if id < meta.first_id {
            return meta.entries_added.wrapping_sub(meta.length) as i64;
        } else if id == meta.first_id {
            return meta.entries_added.wrapping_sub(meta.length).wrapping_add(1) as i64;
        }
    }
    INVALID_ENTRIES_READ
}

/// Reads the body of a stream object of type `ty` (15, 19 or 21; the type byte is already
/// read) and validates it deeply: every node listpack as `streamValidateListpackIntegrity`
/// (deep) plus the rules of [`NodeImage`], node keys of 16 bytes in increasing order, the
/// length equal to the live entries, the last ID not below the last live entry, no duplicate
/// groups, consumers or PEL entries, every consumer PEL ID in its group's PEL and owned by one
/// consumer only, every group PEL entry owned by a consumer.
///
/// For type 15, as Redis 7.0 loads it: `entries_added` = length, `max_deleted_id` = 0-0,
/// `first_id` = the first live entry (`Id::MAX` when there is none: `streamGetEdgeID`), and
/// each group's `entries_read` from [`estimate_entries_read`]. Consumers' `active_time` is
/// read from type 21 only.
///
/// Allocation stays within a constant multiple of the input left (see [`CLONE_FACTOR`]).
pub fn read_stream(r: &mut Reader<'_>, ty: RdbType) -> Result<StreamImage> {
    let version = match ty {
        RdbType::StreamListpacks => 1,
        RdbType::StreamListpacks2 => 2,
        RdbType::StreamListpacks3 => 3,
        _ => return Err(r.error(RdbErrorKind::Other("not a stream object type"))),
    };
    let mut budget = r
        .remaining()
        .saturating_mul(CLONE_FACTOR)
        .saturating_add(CLONE_FLOOR);

    // Nodes: each takes at least 17 (key) + 8 (smallest listpack) bytes.
    let n_nodes = r.read_plain_len()?;
    let mut nodes = Vec::with_capacity(cap(n_nodes, r, 25));
    let mut last_live: Option<Id> = None;
    let mut live_total: u64 = 0;
    for _ in 0..n_nodes {
        let at = r.offset();
        let key = r.read_string()?;
        let key: &[u8; 16] = key[..]
            .try_into()
            .map_err(|_| corrupt(at, "stream node key is not the size of a stream ID"))?;
        let master_id = Id::from_be_bytes(key);
        if let Some(prev) = nodes.last().map(|n: &NodeImage| n.master_id) {
            if master_id == prev {
                return Err(corrupt(at, "stream listpack re-added with existing key"));
            }
            if master_id < prev {
                return Err(corrupt(at, "stream nodes out of order"));
            }
        }
        let at = r.offset();
        let lp = r.read_string()?;
        let node = decode_node(master_id, &lp, &mut last_live, &mut budget)
            .map_err(|k| RdbError::new(at, k))?;
        live_total += node.entries.iter().filter(|e| !e.deleted).count() as u64;
        nodes.push(node);
    }

    let at = r.offset();
    let length = r.read_plain_len()?;
    let last_id = read_id(r)?;
    if length != live_total {
        return Err(corrupt(at, "stream length inconsistent with its entries"));
    }
    if last_live.is_some_and(|l| last_id < l) {
        return Err(corrupt(at, "stream last ID below its last entry"));
    }
    let meta = if version >= 2 {
        let first_id = read_id(r)?;
        let max_deleted_id = read_id(r)?;
        let entries_added = r.read_plain_len()?;
        StreamMeta {
            length,
            last_id,
            first_id,
            max_deleted_id,
            entries_added,
        }
    } else {
        let first_id = nodes
            .iter()
            .flat_map(|n| &n.entries)
            .find(|e| !e.deleted)
            .map_or(Id::MAX, |e| e.id);
        StreamMeta {
            length,
            last_id,
            first_id,
            max_deleted_id: Id::MIN,
            entries_added: length,
        }
    };

    // Groups: at least name (1) + last ID (2) + PEL count (1) + consumer count (1).
    let n_groups = r.read_plain_len()?;
    let mut groups = Vec::with_capacity(cap(n_groups, r, 5));
    for _ in 0..n_groups {
        groups.push(read_group(r, version, &meta)?);
    }
    let at = r.offset();
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    if groups.windows(2).any(|w| w[0].name == w[1].name) {
        return Err(corrupt(at, "duplicated consumer group name"));
    }
    Ok(StreamImage {
        nodes,
        meta,
        groups,
    })
}

fn read_group(r: &mut Reader<'_>, version: u8, meta: &StreamMeta) -> Result<GroupImage> {
    let name = r.read_string_vec()?;
    let last_id = read_id(r)?;
    let entries_read = if version >= 2 {
        r.read_plain_len()? as i64
    } else {
        estimate_entries_read(meta, last_id)
    };

    // Global PEL: 16-byte ID + 8-byte time + a length.
    let at = r.offset();
    let n = r.read_plain_len()?;
    let mut pending = Vec::with_capacity(cap(n, r, 25));
    for _ in 0..n {
        let id = read_raw_id(r)?;
        let delivery_time = r.read_millis()? as u64;
        let delivery_count = r.read_plain_len()?;
        pending.push(PendingImage {
            id,
            delivery_time,
            delivery_count,
        });
    }
    if !pending.windows(2).all(|w| w[0].id < w[1].id) {
        pending.sort_by_key(|p| p.id);
        if pending.windows(2).any(|w| w[0].id == w[1].id) {
            return Err(corrupt(
                at,
                "duplicated global PEL entry loading stream consumer group",
            ));
        }
    }

    let mut owned = vec![false; pending.len()];
    let n = r.read_plain_len()?;
    // Name (1) + seen time (8) + PEL count (1).
    let mut consumers = Vec::with_capacity(cap(n, r, 10));
    for _ in 0..n {
        let name = r.read_string_vec()?;
        let seen_time = r.read_millis()? as u64;
        let active_time = if version >= 3 {
            Some(r.read_millis()? as u64)
        } else {
            None
        };
        let m = r.read_plain_len()?;
        let mut ids = Vec::with_capacity(cap(m, r, 16));
        for _ in 0..m {
            let at = r.offset();
            let id = read_raw_id(r)?;
            let i = pending
                .binary_search_by_key(&id, |p| p.id)
                .map_err(|_| corrupt(at, "consumer entry not found in group global PEL"))?;
            if std::mem::replace(&mut owned[i], true) {
                return Err(corrupt(
                    at,
                    "stream consumer PEL entry already has a consumer assigned",
                ));
            }
            ids.push(id);
        }
        ids.sort_unstable();
        consumers.push(ConsumerImage {
            name,
            seen_time,
            active_time,
            pending: ids,
        });
    }
    let at = r.offset();
    if owned.iter().any(|o| !o) {
        return Err(corrupt(at, "stream CG PEL entry without consumer"));
    }
    consumers.sort_by(|a, b| a.name.cmp(&b.name));
    if consumers.windows(2).any(|w| w[0].name == w[1].name) {
        return Err(corrupt(at, "duplicate stream consumer detected"));
    }
    Ok(GroupImage {
        name,
        last_id,
        entries_read,
        pending,
        consumers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpsize::*;
    use crate::rdb::wire::{check_dump_payload, dump_payload};

    // DUMP payloads from a real redis-server 7.0.15 (`redis-server --port 0 --unixsocket
    // /tmp/sfx/r.sock --save ''`), built with these commands (through a raw RESP socket client;
    // `DUMP` replies hex-encoded). `*_RAW` were dumped after `CONFIG SET rdbcompression no`.
    //
    // f1: XADD f1 1-1 a 123 b -5 / XADD f1 1-2 a 007 b hello / XADD f1 2-0 c x 12 "" /
    //     XADD f1 2-1 a 1
    // f2: CONFIG SET stream-node-max-entries 3; XADD f2 {i}-0 f v{i} for i in 1..=10;
    //     XDEL f2 2-0; XDEL f2 4-0; XDEL f2 7-0 8-0 9-0; XDEL f2 1-0
    // f3: (node max entries 100) XADD f3 100-{i} name n{i} n {i*1000} for i in 1..=5;
    //     XGROUP CREATE f3 grp-a 0; XGROUP CREATE f3 grp-b $; XGROUP CREATE f3 7 0;
    //     XREADGROUP GROUP grp-a c1 COUNT 2 STREAMS f3 >;
    //     XREADGROUP GROUP grp-a c2 COUNT 2 STREAMS f3 >; XACK f3 grp-a 100-1;
    //     XCLAIM f3 grp-a c2 0 100-2; XGROUP CREATECONSUMER f3 grp-b idle;
    //     XREADGROUP GROUP 7 x STREAMS f3 >; XDEL f3 100-4
    // f4: XADD f4 1-0 a 1; XADD f4 5-0 a 2; XDEL f4 5-0; XSETID f4 2-0; XADD f4 3-0 a 3
    //     (a tombstone above a later live entry in the same node)
    // f5: XGROUP CREATE f5 g $ MKSTREAM
    // f5b: XADD f5b 1-0 a 1; XDEL f5b 1-0
    // f6: XADD f6 1700000000000-0 k <300 x>; XADD f6 1700000000000-5 k <5000 chars
    //     chr(33 + (i*7919) % 90)>; XADD f6 1700000123456-0 k 9223372036854775807
    //     other -9223372036854775808; XADD f6 1700000123456-70000 k 3000000000
    // f6b: XADD f6b 1-0 a 1; XADD f6b 18446744073709551614-5 a 2 (ms-diff wraps to -3)
    // f7: CONFIG SET stream-node-max-entries 0; CONFIG SET stream-node-max-bytes 120;
    //     for i in 1..30: XADD f7 {i}-{i*i} fld <'v' * ((i*13) % 40)> (g, or fld2 when i%3==0)
    //     {i*i*i}
    // f8: CONFIG SET stream-node-max-entries 200; CONFIG SET stream-node-max-bytes 0;
    //     XADD f8 {i*1000}-0 t {i} for i in 1..=150; XDEL f8 {i*1000}-0 for i in 2..=139
    const F1: &str = concat!(
        "13011000000000000000010000000000000001c34053405a115a00000022000401000102018161028162024009000020",
        "01057b01dffb02052016100001010183303037048568656c6c6f0605601102dfff0220310963028178020c0180010860",
        "14402a20450401010601ff0402010101000004000a00e70d6557b3f9d9d8",
    );
    const F2: &str = concat!(
        "130310000000000000000100000000000000003636000000140001010201010181660200010301000100018276310304",
        "01030101010001827632030401020102010001827633030401ff1000000000000000040000000000000000c32f360736",
        "0000001400020140000781660200010301002001058276340304014016400b0035600b0002600b0036200b00ff100000",
        "00000000000a00000000000000001f1f0000000a00010100010101816602000102010001000183763130040401ff040a",
        "00030009000a000a002c9608ca93f2363e",
    );
    const F3: &str = concat!(
        "13011000000000000000640000000000000001c3405d406415640000002400040101010201846e616d6505816e020020",
        "0c0000200107826e3103c3e80205600e0001200e033203c7d0a00e0002200e033303cbb8200e0003202a0003200e0334",
        "03cfa0200e403b0004200e083503f18813030501ff044064054064014064040503c00740640505050000000000000064",
        "000000000000000134782e18a2010000010000000000000064000000000000000234782e18a201000001000000000000",
        "0064000000000000000334782e18a2010000010000000000000064000000000000000434782e18a20100000100000000",
        "00000064000000000000000534782e18a20100000101017834782e18a201000005000000000000006400000000000000",
        "010000000000000064000000000000000200000000000000640000000000000003000000000000006400000000000000",
        "0400000000000000640000000000000005056772702d6140640404030000000000000064000000000000000234782e18",
        "a2010000020000000000000064000000000000000334782e18a201000001000000000000006400000000000000043478",
        "2e18a2010000010202633134782e18a20100000002633234782e18a20100000300000000000000640000000000000002",
        "0000000000000064000000000000000300000000000000640000000000000004056772702d6240640581ffffffffffff",
        "ffff00010469646c6534782e18a2010000000a0093cd811a4913adc8",
    );
    const F4: &str = concat!(
        "13011000000000000000010000000000000000c32b300730000000140002014000078161020001020100200104010104",
        "01032003400f000420134015200f0101ff0203000100050003000a006b28267bd97c79f7",
    );
    const F5: &str = "13000000000000000000010167000081ffffffffffffffff00000a00a01a953dfb9cddde";
    const F5B: &str = "13000001000000010001000a007788227e968c8dbc";
    const F6: &str = concat!(
        "1303100000018bcfe568000000000000000000c327414a074a0100000a00010120020601816b02000102200a040001e1",
        "2c78e0ff00e01a000402ae0401ff100000018bcfe568000000000000000005c340b853a907a91300000a000101200206",
        "01816b02000102200a030001f08820171f217a797877767574737271706f6e6d6c6b6a696867666564636261605f5e5d",
        "5c1f5b5a595857565554535251504f4e4d4c4b4a494847464544434241403f3e3d3c193b3a393837363534333231302f",
        "2e2d2c2b2a2928272625242322e0ff59e1ff0de2ff1be3ff29e4ff37e5ff45e6ff53e7ff61e8ff6fe9ff7deaff8bebff",
        "99ecffa7edffb5eeffc3efff77efff77efff77ef957704278d0401ff100000018bcfe74a400000000000000000c34048",
        "404f154f0000001300020100010201816b02856f7468657206400d0000200101f4ff8000027f09f42027400002800905",
        "2017070001f27011010401403204f4005ed0b2401a03090601ff04810000018bcfe74a408000011170810000018bcfe5",
        "680000000004000a00b364d5407718433c",
    );
    const F6B: &str = concat!(
        "1301100000000000000001000000000000000027270000000f0002010001010181610200010201000100010101040102",
        "01dffd02050102010401ff0281fffffffffffffffe050100000002000a006e65db049adece02",
    );
    const F7: &str = concat!(
        "130e1000000000000000010000000000000001c33b40561356000000120002010001020183666c6404816702400b0000",
        "2001018d76e00300030e010105202404010103019ae00317e00500011b08202500ff1000000000000000030000000000",
        "000009c34040406f116f000000150002010001020183666c6404842004013205400e0000200101a776e01d0003281b01",
        "05202e02010107c047008ce00338080d81670240010801ff1000000000000000050000000000000019c34044407c137c",
        "000000150002010001020183666c6404816702400b00002001019976e00f00031a7d010520200201010bc03600a6e00f",
        "2ae005000127842063073205c0d8020801ff1000000000000000070000000000000031c33d4054135400000012000201",
        "0001020183666c6404816702400b00002001018b76e00100040cc157020520230401010f0198e00116e005000219c200",
        "202400ff1000000000000000090000000000000051c34042406d116d000000150002010001020183666c640484200401",
        "3205400e0000200101a576e01b000426c2d90205202d02010113c046008ae00137090b816702c3e8020801ff10000000",
        "000000000b0000000000000079c3404540791379000000150002010001020183666c6404816702400b00002001019776",
        "e00d000418c5330205201f02010117c03500a4e00d29e005000125842060073205c6c0020801ff10000000000000000d",
        "00000000000000a9c33b40501350000000120002010001020183666c6404816702400b00002001018976c000040ac895",
        "020520210401011b0196c014e005000217cab8202200ff10000000000000000f00000000000000e1c34042406a116a00",
        "0000150002010001020183666c6404842004013205400e0000200101a376e019000424cd2f0205202b0201011fc04400",
        "88c0350a09816702f10010030801ff1000000000000000110000000000000121c3404740771377000000150002010001",
        "020183666c6404816702400b00002001019576e00b000516f131130305201e02010123c03400a2e00b28e00500012384",
        "205d083205f1c816030801ff1000000000000000130000000000000169c33d404e134e00000012000201000102018366",
        "6c6404816702400b0000200101877680000508f1cb1a030520200401012701948013e005000315f1401f202100ff1000",
        "0000000000001500000000000001b9c3404340671167000000150002010001020183666c6404842004013205400e0000",
        "200101a176e017000522f12d240305202a0201012bc043008680340a07816702f19829030801ff100000000000000017",
        "0000000000000211c3404740731373000000150002010001020183666c6404816702400b00002001019376e009000514",
        "f1872f0305201c0201012fc03200a0e00926e005000121842059083205f10036030801ff100000000000000019000000",
        "0000000271c3405a408413840000001b0003010001020183666c6404816702400b0000200101857640000506f1093d03",
        "05201e0401013301924011e005000313f1a844201f4034006820256044009fe00522e00800012084206a083205f1e34c",
        "030801ff10000000000000001c0000000000000310c33d40481348000000120002010001020183666c6404816702400b",
        "0000200101847620000505f1c0550305201d0401013901912010e005000312f1455f201e00ff1d1d4349010100001d00",
        "0a00e73f825187bd2f62",
    );
    const F8: &str = concat!(
        "13011000000000000003e80000000000000000c3457f47a114a1070000f3020c01c08a02010181740200010201002001",
        "07010104010301c3e86010400a01c7d0200a0003600a01cbb8200a00042001030301cfa0200a0005600a06f188130300",
        "0106800b017017200b0007800b01581b200b0008800b01401f200b0009800b012823200b000a800b011027200b000b80",
        "0b01f82a200b000c800b01e02e200b000d800b01c832200b000e800b01b036200b000f800b01983a200b0010800b0180",
        "3e200b0011800b016842200b0012800b015046200b0013800b01384a200b0014800b01204e200b0015800b010852200b",
        "0016800b01f055200b0017800b01d859200b0018800b01c05d200b0019800b01a861200b001a800b019065200b001b80",
        "0b017869200b001c800b01606d200b001d800b014871200b001e800b013075200b001f800b011879200b0020800b0100",
        "7d200b0021600b07f2e8800004000122800c01d084400c0023800c01b888400c0024800c01a08c400c0025800c018890",
        "400c0026800c017094400c0027800c015898400c0028800c01409c400c0029800c0128a0400c002a800c0110a4400c00",
        "2b800c01f8a7400c002c800c01e0ab400c002d800c01c8af400c002e800c01b0b3400c002f800c0198b7400c0030800c",
        "0180bb400c0031800c0168bf400c0032800c0150c3400c0033800c0138c7400c0034800c0120cb400c0035800c0108cf",
        "400c0036800c01f0d2400c0037800c01d8d6400c0038800c01c0da400c0039800c01a8de400c003a800c0190e2400c00",
        "3b800c0178e6400c003c800c0160ea400c003d800c0148ee400c003e800c0130f2400c003f800c0118f6400c0040800c",
        "0100fa400c0041800c01e8fd400c0042800c00d0233002000143800c00b8231102000144800c00a022ee02000145800c",
        "008822cb02000146800c007022a802000147800c0058228502000148800c0040226202000149800c0028223f0200014a",
        "800c0010221c0200014b800c00f822020200014c800c00e021db0200014d800c00c821b40200014e800c00b0218d0200",
        "014f800c0098216602000150800c0080213f02000151800c0068211802000152800c005020f102000153800c003820ca",
        "02000154800c002020a302000155800c0008207c02000156800c00f0206202000157800c00d8203b02000158800c00c0",
        "201402000159800c01a85b400c005a800c01905f400c2011244c02f27863400c005c800c016067400c005d800c01486b",
        "400c005e800c01306f400c20384033011873400c0060800c010077400c0061800c01e87a400c0062800c01d07e400c20",
        "5f403301b882400c0064800c01a086400c0065800c01888a400c0066800c01708e400c20864033015892400c0068800c",
        "014096400c0069800c01289a400c006a800c01109e400c20ad403301f8a1400c006c800c01e0a5400c006d800c01c8a9",
        "400c006e800c01b0ad400c20d440330198b1400c0070800c0180b5400c0071800c0168b9400c0072800c0150bd400c20",
        "fb40330138c1400c0074800c0120c5400c0075800c0108c9400c0076800c01f0cc400c2122403301d8d0400c0078800c",
        "01c0d4400c0079800c01a8d8400c213c40260190dc400c007b800c0178e0400c007c800c0160e4400c007d800c0148e8",
        "400c216340330130ec400c007f800c0118f0400c02c08002601a0100f4600d0081800d01e8f7600d0082800d01d0fb60",
        "0d0083800d01b8ff600d0084800d02a00302224001c085800d018807600d0086800d01700b600d0087800d01580f600d",
        "0088800d014013600d0089800d012817600d008a800d01101b600d008b200d000221ab001e600d008c800d01e022600d",
        "008d800d01c826600d008e800d01b02a600d008f800d01982e600d0090800d018032600d0091800d016836600d009280",
        "0d01503a600d0093800d01383e600d0094800d012042600d0095800d010846600d0096200d00ff0c80000249f00043e8",
        "008000021ef8004096000a00ee2baae1d586be7c",
    );
    const F1_RAW: &str = concat!(
        "13011000000000000000010000000000000001405a5a000000220004010001020181610281620200010201000100017b",
        "01dffb02050102010001010183303037048568656c6c6f06050100010101dfff0202018163028178020c018001080100",
        "0101010001010181610201010601ff0402010101000004000a00b82cceb5dc7ae1f9",
    );
    const F2_RAW: &str = concat!(
        "130310000000000000000100000000000000003636000000140001010201010181660200010301000100018276310304",
        "01030101010001827632030401020102010001827633030401ff10000000000000000400000000000000003636000000",
        "140002010101010181660200010301000100018276340304010201010100018276350304010201020100018276360304",
        "01ff10000000000000000a00000000000000001f1f0000000a0001010001010181660200010201000100018376313004",
        "0401ff040a00030009000a000a00e7bc5dc14f5e06da",
    );
    const F3_RAW: &str = concat!(
        "130110000000000000006400000000000000014064640000002400040101010201846e616d6505816e02000102010001",
        "0001826e3103c3e8020501020100010101826e3203c7d0020501020100010201826e3303cbb802050103010001030182",
        "6e3403cfa0020501020100010401826e3503f18813030501ff044064054064014064040503c007406405050500000000",
        "00000064000000000000000134782e18a2010000010000000000000064000000000000000234782e18a2010000010000",
        "000000000064000000000000000334782e18a2010000010000000000000064000000000000000434782e18a201000001",
        "0000000000000064000000000000000534782e18a20100000101017834782e18a2010000050000000000000064000000",
        "000000000100000000000000640000000000000002000000000000006400000000000000030000000000000064000000",
        "000000000400000000000000640000000000000005056772702d61406404040300000000000000640000000000000002",
        "34782e18a2010000020000000000000064000000000000000334782e18a2010000010000000000000064000000000000",
        "000434782e18a2010000010202633134782e18a20100000002633234782e18a201000003000000000000006400000000",
        "000000020000000000000064000000000000000300000000000000640000000000000004056772702d6240640581ffff",
        "ffffffffffff00010469646c6534782e18a2010000000a000f7857f6a5c9a953",
    );
    const F4_RAW: &str = concat!(
        "130110000000000000000100000000000000003030000000140002010101010181610200010201000100010101040103",
        "01040100010201040102010201000103010401ff0203000100050003000a00e13fbbe8c39891bb",
    );

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The body of a DUMP payload of a type-19 object.
    fn body_of(payload_hex: &str) -> Vec<u8> {
        let p = unhex(payload_hex);
        let obj = check_dump_payload(&p).unwrap();
        assert_eq!(obj[0], RdbType::StreamListpacks2 as u8);
        obj[1..].to_vec()
    }

    fn read_body(body: &[u8], ty: RdbType) -> Result<StreamImage> {
        let mut r = Reader::new(body);
        let img = read_stream(&mut r, ty)?;
        if !r.is_at_end() {
            return Err(r.error(RdbErrorKind::Other("trailing bytes")));
        }
        Ok(img)
    }

    fn write_body(img: &StreamImage, compression: bool) -> Vec<u8> {
        let mut w = Writer::new(Vec::new());
        w.set_compression(compression);
        write_stream(
            &mut w,
            img.nodes.clone().into_iter(),
            &img.meta,
            &img.groups,
        )
        .unwrap();
        w.into_inner()
    }

    type SplitBody = (Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>);

    /// A body split into its node keys and listpacks (decompressed) and the bytes after them.
    fn split_body(body: &[u8]) -> SplitBody {
        let mut r = Reader::new(body);
        let n = r.read_plain_len().unwrap();
        let nodes = (0..n)
            .map(|_| (r.read_string_vec().unwrap(), r.read_string_vec().unwrap()))
            .collect();
        (nodes, body[r.pos()..].to_vec())
    }

    fn id(ms: u64, seq: u64) -> Id {
        Id::new(ms, seq)
    }

    fn fv(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs
            .iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    fn entry(ms: u64, seq: u64, deleted: bool, pairs: &[(&str, &str)]) -> EntryImage {
        EntryImage {
            id: id(ms, seq),
            deleted,
            fields: fv(pairs),
        }
    }

    const ALL: [(&str, &str); 10] = [
        ("f1", F1),
        ("f2", F2),
        ("f3", F3),
        ("f4", F4),
        ("f5", F5),
        ("f5b", F5B),
        ("f6", F6),
        ("f6b", F6B),
        ("f7", F7),
        ("f8", F8),
    ];

    #[test]
    fn redis_fixtures_decode_and_rewrite_identically() {
        for (name, hex) in ALL {
            let body = body_of(hex);
            let img = read_body(&body, RdbType::StreamListpacks2)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            // Our LZF output differs from liblzf's, so compare the decompressed strings and,
            // byte for byte, everything else.
            let ours = write_body(&img, true);
            assert_eq!(split_body(&ours), split_body(&body), "{name}");
            assert_eq!(read_body(&ours, RdbType::StreamListpacks2).unwrap(), img);
            let plain = write_body(&img, false);
            assert_eq!(split_body(&plain), split_body(&body), "{name}");
        }
        for (name, hex) in [
            ("f1", F1_RAW),
            ("f2", F2_RAW),
            ("f3", F3_RAW),
            ("f4", F4_RAW),
        ] {
            let body = body_of(hex);
            let img = read_body(&body, RdbType::StreamListpacks2).unwrap();
            assert_eq!(write_body(&img, false), body, "{name}");
        }
    }

    #[test]
    fn redis_fixture_contents() {
        let get = |hex| read_body(&body_of(hex), RdbType::StreamListpacks2).unwrap();

        let f1 = get(F1);
        assert_eq!(
            f1.nodes,
            vec![NodeImage {
                master_id: id(1, 1),
                master_fields: vec![b"a".to_vec(), b"b".to_vec()],
                entries: vec![
                    entry(1, 1, false, &[("a", "123"), ("b", "-5")]),
                    entry(1, 2, false, &[("a", "007"), ("b", "hello")]),
                    entry(2, 0, false, &[("c", "x"), ("12", "")]),
                    entry(2, 1, false, &[("a", "1")]),
                ],
            }]
        );
        assert_eq!(
            f1.meta,
            StreamMeta {
                length: 4,
                last_id: id(2, 1),
                first_id: id(1, 1),
                max_deleted_id: Id::MIN,
                entries_added: 4,
            }
        );
        assert!(f1.groups.is_empty());

        let f2 = get(F2);
        let e = |i: u64, del: bool| entry(i, 0, del, &[("f", &format!("v{i}"))]);
        let node = |m: u64, entries| NodeImage {
            master_id: id(m, 0),
            master_fields: vec![b"f".to_vec()],
            entries,
        };
        assert_eq!(
            f2.nodes,
            vec![
                node(1, vec![e(1, true), e(2, true), e(3, false)]),
                node(4, vec![e(4, true), e(5, false), e(6, false)]),
                node(10, vec![e(10, false)]),
            ]
        );
        assert_eq!(
            f2.meta,
            StreamMeta {
                length: 4,
                last_id: id(10, 0),
                first_id: id(3, 0),
                max_deleted_id: id(9, 0),
                entries_added: 10,
            }
        );

        let f3 = get(F3);
        assert_eq!(f3.nodes.len(), 1);
        assert_eq!(f3.nodes[0].entries.len(), 5);
        assert!(f3.nodes[0].entries[3].deleted);
        assert_eq!(
            f3.nodes[0].entries[4].fields,
            fv(&[("name", "n5"), ("n", "5000")])
        );
        assert_eq!(f3.meta.max_deleted_id, id(100, 4));
        let names: Vec<&[u8]> = f3.groups.iter().map(|g| &g.name[..]).collect();
        assert_eq!(names, [&b"7"[..], b"grp-a", b"grp-b"]);
        let (g7, ga, gb) = (&f3.groups[0], &f3.groups[1], &f3.groups[2]);
        assert_eq!((g7.last_id, g7.entries_read), (id(100, 5), 5));
        assert_eq!(g7.pending.len(), 5);
        assert_eq!(g7.consumers.len(), 1);
        assert_eq!(g7.consumers[0].name, b"x");
        assert_eq!(g7.consumers[0].pending.len(), 5);
        assert_eq!((ga.last_id, ga.entries_read), (id(100, 4), 4));
        let pel: Vec<(Id, u64)> = ga
            .pending
            .iter()
            .map(|p| (p.id, p.delivery_count))
            .collect();
        assert_eq!(pel, [(id(100, 2), 2), (id(100, 3), 1), (id(100, 4), 1)]);
        assert!(ga
            .pending
            .iter()
            .all(|p| p.delivery_time > 1_600_000_000_000));
        let cons: Vec<(&[u8], &[Id])> = ga
            .consumers
            .iter()
            .map(|c| (&c.name[..], &c.pending[..]))
            .collect();
        assert_eq!(
            cons,
            [
                (&b"c1"[..], &[][..]),
                (b"c2", &[id(100, 2), id(100, 3), id(100, 4)][..])
            ]
        );
        assert!(ga.consumers.iter().all(|c| c.active_time.is_none()));
        assert_eq!(
            (gb.last_id, gb.entries_read),
            (id(100, 5), INVALID_ENTRIES_READ)
        );
        assert!(gb.pending.is_empty());
        assert_eq!(gb.consumers.len(), 1);
        assert_eq!(gb.consumers[0].name, b"idle");

        let f4 = get(F4);
        assert_eq!(
            f4.nodes[0].entries,
            vec![
                entry(1, 0, false, &[("a", "1")]),
                entry(5, 0, true, &[("a", "2")]),
                entry(3, 0, false, &[("a", "3")]),
            ]
        );
        assert_eq!(f4.meta.last_id, id(3, 0));
        assert_eq!(f4.meta.max_deleted_id, id(5, 0));

        let f5 = get(F5);
        assert!(f5.nodes.is_empty());
        assert_eq!(f5.meta, StreamMeta::default());
        assert_eq!(f5.groups.len(), 1);
        assert_eq!(f5.groups[0].entries_read, INVALID_ENTRIES_READ);

        let f5b = get(F5B);
        assert!(f5b.nodes.is_empty());
        assert_eq!(
            f5b.meta,
            StreamMeta {
                length: 0,
                last_id: id(1, 0),
                first_id: Id::MIN,
                max_deleted_id: id(1, 0),
                entries_added: 1,
            }
        );

        let f6 = get(F6);
        let all: Vec<&EntryImage> = f6.nodes.iter().flat_map(|n| &n.entries).collect();
        assert_eq!(all.len(), 4);
        assert_eq!(all[0].fields[0].1, vec![b'x'; 300]);
        let long: Vec<u8> = (0..5000).map(|i| 33 + (i * 7919 % 90) as u8).collect();
        assert_eq!(all[1].fields[0].1, long);
        assert_eq!(
            all[2].fields,
            fv(&[
                ("k", "9223372036854775807"),
                ("other", "-9223372036854775808")
            ])
        );
        assert_eq!(all[3].id, id(1700000123456, 70000));
        assert_eq!(all[3].fields, fv(&[("k", "3000000000")]));

        let f6b = get(F6B);
        assert_eq!(f6b.nodes[0].entries[1].id, id(18446744073709551614, 5));

        let f8 = get(F8);
        assert_eq!(f8.nodes.len(), 1);
        let n = &f8.nodes[0];
        assert_eq!(n.entries.len(), 150);
        assert_eq!(n.entries.iter().filter(|e| e.deleted).count(), 138);
        assert_eq!(f8.meta.length, 12);
    }

    fn node_lp_bytes_by_formula(n: &NodeImage) -> usize {
        let names: Vec<&[u8]> = n.master_fields.iter().map(|f| &f[..]).collect();
        let deleted = n.entries.iter().filter(|e| e.deleted).count() as u64;
        let live = n.entries.len() as u64 - deleted;
        let mut total = redis_node_header_lp_bytes(live, deleted, &names);
        for e in &n.entries {
            let pairs: Vec<(&[u8], &[u8])> =
                e.fields.iter().map(|(f, v)| (&f[..], &v[..])).collect();
            total += redis_entry_lp_bytes(
                e.id.ms.wrapping_sub(n.master_id.ms) as i64,
                e.id.seq.wrapping_sub(n.master_id.seq) as i64,
                same_fields(&n.master_fields, &e.fields),
                &pairs,
            );
        }
        total
    }

    #[test]
    fn lp_sizes_match_redis_nodes() {
        for (name, hex) in ALL {
            let body = body_of(hex);
            let img = read_body(&body, RdbType::StreamListpacks2).unwrap();
            let (lps, _) = split_body(&body);
            assert_eq!(lps.len(), img.nodes.len());
            for ((_, lp), n) in lps.iter().zip(&img.nodes) {
                assert_eq!(node_lp_bytes_by_formula(n), lp.len(), "{name}");
            }
        }
        assert_eq!(redis_master_lp_bytes(&[b"f"]), 6 + 2 + 2 + 2 + 3 + 2 + 1);
        assert_eq!(
            redis_entry_lp_bytes(0, 0, true, &[(b"f", b"v1")]),
            2 + 2 + 2 + 4 + 2
        );
    }

    /// Replays the XADDs of a fixture (no deletions in between) through
    /// [`redis_needs_new_node`] and checks that the nodes are cut where Redis cut them.
    fn simulate_cuts(img: &StreamImage, max_bytes: usize, max_entries: u64) -> Vec<Id> {
        let mut masters = Vec::new();
        let mut tail: Option<(Vec<Vec<u8>>, Id, u64, usize)> = None; // fields, master, n, entries bytes
        for e in img.nodes.iter().flat_map(|n| &n.entries) {
            let raw: usize = e.fields.iter().map(|(f, v)| f.len() + v.len()).sum();
            let pairs: Vec<(&[u8], &[u8])> =
                e.fields.iter().map(|(f, v)| (&f[..], &v[..])).collect();
            let new = match &tail {
                None => true,
                Some((mf, _, n, eb)) => {
                    let names: Vec<&[u8]> = mf.iter().map(|f| &f[..]).collect();
                    let bytes = redis_node_header_lp_bytes(*n, 0, &names) + eb;
                    redis_needs_new_node(bytes, *n, raw, max_bytes, max_entries)
                }
            };
            if new {
                masters.push(e.id);
                let names: Vec<Vec<u8>> = e.fields.iter().map(|(f, _)| f.clone()).collect();
                let eb = redis_entry_lp_bytes(0, 0, true, &pairs);
                tail = Some((names, e.id, 1, eb));
            } else {
                let (mf, m, n, eb) = tail.as_mut().unwrap();
                *eb += redis_entry_lp_bytes(
                    e.id.ms.wrapping_sub(m.ms) as i64,
                    e.id.seq.wrapping_sub(m.seq) as i64,
                    same_fields(mf, &e.fields),
                    &pairs,
                );
                *n += 1;
            }
        }
        masters
    }

    #[test]
    fn node_cuts_match_redis() {
        let get = |hex| read_body(&body_of(hex), RdbType::StreamListpacks2).unwrap();
        let masters = |img: &StreamImage| img.nodes.iter().map(|n| n.master_id).collect::<Vec<_>>();
        let f7 = get(F7);
        assert_eq!(f7.nodes.len(), 14);
        assert_eq!(simulate_cuts(&f7, 120, 0), masters(&f7));
        let f6 = get(F6);
        assert_eq!(f6.nodes.len(), 3);
        assert_eq!(simulate_cuts(&f6, 4096, 100), masters(&f6));
        let f3 = get(F3);
        assert_eq!(simulate_cuts(&f3, 4096, 100), masters(&f3));
        let f2 = get(F2);
        // Node 7-0 went with XDEL; the cuts were made before.
        assert_eq!(simulate_cuts(&f2, 4096, 3), [id(1, 0), id(4, 0), id(10, 0)]);
        let f8 = get(F8);
        assert_eq!(simulate_cuts(&f8, 0, 200), masters(&f8));
        assert!(redis_needs_new_node(100, 5, 20, 120, 0));
        assert!(!redis_needs_new_node(100, 5, 19, 120, 0));
        assert!(redis_needs_new_node(10, 100, 1, 4096, 100));
        assert!(!redis_needs_new_node(10, 99, 1, 4096, 100));
        assert!(!redis_needs_new_node(1 << 29, u64::MAX, 1, 0, 0));
        assert!(redis_needs_new_node(1 << 30, 1, 0, 0, 0));
    }

    // -----------------------------------------------------------------------------------------
    // Constructed images.

    fn group(
        name: &str,
        last: Id,
        pending: &[(Id, u64, u64)],
        consumers: &[(&str, u64, &[Id])],
    ) -> GroupImage {
        GroupImage {
            name: name.as_bytes().to_vec(),
            last_id: last,
            entries_read: 3,
            pending: pending
                .iter()
                .map(|&(id, t, c)| PendingImage {
                    id,
                    delivery_time: t,
                    delivery_count: c,
                })
                .collect(),
            consumers: consumers
                .iter()
                .map(|&(n, t, ids)| ConsumerImage {
                    name: n.as_bytes().to_vec(),
                    seen_time: t,
                    active_time: None,
                    pending: ids.to_vec(),
                })
                .collect(),
        }
    }

    /// A stream with every feature: SAMEFIELDS and other fields, tombstones, integer-looking
    /// strings, long values, many nodes, groups with PELs and consumers.
    fn sample() -> StreamImage {
        let long = vec![b'L'; 5000];
        let mid: Vec<u8> = (0..300u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut nodes = vec![NodeImage {
            master_id: id(5, 0),
            master_fields: vec![b"a".to_vec(), b"b".to_vec()],
            entries: vec![
                entry(5, 0, true, &[("a", "123"), ("b", "-5")]),
                entry(5, 1, false, &[("a", "007"), ("b", "+1")]),
                entry(6, 0, false, &[("b", "x"), ("a", "y")]),
                entry(6, 9, true, &[("a", "1")]),
                EntryImage {
                    id: id(7, 3),
                    deleted: false,
                    fields: vec![
                        (b"12".to_vec(), long.clone()),
                        (mid.clone(), b"-0".to_vec()),
                        (b"".to_vec(), b"".to_vec()),
                    ],
                },
                entry(
                    1 << 40,
                    u64::MAX,
                    false,
                    &[("a", "9223372036854775808"), ("b", "-9223372036854775808")],
                ),
            ],
        }];
        let mut ms = 1u64 << 41;
        for n in 0..40u64 {
            let k = 1 + n % 7;
            let entries = (0..k)
                .map(|j| {
                    let f = if j % 3 == 2 { "other" } else { "f" };
                    entry(
                        ms + j * 1000,
                        j,
                        j == 0 && k > 1,
                        &[(f, &(j * 4096).to_string())],
                    )
                })
                .collect();
            nodes.push(NodeImage {
                master_id: id(ms, 0),
                master_fields: vec![b"f".to_vec()],
                entries,
            });
            ms += 1 << 20;
        }
        let live = nodes
            .iter()
            .flat_map(|n| &n.entries)
            .filter(|e| !e.deleted)
            .count() as u64;
        let meta = StreamMeta {
            length: live,
            last_id: id(ms, 7),
            first_id: id(5, 1),
            max_deleted_id: id(6, 9),
            entries_added: live + 100,
        };
        let groups = vec![
            group(
                "zeta",
                id(6, 0),
                &[
                    (id(5, 1), 1_700_000_000_000, 1),
                    (id(6, 0), 1_700_000_000_001, 3),
                    (id(1, 1), 7, 0),
                ],
                &[
                    ("bob", 1_700_000_000_002, &[id(6, 0)]),
                    ("alice", 42, &[id(5, 1), id(1, 1)]),
                    ("idle", 0, &[]),
                ],
            ),
            group("123", id(0, 0), &[], &[]),
            GroupImage {
                entries_read: INVALID_ENTRIES_READ,
                ..group("alpha", Id::MAX, &[], &[("c", 1, &[])])
            },
        ];
        StreamImage {
            nodes,
            meta,
            groups,
        }
    }

    /// What read_stream gives back for `img`: groups, consumers and PELs sorted.
    fn normalized(mut img: StreamImage) -> StreamImage {
        img.groups.sort_by(|a, b| a.name.cmp(&b.name));
        for g in &mut img.groups {
            g.pending.sort_by_key(|p| p.id);
            g.consumers.sort_by(|a, b| a.name.cmp(&b.name));
            for c in &mut g.consumers {
                c.pending.sort();
            }
        }
        img
    }

    #[test]
    fn roundtrip_constructed() {
        let img = sample();
        for compression in [false, true] {
            let body = write_body(&img, compression);
            let back = read_body(&body, RdbType::StreamListpacks2).unwrap();
            assert_eq!(back, normalized(img.clone()));
            assert_eq!(write_body(&back, compression), body);
        }
        // Entries with the master's names are SAMEFIELDS, others are not; the integer-looking
        // strings are integers in the listpack, the others strings.
        let lp = node_listpack(&img.nodes[0]).unwrap();
        let items = listpack::decode(&lp).unwrap();
        assert_eq!(
            &items[..9],
            &[
                PackedEntry::Int(4),
                PackedEntry::Int(2),
                PackedEntry::Int(2),
                PackedEntry::Str(b"a"),
                PackedEntry::Str(b"b"),
                PackedEntry::Int(0),
                PackedEntry::Int(FLAG_DELETED | FLAG_SAMEFIELDS),
                PackedEntry::Int(0),
                PackedEntry::Int(0),
            ]
        );
        assert_eq!(
            &items[9..12],
            &[
                PackedEntry::Int(123),
                PackedEntry::Int(-5),
                PackedEntry::Int(5)
            ]
        );
        assert_eq!(items[12], PackedEntry::Int(FLAG_SAMEFIELDS));
        assert_eq!(
            &items[15..17],
            &[PackedEntry::Str(b"007"), PackedEntry::Str(b"+1")]
        );
        assert_eq!(items[18], PackedEntry::Int(0)); // b, a: not the master's order
        assert_eq!(lp.len(), node_lp_bytes_by_formula(&img.nodes[0]));
        for n in &img.nodes {
            assert_eq!(node_listpack(n).unwrap().len(), node_lp_bytes_by_formula(n));
        }
    }

    #[test]
    fn roundtrip_many_nodes_and_big_node() {
        // 70000 entries in one node: the listpack header count saturates at 65535.
        let entries: Vec<EntryImage> = (0..70_000u64)
            .map(|i| entry(1000 + i / 3, i % 3, i % 5 == 1, &[("v", &i.to_string())]))
            .collect();
        let big = NodeImage {
            master_id: id(1000, 0),
            master_fields: vec![b"v".to_vec()],
            entries,
        };
        let lp = node_listpack(&big).unwrap();
        assert_eq!(&lp[4..6], &[0xff, 0xff]);
        assert_eq!(lp.len(), node_lp_bytes_by_formula(&big));
        let live = big.entries.iter().filter(|e| !e.deleted).count() as u64;
        let nodes: Vec<NodeImage> = (0..2000u64)
            .map(|i| NodeImage {
                master_id: id(100_000 + i, 0),
                master_fields: vec![b"k".to_vec(), b"l".to_vec()],
                entries: vec![entry(100_000 + i, 0, false, &[("k", "1"), ("l", "x")])],
            })
            .collect();
        let img = StreamImage {
            nodes: std::iter::once(big).chain(nodes).collect(),
            meta: StreamMeta {
                length: live + 2000,
                last_id: id(101_999, 0),
                first_id: id(1000, 0),
                max_deleted_id: Id::MIN,
                entries_added: live + 2000,
            },
            groups: vec![],
        };
        let body = write_body(&img, true);
        assert_eq!(read_body(&body, RdbType::StreamListpacks2).unwrap(), img);
    }

    /// Writes a body of any of the three types, nodes given as raw (key, listpack), with no
    /// sorting and no checks (for malformed inputs and the types we do not write).
    fn write_custom(
        version: u8,
        nodes: &[(Vec<u8>, Vec<u8>)],
        meta: &StreamMeta,
        groups: &[GroupImage],
    ) -> Vec<u8> {
        let mut w = Writer::new(Vec::new());
        w.write_len(nodes.len() as u64).unwrap();
        for (k, lp) in nodes {
            w.write_string(k).unwrap();
            w.write_string(lp).unwrap();
        }
        w.write_len(meta.length).unwrap();
        write_id(&mut w, meta.last_id).unwrap();
        if version >= 2 {
            write_id(&mut w, meta.first_id).unwrap();
            write_id(&mut w, meta.max_deleted_id).unwrap();
            w.write_len(meta.entries_added).unwrap();
        }
        w.write_len(groups.len() as u64).unwrap();
        for g in groups {
            w.write_string(&g.name).unwrap();
            write_id(&mut w, g.last_id).unwrap();
            if version >= 2 {
                w.write_len(g.entries_read as u64).unwrap();
            }
            w.write_len(g.pending.len() as u64).unwrap();
            for p in &g.pending {
                w.write_raw(&p.id.to_be_bytes()).unwrap();
                w.write_millis(p.delivery_time as i64).unwrap();
                w.write_len(p.delivery_count).unwrap();
            }
            w.write_len(g.consumers.len() as u64).unwrap();
            for c in &g.consumers {
                w.write_string(&c.name).unwrap();
                w.write_millis(c.seen_time as i64).unwrap();
                if version >= 3 {
                    w.write_millis(c.active_time.unwrap_or(c.seen_time) as i64)
                        .unwrap();
                }
                w.write_len(c.pending.len() as u64).unwrap();
                for id in &c.pending {
                    w.write_raw(&id.to_be_bytes()).unwrap();
                }
            }
        }
        w.into_inner()
    }

    fn raw_nodes(img: &StreamImage) -> Vec<(Vec<u8>, Vec<u8>)> {
        img.nodes
            .iter()
            .map(|n| {
                (
                    n.master_id.to_be_bytes().to_vec(),
                    node_listpack(n).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn type_15_derives_what_it_lacks() {
        let f3 = read_body(&body_of(F3), RdbType::StreamListpacks2).unwrap();
        let body = write_custom(1, &raw_nodes(&f3), &f3.meta, &f3.groups);
        let v1 = read_body(&body, RdbType::StreamListpacks).unwrap();
        assert_eq!(v1.nodes, f3.nodes);
        assert_eq!(
            v1.meta,
            StreamMeta {
                length: 4,
                last_id: id(100, 5),
                first_id: id(100, 1),
                max_deleted_id: Id::MIN,
                entries_added: 4,
            }
        );
        let reads: Vec<(&[u8], i64)> = v1
            .groups
            .iter()
            .map(|g| (&g.name[..], g.entries_read))
            .collect();
        // "7" and grp-b are at the last ID; grp-a's 100-4 is past the first entry.
        assert_eq!(reads, [(&b"7"[..], 4), (b"grp-a", -1), (b"grp-b", 4)]);
        for (a, b) in v1.groups.iter().zip(&f3.groups) {
            assert_eq!((&a.pending, &a.consumers), (&b.pending, &b.consumers));
        }
        // An empty type-15 stream: streamGetEdgeID finds nothing, first ID is the maximum.
        let empty = write_custom(
            1,
            &[],
            &StreamMeta {
                last_id: id(3, 3),
                ..Default::default()
            },
            &[],
        );
        let e = read_body(&empty, RdbType::StreamListpacks).unwrap();
        assert_eq!(e.meta.first_id, Id::MAX);
        assert_eq!(e.meta.entries_added, 0);
    }

    #[test]
    fn type_21_has_active_times() {
        let mut img = normalized(sample());
        for g in &mut img.groups {
            for (i, c) in g.consumers.iter_mut().enumerate() {
                c.active_time = Some(1_000 + i as u64);
            }
        }
        let body = write_custom(3, &raw_nodes(&img), &img.meta, &img.groups);
        assert_eq!(read_body(&body, RdbType::StreamListpacks3).unwrap(), img);
        // Read as type 19, the same bytes are misaligned and rejected, not misread silently.
        assert!(read_body(&body, RdbType::StreamListpacks2).is_err());
        let e = read_body(&body, RdbType::Hash).unwrap_err();
        assert_eq!(e.kind, RdbErrorKind::Other("not a stream object type"));
    }

    #[test]
    fn estimates_entries_read_like_redis() {
        let meta = StreamMeta {
            length: 5,
            last_id: id(10, 0),
            first_id: id(3, 0),
            max_deleted_id: Id::MIN,
            entries_added: 8,
        };
        assert_eq!(estimate_entries_read(&meta, id(10, 0)), 8);
        assert_eq!(estimate_entries_read(&meta, id(11, 0)), -1);
        assert_eq!(estimate_entries_read(&meta, id(1, 0)), 3);
        assert_eq!(estimate_entries_read(&meta, id(3, 0)), 4);
        assert_eq!(estimate_entries_read(&meta, id(4, 0)), -1);
        let frag = StreamMeta {
            max_deleted_id: id(5, 0),
            ..meta
        };
        assert_eq!(estimate_entries_read(&frag, id(1, 0)), -1);
        let old_tomb = StreamMeta {
            max_deleted_id: id(2, 0),
            ..meta
        };
        assert_eq!(estimate_entries_read(&old_tomb, id(1, 0)), 3);
        let empty = StreamMeta { length: 0, ..meta };
        assert_eq!(estimate_entries_read(&empty, id(2, 0)), 8);
        assert_eq!(estimate_entries_read(&StreamMeta::default(), id(2, 0)), 0);
    }

    // -----------------------------------------------------------------------------------------
    // Corruption.

    fn simple_node(master: Id, entries: Vec<EntryImage>) -> NodeImage {
        NodeImage {
            master_id: master,
            master_fields: vec![b"a".to_vec()],
            entries,
        }
    }

    fn meta_for(nodes: &[NodeImage]) -> StreamMeta {
        let live: Vec<Id> = nodes
            .iter()
            .flat_map(|n| &n.entries)
            .filter(|e| !e.deleted)
            .map(|e| e.id)
            .collect();
        StreamMeta {
            length: live.len() as u64,
            last_id: live.last().copied().unwrap_or_default(),
            first_id: live.first().copied().unwrap_or_default(),
            max_deleted_id: Id::MIN,
            entries_added: live.len() as u64,
        }
    }

    fn expect_err(body: &[u8], msg: &str) {
        match read_body(body, RdbType::StreamListpacks2) {
            Ok(img) => panic!("accepted ({msg}): {img:?}"),
            Err(e) => assert!(e.to_string().contains(msg), "wanted {msg:?}, got {e}"),
        }
    }

    fn body_with_lp(master: Id, lp: Vec<u8>, length: u64) -> Vec<u8> {
        let meta = StreamMeta {
            length,
            last_id: id(100, 0),
            ..Default::default()
        };
        write_custom(2, &[(master.to_be_bytes().to_vec(), lp)], &meta, &[])
    }

    #[test]
    fn rejects_bad_nodes() {
        let e1 = |ms, del| entry(ms, 0, del, &[("a", "1")]);
        let one = |nodes: Vec<NodeImage>| {
            let meta = meta_for(&nodes);
            let raw: Vec<_> = nodes
                .iter()
                .map(|n| {
                    (
                        n.master_id.to_be_bytes().to_vec(),
                        node_listpack(n).unwrap(),
                    )
                })
                .collect();
            write_custom(2, &raw, &meta, &[])
        };
        // Sanity: the helper makes valid bodies.
        read_body(
            &one(vec![simple_node(
                id(1, 0),
                vec![e1(1, false), e1(2, false)],
            )]),
            RdbType::StreamListpacks2,
        )
        .unwrap();

        expect_err(
            &body_with_lp(id(1, 0), listpack::encode([]), 0),
            "empty listpack inside stream",
        );
        expect_err(
            &one(vec![simple_node(id(1, 0), vec![e1(2, false)])]),
            "master ID differs",
        );
        expect_err(
            &one(vec![simple_node(
                id(1, 0),
                vec![e1(1, false), e1(3, false), e1(2, false)],
            )]),
            "not increasing",
        );
        expect_err(
            &one(vec![simple_node(id(1, 0), vec![e1(1, false), e1(1, true)])]),
            "not above",
        );
        expect_err(
            &one(vec![simple_node(id(1, 0), vec![e1(1, true), e1(0, false)])]),
            "not above",
        );
        expect_err(
            &one(vec![simple_node(id(1, 0), vec![e1(1, true)])]),
            "without live entries",
        );
        expect_err(
            &one(vec![
                simple_node(id(1, 0), vec![e1(1, false), e1(5, false)]),
                simple_node(id(3, 0), vec![e1(3, false)]),
            ]),
            "not increasing",
        );
        let n = simple_node(id(1, 0), vec![e1(1, false)]);
        let lp = node_listpack(&n).unwrap();
        let k = id(1, 0).to_be_bytes().to_vec();
        let meta = meta_for(std::slice::from_ref(&n));
        expect_err(
            &write_custom(
                2,
                &[(k.clone(), lp.clone()), (k.clone(), lp.clone())],
                &meta,
                &[],
            ),
            "re-added",
        );
        let k0 = id(0, 5).to_be_bytes().to_vec();
        expect_err(
            &write_custom(2, &[(k.clone(), lp.clone()), (k0, lp.clone())], &meta, &[]),
            "out of order",
        );
        expect_err(
            &write_custom(2, &[(k[..15].to_vec(), lp.clone())], &meta, &[]),
            "size of a stream ID",
        );
        expect_err(
            &write_custom(
                2,
                &[(k.clone(), lp.clone())],
                &StreamMeta { length: 2, ..meta },
                &[],
            ),
            "length inconsistent",
        );
        expect_err(
            &write_custom(
                2,
                &[(k.clone(), lp.clone())],
                &StreamMeta {
                    last_id: id(0, 9),
                    ..meta
                },
                &[],
            ),
            "last ID below",
        );
        expect_err(
            &write_custom(2, &[], &StreamMeta { length: 1, ..meta }, &[]),
            "length inconsistent",
        );

        // Hand-built listpacks: counts, flags, lp-count, terminator, trailing elements.
        let build = |f: &dyn Fn(&mut LpBuilder)| {
            let mut b = LpBuilder::new();
            f(&mut b);
            b.finish()
        };
        let master = |b: &mut LpBuilder, live: i64, deleted: i64| {
            for v in [live, deleted, 1] {
                b.push_int(v);
            }
            b.push_bytes(b"a");
            b.push_int(0);
        };
        let same_entry = |b: &mut LpBuilder, flags: i64, ms: i64, lp_count: i64| {
            for v in [flags, ms, 0] {
                b.push_int(v);
            }
            b.push_bytes(b"v");
            b.push_int(lp_count);
        };
        let good = build(&|b| {
            master(b, 1, 0);
            same_entry(b, 2, 0, 4);
        });
        read_body(&body_with_lp(id(1, 0), good, 1), RdbType::StreamListpacks2).unwrap();
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    master(b, 2, 0);
                    same_entry(b, 2, 0, 4);
                }),
                1,
            ),
            "entry count larger",
        );
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    master(b, 1, 0);
                    same_entry(b, 2, 0, 5);
                }),
                1,
            ),
            "bad lp-count",
        );
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    master(b, 1, 0);
                    same_entry(b, 6, 0, 4);
                }),
                1,
            ),
            "unknown stream entry flags",
        );
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    master(b, 0, 1);
                    same_entry(b, 2, 0, 4);
                }),
                1,
            ),
            "counts do not match",
        );
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    master(b, -1, 2);
                    same_entry(b, 2, 0, 4);
                }),
                1,
            ),
            "negative entry count",
        );
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    master(b, 1, 0);
                    same_entry(b, 2, 0, 4);
                    b.push_int(1);
                }),
                1,
            ),
            "extra elements",
        );
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    for v in [1, 0, 1] {
                        b.push_int(v);
                    }
                    b.push_bytes(b"a");
                    b.push_int(1);
                    same_entry(b, 2, 0, 4);
                }),
                1,
            ),
            "not terminated by 0",
        );
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    master(b, 1, 0);
                    b.push_bytes(b"x");
                    b.push_int(0);
                    b.push_int(0);
                    b.push_bytes(b"v");
                    b.push_int(4);
                }),
                1,
            ),
            "not an integer",
        );
        // A SAMEFIELDS entry of a 2-field master with only 1 value left before lp-count.
        expect_err(
            &body_with_lp(
                id(1, 0),
                build(&|b| {
                    for v in [1, 0, 2] {
                        b.push_int(v);
                    }
                    b.push_bytes(b"a");
                    b.push_bytes(b"b");
                    b.push_int(0);
                    same_entry(b, 2, 0, 5);
                }),
                1,
            ),
            "stream",
        );
        // A listpack that is not one.
        let mut broken = node_listpack(&n).unwrap();
        broken[0] ^= 1;
        let e = read_body(
            &body_with_lp(id(1, 0), broken, 1),
            RdbType::StreamListpacks2,
        )
        .unwrap_err();
        assert!(matches!(e.kind, RdbErrorKind::BadListpack(_)), "{e}");
    }

    #[test]
    fn rejects_bad_groups() {
        let img = normalized(sample());
        let nodes = raw_nodes(&img);
        let with = |f: &dyn Fn(&mut Vec<GroupImage>)| {
            let mut g = img.groups.clone();
            f(&mut g);
            write_custom(2, &nodes, &img.meta, &g)
        };
        read_body(&with(&|_| {}), RdbType::StreamListpacks2).unwrap();
        expect_err(
            &with(&|g| g[1].name = g[0].name.clone()),
            "duplicated consumer group",
        );
        expect_err(
            &with(&|g| g[2].consumers[1].name = g[2].consumers[0].name.clone()),
            "duplicate stream consumer",
        );
        expect_err(
            &with(&|g| {
                let p = g[2].pending[0];
                g[2].pending.push(p);
            }),
            "duplicated global PEL",
        );
        expect_err(
            &with(&|g| g[2].consumers[0].pending.push(id(99, 99))),
            "not found in group global PEL",
        );
        expect_err(
            &with(&|g| {
                let i = g[2].consumers[0].pending[0];
                g[2].consumers[1].pending.push(i);
            }),
            "already has a consumer",
        );
        expect_err(
            &with(&|g| {
                let i = g[2].consumers[1].pending[0];
                g[2].consumers[1].pending.push(i);
            }),
            "already has a consumer",
        );
        expect_err(
            &with(&|g| g[2].consumers[0].pending.clear()),
            "PEL entry without consumer",
        );
        // Unsorted but otherwise valid: accepted and sorted, as Redis's radix trees would.
        let shuffled = with(&|g| {
            g.reverse();
            for g in g.iter_mut() {
                g.pending.reverse();
                g.consumers.reverse();
                for c in &mut g.consumers {
                    c.pending.reverse();
                }
            }
        });
        assert_eq!(
            read_body(&shuffled, RdbType::StreamListpacks2).unwrap(),
            img
        );
    }

    #[test]
    fn field_name_copies_are_bounded() {
        // One 200 KB field name shared by 20000 one-value entries: 4 GB if copied naively.
        let name = vec![b'n'; 200_000];
        let mut b = LpBuilder::new();
        for v in [20_000, 0, 1] {
            b.push_int(v);
        }
        b.push_str_raw(&name);
        b.push_int(0);
        for i in 0..20_000 {
            for v in [FLAG_SAMEFIELDS, 0, i, 1, 4] {
                b.push_int(v);
            }
        }
        let lp = b.finish();
        let meta = StreamMeta {
            length: 20_000,
            last_id: id(0, 19_999),
            ..Default::default()
        };
        let body = write_custom(2, &[(Id::MIN.to_be_bytes().to_vec(), lp)], &meta, &[]);
        expect_err(&body, "expand beyond the input size bound");
    }

    /// Bodies for the corruption loops: Redis's (compressed) and ours uncompressed.
    fn corpus() -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        for (_, hex) in ALL {
            let body = body_of(hex);
            let img = read_body(&body, RdbType::StreamListpacks2).unwrap();
            v.push(write_body(&img, false));
            v.push(body);
        }
        v.push(write_body(&sample(), false));
        v
    }

    fn try_all_types(data: &[u8]) {
        for ty in [
            RdbType::StreamListpacks,
            RdbType::StreamListpacks2,
            RdbType::StreamListpacks3,
        ] {
            let _ = read_body(data, ty);
        }
    }

    #[test]
    fn corrupted_bodies_never_panic() {
        for body in corpus() {
            for n in 0..body.len() {
                assert!(read_body(&body[..n], RdbType::StreamListpacks2).is_err());
            }
            // Byte flips everywhere in the small bodies, sampled in the big ones.
            let step = (body.len() / 400).max(1);
            let mut buf = body.clone();
            for i in (0..body.len()).step_by(step) {
                for x in [0x01u8, 0x10, 0x80, 0xff] {
                    buf[i] ^= x;
                    let _ = read_body(&buf, RdbType::StreamListpacks2);
                    buf[i] ^= x;
                }
                buf[i] ^= 0x02;
                try_all_types(&buf);
                buf[i] ^= 0x02;
            }
            // Random multi-byte damage.
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ body.len() as u64;
            let mut rnd = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            for _ in 0..300 {
                let mut buf = body.clone();
                for _ in 0..1 + rnd() % 4 {
                    let i = (rnd() % buf.len() as u64) as usize;
                    buf[i] = rnd() as u8;
                }
                try_all_types(&buf);
            }
        }
    }

    /// Not run by default: prints DUMP payloads of bodies we write, for loading into a real
    /// redis-server by hand. Done for this module with redis-server 7.0.15:
    ///
    /// ```text
    /// cargo test -p damselfly --lib persistence::rdb::stream::tests::print_restore_payloads \
    ///     -- --ignored --nocapture | grep '^payload' > /tmp/sfx/ours.txt
    /// redis-server --port 0 --unixsocket /tmp/sfx/r.sock --save '' --daemonize yes
    /// python3 /tmp/sfx/restore.py   # for each payload: CONFIG SET sanitize-dump-payload yes,
    ///                               # RESTORE k 0 <payload> (OK for all), XINFO STREAM k FULL
    ///                               # (as expected), then CONFIG SET rdbcompression no and
    ///                               # DUMP k: byte-identical to our uncompressed payload
    /// ```
    #[test]
    #[ignore]
    fn print_restore_payloads() {
        let mut images = vec![sample()];
        for (_, hex) in ALL {
            images.push(read_body(&body_of(hex), RdbType::StreamListpacks2).unwrap());
        }
        for (i, img) in images.iter().enumerate() {
            for compression in [false, true] {
                let mut obj = vec![RdbType::StreamListpacks2 as u8];
                obj.extend(write_body(img, compression));
                let p = dump_payload(&obj);
                let hex: String = p.iter().map(|b| format!("{b:02x}")).collect();
                println!("payload {i} {} {hex}", compression as u8);
            }
        }
    }
}
