//! Listpacks (Redis 7.0 `listpack.c`): the compact list used for small
//! hashes, sets, sorted sets, quicklist nodes and stream nodes in RDB.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE; 65535 = "count
//! it"), entries, `0xFF`. Each entry is an encoding byte (plus data) followed
//! by a back-length that encodes the size of encoding + data, written so that
//! it can be read right to left:
//!
//! | first byte  | meaning                                 |
//! |-------------|-----------------------------------------|
//! | `0xxxxxxx`  | 7-bit unsigned int                      |
//! | `10xxxxxx`  | string, 6-bit length                    |
//! | `110xxxxx`  | 13-bit signed int (+1 byte)             |
//! | `1110xxxx`  | string, 12-bit length (+1 byte)         |
//! | `0xF0`      | string, 32-bit LE length                |
//! | `0xF1..F4`  | 16/24/32/64-bit LE signed int           |
//! | `0xFF`      | end                                     |

use std::borrow::Cow;

use super::wire::{format_i64, parse_canonical_i64, BlobError};
use crate::lpsize::HEADER_SIZE;

/// Header count meaning "unknown, walk the entries".
pub const COUNT_UNKNOWN: u16 = u16::MAX;
const EOF: u8 = 0xFF;

/// One element of a listpack or ziplist: packed formats store canonical
/// integer strings as integers, so an element is one or the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PackedEntry<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl<'a> PackedEntry<'a> {
    /// The element as bytes (integers in decimal), as Redis returns it.
    pub fn to_bytes(&self) -> Cow<'a, [u8]> {
        match *self {
            PackedEntry::Str(s) => Cow::Borrowed(s),
            PackedEntry::Int(v) => {
                let mut buf = [0u8; 20];
                Cow::Owned(format_i64(v, &mut buf).to_vec())
            }
        }
    }

    /// The element as an integer, if it is one (or a canonical integer
    /// string, which a packed encoder would have stored as one).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            PackedEntry::Int(v) => Some(v),
            PackedEntry::Str(s) => parse_canonical_i64(s),
        }
    }
}

/// Builds a listpack entry by entry, choosing encodings as Redis does.
#[derive(Debug, Clone)]
pub struct LpBuilder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for LpBuilder {
    fn default() -> Self {
        LpBuilder::new()
    }
}

impl LpBuilder {
    pub fn new() -> LpBuilder {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; HEADER_SIZE]);
        LpBuilder { buf, count: 0 }
    }

    /// Appends a string element. Canonical decimal integers are stored as
    /// integers (`lpEncodeGetType` via `lpStringToInt64`), so `"12"` and the
    /// integer 12 produce identical bytes.
    pub fn push_bytes(&mut self, s: &[u8]) {
        match parse_canonical_i64(s) {
            Some(v) => self.push_int(v),
            None => self.push_str_raw(s),
        }
    }

    /// Appends an integer element in the smallest integer encoding.
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u16) & 0x1fff;
            b.push(0xC0 | (u >> 8) as u8);
            b.push(u as u8);
        } else if let Ok(h) = i16::try_from(v) {
            b.push(0xF1);
            b.extend_from_slice(&h.to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            b.push(0xF2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(w) = i32::try_from(v) {
            b.push(0xF3);
            b.extend_from_slice(&w.to_le_bytes());
        } else {
            b.push(0xF4);
            b.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    /// Appends an element (strings go through [`LpBuilder::push_bytes`]).
    pub fn push(&mut self, e: PackedEntry<'_>) {
        match e {
            PackedEntry::Int(v) => self.push_int(v),
            PackedEntry::Str(s) => self.push_bytes(s),
        }
    }

    /// Appends `s` with a string encoding even if it looks like an integer.
    /// Redis never does this; it is here for tests and odd callers.
    ///
    /// # Panics
    /// If `s` is 4 GiB or more (a listpack cannot hold it).
    pub fn push_str_raw(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let len = s.len();
        if len < 64 {
            self.buf.push(0x80 | len as u8);
        } else if len < 4096 {
            self.buf.push(0xE0 | (len >> 8) as u8);
            self.buf.push(len as u8);
        } else {
            let l = u32::try_from(len).expect("listpack string over 4 GiB");
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&l.to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.finish_entry(start);
    }

    fn finish_entry(&mut self, start: usize) {
        let mut bl = [0u8; 5];
        let n = encode_backlen(self.buf.len() - start, &mut bl);
        self.buf.extend_from_slice(&bl[..n]);
        self.count += 1;
    }

    /// Elements so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size the finished listpack will have, for callers enforcing limits.
    pub fn bytes_len(&self) -> usize {
        self.buf.len() + 1
    }

    /// The finished listpack bytes.
    ///
    /// # Panics
    /// If the listpack would exceed `u32::MAX` bytes (Redis itself caps
    /// listpacks at 1 GiB; callers split long before).
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = u32::try_from(self.buf.len()).expect("listpack over 4 GiB");
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(COUNT_UNKNOWN as usize) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Encodes `items` into a listpack.
pub fn encode<'a>(items: impl IntoIterator<Item = PackedEntry<'a>>) -> Vec<u8> {
    let mut b = LpBuilder::new();
    for e in items {
        b.push(e);
    }
    b.finish()
}

/// Back-length of an entry of `l` bytes (`lpEncodeBacklen`), into `buf`;
/// returns its size (1..=5). Note Redis's thresholds: 127, then `< 16383`,
/// `< 2097151`, `< 268435455`.
fn encode_backlen(l: usize, buf: &mut [u8; 5]) -> usize {
    let l = l as u64;
    let n = if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2097151 {
        3
    } else if l < 268435455 {
        4
    } else {
        5
    };
    // Most significant group first; all but the first carry the 0x80 flag.
    for (i, slot) in buf.iter_mut().take(n).enumerate() {
        let shift = 7 * (n - 1 - i);
        let group = ((l >> shift) & 127) as u8;
        *slot = if i == 0 {
            (l >> shift) as u8
        } else {
            group | 128
        };
    }
    n
}

/// Decodes and fully validates a listpack, as `lpValidateIntegrity` with
/// `deep = 1`: header size equals the blob size, every entry's encoding is
/// known and in bounds, every back-length matches its entry, the terminator
/// is the last byte, and the header count (unless 65535) is exact.
pub fn decode(buf: &[u8]) -> Result<Vec<PackedEntry<'_>>, BlobError> {
    let mut out = Vec::new();
    for_each(buf, |e| {
        out.push(e);
        Ok(())
    })?;
    Ok(out)
}

/// Validates and walks a listpack without collecting; returns the count.
/// `f` may stop the walk with its own error.
pub fn for_each<'a>(
    buf: &'a [u8],
    mut f: impl FnMut(PackedEntry<'a>) -> Result<(), BlobError>,
) -> Result<usize, BlobError> {
    if buf.len() < HEADER_SIZE + 1 {
        return Err(BlobError::new(0, "shorter than header"));
    }
    let total = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if total != buf.len() {
        return Err(BlobError::new(0, "header size mismatch"));
    }
    let last = buf.len() - 1;
    if buf[last] != EOF {
        return Err(BlobError::new(last, "missing terminator"));
    }
    let header_count = u16::from_le_bytes([buf[4], buf[5]]);
    let mut p = HEADER_SIZE;
    let mut count = 0usize;
    while buf[p] != EOF {
        let (entry, len) = decode_entry(buf, p, last)?;
        let mut bl = [0u8; 5];
        let n = encode_backlen(len, &mut bl);
        let end = p + len + n;
        if end > last {
            return Err(BlobError::new(p, "entry overruns listpack"));
        }
        if buf[p + len..end] != bl[..n] {
            return Err(BlobError::new(p + len, "bad backlen"));
        }
        f(entry)?;
        count += 1;
        p = end;
    }
    if p != last {
        return Err(BlobError::new(p, "terminator before end"));
    }
    if header_count != COUNT_UNKNOWN && header_count as usize != count {
        return Err(BlobError::new(4, "header count mismatch"));
    }
    Ok(count)
}

/// Decodes the entry at `p` (encoding + data, not the back-length),
/// checking that it ends at or before `last`. Returns it and its size.
fn decode_entry(buf: &[u8], p: usize, last: usize) -> Result<(PackedEntry<'_>, usize), BlobError> {
    let b = buf[p];
    // Header bytes needed before the size is known.
    let need = |n: usize| -> Result<&[u8], BlobError> {
        if p + n > last {
            Err(BlobError::new(p, "entry overruns listpack"))
        } else {
            Ok(&buf[p..p + n])
        }
    };
    let string = |hdr: usize, len: usize| -> Result<(PackedEntry<'_>, usize), BlobError> {
        let size = hdr
            .checked_add(len)
            .filter(|&s| s <= last - p)
            .ok_or(BlobError::new(p, "entry overruns listpack"))?;
        Ok((PackedEntry::Str(&buf[p + hdr..p + size]), size))
    };
    if b & 0x80 == 0 {
        return Ok((PackedEntry::Int((b & 0x7f) as i64), 1));
    }
    if b & 0xC0 == 0x80 {
        return string(1, (b & 0x3f) as usize);
    }
    if b & 0xE0 == 0xC0 {
        let h = need(2)?;
        let u = ((h[0] & 0x1f) as i64) << 8 | h[1] as i64;
        let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
        return Ok((PackedEntry::Int(v), 2));
    }
    if b & 0xF0 == 0xE0 {
        let h = need(2)?;
        return string(2, ((h[0] & 0x0f) as usize) << 8 | h[1] as usize);
    }
    match b {
        0xF0 => {
            let h = need(5)?;
            string(5, u32::from_le_bytes([h[1], h[2], h[3], h[4]]) as usize)
        }
        0xF1 => {
            let h = need(3)?;
            Ok((PackedEntry::Int(i16::from_le_bytes([h[1], h[2]]) as i64), 3))
        }
        0xF2 => {
            let h = need(4)?;
            let v = i32::from_le_bytes([0, h[1], h[2], h[3]]) >> 8;
            Ok((PackedEntry::Int(v as i64), 4))
        }
        0xF3 => {
            let h = need(5)?;
            Ok((
                PackedEntry::Int(i32::from_le_bytes([h[1], h[2], h[3], h[4]]) as i64),
                5,
            ))
        }
        0xF4 => {
            let h = need(9)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(&h[1..9]);
            Ok((PackedEntry::Int(i64::from_le_bytes(a)), 9))
        }
        _ => Err(BlobError::new(p, "bad entry encoding")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpsize::element_size;
    use proptest::prelude::*;

    fn lp(items: &[&[u8]]) -> Vec<u8> {
        encode(items.iter().map(|s| PackedEntry::Str(s)))
    }

    #[test]
    fn element_sizes_match_the_builder() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 200];
        let items: [&[u8]; 12] = [
            b"",
            b"0",
            b"127",
            b"128",
            b"-4096",
            b"40000",
            b"-9000000",
            b"3000000000",
            b"12345678901234567890",
            b"007",
            &mid,
            &long,
        ];
        for s in items {
            let mut b = LpBuilder::new();
            b.push_bytes(s);
            assert_eq!(element_size(s), b.bytes_len() - HEADER_SIZE - 1, "{s:?}");
        }
    }

    #[test]
    fn known_bytes() {
        // Derived by hand from listpack.c (lpEncodeGetType/lpEncodeBacklen).
        let got = lp(&[b"a", b"1234", b"-1", b"hello world"]);
        let mut want = vec![29, 0, 0, 0, 4, 0];
        want.extend_from_slice(&[0x81, b'a', 0x02]); // 6-bit str + backlen 2
        want.extend_from_slice(&[0xC4, 0xD2, 0x02]); // 13-bit int 1234
        want.extend_from_slice(&[0xDF, 0xFF, 0x02]); // 13-bit int -1
        want.push(0x8B);
        want.extend_from_slice(b"hello world");
        want.push(0x0C);
        want.push(0xFF);
        assert_eq!(got, want);

        let got = lp(&[
            b"127",
            b"128",
            b"-4096",
            b"4096",
            b"-4097",
            b"8388607",
            b"-8388609",
        ]);
        let mut want = vec![0, 0, 0, 0, 7, 0];
        want.extend_from_slice(&[0x7F, 0x01]);
        want.extend_from_slice(&[0xC0, 0x80, 0x02]);
        want.extend_from_slice(&[0xD0, 0x00, 0x02]);
        want.extend_from_slice(&[0xF1, 0x00, 0x10, 0x03]);
        want.extend_from_slice(&[0xF1, 0xFF, 0xEF, 0x03]);
        want.extend_from_slice(&[0xF2, 0xFF, 0xFF, 0x7F, 0x04]);
        want.extend_from_slice(&[0xF3, 0xFF, 0xFF, 0x7F, 0xFF, 0x05]);
        want.push(0xFF);
        let total = want.len() as u32;
        want[..4].copy_from_slice(&total.to_le_bytes());
        assert_eq!(got, want);

        // A 200-byte string: 12-bit length; entry 202 bytes → 2-byte backlen
        // [202 >> 7, (202 & 127) | 128].
        let s = vec![b'z'; 200];
        let got = lp(&[&s]);
        assert_eq!(&got[6..8], &[0xE0, 200]);
        assert_eq!(&got[208..210], &[0x01, 0xCA]);
        assert_eq!(decode(&got).unwrap(), vec![PackedEntry::Str(&s[..])]);
    }

    #[test]
    fn backlen_thresholds() {
        let mut b = [0u8; 5];
        assert_eq!(encode_backlen(127, &mut b), 1);
        assert_eq!(b[0], 127);
        assert_eq!(encode_backlen(128, &mut b), 2);
        assert_eq!(&b[..2], &[1, 128]);
        assert_eq!(encode_backlen(16382, &mut b), 2);
        assert_eq!(encode_backlen(16383, &mut b), 3);
        assert_eq!(&b[..3], &[0, 127 | 128, 127 | 128]);
        assert_eq!(encode_backlen(2097150, &mut b), 3);
        assert_eq!(encode_backlen(2097151, &mut b), 4);
        assert_eq!(encode_backlen(268435455, &mut b), 5);
        // A 5000-byte string: 32-bit-length encoding (5 + 5000 → 2 bytes).
        let s = vec![7u8; 5000];
        let got = lp(&[&s, b"x"]);
        assert_eq!(&got[6..11], &[0xF0, 0x88, 0x13, 0, 0]);
        assert_eq!(
            decode(&got).unwrap(),
            vec![PackedEntry::Str(&s[..]), PackedEntry::Str(b"x")]
        );
    }

    #[test]
    fn empty_and_count_unknown() {
        let e = encode(std::iter::empty());
        assert_eq!(e, [7, 0, 0, 0, 0, 0, 0xFF]);
        assert_eq!(decode(&e).unwrap(), vec![]);
        let mut big = LpBuilder::new();
        for i in 0..70000 {
            big.push_int(i % 100);
        }
        let big = big.finish();
        assert_eq!(&big[4..6], &[0xFF, 0xFF]);
        assert_eq!(decode(&big).unwrap().len(), 70000);
    }

    #[test]
    fn rejects_corruption() {
        let good = lp(&[b"a", b"1234", b"hello"]);
        decode(&good).unwrap();
        let mut bad = good.clone();
        bad[0] += 1;
        assert_eq!(decode(&bad).unwrap_err().reason, "header size mismatch");
        let mut bad = good.clone();
        bad[4] = 2;
        assert_eq!(decode(&bad).unwrap_err().reason, "header count mismatch");
        let mut bad = good.clone();
        bad[4] = 0xFF;
        bad[5] = 0xFF;
        assert_eq!(decode(&bad).unwrap().len(), 3);
        let mut bad = good.clone();
        bad[8] = 0x03; // backlen of "a"
        assert_eq!(decode(&bad).unwrap_err().reason, "bad backlen");
        let mut bad = good.clone();
        bad[6] = 0xF5;
        assert_eq!(decode(&bad).unwrap_err().reason, "bad entry encoding");
        let mut bad = good.clone();
        bad[6] = 0xBF; // string of 63 bytes: overruns
        assert!(decode(&bad).is_err());
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] = 0;
        assert_eq!(decode(&bad).unwrap_err().reason, "missing terminator");
        let mut bad = good.clone();
        bad[6] = 0xFF; // early terminator
        assert_eq!(decode(&bad).unwrap_err().reason, "terminator before end");
        assert!(decode(&good[..5]).is_err());
    }

    #[test]
    fn entry_helpers() {
        assert_eq!(&*PackedEntry::Int(-5).to_bytes(), b"-5");
        assert_eq!(PackedEntry::Str(b"17").as_i64(), Some(17));
        assert_eq!(PackedEntry::Str(b"017").as_i64(), None);
    }

    fn entry_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string().into_bytes()),
            (-5000i64..5000).prop_map(|v| v.to_string().into_bytes()),
            proptest::collection::vec(any::<u8>(), 0..80),
            proptest::collection::vec(any::<u8>(), 4090..4100),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn roundtrip(items in proptest::collection::vec(entry_strategy(), 0..20)) {
            let buf = lp(&items.iter().map(|v| &v[..]).collect::<Vec<_>>());
            let got = decode(&buf).unwrap();
            prop_assert_eq!(got.len(), items.len());
            for (e, want) in got.iter().zip(&items) {
                prop_assert_eq!(&*e.to_bytes(), &want[..]);
                // Canonical integers must come back as integers.
                prop_assert_eq!(matches!(e, PackedEntry::Int(_)), parse_canonical_i64(want).is_some());
            }
        }

        #[test]
        fn int_roundtrip(v in any::<i64>()) {
            let mut b = LpBuilder::new();
            b.push_int(v);
            b.push_bytes(v.to_string().as_bytes());
            let buf = b.finish();
            prop_assert_eq!(decode(&buf).unwrap(), vec![PackedEntry::Int(v), PackedEntry::Int(v)]);
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..64), fix in any::<bool>()) {
            let mut data = data;
            if fix && data.len() >= 7 {
                let n = data.len() as u32;
                data[..4].copy_from_slice(&n.to_le_bytes());
                let last = data.len() - 1;
                data[last] = 0xFF;
            }
            let _ = decode(&data);
        }
    }
}
