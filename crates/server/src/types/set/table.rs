//! The large set encoding: an open-addressing hash table of `CompactStr` members (8 bytes each;
//! strings of up to 7 bytes and integers live inside the word) with one control byte per slot
//! (0 = empty, else 0x80 | the top 7 hash bits), linear probing and backward-shift deletion (no
//! tombstones). 9 bytes per slot at a load of at most 0.8, against Redis's 8-byte bucket plus a
//! 24-byte (32 with jemalloc) dictEntry plus an sds header per member.
//!
//! SSCAN: a member's *home bucket* is `hash & mask`, exactly like a chained dict's bucket, and the
//! members of one home bucket are all found between the home slot and the next empty slot. The
//! cursor walks home buckets in Redis's reverse-binary order (`dictScan`), so the guarantee is
//! the same as Redis's: every member present for the whole scan is returned at least once, even
//! if the table grows or shrinks in between calls.

use std::sync::OnceLock;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::types::compact::{CompactStr, IntBuf};

const MIN_CAP: usize = 8;

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5e7);
        h.finish()
    })
}

#[inline]
pub fn hash(b: &[u8]) -> u64 {
    xxh3_64_with_seed(b, seed())
}

#[inline]
fn tag(h: u64) -> u8 {
    0x80 | (h >> 57) as u8
}

/// Does the member word hold exactly these bytes?
#[inline]
fn same(m: &CompactStr, b: &[u8]) -> bool {
    match m.raw_bytes() {
        Some(r) => r == b,
        None => {
            let mut buf: IntBuf = [0; 20];
            m.bytes(&mut buf) == b
        }
    }
}

#[inline]
fn member_hash(m: &CompactStr) -> u64 {
    let mut buf: IntBuf = [0; 20];
    hash(m.bytes(&mut buf))
}

/// Capacity for `n` members at a load of at most 0.8.
fn cap_for(n: usize) -> usize {
    let need = n.saturating_mul(5) / 4 + 1;
    need.next_power_of_two().max(MIN_CAP)
}

/// See the module docs.
#[derive(Clone)]
pub struct Table {
    ctrl: Box<[u8]>,
    slots: Box<[Option<CompactStr>]>,
    len: usize,
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
    fn mask(&self) -> usize {
        self.ctrl.len() - 1
    }

    pub fn capacity(&self) -> usize {
        self.ctrl.len()
    }

    pub fn heap_size(&self) -> usize {
        let strings: usize = self.slots.iter().flatten().map(|s| s.heap_size()).sum();
        self.ctrl.len() * 9 + strings
    }

    fn find_h(&self, b: &[u8], h: u64) -> Option<usize> {
        let mask = self.mask();
        let t = tag(h);
        let mut i = h as usize & mask;
        loop {
            let c = self.ctrl[i];
            if c == 0 {
                return None;
            }
            if c == t {
                if let Some(m) = &self.slots[i] {
                    if same(m, b) {
                        return Some(i);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    pub fn contains(&self, b: &[u8]) -> bool {
        self.find_h(b, hash(b)).is_some()
    }

    /// Places a member known to be absent (capacity already checked).
    fn place(&mut self, m: CompactStr, h: u64) {
        let mask = self.mask();
        let mut i = h as usize & mask;
        while self.ctrl[i] != 0 {
            i = (i + 1) & mask;
        }
        self.ctrl[i] = tag(h);
        self.slots[i] = Some(m);
        self.len += 1;
    }

    fn resize(&mut self, cap: usize) {
        let old_slots = std::mem::replace(&mut self.slots, (0..cap).map(|_| None).collect());
        self.ctrl = vec![0u8; cap].into_boxed_slice();
        self.len = 0;
        for m in old_slots.into_vec().into_iter().flatten() {
            let h = member_hash(&m);
            self.place(m, h);
        }
    }

    /// Adds `b`; false when already present.
    pub fn insert(&mut self, b: &[u8]) -> bool {
        let h = hash(b);
        if self.find_h(b, h).is_some() {
            return false;
        }
        if (self.len + 1) * 5 > self.ctrl.len() * 4 {
            self.resize(self.ctrl.len() * 2);
        }
        self.place(CompactStr::from_value(b), h);
        true
    }

    /// Adds an integer member known to be absent (intset conversion).
    pub fn insert_new_int(&mut self, v: i64) {
        let mut buf: IntBuf = [0; 20];
        let b = crate::types::compact::fmt_i64(v, &mut buf);
        let h = hash(b);
        if (self.len + 1) * 5 > self.ctrl.len() * 4 {
            self.resize(self.ctrl.len() * 2);
        }
        self.place(CompactStr::from_int(v), h);
    }

    /// Removes `b`; false when absent.
    pub fn remove(&mut self, b: &[u8]) -> bool {
        match self.find_h(b, hash(b)) {
            Some(i) => {
                self.remove_slot(i);
                true
            }
            None => false,
        }
    }

    /// Removes the member in slot `i` (occupied) and returns it.
    pub fn remove_slot(&mut self, i: usize) -> Option<CompactStr> {
        let mask = self.mask();
        let taken = self.slots[i].take();
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.ctrl[j] != 0 {
            let home = match &self.slots[j] {
                Some(m) => member_hash(m) as usize & mask,
                None => j,
            };
            // The member at j may fill the hole unless its home lies in (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.ctrl[hole] = self.ctrl[j];
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.ctrl[hole] = 0;
        self.slots[hole] = None;
        self.len -= 1;
        // Shrink below 10% fill, like Redis's htNeedsResize.
        if self.ctrl.len() > MIN_CAP && self.len * 10 < self.ctrl.len() {
            self.resize(cap_for(self.len));
        }
        taken
    }

    pub fn iter(&self) -> impl Iterator<Item = &CompactStr> + '_ {
        self.slots.iter().flatten()
    }

    /// A uniformly random occupied slot (the table must not be empty).
    pub fn random_slot(&self, rnd: &mut impl FnMut() -> u64) -> usize {
        let mask = self.mask();
        loop {
            let i = rnd() as usize & mask;
            if self.ctrl[i] != 0 {
                return i;
            }
        }
    }

    pub fn slot(&self, i: usize) -> Option<&CompactStr> {
        self.slots.get(i).and_then(|s| s.as_ref())
    }

    /// Calls `f` for every member whose home bucket is `b`.
    fn visit_bucket(&self, b: usize, f: &mut impl FnMut(&CompactStr)) {
        let mask = self.mask();
        let mut i = b;
        while self.ctrl[i] != 0 {
            if let Some(m) = &self.slots[i] {
                if member_hash(m) as usize & mask == b {
                    f(m);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// One SSCAN step from `cursor`: visits home buckets in reverse-binary order until `count`
    /// members were produced or `count * 10` buckets were visited. Returns the next cursor
    /// (0 when done).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&CompactStr)) -> u64 {
        let mask = self.mask() as u64;
        let mut v = cursor;
        let mut produced = 0usize;
        let mut budget = count.saturating_mul(10).max(1);
        loop {
            self.visit_bucket((v & mask) as usize, &mut |m| {
                produced += 1;
                f(m)
            });
            // Increment the reversed cursor (dictScan).
            v |= !mask;
            v = v.reverse_bits();
            v = v.wrapping_add(1);
            v = v.reverse_bits();
            budget -= 1;
            if v == 0 || produced >= count || budget == 0 {
                return v;
            }
        }
    }

    /// Checks the table invariants (tests): every member reachable from its home bucket without
    /// crossing an empty slot, tags match, the count is right.
    #[cfg(test)]
    pub fn check(&self) {
        let mask = self.mask();
        let mut n = 0;
        for i in 0..self.ctrl.len() {
            match &self.slots[i] {
                None => assert_eq!(self.ctrl[i], 0),
                Some(m) => {
                    n += 1;
                    let h = member_hash(m);
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
        assert!(self.len * 5 <= self.ctrl.len() * 4);
    }
}
