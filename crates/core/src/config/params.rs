//! The parameter table: every flag, config-file directive and CONFIG parameter, declared once.
//!
//! Rules for features damselfly does not have yet: a *switch* that turns such a feature on
//! (`appendonly yes`, `maxmemory-policy allkeys-lru`) is refused (see `NOT_IMPLEMENTED` in
//! `mod.rs`); a *knob* of a feature that is off (`rdbcompression`, `repl-diskless-sync-delay`,
//! `appendfsync`) is accepted, shown by CONFIG GET and kept by CONFIG REWRITE, because it cannot
//! change behaviour until the feature exists, and then it is honoured.
//!
//! No parameter is accepted and ignored: each has a [`Status`], and the test at the end of this
//! file holds the whole table to it. *Read* is found from the code, not declared: a typed
//! accessor of `access.rs` reads the parameter (each `accessors!` group lists its names, and an
//! accessor nobody calls is a dead-code error), or the configuration mirrors it
//! (`Config::mirror_own`), or an owner's hook `apply`s it. *Refused* is a row of
//! `NOT_IMPLEMENTED`. Everything else must be a *knob* listed in [`KNOBS`] with the one-line
//! reason that accepting it hides no behaviour; a knob that gets read must leave the list.

/// Validates a multi-argument value (`save 900 1 300 10`, `client-output-buffer-limit normal 0 0
/// 0`): gets the current canonical value and the arguments, returns the new canonical value or
/// Redis's reason.
pub type WordsCheck = fn(current: &str, args: &[&str]) -> Result<String, String>;

#[derive(Clone, Copy, Debug)]
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
    /// One string argument.
    Str,
    Enum(&'static [&'static str]),
    /// An octal integer at most this large (`unixsocketperm 700`).
    Octal(u32),
    /// Several arguments (a config-file line may carry any number; one CONFIG SET value is split
    /// on spaces), checked and canonicalised by the function.
    Words(WordsCheck),
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

/// Every parameter. Defaults marked "" for proactor_threads mean "number of CPUs".
pub static PARAMS: &[Param] = &[
    p(
        "port",
        &[],
        Kind::Int(0, 65535),
        "6379",
        true,
        "Redis protocol port",
    ),
    p(
        "bind",
        &[],
        Kind::Words(words::bind),
        "0.0.0.0",
        true,
        "addresses to listen on, space separated (e.g. 'localhost' or '127.0.0.1 ::1')",
    ),
    p("requirepass", &[], Kind::Str, "", true, "password for AUTH"),
    p(
        "maxmemory",
        &[],
        Kind::Mem,
        "0",
        true,
        "memory limit in human-readable bytes (e.g. 2gb; 0: none); over it, commands that may grow memory get -OOM (noeviction)",
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
        "snapshot file name (.rdb added when it has no extension; {timestamp} becomes the save time)",
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
        "Memcached protocol (text and meta) port; 0 disables it",
    ),
    p(
        "admin_port",
        &["admin-port"],
        Kind::Int(0, 65535),
        "0",
        false,
        "operators' port (RESP and HTTP): not counted against maxclients; 0 disables it",
    ),
    p(
        "admin_bind",
        &["admin-bind"],
        Kind::Str,
        "",
        false,
        "addresses the admin port listens on (empty: those of --bind)",
    ),
    p(
        "admin_nopass",
        &["admin-nopass"],
        Kind::Bool,
        "no",
        false,
        "admin port connections need no password (RESP AUTH or HTTP authentication)",
    ),
    p(
        "memcached_max_item_size",
        &["memcached-max-item-size"],
        Kind::MemAtLeast(1024),
        "1048576",
        false,
        "largest memcache item value, as memcached's -I (larger ones: SERVER_ERROR object too large for cache)",
    ),
    p(
        "cache_mode",
        &["cache-mode"],
        Kind::Bool,
        "no",
        true,
        "evict keys before maxmemory is reached, by access rank within the table's buckets (never -OOM)",
    ),
    p(
        "snapshot_cron",
        &["snapshot-cron"],
        Kind::Words(words::cron),
        "",
        true,
        "cron schedule (5 fields, local time) for background snapshots, e.g. \"*/5 * * * *\"",
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
        "http_metrics_nopass",
        &["http-metrics-nopass"],
        Kind::Bool,
        "no",
        true,
        "with a password set, still serve /metrics without HTTP authentication (for Prometheus scrapers)",
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
        Kind::Words(words::save),
        "3600 1 300 100 60 10000",
        true,
        "save points: \"<seconds> <changes> ...\" (a background save once both are reached; Redis's defaults); '' for none",
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
        Kind::Enum(&["debug", "verbose", "notice", "warning"]),
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
        "lua-enable-deprecated-api",
        &[],
        Kind::Bool,
        "no",
        false,
        "scripts may use setfenv, getfenv and newproxy",
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
        "latency-tracking-info-percentiles",
        &[],
        Kind::Words(words::latency_tracking_info_percentiles),
        "50 99 99.9",
        true,
        "percentiles of INFO latencystats",
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
        Kind::Words(words::keyspace_events),
        "",
        true,
        "keyspace notification classes, as Redis: K E g $ l s h z x e t m d n A ('': off)",
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
    // ---- Process and start-up (honoured) ----
    p(
        "daemonize",
        &[],
        Kind::Bool,
        "no",
        false,
        "detach into the background at start-up (stdout/stderr go to /dev/null unless logfile)",
    ),
    p(
        "pidfile",
        &[],
        Kind::Str,
        "",
        false,
        "write the process id here at start-up, remove it at shutdown",
    ),
    p(
        "always-show-logo",
        &[],
        Kind::Bool,
        "no",
        false,
        "log the ASCII logo (with port and PID) at start-up",
    ),
    // TLS (net/tls.rs). Certificates, keys and policies can change at runtime: CONFIG SET
    // rebuilds the configuration new connections take (all or nothing).
    p(
        "tls-port",
        &[],
        Kind::Int(0, 65535),
        "0",
        true,
        "TLS port (RESP and HTTPS); 0 disables it",
    ),
    p(
        "tls",
        &[],
        Kind::Bool,
        "no",
        false,
        "Dragonfly's switch: the main, memcached and admin ports speak TLS",
    ),
    p(
        "no_tls_on_admin_port",
        &[],
        Kind::Bool,
        "no",
        false,
        "with --tls, keep the admin port plain",
    ),
    p(
        "tls-cert-file",
        &["tls_cert_file"],
        Kind::Str,
        "",
        true,
        "server certificate (PEM, chain allowed)",
    ),
    p(
        "tls-key-file",
        &["tls_key_file"],
        Kind::Str,
        "",
        true,
        "server private key (PEM)",
    ),
    p(
        "tls-key-file-pass",
        &[],
        Kind::Str,
        "",
        true,
        "passphrase of an encrypted tls-key-file (refused: give an unencrypted key)",
    ),
    p(
        "tls-client-cert-file",
        &[],
        Kind::Str,
        "",
        true,
        "certificate presented on outgoing TLS links (default: tls-cert-file)",
    ),
    p(
        "tls-client-key-file",
        &[],
        Kind::Str,
        "",
        true,
        "private key of tls-client-cert-file",
    ),
    p(
        "tls-client-key-file-pass",
        &[],
        Kind::Str,
        "",
        true,
        "passphrase of an encrypted tls-client-key-file (refused: give an unencrypted key)",
    ),
    p(
        "tls-dh-params-file",
        &[],
        Kind::Str,
        "",
        true,
        "DH parameters: checked, unused (key exchange is always ECDHE)",
    ),
    p(
        "tls-ca-cert-file",
        &["tls_ca_cert_file"],
        Kind::Str,
        "",
        true,
        "CA certificates that client and primary certificates must chain to",
    ),
    p(
        "tls-ca-cert-dir",
        &["tls_ca_cert_dir"],
        Kind::Str,
        "",
        true,
        "directory of CA certificate files",
    ),
    p(
        "tls-auth-clients",
        &[],
        Kind::Enum(&["no", "yes", "optional"]),
        "yes",
        true,
        "require (yes), accept (optional) or ignore (no) client certificates",
    ),
    p(
        "tls-protocols",
        &[],
        Kind::Str,
        "",
        true,
        "allowed versions (TLSv1.2 TLSv1.3); empty for both",
    ),
    p(
        "tls-ciphers",
        &[],
        Kind::Str,
        "",
        true,
        "TLS 1.2 suites, colon-separated OpenSSL names or DEFAULT",
    ),
    p(
        "tls-ciphersuites",
        &[],
        Kind::Str,
        "",
        true,
        "TLS 1.3 suites, colon-separated",
    ),
    p(
        "tls-prefer-server-ciphers",
        &[],
        Kind::Bool,
        "no",
        true,
        "choose the suite by our order, not the client's",
    ),
    p(
        "tls-session-caching",
        &[],
        Kind::Bool,
        "yes",
        true,
        "let clients resume TLS sessions",
    ),
    p(
        "tls-session-cache-size",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "20480",
        true,
        "sessions kept for resumption",
    ),
    p(
        "tls-session-cache-timeout",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "300",
        true,
        "seconds a session can be resumed",
    ),
    p(
        "tls-replication",
        &["tls_replication"],
        Kind::Bool,
        "no",
        true,
        "a replica's link to its primary uses TLS",
    ),
    p(
        "tls-cluster",
        &[],
        Kind::Bool,
        "no",
        true,
        "MIGRATE's links use TLS (cluster mode itself is not implemented)",
    ),
    p(
        "unixsocket",
        &[],
        Kind::Str,
        "",
        false,
        "also accept connections on this unix socket path",
    ),
    p(
        "unixsocketperm",
        &[],
        Kind::Octal(0o777),
        "0",
        false,
        "permissions of the unix socket (octal; 0 = leave as created)",
    ),
    p(
        "tcp-backlog",
        &["tcp_backlog"],
        Kind::Int(0, i32::MAX as i64),
        "511",
        false,
        "listen() backlog",
    ),
    p(
        "disable-thp",
        &[],
        Kind::Bool,
        "yes",
        false,
        "turn transparent huge pages off for this process (prctl PR_SET_THP_DISABLE)",
    ),
    p(
        "jemalloc-bg-thread",
        &[],
        Kind::Bool,
        "yes",
        true,
        "let jemalloc purge freed pages from a background thread",
    ),
    p(
        "dynamic-hz",
        &[],
        Kind::Bool,
        "yes",
        true,
        "raise the background tick rate with the number of clients (up to 500)",
    ),
    p(
        "enable-debug-command",
        &[],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
        false,
        "allow DEBUG (local: from loopback and unix-socket clients only)",
    ),
    p(
        "enable-protected-configs",
        &[],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
        false,
        "allow CONFIG SET of protected parameters (dir, dbfilename, ...)",
    ),
    p(
        "enable-module-command",
        &[],
        Kind::Enum(&["no", "yes", "local"]),
        "no",
        false,
        "allow MODULE (damselfly loads no modules: MODULE is refused either way)",
    ),
    p(
        "set-proc-title",
        &[],
        Kind::Bool,
        "yes",
        false,
        "cosmetic: the process keeps its own name 'damselfly' (threads are named shard-N)",
    ),
    p(
        "proc-title-template",
        &[],
        Kind::Str,
        "{title} {listen-addr} {server-mode}",
        true,
        "cosmetic: see set-proc-title",
    ),
    p(
        "supervised",
        &[],
        Kind::Enum(&["upstart", "systemd", "auto", "no"]),
        "no",
        false,
        "tell systemd (sd_notify) or upstart (SIGSTOP) when ready and stopping: process/supervise.rs",
    ),
    p(
        "oom-score-adj",
        &[],
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
        true,
        "adjust the OOM killer score of the process by its role (process::apply_oom_score_adj)",
    ),
    p(
        "shutdown-timeout",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "10",
        true,
        "seconds a shutdown without NOW waits for lagging replicas, writes paused (0: none)",
    ),
    p(
        "shutdown-on-sigint",
        &[],
        Kind::Words(words::shutdown_on_sig),
        "default",
        true,
        "what SIGINT's shutdown does: default (save when save points are set), save, nosave, now, force",
    ),
    p(
        "shutdown-on-sigterm",
        &[],
        Kind::Words(words::shutdown_on_sig),
        "default",
        true,
        "what SIGTERM's shutdown does: default (save when save points are set), save, nosave, now, force",
    ),
    p(
        "oom-score-adj-values",
        &[],
        Kind::Words(words::oom_score_adj_values),
        "0 200 800",
        true,
        "oom-score-adj's values: primary, replica, background child",
    ),
    p(
        "latency-monitor-threshold",
        &[],
        Kind::Int(0, i64::MAX),
        "0",
        true,
        "latency monitor threshold (ms); 0 = off",
    ),
    p(
        "client-output-buffer-limit",
        &["client_output_buffer_limit"],
        Kind::Words(words::client_output_buffer_limit),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        true,
        "per-class output buffer limits <class> <hard> <soft> <soft seconds> (normal enforced; replica and pubsub stored until those clients exist)",
    ),
    p(
        "replicaof",
        &["slaveof"],
        Kind::Words(words::replicaof),
        "",
        false,
        "replicate from <host> <port> at start-up (REPLICAOF at run time)",
    ),
    p(
        "masterauth",
        &[],
        Kind::Str,
        "",
        true,
        "password the replication link sends to the primary (AUTH)",
    ),
    p(
        "masteruser",
        &[],
        Kind::Str,
        "",
        true,
        "user name the replication link sends with masterauth",
    ),
    p(
        "repl-ping-replica-period",
        &["repl-ping-slave-period"],
        Kind::Int(1, i32::MAX as i64),
        "10",
        true,
        "seconds between PINGs a primary sends in its replication stream",
    ),
    p(
        "repl-backlog-ttl",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "3600",
        true,
        "seconds without replicas after which a primary frees its backlog (0: never)",
    ),
    p(
        "min-replicas-to-write",
        &["min-slaves-to-write"],
        Kind::Int(0, i32::MAX as i64),
        "0",
        true,
        "refuse writes (-NOREPLICAS) unless this many replicas acknowledged within min-replicas-max-lag",
    ),
    p(
        "min-replicas-max-lag",
        &["min-slaves-max-lag"],
        Kind::Int(0, i32::MAX as i64),
        "10",
        true,
        "seconds since a replica's last acknowledgement for it to count in min-replicas-to-write",
    ),
    // ---- Knobs of features that are off or not built yet (see the module comment) ----
    p(
        "stop-writes-on-bgsave-error",
        &[],
        Kind::Bool,
        "yes",
        true,
        "refuse writes (MISCONF) after a failed background save while save points are set",
    ),
    p(
        "rdb-key-save-delay",
        &[],
        Kind::Int(i64::MIN, i64::MAX),
        "0",
        true,
        "debugging: sleep per key while saving (microseconds; negative: nanoseconds)",
    ),
    p(
        "loading-process-events-interval-bytes",
        &[],
        Kind::Int(1024, i64::MAX),
        "2097152",
        true,
        "accepted for compatibility (clients are always served while a snapshot loads)",
    ),
    p(
        "key-load-delay",
        &[],
        Kind::Int(i64::MIN, i64::MAX),
        "0",
        true,
        "debugging: sleep per key while loading a snapshot (microseconds; negative: nanoseconds)",
    ),
    p(
        "rdbcompression",
        &[],
        Kind::Bool,
        "yes",
        true,
        "LZF-compress long strings in snapshots and DUMP payloads",
    ),
    p("rdbchecksum", &[], Kind::Bool, "yes", true, "end snapshots with a CRC64"),
    p(
        "rdb-del-sync-files",
        &[],
        Kind::Bool,
        "no",
        true,
        "snapshot knob",
    ),
    p(
        "rdb-save-incremental-fsync",
        &[],
        Kind::Bool,
        "yes",
        true,
        "fsync snapshot files every 32 MiB while writing them",
    ),
    p(
        "appendfilename",
        &[],
        Kind::Str,
        "appendonly.aof",
        false,
        "AOF knob",
    ),
    p(
        "appenddirname",
        &[],
        Kind::Str,
        "appendonlydir",
        false,
        "AOF knob",
    ),
    p(
        "no-appendfsync-on-rewrite",
        &[],
        Kind::Bool,
        "no",
        true,
        "AOF knob",
    ),
    p(
        "auto-aof-rewrite-percentage",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "100",
        true,
        "AOF knob",
    ),
    p(
        "auto-aof-rewrite-min-size",
        &[],
        Kind::Mem,
        "67108864",
        true,
        "AOF knob",
    ),
    p(
        "aof-load-truncated",
        &[],
        Kind::Bool,
        "yes",
        true,
        "AOF knob",
    ),
    p(
        "aof-use-rdb-preamble",
        &[],
        Kind::Bool,
        "yes",
        true,
        "AOF knob",
    ),
    p(
        "aof-timestamp-enabled",
        &[],
        Kind::Bool,
        "no",
        true,
        "AOF knob",
    ),
    p(
        "aof-rewrite-incremental-fsync",
        &[],
        Kind::Bool,
        "yes",
        true,
        "AOF knob",
    ),
    p(
        "replica-serve-stale-data",
        &["slave-serve-stale-data"],
        Kind::Bool,
        "yes",
        true,
        "replication knob",
    ),
    p(
        "replica-read-only",
        &["slave-read-only"],
        Kind::Bool,
        "yes",
        true,
        "replication knob",
    ),
    p(
        "repl-diskless-sync",
        &[],
        Kind::Bool,
        "yes",
        true,
        "replication knob",
    ),
    p(
        "repl-diskless-sync-delay",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "5",
        true,
        "replication knob",
    ),
    p(
        "repl-diskless-sync-max-replicas",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "0",
        true,
        "replication knob",
    ),
    p(
        "repl-diskless-load",
        &[],
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
        true,
        "replication knob",
    ),
    p(
        "repl-disable-tcp-nodelay",
        &[],
        Kind::Bool,
        "no",
        true,
        "a replica's connection to us sends without TCP_NODELAY (fewer, larger packets; more lag), set when it asks for SYNC/PSYNC",
    ),
    p(
        "replica-priority",
        &["slave-priority"],
        Kind::Int(0, i32::MAX as i64),
        "100",
        true,
        "replication knob",
    ),
    p(
        "replica-lazy-flush",
        &["slave-lazy-flush"],
        Kind::Bool,
        "no",
        true,
        "accepted: a full sync replaces the dataset at once either way (the old one is freed by its shards)",
    ),
    p(
        "repl-backlog-size",
        &[],
        Kind::Mem,
        "1048576",
        true,
        "replication knob",
    ),
    p(
        "repl-timeout",
        &[],
        Kind::Int(1, i32::MAX as i64),
        "60",
        true,
        "replication knob",
    ),
    p(
        "propagation-error-behavior",
        &[],
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
        true,
        "replication knob",
    ),
    p(
        "aclfile",
        &[],
        Kind::Str,
        "",
        false,
        "ACL file: users loaded at start-up and by ACL LOAD, written by ACL SAVE",
    ),
    p(
        "acl-pubsub-default",
        &[],
        Kind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
        true,
        "the channel permissions new ACL users start with",
    ),
    p(
        "acllog-max-len",
        &[],
        Kind::Int(0, i64::MAX),
        "128",
        true,
        "ACL LOG knob",
    ),
    p(
        "lazyfree-lazy-eviction",
        &[],
        Kind::Bool,
        "no",
        true,
        "eviction knob",
    ),
    p(
        "lazyfree-lazy-expire",
        &[],
        Kind::Bool,
        "no",
        true,
        "accepted: expired keys are freed inline either way",
    ),
    p(
        "lazyfree-lazy-server-del",
        &[],
        Kind::Bool,
        "no",
        true,
        "accepted: implicit deletes free inline either way",
    ),
    p(
        "tracking-table-max-keys",
        &[],
        Kind::Int(0, i64::MAX),
        "1000000",
        true,
        "client-side caching: the most keys the tracking tables remember (0: no limit); past it, keys are invalidated to make room",
    ),
    p(
        "maxmemory-clients",
        &[],
        Kind::Words(words::mem_or_percent),
        "0",
        true,
        "client eviction: the most memory all client connections together may hold (bytes, or N% of maxmemory; 0: no limit); over it the biggest clients are disconnected",
    ),
    p(
        "maxmemory-samples",
        &[],
        Kind::Int(1, 64),
        "5",
        true,
        "keys sampled per db and eviction round",
    ),
    p(
        "lfu-log-factor",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "10",
        true,
        "LFU counter growth",
    ),
    p(
        "lfu-decay-time",
        &[],
        Kind::Int(0, i32::MAX as i64),
        "1",
        true,
        "LFU counter decay period in minutes",
    ),
    p(
        "maxmemory-eviction-tenacity",
        &[],
        Kind::Int(0, 100),
        "10",
        true,
        "time one eviction call may take (Redis's scale; 100: no limit)",
    ),
    p(
        "hll-sparse-max-bytes",
        &[],
        Kind::Mem,
        "3000",
        true,
        "HyperLogLog knob",
    ),
    p(
        "stream-node-max-bytes",
        &[],
        Kind::Mem,
        "4096",
        true,
        "stream knob",
    ),
    p(
        "stream-node-max-entries",
        &[],
        Kind::Int(0, i64::MAX),
        "100",
        true,
        "stream knob",
    ),
];

/// Checks of the multi-argument parameters, with Redis's error texts.
mod words {
    /// `shutdown-on-sigint` / `shutdown-on-sigterm`: Redis's flags (`save`, `nosave`, `now`,
    /// `force`; `default` is none), shown back as Redis names the combination.
    pub fn shutdown_on_sig(_: &str, args: &[&str]) -> Result<String, String> {
        const NAMES: [&str; 5] = ["default", "save", "nosave", "now", "force"];
        let bad = || {
            format!(
                "argument(s) must be one of the following: {}",
                NAMES.join(", ")
            )
        };
        if args.is_empty() {
            return Err(bad());
        }
        let mut bits = 0u8;
        for a in args {
            let i = NAMES
                .iter()
                .position(|n| n.eq_ignore_ascii_case(a))
                .ok_or_else(bad)?;
            if i > 0 {
                bits |= 1 << (i - 1);
            }
        }
        if bits & 0b11 == 0b11 {
            return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
        }
        if bits == 0 {
            return Ok("default".into());
        }
        let names: Vec<&str> = (0..4)
            .filter(|i| bits & (1 << i) != 0)
            .map(|i| NAMES[i + 1])
            .collect();
        Ok(names.join(" "))
    }

    /// `notify-keyspace-events KEA`: Redis's classes, shown back in Redis's canonical order.
    pub fn keyspace_events(_: &str, args: &[&str]) -> Result<String, String> {
        let v = match args {
            [] => "",
            [v] => v,
            _ => return Err("wrong number of arguments".into()),
        };
        // The flag letters are checked and put in canonical order by their owner (a hook of
        // engine::notify).
        Ok(v.to_string())
    }

    /// `maxmemory-clients`: bytes (with Redis's suffixes) or a percentage of maxmemory (`10%`).
    pub fn mem_or_percent(_: &str, args: &[&str]) -> Result<String, String> {
        let [v] = args else {
            return Err("wrong number of arguments".into());
        };
        if let Some(n) = super::super::parse_memory(v) {
            if n > i64::MAX as u64 {
                return Err(format!(
                    "argument must be between -100 and {} inclusive",
                    i64::MAX
                ));
            }
            return Ok(n.to_string());
        }
        match v.strip_suffix('%').and_then(|p| p.parse::<u64>().ok()) {
            Some(p) if p <= 100 => Ok(format!("{p}%")),
            Some(_) => Err("percentage argument must be less or equal to 100".into()),
            None => Err("argument must be a memory or percent value".into()),
        }
    }

    /// `bind 127.0.0.1 -::1`: one or more addresses.
    pub fn bind(_: &str, args: &[&str]) -> Result<String, String> {
        if args.is_empty() || args.len() > 16 {
            return Err("wrong number of arguments".into());
        }
        Ok(args.join(" "))
    }

    /// `replicaof <host> <port>`, or `replicaof no one` / `""` for none.
    pub fn replicaof(_: &str, args: &[&str]) -> Result<String, String> {
        match args {
            [""] => Ok(String::new()),
            [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => {
                Ok(String::new())
            }
            [host, port] => match port.parse::<u16>() {
                Ok(p) if p > 0 => Ok(format!("{host} {p}")),
                _ => Err("Invalid master port".into()),
            },
            _ => Err("wrong number of arguments".into()),
        }
    }

    /// `save <seconds> <changes> [...]` or `save ""`.
    pub fn save(_: &str, args: &[&str]) -> Result<String, String> {
        if args.iter().all(|a| a.is_empty()) {
            return Ok(String::new());
        }
        let ok = args.len().is_multiple_of(2)
            && args
                .iter()
                .all(|a| a.parse::<u64>().is_ok_and(|v| v <= i32::MAX as u64));
        if !ok {
            return Err("Invalid save parameters".into());
        }
        Ok(args.join(" "))
    }

    /// `snapshot_cron "<min> <hour> <mday> <month> <wday>"`; empty for none.
    pub fn cron(_: &str, args: &[&str]) -> Result<String, String> {
        if args.iter().all(|a| a.is_empty()) {
            return Ok(String::new());
        }
        let expr = args.join(" ");
        // The expression is checked by its owner (a hook of persistence::cron).
        Ok(expr)
    }

    /// Numbers 0..=100 (Redis's `setConfigLatencyTrackingInfoPercentilesOutputOption`); an
    /// empty value is no percentile.
    pub fn latency_tracking_info_percentiles(_: &str, args: &[&str]) -> Result<String, String> {
        let mut out = Vec::new();
        for a in args.iter().filter(|a| !a.is_empty()) {
            match a.parse::<f64>() {
                Ok(v) if (0.0..=100.0).contains(&v) => out.push(crate::latency::percentile_name(v)),
                Ok(v) if v.is_finite() => return Err(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                        .into(),
                ),
                _ => return Err("Invalid latency-tracking-info-percentiles parameters".into()),
            }
        }
        Ok(out.join(" "))
    }

    /// `oom-score-adj-values <primary> <replica> <bg-child>`, each -2000..2000.
    pub fn oom_score_adj_values(_: &str, args: &[&str]) -> Result<String, String> {
        if args.len() != 3 {
            return Err("wrong number of arguments".into());
        }
        for a in args {
            match a.parse::<i64>() {
                Ok(v) if (-2000..=2000).contains(&v) => {}
                _ => {
                    return Err(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                            .into(),
                    )
                }
            }
        }
        Ok(args.join(" "))
    }

    /// `client-output-buffer-limit <class> <hard> <soft> <seconds> [...]`: the classes given
    /// replace theirs in the current value; canonical order normal, slave, pubsub.
    pub fn client_output_buffer_limit(current: &str, args: &[&str]) -> Result<String, String> {
        if args.is_empty() || !args.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let classes = ["normal", "slave", "pubsub"];
        let cur: Vec<&str> = current.split_whitespace().collect();
        let mut limits: Vec<[u64; 3]> = classes
            .iter()
            .map(|c| {
                cur.chunks(4)
                    .find(|g| g.len() == 4 && g[0] == *c)
                    .map(|g| [1, 2, 3].map(|i| g[i].parse().unwrap_or(0)))
                    .unwrap_or([0; 3])
            })
            .collect();
        for g in args.chunks(4) {
            let class = match g[0].to_ascii_lowercase().as_str() {
                "normal" => 0,
                "slave" | "replica" => 1,
                "pubsub" => 2,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    )
                }
            };
            let hard = super::super::parse_memory(g[1]);
            let soft = super::super::parse_memory(g[2]);
            let secs = g[3].parse::<u64>().ok();
            match (hard, soft, secs) {
                (Some(h), Some(s), Some(t)) => limits[class] = [h, s, t],
                _ => return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                ),
            }
        }
        Ok(classes
            .iter()
            .zip(&limits)
            .map(|(c, l)| format!("{c} {} {} {}", l[0], l[1], l[2]))
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// Redis directives damselfly does not have (yet), with the reason a config file naming them is
/// refused: clearer than "Bad directive" for a file written for redis-server. A name ending in
/// `*` covers every directive with that prefix.
pub static UNSUPPORTED: &[(&str, &str)] = &[
    ("repl-*", "this replication setting is not implemented yet"),
    ("loadmodule", "modules are not supported"),
    ("cluster-*", "cluster mode is not implemented yet"),
    (
        "io-threads",
        "damselfly's threads are set with proactor_threads (it is multi-threaded throughout)",
    ),
    (
        "io-threads-do-reads",
        "damselfly's threads are set with proactor_threads",
    ),
    (
        "activedefrag",
        "active defragmentation is not implemented yet",
    ),
    (
        "active-defrag-*",
        "active defragmentation is not implemented yet",
    ),
    ("lua-*", "this Lua setting is not implemented"),
    (
        "shutdown-timeout",
        "waiting for lagging replicas at shutdown is not implemented yet",
    ),
    (
        "sanitize-dump-payload",
        "DUMP/RESTORE are not implemented yet",
    ),
    ("ignore-warnings", "not applicable"),
];

/// Why `name` (lowercase) is refused, when it is a Redis directive damselfly does not have.
pub fn unsupported(name: &str) -> Option<&'static str> {
    UNSUPPORTED.iter().find_map(|(n, why)| {
        let hit = match n.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *n,
        };
        hit.then_some(*why)
    })
}

/// What the server does with a parameter's value. Every parameter has exactly one status, and
/// `tests::every_parameter_is_read_refused_or_a_knob` holds the table to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Its owner reads it: a typed accessor (`access.rs`), the configuration's own mirror
    /// (`Config::mirror_own`: atomics, `dir`, `loglevel`, the latency monitor) or an owner's
    /// `apply` hook (`hooks.rs`).
    Read,
    /// The values that need a missing feature are refused (`NOT_IMPLEMENTED` in `mod.rs`); the
    /// value it may keep is the feature being off.
    Refused,
    /// Accepted, checked, shown by CONFIG GET and kept by CONFIG REWRITE, read by nothing: why
    /// that is honest.
    Knob(&'static str),
}

/// The parameters accepted and read by nothing (`Status::Knob`), each with the reason that
/// accepting it hides no behaviour. A parameter that gets an owner leaves this list (the test
/// fails while it is on both).
pub static KNOBS: &[(&str, &str)] = &[
    (
        "list-compress-depth",
        "list nodes are never compressed: a memory trade-off, replies are the same",
    ),
    ("appendfsync", "appendonly yes is refused, so there is no AOF for it to shape"),
    (
        "lazyfree-lazy-user-del",
        "DEL frees inline; Redis frees in the background with it, DEL replies and propagates the same",
    ),
    (
        "lazyfree-lazy-user-flush",
        "flushes free inline either way; Redis's only other difference is no jemalloc purge after a flush that defaults to ASYNC (RSS timing)",
    ),
    (
        "activerehashing",
        "Dash tables grow by splitting segments: there is no rehash to run",
    ),
    (
        "enable-module-command",
        "damselfly loads no modules and has no MODULE command: no value enables anything",
    ),
    (
        "set-proc-title",
        "cosmetic: the process keeps its name (ps only; no reply depends on it)",
    ),
    ("proc-title-template", "cosmetic: see set-proc-title"),
    (
        "loading-process-events-interval-bytes",
        "clients are always served while a snapshot loads: there is no interval to tune",
    ),
    (
        "rdb-del-sync-files",
        "known gap: with yes and no persistence Redis deletes the RDB a disk-based sync wrote; damselfly keeps it (no data differs)",
    ),
    ("appendfilename", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("appenddirname", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("no-appendfsync-on-rewrite", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("auto-aof-rewrite-percentage", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("auto-aof-rewrite-min-size", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("aof-load-truncated", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("aof-use-rdb-preamble", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("aof-timestamp-enabled", "appendonly yes is refused, so there is no AOF for it to shape"),
    ("aof-rewrite-incremental-fsync", "appendonly yes is refused, so there is no AOF for it to shape"),
    (
        "replica-lazy-flush",
        "a full sync replaces the dataset at once either way (the old one is freed by its shards)",
    ),
    (
        "lazyfree-lazy-eviction",
        "evicted values are freed inline; known gap: Redis streams evictions as UNLINK with it, damselfly as DEL (replicas end the same)",
    ),
    ("lazyfree-lazy-server-del", "values are freed inline either way: only latency differs, replies and the stream do not"),
];

/// The status of `name` in `KNOBS`, if it is there.
pub fn knob(name: &str) -> Option<Status> {
    KNOBS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| Status::Knob(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{access, hooks, Config, NOT_IMPLEMENTED};

    /// The status the code gives `p`: read by an accessor, the mirror or a hook; refused; or
    /// listed as a knob. `None`: accepted and ignored (a bug), `Some(Err)`: inconsistent.
    fn status(cfg: &Config, p: &Param) -> Result<Status, String> {
        let by_accessor = access::READ_BY_ACCESSORS
            .iter()
            .any(|g| g.contains(&p.name));
        let read = by_accessor || cfg.mirror_own(p.name, p.default) || hooks::applied(p.name);
        let refused = NOT_IMPLEMENTED.iter().any(|(n, _, _)| *n == p.name);
        match (read, refused, knob(p.name)) {
            (true, _, Some(_)) => Err(format!(
                "{} is read by its owner but listed in KNOBS: take it off the list",
                p.name
            )),
            (_, true, Some(_)) => Err(format!("{} is refused and listed in KNOBS", p.name)),
            (true, _, None) => Ok(Status::Read),
            (false, true, None) => Ok(Status::Refused),
            (false, false, Some(k)) => Ok(k),
            (false, false, None) => Err(format!(
                "{} is accepted and read by nothing: give it an owner (a typed accessor in \
                 config/access.rs), refuse its values (NOT_IMPLEMENTED), or list it in KNOBS \
                 with the reason that accepting it is honest",
                p.name
            )),
        }
    }

    /// "No parameter accepted and ignored": every parameter of the table is read by its owner,
    /// refused, or a knob with a reason; the side tables name only parameters of the table.
    #[test]
    fn every_parameter_is_read_refused_or_a_knob() {
        crate::install_for_tests();
        let cfg = Config::new();
        let canonical = |n: &str| PARAMS.iter().any(|p| p.name == n);
        let mut problems = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (name, why) in KNOBS {
            if !canonical(name) {
                problems.push(format!(
                    "KNOBS names {name}, not a parameter's canonical name"
                ));
            }
            if !seen.insert(*name) {
                problems.push(format!("KNOBS lists {name} twice"));
            }
            if why.trim().is_empty() {
                problems.push(format!("KNOBS gives {name} no reason"));
            }
        }
        for name in access::READ_BY_ACCESSORS.iter().flat_map(|g| g.iter()) {
            if !canonical(name) {
                problems.push(format!("an accessor reads {name}, not a canonical name"));
            }
        }
        for (name, _, _) in NOT_IMPLEMENTED {
            if !canonical(name) {
                problems.push(format!("NOT_IMPLEMENTED names {name}, not a parameter"));
            }
        }
        let (mut read, mut refused, mut knobs) = (0, 0, 0);
        for p in PARAMS {
            match status(&cfg, p) {
                Ok(Status::Read) => read += 1,
                Ok(Status::Refused) => refused += 1,
                Ok(Status::Knob(_)) => knobs += 1,
                Err(e) => problems.push(e),
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        assert_eq!(read + refused + knobs, PARAMS.len());
        eprintln!("parameters: {read} read, {refused} refused, {knobs} knobs");
    }
}
