//! Compact zset encoding (Redis's "listpack"): one contiguous byte buffer of entries sorted by
//! (score, member).
//!
//! Layout: `[count: u16 LE]` then per entry `varint(len << 2 | kind)`, the member bytes, and the
//! score in `1 << kind`... bytes: kind 0 = i8, 1 = i16, 2 = i32 (integral scores), 3 = f64. An
//! empty buffer means no entries. Like a listpack's element count, the header saturates: `0xFFFF`
//! means "65535 or more, count by walking", so a pack may hold any number of entries (CONFIG SET
//! zset-max-listpack-entries accepts values far past 65535, and Redis keeps such zsets listpack).
//! Like a listpack entry, an integral score is stored as an integer, so -0 reads back as 0 (Redis
//! behaves the same way in this encoding).

use crate::varint;
use std::cmp::Ordering;

/// One decoded entry and its byte span in the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    pub member: &'a [u8],
    pub score: f64,
    pub start: usize,
    pub end: usize,
}

#[derive(Default, Clone)]
pub struct Pack {
    buf: Vec<u8>,
}

/// Score order of Redis (scores are never NaN; -0 == 0).
#[inline]
pub fn cmp_entry(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    s1.partial_cmp(&s2)
        .unwrap_or(Ordering::Equal)
        .then_with(|| m1.cmp(m2))
}

/// Encodes a score: (kind, bytes, len).
#[inline]
fn enc_score(s: f64) -> (u8, [u8; 8], usize) {
    let mut b = [0u8; 8];
    if s.fract() == 0.0 && s >= i32::MIN as f64 && s <= i32::MAX as f64 {
        let v = s as i32;
        if let Ok(x) = i8::try_from(v) {
            b[0] = x as u8;
            return (0, b, 1);
        }
        if let Ok(x) = i16::try_from(v) {
            b[..2].copy_from_slice(&x.to_le_bytes());
            return (1, b, 2);
        }
        b[..4].copy_from_slice(&v.to_le_bytes());
        return (2, b, 4);
    }
    b.copy_from_slice(&s.to_le_bytes());
    (3, b, 8)
}

#[inline]
fn dec_score(kind: u8, b: &[u8]) -> f64 {
    match kind {
        0 => b[0] as i8 as f64,
        1 => i16::from_le_bytes([b[0], b[1]]) as f64,
        2 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        _ => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[..8]);
            f64::from_le_bytes(a)
        }
    }
}

/// The score as this encoding keeps it (-0 becomes 0).
#[inline]
pub fn norm(s: f64) -> f64 {
    if s == 0.0 {
        0.0
    } else {
        s
    }
}

pub struct Iter<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Entry<'a>;
    #[inline]
    fn next(&mut self) -> Option<Entry<'a>> {
        if self.off >= self.buf.len() {
            return None;
        }
        let start = self.off;
        let (h, p) = varint::get(self.buf, start);
        let len = (h >> 2) as usize;
        let kind = (h & 3) as u8;
        let member = &self.buf[p..p + len];
        let sp = p + len;
        let slen = 1usize << kind;
        let score = dec_score(kind, &self.buf[sp..sp + slen]);
        self.off = sp + slen;
        Some(Entry {
            member,
            score,
            start,
            end: self.off,
        })
    }
}

/// Header value meaning "at least this many entries: walk the buffer to count them".
const COUNT_SATURATED: u16 = u16::MAX;

impl Pack {
    /// Number of entries: the header, or a walk over the entries when it is saturated (packs of
    /// 65535+ entries exist only when zset-max-listpack-entries is raised that far; Redis's
    /// `lpLength` walks in the same case).
    #[inline]
    pub fn len(&self) -> usize {
        match self.header() {
            COUNT_SATURATED => self.iter().count(),
            n => n as usize,
        }
    }

    /// The raw count header (0 for an empty pack).
    #[inline]
    fn header(&self) -> u16 {
        if self.buf.len() < 2 {
            0
        } else {
            u16::from_le_bytes([self.buf[0], self.buf[1]])
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.len() < 2
    }

    /// Records `n` entries in the header (saturating at `COUNT_SATURATED`).
    fn set_len(&mut self, n: usize) {
        let h = u16::try_from(n).unwrap_or(COUNT_SATURATED);
        self.buf[..2].copy_from_slice(&h.to_le_bytes());
    }

    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            off: 2.min(self.buf.len()),
        }
    }

    pub fn find(&self, member: &[u8]) -> Option<Entry<'_>> {
        self.iter().find(|e| e.member == member)
    }

    /// Inserts a member that is not present, at its sorted place.
    pub fn insert(&mut self, member: &[u8], score: f64) {
        let score = norm(score);
        let off = self
            .iter()
            .find(|e| cmp_entry(e.score, e.member, score, member) == Ordering::Greater)
            .map_or(self.buf.len().max(2), |e| e.start);
        self.insert_at(off, member, score);
    }

    /// Appends an entry that sorts after every present one.
    pub fn push(&mut self, member: &[u8], score: f64) {
        let off = self.buf.len().max(2);
        self.insert_at(off, member, norm(score));
    }

    fn insert_at(&mut self, off: usize, member: &[u8], score: f64) {
        let count = self.header();
        if self.buf.is_empty() {
            self.buf.reserve_exact(2);
            self.buf.extend_from_slice(&[0, 0]);
        }
        let (kind, sb, slen) = enc_score(score);
        let mut hdr = [0u8; 10];
        let hlen = varint::put(&mut hdr, ((member.len() as u64) << 2) | kind as u64);
        let n = hlen + member.len() + slen;
        let old = self.buf.len();
        self.buf.reserve_exact(n);
        self.buf.resize(old + n, 0);
        self.buf.copy_within(off..old, off + n);
        self.buf[off..off + hlen].copy_from_slice(&hdr[..hlen]);
        self.buf[off + hlen..off + hlen + member.len()].copy_from_slice(member);
        self.buf[off + hlen + member.len()..off + n].copy_from_slice(&sb[..slen]);
        // A saturated header stays saturated: no walk on the append path.
        if count != COUNT_SATURATED {
            self.set_len(count as usize + 1);
        }
    }

    /// Removes the entry spanning `start..end` (from an `Entry`).
    pub fn remove_span(&mut self, start: usize, end: usize) {
        self.remove_spans(start, end, 1);
    }

    /// Removes `n` consecutive entries spanning `start..end`.
    pub fn remove_spans(&mut self, start: usize, end: usize, n: usize) {
        let h = self.header();
        self.buf.drain(start..end);
        // A saturated count is recounted (the drain was O(n) already) so that it becomes exact
        // again once the pack shrinks below the saturation point.
        let c = if h == COUNT_SATURATED {
            self.iter().count()
        } else {
            h as usize - n
        };
        if c == 0 {
            self.buf = Vec::new();
        } else {
            self.set_len(c);
            if self.buf.capacity() > self.buf.len() + 64 {
                self.buf.shrink_to_fit();
            }
        }
    }

    pub fn heap_size(&self) -> usize {
        self.buf.capacity()
    }
}
