//! Configuration: one registry drives command-line flags (`--flag=value`, `--flagfile`, `DFLY_<flag>`
//! environment variables) and runtime `CONFIG GET/SET`.
//!
//! Values live as canonical strings behind a `RwLock` that only CONFIG and startup touch; values
//! read on hot paths are mirrored into atomics so the data path never takes the lock.

pub mod glob;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::RwLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Integer within bounds.
    Int(i64, i64),
    /// Byte size; accepts 1k/1kb/1m/1mb/1g/1gb suffixes like Redis.
    Mem,
    /// Byte size of at least this many bytes (and at most i64::MAX), as Redis's bounded memory
    /// parameters (proto-max-bulk-len, client-query-buffer-limit).
    MemAtLeast(u64),
    /// yes/no (also true/false/1/0 on the command line).
    Bool,
    Str,
    Enum(&'static [&'static str]),
}

/// One configuration parameter.
pub struct Param {
    /// Canonical CONFIG name (Redis's name where Redis has one).
    pub name: &'static str,
    /// Other accepted names: Dragonfly flag names with underscores, Redis aliases.
    pub aliases: &'static [&'static str],
    pub kind: Kind,
    pub default: &'static str,
    /// Can CONFIG SET change it at runtime?
    pub mutable: bool,
    pub help: &'static str,
}

const fn p(
    name: &'static str,
    aliases: &'static [&'static str],
    kind: Kind,
    default: &'static str,
    mutable: bool,
    help: &'static str,
) -> Param {
    Param {
        name,
        aliases,
        kind,
        default,
        mutable,
        help,
    }
}

const GB: i64 = 1024 * 1024 * 1024;

/// Every parameter. Defaults marked "" for proactor_threads mean "number of CPUs".
pub static PARAMS: &[Param] = &[
    p(
        "port",
        &[],
        Kind::Int(0, 65535),
        "6379",
        false,
        "Redis protocol port",
    ),
    p(
        "bind",
        &[],
        Kind::Str,
        "0.0.0.0",
        false,
        "addresses to listen on, space separated (e.g. 'localhost' or '127.0.0.1 ::1')",
    ),
    p("requirepass", &[], Kind::Str, "", true, "password for AUTH"),
    p(
        "maxmemory",
        &[],
        Kind::Mem,
        "0",
        true,
        "memory limit in human-readable bytes (e.g. 2gb); only 0 (no limit) until limits exist",
    ),
    p(
        "databases",
        &["dbnum"],
        Kind::Int(1, 1024),
        "16",
        false,
        "number of databases for SELECT",
    ),
    p(
        "hz",
        &[],
        Kind::Int(1, 500),
        "100",
        true,
        "background tick frequency (active expiry)",
    ),
    p(
        "keys_output_limit",
        &["keys-output-limit"],
        Kind::Int(0, i64::MAX),
        "8192",
        true,
        "maximum number of keys KEYS returns",
    ),
    p(
        "dir",
        &[],
        Kind::Str,
        "",
        true,
        "working directory (the process chdirs into it, as Redis does); snapshots go here",
    ),
    p(
        "dbfilename",
        &[],
        Kind::Str,
        "dump",
        true,
        "snapshot file name",
    ),
    p(
        "proactor_threads",
        &["proactor-threads", "threads"],
        // SCAN cursors carry the shard index in 8 bits.
        Kind::Int(0, 256),
        "0",
        false,
        "number of shard threads (0 = number of CPUs)",
    ),
    p(
        "memcached_port",
        &["memcached-port"],
        Kind::Int(0, 65535),
        "0",
        false,
        "Memcached protocol port; only 0 (disabled) until the protocol exists",
    ),
    p(
        "cache_mode",
        &["cache-mode"],
        Kind::Bool,
        "no",
        true,
        "evict keys when near maxmemory; only 'no' until eviction exists",
    ),
    p(
        "snapshot_cron",
        &["snapshot-cron"],
        Kind::Str,
        "",
        true,
        "cron schedule for automatic snapshots; only '' until snapshots exist",
    ),
    p(
        "primary_port_http_enabled",
        &["primary-port-http-enabled"],
        Kind::Bool,
        "yes",
        false,
        "serve the HTTP console and /metrics on the main port",
    ),
    p(
        "http_admin_console",
        &["http-admin-console"],
        Kind::Bool,
        "yes",
        false,
        "serve the HTML console at / on the main port (/metrics is served either way)",
    ),
    p(
        "list-max-listpack-size",
        &["list-max-ziplist-size"],
        Kind::Int(i32::MIN as i64, i32::MAX as i64),
        "-2",
        true,
        "list node size: >0 entries per node, -1..-5 = 4/8/16/32/64 KiB per node",
    ),
    p(
        "list-compress-depth",
        &[],
        Kind::Int(0, i64::MAX),
        "0",
        true,
        "list nodes left uncompressed at each end (accepted; nodes are not compressed)",
    ),
    p(
        "hash-max-listpack-entries",
        &["hash-max-ziplist-entries"],
        Kind::Int(0, i64::MAX),
        "512",
        true,
        "largest hash kept in the compact encoding",
    ),
    p(
        "hash-max-listpack-value",
        &["hash-max-ziplist-value"],
        Kind::Int(0, i64::MAX),
        "64",
        true,
        "longest field or value kept in the compact hash encoding",
    ),
    p(
        "set-max-intset-entries",
        &[],
        Kind::Int(0, i64::MAX),
        "512",
        true,
        "largest all-integer set kept as an intset",
    ),
    p(
        "set-max-listpack-entries",
        &[],
        Kind::Int(0, i64::MAX),
        "128",
        true,
        "largest set kept in the compact encoding",
    ),
    p(
        "set-max-listpack-value",
        &[],
        Kind::Int(0, i64::MAX),
        "64",
        true,
        "longest member kept in the compact set encoding",
    ),
    p(
        "zset-max-listpack-entries",
        &["zset-max-ziplist-entries"],
        Kind::Int(0, i64::MAX),
        "128",
        true,
        "largest sorted set kept in the compact encoding",
    ),
    p(
        "zset-max-listpack-value",
        &["zset-max-ziplist-value"],
        Kind::Int(0, i64::MAX),
        "64",
        true,
        "longest member kept in the compact sorted-set encoding",
    ),
    p(
        "protected-mode",
        &["protected_mode"],
        Kind::Bool,
        "yes",
        true,
        "refuse non-loopback clients when no password is set",
    ),
    p(
        "proto-max-bulk-len",
        &["proto_max_bulk_len"],
        Kind::MemAtLeast(1024 * 1024),
        "536870912",
        true,
        "largest bulk string accepted",
    ),
    p(
        "client-query-buffer-limit",
        &["client_query_buffer_limit"],
        Kind::MemAtLeast(1024 * 1024),
        "1073741824",
        true,
        "largest unparsed input per client",
    ),
    p(
        "maxclients",
        &[],
        Kind::Int(1, 1_000_000),
        "64000",
        true,
        "maximum connected clients",
    ),
    p(
        "timeout",
        &[],
        Kind::Int(0, i64::MAX),
        "0",
        true,
        "close idle clients after N seconds (0 = never)",
    ),
    p(
        "tcp-keepalive",
        &["tcp_keepalive"],
        Kind::Int(0, i64::MAX),
        "300",
        true,
        "TCP keepalive seconds",
    ),
    p(
        "maxmemory-policy",
        &["maxmemory_policy"],
        // Redis's order (it is listed in the CONFIG SET error).
        Kind::Enum(&[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ]),
        "noeviction",
        true,
        "eviction policy",
    ),
    p(
        "slowlog-log-slower-than",
        &["slowlog_log_slower_than"],
        Kind::Int(-1, i64::MAX),
        "10000",
        true,
        "microseconds; -1 disables the slow log",
    ),
    p(
        "slowlog-max-len",
        &["slowlog_max_len"],
        Kind::Int(0, i64::MAX),
        "128",
        true,
        "slow log length",
    ),
    p(
        "save",
        &[],
        Kind::Str,
        "",
        true,
        "Redis-style save points; only '' (no snapshots) until persistence exists",
    ),
    p(
        "appendonly",
        &[],
        Kind::Bool,
        "no",
        true,
        "append only file; only 'no' until it exists",
    ),
    p(
        "appendfsync",
        &[],
        Kind::Enum(&["always", "everysec", "no"]),
        "everysec",
        true,
        "AOF fsync policy (takes effect with appendonly)",
    ),
    p(
        "loglevel",
        &[],
        Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]),
        "notice",
        true,
        "log verbosity",
    ),
    p(
        "logfile",
        &[],
        Kind::Str,
        "",
        false,
        "log file ('' = stderr), Redis's line format",
    ),
    p(
        "lua-time-limit",
        &["busy-reply-threshold"],
        Kind::Int(0, i64::MAX),
        "5000",
        true,
        "script busy threshold (ms)",
    ),
    p(
        "latency-tracking",
        &[],
        Kind::Bool,
        "yes",
        true,
        "per-command latency tracking",
    ),
    p(
        "lazyfree-lazy-user-del",
        &[],
        Kind::Bool,
        "no",
        true,
        "accepted for compatibility",
    ),
    p(
        "lazyfree-lazy-user-flush",
        &[],
        Kind::Bool,
        "no",
        true,
        "accepted for compatibility",
    ),
    p(
        "activerehashing",
        &[],
        Kind::Bool,
        "yes",
        true,
        "accepted for compatibility (Dash tables grow incrementally)",
    ),
    p(
        "active-expire-enabled",
        &["active_expire_enabled"],
        Kind::Bool,
        "yes",
        true,
        "run active expiry",
    ),
    p(
        "notify-keyspace-events",
        &[],
        Kind::Str,
        "",
        true,
        "keyspace notifications classes; only '' until notifications exist",
    ),
    p(
        "pin_threads",
        &["pin-threads"],
        Kind::Bool,
        "yes",
        false,
        "pin shard threads to CPUs",
    ),
    p(
        "shard_sched_batch",
        &["shard-sched-batch"],
        Kind::Enum(&["auto", "yes", "no"]),
        "auto",
        false,
        "run shard threads under SCHED_BATCH (auto: when there are more shard threads than CPUs)",
    ),
];

// Compile-time guard that GB is used (keeps the constant meaningful for docs).
const _: i64 = GB;

/// Runtime configuration. Cheap accessors for hot values.
pub struct Config {
    values: RwLock<HashMap<&'static str, String>>,
    threads: AtomicU64,
    dbnum: AtomicU64,
    hz: AtomicU64,
    maxmemory: AtomicU64,
    keys_output_limit: AtomicU64,
    proto_max_bulk_len: AtomicU64,
    query_buffer_limit: AtomicU64,
    maxclients: AtomicU64,
    protected_mode: AtomicBool,
    timeout_secs: AtomicU64,
    tcp_keepalive_secs: AtomicU64,
    has_password: AtomicBool,
    slowlog_slower_than: AtomicI64,
    slowlog_max_len: AtomicU64,
    active_expire: AtomicBool,
    /// Collection encoding thresholds, indexed by `EncLimit`.
    enc_limits: [AtomicI64; EncLimit::COUNT],
}

/// Collection encoding thresholds (CONFIG names as in Redis 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncLimit {
    ListMaxListpackSize,
    HashMaxListpackEntries,
    HashMaxListpackValue,
    SetMaxIntsetEntries,
    SetMaxListpackEntries,
    SetMaxListpackValue,
    ZsetMaxListpackEntries,
    ZsetMaxListpackValue,
}

impl EncLimit {
    const COUNT: usize = 8;
    const ALL: [(EncLimit, &'static str); EncLimit::COUNT] = [
        (EncLimit::ListMaxListpackSize, "list-max-listpack-size"),
        (
            EncLimit::HashMaxListpackEntries,
            "hash-max-listpack-entries",
        ),
        (EncLimit::HashMaxListpackValue, "hash-max-listpack-value"),
        (EncLimit::SetMaxIntsetEntries, "set-max-intset-entries"),
        (EncLimit::SetMaxListpackEntries, "set-max-listpack-entries"),
        (EncLimit::SetMaxListpackValue, "set-max-listpack-value"),
        (
            EncLimit::ZsetMaxListpackEntries,
            "zset-max-listpack-entries",
        ),
        (EncLimit::ZsetMaxListpackValue, "zset-max-listpack-value"),
    ];
}

/// Errors from flag parsing or CONFIG SET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    UnknownParam(String),
    BadValue {
        name: String,
        value: String,
        why: String,
    },
    Immutable(String),
    /// A value that needs a feature damselfly does not have yet: refused, never ignored.
    NotImplemented {
        name: String,
        value: String,
        why: String,
    },
    Io(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::UnknownParam(n) => write!(f, "Unknown option or number of arguments for CONFIG SET - '{n}'"),
            ConfigError::BadValue { name, value, why } => {
                write!(f, "CONFIG SET failed (possibly related to argument '{name}') - argument '{value}' {why}")
            }
            ConfigError::Immutable(n) => write!(f, "CONFIG SET failed (possibly related to argument '{n}') - can't set immutable config"),
            ConfigError::NotImplemented { name, value, why } => {
                write!(f, "--{name} {value:?} is refused: {why}")
            }
            ConfigError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn norm(name: &str) -> String {
    name.trim_start_matches('-')
        .to_ascii_lowercase()
        .replace('_', "-")
}

/// Finds a parameter by any of its names (dashes and underscores are interchangeable).
pub fn find_param(name: &str) -> Option<&'static Param> {
    let n = norm(name);
    PARAMS
        .iter()
        .find(|p| norm(p.name) == n || p.aliases.iter().any(|a| norm(a) == n))
}

/// Parses Redis-style memory sizes: "1gb" = 1024^3, "1g" = 1000^3, plain bytes.
pub fn parse_memory(s: &str) -> Option<u64> {
    let l = s.trim().to_ascii_lowercase();
    let (num, mul): (&str, u64) = if let Some(n) = l.strip_suffix("gb") {
        (n, 1 << 30)
    } else if let Some(n) = l.strip_suffix("mb") {
        (n, 1 << 20)
    } else if let Some(n) = l.strip_suffix("kb") {
        (n, 1 << 10)
    } else if let Some(n) = l.strip_suffix('g') {
        (n, 1_000_000_000)
    } else if let Some(n) = l.strip_suffix('m') {
        (n, 1_000_000)
    } else if let Some(n) = l.strip_suffix('k') {
        (n, 1000)
    } else if let Some(n) = l.strip_suffix('b') {
        (n, 1)
    } else {
        (l.as_str(), 1)
    };
    if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    num.parse::<u64>().ok()?.checked_mul(mul)
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" | "on" => Some(true),
        "no" | "false" | "0" | "off" => Some(false),
        _ => None,
    }
}

/// Is this (canonical) value one that needs the missing feature?
type RefusedValue = fn(&str) -> bool;

/// Values that would need a feature damselfly does not implement yet, with the reason. They are
/// refused at startup and by CONFIG SET: a user who sets `--maxmemory` must get memory limits
/// or an error, never a server that silently grows past it. Each row goes when its feature
/// lands.
const NOT_IMPLEMENTED: &[(&str, RefusedValue, &str)] = &[
    (
        "maxmemory",
        |v| v != "0",
        "memory limits are not implemented yet (only 0, no limit, is accepted)",
    ),
    (
        "cache_mode",
        |v| v == "yes",
        "cache mode needs eviction, which is not implemented yet",
    ),
    (
        "memcached_port",
        |v| v != "0",
        "the memcached protocol is not implemented yet (only 0, disabled, is accepted)",
    ),
    (
        "snapshot_cron",
        |v| !v.trim().is_empty(),
        "snapshots are not implemented yet",
    ),
    (
        "save",
        |v| !v.trim().is_empty(),
        "RDB snapshots are not implemented yet (only '', no save points, is accepted)",
    ),
    (
        "appendonly",
        |v| v == "yes",
        "the append-only file is not implemented yet",
    ),
    (
        "notify-keyspace-events",
        |v| !v.is_empty(),
        "keyspace notifications are not implemented yet",
    ),
];

/// `canonical`, plus the refusal of values whose feature does not exist yet.
fn accepted(p: &Param, value: &str) -> Result<String, ConfigError> {
    let v = canonical(p, value)?;
    if p.name == "dir" && !v.is_empty() && !std::path::Path::new(&v).is_dir() {
        // Redis chdirs into `dir`; the mirror does too, so refuse what it could not enter.
        return Err(ConfigError::Io(format!(
            "Can't chdir to '{v}': No such file or directory"
        )));
    }
    if let Some((_, _, why)) = NOT_IMPLEMENTED
        .iter()
        .find(|(n, refuse, _)| *n == p.name && refuse(&v))
    {
        return Err(ConfigError::NotImplemented {
            name: p.name.to_string(),
            value: value.to_string(),
            why: why.to_string(),
        });
    }
    Ok(v)
}

/// Validates `value` for `p` and returns its canonical string form.
fn canonical(p: &Param, value: &str) -> Result<String, ConfigError> {
    let bad = |why: &str| ConfigError::BadValue {
        name: p.name.to_string(),
        value: value.to_string(),
        why: why.to_string(),
    };
    match p.kind {
        Kind::Int(min, max) => {
            let v: i64 = value
                .trim()
                .parse()
                .map_err(|_| bad("argument couldn't be parsed into an integer"))?;
            if v < min || v > max {
                return Err(bad(&format!(
                    "argument must be between {min} and {max} inclusive"
                )));
            }
            Ok(v.to_string())
        }
        Kind::Mem => parse_memory(value)
            .map(|v| v.to_string())
            .ok_or_else(|| bad("argument must be a memory value")),
        Kind::MemAtLeast(min) => {
            let v = parse_memory(value).ok_or_else(|| bad("argument must be a memory value"))?;
            if v < min || v > i64::MAX as u64 {
                return Err(bad(&format!(
                    "argument must be between {min} and {} inclusive",
                    i64::MAX
                )));
            }
            Ok(v.to_string())
        }
        Kind::Bool => parse_bool(value)
            .map(|b| if b { "yes" } else { "no" }.to_string())
            .ok_or_else(|| bad("argument must be 'yes' or 'no'")),
        Kind::Str => Ok(value.to_string()),
        Kind::Enum(opts) => {
            let l = value.to_ascii_lowercase();
            if opts.contains(&l.as_str()) {
                Ok(l)
            } else {
                Err(bad("argument(s) must be one of the following: "
                    .to_string()
                    .as_str())
                .with_opts(opts))
            }
        }
    }
}

impl ConfigError {
    fn with_opts(self, opts: &[&str]) -> Self {
        match self {
            ConfigError::BadValue { name, value, why } => ConfigError::BadValue {
                name,
                value,
                why: format!("{why}{}", opts.join(", ")),
            },
            e => e,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl Config {
    /// All defaults.
    pub fn new() -> Self {
        let mut values = HashMap::new();
        for p in PARAMS {
            values.insert(p.name, p.default.to_string());
        }
        let c = Config {
            values: RwLock::new(values),
            threads: AtomicU64::new(0),
            dbnum: AtomicU64::new(16),
            hz: AtomicU64::new(100),
            maxmemory: AtomicU64::new(0),
            keys_output_limit: AtomicU64::new(8192),
            proto_max_bulk_len: AtomicU64::new(512 << 20),
            query_buffer_limit: AtomicU64::new(1 << 30),
            maxclients: AtomicU64::new(64000),
            protected_mode: AtomicBool::new(true),
            timeout_secs: AtomicU64::new(0),
            tcp_keepalive_secs: AtomicU64::new(300),
            has_password: AtomicBool::new(false),
            slowlog_slower_than: AtomicI64::new(10000),
            slowlog_max_len: AtomicU64::new(128),
            active_expire: AtomicBool::new(true),
            enc_limits: Default::default(),
        };
        for p in PARAMS {
            c.mirror(p.name, p.default);
        }
        c
    }

    /// Updates the atomic mirror of a hot value.
    fn mirror(&self, name: &str, v: &str) {
        let num = || v.parse::<u64>().unwrap_or(0);
        match name {
            "proactor_threads" => {
                let n = num();
                let n = if n == 0 {
                    std::thread::available_parallelism()
                        .map(|n| n.get())
                        .unwrap_or(1) as u64
                } else {
                    n
                };
                self.threads.store(n, Ordering::Relaxed)
            }
            "databases" => self.dbnum.store(num(), Ordering::Relaxed),
            "hz" => self.hz.store(num(), Ordering::Relaxed),
            "maxmemory" => self.maxmemory.store(num(), Ordering::Relaxed),
            "keys_output_limit" => self.keys_output_limit.store(num(), Ordering::Relaxed),
            "proto-max-bulk-len" => self.proto_max_bulk_len.store(num(), Ordering::Relaxed),
            "client-query-buffer-limit" => self.query_buffer_limit.store(num(), Ordering::Relaxed),
            "maxclients" => self.maxclients.store(num(), Ordering::Relaxed),
            "protected-mode" => self.protected_mode.store(v == "yes", Ordering::Relaxed),
            "timeout" => self.timeout_secs.store(num(), Ordering::Relaxed),
            "tcp-keepalive" => self.tcp_keepalive_secs.store(num(), Ordering::Relaxed),
            "requirepass" => self.has_password.store(!v.is_empty(), Ordering::Relaxed),
            "slowlog-log-slower-than" => self
                .slowlog_slower_than
                .store(v.parse().unwrap_or(10000), Ordering::Relaxed),
            "slowlog-max-len" => self.slowlog_max_len.store(num(), Ordering::Relaxed),
            "active-expire-enabled" => self.active_expire.store(v == "yes", Ordering::Relaxed),
            "dir" if !v.is_empty() => {
                if let Err(e) = std::env::set_current_dir(v) {
                    crate::log_warning!("Can't chdir to '{v}': {e}");
                }
            }
            "loglevel" => {
                if let Some(l) = crate::log::Level::parse(v) {
                    crate::log::set_level(l);
                }
            }
            _ => {
                if let Some((e, _)) = EncLimit::ALL.iter().find(|(_, n)| *n == name) {
                    self.enc_limits[*e as usize].store(v.parse().unwrap_or(0), Ordering::Relaxed);
                }
            }
        }
    }

    /// Sets a value at startup (flags) — immutable parameters allowed.
    pub fn set_startup(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        let p = find_param(name).ok_or_else(|| ConfigError::UnknownParam(name.to_string()))?;
        let v = accepted(p, value)?;
        self.mirror(p.name, &v);
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.name, v);
        Ok(())
    }

    /// CONFIG SET of one parameter.
    pub fn set(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        let p = find_param(name).ok_or_else(|| ConfigError::UnknownParam(name.to_string()))?;
        if !p.mutable {
            return Err(ConfigError::Immutable(p.name.to_string()));
        }
        let v = accepted(p, value)?;
        self.mirror(p.name, &v);
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.name, v);
        Ok(())
    }

    /// Validates without applying (CONFIG SET is all-or-nothing for several pairs).
    pub fn check(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        let p = find_param(name).ok_or_else(|| ConfigError::UnknownParam(name.to_string()))?;
        if !p.mutable {
            return Err(ConfigError::Immutable(p.name.to_string()));
        }
        accepted(p, value).map(|_| ())
    }

    pub fn get(&self, name: &str) -> Option<String> {
        let p = find_param(name)?;
        self.values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(p.name)
            .cloned()
    }

    /// CONFIG GET: every (name, value) whose name or alias matches one of the glob patterns.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let values = self.values.read().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for p in PARAMS {
            let names = std::iter::once(p.name).chain(p.aliases.iter().copied());
            for n in names {
                if patterns
                    .iter()
                    .any(|pat| glob::matches(pat, n.as_bytes(), true))
                {
                    let v = values.get(p.name).cloned().unwrap_or_default();
                    let v = match p.name {
                        "proactor_threads" => self.threads().to_string(),
                        // Redis answers the absolute working directory.
                        "dir" => std::env::current_dir()
                            .map(|d| d.display().to_string())
                            .unwrap_or(v),
                        _ => v,
                    };
                    out.push((n.to_string(), v));
                }
            }
        }
        out
    }

    #[inline]
    pub fn threads(&self) -> usize {
        self.threads.load(Ordering::Relaxed).max(1) as usize
    }
    #[inline]
    pub fn dbnum(&self) -> usize {
        self.dbnum.load(Ordering::Relaxed).max(1) as usize
    }
    #[inline]
    pub fn hz(&self) -> u64 {
        self.hz.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn keys_output_limit(&self) -> usize {
        self.keys_output_limit.load(Ordering::Relaxed) as usize
    }
    #[inline]
    pub fn proto_max_bulk_len(&self) -> u64 {
        self.proto_max_bulk_len.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn query_buffer_limit(&self) -> u64 {
        self.query_buffer_limit.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn maxclients(&self) -> usize {
        self.maxclients.load(Ordering::Relaxed) as usize
    }
    #[inline]
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_secs.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn tcp_keepalive_secs(&self) -> u64 {
        self.tcp_keepalive_secs.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn protected_mode(&self) -> bool {
        self.protected_mode.load(Ordering::Relaxed)
    }
    #[inline]
    pub fn has_password(&self) -> bool {
        self.has_password.load(Ordering::Relaxed)
    }
    pub fn requirepass(&self) -> String {
        self.get("requirepass").unwrap_or_default()
    }
    #[inline]
    pub fn slowlog_slower_than(&self) -> i64 {
        self.slowlog_slower_than.load(Ordering::Relaxed)
    }
    /// A collection encoding threshold (hot: read on every collection write).
    #[inline]
    pub fn enc_limit(&self, e: EncLimit) -> i64 {
        self.enc_limits[e as usize].load(Ordering::Relaxed)
    }
    #[inline]
    pub fn slowlog_max_len(&self) -> usize {
        self.slowlog_max_len.load(Ordering::Relaxed) as usize
    }
    pub fn port(&self) -> u16 {
        self.get("port")
            .and_then(|v| v.parse().ok())
            .unwrap_or(6379)
    }
    pub fn memcached_port(&self) -> u16 {
        self.get("memcached_port")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
    pub fn bool(&self, name: &str) -> bool {
        self.get(name).map(|v| v == "yes").unwrap_or(false)
    }
}

/// What `parse_args` decided.
pub enum Startup {
    Run(Box<Config>),
    /// Print this and exit 0 (--help, --version).
    Exit(String),
}

/// Parses `DFLY_<flag>` environment variables, then the command line (a `--flagfile` is expanded
/// where it appears). Forms: `--flag=value`, `--flag value`, `-flag value`, `--flag` (bool true),
/// `--noflag` (bool false). Redis-style `--maxmemory 2gb` works too.
pub fn parse_args(args: &[String], env: &[(String, String)]) -> Result<Startup, ConfigError> {
    let cfg = Config::new();
    for (k, v) in env {
        if let Some(flag) = k.strip_prefix("DFLY_") {
            if find_param(flag).is_some() {
                cfg.set_startup(flag, v)?;
            }
        }
    }
    apply_args(&cfg, args, 0)?;
    if let Some(out) = HELP_REQUEST.with(|h| h.borrow_mut().take()) {
        return Ok(Startup::Exit(out));
    }
    Ok(Startup::Run(Box::new(cfg)))
}

thread_local! {
    static HELP_REQUEST: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

fn apply_args(cfg: &Config, args: &[String], depth: usize) -> Result<(), ConfigError> {
    if depth > 8 {
        return Err(ConfigError::Io("flagfile nesting too deep".into()));
    }
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if !a.starts_with('-') {
            return Err(ConfigError::Io(format!(
                "unexpected argument '{a}' (flags look like --port=6379)"
            )));
        }
        let body = a.trim_start_matches('-');
        let (name, inline_val) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        match name {
            "help" | "h" | "helpfull" => {
                HELP_REQUEST.with(|h| *h.borrow_mut() = Some(help_text()));
                continue;
            }
            "version" | "v" => {
                HELP_REQUEST.with(|h| *h.borrow_mut() = Some(version_text()));
                continue;
            }
            "flagfile" => {
                let path = match inline_val {
                    Some(v) => v,
                    None => {
                        let v = args
                            .get(i)
                            .cloned()
                            .ok_or_else(|| ConfigError::Io("--flagfile needs a path".into()))?;
                        i += 1;
                        v
                    }
                };
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| ConfigError::Io(format!("cannot read flagfile {path}: {e}")))?;
                let lines: Vec<String> = text
                    .lines()
                    .map(|l| l.trim())
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(|l| l.to_string())
                    .collect();
                apply_args(cfg, &lines, depth + 1)?;
                continue;
            }
            _ => {}
        }
        let (param, value) = match find_param(name) {
            Some(p) => {
                let v = match inline_val {
                    Some(v) => v,
                    None if p.kind == Kind::Bool => {
                        // `--flag yes` or bare `--flag`.
                        match args.get(i).and_then(|n| parse_bool(n)) {
                            Some(b) => {
                                i += 1;
                                if b { "yes" } else { "no" }.to_string()
                            }
                            None => "yes".to_string(),
                        }
                    }
                    None => {
                        let v = args.get(i).cloned().ok_or_else(|| {
                            ConfigError::Io(format!("flag --{name} needs a value"))
                        })?;
                        i += 1;
                        v
                    }
                };
                (p, v)
            }
            None => match name.strip_prefix("no").and_then(find_param) {
                Some(p) if p.kind == Kind::Bool && inline_val.is_none() => (p, "no".to_string()),
                _ => {
                    return Err(ConfigError::Io(format!(
                        "unknown command line flag '{name}' (see --help)"
                    )))
                }
            },
        };
        cfg.set_startup(param.name, &value)?;
    }
    Ok(())
}

pub fn version_text() -> String {
    format!("damselfly v{}\n", env!("CARGO_PKG_VERSION"))
}

pub fn help_text() -> String {
    let mut s = String::from(
        "damselfly: a multi-threaded, shared-nothing in-memory store speaking the Redis and Memcached protocols.\n\n\
         Usage: damselfly [--flag=value ...] [--flagfile=FILE]\n\
         Every flag can also be given as an environment variable DFLY_<flag>.\n\nFlags:\n",
    );
    for p in PARAMS {
        let names: Vec<String> = std::iter::once(p.name)
            .chain(p.aliases.iter().copied())
            .map(|n| format!("--{n}"))
            .collect();
        let def = if p.name == "proactor_threads" {
            "number of CPUs".to_string()
        } else {
            format!("{:?}", p.default)
        };
        s.push_str(&format!(
            "  {:<44} {} (default: {})\n",
            names.join(", "),
            p.help,
            def
        ));
    }
    s.push_str("  --flagfile FILE                              read one --flag=value per line\n  --help, --version\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str], env: &[(&str, &str)]) -> Config {
        let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let e: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match parse_args(&a, &e).expect("parse") {
            Startup::Run(c) => *c,
            Startup::Exit(_) => panic!("exit"),
        }
    }

    #[test]
    fn flags_env_and_forms() {
        let c = run(
            &[
                "--port=7000",
                "--proto-max-bulk-len",
                "2gb",
                "-dbnum",
                "4",
                "--active_expire_enabled",
                "--noprotected_mode",
                "--cache_mode=no",
                "--maxmemory=0",
            ],
            &[("DFLY_hz", "50")],
        );
        assert_eq!(c.port(), 7000);
        assert_eq!(c.proto_max_bulk_len(), 2 << 30);
        assert_eq!(c.dbnum(), 4);
        assert_eq!(c.hz(), 50);
        assert!(c.bool("active-expire-enabled"));
        assert!(!c.bool("cache_mode"));
        assert!(!c.protected_mode());
    }

    #[test]
    fn flagfile() {
        let dir = std::env::temp_dir().join(format!("dfly-flags-{}", std::process::id()));
        std::fs::write(&dir, "# comment\n--port=7001\n--requirepass=secret\n").expect("write");
        let c = run(&[&format!("--flagfile={}", dir.display())], &[]);
        assert_eq!(c.port(), 7001);
        assert!(c.has_password());
        let _ = std::fs::remove_file(dir);
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("1G"), Some(1_000_000_000));
        assert_eq!(parse_memory("100"), Some(100));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("-1"), None);
    }

    #[test]
    fn config_set_rules() {
        let c = Config::new();
        assert!(c.set("proto-max-bulk-len", "10mb").is_ok());
        assert_eq!(c.get("proto-max-bulk-len").as_deref(), Some("10485760"));
        assert!(matches!(c.set("port", "1"), Err(ConfigError::Immutable(_))));
        assert!(matches!(
            c.set("nope", "1"),
            Err(ConfigError::UnknownParam(_))
        ));
        assert!(c.set("hz", "abc").is_err());
        let got = c.get_matching(&[b"maxmemory*"]);
        assert!(got.iter().any(|(n, v)| n == "maxmemory" && v == "0"));
        assert!(got.iter().any(|(n, _)| n == "maxmemory-policy"));
    }

    /// Values whose feature does not exist yet are refused by flags and CONFIG SET alike;
    /// the values that need nothing missing are accepted.
    #[test]
    fn missing_features_are_refused_not_ignored() {
        let refused: &[(&str, &str)] = &[
            ("maxmemory", "50mb"),
            ("cache_mode", "yes"),
            ("memcached_port", "11211"),
            ("snapshot_cron", "*/5 * * * *"),
            ("save", "900 1"),
            ("appendonly", "yes"),
            ("notify-keyspace-events", "KEA"),
        ];
        for (name, value) in refused {
            let args = vec![format!("--{name}={value}")];
            match parse_args(&args, &[]) {
                Err(e @ ConfigError::NotImplemented { .. }) => {
                    assert!(e.to_string().contains(name), "{e}")
                }
                Err(e) => panic!("--{name}={value}: wrong error {e}"),
                Ok(_) => panic!("--{name}={value} was accepted"),
            }
            let c = Config::new();
            if find_param(name).is_some_and(|p| p.mutable) {
                assert!(
                    matches!(c.set(name, value), Err(ConfigError::NotImplemented { .. })),
                    "CONFIG SET {name} {value}"
                );
                assert!(c.check(name, value).is_err());
            }
        }
        let c = Config::new();
        for (name, value) in [
            ("maxmemory", "0"),
            ("cache_mode", "no"),
            ("save", ""),
            ("appendonly", "no"),
            ("notify-keyspace-events", ""),
            ("snapshot_cron", ""),
        ] {
            c.set(name, value)
                .unwrap_or_else(|e| panic!("{name} {value:?}: {e}"));
        }
    }

    /// `--help` lists each flag once: no parameter name or alias is declared twice.
    #[test]
    fn every_name_is_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for p in PARAMS {
            // (One parameter may list the same name with dashes and with underscores.)
            let own: std::collections::HashSet<String> = std::iter::once(p.name)
                .chain(p.aliases.iter().copied())
                .map(norm)
                .collect();
            for n in own {
                assert!(seen.insert(n.clone()), "{n} declared by two parameters");
            }
        }
        let help = help_text();
        assert_eq!(help.matches("--hash-max-listpack-entries,").count(), 1);
    }
}

#[cfg(test)]
mod enc_limit_tests {
    use super::*;

    #[test]
    fn encoding_limits_have_redis_defaults_and_follow_config_set() {
        let c = Config::new();
        assert_eq!(c.enc_limit(EncLimit::ListMaxListpackSize), -2);
        assert_eq!(c.enc_limit(EncLimit::HashMaxListpackEntries), 512);
        assert_eq!(c.enc_limit(EncLimit::SetMaxIntsetEntries), 512);
        assert_eq!(c.enc_limit(EncLimit::ZsetMaxListpackValue), 64);
        c.set("zset-max-ziplist-entries", "7").unwrap();
        assert_eq!(c.enc_limit(EncLimit::ZsetMaxListpackEntries), 7);
        c.set("list-max-ziplist-size", "4").unwrap();
        assert_eq!(c.enc_limit(EncLimit::ListMaxListpackSize), 4);
    }
}
