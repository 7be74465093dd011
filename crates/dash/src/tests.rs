use super::*;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

fn key(i: u64) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

#[test]
fn send_sync() {
    fn is_send<T: Send>() {}
    fn is_sync<T: Sync>() {}
    is_send::<DashTable<Vec<u8>, String>>();
    is_sync::<DashTable<Vec<u8>, String>>();
}

#[test]
fn basic_insert_get_remove_replace() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    assert!(t.is_empty());
    assert_eq!(t.get(b"a"), None);
    assert_eq!(t.insert(b"a".to_vec(), 1), None);
    assert_eq!(t.insert(b"b".to_vec(), 2), None);
    assert_eq!(t.len(), 2);
    assert_eq!(
        t.get(b"a").map(|(k, v)| (k.clone(), *v)),
        Some((b"a".to_vec(), 1))
    );
    assert_eq!(t.insert(b"a".to_vec(), 10), Some(1));
    assert_eq!(t.len(), 2);
    *t.get_mut(b"b").unwrap().1 += 5;
    assert_eq!(*t.get(b"b").unwrap().1, 7);
    assert_eq!(t.remove(b"a"), Some((b"a".to_vec(), 10)));
    assert_eq!(t.remove(b"a"), None);
    assert_eq!(t.len(), 1);
    let p = t.find(b"b").unwrap();
    assert_eq!(t.at(p).0, &b"b".to_vec());
    *t.at_mut(p).1 = 99;
    assert_eq!(t.remove_at(p), (b"b".to_vec(), 99));
    assert!(t.is_empty());
    t.check_invariants();
}

#[test]
fn many_inserts_split_and_find() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    let n = 50_000;
    for i in 0..n {
        let k = key(i);
        assert!(t.find(&k).is_none());
        t.insert_new(k, i);
    }
    assert_eq!(t.len(), n as usize);
    assert!(t.segments() > 1);
    assert!(t.global_depth() > 0);
    t.check_invariants();
    for i in 0..n {
        assert_eq!(t.get(&key(i)).map(|(_, v)| *v), Some(i));
    }
    assert!(t.get(b"nope").is_none());
    for i in (0..n).step_by(2) {
        assert_eq!(t.remove(&key(i)).map(|(_, v)| v), Some(i));
    }
    t.check_invariants();
    for i in 0..n {
        assert_eq!(t.get(&key(i)).is_some(), i % 2 == 1);
    }
    assert_eq!(t.iter().count(), t.len());
    let lf = t.len() as f64 / t.capacity() as f64;
    assert!(lf > 0.2, "{lf}");
}

#[test]
fn flags_and_versions_survive_inserts_and_splits() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    let n = 20_000u64;
    for i in 0..n {
        let p = t.insert_new(key(i), i);
        assert_eq!(t.flags(p), 0);
        t.set_flags(p, (i % 4) as u8);
    }
    t.check_invariants();
    assert!(t.segments() > 4);
    for i in 0..n {
        let p = t.find(&key(i)).unwrap();
        assert_eq!(t.flags(p), (i % 4) as u8, "key {i}");
    }
    // Versions: set, then insert into the same buckets / force splits.
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    let p = t.insert_new(key(0), 0);
    t.set_flags(p, FLAG_A | FLAG_B);
    t.set_bucket_version(p, 42);
    assert_eq!(t.bucket_version(p), 42);
    for i in 1..30 {
        t.insert_new(key(i), i);
    }
    let p = t.find(&key(0)).unwrap();
    assert_eq!(t.flags(p), FLAG_A | FLAG_B);
    // Mark every bucket of every segment with a version, then split.
    for i in 30..5000 {
        t.insert_new(key(i), i);
    }
    let p = t.find(&key(0)).unwrap();
    assert_eq!(t.flags(p), FLAG_A | FLAG_B);
    // Clearing flags works and doesn't affect neighbours.
    t.set_flags(p, FLAG_B);
    assert_eq!(t.flags(p), FLAG_B);
    t.set_flags(p, 0);
    assert_eq!(t.flags(p), 0);
    // Removing resets the flags of a reused slot.
    let p = t.find(&key(1)).unwrap();
    t.set_flags(p, FLAG_A);
    t.remove_at(p);
    let p2 = t.insert_new(key(1), 1);
    assert_eq!(t.flags(p2), 0);
    t.check_invariants();
}

/// Access bytes stay with their entry through displacements and splits. Each bucket's clock
/// is the entry's "time" base: with a rebase that keeps `byte + clock` (a toy absolute time),
/// every entry's time survives whatever moves it.
#[test]
fn access_bytes_move_with_their_entries() {
    fn keep_sum(a: u8, from: u32, to: u32) -> u8 {
        (a as i64 + from as i64 - to as i64).clamp(0, 255) as u8
    }
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    t.set_rebase(keep_sum);
    let n = 20_000u64;
    // Times 1000..1100, bucket clocks 950..1000: bytes stay within 1..=149 in every bucket.
    let time = |i: u64| 1000 + (i % 100) as u32;
    for i in 0..n {
        let p = t.insert_new(key(i), i);
        assert_eq!(t.access(p).0, 0, "a new slot's byte is 0");
        // Give the bucket a clock when it has none yet, then express the entry's time.
        let b = p.bucket_id();
        let (clock, bytes, busy) = t.bucket_access_mut(b);
        if busy == 1 << p.slot() {
            *clock = 950 + (i % 50) as u32;
        }
        bytes[p.slot()] = (time(i) - *clock) as u8;
    }
    t.check_invariants();
    assert!(t.segments() > 4);
    for i in 0..n {
        let p = t.find(&key(i)).unwrap();
        let (a, clock) = t.access(p);
        assert_eq!(a as u32 + clock, time(i), "key {i}");
    }
}

#[test]
fn version_carried_on_split() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    let p = t.insert_new(key(0), 0);
    t.set_bucket_version(p, 7);
    let b = p.bucket();
    // Grow until the entry's segment has been split.
    let mut i = 1;
    while t.segments() < 2 {
        t.insert_new(key(i), i);
        i += 1;
    }
    let p = t.find(&key(0)).unwrap();
    if p.bucket() == b {
        assert_eq!(t.bucket_version(p), 7);
    }
}

#[test]
#[should_panic]
fn at_invalid_pos_panics() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    let p = t.insert_new(key(0), 0);
    t.remove_at(p);
    let _ = t.at(p);
}

#[test]
fn clear_shrinks() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    for i in 0..10_000 {
        t.insert_new(key(i), i);
    }
    assert!(t.segments() > 1);
    t.clear();
    assert_eq!(t.len(), 0);
    assert_eq!(t.segments(), 1);
    assert_eq!(t.global_depth(), 0);
    assert!(t.get(&key(5)).is_none());
    assert_eq!(t.iter().count(), 0);
    assert_eq!(t.random_pos(123), None);
    t.insert_new(key(5), 5);
    assert_eq!(*t.get(&key(5)).unwrap().1, 5);
    t.check_invariants();
}

// ---- drop counting ----

#[derive(Default)]
struct Tracker {
    live: HashSet<u64>,
    next: u64,
    drops: u64,
}

type Tr = Rc<RefCell<Tracker>>;

struct DK {
    bytes: Vec<u8>,
    id: u64,
    tr: Tr,
}

struct DV {
    val: u64,
    id: u64,
    tr: Tr,
}

fn new_id(tr: &Tr) -> u64 {
    let mut t = tr.borrow_mut();
    let id = t.next;
    t.next += 1;
    t.live.insert(id);
    id
}

impl DK {
    fn new(tr: &Tr, i: u64) -> Self {
        DK {
            bytes: key(i),
            id: new_id(tr),
            tr: tr.clone(),
        }
    }
}

impl DV {
    fn new(tr: &Tr, val: u64) -> Self {
        DV {
            val,
            id: new_id(tr),
            tr: tr.clone(),
        }
    }
}

impl Drop for DK {
    fn drop(&mut self) {
        let mut t = self.tr.borrow_mut();
        assert!(t.live.remove(&self.id), "double drop of key {}", self.id);
        t.drops += 1;
    }
}

impl Drop for DV {
    fn drop(&mut self) {
        let mut t = self.tr.borrow_mut();
        assert!(t.live.remove(&self.id), "double drop of value {}", self.id);
        t.drops += 1;
    }
}

impl TableKey for DK {
    fn key_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

fn live(tr: &Tr) -> usize {
    tr.borrow().live.len()
}

#[test]
fn drop_counting() {
    let tr: Tr = Rc::default();
    {
        let mut t: DashTable<DK, DV> = DashTable::new();
        // Inserts with splits.
        for i in 0..5000 {
            t.insert_new(DK::new(&tr, i), DV::new(&tr, i));
        }
        assert!(t.segments() > 1);
        assert_eq!(live(&tr), 10_000);
        // Replace: old value returned, new key dropped.
        let old = t.insert(DK::new(&tr, 7), DV::new(&tr, 700)).unwrap();
        assert_eq!(old.val, 7);
        assert_eq!(live(&tr), 10_001);
        drop(old);
        assert_eq!(live(&tr), 10_000);
        assert_eq!(t.get(&key(7)).unwrap().1.val, 700);
        // Remove.
        let (k, v) = t.remove(&key(8)).unwrap();
        assert_eq!(k.bytes, key(8));
        drop((k, v));
        assert_eq!(live(&tr), 9_998);
        // Retain.
        t.retain(|_, v| v.val % 2 == 0 || v.val == 700);
        assert_eq!(live(&tr), 2 * t.len());
        t.check_invariants();
        // Clear.
        t.clear();
        assert_eq!(live(&tr), 0);
        for i in 0..3000 {
            t.insert_new(DK::new(&tr, i), DV::new(&tr, i));
        }
        assert_eq!(live(&tr), 6000);
    }
    // Table drop.
    assert_eq!(live(&tr), 0);
    let t = tr.borrow();
    assert_eq!(t.drops, t.next);
}

// ---- scan ----

fn full_scan(t: &DashTable<Vec<u8>, u64>) -> (Vec<Vec<u8>>, usize) {
    let mut out = Vec::new();
    let mut cur = 0;
    let mut steps = 0;
    loop {
        cur = t.scan(cur, |_, k, _| out.push(k.clone()));
        steps += 1;
        assert!(cur < (1 << 56));
        if cur == 0 {
            break;
        }
        assert!(steps < 10_000_000);
    }
    (out, steps)
}

fn scan_unchanged_with<const B: usize>() {
    for n in [0u64, 1, 100, 1000, 30_000] {
        let mut t: DashTable<Vec<u8>, u64, B> = DashTable::new();
        for i in 0..n {
            t.insert_new(key(i), i);
        }
        let mut out = Vec::new();
        let mut cur = 0;
        let mut steps = 0;
        loop {
            cur = t.scan(cur, |_, k, _| out.push(k.clone()));
            steps += 1;
            assert!(cur < (1 << 56));
            if cur == 0 {
                break;
            }
        }
        assert_eq!(out.len() as u64, n, "no duplicates on a stable table");
        let set: HashSet<_> = out.into_iter().collect();
        assert_eq!(set.len() as u64, n);
        // One step per (home bucket, segment).
        assert_eq!(steps, (B - STASH_BUCKETS) * t.segments());
        t.check_invariants();
    }
}

#[test]
fn scan_unchanged_table_returns_every_key_once() {
    scan_unchanged_with::<DEFAULT_BUCKETS>();
    scan_unchanged_with::<66>();
    scan_unchanged_with::<MIN_BUCKETS>();
    scan_unchanged_with::<MAX_BUCKETS>();
    let (_, steps) = full_scan(&DashTable::new());
    assert_eq!(steps, REGULAR_BUCKETS);
}

// ---- geometry ----

#[test]
fn segment_size_matches_layout() {
    fn check<K, V, const B: usize>() {
        let (size, align) = (size_of::<(K, V)>(), std::mem::align_of::<(K, V)>());
        assert_eq!(
            size_of::<Segment<K, V, B>>(),
            segment_size(B, size, align),
            "B={B} entry={size}/{align}"
        );
    }
    check::<Vec<u8>, u64, 59>();
    check::<[u64; 2], u64, 66>();
    check::<u8, u8, 6>();
    check::<[u8; 3], u8, 100>();
    check::<Box<[u8]>, (), 255>();
    #[repr(align(64))]
    struct Wide(#[allow(dead_code)] [u8; 64]);
    check::<Wide, u64, 7>();
    check::<Wide, u64, 40>();
}

#[test]
fn buckets_for_fills_the_size_class() {
    // 32-byte entries keep the default geometry (28,224 bytes in the 28 KiB class).
    assert_eq!(buckets_for::<Vec<u8>, u64>(), DEFAULT_BUCKETS);
    assert_eq!(
        size_of::<Segment<Vec<u8>, u64, DEFAULT_BUCKETS>>(),
        28 * 1024
    );
    // 24-byte entries (KeyStr + 8-byte value): 55 buckets would take 22,072 bytes of a 24 KiB
    // block; 61 fill it.
    assert_eq!(buckets_for::<[u64; 2], u64>(), 61);
    assert!(size_of::<Segment<[u64; 2], u64, 61>>() <= 24 * 1024);
    assert!(segment_size(62, 24, 8) > 24 * 1024);
    for (size, class) in [
        (1, 4096),
        (4096, 4096),
        (4097, 8192),
        (16 * 1024, 16 * 1024),
        (16 * 1024 + 1, 20 * 1024),
        (28 * 1024 + 1, 32 * 1024),
        (32 * 1024 + 1, 40 * 1024),
        (60 * 1024, 64 * 1024),
        (64 * 1024 + 1, 80 * 1024),
    ] {
        assert_eq!(size_class(size), class, "{size}");
    }
    // Never larger than the default geometry's class, never out of range.
    fn check<K, V>() {
        let b = buckets_for::<K, V>();
        let (size, align) = (size_of::<(K, V)>(), std::mem::align_of::<(K, V)>());
        assert!((DEFAULT_BUCKETS..=MAX_BUCKETS).contains(&b));
        assert_eq!(
            size_class(segment_size(b, size, align)),
            size_class(segment_size(DEFAULT_BUCKETS, size, align))
        );
    }
    check::<u8, ()>();
    check::<u64, u64>();
    check::<[u64; 2], u64>();
    check::<Vec<u8>, Vec<u8>>();
    check::<[u8; 200], u64>();
}

#[test]
fn non_default_geometry_drops_and_splits() {
    let tr: Tr = Rc::default();
    {
        let mut t: DashTable<DK, DV, 66> = DashTable::new();
        for i in 0..5000 {
            t.insert_new(DK::new(&tr, i), DV::new(&tr, i));
        }
        assert!(t.segments() > 1);
        assert_eq!(t.capacity(), t.segments() * 66 * SLOTS);
        for i in (0..5000).step_by(3) {
            drop(t.remove(&key(i)).unwrap());
        }
        t.check_invariants();
        for i in 0..5000 {
            assert_eq!(
                t.get(&key(i)).map(|(_, v)| v.val),
                (i % 3 != 0).then_some(i)
            );
        }
        assert_eq!(live(&tr), 2 * t.len());
    }
    assert_eq!(live(&tr), 0);
}

#[test]
fn scan_positions_are_valid() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    for i in 0..5000 {
        t.insert_new(key(i), i);
    }
    let mut cur = 0;
    loop {
        let mut ps = Vec::new();
        cur = t.scan(cur, |p, k, v| ps.push((p, k.clone(), *v)));
        for (p, k, v) in ps {
            assert_eq!(t.at(p), (&k, &v));
        }
        if cur == 0 {
            break;
        }
    }
}

#[test]
fn scan_with_growth_between_steps() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    let stable: Vec<u64> = (0..3000).collect();
    for &i in &stable {
        t.insert_new(key(i), i);
    }
    // Volatile keys, some removed during the scan.
    let mut next = 1_000_000u64;
    let mut volatile = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = 0;
    let depth0 = t.global_depth();
    let mut steps = 0;
    loop {
        cur = t.scan(cur, |_, k, _| {
            seen.insert(k.clone());
        });
        steps += 1;
        if cur == 0 {
            break;
        }
        for _ in 0..40 {
            t.insert_new(key(next), next);
            volatile.push(next);
            next += 1;
        }
        if steps % 3 == 0 {
            for _ in 0..10 {
                if let Some(v) = volatile.pop() {
                    t.remove(&key(v)).unwrap();
                }
            }
        }
    }
    assert!(
        t.global_depth() >= depth0 + 3,
        "scan must see several doublings"
    );
    for &i in &stable {
        assert!(seen.contains(&key(i)), "stable key {i} missed");
    }
    t.check_invariants();
}

// ---- random_pos ----

#[test]
fn random_pos_valid_and_covers_segments() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    assert_eq!(t.random_pos(1), None);
    for i in 0..20_000 {
        t.insert_new(key(i), i);
    }
    for i in (0..20_000).filter(|i| i % 3 != 0) {
        t.remove(&key(i));
    }
    let mut segs = HashSet::new();
    let mut keys = HashSet::new();
    let mut x = 0x1234_5678_9abc_def0u64;
    for _ in 0..50_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let p = t.random_pos(x).unwrap();
        let (k, _) = t.at(p);
        assert!(t.find(k).is_some());
        segs.insert(p.segment());
        keys.insert(k.clone());
    }
    assert_eq!(segs.len(), t.segments());
    assert!(keys.len() > t.len() / 2, "{} of {}", keys.len(), t.len());
    // Single entry table.
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    t.insert_new(key(1), 1);
    for r in 0..100u64 {
        assert_eq!(
            t.at(t.random_pos(r.wrapping_mul(0x9e37_79b9_7f4a_7c15)).unwrap())
                .1,
            &1
        );
    }
}

#[test]
fn iter_and_retain() {
    let mut t: DashTable<Vec<u8>, u64> = DashTable::new();
    for i in 0..10_000 {
        t.insert_new(key(i), i);
    }
    let mut m: HashMap<Vec<u8>, u64> = t.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!(m.len(), 10_000);
    t.retain(|_, v| {
        *v += 1;
        *v % 3 == 0
    });
    m.retain(|_, v| (*v + 1) % 3 == 0);
    assert_eq!(t.len(), m.len());
    for (k, v) in &m {
        assert_eq!(*t.get(k).unwrap().1, v + 1);
    }
    t.check_invariants();
}

#[test]
fn box_key() {
    let mut t: DashTable<Box<[u8]>, ()> = DashTable::default();
    t.insert(Box::from(&b"x"[..]), ());
    assert!(t.get(b"x").is_some());
    assert!(t.mem_usage() > 0);
}

#[test]
fn swar_match_bytes() {
    let mut x = 0x1234_5678_9abc_def1u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut bytes = x.to_le_bytes();
        // Force some matches and near-misses (differing in one bit).
        let b = (x >> 56) as u8;
        bytes[(x % 8) as usize] = b;
        bytes[((x >> 3) % 8) as usize] = b ^ 0x80;
        bytes[((x >> 6) % 8) as usize] = b ^ 1;
        let w = u64::from_le_bytes(bytes);
        for probe in [b, b ^ 1, b ^ 0x80, 0, 0xff] {
            let mut want = 0u16;
            for (i, &c) in bytes.iter().enumerate() {
                want |= ((c == probe) as u16) << i;
            }
            assert_eq!(match_bytes(w, probe), want, "{bytes:?} {probe}");
        }
    }
    assert_eq!(match_bytes(0, 0), 0xff);
    assert_eq!(match_bytes(u64::MAX, 0xff), 0xff);
    assert_eq!(match_bytes(0x8080_8080_8080_8080, 0), 0);
}

/// The snapshot protocol the server builds on these primitives (persistence/snapshot.rs): walk
/// buckets in physical order, writing each whose version is older than the snapshot's (entries
/// flagged SAVED excepted) and clearing its flags; before an entry of such a bucket changes or
/// goes, write that entry alone and flag it SAVED; before an insert, write every bucket
/// `insert_buckets` names, and flag the new entry SAVED (not part of the snapshot) when it
/// lands in a bucket not yet written. Under random inserts (splits, displacement, stash),
/// removals and updates interleaved with the walk, the result must be exactly the table as it
/// was when the snapshot began, and no flag may be left behind.
fn versioned_snapshot_run<const B: usize>(seed: u64, keys: u64, ops_per_step: usize) {
    const SAVED: u8 = FLAG_B;
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut t: DashTable<Vec<u8>, u64, B> = DashTable::new();
    for i in 0..keys {
        t.insert(key(i), i);
        // FLAG_A belongs to someone else (expiry in the server): it must survive.
        if i % 7 == 0 {
            let p = t.find(&key(i)).unwrap();
            t.set_flags(p, FLAG_A);
        }
    }
    let expected: HashMap<Vec<u8>, u64> = t.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let version = 1;
    let mut out: Vec<(Vec<u8>, u64)> = Vec::new();
    let write_bucket = |t: &mut DashTable<Vec<u8>, u64, B>, b: BucketId, out: &mut Vec<_>| {
        if t.version_of(b) < version {
            let mut got = Vec::new();
            t.bucket_entries(b, |p, k, v| {
                if t.flags(p) & SAVED == 0 {
                    got.push((k.clone(), *v));
                }
            });
            out.extend(got);
            t.clear_bucket_flags(b, SAVED);
            t.set_version_of(b, version);
        }
    };
    let write_entry = |t: &mut DashTable<Vec<u8>, u64, B>, p: Pos, out: &mut Vec<_>| {
        if t.version_of(p.bucket_id()) < version && t.flags(p) & SAVED == 0 {
            let (k, v) = t.at(p);
            out.push((k.clone(), *v));
            let f = t.flags(p);
            t.set_flags(p, f | SAVED);
        }
    };
    let mut cursor = Some(BucketId::FIRST);
    let mut fresh = keys;
    while let Some(b) = cursor {
        write_bucket(&mut t, b, &mut out);
        cursor = t.next_bucket_id(b);
        for _ in 0..ops_per_step {
            match next() % 3 {
                0 => {
                    let k = key(fresh + 1_000_000 * (next() % 2));
                    fresh += 1;
                    if t.find(&k).is_none() {
                        let mut touched = Vec::new();
                        t.insert_buckets(hash_key(&k), |b| touched.push(b));
                        for b in touched {
                            write_bucket(&mut t, b, &mut out);
                        }
                        let p = t.insert_new(k, u64::MAX);
                        if t.version_of(p.bucket_id()) < version {
                            t.set_flags(p, SAVED);
                        }
                    }
                }
                1 => {
                    if let Some(p) = t.find(&key(next() % keys)) {
                        write_entry(&mut t, p, &mut out);
                        t.remove_at(p);
                    }
                }
                _ => {
                    if let Some(p) = t.find(&key(next() % keys)) {
                        write_entry(&mut t, p, &mut out);
                        *t.at_mut(p).1 += 1_000_000_000;
                    }
                }
            }
        }
    }
    t.check_invariants();
    let got: HashMap<Vec<u8>, u64> = out.iter().cloned().collect();
    assert_eq!(
        got.len(),
        out.len(),
        "an entry was written twice (seed {seed})"
    );
    assert_eq!(
        got, expected,
        "snapshot differs from the table at its start (seed {seed})"
    );
    for (k, _) in t.iter() {
        let p = t.find(k).unwrap();
        assert_eq!(
            t.flags(p) & SAVED,
            0,
            "a SAVED flag was left behind (seed {seed})"
        );
        let i: Option<u64> = std::str::from_utf8(&k[4..])
            .ok()
            .and_then(|s| s.parse().ok());
        if let Some(i) = i.filter(|&i| i < keys) {
            assert_eq!(
                t.flags(p) & FLAG_A != 0,
                i % 7 == 0,
                "FLAG_A changed (seed {seed})"
            );
        }
    }
}

#[test]
fn versioned_snapshot_is_point_in_time() {
    for seed in 1..40 {
        // Tiny segments: splits, displacements and the stash all happen constantly.
        versioned_snapshot_run::<{ MIN_BUCKETS }>(seed, 300, 3);
        versioned_snapshot_run::<16>(seed, 2000, 1);
        versioned_snapshot_run::<DEFAULT_BUCKETS>(seed, 5000, 2);
    }
}

#[test]
fn insert_buckets_cover_every_move() {
    // Every entry that an insert moves comes from and goes to buckets insert_buckets named.
    let mut t: DashTable<Vec<u8>, u64, 16> = DashTable::new();
    for i in 0..3000u64 {
        let k = key(i);
        let mut named = HashSet::new();
        t.insert_buckets(hash_key(&k), |b| {
            named.insert(b);
        });
        let before: HashMap<Vec<u8>, BucketId> = t
            .iter()
            .map(|(k, _)| (k.clone(), t.find(k).unwrap().bucket_id()))
            .collect();
        let segs = t.segments();
        t.insert_new(k.clone(), i);
        for (k2, b0) in before {
            let b1 = t.find(&k2).unwrap().bucket_id();
            if b1 != b0 {
                assert!(named.contains(&b0), "entry moved out of an unnamed bucket");
                if t.segments() == segs {
                    assert!(named.contains(&b1), "entry moved into an unnamed bucket");
                }
            }
        }
    }
}
