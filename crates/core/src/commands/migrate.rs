//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
//! [AUTH2 username password] [KEYS key [key ...]], as Redis 7.0's `migrateCommand`.
//!
//! One chain of hops under the command's locks: a `per_shard` step reads each key's DUMP
//! payload and remaining TTL (`run_more`: the locks stay), the connection's thread then sends
//! `[AUTH] [SELECT db] RESTORE key ttl payload [REPLACE]...` to the target, pipelined, and reads
//! the replies (async, each operation bounded by the timeout), and a final `per_shard` step
//! deletes the keys the target acknowledged (unless COPY). No client sees a key change between
//! its payload being read and its deletion. The deletion is replicated as Redis propagates it:
//! `DEL` of the moved keys.
//!
//! Target connections are cached per thread, keyed by `host:port`, as Redis's
//! `migrate_cached_sockets` (closed after 10 s idle; INFO sums the caches).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::net::stream::{ReadHalf, Stream, WriteHalf};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::dump::key_image;
use super::spec::prelude::*;
use super::util::*;
use super::{BoxFut, ConnCtx};
use crate::engine::journal;
use damselfly_types::rdb::dump_payload;

/// Redis 7.0's key specs: the key at argument 3, and the keys after `KEYS` (searched backwards
/// from the next-to-last argument).
const MIGRATE_KEYS: KeySpec = many(&[range(3, 3, 1), keyword("KEYS", -2, -1, 1, 0)]);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("migrate", -6, WRITE | PROP_SELF, MIGRATE_KEYS, Conn(migrate)).plan(migrate_plan)
        .acl(acl::DANGEROUS)
        .doc(Group::Generic, "2.6.0", "Atomically transfer a key from a Redis instance to another one."),
];

/// Redis's `MIGRATE_SOCKET_CACHE_ITEMS`: at most this many cached connections (per thread).
const CACHE_ITEMS: usize = 64;
/// Redis's `MIGRATE_SOCKET_CACHE_TTL`: a cached connection idle longer than this is closed.
const CACHE_TTL: Duration = Duration::from_secs(10);
/// The query goes to the target in chunks of this size, each within the timeout.
const CHUNK: usize = 64 * 1024;

/// The parsed options.
struct Opts<'a> {
    copy: bool,
    replace: bool,
    username: Option<&'a [u8]>,
    password: Option<&'a [u8]>,
    /// Connect over TLS (`tls-cluster`, as Redis).
    tls: bool,
    /// The keys: `args[first..first + num]`.
    first: usize,
    num: usize,
}

/// The options as `migrateCommand` parses them (from argument 6 on), or the error reply.
fn parse<'a>(args: &[&'a [u8]]) -> Result<Opts<'a>, &'static str> {
    let mut o = Opts {
        copy: false,
        replace: false,
        username: None,
        password: None,
        tls: false,
        first: 3,
        num: 1,
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let a = args[j];
        if eq_ic(a, "copy") {
            o.copy = true;
        } else if eq_ic(a, "replace") {
            o.replace = true;
        } else if eq_ic(a, "auth") {
            if more == 0 {
                return Err(ERR_SYNTAX);
            }
            j += 1;
            o.password = Some(args[j]);
        } else if eq_ic(a, "auth2") {
            if more < 2 {
                return Err(ERR_SYNTAX);
            }
            o.username = Some(args[j + 1]);
            o.password = Some(args[j + 2]);
            j += 2;
        } else if eq_ic(a, "keys") {
            if !args[3].is_empty() {
                return Err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string");
            }
            o.first = j + 1;
            o.num = args.len() - j - 1;
            break;
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

/// Locks the keys `migrateCommand` reads that the key specs do not name (a `KEYS` list that
/// itself contains `KEYS`: the key spec's backwards search finds the last one). The plan does
/// not say the command's database, so such keys are locked in every one.
fn migrate_plan(args: &[&[u8]], plan: &mut dyn PlanSink) {
    if args.len() < 6 {
        return;
    }
    let Ok(o) = parse(args) else {
        return;
    };
    let spec = MIGRATE_KEYS.positions(args);
    for (i, key) in args.iter().enumerate().skip(o.first).take(o.num) {
        if !spec.contains(&i) {
            for db in 0..plan.dbnum() {
                plan.lock_key(db, key, true);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The connection cache

/// A connection to a target instance.
struct Target {
    io: BufReader<ReadHalf>,
    out: WriteHalf,
    /// The database selected there (-1: unknown, SELECT next time).
    last_db: i64,
    last_use: Instant,
}

thread_local! {
    /// This thread's cached target connections by `host:port`. A connection in use is taken
    /// out and put back after a successful exchange.
    static CACHE: RefCell<HashMap<Vec<u8>, Target>> = RefCell::new(HashMap::new());
    /// The sweeper task of this thread's cache is running.
    static SWEEPING: Cell<bool> = const { Cell::new(false) };
}

/// Cached connections over every thread (INFO `migrate_cached_sockets`).
static CACHED: AtomicUsize = AtomicUsize::new(0);

/// The number of cached MIGRATE connections, summed over threads (INFO stats).
pub fn cached_sockets() -> usize {
    CACHED.load(Ordering::Relaxed)
}

fn cache_take(name: &[u8]) -> Option<Target> {
    let t = CACHE.with(|c| c.borrow_mut().remove(name))?;
    CACHED.fetch_sub(1, Ordering::Relaxed);
    Some(t)
}

fn cache_put(name: &[u8], mut t: Target) {
    t.last_use = Instant::now();
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_ITEMS && !c.contains_key(name) {
            // Too many: drop one (Redis drops one at random).
            if let Some(k) = c.keys().next().cloned() {
                c.remove(&k);
                CACHED.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if c.insert(name.to_vec(), t).is_none() {
            CACHED.fetch_add(1, Ordering::Relaxed);
        }
    });
    start_sweeper();
}

/// Closes this thread's cached connections once idle for longer than [`CACHE_TTL`] (Redis's
/// `migrateCloseTimedoutSockets` in its cron), checking every second while any is cached.
fn start_sweeper() {
    if SWEEPING.with(|s| s.replace(true)) {
        return;
    }
    tokio::task::spawn_local(async {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = Instant::now();
            let empty = CACHE.with(|c| {
                let mut c = c.borrow_mut();
                c.retain(|_, t| {
                    let keep = now.duration_since(t.last_use) <= CACHE_TTL;
                    if !keep {
                        CACHED.fetch_sub(1, Ordering::Relaxed);
                    }
                    keep
                });
                c.is_empty()
            });
            if empty {
                SWEEPING.with(|s| s.set(false));
                return;
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------
// The exchange with the target

/// A key to send: its name, remaining TTL in ms (0: none) and DUMP payload.
struct Item<'a> {
    key: &'a [u8],
    ttl: u64,
    payload: Vec<u8>,
}

/// What the exchange ended with: the keys the target restored (indices into the items) and
/// the reply (None: +OK).
struct Outcome {
    acked: Vec<usize>,
    error: Option<String>,
}

const ERR_CONNECT: &str = "IOERR error or timeout connecting to the client";

/// Why an operation on the socket failed: timed out (Redis's ETIMEDOUT: no retry) or not.
struct IoFail {
    timed_out: bool,
}

/// Opens a link to the target, over TLS with `tls-cluster` (as Redis's MIGRATE).
async fn connect(
    host: &[u8],
    port: &[u8],
    timeout: Duration,
    tls: bool,
) -> Option<(ReadHalf, WriteHalf)> {
    let host = String::from_utf8_lossy(host).into_owned();
    // As atoi: the leading digits.
    let digits: Vec<u8> = port
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    let port = std::str::from_utf8(&digits)
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    let s = tokio::time::timeout(timeout, Stream::connect(&host, port, tls, timeout))
        .await
        .ok()?
        .ok()?;
    Some(s.into_split())
}

async fn write_all(t: &mut Target, buf: &[u8], timeout: Duration) -> Result<(), IoFail> {
    for chunk in buf.chunks(CHUNK) {
        match tokio::time::timeout(timeout, t.out.write_all(chunk)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(IoFail { timed_out: false }),
            Err(_) => return Err(IoFail { timed_out: true }),
        }
    }
    Ok(())
}

/// One reply line, without its CRLF (Redis's `connSyncReadLine`).
async fn read_line(t: &mut Target, timeout: Duration) -> Result<Vec<u8>, IoFail> {
    let mut line = Vec::new();
    match tokio::time::timeout(timeout, t.io.read_until(b'\n', &mut line)).await {
        Ok(Ok(n)) if n > 0 && line.ends_with(b"\n") => {
            line.pop();
            if line.ends_with(b"\r") {
                line.pop();
            }
            Ok(line)
        }
        Ok(_) => Err(IoFail { timed_out: false }),
        Err(_) => Err(IoFail { timed_out: true }),
    }
}

fn bulk(out: &mut Vec<u8>, a: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// The query: [AUTH] [SELECT] and one RESTORE per item.
fn query(o: &Opts<'_>, select: Option<i64>, items: &[Item<'_>]) -> Vec<u8> {
    let mut q = Vec::with_capacity(64 + items.iter().map(|i| i.payload.len() + 64).sum::<usize>());
    if let Some(pw) = o.password {
        match o.username {
            Some(u) => {
                q.extend_from_slice(b"*3\r\n");
                bulk(&mut q, b"AUTH");
                bulk(&mut q, u);
            }
            None => {
                q.extend_from_slice(b"*2\r\n");
                bulk(&mut q, b"AUTH");
            }
        }
        bulk(&mut q, pw);
    }
    if let Some(db) = select {
        q.extend_from_slice(b"*2\r\n");
        bulk(&mut q, b"SELECT");
        bulk(&mut q, db.to_string().as_bytes());
    }
    for it in items {
        q.extend_from_slice(if o.replace { b"*5\r\n" } else { b"*4\r\n" });
        bulk(&mut q, b"RESTORE");
        bulk(&mut q, it.key);
        bulk(&mut q, it.ttl.to_string().as_bytes());
        bulk(&mut q, &it.payload);
        if o.replace {
            bulk(&mut q, b"REPLACE");
        }
    }
    q
}

/// Sends the items to `host:port` and reads the replies, as `migrateCommand` does from its
/// `try_again` label on: one retry on a new connection after a socket error (not a timeout)
/// before any RESTORE reply was read.
async fn exchange(
    host: &[u8],
    port: &[u8],
    db: i64,
    timeout: Duration,
    o: &Opts<'_>,
    items: &[Item<'_>],
) -> Outcome {
    let mut name = host.to_vec();
    name.push(b':');
    name.extend_from_slice(port);
    let mut may_retry = true;
    loop {
        let mut t = match cache_take(&name) {
            Some(t) => t,
            None => match connect(host, port, timeout, o.tls).await {
                Some((r, w)) => Target {
                    io: BufReader::new(r),
                    out: w,
                    last_db: -1,
                    last_use: Instant::now(),
                },
                None => {
                    return Outcome {
                        acked: Vec::new(),
                        error: Some(ERR_CONNECT.into()),
                    }
                }
            },
        };
        let select = t.last_db != db;
        let q = query(o, select.then_some(db), items);
        // (`fail`: the failed operation was a write, and whether it timed out.)
        let fail: (bool, IoFail) = 'attempt: {
            if let Err(e) = write_all(&mut t, &q, timeout).await {
                break 'attempt (true, e);
            }
            let auth = match o.password {
                Some(_) => match read_line(&mut t, timeout).await {
                    Ok(l) => Some(l),
                    Err(e) => break 'attempt (false, e),
                },
                None => None,
            };
            let sel = match select {
                true => match read_line(&mut t, timeout).await {
                    Ok(l) => Some(l),
                    Err(e) => break 'attempt (false, e),
                },
                false => None,
            };
            let mut acked = Vec::new();
            let mut error: Option<String> = None;
            let mut socket_error = None;
            let mut read = 0;
            for (j, _) in items.iter().enumerate() {
                let line = match read_line(&mut t, timeout).await {
                    Ok(l) => l,
                    Err(e) => {
                        socket_error = Some(e);
                        break;
                    }
                };
                read += 1;
                let failed =
                    |l: &Option<Vec<u8>>| l.as_ref().is_some_and(|l| l.first() == Some(&b'-'));
                if failed(&auth) || failed(&sel) || line.first() == Some(&b'-') {
                    if error.is_none() {
                        // On error the selected db is no longer known.
                        t.last_db = -1;
                        let from = if failed(&auth) {
                            auth.as_deref().unwrap_or_default()
                        } else if failed(&sel) {
                            sel.as_deref().unwrap_or_default()
                        } else {
                            &line
                        };
                        error = Some(format!(
                            "ERR Target instance replied with error: {}",
                            String::from_utf8_lossy(&from[1..])
                        ));
                    }
                } else {
                    acked.push(j);
                }
            }
            if let Some(e) = socket_error {
                if error.is_none() && read == 0 && may_retry && !e.timed_out {
                    break 'attempt (false, e);
                }
                // The connection is dropped (closed); what was acknowledged stays moved.
                drop(t);
                return Outcome {
                    acked,
                    error: Some(error.unwrap_or_else(|| {
                        "IOERR error or timeout reading to target instance".into()
                    })),
                };
            }
            if error.is_none() {
                t.last_db = db;
            }
            cache_put(&name, t);
            return Outcome { acked, error };
        };
        // A socket error: the connection is closed; retry once unless it timed out.
        let (writing, e) = fail;
        if !e.timed_out && may_retry {
            may_retry = false;
            continue;
        }
        return Outcome {
            acked: Vec::new(),
            error: Some(format!(
                "IOERR error or timeout {} to target instance",
                if writing { "writing" } else { "reading" }
            )),
        };
    }
}

// ---------------------------------------------------------------------------------------------
// The command

fn migrate<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let o = match parse(args) {
            Ok(o) => Opts {
                tls: cx.shared().config.tls_cluster(),
                ..o
            },
            Err(e) => return cx.reply.error(e),
        };
        let (Some(timeout), Some(db)) = (parse_i64(args[5]), parse_i64(args[4])) else {
            return cx.reply.error(ERR_NOT_INT);
        };
        let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
        let keys: Vec<&'a [u8]> = args[o.first..o.first + o.num].to_vec();
        if keys.is_empty() {
            return cx.reply.simple("NOKEY");
        }
        // The payloads and TTLs, under the command's locks (kept for the deletion below).
        let parts = cx
            .hops()
            .per_shard_of(&keys, 1, |c, ks, ()| {
                let now = c.now;
                ks.iter()
                    .map(|k| {
                        key_image(c, k).map(|(obj, at)| {
                            // The remaining TTL, at least 1 ms; 0 without one.
                            let ttl = at.map_or(0, |at| at.saturating_sub(now).max(1));
                            (dump_payload(&obj), ttl)
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .run_more()
            .await;
        let mut found: Vec<Option<(Vec<u8>, u64)>> = (0..keys.len()).map(|_| None).collect();
        for p in parts {
            for (g, r) in p.groups.into_iter().zip(p.result) {
                found[g] = r;
            }
        }
        let items: Vec<Item<'a>> = keys
            .iter()
            .zip(found)
            .filter_map(|(&key, f)| f.map(|(payload, ttl)| Item { key, ttl, payload }))
            .collect();
        if items.is_empty() {
            return cx.reply.simple("NOKEY");
        }
        let out = exchange(args[1], args[2], db, timeout, &o, &items).await;
        let moved: Vec<&'a [u8]> = if o.copy {
            Vec::new()
        } else {
            out.acked.iter().map(|&i| items[i].key).collect()
        };
        drop(items);
        if !moved.is_empty() {
            cx.hops()
                .per_shard_of(&moved, 1, |c, ks, ()| {
                    let now = c.now;
                    let db = c.db();
                    for k in ks {
                        if db.remove(k, now).is_some() {
                            ev::emit(ev::GENERIC, "del", db.index, k);
                        }
                    }
                })
                .run()
                .await;
            // Replicated as DEL of the moved keys, while the command still holds them.
            if journal::active() {
                let mut del: Vec<&[u8]> = Vec::with_capacity(moved.len() + 1);
                del.push(b"DEL");
                del.extend_from_slice(&moved);
                let rec = journal::Record {
                    db: cx.db,
                    resp: journal::encode(&del),
                };
                if let Some(g) = cx.coord.group.as_mut() {
                    g.push(rec);
                } else if cx.coord.journaled() {
                    journal::push(journal::Item::One(rec));
                }
            }
        }
        match out.error {
            None => cx.reply.ok(),
            Some(e) => cx.reply.error(&e),
        }
    })
}
