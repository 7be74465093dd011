//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH (Redis 7.0 semantics and texts).
//!
//! - MULTI: later commands are checked (existence, arity, auth, NO_MULTI) and queued as owned
//!   arguments; a check failure replies the error and marks the transaction, so EXEC answers
//!   EXECABORT.
//! - EXEC: one transaction (see `commands::coordinator`) over the keys of every queued command plus the
//!   WATCHed keys (shared). A barrier hop on every involved shard waits until every earlier
//!   conflicting transaction has finished there; after it no conflicting write can slip in
//!   before the queued commands run, so the WATCH dirty flag is final. Then each queued command
//!   runs through `execute` inside the transaction.
//! - WATCH: each key is registered on its shard's `Db` with the connection's dirty flag; every
//!   write to the key sets the flag (see `engine::db`). The flag lives as long as the WATCH
//!   session: UNWATCH/EXEC/DISCARD/RESET/close drop it and the registrations die with it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::coordinator::LockPlan;
use super::spec::prelude::*;
use super::util::OwnedArgs;
use super::{flags, BoxFut, ConnCtx, Entry, Handler};
use crate::engine::db::WatchFlag;

const G: Group = Group::Transactions;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | RUNS_IN_MULTI, NOKEYS, Local(multi))
        .doc(G, "1.2.0", "Starts a transaction."),
    cmd("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | RUNS_IN_MULTI | REJECT_EXECABORT, NOKEYS, Conn(exec))
        .doc(G, "1.2.0", "Executes all commands in a transaction."),
    cmd("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | RUNS_IN_MULTI, NOKEYS, Local(discard))
        .doc(G, "2.0.0", "Discards a transaction."),
    cmd("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | RUNS_IN_MULTI, range(1, -1, 1), Conn(watch))
        .doc(G, "2.2.0", "Monitors changes to keys to determine the execution of a transaction."),
    cmd("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NOKEYS, Local(unwatch))
        .doc(G, "2.2.0", "Forgets about watched keys of a transaction."),
];

/// Commands queued since MULTI.
#[derive(Default)]
pub struct MultiState {
    pub cmds: Vec<(OwnedArgs, &'static CommandSpec)>,
    /// A command was rejected while queueing (Redis CLIENT_DIRTY_EXEC): EXEC answers EXECABORT.
    pub aborted: bool,
    /// Bytes the queued commands hold (CLIENT LIST `multi-mem`).
    pub mem: usize,
}

/// What one queued command holds besides its arguments (its entry in the queue).
const QUEUED_OVERHEAD: usize = std::mem::size_of::<(OwnedArgs, &'static CommandSpec)>();
/// What one watched key holds besides its name: its entry here and the watcher entry in the
/// shard's watch list.
const WATCHED_OVERHEAD: usize = std::mem::size_of::<(usize, Box<[u8]>)>() + 32;

/// (db, key) pairs.
type WatchedKeys = Vec<(usize, Box<[u8]>)>;

/// One WATCH session of a connection.
pub struct WatchState {
    pub flag: WatchFlag,
    /// (db, key) of every watched key, in WATCH order, without duplicates.
    pub keys: WatchedKeys,
    /// Bytes the watched keys hold here and in the shards' watch lists (client eviction
    /// counts them, as Redis counts its watched-key list).
    pub mem: usize,
}

impl WatchState {
    fn dirty(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

/// Marks the transaction being queued as failed (a command was rejected).
#[inline]
pub fn flag(cx: &mut ConnCtx) {
    if let Some(m) = cx.multi.as_mut() {
        m.aborted = true;
    }
}

/// Leaves MULTI and forgets watched keys (DISCARD, RESET, after EXEC).
pub fn discard_state(cx: &mut ConnCtx) {
    cx.multi = None;
    cx.watch = None;
    set_client_multi(cx, -1);
}

/// EXEC itself rejected before running (wrong arity, NOAUTH): like Redis's
/// `execCommandAbort`, the transaction is discarded and the error says why.
pub fn exec_abort(cx: &mut ConnCtx, id: usize, why: &str) {
    discard_state(cx);
    cx.reply.error(&format!(
        "EXECABORT Transaction discarded because of: {why}"
    ));
    let mut st = cx.worker.stats();
    st.cmd_mut(id).rejected += 1;
    *st.errors.entry("EXECABORT".to_string()).or_insert(0) += 1;
    st.total_error_replies += 1;
}

fn set_client_multi(cx: &ConnCtx, n: i64) {
    let mut info = cx.client.info.borrow_mut();
    info.multi = n;
    // CLIENT LIST flag 'x': in a MULTI/EXEC context.
    info.set_flag('x', n >= 0);
}

/// Inside MULTI: queues the command (or refuses it) and returns true, or returns false for the
/// commands that run at once (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
pub fn queue(cx: &mut ConnCtx, top: &'static Entry, entry: &'static Entry, args: &[&[u8]]) -> bool {
    if top.spec.flags & RUNS_IN_MULTI != 0 {
        return false;
    }
    if entry.spec.flags & NO_MULTI != 0 {
        cx.reply
            .error("ERR Command not allowed inside a transaction");
        let mut st = cx.worker.stats();
        st.cmd_mut(entry.id).rejected += 1;
        *st.errors.entry("ERR".to_string()).or_insert(0) += 1;
        st.total_error_replies += 1;
        drop(st);
        flag(cx);
        return true;
    }
    cx.cmd_name = entry.static_name;
    let n = match cx.multi.as_mut() {
        Some(m) => {
            // No point in keeping commands of a transaction that can only abort.
            if !m.aborted {
                let owned = OwnedArgs::new(args);
                m.mem += owned.heap_bytes() + QUEUED_OVERHEAD;
                m.cmds.push((owned, entry.spec));
            }
            m.cmds.len() as i64
        }
        None => return false,
    };
    set_client_multi(cx, n);
    cx.reply.simple("QUEUED");
    true
}

fn multi(cx: &mut ConnCtx, _args: &[&[u8]]) {
    if cx.multi.is_some() {
        cx.reply.error("ERR MULTI calls can not be nested");
        return;
    }
    cx.multi = Some(MultiState::default());
    set_client_multi(cx, 0);
    cx.reply.ok();
}

fn discard(cx: &mut ConnCtx, _args: &[&[u8]]) {
    if cx.multi.is_none() {
        cx.reply.error("ERR DISCARD without MULTI");
        return;
    }
    discard_state(cx);
    cx.reply.ok();
}

fn unwatch(cx: &mut ConnCtx, _args: &[&[u8]]) {
    cx.watch = None;
    cx.reply.ok();
}

fn watch<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if cx.multi.is_some() {
            cx.reply.error("ERR WATCH inside MULTI is not allowed");
            return;
        }
        let db = cx.db;
        let ws = cx.watch.get_or_insert_with(|| WatchState {
            flag: Arc::new(AtomicBool::new(false)),
            keys: Vec::new(),
            mem: 0,
        });
        // No point in watching more keys once the session is dirty.
        if ws.dirty() {
            cx.reply.ok();
            return;
        }
        let mut fresh: Vec<&[u8]> = Vec::with_capacity(args.len() - 1);
        for &k in &args[1..] {
            let dup = ws.keys.iter().any(|(d, w)| *d == db && &w[..] == k) || fresh.contains(&k);
            if !dup {
                fresh.push(k);
            }
        }
        for k in &fresh {
            ws.keys.push((db, (*k).into()));
            ws.mem += k.len() + WATCHED_OVERHEAD;
        }
        let flag = ws.flag.clone();
        cx.hops()
            .per_shard_of(&fresh, 1, move |c, keys, ()| {
                let now = c.now;
                let db = c.db();
                for k in keys {
                    db.watch(k, &flag, now);
                }
            })
            .run()
            .await;
        cx.reply.ok();
    })
}

/// The locks EXEC needs: every queued command's keys in the db it will run in (a queued SELECT
/// switches it: its `plan` hook), whatever the commands' `plan` hooks add (MOVE's and COPY ... DB
/// n's key in the other db, shard-wide locks for SORT's patterns), shard-wide locks for keyless
/// commands that reach shards, and shared locks on watched keys.
fn exec_plan(cx: &ConnCtx, cmds: &[(OwnedArgs, &'static CommandSpec)]) -> LockPlan {
    let threads = cx.threads();
    let mut plan = LockPlan::new(threads, cx.db, cx.shared().config.dbnum());
    for (owned, spec) in cmds {
        let args = owned.slices();
        let tx_global = spec.flags & (TX_GLOBAL_READ | TX_GLOBAL_WRITE) != 0;
        if spec.keys.is_none() && !tx_global && spec.plan.is_none() {
            // Connection-level commands never touch a shard; anything else without keys
            // (RANDOMKEY, SCAN, DEBUG, INFO...) may touch any of them.
            if !matches!(spec.handler, Handler::Local(_)) {
                plan.lock_all_shards(spec.flags & flags::WRITE != 0);
            }
            continue;
        }
        plan.add_command(spec, &args);
    }
    if let Some(w) = &cx.watch {
        for (wdb, k) in &w.keys {
            plan.lock_key(*wdb, k, false);
        }
    }
    plan
}

fn exec<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let Some(m) = cx.multi.take() else {
            cx.reply.error("ERR EXEC without MULTI");
            return;
        };
        if m.aborted {
            set_client_multi(cx, -1);
            cx.watch = None;
            cx.reply
                .error("EXECABORT Transaction discarded because of previous errors.");
            return;
        }
        if cx.watch.as_ref().is_some_and(|w| w.dirty()) {
            set_client_multi(cx, -1);
            cx.watch = None;
            cx.reply.null_array();
            return;
        }
        let plan = exec_plan(cx, &m.cmds);
        let w = cx.worker.clone();
        cx.coord.begin_exec(&w, plan).await;
        // Barrier: a hop on every shard of the transaction, i.e. after every earlier
        // conflicting transaction there. It also checks watched keys that expired since WATCH
        // (only the shard holding a watched key knows it).
        let now = cx.now_ms;
        let watched: Option<(WatchFlag, Arc<WatchedKeys>)> = cx
            .watch
            .as_ref()
            .map(|w| (w.flag.clone(), Arc::new(w.keys.clone())));
        let shards = cx.coord.exec_shards();
        let expired = cx
            .hops()
            .on_shards(&shards, move |c, ()| match &watched {
                Some((flag, keys)) => keys.iter().any(|(db, k)| {
                    c.shard
                        .dbs
                        .get(*db)
                        .is_some_and(|d| d.watched_key_expired(k, flag, now))
                }),
                None => false,
            })
            .run_more()
            .await
            .into_iter()
            .any(|e| e);
        let dirty = expired || cx.watch.as_ref().is_some_and(|w| w.dirty());
        // Unwatch as soon as possible: our own writes need not mark anything.
        cx.watch = None;
        if dirty {
            set_client_multi(cx, -1);
            cx.coord.end_exec(&w);
            cx.reply.null_array();
            return;
        }
        let name = cx.cmd_name;
        cx.reply.array(m.cmds.len());
        for (owned, _) in &m.cmds {
            let args = owned.slices();
            let mark = cx.reply.len();
            Box::pin(super::execute(cx, &args)).await;
            // Every queued command has exactly one element in the EXEC array.
            if cx.reply.len() == mark {
                cx.reply.null();
            }
        }
        cx.coord.end_exec(&w);
        cx.cmd_name = name;
        set_client_multi(cx, -1);
    })
}
