//! Typed accessors: how the rest of the server reads a parameter that is not mirrored into an
//! atomic (those are in `mod.rs`). Each reads one parameter by its canonical name, parses the
//! canonical value into the type its users want, and is grouped by the area that owns it.
//!
//! The `accessors!` groups also list the parameters they read (`NET`, `TLS`, ...): the test of
//! the whole table (`params::tests`) counts a parameter as read when an accessor, the atomic
//! mirror or an owner's `apply` hook reads it. The accessors are `pub` (the crate that starts
//! the server, `damselfly`, reads some of them), so the compiler no longer flags one nobody
//! calls; keep each group's name list to what its accessors' callers really read.

use super::Config;

/// Declares accessors `fn $f(&self) -> $t` that bind the canonical value of `$name` (a `String`)
/// to `$v` and return `$body`, and the list `$group` of the parameters they read.
macro_rules! accessors {
    ($group:ident: $( $(#[$doc:meta])* $f:ident -> $t:ty = $name:literal, |$v:ident| $body:expr; )*) => {
        impl Config {
            $(
                $(#[$doc])*
                pub fn $f(&self) -> $t {
                    #[allow(unused_variables)]
                    let $v: String = self.value($name);
                    $body
                }
            )*
        }
        /// The parameters read by this group's accessors.
        #[cfg(test)]
        pub(super) const $group: &[&str] = &[$($name),*];
    };
}

/// Every group's parameters.
#[cfg(test)]
pub(super) const READ_BY_ACCESSORS: &[&[&str]] = &[
    NET,
    TLS,
    PROCESS,
    REPLICATION,
    PERSISTENCE,
    KEYSPACE,
    SCRIPTING_ACL,
];

/// A canonical integer, or `default` if it does not parse (it always does: the table checked
/// it).
fn int<T: std::str::FromStr>(v: &str, default: T) -> T {
    v.parse().unwrap_or(default)
}

/// `None` for an empty value.
fn non_empty(v: String) -> Option<String> {
    (!v.is_empty()).then_some(v)
}

/// `enable-debug-command`, `enable-protected-configs`: Redis's no / yes / local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allow {
    No,
    Yes,
    /// Only clients on loopback or the unix socket.
    Local,
}

impl Allow {
    fn parse(v: &str) -> Allow {
        match v {
            "yes" => Allow::Yes,
            "local" => Allow::Local,
            _ => Allow::No,
        }
    }

    /// Allowed for a client (`local`: on loopback or the unix socket)?
    pub fn allows(self, local: bool) -> bool {
        match self {
            Allow::Yes => true,
            Allow::Local => local,
            Allow::No => false,
        }
    }
}

/// `tls-auth-clients`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsAuthClients {
    No,
    Yes,
    Optional,
}

/// `supervised`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Supervised {
    No,
    Upstart,
    Systemd,
    Auto,
}

/// `repl-diskless-load`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplDisklessLoad {
    Disabled,
    OnEmptyDb,
    Swapdb,
}

/// `propagation-error-behavior`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropagationErrorBehavior {
    Ignore,
    Panic,
    PanicOnReplicas,
}

impl PropagationErrorBehavior {
    /// The CONFIG name of the value.
    pub fn name(self) -> &'static str {
        match self {
            PropagationErrorBehavior::Ignore => "ignore",
            PropagationErrorBehavior::Panic => "panic",
            PropagationErrorBehavior::PanicOnReplicas => "panic-on-replicas",
        }
    }
}

/// `maxmemory-policy`, in Redis's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxmemoryPolicy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    NoEviction,
}

impl MaxmemoryPolicy {
    const ALL: [(MaxmemoryPolicy, &'static str); 8] = [
        (MaxmemoryPolicy::VolatileLru, "volatile-lru"),
        (MaxmemoryPolicy::VolatileLfu, "volatile-lfu"),
        (MaxmemoryPolicy::VolatileRandom, "volatile-random"),
        (MaxmemoryPolicy::VolatileTtl, "volatile-ttl"),
        (MaxmemoryPolicy::AllkeysLru, "allkeys-lru"),
        (MaxmemoryPolicy::AllkeysLfu, "allkeys-lfu"),
        (MaxmemoryPolicy::AllkeysRandom, "allkeys-random"),
        (MaxmemoryPolicy::NoEviction, "noeviction"),
    ];

    fn parse(v: &str) -> MaxmemoryPolicy {
        Self::ALL
            .iter()
            .find(|(_, n)| *n == v)
            .map_or(MaxmemoryPolicy::NoEviction, |(p, _)| *p)
    }

    /// The CONFIG name of the policy (INFO's `maxmemory_policy`).
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("noeviction", |(_, n)| n)
    }

    /// Does it evict by LRU or LFU (and so need per-object access data)?
    pub fn by_access(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::VolatileLru
                | MaxmemoryPolicy::VolatileLfu
                | MaxmemoryPolicy::AllkeysLru
                | MaxmemoryPolicy::AllkeysLfu
        )
    }
}

accessors! { NET:
    /// `port`: the RESP port (0: none).
    port -> u16 = "port", |v| int(&v, 6379);
    /// `bind`: the addresses to listen on, space separated.
    bind -> String = "bind", |v| v;
    /// `tcp-backlog`: the listen() backlog.
    tcp_backlog -> i32 = "tcp-backlog", |v| int(&v, 511);
    /// `unixsocket`: the unix socket path (empty: none).
    unixsocket -> String = "unixsocket", |v| v;
    /// `unixsocketperm`: the unix socket's permissions (0: as created).
    unixsocketperm -> u32 = "unixsocketperm", |v| u32::from_str_radix(&v, 8).unwrap_or(0);
    /// `memcached_port`: the memcache protocol port (0: none).
    memcached_port -> u16 = "memcached_port", |v| int(&v, 0);
    /// `memcached_max_item_size`: the largest memcache item value (memcached's `-I`).
    memcached_max_item_size -> usize = "memcached_max_item_size",
        |v| super::parse_memory(&v).unwrap_or(1024 * 1024) as usize;
    /// `admin_port`: the operators' port (0: none).
    admin_port -> u16 = "admin_port", |v| int(&v, 0);
    /// `admin_bind`: the admin port's addresses (`None`: those of `bind`).
    admin_bind -> Option<String> = "admin_bind", |v| non_empty(v);
    /// `admin_nopass`: admin port connections need no password.
    admin_nopass -> bool = "admin_nopass", |v| v == "yes";
    /// `primary_port_http_enabled`: the main port also serves HTTP.
    primary_port_http_enabled -> bool = "primary_port_http_enabled", |v| v == "yes";
    /// `http_admin_console`: the HTML console is served at `/`.
    http_admin_console -> bool = "http_admin_console", |v| v == "yes";
    /// `http_metrics_nopass`: `/metrics` needs no password.
    http_metrics_nopass -> bool = "http_metrics_nopass", |v| v == "yes";
}

accessors! { TLS:
    /// `tls-port`: the TLS port (0: none).
    tls_port -> u16 = "tls-port", |v| int(&v, 0);
    /// Dragonfly's `tls`: the main, memcache and admin ports speak TLS.
    tls_on_all_ports -> bool = "tls", |v| v == "yes";
    /// `no_tls_on_admin_port`: with `tls`, the admin port stays plain.
    no_tls_on_admin_port -> bool = "no_tls_on_admin_port", |v| v == "yes";
    /// `tls-replication`: a replica's link to its primary uses TLS.
    tls_replication -> bool = "tls-replication", |v| v == "yes";
    /// `tls-cluster`: MIGRATE's links use TLS.
    tls_cluster -> bool = "tls-cluster", |v| v == "yes";
    /// `tls-cert-file`.
    tls_cert_file -> String = "tls-cert-file", |v| v;
    /// `tls-key-file`.
    tls_key_file -> String = "tls-key-file", |v| v;
    /// `tls-key-file-pass`.
    tls_key_file_pass -> String = "tls-key-file-pass", |v| v;
    /// `tls-client-cert-file` (empty: `tls-cert-file`).
    tls_client_cert_file -> String = "tls-client-cert-file", |v| v;
    /// `tls-client-key-file`.
    tls_client_key_file -> String = "tls-client-key-file", |v| v;
    /// `tls-client-key-file-pass`.
    tls_client_key_file_pass -> String = "tls-client-key-file-pass", |v| v;
    /// `tls-dh-params-file`.
    tls_dh_params_file -> String = "tls-dh-params-file", |v| v;
    /// `tls-ca-cert-file`.
    tls_ca_cert_file -> String = "tls-ca-cert-file", |v| v;
    /// `tls-ca-cert-dir`.
    tls_ca_cert_dir -> String = "tls-ca-cert-dir", |v| v;
    /// `tls-auth-clients`.
    tls_auth_clients -> TlsAuthClients = "tls-auth-clients", |v| match v.as_str() {
        "no" => TlsAuthClients::No,
        "optional" => TlsAuthClients::Optional,
        _ => TlsAuthClients::Yes,
    };
    /// `tls-protocols`: space-separated names (empty: all).
    tls_protocols -> String = "tls-protocols", |v| v;
    /// `tls-ciphers`: TLS 1.2 suites.
    tls_ciphers -> String = "tls-ciphers", |v| v;
    /// `tls-ciphersuites`: TLS 1.3 suites.
    tls_ciphersuites -> String = "tls-ciphersuites", |v| v;
    /// `tls-prefer-server-ciphers`.
    tls_prefer_server_ciphers -> bool = "tls-prefer-server-ciphers", |v| v == "yes";
    /// `tls-session-caching`.
    tls_session_caching -> bool = "tls-session-caching", |v| v == "yes";
    /// `tls-session-cache-size`: sessions kept.
    tls_session_cache_size -> usize = "tls-session-cache-size", |v| int(&v, 20 * 1024);
    /// `tls-session-cache-timeout`: seconds a session can be resumed.
    tls_session_cache_timeout -> u64 = "tls-session-cache-timeout", |v| int(&v, 300);
}

accessors! { PROCESS:
    /// `loglevel` (`None`: not one the log knows).
    loglevel -> Option<crate::log::Level> = "loglevel", |v| crate::log::Level::parse(&v);
    /// `logfile` (`None`: standard output).
    logfile -> Option<String> = "logfile", |v| non_empty(v);
    /// `daemonize`.
    daemonize -> bool = "daemonize", |v| v == "yes";
    /// `supervised`.
    supervised -> Supervised = "supervised", |v| match v.as_str() {
        "upstart" => Supervised::Upstart,
        "systemd" => Supervised::Systemd,
        "auto" => Supervised::Auto,
        _ => Supervised::No,
    };
    /// `pidfile` (empty: none, or Redis's default path when daemonized).
    pidfile -> String = "pidfile", |v| v;
    /// `always-show-logo`.
    always_show_logo -> bool = "always-show-logo", |v| v == "yes";
    /// `disable-thp`.
    disable_thp -> bool = "disable-thp", |v| v == "yes";
    /// `jemalloc-bg-thread`.
    jemalloc_bg_thread -> bool = "jemalloc-bg-thread", |v| v == "yes";
    /// `oom-score-adj` (process::apply_oom_score_adj parses it).
    oom_score_adj -> String = "oom-score-adj", |v| v;
    /// `oom-score-adj-values` (process::apply_oom_score_adj parses it).
    oom_score_adj_values -> String = "oom-score-adj-values", |v| v;
    /// `pin_threads`.
    pin_threads -> bool = "pin_threads", |v| v == "yes";
    /// `shard_sched_batch` (`None`: auto).
    shard_sched_batch -> Option<bool> = "shard_sched_batch", |v| match v.as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    };
    /// `shutdown-on-sigint`: the words (`default`, or some of save nosave now force).
    shutdown_on_sigint -> String = "shutdown-on-sigint", |v| v;
    /// `shutdown-on-sigterm`: as `shutdown-on-sigint`.
    shutdown_on_sigterm -> String = "shutdown-on-sigterm", |v| v;
    /// `shutdown-timeout`: seconds a shutdown waits for lagging replicas.
    shutdown_timeout_secs -> u64 = "shutdown-timeout", |v| int(&v, 10);
    /// `enable-debug-command`.
    enable_debug_command -> Allow = "enable-debug-command", |v| Allow::parse(&v);
    /// `enable-protected-configs`.
    enable_protected_configs -> Allow = "enable-protected-configs", |v| Allow::parse(&v);
}

accessors! { REPLICATION:
    /// `replicaof` is set (a replica at start-up).
    has_replicaof -> bool = "replicaof", |v| !v.is_empty();
    /// `replicaof`: the primary to follow at start-up.
    replicaof -> Option<(String, u16)> = "replicaof", |v| {
        let (h, p) = v.split_once(' ')?;
        Some((h.to_string(), p.parse::<u16>().ok()?))
    };
    /// `masterauth` (`None`: no AUTH).
    masterauth -> Option<String> = "masterauth", |v| non_empty(v);
    /// `masteruser` (`None`: AUTH with the password alone).
    masteruser -> Option<String> = "masteruser", |v| non_empty(v);
    /// `repl-timeout`, at least a second.
    repl_timeout -> std::time::Duration = "repl-timeout",
        |v| std::time::Duration::from_secs(int::<u64>(&v, 60).max(1));
    /// `repl-ping-replica-period`: seconds (not clamped).
    repl_ping_replica_period_secs -> u64 = "repl-ping-replica-period", |v| int(&v, 10);
    /// `repl-backlog-size` in bytes: the primary's backlog, and the floor of a replica
    /// connection's output limit.
    repl_backlog_size -> usize = "repl-backlog-size", |v| int(&v, 1 << 20);
    /// `repl-backlog-ttl`: seconds (0: never freed).
    repl_backlog_ttl_secs -> u64 = "repl-backlog-ttl", |v| int(&v, 3600);
    /// `repl-diskless-sync`.
    repl_diskless_sync -> bool = "repl-diskless-sync", |v| v == "yes";
    /// `repl-diskless-sync-delay`: seconds.
    repl_diskless_sync_delay_secs -> u64 = "repl-diskless-sync-delay", |v| int(&v, 0);
    /// `repl-diskless-sync-max-replicas` (0: no limit).
    repl_diskless_sync_max_replicas -> usize = "repl-diskless-sync-max-replicas", |v| int(&v, 0);
    /// `repl-diskless-load`.
    repl_diskless_load -> ReplDisklessLoad = "repl-diskless-load", |v| match v.as_str() {
        "swapdb" => ReplDisklessLoad::Swapdb,
        "on-empty-db" => ReplDisklessLoad::OnEmptyDb,
        _ => ReplDisklessLoad::Disabled,
    };
    /// `repl-disable-tcp-nodelay`.
    repl_disable_tcp_nodelay -> bool = "repl-disable-tcp-nodelay", |v| v == "yes";
    /// `replica-read-only`.
    replica_read_only -> bool = "replica-read-only", |v| v == "yes";
    /// `replica-serve-stale-data`.
    replica_serve_stale_data -> bool = "replica-serve-stale-data", |v| v == "yes";
    /// `replica-priority`.
    replica_priority -> i64 = "replica-priority", |v| int(&v, 100);
    /// `propagation-error-behavior`.
    propagation_error_behavior -> PropagationErrorBehavior = "propagation-error-behavior",
        |v| match v.as_str() {
            "panic" => PropagationErrorBehavior::Panic,
            "panic-on-replicas" => PropagationErrorBehavior::PanicOnReplicas,
            _ => PropagationErrorBehavior::Ignore,
        };
}

accessors! { PERSISTENCE:
    /// `dbfilename` as configured (empty: `dump`).
    dbfilename -> String = "dbfilename", |v| v;
    /// `save`: the save points as (seconds, changes).
    save_points -> Vec<(u64, u64)> = "save", |v| {
        let w: Vec<u64> = v.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        w.chunks_exact(2).map(|p| (p[0], p[1])).collect()
    };
    /// `save` has save points.
    has_save_points -> bool = "save", |v| !v.trim().is_empty();
    /// `stop-writes-on-bgsave-error`.
    stop_writes_on_bgsave_error -> bool = "stop-writes-on-bgsave-error", |v| v == "yes";
    /// `rdbcompression`.
    rdbcompression -> bool = "rdbcompression", |v| v == "yes";
    /// `rdbchecksum`.
    rdbchecksum -> bool = "rdbchecksum", |v| v == "yes";
    /// `rdb-save-incremental-fsync`.
    rdb_save_incremental_fsync -> bool = "rdb-save-incremental-fsync", |v| v == "yes";
    /// `rdb-key-save-delay`: per key, microseconds (negative: nanoseconds).
    rdb_key_save_delay -> i64 = "rdb-key-save-delay", |v| int(&v, 0);
    /// `key-load-delay`: per key, microseconds (negative: nanoseconds).
    key_load_delay -> i64 = "key-load-delay", |v| int(&v, 0);
    /// `snapshot_cron` (empty: none).
    snapshot_cron -> String = "snapshot_cron", |v| v;
}

accessors! { KEYSPACE:
    /// `maxmemory-policy`.
    maxmemory_policy -> MaxmemoryPolicy = "maxmemory-policy", |v| MaxmemoryPolicy::parse(&v);
    /// `lazyfree-lazy-expire`: keys found expired are propagated as UNLINK, not DEL.
    lazyfree_lazy_expire -> bool = "lazyfree-lazy-expire", |v| v == "yes";
}

accessors! { SCRIPTING_ACL:
    /// `lua-enable-deprecated-api`: scripts get setfenv, getfenv and newproxy.
    lua_enable_deprecated_api -> bool = "lua-enable-deprecated-api", |v| v == "yes";
    /// `aclfile` (empty: none).
    aclfile -> String = "aclfile", |v| v;
    /// `acllog-max-len`.
    acllog_max_len -> usize = "acllog-max-len", |v| int(&v, 128);
}

#[cfg(test)]
mod tests {
    use super::super::{find_param, Kind, PARAMS};
    use super::*;

    #[test]
    fn accessors_read_defaults_and_config_set() {
        let c = Config::new();
        assert_eq!(c.port(), 6379);
        assert_eq!(c.tcp_backlog(), 511);
        assert_eq!(c.admin_bind(), None);
        assert_eq!(c.repl_timeout(), std::time::Duration::from_secs(60));
        assert_eq!(c.repl_diskless_load(), ReplDisklessLoad::Disabled);
        assert_eq!(c.maxmemory_policy(), MaxmemoryPolicy::NoEviction);
        assert_eq!(
            c.propagation_error_behavior(),
            PropagationErrorBehavior::Ignore
        );
        assert_eq!(c.enable_debug_command(), Allow::No);
        assert_eq!(c.supervised(), Supervised::No);
        assert_eq!(c.tls_auth_clients(), TlsAuthClients::Yes);
        assert_eq!(c.shard_sched_batch(), None);
        assert_eq!(c.replicaof(), None);
        assert!(!c.has_replicaof());
        assert_eq!(c.save_points(), vec![(3600, 1), (300, 100), (60, 10000)]);
        assert!(c.has_save_points());
        assert!(c.replica_read_only() && c.rdbcompression() && !c.daemonize());
        c.set("repl-diskless-load", "swapdb").unwrap();
        assert_eq!(c.repl_diskless_load(), ReplDisklessLoad::Swapdb);
        c.set("propagation-error-behavior", "panic-on-replicas")
            .unwrap();
        assert_eq!(c.propagation_error_behavior().name(), "panic-on-replicas");
        c.set("save", "").unwrap();
        assert!(c.save_points().is_empty() && !c.has_save_points());
        c.set("masterauth", "pw").unwrap();
        assert_eq!(c.masterauth().as_deref(), Some("pw"));
        assert_eq!(c.masteruser(), None);
    }

    /// The enums know every value the table accepts.
    #[test]
    fn enums_cover_their_parameters() {
        let opts = |name| match find_param(name).map(|p| p.kind) {
            Some(Kind::Enum(o)) => o,
            _ => panic!("{name} is not an enum"),
        };
        for o in opts("maxmemory-policy") {
            assert_eq!(MaxmemoryPolicy::parse(o).name(), *o);
            assert_eq!(
                MaxmemoryPolicy::parse(o).by_access(),
                o.ends_with("lru") || o.ends_with("lfu")
            );
        }
        let c = Config::new();
        for o in opts("propagation-error-behavior") {
            c.set("propagation-error-behavior", o).unwrap();
            assert_eq!(c.propagation_error_behavior().name(), *o);
        }
        let mut seen = Vec::new();
        for o in opts("repl-diskless-load") {
            c.set("repl-diskless-load", o).unwrap();
            assert!(!seen.contains(&c.repl_diskless_load()), "{o}");
            seen.push(c.repl_diskless_load());
        }
        assert_eq!(opts("tls-auth-clients").len(), 3);
        assert_eq!(opts("supervised").len(), 4);
        assert_eq!(opts("enable-debug-command"), ["no", "yes", "local"]);
    }

    /// `find_param` answers every name and alias in any case, with dashes or underscores.
    #[test]
    fn find_param_takes_every_spelling() {
        for p in PARAMS {
            for n in std::iter::once(p.name).chain(p.aliases.iter().copied()) {
                let upper = n.to_ascii_uppercase();
                let swapped: String = n
                    .chars()
                    .map(|c| match c {
                        '-' => '_',
                        '_' => '-',
                        c => c,
                    })
                    .collect();
                for spelling in [n.to_string(), upper, swapped, format!("--{n}")] {
                    let found = find_param(&spelling).map(|f| f.name);
                    assert_eq!(found, Some(p.name), "{spelling}");
                }
            }
        }
        assert!(find_param("port-").is_none() && find_param("por").is_none());
    }
}
