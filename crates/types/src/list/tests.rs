use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    PushFront(Vec<u8>),
    PushBack(Vec<u8>),
    PopFront,
    PopBack,
    Set(usize, Vec<u8>),
    Insert(usize, Vec<u8>),
    RemoveRange(usize, usize),
    RemoveMatching(Vec<u8>, i64),
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0i64..6).prop_map(|i| i.to_string().into_bytes()),
        2 => prop_oneof![Just(-5000i64), Just(300), Just(70000), Just(i64::MIN), Just(-1)]
            .prop_map(|i| i.to_string().into_bytes()),
        3 => "[a-c]{0,3}".prop_map(|s| s.into_bytes()),
        1 => (50usize..300).prop_map(|n| vec![b'L'; n]),
        1 => (1000usize..3000).prop_map(|n| vec![b'H'; n]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => value().prop_map(Op::PushFront),
        4 => value().prop_map(Op::PushBack),
        2 => Just(Op::PopFront),
        2 => Just(Op::PopBack),
        1 => (0usize..200, value()).prop_map(|(i, v)| Op::Set(i, v)),
        2 => (0usize..200, value()).prop_map(|(i, v)| Op::Insert(i, v)),
        1 => (0usize..200, 0usize..20).prop_map(|(a, b)| Op::RemoveRange(a, b)),
        1 => (value(), -3i64..4).prop_map(|(v, c)| Op::RemoveMatching(v, c)),
    ]
}

fn apply(l: &mut List, m: &mut VecDeque<Vec<u8>>, op: &Op, fill: Fill) {
    match op {
        Op::PushFront(v) => {
            l.push_front(v, fill);
            m.push_front(v.clone());
        }
        Op::PushBack(v) => {
            l.push_back(v, fill);
            m.push_back(v.clone());
        }
        Op::PopFront => {
            assert_eq!(l.front().map(|e| e.to_vec()), m.front().cloned());
            assert_eq!(l.pop_front(), m.pop_front().is_some());
        }
        Op::PopBack => {
            assert_eq!(l.back().map(|e| e.to_vec()), m.back().cloned());
            assert_eq!(l.pop_back(), m.pop_back().is_some());
        }
        Op::Set(i, v) => {
            let ok = l.set(*i, v, fill);
            assert_eq!(ok, *i < m.len());
            if ok {
                m[*i] = v.clone();
            }
        }
        Op::Insert(i, v) => {
            let i = (*i).min(m.len());
            l.insert(i, v, fill);
            m.insert(i, v.clone());
        }
        Op::RemoveRange(a, n) => {
            l.remove_range(*a, *n, fill);
            if *a < m.len() {
                let n = (*n).min(m.len() - a);
                m.drain(*a..*a + n);
            }
        }
        Op::RemoveMatching(v, c) => {
            let got = l.remove_matching(&Needle::new(v), *c, fill);
            let mut want = 0;
            if *c >= 0 {
                let quota = if *c == 0 { usize::MAX } else { *c as usize };
                let mut out = VecDeque::new();
                for x in m.drain(..) {
                    if want < quota && x == *v {
                        want += 1;
                    } else {
                        out.push_back(x);
                    }
                }
                *m = out;
            } else {
                let quota = c.unsigned_abs() as usize;
                let mut out = VecDeque::new();
                for x in m.drain(..).rev() {
                    if want < quota && x == *v {
                        want += 1;
                    } else {
                        out.push_front(x);
                    }
                }
                *m = out;
            }
            assert_eq!(got, want);
        }
    }
}

fn show(v: &[Vec<u8>]) -> Vec<String> {
    v.iter()
        .map(|x| {
            if x.len() > 20 {
                format!("{}*{}", x[0] as char, x.len())
            } else {
                String::from_utf8_lossy(x).into_owned()
            }
        })
        .collect()
}

fn compare(l: &List, m: &VecDeque<Vec<u8>>, fill: Fill) {
    l.check(fill).unwrap();
    assert_eq!(l.len(), m.len());
    let all: Vec<Vec<u8>> = m.iter().cloned().collect();
    assert_eq!(show(&l.to_vecs()), show(&all));
    let rev: Vec<Vec<u8>> = l.iter_rev().map(|e| e.to_vec()).collect();
    let mut want_rev = all.clone();
    want_rev.reverse();
    assert_eq!(rev, want_rev);
    for i in [0, 1, m.len() / 2, m.len().saturating_sub(1), m.len()] {
        assert_eq!(l.get(i).map(|e| e.to_vec()), m.get(i).cloned());
        let fwd: Vec<Vec<u8>> = l.iter_from(i).take(3).map(|e| e.to_vec()).collect();
        let want: Vec<Vec<u8>> = m.iter().skip(i).take(3).cloned().collect();
        assert_eq!(fwd, want);
        if i < m.len() {
            let back: Vec<Vec<u8>> = l.iter_rev_from(i).take(3).map(|e| e.to_vec()).collect();
            let want: Vec<Vec<u8>> = m.iter().take(i + 1).rev().take(3).cloned().collect();
            assert_eq!(back, want);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matches_vecdeque_model(fill in prop_oneof![Just(1i64), Just(2), Just(3), Just(5), Just(0), Just(-1), Just(-2), Just(-5)],
                              ops in prop::collection::vec(op(), 1..150)) {
        let fill = Fill::new(fill);
        let mut l = List::new();
        let mut m = VecDeque::new();
        for o in &ops {
            apply(&mut l, &mut m, o, fill);
            l.check(fill).unwrap();
        }
        compare(&l, &m, fill);
        let c = l.clone();
        compare(&c, &m, fill);
    }
}

#[test]
fn large_list_nodes_and_positions() {
    let fill = Fill::default();
    let mut l = List::new();
    let mut m = VecDeque::new();
    for i in 0..20_000i64 {
        let v = if i % 3 == 0 {
            format!("element:{i}").into_bytes()
        } else {
            i.to_string().into_bytes()
        };
        if i % 2 == 0 {
            l.push_back(&v, fill);
            m.push_back(v);
        } else {
            l.push_front(&v, fill);
            m.push_front(v);
        }
    }
    assert!(l.node_count() > 5);
    compare(&l, &m, fill);
    for i in (0..20_000).step_by(997) {
        assert_eq!(l.get(i).unwrap().to_vec(), m[i]);
    }
    // Trim the middle away and check merging kept nodes reasonably full.
    l.remove_range(100, 19_000, fill);
    m.drain(100..19_100);
    compare(&l, &m, fill);
    assert!(l.node_count() <= 3, "{} nodes", l.node_count());
    while l.pop_back() {}
    assert!(l.is_empty());
}

#[test]
fn small_list_memory_is_one_node() {
    let fill = Fill::default();
    let mut l = List::new();
    for i in 0..10 {
        l.push_back(format!("value:{i:06}").as_bytes(), fill);
    }
    assert_eq!(l.node_count(), 1);
    // 10 entries of 1 + 12 + 1 bytes, in one jemalloc size class.
    assert_eq!(l.heap_size(), 160);
    assert!(std::mem::size_of::<List>() <= 32);
}

#[test]
fn fill_positive_counts_entries() {
    let fill = Fill::new(4);
    let mut l = List::new();
    for i in 0..17 {
        l.push_back(i.to_string().as_bytes(), fill);
    }
    assert_eq!(l.node_count(), 5);
    l.check(fill).unwrap();
    let fill0 = Fill::new(0);
    let mut l = List::new();
    for i in 0..5 {
        l.push_front(i.to_string().as_bytes(), fill0);
    }
    assert_eq!(l.node_count(), 5);
}
