//! Scripting commands: EVAL EVALSHA EVAL_RO EVALSHA_RO SCRIPT. The interpreter, the script
//! cache and the Lua side of `redis.call` are in `crate::scripting` (docs/design/scripting.md).
//!
//! Atomicity: EVAL is declared `TX_GLOBAL_WRITE`, so its lock plan holds every shard
//! exclusively. The handler schedules that plan as one transaction (as EXEC does), waits at a
//! barrier hop on every shard (all earlier transactions there are done), and runs the script;
//! each `redis.call` executes inside that transaction. No other command touches any key until
//! the script ends, whatever keys it declared or not, exactly as on single-threaded Redis.

use std::rc::Rc;
use std::sync::Arc;

use damselfly_protocol::{Reply, RespVersion};

use super::connection::help_reply;
use super::registry::registry;
use super::spec::prelude::*;
use super::spec::Handler;
use super::{BoxFut, ConnCtx};
use crate::scripting::{self, Outcome, ScriptFlags, Sha};

const G: Group = Group::Scripting;
const EVAL: u32 = NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | STALE | TX_GLOBAL_WRITE;
const EVAL_RO: u32 = NOSCRIPT | SKIP_MONITOR | STALE | READONLY | TX_GLOBAL_WRITE;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("eval", -3, EVAL, keynum(2, 1, 1), Conn(eval))
        .doc(G, "2.6.0", "Executes a server-side Lua script."),
    cmd("evalsha", -3, EVAL, keynum(2, 1, 1), Conn(evalsha))
        .doc(G, "2.6.0", "Executes a server-side Lua script by SHA1 digest."),
    cmd("eval_ro", -3, EVAL_RO, keynum(2, 1, 1), Conn(eval_ro))
        .doc(G, "7.0.0", "Executes a read-only server-side Lua script."),
    cmd("evalsha_ro", -3, EVAL_RO, keynum(2, 1, 1), Conn(evalsha_ro))
        .doc(G, "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest."),
    container("script", -2, SCRIPT_SUBS)
        .doc(G, "2.6.0", "A container for Lua scripts management commands."),
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
    Box::pin(eval_generic(cx, args, false, false))
}

fn evalsha<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(eval_generic(cx, args, true, false))
}

fn eval_ro<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(eval_generic(cx, args, false, true))
}

fn evalsha_ro<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(eval_generic(cx, args, true, true))
}

/// The SHA1 hex of `arg` as Redis compares script ids (lower case; anything else is unknown).
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

async fn eval_generic(cx: &mut ConnCtx, args: &[&[u8]], by_sha: bool, ro: bool) {
    let numkeys = match super::util::parse_i64(args[2]) {
        Some(n) => n,
        None => {
            cx.reply.error(super::util::ERR_NOT_INT);
            return;
        }
    };
    if numkeys > (args.len() - 3) as i64 {
        cx.reply
            .error("ERR Number of keys can't be greater than number of args");
        return;
    }
    if numkeys < 0 {
        cx.reply.error("ERR Number of keys can't be negative");
        return;
    }
    let (keys, argv) = args[3..].split_at(numkeys as usize);
    // The script: by id from the cache, or by body (added to every thread's cache first).
    let (sha, body) = if by_sha {
        let found = sha_arg(args[1]).and_then(|s| scripting::cached(&s).map(|b| (s, b)));
        match found {
            Some(x) => x,
            None => {
                cx.reply
                    .error("NOSCRIPT No matching script. Please use EVAL.");
                return;
            }
        }
    } else {
        let sha = scripting::sha1_hex(args[1]);
        let body = scripting::cached(&sha).unwrap_or_else(|| Arc::from(args[1]));
        (sha, body)
    };
    let flags = match scripting::parse_shebang(&body) {
        Ok((f, _)) => f,
        Err(e) => {
            cx.reply.error(&format!("ERR {e}"));
            return;
        }
    };
    let func = match scripting::compile(&sha, &body) {
        Ok(f) => f,
        Err(e) => {
            cx.reply.error(&format!("ERR {e}"));
            return;
        }
    };
    if !by_sha {
        scripting::cache_add(&cx.worker, sha, body.clone()).await;
    }
    if flags.shebang && !flags.no_writes && ro {
        cx.reply
            .error("ERR Can not execute a script with write flag using *_ro command.");
        return;
    }
    if flags.shebang && !flags.no_writes && !flags.allow_oom {
        let maxmemory = cx.worker.shared.config.maxmemory();
        if maxmemory != 0 && crate::engine::memory::over_limit(maxmemory) {
            cx.reply
                .error("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'");
            return;
        }
    }
    let read_only = ro || flags.no_writes;
    let name = String::from_utf8_lossy(&sha).into_owned();

    // One transaction over every shard, unless EXEC already runs one for us.
    let w = cx.worker.clone();
    let own_tx = !cx.coord.in_exec();
    if own_tx {
        let plan = cx.coord.plan().clone();
        cx.coord.begin_exec(&w, plan).await;
        let shards = cx.coord.exec_shards();
        cx.hops().on_shards(&shards, |_, ()| ()).run_more().await;
    }
    let saved_name = cx.cmd_name;
    let state = CallState {
        read_only,
        flags,
        dirty: false,
    };
    let state = std::cell::RefCell::new(state);
    let mut running = scripting::start(&func, name, keys, argv);
    let outcome = loop {
        match running.next().await {
            scripting::Step::Call(req) => {
                let reply = script_call(cx, &state, req.args).await;
                let _ = req.done.send(reply);
            }
            scripting::Step::Done(o) => break o,
        }
    };
    cx.cmd_name = saved_name;
    match outcome {
        Outcome::Value(v) => {
            let resp3 = scripting::RUN.with(|r| r.resp3.get());
            scripting::convert::lua_to_reply(&v, &mut cx.reply, resp3);
        }
        Outcome::Error(msg) => cx.reply.error(&msg),
    }
    drop(running);
    if own_tx {
        cx.coord.end_exec(&w);
    }
}

/// What the running script did so far, for the per-command checks.
struct CallState {
    read_only: bool,
    flags: ScriptFlags,
    /// A write ran (Redis's SCRIPT_WRITE_DIRTY): later writes are no longer refused for the
    /// server's state.
    dirty: bool,
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
    Box::pin(super::execute(cx, &argv)).await;
    let mut reply = std::mem::replace(&mut cx.reply, saved);
    reply.take()
}

fn check_call(
    cx: &ConnCtx,
    state: &std::cell::RefCell<CallState>,
    args: &[&[u8]],
) -> Result<(), &'static str> {
    let reg = registry();
    let Some(top) = reg.lookup(args[0]) else {
        return Err("ERR Unknown Redis command called from script");
    };
    let entry = if top.spec.subcommands.is_empty() || args.len() < 2 {
        Some(top)
    } else {
        top.sub(args[1])
    };
    let Some(entry) = entry else {
        return Err("ERR Unknown Redis command called from script");
    };
    let spec = entry.spec;
    let argc = args.len() as i32;
    if (spec.arity > 0 && argc != spec.arity)
        || (spec.arity < 0 && argc < -spec.arity)
        || (matches!(spec.handler, Handler::Container) && args.len() < 2)
    {
        return Err("ERR Wrong number of args calling Redis command from script");
    }
    if spec.flags & NOSCRIPT != 0 {
        return Err("ERR This Redis command is not allowed from script");
    }
    let mut st = state.borrow_mut();
    let writes = spec.flags & (WRITE | MAY_REPLICATE) != 0;
    if st.read_only && writes {
        return Err("ERR Write commands are not allowed from read-only scripts.");
    }
    if spec.flags & WRITE != 0 {
        if !st.dirty
            && spec.flags & DENYOOM != 0
            && !st.flags.allow_oom
            && !st.flags.shebang
            && cx.worker.shared.config.maxmemory() != 0
            && crate::engine::memory::over_limit(cx.worker.shared.config.maxmemory())
        {
            return Err("OOM command not allowed when used memory > 'maxmemory'.");
        }
        st.dirty = true;
    }
    Ok(())
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
    // A script holds every shard until it ends, and this connection's command could only run
    // between scripts: there is never one to kill here.
    cx.reply.error("NOTBUSY No scripts in execution right now.");
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
