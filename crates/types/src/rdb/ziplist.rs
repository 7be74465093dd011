//! Ziplists (`ziplist.c`), decode only: the packed list of Redis < 7.0,
//! still found in older RDB files (`RDB_TYPE_*_ZIPLIST`, quicklist v1
//! nodes), which Redis 7.0 loads and converts to listpacks.
//!
//! Layout: total bytes (u32 LE), offset of the last entry (u32 LE), entry
//! count (u16 LE; 65535 = "count it"), entries, `0xFF`. An entry is the
//! previous entry's size (1 byte if < 254, else `0xFE` + u32 LE), an
//! encoding, and data:
//! - `00pppppp`: string, 6-bit length; `01pppppp qqqqqqqq`: 14-bit length
//!   (big-endian); `10______` + u32 BE: 32-bit length.
//! - `0xC0` i16, `0xD0` i32, `0xE0` i64, `0xF0` i24, `0xFE` i8 (all LE);
//!   `0xF1..=0xFD`: immediate 0..=12.

use super::listpack::PackedEntry;
use super::wire::BlobError;

const HEADER_SIZE: usize = 10;
const END: u8 = 0xFF;

/// Reads an integer entry's data bytes.
type IntReader = fn(&[u8]) -> i64;

/// Decodes and validates a ziplist as `ziplistValidateIntegrity(deep)`:
/// size matches the header, tail offset in range and pointing at the last
/// entry, every entry's prevlen equals the previous entry's size (0 for the
/// first), encodings known and in bounds, terminator last, header count
/// exact unless 65535.
pub fn decode(buf: &[u8]) -> Result<Vec<PackedEntry<'_>>, BlobError> {
    if buf.len() < HEADER_SIZE + 1 {
        return Err(BlobError::new(0, "shorter than header"));
    }
    let total = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if total != buf.len() {
        return Err(BlobError::new(0, "header size mismatch"));
    }
    let last = buf.len() - 1;
    if buf[last] != END {
        return Err(BlobError::new(last, "missing terminator"));
    }
    let tail = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
    if tail > last {
        return Err(BlobError::new(4, "tail offset out of range"));
    }
    let header_count = u16::from_le_bytes([buf[8], buf[9]]);

    let mut out = Vec::new();
    let mut p = HEADER_SIZE;
    let mut prev_size = 0usize;
    let mut prev_start = None;
    while buf[p] != END {
        let start = p;
        let overrun = || BlobError::new(start, "entry overruns ziplist");
        // Previous entry length.
        let prevlen = if buf[p] < 0xFE {
            p += 1;
            buf[start] as usize
        } else {
            if p + 5 > last {
                return Err(overrun());
            }
            p += 5;
            u32::from_le_bytes([
                buf[start + 1],
                buf[start + 2],
                buf[start + 3],
                buf[start + 4],
            ]) as usize
        };
        if prevlen != prev_size {
            return Err(BlobError::new(start, "bad prevlen"));
        }
        if p >= last {
            return Err(overrun());
        }
        let enc = buf[p];
        let header = |n: usize| -> Result<&[u8], BlobError> {
            if p + n > last {
                Err(overrun())
            } else {
                Ok(&buf[p..p + n])
            }
        };
        let (hdr, data_len, int): (usize, usize, Option<IntReader>) = match enc >> 6 {
            0 => (1, (enc & 0x3f) as usize, None),
            1 => {
                let h = header(2)?;
                (2, ((h[0] & 0x3f) as usize) << 8 | h[1] as usize, None)
            }
            2 => {
                let h = header(5)?;
                (
                    5,
                    u32::from_be_bytes([h[1], h[2], h[3], h[4]]) as usize,
                    None,
                )
            }
            _ => match enc {
                0xC0 => (
                    1,
                    2,
                    Some(|d: &[u8]| i16::from_le_bytes([d[0], d[1]]) as i64),
                ),
                0xD0 => (
                    1,
                    4,
                    Some(|d: &[u8]| i32::from_le_bytes([d[0], d[1], d[2], d[3]]) as i64),
                ),
                0xE0 => (
                    1,
                    8,
                    Some(|d: &[u8]| {
                        i64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
                    }),
                ),
                0xF0 => (
                    1,
                    3,
                    Some(|d: &[u8]| (i32::from_le_bytes([0, d[0], d[1], d[2]]) >> 8) as i64),
                ),
                0xFE => (1, 1, Some(|d: &[u8]| d[0] as i8 as i64)),
                0xF1..=0xFD => (1, 0, None),
                _ => return Err(BlobError::new(p, "bad entry encoding")),
            },
        };
        let data_start = p + hdr;
        let end = data_start
            .checked_add(data_len)
            .filter(|&e| e <= last)
            .ok_or_else(overrun)?;
        let data = &buf[data_start..end];
        let entry = if enc >> 6 != 3 {
            PackedEntry::Str(data)
        } else if let Some(f) = int {
            PackedEntry::Int(f(data))
        } else {
            PackedEntry::Int((enc & 0x0f) as i64 - 1)
        };
        out.push(entry);
        prev_size = end - start;
        prev_start = Some(start);
        p = end;
    }
    if p != last {
        return Err(BlobError::new(p, "terminator before end"));
    }
    if let Some(s) = prev_start {
        if s != tail {
            return Err(BlobError::new(4, "tail offset mismatch"));
        }
    }
    if header_count != u16::MAX && header_count as usize != out.len() {
        return Err(BlobError::new(8, "header count mismatch"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Test-only encoder following `ziplist.c` (`zipStoreEntryEncoding`,
    /// `zipTryEncoding`), to build inputs.
    fn build(items: &[PackedEntry<'_>]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut tail = HEADER_SIZE;
        for e in items {
            let start = body.len();
            tail = HEADER_SIZE + start;
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(0xFE);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            match *e {
                PackedEntry::Str(s) => {
                    if s.len() < 64 {
                        body.push(s.len() as u8);
                    } else if s.len() < 16384 {
                        body.push(0x40 | (s.len() >> 8) as u8);
                        body.push(s.len() as u8);
                    } else {
                        body.push(0x80);
                        body.extend_from_slice(&(s.len() as u32).to_be_bytes());
                    }
                    body.extend_from_slice(s);
                }
                PackedEntry::Int(v) => {
                    if (0..=12).contains(&v) {
                        body.push(0xF1 + v as u8);
                    } else if let Ok(b) = i8::try_from(v) {
                        body.push(0xFE);
                        body.push(b as u8);
                    } else if let Ok(h) = i16::try_from(v) {
                        body.push(0xC0);
                        body.extend_from_slice(&h.to_le_bytes());
                    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
                        body.push(0xF0);
                        body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
                    } else if let Ok(w) = i32::try_from(v) {
                        body.push(0xD0);
                        body.extend_from_slice(&w.to_le_bytes());
                    } else {
                        body.push(0xE0);
                        body.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
            prev = body.len() - start;
        }
        let total = HEADER_SIZE + body.len() + 1;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(&(tail as u32).to_le_bytes());
        out.extend_from_slice(&(items.len().min(65535) as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(END);
        out
    }

    #[test]
    fn known_bytes() {
        // ["hello", 1024, 5]: hand-encoded per ziplist.c.
        let zl: &[u8] = &[
            24, 0, 0, 0, // zlbytes
            21, 0, 0, 0, // zltail
            3, 0, // zllen
            0x00, 0x05, b'h', b'e', b'l', b'l', b'o', // prevlen 0, 6-bit str
            0x07, 0xC0, 0x00, 0x04, // prevlen 7, int16 1024
            0x04, 0xF6, // prevlen 4, immediate 5
            0xFF,
        ];
        assert_eq!(
            decode(zl).unwrap(),
            vec![
                PackedEntry::Str(b"hello"),
                PackedEntry::Int(1024),
                PackedEntry::Int(5)
            ]
        );
        assert_eq!(build(&decode(zl).unwrap()), zl);
        let empty = [11, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0xFF];
        assert_eq!(decode(&empty).unwrap(), vec![]);
    }

    #[test]
    fn big_prevlen_and_long_strings() {
        let s300 = vec![b'q'; 300];
        let s20k = vec![b'r'; 20000];
        let items = [
            PackedEntry::Str(&s300),
            PackedEntry::Int(-1),
            PackedEntry::Str(&s20k),
            PackedEntry::Int(i64::MIN),
        ];
        let zl = build(&items);
        assert_eq!(decode(&zl).unwrap(), items);
    }

    #[test]
    fn rejects_corruption() {
        let good = build(&[
            PackedEntry::Str(b"ab"),
            PackedEntry::Int(300),
            PackedEntry::Str(b"c"),
        ]);
        decode(&good).unwrap();
        let mut bad = good.clone();
        bad[10] = 1;
        assert_eq!(decode(&bad).unwrap_err().reason, "bad prevlen");
        let mut bad = good.clone();
        bad[4] = 10;
        assert_eq!(decode(&bad).unwrap_err().reason, "tail offset mismatch");
        let mut bad = good.clone();
        bad[8] = 5;
        assert_eq!(decode(&bad).unwrap_err().reason, "header count mismatch");
        let mut bad = good.clone();
        bad[8] = 0xFF;
        bad[9] = 0xFF;
        assert_eq!(decode(&bad).unwrap().len(), 3);
        let mut bad = good.clone();
        bad[11] = 0xC1;
        assert_eq!(decode(&bad).unwrap_err().reason, "bad entry encoding");
        let mut bad = good.clone();
        bad[11] = 0x3F;
        assert!(decode(&bad).is_err());
        let mut bad = good.clone();
        bad[1] = 1;
        assert_eq!(decode(&bad).unwrap_err().reason, "header size mismatch");
        let mut bad = good.clone();
        bad[4] = 0xFF;
        bad[5] = 0xFF;
        assert_eq!(decode(&bad).unwrap_err().reason, "tail offset out of range");
    }

    fn entry() -> impl Strategy<Value = (bool, i64, Vec<u8>)> {
        (
            any::<bool>(),
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn roundtrip(raw in proptest::collection::vec(entry(), 0..12), small in -20i64..20) {
            let items: Vec<PackedEntry<'_>> = raw
                .iter()
                .map(|(is_int, v, s)| if *is_int { PackedEntry::Int(if v % 2 == 0 { small } else { *v }) } else { PackedEntry::Str(s) })
                .collect();
            let zl = build(&items);
            prop_assert_eq!(decode(&zl).unwrap(), items);
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..64), fix in any::<bool>()) {
            let mut data = data;
            if fix && data.len() >= 11 {
                let n = data.len() as u32;
                data[..4].copy_from_slice(&n.to_le_bytes());
                let last = data.len() - 1;
                data[last] = 0xFF;
            }
            let _ = decode(&data);
        }
    }
}
