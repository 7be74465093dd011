//! `CompactStr`: the 16-byte representation of keys and string values.
//!
//! Why: a per-key heap object costs an allocation header plus a pointer, which is most of Redis's
//! per-key overhead. Strings of up to 15 bytes (most keys, small counters) live inline; integers
//! are stored as `i64` (Redis's "int" encoding, also makes INCR cheap); longer strings are one
//! exact-size heap block whose length lives in the struct, not in the block. The last byte is a
//! tag enum so that `Option<CompactStr>` and enums wrapping it get a free niche.

use std::alloc::{alloc, dealloc, Layout};
use std::fmt;
use std::ptr::NonNull;

/// Inline capacity in bytes (16 when the last byte is printable ASCII).
pub const INLINE_CAP: usize = 15;

const PRINTABLE_FIRST: u8 = 0x20;
const PRINTABLE_LAST: u8 = 0x7E;

/// Longest string we store (u32 length). Redis caps strings at 512 MB by default.
pub const MAX_LEN: usize = u32::MAX as usize;

#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[allow(dead_code)]
enum Tag {
    L0 = 0,
    L1,
    L2,
    L3,
    L4,
    L5,
    L6,
    L7,
    L8,
    L9,
    L10,
    L11,
    L12,
    L13,
    L14,
    L15,
    Heap,
    Int,
    /// Heap string that was modified in place (APPEND/SETRANGE): Redis reports it as "raw".
    HeapRaw,
    /// A 16-byte inline string whose last byte is printable ASCII: that byte itself is the tag,
    /// so common 16-char keys ("key:000000012345", "memtier-12345678") need no heap block.
    P20 = 0x20,
    P21 = 0x21,
    P22 = 0x22,
    P23 = 0x23,
    P24 = 0x24,
    P25 = 0x25,
    P26 = 0x26,
    P27 = 0x27,
    P28 = 0x28,
    P29 = 0x29,
    P2A = 0x2A,
    P2B = 0x2B,
    P2C = 0x2C,
    P2D = 0x2D,
    P2E = 0x2E,
    P2F = 0x2F,
    P30 = 0x30,
    P31 = 0x31,
    P32 = 0x32,
    P33 = 0x33,
    P34 = 0x34,
    P35 = 0x35,
    P36 = 0x36,
    P37 = 0x37,
    P38 = 0x38,
    P39 = 0x39,
    P3A = 0x3A,
    P3B = 0x3B,
    P3C = 0x3C,
    P3D = 0x3D,
    P3E = 0x3E,
    P3F = 0x3F,
    P40 = 0x40,
    P41 = 0x41,
    P42 = 0x42,
    P43 = 0x43,
    P44 = 0x44,
    P45 = 0x45,
    P46 = 0x46,
    P47 = 0x47,
    P48 = 0x48,
    P49 = 0x49,
    P4A = 0x4A,
    P4B = 0x4B,
    P4C = 0x4C,
    P4D = 0x4D,
    P4E = 0x4E,
    P4F = 0x4F,
    P50 = 0x50,
    P51 = 0x51,
    P52 = 0x52,
    P53 = 0x53,
    P54 = 0x54,
    P55 = 0x55,
    P56 = 0x56,
    P57 = 0x57,
    P58 = 0x58,
    P59 = 0x59,
    P5A = 0x5A,
    P5B = 0x5B,
    P5C = 0x5C,
    P5D = 0x5D,
    P5E = 0x5E,
    P5F = 0x5F,
    P60 = 0x60,
    P61 = 0x61,
    P62 = 0x62,
    P63 = 0x63,
    P64 = 0x64,
    P65 = 0x65,
    P66 = 0x66,
    P67 = 0x67,
    P68 = 0x68,
    P69 = 0x69,
    P6A = 0x6A,
    P6B = 0x6B,
    P6C = 0x6C,
    P6D = 0x6D,
    P6E = 0x6E,
    P6F = 0x6F,
    P70 = 0x70,
    P71 = 0x71,
    P72 = 0x72,
    P73 = 0x73,
    P74 = 0x74,
    P75 = 0x75,
    P76 = 0x76,
    P77 = 0x77,
    P78 = 0x78,
    P79 = 0x79,
    P7A = 0x7A,
    P7B = 0x7B,
    P7C = 0x7C,
    P7D = 0x7D,
    P7E = 0x7E,
}

impl Tag {
    /// Tag for a 16-byte inline string ending in `last` (must be printable ASCII).
    #[inline]
    fn packed16(last: u8) -> Tag {
        debug_assert!((PRINTABLE_FIRST..=PRINTABLE_LAST).contains(&last));
        // SAFETY: every value in 0x20..=0x7E is a declared discriminant.
        unsafe { std::mem::transmute::<u8, Tag>(last) }
    }

    #[inline]
    fn is_packed16(self) -> bool {
        self as u8 >= PRINTABLE_FIRST
    }

    #[inline]
    fn inline(len: usize) -> Tag {
        debug_assert!(len <= INLINE_CAP);
        // SAFETY: Tag is repr(u8) with contiguous discriminants 0..=15 for inline lengths.
        unsafe { std::mem::transmute::<u8, Tag>(len as u8) }
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
union Word {
    ptr: *mut u8,
    int: i64,
    bytes: [u8; 8],
}

/// See the module docs. Layout: `w0` (8 bytes: pointer, i64 or inline bytes 0..8), `w1` (7 bytes:
/// inline bytes 8..15, or the heap length in its first 4 bytes), `tag`.
#[repr(C)]
pub struct CompactStr {
    w0: Word,
    w1: [u8; 7],
    tag: Tag,
}

// SAFETY: the heap block is uniquely owned, like a Box<[u8]>.
unsafe impl Send for CompactStr {}
unsafe impl Sync for CompactStr {}

const _: () = assert!(std::mem::size_of::<CompactStr>() == 16);
const _: () = assert!(std::mem::size_of::<Option<CompactStr>>() == 16);

/// The encoding Redis would report for a string value (OBJECT ENCODING).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StrEncoding {
    Int,
    Embstr,
    Raw,
}

impl StrEncoding {
    pub fn name(self) -> &'static str {
        match self {
            StrEncoding::Int => "int",
            StrEncoding::Embstr => "embstr",
            StrEncoding::Raw => "raw",
        }
    }
}

/// Scratch space for formatting an int-encoded value as bytes without allocating.
pub type IntBuf = [u8; 20];

impl CompactStr {
    /// An empty string.
    pub const fn empty() -> Self {
        CompactStr {
            w0: Word { bytes: [0; 8] },
            w1: [0; 7],
            tag: Tag::L0,
        }
    }

    /// Stores `b` verbatim (never int-encoded): used for keys and binary values.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Self {
        if b.len() <= INLINE_CAP {
            let mut s = CompactStr::empty();
            let mut raw = [0u8; 15];
            raw[..b.len()].copy_from_slice(b);
            let mut w0 = [0u8; 8];
            w0.copy_from_slice(&raw[..8]);
            s.w0 = Word { bytes: w0 };
            s.w1.copy_from_slice(&raw[8..15]);
            s.tag = Tag::inline(b.len());
            s
        } else if b.len() == 16 && (PRINTABLE_FIRST..=PRINTABLE_LAST).contains(&b[15]) {
            let mut w0 = [0u8; 8];
            w0.copy_from_slice(&b[..8]);
            let mut w1 = [0u8; 7];
            w1.copy_from_slice(&b[8..15]);
            CompactStr {
                w0: Word { bytes: w0 },
                w1,
                tag: Tag::packed16(b[15]),
            }
        } else {
            Self::heap(b, Tag::Heap)
        }
    }

    /// Stores a string value the way Redis's `tryObjectEncoding` would: integers that round-trip
    /// exactly (no leading zeros/plus, at most 20 chars) become int-encoded.
    #[inline]
    pub fn from_value(b: &[u8]) -> Self {
        if !b.is_empty() && b.len() <= 20 {
            if let Some(v) = parse_strict_i64(b) {
                return Self::from_int(v);
            }
        }
        Self::from_bytes(b)
    }

    /// A value built by APPEND/SETRANGE/SETBIT/BITOP: never int-encoded, and reported as "raw"
    /// like Redis's modified-in-place sds strings (even short ones, so it lives on the heap).
    /// Only the empty string stays inline.
    pub fn from_value_raw(b: &[u8]) -> Self {
        if b.is_empty() {
            Self::empty()
        } else {
            Self::heap(b, Tag::HeapRaw)
        }
    }

    /// Makes this value a mutable "raw" heap string of at least `min_len` bytes (zero-padded
    /// when it grows) and returns its bytes. Int-encoded, inline and shared-layout values are
    /// converted first. Used by SETBIT/SETRANGE/BITFIELD/APPEND to edit in place instead of
    /// rebuilding the whole string. The caller checks `min_len <= MAX_LEN`.
    pub fn make_raw_mut(&mut self, min_len: usize) -> &mut [u8] {
        assert!(min_len <= MAX_LEN, "string too long");
        if self.tag != Tag::HeapRaw {
            let mut b = [0u8; 20];
            let cur = self.bytes(&mut b);
            if cur.is_empty() && min_len == 0 {
                return &mut [];
            }
            let mut v = Vec::with_capacity(cur.len().max(min_len));
            v.extend_from_slice(cur);
            if v.len() < min_len {
                v.resize(min_len, 0);
            }
            *self = Self::heap(&v, Tag::HeapRaw);
        } else {
            let old = self.heap_len();
            if old < min_len {
                let layout = Layout::array::<u8>(old).expect("layout");
                // SAFETY: the block was allocated with `layout` (old > 0 for heap strings); the
                // new size is non-zero and at most MAX_LEN; the grown tail is zeroed below.
                let p = unsafe {
                    let p = std::alloc::realloc(self.w0.ptr, layout, min_len);
                    if p.is_null() {
                        std::alloc::handle_alloc_error(
                            Layout::array::<u8>(min_len).expect("layout"),
                        );
                    }
                    std::ptr::write_bytes(p.add(old), 0, min_len - old);
                    p
                };
                self.w0 = Word { ptr: p };
                self.w1[..4].copy_from_slice(&(min_len as u32).to_le_bytes());
            }
        }
        let len = self.heap_len();
        // SAFETY: HeapRaw: ptr points to `len` initialised bytes uniquely owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.w0.ptr, len) }
    }

    #[inline]
    pub fn from_int(v: i64) -> Self {
        CompactStr {
            w0: Word { int: v },
            w1: [0; 7],
            tag: Tag::Int,
        }
    }

    fn heap(b: &[u8], tag: Tag) -> Self {
        assert!(b.len() <= MAX_LEN, "string too long");
        let layout = Layout::array::<u8>(b.len()).expect("layout");
        // SAFETY: callers pass a non-empty `b`, so the layout has non-zero size; we copy exactly
        // len bytes.
        let ptr = unsafe {
            let p = alloc(layout);
            let p = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
            std::ptr::copy_nonoverlapping(b.as_ptr(), p.as_ptr(), b.len());
            p.as_ptr()
        };
        let mut w1 = [0u8; 7];
        w1[..4].copy_from_slice(&(b.len() as u32).to_le_bytes());
        CompactStr {
            w0: Word { ptr },
            w1,
            tag,
        }
    }

    #[inline]
    fn is_heap(&self) -> bool {
        matches!(self.tag, Tag::Heap | Tag::HeapRaw)
    }

    #[inline]
    fn heap_len(&self) -> usize {
        u32::from_le_bytes([self.w1[0], self.w1[1], self.w1[2], self.w1[3]]) as usize
    }

    /// Integer value if int-encoded.
    #[inline]
    pub fn as_int(&self) -> Option<i64> {
        if self.tag == Tag::Int {
            // SAFETY: tag says the word holds an int.
            Some(unsafe { self.w0.int })
        } else {
            None
        }
    }

    /// Bytes of a string that is not int-encoded (always true for keys).
    #[inline]
    pub fn raw_bytes(&self) -> Option<&[u8]> {
        match self.tag {
            Tag::Int => None,
            Tag::Heap | Tag::HeapRaw => {
                // SAFETY: heap tag: ptr points to heap_len initialised bytes we own.
                Some(unsafe { std::slice::from_raw_parts(self.w0.ptr, self.heap_len()) })
            }
            t => {
                let len = if t.is_packed16() { 16 } else { t as usize };
                // SAFETY: inline: the first `len` bytes of the struct (w0, w1, and for 16-byte
                // strings the tag byte itself; contiguous in repr(C)) were written as bytes.
                Some(unsafe { std::slice::from_raw_parts(self as *const Self as *const u8, len) })
            }
        }
    }

    /// Key bytes. Keys are never int-encoded.
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.raw_bytes().unwrap_or(&[])
    }

    /// The value's bytes; int-encoded values are formatted into `buf`.
    #[inline]
    pub fn bytes<'a>(&'a self, buf: &'a mut IntBuf) -> &'a [u8] {
        match self.as_int() {
            Some(v) => fmt_i64(v, buf),
            None => self.raw_bytes().unwrap_or(&[]),
        }
    }

    /// Owned copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut b = [0u8; 20];
        self.bytes(&mut b).to_vec()
    }

    /// Length of the string representation (STRLEN).
    #[inline]
    pub fn len(&self) -> usize {
        match self.tag {
            Tag::Int => {
                let mut b = [0u8; 20];
                self.bytes(&mut b).len()
            }
            Tag::Heap | Tag::HeapRaw => self.heap_len(),
            t if t.is_packed16() => 16,
            t => t as usize,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding(&self) -> StrEncoding {
        match self.tag {
            Tag::Int => StrEncoding::Int,
            Tag::HeapRaw => StrEncoding::Raw,
            _ if self.len() <= 44 => StrEncoding::Embstr,
            _ => StrEncoding::Raw,
        }
    }

    /// Heap bytes owned beyond the 16-byte struct (for MEMORY USAGE / accounting).
    pub fn heap_size(&self) -> usize {
        if self.is_heap() {
            self.heap_len()
        } else {
            0
        }
    }
}

impl Drop for CompactStr {
    #[inline]
    fn drop(&mut self) {
        if self.is_heap() {
            let len = self.heap_len();
            // SAFETY: allocated in `heap` with exactly this layout.
            unsafe { dealloc(self.w0.ptr, Layout::array::<u8>(len).expect("layout")) }
        }
    }
}

impl Clone for CompactStr {
    fn clone(&self) -> Self {
        match self.tag {
            Tag::Heap | Tag::HeapRaw => Self::heap(self.raw_bytes().unwrap_or(&[]), self.tag),
            // SAFETY: inline and int representations are plain bytes.
            _ => CompactStr {
                w0: self.w0,
                w1: self.w1,
                tag: self.tag,
            },
        }
    }
}

impl PartialEq for CompactStr {
    fn eq(&self, other: &Self) -> bool {
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        self.bytes(&mut a) == other.bytes(&mut b)
    }
}
impl Eq for CompactStr {}

impl fmt::Debug for CompactStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut b = [0u8; 20];
        write!(f, "{:?}", String::from_utf8_lossy(self.bytes(&mut b)))
    }
}

impl damselfly_dash::TableKey for CompactStr {
    #[inline]
    fn key_bytes(&self) -> &[u8] {
        self.key()
    }
}

/// Formats `v` into `buf`, returning the used tail.
#[inline]
pub fn fmt_i64(v: i64, buf: &mut IntBuf) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Redis `string2ll`: optional '-', digits, no leading zeros (except "0"), no '+', no spaces.
#[inline]
pub fn parse_strict_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' {
        (true, &s[1..])
    } else {
        (false, s)
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_heap_int_roundtrip() {
        for s in [
            &b""[..],
            b"a",
            b"fifteen_bytes!!",
            b"sixteen_bytes!!!",
            &[0u8, 1, 2, 255][..],
        ] {
            let c = CompactStr::from_bytes(s);
            assert_eq!(c.key(), s);
            assert_eq!(c.len(), s.len());
            let d = c.clone();
            assert_eq!(d.key(), s);
            assert_eq!(c, d);
        }
        assert_eq!(
            CompactStr::from_bytes(b"key:000000012345").heap_size(),
            0,
            "16-byte printable keys stay inline"
        );
        assert_eq!(
            CompactStr::from_bytes(b"sixteen_bytes!!\x01").heap_size(),
            16
        );
        let long = vec![7u8; 1000];
        let c = CompactStr::from_value(&long);
        assert_eq!(c.raw_bytes().unwrap(), &long[..]);
        assert_eq!(c.encoding(), StrEncoding::Raw);
        let i = CompactStr::from_value(b"-12345");
        assert_eq!(i.as_int(), Some(-12345));
        assert_eq!(i.encoding(), StrEncoding::Int);
        assert_eq!(i.len(), 6);
        assert_eq!(i.to_vec(), b"-12345");
        assert_eq!(CompactStr::from_value(b"012").as_int(), None);
        assert_eq!(CompactStr::from_value(b"+1").as_int(), None);
        assert_eq!(
            CompactStr::from_value(b"9223372036854775808").as_int(),
            None
        );
        assert_eq!(
            CompactStr::from_value(b"-9223372036854775808").as_int(),
            Some(i64::MIN)
        );
        assert_eq!(
            CompactStr::from_value(b"hello world").encoding(),
            StrEncoding::Embstr
        );
    }

    #[test]
    fn raw_values_and_in_place_edits() {
        let r = CompactStr::from_value_raw(b"12");
        assert_eq!(r.as_int(), None);
        assert_eq!(r.encoding(), StrEncoding::Raw);
        assert_eq!(r.to_vec(), b"12");
        assert_eq!(CompactStr::from_value_raw(b"").len(), 0);

        let mut v = CompactStr::from_value(b"1234");
        assert_eq!(v.encoding(), StrEncoding::Int);
        v.make_raw_mut(0)[0] = b'2';
        assert_eq!(v.to_vec(), b"2234");
        assert_eq!(v.encoding(), StrEncoding::Raw);
        let b = v.make_raw_mut(40);
        assert_eq!(b.len(), 40);
        b[39] = b'x';
        assert_eq!(v.len(), 40);
        let mut want = b"2234".to_vec();
        want.resize(39, 0);
        want.push(b'x');
        assert_eq!(v.to_vec(), want);
        let c = v.clone();
        assert_eq!(c.encoding(), StrEncoding::Raw);
        assert_eq!(c.to_vec(), want);

        let mut e = CompactStr::empty();
        assert!(e.make_raw_mut(0).is_empty());
        assert_eq!(e.make_raw_mut(3), &[0, 0, 0]);
    }

    #[test]
    fn fmt_extremes() {
        let mut b = [0u8; 20];
        assert_eq!(fmt_i64(i64::MIN, &mut b), b"-9223372036854775808");
        assert_eq!(fmt_i64(0, &mut b), b"0");
        assert_eq!(fmt_i64(i64::MAX, &mut b), b"9223372036854775807");
    }
}
