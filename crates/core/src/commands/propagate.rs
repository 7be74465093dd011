//! Redis's propagation forms for the commands that are not replicated as they were sent
//! (Redis 7.0's `rewriteClientCommandVector` calls): relative expiries become absolute, and
//! commands whose effect a replica could not reproduce (random choice, float formatting,
//! "delete if already expired") become their effect.
//!
//! Computed on the shard right after the command ran (it still holds the key), from the
//! command's arguments, its reply and the key's state now, so the handlers stay free of
//! replication code. `None`: the command is replicated as it was sent.

use crate::engine::db::Db;

type Cmds = Vec<Vec<Vec<u8>>>;

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

/// `name` ran with `args` on `db` and answered `reply`; it changed something.
pub fn effects(db: &Db, name: &str, args: &[&[u8]], reply: &[u8]) -> Option<Cmds> {
    let key = *args.get(1)?;
    match name {
        "set" => {
            if has_any(&args[3.min(args.len())..], &["ex", "px", "exat", "pxat"]) {
                return Some(match deadline(db, key) {
                    Some(Some(at)) => {
                        let at = at.to_string();
                        vec![v(&[b"SET", key, args[2], b"PXAT", at.as_bytes()])]
                    }
                    _ => vec![v(&[b"DEL", key])],
                });
            }
            if has_any(&args[3.min(args.len())..], &["get"]) {
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
        "setex" | "psetex" => Some(match (deadline(db, key), args.get(3)) {
            (Some(Some(at)), Some(val)) => {
                let at = at.to_string();
                vec![v(&[b"SET", key, val, b"PXAT", at.as_bytes()])]
            }
            _ => vec![v(&[b"DEL", key])],
        }),
        "getex" => {
            if has_any(&args[2..], &["persist"]) {
                return Some(vec![v(&[b"PERSIST", key])]);
            }
            Some(match deadline(db, key) {
                Some(Some(at)) => {
                    let at = at.to_string();
                    vec![v(&[b"PEXPIREAT", key, at.as_bytes()])]
                }
                Some(None) => vec![],
                None => vec![v(&[b"DEL", key])],
            })
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" => Some(match deadline(db, key) {
            Some(Some(at)) => {
                let at = at.to_string();
                vec![v(&[b"PEXPIREAT", key, at.as_bytes()])]
            }
            Some(None) => vec![],
            None => vec![v(&[b"DEL", key])],
        }),
        // RESTORE with a relative TTL: the deadline, and ABSTTL appended (Redis's rewrite).
        "restore" => {
            let ttl = args.get(2)?;
            if ttl == b"0" || has_any(&args[4.min(args.len())..], &["absttl"]) {
                return None;
            }
            let Some(Some(at)) = deadline(db, key) else {
                return None;
            };
            let at = at.to_string();
            let mut c = v(args);
            c[2] = at.into_bytes();
            c.push(b"ABSTTL".to_vec());
            Some(vec![c])
        }
        "getset" => Some(vec![v(&[b"SET", key, args.get(2)?])]),
        "getdel" => Some(vec![v(&[b"DEL", key])]),
        "incrbyfloat" => {
            let val = bulks(reply)?.into_iter().next()?;
            Some(vec![v(&[b"SET", key, &val, b"KEEPTTL"])])
        }
        "hincrbyfloat" => {
            let val = bulks(reply)?.into_iter().next()?;
            Some(vec![v(&[b"HSET", key, args.get(2)?, &val])])
        }
        "spop" => {
            let members = bulks(reply)?;
            if members.is_empty() {
                return Some(vec![]);
            }
            if args.len() >= 3 && db.prime().find(key).is_none() {
                // The whole set went: one DEL, as Redis does.
                return Some(vec![v(&[b"DEL", key])]);
            }
            // SREM in batches of 1024 members, as Redis's SPOP with a count.
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
        _ => None,
    }
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
