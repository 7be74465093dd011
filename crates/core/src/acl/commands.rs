//! The ACL command family and the permission gate every command passes
//! (`crate::acl` holds users, selectors, the log). Redis 7.0's `aclCommand`, replies and error
//! texts.

use std::sync::Arc;

use crate::acl::{self, Context, Denied, LogEntry, Reason, User};
use crate::client;
use crate::commands::connection::help_reply;
use crate::commands::registry::Entry;
use crate::commands::spec::prelude::*;
use crate::commands::util::*;
use crate::commands::{BoxFut, ConnCtx};

const G: Group = Group::Server;
const F: u32 = NOSCRIPT | LOADING | STALE | SENTINEL;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    container("acl", -2, ACL_SUBS)
        .doc(G, "6.0.0", "A container for Access List Control commands."),
];

#[rustfmt::skip]
static ACL_SUBS: &[CommandSpec] = &[
    cmd("cat", -2, F, NOKEYS, Local(cat))
        .doc(G, "6.0.0", "Lists the ACL categories, or the commands inside a category."),
    cmd("deluser", -3, ADMIN | F, NOKEYS, Conn(deluser))
        .doc(G, "6.0.0", "Deletes ACL users, and terminates their connections."),
    cmd("dryrun", -4, ADMIN | F, NOKEYS, Local(dryrun))
        .doc(G, "7.0.0", "Simulates the execution of a command by a user, without executing the command."),
    cmd("genpass", -2, F, NOKEYS, Local(genpass))
        .doc(G, "6.0.0", "Generates a pseudorandom, secure password that can be used to identify ACL users."),
    cmd("getuser", 3, ADMIN | F, NOKEYS, Local(getuser))
        .doc(G, "6.0.0", "Lists the ACL rules of a user."),
    cmd("help", 2, LOADING | STALE | SENTINEL, NOKEYS, Local(help))
        .doc(G, "6.0.0", "Returns helpful text about the different subcommands."),
    cmd("list", 2, ADMIN | F, NOKEYS, Local(list))
        .doc(G, "6.0.0", "Dumps the effective rules in ACL file format."),
    cmd("load", 2, ADMIN | F, NOKEYS, Conn(load))
        .doc(G, "6.0.0", "Reloads the rules from the configured ACL file."),
    cmd("log", -2, ADMIN | F, NOKEYS, Local(log))
        .doc(G, "6.0.0", "Lists recent security events generated due to ACL rules."),
    cmd("save", 2, ADMIN | F, NOKEYS, Local(save))
        .doc(G, "6.0.0", "Saves the effective ACL rules in the configured ACL file."),
    cmd("setuser", -3, ADMIN | F, NOKEYS, Conn(setuser))
        .doc(G, "6.0.0", "Creates and modifies an ACL user and its rules."),
    cmd("users", 2, ADMIN | F, NOKEYS, Local(users))
        .doc(G, "6.0.0", "Lists all ACL users."),
    cmd("whoami", 2, F, NOKEYS, Local(whoami))
        .doc(G, "6.0.0", "Returns the authenticated username of the current connection."),
];

const ERR_NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn max_log(cx: &ConnCtx) -> usize {
    cx.shared().config.acllog_max_len()
}

/// Records a refusal in the ACL log with this connection's details.
pub fn log_denied(cx: &ConnCtx, reason: Reason, context: Context, object: &[u8], user: &[u8]) {
    acl::log_event(
        LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: user.to_vec(),
            ctime: crate::clock::unix_ms(),
            client_info: cx.client.info.borrow().line(),
        },
        max_log(cx),
    );
}

/// What the log names for a refusal: the command, or the key or channel argument.
fn denied_object<'a>(entry: &'a Entry, args: &[&'a [u8]], d: Denied, at: usize) -> &'a [u8] {
    match d {
        Denied::Cmd => entry.fullname.as_bytes(),
        Denied::Key | Denied::Channel => args.get(at).copied().unwrap_or_default(),
    }
}

/// The permission check of a command about to run on this connection (Redis's
/// processCommand and execCommand checks): Ok, or the error to answer, already logged.
/// `Err(None)`: the connection's user was deleted, the connection closes.
pub fn gate(cx: &mut ConnCtx, entry: &Entry, args: &[&[u8]]) -> Result<(), Option<String>> {
    if !cx.acl.refresh() {
        cx.close = true;
        return Err(None);
    }
    let user = cx.acl.user.clone();
    let Err((d, at)) = user.check(entry, args) else {
        return Ok(());
    };
    let obj = denied_object(entry, args, d, at);
    let in_exec = cx.in_exec();
    let ctx = if in_exec || cx.in_multi() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    log_denied(cx, d.into(), ctx, obj, user.name.as_bytes());
    let msg = if in_exec {
        let why = match d {
            Denied::Cmd => "no permission to execute the command or subcommand",
            Denied::Key => "no permission to touch the specified keys",
            Denied::Channel => "no permission to access one of the channels used as arguments",
        };
        format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {why}")
    } else {
        match d {
            Denied::Cmd => format!(
                "NOPERM this user has no permissions to run the '{}' command",
                entry.fullname
            ),
            Denied::Key => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            Denied::Channel => "NOPERM this user has no permissions to access one of the channels used as arguments".into(),
        }
    };
    Err(Some(msg))
}

/// A script's `redis.call` of `entry` (Redis's `scriptVerifyACL`): logged in the Lua context.
pub fn script_gate(cx: &ConnCtx, entry: &Entry, args: &[&[u8]]) -> Result<(), &'static str> {
    let user = cx.acl.user.clone();
    let Err((d, at)) = user.check(entry, args) else {
        return Ok(());
    };
    log_denied(
        cx,
        d.into(),
        Context::Lua,
        denied_object(entry, args, d, at),
        user.name.as_bytes(),
    );
    Err(match d {
        Denied::Cmd => "ERR The user executing the script can't run this command or subcommand",
        Denied::Key => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denied::Channel => "ERR The user executing the script can't publish to the channel mentioned in the command",
    })
}

fn whoami(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let name = cx.acl.user.name.clone();
    cx.reply.bulk_str(&name);
}

fn users(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let names: Vec<String> = acl::read(|t| t.keys().cloned().collect());
    cx.reply.array(names.len());
    for n in names {
        cx.reply.bulk_str(&n);
    }
}

fn list(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let lines: Vec<Vec<u8>> = acl::read(|t| {
        t.iter()
            .map(|(n, u)| {
                let mut l = format!("user {n} ").into_bytes();
                l.extend_from_slice(&u.describe());
                l
            })
            .collect()
    });
    cx.reply.array(lines.len());
    for l in lines {
        cx.reply.bulk(&l);
    }
}

fn describe_selector(cx: &mut ConnCtx, s: &acl::selector::Selector) {
    let r = &mut cx.reply;
    r.bulk_str("commands");
    r.bulk_str(&s.describe_commands());
    r.bulk_str("keys");
    r.bulk(&s.describe_keys());
    r.bulk_str("channels");
    r.bulk(&s.describe_channels());
}

fn getuser(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some(u) = acl::get(args[2]) else {
        cx.reply.null();
        return;
    };
    cx.reply.map(6);
    cx.reply.bulk_str("flags");
    let flags = u.flag_names();
    cx.reply.set(flags.len());
    for f in flags {
        cx.reply.bulk_str(f);
    }
    cx.reply.bulk_str("passwords");
    cx.reply.array(u.passwords.len());
    for p in &u.passwords {
        cx.reply.bulk_str(p);
    }
    describe_selector(cx, u.root());
    cx.reply.bulk_str("selectors");
    cx.reply.array(u.selectors.len() - 1);
    for s in &u.selectors[1..] {
        cx.reply.map(3);
        describe_selector(cx, s);
    }
}

fn cat(cx: &mut ConnCtx, args: &[&[u8]]) {
    use crate::commands::spec::acl as cats;
    match args.len() {
        2 => {
            cx.reply.array(cats::NAMES.len());
            for (_, n) in cats::NAMES {
                cx.reply.bulk_str(&n[1..]);
            }
        }
        3 => {
            let Some(flag) = acl::selector::category(args[2]) else {
                error_parts(
                    &mut cx.reply,
                    &[b"ERR Unknown category '", cstr(args[2], 128), b"'"],
                );
                return;
            };
            let mut names = Vec::new();
            for e in crate::commands::registry().all() {
                if e.spec.acl_categories() & flag != 0 {
                    names.push(e.static_name);
                }
                let mut subs: Vec<&Entry> = e.subs.values().collect();
                subs.sort_by(|a, b| a.fullname.cmp(&b.fullname));
                for s in subs {
                    if s.spec.acl_categories() & flag != 0 {
                        names.push(s.static_name);
                    }
                }
            }
            cx.reply.array(names.len());
            for n in names {
                cx.reply.bulk_str(n);
            }
        }
        _ => subcommand_syntax_error(cx, "CAT"),
    }
}

fn subcommand_syntax_error(cx: &mut ConnCtx, sub: &str) {
    cx.reply.error(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try ACL HELP."
    ));
}

fn genpass(cx: &mut ConnCtx, args: &[&[u8]]) {
    let mut bits = 256i64;
    if args.len() > 3 {
        return subcommand_syntax_error(cx, "GENPASS");
    }
    if args.len() == 3 {
        match parse_i64(args[2]) {
            Some(b) => bits = b,
            None => {
                cx.reply.error(ERR_NOT_INT);
                return;
            }
        }
    }
    if bits <= 0 || bits > 4096 {
        cx.reply.error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
        return;
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut rng = damselfly_types::rand::Rng::from_entropy();
    const HEX: &[u8] = b"0123456789abcdef";
    let pass: Vec<u8> = (0..chars).map(|_| HEX[rng.index(16)]).collect();
    cx.reply.bulk(&pass);
}

fn log(cx: &mut ConnCtx, args: &[&[u8]]) {
    if args.len() > 3 {
        return subcommand_syntax_error(cx, "LOG");
    }
    let mut count = 10i64;
    if args.len() == 3 {
        if eq_ic(args[2], "reset") {
            acl::log_reset();
            cx.reply.ok();
            return;
        }
        match parse_i64(args[2]) {
            Some(c) => count = c.max(0),
            None => {
                cx.reply.error(ERR_NOT_INT);
                return;
            }
        }
    }
    let n = (count as usize).min(acl::log_len());
    let now = crate::clock::unix_ms();
    let r = &mut cx.reply;
    acl::log_read(n, |it| {
        let entries: Vec<&LogEntry> = it.collect();
        r.array(entries.len());
        for e in entries {
            r.map(7);
            for (k, v) in e.fields(now) {
                r.bulk_str(k);
                match v {
                    acl::LogValue::Int(i) => r.int(i),
                    acl::LogValue::Str(s) => r.bulk(s),
                    acl::LogValue::Double(d) => r.double(d),
                }
            }
        }
    });
}

fn dryrun(cx: &mut ConnCtx, args: &[&[u8]]) {
    let Some(u) = acl::get(args[2]) else {
        error_parts(
            &mut cx.reply,
            &[b"ERR User '", cstr(args[2], 128), b"' not found"],
        );
        return;
    };
    let cmdargs = &args[3..];
    let top = crate::commands::registry().lookup(cmdargs[0]);
    let entry = match top {
        Some(t) if !t.subs.is_empty() && cmdargs.len() >= 2 => t.sub(cmdargs[1]),
        Some(t) if t.subs.is_empty() => Some(t),
        _ => None,
    };
    let Some(entry) = entry else {
        error_parts(
            &mut cx.reply,
            &[b"ERR Command '", cstr(cmdargs[0], 128), b"' not found"],
        );
        return;
    };
    let argc = cmdargs.len() as i32;
    let a = entry.spec.arity;
    if (a > 0 && a != argc) || argc < -a {
        cx.reply.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            entry.fullname
        ));
        return;
    }
    match u.check(entry, cmdargs) {
        Ok(()) => cx.reply.ok(),
        Err((Denied::Cmd, _)) => cx.reply.bulk_str(&format!(
            "This user has no permissions to run the '{}' command",
            entry.fullname
        )),
        Err((d, at)) => {
            let what = if d == Denied::Key { "key" } else { "channel" };
            let mut m = b"This user has no permissions to access the '".to_vec();
            m.extend_from_slice(cmdargs[at]);
            m.extend_from_slice(format!("' {what}").as_bytes());
            cx.reply.bulk(&m);
        }
    }
}

fn setuser<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let name = args[2];
        if !acl::user::valid_name(name) {
            cx.reply
                .error("ERR Usernames can't contain spaces or null characters");
            return;
        }
        let name = String::from_utf8_lossy(name).into_owned();
        let all = acl::pubsub_all();
        let old = acl::get(name.as_bytes());
        let mut u = match &old {
            Some(o) => (**o).clone(),
            None => User::new(&name, all),
        };
        if let Err(e) = u.apply_all(&args[3..], all) {
            cx.reply.error(&format!("ERR {e}"));
            return;
        }
        let u = Arc::new(u);
        acl::modify(|t| t.insert(name.clone(), u.clone()));
        if let Some(o) = old {
            if channels_revoked(&u, &o) {
                kill_pubsub_violators(cx, &name, &u).await;
            }
        }
        cx.reply.ok();
    })
}

/// Redis's `ACLKillPubsubClientsIfNeeded` test: can a subscription the old rules allowed be
/// refused by the new ones?
fn channels_revoked(new: &User, old: &User) -> bool {
    if new.selectors.iter().any(|s| s.allchannels) {
        return false;
    }
    let upcoming: Vec<&Vec<u8>> = new.selectors.iter().flat_map(|s| &s.channels).collect();
    old.selectors
        .iter()
        .any(|s| s.allchannels || s.channels.iter().any(|c| !upcoming.contains(&c)))
}

/// Closes the subscribed connections of user `name` whose subscriptions its new rules refuse.
async fn kill_pubsub_violators(cx: &mut ConnCtx, name: &str, new: &Arc<User>) {
    let upcoming: Vec<Vec<u8>> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    let name = name.to_string();
    close_where(cx, move |h| {
        if h.info.borrow().user != name {
            return false;
        }
        let subs = h.subs.borrow();
        subs.active()
            && (subs
                .patterns
                .iter()
                .any(|p| !acl::selector::channel_in(&upcoming, p, true))
                || subs
                    .channels
                    .iter()
                    .chain(subs.shard.iter())
                    .any(|c| !acl::selector::channel_in(&upcoming, c, false)))
    })
    .await;
}

/// Closes every connection authenticated as one of `names` (the caller's after its reply).
pub async fn kill_users(cx: &mut ConnCtx, names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    close_where(cx, move |h| names.contains(&h.info.borrow().user)).await;
}

/// Closes the connections on every thread that `pick` selects, as Redis frees a deleted
/// user's clients: at once, except the caller's, which closes after its reply.
async fn close_where(
    cx: &mut ConnCtx,
    pick: impl Fn(&client::ClientHandle) -> bool + Send + Sync + Clone + 'static,
) {
    let me = cx.client.id;
    let hit = cx
        .worker
        .broadcast(move |_| {
            let mut self_hit = false;
            client::for_each_local(|id, h| {
                if !pick(h) {
                    return;
                }
                if id == me {
                    self_hit = true;
                } else {
                    h.killed.set(true);
                    h.wake.notify_one();
                }
            });
            self_hit
        })
        .await;
    if hit.into_iter().any(|b| b) {
        cx.close = true;
    }
}

fn deluser<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        if args[2..].iter().any(|n| *n == b"default") {
            cx.reply.error("ERR The 'default' user cannot be removed");
            return;
        }
        let names: Vec<String> = args[2..]
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        let gone: Vec<String> = acl::modify(|t| {
            names
                .iter()
                .filter(|n| t.remove(n.as_str()).is_some())
                .cloned()
                .collect()
        });
        let n = gone.len();
        kill_users(cx, gone).await;
        cx.reply.int(n as i64);
    })
}

fn aclfile(cx: &ConnCtx) -> String {
    cx.shared().config.aclfile()
}

fn load<'a>(cx: &'a mut ConnCtx, _args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let path = aclfile(cx);
        if path.is_empty() {
            cx.reply.error(ERR_NO_ACLFILE);
            return;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                cx.reply.error(&format!(
                    "ERR Error loading ACLs, opening file '{path}': {}",
                    crate::config::file::io_reason(&e)
                ));
                return;
            }
        };
        match acl::load_lines(&text, &path) {
            Ok(users) => {
                let gone = acl::replace_all(users);
                kill_users(cx, gone).await;
                cx.reply.ok();
            }
            Err(e) => cx.reply.error(&format!("ERR {e}")),
        }
    })
}

fn save(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let path = aclfile(cx);
    if path.is_empty() {
        cx.reply.error(ERR_NO_ACLFILE);
        return;
    }
    match acl::save(std::path::Path::new(&path)) {
        Ok(()) => cx.reply.ok(),
        Err(e) => {
            crate::log::line(
                crate::log::Level::Warning,
                &format!("Writing ACL file for ACL SAVE: {e}"),
            );
            cx.reply.error("ERR There was an error trying to save the ACLs. Please check the server logs for more information");
        }
    }
}

fn help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
}
