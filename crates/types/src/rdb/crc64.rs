//! Redis's CRC-64 ("Jones" polynomial, reflected in and out, zero initial
//! value, no final xor), as in Redis `crc64.c`.
//!
//! The RDB file trailer and the DUMP payload footer both carry this checksum
//! (little-endian), so it must match Redis bit for bit. It is table-driven
//! with slicing-by-8 (tables built at compile time) because it runs over
//! whole snapshot files.

/// The Jones polynomial in reflected (LSB-first) form.
pub const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const fn build_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = build_tables();

/// Extends `crc` (the result of a previous call, or 0 to start) with `data`.
///
/// Incremental by construction: `crc64(crc64(0, a), b) == crc64(0, a ++ b)`,
/// so a writer can checksum its output chunk by chunk.
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    let t = &TABLES;
    let mut crc = crc;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let v = crc ^ u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        crc = t[7][(v & 0xff) as usize]
            ^ t[6][((v >> 8) & 0xff) as usize]
            ^ t[5][((v >> 16) & 0xff) as usize]
            ^ t[4][((v >> 24) & 0xff) as usize]
            ^ t[3][((v >> 32) & 0xff) as usize]
            ^ t[2][((v >> 40) & 0xff) as usize]
            ^ t[1][((v >> 48) & 0xff) as usize]
            ^ t[0][(v >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit-at-a-time reference implementation.
    fn crc64_slow(mut crc: u64, data: &[u8]) -> u64 {
        for &b in data {
            crc ^= b as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY_REFLECTED
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    #[test]
    fn redis_test_vector() {
        // From Redis crc64.c's self test.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(0, b""), 0);
    }

    #[test]
    fn redis_long_test_vector() {
        // Longer input: the sliced path must agree with the bitwise one.
        let li = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed \
do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim \
veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo \
consequat. Duis aute irure dolor in reprehenderit in voluptate velit esse cillum \
dolore eu fugiat nulla pariatur. Excepteur sint occaecat cupidatat non proident, \
sunt in culpa qui officia deserunt mollit anim id est laborum.";
        assert_eq!(crc64(0, li), crc64_slow(0, li));
    }

    proptest! {
        #[test]
        fn matches_bitwise_and_is_incremental(data in proptest::collection::vec(any::<u8>(), 0..300), split in 0usize..300) {
            let full = crc64(0, &data);
            prop_assert_eq!(full, crc64_slow(0, &data));
            let split = split.min(data.len());
            prop_assert_eq!(crc64(crc64(0, &data[..split]), &data[split..]), full);
        }
    }
}
