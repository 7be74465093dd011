//! Test-only fault injection: commands that panic at each containment boundary, so integration
//! tests can prove what `engine::guard` promises. Compiled into debug builds and builds with the
//! `fault-injection` feature only; a release build's command table has none of them.
//!
//! - `FAULT.SHARD key`: a single-key shard handler panics on the key's shard (inline, by
//!   message, or inside a squashed pipeline run).
//! - `FAULT.KEYS key [key ...]`: a multi-key write; every shard writes its keys, then the shard
//!   owning the first key panics (a multi-shard transaction with one failing hop).
//! - `FAULT.CONN`: the coordinator itself panics (the connection's thread).
//! - `FAULT.HOPS key [key ...]`: a command that breaks the hop API's contract: after its final
//!   hop (locks released) it issues another; the framework's assertion must catch it.
//! - `FAULT.ENGINE shard`: a panic in engine code outside any command on that shard thread:
//!   the process must exit with `guard::FATAL_EXIT_STATUS`.

use super::spec::prelude::*;
use super::{BoxFut, CmdCtx, ConnCtx};
use crate::engine::db::TtlMode;
use damselfly_types::compact::CompactStr;
use damselfly_types::Value;

const G: Group = Group::Server;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("fault.shard", 2, WRITE, range(1, 1, 1), Shard(shard_panic)).acl(acl::ADMIN | acl::DANGEROUS)
        .doc(G, "1.0.0", "Test only: panics on the key's shard."),
    cmd("fault.keys", -2, WRITE, range(1, -1, 1), Conn(keys_panic)).acl(acl::ADMIN | acl::DANGEROUS)
        .doc(G, "1.0.0", "Test only: writes the keys, then panics on the first key's shard."),
    cmd("fault.conn", 1, 0, NOKEYS, Conn(conn_panic)).acl(acl::ADMIN | acl::DANGEROUS)
        .doc(G, "1.0.0", "Test only: panics in the coordinator."),
    cmd("fault.hops", -2, WRITE, range(1, -1, 1), Conn(hop_after_final)).acl(acl::ADMIN | acl::DANGEROUS)
        .doc(G, "1.0.0", "Test only: hops again after its final hop."),
    cmd("fault.engine", 2, 0, NOKEYS, Local(engine_panic)).acl(acl::ADMIN | acl::DANGEROUS)
        .doc(G, "1.0.0", "Test only: panics in engine code on a shard thread (the process exits)."),
];

fn shard_panic(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    c.reply.array(3); // a partly written reply, which the boundary must discard
    panic!(
        "fault injection: FAULT.SHARD {} on shard {}",
        String::from_utf8_lossy(args[1]),
        c.shard.id
    );
}

/// Sets every key in `keys` to `value` on this shard.
fn write_keys(c: &mut CmdCtx<'_>, keys: &[&[u8]], value: &[u8]) {
    let now = c.now;
    for k in keys {
        c.db().set(
            k,
            Value::str(CompactStr::from_bytes(value)),
            TtlMode::Clear,
            now,
        );
    }
}

fn keys_panic<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let first = args[1].to_vec();
        cx.hops()
            .per_shard(args, move |c, keys, ()| {
                write_keys(c, keys, b"written-before-fault");
                if keys.contains(&&first[..]) {
                    panic!("fault injection: FAULT.KEYS hop on shard {}", c.shard.id);
                }
            })
            .run()
            .await;
        cx.reply.ok();
    })
}

fn conn_panic<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        cx.reply.simple("partial");
        tokio::task::yield_now().await;
        panic!("fault injection: FAULT.CONN on thread {}", cx.worker.id);
    })
}

fn hop_after_final<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        cx.hops()
            .per_shard(args, |c, keys, ()| write_keys(c, keys, b"final-hop"))
            .run()
            .await;
        // The bug: the locks are gone, so this hop would run unprotected.
        let key = args[1].to_vec();
        cx.hops()
            .on_key(args[1], move |c, ()| {
                let now = c.now;
                c.db().remove(&key, now);
            })
            .run()
            .await;
        cx.reply.ok();
    })
}

fn engine_panic(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some(s) =
        super::util::parse_i64(args[1]).filter(|&s| s >= 0 && (s as usize) < cx.threads())
    else {
        cx.reply.error("ERR shard index out of range");
        return;
    };
    // A bare message, not a hop or call: nothing of a command runs around it. Sent once this
    // reply is out (replies are written after the thread's other ready connections ran).
    let w = cx.worker.clone();
    tokio::task::spawn_local(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        w.shared.post(
            w.id,
            s as usize,
            Box::new(|_| panic!("fault injection: FAULT.ENGINE")),
        );
    });
    cx.reply.ok();
}
