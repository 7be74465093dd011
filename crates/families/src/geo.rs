//! Geo commands (Redis 7.0 `geo.c` semantics, replies and error texts): GEOADD, GEODIST,
//! GEOHASH, GEOPOS, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their `_RO`
//! forms.
//!
//! A geo set is a sorted set whose scores are 52-bit geohashes (`types::geohash`). A search
//! visits the sorted-set score ranges of up to nine geohash boxes around the centre, keeps the
//! points inside the shape, then sorts them the way Redis does (glibc's merge sort for a full
//! sort, Redis's partial quicksort `pqsort` when COUNT cuts the result): ties and all, the
//! replies are Redis's.
//!
//! The read-only searches are `Handler::Shard`. GEORADIUS / GEORADIUSBYMEMBER (which may STORE)
//! and GEOSEARCHSTORE run on the connection: the search happens on the source's shard and the
//! result is written on the destination's (one message when both live on the same shard).

use damselfly_protocol::Reply;

use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::config::EncLimit;
use damselfly_core::engine::db::{Db, TtlMode};
use damselfly_types::geohash::{self as gh, Shape, ShapeKind};
use damselfly_types::zset::pack::cmp_entry;
use damselfly_types::zset::{Limits, ZSet};
use damselfly_types::{Kind, Value, ValueRef};

const G: Group = Group::Geo;

/// GEORADIUS key lon lat radius unit ... [STORE key] [STOREDIST key]: the source, then the
/// destinations after STORE / STOREDIST (searched from the first option), as Redis declares them.
const RADIUS_KEYS: KeySpec = many(&[
    range(1, 1, 1),
    keyword("STORE", 6, 0, 1, 0),
    keyword("STOREDIST", 6, 0, 1, 0),
]);
/// GEORADIUSBYMEMBER key member radius unit ...: options start one argument earlier.
const MEMBER_KEYS: KeySpec = many(&[
    range(1, 1, 1),
    keyword("STORE", 5, 0, 1, 0),
    keyword("STOREDIST", 5, 0, 1, 0),
]);

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("geoadd", -5, WRITE | DENYOOM, range(1, 1, 1), Shard(geoadd))
        .doc(G, "3.2.0", "Add one or more geospatial items in the geospatial index represented using a sorted set"),
    cmd("geodist", -4, READONLY, range(1, 1, 1), Shard(geodist))
        .doc(G, "3.2.0", "Returns the distance between two members of a geospatial index"),
    cmd("geohash", -2, READONLY, range(1, 1, 1), Shard(geohash))
        .doc(G, "3.2.0", "Returns members of a geospatial index as standard geohash strings"),
    cmd("geopos", -2, READONLY, range(1, 1, 1), Shard(geopos))
        .doc(G, "3.2.0", "Returns longitude and latitude of members of a geospatial index"),
    cmd("georadius", -6, WRITE | DENYOOM, RADIUS_KEYS, Conn(georadius)).plan(radius_plan)
        .doc(G, "3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point"),
    cmd("georadiusbymember", -5, WRITE | DENYOOM, MEMBER_KEYS, Conn(georadiusbymember)).plan(member_plan)
        .doc(G, "3.2.0", "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member"),
    cmd("georadius_ro", -6, READONLY, range(1, 1, 1), Shard(georadius_ro))
        .doc(G, "3.2.10", "A read-only variant for GEORADIUS"),
    cmd("georadiusbymember_ro", -5, READONLY, range(1, 1, 1), Shard(georadiusbymember_ro))
        .doc(G, "3.2.10", "A read-only variant for GEORADIUSBYMEMBER"),
    cmd("geosearch", -7, READONLY, range(1, 1, 1), Shard(geosearch))
        .doc(G, "6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle."),
    cmd("geosearchstore", -8, WRITE | DENYOOM, range(1, 2, 1), Conn(geosearchstore))
        .doc(G, "6.2.0", "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key."),
];

// ---------------------------------------------------------------------------------------------
// Shared helpers.

const ERR_MEMBER: &str = "ERR could not decode requested zset member";
const ERR_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";

/// Why a command fails (reported once the shard work is done).
#[derive(Debug)]
enum Fail {
    WrongType,
    Msg(Vec<u8>),
}

impl Fail {
    fn msg(s: &str) -> Fail {
        Fail::Msg(s.as_bytes().to_vec())
    }

    fn reply(&self, r: &mut Reply) {
        match self {
            Fail::WrongType => r.error(ERR_WRONGTYPE),
            Fail::Msg(m) => r.error_bytes(m),
        }
    }
}

fn limits_of(shared: &damselfly_core::engine::Shared) -> Limits {
    let c = &shared.config;
    Limits {
        entries: c.enc_limit(EncLimit::ZsetMaxListpackEntries).max(0) as usize,
        value: c.enc_limit(EncLimit::ZsetMaxListpackValue).max(0) as usize,
    }
}

/// A zset to read: Ok(None) when missing, Err when the key holds another type.
fn zget<'a>(db: &'a mut Db, key: &[u8], now: u64) -> Result<Option<&'a ZSet>, Fail> {
    match db.get_read(key, now).map(|v| v.view()) {
        None => Ok(None),
        Some(ValueRef::ZSet(z)) => Ok(Some(z)),
        Some(_) => Err(Fail::WrongType),
    }
}

/// Redis `getDoubleFromObjectOrReply`: `msg` replaces the default error text.
fn double_arg(a: &[u8], msg: Option<&str>) -> Result<f64, Fail> {
    damselfly_protocol::double::parse_f64(a).ok_or_else(|| Fail::msg(msg.unwrap_or(ERR_NOT_FLOAT)))
}

/// Redis `extractLongLatOrReply`: both numbers first, then the Mercator limits.
fn lonlat_args(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Fail> {
    let x = double_arg(lon, None)?;
    let y = double_arg(lat, None)?;
    if !(gh::LONG_MIN..=gh::LONG_MAX).contains(&x) || !(gh::LAT_MIN..=gh::LAT_MAX).contains(&y) {
        // C's "%f" (six decimals, "inf"/"-inf"); NaN never parses.
        return Err(Fail::Msg(
            format!("ERR invalid longitude,latitude pair {x:.6},{y:.6}").into_bytes(),
        ));
    }
    Ok((x, y))
}

/// Redis `extractUnitOrReply`: meters per unit.
fn unit_arg(a: &[u8]) -> Result<f64, Fail> {
    if eq_ic(a, "m") {
        Ok(1.0)
    } else if eq_ic(a, "km") {
        Ok(1000.0)
    } else if eq_ic(a, "ft") {
        Ok(0.3048)
    } else if eq_ic(a, "mi") {
        Ok(1609.34)
    } else {
        Err(Fail::msg(ERR_UNIT))
    }
}

/// Redis `extractDistanceOrReply`: (meters per unit, radius).
fn radius_args(radius: &[u8], unit: &[u8]) -> Result<(f64, f64), Fail> {
    let r = double_arg(radius, Some("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(Fail::msg("ERR radius cannot be negative"));
    }
    Ok((unit_arg(unit)?, r))
}

/// Redis `extractBoxOrReply`: (meters per unit, width, height).
fn box_args(width: &[u8], height: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), Fail> {
    let w = double_arg(width, Some("ERR need numeric width"))?;
    let h = double_arg(height, Some("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(Fail::msg("ERR height or width cannot be negative"));
    }
    Ok((unit_arg(unit)?, w, h))
}

/// Longitude and latitude of a member (Redis `longLatFromMember`).
fn member_pos(z: &ZSet, member: &[u8]) -> Result<(f64, f64), Fail> {
    z.score(member)
        .map(gh::decode_score)
        .ok_or_else(|| Fail::msg(ERR_MEMBER))
}

/// C `llrint` in the default rounding mode (ties to even); out of range: LLONG_MIN.
fn llrint(x: f64) -> i64 {
    let r = x.round_ties_even();
    if r.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&r) {
        i64::MIN
    } else {
        r as i64
    }
}

/// Redis `addReplyDoubleDistance`: four decimals (`fixedpoint_d2string`), always a bulk string.
fn distance_text(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".to_string();
    }
    let v = llrint(d * 10000.0);
    let neg = v < 0;
    let u = v.unsigned_abs();
    format!(
        "{}{}.{:04}",
        if neg { "-" } else { "" },
        u / 10000,
        u % 10000
    )
}

fn reply_distance(r: &mut Reply, d: f64) {
    r.bulk(distance_text(d).as_bytes());
}

/// Redis `ld2string(.., LD_STR_HUMAN)` of a double: `%.17Lf` without trailing zeros.
fn human_text(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if d.is_nan() {
        return if d.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    let mut s = format!("{d:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

/// Redis `addReplyHumanLongDouble`: a bulk string in RESP2, a double in RESP3.
fn reply_human(r: &mut Reply, d: f64) {
    let t = human_text(d);
    if r.is_resp3() {
        let mut line = Vec::with_capacity(t.len() + 3);
        line.push(b',');
        line.extend_from_slice(t.as_bytes());
        line.extend_from_slice(b"\r\n");
        r.raw(&line);
    } else {
        r.bulk(t.as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// GEOADD

fn geoadd(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if eq_ic(a, "nx") {
            nx = true;
        } else if eq_ic(a, "xx") {
            xx = true;
        } else if eq_ic(a, "ch") {
            ch = true;
        } else {
            break;
        }
        i += 1;
    }
    let n = args.len() - i;
    // (No element at all: the ZADD GEOADD turns into refuses it alike.)
    if !n.is_multiple_of(3) || (xx && nx) || n == 0 {
        return cx.reply.error(ERR_SYNTAX);
    }
    let mut items = Vec::with_capacity(n / 3);
    for t in args[i..].chunks_exact(3) {
        let (x, y) = match lonlat_args(t[0], t[1]) {
            Ok(p) => p,
            Err(e) => return e.reply(cx.reply),
        };
        let Some(score) = gh::score_of(x, y) else {
            // Unreachable: the pair was checked against the same limits.
            return cx.reply.error(ERR_SYNTAX);
        };
        items.push((score as f64, t[2]));
    }
    let lim = limits_of(cx.shared);
    let now = cx.now;
    let key = args[1];
    let db = &mut cx.shard.dbs[cx.db];
    let pos = match db.find(key, now) {
        Some(p) if db.at(p).1.kind() == Kind::ZSet => p,
        Some(_) => return cx.reply.error(ERR_WRONGTYPE),
        None if xx => return cx.reply.int(0),
        None => db.insert_new(key, Value::zset(ZSet::default()), TtlMode::Clear),
    };
    let (mut added, mut updated) = (0i64, 0i64);
    if let Some(z) = db.at_mut_quiet(pos).as_zset_mut() {
        for &(score, m) in &items {
            match z.score(m) {
                Some(_) if nx => {}
                Some(cur) => {
                    if score != cur {
                        z.update(m, score);
                        updated += 1;
                    }
                }
                None if xx => {}
                None => {
                    z.insert(m, score, &lim);
                    added += 1;
                }
            }
        }
    }
    if added + updated > 0 {
        db.touch_key(key);
        ev::emit(ev::ZSET, "zadd", db.index, key);
    } else if db.at(pos).1.as_zset().is_some_and(|z| z.is_empty()) {
        db.remove_at(pos);
    }
    cx.reply.int(if ch { added + updated } else { added });
}

// ---------------------------------------------------------------------------------------------
// GEODIST / GEOHASH / GEOPOS

fn geodist(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let to_meter = match args.len() {
        4 => 1.0,
        5 => match unit_arg(args[4]) {
            Ok(u) => u,
            Err(e) => return e.reply(cx.reply),
        },
        _ => return cx.reply.error(ERR_SYNTAX),
    };
    let now = cx.now;
    let reply = &mut *cx.reply;
    let z = match zget(&mut cx.shard.dbs[cx.db], args[1], now) {
        Err(e) => return e.reply(reply),
        Ok(None) => return reply.null(),
        Ok(Some(z)) => z,
    };
    match (z.score(args[2]), z.score(args[3])) {
        (Some(s1), Some(s2)) => {
            let (x1, y1) = gh::decode_score(s1);
            let (x2, y2) = gh::decode_score(s2);
            reply_distance(reply, gh::distance(x1, y1, x2, y2) / to_meter);
        }
        _ => reply.null(),
    }
}

fn geohash(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    per_member(cx, args, |reply, score| match score {
        Some(s) => reply.bulk(&gh::geohash_string(s)),
        None => reply.null(),
    });
}

fn geopos(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    per_member(cx, args, |reply, score| match score {
        Some(s) => {
            let (x, y) = gh::decode_score(s);
            reply.array(2);
            reply_human(reply, x);
            reply_human(reply, y);
        }
        None => reply.null_array(),
    });
}

/// GEOHASH/GEOPOS: one reply per member named after the key, from its score (None: no such
/// member, or no such key).
fn per_member(cx: &mut CmdCtx<'_>, args: &[&[u8]], each: impl Fn(&mut Reply, Option<f64>)) {
    let now = cx.now;
    let reply = &mut *cx.reply;
    let z = match zget(&mut cx.shard.dbs[cx.db], args[1], now) {
        Err(e) => return e.reply(reply),
        Ok(z) => z,
    };
    reply.array(args.len() - 2);
    for m in &args[2..] {
        each(reply, z.and_then(|z| z.score(m)));
    }
}

// ---------------------------------------------------------------------------------------------
// Searches: argument parsing.

/// Which search command (Redis `georadiusGeneric`'s flags).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    /// GEORADIUS / GEORADIUS_RO: key lon lat radius unit ...
    Radius,
    /// GEORADIUSBYMEMBER / _RO: key member radius unit ...
    Member,
    /// GEOSEARCH key ...
    Search,
    /// GEOSEARCHSTORE dst src ...
    SearchStore,
}

impl Variant {
    /// Index of the first option argument.
    fn base(self) -> usize {
        match self {
            Variant::Radius => 6,
            Variant::Member => 5,
            Variant::Search => 2,
            Variant::SearchStore => 3,
        }
    }

    fn source(self) -> usize {
        if self == Variant::SearchStore {
            2
        } else {
            1
        }
    }

    fn is_search(self) -> bool {
        matches!(self, Variant::Search | Variant::SearchStore)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed search.
#[derive(Clone, Debug)]
struct Query {
    /// None only when the source is missing (GEORADIUSBYMEMBER then skips its radius).
    shape: Option<Shape>,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    sort: Sort,
    /// 0: unlimited.
    count: u64,
    any: bool,
    /// Argument index of the destination key.
    store: Option<usize>,
    storedist: bool,
}

/// The destination GEORADIUS / GEORADIUSBYMEMBER would write to: its options walked as Redis
/// walks them (the last STORE / STOREDIST wins), up to the first one it would refuse. Used for
/// locking and routing before the source is read; the parse proper then finds the same key.
fn store_index(args: &[&[u8]], base: usize) -> Option<usize> {
    let mut found = None;
    let mut i = base;
    while i < args.len() {
        let a = args[i];
        let more = i + 1 < args.len();
        if ["withdist", "withhash", "withcoord", "any", "asc", "desc"]
            .iter()
            .any(|o| eq_ic(a, o))
        {
            i += 1;
        } else if eq_ic(a, "count") && more {
            i += 2;
        } else if (eq_ic(a, "store") || eq_ic(a, "storedist")) && more {
            found = Some(i + 1);
            i += 2;
        } else {
            break;
        }
    }
    found
}

/// Locks a STORE destination the key specs cannot see (a repeated STORE/STOREDIST: Redis writes
/// the last one, the key spec names the first). The plan does not say the command's database,
/// so that key is locked in every one; this only happens for such repeated options.
fn store_plan(args: &[&[u8]], plan: &mut dyn PlanSink, spec: &KeySpec, base: usize) {
    let Some(i) = store_index(args, base) else {
        return;
    };
    if spec.positions(args).contains(&i) {
        return;
    }
    for db in 0..plan.dbnum() {
        plan.lock_key(db, args[i], true);
    }
}

fn radius_plan(args: &[&[u8]], plan: &mut dyn PlanSink) {
    store_plan(args, plan, &RADIUS_KEYS, Variant::Radius.base())
}

fn member_plan(args: &[&[u8]], plan: &mut dyn PlanSink) {
    store_plan(args, plan, &MEMBER_KEYS, Variant::Member.base())
}

/// Redis `georadiusGeneric`'s argument handling, in its order (the source was looked up and
/// type-checked first; `z` is None when it is missing).
fn parse_query(args: &[&[u8]], z: Option<&ZSet>, v: Variant, nostore: bool) -> Result<Query, Fail> {
    let mut center: Option<(f64, f64)> = None;
    // (meters per unit, shape)
    let mut area: Option<(f64, ShapeKind)> = None;
    match v {
        Variant::Radius => {
            center = Some(lonlat_args(args[2], args[3])?);
            let (conv, r) = radius_args(args[4], args[5])?;
            area = Some((conv, ShapeKind::Radius(r)));
        }
        Variant::Member => {
            if let Some(z) = z {
                center = Some(member_pos(z, args[2])?);
                let (conv, r) = radius_args(args[3], args[4])?;
                area = Some((conv, ShapeKind::Radius(r)));
            }
        }
        Variant::Search | Variant::SearchStore => {}
    }
    let search = v.is_search();
    let mut q = Query {
        shape: None,
        withdist: false,
        withhash: false,
        withcoord: false,
        sort: Sort::None,
        count: 0,
        any: false,
        store: (v == Variant::SearchStore).then_some(1),
        storedist: false,
    };
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut i = v.base();
    while i < args.len() {
        let a = args[i];
        // Arguments after this one.
        let left = args.len() - i - 1;
        if eq_ic(a, "withdist") {
            q.withdist = true;
        } else if eq_ic(a, "withhash") {
            q.withhash = true;
        } else if eq_ic(a, "withcoord") {
            q.withcoord = true;
        } else if eq_ic(a, "any") {
            q.any = true;
        } else if eq_ic(a, "asc") {
            q.sort = Sort::Asc;
        } else if eq_ic(a, "desc") {
            q.sort = Sort::Desc;
        } else if eq_ic(a, "count") && left >= 1 {
            let Some(n) = parse_i64(args[i + 1]) else {
                return Err(Fail::msg(ERR_NOT_INT));
            };
            if n <= 0 {
                return Err(Fail::msg("ERR COUNT must be > 0"));
            }
            q.count = n as u64;
            i += 1;
        } else if (eq_ic(a, "store") || eq_ic(a, "storedist")) && left >= 1 && !nostore && !search {
            q.store = Some(i + 1);
            q.storedist = eq_ic(a, "storedist");
            i += 1;
        } else if eq_ic(a, "storedist") && v == Variant::SearchStore {
            q.storedist = true;
        } else if eq_ic(a, "frommember") && left >= 1 && search && !fromloc {
            // No source: parsing goes on, the empty reply comes at the end.
            if let Some(z) = z {
                center = Some(member_pos(z, args[i + 1])?);
            }
            frommember = true;
            i += 1;
        } else if eq_ic(a, "fromlonlat") && left >= 2 && search && !frommember {
            center = Some(lonlat_args(args[i + 1], args[i + 2])?);
            fromloc = true;
            i += 2;
        } else if eq_ic(a, "byradius") && left >= 2 && search && !bybox {
            let (conv, r) = radius_args(args[i + 1], args[i + 2])?;
            area = Some((conv, ShapeKind::Radius(r)));
            byradius = true;
            i += 2;
        } else if eq_ic(a, "bybox") && left >= 3 && search && !byradius {
            let (conv, w, h) = box_args(args[i + 1], args[i + 2], args[i + 3])?;
            area = Some((
                conv,
                ShapeKind::Box {
                    width: w,
                    height: h,
                },
            ));
            bybox = true;
            i += 3;
        } else {
            return Err(Fail::msg(ERR_SYNTAX));
        }
        i += 1;
    }
    if q.store.is_some() && (q.withdist || q.withhash || q.withcoord) {
        let what = if v == Variant::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Fail::Msg(
            format!("ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
                .into_bytes(),
        ));
    }
    if search && !(frommember || fromloc) {
        return Err(Fail::Msg(
            [
                b"ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for ",
                args[0],
            ]
            .concat(),
        ));
    }
    if search && !(byradius || bybox) {
        return Err(Fail::Msg(
            [
                b"ERR exactly one of BYRADIUS and BYBOX can be specified for ",
                args[0],
            ]
            .concat(),
        ));
    }
    if q.any && q.count == 0 {
        return Err(Fail::msg("ERR the ANY argument requires COUNT argument"));
    }
    if let (Some((lon, lat)), Some((conversion, kind))) = (center, area) {
        q.shape = Some(Shape {
            lon,
            lat,
            conversion,
            kind,
        });
    }
    Ok(q)
}

// ---------------------------------------------------------------------------------------------
// Searches: collecting and sorting.

/// A point found (Redis `geoPoint`).
#[derive(Clone, Debug)]
struct Point {
    member: Vec<u8>,
    lon: f64,
    lat: f64,
    /// Meters while searching; in the query's unit once returned.
    dist: f64,
    score: f64,
}

/// Redis `membersOfAllNeighbors`: the points of the nine boxes that lie inside the shape, box
/// by box, each box in score order. `limit` (COUNT ... ANY, 0: none) stops the walk early.
fn collect(z: &ZSet, shape: &Shape, limit: u64) -> Vec<Point> {
    let boxes = gh::search_boxes(shape);
    let mut out: Vec<Point> = Vec::new();
    let full = |out: &Vec<Point>| limit != 0 && !out.is_empty() && out.len() as u64 >= limit;
    // (Redis compares with the last box processed, but "none yet" and "the centre box" look
    // alike there: a neighbour equal to the centre is searched again, as in Redis.)
    let mut last = 0usize;
    for (i, b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        if last != 0 && *b == boxes[last] {
            continue;
        }
        if full(&out) {
            break;
        }
        let (min, max) = gh::box_scores(*b);
        let (min, max) = (min as f64, max as f64);
        let lo = z.count_where(|s, _| s < min);
        let hi = z.count_where(|s, _| s < max);
        z.range(lo, hi, false, |m, s| {
            if full(&out) {
                return;
            }
            if let Some((x, y, d)) = gh::within(shape, s) {
                out.push(Point {
                    member: m.to_vec(),
                    lon: x,
                    lat: y,
                    dist: d,
                    score: s,
                });
            }
        });
        last = i;
    }
    out
}

/// Redis's qsort comparator for distances (`sort_gp_asc`; DESC negates it).
#[inline]
fn cmp_dist(a: f64, b: f64) -> i32 {
    if a > b {
        1
    } else if a == b {
        0
    } else {
        -1
    }
}

/// glibc's `qsort` (a top-down merge sort, stable) over `idx`, exactly as glibc merges: the
/// order of equal distances, and whatever a NaN distance does, come out as in Redis.
fn merge_sort(idx: &mut [u32], tmp: &mut Vec<u32>, cmp: &dyn Fn(u32, u32) -> i32) {
    let n = idx.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    {
        let (a, b) = idx.split_at_mut(n1);
        merge_sort(a, tmp, cmp);
        merge_sort(b, tmp, cmp);
    }
    tmp.clear();
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if cmp(idx[i], idx[j]) <= 0 {
            tmp.push(idx[i]);
            i += 1;
        } else {
            tmp.push(idx[j]);
            j += 1;
        }
    }
    tmp.extend_from_slice(&idx[i..n1]);
    // (What is left of the second half is in place already.)
    let done = tmp.len();
    idx[..done].copy_from_slice(&tmp[..done]);
}

/// `med3` of Redis's `pqsort.c`.
fn med3(v: &[u32], a: usize, b: usize, c: usize, cmp: &dyn Fn(u32, u32) -> i32) -> usize {
    if cmp(v[a], v[b]) < 0 {
        if cmp(v[b], v[c]) < 0 {
            b
        } else if cmp(v[a], v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(v[b], v[c]) > 0 {
        b
    } else if cmp(v[a], v[c]) < 0 {
        a
    } else {
        c
    }
}

/// Swaps `n` elements at `a` with `n` at `b` (`vecswap`).
fn vecswap(v: &mut [u32], a: usize, b: usize, n: usize) {
    for k in 0..n {
        v.swap(a + k, b + k);
    }
}

/// Redis's `pqsort` (Bentley-McIlroy quicksort that only recurses into the parts overlapping
/// ranks `lrange..=rrange`), over `v[lo..lo + n]`: the partial sort of GEO* COUNT.
fn pqsort(
    v: &mut [u32],
    mut lo: usize,
    mut n: usize,
    cmp: &dyn Fn(u32, u32) -> i32,
    lrange: usize,
    rrange: usize,
) {
    // Does the segment [s, s + len) hold any rank of the range?
    let wanted = |s: usize, len: usize| !(rrange < s || lrange > s + len - 1);
    loop {
        if n < 7 {
            for pm in lo + 1..lo + n {
                let mut pl = pm;
                while pl > lo && cmp(v[pl - 1], v[pl]) > 0 {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = lo + n / 2;
        if n > 7 {
            let mut pl = lo;
            let mut pn = lo + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(lo, pm);
        let (mut pa, mut pb) = (lo + 1, lo + 1);
        let (mut pc, mut pd) = (lo + n - 1, lo + n - 1);
        loop {
            while pb <= pc {
                let r = cmp(v[pb], v[lo]);
                if r > 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = cmp(v[pc], v[lo]);
                if r < 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = lo + n;
        let r = (pa - lo).min(pb - pa);
        vecswap(v, lo, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && wanted(lo, r) {
            pqsort(v, lo, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 {
            lo = pn - r;
            n = r;
            if wanted(lo, n) {
                continue;
            }
        }
        return;
    }
}

/// Sorts `pts` as Redis does and keeps the first `returned` (converted to the query's unit).
fn order_points(mut pts: Vec<Point>, sort: Sort, returned: usize, conversion: f64) -> Vec<Point> {
    if sort != Sort::None && pts.len() > 1 {
        let dist: Vec<f64> = pts.iter().map(|p| p.dist).collect();
        let cmp = |a: u32, b: u32| {
            let c = cmp_dist(dist[a as usize], dist[b as usize]);
            if sort == Sort::Desc {
                -c
            } else {
                c
            }
        };
        let mut idx: Vec<u32> = (0..pts.len() as u32).collect();
        if returned == pts.len() {
            let mut tmp = Vec::with_capacity(idx.len());
            merge_sort(&mut idx, &mut tmp, &cmp);
        } else {
            let n = idx.len();
            pqsort(&mut idx, 0, n, &cmp, 0, returned.saturating_sub(1));
        }
        let mut slots: Vec<Option<Point>> = pts.into_iter().map(Some).collect();
        pts = idx
            .iter()
            .take(returned)
            .filter_map(|&i| slots[i as usize].take())
            .collect();
    }
    pts.truncate(returned);
    for p in &mut pts {
        p.dist /= conversion;
    }
    pts
}

/// What a search found.
#[derive(Debug)]
enum Found {
    /// The source key does not exist.
    Missing,
    /// The points to return or store, in order, distances in the query's unit.
    Points(Vec<Point>),
}

/// Redis `georadiusGeneric` up to the reply: looks the source up, parses, searches.
fn run_search(
    db: &mut Db,
    now: u64,
    args: &[&[u8]],
    v: Variant,
    nostore: bool,
) -> Result<(Query, Found), Fail> {
    let z = zget(db, args[v.source()], now)?;
    let q = parse_query(args, z, v, nostore)?;
    let (Some(z), Some(shape)) = (z, q.shape) else {
        return Ok((q, Found::Missing));
    };
    let mut sort = q.sort;
    if q.count != 0 && sort == Sort::None && !q.any {
        sort = Sort::Asc;
    }
    let pts = collect(z, &shape, if q.any { q.count } else { 0 });
    let returned = if q.count == 0 || (pts.len() as u64) < q.count {
        pts.len()
    } else {
        q.count as usize
    };
    let pts = order_points(pts, sort, returned, shape.conversion);
    Ok((q, Found::Points(pts)))
}

fn reply_points(r: &mut Reply, q: &Query, found: &Found) {
    let pts = match found {
        Found::Missing => return r.empty_array(),
        Found::Points(p) => p,
    };
    let options = q.withdist as usize + q.withhash as usize + q.withcoord as usize;
    r.array(pts.len());
    for p in pts {
        if options > 0 {
            r.array(options + 1);
        }
        r.bulk(&p.member);
        if q.withdist {
            reply_distance(r, p.dist);
        }
        if q.withhash {
            r.int(p.score as i64);
        }
        if q.withcoord {
            r.array(2);
            reply_human(r, p.lon);
            reply_human(r, p.lat);
        }
    }
}

/// Replaces `dst` with the points found (member and hash, or distance for STOREDIST), or
/// deletes it when nothing was found; returns how many were stored.
fn store_points(
    db: &mut Db,
    dst: &[u8],
    found: Found,
    storedist: bool,
    lim: &Limits,
    now: u64,
    event: &str,
) -> usize {
    let pts = match found {
        Found::Missing => Vec::new(),
        Found::Points(p) => p,
    };
    if pts.is_empty() {
        if db.remove(dst, now).is_some() {
            db.touch_key(dst);
            ev::emit(ev::GENERIC, "del", db.index, dst);
        }
        return 0;
    }
    let mut items: Vec<(Vec<u8>, f64)> = pts
        .into_iter()
        .map(|p| {
            let s = if storedist { p.dist } else { p.score };
            // (A NaN distance - antipodal rounding - cannot be a score; Redis asserts there.)
            (p.member, if s.is_nan() { 0.0 } else { s })
        })
        .collect();
    items.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
    let n = items.len();
    db.set(
        dst,
        Value::zset(ZSet::from_sorted(&items, lim)),
        TtlMode::Clear,
        now,
    );
    ev::emit(ev::ZSET, event, db.index, dst);
    n
}

// ---------------------------------------------------------------------------------------------
// Searches: the commands.

/// The read-only searches, on the source's shard.
fn search_here(cx: &mut CmdCtx<'_>, args: &[&[u8]], v: Variant) {
    let now = cx.now;
    let reply = &mut *cx.reply;
    match run_search(&mut cx.shard.dbs[cx.db], now, args, v, true) {
        Err(e) => e.reply(reply),
        // (STORE is a syntax error for these: nothing to write.)
        Ok((q, found)) => reply_points(reply, &q, &found),
    }
}

fn georadius_ro(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    search_here(cx, args, Variant::Radius)
}

fn georadiusbymember_ro(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    search_here(cx, args, Variant::Member)
}

fn geosearch(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    search_here(cx, args, Variant::Search)
}

/// How a search that may store ends.
enum Done {
    Reply(Query, Found),
    Stored(usize),
}

/// GEORADIUS, GEORADIUSBYMEMBER and GEOSEARCHSTORE: search on the source's shard, then (when
/// storing) write on the destination's.
async fn search_store(cx: &mut ConnCtx, args: &[&[u8]], v: Variant) {
    let dst_at = match v {
        Variant::SearchStore => Some(1),
        _ => store_index(args, v.base()),
    };
    let lim = limits_of(cx.shared());
    let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    let hops = cx.hops().on_key(args[v.source()], move |c, ()| {
        let now = c.now;
        let refs: Vec<&[u8]> = owned.iter().map(|a| &a[..]).collect();
        run_search(c.db(), now, &refs, v, false)
    });
    let res: Result<Done, Fail> = match dst_at {
        None => match hops.run().await {
            Err(e) => Err(e),
            Ok((q, found)) => Ok(Done::Reply(q, found)),
        },
        Some(at) => {
            let dst = args[at].to_vec();
            let event = if v.is_search() {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            hops.on_key(args[at], move |c, got| {
                let (q, found) = got?;
                match q.store {
                    None => Ok(Done::Reply(q, found)),
                    Some(i) if i == at => {
                        let now = c.now;
                        let n = store_points(c.db(), &dst, found, q.storedist, &lim, now, event);
                        Ok(Done::Stored(n))
                    }
                    // The parse and `store_index` walk the options alike: never here.
                    Some(_) => Err(Fail::msg(ERR_SYNTAX)),
                }
            })
            .run()
            .await
        }
    };
    let r = &mut cx.reply;
    match res {
        Err(e) => e.reply(r),
        Ok(Done::Stored(n)) => r.int(n as i64),
        Ok(Done::Reply(q, found)) => reply_points(r, &q, &found),
    }
}

fn georadius<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(search_store(cx, args, Variant::Radius))
}

fn georadiusbymember<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(search_store(cx, args, Variant::Member))
}

fn geosearchstore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(search_store(cx, args, Variant::SearchStore))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_formatting() {
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(0.77502), "0.7750");
        assert_eq!(distance_text(166274.15156960033), "166274.1516");
        assert_eq!(distance_text(0.00004), "0.0000");
        assert_eq!(distance_text(0.00005), "0.0000");
        assert_eq!(distance_text(1.23456), "1.2346");
        assert_eq!(distance_text(f64::NAN), "-922337203685477.5808");
    }

    #[test]
    fn human_formatting() {
        assert_eq!(human_text(13.361389338970184), "13.36138933897018433");
        assert_eq!(human_text(-0.0), "0");
        assert_eq!(human_text(10.0), "10");
        assert_eq!(human_text(0.5), "0.5");
    }

    #[test]
    fn store_index_walks_like_redis() {
        let a = |s: &str| -> Vec<Vec<u8>> { s.split(' ').map(|x| x.as_bytes().to_vec()).collect() };
        let idx = |s: &str, base| {
            let v = a(s);
            let r: Vec<&[u8]> = v.iter().map(|x| &x[..]).collect();
            store_index(&r, base)
        };
        assert_eq!(idx("georadius k 0 0 1 km store d", 6), Some(7));
        assert_eq!(idx("georadius k 0 0 1 km store d storedist e", 6), Some(9));
        assert_eq!(idx("georadius k 0 0 1 km count 3 asc store d", 6), Some(10));
        assert_eq!(idx("georadius k 0 0 1 km store", 6), None);
        assert_eq!(idx("georadius k 0 0 1 km foo store d", 6), None);
        assert_eq!(idx("georadiusbymember k m 1 km storedist d", 5), Some(6));
    }

    #[test]
    fn sorts_match_a_plain_sort() {
        // Distinct keys: any correct sort agrees; pqsort only orders the wanted prefix.
        let mut seed = 0x2545F4914F6CDD1Du64;
        for n in [0usize, 1, 2, 6, 7, 8, 40, 41, 100, 500] {
            let d: Vec<f64> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 1000) as f64
                })
                .collect();
            let cmp = |a: u32, b: u32| cmp_dist(d[a as usize], d[b as usize]);
            let mut want: Vec<f64> = d.clone();
            want.sort_by(|a, b| a.total_cmp(b));
            let mut idx: Vec<u32> = (0..n as u32).collect();
            merge_sort(&mut idx, &mut Vec::new(), &cmp);
            let got: Vec<f64> = idx.iter().map(|&i| d[i as usize]).collect();
            assert_eq!(got, want);
            for k in [1usize, 3, 10] {
                if k >= n {
                    continue;
                }
                let mut idx: Vec<u32> = (0..n as u32).collect();
                pqsort(&mut idx, 0, n, &cmp, 0, k - 1);
                let got: Vec<f64> = idx[..k].iter().map(|&i| d[i as usize]).collect();
                assert_eq!(got, want[..k].to_vec(), "n={n} k={k}");
            }
        }
    }
}
