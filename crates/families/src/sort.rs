//! SORT and SORT_RO (Redis 7.0 `sort.c` semantics, replies and error texts).
//!
//! Sorting works on lists, sets and sorted sets. BY and GET patterns name *other* keys
//! (`weight_*`, `obj_*->field`) that cannot be known before the elements are read, so they
//! cannot be part of a key spec. How that stays atomic:
//! - when no pattern references a key (no BY, BY without `*`, only `GET #`), the command only
//!   touches its key and its STORE destination, which `sort_keys` reports: the framework locks
//!   those, like any other command;
//! - when a pattern does reference keys, the commands' lock-plan hook (`sort_plan`) asks
//!   [`pattern_lock`] and takes a whole-shard lock on every shard (shared for a read-only SORT,
//!   exclusive with STORE), as for DBSIZE/KEYS/FLUSHALL. The handler then reads the elements,
//!   fetches BY values with one parallel hop per shard, sorts on the connection's thread, fetches
//!   GET values the same way and writes the destination, all inside that transaction. With one
//!   shard everything runs in a single hop instead.
//!
//! The list/zset/hash types are reached only through the small adapter functions below
//! (`list_items`, `zset_items`, `new_list`, `hash_field`).

use damselfly_protocol::Reply;

use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_types::compact::IntBuf;
use damselfly_types::list::{Fill, List};
use damselfly_types::{Value, ValueRef};

const G: Group = Group::Generic;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("sort", -2, WRITE | DENYOOM, custom((1, 1, 1), sort_keys), Conn(sort)).plan(sort_plan).family(acl::SET | acl::SORTEDSET | acl::LIST).acl(acl::DANGEROUS)
        .doc(G, "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result."),
    cmd("sort_ro", -2, READONLY, custom((1, 1, 1), sort_ro_keys), Conn(sort_ro)).plan(sort_plan).family(acl::SET | acl::SORTEDSET | acl::LIST).acl(acl::DANGEROUS)
        .doc(G, "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set."),
];

/// BY/GET patterns name keys nobody can know in advance: every shard is locked as a whole
/// (exclusively with STORE). See [`pattern_lock`].
fn sort_plan(args: &[&[u8]], plan: &mut dyn PlanSink) {
    if let Some(excl) = pattern_lock(args) {
        plan.lock_all_shards(excl);
    }
}

// ---------------------------------------------------------------------------------------------
// Adapters to the other collection types (the only places SORT touches them).

fn list_items(l: &List) -> Vec<Vec<u8>> {
    l.to_vecs()
}

fn zset_items(z: &damselfly_types::zset::ZSet) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(z.len());
    z.range(0, z.len(), false, |m, _| out.push(m.to_vec()));
    out
}

fn new_list(items: &[Vec<u8>], fill: i64) -> List {
    List::from_iter(items.iter().map(|v| v.as_slice()), Fill::new(fill))
}

fn hash_field(h: &damselfly_types::hash::Hash, field: &[u8]) -> Option<Vec<u8>> {
    h.get(field).map(|v| v.to_vec())
}

// ---------------------------------------------------------------------------------------------
// Keys and locking

/// SORT key [BY p] [LIMIT o c] [GET p]... [ASC|DESC] [ALPHA] [STORE dst]: the key and the last
/// STORE destination (Redis `sortGetKeys`).
/// SORT_RO's key: only the first argument (its BY/GET patterns name keys it may read, which
/// no key spec covers). Found by a function, as Redis's `sortROGetKeys`, which is why COMMAND
/// INFO flags it `movablekeys`.
fn sort_ro_keys(_args: &[&[u8]]) -> Vec<usize> {
    vec![1]
}

fn sort_keys(args: &[&[u8]]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if eq_ic(a, "limit") {
            i += 2;
        } else if eq_ic(a, "get") || eq_ic(a, "by") {
            i += 1;
        } else if eq_ic(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// Does a BY/GET pattern reference keys (as opposed to `#` or a constant)?
fn refs_keys(pattern: &[u8], get: bool) -> bool {
    !(get && pattern == b"#") && pattern.contains(&b'*')
}

/// For the transaction planner: `Some(exclusive)` when this SORT/SORT_RO has BY/GET patterns
/// that reference keys, so it must lock every shard (exclusively when it also STOREs).
pub fn pattern_lock(args: &[&[u8]]) -> Option<bool> {
    let mut refs = false;
    let mut store = false;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if eq_ic(a, "limit") {
            i += 2;
        } else if (eq_ic(a, "get") || eq_ic(a, "by")) && i + 1 < args.len() {
            refs |= refs_keys(args[i + 1], eq_ic(a, "get"));
            i += 1;
        } else if eq_ic(a, "store") && i + 1 < args.len() {
            store = true;
            i += 1;
        }
        i += 1;
    }
    refs.then_some(store)
}

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Clone, Debug, Default)]
struct Opts {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<Vec<u8>>,
    by: Option<Vec<u8>>,
    dontsort: bool,
    gets: Vec<Vec<u8>>,
    /// Called from a script: a set's output must be deterministic too (Redis sorts it).
    script: bool,
}

/// `full_access`: the user may read every key (else BY with a pattern and GET are refused, as
/// Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess` decides).
fn parse(args: &[&[u8]], readonly: bool, full_access: bool) -> Result<Opts, &'static str> {
    let mut o = Opts {
        limit_count: -1,
        ..Opts::default()
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if eq_ic(a, "asc") {
            o.desc = false;
        } else if eq_ic(a, "desc") {
            o.desc = true;
        } else if eq_ic(a, "alpha") {
            o.alpha = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            o.limit_start = parse_i64(args[j + 1]).ok_or(ERR_NOT_INT)?;
            o.limit_count = parse_i64(args[j + 2]).ok_or(ERR_NOT_INT)?;
            j += 2;
        } else if !readonly && eq_ic(a, "store") && left >= 1 {
            o.store = Some(args[j + 1].to_vec());
            j += 1;
        } else if eq_ic(a, "by") && left >= 1 {
            o.by = Some(args[j + 1].to_vec());
            // A constant BY pattern: nothing to sort by.
            o.dontsort = !args[j + 1].contains(&b'*');
            if !o.dontsort && !full_access {
                return Err("ERR BY option of SORT denied due to insufficient ACL permissions.");
            }
            j += 1;
        } else if eq_ic(a, "get") && left >= 1 {
            if !full_access {
                return Err("ERR GET option of SORT denied due to insufficient ACL permissions.");
            }
            o.gets.push(args[j + 1].to_vec());
            j += 1;
        } else {
            return Err(ERR_SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// Pattern lookups

/// One lookup a pattern asks for: a string key, or a hash key and field.
#[derive(Clone, Debug)]
struct Req {
    key: Vec<u8>,
    field: Option<Vec<u8>>,
}

/// Redis `lookupKeyByPattern` without the lookup: None when the pattern has no `*` (or is `#`,
/// which the caller handles).
fn substitute(pattern: &[u8], item: &[u8]) -> Option<Req> {
    let star = pattern.iter().position(|&c| c == b'*')?;
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&p| p + 2 < after.len());
    let (post, field) = match arrow {
        Some(p) => (&after[..p], Some(after[p + 2..].to_vec())),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + item.len() + post.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(item);
    key.extend_from_slice(post);
    Some(Req { key, field })
}

/// Resolves one request against a db: a string's value, or a hash field's value.
fn resolve(db: &mut Db, r: &Req, now: u64) -> Option<Vec<u8>> {
    let v = db.get_read(&r.key, now)?;
    match (v.view(), &r.field) {
        (ValueRef::Str(s), None) => {
            let mut b: IntBuf = [0; 20];
            Some(s.bytes(&mut b).to_vec())
        }
        (ValueRef::Hash(h), Some(f)) => hash_field(h, f),
        _ => None,
    }
}

fn resolve_all(db: &mut Db, reqs: &[Option<Req>], now: u64) -> Vec<Option<Vec<u8>>> {
    reqs.iter()
        .map(|r| r.as_ref().and_then(|r| resolve(db, r, now)))
        .collect()
}

/// Resolves requests on their shards (one parallel hop per shard involved), inside the
/// command's transaction (a SORT with lookups locks every shard); more hops follow.
async fn resolve_remote(cx: &mut ConnCtx, reqs: Vec<Option<Req>>) -> Vec<Option<Vec<u8>>> {
    let n = reqs.len();
    // Each request as two arguments: the key, then a marker byte and the hash field if any.
    let mut at: Vec<usize> = Vec::new();
    let mut items: Vec<Vec<u8>> = Vec::new();
    for (i, r) in reqs.into_iter().enumerate() {
        if let Some(r) = r {
            at.push(i);
            items.push(r.key);
            items.push(match r.field {
                Some(f) => [&b"1"[..], &f].concat(),
                None => b"0".to_vec(),
            });
        }
    }
    let refs: Vec<&[u8]> = items.iter().map(|v| &v[..]).collect();
    let parts = cx
        .hops()
        .per_shard_of(&refs, 2, |c, pairs, ()| {
            let now = c.now;
            let db = c.db();
            pairs
                .chunks_exact(2)
                .map(|p| {
                    let field = (p[1][0] == b'1').then(|| p[1][1..].to_vec());
                    resolve(
                        db,
                        &Req {
                            key: p[0].to_vec(),
                            field,
                        },
                        now,
                    )
                })
                .collect::<Vec<_>>()
        })
        .run_more()
        .await;
    let mut out: Vec<Option<Vec<u8>>> = vec![None; n];
    for p in parts {
        for (g, v) in p.groups.into_iter().zip(p.result) {
            out[at[g]] = v;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The sort itself

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SrcKind {
    List,
    Set,
    ZSet,
}

/// What the sort key holds.
enum Source {
    Wrong,
    Items(SrcKind, Vec<Vec<u8>>),
}

fn load(db: &mut Db, key: &[u8], now: u64) -> Source {
    // Redis's SORT converts a listpack zset to skiplist before sorting it (OBJECT ENCODING
    // shows it afterwards); do the same, quietly (not a logical write).
    if let Some(pos) = db.find(key, now) {
        if let Some(z) = db.at_mut_quiet(pos).as_zset_mut() {
            z.convert_to_large();
        }
    }
    match db.get_read(key, now).map(|v| v.view()) {
        // A missing key sorts like an empty list.
        None => Source::Items(SrcKind::List, Vec::new()),
        Some(ValueRef::List(l)) => Source::Items(SrcKind::List, list_items(l)),
        Some(ValueRef::Set(s)) => Source::Items(SrcKind::Set, s.to_vecs()),
        Some(ValueRef::ZSet(z)) => Source::Items(SrcKind::ZSet, zset_items(z)),
        Some(_) => Source::Wrong,
    }
}

/// C `strtod` semantics (what Redis 7.0 uses for SORT weights): leading whitespace, hex floats,
/// inf/nan words; the whole string must be consumed (up to a NUL), no range errors, no NaN.
fn strtod_score(b: &[u8]) -> Option<f64> {
    let mut buf = Vec::with_capacity(b.len() + 1);
    buf.extend_from_slice(b);
    buf.push(0);
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: buf is NUL-terminated and outlives the call; errno is thread-local.
    let (v, consumed_to_nul, erange) = unsafe {
        *libc::__errno_location() = 0;
        let p = buf.as_ptr() as *const libc::c_char;
        let v = libc::strtod(p, &mut end);
        let erange = *libc::__errno_location() == libc::ERANGE;
        (v, !end.is_null() && *end == 0, erange)
    };
    if !consumed_to_nul || erange || v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// Redis `compareStringObjects` for binary strings: memcmp, then length.
fn cmp_bytes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.cmp(b)
}

/// Redis `collateStringObjects` (`strcoll`) in the C/C.UTF-8 locale: `strcmp`, which stops at
/// the first NUL byte.
fn cmp_coll(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let cut = |x: &[u8]| -> usize { x.iter().position(|&c| c == 0).unwrap_or(x.len()) };
    a[..cut(a)].cmp(&b[..cut(b)])
}

/// The state of one SORT between its phases.
struct Job {
    opts: Opts,
    items: Vec<Vec<u8>>,
    start: i64,
    end: i64,
}

/// How the job ends.
enum Done {
    Error(&'static str),
    /// Reply with these values (None = nil).
    Reply(Vec<Option<Vec<u8>>>),
    /// STOREd this many values.
    Stored(usize),
}

const ERR_SCORES: &str = "ERR One or more scores can't be converted into double";

impl Job {
    fn new(mut opts: Opts, kind: SrcKind, mut items: Vec<Vec<u8>>) -> Job {
        // A set has no order of its own: with STORE, or for a script, it is sorted (ALPHA) so
        // the result is deterministic (Redis's sortCommandGeneric).
        if opts.dontsort && kind == SrcKind::Set && (opts.store.is_some() || opts.script) {
            opts.dontsort = false;
            opts.alpha = true;
            opts.by = None;
        }
        let len = items.len() as i64;
        let mut start = opts.limit_start.max(0).min(len);
        let count = opts.limit_count.max(-1).min(len);
        let mut end = if count < 0 {
            len - 1
        } else {
            start + count - 1
        };
        if start >= len {
            start = len - 1;
            end = len - 2;
        }
        if end >= len {
            end = len - 1;
        }
        // Lists and sorted sets keep their own order when not sorting; DESC walks from the tail.
        if opts.dontsort && kind != SrcKind::Set && opts.desc {
            items.reverse();
        }
        Job {
            opts,
            items,
            start,
            end,
        }
    }

    fn sorting(&self) -> bool {
        !self.opts.dontsort
    }

    /// Lookups for BY weights (None when sorting by the elements themselves or not at all).
    fn by_requests(&self) -> Option<Vec<Option<Req>>> {
        if !self.sorting() {
            return None;
        }
        let by = self.opts.by.as_ref()?;
        Some(self.items.iter().map(|it| substitute(by, it)).collect())
    }

    /// Sorts with the BY values (index-aligned with the items) when there was a BY pattern.
    fn sort(&mut self, by_vals: Option<Vec<Option<Vec<u8>>>>) -> Result<(), &'static str> {
        if !self.sorting() {
            return Ok(());
        }
        let desc = self.opts.desc;
        let items = std::mem::take(&mut self.items);
        let by_pattern = self.opts.by.is_some();
        // ALPHA compares binary-safely when storing, with strcoll otherwise (like Redis).
        let alpha_cmp = if self.opts.store.is_some() {
            cmp_bytes
        } else {
            cmp_coll
        };
        let mut by_vals = by_vals.unwrap_or_default();
        by_vals.resize(items.len(), None);
        let mut sorted: Vec<Vec<u8>> = if self.opts.alpha {
            let mut v: Vec<(Vec<u8>, Option<Vec<u8>>)> = items.into_iter().zip(by_vals).collect();
            v.sort_by(|a, b| {
                let c = if by_pattern {
                    match (&a.1, &b.1) {
                        (None, None) => std::cmp::Ordering::Equal,
                        (None, Some(_)) => std::cmp::Ordering::Less,
                        (Some(_), None) => std::cmp::Ordering::Greater,
                        (Some(x), Some(y)) => alpha_cmp(x, y),
                    }
                } else {
                    alpha_cmp(&a.0, &b.0)
                };
                if desc {
                    c.reverse()
                } else {
                    c
                }
            });
            v.into_iter().map(|(i, _)| i).collect()
        } else {
            let mut v: Vec<(Vec<u8>, f64)> = Vec::with_capacity(items.len());
            for (it, bv) in items.into_iter().zip(by_vals) {
                let score = if by_pattern {
                    match bv {
                        // A missing weight counts as 0.
                        None => 0.0,
                        Some(b) => strtod_score(&b).ok_or(ERR_SCORES)?,
                    }
                } else {
                    strtod_score(&it).ok_or(ERR_SCORES)?
                };
                v.push((it, score));
            }
            v.sort_by(|a, b| {
                let c =
                    a.1.partial_cmp(&b.1)
                        .unwrap_or(std::cmp::Ordering::Equal)
                        .then_with(|| cmp_bytes(&a.0, &b.0));
                if desc {
                    c.reverse()
                } else {
                    c
                }
            });
            v.into_iter().map(|(i, _)| i).collect()
        };
        std::mem::swap(&mut self.items, &mut sorted);
        Ok(())
    }

    /// The selected range of items.
    fn selected(&self) -> &[Vec<u8>] {
        if self.end < self.start || self.start < 0 {
            return &[];
        }
        let end = (self.end as usize + 1).min(self.items.len());
        &self.items[(self.start as usize).min(end)..end]
    }

    /// Lookups for GET patterns over the selected items (None = `#` or a constant pattern).
    fn get_requests(&self) -> Vec<Option<Req>> {
        let mut out = Vec::new();
        for it in self.selected() {
            for g in &self.opts.gets {
                out.push(if g.as_slice() == b"#" {
                    None
                } else {
                    substitute(g, it)
                });
            }
        }
        out
    }

    /// The output values (None = nil), given the GET lookups' results.
    fn output(&self, get_vals: Vec<Option<Vec<u8>>>) -> Vec<Option<Vec<u8>>> {
        if self.opts.gets.is_empty() {
            return self.selected().iter().map(|i| Some(i.clone())).collect();
        }
        let mut vals = get_vals.into_iter();
        let mut out = Vec::new();
        for it in self.selected() {
            for g in &self.opts.gets {
                let v = vals.next().flatten();
                out.push(if g.as_slice() == b"#" {
                    Some(it.clone())
                } else {
                    v
                });
            }
        }
        out
    }
}

/// Writes the STORE result (an empty one deletes the destination). Returns its length.
fn store(db: &mut Db, dst: &[u8], vals: Vec<Option<Vec<u8>>>, fill: i64, now: u64) -> usize {
    let n = vals.len();
    if n == 0 {
        if let Some(pos) = db.find(dst, now) {
            db.touch_key(dst);
            db.remove_at(pos);
            ev::emit(ev::GENERIC, "del", db.index, dst);
        }
        return 0;
    }
    let items: Vec<Vec<u8>> = vals.into_iter().map(|v| v.unwrap_or_default()).collect();
    db.set(
        dst,
        Value::list(new_list(&items, fill)),
        TtlMode::Clear,
        now,
    );
    ev::emit(ev::LIST, "sortstore", db.index, dst);
    n
}

fn list_fill(shared: &damselfly_core::engine::Shared) -> i64 {
    shared.config.enc_limit(EncLimit::ListMaxListpackSize)
}

/// The whole command on one shard (no pattern lookups elsewhere, destination local).
fn run_local(c: &mut CmdCtx<'_>, key: &[u8], opts: Opts) -> Done {
    let now = c.now;
    let db = c.db();
    let (kind, items) = match load(db, key, now) {
        Source::Wrong => return Done::Error(ERR_WRONGTYPE),
        Source::Items(k, v) => (k, v),
    };
    let mut job = Job::new(opts, kind, items);
    let by = job.by_requests().map(|r| resolve_all(db, &r, now));
    if let Err(e) = job.sort(by) {
        return Done::Error(e);
    }
    let gets = resolve_all(db, &job.get_requests(), now);
    // (A STORE destination is written by the caller's next hop, on its own shard.)
    Done::Reply(job.output(gets))
}

/// A SORT whose BY/GET patterns name other keys, inside its transaction (which locks every
/// shard, see the module docs): load the source, resolve BY lookups, sort, resolve GET lookups,
/// store.
async fn sort_with_lookups(cx: &mut ConnCtx, key: &[u8], opts: Opts) -> Done {
    let k = key.to_vec();
    let src = cx
        .hops()
        .on_key(key, move |c, ()| {
            let now = c.now;
            load(c.db(), &k, now)
        })
        .run_more()
        .await;
    let (kind, items) = match src {
        Source::Wrong => return Done::Error(ERR_WRONGTYPE),
        Source::Items(k, v) => (k, v),
    };
    let mut job = Job::new(opts, kind, items);
    let by = match job.by_requests() {
        Some(reqs) => Some(resolve_remote(cx, reqs).await),
        None => None,
    };
    if let Err(e) = job.sort(by) {
        return Done::Error(e);
    }
    let reqs = job.get_requests();
    let gets = if reqs.iter().any(|r| r.is_some()) {
        resolve_remote(cx, reqs).await
    } else {
        vec![None; reqs.len()]
    };
    let out = job.output(gets);
    match job.opts.store.take() {
        Some(dst) => {
            let d = dst.clone();
            let n = cx
                .hops()
                .on_key(&d, move |c, ()| {
                    let now = c.now;
                    let fill = list_fill(c.shared);
                    store(c.db(), &dst, out, fill, now)
                })
                .run()
                .await;
            Done::Stored(n)
        }
        None => Done::Reply(out),
    }
}

fn reply_done(reply: &mut Reply, d: Done) {
    match d {
        Done::Error(e) => reply.error(e),
        Done::Stored(n) => reply.int(n as i64),
        Done::Reply(vals) => {
            reply.array(vals.len());
            for v in &vals {
                match v {
                    Some(b) => reply.bulk(b),
                    None => reply.null(),
                }
            }
        }
    }
}

async fn sort_generic(cx: &mut ConnCtx, args: &[&[u8]], readonly: bool) {
    let user = &cx.acl.user;
    let full_access = user.unrestricted
        || damselfly_core::commands::registry()
            .lookup(args[0])
            .is_some_and(|e| {
                user.all_keys_for(e, args, damselfly_core::commands::key_flags::ACCESS)
            });
    let opts = match parse(args, readonly, full_access) {
        Ok(o) => Opts {
            script: cx.in_script,
            ..o
        },
        Err(e) => {
            cx.reply.error(e);
            return;
        }
    };
    let key = args[1];
    let lookups = opts.by.as_deref().is_some_and(|p| refs_keys(p, false))
        || opts.gets.iter().any(|g| refs_keys(g, true));
    let done = if lookups {
        sort_with_lookups(cx, key, opts).await
    } else {
        // Everything but the STORE happens on the source's shard (one message, with the store,
        // when the destination lives there too).
        let k = key.to_vec();
        let store_to = opts.store.clone();
        let sorted = cx.hops().on_key(key, move |c, ()| run_local(c, &k, opts));
        match store_to {
            None => sorted.run().await,
            Some(dst) => {
                let d = dst.clone();
                sorted
                    .on_key(&d, move |c, done| match done {
                        Done::Reply(out) => {
                            let now = c.now;
                            let fill = list_fill(c.shared);
                            Done::Stored(store(c.db(), &dst, out, fill, now))
                        }
                        other => other,
                    })
                    .run()
                    .await
            }
        }
    };
    reply_done(&mut cx.reply, done);
}

fn sort<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(sort_generic(cx, args, false))
}

fn sort_ro<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(sort_generic(cx, args, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_substitution_like_redis() {
        let r = substitute(b"w_*", b"3").unwrap();
        assert_eq!((r.key, r.field), (b"w_3".to_vec(), None));
        let r = substitute(b"h_*->f", b"a").unwrap();
        assert_eq!((r.key, r.field), (b"h_a".to_vec(), Some(b"f".to_vec())));
        // An arrow with no field name is part of the key.
        let r = substitute(b"h_*->", b"a").unwrap();
        assert_eq!((r.key, r.field), (b"h_a->".to_vec(), None));
        // The arrow must follow the star.
        let r = substitute(b"a->b*c", b"x").unwrap();
        assert_eq!((r.key, r.field), (b"a->bxc".to_vec(), None));
        assert!(substitute(b"nostar", b"x").is_none());
    }

    #[test]
    fn strtod_scores() {
        assert_eq!(strtod_score(b"1.5"), Some(1.5));
        assert_eq!(strtod_score(b" 2"), Some(2.0));
        assert_eq!(strtod_score(b""), Some(0.0));
        assert_eq!(strtod_score(b"0x10"), Some(16.0));
        assert_eq!(strtod_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(strtod_score(b"1\0zz"), Some(1.0));
        assert_eq!(strtod_score(b"2 "), None);
        assert_eq!(strtod_score(b"nan"), None);
        assert_eq!(strtod_score(b"1e400"), None);
        assert_eq!(strtod_score(b"abc"), None);
    }

    #[test]
    fn keys_and_locks() {
        let a: Vec<&[u8]> = vec![
            b"sort", b"k", b"by", b"w_*", b"store", b"d", b"limit", b"0", b"1",
        ];
        assert_eq!(sort_keys(&a), vec![1, 5]);
        assert_eq!(pattern_lock(&a), Some(true));
        let a: Vec<&[u8]> = vec![b"sort", b"k", b"get", b"#", b"by", b"nosort"];
        assert_eq!(pattern_lock(&a), None);
        let a: Vec<&[u8]> = vec![b"sort_ro", b"k", b"get", b"o_*"];
        assert_eq!(pattern_lock(&a), Some(false));
    }
}
