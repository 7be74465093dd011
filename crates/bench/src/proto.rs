//! Request encoding and minimal reply parsers for RESP2/RESP3 and the memcache
//! text protocol. Parsers never panic on malformed input: they return an error.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoError(pub String);

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtoError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ProtoError> {
    Err(ProtoError(msg.into()))
}

/// What a complete reply was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// Null bulk/array (`$-1`, `*-1`, `_`) or memcache `END` without values: a miss.
    Null,
    /// Any non-null, non-error value (a hit for GET).
    Value,
    /// `-ERR ...`, `!` blob error, memcache `ERROR`/`CLIENT_ERROR`/`SERVER_ERROR`/`NOT_STORED`.
    Error,
    /// RESP3 out-of-band push (`>`); not a reply to any request.
    Push,
}

/// Find "\r\n" starting at `from`; returns the index of '\r'.
#[inline]
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        if buf[i] == b'\r' && buf[i + 1] == b'\n' {
            return Some(i);
        }
        i += 1;
    }
    None
}

#[inline]
fn parse_int(s: &[u8]) -> Result<i64, ProtoError> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 18 {
        return err(format!("bad integer {:?}", String::from_utf8_lossy(s)));
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return err(format!("bad integer {:?}", String::from_utf8_lossy(s)));
        }
        v = v * 10 + i64::from(c - b'0');
    }
    Ok(if neg { -v } else { v })
}

/// Parse one complete RESP2/RESP3 reply at the start of `buf`.
/// Returns `Ok(None)` when more bytes are needed, or the consumed length and kind.
pub fn parse_resp(buf: &[u8]) -> Result<Option<(usize, ReplyKind)>, ProtoError> {
    let mut pos = 0usize;
    // Number of values still to read to finish the top-level reply.
    let mut pending: u64 = 1;
    let mut kind: Option<ReplyKind> = None;
    while pending > 0 {
        if pos >= buf.len() {
            return Ok(None);
        }
        let t = buf[pos];
        let Some(eol) = find_crlf(buf, pos + 1) else {
            return Ok(None);
        };
        let line = &buf[pos + 1..eol];
        let after = eol + 2;
        let top = kind.is_none();
        pending -= 1;
        match t {
            b'+' | b':' | b',' | b'#' | b'(' => {
                pos = after;
                if top {
                    kind = Some(ReplyKind::Value);
                }
            }
            b'_' => {
                pos = after;
                if top {
                    kind = Some(ReplyKind::Null);
                }
            }
            b'-' => {
                pos = after;
                if top {
                    kind = Some(ReplyKind::Error);
                }
            }
            b'$' | b'=' | b'!' => {
                let n = parse_int(line)?;
                if n < 0 {
                    pos = after;
                    if top {
                        kind = Some(ReplyKind::Null);
                    }
                } else {
                    let n = n as usize;
                    let end = after + n + 2;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    if &buf[after + n..end] != b"\r\n" {
                        return err("bulk string not terminated by CRLF");
                    }
                    pos = end;
                    if top {
                        kind = Some(if t == b'!' {
                            ReplyKind::Error
                        } else {
                            ReplyKind::Value
                        });
                    }
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = parse_int(line)?;
                pos = after;
                if n < 0 {
                    if top {
                        kind = Some(ReplyKind::Null);
                    }
                } else {
                    let n = n as u64;
                    let elems = if t == b'%' || t == b'|' { n * 2 } else { n };
                    pending = pending.saturating_add(elems);
                    if t == b'|' {
                        // An attribute precedes the real reply: one more value follows.
                        pending = pending.saturating_add(1);
                        continue;
                    }
                    if top {
                        kind = Some(if t == b'>' {
                            ReplyKind::Push
                        } else {
                            ReplyKind::Value
                        });
                    }
                }
            }
            other => {
                return err(format!(
                    "unexpected RESP type byte 0x{other:02x} ({:?})",
                    String::from_utf8_lossy(&buf[pos..eol.min(pos + 40)])
                ))
            }
        }
    }
    Ok(Some((pos, kind.unwrap_or(ReplyKind::Value))))
}

/// Parse one complete memcache text reply (`STORED`, `VALUE ... END`, `END`, errors, ...):
/// the consumed length, the kind, and the number of `VALUE` items (the hits of a multi-key
/// `get k1 k2 ...`, which answers `VALUE ...` once per key found, then `END`).
pub fn parse_memcache_counted(buf: &[u8]) -> Result<Option<(usize, ReplyKind, u32)>, ProtoError> {
    let mut pos = 0usize;
    let mut values = 0u32;
    loop {
        let Some(eol) = find_crlf(buf, pos) else {
            return Ok(None);
        };
        let line = &buf[pos..eol];
        let after = eol + 2;
        if line.starts_with(b"VALUE ") {
            // VALUE <key> <flags> <bytes> [<cas>]
            let mut it = line.split(|&c| c == b' ').filter(|s| !s.is_empty());
            let _ = it.next();
            let _key = it.next();
            let _flags = it.next();
            let Some(len) = it.next() else {
                return err("VALUE line without length");
            };
            let n = parse_int(len)?;
            if n < 0 {
                return err("negative VALUE length");
            }
            let end = after + n as usize + 2;
            if buf.len() < end {
                return Ok(None);
            }
            values += 1;
            pos = end;
            continue;
        }
        if line == b"END" {
            let kind = if values > 0 {
                ReplyKind::Value
            } else {
                ReplyKind::Null
            };
            return Ok(Some((after, kind, values)));
        }
        if values > 0 {
            return err(format!(
                "unexpected line inside VALUE block: {:?}",
                String::from_utf8_lossy(line)
            ));
        }
        let kind = if line == b"ERROR"
            || line.starts_with(b"CLIENT_ERROR")
            || line.starts_with(b"SERVER_ERROR")
            || line == b"NOT_STORED"
        {
            ReplyKind::Error
        } else if line == b"NOT_FOUND" {
            ReplyKind::Null
        } else {
            // STORED, DELETED, TOUCHED, OK, EXISTS, numbers (incr), VERSION ...
            ReplyKind::Value
        };
        return Ok(Some((after, kind, 0)));
    }
}

/// Append the decimal representation of `v`.
#[inline]
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

#[inline]
fn push_bulk_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'$');
    push_u64(out, len as u64);
    out.extend_from_slice(b"\r\n");
}

#[inline]
pub fn push_bulk(out: &mut Vec<u8>, s: &[u8]) {
    push_bulk_header(out, s.len());
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

#[inline]
pub fn push_array_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    push_u64(out, n as u64);
    out.extend_from_slice(b"\r\n");
}

/// Encode a whole command as a RESP array of bulk strings.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    push_array_header(out, args.len());
    for a in args {
        push_bulk(out, a);
    }
}

/// `SET key data [EX secs]`.
#[inline]
pub fn encode_set(out: &mut Vec<u8>, key: &[u8], data: &[u8], expiry: Option<u64>) {
    match expiry {
        None => {
            out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
            push_bulk(out, key);
            push_bulk(out, data);
        }
        Some(ex) => {
            out.extend_from_slice(b"*5\r\n$3\r\nSET\r\n");
            push_bulk(out, key);
            push_bulk(out, data);
            out.extend_from_slice(b"$2\r\nEX\r\n");
            let mut num = Vec::with_capacity(20);
            push_u64(&mut num, ex);
            push_bulk(out, &num);
        }
    }
}

/// `GET key`.
#[inline]
pub fn encode_get(out: &mut Vec<u8>, key: &[u8]) {
    out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
    push_bulk(out, key);
}

/// memcache `set <key> 0 <exptime> <bytes>\r\n<data>\r\n`.
#[inline]
pub fn encode_mc_set(out: &mut Vec<u8>, key: &[u8], data: &[u8], expiry: Option<u64>) {
    out.extend_from_slice(b"set ");
    out.extend_from_slice(key);
    out.extend_from_slice(b" 0 ");
    push_u64(out, expiry.unwrap_or(0));
    out.push(b' ');
    push_u64(out, data.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// memcache `get <key>\r\n`.
#[inline]
pub fn encode_mc_get(out: &mut Vec<u8>, key: &[u8]) {
    out.extend_from_slice(b"get ");
    out.extend_from_slice(key);
    out.extend_from_slice(b"\r\n");
}

/// memcache multi-key `get <k1> <k2> ...\r\n` (one reply: a `VALUE` block per key found, `END`).
#[inline]
pub fn encode_mc_multiget<K: AsRef<[u8]>>(out: &mut Vec<u8>, keys: &[K]) {
    out.extend_from_slice(b"get");
    for k in keys {
        out.push(b' ');
        out.extend_from_slice(k.as_ref());
    }
    out.extend_from_slice(b"\r\n");
}

/// One piece of a template argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(Vec<u8>),
    Key,
    Data,
}

/// One argument of a templated command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    pub parts: Vec<Part>,
}

impl Arg {
    fn has_placeholder(&self) -> bool {
        self.parts.iter().any(|p| !matches!(p, Part::Lit(_)))
    }
}

/// A parsed `--command` template: one or more commands (separated by ';') sent
/// together as one request; the key/data span of each command is repeated `batch` times.
#[derive(Debug, Clone)]
pub struct Template {
    /// Display name for the report row, e.g. "Mset".
    pub label: String,
    pub cmds: Vec<TemplateCmd>,
}

#[derive(Debug, Clone)]
pub struct TemplateCmd {
    pub head: Vec<Arg>,
    /// Arguments repeated once per batch element (empty when the command has no placeholder).
    pub repeat: Vec<Arg>,
    pub tail: Vec<Arg>,
}

fn parse_arg(tok: &str) -> Arg {
    let mut parts = Vec::new();
    let mut rest = tok;
    loop {
        let k = rest.find("__key__");
        let d = rest.find("__data__");
        let next = match (k, d) {
            (Some(a), Some(b)) if a < b => Some((a, Part::Key, 7)),
            (Some(_), Some(b)) => Some((b, Part::Data, 8)),
            (Some(a), None) => Some((a, Part::Key, 7)),
            (None, Some(b)) => Some((b, Part::Data, 8)),
            (None, None) => None,
        };
        match next {
            Some((at, part, len)) => {
                if at > 0 {
                    parts.push(Part::Lit(rest.as_bytes()[..at].to_vec()));
                }
                parts.push(part);
                rest = &rest[at + len..];
            }
            None => {
                if !rest.is_empty() || parts.is_empty() {
                    parts.push(Part::Lit(rest.as_bytes().to_vec()));
                }
                break;
            }
        }
    }
    Arg { parts }
}

/// Split a command line into arguments, honouring double quotes.
fn split_args(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    let mut have = false;
    for c in s.chars() {
        match c {
            '"' => {
                in_q = !in_q;
                have = true;
            }
            c if c.is_whitespace() && !in_q => {
                if have {
                    out.push(std::mem::take(&mut cur));
                    have = false;
                }
            }
            c => {
                cur.push(c);
                have = true;
            }
        }
    }
    if in_q {
        return Err(format!("unterminated quote in command '{s}'"));
    }
    if have {
        out.push(cur);
    }
    Ok(out)
}

pub fn parse_template(s: &str) -> Result<Template, String> {
    let mut cmds = Vec::new();
    let mut names = Vec::new();
    for piece in s.split(';') {
        let toks = split_args(piece)?;
        if toks.is_empty() {
            continue;
        }
        names.push(toks[0].to_ascii_lowercase());
        let args: Vec<Arg> = toks.iter().map(|t| parse_arg(t)).collect();
        let first = args.iter().position(Arg::has_placeholder);
        let last = args.iter().rposition(Arg::has_placeholder);
        let cmd = match (first, last) {
            (Some(f), Some(l)) => TemplateCmd {
                head: args[..f].to_vec(),
                repeat: args[f..=l].to_vec(),
                tail: args[l + 1..].to_vec(),
            },
            _ => TemplateCmd {
                head: args,
                repeat: Vec::new(),
                tail: Vec::new(),
            },
        };
        cmds.push(cmd);
    }
    if cmds.is_empty() {
        return Err(format!("empty command template '{s}'"));
    }
    let label = names
        .iter()
        .map(|n| {
            let mut c = n.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("+");
    Ok(Template { label, cmds })
}

impl Template {
    /// Replies expected for one request.
    pub fn replies(&self) -> usize {
        self.cmds.len()
    }

    /// Encode one request. `keys` holds `batch` formatted keys.
    pub fn encode(&self, out: &mut Vec<u8>, keys: &[Vec<u8>], data: &[u8]) {
        for cmd in &self.cmds {
            let reps = if cmd.repeat.is_empty() { 0 } else { keys.len() };
            let n = cmd.head.len() + cmd.repeat.len() * reps + cmd.tail.len();
            push_array_header(out, n);
            for a in &cmd.head {
                encode_arg(out, a, &[], data);
            }
            for k in keys.iter().take(reps) {
                for a in &cmd.repeat {
                    encode_arg(out, a, k, data);
                }
            }
            for a in &cmd.tail {
                encode_arg(out, a, &[], data);
            }
        }
    }
}

#[inline]
fn encode_arg(out: &mut Vec<u8>, a: &Arg, key: &[u8], data: &[u8]) {
    if let [single] = a.parts.as_slice() {
        match single {
            Part::Lit(l) => push_bulk(out, l),
            Part::Key => push_bulk(out, key),
            Part::Data => push_bulk(out, data),
        }
        return;
    }
    let len: usize = a
        .parts
        .iter()
        .map(|p| match p {
            Part::Lit(l) => l.len(),
            Part::Key => key.len(),
            Part::Data => data.len(),
        })
        .sum();
    push_bulk_header(out, len);
    for p in &a.parts {
        match p {
            Part::Lit(l) => out.extend_from_slice(l),
            Part::Key => out.extend_from_slice(key),
            Part::Data => out.extend_from_slice(data),
        }
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`parse_memcache_counted`] without the value count.
    fn parse_memcache(buf: &[u8]) -> Result<Option<(usize, ReplyKind)>, ProtoError> {
        Ok(parse_memcache_counted(buf)?.map(|(used, kind, _)| (used, kind)))
    }

    #[test]
    fn resp_simple() {
        assert_eq!(parse_resp(b"+OK\r\n").unwrap(), Some((5, ReplyKind::Value)));
        assert_eq!(parse_resp(b"$-1\r\n").unwrap(), Some((5, ReplyKind::Null)));
        assert_eq!(
            parse_resp(b"$3\r\nabc\r\n+OK").unwrap(),
            Some((9, ReplyKind::Value))
        );
        assert_eq!(parse_resp(b"$3\r\nab").unwrap(), None);
        assert_eq!(parse_resp(b"$3\r\nabc\r").unwrap(), None);
        assert_eq!(
            parse_resp(b"-ERR x\r\n").unwrap(),
            Some((8, ReplyKind::Error))
        );
        assert_eq!(parse_resp(b"_\r\n").unwrap(), Some((3, ReplyKind::Null)));
        assert_eq!(parse_resp(b"+O").unwrap(), None);
        assert_eq!(parse_resp(b"").unwrap(), None);
    }

    #[test]
    fn resp_aggregates() {
        let b = b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:5\r\n";
        assert_eq!(parse_resp(b).unwrap(), Some((b.len(), ReplyKind::Value)));
        assert_eq!(parse_resp(&b[..b.len() - 1]).unwrap(), None);
        let m = b"%1\r\n+server\r\n+redis\r\n";
        assert_eq!(parse_resp(m).unwrap(), Some((m.len(), ReplyKind::Value)));
        let p = b">2\r\n+message\r\n+x\r\n";
        assert_eq!(parse_resp(p).unwrap(), Some((p.len(), ReplyKind::Push)));
        let a = b"|1\r\n+k\r\n+v\r\n$1\r\nz\r\n";
        assert_eq!(parse_resp(a).unwrap(), Some((a.len(), ReplyKind::Value)));
        assert_eq!(parse_resp(b"*-1\r\n").unwrap(), Some((5, ReplyKind::Null)));
        assert_eq!(parse_resp(b"*0\r\n").unwrap(), Some((4, ReplyKind::Value)));
    }

    #[test]
    fn resp_garbage_is_error_not_panic() {
        assert!(parse_resp(b"?what\r\n").is_err());
        assert!(parse_resp(b"$abc\r\n").is_err());
        assert!(parse_resp(b"$3\r\nabcde\r\n").is_err());
        assert!(parse_resp(b"*99999999999999999999\r\n").is_err());
    }

    #[test]
    fn memcache_replies() {
        assert_eq!(
            parse_memcache(b"STORED\r\n").unwrap(),
            Some((8, ReplyKind::Value))
        );
        assert_eq!(
            parse_memcache(b"END\r\n").unwrap(),
            Some((5, ReplyKind::Null))
        );
        let v = b"VALUE k 0 3\r\nabc\r\nEND\r\n";
        assert_eq!(
            parse_memcache(v).unwrap(),
            Some((v.len(), ReplyKind::Value))
        );
        assert_eq!(parse_memcache(&v[..10]).unwrap(), None);
        assert_eq!(parse_memcache(&v[..18]).unwrap(), None);
        assert_eq!(
            parse_memcache(b"SERVER_ERROR out of memory\r\n").unwrap(),
            Some((28, ReplyKind::Error))
        );
        assert!(parse_memcache(b"VALUE k 0 x\r\n").is_err());
    }

    #[test]
    fn memcache_multiget_replies() {
        let v = b"VALUE a 0 3\r\nabc\r\nVALUE b 5 0\r\n\r\nVALUE c 0 4 99\r\nEN\r\n\r\nEND\r\nSTORED\r\n";
        let end = v.len() - b"STORED\r\n".len();
        assert_eq!(
            parse_memcache_counted(v).unwrap(),
            Some((end, ReplyKind::Value, 3))
        );
        assert_eq!(parse_memcache(v).unwrap(), Some((end, ReplyKind::Value)));
        // Every prefix short of the final END is incomplete, never an error or a short reply.
        for cut in 0..end {
            assert_eq!(
                parse_memcache_counted(&v[..cut]).unwrap(),
                None,
                "cut {cut}"
            );
        }
        // All keys missing: just END.
        assert_eq!(
            parse_memcache_counted(b"END\r\n").unwrap(),
            Some((5, ReplyKind::Null, 0))
        );
        assert_eq!(
            parse_memcache_counted(b"STORED\r\n").unwrap(),
            Some((8, ReplyKind::Value, 0))
        );
        // A value whose data is not followed by END or another VALUE is malformed.
        assert!(parse_memcache_counted(b"VALUE a 0 1\r\nx\r\nSTORED\r\n").is_err());
    }

    #[test]
    fn memcache_multiget_encoder() {
        let mut o = Vec::new();
        encode_mc_multiget(&mut o, &[b"k1".to_vec(), b"key:22".to_vec(), b"z".to_vec()]);
        assert_eq!(o, b"get k1 key:22 z\r\n");
        o.clear();
        encode_mc_multiget(&mut o, &[b"one"]);
        let mut single = Vec::new();
        encode_mc_get(&mut single, b"one");
        assert_eq!(o, single);
    }

    #[test]
    fn encoders() {
        let mut o = Vec::new();
        encode_set(&mut o, b"k", b"vv", None);
        assert_eq!(o, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n");
        o.clear();
        encode_set(&mut o, b"k", b"v", Some(10));
        assert_eq!(
            o,
            b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nEX\r\n$2\r\n10\r\n"
        );
        o.clear();
        encode_get(&mut o, b"key");
        assert_eq!(o, b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n");
        o.clear();
        encode_mc_set(&mut o, b"k", b"abc", None);
        assert_eq!(o, b"set k 0 0 3\r\nabc\r\n");
    }

    #[test]
    fn templates() {
        let t = parse_template("MSET __key__ __data__").unwrap();
        assert_eq!(t.label, "Mset");
        let mut o = Vec::new();
        t.encode(&mut o, &[b"a".to_vec(), b"b".to_vec()], b"x");
        assert_eq!(
            o,
            b"*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\nb\r\n$1\r\nx\r\n"
        );

        let t = parse_template("SET __key__ __data__;EXPIRE __key__ 3600").unwrap();
        assert_eq!(t.label, "Set+Expire");
        assert_eq!(t.replies(), 2);
        let mut o = Vec::new();
        t.encode(&mut o, &[b"k".to_vec()], b"v");
        assert_eq!(
            o,
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*3\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$4\r\n3600\r\n"
                .to_vec()
        );

        let t = parse_template("SET pre:__key__ \"a b\" EX 5").unwrap();
        let mut o = Vec::new();
        t.encode(&mut o, &[b"k".to_vec()], b"v");
        assert_eq!(
            o,
            b"*5\r\n$3\r\nSET\r\n$5\r\npre:k\r\n$3\r\na b\r\n$2\r\nEX\r\n$1\r\n5\r\n".to_vec()
        );

        let t = parse_template("PING").unwrap();
        let mut o = Vec::new();
        t.encode(&mut o, &[b"k".to_vec()], b"v");
        assert_eq!(o, b"*1\r\n$4\r\nPING\r\n".to_vec());
    }
}
