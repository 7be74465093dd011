//! Our values as RDB objects: the type byte and body of one value, both directions.
//!
//! Writing picks the encodings redis-server 7.0 would write for the same value, so a file or
//! DUMP payload of ours loads into Redis with the encodings Redis expects (OBJECT ENCODING after
//! a reload agrees): strings as integers when they are canonical integers, lists as quicklists
//! of listpacks cut by `list-max-listpack-size`, compact hashes and sorted sets as listpacks,
//! integer sets as intsets, everything else in the plain forms. Hashes with field TTLs, which
//! Redis 7.0 cannot represent, use Redis 7.4's `RDB_TYPE_HASH_METADATA` (a 7.0 reader stops at
//! such a key with "Unknown RDB encoding type 24"; 7.4+ loads it).
//!
//! Reading accepts every type Redis 7.0 loads (including the ziplist / zipmap encodings of older
//! files, converted as Redis converts them), Redis 7.2's listpack sets and Redis 7.4's hashes
//! with field TTLs, Redis 7.0's streams (and 7.2's, and 5.0's), and rebuilds each value in the
//! encoding our limits give it. Module values are not supported: loading one is an error
//! naming the type, never a silently dropped key.

use std::io::{self, Write};

use damselfly_protocol::double::{d2string, parse_f64};

use super::listpack::{self, LpBuilder, PackedEntry};
use super::wire::{quicklist_container, Parts, RdbErrorKind, RdbType, Reader, Result, Writer};
use super::{intset, ziplist, zipmap};
use crate::compact::{CompactStr, IntBuf};
use crate::hash::Hash;
use crate::list::{Entry, Fill, List};
use crate::set::{Member, Set};
use crate::value::{Value, ValueRef};
use crate::zset::ZSet;
use crate::Limits;

/// The encoding thresholds values are rebuilt with (and lists are cut by), read once from the
/// configuration per save or load (`Config::enc_limits` in the server).
#[derive(Clone, Copy, Debug)]
pub struct EncLimits {
    pub list_fill: Fill,
    pub hash: Limits,
    pub set_max_intset: usize,
    pub zset: Limits,
}

impl Default for EncLimits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        EncLimits {
            list_fill: Fill::new(-2),
            hash: Limits {
                entries: 128,
                value: 64,
            },
            set_max_intset: 512,
            zset: Limits {
                entries: 128,
                value: 64,
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writing.

/// Writes `v` as an RDB object: its type byte, then (in a file, where the key sits between
/// the two) `key`, then its body. A DUMP payload has no key.
pub fn write_object<W: Write>(
    w: &mut Writer<W>,
    key: Option<&[u8]>,
    v: &Value,
    lim: &EncLimits,
) -> io::Result<()> {
    if let Some(mut p) = Pieces::begin(w, key, v, lim)? {
        while !p.write_more(w, key, v, usize::MAX)? {}
        return Ok(());
    }
    let mut o = Obj { w, key };
    match v.view() {
        ValueRef::Str(s) => {
            o.begin(RdbType::String)?;
            write_compact(o.w, s)
        }
        ValueRef::Hash(h) if h.has_field_ttls() => write_hash_metadata(o, h),
        ValueRef::Hash(h) => {
            let mut buf: IntBuf = [0; 20];
            let mut lp = LpBuilder::new();
            h.for_each(|f, v| {
                lp.push_bytes(f);
                lp.push_bytes(v.bytes(&mut buf));
            });
            o.begin(RdbType::HashListpack)?.write_string(&lp.finish())
        }
        ValueRef::Set(s) => {
            let ints: Vec<i64> = s
                .iter()
                .filter_map(|m| match m {
                    Member::Int(i) => Some(i),
                    Member::Str(_) => None,
                })
                .collect();
            o.begin(RdbType::SetIntset)?
                .write_string(&intset::encode(&ints))
        }
        ValueRef::ZSet(z) => {
            let mut lp = LpBuilder::new();
            z.range(0, z.len(), false, |m, s| {
                lp.push_bytes(m);
                lp.push_bytes(d2string(s).as_bytes());
            });
            o.begin(RdbType::ZsetListpack)?.write_string(&lp.finish())
        }
        ValueRef::Stream(st) => {
            o.begin(RdbType::StreamListpacks2)?;
            super::stream_value::write(o.w, st)
        }
        // Lists are always written in pieces (Pieces::begin).
        ValueRef::List(_) => unreachable_list(),
    }
}

#[cold]
fn unreachable_list() -> io::Result<()> {
    Err(io::Error::other("a list reached the packed-form writer"))
}

/// An object being written: the type byte and key go out once the encoding is chosen.
struct Obj<'a, 'k, W: Write> {
    w: &'a mut Writer<W>,
    key: Option<&'k [u8]>,
}

impl<W: Write> Obj<'_, '_, W> {
    fn begin(&mut self, t: RdbType) -> io::Result<&mut Writer<W>> {
        write_head(self.w, t, self.key)
    }
}

fn write_head<'w, W: Write>(
    w: &'w mut Writer<W>,
    t: RdbType,
    key: Option<&[u8]>,
) -> io::Result<&'w mut Writer<W>> {
    w.write_u8(t as u8)?;
    if let Some(k) = key {
        w.write_string(k)?;
    }
    Ok(w)
}

fn write_compact<W: Write>(w: &mut Writer<W>, s: &CompactStr) -> io::Result<()> {
    match s.as_int() {
        Some(i) => w.write_int_string(i),
        None => {
            let mut buf: IntBuf = [0; 20];
            w.write_string(s.bytes(&mut buf))
        }
    }
}

/// Redis's `packed_threshold`: an element this large gets a PLAIN quicklist node of its own,
/// and a listpack never holds one (a listpack's size field is 32 bits).
const PACKED_THRESHOLD: usize = 1 << 30;

/// The list elements that get a PLAIN quicklist node of their own (Redis's
/// `packed_threshold`, 1 GiB unless `DEBUG QUICKLIST-PACKED-THRESHOLD` changed it).
static LIST_PACKED_THRESHOLD: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(PACKED_THRESHOLD);

/// `DEBUG QUICKLIST-PACKED-THRESHOLD bytes` (Redis's `quicklistisSetPackedThreshold`): 0
/// restores the default; false past 4 GiB less 1 MiB.
pub fn set_list_packed_threshold(bytes: u64) -> bool {
    if bytes > (1 << 32) - (1 << 20) {
        return false;
    }
    let v = if bytes == 0 {
        PACKED_THRESHOLD
    } else {
        (bytes as usize).min(PACKED_THRESHOLD)
    };
    LIST_PACKED_THRESHOLD.store(v, std::sync::atomic::Ordering::Relaxed);
    true
}

/// A collection written as a sequence of elements, possibly across many calls: lists (a
/// quicklist of listpack nodes, each as big as `list-max-listpack-size` lets a node grow, what
/// Redis's own quicklist would hold after the same pushes) and the plain forms of hashes, sets
/// and sorted sets. A snapshot writes a big collection a few elements per step of its walk so
/// that one value never holds its shard thread for long; the value must not change between
/// calls (the snapshot's write hooks finish it first). The packed forms (listpack, intset) are
/// one small blob and are written whole by [`write_object`].
pub struct Pieces {
    at: Cursor,
    /// Elements written so far.
    done: usize,
}

enum Cursor {
    /// The quicklist's node count comes before its nodes, so the nodes are collected apart
    /// and go out after the head once the last one is cut.
    List {
        node: LpBuilder,
        nodes: u64,
        body: Writer<Parts>,
        fill: Fill,
    },
    /// A set's or hash's next physical position (`for_each_from`).
    Slots { next: usize },
    /// Sorted sets go highest first, as Redis writes them (its loader then inserts at the
    /// skiplist's head): `done` counts ranks from the top.
    Ranks,
}

impl Pieces {
    /// Starts writing `v` when it is written as a sequence of elements (its head, with the
    /// element count, is written now; a list's once complete); None when it is a string or a
    /// packed blob, for [`write_object`].
    pub fn begin<W: Write>(
        w: &mut Writer<W>,
        key: Option<&[u8]>,
        v: &Value,
        lim: &EncLimits,
    ) -> io::Result<Option<Pieces>> {
        let mut buf: IntBuf = [0; 20];
        let at = match v.view() {
            ValueRef::Str(_) | ValueRef::Stream(_) => return Ok(None),
            ValueRef::List(_) => {
                let mut body = Writer::new(Parts::default());
                body.set_compression(w.compression()).set_checksum(false);
                Cursor::List {
                    node: LpBuilder::new(),
                    nodes: 0,
                    body,
                    fill: lim.list_fill,
                }
            }
            ValueRef::Hash(h) => {
                if h.has_field_ttls() {
                    return Ok(None);
                }
                // (Listpack limits can be configured past what a listpack can hold: then the
                // plain form.)
                if h.is_listpack() {
                    let mut huge = false;
                    h.for_each(|f, v| {
                        huge |= f.len().max(v.bytes(&mut buf).len()) >= PACKED_THRESHOLD
                    });
                    if !huge {
                        return Ok(None);
                    }
                }
                write_head(w, RdbType::Hash, key)?.write_len(h.len() as u64)?;
                Cursor::Slots { next: 0 }
            }
            ValueRef::Set(s) => {
                if s.is_intset() && s.iter().all(|m| matches!(m, Member::Int(_))) {
                    return Ok(None);
                }
                write_head(w, RdbType::Set, key)?.write_len(s.len() as u64)?;
                Cursor::Slots { next: 0 }
            }
            ValueRef::ZSet(z) => {
                if z.is_pack() {
                    let mut huge = false;
                    z.range(0, z.len(), false, |m, _| {
                        huge |= m.len() >= PACKED_THRESHOLD
                    });
                    if !huge {
                        return Ok(None);
                    }
                }
                write_head(w, RdbType::Zset2, key)?.write_len(z.len() as u64)?;
                Cursor::Ranks
            }
        };
        Ok(Some(Pieces { at, done: 0 }))
    }

    /// Writes about `max` more elements of `v` (the value `begin` saw, unchanged); true once
    /// the value is complete.
    pub fn write_more<W: Write>(
        &mut self,
        w: &mut Writer<W>,
        key: Option<&[u8]>,
        v: &Value,
        max: usize,
    ) -> io::Result<bool> {
        let max = max.max(1);
        let mut buf: IntBuf = [0; 20];
        let mut res = Ok(());
        match (&mut self.at, v.view()) {
            (
                Cursor::List {
                    node,
                    nodes,
                    body,
                    fill,
                },
                ValueRef::List(l),
            ) => {
                let fill = *fill;
                for e in l.iter_from(self.done).take(max) {
                    self.done += 1;
                    res = res.and(push_list_entry(body, node, nodes, e, fill));
                }
                res?;
                if self.done < l.len() {
                    return Ok(false);
                }
                if !node.is_empty() {
                    let lp = std::mem::take(node).finish();
                    write_ql_node(body, nodes, quicklist_container::PACKED, &lp)?;
                }
                let w = write_head(w, RdbType::ListQuicklist2, key)?;
                w.write_len(*nodes)?;
                for part in std::mem::take(body.get_mut()).parts() {
                    w.write_raw(&part)?;
                }
                Ok(true)
            }
            (Cursor::Slots { next }, ValueRef::Hash(h)) => {
                let more = h.for_each_from(*next, max, |f, v| {
                    self.done += 1;
                    if res.is_ok() {
                        res = w
                            .write_string(f)
                            .and_then(|_| w.write_string(v.bytes(&mut buf)));
                    }
                });
                res?;
                *next = more.unwrap_or(usize::MAX);
                Ok(more.is_none())
            }
            (Cursor::Slots { next }, ValueRef::Set(s)) => {
                let more = s.for_each_from(*next, max, |m| {
                    self.done += 1;
                    if res.is_ok() {
                        res = match m {
                            Member::Int(i) => w.write_int_string(i),
                            Member::Str(b) => w.write_string(b),
                        };
                    }
                });
                res?;
                *next = more.unwrap_or(usize::MAX);
                Ok(more.is_none())
            }
            (Cursor::Ranks, ValueRef::ZSet(z)) => {
                let n = z.len();
                let end = n.saturating_sub(self.done);
                let start = end.saturating_sub(max);
                z.range(start, end, true, |m, s| {
                    if res.is_ok() {
                        res = w.write_string(m).and_then(|_| w.write_binary_double(s));
                    }
                });
                res?;
                self.done += end - start;
                Ok(self.done >= n)
            }
            _ => Err(io::Error::other(
                "a value changed type while it was written",
            )),
        }
    }
}

/// Adds one list element to the node being filled, cutting the node first when the element
/// would take it past `fill` (an element of [`PACKED_THRESHOLD`] bytes or more gets a PLAIN
/// node of its own).
fn push_list_entry(
    body: &mut Writer<Parts>,
    node: &mut LpBuilder,
    nodes: &mut u64,
    e: Entry<'_>,
    fill: Fill,
) -> io::Result<()> {
    if let Entry::Str(s) = e {
        if s.len() >= LIST_PACKED_THRESHOLD.load(std::sync::atomic::Ordering::Relaxed) {
            if !node.is_empty() {
                let lp = std::mem::take(node).finish();
                write_ql_node(body, nodes, quicklist_container::PACKED, &lp)?;
            }
            return write_ql_node(body, nodes, quicklist_container::PLAIN, s);
        }
    }
    let add = |b: &mut LpBuilder| match e {
        Entry::Int(i) => b.push_int(i),
        Entry::Str(s) => b.push_bytes(s),
    };
    let mut next = LpBuilder::new();
    add(&mut next);
    let entry_bytes = next.bytes_len() - crate::lpsize::HEADER_SIZE - 1;
    if !node.is_empty() && !fill.fits(node.bytes_len() + entry_bytes, node.len() as u32 + 1) {
        let lp = std::mem::take(node).finish();
        write_ql_node(body, nodes, quicklist_container::PACKED, &lp)?;
    }
    add(node);
    Ok(())
}

fn write_ql_node(
    body: &mut Writer<Parts>,
    nodes: &mut u64,
    container: u64,
    bytes: &[u8],
) -> io::Result<()> {
    *nodes += 1;
    body.write_len(container)?;
    body.write_string(bytes)
}

/// Redis 7.4's RDB_TYPE_HASH_METADATA: the smallest deadline, then per field its deadline
/// relative to it (+1; 0 = none), the field and the value.
fn write_hash_metadata<W: Write>(mut o: Obj<'_, '_, W>, h: &Hash) -> io::Result<()> {
    let mut buf: IntBuf = [0; 20];
    let mut min = u64::MAX;
    h.for_each(|f, _| {
        if let Some(at) = h.field_ttl(f) {
            min = min.min(at);
        }
    });
    let w = o.begin(RdbType::HashMetadata)?;
    w.write_millis(min as i64)?;
    w.write_len(h.len() as u64)?;
    let mut res = Ok(());
    h.for_each(|f, v| {
        if res.is_err() {
            return;
        }
        let rel = h.field_ttl(f).map_or(0, |at| at - min + 1);
        res = w
            .write_len(rel)
            .and_then(|_| w.write_string(f))
            .and_then(|_| w.write_string(v.bytes(&mut buf)));
    });
    res
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// A value read from a file, with what the loader must know besides the value itself.
pub struct Loaded {
    pub value: Value,
    /// The hash has field deadlines (the db's field-expiry index must learn the key).
    pub field_deadline: Option<u64>,
}

/// Reads the body of an object of type byte `t`. `Ok(None)`: an empty collection, which Redis
/// skips with a warning rather than failing the load.
pub fn read_object(r: &mut Reader<'_>, t: u8, lim: &EncLimits) -> Result<Option<Loaded>> {
    let Some(ty) = RdbType::from_u8(t) else {
        return Err(r.error(RdbErrorKind::UnknownType(t)));
    };
    let value = match ty {
        RdbType::String => {
            let s = r.read_string()?;
            Value::str(CompactStr::from_value(&s))
        }
        RdbType::List => {
            let n = r.read_count()?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(r.read_string()?);
            }
            list_from(items.iter().map(|s| &s[..]), lim)
        }
        RdbType::ListZiplist => {
            let blob = r.read_string()?;
            let entries = ziplist::decode(&blob).map_err(|e| blob_err(r, e, Blob::Ziplist))?;
            list_from_packed(&entries, lim)
        }
        RdbType::ListQuicklist | RdbType::ListQuicklist2 => read_quicklist(r, ty, lim)?,
        RdbType::Set => {
            let n = r.read_count()?;
            let mut s = Set::new();
            for _ in 0..n {
                let m = r.read_string()?;
                if !s.add(&m, lim.set_max_intset) {
                    return Err(r.error(RdbErrorKind::Other("duplicate set members detected")));
                }
            }
            Value::set(s)
        }
        RdbType::SetIntset => {
            let blob = r.read_string()?;
            let ints = intset::decode(&blob).map_err(|e| blob_err(r, e, Blob::Intset))?;
            let mut s = Set::new();
            let mut buf: IntBuf = [0; 20];
            for i in ints {
                s.add(crate::compact::fmt_i64(i, &mut buf), lim.set_max_intset);
            }
            Value::set(s)
        }
        RdbType::SetListpack => {
            let blob = r.read_string()?;
            let entries = listpack::decode(&blob).map_err(|e| blob_err(r, e, Blob::Lp))?;
            let mut s = Set::new();
            for e in &entries {
                if !s.add(&e.to_bytes(), lim.set_max_intset) {
                    return Err(r.error(RdbErrorKind::Other("duplicate set members detected")));
                }
            }
            Value::set(s)
        }
        RdbType::Zset | RdbType::Zset2 => {
            let n = r.read_count()?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.read_string_vec()?;
                let s = if ty == RdbType::Zset2 {
                    r.read_double_binary()?
                } else {
                    r.read_double_old()?
                };
                if s.is_nan() {
                    return Err(r.error(RdbErrorKind::BadDouble));
                }
                items.push((m, s));
            }
            zset_from(r, items, lim)?
        }
        RdbType::ZsetZiplist | RdbType::ZsetListpack => {
            let blob = r.read_string()?;
            let entries = if ty == RdbType::ZsetZiplist {
                ziplist::decode(&blob).map_err(|e| blob_err(r, e, Blob::Ziplist))?
            } else {
                listpack::decode(&blob).map_err(|e| blob_err(r, e, Blob::Lp))?
            };
            if entries.len() % 2 != 0 {
                return Err(r.error(RdbErrorKind::Other("sorted set blob with odd entry count")));
            }
            let mut items = Vec::with_capacity(entries.len() / 2);
            for pair in entries.chunks_exact(2) {
                let score = match pair[1] {
                    PackedEntry::Int(i) => i as f64,
                    PackedEntry::Str(s) => parse_f64(s)
                        .filter(|f| !f.is_nan())
                        .ok_or_else(|| r.error(RdbErrorKind::BadDouble))?,
                };
                items.push((pair[0].to_bytes().into_owned(), score));
            }
            zset_from(r, items, lim)?
        }
        RdbType::Hash => {
            let n = r.read_count()?;
            let mut h = Hash::default();
            for _ in 0..n {
                let f = r.read_string()?;
                let v = r.read_string()?;
                hash_add(r, &mut h, &f, &v, lim)?;
            }
            Value::hash(h)
        }
        RdbType::HashZipmap => {
            let blob = r.read_string()?;
            let pairs = zipmap::decode(&blob).map_err(|e| blob_err(r, e, Blob::Zipmap))?;
            let mut h = Hash::default();
            for (f, v) in pairs {
                hash_add(r, &mut h, f, v, lim)?;
            }
            Value::hash(h)
        }
        RdbType::HashZiplist | RdbType::HashListpack => {
            let blob = r.read_string()?;
            let entries = if ty == RdbType::HashZiplist {
                ziplist::decode(&blob).map_err(|e| blob_err(r, e, Blob::Ziplist))?
            } else {
                listpack::decode(&blob).map_err(|e| blob_err(r, e, Blob::Lp))?
            };
            if entries.len() % 2 != 0 {
                return Err(r.error(RdbErrorKind::Other("hash blob with odd entry count")));
            }
            let mut h = Hash::default();
            for pair in entries.chunks_exact(2) {
                hash_add(r, &mut h, &pair[0].to_bytes(), &pair[1].to_bytes(), lim)?;
            }
            Value::hash(h)
        }
        RdbType::HashMetadata | RdbType::HashMetadataPreGa => {
            let min = if ty == RdbType::HashMetadata {
                r.read_millis()? as u64
            } else {
                0
            };
            let n = r.read_count()?;
            let mut h = Hash::default();
            let mut next = None::<u64>;
            for _ in 0..n {
                let rel = r.read_plain_len()?;
                let f = r.read_string()?;
                let v = r.read_string()?;
                hash_add(r, &mut h, &f, &v, lim)?;
                if rel != 0 {
                    let at = if ty == RdbType::HashMetadata {
                        min.saturating_add(rel - 1)
                    } else {
                        rel
                    };
                    h.set_field_ttl(&f, at);
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
            if h.is_empty() {
                return Ok(None);
            }
            return Ok(Some(Loaded {
                value: Value::hash(h),
                field_deadline: next,
            }));
        }
        RdbType::HashListpackEx | RdbType::HashListpackExPreGa => {
            if ty == RdbType::HashListpackEx {
                r.read_millis()?; // the smallest deadline; recomputed from the fields
            }
            let blob = r.read_string()?;
            let entries = listpack::decode(&blob).map_err(|e| blob_err(r, e, Blob::Lp))?;
            if entries.len() % 3 != 0 {
                return Err(r.error(RdbErrorKind::Other("hash blob with bad entry count")));
            }
            let mut h = Hash::default();
            let mut next = None::<u64>;
            for t in entries.chunks_exact(3) {
                let f = t[0].to_bytes();
                hash_add(r, &mut h, &f, &t[1].to_bytes(), lim)?;
                match t[2].as_i64() {
                    Some(0) => {}
                    Some(at) if at > 0 => {
                        h.set_field_ttl(&f, at as u64);
                        next = Some(next.map_or(at as u64, |n| n.min(at as u64)));
                    }
                    _ => return Err(r.error(RdbErrorKind::Other("bad hash field TTL"))),
                }
            }
            if h.is_empty() {
                return Ok(None);
            }
            return Ok(Some(Loaded {
                value: Value::hash(h),
                field_deadline: next,
            }));
        }
        RdbType::StreamListpacks | RdbType::StreamListpacks2 | RdbType::StreamListpacks3 => {
            Value::stream(super::stream_value::read(r, ty)?)
        }
        RdbType::ModulePreGa | RdbType::Module2 => {
            return Err(r.error(RdbErrorKind::Other("module values are not supported")))
        }
    };
    if is_empty(&value) {
        return Ok(None);
    }
    Ok(Some(Loaded {
        value,
        field_deadline: None,
    }))
}

fn is_empty(v: &Value) -> bool {
    match v.view() {
        ValueRef::Str(_) => false,
        ValueRef::List(l) => l.is_empty(),
        ValueRef::Hash(h) => h.is_empty(),
        ValueRef::Set(s) => s.is_empty(),
        ValueRef::ZSet(z) => z.is_empty(),
        // An empty stream is a value of its own (groups, last ID): Redis keeps and loads it.
        ValueRef::Stream(_) => false,
    }
}

enum Blob {
    Lp,
    Ziplist,
    Intset,
    Zipmap,
}

fn blob_err(r: &Reader<'_>, e: super::wire::BlobError, kind: Blob) -> super::wire::RdbError {
    r.error(match kind {
        Blob::Lp => RdbErrorKind::BadListpack(e),
        Blob::Ziplist => RdbErrorKind::BadZiplist(e),
        Blob::Intset => RdbErrorKind::BadIntset(e),
        Blob::Zipmap => RdbErrorKind::BadZipmap(e),
    })
}

fn list_from<'a>(items: impl Iterator<Item = &'a [u8]>, lim: &EncLimits) -> Value {
    Value::list(List::from_iter(items, lim.list_fill))
}

fn list_from_packed(entries: &[PackedEntry<'_>], lim: &EncLimits) -> Value {
    let owned: Vec<std::borrow::Cow<'_, [u8]>> = entries.iter().map(|e| e.to_bytes()).collect();
    list_from(owned.iter().map(|s| &s[..]), lim)
}

fn read_quicklist(r: &mut Reader<'_>, ty: RdbType, lim: &EncLimits) -> Result<Value> {
    let nodes = r.read_count()?;
    let mut l = List::new();
    for _ in 0..nodes {
        let container = if ty == RdbType::ListQuicklist2 {
            r.read_plain_len()?
        } else {
            quicklist_container::PACKED
        };
        let blob = r.read_string()?;
        match container {
            quicklist_container::PLAIN => l.push_back(&blob, lim.list_fill),
            quicklist_container::PACKED => {
                let entries = if ty == RdbType::ListQuicklist2 {
                    listpack::decode(&blob).map_err(|e| blob_err(r, e, Blob::Lp))?
                } else {
                    ziplist::decode(&blob).map_err(|e| blob_err(r, e, Blob::Ziplist))?
                };
                for e in &entries {
                    match e {
                        PackedEntry::Int(i) => {
                            let mut buf: IntBuf = [0; 20];
                            l.push_back(crate::compact::fmt_i64(*i, &mut buf), lim.list_fill)
                        }
                        PackedEntry::Str(s) => l.push_back(s, lim.list_fill),
                    }
                }
            }
            _ => return Err(r.error(RdbErrorKind::Other("unknown quicklist container"))),
        }
    }
    Ok(Value::list(l))
}

fn hash_add(r: &Reader<'_>, h: &mut Hash, f: &[u8], v: &[u8], lim: &EncLimits) -> Result<()> {
    if !h.set(f, v, lim.hash, false) {
        return Err(r.error(RdbErrorKind::Other("duplicate hash fields detected")));
    }
    Ok(())
}

fn zset_from(r: &Reader<'_>, mut items: Vec<(Vec<u8>, f64)>, lim: &EncLimits) -> Result<Value> {
    if has_dup_members(&items) {
        return Err(r.error(RdbErrorKind::Other("duplicate sorted set members detected")));
    }
    for it in items.iter_mut() {
        // -0 and 0 are one score to Redis.
        if it.1 == 0.0 {
            it.1 = 0.0;
        }
    }
    // No NaN here (refused above), so the order is total.
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok(Value::zset(ZSet::from_sorted(&items, &lim.zset)))
}

fn has_dup_members(items: &[(Vec<u8>, f64)]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items.iter().any(|(m, _)| !seen.insert(&m[..]))
}
