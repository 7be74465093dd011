//! The scenarios `compare` runs: load-generator arguments for the fill and the measured load.

use super::{a, CompareOpts};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Proto {
    Redis,
    Memcache,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Group {
    Core,
    Batch,
    Sweep,
}

#[derive(Clone, Debug)]
pub(super) struct Scenario {
    pub(super) id: String,
    /// Category label in charts.
    pub(super) short: String,
    pub(super) title: String,
    pub(super) group: Group,
    pub(super) proto: Proto,
    pub(super) fill: Option<Vec<String>>,
    pub(super) load: Vec<String>,
    /// Keys (units) per request: 1000 for MSET of 1000 keys.
    pub(super) units_per_op: f64,
    pub(super) unit: &'static str,
}

impl Scenario {
    /// A RESP scenario without fill whose throughput is counted in keys.
    fn keys(
        id: String,
        short: String,
        title: String,
        group: Group,
        load: Vec<String>,
        units_per_op: f64,
    ) -> Scenario {
        Scenario {
            id,
            short,
            title,
            group,
            proto: Proto::Redis,
            fill: None,
            load,
            units_per_op,
            unit: "keys",
        }
    }
}

const MEMCACHE_TEXT: &[&str] = &["--protocol", "memcache_text"];

/// Keys per `get` request of the `mc_mget` scenario.
const MC_MGET_KEYS: u64 = 10;

/// Value sizes of the memory scenarios (`memory`, `mc_memory`).
pub(super) const MEMORY_VALUE_SIZES: [u64; 2] = [32, 1024];

/// Load-generator arguments that store `items` items over the memcache protocol for the
/// `mc_memory` scenario: keys `key:0 .. key:<items-1>` (the names DEBUG POPULATE gives in the
/// RESP `memory` scenario), `value_size`-byte values, every key exactly once, pipelined sets.
pub(super) fn mc_memory_fill(items: u64, value_size: u64) -> Vec<String> {
    a(&[
        "--protocol",
        "memcache_text",
        "--ratio",
        "1:0",
        "-n",
        "allkeys",
        "--key-pattern",
        "P:P",
        "--pipeline",
        "64",
        "-c",
        "4",
        "-d",
        &value_size.to_string(),
        "--key-prefix",
        "key:",
        "--key-minimum",
        "0",
        "--key-maximum",
        &items.saturating_sub(1).to_string(),
    ])
}

/// Key prefix, minimum and maximum so that every key is exactly `size` bytes.
fn sized_keys(size: usize, wanted: u64) -> (String, u64, u64) {
    let size = size.max(2);
    let digits = (size - 1).clamp(1, 9);
    let mut max_digits = 1usize;
    while max_digits < digits && 10u64.pow(max_digits as u32) < wanted * 10 {
        max_digits += 1;
    }
    let digits = digits.min(max_digits.max(1));
    let prefix = format!("k{}", "x".repeat(size - 1 - digits));
    let min = if digits == 1 {
        0
    } else {
        10u64.pow(digits as u32 - 1)
    };
    let max = 10u64.pow(digits as u32) - 1;
    (prefix, min, max)
}

/// Every scenario, in run order.
pub(super) fn scenarios(c: &CompareOpts) -> Vec<Scenario> {
    let q = c.quick;
    let keys = if q { 1000 } else { c.keys.max(1) };
    let time = |n_quick: u64, secs: u64| -> Vec<String> {
        if q {
            a(&["-n", &n_quick.to_string()])
        } else {
            a(&["--test-time", &secs.to_string()])
        }
    };
    let d = c.duration;
    let range = a(&["--key-minimum", "1", "--key-maximum", &keys.to_string()]);
    // `extra`, the key range, then `-n n_quick` (--quick) or `--test-time <duration>`.
    let load = |extra: &[&str], n_quick: u64| -> Vec<String> {
        let mut v = a(extra);
        v.extend(range.clone());
        v.extend(time(n_quick, d));
        v
    };
    let fill = |size: u64, mc: bool| -> Vec<String> {
        let mut v = a(&[
            "--ratio",
            "1:0",
            "-n",
            "allkeys",
            "--key-pattern",
            "P:P",
            "--pipeline",
            "64",
            "-c",
            "4",
            "-d",
            &size.to_string(),
        ]);
        v.extend(range.clone());
        if mc {
            v.extend(a(MEMCACHE_TEXT));
        }
        v
    };
    let mut out = Vec::new();
    // `extra`: load arguments separated by spaces.
    let mut core = |id: &str, title: &str, proto: Proto, filled: Option<u64>, extra: &str| {
        let mut load = load(&extra.split(' ').collect::<Vec<_>>(), 200);
        if proto == Proto::Memcache {
            load.extend(a(MEMCACHE_TEXT));
        }
        out.push(Scenario {
            id: id.into(),
            short: id.into(),
            title: title.into(),
            group: Group::Core,
            proto,
            fill: filled.map(|s| fill(s, proto == Proto::Memcache)),
            load,
            units_per_op: 1.0,
            unit: "ops",
        });
    };
    core(
        "write",
        "write-only: SET, 32 B values, random keys, 50 clients/thread",
        Proto::Redis,
        None,
        "--ratio 1:0 -d 32 -c 50 --key-pattern R:R",
    );
    core(
        "read",
        "read-only after fill (all hits): GET, 50 clients/thread",
        Proto::Redis,
        Some(32),
        "--ratio 0:1 -d 32 -c 50 --key-pattern R:R",
    );
    core(
        "read_p10",
        "pipelined read --pipeline=10 after fill, 50 clients/thread",
        Proto::Redis,
        Some(32),
        "--ratio 0:1 -d 32 -c 50 --pipeline 10",
    );
    core(
        "read_p30",
        "pipelined read --pipeline=30 after fill, 50 clients/thread",
        Proto::Redis,
        Some(32),
        "--ratio 0:1 -d 32 -c 50 --pipeline 30",
    );
    core(
        "mix_1_15",
        "centminmod mix: --ratio=1:15 -d 384 -c 100 after fill",
        Proto::Redis,
        Some(384),
        "--ratio 1:15 -d 384 -c 100",
    );
    core(
        "mc_write",
        "memcache text protocol, write-only set, 32 B values, 50 clients/thread",
        Proto::Memcache,
        None,
        "--ratio 1:0 -d 32 -c 50",
    );
    core(
        "mc_read",
        "memcache text protocol, read-only get after fill, 50 clients/thread",
        Proto::Memcache,
        Some(32),
        "--ratio 0:1 -d 32 -c 50",
    );
    // Pipelined multi-get: every request is `get k1 ... k10` of random filled keys, 8 requests in
    // flight per connection; throughput and CPU are counted per key.
    let mut mget = load(
        &[
            "--ratio",
            "0:1",
            "-d",
            "32",
            "-c",
            "50",
            "--pipeline",
            "8",
            "--batch",
            &MC_MGET_KEYS.to_string(),
        ],
        50,
    );
    mget.extend(a(MEMCACHE_TEXT));
    out.push(Scenario {
        id: "mc_mget".into(),
        short: "mc_mget keys".into(),
        title: format!(
            "memcache text protocol, pipelined multi-get: get of {MC_MGET_KEYS} random keys per request, --pipeline 8, after fill, 50 clients/thread"
        ),
        group: Group::Core,
        proto: Proto::Memcache,
        fill: Some(fill(32, true)),
        load: mget,
        units_per_op: MC_MGET_KEYS as f64,
        unit: "keys",
    });
    for (batch, clients) in [(1000u64, "8"), (10000u64, "2")] {
        let n = batch.to_string();
        out.push(Scenario::keys(
            format!("mset_{batch}"),
            format!("MSET {batch}"),
            format!("multi_set: MSET of {batch} keys (32 B values), {clients} clients/thread"),
            Group::Batch,
            load(
                &[
                    "--command",
                    "MSET __key__ __data__",
                    "--batch",
                    &n,
                    "-c",
                    clients,
                    "-d",
                    "32",
                ],
                if batch > 1000 { 2 } else { 5 },
            ),
            batch as f64,
        ));
        out.push(Scenario::keys(
            format!("set_expire_{batch}"),
            format!("SET+EXPIRE {batch}"),
            format!(
                "pipelined SET + EXPIRE of the same key, {batch} pairs in flight per connection, {clients} clients/thread"
            ),
            Group::Batch,
            load(
                &[
                    "--command",
                    "SET __key__ __data__;EXPIRE __key__ 3600",
                    "--pipeline",
                    &n,
                    "-c",
                    clients,
                    "-d",
                    "32",
                ],
                if batch > 1000 { 10000 } else { 5000 },
            ),
            1.0,
        ));
    }
    let sizes: &[usize] = if q { &[8, 128] } else { &[8, 16, 32, 64, 128] };
    let batch = if q { 100 } else { 1000 };
    for &ks in sizes {
        for &vs in sizes {
            let (prefix, kmin, kmax) = sized_keys(ks, keys);
            let mut load = a(&[
                "--command",
                "MSET __key__ __data__",
                "--batch",
                &batch.to_string(),
                "-c",
                "4",
                "-d",
                &vs.to_string(),
                "--key-prefix",
                &prefix,
                "--key-minimum",
                &kmin.to_string(),
                "--key-maximum",
                &kmax.to_string(),
            ]);
            load.extend(time(3, c.sweep_duration));
            out.push(Scenario::keys(
                format!("kv_k{ks}_v{vs}"),
                format!("{ks}/{vs}"),
                format!("MSET batch {batch}: key {ks} B, value {vs} B"),
                Group::Sweep,
                load,
                batch as f64,
            ));
        }
    }
    out
}

/// Whether `--scenarios` selects `s` (all when empty; `kv_sweep` selects the sweep group).
pub(super) fn scenario_selected(c: &CompareOpts, s: &Scenario) -> bool {
    if c.scenarios.is_empty() {
        return true;
    }
    c.scenarios
        .iter()
        .any(|n| n == &s.id || (n == "kv_sweep" && s.group == Group::Sweep))
}

pub(super) fn memory_selected(c: &CompareOpts) -> bool {
    c.scenarios.is_empty() || c.scenarios.iter().any(|n| n == "memory")
}

/// Whether `--scenarios` selects the memcache memory scenario (`mc_memory`).
pub(super) fn mc_memory_selected(c: &CompareOpts) -> bool {
    c.scenarios.is_empty() || c.scenarios.iter().any(|n| n == "mc_memory")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn sized_keys_have_exact_length() {
        for size in [8usize, 16, 32, 64, 128] {
            let (prefix, min, max) = sized_keys(size, 1_000_000);
            assert_eq!(prefix.len() + min.to_string().len(), size);
            assert_eq!(prefix.len() + max.to_string().len(), size);
        }
    }

    #[test]
    fn quick_scenarios() {
        let c = CompareOpts::parse_from(["compare", "--quick"]);
        let all = scenarios(&c);
        let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "write",
                "read",
                "read_p10",
                "read_p30",
                "mix_1_15",
                "mc_write",
                "mc_read",
                "mc_mget",
                "mset_1000",
                "set_expire_1000",
                "mset_10000",
                "set_expire_10000",
                "kv_k8_v8",
                "kv_k8_v128",
                "kv_k128_v8",
                "kv_k128_v128",
            ]
        );
        let load = |id: &str| all.iter().find(|s| s.id == id).unwrap().load.join(" ");
        assert_eq!(
            load("mc_read"),
            "--ratio 0:1 -d 32 -c 50 --key-minimum 1 --key-maximum 1000 -n 200 --protocol memcache_text"
        );
        assert_eq!(
            load("set_expire_10000"),
            "--command SET __key__ __data__;EXPIRE __key__ 3600 --pipeline 10000 -c 2 -d 32 --key-minimum 1 --key-maximum 1000 -n 10000"
        );
        let mc = all.iter().find(|s| s.id == "mc_read").unwrap();
        assert_eq!(
            mc.fill.as_ref().unwrap().join(" "),
            "--ratio 1:0 -n allkeys --key-pattern P:P --pipeline 64 -c 4 -d 32 --key-minimum 1 --key-maximum 1000 --protocol memcache_text"
        );
        assert_eq!(
            load("mc_mget"),
            "--ratio 0:1 -d 32 -c 50 --pipeline 8 --batch 10 --key-minimum 1 --key-maximum 1000 -n 50 --protocol memcache_text"
        );
        let mg = all.iter().find(|s| s.id == "mc_mget").unwrap();
        assert_eq!(
            (mg.unit, mg.units_per_op, mg.proto),
            ("keys", 10.0, Proto::Memcache)
        );
        assert_eq!(mg.fill, mc.fill);
        assert_eq!(
            mc_memory_fill(1_000_000, 32).join(" "),
            "--protocol memcache_text --ratio 1:0 -n allkeys --key-pattern P:P --pipeline 64 -c 4 -d 32 --key-prefix key: --key-minimum 0 --key-maximum 999999"
        );
        let only = CompareOpts::parse_from(["compare", "--scenarios", "mc_mget,mc_memory"]);
        assert!(mc_memory_selected(&only) && !memory_selected(&only));
        let picked: Vec<String> = scenarios(&only)
            .into_iter()
            .filter(|s| scenario_selected(&only, s))
            .map(|s| s.id)
            .collect();
        assert_eq!(picked, ["mc_mget"]);
        let kinds: Vec<(&str, f64)> = all[8..12]
            .iter()
            .map(|s| (s.unit, s.units_per_op))
            .collect();
        assert_eq!(
            kinds,
            [
                ("keys", 1000.0),
                ("keys", 1.0),
                ("keys", 10000.0),
                ("keys", 1.0)
            ]
        );
    }
}
