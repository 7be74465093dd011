//! Generic key commands: DEL EXISTS ... (full family being filled in).

use super::util::*;
use super::{cmd, flags::*, BoxFut, CommandSpec, ConnCtx, Handler};

pub static COMMANDS: &[CommandSpec] = &[
    cmd(
        "del",
        -2,
        WRITE,
        (1, -1, 1),
        &["@keyspace", "@write", "@slow"],
        "generic",
        "Deletes one or more keys.",
        Handler::Conn(del),
    ),
    cmd(
        "exists",
        -2,
        READONLY | FAST,
        (1, -1, 1),
        &["@keyspace", "@read", "@fast"],
        "generic",
        "Determines whether one or more keys exist.",
        Handler::Conn(exists),
    ),
    cmd(
        "dbsize",
        1,
        READONLY | FAST,
        (0, 0, 0),
        &["@keyspace", "@read", "@fast"],
        "server",
        "Returns the number of keys in the database.",
        Handler::Conn(dbsize),
    ),
];

fn del<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let parts = fan_out(cx, args, 1, 1, |c, keys| {
            let now = c.now;
            keys.iter()
                .filter(|k| c.db().remove(k, now).is_some())
                .count() as i64
        })
        .await;
        cx.reply.int(parts.iter().map(|p| p.result).sum());
    })
}

fn exists<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let parts = fan_out(cx, args, 1, 1, |c, keys| {
            let now = c.now;
            keys.iter().filter(|k| c.db().exists(k, now)).count() as i64
        })
        .await;
        cx.reply.int(parts.iter().map(|p| p.result).sum());
    })
}

fn dbsize<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let sizes = on_all_shards(cx, |c| c.db().len() as i64).await;
        cx.reply.int(sizes.iter().sum());
    })
}
