//! `CompactStr`: the 8-byte representation of string values.
//!
//! Why: the Dash table slot is `(KeyStr, Value)`; with an 8-byte value it is 24 bytes instead of
//! 32, which is most of the per-key cost of the table. A value is one tagged 64-bit word (stored
//! as a pointer so heap pointers keep their provenance; immediates are pointers without
//! provenance, built and read with plain pointer arithmetic):
//!
//! | low 3 bits | meaning |
//! |---|---|
//! | `0` `HEAP` | exact-size heap block (align 8) of `len` bytes; the pointer is in bits 0..48, `len` (8..=32767) in bits 48..63 and the "raw" flag in bit 63. Used when the pointer fits in 48 bits (always on x86-64 and aarch64 Linux user space without top-byte tagging). |
//! | `1` `BOXED` | heap block (align 8) with a `u64` header (kind in the top 2 bits, payload length below) followed by the payload: strings of 32 KiB and more, strings whose pointer does not fit in 48 bits, and integers outside the 61-bit immediate range (8-byte payload). |
//! | `2` `INLINE` | up to 7 bytes inline: bits 3..6 of the low byte are the length, bit 6 the "raw" flag; the bytes follow in memory bytes 1..8. |
//! | `3` `INT` | int-encoded value: a 61-bit signed immediate in bits 3..64. |
//! | `4..=7` | reserved: pointers to collection objects once `Value` itself becomes this tagged word (see `value.rs`). A `CompactStr` never uses them. |
//!
//! The word is never zero, so `Option<CompactStr>` and enums around it get a niche.

use std::alloc::{alloc, dealloc, Layout};
use std::fmt;
use std::ptr::{self, NonNull};

#[cfg(not(all(target_pointer_width = "64", target_endian = "little")))]
compile_error!("CompactStr assumes a 64-bit little-endian target");

/// Inline capacity in bytes.
pub const INLINE_CAP: usize = 7;

/// Longest string we store. Redis caps strings at 512 MB by default.
pub const MAX_LEN: usize = isize::MAX as usize - 16;

/// Tag values (low 3 bits of the word).
pub mod tag {
    /// Number of tag bits; heap blocks are 8-aligned so a pointer leaves them zero.
    pub const BITS: u32 = 3;
    pub const MASK: usize = (1 << BITS) - 1;
    pub const HEAP: usize = 0;
    pub const BOXED: usize = 1;
    pub const INLINE: usize = 2;
    pub const INT: usize = 3;
    /// First tag reserved for collection pointers (4, 5, 6, 7): a future tagged `Value` word.
    pub const FIRST_RESERVED: usize = 4;
}

/// Heap alignment: leaves the tag bits of a pointer zero.
const ALIGN: usize = 8;
/// `HEAP`: the pointer in the low 48 bits, the length in the next 15, the raw flag on top.
const LEN_SHIFT: u32 = 48;
const ADDR_MASK: usize = (1 << LEN_SHIFT) - 1;
const HEAP_MAX_LEN: usize = (1 << 15) - 1;
const HEAP_RAW: usize = 1 << 63;

/// `BOXED` header: kind in the top 2 bits, payload length below.
const KIND_SHIFT: u32 = 62;
const KIND_STR: u64 = 0;
const KIND_RAW: u64 = 1;
const KIND_INT: u64 = 2;
const HDR_LEN_MASK: u64 = (1 << KIND_SHIFT) - 1;
const HDR: usize = 8;

/// `INLINE`: length in bits 3..6 of the low byte, raw flag in bit 6.
const INLINE_LEN_SHIFT: u32 = 3;
const INLINE_RAW: u8 = 1 << 6;

/// Range of the `INT` immediate (61-bit two's complement).
const IMM_MIN: i64 = -(1 << 60);
const IMM_MAX: i64 = (1 << 60) - 1;

/// See the module docs.
#[repr(transparent)]
pub struct CompactStr {
    w: NonNull<u8>,
}

// SAFETY: the heap block is uniquely owned, like a Box<[u8]>.
unsafe impl Send for CompactStr {}
unsafe impl Sync for CompactStr {}

const _: () = assert!(std::mem::size_of::<CompactStr>() == 8);
const _: () = assert!(std::mem::size_of::<Option<CompactStr>>() == 8);

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

/// A word without provenance (immediates). `bits` must be non-zero.
#[inline]
const fn imm(bits: usize) -> NonNull<u8> {
    // SAFETY: callers pass a non-zero value (INLINE/INT tags are non-zero). Offsetting a null
    // pointer with `wrapping_add` gives a pointer with that address and no provenance.
    unsafe { NonNull::new_unchecked(ptr::null_mut::<u8>().wrapping_add(bits)) }
}

#[inline]
fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, ALIGN).expect("string too long")
}

/// Allocates `size` (> 0) bytes with alignment 8.
#[inline]
fn alloc_block(size: usize) -> *mut u8 {
    let l = layout(size);
    // SAFETY: size > 0 (callers allocate at least 8 bytes).
    let p = unsafe { alloc(l) };
    if p.is_null() {
        std::alloc::handle_alloc_error(l);
    }
    p
}

/// `HEAP`: the length field of the word.
#[inline]
fn heap_len(bits: usize) -> usize {
    (bits >> LEN_SHIFT) & HEAP_MAX_LEN
}

/// Whether a heap pointer leaves the top 16 bits free for the length.
#[inline]
fn addr_fits(p: *mut u8) -> bool {
    #[cfg(test)]
    if tests::FORCE_WIDE_POINTERS.with(|f| f.get()) {
        return false;
    }
    (p as usize) >> LEN_SHIFT == 0
}

impl CompactStr {
    /// An empty string.
    pub const fn empty() -> Self {
        CompactStr {
            w: imm(tag::INLINE),
        }
    }

    #[inline]
    fn bits(&self) -> usize {
        self.w.as_ptr() as usize
    }

    #[inline]
    fn tag(&self) -> usize {
        self.bits() & tag::MASK
    }

    #[inline]
    fn inline(b: &[u8], raw: bool) -> Self {
        debug_assert!(b.len() <= INLINE_CAP);
        let mut w = [0u8; 8];
        w[0] = tag::INLINE as u8
            | ((b.len() as u8) << INLINE_LEN_SHIFT)
            | if raw { INLINE_RAW } else { 0 };
        w[1..1 + b.len()].copy_from_slice(b);
        CompactStr {
            w: imm(u64::from_le_bytes(w) as usize),
        }
    }

    /// A heap string: `HEAP` when it fits (shorter than 32 KiB, pointer in 48 bits), else
    /// `BOXED`.
    fn heap(b: &[u8], raw: bool) -> Self {
        let len = b.len();
        debug_assert!(len > INLINE_CAP);
        if len <= HEAP_MAX_LEN {
            let p = alloc_block(len);
            if addr_fits(p) {
                // SAFETY: p is a fresh block of len bytes.
                unsafe { ptr::copy_nonoverlapping(b.as_ptr(), p, len) };
                // Pointer arithmetic (not an int->ptr cast) keeps the block's provenance.
                let w = p.wrapping_add(len << LEN_SHIFT | if raw { HEAP_RAW } else { 0 });
                // SAFETY: p is non-null and its address is below 2^48, so w != 0.
                return CompactStr {
                    w: unsafe { NonNull::new_unchecked(w) },
                };
            }
            // Pointer does not fit in 48 bits (e.g. top-byte-tagged heaps): use a header.
            // SAFETY: allocated just above with this layout.
            unsafe { dealloc(p, layout(len)) };
        }
        assert!(len <= MAX_LEN, "string too long");
        let kind = if raw { KIND_RAW } else { KIND_STR };
        Self::boxed(kind, b)
    }

    /// A `BOXED` block: header (kind, payload length) then the payload.
    fn boxed(kind: u64, payload: &[u8]) -> Self {
        let len = payload.len();
        let p = alloc_block(HDR + len);
        // SAFETY: p is a fresh, 8-aligned block of HDR + len bytes.
        unsafe {
            ptr::write(p as *mut u64, (kind << KIND_SHIFT) | len as u64);
            ptr::copy_nonoverlapping(payload.as_ptr(), p.add(HDR), len);
        }
        // SAFETY: p is 8-aligned and non-null, so p + 1 is non-null and has a clear tag.
        CompactStr {
            w: unsafe { NonNull::new_unchecked(p.wrapping_add(tag::BOXED)) },
        }
    }

    /// Stores `b` verbatim (never int-encoded).
    #[inline]
    pub fn from_bytes(b: &[u8]) -> Self {
        Self::verbatim(b, false)
    }

    /// Stores `b` verbatim, with the raw flag `raw`.
    #[inline]
    fn verbatim(b: &[u8], raw: bool) -> Self {
        if b.len() <= INLINE_CAP {
            Self::inline(b, raw)
        } else {
            Self::heap(b, raw)
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

    /// Stores `b` verbatim and reports it as "raw" (value built by APPEND/SETRANGE, which Redis
    /// always leaves raw-encoded).
    pub fn from_value_raw(b: &[u8]) -> Self {
        Self::verbatim(b, true)
    }

    #[inline]
    pub fn from_int(v: i64) -> Self {
        if (IMM_MIN..=IMM_MAX).contains(&v) {
            CompactStr {
                w: imm((((v as u64) << tag::BITS) as usize) | tag::INT),
            }
        } else {
            Self::boxed(KIND_INT, &v.to_le_bytes())
        }
    }

    /// Makes this value a mutable "raw" string of at least `min_len` bytes (zero-padded when it
    /// grows) and returns its bytes. Used by SETBIT/SETRANGE/BITFIELD/APPEND to edit in place.
    /// Growth goes through `realloc`, which jemalloc does in place within a size class, so a
    /// string built by repeated APPENDs is copied only O(log n) times. The caller checks
    /// `min_len <= MAX_LEN`.
    pub fn make_raw_mut(&mut self, min_len: usize) -> &mut [u8] {
        assert!(min_len <= MAX_LEN, "string too long");
        let bits = self.bits();
        match bits & tag::MASK {
            tag::HEAP if bits & HEAP_RAW != 0 => {
                let len = heap_len(bits);
                let want = len.max(min_len);
                if want <= HEAP_MAX_LEN {
                    let mut p = self.block();
                    if want > len {
                        // SAFETY: the block was allocated with layout(len); want > len > 0.
                        p = unsafe { std::alloc::realloc(p, layout(len), want) };
                        if p.is_null() {
                            std::alloc::handle_alloc_error(layout(want));
                        }
                        // SAFETY: the block now has `want` bytes; zero the grown tail.
                        unsafe { ptr::write_bytes(p.add(len), 0, want - len) };
                        if !addr_fits(p) {
                            // Practically unreachable: re-home the bytes into a BOXED block.
                            // SAFETY: p holds `want` initialised bytes allocated with layout(want).
                            let v = unsafe { std::slice::from_raw_parts(p, want) }.to_vec();
                            unsafe { dealloc(p, layout(want)) };
                            // The old word pointed at the freed block: overwrite without drop.
                            std::mem::forget(std::mem::replace(self, Self::boxed(KIND_RAW, &v)));
                            return self.raw_slice_mut();
                        }
                        let w = p.wrapping_add(want << LEN_SHIFT | HEAP_RAW);
                        // SAFETY: non-null block pointer with its address below 2^48.
                        let new = CompactStr {
                            w: unsafe { NonNull::new_unchecked(w) },
                        };
                        // The old word's block was reallocated: replace without dropping it.
                        std::mem::forget(std::mem::replace(self, new));
                    }
                    return self.raw_slice_mut();
                }
            }
            tag::BOXED => {
                let (kind, len) = self.header();
                if kind == KIND_RAW {
                    let want = len.max(min_len);
                    if want > len {
                        // SAFETY: the block was allocated with layout(HDR + len).
                        let p = unsafe {
                            std::alloc::realloc(self.block(), layout(HDR + len), HDR + want)
                        };
                        if p.is_null() {
                            std::alloc::handle_alloc_error(layout(HDR + want));
                        }
                        // SAFETY: the block has HDR + want bytes; header first, zeroed tail.
                        unsafe {
                            ptr::write(p as *mut u64, (KIND_RAW << KIND_SHIFT) | want as u64);
                            ptr::write_bytes(p.add(HDR + len), 0, want - len);
                        }
                        // SAFETY: p is 8-aligned and non-null, so p + BOXED tag is non-null.
                        let new = CompactStr {
                            w: unsafe { NonNull::new_unchecked(p.wrapping_add(tag::BOXED)) },
                        };
                        std::mem::forget(std::mem::replace(self, new));
                    }
                    return self.raw_slice_mut();
                }
            }
            tag::INLINE
                if bits as u8 & INLINE_RAW != 0 && ((bits >> INLINE_LEN_SHIFT) & 7) >= min_len =>
            {
                return self.raw_slice_mut();
            }
            _ => {}
        }
        // Any other encoding (int, embstr-like, too long for HEAP): rebuild as a raw string.
        let mut b = [0u8; 20];
        let cur = self.bytes(&mut b);
        let mut v = Vec::with_capacity(cur.len().max(min_len));
        v.extend_from_slice(cur);
        if v.len() < min_len {
            v.resize(min_len, 0);
        }
        *self = Self::from_value_raw(&v);
        self.raw_slice_mut()
    }

    /// Mutable bytes of a non-int string (inline, HEAP or BOXED).
    fn raw_slice_mut(&mut self) -> &mut [u8] {
        let bits = self.bits();
        match bits & tag::MASK {
            tag::HEAP => {
                // SAFETY: HEAP: the block holds `len` initialised bytes uniquely owned by self.
                unsafe { std::slice::from_raw_parts_mut(self.block(), heap_len(bits)) }
            }
            tag::INLINE => {
                let len = (bits >> INLINE_LEN_SHIFT) & 7;
                // SAFETY: INLINE: bytes 1..=len of the word are the data; writing them keeps the
                // tag byte (byte 0) and therefore the word non-zero.
                unsafe {
                    std::slice::from_raw_parts_mut((self as *mut Self as *mut u8).add(1), len)
                }
            }
            tag::BOXED => {
                let (_, len) = self.header();
                // SAFETY: string blocks hold `len` initialised bytes after the header.
                unsafe { std::slice::from_raw_parts_mut(self.block().add(HDR), len) }
            }
            _ => &mut [],
        }
    }

    /// Address of the heap block, if any (for prefetching before a batch executes).
    #[inline]
    pub fn heap_ptr(&self) -> Option<*const u8> {
        match self.tag() {
            tag::HEAP | tag::BOXED => Some(self.block() as *const u8),
            _ => None,
        }
    }

    /// Pointer to the heap block (`HEAP` or `BOXED`), with the block's provenance.
    #[inline]
    fn block(&self) -> *mut u8 {
        let bits = self.bits();
        let offset = if bits & tag::MASK == tag::HEAP {
            bits & !ADDR_MASK
        } else {
            bits & tag::MASK
        };
        // Undo the tagging with pointer arithmetic, keeping provenance.
        self.w.as_ptr().wrapping_sub(offset)
    }

    /// `BOXED` only: (kind, payload length).
    #[inline]
    fn header(&self) -> (u64, usize) {
        debug_assert_eq!(self.tag(), tag::BOXED);
        // SAFETY: a BOXED word points (after untagging) at a live, 8-aligned header.
        let h = unsafe { ptr::read(self.block() as *const u64) };
        (h >> KIND_SHIFT, (h & HDR_LEN_MASK) as usize)
    }

    /// Integer value if int-encoded.
    #[inline]
    pub fn as_int(&self) -> Option<i64> {
        match self.tag() {
            tag::INT => Some((self.bits() as i64) >> tag::BITS),
            tag::BOXED => {
                let (kind, _) = self.header();
                if kind == KIND_INT {
                    let mut v = [0u8; 8];
                    // SAFETY: KIND_INT blocks hold an 8-byte payload after the header.
                    unsafe { ptr::copy_nonoverlapping(self.block().add(HDR), v.as_mut_ptr(), 8) };
                    Some(i64::from_le_bytes(v))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// Bytes of a string that is not int-encoded.
    #[inline]
    pub fn raw_bytes(&self) -> Option<&[u8]> {
        let bits = self.bits();
        match bits & tag::MASK {
            tag::HEAP => {
                // SAFETY: HEAP: the block holds `len` initialised bytes we own.
                Some(unsafe { std::slice::from_raw_parts(self.block(), heap_len(bits)) })
            }
            tag::INLINE => {
                let len = (bits >> INLINE_LEN_SHIFT) & 7;
                // SAFETY: INLINE: memory bytes 1..=len of the word (little-endian) are the data.
                Some(unsafe {
                    std::slice::from_raw_parts((self as *const Self as *const u8).add(1), len)
                })
            }
            tag::BOXED => {
                let (kind, len) = self.header();
                if kind == KIND_INT {
                    None
                } else {
                    // SAFETY: string blocks hold `len` initialised bytes after the header.
                    Some(unsafe { std::slice::from_raw_parts(self.block().add(HDR), len) })
                }
            }
            _ => None,
        }
    }

    /// The bytes if not int-encoded, else empty (kept for callers of the old API).
    #[inline]
    pub fn key(&self) -> &[u8] {
        self.raw_bytes().unwrap_or(&[])
    }

    /// The value's bytes; int-encoded values are formatted into `buf`.
    #[inline]
    pub fn bytes<'a>(&'a self, buf: &'a mut IntBuf) -> &'a [u8] {
        match self.raw_bytes() {
            Some(b) => b,
            None => fmt_i64(self.as_int().unwrap_or(0), buf),
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
        let bits = self.bits();
        match bits & tag::MASK {
            tag::HEAP => heap_len(bits),
            tag::INLINE => (bits >> INLINE_LEN_SHIFT) & 7,
            _ => {
                let mut b = [0u8; 20];
                self.bytes(&mut b).len()
            }
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The "raw" flag (APPEND/SETRANGE result).
    #[inline]
    fn is_raw(&self) -> bool {
        let bits = self.bits();
        match bits & tag::MASK {
            tag::INLINE => bits as u8 & INLINE_RAW != 0,
            tag::HEAP => bits & HEAP_RAW != 0,
            tag::BOXED => self.header().0 == KIND_RAW,
            _ => false,
        }
    }

    pub fn encoding(&self) -> StrEncoding {
        if self.as_int().is_some() {
            StrEncoding::Int
        } else if self.is_raw() || self.len() > 44 {
            StrEncoding::Raw
        } else {
            StrEncoding::Embstr
        }
    }

    /// Heap bytes owned beyond the 8-byte word (for MEMORY USAGE / accounting).
    pub fn heap_size(&self) -> usize {
        let bits = self.bits();
        match bits & tag::MASK {
            tag::HEAP => heap_len(bits),
            tag::BOXED => HDR + self.header().1,
            _ => 0,
        }
    }
}

impl Drop for CompactStr {
    #[inline]
    fn drop(&mut self) {
        let bits = self.bits();
        match bits & tag::MASK {
            // SAFETY: allocated in `heap` with exactly this layout.
            tag::HEAP => unsafe { dealloc(self.block(), layout(heap_len(bits))) },
            tag::BOXED => {
                let len = self.header().1;
                // SAFETY: allocated in `boxed` with exactly this layout.
                unsafe { dealloc(self.block(), layout(HDR + len)) }
            }
            _ => {}
        }
    }
}

impl Clone for CompactStr {
    fn clone(&self) -> Self {
        match self.tag() {
            tag::HEAP => Self::heap(self.key(), self.bits() & HEAP_RAW != 0),
            tag::BOXED => {
                let (kind, len) = self.header();
                // SAFETY: the block holds `len` initialised payload bytes after the header.
                let payload = unsafe { std::slice::from_raw_parts(self.block().add(HDR), len) };
                Self::boxed(kind, payload)
            }
            // Immediates: plain bits, no provenance.
            _ => CompactStr { w: self.w },
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

impl Default for CompactStr {
    fn default() -> Self {
        Self::empty()
    }
}

/// Formats `v` into `buf`, returning the used tail (the protocol crate's itoa).
#[inline]
pub fn fmt_i64(v: i64, buf: &mut IntBuf) -> &[u8] {
    let n = damselfly_protocol::double::write_i64(v, buf);
    &buf[buf.len() - n..]
}

/// Redis `string2ll`: optional '-', digits, no leading zeros (except "0"), no '+', no spaces.
#[inline]
pub fn parse_strict_i64(s: &[u8]) -> Option<i64> {
    // One implementation of Redis's string2ll for the whole server (the protocol crate's).
    damselfly_protocol::double::parse_i64(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Makes `heap` treat every pointer as not fitting in 48 bits (the `BOXED` fallback).
        pub(super) static FORCE_WIDE_POINTERS: Cell<bool> = const { Cell::new(false) };
    }

    #[test]
    fn wide_pointer_fallback() {
        FORCE_WIDE_POINTERS.with(|f| f.set(true));
        for len in [8usize, 9, 44, 45, 1000, HEAP_MAX_LEN, HEAP_MAX_LEN + 1] {
            let v = pattern(len);
            let c = CompactStr::from_bytes(&v);
            assert_eq!(c.tag(), tag::BOXED);
            check(&c, &v);
            let want = if len <= 44 {
                StrEncoding::Embstr
            } else {
                StrEncoding::Raw
            };
            assert_eq!(c.encoding(), want);
            assert_eq!(c.heap_size(), HDR + len);
            let r = CompactStr::from_value_raw(&v);
            assert_eq!(r.tag(), tag::BOXED);
            check(&r, &v);
            assert_eq!(r.encoding(), StrEncoding::Raw);
        }
        FORCE_WIDE_POINTERS.with(|f| f.set(false));
        assert_eq!(CompactStr::from_bytes(&pattern(100)).tag(), tag::HEAP);
    }

    fn check(c: &CompactStr, want: &[u8]) {
        assert_eq!(c.to_vec(), want);
        assert_eq!(c.len(), want.len());
        assert_eq!(c.is_empty(), want.is_empty());
        let mut buf = [0u8; 20];
        assert_eq!(c.bytes(&mut buf), want);
        let d = c.clone();
        assert_eq!(d.to_vec(), want);
        assert_eq!(&d, c);
        assert_eq!(d.encoding(), c.encoding());
        assert_eq!(d.as_int(), c.as_int());
        assert_eq!(d.heap_size(), c.heap_size());
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 131 + 7) as u8).collect()
    }

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<CompactStr>(), 8);
        assert_eq!(std::mem::size_of::<Option<CompactStr>>(), 8);
    }

    #[test]
    fn lengths_roundtrip() {
        let mut lens: Vec<usize> = (0..=80).collect();
        for b in [
            INLINE_CAP,
            44,
            45,
            255,
            256,
            4096,
            HEAP_MAX_LEN - 1,
            HEAP_MAX_LEN,
            HEAP_MAX_LEN + 1,
            HEAP_MAX_LEN + 2,
            u16::MAX as usize,
            70_000,
        ] {
            lens.extend([b.saturating_sub(1), b, b + 1]);
        }
        for len in lens {
            let v = pattern(len);
            for c in [CompactStr::from_bytes(&v), CompactStr::from_value_raw(&v)] {
                check(&c, &v);
                assert_eq!(c.raw_bytes(), Some(&v[..]));
                assert_eq!(c.as_int(), None);
            }
            let c = CompactStr::from_bytes(&v);
            let want = if len <= 44 {
                StrEncoding::Embstr
            } else {
                StrEncoding::Raw
            };
            assert_eq!(c.encoding(), want, "len {len}");
            assert_eq!(CompactStr::from_value_raw(&v).encoding(), StrEncoding::Raw);
            let heap = match len {
                0..=INLINE_CAP => 0,
                _ if len <= HEAP_MAX_LEN => len,
                _ => HDR + len,
            };
            assert_eq!(c.heap_size(), heap);
            assert_eq!(CompactStr::from_value_raw(&v).heap_size(), heap);
        }
    }

    #[test]
    fn int_boundaries() {
        let mut vals = vec![
            0,
            1,
            -1,
            9,
            10,
            -10,
            i64::MIN,
            i64::MIN + 1,
            i64::MAX,
            i64::MAX - 1,
            i32::MIN as i64,
            i32::MAX as i64,
        ];
        for e in [IMM_MIN, IMM_MAX] {
            vals.extend([e - 1, e, e + 1]);
        }
        for p in 0..63 {
            vals.extend([1i64 << p, -(1i64 << p), (1i64 << p) - 1, -(1i64 << p) + 1]);
        }
        for v in vals {
            let text = v.to_string();
            for c in [
                CompactStr::from_int(v),
                CompactStr::from_value(text.as_bytes()),
            ] {
                assert_eq!(c.as_int(), Some(v), "{v}");
                assert_eq!(c.raw_bytes(), None);
                assert_eq!(c.encoding(), StrEncoding::Int);
                check(&c, text.as_bytes());
                let boxed = !(IMM_MIN..=IMM_MAX).contains(&v);
                assert_eq!(c.heap_size(), if boxed { HDR + 8 } else { 0 }, "{v}");
            }
            // Equal bytes compare equal whatever the representation.
            assert_eq!(
                CompactStr::from_int(v),
                CompactStr::from_bytes(text.as_bytes())
            );
        }
        assert_eq!(CompactStr::from_value(b"012").as_int(), None);
        assert_eq!(CompactStr::from_value(b"+1").as_int(), None);
        assert_eq!(CompactStr::from_value(b"-0").as_int(), None);
        assert_eq!(CompactStr::from_value(b" 1").as_int(), None);
        assert_eq!(
            CompactStr::from_value(b"9223372036854775808").as_int(),
            None
        );
        assert_eq!(
            CompactStr::from_value(b"-9223372036854775809").as_int(),
            None
        );
        assert_eq!(
            CompactStr::from_value(b"-9223372036854775808").as_int(),
            Some(i64::MIN)
        );
    }

    #[test]
    fn raw_flag() {
        for v in [
            &b""[..],
            b"ab",
            b"1234567",
            b"12345678",
            b"12",
            &[b'x'; 100][..],
        ] {
            let c = CompactStr::from_value_raw(v);
            assert_eq!(c.encoding(), StrEncoding::Raw);
            assert_eq!(c.as_int(), None, "raw values are never int-encoded");
            assert_eq!(c.clone().encoding(), StrEncoding::Raw);
            assert_eq!(c, CompactStr::from_bytes(v));
        }
        assert_eq!(
            CompactStr::from_value(b"hello world").encoding(),
            StrEncoding::Embstr
        );
        assert_eq!(
            CompactStr::from_value(b"hi").encoding(),
            StrEncoding::Embstr
        );
        assert_eq!(CompactStr::empty().encoding(), StrEncoding::Embstr);
        assert_eq!(CompactStr::default().len(), 0);
    }

    #[test]
    fn equality() {
        let a = CompactStr::from_bytes(b"hello");
        assert_eq!(a, CompactStr::from_value(b"hello"));
        assert_ne!(a, CompactStr::from_bytes(b"hellp"));
        assert_ne!(a, CompactStr::from_bytes(b"hell"));
        assert_ne!(CompactStr::from_int(12), CompactStr::from_int(13));
        let long = pattern(1000);
        assert_eq!(
            CompactStr::from_bytes(&long),
            CompactStr::from_value_raw(&long)
        );
        let mut other = long.clone();
        other[999] ^= 1;
        assert_ne!(
            CompactStr::from_bytes(&long),
            CompactStr::from_bytes(&other)
        );
        assert_eq!(format!("{:?}", CompactStr::from_int(-5)), "\"-5\"");
    }

    /// Many clones and drops of every representation: heap blocks are copied, never shared, and
    /// each is freed exactly once (checked by the allocator in debug builds and by Miri).
    #[test]
    fn clones_and_drops() {
        let big = pattern(70_000);
        let mid = pattern(300);
        let reps = [
            CompactStr::from_bytes(b"abc"),
            CompactStr::from_value_raw(b"abc"),
            CompactStr::from_int(42),
            CompactStr::from_int(i64::MIN),
            CompactStr::from_bytes(&mid),
            CompactStr::from_value_raw(&mid),
            CompactStr::from_bytes(&big),
        ];
        let mut all = Vec::new();
        for _ in 0..if cfg!(miri) { 3 } else { 200 } {
            for r in &reps {
                all.push(r.clone());
            }
        }
        for (i, c) in all.iter().enumerate() {
            assert_eq!(c, &reps[i % reps.len()]);
        }
        // Overwrite in place (drop of the old value) like SET on an existing key.
        for c in all.iter_mut() {
            *c = CompactStr::from_int(7);
        }
        assert!(all.iter().all(|c| c.as_int() == Some(7)));
    }

    #[test]
    fn make_raw_mut_grows_in_place_and_pads() {
        for start in [&b""[..], b"12", b"abc", b"0123456789", &[7u8; 40][..]] {
            let mut s = CompactStr::from_value(start);
            for step in [0usize, 3, 8, 20, 100, 5000, 40_000, 40_001] {
                let want = step.max(start.len());
                let before = s.to_vec();
                let b = s.make_raw_mut(step);
                assert_eq!(b.len(), want.max(before.len()));
                assert_eq!(&b[..before.len()], &before[..]);
                assert!(b[before.len()..].iter().all(|&c| c == 0));
                if !b.is_empty() {
                    b[0] = b'x';
                }
                assert_eq!(
                    s.to_vec().first().copied(),
                    if want.max(before.len()) > 0 {
                        Some(b'x')
                    } else {
                        None
                    }
                );
                if !s.is_empty() {
                    assert_eq!(s.encoding(), StrEncoding::Raw);
                }
            }
        }
        let mut a = CompactStr::from_value(b"hello");
        for i in 0..2000 {
            let len = a.len();
            a.make_raw_mut(len + 3)[len..].copy_from_slice(format!("{:03}", i % 1000).as_bytes());
        }
        assert_eq!(a.len(), 5 + 3 * 2000);
        assert!(a.to_vec().starts_with(b"hello000001002"));
    }

    #[test]
    fn fmt_extremes() {
        let mut b = [0u8; 20];
        assert_eq!(fmt_i64(i64::MIN, &mut b), b"-9223372036854775808");
        assert_eq!(fmt_i64(0, &mut b), b"0");
        assert_eq!(fmt_i64(i64::MAX, &mut b), b"9223372036854775807");
    }

    #[cfg(not(miri))]
    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn bytes_roundtrip(v in proptest::collection::vec(any::<u8>(), 0..300)) {
                let c = CompactStr::from_bytes(&v);
                prop_assert_eq!(c.raw_bytes(), Some(&v[..]));
                prop_assert_eq!(c.len(), v.len());
                prop_assert_eq!(c.clone().to_vec(), v.clone());
                let r = CompactStr::from_value_raw(&v);
                prop_assert_eq!(r.to_vec(), v.clone());
                prop_assert_eq!(r.encoding(), StrEncoding::Raw);
                let val = CompactStr::from_value(&v);
                prop_assert_eq!(val.to_vec(), v.clone());
                prop_assert_eq!(val.len(), v.len());
                prop_assert_eq!(val.as_int().is_some(), parse_strict_i64(&v).is_some());
            }

            #[test]
            fn int_roundtrip(x in any::<i64>(), shift in 0u32..64) {
                let x = x >> shift;
                let c = CompactStr::from_int(x);
                prop_assert_eq!(c.as_int(), Some(x));
                prop_assert_eq!(c.to_vec(), x.to_string().into_bytes());
                prop_assert_eq!(CompactStr::from_value(x.to_string().as_bytes()).as_int(), Some(x));
                prop_assert_eq!(c.clone(), c);
            }

            #[test]
            fn numeric_strings(s in "-?[0-9]{0,21}") {
                let c = CompactStr::from_value(s.as_bytes());
                prop_assert_eq!(c.to_vec(), s.as_bytes().to_vec());
                prop_assert_eq!(c.as_int(), parse_strict_i64(s.as_bytes()));
            }
        }
    }
}
