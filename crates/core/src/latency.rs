//! The latency monitor (Redis 7.0's `latency.c`): per-event time series of latency spikes
//! (`LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR`), and the per-command latency
//! histograms behind `LATENCY HISTOGRAM` and `INFO latencystats` (Redis's hdr_histogram, 1 ns
//! to 1 s, two significant digits).
//!
//! The events live in one process-wide table behind a mutex: a sample is only added when
//! something took at least `latency-monitor-threshold` milliseconds (so never on a fast path),
//! and one table gives Redis's semantics exactly (one sample per event per second, whichever
//! thread saw it). The histograms are per thread (`ThreadStats::lat_hist`), summed on demand.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const TS_LEN: usize = 160;
/// Width of `LATENCY GRAPH` (Redis's `LATENCY_GRAPH_COLS`).
const GRAPH_COLS: usize = 80;

static THRESHOLD_MS: AtomicU64 = AtomicU64::new(0);
static TRACKING: AtomicBool = AtomicBool::new(true);
static PERCENTILES: Mutex<Vec<f64>> = Mutex::new(Vec::new());
static PERCENTILES_SET: AtomicBool = AtomicBool::new(false);
static EVENTS: Mutex<Vec<(String, TimeSeries)>> = Mutex::new(Vec::new());

/// `latency-monitor-threshold` (ms; 0 = off), mirrored by the config.
pub fn set_threshold(ms: u64) {
    THRESHOLD_MS.store(ms, Ordering::Relaxed);
}
pub fn threshold() -> u64 {
    THRESHOLD_MS.load(Ordering::Relaxed)
}
/// `latency-tracking`, mirrored by the config.
pub fn set_tracking(on: bool) {
    TRACKING.store(on, Ordering::Relaxed);
}
#[inline]
pub fn tracking() -> bool {
    TRACKING.load(Ordering::Relaxed)
}
/// `latency-tracking-info-percentiles`, mirrored by the config (space-separated numbers).
pub fn set_percentiles(v: &str) {
    let p = v
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    *PERCENTILES.lock().unwrap_or_else(|e| e.into_inner()) = p;
    PERCENTILES_SET.store(true, Ordering::Relaxed);
}
pub fn percentiles() -> Vec<f64> {
    if !PERCENTILES_SET.load(Ordering::Relaxed) {
        return vec![50.0, 99.0, 99.9];
    }
    PERCENTILES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds; 0 = empty slot.
    pub time: i64,
    /// Milliseconds.
    pub latency: u64,
}

/// One event's ring of samples (Redis's `struct latencyTimeSeries`).
#[derive(Clone, Debug)]
pub struct TimeSeries {
    idx: usize,
    pub max: u64,
    samples: [Sample; TS_LEN],
}

impl Default for TimeSeries {
    fn default() -> Self {
        TimeSeries {
            idx: 0,
            max: 0,
            samples: [Sample::default(); TS_LEN],
        }
    }
}

impl TimeSeries {
    /// Redis's `latencyAddSample`: one sample per second, keeping the largest.
    pub fn add(&mut self, now: i64, latency: u64) {
        if latency > self.max {
            self.max = latency;
        }
        let prev = (self.idx + TS_LEN - 1) % TS_LEN;
        if self.samples[prev].time == now {
            if latency > self.samples[prev].latency {
                self.samples[prev].latency = latency;
            }
            return;
        }
        self.samples[self.idx] = Sample { time: now, latency };
        self.idx = (self.idx + 1) % TS_LEN;
    }

    /// The samples oldest first (empty slots skipped).
    pub fn samples(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.time != 0)
    }

    pub fn last(&self) -> Sample {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }
}

/// Redis's `latencyAddSampleIfNeeded`.
#[inline]
pub fn add_sample_if_needed(event: &str, ms: u64) {
    let t = threshold();
    if t != 0 && ms >= t {
        add_sample(event, ms);
    }
}

pub fn add_sample(event: &str, ms: u64) {
    let now = now_secs();
    let mut ev = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    match ev.iter_mut().find(|(n, _)| n == event) {
        Some((_, ts)) => ts.add(now, ms),
        None => {
            let mut ts = TimeSeries::default();
            ts.add(now, ms);
            ev.push((event.to_string(), ts));
        }
    }
}

/// A copy of every event's series.
pub fn events() -> Vec<(String, TimeSeries)> {
    EVENTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// One event's series (exact name, as Redis's dict lookup).
pub fn event(name: &[u8]) -> Option<(String, TimeSeries)> {
    EVENTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(n, _)| n.as_bytes() == name)
        .cloned()
}

/// Redis's `latencyResetEvent`: removes the named event (case-insensitively) or, with `None`,
/// every event; returns how many were removed.
pub fn reset(name: Option<&[u8]>) -> usize {
    let mut ev = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    let before = ev.len();
    ev.retain(|(n, _)| name.is_some_and(|x| !n.as_bytes().eq_ignore_ascii_case(x)));
    before - ev.len()
}

// ---------------------------------------------------------------------------------------------
// GRAPH (Redis's sparkline.c)

struct Spark {
    value: f64,
    label: Option<String>,
}

/// Redis's `latencyCommandGenSparkeline` at time `now`.
pub fn graph(event: &str, ts: &TimeSeries, now: i64) -> String {
    let mut seq: Vec<Spark> = Vec::new();
    let (mut min, mut max) = (0u64, 0u64);
    for s in ts.samples() {
        if seq.is_empty() {
            min = s.latency;
            max = s.latency;
        } else {
            max = max.max(s.latency);
            min = min.min(s.latency);
        }
        let elapsed = now - s.time;
        let label = if elapsed < 60 {
            format!("{elapsed}s")
        } else if elapsed < 3600 {
            format!("{}m", elapsed / 60)
        } else if elapsed < 3600 * 24 {
            format!("{}h", elapsed / 3600)
        } else {
            format!("{}d", elapsed / (3600 * 24))
        };
        seq.push(Spark {
            value: s.latency as f64,
            label: Some(label),
        });
    }
    let mut g = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        ts.max
    );
    g.push_str(&"-".repeat(GRAPH_COLS));
    g.push('\n');
    sparkline_render(&mut g, &seq, GRAPH_COLS, 4);
    g
}

/// Redis's `sparklineRender` with `SPARKLINE_FILL`.
fn sparkline_render(out: &mut String, seq: &[Spark], columns: usize, rows: usize) {
    if seq.is_empty() {
        return;
    }
    // The sequence's min and max as sparklineSequenceAddSample tracks them.
    let (mut smin, mut smax) = (seq[0].value, seq[0].value);
    for s in &seq[1..] {
        if s.value < smin {
            smin = s.value;
        } else if s.value > smax {
            smax = s.value;
        }
    }
    let labels = seq.iter().any(|s| s.label.is_some());
    let mut j = 0;
    while j < seq.len() {
        let sub = (seq.len() - j).min(columns);
        if j != 0 {
            out.push('\n');
        }
        render_range(out, &seq[j..j + sub], smin, smax, labels, rows);
        j += columns;
    }
}

fn render_range(out: &mut String, seq: &[Spark], min: f64, max: f64, labels: bool, rows: usize) {
    const FILL: &[u8] = b"_o#";
    let charset_len = FILL.len() as i64;
    let mut relmax = max - min;
    if relmax == 0.0 {
        relmax = 1.0;
    }
    let steps = charset_len * rows as i64;
    let rows = rows as i64;
    let mut row = 0i64;
    loop {
        let mut cont = false;
        let mut chars = vec![b' '; seq.len()];
        for (j, s) in seq.iter().enumerate() {
            let relval = s.value - min;
            let mut step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
            step = step.clamp(0, steps - 1);
            if row < rows {
                let charidx = step - (rows - row - 1) * charset_len;
                cont = true;
                if (0..charset_len).contains(&charidx) {
                    chars[j] = FILL[charidx as usize];
                } else if charidx >= charset_len {
                    chars[j] = b'|';
                }
            } else {
                if labels && row - rows < 1 {
                    cont = true;
                    break;
                }
                if let Some(l) = &s.label {
                    let label_char = (row - rows - 1) as usize;
                    if l.len() > label_char {
                        cont = true;
                        chars[j] = l.as_bytes()[label_char];
                    }
                }
            }
        }
        if !cont {
            break;
        }
        row += 1;
        out.push_str(&String::from_utf8_lossy(&chars));
        out.push('\n');
    }
}

// ---------------------------------------------------------------------------------------------
// DOCTOR

/// Redis's `analyzeLatencyForEvent`: (samples, avg, mad, period).
fn analyze(ts: &TimeSeries, now: i64) -> (u64, u64, u64, i64) {
    let (mut n, mut sum, mut oldest) = (0u64, 0u64, 0i64);
    for s in ts.samples.iter().filter(|s| s.time != 0) {
        n += 1;
        sum += s.latency;
        if oldest == 0 || s.time < oldest {
            oldest = s.time;
        }
    }
    if n == 0 {
        return (0, 0, 0, 0);
    }
    let avg = sum / n;
    let mut period = now - oldest;
    if period == 0 {
        period = 1;
    }
    let mad: u64 = ts
        .samples
        .iter()
        .filter(|s| s.time != 0)
        .map(|s| (avg as i64 - s.latency as i64).unsigned_abs())
        .sum::<u64>()
        / n;
    (n, avg, mad, period)
}

/// Redis's `createLatencyReport` (the THP advice aside).
pub fn doctor(
    events: &[(String, TimeSeries)],
    now: i64,
    slowlog_slower_than: i64,
    hz: u64,
) -> String {
    let threshold = threshold();
    if events.is_empty() && threshold == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".into();
    }
    let mut r = String::new();
    let mut advices = 0;
    let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut hz_adv, mut large_objects, mut mass_eviction) =
        (false, false, false, false);
    for (num, (event, ts)) in events.iter().enumerate() {
        if num == 0 {
            r.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let (n, avg, mad, period) = analyze(ts, now);
        r.push_str(&format!(
            "{}. {event}: {n} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
            num + 1,
            period as f64 / n.max(1) as f64,
            ts.max
        ));
        match event.to_ascii_lowercase().as_str() {
            "command" => {
                if slowlog_slower_than < 0 {
                    slowlog_enabled = true;
                    advices += 1;
                } else if (slowlog_slower_than / 1000) as u64 > threshold {
                    slowlog_tuning = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            "expire-cycle" => {
                hz_adv = true;
                large_objects = true;
                advices += 2;
            }
            "eviction-del" => {
                large_objects = true;
                advices += 1;
            }
            "eviction-cycle" => {
                mass_eviction = true;
                advices += 1;
            }
            _ => {}
        }
        r.push('\n');
    }
    if events.is_empty() && advices == 0 {
        r.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
    } else if advices == 0 {
        r.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
    } else {
        r.push_str("\nI have a few advices for you:\n\n");
        if slowlog_enabled {
            r.push_str(&format!("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n", threshold * 1000));
        }
        if slowlog_tuning {
            r.push_str(&format!("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.\n", threshold * 1000));
        }
        if slowlog_inspect {
            r.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
        }
        if scheduler {
            r.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
        }
        if hz_adv && hz < 100 {
            r.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
        }
        if large_objects {
            r.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
        }
        if mass_eviction {
            r.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
        }
    }
    r
}

/// `doctor` over the current events, now.
pub fn doctor_now(slowlog_slower_than: i64, hz: u64) -> String {
    doctor(&events(), now_secs(), slowlog_slower_than, hz)
}

/// `graph` at the current time.
pub fn graph_now(event: &str, ts: &TimeSeries) -> String {
    graph(event, ts, now_secs())
}

// ---------------------------------------------------------------------------------------------
// Per-command latency histograms (hdr_histogram: lowest 1, highest 1e9, 2 significant figures)

const HALF_MAG: u32 = 7;
const HALF_COUNT: i64 = 1 << HALF_MAG; // 128
const SUB_COUNT: i64 = 256;
const COUNTS_LEN: usize = 3072; // (23 buckets + 1) * 128
const MIN_NS: u64 = 1;
const MAX_NS: u64 = 1_000_000_000;

fn bucket_index(v: i64) -> i64 {
    let pow2ceiling = 64 - ((v as u64) | (SUB_COUNT as u64 - 1)).leading_zeros() as i64;
    pow2ceiling - (HALF_MAG as i64 + 1)
}

fn counts_index(v: i64) -> usize {
    let b = bucket_index(v);
    let sub = v >> b;
    (((b + 1) << HALF_MAG) + (sub - HALF_COUNT)) as usize
}

fn value_at_index(idx: i64) -> i64 {
    let mut b = (idx >> HALF_MAG) - 1;
    let mut sub = (idx & (HALF_COUNT - 1)) + HALF_COUNT;
    if b < 0 {
        sub -= HALF_COUNT;
        b = 0;
    }
    sub << b
}

fn range_size(v: i64) -> i64 {
    let b = bucket_index(v);
    let sub = v >> b;
    1 << if sub >= SUB_COUNT { b + 1 } else { b }
}

fn lowest_equivalent(v: i64) -> i64 {
    let b = bucket_index(v);
    (v >> b) << b
}

fn highest_equivalent(v: i64) -> i64 {
    lowest_equivalent(v) + range_size(v) - 1
}

/// One command's latency histogram, in nanoseconds.
#[derive(Clone)]
pub struct Hdr {
    counts: Box<[u64]>,
    pub total: u64,
}

impl Default for Hdr {
    fn default() -> Self {
        Hdr {
            counts: vec![0; COUNTS_LEN].into_boxed_slice(),
            total: 0,
        }
    }
}

impl Hdr {
    /// Redis's `updateCommandLatencyHistogram` (clamped to 1 ns .. 1 s).
    pub fn record_ns(&mut self, ns: u64) {
        let v = ns.clamp(MIN_NS, MAX_NS) as i64;
        self.counts[counts_index(v)] += 1;
        self.total += 1;
    }

    pub fn add(&mut self, o: &Hdr) {
        for (d, s) in self.counts.iter_mut().zip(o.counts.iter()) {
            *d += s;
        }
        self.total += o.total;
    }

    /// Redis's `fillCommandCDF` buckets: (usec, cumulative count) from hdr's log iterator
    /// (first bucket 1024 ns, base 2), where the cumulative count grew.
    pub fn cdf(&self) -> Vec<(i64, u64)> {
        let mut out = Vec::new();
        let mut idx: i64 = -1;
        let mut cumulative = 0u64;
        let mut value = 0i64;
        let mut highest = 0i64;
        let mut level = 1024i64;
        let mut level_lowest = lowest_equivalent(level);
        let mut previous = 0u64;
        loop {
            // log_iter_next
            let greater = (idx as usize) < COUNTS_LEN && value_at_index(idx + 1) > level_lowest
                || idx < 0 && value_at_index(0) > level_lowest;
            if !(cumulative < self.total || greater) {
                break;
            }
            loop {
                if value >= level_lowest {
                    level *= 2;
                    level_lowest = lowest_equivalent(level);
                    break;
                }
                idx += 1;
                if idx as usize >= COUNTS_LEN {
                    break;
                }
                cumulative += self.counts[idx as usize];
                value = value_at_index(idx);
                highest = highest_equivalent(value);
            }
            if cumulative > previous {
                out.push((highest / 1000, cumulative));
            }
            previous = cumulative;
            if idx as usize >= COUNTS_LEN {
                // hdr returns true once more at the end, then has no next.
                break;
            }
        }
        out
    }

    /// Cumulative counts of the samples at or below each bound (ns, ascending), for a
    /// Prometheus histogram: a sub-bucket counts below a bound when its lowest value does, so a
    /// count may include samples up to hdr's precision (2 significant digits) above its bound.
    pub fn cumulative(&self, bounds_ns: &[u64]) -> Vec<u64> {
        let mut out = vec![0; bounds_ns.len()];
        let (mut acc, mut b) = (0u64, 0usize);
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let v = value_at_index(i as i64) as u64;
            while b < bounds_ns.len() && bounds_ns[b] < v {
                out[b] = acc;
                b += 1;
            }
            acc += c;
        }
        for o in &mut out[b..] {
            *o = acc;
        }
        out
    }

    /// hdr's `hdr_value_at_percentile` (ns).
    pub fn value_at_percentile(&self, p: f64) -> i64 {
        let req = if p < 100.0 { p } else { 100.0 };
        let mut want = ((req / 100.0) * self.total as f64 + 0.5) as i64;
        if want < 1 {
            want = 1;
        }
        let mut acc = 0i64;
        let mut v = 0i64;
        for (i, c) in self.counts.iter().enumerate() {
            acc += *c as i64;
            if acc >= want {
                v = value_at_index(i as i64);
                break;
            }
        }
        if p == 0.0 {
            lowest_equivalent(v)
        } else {
            highest_equivalent(v)
        }
    }
}

/// Redis's `%f` then `trimDoubleString` of a percentile ("50", "99.9").
pub fn percentile_name(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

/// The `latency_percentiles_usec_<name>:...` value of INFO latencystats.
pub fn percentiles_line(h: &Hdr, ps: &[f64]) -> String {
    ps.iter()
        .map(|&p| {
            format!(
                "p{}={:.3}",
                percentile_name(p),
                h.value_at_percentile(p) as f64 / 1000.0
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_one_sample_per_second_keeps_max() {
        let mut ts = TimeSeries::default();
        ts.add(100, 5);
        ts.add(100, 9);
        ts.add(100, 3);
        ts.add(101, 4);
        let s: Vec<_> = ts.samples().collect();
        assert_eq!(
            s,
            vec![
                Sample {
                    time: 100,
                    latency: 9
                },
                Sample {
                    time: 101,
                    latency: 4
                }
            ]
        );
        assert_eq!(ts.max, 9);
        assert_eq!(
            ts.last(),
            Sample {
                time: 101,
                latency: 4
            }
        );
    }

    #[test]
    fn series_ring_wraps_at_160() {
        let mut ts = TimeSeries::default();
        for i in 0..200 {
            ts.add(1000 + i, i as u64);
        }
        let s: Vec<_> = ts.samples().collect();
        assert_eq!(s.len(), TS_LEN);
        assert_eq!(s[0].time, 1040);
        assert_eq!(s[159].time, 1199);
        assert_eq!(ts.max, 199);
    }

    #[test]
    fn graph_matches_redis() {
        let mut ts = TimeSeries::default();
        ts.add(1000, 300);
        ts.add(1001, 400);
        ts.add(1002, 500);
        let g = graph("command", &ts, 1003);
        let expected = "command - high 500 ms, low 300 ms (all time high 500 ms)\n".to_string()
            + &"-".repeat(80)
            + "\n  #\n _|\n ||\n_||\n   \n321\nsss\n";
        assert_eq!(g, expected);
    }

    #[test]
    fn doctor_reports_events() {
        set_threshold(100);
        let mut ts = TimeSeries::default();
        ts.add(1000, 300);
        ts.add(1002, 500);
        let r = doctor(&[("command".into(), ts)], 1004, 10000, 10);
        assert!(r.starts_with("Dave, I have observed latency spikes"));
        assert!(r.contains("1. command: 2 latency spikes (average 400ms, mean deviation 100ms, period 2.00 sec). Worst all time event 500ms."));
        assert!(r.contains("I have a few advices for you"));
        let none = doctor(&[], 0, 10000, 10);
        assert!(none.starts_with("Dave, no latency spike was observed"));
    }

    #[test]
    fn hdr_indices() {
        assert_eq!(highest_equivalent(1024), 1031);
        assert_eq!(highest_equivalent(2048), 2063);
        assert_eq!(counts_index(255), 255);
        assert_eq!(
            value_at_index(counts_index(1_000_000_000) as i64),
            1_000_000_000 >> 22 << 22
        );
        assert!(counts_index(1_000_000_000) < COUNTS_LEN);
    }

    #[test]
    fn hdr_cdf_and_percentiles() {
        let mut h = Hdr::default();
        h.record_ns(1000); // 1 us
        h.record_ns(1000);
        h.record_ns(3000); // 3 us -> the 4 us bucket
        h.record_ns(300_000_000); // 300 ms
        assert_eq!(h.cdf(), vec![(1, 2), (4, 3), (541_065, 4)]);
        assert_eq!(h.value_at_percentile(50.0), 1003); // 1000's bucket: 1000..1003
        assert_eq!(percentile_name(99.9), "99.9");
        assert_eq!(percentile_name(50.0), "50");
        assert_eq!(
            h.cumulative(&[999, 1000, 2000, 4000, 1_000_000, 1_000_000_000]),
            vec![0, 2, 2, 3, 3, 4]
        );
        assert_eq!(Hdr::default().cumulative(&[1000]), vec![0]);
        let mut empty = Hdr::default();
        empty.record_ns(0);
        assert_eq!(empty.cdf(), vec![(1, 1)]);
    }
}
