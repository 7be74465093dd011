//! Scripting commands: EVAL EVALSHA EVAL_RO EVALSHA_RO SCRIPT. The interpreter, the script
//! cache and the Lua side of `redis.call` are in `crate::scripting` (docs/design/scripting.md).
//!
//! Atomicity (docs/design/scripting.md): a script runs as one transaction over its declared
//! keys, or, when it has none or is known to reach others, over the whole keyspace (every shard
//! exclusively, after a barrier hop on each: all earlier transactions there are done). Each
//! `redis.call` executes inside that transaction. A declared-keys run whose command reaches
//! outside its locks is stopped, its writes undone from its undo log (nobody saw them: its keys
//! stayed locked), and the script runs again over the whole keyspace, as it will from then on.

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

use damselfly_protocol::{Reply, RespVersion};

use crate::commands::connection::help_reply;
use crate::commands::coordinator::LockPlan;
use crate::commands::dump::KeyImage;
use crate::commands::registry::{registry, Entry};
use crate::commands::spec::prelude::*;
use crate::commands::spec::Handler;
use crate::commands::spec::PlanSink;
use crate::commands::{BoxFut, ConnCtx};
use crate::scripting::{self, functions, Outcome, ScriptFlags, Sha};

const G: Group = Group::Scripting;
const EVAL: u32 = NOSCRIPT
    | SKIP_MONITOR
    | MAY_REPLICATE
    | STALE
    | TX_GLOBAL_WRITE
    | PROP_SELF
    | NO_MANDATORY_KEYS
    | SCRIPT_CALL;
const EVAL_RO: u32 =
    NOSCRIPT | SKIP_MONITOR | STALE | READONLY | TX_GLOBAL_WRITE | NO_MANDATORY_KEYS | SCRIPT_CALL;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("eval", -3, EVAL, keynum(2, 1, 1), Conn(eval)).writes_by(call_writes)
        .doc(G, "2.6.0", "Executes a server-side Lua script."),
    cmd("evalsha", -3, EVAL, keynum(2, 1, 1), Conn(evalsha)).writes_by(call_writes)
        .doc(G, "2.6.0", "Executes a server-side Lua script by SHA1 digest."),
    cmd("eval_ro", -3, EVAL_RO, keynum(2, 1, 1), Conn(eval_ro)).writes_by(call_writes)
        .doc(G, "7.0.0", "Executes a read-only server-side Lua script."),
    cmd("evalsha_ro", -3, EVAL_RO, keynum(2, 1, 1), Conn(evalsha_ro)).writes_by(call_writes)
        .doc(G, "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest."),
    container("script", -2, SCRIPT_SUBS)
        .doc(G, "2.6.0", "A container for Lua scripts management commands."),
    cmd("fcall", -3, EVAL, keynum(2, 1, 1), Conn(fcall)).writes_by(call_writes)
        .doc(G, "7.0.0", "Invokes a function."),
    cmd("fcall_ro", -3, EVAL_RO, keynum(2, 1, 1), Conn(fcall_ro)).writes_by(call_writes)
        .doc(G, "7.0.0", "Invokes a read-only function."),
    container("function", -2, FUNCTION_SUBS)
        .doc(G, "7.0.0", "A container for function commands."),
];

#[rustfmt::skip]
static FUNCTION_SUBS: &[CommandSpec] = &[
    cmd("load", -3, NOSCRIPT | WRITE | DENYOOM, NOKEYS, Conn(function_load))
        .doc(G, "7.0.0", "Creates a library."),
    cmd("delete", 3, NOSCRIPT | WRITE, NOKEYS, Conn(function_delete))
        .doc(G, "7.0.0", "Deletes a library and its functions."),
    cmd("flush", -2, NOSCRIPT | WRITE, NOKEYS, Conn(function_flush))
        .doc(G, "7.0.0", "Deletes all libraries and functions."),
    cmd("list", -2, NOSCRIPT, NOKEYS, Local(function_list))
        .doc(G, "7.0.0", "Returns information about all libraries."),
    cmd("stats", 2, NOSCRIPT | ALLOW_BUSY, NOKEYS, Local(function_stats))
        .doc(G, "7.0.0", "Returns information about a function during execution."),
    cmd("kill", 2, NOSCRIPT | ALLOW_BUSY, NOKEYS, Local(function_kill))
        .doc(G, "7.0.0", "Terminates a function during execution."),
    cmd("dump", 2, NOSCRIPT, NOKEYS, Local(function_dump))
        .doc(G, "7.0.0", "Dumps all libraries into a serialized binary payload."),
    cmd("restore", -3, NOSCRIPT | WRITE | DENYOOM, NOKEYS, Conn(function_restore))
        .doc(G, "7.0.0", "Restores all libraries from a payload."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(function_help))
        .doc(G, "7.0.0", "Returns helpful text about the different subcommands."),
];

#[rustfmt::skip]
static SCRIPT_SUBS: &[CommandSpec] = &[
    cmd("load", 3, NOSCRIPT | STALE, NOKEYS, Conn(script_load))
        .doc(G, "2.6.0", "Loads a server-side Lua script to the script cache."),
    cmd("exists", -3, NOSCRIPT | STALE, NOKEYS, Local(script_exists))
        .doc(G, "2.6.0", "Determines whether server-side Lua scripts exist in the script cache."),
    cmd("flush", -2, NOSCRIPT, NOKEYS, Conn(script_flush))
        .doc(G, "2.6.0", "Removes all server-side Lua scripts from the script cache."),
    cmd("kill", 2, NOSCRIPT | ALLOW_BUSY, NOKEYS, Local(script_kill))
        .doc(G, "2.6.0", "Terminates a server-side Lua script during execution."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(script_help))
        .doc(G, "5.0.0", "Returns helpful text about the different subcommands."),
];

fn eval<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    eval_generic(cx, args, false, false)
}

fn evalsha<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    eval_generic(cx, args, true, false)
}

fn eval_ro<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    eval_generic(cx, args, false, true)
}

fn evalsha_ro<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    eval_generic(cx, args, true, true)
}

/// The SHA1 hex of `arg` as Redis compares script ids (lower case; anything else is unknown).
/// Does this script call write, as CLIENT PAUSE WRITE judges it (Redis's
/// `evalGetCommandFlags`, `fcallGetCommandFlags`)? The _RO forms never; a script with a
/// shebang unless it says `no-writes`; one without a shebang, or not found, may replicate;
/// a function by its flags.
fn call_writes(spec: &CommandSpec, args: &[&[u8]]) -> bool {
    if spec.flags & READONLY != 0 {
        return false;
    }
    let Some(arg) = args.get(1) else {
        return true;
    };
    let body = match spec.name {
        "fcall" => {
            return functions::find(&String::from_utf8_lossy(arg))
                .is_none_or(|(_, info)| !info.flags.no_writes);
        }
        "evalsha" => match sha_arg(arg).and_then(|s| scripting::cached(&s)) {
            Some(b) => b,
            None => return true,
        },
        _ => Arc::from(*arg),
    };
    match scripting::parse_shebang(&body) {
        Ok((f, _)) if f.shebang => !f.no_writes,
        _ => true,
    }
}

fn sha_arg(arg: &[u8]) -> Option<Sha> {
    if arg.len() != 40 {
        return None;
    }
    let mut sha = [0u8; 40];
    for (d, &c) in sha.iter_mut().zip(arg) {
        *d = c.to_ascii_lowercase();
    }
    Some(sha)
}

/// `numkeys` of EVAL/FCALL (argument 2) checked against the arguments, with Redis's errors
/// (`not_int`: the reply when it is not a number). None: the error was replied.
fn numkeys(cx: &mut ConnCtx, args: &[&[u8]], not_int: &str) -> Option<usize> {
    let Some(n) = crate::commands::util::parse_i64(args[2]) else {
        cx.reply.error(not_int);
        return None;
    };
    if n > (args.len() - 3) as i64 {
        cx.reply
            .error("ERR Number of keys can't be greater than number of args");
        return None;
    }
    if n < 0 {
        cx.reply.error("ERR Number of keys can't be negative");
        return None;
    }
    Some(n as usize)
}

/// EVAL, EVAL_RO, EVALSHA, EVALSHA_RO: the script by id (compiled on this thread already, or
/// from the cache) or by body (added to every thread's cache first, when new). A script that
/// runs to its end without waiting (the common case) runs here and now, outside any future
/// (see `run_entry`).
fn eval_generic<'a>(
    cx: &'a mut ConnCtx,
    args: &'a [&'a [u8]],
    by_sha: bool,
    ro: bool,
) -> BoxFut<'a> {
    let ready = || -> BoxFut<'a> { Box::pin(std::future::ready(())) };
    let Some(numkeys) = numkeys(cx, args, crate::commands::util::ERR_NOT_INT) else {
        return ready();
    };
    let (keys, argv) = args[3..].split_at(numkeys);
    let (script, new_body) = if by_sha {
        match by_id(cx, args[1]) {
            Some(c) => (c, None),
            None => return ready(),
        }
    } else {
        let sha = scripting::sha1_hex(args[1]);
        let (body, new) = match scripting::cached(&sha) {
            Some(body) => (body, false),
            None => (Arc::from(args[1]), true),
        };
        match scripting::compile(&sha, &body) {
            Ok(c) => (c, new.then_some((sha, body))),
            Err(e) => {
                cx.reply.error(&format!("ERR {e}"));
                return ready();
            }
        }
    };
    let run = move |cx: &'a mut ConnCtx| -> BoxFut<'a> {
        let Some(read_only) = admit(cx, script.flags, ro) else {
            return Box::pin(std::future::ready(()));
        };
        let (name, flags) = (script.name.clone(), script.flags);
        run_entry(cx, args, keys, name, flags, read_only, move |cx| {
            start_script(cx, &script, keys, argv)
        })
    };
    match new_body {
        None => run(cx),
        Some((sha, body)) => Box::pin(async move {
            scripting::cache_add(&cx.worker, sha, body).await;
            run(cx).await
        }),
    }
}

/// What every run of a script or function needs besides its start: its command, declared
/// keys, name (SHA or function name), flags, and whether it may only read.
#[derive(Clone, Copy)]
struct Call<'a> {
    command: &'a [&'a [u8]],
    keys: &'a [&'a [u8]],
    name: &'a str,
    flags: ScriptFlags,
    read_only: bool,
}

impl<'a> Call<'a> {
    fn of(
        command: &'a [&'a [u8]],
        keys: &'a [&'a [u8]],
        name: &'a str,
        flags: ScriptFlags,
        read_only: bool,
    ) -> Call<'a> {
        Call {
            command,
            keys,
            name,
            flags,
            read_only,
        }
    }
}

/// Runs a script or function (`start` makes it go; `name` is its SHA or function name):
/// synchronously when it may (`run_quick`: most scripts then end before this returns, and the
/// future returned is an empty one), else through `run_script`.
#[allow(clippy::too_many_arguments)]
fn run_entry<'a, F: scripting::Reusable + 'a>(
    cx: &'a mut ConnCtx,
    command: &'a [&'a [u8]],
    keys: &'a [&'a [u8]],
    name: std::rc::Rc<str>,
    flags: ScriptFlags,
    read_only: bool,
    start: impl Fn(&mut ConnCtx) -> scripting::Running<F> + 'a,
) -> BoxFut<'a> {
    if quick_ok(cx, keys, &name) {
        let call = Call::of(command, keys, &name, flags, read_only);
        match run_quick(cx, call, &start) {
            Quick::Done => return Box::pin(std::future::ready(())),
            Quick::Started(mut run, first) => {
                return Box::pin(async move {
                    let outcome = drive(cx, &mut run, first).await;
                    let call = Call::of(command, keys, &name, flags, read_only);
                    conclude(cx, *run, outcome, call).await;
                })
            }
            Quick::Busy => {}
        }
    }
    Box::pin(async move {
        let call = Call::of(command, keys, &name, flags, read_only);
        run_script(cx, call, start).await
    })
}

/// The script with id `arg`: compiled on this thread already, else compiled now from this
/// thread's cache. None: the error (NOSCRIPT, a compile error) was replied.
fn by_id(cx: &mut ConnCtx, arg: &[u8]) -> Option<std::rc::Rc<scripting::Compiled>> {
    let found = sha_arg(arg).and_then(|sha| {
        scripting::compiled(&sha)
            .map(Ok)
            .or_else(|| scripting::cached(&sha).map(|body| scripting::compile(&sha, &body)))
    });
    match found {
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            cx.reply.error(&format!("ERR {e}"));
            None
        }
        None => {
            cx.reply
                .error("NOSCRIPT No matching script. Please use EVAL.");
            None
        }
    }
}

/// The checks of a script's flags before it runs (`ro`: an _RO command). Some(read_only) when
/// it may run; None: the refusal was replied.
fn admit(cx: &mut ConnCtx, flags: ScriptFlags, ro: bool) -> Option<bool> {
    if flags.shebang && !flags.no_writes && ro {
        cx.reply
            .error("ERR Can not execute a script with write flag using *_ro command.");
        return None;
    }
    if flags.shebang {
        if let Some(e) = replication_refusal(cx, flags.no_writes, flags.allow_stale) {
            cx.reply.error(e);
            return None;
        }
    }
    if flags.shebang && !flags.no_writes && !flags.allow_oom {
        let maxmemory = cx.worker.shared.config.maxmemory();
        if maxmemory != 0 && crate::engine::memory::over_limit(maxmemory) {
            cx.reply
                .error("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'");
            return None;
        }
    }
    Some(ro || flags.no_writes)
}

fn start_script(
    cx: &mut ConnCtx,
    script: &scripting::Compiled,
    keys: &[&[u8]],
    argv: &[&[u8]],
) -> scripting::Running<scripting::Pooled> {
    scripting::start(
        script,
        script.name.clone(),
        keys,
        argv,
        busy_threshold(cx),
        cx.started,
    )
}

/// Runs a script or function (`start` makes it go) as one transaction, serving its
/// redis.calls, and replies its result. See the module docs for the two ways it locks: its
/// declared keys, or the whole keyspace.
async fn run_script<F: scripting::Reusable>(
    cx: &mut ConnCtx,
    call: Call<'_>,
    start: impl Fn(&mut ConnCtx) -> scripting::Running<F>,
) {
    // MONITOR shows the script's command before the commands it runs (the command itself is
    // SKIP_MONITOR, so `record_call` does not show it after), as Redis does.
    if crate::pubsub::monitor::active() {
        crate::commands::feed_monitors(cx, call.command);
    }
    if try_declared(cx, call.keys, call.name) && run_once(cx, call, true, &start).await == Ran::Done
    {
        return;
    }
    run_once(cx, call, false, &start).await;
}

/// Does the script try its declared keys' locks first? Not inside EXEC (the transaction is
/// EXEC's: it locked everything for the script), nor with one shard (the whole keyspace is
/// that shard: locking only the declared keys would buy no parallelism and cost the undo log),
/// nor once it was seen touching other keys.
fn try_declared(cx: &ConnCtx, keys: &[&[u8]], name: &str) -> bool {
    !cx.coord.in_exec() && !keys.is_empty() && cx.threads() > 1 && !needs_global(name)
}

/// May the script run by `run_quick`: under its own whole-keyspace transaction, with no MONITOR
/// to show it to?
fn quick_ok(cx: &ConnCtx, keys: &[&[u8]], name: &str) -> bool {
    !cx.coord.in_exec() && !try_declared(cx, keys, name) && !crate::pubsub::monitor::active()
}

#[derive(PartialEq, Eq)]
enum Ran {
    Done,
    /// The script touched more than its declared keys: it was stopped, what it wrote undone,
    /// and it must run again under the whole-keyspace lock.
    StartOver,
}

thread_local! {
    /// Scripts (by name: SHA or function) known to touch undeclared keys: they run under the
    /// whole-keyspace lock from the start.
    static NEEDS_GLOBAL: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

fn needs_global(name: &str) -> bool {
    NEEDS_GLOBAL.with(|n| n.borrow().contains(name))
}

/// How much a declared-keys run may copy for its undo log before the script is run under the
/// whole-keyspace lock instead (from then on: copying large values on every run would cost
/// more than the lock).
const UNDO_LIMIT: usize = 64 * 1024;

/// A script started inside its transaction: what `drive` runs and `conclude` ends.
struct ScriptRun<F> {
    running: scripting::Running<F>,
    state: RefCell<CallState>,
    /// The thread's script slot (see `scripting::slot`).
    _slot: scripting::slot::Held,
    saved_name: &'static str,
    saved_db: usize,
    was_in_script: bool,
    /// The script's own transaction (not EXEC's).
    own_tx: bool,
}

/// Starts the script (`start`) once its transaction is active and it holds the slot.
fn begin_run<F: scripting::Reusable>(
    cx: &mut ConnCtx,
    slot: scripting::slot::Held,
    call: Call<'_>,
    declared: bool,
    own_tx: bool,
    start: &impl Fn(&mut ConnCtx) -> scripting::Running<F>,
) -> ScriptRun<F> {
    let Call {
        command,
        keys,
        name,
        flags,
        read_only,
    } = call;
    let saved_name = cx.cmd_name;
    // A SELECT inside the script changes the script's database, not the caller's.
    let saved_db = cx.db;
    let state = RefCell::new(CallState {
        read_only,
        flags,
        read: false,
        dirty: false,
        declared: declared.then(|| Declared {
            db: cx.db,
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            images: Vec::new(),
            image_bytes: 0,
        }),
    });
    // SAFETY: `name` and `command` outlive the script: the run is concluded (ending it) by
    // the caller that holds them.
    unsafe { scripting::busy::describe(name, command) };
    let was_in_script = std::mem::replace(&mut cx.in_script, true);
    if !cx.acl.user.unrestricted {
        scripting::RUN.with(|r| *r.user.borrow_mut() = Some(cx.acl.user.clone()));
    }
    let running = start(cx);
    ScriptRun {
        running,
        state,
        _slot: slot,
        saved_name,
        saved_db,
        was_in_script,
        own_tx,
    }
}

/// Queues a transaction started unqueued, before the script first waits.
fn queue(cx: &mut ConnCtx) {
    if let Some((id, locks, sl)) = cx.coord.take_unqueued() {
        crate::engine::vll::enqueue_started(&cx.worker, id, locks, sl);
    }
}

/// Runs the script until it ends, serving its commands. None: a declared-keys run touched
/// another key, and must start over (see `Ran::StartOver`). `first`: what a first poll made
/// elsewhere (`run_quick`) returned, if it returned.
async fn drive<F: scripting::Reusable>(
    cx: &mut ConnCtx,
    run: &mut ScriptRun<F>,
    mut first: Option<scripting::Step>,
) -> Option<Outcome> {
    let w = cx.worker.clone();
    loop {
        let step = match first.take() {
            Some(step) => step,
            None => {
                // (Taken out while the script runs, given back if it never waited.)
                let parts = cx.coord.take_unqueued();
                let mut driver = Driver {
                    cx: &mut *cx,
                    state: &run.state,
                };
                let inline = driver.inline();
                match parts {
                    None => run.running.next(Some(inline)).await,
                    Some((id, locks, sl)) => {
                        // Queued the moment the script stops without a command for us (a busy
                        // script lets other clients in): nothing else may run here unqueued.
                        let mut fut = std::pin::pin!(run.running.next(Some(inline)));
                        let mut parts = Some((id, locks, sl));
                        let step = std::future::poll_fn(|c| {
                            let r = std::future::Future::poll(fut.as_mut(), c);
                            if r.is_pending() {
                                if let Some((id, locks, sl)) = parts.take() {
                                    crate::engine::vll::enqueue_started(&w, id, locks, sl);
                                }
                            }
                            r
                        })
                        .await;
                        if let Some((_, locks, sl)) = parts {
                            cx.coord.keep_unqueued(locks, sl);
                        }
                        step
                    }
                }
            }
        };
        match step {
            scripting::Step::Call(req) => {
                queue(cx);
                let argv: Vec<&[u8]> = req.args.iter().map(|a| a.as_slice()).collect();
                if !declared_ok(cx, &run.state, &argv)
                    || !Box::pin(take_images(cx, &run.state, &argv)).await
                {
                    return None;
                }
                let reply = Box::pin(script_call(cx, &run.state, req.args.clone())).await;
                let _ = req.done.send(reply);
            }
            scripting::Step::Done(o) => return Some(o),
        }
    }
}

/// Ends a run whose script ended (`outcome`): the caller's state back, the reply, tracking,
/// the transaction's end.
fn finish<F: scripting::Reusable>(
    cx: &mut ConnCtx,
    run: ScriptRun<F>,
    outcome: Outcome,
    command: &[&[u8]],
) {
    let (state, own_tx, _slot) = run.wind_up(cx);
    match outcome {
        Outcome::Value(v) => {
            let resp3 = scripting::RUN.with(|r| r.resp3.get());
            cx.error_counted = scripting::convert::lua_to_reply(&v, &mut cx.reply, resp3);
        }
        Outcome::Error(msg, counted) => {
            cx.reply.error(&msg);
            cx.error_counted = counted;
        }
    }
    // Client-side caching: a script that read tracks its declared keys (Redis 7), registered
    // while the script's locks still hold.
    if state.read && cx.client.special.get() && crate::commands::tracks_reads(cx) {
        if let Some(entry) = registry().lookup(command[0]) {
            crate::commands::track_keys(cx, entry.spec, command);
        }
    }
    if own_tx {
        let w = cx.worker.clone();
        cx.coord.end_exec(&w);
    }
}

impl<F> ScriptRun<F> {
    /// Ends the script's coroutine and puts back the caller's command name, database and
    /// script state; returns what the run's calls recorded, whether the run owns its
    /// transaction (the caller ends it), and the script slot (held until the caller lets go).
    fn wind_up(self, cx: &mut ConnCtx) -> (CallState, bool, scripting::slot::Held) {
        cx.cmd_name = self.saved_name;
        cx.db = self.saved_db;
        cx.in_script = self.was_in_script;
        if !cx.acl.user.unrestricted {
            scripting::RUN.with(|r| *r.user.borrow_mut() = None);
        }
        drop(self.running);
        (self.state.into_inner(), self.own_tx, self._slot)
    }
}

/// `finish`, or for a run that must start over (`outcome` None): what it wrote undone, the
/// script remembered as needing the whole keyspace, the transaction ended.
async fn conclude<F: scripting::Reusable>(
    cx: &mut ConnCtx,
    run: ScriptRun<F>,
    outcome: Option<Outcome>,
    call: Call<'_>,
) -> Ran {
    let Some(outcome) = outcome else {
        // Start over under the whole-keyspace lock: nobody saw what this run wrote (its keys
        // stayed locked); put it back, then let go.
        let (state, own_tx, _slot) = run.wind_up(cx);
        let images = state.declared.map(|d| d.images).unwrap_or_default();
        // Its replication records go with it (a declared-keys run owns its transaction).
        cx.coord.drop_group();
        Box::pin(undo(cx, images)).await;
        NEEDS_GLOBAL.with(|n| n.borrow_mut().insert(call.name.to_string()));
        if own_tx {
            let w = cx.worker.clone();
            cx.coord.end_exec(&w);
        }
        return Ran::StartOver;
    };
    finish(cx, run, outcome, call.command);
    Ran::Done
}

/// What `run_quick` did.
enum Quick<F> {
    /// The script ran to its end and was replied.
    Done,
    /// It started, and goes on asynchronously: `drive` from the step its first poll made (if
    /// it made one), then `conclude`.
    Started(Box<ScriptRun<F>>, Option<scripting::Step>),
    /// Nothing done: the shard or the script slot is not free; the general way waits for them.
    Busy,
}

/// Runs the script synchronously, outside any future, when its transaction can start
/// unqueued on this thread's free shard and the script slot is free: a script that ends
/// without waiting (most) is replied before this returns. The layers of futures a script's run
/// otherwise goes through cost more than the Lua of a short script. Requires `quick_ok`.
fn run_quick<F: scripting::Reusable>(
    cx: &mut ConnCtx,
    call: Call<'_>,
    start: &impl Fn(&mut ConnCtx) -> scripting::Running<F>,
) -> Quick<F> {
    let Some(slot) = scripting::slot::try_take() else {
        return Quick::Busy;
    };
    let w = cx.worker.clone();
    let mut plan = LockPlan::new(cx.threads(), cx.db, w.shared.config.dbnum());
    plan.lock_all_shards(true);
    if cx.coord.begin_exec_unqueued(&w, plan).is_err() {
        return Quick::Busy;
    }
    let mut run = begin_run(cx, slot, call, false, true, start);
    let mut driver = Driver {
        cx: &mut *cx,
        state: &run.state,
    };
    match run.running.poll_now(Some(driver.inline())) {
        Some(scripting::Step::Done(outcome)) => {
            finish(cx, run, outcome, call.command);
            Quick::Done
        }
        Some(step) => Quick::Started(Box::new(run), Some(step)),
        None => {
            // It waits: queued now, as `drive` does.
            queue(cx);
            Quick::Started(Box::new(run), None)
        }
    }
}

async fn run_once<F: scripting::Reusable>(
    cx: &mut ConnCtx,
    call: Call<'_>,
    declared: bool,
    start: &impl Fn(&mut ConnCtx) -> scripting::Running<F>,
) -> Ran {
    let w = cx.worker.clone();
    let own_tx = !cx.coord.in_exec();
    if own_tx {
        let mut plan = LockPlan::new(cx.threads(), cx.db, w.shared.config.dbnum());
        if declared {
            for k in call.keys {
                plan.lock_key(cx.db, k, !call.read_only);
            }
        } else {
            plan.lock_all_shards(true);
        }
        // On a free shard of its own, the transaction starts without being queued (most
        // scripts never wait: they end before anything else runs here); see
        // `Coord::begin_exec_unqueued`.
        let plan = if declared {
            Err(plan)
        } else {
            cx.coord.begin_exec_unqueued(&w, plan)
        };
        if let Err(plan) = plan {
            // Boxed, as the other waits below that most scripts never reach: the handler's
            // future (allocated and moved per script) stays small.
            Box::pin(cx.coord.begin_exec(&w, plan)).await;
            // A hop on every shard of the transaction: every earlier conflicting transaction
            // there is done (see the module docs). On this thread's shard alone that is a
            // check.
            if !cx.coord.try_start_local(&w) {
                let shards = cx.coord.exec_shards();
                Box::pin(cx.hops().on_shards(&shards, |_, ()| ()).run_more()).await;
            }
        }
    }
    // One script at a time per thread (its interpreter's globals, KEYS and ARGV among them,
    // are the running script's), taken once the transaction is active: the holder never waits
    // for another transaction, so waiting for it cannot close a cycle.
    let slot = match scripting::slot::try_take() {
        Some(h) => h,
        None => {
            queue(cx);
            Box::pin(scripting::slot::take()).await
        }
    };
    let mut run = begin_run(cx, slot, call, declared, own_tx, start);
    let outcome = drive(cx, &mut run, None).await;
    conclude(cx, run, outcome, call).await
}

/// A declared-keys run: its keys and database, and the undo log of what it wrote.
struct Declared {
    db: usize,
    keys: HashSet<Vec<u8>>,
    /// The keys' states before the run's first write to each (see `take_images`).
    images: Vec<(Vec<u8>, KeyImage)>,
    image_bytes: usize,
}

/// Calls `f` with every key of command `spec` in `args`.
fn each_key(spec: &CommandSpec, args: &[&[u8]], mut f: impl FnMut(&[u8]) -> bool) -> bool {
    if let Some((first, last, step)) = spec.keys.range(args.len()) {
        (first..=last).step_by(step).all(|i| f(args[i]))
    } else {
        spec.keys.positions(args).into_iter().all(|i| f(args[i]))
    }
}

/// The command's registry entry (its subcommand's for a container), as a script's
/// redis.call finds it.
pub(crate) fn resolve(args: &[&[u8]]) -> Option<&'static Entry> {
    let top = registry().lookup(args[0])?;
    if top.spec.subcommands.is_empty() || args.len() < 2 {
        Some(top)
    } else {
        top.sub(args[1])
    }
}

/// May the script's command run under its declared keys' locks (always, for a
/// whole-keyspace run)? Not when it names another key, works on the keyspace at large
/// (SCAN, RANDOMKEY, KEYS, FLUSHDB...) or in another database.
fn declared_ok(cx: &ConnCtx, state: &RefCell<CallState>, args: &[&[u8]]) -> bool {
    let st = state.borrow();
    let Some(d) = &st.declared else {
        return true;
    };
    let Some(entry) = resolve(args) else {
        // Unknown: the command's checks answer it.
        return true;
    };
    let spec = entry.spec;
    if spec.flags & (TX_GLOBAL_READ | TX_GLOBAL_WRITE) != 0 || spec.plan.is_some() {
        return false;
    }
    if spec.keys.is_none() {
        // Keyless: fine unless it reads or writes data (SCAN, RANDOMKEY).
        return spec.flags & (READONLY | WRITE) == 0;
    }
    cx.db == d.db && each_key(spec, args, |k| d.keys.contains(k))
}

/// Before a write of a declared-keys run: the undo log gets the state of each key the command
/// names that the run has not written yet. False when the log would grow past `UNDO_LIMIT`:
/// the script starts over under the whole-keyspace lock.
async fn take_images(cx: &mut ConnCtx, state: &RefCell<CallState>, args: &[&[u8]]) -> bool {
    let needed: Vec<Vec<u8>> = {
        let st = state.borrow();
        let Some(d) = &st.declared else {
            return true;
        };
        if d.image_bytes > UNDO_LIMIT {
            return false;
        }
        let Some(entry) = resolve(args) else {
            return true;
        };
        if entry.spec.flags & WRITE == 0 {
            return true;
        }
        let mut v = Vec::new();
        each_key(entry.spec, args, |k| {
            if !d.images.iter().any(|(i, _)| i == k) && !v.iter().any(|x: &Vec<u8>| x == k) {
                v.push(k.to_vec());
            }
            true
        });
        v
    };
    for key in needed {
        let k = key.clone();
        let image = cx
            .hops()
            .on_key(&key, move |c, ()| crate::commands::dump::key_image(c, &k))
            .run_more()
            .await;
        let mut st = state.borrow_mut();
        let d = st.declared.as_mut().expect("declared run");
        d.image_bytes += image.as_ref().map_or(0, |(b, _)| b.len()) + key.len();
        d.images.push((key, image));
        if d.image_bytes > UNDO_LIMIT {
            return false;
        }
    }
    true
}

/// `take_images` for keys on this thread's shard, without a future; false (the caller goes the
/// asynchronous way) for a key elsewhere or past `UNDO_LIMIT`.
fn take_images_inline(cx: &mut ConnCtx, state: &RefCell<CallState>, args: &[&[u8]]) -> bool {
    let mut st = state.borrow_mut();
    let Some(d) = &mut st.declared else {
        return true;
    };
    let Some(entry) = resolve(args) else {
        return true;
    };
    if entry.spec.flags & WRITE == 0 {
        return true;
    }
    let threads = cx.threads();
    let me = cx.worker.id;
    each_key(entry.spec, args, |k| {
        if d.images.iter().any(|(i, _)| i == k) {
            return true;
        }
        if crate::engine::shard_of(k, threads) != me {
            return false;
        }
        let Some(image) =
            crate::commands::inline_hop(cx, |c| crate::commands::dump::key_image(c, k))
        else {
            return false;
        };
        d.image_bytes += image.as_ref().map_or(0, |(b, _)| b.len()) + k.len();
        d.images.push((k.to_vec(), image));
        d.image_bytes <= UNDO_LIMIT
    })
}

/// Puts back what a declared-keys run wrote (its keys are still locked: nobody saw it).
async fn undo(cx: &mut ConnCtx, images: Vec<(Vec<u8>, KeyImage)>) {
    for (key, image) in images.into_iter().rev() {
        let k = key.clone();
        cx.hops()
            .on_key(&key, move |c, ()| {
                crate::commands::dump::restore_image(c, &k, image)
            })
            .run_more()
            .await;
    }
}

/// `busy-reply-threshold` (`lua-time-limit`) in ms: how long a script runs before others get
/// `-BUSY` (0: never).
fn busy_threshold(cx: &ConnCtx) -> u64 {
    cx.worker.shared.config.lua_time_limit()
}

/// What the running script did so far, for the per-command checks.
struct CallState {
    read_only: bool,
    flags: ScriptFlags,
    /// A read-only command ran (then a tracking caller tracks the script's declared keys).
    read: bool,
    /// A write ran (Redis's SCRIPT_WRITE_DIRTY): later writes are no longer refused for the
    /// server's state.
    dirty: bool,
    /// A run under its declared keys' locks only (`None`: under the whole-keyspace lock).
    declared: Option<Declared>,
}

/// One `redis.call` (Redis's `scriptCall`): the checks scripts get, then the command itself
/// through `execute`, inside the script's transaction. Returns the reply in the script's
/// protocol.
async fn script_call(
    cx: &mut ConnCtx,
    state: &std::cell::RefCell<CallState>,
    args: Vec<Vec<u8>>,
) -> Vec<u8> {
    let argv: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let resp3 = scripting::RUN.with(|r| r.resp3.get());
    let mut reply = Reply::new(if resp3 {
        RespVersion::Resp3
    } else {
        RespVersion::Resp2
    });
    if let Err(msg) = check_call(cx, state, &argv) {
        reply.error(msg);
        return reply.take();
    }
    let saved = std::mem::replace(&mut cx.reply, reply);
    Box::pin(crate::commands::execute(cx, &argv)).await;
    let mut reply = std::mem::replace(&mut cx.reply, saved);
    reply.take()
}

/// What the synchronous redis.call path needs, borrowed for one poll of the script.
struct Driver<'a, 'b> {
    cx: &'a mut ConnCtx,
    state: &'b std::cell::RefCell<CallState>,
}

impl Driver<'_, '_> {
    /// The synchronous path for the script's calls, valid while this driver is alive and
    /// unmoved (the poll it is made for).
    fn inline(&mut self) -> scripting::Inline {
        scripting::Inline {
            run: inline_call,
            data: self as *mut Driver as *mut (),
        }
    }
}

/// `scripting::InlineFn` for `Driver`: `script_call` without a future, for a command
/// `execute_inline` runs; `None` sends the command the asynchronous way.
///
/// # Safety
/// `data` is the `Driver` run_script registered for the poll in progress.
unsafe fn inline_call(data: *mut (), args: &[&[u8]]) -> Option<Vec<u8>> {
    let d = unsafe { &mut *(data as *mut Driver) };
    let cx = &mut *d.cx;
    let resp3 = scripting::RUN.with(|r| r.resp3.get());
    let mut reply = Reply::new(if resp3 {
        RespVersion::Resp3
    } else {
        RespVersion::Resp2
    });
    reply.buf = scripting::reply_buf();
    let entry = match check_call(cx, d.state, args) {
        Ok(e) => e,
        Err(msg) => {
            reply.error(msg);
            return Some(reply.take());
        }
    };
    // A declared-keys run takes the slow path to start over, or when its undo log needs a key
    // elsewhere.
    if !declared_ok(cx, d.state, args) || !take_images_inline(cx, d.state, args) {
        return None;
    }
    let saved = std::mem::replace(&mut cx.reply, reply);
    let ran = crate::commands::execute_inline(cx, entry, args);
    let mut reply = std::mem::replace(&mut cx.reply, saved);
    ran.then(|| reply.take())
}

/// The script-side checks of one `redis.call` (Redis's `scriptCall`); the command's entry
/// when it may run.
fn check_call(
    cx: &ConnCtx,
    state: &std::cell::RefCell<CallState>,
    args: &[&[u8]],
) -> Result<&'static Entry, &'static str> {
    let Some(entry) = resolve(args) else {
        crate::commands::count_rejected(cx, None, "ERR");
        return Err("ERR Unknown Redis command called from script");
    };
    // Redis's scriptVerifyACL: the script's user may run this command on these keys.
    if !cx.acl.user.unrestricted {
        if let Err(msg) = crate::acl::commands::script_gate(cx, entry, args) {
            crate::commands::count_rejected(cx, Some(entry.id), "ERR");
            return Err(msg);
        }
    }
    if let Err(msg) = check_entry(cx, state, entry.spec, args) {
        // Redis's scriptCall: a refused command counts as rejected, its error in the error
        // statistics.
        let code = msg.split(' ').next().unwrap_or("ERR");
        crate::commands::count_rejected(cx, Some(entry.id), code);
        return Err(msg);
    }
    Ok(entry)
}

fn check_entry(
    cx: &ConnCtx,
    state: &std::cell::RefCell<CallState>,
    spec: &CommandSpec,
    args: &[&[u8]],
) -> Result<(), &'static str> {
    let argc = args.len() as i32;
    if (spec.arity > 0 && argc != spec.arity)
        || (spec.arity < 0 && argc < -spec.arity)
        || (matches!(spec.handler, Handler::Container) && args.len() < 2)
    {
        return Err("ERR Wrong number of args calling Redis command from script");
    }
    if spec.flags & NOSCRIPT != 0
        && !scripting::DENY_SCRIPT_OFF.load(std::sync::atomic::Ordering::Relaxed)
    {
        return Err("ERR This Redis command is not allowed from script");
    }
    let mut st = state.borrow_mut();
    if spec.flags & READONLY != 0 {
        st.read = true;
    }
    let writes = spec.flags & (WRITE | MAY_REPLICATE) != 0;
    if st.read_only && writes {
        return Err("ERR Write commands are not allowed from read-only scripts.");
    }
    if spec.flags & WRITE != 0 {
        // Redis's scriptVerifyWriteCommandAllow.
        if let Some(r) = crate::commands::repl_refusal(cx, true, false) {
            return Err(r.error());
        }
    }
    if spec.flags & WRITE != 0 {
        if !st.dirty
            && spec.flags & DENYOOM != 0
            && !st.flags.allow_oom
            && cx.worker.shared.config.maxmemory() != 0
            && crate::engine::memory::over_limit(cx.worker.shared.config.maxmemory())
        {
            return Err("OOM command not allowed when used memory > 'maxmemory'.");
        }
        st.dirty = true;
        scripting::busy::note_write();
    }
    // Redis's scriptVerifyAllowStale: a script may run on a stale replica (`allow-stale`, or
    // EVAL without flags), the commands it calls only if they may.
    if spec.flags & STALE == 0 && crate::commands::repl_refusal(cx, false, true).is_some() {
        return Err("ERR Can not execute the command on a stale replica");
    }
    Ok(())
}

/// Why replication refuses to start a script with these flags (Redis's
/// `scriptPrepareForRun`, [`crate::commands::repl_refusal`]): a write script on a read-only
/// replica or without enough good replicas, any script but `allow-stale` ones on a replica
/// whose link is down with `replica-serve-stale-data no`.
fn replication_refusal(cx: &ConnCtx, no_writes: bool, allow_stale: bool) -> Option<&'static str> {
    use crate::commands::{repl_refusal, ReplRefusal};
    match repl_refusal(cx, !no_writes, !allow_stale)? {
        // A client's own call gets what Redis's processCommand answers for a command its
        // script flags make a write; the script's own check (script.c) speaks only for a call
        // processCommand did not see: one queued in MULTI before the server became a replica.
        ReplRefusal::ReadOnly if cx.coord.in_exec() => {
            Some("READONLY Can not run script with write flag on readonly replica")
        }
        r => Some(r.error()),
    }
}

async fn script_load_inner(cx: &mut ConnCtx, body: &[u8]) {
    let sha = scripting::sha1_hex(body);
    if let Err(e) = scripting::parse_shebang(body) {
        cx.reply.error(&format!("ERR {e}"));
        return;
    }
    if let Err(e) = scripting::compile(&sha, body) {
        cx.reply.error(&format!("ERR {e}"));
        return;
    }
    scripting::cache_add(&cx.worker, sha, Arc::from(body)).await;
    cx.reply.bulk(&sha);
}

fn script_load<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(script_load_inner(cx, args[2]))
}

fn script_exists(cx: &mut ConnCtx, args: &[&[u8]]) {
    cx.reply.array(args.len() - 2);
    for a in &args[2..] {
        let found = sha_arg(a).is_some_and(|s| scripting::cached(&s).is_some());
        cx.reply.int(found as i64);
    }
}

fn script_flush<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if args.len() > 3
            || (args.len() == 3
                && !args[2].eq_ignore_ascii_case(b"async")
                && !args[2].eq_ignore_ascii_case(b"sync"))
        {
            cx.reply
                .error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            return;
        }
        let w: Rc<crate::engine::Worker> = cx.worker.clone();
        scripting::cache_flush(&w).await;
        cx.reply.ok();
    })
}

fn script_kill(cx: &mut ConnCtx, _args: &[&[u8]]) {
    match scripting::busy::kill(false) {
        Ok(()) => cx.reply.ok(),
        Err(e) => cx.reply.error(e),
    }
}

fn function_kill(cx: &mut ConnCtx, _args: &[&[u8]]) {
    match scripting::busy::kill(true) {
        Ok(()) => cx.reply.ok(),
        Err(e) => cx.reply.error(e),
    }
}

fn script_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
}

fn fcall<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    fcall_generic(cx, args, false)
}

fn fcall_ro<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    fcall_generic(cx, args, true)
}

/// FCALL / FCALL_RO function numkeys key... arg...
fn fcall_generic<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]], ro: bool) -> BoxFut<'a> {
    let ready = || -> BoxFut<'a> { Box::pin(std::future::ready(())) };
    let name = String::from_utf8_lossy(args[1]).into_owned();
    let Some((lib, info)) = functions::find(&name) else {
        cx.reply.error("ERR Function not found");
        return ready();
    };
    let Some(numkeys) = numkeys(cx, args, "ERR Bad number of keys provided") else {
        return ready();
    };
    if ro && !info.flags.no_writes {
        cx.reply
            .error("ERR Can not execute a script with write flag using *_ro command.");
        return ready();
    }
    if let Some(e) = replication_refusal(cx, info.flags.no_writes, info.flags.allow_stale) {
        cx.reply.error(e);
        return ready();
    }
    if !info.flags.no_writes && !info.flags.allow_oom {
        let maxmemory = cx.worker.shared.config.maxmemory();
        if maxmemory != 0 && crate::engine::memory::over_limit(maxmemory) {
            cx.reply
                .error("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'");
            return ready();
        }
    }
    let name: std::rc::Rc<str> = info.name.as_str().into();
    let callback = match functions::callback(&lib, &name) {
        Ok(f) => f,
        Err(e) => {
            cx.reply.error(&format!("ERR {e}"));
            return ready();
        }
    };
    let (keys, argv) = args[3..].split_at(numkeys);
    let read_only = ro || info.flags.no_writes;
    let start_name = name.clone();
    run_entry(cx, args, keys, name, info.flags, read_only, move |cx| {
        scripting::start_function(
            &callback,
            start_name.clone(),
            keys,
            argv,
            busy_threshold(cx),
            cx.started,
        )
    })
}

fn function_load<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let mut replace = false;
        let mut i = 2;
        while i < args.len() - 1 {
            if args[i].eq_ignore_ascii_case(b"replace") {
                replace = true;
            } else {
                cx.reply.error(&format!(
                    "ERR Unknown option given: {}",
                    String::from_utf8_lossy(args[i])
                ));
                return;
            }
            i += 1;
        }
        if i >= args.len() || (replace && args.len() == 3) {
            cx.reply.error("ERR Function code is missing");
            return;
        }
        let code = String::from_utf8_lossy(args[args.len() - 1]).into_owned();
        match functions::prepare(&code, replace) {
            Ok(lib) => {
                let name = lib.name.clone();
                functions::install(&cx.worker, vec![lib], false).await;
                cx.reply.bulk(name.as_bytes());
            }
            Err(e) => cx.reply.error(&format!("ERR {e}")),
        }
    })
}

fn function_delete<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let name = String::from_utf8_lossy(args[2]).into_owned();
        if !functions::all().iter().any(|l| l.name == name) {
            cx.reply.error("ERR Library not found");
            return;
        }
        functions::remove(&cx.worker, Some(name)).await;
        cx.reply.ok();
    })
}

fn function_flush<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if args.len() > 3 {
            cx.reply.error("ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.");
            return;
        }
        if args.len() == 3
            && !args[2].eq_ignore_ascii_case(b"async")
            && !args[2].eq_ignore_ascii_case(b"sync")
        {
            cx.reply
                .error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            return;
        }
        functions::remove(&cx.worker, None).await;
        cx.reply.ok();
    })
}

/// The flags of a function as FUNCTION LIST shows them (a set).
fn flag_names(f: &ScriptFlags) -> Vec<&'static str> {
    let mut v = Vec::new();
    if f.no_writes {
        v.push("no-writes");
    }
    if f.allow_oom {
        v.push("allow-oom");
    }
    if f.allow_stale {
        v.push("allow-stale");
    }
    if f.no_cluster {
        v.push("no-cluster");
    }
    if f.allow_cross_slot {
        v.push("allow-cross-slot-keys");
    }
    v
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn function_list(cx: &mut ConnCtx, args: &[&[u8]]) {
    let (mut with_code, mut pattern) = (false, None::<&[u8]>);
    let mut i = 2;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
        } else if args[i].eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            if i + 1 >= args.len() {
                cx.reply.error("ERR library name argument was not given");
                return;
            }
            pattern = Some(args[i + 1]);
            i += 1;
        } else {
            cx.reply.error(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(args[i])
            ));
            return;
        }
        i += 1;
    }
    let libs: Vec<_> = functions::all()
        .into_iter()
        .filter(|l| {
            pattern.is_none_or(|p| crate::config::glob::matches(p, l.name.as_bytes(), false))
        })
        .collect();
    cx.reply.array(libs.len());
    for lib in libs {
        cx.reply.map(if with_code { 4 } else { 3 });
        cx.reply.bulk(b"library_name");
        cx.reply.bulk(lib.name.as_bytes());
        cx.reply.bulk(b"engine");
        cx.reply.bulk(b"LUA");
        cx.reply.bulk(b"functions");
        cx.reply.array(lib.functions.len());
        for f in &lib.functions {
            cx.reply.map(3);
            cx.reply.bulk(b"name");
            cx.reply.bulk(f.name.as_bytes());
            cx.reply.bulk(b"description");
            match &f.description {
                Some(d) => cx.reply.bulk(d.as_bytes()),
                None => cx.reply.null(),
            }
            cx.reply.bulk(b"flags");
            let names = flag_names(&f.flags);
            cx.reply.set(names.len());
            for n in names {
                cx.reply.simple(n);
            }
        }
        if with_code {
            cx.reply.bulk(b"library_code");
            cx.reply.bulk(lib.code.as_bytes());
        }
    }
}

fn function_stats(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let (libs, funcs) = functions::counts();
    cx.reply.map(2);
    cx.reply.bulk(b"running_script");
    match scripting::busy::running() {
        Some((name, command, ms)) => {
            cx.reply.map(3);
            cx.reply.bulk(b"name");
            cx.reply.bulk(name.as_bytes());
            cx.reply.bulk(b"command");
            cx.reply.array(command.len());
            for a in &command {
                cx.reply.bulk(a);
            }
            cx.reply.bulk(b"duration_ms");
            cx.reply.int(ms as i64);
        }
        None => cx.reply.null(),
    }
    cx.reply.bulk(b"engines");
    cx.reply.map(1);
    cx.reply.bulk(b"LUA");
    cx.reply.map(2);
    cx.reply.bulk(b"libraries_count");
    cx.reply.int(libs as i64);
    cx.reply.bulk(b"functions_count");
    cx.reply.int(funcs as i64);
}

/// Redis's RDB opcode for a function library (its code follows as an RDB string).
const RDB_OPCODE_FUNCTION2: u8 = 245;

/// FUNCTION DUMP: every library as Redis serializes them (opcode, code), with the DUMP footer.
fn function_dump(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let libs = functions::all();
    if libs.is_empty() {
        cx.reply.null();
        return;
    }
    let mut w = damselfly_types::rdb::wire::Writer::new(Vec::new());
    for lib in &libs {
        let _ = w.write_u8(RDB_OPCODE_FUNCTION2);
        let _ = w.write_string(lib.code.as_bytes());
    }
    cx.reply
        .bulk(&damselfly_types::rdb::wire::dump_payload(&w.into_inner()));
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn function_restore<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if args.len() > 4 {
            cx.reply.error("ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.");
            return;
        }
        let policy = match args.get(3) {
            None => "append",
            Some(p) if p.eq_ignore_ascii_case(b"flush") => "flush",
            Some(p) if p.eq_ignore_ascii_case(b"append") => "append",
            Some(p) if p.eq_ignore_ascii_case(b"replace") => "replace",
            Some(_) => {
                cx.reply.error("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.");
                return;
            }
        };
        let Ok((body, _)) = damselfly_types::rdb::wire::verify_dump_payload(args[2], false) else {
            cx.reply
                .error("ERR DUMP payload version or checksum are wrong");
            return;
        };
        let mut r = damselfly_types::rdb::wire::Reader::new(body);
        let mut codes = Vec::new();
        while r.remaining() > 0 {
            match r.read_u8() {
                Ok(RDB_OPCODE_FUNCTION2) => {}
                Ok(_) => {
                    cx.reply.error("ERR given type is not a function");
                    return;
                }
                Err(_) => {
                    cx.reply.error("ERR can not read data type");
                    return;
                }
            }
            match r.read_string_vec() {
                Ok(c) => codes.push(String::from_utf8_lossy(&c).into_owned()),
                Err(_) => {
                    cx.reply
                        .error("ERR failed loading the given functions payload");
                    return;
                }
            }
        }
        // Check every library first (against the libraries that will remain), then install.
        let existing: Vec<String> = functions::all().iter().map(|l| l.name.clone()).collect();
        let mut libs = Vec::new();
        for code in &codes {
            if policy == "append" {
                if let Some(name) = functions::library_name(code) {
                    if existing.contains(&name) {
                        cx.reply
                            .error(&format!("ERR Library {name} already exists"));
                        return;
                    }
                }
            }
            match functions::prepare(code, true) {
                Ok(lib) => {
                    if policy == "append" && existing.contains(&lib.name) {
                        cx.reply
                            .error(&format!("ERR Library {} already exists", lib.name));
                        return;
                    }
                    libs.push(lib);
                }
                Err(e) => {
                    cx.reply.error(&format!("ERR {e}"));
                    return;
                }
            }
        }
        functions::install(&cx.worker, libs, policy == "flush").await;
        cx.reply.ok();
    })
}

fn function_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
}
