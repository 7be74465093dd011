//! LZF compression compatible with liblzf as Redis uses it
//! (`lzf_compress` / `lzf_decompress`, RDB string encoding `RDB_ENC_LZF`).
//!
//! Format (liblzf `lzf_d.c`): a sequence of chunks, each starting with a
//! control byte `c`:
//! - `c < 32`: a literal run of `c + 1` bytes follows.
//! - otherwise a back-reference: `len = c >> 5` (if 7, one more byte is added
//!   to it), then one byte `lo`; it copies `len + 2` bytes starting
//!   `((c & 0x1f) << 8 | lo) + 1` bytes back in the output (copies may
//!   overlap the bytes they produce).
//!
//! The compressor is our own greedy hash-chain-free matcher; its output is not
//! byte-identical to liblzf's (nothing requires that: Redis only ever
//! decompresses), but any liblzf decoder reads it.

use std::fmt;

/// Longest literal run one control byte can describe.
const MAX_LIT: usize = 32;
/// Farthest back-reference distance (13 bits of offset, plus one).
const MAX_OFF: usize = 1 << 13;
/// Longest back-reference: 2 + 7 + 255.
const MAX_REF: usize = 264;
/// No LZF stream expands more than this per input byte (a 3-byte
/// back-reference yields at most 264 bytes), which bounds allocations.
pub const MAX_EXPANSION: usize = 88;

/// Redis only tries LZF for strings longer than this (`rdbSaveRawString`:
/// `server.rdb_compression && len > 20`).
pub const MIN_COMPRESS_INPUT: usize = 21;

/// Whether Redis would attempt LZF for a string of `len` bytes when
/// `rdbcompression` is on. The attempt may still fail (see [`compress`]).
pub fn worth_trying(len: usize) -> bool {
    len >= MIN_COMPRESS_INPUT
}

/// Largest output a stream of `input_len` bytes can decompress to.
pub fn max_decompressed_len(input_len: usize) -> usize {
    input_len.saturating_mul(MAX_EXPANSION)
}

/// Why an LZF stream was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LzfError {
    /// The stream ends in the middle of a chunk.
    Truncated,
    /// The stream produces more bytes than declared.
    OutputOverflow,
    /// A back-reference points before the start of the output.
    BadBackReference,
    /// The stream ended having produced fewer bytes than declared.
    LengthMismatch { expected: usize, actual: usize },
    /// The declared length cannot come from a stream this short.
    ImpossibleLength,
}

impl fmt::Display for LzfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LzfError::Truncated => f.write_str("truncated LZF stream"),
            LzfError::OutputOverflow => f.write_str("LZF output exceeds declared length"),
            LzfError::BadBackReference => f.write_str("LZF back-reference out of range"),
            LzfError::LengthMismatch { expected, actual } => {
                write!(f, "LZF output is {actual} bytes, expected {expected}")
            }
            LzfError::ImpossibleLength => f.write_str("LZF declared length impossible"),
        }
    }
}

impl std::error::Error for LzfError {}

/// Compresses `input` the way `rdbSaveLzfStringObject` wants it: returns
/// `None` unless the result saves at least 4 bytes (Redis calls
/// `lzf_compress(s, len, out, len - 4)`, which fails when the output does not
/// fit in `len - 4` bytes, and then stores the string raw). Inputs of 4 bytes
/// or fewer never compress. The caller applies [`worth_trying`] first, as
/// Redis does.
pub fn compress(input: &[u8]) -> Option<Vec<u8>> {
    if input.len() <= 4 {
        return None;
    }
    compress_with_budget(input, input.len() - 4)
}

/// Compresses `input`, giving up (None) as soon as the output would exceed
/// `budget` bytes.
pub fn compress_with_budget(input: &[u8], budget: usize) -> Option<Vec<u8>> {
    let n = input.len();
    let mut out = Vec::with_capacity(budget.min(n) + 1);
    if n == 0 {
        return Some(out);
    }
    // Table of last positions (plus one; 0 = empty) by 3-byte hash, sized to
    // the input so that short strings stay cheap.
    let bits = (usize::BITS - n.leading_zeros()).clamp(8, 14);
    let mask = (1usize << bits) - 1;
    let mut table = vec![0u32; 1 << bits];
    let hash = |p: usize| -> usize {
        let v = (input[p] as u32) << 16 | (input[p + 1] as u32) << 8 | input[p + 2] as u32;
        (v.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize & mask
    };
    let mut lit_start = 0;
    let mut i = 0;
    while i + 2 < n {
        let h = hash(i);
        let cand = table[h] as usize;
        table[h] = (i + 1) as u32;
        if cand != 0 {
            let r = cand - 1;
            let back = i - r;
            if back <= MAX_OFF && input[r..r + 3] == input[i..i + 3] {
                let max_len = MAX_REF.min(n - i);
                let mut len = 3;
                while len < max_len && input[r + len] == input[i + len] {
                    len += 1;
                }
                push_literals(&mut out, &input[lit_start..i]);
                push_backref(&mut out, len, back);
                if out.len() > budget {
                    return None;
                }
                // Index a few positions inside the match so later data can
                // refer to them (cheap, and helps repetitive inputs).
                let end = i + len;
                let mut j = i + 1;
                while j + 2 < n && j < end {
                    table[hash(j)] = (j + 1) as u32;
                    j += 1;
                }
                i = end;
                lit_start = i;
                continue;
            }
        }
        i += 1;
    }
    push_literals(&mut out, &input[lit_start..]);
    if out.len() > budget {
        return None;
    }
    Some(out)
}

fn push_literals(out: &mut Vec<u8>, lits: &[u8]) {
    for run in lits.chunks(MAX_LIT) {
        out.push((run.len() - 1) as u8);
        out.extend_from_slice(run);
    }
}

fn push_backref(out: &mut Vec<u8>, len: usize, back: usize) {
    debug_assert!((3..=MAX_REF).contains(&len) && (1..=MAX_OFF).contains(&back));
    let l = len - 2;
    let off = back - 1;
    let hi = (off >> 8) as u8;
    if l < 7 {
        out.push(((l as u8) << 5) | hi);
    } else {
        out.push((7 << 5) | hi);
        out.push((l - 7) as u8);
    }
    out.push(off as u8);
}

/// Decompresses an LZF stream that must produce exactly `out_len` bytes, as
/// `rdbLoadLzfStringObject` requires. Every chunk is bounds-checked; the
/// allocation is `out_len`, which is first checked against what `input` could
/// possibly produce ([`max_decompressed_len`]), so a forged length cannot
/// allocate more than a fixed multiple of the input.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    if out_len > max_decompressed_len(input.len()) {
        return Err(LzfError::ImpossibleLength);
    }
    let mut out = Vec::with_capacity(out_len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if input.len() - ip < run {
                return Err(LzfError::Truncated);
            }
            if out_len - out.len() < run {
                return Err(LzfError::OutputOverflow);
            }
            out.extend_from_slice(&input[ip..ip + run]);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                let Some(&extra) = input.get(ip) else {
                    return Err(LzfError::Truncated);
                };
                len += extra as usize;
                ip += 1;
            }
            let Some(&lo) = input.get(ip) else {
                return Err(LzfError::Truncated);
            };
            ip += 1;
            let len = len + 2;
            let back = ((ctrl & 0x1f) << 8 | lo as usize) + 1;
            if out_len - out.len() < len {
                return Err(LzfError::OutputOverflow);
            }
            if back > out.len() {
                return Err(LzfError::BadBackReference);
            }
            let start = out.len() - back;
            if back >= len {
                out.extend_from_within(start..start + len);
            } else {
                // Overlapping copy: each byte may be one this copy produced.
                for k in 0..len {
                    let b = out[start + k];
                    out.push(b);
                }
            }
        }
    }
    if out.len() != out_len {
        return Err(LzfError::LengthMismatch {
            expected: out_len,
            actual: out.len(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hand_built_stream() {
        // Literal run "abc" (ctrl 2), then a long back-reference
        // (ctrl 0xE0: len field 7, offset high 0; extra len 0 → 9 bytes;
        // offset low 2 → 3 bytes back).
        let stream = [0x02, b'a', b'b', b'c', 0xE0, 0x00, 0x02];
        assert_eq!(decompress(&stream, 12).unwrap(), b"abcabcabcabc");
        // Short back-reference: ctrl 0x20 = len 1 (+2 = 3 bytes), 1 back.
        let stream = [0x00, b'x', 0x20, 0x00];
        assert_eq!(decompress(&stream, 4).unwrap(), b"xxxx");
        // Our compressor finds exactly that first encoding.
        assert_eq!(
            compress_with_budget(b"abcabcabcabc", 100).unwrap(),
            [0x02, b'a', b'b', b'c', 0xE0, 0x00, 0x02]
        );
    }

    #[test]
    fn rejects_bad_streams() {
        assert_eq!(decompress(&[0x02, b'a'], 3), Err(LzfError::Truncated));
        assert_eq!(decompress(&[0xE0], 9), Err(LzfError::Truncated));
        assert_eq!(decompress(&[0x20], 3), Err(LzfError::Truncated));
        assert_eq!(
            decompress(&[0x00, b'a', 0x20, 0x01], 4),
            Err(LzfError::BadBackReference)
        );
        assert_eq!(
            decompress(&[0x01, b'a', b'b'], 1),
            Err(LzfError::OutputOverflow)
        );
        assert_eq!(
            decompress(&[0x01, b'a', b'b'], 3),
            Err(LzfError::LengthMismatch {
                expected: 3,
                actual: 2
            })
        );
        assert_eq!(
            decompress(&[0x00, b'a'], 1 << 40),
            Err(LzfError::ImpossibleLength)
        );
        assert_eq!(decompress(&[], 0).unwrap(), b"");
    }

    #[test]
    fn compression_rule() {
        assert!(!worth_trying(20));
        assert!(worth_trying(21));
        assert_eq!(compress(b"abcd"), None);
        // Incompressible data never "compresses".
        let noise: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        assert_eq!(compress(&noise), None);
        let rep = vec![b'a'; 1000];
        let c = compress(&rep).unwrap();
        assert!(c.len() <= rep.len() - 4);
        assert_eq!(decompress(&c, rep.len()).unwrap(), rep);
    }

    proptest! {
        #[test]
        fn roundtrip_random(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let c = compress_with_budget(&data, usize::MAX).unwrap();
            prop_assert_eq!(decompress(&c, data.len()).unwrap(), data);
        }

        #[test]
        fn roundtrip_repetitive(
            alphabet in 1u8..4,
            pattern in proptest::collection::vec(any::<u8>(), 1..16),
            reps in 1usize..800,
            noise in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..8),
        ) {
            let mut data: Vec<u8> = pattern.iter().map(|b| b % (alphabet + 1)).cycle().take(pattern.len() * reps).collect();
            for (at, b) in noise {
                if !data.is_empty() {
                    let i = at as usize % data.len();
                    data[i] = b;
                }
            }
            let c = compress_with_budget(&data, usize::MAX).unwrap();
            prop_assert_eq!(&decompress(&c, data.len()).unwrap(), &data);
            if let Some(c) = compress(&data) {
                prop_assert!(c.len() + 4 <= data.len());
                prop_assert_eq!(decompress(&c, data.len()).unwrap(), data);
            }
        }

        #[test]
        fn decompress_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), len in 0usize..20000) {
            let _ = decompress(&data, len);
        }
    }
}
