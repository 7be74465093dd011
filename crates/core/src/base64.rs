//! Base64, for the two places a protocol carries it: memcache's binary keys (`b` meta flag)
//! and HTTP Basic authentication.

/// Standard (RFC 4648) base64 with padding.
pub fn encode(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for ch in b.chunks(3) {
        let n = (ch[0] as u32) << 16
            | (*ch.get(1).unwrap_or(&0) as u32) << 8
            | *ch.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= ch.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// memcached's base64 decoder: bytes outside the alphabet are skipped, the rest must come in
/// groups of four, decoding stops after the first group with padding (`YQ==YWJj` is `a`), and
/// an empty result is a failure.
pub fn decode(src: &[u8]) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            b'=' => Some(0),
            _ => None,
        }
    }
    let count = src.iter().filter(|&&c| val(c).is_some()).count();
    if count == 0 || count % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(count / 4 * 3);
    let mut block = [0u8; 4];
    let mut n = 0;
    let mut pad = 0;
    for &c in src {
        let Some(v) = val(c) else { continue };
        if c == b'=' {
            pad += 1;
        }
        block[n] = v;
        n += 1;
        if n == 4 {
            out.push((block[0] << 2) | (block[1] >> 4));
            out.push((block[1] << 4) | (block[2] >> 2));
            out.push((block[2] << 6) | block[3]);
            n = 0;
            if pad > 0 {
                match pad {
                    1 => out.truncate(out.len() - 1),
                    2 => out.truncate(out.len() - 2),
                    _ => return None,
                }
                break;
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc4648() {
        assert_eq!(encode(b"key"), "a2V5");
        assert_eq!(encode(b"ke"), "a2U=");
        assert_eq!(encode(b"k"), "aw==");
        assert_eq!(encode(b""), "");
    }

    #[test]
    fn decodes_what_it_encodes() {
        for s in [&b"a"[..], b"ab", b"abc", b"default:s3cret", b"\x00\xff\x10"] {
            assert_eq!(decode(encode(s).as_bytes()).as_deref(), Some(s));
        }
        assert_eq!(decode(b"ZGVmYXVsdDpw"), Some(b"default:p".to_vec()));
        assert_eq!(decode(b"abc"), None);
    }
}
