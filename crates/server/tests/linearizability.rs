//! Atomicity of multi-key operations across shards (the acceptance test of "Atomic multi-key
//! operations across shards"): a server with 4 shard threads, many concurrent clients, and
//! invariants that any interleaving of *atomic* operations preserves but a half-applied one
//! breaks:
//!
//! (a) MULTI/EXEC transfers between counters on different shards: the sum never changes;
//! (b) MSET of related keys to one value: MGET never sees two values (half an MSET);
//! (c) RENAME chains across shards: exactly one of the keys exists at any time;
//! (d) WATCH-based optimistic increments: final value == number of successful EXECs.
//!
//! Every reply has a read timeout: a stuck transaction (deadlock) fails the test with a clear
//! message instead of hanging CI.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{RawConn, Resp, Server};
use damselfly::engine::shard_of;

const THREADS: usize = 4;
const PHASE: Duration = Duration::from_millis(1200);
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

struct Client {
    c: RawConn,
    role: String,
}

impl Client {
    fn new(srv: &Server, role: &str) -> Client {
        let c = srv.raw_conn();
        c.stream.set_read_timeout(Some(REPLY_TIMEOUT)).ok();
        Client {
            c,
            role: role.to_string(),
        }
    }

    fn cmd<S: AsRef<[u8]>>(&mut self, args: &[S]) -> Resp {
        self.c.send(args);
        match self.c.try_read() {
            Ok(r) => r,
            Err(e) => {
                let shown: Vec<String> = args
                    .iter()
                    .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
                    .collect();
                panic!(
                    "{}: no reply to {:?} within {REPLY_TIMEOUT:?} (deadlock or lost reply?): {e}",
                    self.role, shown
                )
            }
        }
    }

    fn q(&mut self, line: &str) -> Resp {
        let args: Vec<&str> = line.split_whitespace().collect();
        self.cmd(&args)
    }
}

/// `n` keys `{prefix}{i}` covering every shard round-robin.
fn spread_keys(prefix: &str, n: usize) -> Vec<String> {
    let mut per: Vec<Vec<String>> = vec![Vec::new(); THREADS];
    let mut i = 0;
    while per.iter().map(|v| v.len()).sum::<usize>() < n {
        let k = format!("{prefix}{i}");
        let s = shard_of(k.as_bytes(), THREADS);
        let want = n.div_ceil(THREADS);
        if per[s].len() < want {
            per[s].push(k);
        }
        i += 1;
    }
    let mut out = Vec::with_capacity(n);
    for r in 0.. {
        for v in per.iter() {
            if let Some(k) = v.get(r) {
                if out.len() < n {
                    out.push(k.clone());
                }
            }
        }
        if out.len() == n {
            break;
        }
    }
    out
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn int_of(r: &Resp) -> i64 {
    match r {
        Resp::Bulk(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an integer: {r}")),
        Resp::Int(i) => *i,
        other => panic!("not an integer: {other}"),
    }
}

/// Runs `writers` and `readers` closures on their own threads for `PHASE`; returns
/// (writer ops, reader ops). Any panic in a thread fails the test with its message.
fn run_phase<W, R>(name: &str, writers: usize, readers: usize, w: W, r: R) -> (u64, u64)
where
    W: Fn(usize, &AtomicBool) -> u64 + Send + Sync + 'static,
    R: Fn(usize, &AtomicBool) -> u64 + Send + Sync + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let w = Arc::new(w);
    let r = Arc::new(r);
    let mut hs = Vec::new();
    for i in 0..writers {
        let (w, stop) = (w.clone(), stop.clone());
        hs.push((true, thread::spawn(move || w(i, &stop))));
    }
    for i in 0..readers {
        let (r, stop) = (r.clone(), stop.clone());
        hs.push((false, thread::spawn(move || r(i, &stop))));
    }
    thread::sleep(PHASE);
    stop.store(true, Ordering::Relaxed);
    let (mut wo, mut ro) = (0, 0);
    let mut failures = Vec::new();
    for (is_writer, h) in hs {
        match h.join() {
            Ok(n) if is_writer => wo += n,
            Ok(n) => ro += n,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(msg);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "phase {name}: {} thread(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("phase {name}: {wo} writer ops, {ro} reader checks, 0 violations");
    assert!(wo > 0 && ro > 0, "phase {name} made no progress");
    (wo, ro)
}

#[test]
fn multi_key_operations_are_atomic_across_shards() {
    let srv = Arc::new(Server::start(&["--proactor_threads=4"]));
    let t0 = Instant::now();

    // (a) Transfers inside MULTI/EXEC; readers check the total with MGET and with a read-only
    // transaction.
    const ACCTS: usize = 8;
    const INITIAL: i64 = 1000;
    let accts = spread_keys("acct:", ACCTS);
    {
        let mut c = Client::new(&srv, "setup");
        let mut mset = vec!["MSET".to_string()];
        for a in &accts {
            mset.push(a.clone());
            mset.push(INITIAL.to_string());
        }
        assert_eq!(c.cmd(&mset), common::ok());
    }
    let total = INITIAL * ACCTS as i64;
    let (s1, a1, a2) = (srv.clone(), accts.clone(), accts.clone());
    let s2 = srv.clone();
    run_phase(
        "transfers",
        8,
        4,
        move |id, stop| {
            let mut c = Client::new(&s1, &format!("transfer writer {id}"));
            let mut rng = Rng(0x9E37_79B9 + id as u64);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let i = rng.below(ACCTS);
                let j = (i + 1 + rng.below(ACCTS - 1)) % ACCTS;
                let amt = (1 + rng.below(50)).to_string();
                assert_eq!(c.q("MULTI"), common::ok());
                assert_eq!(
                    c.cmd(&["DECRBY", &a1[i], &amt]),
                    Resp::Simple(b"QUEUED".to_vec())
                );
                assert_eq!(
                    c.cmd(&["INCRBY", &a1[j], &amt]),
                    Resp::Simple(b"QUEUED".to_vec())
                );
                match c.q("EXEC") {
                    Resp::Array(v) if v.len() == 2 && v.iter().all(|x| x.as_int().is_some()) => {}
                    other => panic!("transfer EXEC: {other}"),
                }
                n += 1;
            }
            n
        },
        move |id, stop| {
            let mut c = Client::new(&s2, &format!("transfer reader {id}"));
            let mut mget = vec!["MGET".to_string()];
            mget.extend(a2.iter().cloned());
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = c.cmd(&mget);
                let Resp::Array(v) = &r else {
                    panic!("MGET: {r}")
                };
                let sum: i64 = v.iter().map(int_of).sum();
                assert_eq!(
                    sum, total,
                    "reader {id}: MGET saw a half-applied transfer: {r}"
                );
                if id % 2 == 1 {
                    // The same check through a read-only transaction.
                    assert_eq!(c.q("MULTI"), common::ok());
                    for a in a2.iter() {
                        assert_eq!(c.cmd(&["GET", a]), Resp::Simple(b"QUEUED".to_vec()));
                    }
                    let r = c.q("EXEC");
                    let Resp::Array(v) = &r else {
                        panic!("EXEC: {r}")
                    };
                    let sum: i64 = v.iter().map(int_of).sum();
                    assert_eq!(
                        sum, total,
                        "reader {id}: EXEC of GETs saw a half-applied transfer: {r}"
                    );
                }
                n += 1;
            }
            n
        },
    );

    // (b) MSET of related keys to one value; MGET must never see a mix.
    let group = spread_keys("grp:", 8);
    let (s1, g1, g2) = (srv.clone(), group.clone(), group.clone());
    let s2 = srv.clone();
    run_phase(
        "mset",
        8,
        4,
        move |id, stop| {
            let mut c = Client::new(&s1, &format!("mset writer {id}"));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let v = format!("w{id}-{n}");
                let mut args = vec!["MSET".to_string()];
                for k in &g1 {
                    args.push(k.clone());
                    args.push(v.clone());
                }
                assert_eq!(c.cmd(&args), common::ok());
                n += 1;
            }
            n
        },
        move |id, stop| {
            let mut c = Client::new(&s2, &format!("mset reader {id}"));
            let mut mget = vec!["MGET".to_string()];
            mget.extend(g2.iter().cloned());
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = c.cmd(&mget);
                let Resp::Array(v) = &r else {
                    panic!("MGET: {r}")
                };
                assert!(
                    v.windows(2).all(|w| w[0] == w[1]),
                    "reader {id}: MGET saw half an MSET: {r}"
                );
                n += 1;
            }
            n
        },
    );

    // (c) A value moving along a RENAME chain across shards; exactly one key exists.
    const CHAIN: usize = 10;
    let chain = spread_keys("ring:", CHAIN);
    {
        let mut c = Client::new(&srv, "setup");
        assert_eq!(c.cmd(&["SET", &chain[0], "token"]), common::ok());
    }
    let (s1, c1, c2) = (srv.clone(), chain.clone(), chain.clone());
    let s2 = srv.clone();
    let renames = Arc::new(AtomicU64::new(0));
    let renames2 = renames.clone();
    run_phase(
        "rename",
        8,
        4,
        move |id, stop| {
            let mut c = Client::new(&s1, &format!("rename writer {id}"));
            let mut rng = Rng(0xABCD_EF01 + id as u64);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let i = rng.below(CHAIN);
                match c.cmd(&["RENAME", &c1[i], &c1[(i + 1) % CHAIN]]) {
                    Resp::Simple(s) if s == b"OK" => {
                        renames2.fetch_add(1, Ordering::Relaxed);
                    }
                    Resp::Error(e) if e == b"ERR no such key" => {}
                    other => panic!("RENAME: {other}"),
                }
                n += 1;
            }
            n
        },
        move |id, stop| {
            let mut c = Client::new(&s2, &format!("rename reader {id}"));
            let mut exists = vec!["EXISTS".to_string()];
            exists.extend(c2.iter().cloned());
            let mut mget = vec!["MGET".to_string()];
            mget.extend(c2.iter().cloned());
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = c.cmd(&exists);
                assert_eq!(r, Resp::Int(1), "reader {id}: EXISTS over the chain");
                let r = c.cmd(&mget);
                let Resp::Array(v) = &r else {
                    panic!("MGET: {r}")
                };
                let live: Vec<&Resp> = v.iter().filter(|x| **x != Resp::Nil).collect();
                assert_eq!(live.len(), 1, "reader {id}: MGET over the chain: {r}");
                assert_eq!(live[0], &common::bulk("token"));
                n += 1;
            }
            n
        },
    );
    eprintln!(
        "rename: {} successful renames",
        renames.load(Ordering::Relaxed)
    );

    // (d) Optimistic increments with WATCH over two keys on different shards.
    let pair = spread_keys("opt:", 2);
    assert_ne!(
        shard_of(pair[0].as_bytes(), THREADS),
        shard_of(pair[1].as_bytes(), THREADS)
    );
    let wins = Arc::new(AtomicU64::new(0));
    let aborts = Arc::new(AtomicU64::new(0));
    let (s1, p1, w1, ab1) = (srv.clone(), pair.clone(), wins.clone(), aborts.clone());
    let (s2, p2) = (srv.clone(), pair.clone());
    run_phase(
        "watch",
        6,
        2,
        move |id, stop| {
            let mut c = Client::new(&s1, &format!("watch writer {id}"));
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                assert_eq!(c.cmd(&["WATCH", &p1[0], &p1[1]]), common::ok());
                let r = c.cmd(&["MGET", &p1[0], &p1[1]]);
                let Resp::Array(v) = &r else {
                    panic!("MGET: {r}")
                };
                let cur = |x: &Resp| if *x == Resp::Nil { 0 } else { int_of(x) };
                let (a, b) = (cur(&v[0]), cur(&v[1]));
                assert_eq!(a, b, "watch writer {id}: the pair diverged: {r}");
                let next = (a + 1).to_string();
                assert_eq!(c.q("MULTI"), common::ok());
                assert_eq!(
                    c.cmd(&["SET", &p1[0], &next]),
                    Resp::Simple(b"QUEUED".to_vec())
                );
                assert_eq!(
                    c.cmd(&["SET", &p1[1], &next]),
                    Resp::Simple(b"QUEUED".to_vec())
                );
                match c.q("EXEC") {
                    Resp::Array(v) if v.len() == 2 => {
                        w1.fetch_add(1, Ordering::Relaxed);
                    }
                    Resp::NilArray => {
                        ab1.fetch_add(1, Ordering::Relaxed);
                    }
                    other => panic!("watch EXEC: {other}"),
                }
                n += 1;
            }
            n
        },
        move |id, stop| {
            let mut c = Client::new(&s2, &format!("watch reader {id}"));
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let r = c.cmd(&["MGET", &p2[0], &p2[1]]);
                let Resp::Array(v) = &r else {
                    panic!("MGET: {r}")
                };
                assert_eq!(v[0], v[1], "watch reader {id}: the pair diverged: {r}");
                n += 1;
            }
            n
        },
    );
    let mut c = Client::new(&srv, "final check");
    let w = wins.load(Ordering::Relaxed) as i64;
    let r = c.cmd(&["MGET", &pair[0], &pair[1]]);
    let Resp::Array(v) = &r else {
        panic!("MGET: {r}")
    };
    assert_eq!(int_of(&v[0]), w, "final value vs successful EXECs: {r}");
    assert_eq!(int_of(&v[1]), w, "final value vs successful EXECs: {r}");
    eprintln!(
        "watch: {w} successful EXECs, {} aborted by WATCH",
        aborts.load(Ordering::Relaxed)
    );
    // The transfers' total survived too.
    let mut mget = vec!["MGET".to_string()];
    mget.extend(accts.iter().cloned());
    let Resp::Array(v) = c.cmd(&mget) else {
        panic!("MGET")
    };
    assert_eq!(v.iter().map(int_of).sum::<i64>(), total);
    eprintln!("linearizability: all phases in {:?}", t0.elapsed());
}
