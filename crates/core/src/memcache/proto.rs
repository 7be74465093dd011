//! The memcached text and meta protocols (memcached 1.6.18 as the reference): framing a request
//! out of the read buffer and validating it into a typed [`Request`]. Nothing here touches the
//! keyspace; `memcache/ops.rs` executes requests on shards and `memcache/session.rs` drives a
//! connection.
//!
//! Framing is the part that must be exact: after a malformed line memcached either answers an
//! error and goes on with the next line, or swallows a data block it refused (an oversized
//! `set`), or closes the connection (a line that never ends). [`parse`] says which.

use std::borrow::Cow;

use smallvec::SmallVec;

/// memcached's longest key.
pub const KEY_MAX_LEN: usize = 250;

/// Which command a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    // Retrieval (text): every key of the line, one reply each, then `END`.
    Get,
    Gets,
    Gat,
    Gats,
    // Storage (text): a data block follows the line.
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
    // Other keyed text commands.
    Delete,
    Incr,
    Decr,
    Touch,
    // Keyless text commands.
    FlushAll,
    Version,
    Verbosity,
    Stats,
    Quit,
    // Meta commands.
    MetaGet,
    MetaSet,
    MetaDelete,
    MetaArithmetic,
    MetaNoop,
    MetaDebug,
}

/// One meta flag as sent: its letter and the token glued to it (`T30` → `b'T'`, `b"30"`;
/// `v` → `b'v'`, `b""`). Return flags are echoed in request order, so the list keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaFlag<'a> {
    pub c: u8,
    pub tok: &'a [u8],
}

/// A validated request. Fields a command does not have keep their defaults.
#[derive(Debug)]
pub struct Request<'a> {
    pub cmd: Cmd,
    /// Retrieval commands: every key in order; keyed commands: the one key; keyless: empty.
    /// Meta commands with `b`: the base64-decoded key (owned).
    pub keys: SmallVec<[Cow<'a, [u8]>; 4]>,
    /// Storage commands: the client flags.
    pub flags: u32,
    /// Storage commands, `touch`, `gat`/`gats`: the expiration time as sent (relative seconds up
    /// to 30 days, absolute unix time beyond, negative = already expired; see [`deadline_ms`]).
    pub exptime: i64,
    /// `cas`: the compare value.
    pub cas: u64,
    /// `incr`/`decr`: the delta; `verbosity`: the level; `flush_all`: the delay (seconds).
    pub num: u64,
    /// `noreply` was given (text commands); meta commands use the `q` flag instead.
    pub noreply: bool,
    /// Storage commands and `ms`: the data block, without its `\r\n`.
    pub data: &'a [u8],
    /// `stats`: its arguments (`settings`, `items`, `slabs`...).
    pub args: SmallVec<[&'a [u8]; 2]>,
    /// Meta commands: the flags in request order, their tokens validated for the command.
    pub meta: SmallVec<[MetaFlag<'a>; 8]>,
}

/// What [`parse`] found at the start of the buffer.
// The request is returned by value: boxing it would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Parse<'a> {
    /// Not a whole request yet (a line without its end, or a data block still arriving).
    Incomplete,
    /// A request; the `usize` is how many bytes it took (line and data block).
    Request(Request<'a>, usize),
    /// An invalid request: answer `reply` (complete, with `\r\n`), drop `consumed` bytes and,
    /// when `close`, close the connection after writing it (memcached's `conn_closing`).
    ///
    /// - `reply` may be empty: a text command with `noreply` has its errors suppressed too
    ///   (memcached's `out_string`), and a line that never ends closes without a word.
    /// - `consumed` may exceed `buf.len()`: memcached *swallows* the data block of a storage
    ///   request it refused after reading its length (`SERVER_ERROR object too large for
    ///   cache`, and every `ms` error past the length token), so the caller must discard that
    ///   many bytes in total, including ones that have not arrived yet, before parsing again.
    ///   The decision depends on the line alone, so it is made as soon as the line is there.
    Error {
        reply: Cow<'static, [u8]>,
        consumed: usize,
        close: bool,
    },
    /// A storage request refused for its size whose key memcached also unlinks (`set` and
    /// every `ms`: "avoid stale data persisting in cache because we failed alloc"): delete
    /// `key`'s item, then answer and swallow as `Error` does.
    TooLarge {
        key: Cow<'a, [u8]>,
        reply: &'static [u8],
        consumed: usize,
    },
}

/// Request-independent limits of the parser.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// memcached's item size limit (`-I`, 1 MiB by default). As in memcached it bounds the
    /// whole item, not just the data block: a storage request is refused (`SERVER_ERROR object
    /// too large for cache`, its block swallowed) when `56 + key + 1 + (flags != 0 ? 4 : 0) +
    /// data + 2 > max_item_size` (56 = item header with CAS), so the largest value memcached
    /// 1.6.18 stores under key `a` with flags 0 is 1048516 bytes.
    pub max_item_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_item_size: 1024 * 1024,
        }
    }
}

/// memcached's limit on a line without its `\n`: once more than this many bytes have arrived
/// and none is a `\n`, it closes the connection without a reply unless the line starts (after
/// at most 100 spaces) with `get ` or `gets ` (`try_read_command_ascii`). Because memcached
/// only looks when a read leaves no `\n` in its buffer, a longer line that arrives in one read
/// is still served there; we decide on the line alone, so that how the bytes are split never
/// matters: a non-retrieval line longer than this closes the connection.
pub const MAX_LINE: usize = 2048;

/// Our bound on a retrieval line (`get`/`gets`, and `gat`/`gats`, which memcached serves when
/// the line arrives in one read): memcached grows its buffer without bound for them; past this
/// length without a `\n` we close the connection.
pub const MAX_RETRIEVAL_LINE: usize = 1024 * 1024;

/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`: an `O` token (with its letter) may be this long.
const MAX_OPAQUE_LEN: usize = 32;

/// memcached tokenizes at most 23 tokens of a line and counts a terminal one (`MAX_TOKENS`).
const MAX_TOKENS: usize = 24;

/// Meta commands refuse more than this many tokens, terminal one included
/// (`MFLAG_MAX_OPT_LENGTH`).
const MAX_META_TOKENS: usize = 20;

// Replies, verbatim from memcached 1.6.18.
const E_ERROR: &[u8] = b"ERROR\r\n";
const E_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const E_DELETE_USAGE: &[u8] =
    b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
const E_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
const E_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
const E_TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
const E_BAD_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
const E_SHUTDOWN: &[u8] = b"ERROR: shutdown not enabled\r\n";
const E_MG_TOO_MANY: &[u8] = b"CLIENT_ERROR options flags are too long\r\n";
const E_META_TOO_MANY: &[u8] = b"CLIENT_ERROR options flags too long\r\n";
const E_DUP_FLAG: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
const E_INVALID_FLAG: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
const E_BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
const E_DECODE_KEY: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
const E_M_LENGTH: &[u8] = b"CLIENT_ERROR incorrect length for M token\r\n";
const E_INITIAL: &[u8] = b"CLIENT_ERROR invalid numeric initial value\r\n";
const E_DELTA_VALUE: &[u8] = b"CLIENT_ERROR invalid numeric delta value\r\n";
const E_OPAQUE: &[u8] = b"CLIENT_ERROR opaque token too long\r\n";
const E_MS_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ms M token\r\n";
const E_MA_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ma M token\r\n";
const E_INVALID_OR_DUP: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";

impl<'a> Request<'a> {
    pub fn new(cmd: Cmd) -> Self {
        Request {
            cmd,
            keys: SmallVec::new(),
            flags: 0,
            exptime: 0,
            cas: 0,
            num: 0,
            noreply: false,
            data: &[],
            args: SmallVec::new(),
            meta: SmallVec::new(),
        }
    }

    /// The meta flag `c`, if sent.
    pub fn meta_flag(&self, c: u8) -> Option<&'a [u8]> {
        self.meta.iter().find(|f| f.c == c).map(|f| f.tok)
    }

    /// Whether the meta flag `c` was sent.
    pub fn has_meta(&self, c: u8) -> bool {
        self.meta.iter().any(|f| f.c == c)
    }
}

fn error<'a>(reply: &'static [u8], consumed: usize) -> Parse<'a> {
    Parse::Error {
        reply: Cow::Borrowed(reply),
        consumed,
        close: false,
    }
}

/// An error of a text command that took `noreply`: memcached's `out_string` swallows it.
fn error_nr<'a>(reply: &'static [u8], consumed: usize, noreply: bool) -> Parse<'a> {
    error(if noreply { b"" } else { reply }, consumed)
}

fn close<'a>(consumed: usize) -> Parse<'a> {
    Parse::Error {
        reply: Cow::Borrowed(b""),
        consumed,
        close: true,
    }
}

/// Whether memcached would let this unterminated line grow past [`MAX_LINE`]: at most 100
/// leading spaces, then `get ` or `gets ` (we add `gat `/`gats `, see [`MAX_RETRIEVAL_LINE`]).
fn is_retrieval_line(buf: &[u8]) -> bool {
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    if spaces > 100 {
        return false;
    }
    let rest = &buf[spaces..];
    [&b"get "[..], b"gets ", b"gat ", b"gats "]
        .iter()
        .any(|p| rest.starts_with(p))
}

fn find_nl(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// Frames and validates the request at the start of `buf`.
///
/// Call it again on the same (grown) buffer after `Incomplete`; the answer never depends on how
/// the bytes were split. It does not allocate by an announced length: a data block is borrowed
/// once it has all arrived.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Parse<'a> {
    if buf.is_empty() {
        return Parse::Incomplete;
    }
    let window = &buf[..buf.len().min(MAX_LINE + 1)];
    let nl = match find_nl(window) {
        Some(nl) => nl,
        None if buf.len() <= MAX_LINE => return Parse::Incomplete,
        None if !is_retrieval_line(buf) => return close(MAX_LINE + 1),
        None => {
            let window = &buf[..buf.len().min(MAX_RETRIEVAL_LINE + 1)];
            match find_nl(window) {
                Some(nl) => nl,
                None if buf.len() <= MAX_RETRIEVAL_LINE => return Parse::Incomplete,
                None => return close(MAX_RETRIEVAL_LINE + 1),
            }
        }
    };
    let consumed = nl + 1;
    // memcached strips one `\r` before the `\n`, except on a line that is just "\r"; a bare
    // `\n` ends a line too. It then reads the line as a C string: a NUL ends it early.
    let mut line = &buf[..nl];
    if nl > 1 && line[nl - 1] == b'\r' {
        line = &line[..nl - 1];
    }
    if let Some(z) = line.iter().position(|&b| b == 0) {
        line = &line[..z];
    }
    // Only spaces separate tokens (a tab is part of one).
    let toks: SmallVec<[&'a [u8]; 24]> = line
        .split(|&b| b == b' ')
        .filter(|t| !t.is_empty())
        .collect();
    text_command(buf, &toks, consumed, limits)
}

fn text_command<'a>(
    buf: &'a [u8],
    toks: &[&'a [u8]],
    consumed: usize,
    limits: &Limits,
) -> Parse<'a> {
    // memcached's token count: at most 23 tokens, plus the terminal one.
    let nt = toks.len().min(MAX_TOKENS - 1) + 1;
    if nt < 2 || toks[0].len() < 2 {
        return error(E_ERROR, consumed);
    }
    let name = toks[0];
    // `noreply` is whatever the last (counted) token says (`set_noreply_maybe`).
    let noreply = || toks[nt - 2] == b"noreply";
    if name.len() == 2 && name[0] == b'm' {
        return match name[1] {
            b'g' => meta_get(toks, nt, consumed),
            b's' => meta_set(buf, toks, nt, consumed, limits),
            b'd' => meta_delete(toks, nt, consumed),
            b'a' => meta_arithmetic(toks, nt, consumed),
            b'n' => Parse::Request(Request::new(Cmd::MetaNoop), consumed),
            b'e' => meta_debug(toks, nt, consumed),
            _ => error(E_ERROR, consumed),
        };
    }
    if name[0] == b'g' {
        if nt < 3 {
            return error(E_ERROR, consumed);
        }
        return match name {
            b"get" => retrieval(Cmd::Get, toks, consumed),
            b"gets" => retrieval(Cmd::Gets, toks, consumed),
            b"gat" => retrieval(Cmd::Gat, toks, consumed),
            b"gats" => retrieval(Cmd::Gats, toks, consumed),
            _ => error(E_ERROR, consumed),
        };
    }
    let storage = match name {
        b"set" => Some(Cmd::Set),
        b"add" => Some(Cmd::Add),
        b"replace" => Some(Cmd::Replace),
        b"append" => Some(Cmd::Append),
        b"prepend" => Some(Cmd::Prepend),
        b"cas" => Some(Cmd::Cas),
        _ => None,
    };
    if let Some(cmd) = storage {
        let base = if cmd == Cmd::Cas { 7 } else { 6 };
        if nt != base && nt != base + 1 {
            return error(E_ERROR, consumed);
        }
        return update(buf, cmd, toks, noreply(), consumed, limits);
    }
    match name {
        b"stats" => {
            let mut r = Request::new(Cmd::Stats);
            r.args.extend(toks[1..].iter().copied());
            Parse::Request(r, consumed)
        }
        b"incr" | b"decr" => {
            if nt != 4 && nt != 5 {
                return error(E_ERROR, consumed);
            }
            let noreply = noreply();
            if toks[1].len() > KEY_MAX_LEN {
                return error_nr(E_FORMAT, consumed, noreply);
            }
            let Some(delta) = parse_u64(toks[2]) else {
                return error_nr(E_DELTA, consumed, noreply);
            };
            let mut r = Request::new(if name == b"incr" {
                Cmd::Incr
            } else {
                Cmd::Decr
            });
            r.keys.push(Cow::Borrowed(toks[1]));
            r.num = delta;
            r.noreply = noreply;
            Parse::Request(r, consumed)
        }
        b"delete" => {
            if !(3..=5).contains(&nt) {
                return error(E_ERROR, consumed);
            }
            // The legacy time argument: only `0` is still accepted.
            let mut noreply = false;
            if nt > 3 {
                let hold_is_zero = toks[2] == b"0";
                noreply = self::noreply(toks, nt);
                let valid =
                    (nt == 4 && (hold_is_zero || noreply)) || (nt == 5 && hold_is_zero && noreply);
                if !valid {
                    return error_nr(E_DELETE_USAGE, consumed, noreply);
                }
            }
            if toks[1].len() > KEY_MAX_LEN {
                return error_nr(E_FORMAT, consumed, noreply);
            }
            let mut r = Request::new(Cmd::Delete);
            r.keys.push(Cow::Borrowed(toks[1]));
            r.noreply = noreply;
            Parse::Request(r, consumed)
        }
        b"touch" => {
            if nt != 4 && nt != 5 {
                return error(E_ERROR, consumed);
            }
            let noreply = noreply();
            if toks[1].len() > KEY_MAX_LEN {
                return error_nr(E_FORMAT, consumed, noreply);
            }
            let Some(exptime) = parse_i32(toks[2]) else {
                return error_nr(E_EXPTIME, consumed, noreply);
            };
            let mut r = Request::new(Cmd::Touch);
            r.keys.push(Cow::Borrowed(toks[1]));
            r.exptime = exptime.into();
            r.noreply = noreply;
            Parse::Request(r, consumed)
        }
        b"bget" => {
            // memcached's undocumented ancient alias of get.
            if nt < 3 {
                return error(E_ERROR, consumed);
            }
            retrieval(Cmd::Get, toks, consumed)
        }
        b"flush_all" => {
            if !(2..=4).contains(&nt) {
                return error(E_ERROR, consumed);
            }
            let noreply = noreply();
            let mut exptime = 0;
            // `flush_all 0 20` flushes: a third token that is not noreply is ignored.
            if nt != if noreply { 3 } else { 2 } {
                match parse_i32(toks[1]) {
                    Some(e) => exptime = e,
                    None => return error_nr(E_EXPTIME, consumed, noreply),
                }
            }
            let mut r = Request::new(Cmd::FlushAll);
            r.exptime = exptime.into();
            r.num = exptime.max(0) as u64;
            r.noreply = noreply;
            Parse::Request(r, consumed)
        }
        b"version" => Parse::Request(Request::new(Cmd::Version), consumed),
        b"quit" => Parse::Request(Request::new(Cmd::Quit), consumed),
        b"verbosity" => {
            if nt != 3 && nt != 4 {
                return error(E_ERROR, consumed);
            }
            let noreply = noreply();
            let Some(level) = parse_u32(toks[1]) else {
                return error_nr(E_FORMAT, consumed, noreply);
            };
            let mut r = Request::new(Cmd::Verbosity);
            r.num = level.into();
            r.noreply = noreply;
            Parse::Request(r, consumed)
        }
        // memcached's default (no `-A`) answer.
        b"shutdown" => error(E_SHUTDOWN, consumed),
        // Everything else, including memcached's admin commands we do not have (`slabs`,
        // `lru`, `lru_crawler`, `watch`, `cache_memlimit`, `extstore`...).
        _ => error(E_ERROR, consumed),
    }
}

fn noreply(toks: &[&[u8]], nt: usize) -> bool {
    toks[nt - 2] == b"noreply"
}

/// `get`, `gets`, `gat`, `gats`: every key of the line (memcached re-tokenizes a long line in
/// batches, so there is no limit on their number).
fn retrieval<'a>(cmd: Cmd, toks: &[&'a [u8]], consumed: usize) -> Parse<'a> {
    let mut r = Request::new(cmd);
    let mut keys = &toks[1..];
    if matches!(cmd, Cmd::Gat | Cmd::Gats) {
        let Some(exptime) = parse_i32(keys[0]) else {
            return error(E_EXPTIME, consumed);
        };
        r.exptime = exptime.into();
        // `gat 10` with no key at all answers just `END`.
        keys = &keys[1..];
    }
    // A key too long anywhere fails the whole line (memcached drops the values it had
    // already queued for the earlier keys).
    if keys.iter().any(|k| k.len() > KEY_MAX_LEN) {
        return error(E_FORMAT, consumed);
    }
    r.keys.extend(keys.iter().map(|&k| Cow::Borrowed(k)));
    Parse::Request(r, consumed)
}

/// Whether memcached's `item_size_ok` refuses the item (see [`Limits::max_item_size`]).
fn too_large(nkey: usize, flags: u32, vlen: usize, limits: &Limits) -> bool {
    const HEADER: usize = 48 + 8; // sizeof(item) + CAS on 64-bit
    let suffix = if flags == 0 { 0 } else { 4 };
    HEADER + nkey + 1 + suffix + vlen + 2 > limits.max_item_size
}

/// The data block of `vlen` bytes after a line of `line_len` bytes: `Ok(data, consumed)`,
/// `Err(None)` while it is still arriving, `Err(Some(consumed))` when it does not end in
/// `\r\n` (memcached reads exactly `vlen + 2` bytes and then checks their last two).
fn data_block(buf: &[u8], line_len: usize, vlen: usize) -> Result<(&[u8], usize), Option<usize>> {
    let end = line_len + vlen + 2;
    if buf.len() < end {
        return Err(None);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err(Some(end));
    }
    Ok((&buf[line_len..end - 2], end))
}

/// `set`/`add`/`replace`/`append`/`prepend`/`cas` (token count already checked).
fn update<'a>(
    buf: &'a [u8],
    cmd: Cmd,
    toks: &[&'a [u8]],
    noreply: bool,
    consumed: usize,
    limits: &Limits,
) -> Parse<'a> {
    // None of these errors swallows the data block: memcached reads it as the next command
    // line (usually answering `ERROR` to it).
    if toks[1].len() > KEY_MAX_LEN {
        return error_nr(E_FORMAT, consumed, noreply);
    }
    let (Some(flags), Some(exptime), Some(vlen)) =
        (parse_u32(toks[2]), parse_i32(toks[3]), parse_i32(toks[4]))
    else {
        return error_nr(E_FORMAT, consumed, noreply);
    };
    let mut cas = 0;
    if cmd == Cmd::Cas {
        match parse_u64(toks[5]) {
            Some(c) => cas = c,
            None => return error_nr(E_FORMAT, consumed, noreply),
        }
    }
    if !(0..=i32::MAX - 2).contains(&vlen) {
        return error_nr(E_FORMAT, consumed, noreply);
    }
    let vlen = vlen as usize;
    if too_large(toks[1].len(), flags, vlen, limits) {
        // Swallowed, even bytes that have not arrived yet.
        if cmd == Cmd::Set {
            return Parse::TooLarge {
                key: Cow::Borrowed(toks[1]),
                reply: if noreply { b"" } else { E_TOO_LARGE },
                consumed: consumed + vlen + 2,
            };
        }
        return error_nr(E_TOO_LARGE, consumed + vlen + 2, noreply);
    }
    match data_block(buf, consumed, vlen) {
        Err(None) => Parse::Incomplete,
        Err(Some(end)) => error_nr(E_BAD_CHUNK, end, noreply),
        Ok((data, end)) => {
            let mut r = Request::new(cmd);
            r.keys.push(Cow::Borrowed(toks[1]));
            r.flags = flags;
            r.exptime = exptime.into();
            r.cas = cas;
            r.data = data;
            r.noreply = noreply;
            Parse::Request(r, end)
        }
    }
}

/// What memcached's `_meta_flag_preparse` made of the flags.
struct MetaFlags<'a> {
    flags: SmallVec<[MetaFlag<'a>; 8]>,
    /// The base64-decoded key (`b`).
    key: Option<Vec<u8>>,
}

/// memcached 1.6.18's `_meta_flag_preparse`, shared by `mg`, `ms`, `md` and `ma`: every
/// command accepts the same letters (`b N T R l O P L k s t c f v h u q F C M J D I`; `E`, `S`
/// and the rest are invalid). A repeated letter, or a token starting with a byte >= 127, is a
/// duplicate; an unknown letter stops at once; a bad numeric token does not, and the last error
/// message set wins (`F` sets none, leaving `bad command line format`).
fn meta_preparse<'a>(key: &[u8], toks: &[&'a [u8]]) -> Result<MetaFlags<'a>, &'static [u8]> {
    let mut seen = [false; 127];
    let mut out = MetaFlags {
        flags: SmallVec::new(),
        key: None,
    };
    let mut err: Option<&'static [u8]> = None;
    let mut has_error = false;
    for &t in toks {
        let c = t[0];
        if c >= 127 || seen[c as usize] {
            return Err(E_DUP_FLAG);
        }
        seen[c as usize] = true;
        let tok = &t[1..];
        match c {
            b'b' => match crate::base64::decode(key) {
                Some(k) => out.key = Some(k),
                None => {
                    err = Some(E_DECODE_KEY);
                    has_error = true;
                }
            },
            b'N' | b'T' | b'R' => {
                if parse_i32(tok).is_none() {
                    err = Some(E_BAD_TOKEN);
                    has_error = true;
                }
            }
            b'l' | b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'v' | b'h' | b'u'
            | b'q' | b'I' => {}
            b'F' => {
                if parse_u32(tok).is_none() {
                    has_error = true;
                }
            }
            b'C' => {
                if parse_u64(tok).is_none() {
                    err = Some(E_BAD_TOKEN);
                    has_error = true;
                }
            }
            b'M' => {
                if tok.len() != 1 {
                    err = Some(E_M_LENGTH);
                    has_error = true;
                }
            }
            b'J' => {
                if parse_u64(tok).is_none() {
                    err = Some(E_INITIAL);
                    has_error = true;
                }
            }
            b'D' => {
                if parse_u64(tok).is_none() {
                    err = Some(E_DELTA_VALUE);
                    has_error = true;
                }
            }
            _ => return Err(E_INVALID_FLAG),
        }
        out.flags.push(MetaFlag { c, tok });
    }
    if has_error {
        Err(err.unwrap_or(E_FORMAT))
    } else {
        Ok(out)
    }
}

fn opaque_too_long(flags: &[MetaFlag]) -> bool {
    flags
        .iter()
        .any(|f| f.c == b'O' && f.tok.len() + 1 > MAX_OPAQUE_LEN)
}

fn meta_request<'a>(cmd: Cmd, key: &'a [u8], pre: MetaFlags<'a>) -> Request<'a> {
    let mut r = Request::new(cmd);
    r.keys.push(match pre.key {
        Some(k) => Cow::Owned(k),
        None => Cow::Borrowed(key),
    });
    // Validated above; 0 where absent.
    for f in &pre.flags {
        match f.c {
            b'T' => r.exptime = parse_i32(f.tok).unwrap_or(0).into(),
            b'F' => r.flags = parse_u32(f.tok).unwrap_or(0),
            b'C' => r.cas = parse_u64(f.tok).unwrap_or(0),
            _ => {}
        }
    }
    r.meta = pre.flags;
    r
}

/// `mg <key> <flags>*`. Fills `exptime` from `T`.
fn meta_get<'a>(toks: &[&'a [u8]], nt: usize, consumed: usize) -> Parse<'a> {
    if nt < 3 {
        return error(E_ERROR, consumed);
    }
    if toks[1].len() > KEY_MAX_LEN {
        return error(E_FORMAT, consumed);
    }
    if nt > MAX_META_TOKENS {
        return error(E_MG_TOO_MANY, consumed);
    }
    let pre = match meta_preparse(toks[1], &toks[2..]) {
        Ok(pre) => pre,
        Err(e) => return error(e, consumed),
    };
    // memcached checks this while building the reply (after a `T` has touched the item);
    // we refuse the request up front.
    if opaque_too_long(&pre.flags) {
        return error(E_OPAQUE, consumed);
    }
    Parse::Request(meta_request(Cmd::MetaGet, toks[1], pre), consumed)
}

/// `ms <key> <datalen> <flags>*` + data block. Fills `flags` (`F`), `exptime` (`T`), `cas`
/// (`C`) and `data`; the mode is the `M` flag's token (`E A P R S`). Every error found after
/// the length token swallows the data block, and none is silenced by `q`.
fn meta_set<'a>(
    buf: &'a [u8],
    toks: &[&'a [u8]],
    nt: usize,
    consumed: usize,
    limits: &Limits,
) -> Parse<'a> {
    if nt < 3 {
        return error(E_ERROR, consumed);
    }
    if toks[1].len() > KEY_MAX_LEN || nt == 3 {
        return error(E_FORMAT, consumed);
    }
    if nt > MAX_META_TOKENS {
        return error(E_META_TOO_MANY, consumed);
    }
    let vlen = match parse_i32(toks[2]) {
        Some(v) if (0..=i32::MAX - 2).contains(&v) => v as usize,
        _ => return error(E_FORMAT, consumed),
    };
    let swallow = consumed + vlen + 2;
    let pre = match meta_preparse(toks[1], &toks[3..]) {
        Ok(pre) => pre,
        Err(e) => return error(e, swallow),
    };
    let mut err = None;
    if opaque_too_long(&pre.flags) {
        err = Some(E_OPAQUE);
    }
    // An invalid mode wins over a long opaque token.
    if let Some(m) = pre.flags.iter().find(|f| f.c == b'M') {
        if !matches!(m.tok[0], b'E' | b'A' | b'P' | b'R' | b'S') {
            err = Some(E_MS_MODE);
        }
    }
    if let Some(e) = err {
        return error(e, swallow);
    }
    let r = meta_request(Cmd::MetaSet, toks[1], pre);
    if too_large(r.keys[0].len(), r.flags, vlen, limits) {
        return Parse::TooLarge {
            key: r.keys[0].clone(),
            reply: E_TOO_LARGE,
            consumed: swallow,
        };
    }
    match data_block(buf, consumed, vlen) {
        Err(None) => Parse::Incomplete,
        Err(Some(end)) => error(E_BAD_CHUNK, end),
        Ok((data, end)) => {
            let mut r = r;
            r.data = data;
            Parse::Request(r, end)
        }
    }
}

/// What `md` and `ma` check first, in memcached's order: the token count, the key length,
/// too many flags, then the flags themselves (every flag error becomes `invalid or duplicate
/// flag` for these two).
fn md_ma_head<'a>(toks: &[&'a [u8]], nt: usize) -> Result<MetaFlags<'a>, &'static [u8]> {
    if nt < 3 {
        return Err(E_ERROR);
    }
    if toks[1].len() > KEY_MAX_LEN {
        return Err(E_FORMAT);
    }
    if nt > MAX_META_TOKENS {
        return Err(E_META_TOO_MANY);
    }
    meta_preparse(toks[1], &toks[2..]).map_err(|_| E_INVALID_OR_DUP)
}

/// `md <key> <flags>*`. Fills `exptime` (`T`) and `cas` (`C`).
fn meta_delete<'a>(toks: &[&'a [u8]], nt: usize, consumed: usize) -> Parse<'a> {
    let pre = match md_ma_head(toks, nt) {
        Ok(pre) => pre,
        Err(e) => return error(e, consumed),
    };
    if opaque_too_long(&pre.flags) {
        return error(E_OPAQUE, consumed);
    }
    Parse::Request(meta_request(Cmd::MetaDelete, toks[1], pre), consumed)
}

/// `ma <key> <flags>*`. Fills `num` (the delta `D`, 1 by default), `exptime` (`T`) and `cas`
/// (`C`); the mode is the `M` flag's token (`I + D -`), the initial value `J` and the
/// autovivify ttl `N` are read with [`parse_u64`] / [`parse_i32`].
fn meta_arithmetic<'a>(toks: &[&'a [u8]], nt: usize, consumed: usize) -> Parse<'a> {
    let pre = match md_ma_head(toks, nt) {
        Ok(pre) => pre,
        Err(e) => return error(e, consumed),
    };
    if let Some(m) = pre.flags.iter().find(|f| f.c == b'M') {
        if !matches!(m.tok[0], b'I' | b'+' | b'D' | b'-') {
            return error(E_MA_MODE, consumed);
        }
    }
    // memcached checks this only while building the reply, after the arithmetic is done; we
    // refuse the request up front.
    if opaque_too_long(&pre.flags) {
        return error(E_OPAQUE, consumed);
    }
    let mut r = meta_request(Cmd::MetaArithmetic, toks[1], pre);
    r.num = r.meta_flag(b'D').and_then(parse_u64).unwrap_or(1);
    Parse::Request(r, consumed)
}

/// `me <key> [b]`: other tokens are ignored; `b` counts only as the token right after the key.
/// Its failures are all `bad command line format`.
fn meta_debug<'a>(toks: &[&'a [u8]], nt: usize, consumed: usize) -> Parse<'a> {
    if nt < 3 || toks[1].len() > KEY_MAX_LEN {
        return error(E_FORMAT, consumed);
    }
    let mut r = Request::new(Cmd::MetaDebug);
    if nt >= 4 && toks[2] == b"b" {
        let Some(k) = crate::base64::decode(toks[1]) else {
            return error(E_FORMAT, consumed);
        };
        r.keys.push(Cow::Owned(k));
        r.meta.push(MetaFlag { c: b'b', tok: b"" });
    } else {
        r.keys.push(Cow::Borrowed(toks[1]));
    }
    Parse::Request(r, consumed)
}

// --- memcached's number parsing (util.c `safe_strto*` over glibc `strto*`) -----------------
//
// Leading C whitespace and a sign are accepted, the digits must be followed by the end of the
// token or a whitespace byte (after which anything goes: `5\tz` is 5), and the 32-bit variants
// truncate a 64-bit result instead of refusing it (`4294967297` is 1 as a length or a ttl).

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `strtoull`/`strtol`'s scan: (negative, magnitude or `None` past `u64::MAX`), or `None` when
/// there is no number or it is followed by something other than whitespace.
fn c_scan(tok: &[u8]) -> Option<(bool, Option<u64>)> {
    let mut i = tok.iter().take_while(|&&b| is_c_space(b)).count();
    let mut neg = false;
    if i < tok.len() && (tok[i] == b'+' || tok[i] == b'-') {
        neg = tok[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut mag: Option<u64> = Some(0);
    while i < tok.len() && tok[i].is_ascii_digit() {
        mag = mag
            .and_then(|m| m.checked_mul(10))
            .and_then(|m| m.checked_add(u64::from(tok[i] - b'0')));
        i += 1;
    }
    if i == start || (i < tok.len() && !is_c_space(tok[i])) {
        return None;
    }
    Some((neg, mag))
}

/// memcached's `safe_strtoull`: `-5` is refused, but `-18446744073709551615` is 1 (strtoull
/// negates, and only a result that looks negative as signed is checked for a minus).
pub fn parse_u64(tok: &[u8]) -> Option<u64> {
    let (neg, mag) = c_scan(tok)?;
    let v = if neg { mag?.wrapping_neg() } else { mag? };
    if neg && (v as i64) < 0 {
        return None;
    }
    Some(v)
}

/// memcached's `safe_strtoul` (64-bit `unsigned long`), truncated to 32 bits as it stores it:
/// flags `4294967296` are 0.
pub fn parse_u32(tok: &[u8]) -> Option<u32> {
    parse_u64(tok).map(|v| v as u32)
}

/// memcached 1.6.18's `safe_strtol`: a 64-bit `strtol` truncated to 32 bits (`2147483648` is
/// -2147483648, an already expired ttl).
pub fn parse_i32(tok: &[u8]) -> Option<i32> {
    let (neg, mag) = c_scan(tok)?;
    let mag = mag?;
    let v = if neg {
        if mag > 1 << 63 {
            return None;
        }
        (mag as i64).wrapping_neg()
    } else {
        i64::try_from(mag).ok()?
    };
    Some(v as i32)
}

/// The absolute deadline (unix ms) of an expiration time sent at `now_ms`: `None` = never
/// (0), `Some(0)`-or-past = already expired (negative), relative seconds up to 30 days,
/// absolute unix seconds beyond (memcached's `REALTIME_MAXDELTA`).
pub fn deadline_ms(exptime: i64, now_ms: u64) -> Option<u64> {
    const MAX_DELTA: i64 = 60 * 60 * 24 * 30;
    if exptime == 0 {
        None
    } else if exptime < 0 {
        Some(now_ms.saturating_sub(1).max(1))
    } else if exptime > MAX_DELTA {
        Some((exptime as u64).saturating_mul(1000).max(1))
    } else {
        Some(now_ms.saturating_add(exptime as u64 * 1000))
    }
}

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;
