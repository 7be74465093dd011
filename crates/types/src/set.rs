//! The Set value type, with Redis 7.0's two encodings (OBJECT ENCODING names):
//! - `intset`: every member is an integer (Redis `string2ll` syntax) and there are at most
//!   `set-max-intset-entries` of them: sorted packed integers (see [`intset`]);
//! - `hashtable`: anything else: an open-addressing table of 8-byte `CompactStr` words (see
//!   [`OaTable`]).
//!
//! Conversion is one-way (intset → hashtable), when a non-integer member is added or the intset
//! grows past the limit, like Redis.

pub mod intset;

use crate::compact::{fmt_i64, parse_strict_i64, CompactStr, IntBuf};
use crate::oatable::{self, OaTable, Policy};
use crate::rand::Rng;
use intset::IntSet;

/// The `hashtable` encoding: member words (integers stay int-encoded and hash as their
/// decimal text).
pub type Table = OaTable<CompactStr>;

impl oatable::Entry for CompactStr {
    /// 9 bytes a slot at a load of at most 0.8; below 10% it shrinks (Redis's htNeedsResize).
    const POLICY: Policy = Policy::new((4, 5), 10, 1);

    #[inline]
    fn key_hash(&self) -> u64 {
        let mut buf: IntBuf = [0; 20];
        oatable::hash_key(self.bytes(&mut buf))
    }

    #[inline]
    fn key_is(&self, key: &[u8]) -> bool {
        match self.raw_bytes() {
            Some(r) => r == key,
            None => {
                let mut buf: IntBuf = [0; 20];
                self.bytes(&mut buf) == key
            }
        }
    }

    fn heap_size(&self) -> usize {
        CompactStr::heap_size(self)
    }
}

/// See the module docs.
#[derive(Clone)]
pub struct Set {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Ints(IntSet),
    Table(Box<Table>),
}

const _: () = assert!(std::mem::size_of::<Set>() <= 24);

/// A member as stored: an integer or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> Member<'a> {
    #[inline]
    fn of(m: &'a CompactStr) -> Member<'a> {
        match m.raw_bytes() {
            Some(b) => Member::Str(b),
            None => Member::Int(m.as_int().unwrap_or(0)),
        }
    }

    /// The member's bytes (integers formatted into `buf`).
    #[inline]
    pub fn bytes<'b>(&'b self, buf: &'b mut IntBuf) -> &'b [u8] {
        match self {
            Member::Int(v) => fmt_i64(*v, buf),
            Member::Str(b) => b,
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf: IntBuf = [0; 20];
        self.bytes(&mut buf).to_vec()
    }
}

impl Default for Set {
    fn default() -> Self {
        Set::new()
    }
}

impl Set {
    /// An empty set (intset-encoded until a member says otherwise).
    pub fn new() -> Set {
        Set {
            repr: Repr::Ints(IntSet::new()),
        }
    }

    /// Builds a set by adding `items` in order (STORE results, tests).
    pub fn from_members<'a>(items: impl IntoIterator<Item = &'a [u8]>, max_intset: usize) -> Set {
        let mut s = Set::new();
        for m in items {
            s.add(m, max_intset);
        }
        s
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(i) => i.len(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        match &self.repr {
            Repr::Ints(_) => "intset",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn is_intset(&self) -> bool {
        matches!(self.repr, Repr::Ints(_))
    }

    /// Heap bytes owned beyond the object itself (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Ints(i) => i.heap_size(),
            Repr::Table(t) => std::mem::size_of::<Table>() + t.heap_size(),
        }
    }

    fn convert(&mut self, extra: usize) {
        if let Repr::Ints(i) = &self.repr {
            let mut t = Table::with_capacity(i.len() + extra);
            for v in i.iter() {
                t.insert_new(CompactStr::from_int(v));
            }
            self.repr = Repr::Table(Box::new(t));
        }
    }

    /// Adds `m`; false when already a member. `max_intset` is `set-max-intset-entries`.
    pub fn add(&mut self, m: &[u8], max_intset: usize) -> bool {
        match &mut self.repr {
            Repr::Ints(i) => match parse_strict_i64(m) {
                Some(v) => {
                    if !i.insert(v) {
                        return false;
                    }
                    if i.len() > max_intset {
                        self.convert(0);
                    }
                    true
                }
                None => {
                    self.convert(1);
                    if let Repr::Table(t) = &mut self.repr {
                        table_add(t, m);
                    }
                    true
                }
            },
            Repr::Table(t) => table_add(t, m),
        }
    }

    /// Removes `m`; false when it was not a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(i) => match parse_strict_i64(m) {
                Some(v) => i.remove(v),
                None => false,
            },
            Repr::Table(t) => t.remove(m).is_some(),
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(i) => parse_strict_i64(m).is_some_and(|v| i.contains(v)),
            Repr::Table(t) => t.contains(m),
        }
    }

    /// Membership of a stored member of another set (avoids formatting integers when both sides
    /// are intsets).
    pub fn contains_member(&self, m: Member<'_>) -> bool {
        match (&self.repr, m) {
            (Repr::Ints(i), Member::Int(v)) => i.contains(v),
            (Repr::Ints(_), Member::Str(_)) => false,
            (Repr::Table(t), m) => {
                let mut buf: IntBuf = [0; 20];
                t.contains(m.bytes(&mut buf))
            }
        }
    }

    /// Members in storage order (ascending for intsets, unspecified for tables).
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Ints(i) => Iter::Ints(i, 0),
            Repr::Table(t) => Iter::Table(Box::new(t.iter())),
        }
    }

    /// Upper bound of positions for `random_pos`/`at_pos`.
    pub fn positions(&self) -> usize {
        match &self.repr {
            Repr::Ints(i) => i.len(),
            Repr::Table(t) => t.capacity(),
        }
    }

    /// A uniformly random position holding a member (the set must not be empty). Positions are
    /// stable until the set is modified.
    pub fn random_pos(&self, rng: &mut Rng) -> usize {
        match &self.repr {
            Repr::Ints(i) => rng.index(i.len()),
            Repr::Table(t) => t.random_slot(rng),
        }
    }

    /// The member at a position returned by `random_pos`.
    pub fn at_pos(&self, pos: usize) -> Option<Member<'_>> {
        match &self.repr {
            Repr::Ints(i) => (pos < i.len()).then(|| Member::Int(i.get(pos))),
            Repr::Table(t) => t.slot(pos).map(Member::of),
        }
    }

    /// A uniformly random member (None when empty).
    pub fn random(&self, rng: &mut Rng) -> Option<Member<'_>> {
        if self.is_empty() {
            return None;
        }
        let p = self.random_pos(rng);
        self.at_pos(p)
    }

    /// Removes and returns a uniformly random member.
    pub fn pop_random(&mut self, rng: &mut Rng) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let p = self.random_pos(rng);
        match &mut self.repr {
            Repr::Ints(i) => {
                let v = i.get(p);
                i.remove_at(p);
                let mut buf: IntBuf = [0; 20];
                Some(fmt_i64(v, &mut buf).to_vec())
            }
            Repr::Table(t) => t.remove_slot(p).map(|m| m.to_vec()),
        }
    }

    /// Calls `f` for the members stored from position `pos` on (see [`Set::positions`]), until
    /// `max` were reported; returns the position to go on from, None at the end. Positions stay
    /// put while the set is unchanged (a snapshot writes a big set across steps so, each member
    /// exactly once, in one pass over the table).
    pub fn for_each_from(
        &self,
        pos: usize,
        max: usize,
        mut f: impl FnMut(Member<'_>),
    ) -> Option<usize> {
        let (mut i, mut n) = (pos, 0);
        while i < self.positions() {
            if n == max {
                return Some(i);
            }
            if let Some(m) = self.at_pos(i) {
                f(m);
                n += 1;
            }
            i += 1;
        }
        None
    }

    /// One SSCAN step. Intsets return everything with cursor 0 (like Redis's compact
    /// encodings); tables follow the reverse-binary cursor (see [`oatable`]).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(Member<'_>)) -> u64 {
        match &self.repr {
            Repr::Ints(i) => {
                i.iter().for_each(|v| f(Member::Int(v)));
                0
            }
            Repr::Table(t) => t.scan(cursor, count, |m| f(Member::of(m))),
        }
    }

    /// All members as owned byte strings.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(|m| m.to_vec()).collect()
    }

    #[cfg(test)]
    fn check(&self) {
        if let Repr::Table(t) = &self.repr {
            t.check();
        }
    }
}

/// Adds `m` to a table; false when already a member.
fn table_add(t: &mut Table, m: &[u8]) -> bool {
    t.upsert(m, |e| match e {
        Some(_) => None,
        None => Some(CompactStr::from_value(m)),
    })
}

/// Iterator over a set's members.
pub enum Iter<'a> {
    Ints(&'a IntSet, usize),
    Table(Box<dyn Iterator<Item = &'a CompactStr> + 'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;

    #[inline]
    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Ints(s, i) => {
                if *i < s.len() {
                    *i += 1;
                    Some(Member::Int(s.get(*i - 1)))
                } else {
                    None
                }
            }
            Iter::Table(it) => it.next().map(Member::of),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn encodings_convert_at_the_limits() {
        let mut s = Set::new();
        for i in 0..512 {
            assert!(s.add(i.to_string().as_bytes(), 512));
        }
        assert_eq!(s.encoding_name(), "intset");
        assert!(s.add(b"512", 512));
        assert_eq!(s.encoding_name(), "hashtable");
        assert_eq!(s.len(), 513);
        for i in 0..513 {
            assert!(s.contains(i.to_string().as_bytes()));
        }
        let mut t = Set::new();
        t.add(b"1", 512);
        t.add(b"a", 512);
        assert_eq!(t.encoding_name(), "hashtable");
        assert!(t.contains(b"1") && t.contains(b"a") && !t.contains(b"01"));
        let mut u = Set::new();
        u.add(b"01", 512);
        assert_eq!(u.encoding_name(), "hashtable");
        assert!(!u.contains(b"1"));
        s.check();
    }

    #[test]
    fn scan_returns_every_stable_member_while_growing_and_shrinking() {
        let mut s = Set::new();
        for i in 0..200 {
            s.add(format!("m{i}").as_bytes(), 512);
        }
        let stable: BTreeSet<Vec<u8>> = s.to_vecs().into_iter().collect();
        let mut seen = BTreeSet::new();
        let mut cur = 0;
        let mut round = 0;
        loop {
            cur = s.scan(cur, 5, |m| {
                seen.insert(m.to_vec());
            });
            round += 1;
            // Grow a lot, then shrink back, between calls.
            if round % 3 == 0 {
                for i in 0..300 {
                    s.add(format!("x{round}-{i}").as_bytes(), 512);
                }
            } else if round % 3 == 1 {
                for i in 0..300 {
                    s.remove(format!("x{}-{i}", round - 1).as_bytes());
                }
            }
            s.check();
            if cur == 0 {
                break;
            }
        }
        for m in &stable {
            assert!(seen.contains(m), "missed {:?}", String::from_utf8_lossy(m));
        }
    }

    #[test]
    fn random_members_cover_the_set() {
        let mut r = crate::rand::Rng::new(7);
        let mut s = Set::new();
        for i in 0..50 {
            s.add(format!("e{i}").as_bytes(), 512);
        }
        let mut seen = BTreeSet::new();
        for _ in 0..5000 {
            seen.insert(s.random(&mut r).unwrap().to_vec());
        }
        assert_eq!(seen.len(), 50);
        let mut n = 0;
        while let Some(m) = s.pop_random(&mut r) {
            assert!(!s.contains(&m));
            n += 1;
            s.check();
        }
        assert_eq!(n, 50);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(Vec<u8>),
        Rem(Vec<u8>),
        Pop,
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (-40i64..40).prop_map(|v| v.to_string().into_bytes()),
            any::<i64>().prop_map(|v| v.to_string().into_bytes()),
            "[a-e]{0,3}".prop_map(|s| s.into_bytes()),
            "[a-z]{8,20}".prop_map(|s| s.into_bytes()),
            Just(b"007".to_vec()),
            Just(b"-0".to_vec()),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => member().prop_map(Op::Add),
            3 => member().prop_map(Op::Rem),
            1 => Just(Op::Pop),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_btreeset(ops in proptest::collection::vec(op(), 1..400), limit in 0usize..40) {
            let mut s = Set::new();
            let mut model: BTreeSet<Vec<u8>> = BTreeSet::new();
            let mut r = crate::rand::Rng::new(99);
            for o in ops {
                match o {
                    Op::Add(m) => prop_assert_eq!(s.add(&m, limit), model.insert(m)),
                    Op::Rem(m) => prop_assert_eq!(s.remove(&m), model.remove(&m)),
                    Op::Pop => match s.pop_random(&mut r) {
                        Some(m) => prop_assert!(model.remove(&m)),
                        None => prop_assert!(model.is_empty()),
                    },
                }
                prop_assert_eq!(s.len(), model.len());
                let all_ints = model.iter().all(|m| parse_strict_i64(m).is_some());
                if s.is_intset() {
                    prop_assert!(all_ints && model.len() <= limit);
                }
                s.check();
            }
            let got: BTreeSet<Vec<u8>> = s.to_vecs().into_iter().collect();
            prop_assert_eq!(&got, &model);
            for m in &model {
                prop_assert!(s.contains(m));
            }
            if s.is_intset() {
                let v: Vec<i64> = s.iter().map(|m| match m { Member::Int(v) => v, _ => i64::MIN }).collect();
                let mut sorted = v.clone();
                sorted.sort();
                prop_assert_eq!(v, sorted);
            }
            let mut seen = BTreeSet::new();
            let mut cur = 0;
            loop {
                cur = s.scan(cur, 3, |m| { seen.insert(m.to_vec()); });
                if cur == 0 { break; }
            }
            prop_assert_eq!(seen, model);
        }
    }
}
