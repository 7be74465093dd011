//! Order-statistic B+tree: the index structure of the large zset encoding.
//!
//! Items live in leaves (up to `LEAF_CAP` per leaf, in key order); inner nodes hold, per child, its
//! item count (so rank ↔ position is O(log n)) and between children an owned separator key that
//! is a lower bound of the right child (a stale separator left behind by a deletion is still a
//! valid bound, so deletions never rewrite separators). Keys are `(u64 prefix, member bytes)`
//! compared lexicographically; the zset uses two trees: one by (order-preserving score bits,
//! member), one by (member hash, member).
//!
//! Compared with a skiplist this stores an item in 16–24 contiguous bytes instead of a node of
//! 32+ bytes plus levels, and walks a few wide nodes instead of chasing ~log2(n) pointers.

use std::cmp::Ordering;

use crate::compact::CompactStr;

/// Something stored in a [`Tree`]: it knows its key.
pub trait Item {
    fn prefix(&self) -> u64;
    fn member(&self) -> &[u8];
}

/// Key comparison shared by items and separators.
#[inline]
pub fn cmp_key(a: (u64, &[u8]), b: (u64, &[u8])) -> Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1))
}

/// Bytes of a member stored as a raw (never int-encoded) `CompactStr`.
#[inline]
pub fn mbytes(s: &CompactStr) -> &[u8] {
    s.raw_bytes().unwrap_or(&[])
}

/// An owned copy of a key: lower bound of the child to its right.
struct Sep {
    prefix: u64,
    member: CompactStr,
}

impl Sep {
    fn of<T: Item>(t: &T) -> Sep {
        Sep {
            prefix: t.prefix(),
            member: CompactStr::from_bytes(t.member()),
        }
    }
    #[inline]
    fn key(&self) -> (u64, &[u8]) {
        (self.prefix, mbytes(&self.member))
    }
}

const LEAF_CAP: usize = 64;
const LEAF_MIN: usize = 16;
const INNER_CAP: usize = 64;
const INNER_MIN: usize = 16;

struct Inner<T> {
    /// `seps[i]` is a lower bound of every key in `kids[i + 1]` and above every key in `kids[i]`.
    seps: Vec<Sep>,
    #[allow(clippy::vec_box)] // nodes move between parents on splits/merges: keep them boxed
    kids: Vec<Box<Node<T>>>,
    counts: Vec<usize>,
    total: usize,
}

enum Node<T> {
    Leaf(Vec<T>),
    Inner(Inner<T>),
}

fn new_leaf<T>() -> Vec<T> {
    Vec::with_capacity(LEAF_CAP)
}

impl<T: Item> Node<T> {
    #[inline]
    fn count(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Inner(n) => n.total,
        }
    }

    fn underfull(&self) -> bool {
        match self {
            Node::Leaf(v) => v.len() < LEAF_MIN,
            Node::Inner(n) => n.kids.len() < INNER_MIN,
        }
    }

    /// Inserts; returns the new right sibling when the node split.
    fn insert(&mut self, item: T) -> Option<(Sep, Box<Node<T>>)> {
        match self {
            Node::Leaf(v) => {
                let pos = v.partition_point(|x| {
                    cmp_key((x.prefix(), x.member()), (item.prefix(), item.member()))
                        == Ordering::Less
                });
                if v.len() < LEAF_CAP {
                    // Capacity grows by doubling up to LEAF_CAP (a power of two): never beyond.
                    v.insert(pos, item);
                    return None;
                }
                // Full: split first so a leaf never allocates more than LEAF_CAP items (whose
                // size is an allocator size class). Appending in key order (the common bulk
                // case) leaves the left leaf full.
                let len = v.len();
                let at = if pos == len {
                    len
                } else if pos == 0 {
                    0
                } else {
                    len / 2
                };
                let mut right = new_leaf();
                right.extend(v.drain(at..));
                if at == len || (at != 0 && pos > at) {
                    right.insert(pos - at, item);
                } else {
                    v.insert(pos, item);
                }
                let sep = Sep::of(&right[0]);
                Some((sep, Box::new(Node::Leaf(right))))
            }
            Node::Inner(n) => {
                let i = n.seps.partition_point(|s| {
                    cmp_key(s.key(), (item.prefix(), item.member())) != Ordering::Greater
                });
                n.total += 1;
                match n.kids[i].insert(item) {
                    None => {
                        n.counts[i] += 1;
                        None
                    }
                    Some((sep, right)) => {
                        n.counts[i] = n.kids[i].count();
                        n.counts.insert(i + 1, right.count());
                        n.seps.insert(i, sep);
                        n.kids.insert(i + 1, right);
                        if n.kids.len() <= INNER_CAP {
                            return None;
                        }
                        let mid = n.kids.len() / 2;
                        let kids = n.kids.split_off(mid);
                        let counts = n.counts.split_off(mid);
                        let mut seps = n.seps.split_off(mid - 1);
                        let up = seps.remove(0);
                        let total: usize = counts.iter().sum();
                        n.total -= total;
                        Some((
                            up,
                            Box::new(Node::Inner(Inner {
                                seps,
                                kids,
                                counts,
                                total,
                            })),
                        ))
                    }
                }
            }
        }
    }

    fn remove(&mut self, k: (u64, &[u8])) -> Option<T> {
        match self {
            Node::Leaf(v) => {
                let pos = v.partition_point(|x| cmp_key((x.prefix(), x.member()), k).is_lt());
                if pos < v.len() && cmp_key((v[pos].prefix(), v[pos].member()), k).is_eq() {
                    Some(v.remove(pos))
                } else {
                    None
                }
            }
            Node::Inner(n) => {
                let i = n.seps.partition_point(|s| cmp_key(s.key(), k).is_le());
                let r = n.kids[i].remove(k)?;
                n.counts[i] -= 1;
                n.total -= 1;
                n.fix(i);
                Some(r)
            }
        }
    }

    fn remove_at(&mut self, rank: usize) -> Option<T> {
        match self {
            Node::Leaf(v) => (rank < v.len()).then(|| v.remove(rank)),
            Node::Inner(n) => {
                let (i, before) = n.child_at(rank)?;
                let r = n.kids[i].remove_at(rank - before)?;
                n.counts[i] -= 1;
                n.total -= 1;
                n.fix(i);
                Some(r)
            }
        }
    }
}

impl<T: Item> Inner<T> {
    /// Child holding `rank`, and the number of items before that child.
    #[inline]
    fn child_at(&self, rank: usize) -> Option<(usize, usize)> {
        let mut before = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            if rank < before + c {
                return Some((i, before));
            }
            before += c;
        }
        None
    }

    /// Restores the fill invariant of `kids[i]` after a removal below it.
    fn fix(&mut self, i: usize) {
        if !self.kids[i].underfull() || self.kids.len() < 2 {
            return;
        }
        let l = if i + 1 < self.kids.len() { i } else { i - 1 };
        let r = l + 1;
        let (a, b) = self.kids.split_at_mut(r);
        match (&mut *a[l], &mut *b[0]) {
            (Node::Leaf(lv), Node::Leaf(rv)) => {
                if lv.len() + rv.len() <= LEAF_CAP {
                    lv.append(rv);
                    self.counts[l] = lv.len();
                    self.remove_kid(r);
                } else {
                    let want = (lv.len() + rv.len()) / 2;
                    if lv.len() < want {
                        let n = want - lv.len();
                        lv.extend(rv.drain(..n));
                    } else {
                        let tail: Vec<T> = lv.drain(want..).collect();
                        rv.splice(0..0, tail);
                    }
                    self.seps[l] = Sep::of(&rv[0]);
                    self.counts[l] = lv.len();
                    self.counts[r] = rv.len();
                }
            }
            (Node::Inner(ln), Node::Inner(rn)) => {
                if ln.kids.len() + rn.kids.len() <= INNER_CAP {
                    let sep = std::mem::replace(
                        &mut self.seps[l],
                        Sep {
                            prefix: 0,
                            member: CompactStr::from_bytes(b""),
                        },
                    );
                    ln.seps.push(sep);
                    ln.seps.append(&mut rn.seps);
                    ln.kids.append(&mut rn.kids);
                    ln.counts.append(&mut rn.counts);
                    ln.total += rn.total;
                    self.counts[l] = ln.total;
                    self.remove_kid(r);
                } else {
                    let target = (ln.kids.len() + rn.kids.len()) / 2;
                    while ln.kids.len() < target {
                        let s = std::mem::replace(&mut self.seps[l], rn.seps.remove(0));
                        ln.seps.push(s);
                        ln.kids.push(rn.kids.remove(0));
                        let c = rn.counts.remove(0);
                        ln.counts.push(c);
                        ln.total += c;
                        rn.total -= c;
                    }
                    while ln.kids.len() > target {
                        let (Some(kid), Some(c), Some(s)) =
                            (ln.kids.pop(), ln.counts.pop(), ln.seps.pop())
                        else {
                            break;
                        };
                        let old = std::mem::replace(&mut self.seps[l], s);
                        rn.seps.insert(0, old);
                        rn.kids.insert(0, kid);
                        rn.counts.insert(0, c);
                        ln.total -= c;
                        rn.total += c;
                    }
                    self.counts[l] = ln.total;
                    self.counts[r] = rn.total;
                }
            }
            // Siblings are always at the same depth.
            _ => {}
        }
    }

    /// Drops the (now empty) child `r` and the separator before it.
    fn remove_kid(&mut self, r: usize) {
        self.kids.remove(r);
        self.counts.remove(r);
        self.seps.remove(r - 1);
    }
}

/// See the module docs.
pub struct Tree<T> {
    root: Box<Node<T>>,
}

impl<T: Item> Default for Tree<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item> Tree<T> {
    pub fn new() -> Self {
        Tree {
            // Grows on demand: a large zset may still be small (a long member converts it).
            root: Box::new(Node::Leaf(Vec::new())),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.root.count()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts an item whose key is not present.
    pub fn insert(&mut self, item: T) {
        if let Some((sep, right)) = self.root.insert(item) {
            let left = std::mem::replace(&mut *self.root, Node::Leaf(Vec::new()));
            let counts = vec![left.count(), right.count()];
            let total = counts[0] + counts[1];
            *self.root = Node::Inner(Inner {
                seps: vec![sep],
                kids: vec![Box::new(left), right],
                counts,
                total,
            });
        }
    }

    fn shrink_root(&mut self) {
        loop {
            let only = match &mut *self.root {
                Node::Inner(n) if n.kids.len() == 1 => n.kids.pop(),
                _ => None,
            };
            match only {
                Some(k) => self.root = k,
                None => break,
            }
        }
    }

    pub fn remove(&mut self, k: (u64, &[u8])) -> Option<T> {
        let r = self.root.remove(k);
        self.shrink_root();
        r
    }

    pub fn remove_at(&mut self, rank: usize) -> Option<T> {
        let r = self.root.remove_at(rank);
        self.shrink_root();
        r
    }

    /// Number of leading items (in key order) for which `f` holds; `f` must be true on a
    /// prefix of the key space (it is also asked about separator keys).
    pub fn partition_point(&self, f: impl Fn(u64, &[u8]) -> bool) -> usize {
        let mut node = &*self.root;
        let mut acc = 0;
        loop {
            match node {
                Node::Leaf(v) => return acc + v.partition_point(|x| f(x.prefix(), x.member())),
                Node::Inner(n) => {
                    let i = n.seps.partition_point(|s| {
                        let (p, m) = s.key();
                        f(p, m)
                    });
                    acc += n.counts[..i].iter().sum::<usize>();
                    node = &n.kids[i];
                }
            }
        }
    }

    /// Rank and item of the key `k`.
    pub fn find(&self, k: (u64, &[u8])) -> Option<(usize, &T)> {
        let mut node = &*self.root;
        let mut acc = 0;
        loop {
            match node {
                Node::Leaf(v) => {
                    let pos = v.partition_point(|x| cmp_key((x.prefix(), x.member()), k).is_lt());
                    let x = v.get(pos)?;
                    return cmp_key((x.prefix(), x.member()), k)
                        .is_eq()
                        .then_some((acc + pos, x));
                }
                Node::Inner(n) => {
                    let i = n.seps.partition_point(|s| cmp_key(s.key(), k).is_le());
                    acc += n.counts[..i].iter().sum::<usize>();
                    node = &n.kids[i];
                }
            }
        }
    }

    /// Mutable access to the item with key `k`; the caller must not change its key.
    pub fn find_mut(&mut self, k: (u64, &[u8])) -> Option<&mut T> {
        let mut node = &mut *self.root;
        loop {
            match node {
                Node::Leaf(v) => {
                    let pos = v.partition_point(|x| cmp_key((x.prefix(), x.member()), k).is_lt());
                    let x = v.get_mut(pos)?;
                    return cmp_key((x.prefix(), x.member()), k).is_eq().then_some(x);
                }
                Node::Inner(n) => {
                    let i = n.seps.partition_point(|s| cmp_key(s.key(), k).is_le());
                    node = &mut n.kids[i];
                }
            }
        }
    }

    /// The leaf holding `rank` and the offset of `rank` in it.
    fn leaf_at(&self, mut rank: usize) -> Option<(&[T], usize)> {
        let mut node = &*self.root;
        loop {
            match node {
                Node::Leaf(v) => return (rank < v.len()).then_some((&v[..], rank)),
                Node::Inner(n) => {
                    let (i, before) = n.child_at(rank)?;
                    rank -= before;
                    node = &n.kids[i];
                }
            }
        }
    }

    pub fn at(&self, rank: usize) -> Option<&T> {
        self.leaf_at(rank).map(|(l, o)| &l[o])
    }

    /// Calls `f` on the items of ranks `start..end` (clamped), descending when `rev`.
    pub fn for_range(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(&T)) {
        self.for_range_while(start, end, rev, |x| {
            f(x);
            true
        })
    }

    /// Like `for_range`, stopping as soon as `f` returns false.
    pub fn for_range_while(
        &self,
        start: usize,
        end: usize,
        rev: bool,
        mut f: impl FnMut(&T) -> bool,
    ) {
        let end = end.min(self.len());
        if start >= end {
            return;
        }
        if !rev {
            let mut r = start;
            while r < end {
                let Some((leaf, off)) = self.leaf_at(r) else {
                    return;
                };
                let n = (leaf.len() - off).min(end - r);
                for x in &leaf[off..off + n] {
                    if !f(x) {
                        return;
                    }
                }
                r += n;
            }
        } else {
            let mut r = end;
            while r > start {
                let Some((leaf, off)) = self.leaf_at(r - 1) else {
                    return;
                };
                let n = (off + 1).min(r - start);
                for x in leaf[off + 1 - n..=off].iter().rev() {
                    if !f(x) {
                        return;
                    }
                }
                r -= n;
            }
        }
    }

    /// Bytes of the nodes (not of what items point to).
    pub fn heap_size(&self) -> usize {
        fn walk<T: Item>(n: &Node<T>) -> usize {
            match n {
                Node::Leaf(v) => {
                    std::mem::size_of::<Node<T>>() + v.capacity() * std::mem::size_of::<T>()
                }
                Node::Inner(i) => {
                    std::mem::size_of::<Node<T>>()
                        + i.seps.capacity() * std::mem::size_of::<Sep>()
                        + i.seps.iter().map(|s| s.member.heap_size()).sum::<usize>()
                        + i.kids.capacity() * 8
                        + i.counts.capacity() * 8
                        + i.kids.iter().map(|k| walk(k)).sum::<usize>()
                }
            }
        }
        walk(&self.root)
    }

    /// Test helper: checks order, counts, separator bounds and fill; returns the item count.
    #[cfg(test)]
    pub fn check(&self) -> usize {
        fn walk<T: Item>(
            n: &Node<T>,
            lo: Option<(u64, Vec<u8>)>,
            hi: Option<(u64, Vec<u8>)>,
            root: bool,
        ) -> usize {
            let inb = |k: (u64, &[u8])| {
                if let Some(l) = &lo {
                    assert!(cmp_key((l.0, &l.1), k).is_le(), "below lower bound");
                }
                if let Some(h) = &hi {
                    assert!(cmp_key(k, (h.0, &h.1)).is_lt(), "above upper bound");
                }
            };
            match n {
                Node::Leaf(v) => {
                    assert!(root || v.len() >= LEAF_MIN.min(1), "empty leaf");
                    assert!(v.len() <= LEAF_CAP);
                    for w in v.windows(2) {
                        assert!(cmp_key(
                            (w[0].prefix(), w[0].member()),
                            (w[1].prefix(), w[1].member())
                        )
                        .is_lt());
                    }
                    for x in v {
                        inb((x.prefix(), x.member()));
                    }
                    v.len()
                }
                Node::Inner(i) => {
                    assert_eq!(i.seps.len() + 1, i.kids.len());
                    assert_eq!(i.counts.len(), i.kids.len());
                    assert!(i.kids.len() <= INNER_CAP);
                    assert!(root || i.kids.len() >= 2);
                    let mut total = 0;
                    for (j, k) in i.kids.iter().enumerate() {
                        let l = if j == 0 {
                            lo.clone()
                        } else {
                            Some((i.seps[j - 1].prefix, mbytes(&i.seps[j - 1].member).to_vec()))
                        };
                        let h = if j + 1 == i.kids.len() {
                            hi.clone()
                        } else {
                            Some((i.seps[j].prefix, mbytes(&i.seps[j].member).to_vec()))
                        };
                        let c = walk(k, l, h, false);
                        assert_eq!(c, i.counts[j]);
                        total += c;
                    }
                    assert_eq!(total, i.total);
                    total
                }
            }
        }
        walk(&self.root, None, None, true)
    }
}
