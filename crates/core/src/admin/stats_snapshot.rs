//! The statistics snapshot behind INFO, `/metrics` and the console: every thread's counters and
//! its shard's per-db figures, taken with one broadcast and summed.

use std::collections::BTreeMap;

use crate::commands::{flags, registry, ConnCtx, Entry};
use crate::process::sysinfo::{mem_stats, MemStats};
use crate::stats::CmdStat;

/// Everything INFO and `/metrics` report. [`gather`] takes one of these on every thread and sums
/// them with [`Totals::add`].
#[derive(Default)]
pub struct Totals {
    /// Threads summed (1 in a single thread's snapshot).
    pub threads: usize,
    pub commands_processed: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Indexed by command id.
    pub cmd: Vec<CmdStat>,
    pub errors: BTreeMap<String, u64>,
    pub total_error_replies: u64,
    pub internal_errors: u64,
    pub obuf_limit_disconnections: u64,
    pub qbuf_limit_disconnections: u64,
    /// Largest query buffer and output buffer memory of any connection now (Redis: the largest
    /// of the last few seconds).
    pub max_input_buffer: usize,
    pub max_output_buffer: usize,
    /// Query buffer and output buffer memory of all connections now.
    pub input_buffers: u64,
    pub output_buffers: u64,
    pub clients: usize,
    /// Connections blocked in a blocking command.
    pub blocked: usize,
    /// (keys, expires) per db.
    pub dbs: Vec<(u64, u64)>,
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    pub table_mem: u64,
    /// Process-wide, so not summed: [`gather`] sets it once.
    pub mem: MemStats,
    /// Per-command latency histograms (id, histogram): filled by INFO only when it shows
    /// `latencystats` ([`gather_hists`]).
    pub lat_hist: Vec<(usize, crate::latency::Hdr)>,
    /// Each thread's own figures, in thread order (`/metrics`' `{thread="N"}` series): one
    /// shard per thread, so skew between them is skew between shards.
    pub per_thread: Vec<ThreadLoad>,
}

/// One thread's (and its shard's) share of the totals.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadLoad {
    pub commands_processed: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub clients: usize,
    pub blocked: usize,
    pub keys: u64,
    pub table_mem: u64,
    /// CPU time of the thread (user + system), in microseconds.
    pub cpu_usec: u64,
}

impl Totals {
    pub fn keys(&self) -> u64 {
        self.dbs.iter().map(|d| d.0).sum()
    }
    pub fn expires(&self) -> u64 {
        self.dbs.iter().map(|d| d.1).sum()
    }
    /// Calls of write commands: our stand-in for Redis's dirty counter.
    pub fn write_calls(&self) -> u64 {
        let by_id = entries_by_id();
        self.cmd
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                by_id
                    .get(*i)
                    .and_then(|e| *e)
                    .is_some_and(|e| e.spec.flags & flags::WRITE != 0)
            })
            .map(|(_, c)| c.calls)
            .sum()
    }

    /// (full command name, counters) of the registered commands whose counters pass `keep`, in
    /// command-id order.
    pub fn named_cmd_stats(&self, keep: impl Fn(&CmdStat) -> bool) -> Vec<(&'static str, CmdStat)> {
        let by_id = entries_by_id();
        self.cmd
            .iter()
            .enumerate()
            .filter(|(_, c)| keep(c))
            .filter_map(|(i, c)| {
                by_id
                    .get(i)
                    .and_then(|e| *e)
                    .map(|e| (e.fullname.as_str(), *c))
            })
            .collect()
    }

    /// Adds another snapshot's counters (`mem` is left alone).
    pub fn add(&mut self, s: Totals) {
        self.threads += s.threads;
        self.commands_processed += s.commands_processed;
        self.net_input_bytes += s.net_input_bytes;
        self.net_output_bytes += s.net_output_bytes;
        add_elementwise(&mut self.cmd, &s.cmd, |d, c| {
            d.calls += c.calls;
            d.usec += c.usec;
            d.rejected += c.rejected;
            d.failed += c.failed;
        });
        for (k, v) in s.errors {
            *self.errors.entry(k).or_insert(0) += v;
        }
        self.total_error_replies += s.total_error_replies;
        self.internal_errors += s.internal_errors;
        self.obuf_limit_disconnections += s.obuf_limit_disconnections;
        self.qbuf_limit_disconnections += s.qbuf_limit_disconnections;
        self.max_input_buffer = self.max_input_buffer.max(s.max_input_buffer);
        self.max_output_buffer = self.max_output_buffer.max(s.max_output_buffer);
        self.input_buffers += s.input_buffers;
        self.output_buffers += s.output_buffers;
        self.clients += s.clients;
        self.blocked += s.blocked;
        add_elementwise(&mut self.dbs, &s.dbs, |d, x| {
            d.0 += x.0;
            d.1 += x.1;
        });
        self.hits += s.hits;
        self.misses += s.misses;
        self.expired += s.expired;
        self.table_mem += s.table_mem;
        self.per_thread.extend(s.per_thread);
    }
}

/// `into[i] += from[i]` (by `add`), growing `into` with defaults to `from`'s length.
fn add_elementwise<T: Default + Clone>(into: &mut Vec<T>, from: &[T], add: impl Fn(&mut T, &T)) {
    if into.len() < from.len() {
        into.resize(from.len(), T::default());
    }
    for (d, x) in into.iter_mut().zip(from) {
        add(d, x);
    }
}

/// Takes a snapshot of every thread's counters.
pub async fn gather(cx: &ConnCtx) -> Totals {
    cx.worker.settle().await;
    // Memory first, as Redis reads used_memory before building INFO: the per-thread snapshots
    // below are transient allocations of their own (command tables: kilobytes). The backlog
    // lets go of what replicas no longer hold first, so that used_memory and
    // mem_not_counted_for_evict describe the same moment.
    crate::replication::master().trim();
    let mem = mem_stats();
    let snaps = cx
        .worker
        .broadcast(|w| {
            let st = w.stats();
            let shard = w.shard();
            let mut s = Totals {
                threads: 1,
                commands_processed: st.commands_processed,
                net_input_bytes: st.net_input_bytes,
                net_output_bytes: st.net_output_bytes,
                cmd: st.cmd.clone(),
                errors: st.errors.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                total_error_replies: st.total_error_replies,
                internal_errors: st.internal_errors,
                obuf_limit_disconnections: st.obuf_limit_disconnections,
                qbuf_limit_disconnections: st.qbuf_limit_disconnections,
                clients: crate::client::local_clients(),
                blocked: w.parked() + crate::engine::pause::waiting_here(),
                ..Totals::default()
            };
            crate::client::for_each_local(|_, h| {
                let info = h.info.borrow();
                let (input, output) = (info.mem.qbuf + info.mem.qbuf_free, info.mem.omem());
                s.max_input_buffer = s.max_input_buffer.max(input);
                s.max_output_buffer = s.max_output_buffer.max(output);
                s.input_buffers += input as u64;
                s.output_buffers += output as u64;
            });
            for db in &shard.dbs {
                s.dbs.push((db.len() as u64, db.expires_len() as u64));
                s.hits += db.stats.hits;
                s.misses += db.stats.misses;
                s.expired += db.stats.expired;
                s.table_mem += db.table_mem() as u64;
            }
            let (sys, user) = crate::process::sysinfo::cpu_usec(libc::RUSAGE_THREAD);
            s.per_thread.push(ThreadLoad {
                commands_processed: s.commands_processed,
                net_input_bytes: s.net_input_bytes,
                net_output_bytes: s.net_output_bytes,
                clients: s.clients,
                blocked: s.blocked,
                keys: s.keys(),
                table_mem: s.table_mem,
                cpu_usec: sys + user,
            });
            s
        })
        .await;
    let mut t = Totals {
        mem,
        ..Totals::default()
    };
    for s in snaps {
        t.add(s);
    }
    t
}

/// Registry entries (top-level and subcommands) indexed by their dense id.
pub fn entries_by_id() -> Vec<Option<&'static Entry>> {
    let reg = registry();
    let mut out: Vec<Option<&'static Entry>> = vec![None; reg.count];
    for e in reg.by_name.values() {
        if let Some(slot) = out.get_mut(e.id) {
            *slot = Some(e);
        }
        for s in e.subs.values() {
            if let Some(slot) = out.get_mut(s.id) {
                *slot = Some(s);
            }
        }
    }
    out
}

/// Every thread's per-command latency histograms summed, as (id, histogram) in id order, of the
/// commands that have one (LATENCY HISTOGRAM, INFO latencystats).
pub async fn gather_hists(cx: &ConnCtx) -> Vec<(usize, crate::latency::Hdr)> {
    let per = cx
        .worker
        .broadcast(|w| {
            w.stats()
                .lat_hist
                .iter()
                .enumerate()
                .filter_map(|(i, h)| h.as_ref().map(|h| (i, (**h).clone())))
                .collect::<Vec<_>>()
        })
        .await;
    let mut all: BTreeMap<usize, crate::latency::Hdr> = BTreeMap::new();
    for (i, h) in per.into_iter().flatten() {
        match all.get_mut(&i) {
            Some(d) => d.add(&h),
            None => {
                all.insert(i, h);
            }
        }
    }
    all.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(calls: u64) -> CmdStat {
        CmdStat {
            calls,
            usec: calls * 10,
            rejected: 1,
            failed: 2,
        }
    }

    #[test]
    fn add_sums_and_widens() {
        let mut t = Totals::default();
        t.add(Totals {
            threads: 1,
            commands_processed: 5,
            cmd: vec![cmd(1)],
            errors: [("ERR".to_string(), 2)].into(),
            clients: 3,
            dbs: vec![(4, 1)],
            hits: 7,
            table_mem: 100,
            ..Totals::default()
        });
        t.add(Totals {
            threads: 1,
            commands_processed: 6,
            cmd: vec![cmd(2), cmd(3)],
            errors: [("ERR".to_string(), 1), ("WRONGTYPE".to_string(), 4)].into(),
            blocked: 1,
            dbs: vec![(1, 0), (2, 2)],
            misses: 8,
            table_mem: 50,
            per_thread: vec![ThreadLoad {
                keys: 3,
                ..ThreadLoad::default()
            }],
            ..Totals::default()
        });
        assert_eq!(t.threads, 2);
        assert_eq!(t.commands_processed, 11);
        assert_eq!(t.cmd.len(), 2);
        assert_eq!((t.cmd[0].calls, t.cmd[0].usec), (3, 30));
        assert_eq!((t.cmd[0].rejected, t.cmd[0].failed), (2, 4));
        assert_eq!(t.cmd[1].calls, 3);
        assert_eq!(t.errors["ERR"], 3);
        assert_eq!(t.errors["WRONGTYPE"], 4);
        assert_eq!((t.clients, t.blocked), (3, 1));
        assert_eq!(t.dbs, vec![(5, 1), (2, 2)]);
        assert_eq!((t.keys(), t.expires()), (7, 3));
        assert_eq!((t.hits, t.misses, t.table_mem), (7, 8, 150));
        // Per-thread figures are kept apart, in the order the threads were added.
        assert_eq!(t.per_thread.len(), 1);
        assert_eq!(t.per_thread[0].keys, 3);
    }
}
