//! Memory per key of the storage layer alone (no server): fills one `Db` like
//! `DEBUG POPULATE n key size` and prints jemalloc's allocated/resident bytes and process RSS
//! growth per key. `cargo run --release --example mem_per_key -- 1000000 32`
use damselfly::engine::db::{Db, TtlMode};
use damselfly_types::{CompactStr, Value};
use tikv_jemalloc_ctl::{epoch, stats};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn snap() -> (u64, u64, u64) {
    let _ = epoch::advance();
    (
        stats::allocated::read().unwrap_or(0) as u64,
        stats::resident::read().unwrap_or(0) as u64,
        rss_kb() * 1024,
    )
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(1_000_000);
    let size = args.get(1).copied().unwrap_or(32) as usize;
    let before = snap();
    let mut db = Db::new();
    for i in 0..n {
        let k = format!("key:{i}");
        let mut v = format!("value:{i}").into_bytes();
        v.resize(size, 0);
        db.set(
            k.as_bytes(),
            Value::str(CompactStr::from_value(&v)),
            TtlMode::Clear,
            0,
        );
    }
    let after = snap();
    let per = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / n as f64;
    println!(
        "keys={n} size={size} allocated/key={:.1} resident/key={:.1} rss/key={:.1} table/key={:.1} load={:.3}",
        per(before.0, after.0),
        per(before.1, after.1),
        per(before.2, after.2),
        db.table_mem() as f64 / n as f64,
        db.len() as f64 / db.prime().capacity() as f64
    );
}
