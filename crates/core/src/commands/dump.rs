//! DUMP and RESTORE: one key's value in Redis's serialized form (the RDB object encoding with
//! a version and CRC64 trailer), and the key images MIGRATE sends and a script's undo log keeps.

use super::spec::prelude::*;
use super::util::*;
use super::{propagate, CmdCtx};
use crate::engine::db::TtlMode;
use damselfly_types::rdb::object::{read_object, write_object};
use damselfly_types::rdb::wire::{verify_dump_payload, DUMP_PAYLOAD_ERROR};
use damselfly_types::rdb::{dump_payload, Reader, Writer};

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("dump", 2, READONLY, range(1, 1, 1), Shard(dump)).acl(acl::KEYSPACE)
        .doc(Group::Generic, "2.6.0", "Returns a serialized representation of the value stored at a key."),
    cmd("restore", -4, WRITE | DENYOOM, range(1, 1, 1), Shard(restore)).propagate(propagate::restore).acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc(Group::Generic, "2.6.0", "Creates a key from the serialized representation of a value."),
];

/// A key's state before a script's first write to it (a declared-keys script that must start
/// over puts its keys back: scripting/commands.rs): its value in DUMP's form and its expiry;
/// `None` when the key did not exist.
pub type KeyImage = Option<(Vec<u8>, Option<u64>)>;

pub fn key_image(c: &mut CmdCtx<'_>, key: &[u8]) -> KeyImage {
    let lim = c.shared.config.enc_limits();
    let now = c.now;
    let db = c.db();
    let pos = db.find_notouch(key, now)?;
    let at = db.expire_at(pos);
    let (_, v) = db.at(pos);
    let mut w = Writer::new(Vec::new());
    // Writes into a Vec cannot fail.
    let _ = write_object(&mut w, None, v, &lim);
    Some((w.into_inner(), at))
}

/// Puts `key` back as `image` (quietly: no notification; the key was locked all along).
pub fn restore_image(c: &mut CmdCtx<'_>, key: &[u8], image: KeyImage) {
    let lim = c.shared.config.enc_limits();
    let now = c.now;
    let db = c.db();
    db.remove(key, now);
    let Some((obj, at)) = image else {
        return;
    };
    let mut r = Reader::new(&obj[..]);
    let parsed = r.read_u8().and_then(|t| read_object(&mut r, t, &lim)).ok();
    let Some(loaded) = parsed.flatten() else {
        return;
    };
    let ttl = match at {
        Some(at) => TtlMode::At(at),
        None => TtlMode::Clear,
    };
    db.set(key, loaded.value, ttl, now);
    if let Some(d) = loaded.field_deadline {
        db.hfe.set(key, Some(d));
    }
}

/// DUMP key.
fn dump(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let lim = c.shared.config.enc_limits();
    let compress = c.shared.config.rdbcompression();
    let now = c.now;
    let Some(v) = c.db().get_read(args[1], now) else {
        c.reply.null();
        return;
    };
    let mut w = Writer::new(Vec::new());
    w.set_compression(compress);
    // Writes into a Vec cannot fail.
    let _ = write_object(&mut w, None, v, &lim);
    c.reply.bulk(&dump_payload(&w.into_inner()));
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency].
fn restore(c: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None::<i64>, None::<i64>);
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        if eq_ic(args[i], "replace") {
            replace = true;
        } else if eq_ic(args[i], "absttl") {
            absttl = true;
        } else if eq_ic(args[i], "idletime") && more && freq.is_none() {
            match parse_i64(args[i + 1]) {
                Some(v) if v >= 0 => idle = Some(v),
                Some(_) => return c.reply.error("ERR Invalid IDLETIME value, must be >= 0"),
                None => return c.reply.error(ERR_NOT_INT),
            }
            i += 1;
        } else if eq_ic(args[i], "freq") && more && idle.is_none() {
            match parse_i64(args[i + 1]) {
                Some(v) if (0..=255).contains(&v) => freq = Some(v),
                Some(_) => {
                    return c
                        .reply
                        .error("ERR Invalid FREQ value, must be >= 0 and <= 255")
                }
                None => return c.reply.error(ERR_NOT_INT),
            }
            i += 1;
        } else {
            return c.reply.error(ERR_SYNTAX);
        }
        i += 1;
    }
    let ttl = match parse_i64(args[2]) {
        Some(t) if t >= 0 => t,
        Some(_) => return c.reply.error("ERR Invalid TTL value, must be >= 0"),
        None => return c.reply.error(ERR_NOT_INT),
    };
    let now = c.now;
    let key = args[1];
    if !replace && c.db().exists(key, now) {
        return c.reply.error("BUSYKEY Target key name already exists.");
    }
    let Ok((obj, _version)) = verify_dump_payload(args[3], false) else {
        return c.reply.error(&format!("ERR {DUMP_PAYLOAD_ERROR}"));
    };
    let lim = c.shared.config.enc_limits();
    let mut r = Reader::new(obj);
    let parsed = r
        .read_u8()
        .and_then(|t| read_object(&mut r, t, &lim))
        .ok()
        .filter(|_| r.is_at_end());
    let Some(loaded) = parsed.flatten() else {
        return c.reply.error("ERR Bad data format");
    };
    let at = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t as u64),
        (t, false) => Some(now.saturating_add(t as u64)),
    };
    let db = c.db();
    let deleted = replace && db.remove(key, now).is_some();
    if at.is_some_and(|at| at <= now) {
        // Already expired: Redis deletes (REPLACE) and answers OK without creating it.
        if deleted {
            ev::emit(ev::GENERIC, "del", db.index, key);
        }
        c.reply.ok();
        return;
    }
    let ttl_mode = match at {
        Some(at) => TtlMode::At(at),
        None => TtlMode::Clear,
    };
    let pos = db.set(key, loaded.value, ttl_mode, now);
    // As Redis's objectSetLRUOrLFU: the figure of the policy's kind applies, the other is ignored.
    if crate::engine::access::lfu() {
        db.set_access(pos, now, None, freq.map(|f| f as u8));
    } else {
        db.set_access(pos, now, idle.map(|i| i as u64), None);
    }
    if let Some(d) = loaded.field_deadline {
        db.hfe.set(key, Some(d));
    }
    ev::emit(ev::GENERIC, "restore", db.index, key);
    c.reply.ok();
}
