//! Configuration: one parameter table (`params.rs`) drives `redis.conf` files (`file.rs`),
//! command-line flags in Redis's and Dragonfly's forms, `--flagfile`, `DFLY_<flag>` environment
//! variables (`args.rs`), runtime `CONFIG GET/SET`, and `CONFIG REWRITE` (`rewrite.rs`).
//!
//! Values live as canonical strings behind a `RwLock` that only CONFIG and startup touch; values
//! read on hot paths are mirrored into atomics so the data path never takes the lock.

mod access;
mod args;
pub mod file;
pub mod glob;
pub mod hooks;
pub mod params;
pub mod rewrite;

pub use access::{
    Allow, MaxmemoryPolicy, PropagationErrorBehavior, ReplDisklessLoad, Supervised, TlsAuthClients,
};
pub use args::{help_text, parse_args, version_text, Startup};
pub use params::{Kind, Param, PARAMS};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::RwLock;

use damselfly_types::list::Fill;
use damselfly_types::rdb::object::EncLimits;
use damselfly_types::Limits;

/// Parameters that CONFIG SET changes only with `enable-protected-configs yes` (as Redis: they
/// name files the server writes).
const PROTECTED: &[&str] = &["dir", "dbfilename"];

/// Runtime configuration. Cheap accessors for hot values.
pub struct Config {
    values: RwLock<HashMap<&'static str, String>>,
    config_file: RwLock<Option<std::path::PathBuf>>,
    threads: AtomicU64,
    dbnum: AtomicU64,
    hz: AtomicU64,
    maxmemory: AtomicU64,
    /// `maxmemory-clients`: bytes when positive, a percentage of maxmemory when negative (as
    /// Redis stores it).
    maxmemory_clients: AtomicI64,
    keys_output_limit: AtomicU64,
    proto_max_bulk_len: AtomicU64,
    query_buffer_limit: AtomicU64,
    /// `client-output-buffer-limit`: (hard, soft, soft seconds) per class, in `ObufClass` order.
    obuf_limits: [[AtomicU64; 3]; 3],
    maxclients: AtomicU64,
    protected_mode: AtomicBool,
    timeout_secs: AtomicU64,
    tcp_keepalive_secs: AtomicU64,
    has_password: AtomicBool,
    /// `user` directives of the configuration (name, then rules), applied at start-up by
    /// `acl::load_at_startup`.
    acl_users: std::sync::Mutex<Vec<Vec<String>>>,
    /// `rename-command` directives (old name, new name), applied at start-up by
    /// `commands::registry::install_renames`.
    renames: std::sync::Mutex<Vec<(String, String)>>,
    slowlog_slower_than: AtomicI64,
    /// `busy-reply-threshold` in ms (read at every script start).
    lua_time_limit: AtomicU64,
    slowlog_max_len: AtomicU64,
    active_expire: AtomicBool,
    dynamic_hz: AtomicBool,
    /// Collection encoding thresholds, indexed by `EncLimit`.
    enc_limits: [AtomicI64; EncLimit::COUNT],
}

/// The client classes of `client-output-buffer-limit`, in the order of its canonical value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObufClass {
    Normal = 0,
    /// Replicas (Redis's "slave" class); no damselfly client is one yet.
    Replica = 1,
    /// Clients subscribed to channels; no damselfly client is one yet.
    PubSub = 2,
}

/// One class's output buffer limit: bytes (0 = none) and the soft limit's seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
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
    /// Bytes a sparse HyperLogLog may grow to before it turns dense.
    HllSparseMaxBytes,
    /// A stream node's bytes (as Redis's listpack would have them) before a new node starts.
    StreamNodeMaxBytes,
    /// A stream node's entries (deleted ones too) before a new node starts.
    StreamNodeMaxEntries,
}

impl EncLimit {
    const COUNT: usize = 11;
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
        (EncLimit::HllSparseMaxBytes, "hll-sparse-max-bytes"),
        (EncLimit::StreamNodeMaxBytes, "stream-node-max-bytes"),
        (EncLimit::StreamNodeMaxEntries, "stream-node-max-entries"),
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
    /// CONFIG SET of a protected parameter without `enable-protected-configs`.
    Protected(String),
    /// A one-argument parameter given none or several (config files, command line).
    Arity(String),
    /// Start-up configuration errors, already formatted as Redis's FATAL CONFIG FILE ERROR
    /// blocks (one per bad directive).
    Fatal(String),
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
            ConfigError::Protected(n) => write!(f, "CONFIG SET failed (possibly related to argument '{n}') - can't set protected config"),
            ConfigError::Arity(n) => write!(f, "wrong number of arguments for '{n}'"),
            ConfigError::Io(e) | ConfigError::Fatal(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// The reason alone, as Redis prints it under a config-file line.
    pub fn reason(&self) -> String {
        match self {
            ConfigError::UnknownParam(_) => "Bad directive or wrong number of arguments".into(),
            ConfigError::Arity(_) => "wrong number of arguments".into(),
            ConfigError::BadValue { why, .. } => why.clone(),
            ConfigError::NotImplemented { why, .. } => format!("refused: {why}"),
            ConfigError::Immutable(_) => "can't set immutable config".into(),
            ConfigError::Protected(_) => "can't set protected config".into(),
            ConfigError::Io(e) | ConfigError::Fatal(e) => e.clone(),
        }
    }
}

fn norm(name: &str) -> String {
    name.trim_start_matches('-')
        .to_ascii_lowercase()
        .replace('_', "-")
}

/// Does `name` (already `norm`ed) name `declared`, dashes and underscores being the same?
/// (`norm(declared) == name`, without making a string per declared name.)
fn same_name(name: &str, declared: &str) -> bool {
    let fold = |c: u8| match c {
        b'_' => b'-',
        c => c.to_ascii_lowercase(),
    };
    let d = declared.trim_start_matches('-').as_bytes();
    d.len() == name.len() && d.iter().zip(name.as_bytes()).all(|(a, b)| fold(*a) == *b)
}

/// Finds a parameter by any of its names (dashes and underscores are interchangeable).
pub fn find_param(name: &str) -> Option<&'static Param> {
    let n = norm(name);
    PARAMS
        .iter()
        .find(|p| same_name(&n, p.name) || p.aliases.iter().any(|a| same_name(&n, a)))
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
const NOT_IMPLEMENTED: &[(&str, RefusedValue, &str)] = &[(
    "appendonly",
    |v| v == "yes",
    "the append-only file is not implemented yet",
)];

/// `canonical`, plus the refusal of values whose feature does not exist yet.
fn accepted(p: &Param, current: &str, args: &[&str]) -> Result<String, ConfigError> {
    let v = checked(p, current, args)?;
    if let Some(why) = refusal(p, &v) {
        return Err(ConfigError::NotImplemented {
            name: p.name.to_string(),
            value: args.join(" "),
            why: why.to_string(),
        });
    }
    Ok(v)
}

/// `canonical`, plus checks against the system (a `dir` that exists).
fn checked(p: &Param, current: &str, args: &[&str]) -> Result<String, ConfigError> {
    let v = canonical(p, current, args)?;
    let v = hooks::check(p.name, v).map_err(|why| ConfigError::BadValue {
        name: p.name.to_string(),
        value: args.join(" "),
        why,
    })?;
    if p.name == "dir" && !v.is_empty() && !std::path::Path::new(&v).is_dir() {
        // Redis chdirs into `dir`; the mirror does too, so refuse what it could not enter.
        return Err(ConfigError::Io(format!(
            "Can't chdir to '{v}': No such file or directory"
        )));
    }
    Ok(v)
}

/// Why the canonical value `v` of `p` needs a feature damselfly does not have, if it does.
fn refusal(p: &Param, v: &str) -> Option<&'static str> {
    NOT_IMPLEMENTED
        .iter()
        .find(|(n, refuse, _)| *n == p.name && refuse(v))
        .map(|(_, _, why)| *why)
}

/// Validates the arguments of `p` (one for every kind but `Words`) and returns the canonical
/// string form of the value.
fn canonical(p: &Param, current: &str, args: &[&str]) -> Result<String, ConfigError> {
    let value = args.join(" ");
    let bad = |why: &str| ConfigError::BadValue {
        name: p.name.to_string(),
        value: value.clone(),
        why: why.to_string(),
    };
    if let Kind::Words(check) = p.kind {
        // One CONFIG SET value carries all the words: `CONFIG SET save "900 1 300 10"`.
        let split: Vec<&str> = if args.len() == 1 {
            args[0].split_whitespace().collect()
        } else {
            args.to_vec()
        };
        let split = if split.is_empty() { vec![""] } else { split };
        return check(current, &split).map_err(|why| bad(&why));
    }
    let [value] = args else {
        return Err(ConfigError::Arity(p.name.to_string()));
    };
    let value = *value;
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
        Kind::Octal(max) => match u32::from_str_radix(value, 8) {
            Ok(v) if v <= max => Ok(format!("{v:o}")),
            _ => Err(bad("argument couldn't be parsed as an octal number")),
        },
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
                Err(bad("argument(s) must be one of the following: ").with_opts(opts))
            }
        }
        Kind::Words(_) => unreachable!("handled above"),
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

/// Redis 7.0's IMMUTABLE_CONFIG parameters, by the names Redis knows them by.
const REDIS_IMMUTABLE: &[&str] = &[
    "rdbchecksum",
    "daemonize",
    "io-threads-do-reads",
    "always-show-logo",
    "set-proc-title",
    "syslog-enabled",
    "cluster-enabled",
    "disable-thp",
    "lua-enable-deprecated-api",
    "aclfile",
    "unixsocket",
    "pidfile",
    "cluster-config-file",
    "syslog-ident",
    "appendfilename",
    "appenddirname",
    "logfile",
    "supervised",
    "syslog-facility",
    "enable-protected-configs",
    "enable-debug-command",
    "enable-module-command",
    "databases",
    "io-threads",
    "tcp-backlog",
    "cluster-port",
    "unixsocketperm",
    "socket-mark-id",
    "replicaof",
    "slaveof",
];

/// Parameters CONFIG GET shows only when asked for by their exact name (Redis 7.0's
/// HIDDEN_CONFIG ones).
const HIDDEN: &[&str] = &[
    "use-exit-on-panic",
    "lua-enable-deprecated-api",
    "rdb-key-save-delay",
    "key-load-delay",
    "watchdog-period",
    "loading-process-events-interval-bytes",
];

impl Config {
    /// All defaults.
    pub fn new() -> Self {
        let mut values = HashMap::new();
        for p in PARAMS {
            values.insert(p.name, p.default.to_string());
        }
        let c = Config {
            values: RwLock::new(values),
            config_file: RwLock::new(None),
            threads: AtomicU64::new(0),
            dbnum: AtomicU64::new(16),
            hz: AtomicU64::new(100),
            maxmemory: AtomicU64::new(0),
            maxmemory_clients: AtomicI64::new(0),
            keys_output_limit: AtomicU64::new(8192),
            proto_max_bulk_len: AtomicU64::new(512 << 20),
            query_buffer_limit: AtomicU64::new(1 << 30),
            obuf_limits: Default::default(),
            maxclients: AtomicU64::new(64000),
            protected_mode: AtomicBool::new(true),
            timeout_secs: AtomicU64::new(0),
            tcp_keepalive_secs: AtomicU64::new(300),
            has_password: AtomicBool::new(false),
            acl_users: Default::default(),
            renames: Default::default(),
            slowlog_slower_than: AtomicI64::new(10000),
            lua_time_limit: AtomicU64::new(5000),
            slowlog_max_len: AtomicU64::new(128),
            active_expire: AtomicBool::new(true),
            dynamic_hz: AtomicBool::new(true),
            enc_limits: Default::default(),
        };
        for p in PARAMS {
            c.mirror(p.name, p.default);
        }
        c
    }

    /// Updates the atomic mirror of a hot value, then tells the parameter's owners (hooks).
    fn mirror(&self, name: &str, v: &str) {
        self.mirror_own(name, v);
        hooks::apply(name, v);
    }

    /// Updates the atomic mirror of a hot value, or what the configuration itself applies
    /// (`dir`, `loglevel`, the latency monitor). False when `name` has none (the table test
    /// counts the parameters read this way).
    fn mirror_own(&self, name: &str, v: &str) -> bool {
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
            "maxmemory" => {
                self.maxmemory.store(num(), Ordering::Relaxed);
            }
            "maxmemory-clients" => {
                let v = match v.strip_suffix('%') {
                    Some(p) => -p.parse::<i64>().unwrap_or(0),
                    None => v.parse::<i64>().unwrap_or(0),
                };
                self.maxmemory_clients.store(v, Ordering::Relaxed);
            }
            "keys_output_limit" => self.keys_output_limit.store(num(), Ordering::Relaxed),
            "proto-max-bulk-len" => self.proto_max_bulk_len.store(num(), Ordering::Relaxed),
            "client-query-buffer-limit" => self.query_buffer_limit.store(num(), Ordering::Relaxed),
            "client-output-buffer-limit" => {
                // Canonical form: `normal h s t slave h s t pubsub h s t`.
                let words: Vec<&str> = v.split_whitespace().collect();
                for (class, g) in words.chunks(4).enumerate().take(3) {
                    for (i, w) in g.iter().skip(1).enumerate() {
                        self.obuf_limits[class][i].store(w.parse().unwrap_or(0), Ordering::Relaxed);
                    }
                }
            }
            "maxclients" => self.maxclients.store(num(), Ordering::Relaxed),
            "protected-mode" => self.protected_mode.store(v == "yes", Ordering::Relaxed),
            "timeout" => self.timeout_secs.store(num(), Ordering::Relaxed),
            "tcp-keepalive" => self.tcp_keepalive_secs.store(num(), Ordering::Relaxed),
            "requirepass" => self.has_password.store(!v.is_empty(), Ordering::Relaxed),
            "slowlog-log-slower-than" => self
                .slowlog_slower_than
                .store(v.parse().unwrap_or(10000), Ordering::Relaxed),
            "slowlog-max-len" => self.slowlog_max_len.store(num(), Ordering::Relaxed),
            "latency-monitor-threshold" => crate::latency::set_threshold(num()),
            "latency-tracking" => crate::latency::set_tracking(v == "yes"),
            "latency-tracking-info-percentiles" => crate::latency::set_percentiles(v),
            "lua-time-limit" => self.lua_time_limit.store(num(), Ordering::Relaxed),
            "active-expire-enabled" => self.active_expire.store(v == "yes", Ordering::Relaxed),
            "dynamic-hz" => self.dynamic_hz.store(v == "yes", Ordering::Relaxed),
            "dir" => {
                if !v.is_empty() {
                    if let Err(e) = std::env::set_current_dir(v) {
                        crate::log_warning!("Can't chdir to '{v}': {e}");
                    }
                }
            }
            "loglevel" => {
                if let Some(l) = crate::log::Level::parse(v) {
                    crate::log::set_level(l);
                }
            }
            _ => {
                let Some((e, _)) = EncLimit::ALL.iter().find(|(_, n)| *n == name) else {
                    return false;
                };
                let n = v
                    .parse()
                    .ok()
                    .or_else(|| parse_memory(v).map(|m| m as i64))
                    .unwrap_or(0);
                self.enc_limits[*e as usize].store(n, Ordering::Relaxed);
            }
        }
        true
    }

    /// Sets a one-argument value at startup (flags) — immutable parameters allowed.
    pub fn set_startup(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        self.set_directive(name, &[value])
    }

    /// Applies one directive at startup (config-file line or command-line flag, any number of
    /// arguments) — immutable parameters allowed.
    pub fn set_directive(&self, name: &str, args: &[&str]) -> Result<(), ConfigError> {
        if norm(name) == "user" {
            // Several `user` lines declare several users: not a parameter with one value.
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let mut users = self.acl_users.lock().unwrap_or_else(|e| e.into_inner());
            users.push(args);
            if let Err(why) = hooks::check_lines("user", &users) {
                let args = users.pop().unwrap_or_default();
                return Err(ConfigError::BadValue {
                    name: "user".into(),
                    value: args.join(" "),
                    why,
                });
            }
            return Ok(());
        }
        if norm(name) == "rename-command" {
            let [old, new] = args else {
                return Err(ConfigError::BadValue {
                    name: "rename-command".into(),
                    value: args.join(" "),
                    why: "wrong number of arguments".into(),
                });
            };
            let mut renames = self.renames.lock().unwrap_or_else(|e| e.into_inner());
            renames.push((old.to_string(), new.to_string()));
            let lines: Vec<Vec<String>> = renames
                .iter()
                .map(|(o, n)| vec![o.clone(), n.clone()])
                .collect();
            if let Err(why) = hooks::check_lines("rename-command", &lines) {
                renames.pop();
                return Err(ConfigError::BadValue {
                    name: "rename-command".into(),
                    value: args.join(" "),
                    why,
                });
            }
            return Ok(());
        }
        let Some(p) = find_param(name) else {
            return Err(match params::unsupported(&norm(name)) {
                Some(why) => ConfigError::NotImplemented {
                    name: name.to_string(),
                    value: args.join(" "),
                    why: why.to_string(),
                },
                None => ConfigError::UnknownParam(name.to_string()),
            });
        };
        self.store(p, args, false)
    }

    /// Start-up: applies a directive that later ones may override, so a value damselfly refuses
    /// is only refused if it is still the value after every source (`refused` tells). Returns the
    /// parameter's canonical name.
    pub fn set_overridable(&self, name: &str, args: &[&str]) -> Result<&'static str, ConfigError> {
        match find_param(name) {
            Some(p) => self.store(p, args, true).map(|()| p.name),
            None => self.set_directive(name, args).map(|()| ""),
        }
    }

    /// The parameters whose current value damselfly refuses, with the reason.
    pub fn refused(&self) -> Vec<(&'static str, &'static str)> {
        self.all_values()
            .into_iter()
            .filter_map(|(p, v)| refusal(p, &v).map(|why| (p.name, why)))
            .collect()
    }

    fn store(
        &self,
        p: &'static Param,
        args: &[&str],
        overridable: bool,
    ) -> Result<(), ConfigError> {
        let current = self.get(p.name).unwrap_or_default();
        let v = if overridable {
            checked(p, &current, args)?
        } else {
            accepted(p, &current, args)?
        };
        self.mirror(p.name, &v);
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.name, v);
        Ok(())
    }

    /// CONFIG SET of one parameter.
    pub fn set(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        self.set_from(name, value, false)
    }

    /// CONFIG SET of one parameter by a client; `local`: connected over loopback or a unix
    /// socket (what `enable-protected-configs local` trusts).
    pub fn set_from(&self, name: &str, value: &str, local: bool) -> Result<(), ConfigError> {
        let p = self.settable(name, value, local)?;
        self.store(p, &[value], false)
    }

    /// The parameter CONFIG SET may change to `value`, or why not. An immutable parameter is
    /// refused as Redis refuses it when named by one of Redis's names; named otherwise (a
    /// Dragonfly flag such as `proactor_threads`, or an alias such as `dbnum`), setting it to
    /// the value it has is a no-op that succeeds, so a tool that writes back every value of
    /// `CONFIG GET *` (Redis's own "CONFIG sanity" test does) works.
    fn settable(
        &self,
        name: &str,
        value: &str,
        local: bool,
    ) -> Result<&'static Param, ConfigError> {
        let p = find_param(name).ok_or_else(|| ConfigError::UnknownParam(name.to_string()))?;
        if !p.mutable {
            let redis_name = REDIS_IMMUTABLE.iter().any(|n| n.eq_ignore_ascii_case(name));
            let current = self.get(p.name).unwrap_or_default();
            let same = checked(p, &current, &[value]).is_ok_and(|v| v == current);
            if redis_name || !same {
                return Err(ConfigError::Immutable(p.name.to_string()));
            }
        }
        if PROTECTED.contains(&p.name) && !self.enable_protected_configs().allows(local) {
            return Err(ConfigError::Protected(p.name.to_string()));
        }
        Ok(p)
    }

    /// Validates without applying (CONFIG SET is all-or-nothing for several pairs).
    pub fn check(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        self.check_from(name, value, false)
    }

    /// `check` for a client (`local`: see `set_from`).
    pub fn check_from(&self, name: &str, value: &str, local: bool) -> Result<(), ConfigError> {
        let p = self.settable(name, value, local)?;
        let current = self.get(p.name).unwrap_or_default();
        accepted(p, &current, &[value]).map(|_| ())
    }

    /// Where the configuration file is (absolute), when the server was started with one; CONFIG
    /// REWRITE writes there.
    pub fn config_file(&self) -> Option<std::path::PathBuf> {
        self.config_file
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_config_file(&self, path: Option<std::path::PathBuf>) {
        *self.config_file.write().unwrap_or_else(|e| e.into_inner()) = path;
    }

    /// Every parameter with its current canonical value, in table order.
    pub fn all_values(&self) -> Vec<(&'static Param, String)> {
        let values = self.values.read().unwrap_or_else(|e| e.into_inner());
        PARAMS
            .iter()
            .map(|p| (p, values.get(p.name).cloned().unwrap_or_default()))
            .collect()
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
            let hidden = HIDDEN.contains(&p.name);
            for n in names {
                // A hidden parameter answers its exact name only, never a pattern (Redis's
                // HIDDEN_CONFIG: test aids such as key-load-delay).
                if patterns.iter().any(|pat| {
                    !(hidden && pat.iter().any(|c| matches!(c, b'*' | b'?' | b'[')))
                        && glob::matches(pat, n.as_bytes(), true)
                }) {
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

    /// The background tick rate for `clients` connected clients: `hz`, doubled (up to 500) for
    /// every 200 clients per tick beyond it when `dynamic-hz` is on, as Redis does, so that
    /// per-client work (idle timeouts) keeps up with many clients.
    pub fn effective_hz(&self, clients: usize) -> u64 {
        let mut hz = self.hz().clamp(1, 500);
        if self.dynamic_hz.load(Ordering::Relaxed) {
            while clients as u64 / hz > 200 && hz < 500 {
                hz = (hz * 2).min(500);
            }
        }
        hz
    }
    #[inline]
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }
    /// The client eviction limit in bytes (0: none), as Redis's `getClientEvictionLimit`: a
    /// percentage applies to maxmemory (none without it), and a limit under 128 KiB is raised
    /// to 128 KiB so a misconfiguration cannot disconnect every client at once.
    #[inline]
    pub fn client_eviction_limit(&self) -> u64 {
        let v = self.maxmemory_clients.load(Ordering::Relaxed);
        let bytes = if v < 0 {
            let mm = self.maxmemory();
            if mm == 0 {
                return 0;
            }
            (mm as f64 * (-v) as f64 / 100.0) as u64
        } else if v > 0 {
            v as u64
        } else {
            return 0;
        };
        bytes.max(128 * 1024)
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
    /// The `client-output-buffer-limit` of one client class.
    #[inline]
    pub fn obuf_limit(&self, class: ObufClass) -> ObufLimit {
        let l = &self.obuf_limits[class as usize];
        ObufLimit {
            hard: l[0].load(Ordering::Relaxed),
            soft: l[1].load(Ordering::Relaxed),
            soft_secs: l[2].load(Ordering::Relaxed),
        }
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
    /// The `rename-command` directives read at start-up.
    pub fn renames(&self) -> Vec<(String, String)> {
        self.renames
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The `user` directives read at start-up.
    pub fn acl_users(&self) -> Vec<Vec<String>> {
        self.acl_users
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn has_password(&self) -> bool {
        self.has_password.load(Ordering::Relaxed)
    }
    pub fn requirepass(&self) -> String {
        self.get("requirepass").unwrap_or_default()
    }
    #[inline]
    /// `busy-reply-threshold` (`lua-time-limit`), ms.
    pub fn lua_time_limit(&self) -> u64 {
        self.lua_time_limit.load(Ordering::Relaxed)
    }
    pub fn slowlog_slower_than(&self) -> i64 {
        self.slowlog_slower_than.load(Ordering::Relaxed)
    }
    /// A collection encoding threshold (hot: read on every collection write).
    #[inline]
    pub fn enc_limit(&self, e: EncLimit) -> i64 {
        self.enc_limits[e as usize].load(Ordering::Relaxed)
    }
    /// All encoding thresholds at once, for a save or load that rebuilds values.
    pub fn enc_limits(&self) -> EncLimits {
        let lim = |e, v| Limits {
            entries: self.enc_limit(e).max(0) as usize,
            value: self.enc_limit(v).max(0) as usize,
        };
        EncLimits {
            list_fill: Fill::new(self.enc_limit(EncLimit::ListMaxListpackSize)),
            hash: lim(
                EncLimit::HashMaxListpackEntries,
                EncLimit::HashMaxListpackValue,
            ),
            set_max_intset: self.enc_limit(EncLimit::SetMaxIntsetEntries).max(0) as usize,
            zset: lim(
                EncLimit::ZsetMaxListpackEntries,
                EncLimit::ZsetMaxListpackValue,
            ),
        }
    }
    #[inline]
    pub fn slowlog_max_len(&self) -> usize {
        self.slowlog_max_len.load(Ordering::Relaxed) as usize
    }
    pub fn bool(&self, name: &str) -> bool {
        self.get(name).map(|v| v == "yes").unwrap_or(false)
    }

    /// The value of a parameter by its canonical name (what the typed accessors of `access.rs`
    /// read): `get` without the search of the table by any name.
    fn value(&self, canonical: &'static str) -> String {
        debug_assert!(PARAMS.iter().any(|p| p.name == canonical), "{canonical}");
        self.values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(canonical)
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::args::{parse_args, Startup};

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
        assert!(matches!(
            c.set("databases", "1"),
            Err(ConfigError::Immutable(_))
        ));
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
        let refused: &[(&str, &str)] = &[("appendonly", "yes")];
        for (name, value) in refused {
            let args = vec![format!("--{name}={value}")];
            match parse_args(&args, &[]) {
                Err(ConfigError::Fatal(e)) => {
                    assert!(e.contains(name) && e.contains("not implemented yet"), "{e}")
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
            ("maxmemory", "50mb"),
            ("maxmemory-policy", "noeviction"),
            ("maxmemory-policy", "allkeys-lru"),
            ("maxmemory-policy", "volatile-ttl"),
            ("cache_mode", "no"),
            ("cache_mode", "yes"),
            ("save", ""),
            ("save", "900 1 300 10"),
            ("appendonly", "no"),
            ("notify-keyspace-events", ""),
            ("notify-keyspace-events", "KEA"),
            ("snapshot_cron", ""),
            ("snapshot_cron", "*/5 * * * *"),
        ] {
            c.set(name, value)
                .unwrap_or_else(|e| panic!("{name} {value:?}: {e}"));
        }
    }

    /// `client-output-buffer-limit` is accepted for every class and its limits reach the
    /// accessor the connections read (normal by default unlimited).
    #[test]
    fn output_buffer_limits_are_mirrored() {
        let c = Config::new();
        assert_eq!(c.obuf_limit(ObufClass::Normal), ObufLimit::default());
        assert_eq!(c.obuf_limit(ObufClass::PubSub).hard, 32 << 20);
        c.set(
            "client-output-buffer-limit",
            "normal 1mb 512kb 10 pubsub 5mb 6mb 80",
        )
        .unwrap();
        assert_eq!(
            c.obuf_limit(ObufClass::Normal),
            ObufLimit {
                hard: 1 << 20,
                soft: 512 << 10,
                soft_secs: 10
            }
        );
        assert_eq!(c.obuf_limit(ObufClass::PubSub).soft, 6 << 20);
        assert_eq!(c.obuf_limit(ObufClass::Replica).hard, 256 << 20);
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
