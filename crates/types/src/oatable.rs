//! The large encoding of hashes and sets: an open-addressing table with linear probing over a
//! power-of-two number of slots, generic over what a slot holds ([`Entry`]: a set member word,
//! or a hash's field and value words).
//!
//! Memory: one control byte per slot in a parallel array plus the entry itself (`Option<E>`,
//! the same size as `E` for `CompactStr` words): 9 bytes a slot for a set, 17 for a hash, and no
//! per-entry allocation (strings up to 7 bytes and integers live inside the words). Redis's dict
//! spends an 8-byte bucket pointer, a 24-byte `dictEntry` and an `sds` allocation per string.
//!
//! The control byte is 0 for an empty slot, else `0x80 | 7 hash bits`: a probe compares keys
//! only when those bits match (1 in 128 for a different key). Deletion is backward shift (no
//! tombstones); it and resizing recompute the home slot (`hash & mask`) of the entries they
//! move. How full a table may get and when it shrinks is the entry type's [`Policy`].
//!
//! Scanning (HSCAN, SSCAN) visits *home* slots in reverse-binary cursor order, as Redis's
//! `dictScan` visits buckets: with linear probing every entry whose home is `h` sits in the run
//! of occupied slots that starts at `h`, so one cursor step reports exactly the entries homed at
//! `h`. When the table doubles, home `h` splits into `h` and `h + old_size`, which the
//! reverse-binary increment has not visited yet iff it had not visited `h`; when it halves,
//! homes merge and entries may be reported twice but never missed. So an entry present for the
//! whole scan is always returned, whatever the table does between calls.

use std::sync::OnceLock;

use crate::rand::Rng;

const MIN_CAP: usize = 8;

/// Sizing rules of a table kind.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    /// Highest load, as a fraction `(numerator, denominator)`: an insert that would pass it
    /// doubles the table.
    pub max_load: (usize, usize),
    /// A removal that leaves `len * shrink_below < capacity` shrinks the table...
    pub shrink_below: usize,
    /// ... to the capacity for `len * shrink_room` entries.
    pub shrink_room: usize,
}

impl Policy {
    pub const fn new(max_load: (usize, usize), shrink_below: usize, shrink_room: usize) -> Policy {
        Policy {
            max_load,
            shrink_below,
            shrink_room,
        }
    }
}

/// What a table slot holds.
pub trait Entry {
    const POLICY: Policy;

    /// [`hash_key`] of the entry's key bytes.
    fn key_hash(&self) -> u64;

    /// Whether the entry's key is exactly `key`.
    fn key_is(&self, key: &[u8]) -> bool;

    /// Heap bytes the entry owns.
    fn heap_size(&self) -> usize;
}

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(crate::rand::entropy)
}

/// The tables' hash of a key (seeded once per process).
#[inline]
pub fn hash_key(b: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(b, seed())
}

/// Control byte of a hash: never 0 (empty).
#[inline]
fn tag(h: u64) -> u8 {
    0x80 | (h >> 57) as u8
}

/// See the module docs.
#[derive(Clone)]
pub struct OaTable<E> {
    ctrl: Box<[u8]>,
    slots: Box<[Option<E>]>,
    len: usize,
}

impl<E: Entry> OaTable<E> {
    /// Smallest power-of-two capacity that holds `n` entries within the maximum load.
    fn cap_for(n: usize) -> usize {
        let (num, den) = E::POLICY.max_load;
        (n.saturating_mul(den) / num + 1)
            .next_power_of_two()
            .max(MIN_CAP)
    }

    pub fn with_capacity(n: usize) -> Self {
        let cap = Self::cap_for(n);
        OaTable {
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

    /// Number of slots (positions for [`OaTable::slot`]).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.ctrl.len()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.ctrl.len() - 1
    }

    /// Heap bytes: the two slot arrays plus what the entries own.
    pub fn heap_size(&self) -> usize {
        let entries: usize = self.iter().map(Entry::heap_size).sum();
        self.capacity() * (1 + std::mem::size_of::<Option<E>>()) + entries
    }

    /// Home slot of the entry in slot `i` (`i` itself when empty).
    #[inline]
    fn home_of(&self, i: usize) -> usize {
        match &self.slots[i] {
            Some(e) => e.key_hash() as usize & self.mask(),
            None => i,
        }
    }

    #[inline]
    fn find_hashed(&self, key: &[u8], h: u64) -> Option<usize> {
        let mask = self.mask();
        let t = tag(h);
        let mut i = h as usize & mask;
        loop {
            let c = self.ctrl[i];
            if c == 0 {
                return None;
            }
            if c == t && self.slots[i].as_ref().is_some_and(|e| e.key_is(key)) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&E> {
        let i = self.find_hashed(key, hash_key(key))?;
        self.slots[i].as_ref()
    }

    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut E> {
        let i = self.find_hashed(key, hash_key(key))?;
        self.slots[i].as_mut()
    }

    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.find_hashed(key, hash_key(key)).is_some()
    }

    /// Places an entry known to be absent (no growth check, no count).
    #[inline]
    fn place(&mut self, h: u64, e: E) {
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
        let old = std::mem::replace(&mut self.slots, (0..cap).map(|_| None).collect());
        for e in old.into_vec().into_iter().flatten() {
            self.place(e.key_hash(), e);
        }
    }

    fn insert_new_hashed(&mut self, h: u64, e: E) {
        let (num, den) = E::POLICY.max_load;
        if (self.len + 1) * den > self.capacity() * num {
            self.resize(self.capacity() * 2);
        }
        self.place(h, e);
        self.len += 1;
    }

    /// Inserts an entry whose key is known to be absent.
    pub fn insert_new(&mut self, e: E) {
        self.insert_new_hashed(e.key_hash(), e);
    }

    /// Looks `key` up and calls `f` with its entry, or with `None` when absent; then `f`'s
    /// result, if any, is inserted (its key must be `key`). Returns true when it was.
    pub fn upsert(&mut self, key: &[u8], f: impl FnOnce(Option<&mut E>) -> Option<E>) -> bool {
        let h = hash_key(key);
        if let Some(i) = self.find_hashed(key, h) {
            f(self.slots[i].as_mut());
            return false;
        }
        match f(None) {
            Some(e) => {
                self.insert_new_hashed(h, e);
                true
            }
            None => false,
        }
    }

    /// Removes the entry with `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<E> {
        let i = self.find_hashed(key, hash_key(key))?;
        self.remove_slot(i)
    }

    /// Removes the entry in slot `i` (see [`OaTable::random_slot`]), shrinking the table when
    /// the policy says so. Backward-shift deletion: later entries of the run move up so that
    /// every entry stays reachable from its home without tombstones.
    pub fn remove_slot(&mut self, i: usize) -> Option<E> {
        let out = self.slots.get_mut(i)?.take()?;
        let mask = self.mask();
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
        let p = E::POLICY;
        let cap = self.capacity();
        if cap > MIN_CAP && self.len * p.shrink_below < cap {
            self.resize(Self::cap_for(self.len * p.shrink_room));
        }
        Some(out)
    }

    /// Entries in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &E> + '_ {
        self.slots.iter().flatten()
    }

    /// Entry in slot `i`, if occupied (random sampling).
    #[inline]
    pub fn slot(&self, i: usize) -> Option<&E> {
        self.slots.get(i).and_then(|e| e.as_ref())
    }

    /// A uniformly random occupied slot (the table must not be empty). Slots are stable until
    /// the table is modified.
    pub fn random_slot(&self, rng: &mut Rng) -> usize {
        let mask = self.mask();
        loop {
            let i = rng.next_u64() as usize & mask;
            if self.ctrl[i] != 0 {
                return i;
            }
        }
    }

    /// A uniformly random entry (None when empty).
    pub fn random(&self, rng: &mut Rng) -> Option<&E> {
        if self.len == 0 {
            return None;
        }
        self.slot(self.random_slot(rng))
    }

    /// One SCAN call: visits home slots from `cursor` in reverse-binary order, calling `f` for
    /// every entry homed there, until at least `count` entries were reported or `count * 10`
    /// homes were looked at. Returns the next cursor (0 when done).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&E)) -> u64 {
        let mask = self.mask() as u64;
        let mut v = cursor;
        let mut reported = 0usize;
        let mut homes = count.saturating_mul(10).max(1);
        loop {
            let home = (v & mask) as usize;
            let mut i = home;
            while self.ctrl[i] != 0 {
                if self.home_of(i) == home {
                    if let Some(e) = &self.slots[i] {
                        f(e);
                        reported += 1;
                    }
                }
                i = (i + 1) & mask as usize;
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

    /// Checks the invariants (tests): every entry reachable from its home without crossing an
    /// empty slot, tags match, the count is right, the load is within the policy.
    #[cfg(test)]
    pub fn check(&self) {
        let mask = self.mask();
        let mut n = 0;
        for i in 0..self.capacity() {
            match &self.slots[i] {
                None => assert_eq!(self.ctrl[i], 0),
                Some(e) => {
                    n += 1;
                    let h = e.key_hash();
                    assert_eq!(self.ctrl[i], tag(h));
                    let mut j = h as usize & mask;
                    while j != i {
                        assert_ne!(self.ctrl[j], 0, "gap between home and slot");
                        j = (j + 1) & mask;
                    }
                }
            }
        }
        assert_eq!(n, self.len);
        let (num, den) = E::POLICY.max_load;
        assert!(self.len * den <= self.capacity() * num);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CompactStr;
    use std::collections::{HashMap, HashSet};

    /// A hash table (field, value), as `types::hash` uses it.
    type Pairs = OaTable<(CompactStr, CompactStr)>;

    fn cs(s: &str) -> CompactStr {
        CompactStr::from_value(s.as_bytes())
    }

    fn put(t: &mut Pairs, k: &str, v: &str) -> bool {
        let v = cs(v);
        t.upsert(k.as_bytes(), |e| match e {
            Some(e) => {
                e.1 = v;
                None
            }
            None => Some((CompactStr::from_bytes(k.as_bytes()), v)),
        })
    }

    #[test]
    fn insert_get_remove_against_model() {
        let mut t = Pairs::with_capacity(0);
        let mut m: HashMap<String, String> = HashMap::new();
        let mut r = Rng::new(12345);
        for step in 0..20000 {
            let x = r.next_u64();
            let k = format!("f{}", x % 3000);
            if x.is_multiple_of(3) {
                assert_eq!(t.remove(k.as_bytes()).is_some(), m.remove(&k).is_some());
            } else {
                let v = format!("v{step}");
                assert_eq!(put(&mut t, &k, &v), m.insert(k, v).is_none());
            }
            if step % 997 == 0 {
                t.check();
            }
        }
        t.check();
        assert_eq!(t.len(), m.len());
        for (k, v) in &m {
            assert_eq!(t.get(k.as_bytes()).unwrap().1.to_vec(), v.as_bytes());
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
        let mut t = Pairs::with_capacity(0);
        for i in 0..500 {
            put(&mut t, &format!("stable{i}"), "x");
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
                    put(&mut t, &format!("tmp{round}_{j}"), "y");
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

    #[test]
    fn slot_sizes_stay_compact() {
        assert_eq!(std::mem::size_of::<Option<CompactStr>>(), 8);
        assert_eq!(std::mem::size_of::<Option<(CompactStr, CompactStr)>>(), 16);
        let set = OaTable::<CompactStr>::with_capacity(0);
        assert_eq!(set.heap_size(), set.capacity() * 9);
        let hash = Pairs::with_capacity(0);
        assert_eq!(hash.heap_size(), hash.capacity() * 17);
    }
}
