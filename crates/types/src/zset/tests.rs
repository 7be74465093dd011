//! Unit and property tests of the zset encodings against a simple model.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

/// Model: member → score, plus the (score, member) order.
#[derive(Default)]
struct Model {
    map: BTreeMap<Vec<u8>, f64>,
}

impl Model {
    fn sorted(&self) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<_> = self.map.iter().map(|(m, s)| (m.clone(), *s)).collect();
        v.sort_by(|a, b| pack::cmp_entry(a.1, &a.0, b.1, &b.0));
        v
    }
}

fn all(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
    let mut v = Vec::new();
    z.range(0, usize::MAX, false, |m, s| v.push((m.to_vec(), s)));
    v
}

fn check_big(z: &ZSet) {
    if let ZSet::Big(b) = z {
        assert_eq!(b.by_score.check(), b.by_member.check());
    }
}

const LIM: Limits = Limits {
    entries: 16,
    value: 8,
};

/// Limits under which every zset uses the tree encoding.
const ALWAYS_BIG: Limits = Limits {
    entries: 0,
    value: 0,
};

#[derive(Debug, Clone)]
enum Op {
    Add(u8, i16, u8),
    Rem(u8),
    RemRange(u8, u8),
    Pop(bool),
}

fn member(i: u8, long: u8) -> Vec<u8> {
    let mut m = format!("m{}", i % 64).into_bytes();
    if long.is_multiple_of(16) {
        m.extend_from_slice(b"-a-long-member");
    }
    m
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<u8>(), -20i16..20, any::<u8>()).prop_map(|(a, b, c)| Op::Add(a, b, c)),
        2 => any::<u8>().prop_map(Op::Rem),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::RemRange(a, b)),
        1 => any::<bool>().prop_map(Op::Pop),
    ]
}

fn score_of(s: i16) -> f64 {
    // Mixes integral, fractional, zero and -0 scores; many ties.
    match s {
        -20 => -0.0,
        x if x % 3 == 0 => x as f64 / 4.0,
        x => (x / 2) as f64,
    }
}

fn apply(z: &mut ZSet, m: &mut Model, o: &Op) {
    match *o {
        Op::Add(i, s, l) => {
            let k = member(i, l);
            let s = score_of(s);
            match m.map.get(&k) {
                Some(_) => z.update(&k, s),
                None => z.insert(&k, s, &LIM),
            }
            m.map.insert(k, if z.is_pack() { pack::norm(s) } else { s });
        }
        Op::Rem(i) => {
            for l in [0u8, 1] {
                let k = member(i, l);
                assert_eq!(z.remove(&k).is_some(), m.map.remove(&k).is_some());
            }
        }
        Op::RemRange(a, b) => {
            let n = m.map.len();
            let (a, b) = (a as usize % (n + 1), b as usize % (n + 2));
            let sorted = m.sorted();
            let want = b.saturating_sub(a).min(n.saturating_sub(a));
            assert_eq!(z.remove_range(a, b), want);
            for (k, _) in sorted.iter().skip(a).take(want) {
                m.map.remove(k);
            }
        }
        Op::Pop(max) => {
            let n = m.map.len();
            let got = z.pop_at(if max { n.wrapping_sub(1) } else { 0 });
            let sorted = m.sorted();
            let want = if max { sorted.last() } else { sorted.first() };
            assert_eq!(got.as_ref().map(|g| &g.0), want.map(|w| &w.0));
            if let Some(w) = want {
                m.map.remove(&w.0);
            }
        }
    }
}

fn verify(z: &ZSet, m: &Model) {
    check_big(z);
    let sorted = m.sorted();
    assert_eq!(z.len(), sorted.len());
    let got = all(z);
    assert_eq!(got.len(), sorted.len());
    for (g, w) in got.iter().zip(&sorted) {
        assert_eq!(g.0, w.0);
        assert_eq!(g.1.to_bits(), w.1.to_bits(), "score of {:?}", w.0);
    }
    // Ranks, scores, reverse ranges.
    for (i, (k, s)) in sorted.iter().enumerate() {
        assert_eq!(z.rank(k), Some((i, *s)));
        assert_eq!(z.score(k), Some(*s));
    }
    let mut rev = Vec::new();
    z.range(1, sorted.len(), true, |mm, _| rev.push(mm.to_vec()));
    let want: Vec<_> = sorted.iter().skip(1).rev().map(|x| x.0.clone()).collect();
    assert_eq!(rev, want);
    // Score-bound counts.
    for t in [-6.0, -0.5, 0.0, 1.0, 2.25, 5.0] {
        let lt = sorted.iter().filter(|x| x.1 < t).count();
        let le = sorted.iter().filter(|x| x.1 <= t).count();
        assert_eq!(z.count_where(|s, _| s < t), lt);
        assert_eq!(z.count_where(|s, _| s <= t), le);
    }
    // Scan returns each member exactly once.
    let mut seen = BTreeSet::new();
    let mut c = 0;
    loop {
        c = z.scan(c, 3, |mm, _| assert!(seen.insert(mm.to_vec()), "dup"));
        if c == 0 {
            break;
        }
    }
    assert_eq!(seen.len(), sorted.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn zset_matches_model(ops in proptest::collection::vec(op(), 1..400)) {
        let mut z = ZSet::default();
        let mut m = Model::default();
        for o in &ops {
            apply(&mut z, &mut m, o);
        }
        verify(&z, &m);
        let c = z.clone();
        verify(&c, &m);
    }
}

#[test]
fn big_tree_many_ops() {
    // Enough members for several tree levels; random order, deletes, score changes.
    let lim = ALWAYS_BIG;
    let mut z = ZSet::with_hint(&lim, 1, 0);
    let mut m = Model::default();
    let mut rng = crate::rand::Rng::new(12345);
    let mut rnd = || rng.next_u64();
    for step in 0..60_000u64 {
        let k = format!("member:{}", rnd() % 20_000).into_bytes();
        let s = (rnd() % 1000) as f64 / 8.0;
        match rnd() % 4 {
            0 => {
                assert_eq!(z.remove(&k).is_some(), m.map.remove(&k).is_some());
            }
            _ => {
                if m.map.contains_key(&k) {
                    z.update(&k, s);
                } else {
                    z.insert(&k, s, &lim);
                }
                m.map.insert(k, s);
            }
        }
        if step % 20_000 == 0 {
            check_big(&z);
        }
    }
    verify(&z, &m);
    // Remove ranges and pops until empty.
    while !z.is_empty() {
        let n = z.len();
        let a = (rnd() as usize) % n;
        let removed = z.remove_range(a, a + 500);
        let sorted = m.sorted();
        for (k, _) in sorted.iter().skip(a).take(removed) {
            m.map.remove(k);
        }
        check_big(&z);
    }
    assert!(m.map.is_empty());
}

#[test]
fn sequential_inserts_fill_leaves() {
    let lim = ALWAYS_BIG;
    let mut z = ZSet::with_hint(&lim, 1, 0);
    for i in 0..100_000 {
        z.insert(format!("m{i}").as_bytes(), i as f64, &lim);
    }
    check_big(&z);
    // About 16 (by_score) + 24 (by_member) bytes per member when leaves are full;
    // by_member is filled in hash order (random) so allow its ~70% fill.
    let per = z.heap_size() as f64 / 100_000.0;
    assert!(per < 64.0, "{per} bytes per member");
}

#[test]
fn skey_is_order_preserving() {
    let v = [
        f64::NEG_INFINITY,
        -1e300,
        -1.5,
        -5e-324,
        0.0,
        5e-324,
        1.0,
        1e300,
        f64::INFINITY,
    ];
    for w in v.windows(2) {
        assert!(skey(w[0]) < skey(w[1]));
    }
    assert_eq!(skey(-0.0), skey(0.0));
    for x in v {
        assert_eq!(unskey(skey(x)), x);
    }
}

#[test]
fn pack_scores_round_trip() {
    let mut p = Pack::default();
    let scores = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        127.0,
        128.0,
        -129.0,
        40000.0,
        -3e9,
        0.1,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e300,
    ];
    for (i, s) in scores.iter().enumerate() {
        p.insert(format!("m{i}").as_bytes(), *s);
    }
    let got: Vec<f64> = p.iter().map(|e| e.score).collect();
    let mut want: Vec<f64> = scores.iter().map(|s| pack::norm(*s)).collect();
    want.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.to_bits(), w.to_bits());
    }
    assert!(!p.iter().any(|e| e.score.to_bits() == (-0.0f64).to_bits()));
}

/// zset-max-listpack-entries can be set far past 65535 (Redis keeps such zsets listpack-encoded):
/// the pack's u16 count header saturates and is counted by walking instead of wrapping. Before,
/// `Limits::fits` refused more than 65535 entries (OBJECT ENCODING said skiplist where Redis says
/// listpack) and a header write past that would have wrapped to 0.
#[test]
fn pack_counts_past_u16() {
    const N: usize = 70_000;
    let lim = Limits {
        entries: 100_000,
        value: 64,
    };
    assert!(lim.fits(N, 10));
    let items: Vec<(Vec<u8>, f64)> = (0..N)
        .map(|i| (format!("m{i:06}").into_bytes(), i as f64))
        .collect();
    let mut z = ZSet::from_sorted(&items, &lim);
    assert!(z.is_pack());
    assert_eq!(z.len(), N);
    assert_eq!(
        z.at(65_535),
        Some((b"m065535".to_vec(), 65_535.0)),
        "entries past the u16 range stay addressable"
    );
    assert_eq!(z.rank(b"m069999"), Some((N - 1, 69_999.0)));
    // Adds and removals around the saturation point keep an exact count.
    z.insert(b"extra", 0.5, &lim);
    assert!(z.is_pack());
    assert_eq!(z.len(), N + 1);
    assert_eq!(z.remove(b"extra"), Some(0.5));
    assert_eq!(z.remove_range(0, N - 65_534), N - 65_534);
    assert_eq!(z.len(), 65_534, "back below the saturated header");
    assert_eq!(
        z.at(0),
        Some((format!("m{:06}", N - 65_534).into_bytes(), 4466.0))
    );
    z.insert(b"a", -1.0, &lim);
    z.insert(b"b", -2.0, &lim);
    assert_eq!(z.len(), 65_536);
    assert_eq!(z.pop_at(0), Some((b"b".to_vec(), -2.0)));
    assert_eq!(z.len(), 65_535);
    assert_eq!(z.pop_at(0), Some((b"a".to_vec(), -1.0)));
    assert_eq!(z.len(), 65_534);
    assert_eq!(all(&z).len(), 65_534);
    // With the default thresholds the same input converts, as before.
    let small = ZSet::from_sorted(&items, &LIM);
    assert!(!small.is_pack());
    assert_eq!(small.len(), N);
}
