//! The load-generation engine: one current-thread tokio runtime per thread,
//! `clients` connections per thread, each keeping `pipeline` requests in flight.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::keys::{slice_for, KeyGen, Rng};
use crate::opts::{BenchOpts, KeyPattern, Protocol, Requests};
use crate::proto::{self, ReplyKind, Template};

/// Highest latency the histograms track (60 s, in ns); larger values saturate.
const HIST_MAX_NS: u64 = 60_000_000_000;

pub fn new_hist() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

/// What a report row counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    Set,
    Get,
    Command,
}

/// Accumulated results of one row (Sets, Gets, or one --command template).
#[derive(Clone, Debug)]
pub struct RowStats {
    pub label: String,
    pub kind: RowKind,
    pub ops: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub bytes: u64,
    pub hist: Histogram<u64>,
}

impl RowStats {
    fn new(label: &str, kind: RowKind) -> Self {
        RowStats {
            label: label.to_string(),
            kind,
            ops: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            bytes: 0,
            hist: new_hist(),
        }
    }

    fn merge(&mut self, o: &RowStats) {
        self.ops += o.ops;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.bytes += o.bytes;
        // Same bounds on both sides, so add cannot fail.
        let _ = self.hist.add(&o.hist);
    }
}

/// Final result of a run.
#[derive(Debug)]
pub struct RunResult {
    pub rows: Vec<RowStats>,
    pub duration: Duration,
    pub start_unix_ms: u128,
    /// The first error reply seen, if any.
    pub first_error_reply: Option<String>,
}

/// Everything clients share, immutable during the run.
struct Plan {
    protocol: Protocol,
    addr: String,
    pipeline: usize,
    /// `--rate-limiting`: (requests granted per interval, interval).
    rate: Option<(u64, Duration)>,
    eager_writes: bool,
    /// Mirror memtier's extra per-request system calls (`--client-syscalls memtier`).
    libevent_calls: bool,
    limit: Option<u64>,
    allkeys: bool,
    total_clients: u64,
    key_prefix: Vec<u8>,
    key_min: u64,
    key_max: u64,
    key_median: Option<f64>,
    key_stddev: Option<f64>,
    set_pattern: KeyPattern,
    get_pattern: KeyPattern,
    cmd_pattern: KeyPattern,
    ratio_set: u32,
    ratio_get: u32,
    templates: Vec<Template>,
    schedule: Vec<usize>,
    batch: usize,
    /// memcache text protocol with `--batch N > 1` and no template: every GET is a multi-key
    /// `get k1 ... kN` (SETs stay single-key; memcache has no multi-set).
    mc_multiget: bool,
    data: Vec<u8>,
    data_min: usize,
    data_max: usize,
    expiry: Option<(u64, u64)>,
    seed: u64,
    distinct_seed: bool,
    auth: Option<String>,
    select_db: Option<u32>,
}

#[derive(Default)]
struct Progress {
    ops: AtomicU64,
    lat_ns: AtomicU64,
    bytes: AtomicU64,
}

struct Shared {
    stop: AtomicBool,
    failed: AtomicBool,
    first_error: Mutex<Option<String>>,
    /// Text of the first error reply the server sent (e.g. "-ERR unknown command").
    first_error_reply: Mutex<Option<String>>,
    have_error_reply: AtomicBool,
    progress: Vec<Progress>,
    finished_threads: AtomicUsize,
}

impl Shared {
    fn fail(&self, msg: String) {
        if let Ok(mut g) = self.first_error.lock() {
            if g.is_none() {
                *g = Some(msg);
            }
        }
        self.failed.store(true, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// memtier's rate limiting: at least 50 timer events a second; each grants
/// ceil(rate/50) requests, at an interval that makes up the rate.
fn rate_interval(rate: u32) -> (u64, Duration) {
    let per = u64::from(rate).div_ceil(50);
    let events_per_second = u64::from(rate) / per;
    (per, Duration::from_micros(1_000_000 / events_per_second))
}

fn build_plan(o: &BenchOpts) -> Result<Plan, String> {
    if o.threads == 0 || o.clients == 0 {
        return Err("--threads and --clients must be > 0".into());
    }
    if o.pipeline == 0 {
        return Err("--pipeline must be > 0".into());
    }
    if o.batch == 0 {
        return Err("--batch must be > 0".into());
    }
    if o.key_minimum > o.key_maximum {
        return Err("--key-minimum is larger than --key-maximum".into());
    }
    let mut templates = Vec::new();
    for c in &o.command {
        templates.push(proto::parse_template(c)?);
    }
    if !templates.is_empty() && !o.protocol.is_redis() {
        return Err("--command is only supported with the redis/resp3 protocols".into());
    }
    if o.batch > 1 && templates.is_empty() && o.protocol != Protocol::MemcacheText {
        return Err(
            "--batch needs a --command template such as \"MSET __key__ __data__\" (or --protocol memcache_text, where it makes every GET a multi-key get)"
                .into(),
        );
    }
    if o.authenticate.is_some() && !o.protocol.is_redis() {
        return Err("--authenticate is only supported with the redis/resp3 protocols".into());
    }
    let mut schedule = Vec::new();
    if !templates.is_empty() {
        if !o.command_ratio.is_empty() && o.command_ratio.len() != templates.len() {
            return Err("--command-ratio needs one weight per --command".into());
        }
        for i in 0..templates.len() {
            let w = o.command_ratio.get(i).copied().unwrap_or(1);
            schedule.extend((0..w).map(|_| i));
        }
        if schedule.is_empty() {
            return Err("--command-ratio weights are all zero".into());
        }
    }
    let (data_min, data_max) = match o.data_size_range {
        Some(r) => (r.min as usize, r.max as usize),
        None => (o.data_size, o.data_size),
    };
    let mut data = vec![b'x'; data_max];
    if o.random_data {
        let mut rng = Rng::new(o.seed ^ 0xDA7A);
        const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        for b in data.iter_mut() {
            *b = ALNUM[rng.range(0, ALNUM.len() as u64 - 1) as usize];
        }
    }
    let allkeys = o.requests == Requests::AllKeys;
    let limit = if o.test_time.is_some() {
        None
    } else {
        match o.requests {
            Requests::PerClient(n) => Some(n),
            Requests::AllKeys => Some(0), // computed per client
        }
    };
    let (set_pattern, get_pattern, cmd_pattern) = if allkeys {
        (
            KeyPattern::Parallel,
            KeyPattern::Parallel,
            KeyPattern::Parallel,
        )
    } else {
        (o.key_pattern.set, o.key_pattern.get, o.command_key_pattern)
    };
    let seed = if o.randomize {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(o.seed)
    } else {
        o.seed
    };
    Ok(Plan {
        protocol: o.protocol,
        addr: format!("{}:{}", o.server, o.port),
        pipeline: o.pipeline,
        rate: o.rate_limiting.map(rate_interval),
        eager_writes: o.eager_writes,
        libevent_calls: o.client_syscalls == crate::opts::ClientSyscalls::Memtier,
        limit,
        allkeys,
        total_clients: (o.threads * o.clients) as u64,
        key_prefix: o.key_prefix.as_bytes().to_vec(),
        key_min: o.key_minimum,
        key_max: o.key_maximum,
        key_median: o.key_median,
        key_stddev: o.key_stddev,
        set_pattern,
        get_pattern,
        cmd_pattern,
        ratio_set: o.ratio.set,
        ratio_get: o.ratio.get,
        templates,
        schedule,
        batch: o.batch,
        mc_multiget: o.protocol == Protocol::MemcacheText && o.batch > 1 && o.command.is_empty(),
        data,
        data_min,
        data_max,
        expiry: o.expiry_range.map(|r| (r.min, r.max)),
        seed,
        distinct_seed: o.distinct_client_seed,
        auth: o.authenticate.clone(),
        select_db: o.select_db,
    })
}

impl Plan {
    /// Keys each request of an `-n allkeys` run walks: the batch for templates and for
    /// read-only memcache multi-gets, otherwise 1.
    fn keys_per_request(&self) -> u64 {
        if !self.templates.is_empty() || (self.mc_multiget && self.ratio_set == 0) {
            self.batch as u64
        } else {
            1
        }
    }
}

fn initial_rows(plan: &Plan) -> Vec<RowStats> {
    if plan.templates.is_empty() {
        vec![
            RowStats::new("Sets", RowKind::Set),
            RowStats::new("Gets", RowKind::Get),
        ]
    } else {
        let mut rows: Vec<RowStats> = Vec::new();
        for t in &plan.templates {
            let mut label = t.label.clone();
            // Keep labels unique when the same command appears twice.
            if rows.iter().any(|r| r.label == label) {
                label = format!("{label}#{}", rows.len() + 1);
            }
            // A plain GET template counts hits and misses like the Gets row.
            let kind = if t.label == "Get" {
                RowKind::Get
            } else {
                RowKind::Command
            };
            rows.push(RowStats::new(&label, kind));
        }
        rows
    }
}

type ClientResult = Result<(), String>;

/// Run the benchmark described by `opts` and return merged statistics.
pub fn run(opts: &BenchOpts, show_progress: bool) -> Result<RunResult, String> {
    let plan = Arc::new(build_plan(opts)?);
    let threads = opts.threads;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        first_error: Mutex::new(None),
        first_error_reply: Mutex::new(None),
        have_error_reply: AtomicBool::new(false),
        progress: (0..threads).map(|_| Progress::default()).collect(),
        finished_threads: AtomicUsize::new(0),
    });
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::with_capacity(threads);
    for tid in 0..threads {
        let plan = plan.clone();
        let shared = shared.clone();
        let barrier = barrier.clone();
        let clients = opts.clients;
        let h = std::thread::Builder::new()
            .name(format!("bench-{tid}"))
            .spawn(move || thread_main(tid, clients, plan, shared, barrier))
            .map_err(|e| format!("spawn thread: {e}"))?;
        handles.push(h);
    }
    barrier.wait();
    let start = Instant::now();
    let start_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    if shared.failed.load(Ordering::SeqCst) {
        shared.stop.store(true, Ordering::SeqCst);
    }

    let total_requests: Option<u64> = match (opts.test_time, opts.requests) {
        (None, Requests::PerClient(n)) => Some(n * plan.total_clients),
        (None, Requests::AllKeys) => {
            let keys = plan.key_max - plan.key_min + 1;
            Some(keys.div_ceil(plan.keys_per_request()))
        }
        _ => None,
    };
    monitor(opts, &shared, threads, start, total_requests, show_progress);

    let mut rows = initial_rows(&plan);
    let mut end = start;
    for h in handles {
        match h.join() {
            Ok(Ok((stats, t_end))) => {
                for (dst, src) in rows.iter_mut().zip(stats.iter()) {
                    dst.merge(src);
                }
                end = end.max(t_end);
            }
            Ok(Err(e)) => shared.fail(e),
            Err(_) => shared.fail("a load thread panicked".into()),
        }
    }
    if shared.failed.load(Ordering::SeqCst) {
        let first_error = shared.first_error.lock().ok().and_then(|g| g.clone());
        return Err(first_error.unwrap_or_else(|| "run failed".into()));
    }
    let first_error_reply = shared.first_error_reply.lock().ok().and_then(|g| g.clone());
    Ok(RunResult {
        rows,
        duration: end.saturating_duration_since(start),
        start_unix_ms,
        first_error_reply,
    })
}

fn monitor(
    opts: &BenchOpts,
    shared: &Shared,
    threads: usize,
    start: Instant,
    total_requests: Option<u64>,
    show_progress: bool,
) {
    let tty = is_stderr_tty();
    let mut last_print = start;
    let mut last_ops = 0u64;
    let mut last_lat = 0u64;
    let mut last_bytes = 0u64;
    let mut last_change = start;
    let mut printed = false;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = Instant::now();
        let elapsed = now - start;
        if let Some(tt) = opts.test_time {
            if elapsed >= Duration::from_secs(tt) {
                shared.stop.store(true, Ordering::SeqCst);
            }
        }
        let done = shared.finished_threads.load(Ordering::SeqCst) >= threads;
        let (ops, lat, bytes) = shared.progress.iter().fold((0, 0, 0), |a, p| {
            (
                a.0 + p.ops.load(Ordering::Relaxed),
                a.1 + p.lat_ns.load(Ordering::Relaxed),
                a.2 + p.bytes.load(Ordering::Relaxed),
            )
        });
        if ops != last_ops {
            last_change = now;
        }
        if now - last_change > Duration::from_secs(30) && !done {
            shared.fail("no reply for 30 seconds; is the server alive?".into());
            // Threads blocked on a dead socket never return: report and quit.
            eprintln!("\nerror: no reply for 30 seconds; is the server alive?");
            std::process::exit(2);
        }
        if show_progress && (now - last_print >= Duration::from_secs(1) || done) {
            let dt = (now - last_print).as_secs_f64().max(1e-9);
            let secs = elapsed.as_secs_f64().max(1e-9);
            let cur_ops = (ops - last_ops) as f64 / dt;
            let avg_ops = ops as f64 / secs;
            let cur_lat = if ops > last_ops {
                (lat - last_lat) as f64 / (ops - last_ops) as f64 / 1e6
            } else {
                0.0
            };
            let avg_lat = if ops > 0 {
                lat as f64 / ops as f64 / 1e6
            } else {
                0.0
            };
            let cur_mb = (bytes - last_bytes) as f64 / dt / 1048576.0;
            let avg_mb = bytes as f64 / secs / 1048576.0;
            let pct = match (opts.test_time, total_requests) {
                (Some(tt), _) => (secs / tt as f64 * 100.0).min(100.0),
                (None, Some(t)) if t > 0 => ops as f64 / t as f64 * 100.0,
                _ => 0.0,
            };
            let pct = if done { 100.0 } else { pct.min(99.0) };
            let line = format!(
                "[RUN #1 {pct:3.0}%, {:4} secs] {threads:2} threads: {ops:11} ops, {cur_ops:8.0} (avg: {avg_ops:8.0}) ops/sec, {cur_mb:.2}MB/sec (avg: {avg_mb:.2}MB/sec), {cur_lat:6.3} (avg: {avg_lat:6.3}) msec latency",
                elapsed.as_secs()
            );
            let mut err = std::io::stderr().lock();
            if tty {
                let _ = write!(err, "\r{line}  ");
            } else {
                let _ = writeln!(err, "{line}");
            }
            let _ = err.flush();
            printed = true;
            last_print = now;
            last_ops = ops;
            last_lat = lat;
            last_bytes = bytes;
        }
        if done {
            break;
        }
    }
    if printed && tty {
        eprintln!();
    }
}

fn is_stderr_tty() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(2) == 1 }
}

type ThreadOut = Result<(Vec<RowStats>, Instant), String>;

fn thread_main(
    tid: usize,
    clients: usize,
    plan: Arc<Plan>,
    shared: Arc<Shared>,
    barrier: Arc<Barrier>,
) -> ThreadOut {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            shared.fail(format!("tokio runtime: {e}"));
            barrier.wait();
            shared.finished_threads.fetch_add(1, Ordering::SeqCst);
            return Err(format!("tokio runtime: {e}"));
        }
    };
    let local = tokio::task::LocalSet::new();
    // Connect phase: all connections are open and authenticated before the clock starts.
    let conns: Result<Vec<TcpStream>, String> = local.block_on(&rt, async {
        let mut v = Vec::with_capacity(clients);
        for _ in 0..clients {
            v.push(connect(&plan).await?);
        }
        Ok(v)
    });
    let conns = match conns {
        Ok(c) => c,
        Err(e) => {
            shared.fail(e.clone());
            barrier.wait();
            shared.finished_threads.fetch_add(1, Ordering::SeqCst);
            return Err(e);
        }
    };
    barrier.wait();
    let stats = Rc::new(RefCell::new(initial_rows(&plan)));
    let result: Result<(), String> = local.block_on(&rt, async {
        let mut joins = Vec::with_capacity(clients);
        for (cid, conn) in conns.into_iter().enumerate() {
            let global = (tid * clients + cid) as u64;
            let fut = client_loop(
                global,
                conn,
                plan.clone(),
                shared.clone(),
                tid,
                stats.clone(),
            );
            joins.push(tokio::task::spawn_local(fut));
        }
        let mut first: ClientResult = Ok(());
        for j in joins {
            let r = match j.await {
                Ok(r) => r,
                Err(e) => Err(format!("client task: {e}")),
            };
            if let Err(e) = r {
                shared.fail(e.clone());
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    });
    let end = Instant::now();
    shared.finished_threads.fetch_add(1, Ordering::SeqCst);
    result?;
    let rows = stats.borrow().clone();
    Ok((rows, end))
}

async fn connect(plan: &Plan) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(&plan.addr)
        .await
        .map_err(|e| format!("connect {}: {e}", plan.addr))?;
    s.set_nodelay(true)
        .map_err(|e| format!("set_nodelay: {e}"))?;
    if plan.protocol.is_redis() {
        let (user, pass) = match &plan.auth {
            Some(a) => match a.split_once(':') {
                Some((u, p)) => (Some(u.to_string()), Some(p.to_string())),
                None => (None, Some(a.clone())),
            },
            None => (None, None),
        };
        if plan.protocol == Protocol::Resp3 {
            let mut args: Vec<Vec<u8>> = vec![b"HELLO".to_vec(), b"3".to_vec()];
            if let Some(p) = &pass {
                args.push(b"AUTH".to_vec());
                args.push(
                    user.clone()
                        .unwrap_or_else(|| "default".into())
                        .into_bytes(),
                );
                args.push(p.clone().into_bytes());
            }
            handshake(&mut s, &args).await?;
        } else if let Some(p) = &pass {
            let mut args: Vec<Vec<u8>> = vec![b"AUTH".to_vec()];
            if let Some(u) = &user {
                args.push(u.clone().into_bytes());
            }
            args.push(p.clone().into_bytes());
            handshake(&mut s, &args).await?;
        }
        if let Some(db) = plan.select_db {
            handshake(&mut s, &[b"SELECT".to_vec(), db.to_string().into_bytes()]).await?;
        }
    }
    Ok(s)
}

async fn handshake(s: &mut TcpStream, args: &[Vec<u8>]) -> Result<(), String> {
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let mut out = Vec::new();
    proto::encode_command(&mut out, &refs);
    s.write_all(&out)
        .await
        .map_err(|e| format!("write handshake: {e}"))?;
    let mut buf = Vec::with_capacity(1024);
    let mut tmp = [0u8; 4096];
    loop {
        let n = s
            .read(&mut tmp)
            .await
            .map_err(|e| format!("read handshake: {e}"))?;
        if n == 0 {
            return Err("server closed the connection during handshake".into());
        }
        buf.extend_from_slice(&tmp[..n]);
        match proto::parse_resp(&buf).map_err(|e| format!("handshake reply: {e}"))? {
            None => continue,
            Some((_, ReplyKind::Error)) => {
                let cmd = String::from_utf8_lossy(&args[0]).to_string();
                return Err(format!(
                    "{cmd} failed: {}",
                    String::from_utf8_lossy(&buf).trim()
                ));
            }
            Some((_, ReplyKind::Push)) => {
                buf.clear();
                continue;
            }
            Some(_) => return Ok(()),
        }
    }
}

struct Pending {
    row: u16,
    remaining: u32,
    /// Keys asked for by a memcache multi-get (0 otherwise) and `VALUE`s received so far.
    mget_keys: u32,
    values: u32,
    sent: Instant,
    bytes: u64,
    hit: bool,
    null: bool,
    error: bool,
}

/// Per-client request generator.
struct Gen {
    rng: Rng,
    set_keys: KeyGen,
    get_keys: KeyGen,
    cmd_keys: KeyGen,
    cycle: u64,
    keybuf: Vec<u8>,
    batch_keys: Vec<Vec<u8>>,
}

impl Gen {
    #[inline]
    fn format_key(prefix: &[u8], k: u64, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(prefix);
        proto::push_u64(out, k);
    }
}

async fn client_loop(
    global: u64,
    mut conn: TcpStream,
    plan: Arc<Plan>,
    shared: Arc<Shared>,
    tid: usize,
    stats: Rc<RefCell<Vec<RowStats>>>,
) -> ClientResult {
    let p = &*plan;
    let seed = if p.distinct_seed {
        p.seed.wrapping_add(global.wrapping_mul(0x9E37_79B9))
    } else {
        p.seed
    };
    let mk = |pat| {
        KeyGen::new(
            pat,
            p.key_min,
            p.key_max,
            global,
            p.total_clients,
            p.key_median,
            p.key_stddev,
        )
    };
    let mut g = Gen {
        rng: Rng::new(seed),
        set_keys: mk(p.set_pattern),
        get_keys: mk(p.get_pattern),
        cmd_keys: mk(p.cmd_pattern),
        cycle: 0,
        keybuf: Vec::with_capacity(p.key_prefix.len() + 20),
        batch_keys: (0..p.batch)
            .map(|_| Vec::with_capacity(p.key_prefix.len() + 20))
            .collect(),
    };
    let limit = match p.limit {
        None => u64::MAX,
        Some(_) if p.allkeys => {
            let (lo, hi) = slice_for(p.key_min, p.key_max, global, p.total_clients);
            let keys = if global < p.key_max - p.key_min + 1 {
                hi - lo + 1
            } else {
                0
            };
            keys.div_ceil(p.keys_per_request())
        }
        Some(n) => n,
    };
    let progress = &shared.progress[tid];
    let mut inflight: VecDeque<Pending> = VecDeque::with_capacity(p.pipeline);
    let mut wbuf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut rbuf: Vec<u8> = vec![0u8; 64 * 1024];
    let (mut rstart, mut rend) = (0usize, 0usize);
    let mut sent: u64 = 0;
    let is_mc = p.protocol == Protocol::MemcacheText;
    let libevent = if p.libevent_calls {
        use std::os::fd::AsRawFd;
        Some(crate::sys::LibeventCalls::new(conn.as_raw_fd())?)
    } else {
        None
    };

    // `--rate-limiting`: requests this connection may still send in the current interval.
    let mut budget = p.rate.map_or(u64::MAX, |(per, _)| per);
    let mut ticker = p.rate.map(|(_, every)| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });

    'requests: loop {
        // Fill the pipeline.
        let mut added = 0usize;
        while inflight.len() < p.pipeline
            && sent < limit
            && budget > 0
            && !shared.stop.load(Ordering::Relaxed)
        {
            let before = wbuf.len();
            let (row, replies) = build_request(p, &mut g, &mut wbuf);
            let mget_keys = if p.mc_multiget && row == 1 {
                p.batch as u32
            } else {
                0
            };
            inflight.push_back(Pending {
                row,
                remaining: replies,
                mget_keys,
                values: 0,
                sent: Instant::now(), // overwritten below, after the batch is built
                bytes: (wbuf.len() - before) as u64,
                hit: false,
                null: false,
                error: false,
            });
            added += 1;
            sent += 1;
            if p.rate.is_some() {
                budget -= 1;
            }
        }
        if added > 0 {
            let t = Instant::now();
            let n = inflight.len();
            for pend in inflight.range_mut(n - added..) {
                pend.sent = t;
            }
            if !p.eager_writes {
                // memtier's requests go into a libevent output buffer, written when the loop
                // next reports the socket writable: after this thread's other ready connections
                // ran and after its next poll for I/O. tokio's yield_now resumes a task just
                // then. A server sees the same small, staggered writes as under memtier, and
                // the wait counts in the requests' latency as in memtier's (queued -> read).
                tokio::task::yield_now().await;
            }
            if let Some(l) = &libevent {
                l.write_wanted();
            }
            conn.write_all(&wbuf)
                .await
                .map_err(|e| format!("write to {}: {e}", p.addr))?;
            wbuf.clear();
            if let Some(l) = &libevent {
                l.write_done();
            }
        }
        if inflight.is_empty() {
            match ticker.as_mut() {
                // Rate-limited and idle until the next interval grants requests.
                Some(t) if sent < limit && !shared.stop.load(Ordering::Relaxed) => {
                    t.tick().await;
                    budget = p.rate.map_or(u64::MAX, |(per, _)| per);
                    continue;
                }
                _ => break,
            }
        }
        // Read at least one chunk of replies.
        if rend == rbuf.len() {
            if rstart > 0 {
                rbuf.copy_within(rstart..rend, 0);
                rend -= rstart;
                rstart = 0;
            } else {
                let l = rbuf.len();
                rbuf.resize(l * 2, 0);
            }
        }
        // Wait until readable, then read as libevent does (after its FIONREAD, when mirrored).
        let n = loop {
            let ready = match ticker.as_mut() {
                None => conn.readable().await,
                Some(t) => tokio::select! {
                    r = conn.readable() => r,
                    _ = t.tick() => {
                        budget = p.rate.map_or(u64::MAX, |(per, _)| per);
                        continue 'requests;
                    }
                },
            };
            ready.map_err(|e| format!("read from {}: {e}", p.addr))?;
            if let Some(l) = &libevent {
                l.before_read();
            }
            match conn.try_read(&mut rbuf[rend..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(format!("read from {}: {e}", p.addr)),
            }
        };
        if n == 0 {
            return Err(format!(
                "server {} closed the connection with {} requests in flight",
                p.addr,
                inflight.len()
            ));
        }
        rend += n;
        let now = Instant::now();
        let mut done_ops = 0u64;
        let mut done_lat = 0u64;
        let mut done_bytes = 0u64;
        {
            let mut st = stats.borrow_mut();
            loop {
                let parsed = if is_mc {
                    proto::parse_memcache_counted(&rbuf[rstart..rend])
                } else {
                    proto::parse_resp(&rbuf[rstart..rend]).map(|r| r.map(|(u, k)| (u, k, 0)))
                }
                .map_err(|e| format!("bad reply from {}: {e}", p.addr))?;
                let Some((used, kind, values)) = parsed else {
                    break;
                };
                if kind == ReplyKind::Error && !shared.have_error_reply.load(Ordering::Relaxed) {
                    shared.have_error_reply.store(true, Ordering::Relaxed);
                    let text = &rbuf[rstart..rstart + used.min(200)];
                    if let Ok(mut g) = shared.first_error_reply.lock() {
                        g.get_or_insert_with(|| String::from_utf8_lossy(text).trim().to_string());
                    }
                }
                rstart += used;
                if kind == ReplyKind::Push {
                    continue;
                }
                let Some(front) = inflight.front_mut() else {
                    return Err(format!("unexpected extra reply from {}", p.addr));
                };
                front.bytes += used as u64;
                front.values += values;
                match kind {
                    ReplyKind::Value => front.hit = true,
                    ReplyKind::Null => front.null = true,
                    ReplyKind::Error => front.error = true,
                    ReplyKind::Push => {}
                }
                front.remaining -= 1;
                if front.remaining == 0 {
                    let Some(done) = inflight.pop_front() else {
                        break;
                    };
                    let lat = now.saturating_duration_since(done.sent).as_nanos() as u64;
                    let row = &mut st[done.row as usize];
                    row.ops += 1;
                    row.bytes += done.bytes;
                    row.hist.saturating_record(lat.max(1));
                    if done.error {
                        row.errors += 1;
                    } else if done.mget_keys > 0 {
                        // Multi-get: hits and misses count keys, not requests.
                        let hits = done.values.min(done.mget_keys);
                        row.hits += u64::from(hits);
                        row.misses += u64::from(done.mget_keys - hits);
                    } else if row.kind == RowKind::Get {
                        if done.null {
                            row.misses += 1;
                        } else if done.hit {
                            row.hits += 1;
                        }
                    }
                    done_ops += 1;
                    done_lat += lat;
                    done_bytes += done.bytes;
                }
            }
        }
        if rstart == rend {
            rstart = 0;
            rend = 0;
        }
        if done_ops > 0 {
            progress.ops.fetch_add(done_ops, Ordering::Relaxed);
            progress.lat_ns.fetch_add(done_lat, Ordering::Relaxed);
            progress.bytes.fetch_add(done_bytes, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Append one request to `out`; returns (row index, replies expected).
#[inline]
fn build_request(p: &Plan, g: &mut Gen, out: &mut Vec<u8>) -> (u16, u32) {
    let data_len = if p.data_min == p.data_max {
        p.data_max
    } else {
        g.rng.range(p.data_min as u64, p.data_max as u64) as usize
    };
    let data = &p.data[..data_len];
    if !p.templates.is_empty() {
        let ti = p.schedule[(g.cycle % p.schedule.len() as u64) as usize];
        g.cycle += 1;
        for kb in g.batch_keys.iter_mut() {
            let k = g.cmd_keys.next(&mut g.rng);
            Gen::format_key(&p.key_prefix, k, kb);
        }
        let t = &p.templates[ti];
        t.encode(out, &g.batch_keys, data);
        return (ti as u16, t.replies() as u32);
    }
    let period = u64::from(p.ratio_set + p.ratio_get);
    let is_set = (g.cycle % period) < u64::from(p.ratio_set);
    g.cycle += 1;
    if is_set {
        let k = g.set_keys.next(&mut g.rng);
        Gen::format_key(&p.key_prefix, k, &mut g.keybuf);
        let exp = p.expiry.map(|(lo, hi)| g.rng.range(lo, hi));
        if p.protocol == Protocol::MemcacheText {
            proto::encode_mc_set(out, &g.keybuf, data, exp);
        } else {
            proto::encode_set(out, &g.keybuf, data, exp);
        }
        (0, 1)
    } else {
        if p.mc_multiget {
            for kb in g.batch_keys.iter_mut() {
                let k = g.get_keys.next(&mut g.rng);
                Gen::format_key(&p.key_prefix, k, kb);
            }
            proto::encode_mc_multiget(out, &g.batch_keys);
            return (1, 1);
        }
        let k = g.get_keys.next(&mut g.rng);
        Gen::format_key(&p.key_prefix, k, &mut g.keybuf);
        if p.protocol == Protocol::MemcacheText {
            proto::encode_mc_get(out, &g.keybuf);
        } else {
            proto::encode_get(out, &g.keybuf);
        }
        (1, 1)
    }
}
