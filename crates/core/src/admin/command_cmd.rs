//! COMMAND, COMMAND COUNT / LIST / INFO / DOCS / GETKEYS / GETKEYSANDFLAGS / HELP.

use damselfly_protocol::Reply;

use crate::commands::connection::help_reply;
use crate::commands::spec::acl;
use crate::commands::util::*;
use crate::commands::{flags, key_flags, registry, ConnCtx, Entry, KeySpec};
use crate::config::glob;

fn sorted_subs(e: &Entry) -> Vec<&Entry> {
    let mut v: Vec<&Entry> = e.subs.values().collect();
    v.sort_by(|a, b| a.fullname.cmp(&b.fullname));
    v
}

/// The access flags of a key spec or key, as a set of their names (Redis's
/// `addReplyFlagsForKeyArgs`).
fn write_key_flags(r: &mut Reply, bits: u16) {
    r.set(key_flags::names(bits).count());
    for f in key_flags::names(bits) {
        r.simple(f);
    }
}

/// One key spec map of COMMAND INFO, in Redis 7.0's shape: flags (Redis's, see
/// `key_flags::specs`), begin_search (`index` or `keyword`), find_keys (`range` or `keynum`,
/// positions relative to begin_search's).
fn write_key_spec(r: &mut Reply, k: &KeySpec, bits: u16) {
    r.map(3);
    r.bulk_str("flags");
    write_key_flags(r, bits);
    let range = |r: &mut Reply, lastkey: i32, keystep: i32, limit: i32| {
        r.bulk_str("find_keys");
        r.map(2);
        r.bulk_str("type");
        r.bulk_str("range");
        r.bulk_str("spec");
        r.map(3);
        r.bulk_str("lastkey");
        r.int(lastkey as i64);
        r.bulk_str("keystep");
        r.int(keystep as i64);
        r.bulk_str("limit");
        r.int(limit as i64);
    };
    let index = |r: &mut Reply, at: i64| {
        r.bulk_str("begin_search");
        r.map(2);
        r.bulk_str("type");
        r.bulk_str("index");
        r.bulk_str("spec");
        r.map(1);
        r.bulk_str("index");
        r.int(at);
    };
    match *k {
        KeySpec::Keynum {
            numkeys_at,
            first,
            step,
        } => {
            index(r, numkeys_at as i64);
            r.bulk_str("find_keys");
            r.map(2);
            r.bulk_str("type");
            r.bulk_str("keynum");
            r.bulk_str("spec");
            r.map(3);
            r.bulk_str("keynumidx");
            r.int(0);
            r.bulk_str("firstkey");
            r.int(first as i64);
            r.bulk_str("keystep");
            r.int(step as i64);
        }
        KeySpec::Keyword {
            keyword,
            start_from,
            last,
            step,
            limit,
        } => {
            r.bulk_str("begin_search");
            r.map(2);
            r.bulk_str("type");
            r.bulk_str("keyword");
            r.bulk_str("spec");
            r.map(2);
            r.bulk_str("keyword");
            r.bulk_str(keyword);
            r.bulk_str("startfrom");
            r.int(start_from as i64);
            range(r, last, step, limit);
        }
        // A range, or a custom spec described by its legacy triple.
        _ => {
            let (first, last, step) = k.legacy();
            index(r, first as i64);
            range(r, if last < 0 { last } else { last - first }, step, 0);
        }
    }
}

/// Redis 7 COMMAND INFO entry: [name, arity, flags, first, last, step, acl, tips, key specs,
/// subcommands].
fn write_info(r: &mut Reply, e: &Entry) {
    let s = e.spec;
    r.array(10);
    r.bulk_str(&e.fullname);
    r.int(s.arity as i64);
    let mut fl: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(bit, _)| s.flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    // Redis's CMD_MOVABLE_KEYS: the keys are not a fixed range (a key count, a keyword, or
    // options decide), listed just before allow_busy as Redis orders its flags.
    let movable = s.keys.members().iter().any(|k| {
        matches!(
            k,
            KeySpec::Keynum { .. } | KeySpec::Keyword { .. } | KeySpec::Custom { .. }
        )
    });
    if movable {
        let at = fl
            .iter()
            .position(|f| *f == "allow_busy")
            .unwrap_or(fl.len());
        fl.insert(at, "movablekeys");
    }
    r.set(fl.len());
    for f in fl {
        r.simple(f);
    }
    let (first, last, step) = s.keys.legacy();
    r.int(first as i64);
    r.int(last as i64);
    r.int(step as i64);
    let cats = s.acl_categories();
    r.set(acl::names(cats).count());
    for a in acl::names(cats) {
        r.simple(a);
    }
    r.set(0);
    // One key spec map per spec, lined up with Redis's (a custom spec: the range of its legacy
    // triple, if any).
    let lined = key_flags::specs(e);
    let specs: Vec<&(KeySpec, u16)> = lined
        .iter()
        .filter(|(k, _)| !matches!(k, KeySpec::Custom { legacy, .. } if legacy.0 <= 0))
        .collect();
    r.set(specs.len());
    for (k, bits) in specs {
        write_key_spec(r, k, *bits);
    }
    if e.subs.is_empty() {
        r.set(0);
    } else {
        let subs = sorted_subs(e);
        r.array(subs.len());
        for sub in subs {
            write_info(r, sub);
        }
    }
}

/// COMMAND DOCS entry value: summary, since, group (+ subcommands).
fn write_docs(r: &mut Reply, e: &Entry) {
    let s = e.spec;
    let has_subs = !e.subs.is_empty();
    r.map(if has_subs { 4 } else { 3 });
    r.bulk_str("summary");
    r.bulk_str(s.summary);
    r.bulk_str("since");
    r.bulk_str(s.since);
    r.bulk_str("group");
    r.bulk_str(s.group.name());
    if has_subs {
        r.bulk_str("subcommands");
        let subs = sorted_subs(e);
        r.map(subs.len());
        for sub in subs {
            r.bulk_str(&sub.fullname);
            write_docs(r, sub);
        }
    }
}

/// Bare COMMAND: every command's info.
pub fn command(cx: &mut ConnCtx, _args: &[&[u8]]) {
    let all = registry().all();
    cx.reply.array(all.len());
    for e in all {
        write_info(&mut cx.reply, e);
    }
}

pub fn command_count(cx: &mut ConnCtx, _args: &[&[u8]]) {
    cx.reply.int(registry().by_name.len() as i64);
}

/// Looks up "get" or "config|get" style names.
fn lookup_full(name: &[u8]) -> Option<&'static Entry> {
    let reg = registry();
    match name.iter().position(|&c| c == b'|') {
        Some(bar) => reg.lookup(&name[..bar])?.sub(&name[bar + 1..]),
        None => reg.lookup(name),
    }
}

pub fn command_info(cx: &mut ConnCtx, args: &[&[u8]]) {
    if args.len() == 2 {
        return command(cx, args);
    }
    cx.reply.array(args.len() - 2);
    for name in &args[2..] {
        match lookup_full(name) {
            Some(e) => write_info(&mut cx.reply, e),
            None => cx.reply.null_array(),
        }
    }
}

pub fn command_docs(cx: &mut ConnCtx, args: &[&[u8]]) {
    let entries: Vec<&Entry> = if args.len() == 2 {
        registry().all()
    } else {
        args[2..].iter().filter_map(|n| lookup_full(n)).collect()
    };
    cx.reply.map(entries.len());
    for e in entries {
        cx.reply.bulk_str(&e.fullname);
        write_docs(&mut cx.reply, e);
    }
}

pub fn command_list(cx: &mut ConnCtx, args: &[&[u8]]) {
    enum Filter<'a> {
        None,
        Module,
        Acl(String),
        Pattern(&'a [u8]),
    }
    let filter = if args.len() == 2 {
        Filter::None
    } else if args.len() == 5 && eq_ic(args[2], "filterby") {
        if eq_ic(args[3], "module") {
            Filter::Module
        } else if eq_ic(args[3], "aclcat") {
            Filter::Acl(String::from_utf8_lossy(args[4]).to_ascii_lowercase())
        } else if eq_ic(args[3], "pattern") {
            Filter::Pattern(args[4])
        } else {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
    } else {
        cx.reply.error(ERR_SYNTAX);
        return;
    };
    let keep = |e: &Entry| match &filter {
        Filter::None => true,
        Filter::Module => false,
        Filter::Acl(cat) => acl::names(e.spec.acl_categories())
            .any(|a| a.trim_start_matches('@').eq_ignore_ascii_case(cat)),
        Filter::Pattern(p) => glob::matches(p, e.fullname.as_bytes(), true),
    };
    let mut names: Vec<&str> = Vec::new();
    for e in registry().all() {
        if keep(e) {
            names.push(&e.fullname);
        }
        for s in sorted_subs(e) {
            if keep(s) {
                names.push(&s.fullname);
            }
        }
    }
    cx.reply.array(names.len());
    for n in names {
        cx.reply.bulk_str(n);
    }
}

/// Resolves the command in `cmdargs` and its keys with their access flags
/// (`key_flags::key_refs`), or writes Redis's error (`getKeysSubcommandImpl`).
fn key_refs(cx: &mut ConnCtx, cmdargs: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let Some(top) = registry().lookup(cmdargs[0]) else {
        cx.reply.error("ERR Invalid command specified");
        return None;
    };
    let e = if !top.subs.is_empty() && cmdargs.len() >= 2 {
        match top.sub(cmdargs[1]) {
            Some(s) => s,
            None => {
                cx.reply.error("ERR Invalid command specified");
                return None;
            }
        }
    } else {
        top
    };
    if !key_flags::has_keys(e) {
        cx.reply.error("ERR The command has no key arguments");
        return None;
    }
    let s = e.spec;
    let argc = cmdargs.len() as i32;
    if (s.arity > 0 && argc != s.arity) || (s.arity < 0 && argc < -s.arity) {
        cx.reply
            .error("ERR Invalid number of arguments specified for command");
        return None;
    }
    let refs = key_flags::key_refs(e, cmdargs);
    // A call naming no key is an error unless the command may name none (EVAL ... 0).
    if refs.is_empty() && s.flags & flags::NO_MANDATORY_KEYS == 0 {
        cx.reply
            .error("ERR Invalid arguments specified for command");
        return None;
    }
    Some(refs)
}

pub fn command_getkeys(cx: &mut ConnCtx, args: &[&[u8]]) {
    let cmdargs = &args[2..];
    let Some(refs) = key_refs(cx, cmdargs) else {
        return;
    };
    cx.reply.array(refs.len());
    for (p, _) in refs {
        cx.reply.bulk(cmdargs[p]);
    }
}

pub fn command_getkeysandflags(cx: &mut ConnCtx, args: &[&[u8]]) {
    let cmdargs = &args[2..];
    let Some(refs) = key_refs(cx, cmdargs) else {
        return;
    };
    cx.reply.array(refs.len());
    for (p, bits) in refs {
        cx.reply.array(2);
        cx.reply.bulk(cmdargs[p]);
        write_key_flags(&mut cx.reply, bits);
    }
}

pub fn command_help(cx: &mut ConnCtx, _args: &[&[u8]]) {
    help_reply(
        cx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
}
