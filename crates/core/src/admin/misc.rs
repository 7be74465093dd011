//! TIME, LASTSAVE, SHUTDOWN, SLOWLOG, LATENCY.

use std::sync::atomic::Ordering;

use crate::clock;
use crate::commands::connection::help_reply;
use crate::commands::util::*;
use crate::commands::{BoxFut, ConnCtx};
use crate::stats::SlowEntry;

pub fn time(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let us = clock::unix_us();
    cx.reply.array(2);
    cx.reply.bulk_int((us / 1_000_000) as i64);
    cx.reply.bulk_int((us % 1_000_000) as i64);
}

pub fn lastsave(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let t = cx.shared().persist.last_save.load(Ordering::Relaxed);
    cx.reply.int(t as i64);
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. On success the connection just closes.
pub fn shutdown<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(shutdown_async(cx, args))
}

async fn shutdown_async(cx: &mut ConnCtx, args: &[&[u8]]) {
    let (mut nosave, mut save, mut abort, mut force, mut now) = (false, false, false, false, false);
    for a in &args[1..] {
        if eq_ic(a, "nosave") {
            nosave = true;
        } else if eq_ic(a, "save") {
            save = true;
        } else if eq_ic(a, "now") {
            now = true;
        } else if eq_ic(a, "force") {
            force = true;
        } else if eq_ic(a, "abort") {
            abort = true;
        } else {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
    }
    if (nosave && save) || (abort && args.len() != 2) {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    if abort {
        if crate::replication::abort_shutdown() {
            cx.reply.ok();
        } else {
            cx.reply.error("ERR No shutdown in progress.");
        }
        return;
    }
    // The shutdown begins here, as Redis's prepareForShutdown (even if it fails later).
    crate::process::supervise::stopping();
    // `shutdown-timeout`: lagging replicas first get their chance (not with NOW).
    cx.flush_before_block();
    if !crate::replication::before_shutdown(&cx.shared().config, now).await {
        cx.reply.error("ERR Errors trying to SHUTDOWN. Check logs.");
        return;
    }
    // As Redis: SAVE saves; without NOSAVE, configured save points save too.
    let points = !crate::persistence::commands::save_points(&cx.shared().config).is_empty();
    if save || (points && !nosave) {
        if let Err(e) = crate::persistence::commands::shutdown_save(cx).await {
            crate::log_warning!("Error trying to save the DB: {e}");
            if !force {
                crate::process::supervise::status("Error trying to save the DB, can't exit.");
                crate::log_warning!(
                    "Errors trying to shut down the server. Check the logs for more information."
                );
                cx.reply.error("ERR Errors trying to SHUTDOWN. Check logs.");
                crate::engine::pause::shutdown_pause(false);
                return;
            }
        }
    }
    crate::log_warning!("User requested shutdown...");
    // No new connection once this one is seen to close.
    crate::net::listener::on_accepting_thread(&cx.worker, |_| crate::net::listener::stop_all())
        .await;
    crate::request_shutdown(cx.shared());
    cx.close = true;
}

// ---------------------------------------------------------------------------------------------
// SLOWLOG.

pub fn slowlog_get<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if args.len() > 3 {
            cx.reply.error(
                "ERR unknown subcommand or wrong number of arguments for 'get'. Try SLOWLOG HELP.",
            );
            return;
        }
        let mut count = 10usize;
        if args.len() == 3 {
            match parse_i64(args[2]) {
                Some(-1) => count = usize::MAX,
                Some(v) if v >= 0 => count = v as usize,
                _ => {
                    cx.reply
                        .error("ERR count should be greater than or equal to -1");
                    return;
                }
            }
        }
        let max = cx.shared().config.slowlog_max_len();
        let per = cx
            .worker
            .broadcast(move |w| {
                w.stats()
                    .slowlog
                    .iter()
                    .take(count.min(max))
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .await;
        let mut all: Vec<SlowEntry> = per.into_iter().flatten().collect();
        all.sort_by_key(|e| std::cmp::Reverse(e.id));
        all.truncate(count.min(max));
        let r = &mut cx.reply;
        r.array(all.len());
        for e in all {
            r.array(6);
            r.int(e.id as i64);
            r.int(e.unix_secs as i64);
            r.int(e.usec as i64);
            r.array(e.args.len());
            for a in &e.args {
                r.bulk(a);
            }
            r.bulk_str(&e.addr);
            r.bulk_str(&e.name);
        }
    })
}

pub fn slowlog_len<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let per = cx.worker.broadcast(|w| w.stats().slowlog.len()).await;
        let max = cx.shared().config.slowlog_max_len();
        cx.reply.int(per.iter().sum::<usize>().min(max) as i64);
    })
}

pub fn slowlog_reset<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        cx.worker.broadcast(|w| w.stats().slowlog.clear()).await;
        cx.reply.ok();
    })
}

pub fn slowlog_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// LATENCY (crate::latency: the events are process-wide, the histograms per thread).

pub fn latency_doctor(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let cfg = &cx.shared().config;
    let hz = cfg.hz();
    let report = crate::latency::doctor_now(cfg.slowlog_slower_than(), hz);
    cx.reply.verbatim("txt", report.as_bytes());
}

pub fn latency_latest(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let events = crate::latency::events();
    let r = &mut cx.reply;
    r.array(events.len());
    for (name, ts) in &events {
        let last = ts.last();
        r.array(4);
        r.bulk_str(name);
        r.int(last.time);
        r.int(last.latency as i64);
        r.int(ts.max as i64);
    }
}

pub fn latency_history(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some((_, ts)) = crate::latency::event(args[2]) else {
        cx.reply.empty_array();
        return;
    };
    let samples: Vec<_> = ts.samples().collect();
    let r = &mut cx.reply;
    r.array(samples.len());
    for s in samples {
        r.array(2);
        r.int(s.time);
        r.int(s.latency as i64);
    }
}

pub fn latency_reset(cx: &mut ConnCtx, args: &[&[u8]]) {
    let n = if args.len() == 2 {
        crate::latency::reset(None)
    } else {
        args[2..]
            .iter()
            .map(|e| crate::latency::reset(Some(e)))
            .sum()
    };
    cx.reply.int(n as i64);
}

pub fn latency_graph(cx: &mut ConnCtx, args: &[&[u8]]) {
    match crate::latency::event(args[2]) {
        Some((name, ts)) => {
            let g = crate::latency::graph_now(&name, &ts);
            cx.reply.verbatim("txt", g.as_bytes());
        }
        None => error_parts(
            &mut cx.reply,
            &[
                b"ERR No samples available for event '",
                cstr(args[2], 128),
                b"'",
            ],
        ),
    }
}

/// LATENCY HISTOGRAM [command ...]: Redis's `latencyAllCommandsFillCDF` /
/// `latencySpecificCommandsFillCDF` (a container names itself and its subcommands; unknown
/// names are skipped).
pub fn latency_histogram<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let hists = super::stats_snapshot::gather_hists(cx).await;
        let by_id = super::stats_snapshot::entries_by_id();
        let hist_of = |id: usize| hists.iter().find(|(i, _)| *i == id).map(|(_, h)| h);
        let mut rows: Vec<(&str, &crate::latency::Hdr)> = Vec::new();
        if args.len() == 2 {
            for (i, h) in &hists {
                if let Some(e) = by_id.get(*i).and_then(|e| *e) {
                    rows.push((e.static_name, h));
                }
            }
        } else {
            let reg = crate::commands::registry();
            for name in &args[2..] {
                let mut parts = name.splitn(2, |&c| c == b'|');
                let base = parts.next().unwrap_or_default();
                let entry = match (reg.lookup(base), parts.next()) {
                    (Some(e), None) => Some(e),
                    (Some(e), Some(sub)) if !e.subs.is_empty() => e.sub(sub),
                    _ => None,
                };
                let Some(e) = entry else { continue };
                if let Some(h) = hist_of(e.id) {
                    rows.push((e.static_name, h));
                }
                let mut subs: Vec<_> = e.subs.values().collect();
                subs.sort_by_key(|s| s.id);
                for s in subs {
                    if let Some(h) = hist_of(s.id) {
                        rows.push((s.static_name, h));
                    }
                }
            }
        }
        let r = &mut cx.reply;
        r.map(rows.len());
        for (name, h) in rows {
            r.bulk_str(name);
            r.map(2);
            r.bulk_str("calls");
            r.int(h.total as i64);
            r.bulk_str("histogram_usec");
            let cdf = h.cdf();
            r.map(cdf.len());
            for (usec, n) in cdf {
                r.int(usec);
                r.int(n as i64);
            }
        }
    })
}

pub fn latency_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
}
