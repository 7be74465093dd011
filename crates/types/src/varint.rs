//! LEB128 unsigned varints: the length and delta prefixes of our packed encodings (sorted-set
//! packs, stream nodes).

/// Writes `v` at the start of `out` (at least 10 bytes); returns the bytes written.
#[inline]
pub fn put(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = b;
            return i + 1;
        }
        out[i] = b | 0x80;
        i += 1;
    }
}

/// Appends `v` to `out`.
#[inline]
pub fn push(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 10];
    let n = put(&mut b, v);
    out.extend_from_slice(&b[..n]);
}

/// Reads a varint at `off`: (value, offset after it). A truncated varint reads as far as `buf`
/// goes (our buffers are written by `put`, never from outside input).
#[inline]
pub fn get(buf: &[u8], mut off: usize) -> (u64, usize) {
    let mut v = 0u64;
    let mut shift = 0;
    while off < buf.len() {
        let b = buf[off];
        off += 1;
        if shift < 64 {
            v |= ((b & 0x7f) as u64) << shift;
        }
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (v, off)
}

/// Bytes `put` writes for `v`.
#[inline]
pub fn len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            super::push(&mut out, v);
            assert_eq!(out.len(), super::len(v));
            assert_eq!(super::get(&out, 0), (v, out.len()));
        }
    }
}
