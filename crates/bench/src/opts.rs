//! Command-line options of the load generator. Names and meanings follow
//! `memtier_benchmark` wherever memtier has an equivalent option.

use clap::{Parser, ValueEnum};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// RESP2 (Redis, Valkey, KeyDB, Dragonfly, Damselfly).
    Redis,
    /// RESP3: the connection starts with `HELLO 3`.
    Resp3,
    /// Memcached text protocol (`set`/`get`).
    #[value(name = "memcache_text")]
    MemcacheText,
}

impl Protocol {
    pub fn is_redis(self) -> bool {
        matches!(self, Protocol::Redis | Protocol::Resp3)
    }
}

/// How keys are chosen for one command type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum KeyPattern {
    /// Uniform random in [key-minimum, key-maximum].
    Random,
    /// Sequential, every client walking the whole range from key-minimum.
    Sequential,
    /// Gaussian around key-median with key-stddev.
    Gaussian,
    /// Parallel: the range is split between all clients, each walks its slice.
    Parallel,
}

impl KeyPattern {
    fn parse_one(s: &str) -> Result<Self, String> {
        match s {
            "R" | "r" => Ok(KeyPattern::Random),
            "S" | "s" => Ok(KeyPattern::Sequential),
            "G" | "g" => Ok(KeyPattern::Gaussian),
            "P" | "p" => Ok(KeyPattern::Parallel),
            other => Err(format!(
                "unknown key pattern '{other}' (expected R, S, G or P)"
            )),
        }
    }
}

/// `--key-pattern=SET:GET`, e.g. `R:R`, `S:S`, `G:G`, `P:P`; a single letter applies to both.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct KeyPatterns {
    pub set: KeyPattern,
    pub get: KeyPattern,
}

pub fn parse_key_patterns(s: &str) -> Result<KeyPatterns, String> {
    match s.split_once(':') {
        Some((a, b)) => Ok(KeyPatterns {
            set: KeyPattern::parse_one(a)?,
            get: KeyPattern::parse_one(b)?,
        }),
        None => {
            let p = KeyPattern::parse_one(s)?;
            Ok(KeyPatterns { set: p, get: p })
        }
    }
}

pub fn parse_key_pattern(s: &str) -> Result<KeyPattern, String> {
    KeyPattern::parse_one(s)
}

/// `--ratio=SET:GET`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub set: u32,
    pub get: u32,
}

pub fn parse_ratio(s: &str) -> Result<Ratio, String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("ratio '{s}' must look like SET:GET, e.g. 1:10"))?;
    let set = a
        .trim()
        .parse::<u32>()
        .map_err(|e| format!("ratio set part: {e}"))?;
    let get = b
        .trim()
        .parse::<u32>()
        .map_err(|e| format!("ratio get part: {e}"))?;
    if set == 0 && get == 0 {
        return Err("ratio 0:0 sends nothing".into());
    }
    Ok(Ratio { set, get })
}

/// `-n N` or `-n allkeys`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Requests {
    PerClient(u64),
    AllKeys,
}

pub fn parse_requests(s: &str) -> Result<Requests, String> {
    if s.eq_ignore_ascii_case("allkeys") {
        return Ok(Requests::AllKeys);
    }
    let n = s.parse::<u64>().map_err(|e| format!("requests: {e}"))?;
    if n == 0 {
        return Err("requests must be > 0".into());
    }
    Ok(Requests::PerClient(n))
}

/// An inclusive `MIN-MAX` range.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub min: u64,
    pub max: u64,
}

pub fn parse_range(s: &str) -> Result<Range, String> {
    let (a, b) = s
        .split_once('-')
        .ok_or_else(|| format!("range '{s}' must look like MIN-MAX"))?;
    let min = a
        .trim()
        .parse::<u64>()
        .map_err(|e| format!("range min: {e}"))?;
    let max = b
        .trim()
        .parse::<u64>()
        .map_err(|e| format!("range max: {e}"))?;
    if min > max {
        return Err(format!("range '{s}': min > max"));
    }
    Ok(Range { min, max })
}

/// A CPU list like `0`, `0-3` or `0,2,4-5`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl std::fmt::Display for CpuList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.0.iter().map(|c| c.to_string()).collect();
        f.write_str(&v.join(","))
    }
}

pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a = a
                .parse::<usize>()
                .map_err(|e| format!("cpu list '{s}': {e}"))?;
            let b = b
                .parse::<usize>()
                .map_err(|e| format!("cpu list '{s}': {e}"))?;
            if a > b {
                return Err(format!("cpu list '{s}': {a} > {b}"));
            }
            out.extend(a..=b);
        } else {
            out.push(
                part.parse::<usize>()
                    .map_err(|e| format!("cpu list '{s}': {e}"))?,
            );
        }
    }
    if out.is_empty() {
        return Err("empty cpu list".into());
    }
    Ok(CpuList(out))
}

/// memtier_benchmark-compatible load generator (run `damselfly-bench compare --help`
/// for the side-by-side comparison runner).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "damselfly-bench",
    version,
    about,
    long_about = None,
    args_override_self = true,
    after_help = "Comparison runner: damselfly-bench compare --help"
)]
pub struct BenchOpts {
    /// Server address.
    #[arg(short = 's', long = "server", default_value = "127.0.0.1")]
    pub server: String,

    /// Server port.
    #[arg(short = 'p', long = "port", default_value_t = 6379)]
    pub port: u16,

    /// Protocol: redis (RESP2), resp3 or memcache_text.
    #[arg(short = 'P', long = "protocol", value_enum, default_value = "redis")]
    pub protocol: Protocol,

    /// Number of load-generator threads.
    #[arg(short = 't', long = "threads", default_value_t = 4)]
    pub threads: usize,

    /// Connections (clients) per thread.
    #[arg(short = 'c', long = "clients", default_value_t = 50)]
    pub clients: usize,

    /// Requests per client, or `allkeys` to touch every key of the range exactly once
    /// (the range is split between all clients).
    #[arg(short = 'n', long = "requests", value_parser = parse_requests, default_value = "10000")]
    pub requests: Requests,

    /// Run for this many seconds instead of a fixed number of requests.
    #[arg(long = "test-time")]
    pub test_time: Option<u64>,

    /// SET:GET ratio, e.g. 1:10, 1:0 (write only), 0:1 (read only).
    #[arg(long = "ratio", value_parser = parse_ratio, default_value = "1:10")]
    pub ratio: Ratio,

    /// Requests in flight per connection.
    #[arg(long = "pipeline", default_value_t = 1)]
    pub pipeline: usize,

    /// Most requests per second from one connection (memtier's option and granularity: a
    /// budget of ceil(N/50) requests granted afresh every 1/(N/ceil(N/50)) s). Off by default.
    #[arg(long = "rate-limiting", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limiting: Option<u32>,

    /// Write a connection's new requests at once, right after the read that freed their
    /// pipeline slots. Off by default: like memtier (libevent), requests are queued and written
    /// after the thread next polls for I/O, and a request's latency counts from when it was
    /// queued.
    #[arg(long = "eager-writes")]
    pub eager_writes: bool,

    /// Per-request system calls: `memtier` (default) makes the ones memtier's libevent loop
    /// makes and tokio's does not (two `epoll_ctl` per write, `ioctl(FIONREAD)` per read), so
    /// both generators cost the same CPU per request and offer a server the same traffic
    /// where the load thread is the bottleneck; `lean` skips them (more load from one thread).
    #[arg(long = "client-syscalls", value_enum, default_value_t = ClientSyscalls::Memtier)]
    pub client_syscalls: ClientSyscalls,

    /// Object (value) size in bytes.
    #[arg(short = 'd', long = "data-size", default_value_t = 32)]
    pub data_size: usize,

    /// Random value size in MIN-MAX (overrides --data-size).
    #[arg(long = "data-size-range", value_parser = parse_range)]
    pub data_size_range: Option<Range>,

    /// Fill values with random printable bytes instead of 'x'.
    #[arg(long = "random-data")]
    pub random_data: bool,

    /// Key prefix.
    #[arg(long = "key-prefix", default_value = "memtier-")]
    pub key_prefix: String,

    /// Smallest key number.
    #[arg(long = "key-minimum", default_value_t = 0)]
    pub key_minimum: u64,

    /// Largest key number.
    #[arg(long = "key-maximum", default_value_t = 10_000_000)]
    pub key_maximum: u64,

    /// Key pattern SET:GET with R (random), S (sequential), G (gaussian), P (parallel).
    #[arg(long = "key-pattern", value_parser = parse_key_patterns, default_value = "R:R")]
    pub key_pattern: KeyPatterns,

    /// Gaussian pattern standard deviation (default: range/6).
    #[arg(long = "key-stddev")]
    pub key_stddev: Option<f64>,

    /// Gaussian pattern median (default: middle of the range).
    #[arg(long = "key-median")]
    pub key_median: Option<f64>,

    /// Seed of the random generators (default fixed; see --randomize).
    #[arg(long = "seed", default_value_t = 12345)]
    pub seed: u64,

    /// Seed from the clock instead of --seed.
    #[arg(long = "randomize")]
    pub randomize: bool,

    /// Give every client its own seed (otherwise all clients draw the same key sequence).
    #[arg(long = "distinct-client-seed")]
    pub distinct_client_seed: bool,

    /// Set a random expiry in MIN-MAX seconds on every SET.
    #[arg(long = "expiry-range", value_parser = parse_range)]
    pub expiry_range: Option<Range>,

    /// Authenticate with PASSWORD or USER:PASSWORD.
    #[arg(short = 'a', long = "authenticate")]
    pub authenticate: Option<String>,

    /// SELECT this database after connecting.
    #[arg(long = "select-db")]
    pub select_db: Option<u32>,

    /// Arbitrary command template instead of SET/GET. Placeholders: `__key__`, `__data__`.
    /// Several commands separated by ';' form one request and share the same keys
    /// (e.g. "SET __key__ __data__;EXPIRE __key__ 3600"). Repeatable.
    #[arg(long = "command")]
    pub command: Vec<String>,

    /// Weights of the --command templates, comma separated (default 1 each).
    #[arg(long = "command-ratio", value_delimiter = ',')]
    pub command_ratio: Vec<u32>,

    /// Key pattern for --command templates (R, S, G or P).
    #[arg(long = "command-key-pattern", value_parser = parse_key_pattern, default_value = "R")]
    pub command_key_pattern: KeyPattern,

    /// Repeat the key/data part of a --command N times with distinct keys
    /// (multi-key commands: `MSET __key__ __data__`, `MGET __key__`, `DEL __key__`).
    /// With `--protocol memcache_text` and no --command, every GET is a multi-key
    /// `get k1 ... kN` of N keys; its Hits/Misses count keys, Ops count requests.
    #[arg(long = "batch", default_value_t = 1)]
    pub batch: usize,

    /// Percentiles shown in the table, comma separated.
    #[arg(
        long = "print-percentiles",
        value_delimiter = ',',
        default_value = "50,99,99.9"
    )]
    pub print_percentiles: Vec<f64>,

    /// Do not print the latency distribution.
    #[arg(long = "hide-histogram")]
    pub hide_histogram: bool,

    /// Write the results as JSON to this file.
    #[arg(long = "json-out-file")]
    pub json_out_file: Option<String>,

    /// Write the text report to this file instead of stdout.
    #[arg(short = 'o', long = "out-file")]
    pub out_file: Option<String>,

    /// Pin the load generator to these CPUs, e.g. `0` or `0-3` (not in memtier; `taskset` works too).
    #[arg(long = "cpus", value_parser = parse_cpu_list)]
    pub cpus: Option<CpuList>,

    /// Do not print the live progress line.
    #[arg(long = "hide-progress")]
    pub hide_progress: bool,
}

/// `--client-syscalls`: whether the generator mirrors memtier's per-request system calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientSyscalls {
    Memtier,
    Lean,
}
