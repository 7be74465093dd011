//! What SCAN, HSCAN, SSCAN and ZSCAN share: the cursor (Redis `parseScanCursorOrReply`), the
//! options (Redis 7.0 `scanGenericCommand`: COUNT, MATCH, TYPE for SCAN only, plus Redis 7.4's
//! NOVALUES for HSCAN) and the reply, `[cursor, [item, ...]]`.
//!
//! Redis order of checks, kept by the callers: the cursor is parsed first; HSCAN/SSCAN/ZSCAN
//! then look the key up (a missing key answers an empty scan, a wrong type WRONGTYPE, whatever
//! the options say), and only then are the options parsed.

use damselfly_protocol::Reply;

use super::util::{parse_i64, ERR_NOT_INT, ERR_SYNTAX};
use crate::config::glob;

pub const ERR_INVALID_CURSOR: &str = "ERR invalid cursor";

/// The bytes a C string function sees: up to the first NUL.
#[inline]
fn c_str(a: &[u8]) -> &[u8] {
    match a.iter().position(|&c| c == 0) {
        Some(n) => &a[..n],
        None => a,
    }
}

/// `strcasecmp(arg, name) == 0`.
#[inline]
fn c_eq_ic(arg: &[u8], name: &str) -> bool {
    c_str(arg).eq_ignore_ascii_case(name.as_bytes())
}

/// Redis `parseScanCursorOrReply`: `strtoul(s, &end, 10)` that must consume the whole C string
/// (so an empty one is cursor 0) without leading white space or overflow; an optional sign, and
/// a negative value wraps as strtoul's does ("-1" is 2^64-1).
pub fn parse_cursor(a: &[u8]) -> Option<u64> {
    let a = c_str(a);
    if a.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match a[0] {
        b'-' => (true, &a[1..]),
        b'+' => (false, &a[1..]),
        _ => (false, a),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// [`parse_cursor`], replying Redis's error when it fails.
pub fn cursor_arg(reply: &mut Reply, a: &[u8]) -> Option<u64> {
    let c = parse_cursor(a);
    if c.is_none() {
        reply.error(ERR_INVALID_CURSOR);
    }
    c
}

/// Which command the options are for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Target {
    /// SCAN: the keyspace (TYPE allowed).
    Keys,
    /// HSCAN (NOVALUES allowed).
    Hash,
    Set,
    ZSet,
}

/// Parsed options of one call.
#[derive(Clone, Debug)]
pub struct Opts<'a> {
    /// COUNT (10 by default; at least 1).
    pub count: usize,
    /// MATCH, unless absent or "*" (which matches everything).
    pub pattern: Option<&'a [u8]>,
    /// TYPE (SCAN only), as the C string Redis compares.
    pub type_name: Option<&'a [u8]>,
    /// NOVALUES (HSCAN only): fields without their values.
    pub novalues: bool,
}

impl<'a> Opts<'a> {
    /// Parses the options (`args` starts after the cursor), replying Redis's error when they are
    /// wrong: COUNT must be an integer (`ERR value is not an integer or out of range`) of at
    /// least 1, anything else is `ERR syntax error`. The last MATCH/COUNT/TYPE given wins.
    pub fn parse(reply: &mut Reply, args: &[&'a [u8]], target: Target) -> Option<Opts<'a>> {
        let mut o = Opts {
            count: 10,
            pattern: None,
            type_name: None,
            novalues: false,
        };
        let mut i = 0;
        while i < args.len() {
            let left = args.len() - i;
            if c_eq_ic(args[i], "count") && left >= 2 {
                let Some(n) = parse_i64(args[i + 1]) else {
                    reply.error(ERR_NOT_INT);
                    return None;
                };
                if n < 1 {
                    reply.error(ERR_SYNTAX);
                    return None;
                }
                o.count = n as usize;
                i += 2;
            } else if c_eq_ic(args[i], "match") && left >= 2 {
                o.pattern = (args[i + 1] != b"*").then_some(args[i + 1]);
                i += 2;
            } else if c_eq_ic(args[i], "type") && target == Target::Keys && left >= 2 {
                o.type_name = Some(c_str(args[i + 1]));
                i += 2;
            } else if c_eq_ic(args[i], "novalues") && target == Target::Hash {
                o.novalues = true;
                i += 1;
            } else {
                reply.error(ERR_SYNTAX);
                return None;
            }
        }
        Some(o)
    }

    /// Whether `item` passes MATCH.
    #[inline]
    pub fn matches(&self, item: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob::matches(p, item, false))
    }

    /// Whether a value of type `name` (as TYPE prints it) passes TYPE.
    #[inline]
    pub fn type_matches(&self, name: &str) -> bool {
        self.type_name
            .is_none_or(|t| t.eq_ignore_ascii_case(name.as_bytes()))
    }
}

/// The reply: the next cursor and the items (bulk strings: keys, members, or field/value and
/// member/score pairs flattened).
pub fn reply_page<T: AsRef<[u8]>>(reply: &mut Reply, next: u64, items: &[T]) {
    reply.array(2);
    reply.bulk(next.to_string().as_bytes());
    reply.array(items.len());
    for it in items {
        reply.bulk(it.as_ref());
    }
}

/// The reply for a missing key (Redis `shared.emptyscan`).
pub fn reply_empty(reply: &mut Reply) {
    reply_page::<&[u8]>(reply, 0, &[]);
}

/// The rest of HSCAN/SSCAN/ZSCAN once the key was found: parses the options after the cursor
/// (`args[3..]`), runs `scan(&opts, &mut items)` (one step of the value's scan from the cursor:
/// it pushes the matching items and returns the next cursor) and replies.
pub fn scan_value(
    reply: &mut Reply,
    args: &[&[u8]],
    target: Target,
    scan: impl FnOnce(&Opts<'_>, &mut Vec<Vec<u8>>) -> u64,
) {
    let Some(opts) = Opts::parse(reply, args.get(3..).unwrap_or_default(), target) else {
        return;
    };
    let mut items = Vec::new();
    let next = scan(&opts, &mut items);
    reply_page(reply, next, &items);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_parsing_follows_strtoul() {
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"+7"), Some(7));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1 "), None);
        assert_eq!(parse_cursor(b"1x"), None);
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"abc"), None);
        // C string: the argument ends at its first NUL.
        assert_eq!(parse_cursor(b"12\0junk"), Some(12));
        assert_eq!(parse_cursor(b"\0"), Some(0));
    }

    fn parse(args: &[&[u8]], target: Target) -> Result<Opts<'static>, Vec<u8>> {
        let mut r = Reply::default();
        let args: Vec<&'static [u8]> = args.iter().map(|a| &*a.to_vec().leak()).collect();
        Opts::parse(&mut r, &args, target).ok_or(r.buf)
    }

    #[test]
    fn options() {
        let o = parse(&[b"COUNT", b"5", b"match", b"a*"], Target::Set).unwrap();
        assert_eq!((o.count, o.pattern), (5, Some(&b"a*"[..])));
        assert_eq!(
            parse(&[b"MATCH", b"*"], Target::Hash).unwrap().pattern,
            None
        );
        assert_eq!(
            parse(&[b"count", b"0"], Target::Keys).unwrap_err(),
            b"-ERR syntax error\r\n"
        );
        assert_eq!(
            parse(&[b"count", b"x"], Target::Keys).unwrap_err(),
            b"-ERR value is not an integer or out of range\r\n"
        );
        assert!(parse(&[b"type", b"string"], Target::Keys).is_ok());
        assert!(parse(&[b"type", b"string"], Target::Hash).is_err());
        assert!(parse(&[b"novalues"], Target::Hash).unwrap().novalues);
        assert!(parse(&[b"novalues"], Target::Set).is_err());
        assert!(parse(&[b"count"], Target::ZSet).is_err());
        let o = parse(&[b"TYPE", b"Hash\0x"], Target::Keys).unwrap();
        assert!(o.type_matches("hash") && !o.type_matches("string"));
    }
}
