//! The command declarations over the whole table (core's and the data families'): ACL
//! categories as Redis 7.0 derives them, key specs, plan hooks.

use damselfly_core::commands::flags;
use damselfly_core::commands::registry::Entry;
use damselfly_core::commands::spec::*;

fn entry(fullname: &str) -> &'static Entry {
    super::table()
        .by_fullname(fullname.as_bytes())
        .unwrap_or_else(|| panic!("no command {fullname}"))
}

fn args(line: &str) -> Vec<&[u8]> {
    line.split(' ').map(str::as_bytes).collect()
}

/// What Redis 7.0.15 prints as the ACL categories in COMMAND INFO: every command whose
/// declaration carries extra categories, and a representative set of the others.
const REDIS_7_0: &[(&str, &str)] = &[
    ("migrate", "@keyspace @write @slow @dangerous"),
    // Declared extras (or a replaced family).
    ("keys", "@keyspace @read @slow @dangerous"),
    ("dbsize", "@keyspace @read @fast"),
    ("flushdb", "@keyspace @write @slow @dangerous"),
    ("flushall", "@keyspace @write @slow @dangerous"),
    ("swapdb", "@keyspace @write @fast @dangerous"),
    ("info", "@slow @dangerous"),
    ("command", "@slow @connection"),
    ("command|count", "@slow @connection"),
    ("command|list", "@slow @connection"),
    ("command|info", "@slow @connection"),
    ("command|docs", "@slow @connection"),
    ("command|getkeys", "@slow @connection"),
    ("command|getkeysandflags", "@slow @connection"),
    ("command|help", "@slow @connection"),
    ("lastsave", "@admin @fast @dangerous"),
    ("save", "@admin @slow @dangerous"),
    ("bgsave", "@admin @slow @dangerous"),
    ("dump", "@keyspace @read @slow"),
    ("restore", "@keyspace @write @slow @dangerous"),
    ("sort", "@write @set @sortedset @list @slow @dangerous"),
    ("sort_ro", "@read @set @sortedset @list @slow @dangerous"),
    // Derived from the flags and the group only.
    ("get", "@read @string @fast"),
    ("set", "@write @string @slow"),
    ("setnx", "@write @string @fast"),
    ("mset", "@write @string @slow"),
    ("incrbyfloat", "@write @string @fast"),
    ("append", "@write @string @fast"),
    ("getrange", "@read @string @slow"),
    ("lcs", "@read @string @slow"),
    ("setbit", "@write @bitmap @slow"),
    ("bitcount", "@read @bitmap @slow"),
    ("bitfield", "@write @bitmap @slow"),
    ("bitfield_ro", "@read @bitmap @fast"),
    ("bitop", "@write @bitmap @slow"),
    ("bitpos", "@read @bitmap @slow"),
    ("del", "@keyspace @write @slow"),
    ("unlink", "@keyspace @write @fast"),
    ("exists", "@keyspace @read @fast"),
    ("touch", "@keyspace @read @fast"),
    ("type", "@keyspace @read @fast"),
    ("expire", "@keyspace @write @fast"),
    ("ttl", "@keyspace @read @fast"),
    ("persist", "@keyspace @write @fast"),
    ("rename", "@keyspace @write @slow"),
    ("copy", "@keyspace @write @slow"),
    ("move", "@keyspace @write @fast"),
    ("scan", "@keyspace @read @slow"),
    ("randomkey", "@keyspace @read @slow"),
    ("object", "@slow"),
    ("object|encoding", "@keyspace @read @slow"),
    ("object|help", "@keyspace @slow"),
    ("lpush", "@write @list @fast"),
    ("lrange", "@read @list @slow"),
    ("lmove", "@write @list @slow"),
    ("blpop", "@write @list @slow @blocking"),
    ("blmove", "@write @list @slow @blocking"),
    ("lmpop", "@write @list @slow"),
    ("blmpop", "@write @list @slow @blocking"),
    ("hset", "@write @hash @fast"),
    ("hgetall", "@read @hash @slow"),
    ("hscan", "@read @hash @slow"),
    ("sadd", "@write @set @fast"),
    ("smembers", "@read @set @slow"),
    ("sintercard", "@read @set @slow"),
    ("sunionstore", "@write @set @slow"),
    ("zadd", "@write @sortedset @fast"),
    ("zrange", "@read @sortedset @slow"),
    ("zrangestore", "@write @sortedset @slow"),
    ("zunionstore", "@write @sortedset @slow"),
    ("zmpop", "@write @sortedset @slow"),
    ("bzpopmin", "@write @sortedset @fast @blocking"),
    ("bzmpop", "@write @sortedset @slow @blocking"),
    ("multi", "@fast @transaction"),
    ("exec", "@slow @transaction"),
    ("discard", "@fast @transaction"),
    ("watch", "@fast @transaction"),
    ("unwatch", "@fast @transaction"),
    ("ping", "@fast @connection"),
    ("echo", "@fast @connection"),
    ("quit", "@fast @connection"),
    ("select", "@fast @connection"),
    ("hello", "@fast @connection"),
    ("auth", "@fast @connection"),
    ("reset", "@fast @connection"),
    ("client", "@slow"),
    ("client|list", "@admin @slow @dangerous @connection"),
    ("client|kill", "@admin @slow @dangerous @connection"),
    ("client|id", "@slow @connection"),
    ("client|help", "@slow @connection"),
    ("config", "@slow"),
    ("config|get", "@admin @slow @dangerous"),
    ("config|help", "@slow"),
    ("time", "@fast"),
    ("shutdown", "@admin @slow @dangerous"),
    ("debug", "@admin @slow @dangerous"),
    ("memory", "@slow"),
    ("memory|usage", "@read @slow"),
    ("memory|stats", "@slow"),
    ("memory|help", "@slow"),
    ("slowlog", "@slow"),
    ("slowlog|get", "@admin @slow @dangerous"),
    ("slowlog|help", "@slow"),
    ("latency", "@slow"),
    ("latency|doctor", "@admin @slow @dangerous"),
    ("latency|help", "@slow"),
    ("replicaof", "@admin @slow @dangerous"),
    ("failover", "@admin @slow @dangerous"),
    ("slaveof", "@admin @slow @dangerous"),
    ("sync", "@admin @slow @dangerous"),
    ("psync", "@admin @slow @dangerous"),
    ("replconf", "@admin @slow @dangerous"),
    ("role", "@admin @fast @dangerous"),
    ("wait", "@slow @connection"),
    ("readonly", "@fast @connection"),
    ("readwrite", "@fast @connection"),
];

fn categories(e: &Entry) -> String {
    acl::names(e.spec.acl_categories())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn acl_categories_as_redis_7_0() {
    for (name, want) in REDIS_7_0 {
        assert_eq!(categories(entry(name)), *want, "{name}");
    }
    // Every declaration with extras has its Redis expectation above (the test-only FAULT.*
    // commands are no Redis commands).
    for e in super::table().by_id() {
        let s = e.spec;
        if (s.acl_extra != 0 || s.acl_family.is_some()) && !s.name.starts_with("fault.") {
            assert!(
                REDIS_7_0.iter().any(|(n, _)| *n == e.fullname),
                "{} declares extra ACL categories: add what Redis 7.0 prints for it",
                e.fullname
            );
        }
    }
}

#[test]
fn every_command_documented() {
    for e in super::table().by_id() {
        assert!(!e.spec.summary.is_empty(), "{}", e.fullname);
        assert!(!e.spec.since.is_empty(), "{}", e.fullname);
    }
}

#[test]
fn key_positions() {
    let none = NOKEYS;
    assert!(none.positions(&args("ping x")).is_empty());
    assert_eq!(none.legacy(), (0, 0, 0));
    let mset = range(1, -1, 2);
    assert_eq!(mset.positions(&args("mset a 1 b 2")), vec![1, 3]);
    assert_eq!(mset.positions(&args("mset a 1 b")), vec![1, 3]);
    assert_eq!(mset.range(5), Some((1, 4, 2)));
    assert_eq!(mset.legacy(), (1, -1, 2));
    let bzpop = range(1, -2, 1);
    assert_eq!(bzpop.positions(&args("bzpopmin a b 0")), vec![1, 2]);
    let sub = range(2, 2, 1);
    assert_eq!(sub.positions(&args("object encoding k")), vec![2]);
    assert!(sub.positions(&args("object encoding")).is_empty());
    let zunion = keynum(1, 1, 1);
    assert_eq!(
        zunion.positions(&args("zunion 2 a b withscores")),
        vec![2, 3]
    );
    // Clipped to the arguments present; no keys without a positive numkeys.
    assert_eq!(zunion.positions(&args("zunion 5 a b")), vec![2, 3]);
    assert!(zunion.positions(&args("zunion 0 a")).is_empty());
    assert!(zunion.positions(&args("zunion x a")).is_empty());
    assert_eq!(zunion.range(4), None);
    assert_eq!(zunion.legacy(), (0, 0, 0));
    let blmpop = keynum(2, 1, 1);
    assert_eq!(blmpop.positions(&args("blmpop 0 2 a b left")), vec![3, 4]);
    let pairs = keynum(1, 1, 2);
    assert_eq!(pairs.positions(&args("x 2 a 1 b 2")), vec![2, 4]);
    let store = custom((1, 1, 1), |_| vec![1, 0, 3, 9]);
    assert_eq!(store.positions(&args("c d 2 a")), vec![1, 3]);
    assert_eq!(store.first_key(), 1);
}

#[test]
fn keyword_positions() {
    // XREAD [COUNT n] [BLOCK ms] STREAMS key... id...: the keys are the first half after
    // STREAMS (Redis: keyword STREAMS from 1, range lastkey -1 keystep 1 limit 2).
    let xread = keyword("STREAMS", 1, -1, 1, 2);
    assert_eq!(
        xread.positions(&args("xread count 2 streams a b 0 0")),
        vec![4, 5]
    );
    assert_eq!(xread.positions(&args("xread STREAMS a 0")), vec![2]);
    assert_eq!(
        xread.positions(&args("xread streams a b c 0 0 0")),
        vec![2, 3, 4]
    );
    // An odd count: Redis rounds the key half down.
    assert_eq!(xread.positions(&args("xread streams a b 0")), vec![2]);
    // No keyword, or the keyword last (no key after it): no keys.
    assert!(xread.positions(&args("xread count 2 a b 0 0")).is_empty());
    assert!(xread.positions(&args("xread count 2 streams")).is_empty());
    // A keyword before `start_from` does not count (XREADGROUP GROUP g c ... STREAMS).
    let xreadgroup = keyword("STREAMS", 4, -1, 1, 2);
    assert_eq!(
        xreadgroup.positions(&args("xreadgroup group streams c streams k >")),
        vec![5]
    );
    assert_eq!(xread.range(8), None);
    assert_eq!(xread.legacy(), (0, 0, 0));
    assert_eq!(xread.first_key(), 0);
    // GEORADIUS key lon lat radius unit ... STORE dst: one key after STORE, from argument 6.
    let store = keyword("STORE", 6, 0, 1, 0);
    assert_eq!(
        store.positions(&args("georadius k 0 0 1 km store d")),
        vec![7]
    );
    assert_eq!(
        store.positions(&args("georadius k 0 0 1 km withdist Store d asc")),
        vec![8]
    );
    assert!(store
        .positions(&args("georadius k 0 0 1 km store"))
        .is_empty());
    assert!(store
        .positions(&args("georadius store 0 0 1 km"))
        .is_empty());
    // MIGRATE host port "" db timeout [COPY] [REPLACE] [AUTH pw] KEYS key...: KEYS searched
    // backwards from the next-to-last argument, every argument after it a key.
    let migrate = keyword("KEYS", -2, -1, 1, 0);
    assert_eq!(
        migrate.positions(&args("migrate h p  0 5 copy keys a b c")),
        vec![8, 9, 10]
    );
    assert_eq!(migrate.positions(&args("migrate h p  0 5 keys a")), vec![7]);
    assert!(migrate.positions(&args("migrate h p k 0 5")).is_empty());
    assert!(migrate.positions(&args("migrate h p  0 5 keys")).is_empty());
    // Every `step` arguments (pairs after the keyword).
    let pairs = keyword("PAIRS", 1, -1, 2, 0);
    assert_eq!(pairs.positions(&args("x y pairs a 1 b 2")), vec![3, 5]);
}

#[test]
fn many_positions() {
    // ZUNIONSTORE dst numkeys key... [WEIGHTS w...]: the destination, then the sources.
    const STORE: KeySpec = many(&[range(1, 1, 1), keynum(2, 1, 1)]);
    const BACK: KeySpec = many(&[keynum(2, 1, 1), range(1, 1, 1)]);
    const LMOVE: KeySpec = many(&[range(1, 1, 1), range(2, 2, 1)]);
    const MIGRATE: KeySpec = many(&[range(3, 3, 1), keyword("KEYS", -2, -1, 1, 0)]);
    const GEORADIUS: KeySpec = many(&[
        range(1, 1, 1),
        keyword("STORE", 6, 0, 1, 0),
        keyword("STOREDIST", 6, 0, 1, 0),
    ]);
    const ONE: KeySpec = many(&[range(1, -1, 2)]);
    const KEYNUMS: KeySpec = many(&[keynum(1, 1, 1), keynum(2, 1, 1)]);
    assert_eq!(
        STORE.positions(&args("zunionstore d 2 a b weights 1 2")),
        vec![1, 3, 4]
    );
    assert_eq!(STORE.positions(&args("zunionstore d 3 a b")), vec![1, 3, 4]);
    assert_eq!(STORE.positions(&args("zunionstore d x a")), vec![1]);
    // Concatenated in spec order, as COMMAND GETKEYS prints them; duplicates kept.
    assert_eq!(BACK.positions(&args("c d 2 a d")), vec![3, 4, 1]);
    assert_eq!(
        GEORADIUS.positions(&args("georadius k 0 0 1 km store d storedist e")),
        vec![1, 7, 9]
    );
    assert_eq!(
        MIGRATE.positions(&args("migrate h p  0 5 keys a b")),
        vec![3, 7, 8]
    );
    assert_eq!(STORE.range(6), None);
    assert_eq!(STORE.members().len(), 2);
    // Legacy triples as Redis derives them (populateCommandLegacyRangeSpec); Redis 7.0's
    // COMMAND INFO prints these for ZUNIONSTORE, LMOVE, MIGRATE and GEORADIUS.
    assert_eq!(STORE.legacy(), (1, 1, 1));
    assert_eq!(STORE.first_key(), 1);
    assert_eq!(LMOVE.legacy(), (1, 2, 1));
    assert_eq!(MIGRATE.legacy(), (3, 3, 1));
    assert_eq!(GEORADIUS.legacy(), (1, 1, 1));
    assert_eq!(ONE.legacy(), (1, -1, 2));
    assert_eq!(KEYNUMS.legacy(), (0, 0, 0));
    assert!(NOKEYS.members().is_empty());
    assert_eq!(range(1, 1, 1).members().len(), 1);
}

#[test]
fn positions_by_spec_validity() {
    let by = |k: &KeySpec, line: &str| -> Vec<(Vec<usize>, bool)> {
        k.positions_by_spec(&args(line))
            .into_iter()
            .map(|s| (s.positions, s.redis_valid))
            .collect()
    };
    const STORE: KeySpec = many(&[range(1, 1, 1), keynum(2, 1, 1)]);
    assert_eq!(
        by(&STORE, "zunionstore d 2 a b"),
        vec![(vec![1], true), (vec![3, 4], true)]
    );
    // Keys past the end: clipped, but Redis calls it a syntax error; so is numkeys 0 or no
    // integer.
    assert_eq!(
        by(&STORE, "zunionstore d 3 a b"),
        vec![(vec![1], true), (vec![3, 4], false)]
    );
    assert_eq!(by(&STORE, "z d 0 a")[1], (vec![], false));
    assert_eq!(by(&STORE, "z d +1 a")[1], (vec![], false));
    // A missing keyword is fine; a range left empty after it is not.
    let xread = keyword("STREAMS", 1, -1, 1, 2);
    assert_eq!(by(&xread, "xread count 1 a 0"), vec![(vec![], true)]);
    assert_eq!(by(&xread, "xread streams a"), vec![(vec![], false)]);
    assert_eq!(by(&xread, "xread streams a b 0"), vec![(vec![2], true)]);
    // A backward keyword search stops before argument 1.
    let migrate = keyword("KEYS", -2, -1, 1, 0);
    assert_eq!(by(&migrate, "migrate keys p k 0 5"), vec![(vec![], true)]);
    assert_eq!(by(&range(1, 2, 1), "rename a b"), vec![(vec![1, 2], true)]);
    assert_eq!(
        by(&range(2, 2, 1), "object encoding"),
        vec![(vec![], false)]
    );
    assert!(by(&NOKEYS, "ping").is_empty());
    let sintercard = custom((0, 0, 0), |a| if a.len() > 2 { vec![2] } else { vec![] });
    assert_eq!(by(&sintercard, "s 1 a"), vec![(vec![2], true)]);
    assert_eq!(by(&sintercard, "s 1"), vec![(vec![], false)]);
}

#[test]
fn store_family_key_spec() {
    for name in ["zunionstore", "zinterstore", "zdiffstore"] {
        let k = entry(name).spec.keys;
        assert!(matches!(k, KeySpec::Many(_)), "{name}");
        assert_eq!(k.legacy(), (1, 1, 1), "{name}");
        assert_eq!(
            k.positions(&args("z d 2 a b weights 1 2")),
            vec![1, 3, 4],
            "{name}"
        );
    }
}

/// Records what a `plan` hook asks for.
#[derive(Default, Debug, PartialEq)]
struct Sink {
    keys: Vec<(usize, Vec<u8>, bool)>,
    all: Option<bool>,
    db: Option<usize>,
}

impl PlanSink for Sink {
    fn lock_key(&mut self, db: usize, key: &[u8], excl: bool) {
        self.keys.push((db, key.to_vec(), excl));
    }
    fn lock_all_shards(&mut self, excl: bool) {
        self.all = Some(excl || self.all == Some(true));
    }
    fn select_db(&mut self, db: usize) {
        self.db = Some(db);
    }
    fn dbnum(&self) -> usize {
        16
    }
}

fn plan(line: &str) -> Sink {
    let a = args(line);
    let mut sink = Sink::default();
    if let Some(hook) = entry(&line.split(' ').next().unwrap().to_lowercase())
        .spec
        .plan
    {
        hook(&a, &mut sink);
    }
    sink
}

#[test]
fn plan_hooks() {
    let key = |db, k: &str| (db, k.as_bytes().to_vec(), true);
    assert_eq!(plan("move k 3").keys, vec![key(3, "k")]);
    assert!(plan("move k -1").keys.is_empty());
    assert_eq!(plan("copy a b db 2 replace").keys, vec![key(2, "b")]);
    assert!(plan("copy a b replace").keys.is_empty());
    assert_eq!(plan("sort k by w_*").all, Some(false));
    assert_eq!(plan("sort k get o_* store d").all, Some(true));
    assert_eq!(plan("sort k by nosort get #").all, None);
    assert_eq!(plan("sort_ro k get o_*").all, Some(false));
    assert_eq!(plan("select 5").db, Some(5));
    assert_eq!(plan("select 16").db, None);
    assert_eq!(plan("get k"), Sink::default());
}

#[test]
fn transaction_flags() {
    for name in ["exec", "discard", "multi", "watch", "quit", "reset"] {
        assert!(entry(name).spec.flags & flags::RUNS_IN_MULTI != 0, "{name}");
    }
    assert!(entry("unwatch").spec.flags & flags::RUNS_IN_MULTI == 0);
    assert!(entry("exec").spec.flags & flags::REJECT_EXECABORT != 0);
    let aborting = super::table()
        .by_id()
        .iter()
        .filter(|e| e.spec.flags & flags::REJECT_EXECABORT != 0)
        .count();
    assert_eq!(aborting, 1);
}
