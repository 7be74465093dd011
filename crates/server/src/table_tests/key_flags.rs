//! The key flags over the whole command table (core's and the data families'), against
//! Redis 7.0's command table (`commands/key_flags_table.rs`). Here, where the table is
//! assembled: core's own tests see only core's commands.

use damselfly_core::commands::key_flags::*;
use damselfly_core::commands::registry::Entry;

fn entry(fullname: &str) -> &'static Entry {
    super::table()
        .by_fullname(fullname.as_bytes())
        .unwrap_or_else(|| panic!("no command {fullname}"))
}

/// The keys and flags of a call written as space-separated arguments (two spaces: an empty
/// argument), the command (and subcommand) looked up as COMMAND GETKEYS does.
fn refs(line: &str) -> Vec<(String, u16)> {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let name = args[0].to_ascii_lowercase();
    let top = super::table().lookup(&name).expect("command");
    let e = match args.get(1) {
        Some(sub) if !top.subs.is_empty() => top.sub(sub).expect("subcommand"),
        _ => top,
    };
    key_refs(e, &args)
        .into_iter()
        .map(|(p, f)| (String::from_utf8_lossy(args[p]).into_owned(), f))
        .collect()
}

fn keys(pairs: &[(&str, u16)]) -> Vec<(String, u16)> {
    pairs.iter().map(|&(k, f)| (k.to_string(), f)).collect()
}

/// The commands whose declared key specs differ in number from Redis 7.0's, and why. All
/// but SORT's are one range where Redis has a spec per kind of key: [`specs`] splits them
/// as Redis declares them.
const SPEC_COUNT_MISMATCHES: &[(&str, &str)] = &[
    // range(2, -1, 1): Redis's destkey (OW update), then the sources (RO access).
    ("bitop", "one range: destkey, then the source keys"),
    // range(1, 2, 1): Redis's source (RW access delete), then destination.
    ("rename", "one range: key, newkey"),
    ("renamenx", "one range: key, newkey"),
    ("copy", "one range: source, destination"),
    ("lmove", "one range: source, destination"),
    ("rpoplpush", "one range: source, destination"),
    ("blmove", "one range: source, destination"),
    ("brpoplpush", "one range: source, destination"),
    ("smove", "one range: source, destination"),
    ("zrangestore", "one range: dst, src"),
    ("geosearchstore", "one range: destination, source"),
    // range(1, -1, 1): Redis's destination, then the sources.
    ("sinterstore", "one range: destination, then the keys"),
    ("sunionstore", "one range: destination, then the keys"),
    ("sdiffstore", "one range: destination, then the keys"),
    ("pfmerge", "one range: destkey, then the sourcekeys"),
    // Redis adds `unknown` specs for the keys BY / GET patterns name (and SORT's STORE
    // destination, which our custom spec finds); its getkeys function finds the keys.
    (
        "sort",
        "custom spec (key, STORE dst); Redis: + unknown BY/GET and STORE specs",
    ),
    ("sort_ro", "the key; Redis: + an unknown BY/GET spec"),
];

#[test]
fn key_flags_table_agrees_with_the_specs() {
    assert_eq!(redis_specs("get"), Some(&[RO | ACCESS][..]));
    assert_eq!(redis_specs("config|get"), Some(&[][..]));
    assert_eq!(redis_specs("memory|usage"), Some(&[RO][..]));
    assert_eq!(redis_specs("no-such-command"), None);
}

#[test]
fn key_flags_spec_counts_match_redis() {
    let mut mismatched = Vec::new();
    for e in super::table().by_id() {
        let Some(redis) = redis_specs(&e.fullname) else {
            continue;
        };
        let ours = e.spec.keys.members().len();
        if ours != redis.len() {
            mismatched.push(e.fullname.clone());
            assert!(
                SPEC_COUNT_MISMATCHES.iter().any(|(n, _)| *n == e.fullname),
                "{}: {ours} key specs, Redis 7.0 has {}",
                e.fullname,
                redis.len()
            );
        }
        // Lined up: every spec carries Redis's flags (no fallback for a Redis command), as
        // many as Redis's but for the unknown ones.
        let lined = specs(e);
        let known = redis.iter().filter(|f| *f & UNKNOWN == 0).count();
        assert_eq!(lined.len(), known, "{}", e.fullname);
        for (i, (_, f)) in lined.iter().enumerate() {
            assert_eq!(*f, redis[i], "{} spec {i}", e.fullname);
        }
    }
    // No stale allow-list entries.
    for (name, _) in SPEC_COUNT_MISMATCHES {
        assert!(mismatched.iter().any(|m| m == name), "{name} lines up now");
    }
}

#[test]
fn key_flags_split_specs() {
    let lmove: Vec<_> = specs(entry("lmove"))
        .iter()
        .map(|(k, f)| (k.legacy(), *f))
        .collect();
    assert_eq!(
        lmove,
        vec![((1, 1, 1), RW | ACCESS | DELETE), ((2, 2, 1), RW | INSERT)]
    );
    let sinter: Vec<_> = specs(entry("sinterstore"))
        .iter()
        .map(|(k, f)| (k.legacy(), *f))
        .collect();
    assert_eq!(
        sinter,
        vec![((1, 1, 1), RW | UPDATE), ((2, -1, 1), RO | ACCESS)]
    );
    let bitop: Vec<_> = specs(entry("bitop"))
        .iter()
        .map(|(k, _)| k.legacy())
        .collect();
    assert_eq!(bitop, vec![(2, 2, 1), (3, -1, 1)]);
    let sort: Vec<_> = specs(entry("sort"))
        .iter()
        .map(|(k, f)| (k.legacy(), *f))
        .collect();
    assert_eq!(sort, vec![((1, 1, 1), RO | ACCESS)]);
}

#[test]
fn key_flags_names() {
    let n = |bits| names(bits).collect::<Vec<_>>();
    assert_eq!(n(RW | ACCESS | UPDATE), ["RW", "access", "update"]);
    assert_eq!(n(UPDATE | OW), ["OW", "update"]);
    assert_eq!(
        n(RW | ACCESS | DELETE | INCOMPLETE | UNKNOWN),
        ["RW", "access", "delete", "incomplete"]
    );
    assert_eq!(n(NOT_KEY), ["not_key"]);
    assert_eq!(
        n(RM | INSERT | VARIABLE_FLAGS),
        ["RM", "insert", "variable_flags"]
    );
    assert_eq!(n(0).len(), 0);
}

#[test]
fn key_flags_spot_checks() {
    assert_eq!(refs("GET k"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(refs("HEXISTS h f"), keys(&[("h", RO)]));
    assert_eq!(refs("SET k v"), keys(&[("k", OW | UPDATE)]));
    assert_eq!(refs("SET k v EX 10"), keys(&[("k", OW | UPDATE)]));
    assert_eq!(refs("SET k v GET"), keys(&[("k", RW | ACCESS | UPDATE)]));
    assert_eq!(refs("set k v nx get"), keys(&[("k", RW | ACCESS | UPDATE)]));
    // GET as the value is no option.
    assert_eq!(refs("SET k get"), keys(&[("k", OW | UPDATE)]));
    assert_eq!(
        refs("LMOVE a b left right"),
        keys(&[("a", RW | ACCESS | DELETE), ("b", RW | INSERT)])
    );
    assert_eq!(
        refs("COPY a b"),
        keys(&[("a", RO | ACCESS), ("b", OW | UPDATE)])
    );
    assert_eq!(
        refs("SINTERSTORE d a b"),
        keys(&[("d", RW | UPDATE), ("a", RO | ACCESS), ("b", RO | ACCESS)])
    );
    assert_eq!(
        refs("BITOP AND d a b"),
        keys(&[("d", OW | UPDATE), ("a", RO | ACCESS), ("b", RO | ACCESS)])
    );
    assert_eq!(
        refs("GEORADIUS k 0 0 1 m STOREDIST d"),
        keys(&[("k", RO | ACCESS), ("d", OW | UPDATE)])
    );
    assert_eq!(
        refs("GEORADIUS k 0 0 1 m STORE d STOREDIST e"),
        keys(&[("k", RO | ACCESS), ("d", OW | UPDATE), ("e", OW | UPDATE)])
    );
    assert_eq!(refs("SORT k"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(
        refs("SORT k STORE d"),
        keys(&[("k", RO | ACCESS), ("d", OW | UPDATE)])
    );
    assert_eq!(
        refs("SORT k BY w_* LIMIT 0 1 GET store STORE d STORE e"),
        keys(&[("k", RO | ACCESS), ("e", OW | UPDATE)])
    );
    // STORE last: no destination (the handler reports the syntax error).
    assert_eq!(refs("SORT k STORE"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(refs("SORT_RO k GET #"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(refs("BITFIELD k GET u4 0"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(
        refs("BITFIELD k OVERFLOW SAT GET u4 0"),
        keys(&[("k", RO | ACCESS)])
    );
    assert_eq!(
        refs("BITFIELD k SET u4 0 1"),
        keys(&[("k", RW | ACCESS | UPDATE)])
    );
    assert_eq!(
        refs("BITFIELD k GET u4 0 INCRBY u4 0 1"),
        keys(&[("k", RW | ACCESS | UPDATE)])
    );
    // A syntax error counts as a write; no subcommand is a read.
    assert_eq!(
        refs("BITFIELD k GET u4"),
        keys(&[("k", RW | ACCESS | UPDATE)])
    );
    assert_eq!(refs("BITFIELD k"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(refs("BITFIELD_RO k GET u4 0"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(refs("EVAL  1 k"), keys(&[("k", RW | ACCESS | UPDATE)]));
    assert_eq!(refs("EVAL_RO  1 k"), keys(&[("k", RO | ACCESS)]));
    assert_eq!(
        refs("FCALL f 2 a b"),
        keys(&[("a", RW | ACCESS | UPDATE), ("b", RW | ACCESS | UPDATE)])
    );
    assert!(refs("EVAL  0").is_empty());
    let mig = RW | ACCESS | DELETE;
    assert_eq!(
        refs("MIGRATE h p  0 5000 KEYS a b"),
        keys(&[("a", mig), ("b", mig)])
    );
    assert_eq!(
        refs("MIGRATE h p  0 5000 COPY AUTH keys KEYS a"),
        keys(&[("a", mig)])
    );
    assert_eq!(refs("MIGRATE h p k 0 5000"), keys(&[("k", mig)]));
    assert_eq!(refs("MIGRATE h p k 0 5000 REPLACE"), keys(&[("k", mig)]));
    // A key and KEYS: a syntax error, no keys.
    assert!(refs("MIGRATE h p k 0 5000 KEYS a").is_empty());
    assert_eq!(
        refs("ZUNIONSTORE d 2 a b WEIGHTS 1 2"),
        keys(&[("d", OW | UPDATE), ("a", RO | ACCESS), ("b", RO | ACCESS)])
    );
    assert_eq!(
        refs("XREAD COUNT 2 STREAMS a b 0 0"),
        keys(&[("a", RO | ACCESS), ("b", RO | ACCESS)])
    );
    assert_eq!(refs("OBJECT ENCODING k"), keys(&[("k", RO)]));
    assert_eq!(
        refs("DEL a b"),
        keys(&[("a", RM | DELETE), ("b", RM | DELETE)])
    );
}

#[test]
fn key_flags_malformed_calls() {
    // numkeys past the end, or no integer: Redis's specs give up and its getkeys function
    // (genericGetKeys, atoi) finds no keys...
    assert!(refs("ZUNION 5 a b").is_empty());
    assert!(refs("ZUNIONSTORE d 3 a b").is_empty());
    assert!(refs("ZUNIONSTORE d x a b").is_empty());
    assert!(refs("LMPOP 0 a LEFT").is_empty());
    assert!(refs("SINTERCARD 0 a").is_empty());
    assert!(refs("SINTERCARD 3 a b").is_empty());
    assert_eq!(refs("SINTERCARD +1 a"), keys(&[("a", 0)]));
    assert_eq!(
        refs("SINTERCARD 2 a b"),
        keys(&[("a", RO | ACCESS), ("b", RO | ACCESS)])
    );
    // ...or, where atoi reads a number string2ll does not, the keys without flags (the
    // destination last).
    assert_eq!(
        refs("ZUNIONSTORE d +2 a b"),
        keys(&[("a", 0), ("b", 0), ("d", 0)])
    );
    assert_eq!(refs("EVAL  1x k"), keys(&[("k", 0)]));
    // One argument after STREAMS: no keys.
    assert!(refs("XREAD STREAMS a").is_empty());
    // A shard channel is no key.
    assert!(refs("SPUBLISH c m").is_empty());
    assert!(!has_keys(entry("spublish")));
    assert!(has_keys(entry("get")));
    assert!(has_keys(entry("eval")));
    assert!(!has_keys(entry("ping")));
}

#[test]
fn key_flags_commands_redis_lacks() {
    // Our own commands: the spec's keys, flags from the command's.
    let e = entry("httl");
    assert_eq!(redis_specs("httl"), None);
    assert_eq!(
        key_refs(e, &[b"httl", b"h", b"FIELDS", b"1", b"f"]),
        [(1, RO | ACCESS)]
    );
    let e = entry("hexpire");
    let refs = key_refs(e, &[b"hexpire", b"h", b"10", b"FIELDS", b"1", b"f"]);
    assert_eq!(refs, [(1, RW | ACCESS | UPDATE)]);
}

#[test]
fn range_flags_agree_with_key_refs() {
    let reg = super::table();
    let calls: &[&[&[u8]]] = &[
        &[b"get", b"k"],
        &[b"set", b"k", b"v"],
        &[b"set", b"k", b"v", b"get"],
        &[b"mget", b"a", b"b", b"c"],
        &[b"incr", b"k"],
        &[b"hexists", b"h", b"f"],
        &[b"lpush", b"l", b"a"],
    ];
    for args in calls {
        let e = reg.lookup(args[0]).unwrap();
        let f = range_flags(e, args).expect("a simple command");
        for (_, kf) in key_refs(e, args) {
            assert_eq!(kf, f, "{:?}", String::from_utf8_lossy(args[0]));
        }
    }
    let sort: &[&[u8]] = &[b"sort", b"k", b"store", b"d"];
    assert!(range_flags(reg.lookup(b"sort").unwrap(), sort).is_none());
}
