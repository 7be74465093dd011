//! Packed list nodes: a byte buffer of entries, listpack-style.
//!
//! Entry = header (+ payload) + back-length. Header byte:
//!
//! | first byte | meaning | size |
//! |---|---|---|
//! | `0xxxxxxx` | integer 0..=127 | 1 |
//! | `10llllll` | string, length 0..=63 | 1 + len |
//! | `110lllll` + 1 | string, length 0..=8191 (13 bits) | 2 + len |
//! | `1110hhhh` + 1 | integer, 12-bit two's complement | 2 |
//! | `0xF0` / `F1` / `F2` / `F3` | integer i16 / i24 / i32 / i64, little endian | 3 / 4 / 5 / 9 |
//! | `0xF4` + u32 / `0xF5` + u64 | string with a 32/64-bit length | 5 / 9 + len |
//!
//! Back-length: the size of header + payload in 7-bit groups, most significant first, every byte
//! but the first with the high bit set, so it can be read from its last byte backwards (1 byte up
//! to 127, 2 up to 16383). Strings that are canonical integers (Redis `string2ll`) are stored as
//! integers, so equality of entries is equality of their string forms.

use crate::compact::{fmt_i64, parse_strict_i64, IntBuf};

/// A borrowed element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Entry<'_> {
    pub fn to_vec(&self) -> Vec<u8> {
        match *self {
            Entry::Int(v) => {
                let mut b: IntBuf = [0; 20];
                fmt_i64(v, &mut b).to_vec()
            }
            Entry::Str(s) => s.to_vec(),
        }
    }

    /// Calls `f` with the element's string form.
    #[inline]
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match *self {
            Entry::Int(v) => {
                let mut b: IntBuf = [0; 20];
                f(fmt_i64(v, &mut b))
            }
            Entry::Str(s) => f(s),
        }
    }

    #[inline]
    pub fn matches(&self, n: &Needle) -> bool {
        match *self {
            Entry::Int(v) => n.int == Some(v),
            Entry::Str(s) => n.int.is_none() && s == n.bytes,
        }
    }
}

/// A value to compare entries with (LREM, LPOS, LINSERT pivots), parsed once.
pub struct Needle<'a> {
    bytes: &'a [u8],
    int: Option<i64>,
}

impl<'a> Needle<'a> {
    pub fn new(bytes: &'a [u8]) -> Needle<'a> {
        Needle {
            bytes,
            int: as_int(bytes),
        }
    }
}

#[inline]
fn as_int(v: &[u8]) -> Option<i64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    parse_strict_i64(v)
}

/// An encoded entry ready to be copied into a node.
pub struct Enc<'a> {
    head: [u8; 9],
    hl: u8,
    payload: &'a [u8],
    back: [u8; 10],
    bl: u8,
}

fn backlen(l: usize, out: &mut [u8; 10]) -> u8 {
    let mut groups = 1;
    while groups < 10 && (l >> (7 * groups)) != 0 {
        groups += 1;
    }
    for (i, o) in out.iter_mut().enumerate().take(groups) {
        let shift = 7 * (groups - 1 - i);
        let g = ((l >> shift) & 0x7f) as u8;
        *o = if i == 0 { g } else { g | 0x80 };
    }
    groups as u8
}

impl<'a> Enc<'a> {
    pub fn new(v: &'a [u8]) -> Enc<'a> {
        let mut head = [0u8; 9];
        let (hl, payload): (usize, &[u8]) = match as_int(v) {
            Some(i) => (encode_int(i, &mut head), &[]),
            None => {
                let n = v.len();
                let hl = if n <= 63 {
                    head[0] = 0x80 | n as u8;
                    1
                } else if n <= 8191 {
                    head[0] = 0xC0 | (n >> 8) as u8;
                    head[1] = n as u8;
                    2
                } else if n <= u32::MAX as usize {
                    head[0] = 0xF4;
                    head[1..5].copy_from_slice(&(n as u32).to_le_bytes());
                    5
                } else {
                    head[0] = 0xF5;
                    head[1..9].copy_from_slice(&(n as u64).to_le_bytes());
                    9
                };
                (hl, v)
            }
        };
        let mut back = [0u8; 10];
        let bl = backlen(hl + payload.len(), &mut back);
        Enc {
            head,
            hl: hl as u8,
            payload,
            back,
            bl,
        }
    }

    /// Bytes the entry takes in a node.
    #[inline]
    pub fn size(&self) -> usize {
        self.hl as usize + self.payload.len() + self.bl as usize
    }

    #[inline]
    fn write(&self, dst: &mut [u8]) {
        let (h, p) = (self.hl as usize, self.payload.len());
        dst[..h].copy_from_slice(&self.head[..h]);
        dst[h..h + p].copy_from_slice(self.payload);
        dst[h + p..h + p + self.bl as usize].copy_from_slice(&self.back[..self.bl as usize]);
    }
}

fn encode_int(i: i64, head: &mut [u8; 9]) -> usize {
    if (0..=127).contains(&i) {
        head[0] = i as u8;
        1
    } else if (-2048..=2047).contains(&i) {
        let u = (i as u16) & 0x0fff;
        head[0] = 0xE0 | (u >> 8) as u8;
        head[1] = u as u8;
        2
    } else if (i16::MIN as i64..=i16::MAX as i64).contains(&i) {
        head[0] = 0xF0;
        head[1..3].copy_from_slice(&(i as i16).to_le_bytes());
        3
    } else if (-(1i64 << 23)..(1i64 << 23)).contains(&i) {
        head[0] = 0xF1;
        head[1..4].copy_from_slice(&(i as i32).to_le_bytes()[..3]);
        4
    } else if (i32::MIN as i64..=i32::MAX as i64).contains(&i) {
        head[0] = 0xF2;
        head[1..5].copy_from_slice(&(i as i32).to_le_bytes());
        5
    } else {
        head[0] = 0xF3;
        head[1..9].copy_from_slice(&i.to_le_bytes());
        9
    }
}

/// Rounds an allocation request up to jemalloc's size classes (4 per doubling), so a node's
/// capacity is what the allocator hands out anyway.
fn size_class(n: usize) -> usize {
    if n <= 16 {
        return (n + 7) & !7;
    }
    if n <= 128 {
        return (n + 15) & !15;
    }
    let p = usize::BITS - (n - 1).leading_zeros();
    let step = 1usize << (p - 3);
    (n + step - 1) & !(step - 1)
}

/// One packed node.
#[derive(Clone, Default)]
pub struct Node {
    buf: Vec<u8>,
    pub count: u32,
}

impl Node {
    #[inline]
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Decodes the entry at `off`; returns it and the offset of the next entry.
    #[inline]
    pub fn entry(&self, off: usize) -> (Entry<'_>, usize) {
        let b = &self.buf;
        let h = b[off];
        let (e, l) = if h < 0x80 {
            (Entry::Int(h as i64), 1)
        } else if h < 0xC0 {
            let n = (h & 0x3f) as usize;
            (Entry::Str(&b[off + 1..off + 1 + n]), 1 + n)
        } else if h < 0xE0 {
            let n = (((h & 0x1f) as usize) << 8) | b[off + 1] as usize;
            (Entry::Str(&b[off + 2..off + 2 + n]), 2 + n)
        } else if h < 0xF0 {
            let u = (((h & 0x0f) as u16) << 8) | b[off + 1] as u16;
            let v = ((u << 4) as i16 >> 4) as i64;
            (Entry::Int(v), 2)
        } else {
            match h {
                0xF0 => (
                    Entry::Int(i16::from_le_bytes([b[off + 1], b[off + 2]]) as i64),
                    3,
                ),
                0xF1 => {
                    let v = i32::from_le_bytes([0, b[off + 1], b[off + 2], b[off + 3]]) >> 8;
                    (Entry::Int(v as i64), 4)
                }
                0xF2 => {
                    let mut a = [0u8; 4];
                    a.copy_from_slice(&b[off + 1..off + 5]);
                    (Entry::Int(i32::from_le_bytes(a) as i64), 5)
                }
                0xF3 => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&b[off + 1..off + 9]);
                    (Entry::Int(i64::from_le_bytes(a)), 9)
                }
                0xF4 => {
                    let mut a = [0u8; 4];
                    a.copy_from_slice(&b[off + 1..off + 5]);
                    let n = u32::from_le_bytes(a) as usize;
                    (Entry::Str(&b[off + 5..off + 5 + n]), 5 + n)
                }
                _ => {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&b[off + 1..off + 9]);
                    let n = u64::from_le_bytes(a) as usize;
                    (Entry::Str(&b[off + 9..off + 9 + n]), 9 + n)
                }
            }
        };
        (e, off + l + backlen_size(l))
    }

    /// Offset of the entry after the one at `off`.
    #[inline]
    pub fn next_off(&self, off: usize) -> usize {
        self.entry(off).1
    }

    /// Start offset of the entry that ends at `end` (> 0).
    #[inline]
    pub fn prev_off(&self, end: usize) -> usize {
        let b = &self.buf;
        let mut p = end - 1;
        let mut v = (b[p] & 0x7f) as usize;
        let mut shift = 7;
        let mut size = 1;
        while b[p] & 0x80 != 0 {
            p -= 1;
            v |= ((b[p] & 0x7f) as usize) << shift;
            shift += 7;
            size += 1;
        }
        end - size - v
    }

    /// Start offset of the last entry (node not empty).
    #[inline]
    pub fn last_off(&self) -> usize {
        self.prev_off(self.buf.len())
    }

    /// Start offset of entry `j` (<= count; `count` gives the end), from the nearer end.
    pub fn off_of(&self, j: usize) -> usize {
        let c = self.count as usize;
        if j >= c {
            return self.buf.len();
        }
        if j <= c / 2 {
            let mut off = 0;
            for _ in 0..j {
                off = self.next_off(off);
            }
            off
        } else {
            let mut off = self.buf.len();
            for _ in j..c {
                off = self.prev_off(off);
            }
            off
        }
    }

    #[inline]
    fn grow_for(&mut self, extra: usize) {
        let need = self.buf.len() + extra;
        if need > self.buf.capacity() {
            // Size classes are ~25% apart, so growing to the next one is geometric growth, and
            // a node never holds more than its allocation class (an 8 KiB node stays in 8 KiB).
            let target = size_class(need);
            self.buf.reserve_exact(target - self.buf.len());
        }
    }

    fn maybe_shrink(&mut self) {
        let (len, cap) = (self.buf.len(), self.buf.capacity());
        if cap >= 64 && len <= cap / 2 {
            self.buf.shrink_to(size_class(len.max(1)));
        }
    }

    #[inline]
    pub fn push_back(&mut self, e: &Enc) {
        let s = e.size();
        self.grow_for(s);
        let old = self.buf.len();
        self.buf.resize(old + s, 0);
        e.write(&mut self.buf[old..]);
        self.count += 1;
    }

    #[inline]
    pub fn push_front(&mut self, e: &Enc) {
        self.insert_at(0, e);
    }

    pub fn insert_at(&mut self, off: usize, e: &Enc) {
        let s = e.size();
        self.grow_for(s);
        let old = self.buf.len();
        self.buf.resize(old + s, 0);
        self.buf.copy_within(off..old, off + s);
        e.write(&mut self.buf[off..off + s]);
        self.count += 1;
    }

    /// Replaces the entry at `off`.
    pub fn replace(&mut self, off: usize, e: &Enc) {
        let end = self.next_off(off);
        let (old, new) = (end - off, e.size());
        if new > old {
            self.grow_for(new - old);
            let len = self.buf.len();
            self.buf.resize(len + new - old, 0);
            self.buf.copy_within(end..len, off + new);
        } else if new < old {
            self.buf.copy_within(end.., off + new);
            self.buf.truncate(self.buf.len() - (old - new));
        }
        e.write(&mut self.buf[off..off + new]);
        if new < old {
            self.maybe_shrink();
        }
    }

    /// Removes the bytes `from..to` holding `n` whole entries.
    pub fn remove_bytes(&mut self, from: usize, to: usize, n: u32) {
        self.buf.drain(from..to);
        self.count -= n;
        self.maybe_shrink();
    }

    pub fn remove_first(&mut self) {
        let end = self.next_off(0);
        self.remove_bytes(0, end, 1);
    }

    pub fn remove_last(&mut self) {
        let start = self.last_off();
        self.buf.truncate(start);
        self.count -= 1;
        self.maybe_shrink();
    }

    /// Splits at entry `j` (starting at byte `off`): self keeps `[0, j)`, the result holds the rest.
    pub fn split_off(&mut self, off: usize, j: usize) -> Node {
        let rest = &self.buf[off..];
        let mut buf = Vec::with_capacity(size_class(rest.len().max(1)));
        buf.extend_from_slice(rest);
        let tail = Node {
            buf,
            count: self.count - j as u32,
        };
        self.buf.truncate(off);
        self.count = j as u32;
        self.maybe_shrink();
        tail
    }

    /// Appends all of `other`'s entries.
    pub fn append(&mut self, other: Node) {
        self.grow_for(other.buf.len());
        self.buf.extend_from_slice(&other.buf);
        self.count += other.count;
    }

    /// Cuts this node into pieces that each satisfy `fits(bytes, count)` (at least one entry
    /// per piece).
    pub fn rechunk(self, fits: impl Fn(usize, u32) -> bool) -> Vec<Node> {
        let mut out = Vec::new();
        let mut cur = Node::default();
        let mut off = 0;
        while off < self.buf.len() {
            let next = self.next_off(off);
            let e = &self.buf[off..next];
            if cur.count > 0 && !fits(cur.bytes() + e.len(), cur.count + 1) {
                out.push(std::mem::take(&mut cur));
            }
            cur.grow_for(e.len());
            cur.buf.extend_from_slice(e);
            cur.count += 1;
            off = next;
        }
        if cur.count > 0 {
            out.push(cur);
        }
        out
    }

    /// Keeps the entries for which `keep(offset, entry)` is true (offsets as before the call),
    /// compacting in place. Returns how many were removed.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &Entry) -> bool) -> usize {
        let mut r = 0;
        let mut w = 0;
        let mut removed = 0;
        let len = self.buf.len();
        while r < len {
            let (e, next) = self.entry(r);
            if keep(r, &e) {
                if w != r {
                    self.buf.copy_within(r..next, w);
                }
                w += next - r;
            } else {
                removed += 1;
            }
            r = next;
        }
        if removed > 0 {
            self.buf.truncate(w);
            self.count -= removed as u32;
            self.maybe_shrink();
        }
        removed
    }

    /// Structural check (tests): entries parse to exactly the buffer and the count.
    pub fn check(&self) -> Result<(), String> {
        let mut off = 0;
        let mut n = 0u32;
        while off < self.buf.len() {
            let next = self.next_off(off);
            if self.prev_off(next) != off {
                return Err(format!("bad backlen at {off}"));
            }
            off = next;
            n += 1;
        }
        if off != self.buf.len() || n != self.count {
            return Err(format!(
                "node parses to {n} entries / {off} bytes, has {} / {}",
                self.count,
                self.buf.len()
            ));
        }
        Ok(())
    }
}

#[inline]
fn backlen_size(l: usize) -> usize {
    if l < 128 {
        1
    } else if l < 16384 {
        2
    } else {
        let mut g = 3;
        while g < 10 && (l >> (7 * g)) != 0 {
            g += 1;
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let ints: Vec<i64> = vec![
            0,
            1,
            127,
            128,
            -1,
            -2048,
            2047,
            2048,
            -2049,
            32767,
            -32768,
            32768,
            (1 << 23) - 1,
            -(1 << 23),
            1 << 23,
            i32::MAX as i64,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MAX,
            i64::MIN,
        ];
        let mut vals: Vec<Vec<u8>> = ints.iter().map(|i| i.to_string().into_bytes()).collect();
        for s in [
            "",
            "a",
            "-0",
            "01",
            "+1",
            " 1",
            "99999999999999999999",
            "1.5",
        ] {
            vals.push(s.as_bytes().to_vec());
        }
        for n in [62, 63, 64, 127, 128, 8191, 8192, 20000] {
            vals.push(vec![b'x'; n]);
        }
        let mut node = Node::default();
        for v in &vals {
            node.push_back(&Enc::new(v));
        }
        node.check().unwrap();
        let mut off = 0;
        for v in &vals {
            let (e, next) = node.entry(off);
            assert_eq!(e.to_vec(), *v);
            assert!(e.matches(&Needle::new(v)));
            off = next;
        }
        // Canonical integers are stored as integers, others as strings.
        assert_eq!(node.entry(0).0, Entry::Int(0));
        let mut back = node.bytes();
        for v in vals.iter().rev() {
            let s = node.prev_off(back);
            assert_eq!(node.entry(s).0.to_vec(), *v);
            back = s;
        }
        assert_eq!(back, 0);
    }

    /// Strings longer than u32::MAX take the 0xF5 (u64 length) header and round-trip; the size
    /// arithmetic stays in usize. Allocates 2 x 4 GiB: run with --ignored.
    #[test]
    #[ignore]
    fn string_longer_than_4gib() {
        let len = (1usize << 32) + 5;
        let mut v = vec![0u8; len];
        v[len - 1] = b'z';
        let enc = Enc::new(&v);
        assert_eq!(enc.size(), 9 + len + backlen_size(9 + len));
        let mut node = Node::default();
        node.push_back(&Enc::new(b"a"));
        node.push_back(&enc);
        node.push_back(&Enc::new(b"b"));
        node.check().unwrap();
        let off = node.next_off(0);
        let (e, next) = node.entry(off);
        assert!(matches!(e, Entry::Str(s) if s.len() == len && s[len - 1] == b'z'));
        assert_eq!(node.entry(next).0, Entry::Str(b"b"));
        assert_eq!(node.prev_off(next), off);
    }

    #[test]
    fn sizes_match_listpack() {
        assert_eq!(Enc::new(b"5").size(), 2);
        assert_eq!(Enc::new(b"1000").size(), 3);
        assert_eq!(Enc::new(b"100000").size(), 5);
        assert_eq!(Enc::new(b"hello").size(), 7);
        assert_eq!(size_class(150), 160);
        assert_eq!(size_class(8100), 8192);
        assert_eq!(size_class(129), 160);
        assert_eq!(size_class(5000), 5120);
    }
}
