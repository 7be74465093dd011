//! The LIST value: a quicklist-like chain of packed nodes.
//!
//! Elements live in *nodes*: contiguous byte buffers of length-prefixed entries, listpack-style
//! (see [`pack`]): small integers take 1 byte, 12-bit integers 2, short strings 1 byte of header;
//! each entry ends with a 1–2 byte back-length so a node can be walked from either end.
//!
//! A small list is one node held inline in the `List` box (`Repr::Small`); when a push needs a
//! second node the list becomes a deque of nodes (`Repr::Big`) — the quicklist. The node size is
//! governed by `list-max-listpack-size` exactly like Redis's fill factor: negative = bytes per
//! node (-1 4 KiB, -2 8 KiB ... -5 64 KiB), positive = entries per node (with an 8 KiB safety
//! cap). Pushes and pops at either end are O(1) (amortized over the node buffer), positional
//! access skips whole nodes from the nearer end. OBJECT ENCODING always answers `quicklist`, as
//! Redis 7.0 does for every list.
//!
//! Memory: a 10-element list of short strings is the 32-byte `List` box plus one node buffer
//! sized to jemalloc's size classes (Redis 7.0: 16-byte robj + 40-byte quicklist + 32-byte node +
//! listpack). Large lists: 32 bytes per 8 KiB node in the deque, entries packed like listpack.

pub mod pack;

use std::collections::VecDeque;

use pack::{Enc, Node};
pub use pack::{Entry, Needle};

/// The node-size policy from `list-max-listpack-size` (Redis's quicklist fill factor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill(i64);

impl Fill {
    /// Clamped like Redis's `quicklistSetFill` (-5..=32768).
    pub fn new(v: i64) -> Fill {
        Fill(v.clamp(-5, 1 << 15))
    }

    /// Can a node of `bytes` bytes and `count` entries exist? A node always takes one entry.
    #[inline]
    pub fn fits(self, bytes: usize, count: u32) -> bool {
        if count <= 1 {
            return true;
        }
        if self.0 < 0 {
            bytes <= 4096usize << (-self.0 - 1)
        } else {
            bytes <= 8192 && (count as i64) <= self.0
        }
    }

    /// Can `node` take one more entry of `add` bytes?
    #[inline]
    fn allows(self, node: &Node, add: usize) -> bool {
        self.fits(node.bytes() + add, node.count + 1)
    }
}

impl Default for Fill {
    fn default() -> Self {
        Fill(-2)
    }
}

#[derive(Clone)]
enum Repr {
    Small(Node),
    Big(Box<Big>),
}

#[derive(Clone, Default)]
struct Big {
    nodes: VecDeque<Node>,
    len: usize,
}

/// A Redis list. Never stored empty (commands delete emptied lists).
#[derive(Clone)]
pub struct List {
    repr: Repr,
}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

impl Big {
    /// Node index and index inside it of element `idx` (< len), walking from the nearer end.
    fn locate(&self, idx: usize) -> (usize, usize) {
        if idx < self.len / 2 {
            let mut i = idx;
            for (ni, n) in self.nodes.iter().enumerate() {
                if i < n.count as usize {
                    return (ni, i);
                }
                i -= n.count as usize;
            }
        } else {
            let mut from_end = self.len - idx; // >= 1
            for (ni, n) in self.nodes.iter().enumerate().rev() {
                let c = n.count as usize;
                if from_end <= c {
                    return (ni, c - from_end);
                }
                from_end -= c;
            }
        }
        // Unreachable for idx < len; keep a defined answer.
        (self.nodes.len().saturating_sub(1), 0)
    }

    /// Merges neighbours whose union fits the fill, and drops empty nodes.
    fn compact(&mut self, fill: Fill) {
        let old = std::mem::take(&mut self.nodes);
        let mut out: VecDeque<Node> = VecDeque::with_capacity(old.len());
        for n in old {
            if n.count == 0 {
                continue;
            }
            if let Some(last) = out.back_mut() {
                if fill.fits(last.bytes() + n.bytes(), last.count + n.count) {
                    last.append(n);
                    continue;
                }
            }
            out.push_back(n);
        }
        self.nodes = out;
    }

    /// Merges node `i` with a neighbour when their union fits (after a deletion inside it).
    fn merge_around(&mut self, i: usize, fill: Fill) {
        if i >= self.nodes.len() {
            return;
        }
        if self.nodes[i].count == 0 {
            self.nodes.remove(i);
            return;
        }
        if i + 1 < self.nodes.len() {
            let (a, b) = (&self.nodes[i], &self.nodes[i + 1]);
            if fill.fits(a.bytes() + b.bytes(), a.count + b.count) {
                if let Some(b) = self.nodes.remove(i + 1) {
                    self.nodes[i].append(b);
                }
            }
        }
        if i > 0 {
            let (a, b) = (&self.nodes[i - 1], &self.nodes[i]);
            if fill.fits(a.bytes() + b.bytes(), a.count + b.count) {
                if let Some(b) = self.nodes.remove(i) {
                    self.nodes[i - 1].append(b);
                }
            }
        }
    }

    /// Splits node `i` when it no longer fits (an LSET/LINSERT grew it): each piece fits.
    fn split_if_needed(&mut self, i: usize, fill: Fill) {
        let n = &self.nodes[i];
        if fill.fits(n.bytes(), n.count) {
            return;
        }
        let node = std::mem::take(&mut self.nodes[i]);
        let pieces = node.rechunk(|b, c| fill.fits(b, c));
        self.nodes.remove(i);
        for (k, p) in pieces.into_iter().enumerate() {
            self.nodes.insert(i + k, p);
        }
    }
}

/// An end of the list, for the operations that mirror each other.
#[derive(Clone, Copy)]
enum End {
    Front,
    Back,
}

impl End {
    #[inline]
    fn push(self, n: &mut Node, e: &Enc) {
        match self {
            End::Front => n.push_front(e),
            End::Back => n.push_back(e),
        }
    }

    #[inline]
    fn remove(self, n: &mut Node) {
        match self {
            End::Front => n.remove_first(),
            End::Back => n.remove_last(),
        }
    }

    #[inline]
    fn node_mut(self, nodes: &mut VecDeque<Node>) -> Option<&mut Node> {
        match self {
            End::Front => nodes.front_mut(),
            End::Back => nodes.back_mut(),
        }
    }

    #[inline]
    fn add_node(self, nodes: &mut VecDeque<Node>, n: Node) {
        match self {
            End::Front => nodes.push_front(n),
            End::Back => nodes.push_back(n),
        }
    }

    #[inline]
    fn drop_node(self, nodes: &mut VecDeque<Node>) {
        match self {
            End::Front => nodes.pop_front(),
            End::Back => nodes.pop_back(),
        };
    }
}

impl List {
    pub fn new() -> List {
        List {
            repr: Repr::Small(Node::default()),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(n) => n.count as usize,
            Repr::Big(b) => b.len,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Name reported by OBJECT ENCODING (Redis 7.0: always quicklist).
    pub fn encoding_name(&self) -> &'static str {
        "quicklist"
    }

    /// Heap bytes owned beyond the object itself (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match &self.repr {
            Repr::Small(n) => n.capacity(),
            Repr::Big(b) => {
                std::mem::size_of::<Big>()
                    + b.nodes.capacity() * std::mem::size_of::<Node>()
                    + b.nodes.iter().map(|n| n.capacity()).sum::<usize>()
            }
        }
    }

    /// Number of nodes (tests and DEBUG-style introspection).
    pub fn node_count(&self) -> usize {
        match &self.repr {
            Repr::Small(_) => 1,
            Repr::Big(b) => b.nodes.len(),
        }
    }

    #[inline]
    fn node(&self, i: usize) -> &Node {
        match &self.repr {
            Repr::Small(n) => n,
            Repr::Big(b) => &b.nodes[i],
        }
    }

    /// Runs `f` on the deque form (a small list becomes a one-node deque for the duration), then
    /// drops empty nodes and returns to the small form when one node is left.
    fn with_big<R>(&mut self, f: impl FnOnce(&mut Big) -> R) -> R {
        if let Repr::Small(n) = &mut self.repr {
            let node = std::mem::take(n);
            let len = node.count as usize;
            let mut nodes = VecDeque::with_capacity(2);
            nodes.push_back(node);
            self.repr = Repr::Big(Box::new(Big { nodes, len }));
        }
        let Repr::Big(b) = &mut self.repr else {
            unreachable!("just made big")
        };
        let r = f(b);
        b.nodes.retain(|n| n.count > 0);
        if b.nodes.len() <= 1 {
            let node = b.nodes.pop_front().unwrap_or_default();
            self.repr = Repr::Small(node);
        }
        r
    }

    pub fn push_back(&mut self, v: &[u8], fill: Fill) {
        self.push(v, fill, End::Back)
    }

    pub fn push_front(&mut self, v: &[u8], fill: Fill) {
        self.push(v, fill, End::Front)
    }

    /// Adds `v` at `end`: into the end node while the fill allows, else into a new end node.
    #[inline]
    fn push(&mut self, v: &[u8], fill: Fill, end: End) {
        let enc = Enc::new(v);
        match &mut self.repr {
            Repr::Small(n) => {
                if fill.allows(n, enc.size()) {
                    end.push(n, &enc);
                    return;
                }
                let old = std::mem::take(n);
                let mut new = Node::default();
                end.push(&mut new, &enc);
                let len = old.count as usize + 1;
                let mut nodes = VecDeque::with_capacity(4);
                nodes.push_back(old);
                end.add_node(&mut nodes, new);
                self.repr = Repr::Big(Box::new(Big { nodes, len }));
            }
            Repr::Big(b) => {
                b.len += 1;
                if let Some(n) = end.node_mut(&mut b.nodes) {
                    if fill.allows(n, enc.size()) {
                        end.push(n, &enc);
                        return;
                    }
                }
                let mut n = Node::default();
                end.push(&mut n, &enc);
                end.add_node(&mut b.nodes, n);
            }
        }
    }

    pub fn front(&self) -> Option<Entry<'_>> {
        if self.is_empty() {
            return None;
        }
        Some(self.node(0).entry(0).0)
    }

    pub fn back(&self) -> Option<Entry<'_>> {
        if self.is_empty() {
            return None;
        }
        let n = self.node(self.node_count() - 1);
        Some(n.entry(n.last_off()).0)
    }

    /// Removes the first element; false when empty.
    pub fn pop_front(&mut self) -> bool {
        self.pop(End::Front)
    }

    /// Removes the last element; false when empty.
    pub fn pop_back(&mut self) -> bool {
        self.pop(End::Back)
    }

    #[inline]
    fn pop(&mut self, end: End) -> bool {
        match &mut self.repr {
            Repr::Small(n) => {
                if n.count == 0 {
                    return false;
                }
                end.remove(n);
                true
            }
            Repr::Big(b) => {
                let Some(n) = end.node_mut(&mut b.nodes) else {
                    return false;
                };
                end.remove(n);
                b.len -= 1;
                if n.count == 0 {
                    end.drop_node(&mut b.nodes);
                    self.maybe_small();
                }
                true
            }
        }
    }

    fn maybe_small(&mut self) {
        if let Repr::Big(b) = &mut self.repr {
            if b.nodes.len() <= 1 {
                let node = b.nodes.pop_front().unwrap_or_default();
                self.repr = Repr::Small(node);
            }
        }
    }

    /// Node index, index inside the node, of element `idx` (< len).
    fn locate(&self, idx: usize) -> (usize, usize) {
        match &self.repr {
            Repr::Small(_) => (0, idx),
            Repr::Big(b) => b.locate(idx),
        }
    }

    /// Element at `idx` (0-based from the head).
    pub fn get(&self, idx: usize) -> Option<Entry<'_>> {
        if idx >= self.len() {
            return None;
        }
        let (ni, j) = self.locate(idx);
        let n = self.node(ni);
        Some(n.entry(n.off_of(j)).0)
    }

    /// Forward iterator starting at element `idx`.
    pub fn iter_from(&self, idx: usize) -> Iter<'_> {
        let len = self.len();
        if idx >= len {
            return Iter {
                list: self,
                node: 0,
                off: 0,
                left: 0,
            };
        }
        let (ni, j) = self.locate(idx);
        Iter {
            list: self,
            node: ni,
            off: self.node(ni).off_of(j),
            left: len - idx,
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0)
    }

    /// Backward iterator starting at element `idx` (inclusive) towards the head.
    pub fn iter_rev_from(&self, idx: usize) -> RevIter<'_> {
        let len = self.len();
        if len == 0 {
            return RevIter {
                list: self,
                node: 0,
                end: 0,
                left: 0,
            };
        }
        let idx = idx.min(len - 1);
        let (ni, j) = self.locate(idx);
        let n = self.node(ni);
        let start = n.off_of(j);
        let end = n.next_off(start);
        RevIter {
            list: self,
            node: ni,
            end,
            left: idx + 1,
        }
    }

    pub fn iter_rev(&self) -> RevIter<'_> {
        self.iter_rev_from(usize::MAX)
    }

    /// Replaces element `idx`; false when out of range.
    pub fn set(&mut self, idx: usize, v: &[u8], fill: Fill) -> bool {
        if idx >= self.len() {
            return false;
        }
        let enc = Enc::new(v);
        match &mut self.repr {
            Repr::Small(n) => {
                let off = n.off_of(idx);
                n.replace(off, &enc);
                if fill.fits(n.bytes(), n.count) {
                    return true;
                }
                self.with_big(|b| b.split_if_needed(0, fill));
            }
            Repr::Big(b) => {
                let (ni, j) = b.locate(idx);
                let n = &mut b.nodes[ni];
                let off = n.off_of(j);
                n.replace(off, &enc);
                b.split_if_needed(ni, fill);
            }
        }
        true
    }

    /// Inserts `v` so that it becomes element `idx` (`idx == len` appends).
    pub fn insert(&mut self, idx: usize, v: &[u8], fill: Fill) {
        let len = self.len();
        if idx == 0 {
            return self.push_front(v, fill);
        }
        if idx >= len {
            return self.push_back(v, fill);
        }
        let enc = Enc::new(v);
        if let Repr::Small(n) = &mut self.repr {
            if fill.allows(n, enc.size()) {
                let off = n.off_of(idx);
                n.insert_at(off, &enc);
                return;
            }
        }
        self.with_big(|b| {
            let (ni, j) = b.locate(idx);
            b.len += 1;
            let n = &b.nodes[ni];
            if fill.allows(n, enc.size()) {
                let n = &mut b.nodes[ni];
                let off = n.off_of(j);
                n.insert_at(off, &enc);
                return;
            }
            if j == 0 && ni > 0 && fill.allows(&b.nodes[ni - 1], enc.size()) {
                b.nodes[ni - 1].push_back(&enc);
                return;
            }
            // Split the full node at the insertion point; the new element joins the head part
            // when it fits, else the tail part, else gets a node of its own.
            let n = &mut b.nodes[ni];
            let off = n.off_of(j);
            let tail = n.split_off(off, j);
            if j > 0 && fill.allows(&b.nodes[ni], enc.size()) {
                b.nodes[ni].push_back(&enc);
                b.nodes.insert(ni + 1, tail);
            } else {
                let mut tail = tail;
                if fill.allows(&tail, enc.size()) {
                    tail.push_front(&enc);
                    b.nodes.insert(ni + 1, tail);
                } else {
                    let mut mid = Node::default();
                    mid.push_back(&enc);
                    b.nodes.insert(ni + 1, mid);
                    b.nodes.insert(ni + 2, tail);
                }
            }
        })
    }

    /// Removes `n` elements starting at `start` (clamped to the list).
    pub fn remove_range(&mut self, start: usize, n: usize, fill: Fill) {
        let len = self.len();
        if start >= len || n == 0 {
            return;
        }
        let n = n.min(len - start);
        if let Repr::Small(node) = &mut self.repr {
            let from = node.off_of(start);
            let to = if start + n == len {
                node.bytes()
            } else {
                node.off_of(start + n)
            };
            node.remove_bytes(from, to, n as u32);
            return;
        }
        self.with_big(|b| {
            let (mut ni, mut j) = b.locate(start);
            b.len -= n;
            let mut left = n;
            let mut touched = ni;
            while left > 0 && ni < b.nodes.len() {
                let node = &mut b.nodes[ni];
                let c = node.count as usize;
                let k = (c - j).min(left);
                if j == 0 && k == c {
                    b.nodes.remove(ni);
                } else {
                    let from = node.off_of(j);
                    let to = if j + k == c {
                        node.bytes()
                    } else {
                        node.off_of(j + k)
                    };
                    node.remove_bytes(from, to, k as u32);
                    touched = ni;
                    ni += 1;
                }
                left -= k;
                j = 0;
            }
            b.merge_around(touched.min(b.nodes.len().saturating_sub(1)), fill);
        })
    }

    /// LREM: removes elements equal to `needle`, up to `count` from the head (count > 0), from
    /// the tail (count < 0), or all (0). Returns how many were removed.
    pub fn remove_matching(&mut self, needle: &Needle, count: i64, fill: Fill) -> usize {
        if count >= 0 {
            let mut quota = if count == 0 {
                usize::MAX
            } else {
                count as usize
            };
            let mut compact = |n: &mut Node| -> usize {
                if quota == 0 {
                    return 0;
                }
                n.retain(|_, e| {
                    if quota > 0 && e.matches(needle) {
                        quota -= 1;
                        false
                    } else {
                        true
                    }
                })
            };
            if let Repr::Small(n) = &mut self.repr {
                return compact(n);
            }
            return self.with_big(|b| {
                let mut removed = 0;
                for n in b.nodes.iter_mut() {
                    removed += compact(n);
                }
                b.len -= removed;
                if removed > 0 {
                    b.compact(fill);
                }
                removed
            });
        }
        // From the tail: find the victims walking backwards, then drop them node by node.
        let quota = count.unsigned_abs();
        let mut victims: Vec<(usize, usize)> = Vec::new();
        {
            let mut it = self.iter_rev();
            while (victims.len() as u64) < quota {
                let Some(e) = it.next() else { break };
                if e.matches(needle) {
                    victims.push((it.node, it.end));
                }
            }
        }
        if victims.is_empty() {
            return 0;
        }
        let removed = victims.len();
        victims.reverse(); // ascending (node, offset)
        let drop_in = |ni: usize, n: &mut Node, vi: &mut usize| {
            n.retain(|off, _| {
                if *vi < victims.len() && victims[*vi] == (ni, off) {
                    *vi += 1;
                    false
                } else {
                    true
                }
            });
        };
        let mut vi = 0usize;
        match &mut self.repr {
            Repr::Small(n) => drop_in(0, n, &mut vi),
            Repr::Big(b) => {
                for (ni, n) in b.nodes.iter_mut().enumerate() {
                    drop_in(ni, n, &mut vi);
                }
                b.len -= removed;
                b.compact(fill);
                self.maybe_small();
            }
        }
        removed
    }

    /// Builds a list from elements (tests, DEBUG, restore paths).
    pub fn from_iter<'a>(items: impl IntoIterator<Item = &'a [u8]>, fill: Fill) -> List {
        let mut l = List::new();
        for v in items {
            l.push_back(v, fill);
        }
        l
    }

    /// All elements as owned byte strings (tests, slow paths).
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(|e| e.to_vec()).collect()
    }

    /// Checks the internal invariants (tests): node counts, sizes, total length.
    #[doc(hidden)]
    pub fn check(&self, fill: Fill) -> Result<(), String> {
        let mut total = 0usize;
        for i in 0..self.node_count() {
            let n = self.node(i);
            n.check()?;
            if self.node_count() > 1 && n.count == 0 {
                return Err(format!("empty node {i}"));
            }
            if !fill.fits(n.bytes(), n.count) {
                return Err(format!(
                    "node {i} too big: {} bytes {} entries",
                    n.bytes(),
                    n.count
                ));
            }
            total += n.count as usize;
        }
        if total != self.len() {
            return Err(format!("len {} but nodes hold {total}", self.len()));
        }
        Ok(())
    }
}

/// Forward iterator over a list's elements.
pub struct Iter<'a> {
    list: &'a List,
    node: usize,
    off: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Entry<'a>;

    #[inline]
    fn next(&mut self) -> Option<Entry<'a>> {
        if self.left == 0 {
            return None;
        }
        let mut n = self.list.node(self.node);
        while self.off >= n.bytes() {
            self.node += 1;
            self.off = 0;
            n = self.list.node(self.node);
        }
        let (e, next) = n.entry(self.off);
        self.off = next;
        self.left -= 1;
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// Backward iterator over a list's elements.
pub struct RevIter<'a> {
    list: &'a List,
    node: usize,
    /// End offset (exclusive) of the next entry to yield; after `next`, the start of the entry
    /// just yielded.
    end: usize,
    left: usize,
}

impl<'a> Iterator for RevIter<'a> {
    type Item = Entry<'a>;

    #[inline]
    fn next(&mut self) -> Option<Entry<'a>> {
        if self.left == 0 {
            return None;
        }
        while self.end == 0 {
            self.node -= 1;
            self.end = self.list.node(self.node).bytes();
        }
        let n = self.list.node(self.node);
        let start = n.prev_off(self.end);
        self.end = start;
        self.left -= 1;
        Some(n.entry(start).0)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
#[path = "list/tests.rs"]
mod tests;
