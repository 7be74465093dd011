//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP.

use std::sync::atomic::Ordering;

use crate::commands::connection::help_reply;
use crate::commands::util::*;
use crate::commands::{BoxFut, ConnCtx};
use crate::config::{find_param, ConfigError};

pub fn config_get(cx: &mut ConnCtx, args: &[&[u8]]) {
    let cfg = cx.shared().config.clone();
    let mut out: Vec<(String, String)> = Vec::new();
    for pat in &args[2..] {
        for (name, value) in cfg.get_matching(&[pat]) {
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, value));
            }
        }
    }
    cx.reply.map(out.len());
    for (n, v) in out {
        cx.reply.bulk_str(&n);
        cx.reply.bulk_str(&v);
    }
}

fn set_error(typed: &str, e: &ConfigError) -> String {
    let why = match e {
        ConfigError::UnknownParam(_) => {
            return format!("ERR Unknown option or number of arguments for CONFIG SET - '{typed}'")
        }
        ConfigError::NotImplemented { why, .. } => why.clone(),
        e => e.reason(),
    };
    format!("ERR CONFIG SET failed (possibly related to argument '{typed}') - {why}")
}

/// All-or-nothing: every pair is validated before any is applied.
///
/// Note: connections read parser limits (proto-max-bulk-len) when they connect, so changing
/// them affects new connections only.
pub fn config_set<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let Some((moved, olds)) = set_all(cx, args) else {
            return;
        };
        if moved.is_empty() || relisten(cx, &moved, &olds).await {
            // A new client limit (or a new maxmemory under a percentage) applies at once, as
            // Redis evicts clients before it answers anything else.
            crate::client::evict::reconsider();
            crate::client::evict::evict(&cx.worker).await;
            cx.reply.ok();
        }
    })
}

/// A listener parameter CONFIG SET changed: (canonical name, name as typed, old value).
type Moved = Vec<(&'static str, String, String)>;

/// `port`, `tls-port`, `bind` changed: the listeners they name are bound again on thread 0 (the
/// accepting thread). If that fails the old values come back and are bound again, and the reply
/// is Redis's error; true when it worked.
async fn relisten(cx: &mut ConnCtx, moved: &Moved, olds: &Olds) -> bool {
    use crate::net::listener::{on_accepting_thread, rebind, Port};
    let mut ports: Vec<Port> = Vec::new();
    for (name, _, _) in moved {
        for p in Port::moved_by(name) {
            if !ports.contains(p) {
                ports.push(*p);
            }
        }
    }
    let run = |w: &std::rc::Rc<crate::engine::Worker>, ports: Vec<Port>| {
        on_accepting_thread(w, move |w| rebind(w, ports))
    };
    let Err(e) = run(&cx.worker, ports.clone())
        .await
        .unwrap_or_else(|| Err("the accepting thread is gone".into()))
    else {
        return true;
    };
    crate::log_warning!("CONFIG SET: {e}");
    // Every parameter of the command goes back, not only the listeners (Redis's rollback).
    rollback(&cx.shared().config, olds);
    if let Some(Err(e)) = run(&cx.worker, ports).await {
        crate::log_warning!("CONFIG SET: the previous listeners could not be restored: {e}");
    }
    let (name, typed, _) = &moved[0];
    let why = if *name == "bind" {
        "Failed to bind to specified addresses."
    } else {
        "Unable to listen on this port. Check server logs."
    };
    cx.reply.error(&format!(
        "ERR CONFIG SET failed (possibly related to argument '{typed}') - {why}"
    ));
    false
}

/// Applies CONFIG SET's pairs: None when one was refused (the error is the reply), else the
/// listener parameters among them (see `relisten`) and every parameter's old value.
fn set_all(cx: &mut ConnCtx, args: &[&[u8]]) -> Option<(Moved, Olds)> {
    if !args.len().is_multiple_of(2) {
        cx.reply.error(ERR_SYNTAX);
        return None;
    }
    let cfg = cx.shared().config.clone();
    let pairs: Vec<(String, String)> = args[2..]
        .chunks(2)
        .map(|p| {
            (
                String::from_utf8_lossy(p[0]).into_owned(),
                String::from_utf8_lossy(p[1]).into_owned(),
            )
        })
        .collect();
    // As Redis: names first (unknown, immutable, duplicate), then values.
    let mut seen: Vec<&'static str> = Vec::new();
    for (name, _) in &pairs {
        let Some(p) = find_param(name) else {
            cx.reply
                .error(&set_error(name, &ConfigError::UnknownParam(name.clone())));
            return None;
        };
        if seen.contains(&p.name) {
            cx.reply.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
            ));
            return None;
        }
        seen.push(p.name);
    }
    // Redis's DENY_LOADING_CONFIG parameters wait until the dataset is loaded (the LOADING
    // error takes precedence over a bad value).
    let persist = &cx.shared().persist;
    if (persist.loading.load(std::sync::atomic::Ordering::SeqCst)
        || persist
            .async_loading
            .load(std::sync::atomic::Ordering::SeqCst))
        && seen
            .iter()
            .any(|n| matches!(*n, "appendonly" | "repl-diskless-load" | "dir"))
    {
        cx.reply.error(crate::commands::ERR_LOADING);
        return None;
    }
    let local = cx.client.info.borrow().local;
    for (name, value) in &pairs {
        if let Err(e) = cfg.check_from(name, value, local) {
            cx.reply.error(&set_error(name, &e));
            return None;
        }
    }
    let moved: Moved = pairs
        .iter()
        .filter_map(|(n, _)| {
            let p = find_param(n)?;
            (!crate::net::listener::Port::moved_by(p.name).is_empty())
                .then(|| (p.name, n.clone(), cfg.get(p.name).unwrap_or_default()))
        })
        .collect();
    let olds: Olds = seen
        .iter()
        .map(|n| (*n, cfg.get(n).unwrap_or_default()))
        .collect();
    for (name, value) in &pairs {
        if let Err(e) = cfg.set_from(name, value, local) {
            rollback(&cfg, &olds);
            cx.reply.error(&set_error(name, &e));
            return None;
        }
    }
    // The apply steps, as Redis's apply functions: when one fails, every pair goes back to its
    // old value (what the earlier steps applied too) and the reply names the failing argument.
    if let Err((param, why)) = apply(&cfg, &seen) {
        crate::log_warning!("CONFIG SET: {why}");
        rollback(&cfg, &olds);
        let typed = pairs
            .iter()
            .find(|(n, _)| find_param(n).is_some_and(|p| p.name == param))
            .map_or(param, |(n, _)| n.as_str());
        let why = match param {
            p if p.starts_with("tls-") => "Unable to update TLS configuration. Check server logs.",
            _ => "Failed to set current oom_score_adj. Check server logs.",
        };
        cx.reply.error(&format!(
            "ERR CONFIG SET failed (possibly related to argument '{typed}') - {why}"
        ));
        return None;
    }
    Some((moved, olds))
}

/// The values CONFIG SET's parameters had before it (canonical names).
type Olds = Vec<(&'static str, String)>;

/// Applies what the configuration alone does not: TLS contexts, the OOM score, the backlog's
/// size. Err: the
/// parameter whose apply failed (the first of its kind among `names`), and why.
fn apply(
    cfg: &crate::config::Config,
    names: &[&'static str],
) -> Result<(), (&'static str, String)> {
    if let Some(tls) = names.iter().find(|n| n.starts_with("tls-")) {
        // As Redis's TLS apply function: the new settings are built into a configuration for
        // new connections, or nothing changes.
        crate::net::tls::configure(cfg)
            .map_err(|e| (*tls, format!("Failed to update TLS configuration: {e}")))?;
    }
    if let Some(oom) = names.iter().find(|n| n.starts_with("oom-score-adj")) {
        crate::process::apply_oom_score_adj(&cfg.oom_score_adj(), &cfg.oom_score_adj_values())
            .map_err(|e| (*oom, e))?;
    }
    if names.contains(&"repl-backlog-size") {
        crate::replication::resize_backlog(cfg.repl_backlog_size());
    }
    Ok(())
}

/// Every parameter of a failed CONFIG SET back to its old value, applied again.
fn rollback(cfg: &crate::config::Config, olds: &Olds) {
    for (name, old) in olds {
        let _ = cfg.set(name, old);
    }
    let names: Vec<&'static str> = olds.iter().map(|(n, _)| *n).collect();
    if let Err((_, e)) = apply(cfg, &names) {
        crate::log_warning!(
            "CONFIG SET: the previous configuration could not be applied again: {e}"
        );
    }
}

/// Resets the INFO counters of every thread and shard.
pub fn config_resetstat<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        cx.worker
            .broadcast(|w| {
                w.stats().reset();
                for db in w.shard_mut().dbs.iter_mut() {
                    db.stats = Default::default();
                }
            })
            .await;
        crate::engine::lazyfree::reset_stats();
        let shared = cx.shared();
        shared.total_connections.store(0, Ordering::Relaxed);
        shared.rejected_connections.store(0, Ordering::Relaxed);
        crate::process::sysinfo::reset_peak();
        crate::engine::evict::reset_stats();
        crate::replication::STATS.reset();
        crate::client::evict::EVICTED_CLIENTS.store(0, Ordering::Relaxed);
        cx.reply.ok();
    })
}

pub fn config_rewrite(cx: &mut ConnCtx, _args: &[&[u8]]) {
    match crate::config::rewrite::rewrite(&cx.shared().config, false) {
        Ok(()) => {
            crate::log_notice!("CONFIG REWRITE executed with success.");
            cx.reply.ok()
        }
        Err(e) => {
            crate::log_warning!("CONFIG REWRITE failed: {e}");
            cx.reply.error(&format!("ERR {e}"))
        }
    }
}

pub fn config_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
}
