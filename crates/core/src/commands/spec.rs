//! Command declarations as data: one `CommandSpec` per command (and subcommand), built with the
//! const builders below in each family's `COMMANDS` table, e.g.
//!
//! ```ignore
//! cmd("mset", -3, WRITE | DENYOOM, range(1, -1, 2), Conn(mset))
//!     .doc(G, "1.0.1", "Atomically creates or modifies the string values of one or more keys."),
//! ```
//!
//! - name, arity (Redis's: N exact, -N at least N, the name counts), flags (`flags::*`: the Redis
//!   flags COMMAND INFO prints plus internal ones it never prints), where the keys are
//!   ([`KeySpec`]) and how it runs ([`Handler`]);
//! - `.doc(group, since, summary)`: what COMMAND DOCS prints;
//! - `.acl(..)`: ACL categories beyond the derived ones (see [`CommandSpec::acl_categories`]);
//!   `.family(..)` replaces the group's data-type category (SORT: @set @sortedset @list);
//! - `.plan(hook)`: locks the key spec cannot express (see [`PlanSink`]);
//! - `.subs(..)`: subcommands (`container` for a command that is nothing but its subcommands).

use super::flags;
use super::util::parse_i64;
use super::{ConnFn, LocalFn, ShardFn};

/// How a command runs (see the `commands` module docs).
#[derive(Clone, Copy)]
pub enum Handler {
    Shard(ShardFn),
    Local(LocalFn),
    Conn(ConnFn),
    /// Only dispatches to `subcommands`.
    Container,
}

/// Argument indices (into the full argv, name at 0) of a command's keys, for the commands whose
/// keys no other [`KeySpec`] form describes. Malformed arguments may yield fewer positions (the
/// handler reports the error).
pub type KeysFn = fn(&[&[u8]]) -> Vec<usize>;

/// Where a command's keys are. Drives the transaction framework's lock plan
/// (`coordinator::LockPlan`), the routing of single-shard commands, pipeline squashing, COMMAND
/// GETKEYS and COMMAND INFO.
#[derive(Clone, Copy)]
pub enum KeySpec {
    /// No keys.
    None,
    /// Redis's legacy key spec: keys at `first, first + step, ...` up to `last` (1-based argument
    /// indices; a negative `last` counts from the end: -1 is the last argument).
    Range { first: i32, last: i32, step: i32 },
    /// `numkeys` at argument `numkeys_at`, then that many keys from `numkeys_at + first`, every
    /// `step` arguments (ZUNION numkeys key..., LMPOP numkeys key..., BLMPOP timeout numkeys
    /// key...). A `numkeys` that is not a positive integer gives no keys; keys past the end of the
    /// arguments are left out.
    Keynum {
        numkeys_at: usize,
        first: usize,
        step: usize,
    },
    /// Redis's `keyword` begin_search with a `range` find_keys (XREAD ... STREAMS key... id...,
    /// GEORADIUS ... STORE key, MIGRATE ... KEYS key...): the first argument equal to `keyword`
    /// (ASCII case-insensitively), searched from argument `start_from` towards the end (positive)
    /// or from argument `argc + start_from` towards the start (negative), comes right before the
    /// first key; no keyword, no keys. The keys then run from that first key, every `step`
    /// arguments, up to `first + last` (`last` >= 0) or the `-last`-th argument from the end;
    /// with `last` = -1 and a `limit` > 1, only the first 1/`limit` of the arguments from the
    /// first key on are keys (XREAD's `STREAMS k1 k2 id1 id2`: limit 2).
    Keyword {
        keyword: &'static str,
        start_from: i32,
        last: i32,
        step: i32,
        limit: i32,
    },
    /// Several key specs (Redis commands have one per kind of key: ZUNIONSTORE's destination,
    /// then its sources). The keys are each member's, concatenated in declaration order, as
    /// Redis's `getKeysUsingKeySpecs` lists them.
    Many(&'static [KeySpec]),
    /// Keys found by a function (SORT ... STORE dst). `legacy` is the (first, last, step)
    /// COMMAND INFO prints; its `first` also names the routing key.
    Custom {
        legacy: (i32, i32, i32),
        keys: KeysFn,
    },
}

/// No keys.
pub const NOKEYS: KeySpec = KeySpec::None;

/// Keys at `first, first + step, ...` up to `last` (negative: from the end).
pub const fn range(first: i32, last: i32, step: i32) -> KeySpec {
    assert!(
        first > 0 && step > 0,
        "a key range starts at argument 1 or later"
    );
    KeySpec::Range { first, last, step }
}

/// `numkeys` at `numkeys_at`, the keys from `numkeys_at + first` every `step`.
pub const fn keynum(numkeys_at: usize, first: usize, step: usize) -> KeySpec {
    assert!(numkeys_at > 0 && first > 0 && step > 0);
    KeySpec::Keynum {
        numkeys_at,
        first,
        step,
    }
}

/// Keys after `keyword` (searched from `start_from`: forward when positive, backwards from the
/// end when negative), up to `last` relative to the first key (negative: from the end; -1 with
/// `limit` > 1: the first 1/`limit` of the arguments left), every `step` (see
/// [`KeySpec::Keyword`]).
pub const fn keyword(
    keyword: &'static str,
    start_from: i32,
    last: i32,
    step: i32,
    limit: i32,
) -> KeySpec {
    assert!(!keyword.is_empty() && start_from != 0 && step > 0 && limit >= 0);
    assert!(
        limit <= 1 || last == -1,
        "a limit needs lastkey -1 (as in Redis)"
    );
    KeySpec::Keyword {
        keyword,
        start_from,
        last,
        step,
        limit,
    }
}

/// Several key specs; the keys are the members' in order (see [`KeySpec::Many`]).
pub const fn many(specs: &'static [KeySpec]) -> KeySpec {
    assert!(!specs.is_empty(), "many() needs key specs");
    let mut i = 0;
    while i < specs.len() {
        assert!(
            !matches!(specs[i], KeySpec::None | KeySpec::Many(_)),
            "many() takes keyed, non-nested key specs"
        );
        i += 1;
    }
    KeySpec::Many(specs)
}

/// Keys found by `keys`; `legacy` is what COMMAND INFO prints as (first, last, step).
pub const fn custom(legacy: (i32, i32, i32), keys: KeysFn) -> KeySpec {
    KeySpec::Custom { legacy, keys }
}

impl KeySpec {
    /// Redis's legacy (first, last, step) triple, as COMMAND INFO prints it: the range for a
    /// range, (0, 0, 0) for keynum and keyword commands, as declared for custom ones. For
    /// several specs, what Redis's `populateCommandLegacyRangeSpec` derives: a lone member's
    /// triple, otherwise the span of the step-1 range members that follow on from each other
    /// (ZUNIONSTORE's destination: 1 1 1; LMOVE's two keys: 1 2 1), (0, 0, 0) without any.
    pub const fn legacy(&self) -> (i32, i32, i32) {
        match *self {
            KeySpec::None | KeySpec::Keynum { .. } | KeySpec::Keyword { .. } => (0, 0, 0),
            KeySpec::Range { first, last, step } => (first, last, step),
            KeySpec::Custom { legacy, .. } => legacy,
            KeySpec::Many(specs) => {
                if specs.len() == 1 {
                    return specs[0].legacy();
                }
                let (mut lo, mut hi, mut prev_hi) = (i32::MAX, 0i32, 0i32);
                let mut i = 0;
                while i < specs.len() {
                    if let KeySpec::Range {
                        first,
                        last,
                        step: 1,
                    } = specs[i]
                    {
                        if prev_hi == 0 || prev_hi == first - 1 {
                            if first < lo {
                                lo = first;
                            }
                            // Redis compares as unsigned: a last counted from the end wins.
                            if (last as u32) > (hi as u32) {
                                hi = last;
                            }
                            prev_hi = hi;
                        }
                    }
                    i += 1;
                }
                if lo == i32::MAX {
                    (0, 0, 0)
                } else {
                    (lo, hi, 1)
                }
            }
        }
    }

    /// The routing key's argument index (the legacy first key), 0 when there is none.
    #[inline]
    pub const fn first_key(&self) -> i32 {
        self.legacy().0
    }

    /// True for `KeySpec::None`.
    #[inline]
    pub const fn is_none(&self) -> bool {
        matches!(self, KeySpec::None)
    }

    /// For a range (or no keys): the key argument range `first..=last` (empty when first > last)
    /// and its step, clipped to the `argc` arguments present. `None` for the forms whose keys
    /// depend on the arguments' values (use `positions`).
    #[inline]
    pub fn range(&self, argc: usize) -> Option<(usize, usize, usize)> {
        let (first, last, step) = match *self {
            KeySpec::None => return Some((1, 0, 1)),
            KeySpec::Range { first, last, step } => (first, last, step),
            KeySpec::Keynum { .. }
            | KeySpec::Keyword { .. }
            | KeySpec::Many(_)
            | KeySpec::Custom { .. } => return None,
        };
        let first = first.max(0) as usize;
        let last = if last < 0 {
            argc as i64 + last as i64
        } else {
            last as i64
        };
        let step = step.max(1) as usize;
        Some(if first == 0 || last < first as i64 || first >= argc {
            (1, 0, step)
        } else {
            (first, last.min(argc as i64 - 1) as usize, step)
        })
    }

    /// Argument indices (into the full argv, name at 0) of the keys in `args`, clipped to the
    /// arguments present.
    pub fn positions(&self, args: &[&[u8]]) -> Vec<usize> {
        match *self {
            KeySpec::Many(specs) => {
                let mut v = Vec::new();
                for s in specs {
                    v.extend(s.find(args).positions);
                }
                v
            }
            _ => self.find(args).positions,
        }
    }

    /// What each of [`members`](Self::members) finds in `args` (index i: member i, Redis's key
    /// spec i), as [`positions`](Self::positions) finds them, each with whether Redis's
    /// `getKeysUsingKeySpecs` would accept that spec for these arguments.
    pub fn positions_by_spec(&self, args: &[&[u8]]) -> Vec<SpecPositions> {
        self.members().iter().map(|s| s.find(args)).collect()
    }

    /// One member's keys (see [`SpecPositions`]).
    fn find(&self, args: &[&[u8]]) -> SpecPositions {
        let argc = args.len() as i64;
        // Redis's check of a spec's key range: out of bounds or empty is a syntax error.
        let valid = |first: i64, last: i64| !(last >= argc || last < first || first >= argc);
        match *self {
            KeySpec::None => SpecPositions {
                positions: Vec::new(),
                redis_valid: true,
            },
            KeySpec::Range { first, last, .. } => {
                let (lo, hi, step_by) = self.range(args.len()).unwrap_or((1, 0, 1));
                let last = if last < 0 {
                    argc + last as i64
                } else {
                    last as i64
                };
                SpecPositions {
                    positions: (lo..=hi).step_by(step_by).collect(),
                    redis_valid: valid(first as i64, last),
                }
            }
            KeySpec::Keynum {
                numkeys_at,
                first,
                step,
            } => {
                let Some(n) = args
                    .get(numkeys_at)
                    .and_then(|a| parse_i64(a))
                    .filter(|&n| n >= 1)
                else {
                    return SpecPositions::default();
                };
                let first = numkeys_at + first;
                SpecPositions {
                    positions: (first..args.len()).step_by(step).take(n as usize).collect(),
                    // Redis: the keys run from the first to first + numkeys - 1 (keystep 1).
                    redis_valid: valid(first as i64, (first as i64).saturating_add(n - 1)),
                }
            }
            KeySpec::Keyword {
                keyword,
                start_from,
                last,
                step,
                limit,
            } => {
                let Some(first) = keyword_at(args, keyword, start_from).map(|i| i as i64 + 1)
                else {
                    // No keyword, no keys: fine with Redis.
                    return SpecPositions {
                        positions: Vec::new(),
                        redis_valid: true,
                    };
                };
                let last = if last >= 0 {
                    first + last as i64
                } else if limit > 1 {
                    first + (argc - first) / limit as i64 - 1
                } else {
                    argc + last as i64
                };
                let redis_valid = valid(first, last);
                let last = last.min(argc - 1);
                let positions = if last < first {
                    Vec::new()
                } else {
                    (first as usize..=last as usize)
                        .step_by(step.max(1) as usize)
                        .collect()
                };
                SpecPositions {
                    positions,
                    redis_valid,
                }
            }
            KeySpec::Many(_) => SpecPositions {
                positions: self.positions(args),
                redis_valid: self.positions_by_spec(args).iter().all(|s| s.redis_valid),
            },
            KeySpec::Custom { keys, .. } => {
                let mut v = keys(args);
                v.retain(|&i| i >= 1 && i < args.len());
                SpecPositions {
                    redis_valid: !v.is_empty(),
                    positions: v,
                }
            }
        }
    }

    /// The specs COMMAND INFO describes one by one: a `Many`'s members, or this spec alone
    /// (none for `None`).
    pub fn members(&self) -> &[KeySpec] {
        match self {
            KeySpec::None => &[],
            KeySpec::Many(specs) => specs,
            one => std::slice::from_ref(one),
        }
    }
}

/// The index of the argument equal to `keyword` (ASCII case-insensitively) that Redis's keyword
/// begin_search finds from `start_from` (see [`KeySpec::Keyword`]). As in Redis, a forward search
/// never looks at the last argument (no key could follow it there), and a backward one stops
/// before argument 1.
fn keyword_at(args: &[&[u8]], keyword: &str, start_from: i32) -> Option<usize> {
    let argc = args.len();
    let is_kw = |&i: &usize| args[i].eq_ignore_ascii_case(keyword.as_bytes());
    if start_from > 0 {
        (start_from as usize..argc.saturating_sub(1)).find(is_kw)
    } else {
        let start = argc as i64 + start_from as i64;
        if start < 2 {
            return None;
        }
        (2..=(start as usize).min(argc - 1)).rev().find(is_kw)
    }
}

/// What one key spec finds in a call (see [`KeySpec::positions_by_spec`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecPositions {
    /// The keys' argument indices, as [`KeySpec::positions`] lists them (clipped to the
    /// arguments present).
    pub positions: Vec<usize>,
    /// Whether Redis's `getKeysUsingKeySpecs` accepts the spec for these arguments: false where
    /// it finds a syntax error (a `numkeys` that is no integer, below 1 or counting keys past
    /// the end; a key range past the end or empty after its keyword) and gives up on the specs
    /// (COMMAND GETKEYS then falls back on the command's getkeys function, or finds no keys).
    /// A keyword that is not there is no error. A custom spec is valid when it finds keys (as
    /// SINTERCARD's finds none exactly where Redis's keynum spec fails).
    pub redis_valid: bool,
}

/// Where a command's `plan` hook puts the locks its key spec cannot express. Implemented by the
/// transaction framework's `coordinator::LockPlan`.
pub trait PlanSink {
    /// Lock `key` in db `db` (exclusively when `excl`) in addition to the key spec's keys.
    fn lock_key(&mut self, db: usize, key: &[u8], excl: bool);
    /// Lock every shard as a whole (shared, or exclusive when `excl`).
    fn lock_all_shards(&mut self, excl: bool);
    /// EXEC planning: the commands queued after this one run in db `db`.
    fn select_db(&mut self, db: usize);
    /// The number of databases.
    fn dbnum(&self) -> usize;
}

/// A command's lock-plan hook: called with the command's arguments after its key spec's keys
/// were planned (see `CommandSpec::plan`).
pub type PlanFn = fn(&[&[u8]], &mut dyn PlanSink);

/// ACL categories (a bit set), in the order Redis prints them.
pub mod acl {
    pub const KEYSPACE: u32 = 1;
    pub const READ: u32 = 1 << 1;
    pub const WRITE: u32 = 1 << 2;
    pub const SET: u32 = 1 << 3;
    pub const SORTEDSET: u32 = 1 << 4;
    pub const LIST: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const STRING: u32 = 1 << 7;
    pub const BITMAP: u32 = 1 << 8;
    pub const HYPERLOGLOG: u32 = 1 << 9;
    pub const GEO: u32 = 1 << 10;
    pub const STREAM: u32 = 1 << 11;
    pub const PUBSUB: u32 = 1 << 12;
    pub const ADMIN: u32 = 1 << 13;
    pub const FAST: u32 = 1 << 14;
    pub const SLOW: u32 = 1 << 15;
    pub const BLOCKING: u32 = 1 << 16;
    pub const DANGEROUS: u32 = 1 << 17;
    pub const CONNECTION: u32 = 1 << 18;
    pub const TRANSACTION: u32 = 1 << 19;
    pub const SCRIPTING: u32 = 1 << 20;

    /// Every category with its name, in Redis's order (`ACLCommandCategories`).
    pub const NAMES: &[(u32, &str)] = &[
        (KEYSPACE, "@keyspace"),
        (READ, "@read"),
        (WRITE, "@write"),
        (SET, "@set"),
        (SORTEDSET, "@sortedset"),
        (LIST, "@list"),
        (HASH, "@hash"),
        (STRING, "@string"),
        (BITMAP, "@bitmap"),
        (HYPERLOGLOG, "@hyperloglog"),
        (GEO, "@geo"),
        (STREAM, "@stream"),
        (PUBSUB, "@pubsub"),
        (ADMIN, "@admin"),
        (FAST, "@fast"),
        (SLOW, "@slow"),
        (BLOCKING, "@blocking"),
        (DANGEROUS, "@dangerous"),
        (CONNECTION, "@connection"),
        (TRANSACTION, "@transaction"),
        (SCRIPTING, "@scripting"),
    ];

    /// The names of the categories in `cats`, in Redis's order.
    pub fn names(cats: u32) -> impl Iterator<Item = &'static str> {
        NAMES
            .iter()
            .filter(move |(bit, _)| cats & bit != 0)
            .map(|(_, n)| *n)
    }
}

/// Redis's command groups (COMMAND DOCS "group").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Group {
    Generic,
    String,
    List,
    Set,
    SortedSet,
    Hash,
    Pubsub,
    Transactions,
    Connection,
    Server,
    Scripting,
    Hyperloglog,
    Cluster,
    Sentinel,
    Geo,
    Stream,
    Bitmap,
}

impl Group {
    /// The name COMMAND DOCS prints (as Redis 7.0).
    pub const fn name(self) -> &'static str {
        match self {
            Group::Generic => "generic",
            Group::String => "string",
            Group::List => "list",
            Group::Set => "set",
            Group::SortedSet => "sorted-set",
            Group::Hash => "hash",
            Group::Pubsub => "pubsub",
            Group::Transactions => "transactions",
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Scripting => "scripting",
            Group::Hyperloglog => "hyperloglog",
            Group::Cluster => "cluster",
            Group::Sentinel => "sentinel",
            Group::Geo => "geo",
            Group::Stream => "stream",
            Group::Bitmap => "bitmap",
        }
    }

    /// The family ACL category of the group's commands (none for server, cluster, sentinel).
    pub const fn acl(self) -> u32 {
        match self {
            Group::Generic => acl::KEYSPACE,
            Group::String => acl::STRING,
            Group::List => acl::LIST,
            Group::Set => acl::SET,
            Group::SortedSet => acl::SORTEDSET,
            Group::Hash => acl::HASH,
            Group::Pubsub => acl::PUBSUB,
            Group::Transactions => acl::TRANSACTION,
            Group::Connection => acl::CONNECTION,
            Group::Scripting => acl::SCRIPTING,
            Group::Hyperloglog => acl::HYPERLOGLOG,
            Group::Geo => acl::GEO,
            Group::Stream => acl::STREAM,
            Group::Bitmap => acl::BITMAP,
            Group::Server | Group::Cluster | Group::Sentinel => 0,
        }
    }
}

pub struct CommandSpec {
    /// Lowercase name (for subcommands: the subcommand word, e.g. "get" under "config").
    pub name: &'static str,
    /// Redis arity: N exact, -N at least N (the name counts).
    pub arity: i32,
    /// `flags::*`.
    pub flags: u32,
    pub keys: KeySpec,
    /// Locks beyond the key spec's (keys in another db, whole shards) and EXEC's db switches:
    /// MOVE, COPY ... DB n, SORT BY/GET patterns, SELECT.
    pub plan: Option<PlanFn>,
    pub handler: Handler,
    /// For a multi-key command (DEL, EXISTS, MGET, PFCOUNT...): the shard handler that is the
    /// whole command when it names exactly one key, so such a call runs like GET (inline or one
    /// message, and squashed in pipelines) instead of through the coordinator.
    pub one_key: Option<ShardFn>,
    pub subcommands: &'static [CommandSpec],
    pub group: Group,
    pub since: &'static str,
    pub summary: &'static str,
    /// ACL categories that do not follow from the flags and the group.
    pub acl_extra: u32,
    /// Replaces the group's family category when set.
    pub acl_family: Option<u32>,
    /// Whether a call writes, for a command whose flags cannot say (a script's call is
    /// judged by the script's own flags): CLIENT PAUSE WRITE asks it.
    pub writes_by: Option<WritesFn>,
    /// How the command replicates when it is not as sent: Redis's propagation form
    /// (`commands::propagate`: EXPIRE as PEXPIREAT, SPOP as SREM...). None: verbatim (or
    /// `flags::PROP_SELF`: its shard steps' records).
    pub propagate: Option<super::propagate::PropagateFn>,
}

/// See [`CommandSpec::writes_by`].
pub type WritesFn = fn(&CommandSpec, &[&[u8]]) -> bool;

/// A command: name, arity, flags, keys, handler. Documented with `.doc(...)`.
pub const fn cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeySpec,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        plan: None,
        handler,
        one_key: None,
        subcommands: &[],
        group: Group::Generic,
        since: "",
        summary: "",
        acl_extra: 0,
        acl_family: None,
        writes_by: None,
        propagate: None,
    }
}

/// A command that only dispatches to its subcommands (CONFIG, CLIENT, OBJECT...).
pub const fn container(
    name: &'static str,
    arity: i32,
    subcommands: &'static [CommandSpec],
) -> CommandSpec {
    cmd(name, arity, 0, NOKEYS, Handler::Container).subs(subcommands)
}

impl CommandSpec {
    /// COMMAND DOCS: group, the version that introduced the command, summary.
    pub const fn doc(mut self, group: Group, since: &'static str, summary: &'static str) -> Self {
        self.group = group;
        self.since = since;
        self.summary = summary;
        self
    }

    /// ACL categories beyond the derived ones (`acl::*`).
    pub const fn acl(mut self, extra: u32) -> Self {
        self.acl_extra |= extra;
        self
    }

    /// Data-type categories replacing the group's (`acl::*`).
    pub const fn family(mut self, cats: u32) -> Self {
        self.acl_family = Some(cats);
        self
    }

    /// A lock-plan hook (see `PlanSink`).
    /// The shard handler that runs this call by itself: the command's own
    /// (`Handler::Shard`), or its `one_key` handler when the call names exactly one key.
    #[inline]
    pub fn shard_fn(&self, argc: usize) -> Option<ShardFn> {
        match self.handler {
            Handler::Shard(f) => Some(f),
            _ => {
                let f = self.one_key?;
                match self.keys.range(argc) {
                    Some((first, last, _)) if first == last && first > 0 => Some(f),
                    _ => None,
                }
            }
        }
    }

    /// See [`CommandSpec::one_key`].
    pub const fn one_key(mut self, f: ShardFn) -> Self {
        self.one_key = Some(f);
        self
    }

    pub const fn plan(mut self, hook: PlanFn) -> Self {
        self.plan = Some(hook);
        self
    }

    /// See [`CommandSpec::propagate`].
    pub const fn propagate(mut self, f: super::propagate::PropagateFn) -> Self {
        self.propagate = Some(f);
        self
    }

    /// See [`CommandSpec::writes_by`].
    pub const fn writes_by(mut self, f: WritesFn) -> Self {
        self.writes_by = Some(f);
        self
    }

    pub const fn subs(mut self, subcommands: &'static [CommandSpec]) -> Self {
        self.subcommands = subcommands;
        self
    }

    /// The routing key's argument index (0: none).
    #[inline]
    pub const fn first_key(&self) -> i32 {
        self.keys.first_key()
    }

    /// The command's ACL categories, derived as Redis's `setImplicitACLCategories` does from the
    /// flags (write: @write, readonly: @read, admin: @admin @dangerous, pubsub: @pubsub,
    /// fast: @fast, otherwise @slow, blocking: @blocking), plus the family category of its group
    /// (generic: @keyspace, string: @string, ...; none for a container, whose subcommands carry
    /// theirs), plus the declared extras.
    pub const fn acl_categories(&self) -> u32 {
        let f = self.flags;
        let mut c = self.acl_extra;
        if f & flags::WRITE != 0 {
            c |= acl::WRITE;
        }
        if f & flags::READONLY != 0 {
            c |= acl::READ;
        }
        if f & flags::ADMIN != 0 {
            c |= acl::ADMIN | acl::DANGEROUS;
        }
        if f & flags::PUBSUB != 0 {
            c |= acl::PUBSUB;
        }
        c |= if f & flags::FAST != 0 {
            acl::FAST
        } else {
            acl::SLOW
        };
        if f & flags::BLOCKING != 0 {
            c |= acl::BLOCKING;
        }
        if self.subcommands.is_empty() {
            c |= match self.acl_family {
                Some(cats) => cats,
                None => self.group.acl(),
            };
        }
        c
    }
}

/// What the family tables import.
pub mod prelude {
    pub use super::super::flags::*;
    pub use super::Handler::{Conn, Local, Shard};
    pub use super::{
        acl, cmd, container, custom, keynum, keyword, many, range, CommandSpec, Group, KeySpec,
        PlanSink, NOKEYS,
    };
}
