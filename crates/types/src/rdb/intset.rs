//! Intsets (`intset.c`): sorted arrays of integers, the `RDB_TYPE_SET_INTSET`
//! payload. Layout: element width in bytes (u32 LE: 2, 4 or 8), element
//! count (u32 LE), then the elements as signed little-endian integers of
//! that width in strictly ascending order.

use super::wire::BlobError;

const HEADER_SIZE: usize = 8;

/// The width Redis picks for a value (`_intsetValueEncoding`).
fn width_for(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

/// Encodes a set of integers. The input need not be sorted or unique; the
/// width is the smallest that fits every value (what a freshly built intset
/// has; Redis never downgrades, but readers accept any valid width).
pub fn encode(values: &[i64]) -> Vec<u8> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.dedup();
    let width = v.iter().map(|&x| width_for(x)).max().unwrap_or(2);
    let mut out = Vec::with_capacity(HEADER_SIZE + width * v.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes()[..width]);
    }
    out
}

/// Decodes and validates an intset as `intsetValidateIntegrity(deep)`:
/// known width, size exactly header + count × width, non-empty (Redis
/// rejects empty intsets in RDB), strictly ascending.
pub fn decode(buf: &[u8]) -> Result<Vec<i64>, BlobError> {
    if buf.len() < HEADER_SIZE {
        return Err(BlobError::new(0, "shorter than header"));
    }
    let width = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(BlobError::new(0, "bad encoding"));
    }
    let count = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
    let body = &buf[HEADER_SIZE..];
    if count.checked_mul(width) != Some(body.len()) {
        return Err(BlobError::new(4, "size mismatch"));
    }
    if count == 0 {
        return Err(BlobError::new(4, "empty intset"));
    }
    let mut out = Vec::with_capacity(count);
    for (i, c) in body.chunks_exact(width).enumerate() {
        let v = match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        };
        if out.last().is_some_and(|&prev| prev >= v) {
            return Err(BlobError::new(
                HEADER_SIZE + i * width,
                "not strictly ascending",
            ));
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_bytes() {
        assert_eq!(
            encode(&[3, 1, 2, 2]),
            [2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 2, 0, 3, 0]
        );
        assert_eq!(
            encode(&[-1, 40000]),
            [4, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x40, 0x9c, 0, 0]
        );
        assert_eq!(encode(&[1 << 40])[0], 8);
        assert_eq!(
            decode(&encode(&[5, -7, 1 << 40])).unwrap(),
            vec![-7, 5, 1 << 40]
        );
    }

    #[test]
    fn rejects_corruption() {
        assert_eq!(
            decode(&[2, 0, 0]).unwrap_err().reason,
            "shorter than header"
        );
        assert_eq!(
            decode(&[3, 0, 0, 0, 0, 0, 0, 0]).unwrap_err().reason,
            "bad encoding"
        );
        assert_eq!(
            decode(&[2, 0, 0, 0, 0, 0, 0, 0]).unwrap_err().reason,
            "empty intset"
        );
        assert_eq!(
            decode(&[2, 0, 0, 0, 2, 0, 0, 0, 1, 0]).unwrap_err().reason,
            "size mismatch"
        );
        assert_eq!(
            decode(&[2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, 0])
                .unwrap_err()
                .reason,
            "not strictly ascending"
        );
        assert_eq!(
            decode(&[2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])
                .unwrap_err()
                .reason,
            "size mismatch"
        );
        // A wider-than-needed width is still valid.
        assert_eq!(
            decode(&[8, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]).unwrap(),
            vec![1]
        );
    }

    proptest! {
        #[test]
        fn roundtrip(values in proptest::collection::vec(prop_oneof![any::<i64>(), -40000i64..40000, any::<i16>().prop_map(i64::from)], 1..50)) {
            let mut want = values.clone();
            want.sort_unstable();
            want.dedup();
            prop_assert_eq!(decode(&encode(&values)).unwrap(), want);
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&data);
        }
    }
}
