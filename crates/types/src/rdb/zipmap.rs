//! Zipmaps (`zipmap.c`), decode only: the small-hash format of Redis < 2.6
//! (`RDB_TYPE_HASH_ZIPMAP`), which Redis 7.0 still loads.
//!
//! Layout: a count byte (valid when < 254), then pairs of
//! `<len>key <len><free>value<free bytes>`, then `0xFF`. A length is one
//! byte if < 254, else `0xFE` + u32 LE; `free` is one byte counting unused
//! bytes after the value.

use super::wire::BlobError;

const BIGLEN: u8 = 254;
const END: u8 = 0xFF;

/// A field and its value.
pub type ZipmapPair<'a> = (&'a [u8], &'a [u8]);

/// Decodes and validates a zipmap as `zipmapValidateIntegrity(deep)`:
/// every length and value (plus free space) in bounds, terminator last,
/// non-empty, and the count byte (unless 254) exact. Duplicate fields are
/// left to the caller (Redis rejects them while converting).
pub fn decode(buf: &[u8]) -> Result<Vec<ZipmapPair<'_>>, BlobError> {
    if buf.len() < 2 {
        return Err(BlobError::new(0, "shorter than header"));
    }
    let last = buf.len() - 1;
    if buf[last] != END {
        return Err(BlobError::new(last, "missing terminator"));
    }
    // Reads a length at `p`, returning (len, bytes used), within `last`.
    let read_len = |p: usize| -> Result<(usize, usize), BlobError> {
        if buf[p] < BIGLEN {
            Ok((buf[p] as usize, 1))
        } else if p + 5 > last {
            Err(BlobError::new(p, "length overruns zipmap"))
        } else {
            Ok((
                u32::from_le_bytes([buf[p + 1], buf[p + 2], buf[p + 3], buf[p + 4]]) as usize,
                5,
            ))
        }
    };
    let mut out = Vec::new();
    let mut p = 1;
    while buf[p] != END {
        let (klen, n) = read_len(p)?;
        let k_start = p + n;
        let k_end = k_start
            .checked_add(klen)
            .filter(|&e| e < last)
            .ok_or(BlobError::new(p, "key overruns zipmap"))?;
        let vp = k_end;
        let (vlen, n) = read_len(vp)?;
        let free_at = vp + n;
        if free_at >= last {
            return Err(BlobError::new(vp, "value overruns zipmap"));
        }
        let free = buf[free_at] as usize;
        let v_start = free_at + 1;
        let v_end = v_start
            .checked_add(vlen)
            .filter(|&e| e <= last)
            .ok_or(BlobError::new(vp, "value overruns zipmap"))?;
        let next = v_end + free;
        if next > last {
            return Err(BlobError::new(vp, "free space overruns zipmap"));
        }
        out.push((&buf[k_start..k_end], &buf[v_start..v_end]));
        p = next;
    }
    if p != last {
        return Err(BlobError::new(p, "terminator before end"));
    }
    if out.is_empty() {
        return Err(BlobError::new(0, "empty zipmap"));
    }
    if buf[0] != BIGLEN && buf[0] as usize != out.len() {
        return Err(BlobError::new(0, "header count mismatch"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn push_len(out: &mut Vec<u8>, n: usize) {
        if n < 254 {
            out.push(n as u8);
        } else {
            out.push(BIGLEN);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
    }

    /// Test-only encoder (`zipmapSet` layout) with `free` padding bytes.
    fn build(pairs: &[(&[u8], &[u8])], free: u8) -> Vec<u8> {
        let mut out = vec![if pairs.len() < 254 {
            pairs.len() as u8
        } else {
            BIGLEN
        }];
        for (k, v) in pairs {
            push_len(&mut out, k.len());
            out.extend_from_slice(k);
            push_len(&mut out, v.len());
            out.push(free);
            out.extend_from_slice(v);
            out.resize(out.len() + free as usize, 0);
        }
        out.push(END);
        out
    }

    #[test]
    fn known_bytes() {
        // "foo" => "bar", "hello" => "world" (the zipmap.c header example).
        let zm = b"\x02\x03foo\x03\x00bar\x05hello\x05\x00world\xff";
        assert_eq!(
            decode(zm).unwrap(),
            vec![(&b"foo"[..], &b"bar"[..]), (&b"hello"[..], &b"world"[..])]
        );
        assert_eq!(build(&[(b"foo", b"bar"), (b"hello", b"world")], 0), zm);
        // With free bytes after a value.
        let zm = b"\x01\x01a\x01\x02b\x00\x00\xff";
        assert_eq!(decode(zm).unwrap(), vec![(&b"a"[..], &b"b"[..])]);
    }

    #[test]
    fn rejects_corruption() {
        assert_eq!(decode(b"\x00\xff").unwrap_err().reason, "empty zipmap");
        assert_eq!(
            decode(b"\x02\x01a\x01\x00b\xff").unwrap_err().reason,
            "header count mismatch"
        );
        assert_eq!(decode(b"\xfe\x01a\x01\x00b\xff").unwrap().len(), 1);
        assert!(decode(b"\x01\x05a\x01\x00b\xff").is_err());
        assert!(decode(b"\x01\x01a\x01\x09b\xff").is_err());
        assert!(decode(b"\x01\x01a\xfe\x00\x00\x00\x10\x00b\xff").is_err());
        assert_eq!(
            decode(b"\x01\x01a\x01\x00b\xff\x00").unwrap_err().reason,
            "missing terminator"
        );
        assert!(decode(b"\xff").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn roundtrip(pairs in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..300), proptest::collection::vec(any::<u8>(), 0..300)), 1..8), free in 0u8..5) {
            let refs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            let zm = build(&refs, free);
            prop_assert_eq!(decode(&zm).unwrap(), refs);
        }

        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut data = data;
            if let Some(l) = data.last_mut() { *l = 0xFF; }
            let _ = decode(&data);
        }
    }
}
