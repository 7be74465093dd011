//! Large hash encoding: an open-addressing table with linear probing over a power-of-two
//! number of slots.
//!
//! Memory: a slot is a pair of 8-byte `CompactStr` words (field, value) plus one control byte
//! in a parallel array: 17 bytes per slot at a load between 3/8 and 3/4, and no per-entry
//! allocation (strings up to 7 bytes and integer values live inside the words). Redis's dict
//! spends a 24-byte `dictEntry`, an 8-byte bucket pointer and two `sds` allocations per field.
//!
//! The control byte is 0 for an empty slot, else `0x80 | 7 hash bits`: a probe compares
//! strings only when those bits match (1 in 128 for a different field). Deletion is backward
//! shift (no tombstones); it and resizing recompute the home slot (`hash & mask`) of the
//! entries they move.
//!
//! Scanning (HSCAN) visits *home* slots in reverse-binary cursor order, as Redis's `dictScan`
//! visits buckets: with linear probing every entry whose home is `h` sits in the run of
//! occupied slots that starts at `h`, so one cursor step reports exactly the entries homed at
//! `h`. When the table doubles, home `h` splits into `h` and `h + old_size`, which the
//! reverse-binary increment has not visited yet iff it had not visited `h`; when it halves,
//! homes merge and entries may be reported twice but never missed. So an entry present for the
//! whole scan is always returned, whatever the table does between calls.

use std::sync::OnceLock;

use crate::types::CompactStr;

pub type Entry = (CompactStr, CompactStr);

const _: () = assert!(std::mem::size_of::<Option<Entry>>() == 16);

const MIN_CAP: usize = 8;

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let local = 0u8;
        t ^ (&local as *const u8 as u64).rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15
    })
}

/// The table's hash of a field.
#[inline]
pub fn hash_field(f: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(f, seed())
}

/// Control byte of a hash: never 0 (empty).
#[inline]
fn tag(h: u64) -> u8 {
    0x80 | (h >> 57) as u8
}

#[inline]
fn fbytes(k: &CompactStr) -> &[u8] {
    // Fields are stored with `from_bytes`, never int-encoded.
    k.raw_bytes().unwrap_or_default()
}

/// Smallest power-of-two capacity that holds `n` entries at a load of at most 3/4.
fn cap_for(n: usize) -> usize {
    (n.saturating_mul(4) / 3 + 1)
        .next_power_of_two()
        .max(MIN_CAP)
}

#[derive(Clone)]
pub struct Table {
    ctrl: Box<[u8]>,
    slots: Box<[Option<Entry>]>,
    len: usize,
}

#[inline]
fn field_is(e: &Option<Entry>, f: &[u8]) -> bool {
    match e {
        Some((k, _)) => k.raw_bytes() == Some(f),
        None => false,
    }
}

impl Table {
    pub fn with_capacity(n: usize) -> Table {
        let cap = cap_for(n);
        Table {
            ctrl: vec![0u8; cap].into_boxed_slice(),
            slots: (0..cap).map(|_| None).collect(),
            len: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        self.ctrl.len()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.ctrl.len() - 1
    }

    /// Home slot of the entry in slot `i` (occupied).
    #[inline]
    fn home_of(&self, i: usize) -> usize {
        match &self.slots[i] {
            Some((k, _)) => hash_field(fbytes(k)) as usize & self.mask(),
            None => i,
        }
    }

    /// Heap bytes: slot arrays plus the strings' own blocks.
    pub fn heap_size(&self) -> usize {
        let strings: usize = self
            .slots
            .iter()
            .flatten()
            .map(|(k, v)| k.heap_size() + v.heap_size())
            .sum();
        self.capacity() * (1 + 16) + strings
    }

    #[inline]
    fn find_slot(&self, f: &[u8], h: u64) -> Option<usize> {
        let mask = self.mask();
        let t = tag(h);
        let mut i = h as usize & mask;
        loop {
            let c = self.ctrl[i];
            if c == 0 {
                return None;
            }
            if c == t && field_is(&self.slots[i], f) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub fn get(&self, f: &[u8]) -> Option<&CompactStr> {
        let i = self.find_slot(f, hash_field(f))?;
        self.slots[i].as_ref().map(|e| &e.1)
    }

    #[inline]
    pub fn get_mut(&mut self, f: &[u8]) -> Option<&mut CompactStr> {
        let i = self.find_slot(f, hash_field(f))?;
        self.slots[i].as_mut().map(|e| &mut e.1)
    }

    /// Places an entry known to be absent (no growth check).
    #[inline]
    fn place(&mut self, h: u64, e: Entry) {
        let mask = self.mask();
        let mut i = h as usize & mask;
        while self.ctrl[i] != 0 {
            i = (i + 1) & mask;
        }
        self.ctrl[i] = tag(h);
        self.slots[i] = Some(e);
    }

    /// Rebuilds with `cap` slots (a power of two above the length).
    fn resize(&mut self, cap: usize) {
        self.ctrl = vec![0u8; cap].into_boxed_slice();
        let old_s = std::mem::replace(&mut self.slots, (0..cap).map(|_| None).collect());
        for e in old_s.into_vec().into_iter().flatten() {
            let h = hash_field(fbytes(&e.0));
            self.place(h, e);
        }
    }

    /// Inserts or overwrites. Returns true when the field is new.
    pub fn insert(&mut self, field: &[u8], value: CompactStr) -> bool {
        let h = hash_field(field);
        if let Some(i) = self.find_slot(field, h) {
            if let Some(e) = self.slots[i].as_mut() {
                e.1 = value;
            }
            return false;
        }
        self.insert_new_hashed(h, CompactStr::from_bytes(field), value);
        true
    }

    /// Inserts a field known to be absent.
    pub fn insert_new(&mut self, field: CompactStr, value: CompactStr) {
        let h = hash_field(fbytes(&field));
        self.insert_new_hashed(h, field, value);
    }

    fn insert_new_hashed(&mut self, h: u64, field: CompactStr, value: CompactStr) {
        if (self.len + 1) * 4 > self.capacity() * 3 {
            let cap = self.capacity() * 2;
            self.resize(cap);
        }
        self.place(h, (field, value));
        self.len += 1;
    }

    /// Removes `field`. Returns its entry.
    pub fn remove(&mut self, field: &[u8]) -> Option<Entry> {
        let i = self.find_slot(field, hash_field(field))?;
        let e = self.remove_slot(i);
        let cap = self.capacity();
        if cap > MIN_CAP && self.len * 8 < cap {
            self.resize(cap_for(self.len * 2));
        }
        e
    }

    /// Backward-shift deletion: later entries of the run move up so that every entry stays
    /// reachable from its home without tombstones.
    fn remove_slot(&mut self, i: usize) -> Option<Entry> {
        let mask = self.mask();
        let out = self.slots[i].take();
        self.ctrl[i] = 0;
        self.len -= 1;
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let c = self.ctrl[j];
            if c == 0 {
                break;
            }
            let home = self.home_of(j);
            // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.ctrl[hole] = c;
                self.slots[hole] = self.slots[j].take();
                self.ctrl[j] = 0;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        out
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.slots.iter().flatten()
    }

    /// Entry in slot `i`, if occupied (random sampling).
    #[inline]
    pub fn slot(&self, i: usize) -> Option<&Entry> {
        self.slots.get(i).and_then(|e| e.as_ref())
    }

    /// A uniformly random entry (the table is never empty when called).
    pub fn random(&self, rnd: &mut impl FnMut() -> u64) -> Option<&Entry> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        loop {
            let i = rnd() as usize & mask;
            if let Some(e) = &self.slots[i] {
                return Some(e);
            }
        }
    }

    /// One SCAN call: visits home slots from `cursor` in reverse-binary order, calling `f` for
    /// every entry homed there, until at least `count` entries were reported or `count * 10`
    /// homes were looked at. Returns the next cursor (0 when done).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&Entry)) -> u64 {
        let mask = self.mask() as u64;
        let mut v = cursor;
        let mut reported = 0usize;
        let mut homes = count.saturating_mul(10).max(1);
        loop {
            let home = (v & mask) as usize;
            let m = mask as usize;
            let mut i = home;
            while self.ctrl[i] != 0 {
                if self.home_of(i) == home {
                    if let Some(e) = &self.slots[i] {
                        f(e);
                        reported += 1;
                    }
                }
                i = (i + 1) & m;
            }
            // Reverse-binary increment of the unmasked bits (Redis dictScan).
            v |= !mask;
            v = v.reverse_bits();
            v = v.wrapping_add(1);
            v = v.reverse_bits();
            homes -= 1;
            if v == 0 || reported >= count || homes == 0 {
                return v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn cs(s: &str) -> CompactStr {
        CompactStr::from_value(s.as_bytes())
    }

    fn check(t: &Table) {
        // Every entry reachable from its home; len matches.
        let mask = t.mask();
        let mut n = 0;
        for i in 0..t.capacity() {
            if let Some((k, _)) = &t.slots[i] {
                n += 1;
                let h = hash_field(k.raw_bytes().unwrap());
                assert_eq!(t.ctrl[i], tag(h));
                let mut j = h as usize & mask;
                while j != i {
                    assert_ne!(t.ctrl[j], 0, "gap between home and slot");
                    j = (j + 1) & mask;
                }
            } else {
                assert_eq!(t.ctrl[i], 0);
            }
        }
        assert_eq!(n, t.len());
    }

    #[test]
    fn insert_get_remove_against_model() {
        let mut t = Table::with_capacity(0);
        let mut m: HashMap<String, String> = HashMap::new();
        let mut x: u64 = 12345;
        for step in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = format!("f{}", x % 3000);
            if x.is_multiple_of(3) {
                assert_eq!(t.remove(k.as_bytes()).is_some(), m.remove(&k).is_some());
            } else {
                let v = format!("v{step}");
                assert_eq!(t.insert(k.as_bytes(), cs(&v)), m.insert(k, v).is_none());
            }
            if step % 997 == 0 {
                check(&t);
            }
        }
        check(&t);
        assert_eq!(t.len(), m.len());
        for (k, v) in &m {
            assert_eq!(t.get(k.as_bytes()).unwrap().to_vec(), v.as_bytes());
        }
        // Shrinks back when emptied.
        for k in m.keys() {
            t.remove(k.as_bytes());
        }
        assert_eq!(t.len(), 0);
        assert!(t.capacity() <= 16);
    }

    #[test]
    fn scan_returns_everything_across_growth_and_shrink() {
        let mut t = Table::with_capacity(0);
        for i in 0..500 {
            t.insert(format!("stable{i}").as_bytes(), cs("x"));
        }
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut cursor = 0u64;
        let mut round = 0;
        loop {
            cursor = t.scan(cursor, 7, |(k, _)| {
                seen.insert(k.to_vec());
            });
            round += 1;
            // Churn: grow a lot, then shrink again.
            if round < 30 {
                for j in 0..200 {
                    t.insert(format!("tmp{round}_{j}").as_bytes(), cs("y"));
                }
            } else if round < 60 {
                for j in 0..200 {
                    t.remove(format!("tmp{}_{j}", round - 30).as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500 {
            assert!(seen.contains(format!("stable{i}").as_bytes()), "missed {i}");
        }
    }
}
