//! Cheap, non-cryptographic randomness: the one generator of the server (xorshift64*), used
//! for sampling (RANDOMKEY, SRANDMEMBER, SPOP, HRANDFIELD, ZRANDMEMBER), run ids, and the
//! per-process seeds of the collection tables' hashes. Never for anything secret.

/// xorshift64* (Vigna): 64 bits of state, full period over the non-zero states.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

/// Stands in for a zero seed (xorshift never leaves the zero state).
const NONZERO: u64 = 0x9E37_79B9_7F4A_7C15;

impl Rng {
    /// A generator started from `seed` (any value).
    #[inline]
    pub const fn new(seed: u64) -> Rng {
        Rng {
            state: if seed == 0 { NONZERO } else { seed },
        }
    }

    /// A generator seeded from [`entropy`].
    pub fn from_entropy() -> Rng {
        Rng::new(entropy())
    }

    /// An independent stream seeded from this one (for code that cannot keep borrowing the
    /// parent while it draws).
    #[inline]
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0). Modulo reduction: the bias is negligible for the
    /// collection sizes it samples from.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// An index in `0..n` (0 when `n` is 0).
    #[inline]
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Moves a uniformly random choice of `count` elements (all of them when `count` is at
    /// least the length) to the front of `v`, in random order (partial Fisher-Yates).
    pub fn partial_shuffle<T>(&mut self, v: &mut [T], count: usize) {
        let n = v.len();
        for i in 0..count.min(n) {
            let j = i + self.index(n - i);
            v.swap(i, j);
        }
    }
}

/// 64 bits that differ between processes and calls: std's per-process random hasher keys,
/// mixed with the time and the process id.
pub fn entropy() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    h.write_u64(t);
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_seed_still_moves_and_forks_differ() {
        let mut r = Rng::new(0);
        let a = r.next_u64();
        assert_ne!(a, 0);
        assert_ne!(r.next_u64(), a);
        let mut f = r.fork();
        assert_ne!(f.next_u64(), r.next_u64());
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(42);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = r.below(7);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.below(0), 0);
        assert_eq!(r.index(1), 0);
    }

    #[test]
    fn partial_shuffle_keeps_the_elements() {
        let mut r = Rng::new(7);
        let mut v: Vec<u32> = (0..50).collect();
        r.partial_shuffle(&mut v, 10);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        r.partial_shuffle(&mut v, 500);
        assert_eq!(v.len(), 50);
    }

    #[test]
    fn entropy_differs_between_calls() {
        assert_ne!(entropy(), entropy());
    }
}
