//! The fingerprint behind DEBUG DIGEST and DEBUG DIGEST-VALUE: 160 bits of the dataset or of
//! values, equal exactly when the logical contents are equal, whatever the encodings (Redis's
//! test suite compares them before and after conversions, copies and reloads; it never compares
//! them with fixed values, so the hash need not be Redis's SHA1).
//!
//! As Redis: ordered contents (strings, lists, sorted sets) are mixed in order; unordered ones
//! (sets, hashes, the keys of a database) are combined with XOR so that iteration order does
//! not matter; an empty dataset and a missing key digest to forty zeros.

use crate::stream::StreamId;
use crate::{Value, ValueRef};

/// 20 bytes, printed as 40 hex digits.
pub type Digest = [u8; 20];

fn hash(data: &[u8], seed: u64) -> Digest {
    let a = xxhash_rust::xxh3::xxh3_128_with_seed(data, seed).to_le_bytes();
    let b = xxhash_rust::xxh3::xxh3_64_with_seed(data, seed ^ 0x9e37_79b9_7f4a_7c15).to_le_bytes();
    let mut d = [0u8; 20];
    d[..16].copy_from_slice(&a);
    d[16..].copy_from_slice(&b[..4]);
    d
}

/// `d = H(d ‖ data)`: order-sensitive.
fn mix(d: &mut Digest, data: &[u8]) {
    let mut buf = Vec::with_capacity(20 + data.len());
    buf.extend_from_slice(d);
    buf.extend_from_slice(data);
    *d = hash(&buf, 1);
}

/// `d ^= H(data)`: order-insensitive.
fn xor(d: &mut Digest, data: &Digest) {
    for (a, b) in d.iter_mut().zip(data) {
        *a ^= b;
    }
}

/// The digest of one value (DEBUG DIGEST-VALUE).
pub fn value_digest(v: &Value) -> Digest {
    let mut d = [0u8; 20];
    match v.view() {
        ValueRef::Str(s) => {
            mix(&mut d, b"string");
            mix(&mut d, &s.to_vec());
        }
        ValueRef::List(l) => {
            mix(&mut d, b"list");
            for e in l.to_vecs() {
                mix(&mut d, &e);
            }
        }
        ValueRef::Set(s) => {
            mix(&mut d, b"set");
            let mut acc = [0u8; 20];
            for m in s.to_vecs() {
                xor(&mut acc, &hash(&m, 2));
            }
            mix(&mut d, &acc);
        }
        ValueRef::ZSet(z) => {
            mix(&mut d, b"zset");
            z.range(0, z.len(), false, |m, score| {
                mix(&mut d, m);
                mix(&mut d, &score.to_bits().to_be_bytes());
            });
        }
        ValueRef::Hash(h) => {
            mix(&mut d, b"hash");
            let mut acc = [0u8; 20];
            h.for_each(|f, v| {
                let mut pair = f.to_vec();
                pair.push(0);
                pair.extend_from_slice(&v.to_vec());
                xor(&mut acc, &hash(&pair, 3));
            });
            mix(&mut d, &acc);
        }
        ValueRef::Stream(st) => {
            mix(&mut d, b"stream");
            st.range(StreamId::MIN, StreamId::MAX, false, |id, fields| {
                mix(&mut d, &id.ms.to_be_bytes());
                mix(&mut d, &id.seq.to_be_bytes());
                for (f, v) in fields {
                    mix(&mut d, f);
                    mix(&mut d, v);
                }
                true
            });
            mix(&mut d, &st.last_id.ms.to_be_bytes());
            mix(&mut d, &st.last_id.seq.to_be_bytes());
            for (name, g) in &st.groups {
                mix(&mut d, name);
                mix(&mut d, &g.last_id.ms.to_be_bytes());
                mix(&mut d, &g.last_id.seq.to_be_bytes());
                for (id, n) in &g.pel {
                    mix(&mut d, &id.ms.to_be_bytes());
                    mix(&mut d, &id.seq.to_be_bytes());
                    mix(&mut d, &n.consumer);
                }
            }
        }
    }
    d
}

/// One key's part of DEBUG DIGEST: its name, value and expiry.
pub fn key_digest(db: usize, key: &[u8], v: &Value, expire_at: Option<u64>) -> Digest {
    let mut d = [0u8; 20];
    mix(&mut d, &(db as u64).to_be_bytes());
    mix(&mut d, key);
    mix(&mut d, &value_digest(v));
    if let Some(at) = expire_at {
        mix(&mut d, b"!!expire!!");
        mix(&mut d, &at.to_be_bytes());
    }
    d
}

/// XOR of per-key digests (key order does not matter).
pub fn combine(acc: &mut Digest, part: &Digest) {
    xor(acc, part)
}

pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CompactStr;

    #[test]
    fn equal_contents_equal_digests() {
        let a = Value::from(CompactStr::from_bytes(b"hello"));
        let b = Value::from(CompactStr::from_bytes(b"hello"));
        let c = Value::from(CompactStr::from_bytes(b"hellp"));
        assert_eq!(value_digest(&a), value_digest(&b));
        assert_ne!(value_digest(&a), value_digest(&c));
        let mut x = [0u8; 20];
        combine(&mut x, &key_digest(0, b"k1", &a, None));
        combine(&mut x, &key_digest(0, b"k2", &c, Some(5)));
        let mut y = [0u8; 20];
        combine(&mut y, &key_digest(0, b"k2", &c, Some(5)));
        combine(&mut y, &key_digest(0, b"k1", &a, None));
        assert_eq!(x, y, "key order does not matter");
        assert_eq!(hex(&[0u8; 20]), "0".repeat(40));
    }
}
