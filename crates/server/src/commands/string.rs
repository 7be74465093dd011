//! String commands: GET SET ... (full family being filled in).

use super::util::*;
use super::{cmd, flags::*, CmdCtx, CommandSpec, Handler};
use crate::engine::db::TtlMode;
use crate::types::{CompactStr, Value};

pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "get",
        2,
        READONLY | FAST,
        (1, 1, 1),
        &["@read", "@string", "@fast"],
        "string",
        "Returns the string value of a key.",
        Handler::Shard(get),
    ),
    cmd(
        "set",
        -3,
        WRITE | DENYOOM,
        (1, 1, 1),
        &["@write", "@string", "@slow"],
        "string",
        "Sets the string value of a key.",
        Handler::Shard(set),
    ),
];

fn get(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    match db.get_read(args[1], now) {
        None => cx.reply.null(),
        Some(Value::Str(s)) => {
            let mut b = [0u8; 20];
            cx.reply.bulk(s.bytes(&mut b));
        }
        #[allow(unreachable_patterns)]
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

fn set(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    if args.len() != 3 {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    let now = cx.now;
    cx.db().set(
        args[1],
        Value::Str(CompactStr::from_value(args[2])),
        TtlMode::Clear,
        now,
    );
    cx.reply.ok();
}
