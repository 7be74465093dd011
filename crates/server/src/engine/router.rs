//! Key → shard routing. Fixed hash of the key, or of its `{hashtag}` so related keys can be
//! placed on one shard (same rule as Redis Cluster: the first `{...}` with a non-empty body).

use damselfly_dash::hash_key;

/// The part of the key that is hashed: the hashtag body if present, else the whole key.
#[inline]
pub fn hash_slot_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&c| c == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&c| c == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The shard of a routing hash. Routing shares the table's key hash, so one hash per key serves
/// routing, the transaction lock table and the lookup. It uses the hash's low 16 bits, which the
/// table in a shard does not depend on: the home bucket is a multiply-shift of the low 32 bits
/// (the low 16 move it by less than 1/1000 of a bucket), the fingerprint is bits 32..40 and the
/// directory the top bits (48 at most). So keys of one shard still spread over all buckets.
#[inline]
pub fn shard_from_hash(h: u64, shards: usize) -> usize {
    (((h & 0xFFFF) * shards as u64) >> 16) as usize
}

#[inline]
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    shard_from_hash(hash_key(hash_slot_part(key)), shards)
}

/// The shard of `key` and its table hash (computed once when the key has no hashtag).
#[inline]
pub fn route(key: &[u8], shards: usize) -> (usize, u64) {
    let h = hash_key(key);
    if shards <= 1 {
        return (0, h);
    }
    let part = hash_slot_part(key);
    let rh = if part.len() == key.len() {
        h
    } else {
        hash_key(part)
    };
    (shard_from_hash(rh, shards), h)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn hashtags() {
        assert_eq!(hash_slot_part(b"user:{42}:name"), b"42");
        assert_eq!(hash_slot_part(b"{}x"), b"{}x");
        assert_eq!(hash_slot_part(b"abc"), b"abc");
        assert_eq!(shard_of(b"{a}1", 7), shard_of(b"{a}2", 7));
        for k in [&b"plain"[..], b"{a}1", b"x{}y", b""] {
            assert_eq!(route(k, 7), (shard_of(k, 7), hash_key(k)));
        }
    }

    #[test]
    fn shards_are_balanced() {
        let mut n = [0usize; 3];
        for i in 0..30_000 {
            n[shard_of(format!("key:{i}").as_bytes(), 3)] += 1;
        }
        assert!(n.iter().all(|&c| (9_000..11_000).contains(&c)), "{n:?}");
    }
}
