//! `KeyStr`: the 16-byte representation of keys in the Dash tables.
//!
//! Why: a per-key heap object costs an allocation header plus a pointer, which is most of Redis's
//! per-key overhead. Keys of up to 15 bytes live inline, and so do 16-byte keys whose last byte is
//! printable ASCII (that byte doubles as the tag: "key:000000012345", "memtier-12345678"). Longer
//! keys are one exact-size heap block whose length lives in the struct (all 7 spare bytes, so any
//! length up to 2^56 - 1: proto-max-bulk-len can be raised past 4 GiB), not in the block. Keys are
//! never int-encoded. The last byte is a tag enum so `Option<KeyStr>` gets a free niche.
//!
//! Values use the 8-byte [`CompactStr`](super::compact::CompactStr) instead: the table slot is
//! `(KeyStr, Value)` = 24 bytes.

use std::alloc::{alloc, dealloc, Layout};
use std::fmt;
use std::ptr::NonNull;

/// Inline capacity in bytes (16 when the last byte is printable ASCII).
pub const INLINE_CAP: usize = 15;

const PRINTABLE_FIRST: u8 = 0x20;
const PRINTABLE_LAST: u8 = 0x7E;

/// Longest key we store: the heap length takes the 7 bytes of `w1` (56 bits). Redis caps strings
/// at proto-max-bulk-len (512 MB by default, settable up to `i64::MAX`), so keys past 4 GiB are
/// legal; no allocation can reach this bound.
pub const MAX_LEN: usize = (1 << 56) - 1;

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
    bytes: [u8; 8],
}

/// See the module docs. Layout: `w0` (8 bytes: pointer or inline bytes 0..8), `w1` (7 bytes:
/// inline bytes 8..15, or the heap length as a 56-bit little-endian integer), `tag`.
#[repr(C)]
pub struct KeyStr {
    w0: Word,
    w1: [u8; 7],
    tag: Tag,
}

// SAFETY: the heap block is uniquely owned, like a Box<[u8]>.
unsafe impl Send for KeyStr {}
unsafe impl Sync for KeyStr {}

const _: () = assert!(std::mem::size_of::<KeyStr>() == 16);
const _: () = assert!(std::mem::size_of::<Option<KeyStr>>() == 16);
const _: () = assert!(MAX_LEN > u32::MAX as usize);

impl KeyStr {
    /// An empty key.
    pub const fn empty() -> Self {
        KeyStr {
            w0: Word { bytes: [0; 8] },
            w1: [0; 7],
            tag: Tag::L0,
        }
    }

    /// Stores `b` verbatim.
    /// Up to 15 bytes in the two words (zero-padded), under `tag`.
    #[inline]
    fn in_words(b: &[u8], tag: Tag) -> Self {
        let mut raw = [0u8; 15];
        raw[..b.len()].copy_from_slice(b);
        let mut w0 = [0u8; 8];
        w0.copy_from_slice(&raw[..8]);
        let mut w1 = [0u8; 7];
        w1.copy_from_slice(&raw[8..15]);
        KeyStr {
            w0: Word { bytes: w0 },
            w1,
            tag,
        }
    }

    #[inline]
    pub fn from_bytes(b: &[u8]) -> Self {
        if b.len() <= INLINE_CAP {
            Self::in_words(b, Tag::inline(b.len()))
        } else if b.len() == 16 && (PRINTABLE_FIRST..=PRINTABLE_LAST).contains(&b[15]) {
            Self::in_words(&b[..15], Tag::packed16(b[15]))
        } else {
            Self::heap(b)
        }
    }

    fn heap(b: &[u8]) -> Self {
        assert!(b.len() <= MAX_LEN, "key too long");
        let layout = Layout::array::<u8>(b.len()).expect("layout");
        // SAFETY: layout has non-zero size (len > INLINE_CAP); we copy exactly len bytes.
        let ptr = unsafe {
            let p = alloc(layout);
            let p = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
            std::ptr::copy_nonoverlapping(b.as_ptr(), p.as_ptr(), b.len());
            p.as_ptr()
        };
        KeyStr {
            w0: Word { ptr },
            w1: encode_heap_len(b.len()),
            tag: Tag::Heap,
        }
    }

    #[inline]
    fn heap_len(&self) -> usize {
        decode_heap_len(&self.w1)
    }

    /// The key's bytes.
    #[inline]
    pub fn key(&self) -> &[u8] {
        match self.tag {
            Tag::Heap => {
                // SAFETY: heap tag: ptr points to heap_len initialised bytes we own.
                unsafe { std::slice::from_raw_parts(self.w0.ptr, self.heap_len()) }
            }
            t => {
                let len = if t.is_packed16() { 16 } else { t as usize };
                // SAFETY: inline: the first `len` bytes of the struct (w0, w1, and for 16-byte
                // strings the tag byte itself; contiguous in repr(C)) were written as bytes.
                unsafe { std::slice::from_raw_parts(self as *const Self as *const u8, len) }
            }
        }
    }

    /// Same as [`KeyStr::key`].
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        self.key()
    }

    /// Owned copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.key().to_vec()
    }

    #[inline]
    pub fn len(&self) -> usize {
        match self.tag {
            Tag::Heap => self.heap_len(),
            t if t.is_packed16() => 16,
            t => t as usize,
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned beyond the 16-byte struct (for MEMORY USAGE / accounting).
    pub fn heap_size(&self) -> usize {
        if self.tag == Tag::Heap {
            self.heap_len()
        } else {
            0
        }
    }
}

/// The heap length as stored in `w1`: 56 bits, little endian (`len <= MAX_LEN`).
#[inline]
fn encode_heap_len(len: usize) -> [u8; 7] {
    debug_assert!(len <= MAX_LEN);
    let mut w1 = [0u8; 7];
    w1.copy_from_slice(&(len as u64).to_le_bytes()[..7]);
    w1
}

#[inline]
fn decode_heap_len(w1: &[u8; 7]) -> usize {
    let mut b = [0u8; 8];
    b[..7].copy_from_slice(w1);
    u64::from_le_bytes(b) as usize
}

impl Drop for KeyStr {
    #[inline]
    fn drop(&mut self) {
        if self.tag == Tag::Heap {
            let len = self.heap_len();
            // SAFETY: allocated in `heap` with exactly this layout.
            unsafe { dealloc(self.w0.ptr, Layout::array::<u8>(len).expect("layout")) }
        }
    }
}

impl Clone for KeyStr {
    fn clone(&self) -> Self {
        match self.tag {
            Tag::Heap => Self::heap(self.key()),
            // Inline representations are plain bytes.
            _ => KeyStr {
                w0: self.w0,
                w1: self.w1,
                tag: self.tag,
            },
        }
    }
}

impl PartialEq for KeyStr {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for KeyStr {}

impl fmt::Debug for KeyStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.key()))
    }
}

impl damselfly_dash::TableKey for KeyStr {
    #[inline]
    fn key_bytes(&self) -> &[u8] {
        self.key()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let long = vec![7u8; 1000];
        for s in [
            &b""[..],
            b"a",
            b"fifteen_bytes!!",
            b"sixteen_bytes!!!",
            b"sixteen_bytes!!\x01",
            b"seventeen_bytes!!",
            &[0u8, 1, 2, 255][..],
            &long[..],
        ] {
            let c = KeyStr::from_bytes(s);
            assert_eq!(c.key(), s);
            assert_eq!(c.len(), s.len());
            assert_eq!(c.is_empty(), s.is_empty());
            let d = c.clone();
            assert_eq!(d.key(), s);
            assert_eq!(c, d);
            assert_eq!(c.to_vec(), s);
        }
        assert_eq!(
            KeyStr::from_bytes(b"key:000000012345").heap_size(),
            0,
            "16-byte printable keys stay inline"
        );
        assert_eq!(KeyStr::from_bytes(b"sixteen_bytes!!\x01").heap_size(), 16);
        assert_ne!(KeyStr::from_bytes(b"a"), KeyStr::from_bytes(b"b"));
    }

    /// Keys longer than 4 GiB (possible once proto-max-bulk-len is raised) keep their full length:
    /// it used to be stored as a u32 (and `heap` panicked past u32::MAX).
    #[test]
    fn heap_len_is_56_bits() {
        for len in [
            17usize,
            u32::MAX as usize,
            u32::MAX as usize + 1,
            (1 << 32) + 5,
            (1 << 40) + 123,
            MAX_LEN,
        ] {
            assert_eq!(decode_heap_len(&encode_heap_len(len)), len, "{len}");
        }
    }

    /// The real thing: a 4 GiB + 3 byte key (allocates and copies 4 GiB; run with --ignored).
    #[test]
    #[ignore]
    fn key_longer_than_4gib() {
        let len = (1usize << 32) + 3;
        let mut v = vec![0u8; len];
        v[len - 1] = 7;
        let k = KeyStr::from_bytes(&v);
        assert_eq!(k.len(), len);
        assert_eq!(k.heap_size(), len);
        assert_eq!(k.key()[len - 1], 7);
        assert!(k.key() == &v[..]);
    }

    #[test]
    fn every_length_and_last_byte() {
        for len in 0..40usize {
            for last in [0u8, 0x1f, 0x20, b'a', 0x7e, 0x7f, 0xff] {
                let mut v: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
                if let Some(l) = v.last_mut() {
                    *l = last;
                }
                let k = KeyStr::from_bytes(&v);
                assert_eq!(k.key(), &v[..]);
                assert_eq!(k.clone().key(), &v[..]);
            }
        }
    }
}
