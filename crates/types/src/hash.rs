//! The hash value type.
//!
//! Two encodings, as in Redis 7.0 (`OBJECT ENCODING`):
//! - `listpack` ([`listpack::Lp`]): one contiguous buffer of field/value strings in insertion
//!   order, for hashes of at most `hash-max-listpack-entries` fields whose fields and values
//!   are at most `hash-max-listpack-value` bytes;
//! - `hashtable` ([`OaTable`]): an open-addressing table of (field, value) pairs of 8-byte
//!   `CompactStr` words.
//!
//! A hash converts to the table when a write would break either limit and never converts
//! back (like Redis). Per-field expiry (Redis 7.4 HEXPIRE & co) lives beside the encoding in
//! [`FieldTtl`]: deadline per field plus the earliest deadline, so checking "is anything due?"
//! is one comparison; due fields are removed by [`Hash::expire_fields`], which commands call
//! before touching the hash and the shard's active-expiry step calls for registered hashes.

pub mod listpack;

use std::collections::{BTreeSet, HashMap};

use listpack::Lp;

use super::compact::IntBuf;
use super::oatable::{self, OaTable, Policy};
use super::CompactStr;
use crate::rand::Rng;

/// The `hashtable` encoding's entries: (field, value). Fields are stored with
/// `CompactStr::from_bytes`, never int-encoded; values may be.
pub type Table = OaTable<(CompactStr, CompactStr)>;

const _: () = assert!(std::mem::size_of::<Option<(CompactStr, CompactStr)>>() == 16);

impl oatable::Entry for (CompactStr, CompactStr) {
    /// 17 bytes a slot at a load between 3/8 and 3/4; below 1/8 it shrinks to half full.
    const POLICY: Policy = Policy::new((3, 4), 8, 2);

    #[inline]
    fn key_hash(&self) -> u64 {
        oatable::hash_key(self.0.raw_bytes().unwrap_or_default())
    }

    #[inline]
    fn key_is(&self, key: &[u8]) -> bool {
        self.0.raw_bytes() == Some(key)
    }

    fn heap_size(&self) -> usize {
        self.0.heap_size() + self.1.heap_size()
    }
}

/// Encoding thresholds (`hash-max-listpack-entries` / `-value`).
pub use super::Limits;

#[derive(Clone)]
enum Enc {
    Lp(Lp),
    Table(Box<Table>),
}

/// Per-field deadlines (unix ms).
#[derive(Clone, Default)]
pub struct FieldTtl {
    map: HashMap<Box<[u8]>, u64>,
    /// Earliest deadline in `map` (a lower bound after removals; exact after a sweep).
    next: u64,
}

#[derive(Clone)]
pub struct Hash {
    enc: Enc,
    /// Pairs in the listpack (the table counts its own).
    lp_len: usize,
    ttl: Option<Box<FieldTtl>>,
}

// One 32-byte jemalloc size class for the boxed object.
const _: () = assert!(std::mem::size_of::<Hash>() <= 32);

impl Default for Hash {
    fn default() -> Self {
        Hash {
            enc: Enc::Lp(Lp::default()),
            lp_len: 0,
            ttl: None,
        }
    }
}

/// A borrowed value: listpack bytes or a table word (possibly int-encoded).
#[derive(Clone, Copy)]
pub enum HVal<'a> {
    Bytes(&'a [u8]),
    Str(&'a CompactStr),
}

impl<'a> HVal<'a> {
    #[inline]
    pub fn bytes<'b>(&'b self, buf: &'b mut IntBuf) -> &'b [u8]
    where
        'a: 'b,
    {
        match self {
            HVal::Bytes(b) => b,
            HVal::Str(s) => s.bytes(buf),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        match self {
            HVal::Bytes(b) => b.len(),
            HVal::Str(s) => s.len(),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut b: IntBuf = [0; 20];
        self.bytes(&mut b).to_vec()
    }
}

/// Random access to a hash's entries for HRANDFIELD.
pub enum Sampler<'a> {
    Lp(Vec<(&'a [u8], &'a [u8])>),
    Table(&'a Table),
}

impl<'a> Sampler<'a> {
    /// A uniformly random entry.
    pub fn pick(&self, rng: &mut Rng) -> Option<(&'a [u8], HVal<'a>)> {
        match self {
            Sampler::Lp(v) => {
                if v.is_empty() {
                    return None;
                }
                let (f, val) = v[rng.index(v.len())];
                Some((f, HVal::Bytes(val)))
            }
            Sampler::Table(t) => t
                .random(rng)
                .and_then(|(k, v)| Some((k.raw_bytes()?, HVal::Str(v)))),
        }
    }

    /// `count` distinct entries (count < len), in no particular order.
    pub fn distinct(&self, count: usize, rng: &mut Rng) -> Vec<(&'a [u8], HVal<'a>)> {
        match self {
            Sampler::Lp(v) => {
                let mut idx: Vec<usize> = (0..v.len()).collect();
                rng.partial_shuffle(&mut idx, count);
                idx[..count.min(idx.len())]
                    .iter()
                    .map(|&i| (v[i].0, HVal::Bytes(v[i].1)))
                    .collect()
            }
            Sampler::Table(t) => {
                let len = t.len();
                let mut slots: Vec<usize>;
                if count.saturating_mul(3) > len {
                    // Dense request: shuffle the occupied slots.
                    slots = (0..t.capacity()).filter(|&i| t.slot(i).is_some()).collect();
                    rng.partial_shuffle(&mut slots, count);
                    slots.truncate(count);
                } else {
                    // Sparse request: rejection-sample distinct slots.
                    let mask = t.capacity() - 1;
                    let mut seen = std::collections::HashSet::with_capacity(count);
                    slots = Vec::with_capacity(count);
                    while slots.len() < count {
                        let i = rng.next_u64() as usize & mask;
                        if t.slot(i).is_some() && seen.insert(i) {
                            slots.push(i);
                        }
                    }
                }
                slots
                    .into_iter()
                    .filter_map(|i| t.slot(i))
                    .filter_map(|(k, v)| Some((k.raw_bytes()?, HVal::Str(v))))
                    .collect()
            }
        }
    }
}

impl Hash {
    pub fn len(&self) -> usize {
        match &self.enc {
            Enc::Lp(_) => self.lp_len,
            Enc::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        match &self.enc {
            Enc::Lp(_) => "listpack",
            Enc::Table(_) => "hashtable",
        }
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self.enc, Enc::Lp(_))
    }

    /// Heap bytes owned beyond the object itself (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        let enc = match &self.enc {
            Enc::Lp(lp) => lp.bytes(),
            Enc::Table(t) => std::mem::size_of::<Table>() + t.heap_size(),
        };
        let ttl = self.ttl.as_ref().map_or(0, |t| {
            std::mem::size_of::<FieldTtl>() + t.map.keys().map(|k| k.len() + 8 + 16).sum::<usize>()
        });
        enc + ttl
    }

    pub fn get(&self, field: &[u8]) -> Option<HVal<'_>> {
        match &self.enc {
            Enc::Lp(lp) => lp.get(field).map(HVal::Bytes),
            Enc::Table(t) => t.get(field).map(|(_, v)| HVal::Str(v)),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Converts to the table encoding (no-op when already there).
    pub fn convert_to_table(&mut self) {
        if let Enc::Lp(lp) = &self.enc {
            let mut t = Table::with_capacity(self.lp_len);
            for (f, v) in lp.iter() {
                t.insert_new((CompactStr::from_bytes(f), CompactStr::from_value(v)));
            }
            self.enc = Enc::Table(Box::new(t));
            self.lp_len = 0;
        }
    }

    /// Redis `hashTypeTryConversion`: a listpack hash about to receive these strings converts
    /// when any of them is longer than the value limit (even if nothing ends up written).
    pub fn prepare_for(&mut self, strings: &[&[u8]], lim: Limits) {
        if self.is_listpack() && strings.iter().any(|s| s.len() > lim.value) {
            self.convert_to_table();
        }
    }

    /// Sets `field` to `value`, converting the encoding when a limit is crossed. Clears the
    /// field's TTL unless `keep_ttl` (HINCRBY keeps it, HSET drops it, as Redis 7.4 does).
    /// Returns true when the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: Limits, keep_ttl: bool) -> bool {
        if self.is_listpack() && (field.len() > lim.value || value.len() > lim.value) {
            self.convert_to_table();
        }
        if !keep_ttl {
            self.clear_field_ttl(field);
        }
        match &mut self.enc {
            Enc::Lp(lp) => {
                if let Some(loc) = lp.find(field) {
                    lp.set_value(&loc, value);
                    false
                } else {
                    lp.push(field, value);
                    self.lp_len += 1;
                    if self.lp_len > lim.entries {
                        self.convert_to_table();
                    }
                    true
                }
            }
            Enc::Table(t) => {
                let value = CompactStr::from_value(value);
                t.upsert(field, |e| match e {
                    Some(e) => {
                        e.1 = value;
                        None
                    }
                    None => Some((CompactStr::from_bytes(field), value)),
                })
            }
        }
    }

    /// Removes `field`. Returns true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let removed = match &mut self.enc {
            Enc::Lp(lp) => match lp.find(field) {
                Some(loc) => {
                    lp.remove(&loc);
                    self.lp_len -= 1;
                    true
                }
                None => false,
            },
            Enc::Table(t) => t.remove(field).is_some(),
        };
        if removed {
            self.clear_field_ttl(field);
        }
        removed
    }

    /// Calls `f` for every pair, in encoding order (insertion order for a listpack).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], HVal<'_>)) {
        match &self.enc {
            Enc::Lp(lp) => lp.iter().for_each(|(k, v)| f(k, HVal::Bytes(v))),
            Enc::Table(t) => {
                for (k, v) in t.iter() {
                    if let Some(k) = k.raw_bytes() {
                        f(k, HVal::Str(v));
                    }
                }
            }
        }
    }

    /// Calls `f` for the pairs stored from position `pos` on, until `max` were reported; returns
    /// the position to go on from, None at the end. Positions stay put while the hash is
    /// unchanged (a snapshot writes a big hash across steps so, each pair exactly once, in one
    /// pass over the table). A listpack reports everything at once.
    pub fn for_each_from(
        &self,
        pos: usize,
        max: usize,
        mut f: impl FnMut(&[u8], HVal<'_>),
    ) -> Option<usize> {
        match &self.enc {
            Enc::Lp(lp) => {
                lp.iter().for_each(|(k, v)| f(k, HVal::Bytes(v)));
                None
            }
            Enc::Table(t) => {
                let (mut i, mut n) = (pos, 0);
                while i < t.capacity() {
                    if n == max {
                        return Some(i);
                    }
                    if let Some((k, v)) = t.slot(i) {
                        if let Some(k) = k.raw_bytes() {
                            f(k, HVal::Str(v));
                            n += 1;
                        }
                    }
                    i += 1;
                }
                None
            }
        }
    }

    /// One HSCAN step: a listpack reports everything and ends the scan; a table follows the
    /// reverse-binary cursor (see [`oatable`]).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], HVal<'_>)) -> u64 {
        match &self.enc {
            Enc::Lp(lp) => {
                lp.iter().for_each(|(k, v)| f(k, HVal::Bytes(v)));
                0
            }
            Enc::Table(t) => t.scan(cursor, count, |(k, v)| {
                if let Some(k) = k.raw_bytes() {
                    f(k, HVal::Str(v));
                }
            }),
        }
    }

    pub fn sampler(&self) -> Sampler<'_> {
        match &self.enc {
            Enc::Lp(lp) => Sampler::Lp(lp.iter().collect()),
            Enc::Table(t) => Sampler::Table(t),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Field expiry

    /// Whether any field has a TTL.
    #[inline]
    pub fn has_field_ttls(&self) -> bool {
        self.ttl.is_some()
    }

    /// Whether some field's deadline may have passed (cheap: one comparison).
    #[inline]
    pub fn needs_sweep(&self, now: u64) -> bool {
        matches!(&self.ttl, Some(t) if t.next <= now)
    }

    /// Earliest field deadline (a lower bound), if any field has a TTL.
    pub fn next_field_deadline(&self) -> Option<u64> {
        self.ttl.as_ref().map(|t| t.next)
    }

    pub fn field_ttl(&self, field: &[u8]) -> Option<u64> {
        self.ttl.as_ref().and_then(|t| t.map.get(field).copied())
    }

    /// Sets the deadline of an existing field.
    pub fn set_field_ttl(&mut self, field: &[u8], at: u64) {
        let t = self.ttl.get_or_insert_with(|| {
            Box::new(FieldTtl {
                map: HashMap::new(),
                next: u64::MAX,
            })
        });
        t.map.insert(field.into(), at);
        t.next = t.next.min(at);
    }

    /// Drops the deadline of `field`. Returns true when it had one.
    pub fn clear_field_ttl(&mut self, field: &[u8]) -> bool {
        let Some(t) = self.ttl.as_mut() else {
            return false;
        };
        let had = t.map.remove(field).is_some();
        if t.map.is_empty() {
            self.ttl = None;
        }
        had
    }

    /// Removes every field whose deadline is at or before `now`. Returns how many.
    pub fn expire_fields(&mut self, now: u64) -> usize {
        let Some(t) = self.ttl.as_mut() else {
            return 0;
        };
        if t.next > now {
            return 0;
        }
        let mut dead = Vec::new();
        let mut next = u64::MAX;
        t.map.retain(|f, &mut at| {
            if at <= now {
                dead.push(f.clone());
                false
            } else {
                next = next.min(at);
                true
            }
        });
        t.next = next;
        if t.map.is_empty() {
            self.ttl = None;
        }
        for f in &dead {
            match &mut self.enc {
                Enc::Lp(lp) => {
                    if let Some(loc) = lp.find(f) {
                        lp.remove(&loc);
                        self.lp_len -= 1;
                    }
                }
                Enc::Table(t) => {
                    t.remove(f);
                }
            }
        }
        dead.len()
    }
}

/// Per-db index of the hashes that have field TTLs, by their earliest field deadline, for the
/// active field-expiry step (`engine::db::Db::active_expire_fields`). Entries may go stale
/// (key deleted, renamed, overwritten); the expiry step checks each popped key and drops or
/// re-files it, so staleness costs one lookup, never a wrong deletion.
#[derive(Default)]
pub struct HfeIndex {
    by_key: HashMap<Box<[u8]>, u64>,
    by_time: BTreeSet<(u64, Box<[u8]>)>,
}

impl HfeIndex {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Files `key` under deadline `at` (None: forget it).
    pub fn set(&mut self, key: &[u8], at: Option<u64>) {
        match (self.by_key.get_mut(key), at) {
            (Some(cur), Some(at)) if *cur == at => {}
            (Some(cur), Some(at)) => {
                let old = *cur;
                *cur = at;
                self.by_time.remove(&(old, key.into()));
                self.by_time.insert((at, key.into()));
            }
            (Some(_), None) => {
                if let Some(old) = self.by_key.remove(key) {
                    self.by_time.remove(&(old, key.into()));
                }
            }
            (None, Some(at)) => {
                self.by_key.insert(key.into(), at);
                self.by_time.insert((at, key.into()));
            }
            (None, None) => {}
        }
    }

    /// Removes and returns up to `max` keys whose deadline is at or before `now`.
    pub fn pop_due(&mut self, now: u64, max: usize) -> Vec<Box<[u8]>> {
        let mut out = Vec::new();
        while out.len() < max {
            match self.by_time.first() {
                Some((at, _)) if *at <= now => {}
                _ => break,
            }
            if let Some((_, k)) = self.by_time.pop_first() {
                self.by_key.remove(&k);
                out.push(k);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Redis 7.0's built-in defaults (its example redis.conf says 128 entries; the compiled-in
    /// default, which a server started without a config file uses, is 512).
    const DEFAULT: Limits = Limits {
        entries: 512,
        value: 64,
    };

    fn dump(h: &Hash) -> HashMap<Vec<u8>, Vec<u8>> {
        let mut m = HashMap::new();
        h.for_each(|k, v| {
            m.insert(k.to_vec(), v.to_vec());
        });
        m
    }

    #[derive(Debug, Clone)]
    enum Op {
        Set(u8, Vec<u8>),
        Del(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..40, prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..6),
                proptest::collection::vec(any::<u8>(), 60..70),
                (0i64..100000).prop_map(|i| i.to_string().into_bytes()),
            ])
                .prop_map(|(f, v)| Op::Set(f, v)),
            1 => (0u8..40).prop_map(Op::Del),
        ]
    }

    fn field(i: u8) -> Vec<u8> {
        if i.is_multiple_of(7) {
            vec![b'f'; 60 + i as usize / 7]
        } else {
            format!("f{i}").into_bytes()
        }
    }

    proptest! {
        #[test]
        fn matches_model(ops in proptest::collection::vec(op(), 1..300), entries in 1usize..50) {
            let lim = Limits { entries, value: 64 };
            let mut h = Hash::default();
            let mut m: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            let mut order: Vec<Vec<u8>> = Vec::new();
            for o in ops {
                match o {
                    Op::Set(f, v) => {
                        let f = field(f);
                        let new = h.set(&f, &v, lim, false);
                        prop_assert_eq!(new, m.insert(f.clone(), v).is_none());
                        if new { order.push(f); }
                    }
                    Op::Del(f) => {
                        let f = field(f);
                        prop_assert_eq!(h.remove(&f), m.remove(&f).is_some());
                        order.retain(|x| x != &f);
                    }
                }
                prop_assert_eq!(h.len(), m.len());
                // Limits respected while compact.
                if h.is_listpack() {
                    prop_assert!(h.len() <= entries);
                    let mut keys = Vec::new();
                    h.for_each(|k, v| { assert!(k.len() <= 64 && v.len() <= 64); keys.push(k.to_vec()); });
                    // Insertion order kept.
                    prop_assert_eq!(&keys, &order);
                }
            }
            prop_assert_eq!(dump(&h), m.clone());
            for (k, v) in &m {
                prop_assert_eq!(h.get(k).map(|x| x.to_vec()), Some(v.clone()));
            }
            // A full scan returns every field exactly as stored.
            let mut seen = HashMap::new();
            let mut c = 0;
            loop {
                c = h.scan(c, 3, |k, v| { seen.insert(k.to_vec(), v.to_vec()); });
                if c == 0 { break; }
            }
            prop_assert_eq!(seen, m);
        }
    }

    #[test]
    fn converts_on_entries_and_length() {
        let lim = Limits {
            entries: 4,
            value: 8,
        };
        let mut h = Hash::default();
        for i in 0..4 {
            h.set(format!("f{i}").as_bytes(), b"v", lim, false);
        }
        assert_eq!(h.encoding_name(), "listpack");
        h.set(b"f4", b"v", lim, false);
        assert_eq!(h.encoding_name(), "hashtable");

        let mut h = Hash::default();
        h.set(b"a", b"12345678", lim, false);
        assert_eq!(h.encoding_name(), "listpack");
        h.set(b"a", b"123456789", lim, false);
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.get(b"a").unwrap().to_vec(), b"123456789");

        let mut h = Hash::default();
        h.prepare_for(&[b"x", b"123456789"], lim);
        assert_eq!(h.encoding_name(), "hashtable");
    }

    #[test]
    fn field_ttls_expire_in_both_encodings() {
        for big in [false, true] {
            let mut h = Hash::default();
            for i in 0..10 {
                h.set(format!("f{i}").as_bytes(), b"v", DEFAULT, false);
            }
            if big {
                h.convert_to_table();
            }
            h.set_field_ttl(b"f1", 100);
            h.set_field_ttl(b"f2", 200);
            assert!(!h.needs_sweep(99));
            assert_eq!(h.expire_fields(99), 0);
            assert!(h.needs_sweep(100));
            assert_eq!(h.expire_fields(150), 1);
            assert_eq!(h.len(), 9);
            assert_eq!(h.next_field_deadline(), Some(200));
            // HSET drops the TTL; HINCRBY-style keep does not.
            h.set(b"f2", b"w", DEFAULT, true);
            assert_eq!(h.field_ttl(b"f2"), Some(200));
            h.set(b"f2", b"w", DEFAULT, false);
            assert_eq!(h.field_ttl(b"f2"), None);
            assert!(!h.has_field_ttls());
            assert_eq!(h.expire_fields(1000), 0);
            assert_eq!(h.len(), 9);
        }
    }
}
