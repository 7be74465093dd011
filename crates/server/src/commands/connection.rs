//! Connection commands: PING ECHO QUIT SELECT (HELLO AUTH RESET CLIENT ... are added here).

use super::util::*;
use super::{cmd, flags::*, CommandSpec, ConnCtx, Handler};

pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "ping",
        -1,
        FAST | STALE,
        (0, 0, 0),
        &["@fast", "@connection"],
        "connection",
        "Returns the server's liveliness response.",
        Handler::Local(ping),
    ),
    cmd(
        "echo",
        2,
        FAST,
        (0, 0, 0),
        &["@fast", "@connection"],
        "connection",
        "Returns the given string.",
        Handler::Local(echo),
    ),
    cmd(
        "quit",
        -1,
        ALLOW_BUSY | NO_AUTH | LOADING | STALE | FAST,
        (0, 0, 0),
        &["@fast", "@connection"],
        "connection",
        "Closes the connection.",
        Handler::Local(quit),
    ),
    cmd(
        "select",
        2,
        LOADING | STALE | FAST,
        (0, 0, 0),
        &["@fast", "@connection"],
        "connection",
        "Changes the selected database.",
        Handler::Local(select),
    ),
];

fn ping(cx: &mut ConnCtx, args: &[&[u8]]) {
    match args.len() {
        1 => cx.reply.simple("PONG"),
        2 => cx.reply.bulk(args[1]),
        _ => cx
            .reply
            .error("ERR wrong number of arguments for 'ping' command"),
    }
}

fn echo(cx: &mut ConnCtx, args: &[&[u8]]) {
    cx.reply.bulk(args[1]);
}

fn quit(cx: &mut ConnCtx, _args: &[&[u8]]) {
    cx.reply.ok();
    cx.close = true;
}

fn select(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some(i) = int_arg(&mut cx.reply, args[1]) else {
        return;
    };
    if i < 0 || i as usize >= cx.shared().config.dbnum() {
        cx.reply.error(ERR_DB_INDEX);
        return;
    }
    cx.db = i as usize;
    cx.reply.ok();
}
