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
//! with field TTLs, and rebuilds each value in the encoding our limits give it. Streams and
//! module values are not supported yet: loading one is an error naming the type, never a
//! silently dropped key.

use std::io::{self, Write};

use damselfly_protocol::double::{d2string, parse_f64};

use super::listpack::{self, LpBuilder, PackedEntry};
use super::wire::{quicklist_container, RdbErrorKind, RdbType, Reader, Result, Writer};
use super::{intset, ziplist, zipmap};
use crate::config::{Config, EncLimit};
use crate::types::compact::{CompactStr, IntBuf};
use crate::types::hash::Hash;
use crate::types::list::{Entry, Fill, List};
use crate::types::set::{Member, Set};
use crate::types::value::{Value, ValueRef};
use crate::types::zset::ZSet;
use crate::types::Limits;

/// The encoding thresholds values are rebuilt with (and lists are cut by), read once from the
/// configuration per save or load.
#[derive(Clone, Copy, Debug)]
pub struct EncLimits {
    pub list_fill: Fill,
    pub hash: Limits,
    pub set_max_intset: usize,
    pub zset: Limits,
}

impl EncLimits {
    pub fn from_config(c: &Config) -> EncLimits {
        let lim = |e, v| Limits {
            entries: c.enc_limit(e).max(0) as usize,
            value: c.enc_limit(v).max(0) as usize,
        };
        EncLimits {
            list_fill: Fill::new(c.enc_limit(EncLimit::ListMaxListpackSize)),
            hash: lim(
                EncLimit::HashMaxListpackEntries,
                EncLimit::HashMaxListpackValue,
            ),
            set_max_intset: c.enc_limit(EncLimit::SetMaxIntsetEntries).max(0) as usize,
            zset: lim(
                EncLimit::ZsetMaxListpackEntries,
                EncLimit::ZsetMaxListpackValue,
            ),
        }
    }
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
    let mut o = Obj { w, key };
    match v.view() {
        ValueRef::Str(s) => {
            o.begin(RdbType::String)?;
            write_compact(o.w, s)
        }
        ValueRef::List(l) => write_list(o, l, lim.list_fill),
        ValueRef::Hash(h) => write_hash(o, h),
        ValueRef::Set(s) => write_set(o, s),
        ValueRef::ZSet(z) => write_zset(o, z),
    }
}

/// An object being written: the type byte and key go out once the encoding is chosen.
struct Obj<'a, 'k, W: Write> {
    w: &'a mut Writer<W>,
    key: Option<&'k [u8]>,
}

impl<W: Write> Obj<'_, '_, W> {
    fn begin(&mut self, t: RdbType) -> io::Result<&mut Writer<W>> {
        self.w.write_u8(t as u8)?;
        if let Some(k) = self.key {
            self.w.write_string(k)?;
        }
        Ok(&mut *self.w)
    }
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

/// A quicklist of listpack nodes, each as big as `list-max-listpack-size` lets a node grow
/// (what Redis's own quicklist would hold after the same pushes).
/// Redis's `packed_threshold`: an element this large gets a PLAIN quicklist node of its own,
/// and a listpack never holds one (a listpack's size field is 32 bits).
const PACKED_THRESHOLD: usize = 1 << 30;

/// One quicklist node of a list being written.
enum QlNode<'a> {
    Packed(Vec<u8>),
    Plain(&'a [u8]),
}

fn write_list<W: Write>(mut o: Obj<'_, '_, W>, l: &List, fill: Fill) -> io::Result<()> {
    let mut nodes: Vec<QlNode<'_>> = Vec::new();
    let mut node = LpBuilder::new();
    for e in l.iter() {
        if let Entry::Str(s) = e {
            if s.len() >= PACKED_THRESHOLD {
                if !node.is_empty() {
                    nodes.push(QlNode::Packed(std::mem::take(&mut node).finish()));
                }
                nodes.push(QlNode::Plain(s));
                continue;
            }
        }
        let mut next = LpBuilder::new();
        let add = |b: &mut LpBuilder| match e {
            Entry::Int(i) => b.push_int(i),
            Entry::Str(s) => b.push_bytes(s),
        };
        add(&mut next);
        let entry_bytes = next.bytes_len() - listpack::HEADER_SIZE - 1;
        if !node.is_empty() && !fill.fits(node.bytes_len() + entry_bytes, node.len() as u32 + 1) {
            nodes.push(QlNode::Packed(std::mem::take(&mut node).finish()));
        }
        add(&mut node);
    }
    if !node.is_empty() {
        nodes.push(QlNode::Packed(node.finish()));
    }
    let w = o.begin(RdbType::ListQuicklist2)?;
    w.write_len(nodes.len() as u64)?;
    for n in nodes {
        let (container, bytes) = match &n {
            QlNode::Packed(lp) => (quicklist_container::PACKED, &lp[..]),
            QlNode::Plain(s) => (quicklist_container::PLAIN, *s),
        };
        w.write_len(container)?;
        w.write_string(bytes)?;
    }
    Ok(())
}

fn write_hash<W: Write>(mut o: Obj<'_, '_, W>, h: &Hash) -> io::Result<()> {
    let mut buf: IntBuf = [0; 20];
    if h.has_field_ttls() {
        // Redis 7.4's RDB_TYPE_HASH_METADATA: the smallest deadline, then per field its
        // deadline relative to it (+1; 0 = none), the field and the value.
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
        return res;
    }
    // (Listpack limits can be configured past what a listpack can hold: then the plain form.)
    let mut huge = false;
    if h.is_listpack() {
        h.for_each(|f, v| huge |= f.len().max(v.bytes(&mut buf).len()) >= PACKED_THRESHOLD);
    }
    if h.is_listpack() && !huge {
        let mut lp = LpBuilder::new();
        h.for_each(|f, v| {
            lp.push_bytes(f);
            lp.push_bytes(v.bytes(&mut buf));
        });
        return o.begin(RdbType::HashListpack)?.write_string(&lp.finish());
    }
    let w = o.begin(RdbType::Hash)?;
    w.write_len(h.len() as u64)?;
    let mut res = Ok(());
    h.for_each(|f, v| {
        if res.is_ok() {
            res = w
                .write_string(f)
                .and_then(|_| w.write_string(v.bytes(&mut buf)));
        }
    });
    res
}

fn write_set<W: Write>(mut o: Obj<'_, '_, W>, s: &Set) -> io::Result<()> {
    if s.is_intset() {
        let ints: Option<Vec<i64>> = s
            .iter()
            .map(|m| match m {
                Member::Int(i) => Some(i),
                Member::Str(_) => None,
            })
            .collect();
        if let Some(ints) = ints {
            return o
                .begin(RdbType::SetIntset)?
                .write_string(&intset::encode(&ints));
        }
    }
    let w = o.begin(RdbType::Set)?;
    w.write_len(s.len() as u64)?;
    for m in s.iter() {
        match m {
            Member::Int(i) => w.write_int_string(i)?,
            Member::Str(b) => w.write_string(b)?,
        }
    }
    Ok(())
}

fn write_zset<W: Write>(mut o: Obj<'_, '_, W>, z: &ZSet) -> io::Result<()> {
    let n = z.len();
    let mut huge = false;
    if z.is_pack() && n > 0 {
        z.range(0, n, false, |m, _| huge |= m.len() >= PACKED_THRESHOLD);
    }
    if z.is_pack() && !huge {
        let mut lp = LpBuilder::new();
        if n > 0 {
            z.range(0, n, false, |m, s| {
                lp.push_bytes(m);
                lp.push_bytes(d2string(s).as_bytes());
            });
        }
        return o.begin(RdbType::ZsetListpack)?.write_string(&lp.finish());
    }
    let w = o.begin(RdbType::Zset2)?;
    w.write_len(n as u64)?;
    let mut res = Ok(());
    if n > 0 {
        // Highest first, as Redis writes them: its loader then inserts at the skiplist's head.
        z.range(0, n, true, |m, s| {
            if res.is_ok() {
                res = w.write_string(m).and_then(|_| w.write_binary_double(s));
            }
        });
    }
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
                s.add(
                    crate::types::compact::fmt_i64(i, &mut buf),
                    lim.set_max_intset,
                );
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
        RdbType::StreamListpacks
        | RdbType::StreamListpacks2
        | RdbType::StreamListpacks3
        | RdbType::ModulePreGa
        | RdbType::Module2 => {
            return Err(r.error(RdbErrorKind::Other(
                "streams and module values are not supported yet",
            )))
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
                            l.push_back(crate::types::compact::fmt_i64(*i, &mut buf), lim.list_fill)
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
