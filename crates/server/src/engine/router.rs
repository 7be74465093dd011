//! Key → shard routing. Fixed hash of the key, or of its `{hashtag}` so related keys can be
//! placed on one shard (same rule as Redis Cluster: the first `{...}` with a non-empty body).

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Seed distinct from the table's hash so in-shard table buckets aren't correlated with routing.
const ROUTE_SEED: u64 = 0x5ad5_e1f1_d00d_cafe;

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

#[inline]
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    (xxh3_64_with_seed(hash_slot_part(key), ROUTE_SEED) % shards as u64) as usize
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
    }
}
