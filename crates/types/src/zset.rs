//! The sorted set value.
//!
//! Two encodings, as in Redis 7.0 (OBJECT ENCODING names):
//! - `listpack` ([`pack::Pack`]): one byte buffer of (member, score) sorted by score then member,
//!   used up to `zset-max-listpack-entries` entries of at most `zset-max-listpack-value` bytes.
//! - `skiplist` ([`Big`]): two order-statistic B+trees ([`btree::Tree`]): `by_score` keyed by
//!   (score, member) owns the members and gives ranks in O(log n); `by_member` keyed by
//!   (xxh3(member), member) maps a member to its score and gives ZSCAN a stateless cursor: the
//!   cursor is a hash value, every call returns the members whose hash is >= cursor in hash order,
//!   so a member present for the whole scan is returned whatever is added, removed or rescored.
//!   `by_member` items alias the member strings owned by `by_score` (no second copy).
//!
//! Conversion goes one way (compact → large), like Redis.

pub mod btree;
pub mod pack;

use std::mem::ManuallyDrop;

use btree::{mbytes, Item, Tree};
use pack::Pack;

use super::compact::CompactStr;

/// Encoding thresholds (`zset-max-listpack-entries` / `-value`). Any count fits a pack: its
/// header saturates instead of wrapping (see [`pack`]).
pub use super::Limits;

/// Order-preserving map of a score to u64 (-0 and 0 map alike: Redis treats them as equal).
#[inline]
pub fn skey(s: f64) -> u64 {
    let b = if s == 0.0 { 0u64 } else { s.to_bits() };
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// Inverse of [`skey`].
#[inline]
pub fn unskey(k: u64) -> f64 {
    if k >> 63 == 1 {
        f64::from_bits(k & !(1 << 63))
    } else {
        f64::from_bits(!k)
    }
}

/// Hash of a member: the `by_member` order and the ZSCAN cursor space. 32 bits and never 0 (the
/// cursor that ends a scan), so that every `by_member` item can keep it: the tree's binary
/// searches then compare a stored number instead of hashing the member of every probed item
/// (which was a quarter of ZADD's CPU time).
#[inline]
pub fn mhash(m: &[u8]) -> u64 {
    ((xxhash_rust::xxh3::xxh3_64(m) >> 32) as u32).max(1) as u64
}

/// `by_score` item: owns the member.
struct SItem {
    score: f64,
    member: CompactStr,
}

impl Item for SItem {
    #[inline]
    fn prefix(&self) -> u64 {
        skey(self.score)
    }
    #[inline]
    fn member(&self) -> &[u8] {
        mbytes(&self.member)
    }
}

/// `by_member` item: a non-owning bitwise copy of the member word owned by the `SItem`, the
/// score, and the member's hash (`mhash`), so that comparisons need not dereference the member
/// unless the hashes are equal.
struct MItem {
    member: ManuallyDrop<CompactStr>,
    score: f64,
    hash: u32,
}

impl Item for MItem {
    #[inline]
    fn prefix(&self) -> u64 {
        self.hash as u64
    }
    #[inline]
    fn member(&self) -> &[u8] {
        mbytes(&self.member)
    }
}

/// The large encoding.
#[derive(Default)]
pub struct Big {
    by_score: Tree<SItem>,
    by_member: Tree<MItem>,
}

// SAFETY: `MItem` aliases strings owned by the same `Big`; nothing is shared outside it.
unsafe impl Send for Big {}
unsafe impl Sync for Big {}

impl Big {
    fn len(&self) -> usize {
        self.by_score.len()
    }

    fn score(&self, m: &[u8]) -> Option<f64> {
        self.by_member.find((mhash(m), m)).map(|(_, x)| x.score)
    }

    fn insert(&mut self, m: &[u8], score: f64) {
        let owner = CompactStr::from_bytes(m);
        // SAFETY: a bitwise copy of the word; the heap block (if any) stays owned by `owner`,
        // which lives in `by_score` until the member is removed from both trees together.
        let alias = ManuallyDrop::new(unsafe { std::ptr::read(&owner) });
        self.by_member.insert(MItem {
            member: alias,
            score,
            hash: mhash(m) as u32,
        });
        self.by_score.insert(SItem {
            score,
            member: owner,
        });
    }

    fn remove(&mut self, m: &[u8]) -> Option<f64> {
        let mi = self.by_member.remove((mhash(m), m))?;
        // Drops the owner after the alias is gone.
        self.by_score.remove((skey(mi.score), m));
        Some(mi.score)
    }

    fn update(&mut self, m: &[u8], new: f64) {
        let Some(mi) = self.by_member.find_mut((mhash(m), m)) else {
            return;
        };
        let old = mi.score;
        mi.score = new;
        if let Some(mut si) = self.by_score.remove((skey(old), m)) {
            si.score = new;
            self.by_score.insert(si);
        }
    }

    fn remove_at(&mut self, rank: usize) -> Option<(CompactStr, f64)> {
        let si = self.by_score.remove_at(rank)?;
        let m = mbytes(&si.member);
        self.by_member.remove((mhash(m), m));
        Some((si.member, si.score))
    }
}

impl Clone for Big {
    fn clone(&self) -> Self {
        let mut b = Big::default();
        self.by_score
            .for_range(0, usize::MAX, false, |x| b.insert(x.member(), x.score));
        b
    }
}

/// See the module docs. 16-aligned: its value word shares tag 7 with streams, told apart by
/// the pointer's fourth bit (`types::value`).
#[derive(Clone)]
#[repr(align(16))]
pub enum ZSet {
    Pack(Pack),
    Big(Box<Big>),
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::Pack(Pack::default())
    }
}

impl ZSet {
    /// An empty zset in the encoding Redis would pick for `n` members of at most `maxlen` bytes.
    pub fn with_hint(lim: &Limits, n: usize, maxlen: usize) -> ZSet {
        if lim.fits(n, maxlen) {
            ZSet::default()
        } else {
            ZSet::Big(Box::default())
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ZSet::Pack(p) => p.len(),
            ZSet::Big(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_pack(&self) -> bool {
        matches!(self, ZSet::Pack(_))
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            ZSet::Pack(_) => "listpack",
            ZSet::Big(_) => "skiplist",
        }
    }

    /// Heap bytes owned beyond the object itself (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match self {
            ZSet::Pack(p) => p.heap_size(),
            ZSet::Big(b) => {
                let mut strs = 0;
                b.by_score
                    .for_range(0, usize::MAX, false, |x| strs += x.member.heap_size());
                std::mem::size_of::<Big>() + b.by_score.heap_size() + b.by_member.heap_size() + strs
            }
        }
    }

    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            ZSet::Pack(p) => p.find(m).map(|e| e.score),
            ZSet::Big(b) => b.score(m),
        }
    }

    /// Switches to the large encoding (no-op when already there). Redis's SORT/SORT_RO does this
    /// to the zset it sorts ("destructively convert encoded sorted sets"), visible in OBJECT
    /// ENCODING afterwards; it is not a modification (no WATCH/keyspace signal).
    pub fn convert_to_large(&mut self) {
        self.convert()
    }

    fn convert(&mut self) {
        if let ZSet::Pack(p) = self {
            let mut b = Box::<Big>::default();
            for e in p.iter() {
                b.insert(e.member, e.score);
            }
            *self = ZSet::Big(b);
        }
    }

    /// Adds a member that is not present (converting to the large encoding when it would no
    /// longer fit the compact one).
    pub fn insert(&mut self, m: &[u8], score: f64, lim: &Limits) {
        if let ZSet::Pack(p) = self {
            if !lim.fits(p.len() + 1, m.len()) {
                self.convert();
            }
        }
        match self {
            ZSet::Pack(p) => p.insert(m, score),
            ZSet::Big(b) => b.insert(m, score),
        }
    }

    /// Changes the score of a present member.
    pub fn update(&mut self, m: &[u8], score: f64) {
        match self {
            ZSet::Pack(p) => {
                if let Some(e) = p.find(m) {
                    let (s, en) = (e.start, e.end);
                    p.remove_span(s, en);
                    p.insert(m, score);
                }
            }
            ZSet::Big(b) => b.update(m, score),
        }
    }

    /// Removes a member; returns its score.
    pub fn remove(&mut self, m: &[u8]) -> Option<f64> {
        match self {
            ZSet::Pack(p) => {
                let e = p.find(m)?;
                let (s, en, sc) = (e.start, e.end, e.score);
                p.remove_span(s, en);
                Some(sc)
            }
            ZSet::Big(b) => b.remove(m),
        }
    }

    /// Ascending 0-based rank and score of a member.
    pub fn rank(&self, m: &[u8]) -> Option<(usize, f64)> {
        match self {
            ZSet::Pack(p) => p
                .iter()
                .enumerate()
                .find(|(_, e)| e.member == m)
                .map(|(i, e)| (i, e.score)),
            ZSet::Big(b) => {
                let s = b.score(m)?;
                b.by_score.find((skey(s), m)).map(|(r, _)| (r, s))
            }
        }
    }

    /// Number of leading members (in score order) for which `f(score, member)` holds; `f` must
    /// hold on a prefix of the (score, member) order.
    pub fn count_where(&self, f: impl Fn(f64, &[u8]) -> bool) -> usize {
        match self {
            ZSet::Pack(p) => p.iter().take_while(|e| f(e.score, e.member)).count(),
            ZSet::Big(b) => b.by_score.partition_point(|k, m| f(unskey(k), m)),
        }
    }

    /// Calls `f(member, score)` for ranks `start..end` (clamped), descending when `rev` (then
    /// the first call is for rank `end - 1`).
    pub fn range(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        let end = end.min(self.len());
        if start >= end {
            return;
        }
        match self {
            ZSet::Pack(p) => {
                if !rev {
                    p.iter()
                        .skip(start)
                        .take(end - start)
                        .for_each(|e| f(e.member, e.score));
                } else {
                    let v: Vec<_> = p.iter().skip(start).take(end - start).collect();
                    v.iter().rev().for_each(|e| f(e.member, e.score));
                }
            }
            ZSet::Big(b) => b
                .by_score
                .for_range(start, end, rev, |x| f(x.member(), x.score)),
        }
    }

    /// Member and score at `rank`.
    pub fn at(&self, rank: usize) -> Option<(Vec<u8>, f64)> {
        match self {
            ZSet::Pack(p) => p.iter().nth(rank).map(|e| (e.member.to_vec(), e.score)),
            ZSet::Big(b) => b.by_score.at(rank).map(|x| (x.member().to_vec(), x.score)),
        }
    }

    /// Removes ranks `start..end` (clamped); returns how many.
    pub fn remove_range(&mut self, start: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if start >= end {
            return 0;
        }
        match self {
            ZSet::Pack(p) => {
                let mut it = p.iter().skip(start);
                let Some(first) = it.next() else {
                    return 0;
                };
                let mut last_end = first.end;
                for e in it.take(end - start - 1) {
                    last_end = e.end;
                }
                let s = first.start;
                p.remove_spans(s, last_end, end - start);
            }
            ZSet::Big(b) => {
                for _ in start..end {
                    b.remove_at(start);
                }
            }
        }
        end - start
    }

    /// Removes and returns the member at `rank`.
    pub fn pop_at(&mut self, rank: usize) -> Option<(Vec<u8>, f64)> {
        match self {
            ZSet::Pack(p) => {
                let e = p.iter().nth(rank)?;
                let r = (e.member.to_vec(), e.score);
                let (s, en) = (e.start, e.end);
                p.remove_span(s, en);
                Some(r)
            }
            ZSet::Big(b) => b.remove_at(rank).map(|(m, s)| (mbytes(&m).to_vec(), s)),
        }
    }

    /// ZSCAN step: calls `f(member, score)` for about `count` members and returns the next
    /// cursor (0 = done). The compact encoding returns everything at once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match self {
            ZSet::Pack(p) => {
                p.iter().for_each(|e| f(e.member, e.score));
                0
            }
            ZSet::Big(b) => {
                let t = &b.by_member;
                let start = t.partition_point(|h, _| h < cursor);
                let mut n = 0;
                let mut last: Option<u64> = None;
                let mut next = 0;
                t.for_range_while(start, usize::MAX, false, |x| {
                    let h = x.prefix();
                    if n >= count.max(1) && last != Some(h) {
                        next = h;
                        return false;
                    }
                    f(x.member(), x.score);
                    n += 1;
                    last = Some(h);
                    true
                });
                next
            }
        }
    }

    /// Builds a zset from members sorted by (score, member), in the encoding Redis would end
    /// up with for it.
    pub fn from_sorted(items: &[(Vec<u8>, f64)], lim: &Limits) -> ZSet {
        let maxlen = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
        if lim.fits(items.len(), maxlen) {
            let mut p = Pack::default();
            for (m, s) in items {
                p.push(m, *s);
            }
            ZSet::Pack(p)
        } else {
            let mut b = Box::<Big>::default();
            for (m, s) in items {
                b.insert(m, *s);
            }
            ZSet::Big(b)
        }
    }
}

#[cfg(test)]
mod tests;
