//! Property tests against a `HashMap` model, and the SCAN guarantee.

use damselfly_dash::{DashTable, FLAG_A, FLAG_B, MIN_BUCKETS};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone)]
enum Op {
    Insert(u32, u64),
    InsertNew(u32, u64),
    Remove(u32),
    Get(u32),
    SetFlags(u32, u8),
    RemoveAt(u32),
    Retain(u8),
    Clear,
}

fn key(k: u32) -> Vec<u8> {
    // Vary key lengths a little.
    let mut v = format!("k{k}").into_bytes();
    v.extend(std::iter::repeat_n(b'x', (k % 7) as usize));
    v
}

fn op_strategy(space: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (0..space, any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        20 => (0..space, any::<u64>()).prop_map(|(k, v)| Op::InsertNew(k, v)),
        15 => (0..space).prop_map(Op::Remove),
        15 => (0..space).prop_map(Op::Get),
        10 => (0..space, 0u8..4).prop_map(|(k, f)| Op::SetFlags(k, f)),
        5 => (0..space).prop_map(Op::RemoveAt),
        1 => (2u8..8).prop_map(Op::Retain),
        1 => Just(Op::Clear),
    ]
}

/// Runs `ops` against a table with `B` buckets per segment and a `HashMap` model.
fn run<const B: usize>(ops: &[Op]) {
    let mut t: DashTable<Vec<u8>, u64, B> = DashTable::new();
    let mut m: HashMap<Vec<u8>, (u64, u8)> = HashMap::new();
    for op in ops {
        match *op {
            Op::Insert(k, v) => {
                let prev = t.insert(key(k), v);
                let mp = m.get(&key(k)).map(|e| e.0);
                assert_eq!(prev, mp);
                let fl = m.get(&key(k)).map(|e| e.1).unwrap_or(0);
                m.insert(key(k), (v, fl));
            }
            Op::InsertNew(k, v) => {
                if t.find(&key(k)).is_none() {
                    let p = t.insert_new(key(k), v);
                    assert_eq!(t.at(p), (&key(k), &v));
                    assert_eq!(t.flags(p), 0);
                    assert!(m.insert(key(k), (v, 0)).is_none());
                } else {
                    assert!(m.contains_key(&key(k)));
                }
            }
            Op::Remove(k) => {
                let r = t.remove(&key(k));
                let mr = m.remove(&key(k)).map(|(v, _)| (key(k), v));
                assert_eq!(r, mr);
            }
            Op::Get(k) => {
                let g = t.get(&key(k)).map(|(_, v)| *v);
                assert_eq!(g, m.get(&key(k)).map(|e| e.0));
                if let Some(p) = t.find(&key(k)) {
                    assert_eq!(t.flags(p), m[&key(k)].1);
                }
            }
            Op::SetFlags(k, f) => {
                if let Some(p) = t.find(&key(k)) {
                    t.set_flags(p, f);
                    m.get_mut(&key(k)).unwrap().1 = f & (FLAG_A | FLAG_B);
                }
            }
            Op::RemoveAt(k) => {
                if let Some(p) = t.find(&key(k)) {
                    let (rk, rv) = t.remove_at(p);
                    assert_eq!(rk, key(k));
                    assert_eq!(Some(rv), m.remove(&key(k)).map(|e| e.0));
                }
            }
            Op::Retain(d) => {
                t.retain(|_, v| *v % d as u64 != 0);
                m.retain(|_, e| e.0 % d as u64 != 0);
            }
            Op::Clear => {
                t.clear();
                m.clear();
            }
        }
        assert_eq!(t.len(), m.len());
    }
    t.check_invariants();
    assert_eq!(t.iter().count(), m.len());
    for (k, v) in t.iter() {
        assert_eq!(m[k].0, *v);
    }
    for (k, (v, f)) in &m {
        let p = t.find(k).unwrap();
        assert_eq!(t.at(p).1, v);
        assert_eq!(t.flags(p), *f);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn model_small_space(ops in prop::collection::vec(op_strategy(48), 1..1500)) {
        run::<{ damselfly_dash::DEFAULT_BUCKETS }>(&ops);
        // Smallest geometry: 2 regular buckets, so displacement and the stash are hit often.
        run::<MIN_BUCKETS>(&ops);
    }

    #[test]
    fn model_large_space(ops in prop::collection::vec(op_strategy(1_000_000), 1..6000)) {
        run::<{ damselfly_dash::DEFAULT_BUCKETS }>(&ops);
        // The geometry of 24-byte entries (`buckets_for`): 62 regular + 4 stash.
        run::<66>(&ops);
    }

    /// Keys present for a whole scan are returned at least once, even when
    /// the table grows (splits, directory doublings) and shrinks between steps.
    #[test]
    fn scan_guarantee(
        n_stable in 0usize..3000,
        per_step in 0usize..80,
        removes in 0usize..40,
        seed in any::<u64>(),
    ) {
        scan_guarantee_with::<{ damselfly_dash::DEFAULT_BUCKETS }>(n_stable, per_step, removes, seed)?;
        scan_guarantee_with::<66>(n_stable, per_step, removes, seed)?;
        scan_guarantee_with::<11>(n_stable, per_step, removes, seed)?;
    }
}

fn scan_guarantee_with<const B: usize>(
    n_stable: usize,
    per_step: usize,
    removes: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut t: DashTable<Vec<u8>, u64, B> = DashTable::new();
    let mut rng = seed | 1;
    let mut rnd = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Interleave stable and volatile keys from the start.
    let mut volatile: Vec<Vec<u8>> = Vec::new();
    let mut stable = Vec::new();
    for i in 0..n_stable {
        let k = format!("s{i}").into_bytes();
        t.insert_new(k.clone(), i as u64);
        stable.push(k);
        if rnd() % 2 == 0 {
            let v = format!("v{}", rnd()).into_bytes();
            if t.find(&v).is_none() {
                t.insert_new(v.clone(), 0);
                volatile.push(v);
            }
        }
    }
    let mut seen = HashSet::new();
    let mut cur = 0u64;
    let mut steps = 0usize;
    loop {
        cur = t.scan(cur, |_, k, _| {
            seen.insert(k.clone());
        });
        prop_assert!(cur < (1u64 << 56));
        steps += 1;
        prop_assert!(steps < 1_000_000);
        if cur == 0 {
            break;
        }
        for _ in 0..per_step {
            let v = format!("v{}", rnd()).into_bytes();
            if t.find(&v).is_none() {
                t.insert_new(v.clone(), 0);
                volatile.push(v);
            }
        }
        for _ in 0..removes.min(volatile.len()) {
            let i = (rnd() % volatile.len() as u64) as usize;
            let v = volatile.swap_remove(i);
            prop_assert!(t.remove(&v).is_some());
        }
    }
    for k in &stable {
        prop_assert!(
            seen.contains(k),
            "stable key {:?} missed",
            String::from_utf8_lossy(k)
        );
    }
    t.check_invariants();
    Ok(())
}
