//! Redis 7.0's key spec access flags: what each key of a call is used for (read, overwritten,
//! deleted...), as COMMAND INFO prints per key spec, COMMAND GETKEYSANDFLAGS per key, and ACL
//! key permissions (`%R~`, `%W~`) need them.
//!
//! Redis declares the flags per key spec; our declarations ([`KeySpec`]) carry none, so they
//! come from a table generated from Redis's command JSON files (`key_flags_table.rs`, by
//! `scripts/gen-key-flags.py`), matched to our key specs by index: a `KeySpec::Many`'s member i
//! is Redis's key spec i ([`specs`]; the unit tests check that the counts agree, and list the
//! commands declaring one range where Redis has a spec per kind of key). [`key_refs`] then finds
//! a call's keys as Redis's `getKeysFromCommandWithSpecs` does, including the commands whose
//! keys or flags Redis takes from their getkeys function instead (SET, BITFIELD, SORT,
//! MIGRATE...).

use std::borrow::Cow;
use std::sync::OnceLock;

use super::flags;
use super::registry::{registry, Entry};
use super::spec::{range, KeySpec};

#[path = "key_flags_table.rs"]
mod table;

/// Read-only: reads the value without modifying it.
pub const RO: u16 = 1;
/// Read-write: modifies the value (or deletes the key).
pub const RW: u16 = 1 << 1;
/// Overwrite: replaces the value without reading it.
pub const OW: u16 = 1 << 2;
/// Removes the key.
pub const RM: u16 = 1 << 3;
/// Returns, copies or uses the user data of the value.
pub const ACCESS: u16 = 1 << 4;
/// Updates the value (new data may depend on the old).
pub const UPDATE: u16 = 1 << 5;
/// Adds data to the value, without changing or deleting existing data.
pub const INSERT: u16 = 1 << 6;
/// Explicitly deletes some content of the value.
pub const DELETE: u16 = 1 << 7;
/// Not a key (SPUBLISH's shard channel): only for cluster routing.
pub const NOT_KEY: u16 = 1 << 8;
/// The spec may not find every key (MIGRATE's KEYS).
pub const INCOMPLETE: u16 = 1 << 9;
/// Some keys' flags depend on the arguments (SET ... GET, BITFIELD).
pub const VARIABLE_FLAGS: u16 = 1 << 10;
/// Not a Redis flag (never printed): marks, in the generated table, a spec whose begin_search is
/// `unknown` (SORT's BY/GET and STORE keys), where Redis falls back on the getkeys function.
pub const UNKNOWN: u16 = 1 << 15;

/// The flags with the names Redis prints, in its order (`addReplyFlagsForKeyArgs`).
const NAMES: &[(u16, &str)] = &[
    (RO, "RO"),
    (RW, "RW"),
    (OW, "OW"),
    (RM, "RM"),
    (ACCESS, "access"),
    (UPDATE, "update"),
    (INSERT, "insert"),
    (DELETE, "delete"),
    (NOT_KEY, "not_key"),
    (INCOMPLETE, "incomplete"),
    (VARIABLE_FLAGS, "variable_flags"),
];

/// The names of the flags in `bits`, as COMMAND INFO / GETKEYSANDFLAGS print them, in Redis's
/// order.
pub fn names(bits: u16) -> impl Iterator<Item = &'static str> {
    NAMES
        .iter()
        .filter(move |(bit, _)| bits & bit != 0)
        .map(|(_, n)| *n)
}

/// Redis's key specs' flags for the command `fullname` ("get", "config|get"), in Redis's
/// key_specs order; `None` for a command Redis 7.0 does not have.
pub fn redis_specs(fullname: &str) -> Option<&'static [u16]> {
    table::TABLE
        .binary_search_by(|(n, _)| (*n).cmp(fullname))
        .ok()
        .map(|i| table::TABLE[i].1)
}

/// `entry`'s key specs lined up with Redis's, each with the flags of Redis's spec it stands for:
/// what COMMAND INFO lists and [`key_refs`] walks.
///
/// - As many specs as Redis: our spec i is Redis's spec i (`KeySpec::Many`'s members in order).
/// - One range where Redis has one spec per kind of key (LMOVE's source and destination,
///   SINTERSTORE's destination and sources: `range(1, 2, 1)`, `range(1, -1, 1)`): split as Redis
///   declares it, the first keys one spec each, the last spec the rest of the range.
/// - Fewer specs, the missing ones Redis's `unknown` ones (SORT's BY/GET and STORE keys): ours
///   are Redis's first ones.
/// - Otherwise (no command of Redis 7.0 today), or for a command Redis lacks: our specs, each
///   with the [`fallback`] flags.
///
/// Computed once per command.
pub fn specs(entry: &Entry) -> Cow<'static, [(KeySpec, u16)]> {
    type Cache = Vec<Option<(&'static str, Vec<(KeySpec, u16)>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let reg = registry();
        let mut v: Cache = (0..reg.count).map(|_| None).collect();
        for e in reg.by_id() {
            v[e.id] = Some((e.static_name, line_up(e)));
        }
        v
    });
    match cache.get(entry.id) {
        Some(Some((name, specs))) if *name == entry.fullname => Cow::Borrowed(specs),
        _ => Cow::Owned(line_up(entry)),
    }
}

/// See [`specs`].
fn line_up(entry: &Entry) -> Vec<(KeySpec, u16)> {
    let members = entry.spec.keys.members();
    let Some(redis) = redis_specs(&entry.fullname) else {
        let f = fallback(entry);
        return members.iter().map(|&k| (k, f)).collect();
    };
    let n = redis.len();
    if members.len() == n {
        return members.iter().copied().zip(redis.iter().copied()).collect();
    }
    if let [KeySpec::Range {
        first,
        last,
        step: 1,
    }] = *members
    {
        let fixed = n as i32 - 1;
        if n > 1 && redis.iter().all(|f| f & UNKNOWN == 0) && (last < 0 || last >= first + fixed) {
            return (0..fixed)
                .map(|i| range(first + i, first + i, 1))
                .chain([range(first + fixed, last, 1)])
                .zip(redis.iter().copied())
                .collect();
        }
    }
    if members.len() < n && redis[members.len()..].iter().all(|f| f & UNKNOWN != 0) {
        return members.iter().copied().zip(redis.iter().copied()).collect();
    }
    let f = fallback(entry);
    members.iter().map(|&k| (k, f)).collect()
}

/// Whether COMMAND GETKEYS can find keys in a call of `entry` (Redis's `doesCommandHaveKeys`: a
/// getkeys function, or a key spec that is not `NOT_KEY`; SPUBLISH has none).
pub fn has_keys(entry: &Entry) -> bool {
    match redis_specs(&entry.fullname) {
        Some(r) => getkeys_fn(&entry.fullname).is_some() || r.iter().any(|&f| f & NOT_KEY == 0),
        None => !entry.spec.keys.is_none(),
    }
}

/// The key arguments of a call (indices into `args`: `args[0]` is the command name, `args[1]`
/// a subcommand's name) with each key's access flags, in order, exactly as Redis 7.0's
/// `getKeysFromCommandWithSpecs(cmd, argv, argc, GET_KEYSPEC_DEFAULT, ..)` returns them:
///
/// - from the key specs ([`specs`]), when the command has a spec that is not `NOT_KEY` and none
///   with `VARIABLE_FLAGS`: each key with its spec's flags (`NOT_KEY` specs skipped);
/// - otherwise, or when a spec finds a syntax error in the arguments (see
///   [`SpecPositions::redis_valid`](crate::commands::spec::SpecPositions::redis_valid)), has an
///   `unknown` begin_search (SORT, SORT_RO) or is `INCOMPLETE` and found keys (MIGRATE ... KEYS),
///   from the command's getkeys function (see [`getkeys_fn`]) with its flags: SET, BITFIELD,
///   SORT, SORT_RO and MIGRATE set them; the others (ZUNIONSTORE, EVAL...: only reached on
///   malformed arguments) leave them 0; no keys without one.
///
/// A command Redis lacks gets our key spec's keys with [`fallback`] flags.
pub fn key_refs(entry: &Entry, args: &[&[u8]]) -> Vec<(usize, u16)> {
    let redis = redis_specs(&entry.fullname);
    let is =
        |flag: u16| redis.is_some_and(|r| r.iter().any(|&f| f & NOT_KEY == 0 && f & flag != 0));
    let has_keyspec = redis.is_none_or(|r| r.iter().any(|&f| f & NOT_KEY == 0));
    // Redis's walk over the specs gives up at an unknown one, whatever the arguments.
    if has_keyspec && !is(VARIABLE_FLAGS) && !is(UNKNOWN) {
        if let Some(refs) = from_specs(entry, args) {
            return refs;
        }
    }
    let mut refs = getkeys_fn(&entry.fullname).map_or_else(Vec::new, |f| f(args));
    // (Redis checks the arity first; a short call must not yield positions past its end.)
    refs.retain(|&(p, _)| p < args.len());
    refs
}

/// Redis's `getKeysUsingKeySpecs` over [`specs`]: `None` where Redis would give up on the
/// specs.
fn from_specs(entry: &Entry, args: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let mut refs = Vec::new();
    for &(k, flags) in specs(entry).iter() {
        if flags & NOT_KEY != 0 {
            continue;
        }
        let found = k.positions_by_spec(args).pop().unwrap_or_default();
        if !found.redis_valid {
            return None;
        }
        // A valid spec that found its begin_search names at least one key: none means its
        // keyword is absent, which Redis skips before looking at INCOMPLETE.
        if flags & INCOMPLETE != 0 && !found.positions.is_empty() {
            return None;
        }
        refs.extend(found.positions.into_iter().map(|p| (p, flags)));
    }
    Some(refs)
}

/// The flags for keys that cannot be matched to one of Redis's specs: every access any of the
/// command's Redis specs has (the strictest ACL check); for a command Redis lacks (or without
/// key specs there), `RW access update` for a write command, else `RO access`.
fn fallback(entry: &Entry) -> u16 {
    let merged = redis_specs(&entry.fullname)
        .unwrap_or(&[])
        .iter()
        .filter(|&&f| f & NOT_KEY == 0)
        .fold(0, |acc, &f| acc | f)
        & !(INCOMPLETE | VARIABLE_FLAGS | UNKNOWN);
    if merged != 0 {
        merged
    } else if entry.spec.flags & flags::WRITE != 0 {
        RW | ACCESS | UPDATE
    } else {
        RO | ACCESS
    }
}

/// A Redis getkeys function (`*GetKeys` in db.c), on the call's arguments.
type GetKeysFn = fn(&[&[u8]]) -> Vec<(usize, u16)>;

/// The getkeys function Redis 7.0 declares for `fullname` (commands.c), if any.
fn getkeys_fn(fullname: &str) -> Option<GetKeysFn> {
    Some(match fullname {
        "set" => set_keys,
        "bitfield" => bitfield_keys,
        "sort" => sort_keys,
        "sort_ro" => |_| vec![(1, RO | ACCESS)],
        "migrate" => migrate_keys,
        "georadius" | "georadiusbymember" => georadius_keys,
        "xread" | "xreadgroup" => xread_keys,
        // numkeys key... (sintercardGetKeys, zunionInterDiffGetKeys, lmpopGetKeys, zmpopGetKeys).
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" | "lmpop" | "zmpop" => {
            |a| generic_keys(a, 0, 1, 2)
        }
        // dst numkeys key... (zunionInterDiffStoreGetKeys).
        "zunionstore" | "zinterstore" | "zdiffstore" => |a| generic_keys(a, 1, 2, 3),
        // x numkeys key... (evalGetKeys, functionGetKeys, blmpopGetKeys).
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => |a| generic_keys(a, 0, 2, 3),
        _ => return None,
    })
}

/// The argument as C's string functions see it (Redis compares `argv[i]->ptr` with
/// `strcasecmp`, which stops at a NUL byte).
fn c_str(arg: &[u8]) -> &[u8] {
    match arg.iter().position(|&b| b == 0) {
        Some(nul) => &arg[..nul],
        None => arg,
    }
}

/// `strcasecmp(arg, word) == 0`.
fn is(arg: &[u8], word: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(word.as_bytes())
}

/// C's `atoi` as glibc has it (`(int) strtol(s, NULL, 10)`): leading white space, a sign, the
/// digits up to the first other byte; saturated to a long, then truncated to an int.
fn atoi(arg: &[u8]) -> i32 {
    let s = c_str(arg);
    let mut i = s
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(s.len());
    let neg = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut v: i64 = 0;
    for &b in s[i..].iter().take_while(|b| b.is_ascii_digit()) {
        let d = (b - b'0') as i64;
        v = if neg {
            v.saturating_mul(10).saturating_sub(d)
        } else {
            v.saturating_mul(10).saturating_add(d)
        };
    }
    v as i32
}

/// Redis's `genericGetKeys(storeKeyOfs, keyCountOfs, firstKeyOfs, 1, ..)`: `numkeys` (atoi) keys
/// from `first`, then the destination at `store` (0: none); no keys when numkeys is below 1 or
/// counts past the end. The flags are left 0 (these commands' key specs have them).
fn generic_keys(args: &[&[u8]], store: usize, count: usize, first: usize) -> Vec<(usize, u16)> {
    let Some(num) = args.get(count).map(|a| atoi(a)) else {
        return Vec::new();
    };
    if num < 1 || num as i64 > args.len() as i64 - first as i64 {
        return Vec::new();
    }
    let mut keys: Vec<(usize, u16)> = (0..num as usize).map(|i| (first + i, 0)).collect();
    if store != 0 {
        keys.push((store, 0));
    }
    keys
}

/// `setGetKeys`: the key reads the old value with a GET argument (from argument 3 on).
fn set_keys(args: &[&[u8]]) -> Vec<(usize, u16)> {
    vec![(1, set_flags(args))]
}

fn set_flags(args: &[&[u8]]) -> u16 {
    // Redis checks the first three bytes and a NUL after them.
    let get = args.iter().skip(3).any(|a| {
        a.len() >= 3 && a[..3].eq_ignore_ascii_case(b"get") && a.get(3).is_none_or(|&b| b == 0)
    });
    if get {
        RW | ACCESS | UPDATE
    } else {
        OW | UPDATE
    }
}

/// How a command's keys get their flags, decided once per command for [`range_flags`].
#[derive(Clone, Copy)]
enum Simple {
    /// One key range, the same flags whatever the arguments.
    Fixed(u16),
    /// SET: one key, flags by the GET argument.
    Set,
    /// Anything else: [`key_refs`].
    No,
}

/// The access flags shared by every key of this call when its keys are the command's one key
/// range (`KeySpec::range`) and the flags need no list (GET, SET, INCR, MGET...): the hot path
/// of ACL key checks, with no allocation. None: use [`key_refs`].
#[inline]
pub fn range_flags(entry: &Entry, args: &[&[u8]]) -> Option<u16> {
    static CACHE: OnceLock<Vec<Simple>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| {
        let reg = registry();
        let mut v = vec![Simple::No; reg.count];
        for e in reg.by_id() {
            v[e.id] = simple(e);
        }
        v
    });
    match cache.get(entry.id).copied().unwrap_or(Simple::No) {
        Simple::Fixed(f) => Some(f),
        Simple::Set => Some(set_flags(args)),
        Simple::No => None,
    }
}

fn simple(e: &Entry) -> Simple {
    if !matches!(e.spec.keys, KeySpec::Range { .. }) {
        return Simple::No;
    }
    if e.fullname == "set" {
        return Simple::Set;
    }
    let specs = specs(e);
    match (&specs[..], redis_specs(&e.fullname)) {
        ([(KeySpec::Range { .. }, f)], r)
            if f & (NOT_KEY | VARIABLE_FLAGS | INCOMPLETE | UNKNOWN) == 0
                && r.is_none_or(|r| r.len() == 1)
                && getkeys_fn(&e.fullname).is_none() =>
        {
            Simple::Fixed(*f)
        }
        _ => Simple::No,
    }
}

/// `bitfieldGetKeys`: read-only when every subcommand is a complete GET (or OVERFLOW).
fn bitfield_keys(args: &[&[u8]]) -> Vec<(usize, u16)> {
    let argc = args.len();
    let mut readonly = true;
    let mut i = 2;
    while i < argc {
        let remargs = argc - i - 1;
        let a = args[i];
        if is(a, "get") && remargs >= 2 {
            i += 2;
        } else if (is(a, "set") || is(a, "incrby")) && remargs >= 3 {
            readonly = false;
            break;
        } else if is(a, "overflow") && remargs >= 1 {
            i += 1;
        } else {
            // A syntax error: safer to assume a write.
            readonly = false;
            break;
        }
        i += 1;
    }
    let flags = if readonly {
        RO | ACCESS
    } else {
        RW | ACCESS | UPDATE
    };
    vec![(1, flags)]
}

/// `sortGetKeys`: the sorted key, and the last STORE's destination (skipping LIMIT's two
/// arguments and BY's and GET's one).
fn sort_keys(args: &[&[u8]]) -> Vec<(usize, u16)> {
    let argc = args.len();
    let mut store = None;
    let mut i = 2;
    while i < argc {
        let a = args[i];
        if is(a, "limit") {
            i += 2;
        } else if is(a, "store") && i + 1 < argc {
            // No skip: the argument after STORE is looked at as an option too.
            store = Some(i + 1);
        } else if is(a, "get") || is(a, "by") {
            i += 1;
        }
        i += 1;
    }
    let mut keys = vec![(1, RO | ACCESS)];
    keys.extend(store.map(|p| (p, OW | UPDATE)));
    keys
}

/// `migrateGetKeys`: the key argument, or the keys after KEYS (searched from argument 6, past
/// COPY, REPLACE, AUTH pw, AUTH2 user pw) when the key argument is empty (else none: a syntax
/// error).
fn migrate_keys(args: &[&[u8]]) -> Vec<(usize, u16)> {
    let argc = args.len();
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < argc {
        let a = args[i];
        if is(a, "keys") {
            if args[3].is_empty() {
                first = i + 1;
                num = argc - first;
            } else {
                num = 0;
            }
            break;
        }
        if is(a, "auth") {
            i += 1;
        } else if is(a, "auth2") {
            i += 2;
        }
        i += 1;
    }
    (first..first + num)
        .map(|p| (p, RW | ACCESS | DELETE))
        .collect()
}

/// `georadiusGetKeys`: the key, and the last STORE / STOREDIST destination (from argument 5).
/// Flags 0; only reached if the key specs fail, which they cannot for GEORADIUS.
fn georadius_keys(args: &[&[u8]]) -> Vec<(usize, u16)> {
    let mut stored = None;
    let mut i = 5;
    while i < args.len() {
        if (is(args[i], "store") || is(args[i], "storedist")) && i + 1 < args.len() {
            stored = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    let mut keys = vec![(1, 0)];
    keys.extend(stored.map(|p| (p, 0)));
    keys
}

/// `xreadGetKeys`: the first half of the arguments after STREAMS, found past BLOCK ms,
/// COUNT n, GROUP g c and NOACK (flags 0; the key spec fails only where this finds no keys
/// either).
fn xread_keys(args: &[&[u8]]) -> Vec<(usize, u16)> {
    let argc = args.len();
    let mut streams = None;
    let mut i = 1;
    while i < argc {
        let a = args[i];
        if is(a, "block") || is(a, "count") {
            i += 1;
        } else if is(a, "group") {
            i += 2;
        } else if is(a, "streams") {
            streams = Some(i);
            break;
        } else if !is(a, "noack") {
            break;
        }
        i += 1;
    }
    let Some(at) = streams else {
        return Vec::new();
    };
    let num = argc - at - 1;
    if num == 0 || !num.is_multiple_of(2) {
        return Vec::new();
    }
    (at + 1..at + 1 + num / 2).map(|p| (p, 0)).collect()
}

/// What needs no command table (the generated table's order, the C-like helpers); the tests over
/// the whole table are in `damselfly` (crates/server/src/table_tests), which assembles it.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_flags_table_sorted() {
        for w in table::TABLE.windows(2) {
            assert!(w[0].0 < w[1].0, "{} / {}", w[0].0, w[1].0);
        }
    }

    #[test]
    fn key_flags_helpers() {
        assert_eq!(atoi(b"12"), 12);
        assert_eq!(atoi(b" +3x"), 3);
        assert_eq!(atoi(b"-4"), -4);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b"2\x003"), 2);
        assert_eq!(atoi(b"99999999999999999999"), -1);
        assert!(is(b"GeT", "get"));
        assert!(is(b"get\0x", "get"));
        assert!(!is(b"gets", "get"));
    }
}
