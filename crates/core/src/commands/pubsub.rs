//! Pub/Sub commands: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE SSUBSCRIBE SUNSUBSCRIBE
//! PUBLISH SPUBLISH PUBSUB. How subscriptions and messages travel between threads:
//! `crate::pubsub` (docs/design/pubsub.md).

use super::connection::help_reply;
use super::spec::prelude::*;
use super::{BoxFut, ConnCtx};
use crate::pubsub::{self, Kind};

const G: Group = Group::Pubsub;
const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | PUBSUB_CONTEXT;
const PUB: u32 = PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("subscribe", -2, SUB, NOKEYS, Conn(subscribe))
        .doc(G, "2.0.0", "Listens for messages published to channels."),
    cmd("unsubscribe", -1, SUB, NOKEYS, Conn(unsubscribe))
        .doc(G, "2.0.0", "Stops listening to messages posted to channels."),
    cmd("psubscribe", -2, SUB, NOKEYS, Conn(psubscribe))
        .doc(G, "2.0.0", "Listens for messages published to channels that match one or more patterns."),
    cmd("punsubscribe", -1, SUB, NOKEYS, Conn(punsubscribe))
        .doc(G, "2.0.0", "Stops listening to messages published to channels that match one or more patterns."),
    cmd("ssubscribe", -2, SUB, range(1, -1, 1), Conn(ssubscribe))
        .doc(G, "7.0.0", "Listens for messages published to shard channels."),
    cmd("sunsubscribe", -1, SUB, range(1, -1, 1), Conn(sunsubscribe))
        .doc(G, "7.0.0", "Stops listening to messages posted to shard channels."),
    cmd("publish", 3, PUB, NOKEYS, Conn(publish))
        .doc(G, "2.0.0", "Posts a message to a channel."),
    cmd("spublish", 3, PUB, range(1, 1, 1), Conn(spublish))
        .doc(G, "7.0.0", "Post a message to a shard channel"),
    container("pubsub", -2, PUBSUB_SUBS)
        .doc(G, "2.8.0", "A container for Pub/Sub commands."),
    cmd("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, NOKEYS, Conn(monitor))
        .doc(Group::Server, "1.0.0", "Listens for all requests received by the server in real-time."),
];

#[rustfmt::skip]
static PUBSUB_SUBS: &[CommandSpec] = &[
    cmd("channels", -2, PUBSUB | LOADING | STALE, NOKEYS, Local(pubsub_channels))
        .doc(G, "2.8.0", "Returns the active channels."),
    cmd("numsub", -2, PUBSUB | LOADING | STALE, NOKEYS, Local(pubsub_numsub))
        .doc(G, "2.8.0", "Returns a count of subscribers to channels."),
    cmd("numpat", 2, PUBSUB | LOADING | STALE, NOKEYS, Local(pubsub_numpat))
        .doc(G, "2.8.0", "Returns a count of unique pattern subscriptions."),
    cmd("shardchannels", -2, PUBSUB | LOADING | STALE, NOKEYS, Local(pubsub_shardchannels))
        .doc(G, "7.0.0", "Returns the active shard channels."),
    cmd("shardnumsub", -2, PUBSUB | LOADING | STALE, NOKEYS, Local(pubsub_shardnumsub))
        .doc(G, "7.0.0", "Returns the count of subscribers of shard channels."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(pubsub_help))
        .doc(G, "6.2.0", "Returns helpful text about the different subcommands."),
];

/// What each name costs the subscriber besides its bytes: its entry in the connection's set
/// and in every thread's table (client eviction counts it, as Redis's `pubsubMemOverhead`).
const NAME_OVERHEAD: usize = 48;

fn subscribe<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(add(cx, args, Kind::Channel))
}

fn psubscribe<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(add(cx, args, Kind::Pattern))
}

fn ssubscribe<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(add(cx, args, Kind::Shard))
}

fn unsubscribe<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(remove(cx, args, Kind::Channel))
}

fn punsubscribe<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(remove(cx, args, Kind::Pattern))
}

fn sunsubscribe<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(remove(cx, args, Kind::Shard))
}

/// The confirmation word of each namespace.
fn word(kind: Kind, add: bool) -> &'static [u8] {
    match (kind, add) {
        (Kind::Channel, true) => b"subscribe",
        (Kind::Channel, false) => b"unsubscribe",
        (Kind::Pattern, true) => b"psubscribe",
        (Kind::Pattern, false) => b"punsubscribe",
        (Kind::Shard, true) => b"ssubscribe",
        (Kind::Shard, false) => b"sunsubscribe",
    }
}

/// One confirmation: `[word, name or nil, count]`, a push in RESP3. Confirmations are sent even
/// under CLIENT REPLY OFF (Redis marks them as pushes).
fn confirm(cx: &mut ConnCtx, kind: Kind, add: bool, name: Option<&[u8]>, count: usize) {
    cx.reply.push(3);
    cx.reply.bulk(word(kind, add));
    match name {
        Some(n) => cx.reply.bulk(n),
        None => cx.reply.null(),
    }
    cx.reply.int(count as i64);
    cx.pushed = true;
}

/// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE: every thread learns the new names before the
/// confirmations are sent.
async fn add(cx: &mut ConnCtx, args: &[&[u8]], kind: Kind) {
    let mut fresh: Vec<Box<[u8]>> = Vec::new();
    let mut counts = Vec::with_capacity(args.len() - 1);
    cx.client.special.set(true);
    {
        let mut subs = cx.client.subs.borrow_mut();
        for &name in &args[1..] {
            let new = match kind {
                Kind::Channel => subs.channels.insert(name.into()),
                Kind::Shard => subs.shard.insert(name.into()),
                Kind::Pattern => {
                    let new = !subs.patterns.iter().any(|p| &p[..] == name);
                    if new {
                        subs.patterns.push(name.into());
                    }
                    new
                }
            };
            if new {
                subs.mem += name.len() + NAME_OVERHEAD;
                fresh.push(name.into());
            }
            counts.push(subs.count(kind == Kind::Shard));
        }
    }
    if !fresh.is_empty() {
        let id = cx.client_id();
        pubsub::update(&cx.worker, id, kind, fresh, true).await;
    }
    for (&name, count) in args[1..].iter().zip(counts) {
        confirm(cx, kind, true, Some(name), count);
    }
    publish_state(cx);
}

/// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE, from the names given or from all (then a single
/// confirmation with a nil name when there were none).
async fn remove(cx: &mut ConnCtx, args: &[&[u8]], kind: Kind) {
    let names: Vec<Box<[u8]>> = if args.len() > 1 {
        args[1..].iter().map(|&n| n.into()).collect()
    } else {
        let subs = cx.client.subs.borrow();
        match kind {
            Kind::Channel => subs.channels.iter().cloned().collect(),
            Kind::Pattern => subs.patterns.clone(),
            Kind::Shard => subs.shard.iter().cloned().collect(),
        }
    };
    let mut gone: Vec<Box<[u8]>> = Vec::new();
    let mut counts = Vec::with_capacity(names.len());
    {
        let mut subs = cx.client.subs.borrow_mut();
        for name in &names {
            let was = match kind {
                Kind::Channel => subs.channels.remove(name),
                Kind::Shard => subs.shard.remove(name),
                Kind::Pattern => {
                    let before = subs.patterns.len();
                    subs.patterns.retain(|p| p != name);
                    subs.patterns.len() != before
                }
            };
            if was {
                subs.mem = subs.mem.saturating_sub(name.len() + NAME_OVERHEAD);
                gone.push(name.clone());
            }
            counts.push(subs.count(kind == Kind::Shard));
        }
    }
    if !gone.is_empty() {
        let id = cx.client_id();
        cx.client.subs.borrow_mut().leaving += 1;
        pubsub::update(&cx.worker, id, kind, gone, false).await;
        cx.client.subs.borrow_mut().leaving -= 1;
    }
    if names.is_empty() {
        let count = cx.client.subs.borrow().count(kind == Kind::Shard);
        confirm(cx, kind, false, None, count);
    }
    for (name, count) in names.iter().zip(counts) {
        confirm(cx, kind, false, Some(name), count);
    }
    publish_state(cx);
}

/// CLIENT LIST's `sub`/`psub`/`ssub` and flag `P`.
fn publish_state(cx: &ConnCtx) {
    let subs = cx.client.subs.borrow();
    let mut info = cx.client.info.borrow_mut();
    info.sub = (subs.channels.len(), subs.patterns.len(), subs.shard.len());
    info.set_flag('P', subs.active());
}

/// MONITOR: from now on, every command executed by anyone is sent to this connection (as
/// status lines, see `pubsub::monitor`). A second MONITOR is ignored (no reply), as in Redis.
fn monitor<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if cx.client.monitor.get() {
            return;
        }
        cx.client.monitor.set(true);
        cx.client.special.set(true);
        cx.client.info.borrow_mut().set_flag('O', true);
        let id = cx.client_id();
        pubsub::monitor::add(&cx.worker, id).await;
        cx.reply.ok();
    })
}

/// RESET: a monitoring connection stops monitoring.
pub fn stop_monitor(cx: &mut ConnCtx) {
    if cx.client.monitor.replace(false) {
        cx.client.info.borrow_mut().set_flag('O', false);
        let id = cx.client_id();
        pubsub::monitor::remove(&cx.worker, id);
    }
}

/// RESET and disconnects: leaves every channel, pattern and shard channel without replies.
pub async fn leave_all(cx: &mut ConnCtx) {
    let all = cx.client.subs.borrow_mut().take_all();
    if all.is_empty() {
        return;
    }
    let id = cx.client_id();
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        let names: Vec<Box<[u8]>> = all
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n.clone())
            .collect();
        if !names.is_empty() {
            cx.client.subs.borrow_mut().leaving += 1;
            pubsub::update(&cx.worker, id, kind, names, false).await;
            cx.client.subs.borrow_mut().leaving -= 1;
        }
    }
    publish_state(cx);
}

fn publish<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let n = pubsub::publish(&cx.worker, false, args[1], args[2]).await;
        cx.reply.int(n as i64);
    })
}

fn spublish<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let n = pubsub::publish(&cx.worker, true, args[1], args[2]).await;
        cx.reply.int(n as i64);
    })
}

fn channel_list(cx: &mut ConnCtx, args: &[&[u8]], shard: bool) {
    if args.len() > 3 {
        subcommand_syntax(cx, args);
        return;
    }
    let list = pubsub::channels(shard, args.get(2).copied());
    cx.reply.array(list.len());
    for c in &list {
        cx.reply.bulk(c);
    }
}

fn numsub(cx: &mut ConnCtx, args: &[&[u8]], shard: bool) {
    cx.reply.array((args.len() - 2) * 2);
    for &c in &args[2..] {
        cx.reply.bulk(c);
        cx.reply.int(pubsub::numsub(shard, c) as i64);
    }
}

/// Redis's answer to a known subcommand with the wrong arguments.
fn subcommand_syntax(cx: &mut ConnCtx, args: &[&[u8]]) {
    cx.reply.error_bytes(
        &[
            &b"ERR unknown subcommand or wrong number of arguments for '"[..],
            args[1],
            b"'. Try PUBSUB HELP.",
        ]
        .concat(),
    );
}

fn pubsub_channels(cx: &mut ConnCtx, args: &[&[u8]]) {
    channel_list(cx, args, false);
}

fn pubsub_shardchannels(cx: &mut ConnCtx, args: &[&[u8]]) {
    channel_list(cx, args, true);
}

fn pubsub_numsub(cx: &mut ConnCtx, args: &[&[u8]]) {
    numsub(cx, args, false);
}

fn pubsub_shardnumsub(cx: &mut ConnCtx, args: &[&[u8]]) {
    numsub(cx, args, true);
}

fn pubsub_numpat(cx: &mut ConnCtx, _args: &[&[u8]]) {
    cx.reply.int(pubsub::numpat() as i64);
}

fn pubsub_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
}
