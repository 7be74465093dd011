//! Prints load factor and table overhead per entry at 1M random keys with
//! 16-byte key and value types. `cargo run --release -p damselfly-dash --example load`

use damselfly_dash::{DashTable, TableKey};
use std::time::Instant;

struct Key16([u8; 16]);

impl TableKey for Key16 {
    fn key_bytes(&self) -> &[u8] {
        &self.0
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut t: DashTable<Key16, [u8; 16]> = DashTable::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut min_lf = f64::MAX;
    let mut max_lf = 0f64;
    let start = Instant::now();
    let mut prev_segs = 1;
    let (mut lf_sum, mut lf_n) = (0f64, 0usize);
    for i in 0..n {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&rnd().to_le_bytes());
        k[8..].copy_from_slice(&(i as u64).to_le_bytes());
        // Record load factor just before each split.
        t.insert_new(Key16(k), [0u8; 16]);
        if i >= 100_000 && i % 1000 == 0 {
            lf_sum += t.load_factor();
            lf_n += 1;
        }
        if t.segments() != prev_segs {
            prev_segs = t.segments();
            if i > 100_000 {
                let lf = (t.len() - 1) as f64 / (t.capacity() - 840) as f64;
                min_lf = min_lf.min(lf);
                max_lf = max_lf.max(lf);
            }
        }
    }
    let el = start.elapsed();
    let entry = 32usize;
    let mem = t.mem_usage();
    println!("entries:            {}", t.len());
    println!(
        "segments:           {} (global depth {})",
        t.segments(),
        t.global_depth()
    );
    println!("capacity (slots):   {}", t.capacity());
    println!("load factor:        {:.3}", t.load_factor());
    println!("lf at splits:       min {min_lf:.3} max {max_lf:.3} (after 100k)");
    println!("mean lf 100k..{n}: {:.3}", lf_sum / lf_n.max(1) as f64);
    let seg = mem as f64 / t.segments() as f64;
    println!(
        "overhead/entry at peak lf {max_lf:.3}: {:.2} bytes",
        seg / (840.0 * max_lf) - entry as f64
    );
    println!(
        "mem_usage:          {} bytes ({:.2} bytes/entry)",
        mem,
        mem as f64 / t.len() as f64
    );
    println!(
        "overhead/entry:     {:.2} bytes (beyond the {entry}-byte (K,V) payload)",
        mem as f64 / t.len() as f64 - entry as f64
    );
    println!(
        "insert time:        {:.1} ns/op",
        el.as_nanos() as f64 / n as f64
    );
    let start = Instant::now();
    let mut found = 0;
    let mut y = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        y ^= y << 13;
        y ^= y >> 7;
        y ^= y << 17;
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&y.to_le_bytes());
        k[8..].copy_from_slice(&(i as u64).to_le_bytes());
        found += t.find(&k).is_some() as usize;
    }
    assert_eq!(found, n);
    println!(
        "find (hit) time:    {:.1} ns/op",
        start.elapsed().as_nanos() as f64 / n as f64
    );
    let start = Instant::now();
    let mut miss = 0;
    for i in 0..n as u64 {
        miss += t.find(&i.to_le_bytes()).is_none() as usize;
    }
    println!(
        "find (miss) time:   {:.1} ns/op ({miss})",
        start.elapsed().as_nanos() as f64 / n as f64
    );
}
