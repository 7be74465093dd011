//! Redis's propagation forms for the commands that are not replicated as they were sent
//! (Redis 7.0's `rewriteClientCommandVector` calls): relative expiries become absolute, and
//! commands whose effect a replica could not reproduce (random choice, float formatting,
//! "delete if already expired") become their effect.
//!
//! Computed on the shard right after the command ran (it still holds the key), from the
//! command's arguments, its reply and the key's state now, so the handlers stay free of
//! replication code. Which form a command takes is part of its declaration
//! (`.propagate(propagate::expire)` on EXPIRE's spec): nothing here matches command names.

use crate::engine::db::Db;

/// Commands as argument vectors.
pub type Cmds = Vec<Vec<Vec<u8>>>;

fn v(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// The key's absolute deadline now: Some(Some(ms)), Some(None) when it has none, None when
/// the key is gone.
fn deadline(db: &Db, key: &[u8]) -> Option<Option<u64>> {
    let pos = db.prime().find(key)?;
    Some(db.expire_at(pos))
}

fn has_any(args: &[&[u8]], words: &[&str]) -> bool {
    args.iter()
        .any(|a| words.iter().any(|w| a.eq_ignore_ascii_case(w.as_bytes())))
}

/// A command's propagation form (`CommandSpec::propagate`): computed on the shard right
/// after the command ran and changed something, from its arguments, its reply and the key's
/// state now. `None`: replicated as it was sent.
pub type PropagateFn = fn(db: &Db, args: &[&[u8]], reply: &[u8]) -> Option<Cmds>;

/// An absolute deadline as `SET key value PXAT ms`, or DEL when the key is already gone.
fn set_pxat(db: &Db, key: &[u8], value: &[u8]) -> Cmds {
    match deadline(db, key) {
        Some(Some(at)) => {
            let at = at.to_string();
            vec![v(&[b"SET", key, value, b"PXAT", at.as_bytes()])]
        }
        _ => vec![v(&[b"DEL", key])],
    }
}

/// The key's deadline as PEXPIREAT, nothing when it has none, DEL when it is gone.
fn pexpireat(db: &Db, key: &[u8]) -> Cmds {
    match deadline(db, key) {
        Some(Some(at)) => {
            let at = at.to_string();
            vec![v(&[b"PEXPIREAT", key, at.as_bytes()])]
        }
        Some(None) => vec![],
        None => vec![v(&[b"DEL", key])],
    }
}

/// SET with a relative expiry: SET ... PXAT (DEL when already expired); SET ... GET: without
/// the GET.
pub fn set(db: &Db, args: &[&[u8]], _reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    let opts = &args[3.min(args.len())..];
    if has_any(opts, &["ex", "px", "exat", "pxat"]) {
        return Some(set_pxat(db, key, args[2]));
    }
    if has_any(opts, &["get"]) {
        let kept: Vec<&[u8]> = args
            .iter()
            .enumerate()
            .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
            .map(|(_, a)| *a)
            .collect();
        return Some(vec![v(&kept)]);
    }
    None
}

/// SETEX, PSETEX: SET ... PXAT (DEL when already expired).
pub fn setex(db: &Db, args: &[&[u8]], _reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    let value = *args.get(3)?;
    Some(set_pxat(db, key, value))
}

/// GETEX: PERSIST, or PEXPIREAT at the deadline (DEL when already expired).
pub fn getex(db: &Db, args: &[&[u8]], _reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    if has_any(&args[2..], &["persist"]) {
        return Some(vec![v(&[b"PERSIST", key])]);
    }
    Some(pexpireat(db, key))
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: PEXPIREAT at the deadline (DEL when already expired).
pub fn expire(db: &Db, args: &[&[u8]], _reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    Some(pexpireat(db, key))
}

/// RESTORE with a relative TTL: the deadline, and ABSTTL appended (Redis's rewrite).
pub fn restore(db: &Db, args: &[&[u8]], _reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    let ttl = args.get(2)?;
    if ttl == b"0" || has_any(&args[4.min(args.len())..], &["absttl"]) {
        return None;
    }
    let Some(Some(at)) = deadline(db, key) else {
        return None;
    };
    let mut c = v(args);
    c[2] = at.to_string().into_bytes();
    c.push(b"ABSTTL".to_vec());
    Some(vec![c])
}

/// GETSET: SET.
pub fn getset(_db: &Db, args: &[&[u8]], _reply: &[u8]) -> Option<Cmds> {
    Some(vec![v(&[b"SET", args.get(1)?, args.get(2)?])])
}

/// GETDEL: DEL.
pub fn getdel(_db: &Db, args: &[&[u8]], _reply: &[u8]) -> Option<Cmds> {
    Some(vec![v(&[b"DEL", args.get(1)?])])
}

/// INCRBYFLOAT: SET of the result, KEEPTTL (a replica's float formatting may differ).
pub fn incrbyfloat(_db: &Db, args: &[&[u8]], reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    let val = bulks(reply)?.into_iter().next()?;
    Some(vec![v(&[b"SET", key, &val, b"KEEPTTL"])])
}

/// HINCRBYFLOAT: HSET of the result.
pub fn hincrbyfloat(_db: &Db, args: &[&[u8]], reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    let val = bulks(reply)?.into_iter().next()?;
    Some(vec![v(&[b"HSET", key, args.get(2)?, &val])])
}

/// SPOP: SREM of the members it chose, in batches of 1024 as Redis's SPOP with a count; one
/// DEL when the whole set went.
pub fn spop(db: &Db, args: &[&[u8]], reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    let members = bulks(reply)?;
    if members.is_empty() {
        return Some(vec![]);
    }
    if args.len() >= 3 && db.prime().find(key).is_none() {
        return Some(vec![v(&[b"DEL", key])]);
    }
    Some(
        members
            .chunks(1024)
            .map(|ch| {
                let mut c = v(&[b"SREM", key]);
                c.extend(ch.iter().cloned());
                c
            })
            .collect(),
    )
}

/// The bulk strings of a reply that is one bulk or a flat array of bulks (RESP2 or RESP3).
fn bulks(reply: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut p = 0usize;
    let line = |p: &mut usize| -> Option<&[u8]> {
        let rest = &reply[*p..];
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        *p += end + 2;
        Some(&rest[..end])
    };
    let head = line(&mut p)?;
    let count = match head.first()? {
        b'$' => {
            let n: usize = std::str::from_utf8(&head[1..]).ok()?.parse().ok()?;
            return Some(vec![reply.get(p..p + n)?.to_vec()]);
        }
        b'*' | b'~' => std::str::from_utf8(&head[1..]).ok()?.parse::<i64>().ok()?,
        b'_' => return Some(vec![]),
        _ => return None,
    };
    for _ in 0..count.max(0) {
        let h = line(&mut p)?;
        if h.first() != Some(&b'$') {
            return None;
        }
        let n: usize = std::str::from_utf8(&h[1..]).ok()?.parse().ok()?;
        out.push(reply.get(p..p + n)?.to_vec());
        p += n + 2;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bulk_replies() {
        assert_eq!(bulks(b"$3\r\nabc\r\n"), Some(vec![b"abc".to_vec()]));
        assert_eq!(
            bulks(b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n"),
            Some(vec![b"a".to_vec(), b"bc".to_vec()])
        );
        assert_eq!(bulks(b"*0\r\n"), Some(vec![]));
        assert_eq!(bulks(b":1\r\n"), None);
    }
}
