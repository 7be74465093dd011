//! Fast deterministic random numbers and memtier-style key generators.

use crate::opts::KeyPattern;

/// xorshift64* generator: tiny, fast and good enough for load generation.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // splitmix64 scrambling so that nearby seeds diverge immediately.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [lo, hi] (inclusive).
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        // Multiply-shift reduction: unbiased enough for benchmarking.
        lo + ((u128::from(self.next_u64()) * u128::from(span + 1)) >> 64) as u64
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Generates key numbers for one client and one command type.
#[derive(Clone, Debug)]
pub struct KeyGen {
    pattern: KeyPattern,
    min: u64,
    max: u64,
    /// Sequential/parallel cursor and its slice.
    cur: u64,
    lo: u64,
    hi: u64,
    median: f64,
    stddev: f64,
    spare_gauss: Option<f64>,
}

impl KeyGen {
    /// `client_index` / `total_clients` select the slice for the parallel pattern.
    pub fn new(
        pattern: KeyPattern,
        min: u64,
        max: u64,
        client_index: u64,
        total_clients: u64,
        median: Option<f64>,
        stddev: Option<f64>,
    ) -> Self {
        let (lo, hi) = slice_for(min, max, client_index, total_clients);
        let (lo, hi) = match pattern {
            KeyPattern::Parallel => (lo, hi),
            _ => (min, max),
        };
        let range = (max - min) as f64;
        KeyGen {
            pattern,
            min,
            max,
            cur: lo,
            lo,
            hi,
            median: median.unwrap_or(min as f64 + range / 2.0),
            stddev: stddev.unwrap_or((range / 6.0).max(1.0)),
            spare_gauss: None,
        }
    }

    #[inline]
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        match self.pattern {
            KeyPattern::Random => rng.range(self.min, self.max),
            KeyPattern::Sequential | KeyPattern::Parallel => {
                let k = self.cur;
                self.cur = if self.cur >= self.hi {
                    self.lo
                } else {
                    self.cur + 1
                };
                k
            }
            KeyPattern::Gaussian => {
                let z = match self.spare_gauss.take() {
                    Some(z) => z,
                    None => {
                        // Box-Muller transform.
                        let u1 = rng.unit().max(f64::MIN_POSITIVE);
                        let u2 = rng.unit();
                        let r = (-2.0 * u1.ln()).sqrt();
                        let th = 2.0 * std::f64::consts::PI * u2;
                        self.spare_gauss = Some(r * th.sin());
                        r * th.cos()
                    }
                };
                let v = (self.median + z * self.stddev).round();
                v.clamp(self.min as f64, self.max as f64) as u64
            }
        }
    }
}

/// The contiguous slice of [min, max] that client `i` of `n` owns (parallel pattern / allkeys).
pub fn slice_for(min: u64, max: u64, i: u64, n: u64) -> (u64, u64) {
    let n = n.max(1);
    let total = max - min + 1;
    let base = total / n;
    let extra = total % n;
    let start = min + i * base + i.min(extra);
    let len = base + u64::from(i < extra);
    if len == 0 {
        // More clients than keys: this client re-walks the first key.
        return (min, min);
    }
    (start, start + len - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_range_exactly() {
        let (min, max, n) = (1u64, 1000u64, 7u64);
        let mut next = min;
        let mut total = 0;
        for i in 0..n {
            let (lo, hi) = slice_for(min, max, i, n);
            assert_eq!(lo, next);
            next = hi + 1;
            total += hi - lo + 1;
        }
        assert_eq!(total, 1000);
        assert_eq!(next, max + 1);
    }

    #[test]
    fn generators_stay_in_range() {
        let mut rng = Rng::new(1);
        for p in [
            KeyPattern::Random,
            KeyPattern::Sequential,
            KeyPattern::Gaussian,
            KeyPattern::Parallel,
        ] {
            let mut g = KeyGen::new(p, 10, 20, 1, 3, None, None);
            for _ in 0..1000 {
                let k = g.next(&mut rng);
                assert!((10..=20).contains(&k), "{p:?} {k}");
            }
        }
        let mut g = KeyGen::new(KeyPattern::Sequential, 5, 7, 0, 1, None, None);
        let v: Vec<u64> = (0..5).map(|_| g.next(&mut rng)).collect();
        assert_eq!(v, vec![5, 6, 7, 5, 6]);
    }
}
