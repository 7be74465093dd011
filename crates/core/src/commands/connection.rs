//! Connection commands: PING ECHO QUIT SELECT HELLO AUTH RESET and the CLIENT family.

use damselfly_protocol::RespVersion;

use super::spec::prelude::*;
use super::util::*;
use super::{BoxFut, ConnCtx, ReplyMode};
use crate::client;

use crate::version::REDIS_VERSION;

const G: Group = Group::Connection;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("ping", -1, FAST | DENY_ON_DISK_ERROR | PUBSUB_CONTEXT, NOKEYS, Local(ping))
        .doc(G, "1.0.0", "Returns the server's liveliness response."),
    cmd("echo", 2, FAST | STALE, NOKEYS, Local(echo))
        .doc(G, "1.0.0", "Returns the given string."),
    cmd("quit", -1, ALLOW_BUSY | NO_AUTH | LOADING | STALE | FAST | RUNS_IN_MULTI | PUBSUB_CONTEXT, NOKEYS, Local(quit))
        .doc(G, "1.0.0", "Closes the connection."),
    cmd("select", 2, LOADING | STALE | FAST, NOKEYS, Local(select)).plan(select_plan)
        .doc(G, "1.0.0", "Changes the selected database."),
    cmd("hello", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | ALLOW_BUSY, NOKEYS, Local(hello))
        .doc(G, "6.0.0", "Handshakes with the Redis server."),
    cmd("auth", -2, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | ALLOW_BUSY, NOKEYS, Local(auth))
        .doc(G, "1.0.0", "Authenticates the connection."),
    // Cluster commands a client may send to any server; without cluster mode Redis refuses them
    // (an ACL rule may still name them: `+readonly`).
    cmd("readonly", 1, FAST | LOADING | STALE, NOKEYS, Local(no_cluster)).acl(acl::CONNECTION)
        .doc(Group::Cluster, "3.0.0", "Enables read queries for a connection to a cluster replica node"),
    cmd("readwrite", 1, FAST | LOADING | STALE, NOKEYS, Local(no_cluster)).acl(acl::CONNECTION)
        .doc(Group::Cluster, "3.0.0", "Disables read queries for a connection to a cluster replica node"),
    cmd("reset", 1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | RUNS_IN_MULTI | PUBSUB_CONTEXT, NOKEYS, Conn(reset))
        .doc(G, "6.2.0", "Resets the connection."),
    container("client", -2, CLIENT_SUBS)
        .doc(G, "2.0.0", "A container for client connection commands."),
];

#[rustfmt::skip]
static CLIENT_SUBS: &[CommandSpec] = &[
    cmd("id", 2, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_id))
        .doc(G, "1.0.0", "Returns the unique client ID of the connection."),
    cmd("setname", 3, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_setname))
        .doc(G, "1.0.0", "Sets the connection name."),
    cmd("getname", 2, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_getname))
        .doc(G, "1.0.0", "Returns the name of the connection."),
    cmd("setinfo", 4, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_setinfo))
        .doc(G, "1.0.0", "Sets information specific to the client or connection."),
    cmd("list", -2, ADMIN | NOSCRIPT | LOADING | STALE, NOKEYS, Conn(client_list))
        .doc(G, "1.0.0", "Lists open connections."),
    cmd("info", 2, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_info))
        .doc(G, "1.0.0", "Returns information about the connection."),
    cmd("kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, NOKEYS, Conn(client_kill))
        .doc(G, "1.0.0", "Terminates open connections."),
    cmd("reply", 3, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_reply))
        .doc(G, "1.0.0", "Instructs the server whether to reply to commands."),
    cmd("no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_no_evict))
        .doc(G, "1.0.0", "Sets the client eviction mode of the connection."),
    cmd("no-touch", 3, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_no_touch))
        .doc(G, "1.0.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys."),
    cmd("tracking", -3, NOSCRIPT | LOADING | STALE, NOKEYS, Conn(client_tracking))
        .doc(G, "6.0.0", "Controls server-assisted client-side caching for the connection."),
    cmd("caching", 3, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_caching))
        .doc(G, "6.0.0", "Instructs the server whether to track the keys in the next request."),
    cmd("trackinginfo", 2, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_trackinginfo))
        .doc(G, "6.2.0", "Returns information about server-assisted client-side caching for the connection."),
    cmd("getredir", 2, NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_getredir))
        .doc(G, "1.0.0", "Returns the client ID to which the connection's tracking notifications are redirected."),
    cmd("pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_pause))
        .doc(G, "1.0.0", "Suspends commands processing."),
    cmd("unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, NOKEYS, Local(client_unpause))
        .doc(G, "1.0.0", "Resumes processing commands from paused clients."),
    cmd("unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, NOKEYS, Conn(client_unblock))
        .doc(G, "1.0.0", "Unblocks a client blocked by a blocking command from a different connection."),
    cmd("help", 2, LOADING | STALE, NOKEYS, Local(client_help))
        .doc(G, "1.0.0", "Returns helpful text about the different subcommands."),
];

/// EXEC planning: the commands queued after SELECT run in the selected db (if SELECT will
/// succeed).
fn select_plan(args: &[&[u8]], plan: &mut dyn PlanSink) {
    if let Some(i) = args.get(1).and_then(|a| parse_i64(a)) {
        if i >= 0 && (i as usize) < plan.dbnum() {
            plan.select_db(i as usize);
        }
    }
}

fn ping(cx: &mut ConnCtx, args: &[&[u8]]) {
    if args.len() <= 2 && !cx.reply.is_resp3() && cx.client.subs.borrow().active() {
        // In the RESP2 Pub/Sub context PING answers in the shape of a message.
        cx.reply.array(2);
        cx.reply.bulk(b"pong");
        cx.reply.bulk(args.get(1).copied().unwrap_or(b""));
        return;
    }
    match args.len() {
        1 => cx.reply.simple("PONG"),
        2 => cx.reply.bulk(args[1]),
        _ => cx
            .reply
            .error("ERR wrong number of arguments for 'ping' command"),
    }
}

fn no_cluster(cx: &mut ConnCtx, _args: &[&[u8]]) {
    cx.reply
        .error("ERR This instance has cluster support disabled");
}

fn echo(cx: &mut ConnCtx, args: &[&[u8]]) {
    cx.reply.bulk(args[1]);
}

fn quit(cx: &mut ConnCtx, _args: &[&[u8]]) {
    cx.reply.ok();
    cx.close = true;
    // Gone for everyone else from now (a tracking redirection to it is broken), though its
    // reply is still being written.
    cx.client.closing.set(true);
}

fn select(cx: &mut ConnCtx, args: &[&[u8]]) {
    // A C int in Redis: 2^31 and beyond get the range error, not "DB index is out of range".
    let Some(i) = super::util::int32_arg(&mut cx.reply, args[1]) else {
        return;
    };
    if i < 0 || i as usize >= cx.shared().config.dbnum() {
        cx.reply.error(ERR_DB_INDEX);
        return;
    }
    cx.db = i as usize;
    cx.reply.ok();
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Logs in as `user` (Redis's `ACLAuthenticateUser`): on success the connection runs as that
/// user; a failure is recorded in the ACL log.
fn authenticate(cx: &mut ConnCtx, cmd: &[u8], user: &[u8], pass: &[u8]) -> bool {
    match crate::acl::authenticate(user, pass) {
        Some(u) => {
            cx.authed = true;
            cx.client.info.borrow_mut().user = u.name.clone();
            cx.acl.set(u);
            true
        }
        None => {
            let ctx = if cx.in_multi() {
                crate::acl::Context::Multi
            } else {
                crate::acl::Context::Toplevel
            };
            crate::acl::commands::log_denied(cx, crate::acl::Reason::Auth, ctx, cmd, user);
            false
        }
    }
}

fn auth(cx: &mut ConnCtx, args: &[&[u8]]) {
    if args.len() > 3 {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    let (user, pass): (&[u8], &[u8]) = if args.len() == 2 {
        if crate::acl::default_user().nopass {
            cx.reply.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            return;
        }
        (b"default", args[1])
    } else {
        (args[1], args[2])
    };
    if authenticate(cx, args[0], user, pass) {
        cx.reply.ok();
    } else {
        cx.reply.error(WRONGPASS);
    }
}

/// Redis's client-name charset rule: printable ASCII without spaces.
fn valid_attr(v: &[u8]) -> bool {
    v.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

const ERR_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// Sets the connection name (empty clears it); writes the error and returns false when invalid.
fn set_name(cx: &mut ConnCtx, name: &[u8]) -> bool {
    if !valid_attr(name) {
        cx.reply.error(ERR_CLIENT_NAME);
        return false;
    }
    cx.client.info.borrow_mut().name = String::from_utf8_lossy(name).into_owned();
    true
}

fn hello(cx: &mut ConnCtx, args: &[&[u8]]) {
    let mut ver = 0i64;
    let mut next = 1;
    if args.len() >= 2 {
        match parse_i64(args[1]) {
            Some(v) => ver = v,
            None => {
                cx.reply
                    .error("ERR Protocol version is not an integer or out of range");
                return;
            }
        }
        next = 2;
        if !(2..=3).contains(&ver) {
            cx.reply.error("NOPROTO unsupported protocol version");
            return;
        }
    }
    let mut creds: Option<(&[u8], &[u8])> = None;
    let mut name: Option<&[u8]> = None;
    let mut j = next;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args[j];
        if eq_ic(opt, "auth") && more >= 2 {
            creds = Some((args[j + 1], args[j + 2]));
            j += 3;
        } else if eq_ic(opt, "setname") && more >= 1 {
            name = Some(args[j + 1]);
            j += 2;
        } else {
            error_parts(
                &mut cx.reply,
                &[b"ERR Syntax error in HELLO option '", cstr(opt, 128), b"'"],
            );
            return;
        }
    }
    if let Some((user, pass)) = creds {
        if !authenticate(cx, args[0], user, pass) {
            cx.reply.error(WRONGPASS);
            return;
        }
    }
    if !cx.authed && crate::acl::auth_required() {
        cx.reply.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        return;
    }
    if let Some(n) = name {
        if !set_name(cx, n) {
            return;
        }
    }
    if ver != 0 {
        cx.reply.ver = if ver == 3 {
            RespVersion::Resp3
        } else {
            RespVersion::Resp2
        };
        cx.client.info.borrow_mut().resp = ver as u8;
    }
    let proto = if cx.reply.is_resp3() { 3 } else { 2 };
    let id = cx.client.id;
    let r = &mut cx.reply;
    r.map(7);
    r.bulk_str("server");
    r.bulk_str("redis");
    r.bulk_str("version");
    r.bulk_str(REDIS_VERSION);
    r.bulk_str("proto");
    r.int(proto);
    r.bulk_str("id");
    r.int(id as i64);
    r.bulk_str("mode");
    r.bulk_str("standalone");
    r.bulk_str("role");
    r.bulk_str("master");
    r.bulk_str("modules");
    r.empty_array();
}

fn reset<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        super::pubsub::leave_all(cx).await;
        super::pubsub::stop_monitor(cx);
        disable_tracking(cx);
        reset_state(cx);
    })
}

fn reset_state(cx: &mut ConnCtx) {
    super::multi::discard_state(cx);
    cx.db = 0;
    cx.reply.ver = RespVersion::Resp2;
    let d = crate::acl::default_user();
    cx.authed = d.nopass && d.enabled;
    cx.client.info.borrow_mut().user = d.name.clone();
    cx.acl.set(d);
    cx.reply_mode = ReplyMode::On;
    cx.client.no_evict.set(false);
    cx.client.info.borrow_mut().set_flag('e', false);
    cx.no_touch = false;
    {
        let mut info = cx.client.info.borrow_mut();
        info.name.clear();
        info.resp = 2;
        info.db = 0;
    }
    cx.reply.simple("RESET");
}

fn client_id(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let id = cx.client.id;
    cx.reply.int(id as i64);
}

fn client_setname(cx: &mut ConnCtx, args: &[&[u8]]) {
    if set_name(cx, args[2]) {
        cx.reply.ok();
    }
}

fn client_getname(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let name = cx.client.info.borrow().name.clone();
    if name.is_empty() {
        cx.reply.null();
    } else {
        cx.reply.bulk_str(&name);
    }
}

fn client_setinfo(cx: &mut ConnCtx, args: &[&[u8]]) {
    let attr = args[2];
    let val = args[3];
    let is_name = eq_ic(attr, "lib-name");
    if !is_name && !eq_ic(attr, "lib-ver") {
        error_parts(
            &mut cx.reply,
            &[b"ERR Unrecognized option '", cstr(attr, 128), b"'"],
        );
        return;
    }
    if !valid_attr(val) {
        error_parts(
            &mut cx.reply,
            &[
                b"ERR ",
                cstr(attr, 128),
                b" cannot contain spaces, newlines or special characters.",
            ],
        );
        return;
    }
    let v = String::from_utf8_lossy(val).into_owned();
    let mut info = cx.client.info.borrow_mut();
    if is_name {
        info.lib_name = v;
    } else {
        info.lib_ver = v;
    }
    drop(info);
    cx.reply.ok();
}

/// Refreshes the fields of this connection's CLIENT LIST line that `exec_one` updates only after
/// the command, so the caller sees itself as Redis shows it (cmd=client|list).
fn refresh_self(cx: &ConnCtx) {
    let mut info = cx.client.info.borrow_mut();
    info.last_cmd = cx.cmd_name;
    info.db = cx.db;
    info.resp = if cx.reply.is_resp3() { 3 } else { 2 };
    info.mem.qbuf = cx.qbuf_now;
    info.mem.unwritten = cx.output.unwritten(&cx.reply);
    info.mem.reply_cap = cx.reply.buf.capacity();
}

fn client_info(cx: &mut ConnCtx, _args: &[&[u8]]) {
    refresh_self(cx);
    let mut line = cx.client.info.borrow().line();
    line.push('\n');
    cx.reply.verbatim("txt", line.as_bytes());
}

/// Client types (CLIENT LIST/KILL TYPE): a replica's connection has flag `S` (it ran SYNC),
/// a subscriber is `pubsub`, the link to our primary is `master` (not a listed client).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Pubsub,
    Master,
}

fn type_of(h: &client::ClientHandle) -> ClientType {
    let flags = &h.info.borrow().flags;
    if flags.contains('M') {
        ClientType::Master
    } else if flags.contains('S') {
        ClientType::Replica
    } else if h.subs.borrow().active() {
        ClientType::Pubsub
    } else {
        ClientType::Normal
    }
}

fn client_type_ok(cx: &mut ConnCtx, t: &[u8]) -> Option<ClientType> {
    let l = t.to_ascii_lowercase();
    match l.as_slice() {
        b"normal" => Some(ClientType::Normal),
        b"slave" | b"replica" => Some(ClientType::Replica),
        b"master" => Some(ClientType::Master),
        b"pubsub" => Some(ClientType::Pubsub),
        _ => {
            cx.reply
                .error_bytes(&[&b"ERR Unknown client type '"[..], cstr(t, 128), b"'"].concat());
            None
        }
    }
}

fn client_list<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let mut ids: Option<Vec<u64>> = None;
        let mut ctype = None;
        if args.len() == 4 && eq_ic(args[2], "type") {
            match client_type_ok(cx, args[3]) {
                None => return,
                Some(t) => ctype = Some(t),
            }
        } else if args.len() > 3 && eq_ic(args[2], "id") {
            let mut v = Vec::new();
            for a in &args[3..] {
                match parse_i64(a) {
                    Some(id) => v.push(id as u64),
                    None => {
                        cx.reply.error("ERR Invalid client ID");
                        return;
                    }
                }
            }
            ids = Some(v);
        } else if args.len() != 2 {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
        refresh_self(cx);
        let filter = ids.clone();
        let per_thread = cx
            .worker
            .broadcast(move |_| {
                let mut lines = Vec::new();
                client::for_each_local(|id, h| {
                    // A killed client is gone as far as anyone can tell (Redis frees it at once).
                    if !h.killed.get()
                        && filter.as_ref().is_none_or(|f| f.contains(&id))
                        && ctype.is_none_or(|t| t == type_of(h))
                    {
                        lines.push((id, h.info.borrow().line()));
                    }
                });
                lines
            })
            .await;
        let mut all: Vec<(u64, String)> = per_thread.into_iter().flatten().collect();
        match &ids {
            // Redis lists CLIENT LIST ID results in the order the ids were given.
            Some(order) => {
                let mut out = String::new();
                for id in order {
                    if let Some((_, l)) = all.iter().find(|(i, _)| i == id) {
                        out.push_str(l);
                        out.push('\n');
                    }
                }
                cx.reply.verbatim("txt", out.as_bytes());
            }
            None => {
                all.sort_by_key(|(id, _)| *id);
                let mut out = String::new();
                for (_, l) in &all {
                    out.push_str(l);
                    out.push('\n');
                }
                cx.reply.verbatim("txt", out.as_bytes());
            }
        }
    })
}

/// CLIENT KILL filter (all given conditions must match).
#[derive(Clone, Default)]
struct KillFilter {
    addr: Option<String>,
    laddr: Option<String>,
    id: Option<u64>,
    ctype: Option<ClientType>,
    user: Option<String>,
    skip_id: Option<u64>,
}

fn client_kill<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let my_id = cx.client.id;
        let mut f = KillFilter::default();
        let old_form = args.len() == 3;
        if old_form {
            f.addr = Some(String::from_utf8_lossy(args[2]).into_owned());
        } else if args.len().is_multiple_of(2) {
            f.skip_id = Some(my_id);
            let mut i = 2;
            while i < args.len() {
                let (opt, val) = (args[i], args[i + 1]);
                if eq_ic(opt, "id") {
                    match parse_i64(val) {
                        Some(v) if v >= 1 => f.id = Some(v as u64),
                        _ => {
                            cx.reply.error("ERR client-id should be greater than 0");
                            return;
                        }
                    }
                } else if eq_ic(opt, "type") {
                    match client_type_ok(cx, val) {
                        None => return,
                        Some(t) => f.ctype = Some(t),
                    }
                } else if eq_ic(opt, "addr") {
                    f.addr = Some(String::from_utf8_lossy(val).into_owned());
                } else if eq_ic(opt, "laddr") {
                    f.laddr = Some(String::from_utf8_lossy(val).into_owned());
                } else if eq_ic(opt, "user") {
                    if crate::acl::get(val).is_none() {
                        cx.reply.error_bytes(
                            &[&b"ERR No such user '"[..], cstr(val, 128), b"'"].concat(),
                        );
                        return;
                    }
                    f.user = Some(String::from_utf8_lossy(val).into_owned());
                } else if eq_ic(opt, "skipme") {
                    if eq_ic(val, "yes") {
                        f.skip_id = Some(my_id);
                    } else if eq_ic(val, "no") {
                        f.skip_id = None;
                    } else {
                        cx.reply.error(ERR_SYNTAX);
                        return;
                    }
                } else {
                    cx.reply.error(ERR_SYNTAX);
                    return;
                }
                i += 2;
            }
        } else {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
        let filter = f.clone();
        let results = cx
            .worker
            .broadcast(move |_| {
                let mut killed = 0i64;
                let mut self_hit = false;
                client::for_each_local(|id, h| {
                    let info = h.info.borrow();
                    if filter.addr.as_ref().is_some_and(|a| *a != info.addr)
                        || filter.laddr.as_ref().is_some_and(|a| *a != info.laddr)
                        || filter.id.is_some_and(|i| i != id)
                        || filter.skip_id == Some(id)
                        || filter.ctype.is_some_and(|t| t != type_of(h))
                        || filter.user.as_ref().is_some_and(|u| *u != info.user)
                    {
                        return;
                    }
                    killed += 1;
                    if id == my_id {
                        // The caller closes after its reply is written.
                        self_hit = true;
                    } else {
                        h.killed.set(true);
                        h.wake.notify_one();
                    }
                });
                (killed, self_hit)
            })
            .await;
        let killed: i64 = results.iter().map(|r| r.0).sum();
        if results.iter().any(|r| r.1) {
            cx.close = true;
        }
        if old_form {
            if killed == 0 {
                cx.reply.error("ERR No such client");
            } else {
                cx.reply.ok();
            }
        } else {
            cx.reply.int(killed);
        }
    })
}

fn client_reply(cx: &mut ConnCtx, args: &[&[u8]]) {
    let a = args[2];
    if eq_ic(a, "on") {
        cx.reply_mode = ReplyMode::On;
        cx.reply.ok();
    } else if eq_ic(a, "off") {
        cx.reply_mode = ReplyMode::Off;
    } else if eq_ic(a, "skip") {
        if cx.reply_mode != ReplyMode::Off {
            cx.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        cx.reply.error(ERR_SYNTAX);
    }
}

fn on_off(a: &[u8]) -> Option<bool> {
    if eq_ic(a, "on") {
        Some(true)
    } else if eq_ic(a, "off") {
        Some(false)
    } else {
        None
    }
}

fn client_no_evict(cx: &mut ConnCtx, args: &[&[u8]]) {
    match on_off(args[2]) {
        Some(v) => {
            cx.client.no_evict.set(v);
            // CLIENT LIST flag 'e': excluded from client eviction.
            cx.client.info.borrow_mut().set_flag('e', v);
            crate::client::evict::reconsider();
            cx.reply.ok();
        }
        None => cx.reply.error(ERR_SYNTAX),
    }
}

fn client_no_touch(cx: &mut ConnCtx, args: &[&[u8]]) {
    match on_off(args[2]) {
        Some(v) => {
            cx.no_touch = v;
            cx.reply.ok();
        }
        None => cx.reply.error(ERR_SYNTAX),
    }
}

fn client_getredir(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let id = cx.client.tracking.borrow().redirect_id();
    cx.reply.int(id);
}

/// CLIENT TRACKING on|off [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP], with
/// Redis's checks and errors (`crate::engine::tracking`, `crate::pubsub::tracking`).
fn client_tracking<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let (mut redir, mut bcast, mut optin, mut optout, mut noloop) =
            (None, false, false, false, false);
        let mut prefixes: Vec<&[u8]> = Vec::new();
        let mut j = 3;
        while j < args.len() {
            let more = j + 1 < args.len();
            let a = args[j];
            if eq_ic(a, "redirect") && more {
                j += 1;
                if redir.is_some() {
                    cx.reply
                        .error("ERR A client can only redirect to a single other client");
                    return;
                }
                let Some(id) = parse_i64(args[j]) else {
                    cx.reply
                        .error("ERR value is not an integer or out of range");
                    return;
                };
                redir = Some(id);
            } else if eq_ic(a, "bcast") {
                bcast = true;
            } else if eq_ic(a, "optin") {
                optin = true;
            } else if eq_ic(a, "optout") {
                optout = true;
            } else if eq_ic(a, "noloop") {
                noloop = true;
            } else if eq_ic(a, "prefix") && more {
                j += 1;
                prefixes.push(args[j]);
            } else {
                cx.reply.error(ERR_SYNTAX);
                return;
            }
            j += 1;
        }
        // The redirection must exist now (it may go away later: then it is "broken").
        let mut redirect = None;
        if let Some(id) = redir {
            let id = id as u64;
            let found = cx
                .worker
                .broadcast(move |w| {
                    let mut here = false;
                    client::with_local(id, |h| here = !h.killed.get());
                    here.then_some(w.id)
                })
                .await;
            match found.into_iter().flatten().next() {
                Some(thread) => redirect = Some((id, thread)),
                None => {
                    cx.reply
                        .error("ERR The client ID you want redirect to does not exist");
                    return;
                }
            }
        }
        if eq_ic(args[2], "on") {
            let cur = cx.client.tracking.borrow().clone();
            if !bcast && !prefixes.is_empty() {
                cx.reply
                    .error("ERR PREFIX option requires BCAST mode to be enabled");
                return;
            }
            if cur.on && cur.bcast != bcast {
                cx.reply.error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
                return;
            }
            if bcast && (optin || optout) {
                cx.reply
                    .error("ERR OPTIN and OPTOUT are not compatible with BCAST");
                return;
            }
            if optin && optout {
                cx.reply
                    .error("ERR You can't specify both OPTIN mode and OPTOUT mode");
                return;
            }
            if (optin && cur.optout) || (optout && cur.optin) {
                cx.reply.error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
                return;
            }
            let new_prefixes: Vec<&[u8]> = if bcast && prefixes.is_empty() {
                vec![b""]
            } else {
                prefixes
            };
            if bcast {
                for (i, p) in new_prefixes.iter().enumerate() {
                    if let Some(old) = cur
                        .prefixes
                        .iter()
                        .find(|o| o.starts_with(p) || p.starts_with(o))
                    {
                        cx.reply.error_bytes(
                            &[
                                &b"ERR Prefix '"[..],
                                p,
                                b"' overlaps with an existing prefix '",
                                old,
                                b"'. Prefixes for a single client must not overlap.",
                            ]
                            .concat(),
                        );
                        return;
                    }
                    if let Some(other) = new_prefixes[i + 1..]
                        .iter()
                        .find(|o| o.starts_with(p) || p.starts_with(o))
                    {
                        cx.reply.error_bytes(
                            &[
                                &b"ERR Prefix '"[..],
                                p,
                                b"' overlaps with another provided prefix '",
                                other,
                                b"'. Prefixes for a single client must not overlap.",
                            ]
                            .concat(),
                        );
                        return;
                    }
                }
            }
            if !cur.on {
                crate::engine::tracking::client_enabled();
            }
            let id = cx.client_id();
            let target = crate::engine::tracking::Target {
                thread: cx.worker.id,
                conn: id,
            };
            if bcast {
                let ps: std::sync::Arc<Vec<Vec<u8>>> =
                    std::sync::Arc::new(new_prefixes.iter().map(|p| p.to_vec()).collect());
                cx.worker
                    .broadcast(move |w| {
                        for p in ps.iter() {
                            crate::engine::tracking::add_prefix(target, p, w.id == 0);
                        }
                    })
                    .await;
            }
            cx.client.special.set(true);
            {
                let mut t = cx.client.tracking.borrow_mut();
                t.on = true;
                t.bcast = bcast;
                t.optin = optin;
                t.optout = optout;
                t.noloop = noloop;
                t.caching = false;
                t.broken = false;
                t.redirect = redirect;
                if bcast {
                    t.prefixes
                        .extend(new_prefixes.iter().map(|p| Box::<[u8]>::from(*p)));
                }
            }
            let mut info = cx.client.info.borrow_mut();
            info.set_flag('t', true);
            info.set_flag('R', false);
            info.redir = redirect.map_or(0, |(id, _)| id as i64);
        } else if eq_ic(args[2], "off") {
            disable_tracking(cx);
        } else {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
        cx.reply.ok();
    })
}

/// CLIENT TRACKING off and RESET: stops tracking and leaves the BCAST prefixes.
fn disable_tracking(cx: &mut ConnCtx) {
    crate::pubsub::tracking::disable(&cx.worker, &cx.client);
}

fn client_caching(cx: &mut ConnCtx, args: &[&[u8]]) {
    let mut t = cx.client.tracking.borrow_mut();
    if !t.on {
        drop(t);
        cx.reply.error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
        return;
    }
    if eq_ic(args[2], "yes") {
        if !t.optin {
            drop(t);
            cx.reply.error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
            return;
        }
    } else if eq_ic(args[2], "no") {
        if !t.optout {
            drop(t);
            cx.reply.error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
            return;
        }
    } else {
        drop(t);
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    t.caching = true;
    drop(t);
    cx.reply.ok();
}

fn client_trackinginfo(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let t = cx.client.tracking.borrow().clone();
    cx.reply.map(3);
    cx.reply.bulk(b"flags");
    let mut flags: Vec<&str> = vec![if t.on { "on" } else { "off" }];
    if t.bcast {
        flags.push("bcast");
    }
    if t.optin {
        flags.push("optin");
        if t.caching {
            flags.push("caching-yes");
        }
    }
    if t.optout {
        flags.push("optout");
        if t.caching {
            flags.push("caching-no");
        }
    }
    if t.noloop {
        flags.push("noloop");
    }
    if t.broken {
        flags.push("broken_redirect");
    }
    cx.reply.set(flags.len());
    for f in flags {
        cx.reply.bulk(f.as_bytes());
    }
    cx.reply.bulk(b"redirect");
    cx.reply.int(t.redirect_id());
    cx.reply.bulk(b"prefixes");
    cx.reply.array(t.prefixes.len());
    for p in &t.prefixes {
        cx.reply.bulk(p);
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL] (`engine::pause`).
fn client_pause(cx: &mut ConnCtx, args: &[&[u8]]) {
    if args.len() > 4 {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    let timeout = match parse_i64(args[2]) {
        Some(v) if v >= 0 => v as u64,
        Some(_) => {
            cx.reply.error("ERR timeout is negative");
            return;
        }
        None => {
            cx.reply
                .error("ERR timeout is not an integer or out of range");
            return;
        }
    };
    if args.len() == 4 && !eq_ic(args[3], "write") && !eq_ic(args[3], "all") {
        cx.reply.error(ERR_SYNTAX);
        return;
    }
    let all = args.len() < 4 || eq_ic(args[3], "all");
    crate::engine::pause::pause(crate::clock::unix_ms(), timeout, all);
    cx.reply.ok();
}

fn client_unpause(cx: &mut ConnCtx, _args: &[&[u8]]) {
    crate::engine::pause::unpause();
    cx.reply.ok();
}

/// Unblocks a client blocked by a blocking command (on whichever thread owns it): 1 if it was.
fn client_unblock<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if args.len() > 4
            || (args.len() == 4 && !eq_ic(args[3], "timeout") && !eq_ic(args[3], "error"))
        {
            cx.reply
                .error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            return;
        }
        let Some(id) = parse_i64(args[2]) else {
            cx.reply.error(ERR_NOT_INT);
            return;
        };
        let error = args.len() == 4 && eq_ic(args[3], "error");
        let ver = cx.reply.ver;
        let hits = cx
            .worker
            .broadcast(move |w| {
                let reply = if error {
                    let mut r = damselfly_protocol::Reply::new(ver);
                    r.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
                    r.take()
                } else {
                    Vec::new()
                };
                w.unblock(id as u64, reply)
            })
            .await;
        cx.reply.int(hits.iter().any(|&h| h) as i64);
    })
}

/// Writes a Redis-style HELP reply: the header line then each line as a status string.
pub fn help_reply(cx: &mut ConnCtx, name: &str, lines: &[&str]) {
    cx.reply.array(lines.len() + 3);
    cx.reply.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        cx.reply.simple(l);
    }
    cx.reply.simple("HELP");
    cx.reply.simple("    Prints this help.");
}

fn client_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "CLIENT",
        &[
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
        ],
    );
}
