//! Zero-copy, resumable RESP request parser with Redis 7.0 semantics.
//!
//! The parser never copies multibulk arguments: it records byte ranges into
//! the caller's buffer. It is resumable: when a command is incomplete it
//! remembers how far it got (header parsed, arguments already seen, where the
//! delimiter search stopped), so a huge command arriving in tiny reads costs
//! linear, not quadratic, time.

use crate::double::parse_i64;
use std::fmt;

/// Limits that bound memory and line lengths, mirroring Redis config.
#[derive(Clone, Copy, Debug)]
pub struct ParserLimits {
    /// `proto-max-bulk-len`: largest accepted bulk argument.
    pub max_bulk_len: u64,
    /// Redis `PROTO_INLINE_MAX_SIZE`: longest inline request / header line
    /// we buffer while waiting for its terminator.
    pub max_inline_len: usize,
    /// The connection must still authenticate: Redis then refuses multibulks of more than 10
    /// arguments and bulks over 16 KiB, so an unauthenticated client cannot make it buffer much.
    pub unauthenticated: bool,
}

impl Default for ParserLimits {
    fn default() -> Self {
        ParserLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_inline_len: 64 * 1024,
            unauthenticated: false,
        }
    }
}

/// Protocol violations. All are fatal for the connection: Redis replies with
/// `-ERR <message>` and closes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    ExpectedDollar(u8),
    TooBigInlineRequest,
    TooBigMbulkCount,
    TooBigBulkCount,
    UnbalancedQuotes,
    UnauthenticatedMultibulkLength,
    UnauthenticatedBulkLength,
}

impl ProtocolError {
    /// The exact bytes Redis puts after `-ERR ` (the offending byte of
    /// `ExpectedDollar` is written raw, CR/LF mapped to spaces as Redis does,
    /// so the reply stays one line).
    pub fn message_bytes(&self) -> Vec<u8> {
        match *self {
            ProtocolError::ExpectedDollar(c) => {
                let c = if c == b'\r' || c == b'\n' { b' ' } else { c };
                let mut v = b"Protocol error: expected '$', got '".to_vec();
                v.push(c);
                v.push(b'\'');
                v
            }
            _ => self.to_string().into_bytes(),
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match *self {
            ProtocolError::InvalidMultibulkLength => "Protocol error: invalid multibulk length",
            ProtocolError::InvalidBulkLength => "Protocol error: invalid bulk length",
            ProtocolError::ExpectedDollar(c) => {
                // Non-ASCII bytes show as their Latin-1 char; see message_bytes
                // for the raw form.
                let c = if c == b'\r' || c == b'\n' {
                    ' '
                } else {
                    c as char
                };
                return write!(f, "Protocol error: expected '$', got '{c}'");
            }
            ProtocolError::TooBigInlineRequest => "Protocol error: too big inline request",
            ProtocolError::TooBigMbulkCount => "Protocol error: too big mbulk count string",
            ProtocolError::TooBigBulkCount => "Protocol error: too big bulk count string",
            ProtocolError::UnbalancedQuotes => "Protocol error: unbalanced quotes in request",
            ProtocolError::UnauthenticatedMultibulkLength => {
                "Protocol error: unauthenticated multibulk length"
            }
            ProtocolError::UnauthenticatedBulkLength => {
                "Protocol error: unauthenticated bulk length"
            }
        };
        f.write_str(s)
    }
}

impl std::error::Error for ProtocolError {}

/// Initial argument slots reserved for a multibulk; more are added only as
/// arguments actually arrive, so a bogus `*2000000000` cannot make us allocate
/// memory the client never sent.
const PREALLOC_ARGS: usize = 1024;
/// Capacity kept between commands; bigger buffers are released after a huge
/// command so an idle connection does not pin its peak memory.
const KEEP_ARGS_CAP: usize = 1024;
const KEEP_SCRATCH_CAP: usize = 64 * 1024;

/// Redis's limits for connections that still have to authenticate.
const UNAUTH_MAX_ARGS: i64 = 10;
const UNAUTH_MAX_BULK: usize = 16384;

/// Sentinel for "no bulk header parsed yet".
const NO_BULK: usize = usize::MAX;

/// Resumable RESP request parser. See [`Parser::next`].
pub struct Parser {
    limits: ParserLimits,
    /// Argument byte ranges: into the caller's buffer for multibulk, into
    /// `scratch` for inline commands.
    args: Vec<(usize, usize)>,
    /// Unescaped inline arguments.
    scratch: Vec<u8>,
    /// Whether `args` index `scratch` (inline) or the caller's buffer.
    inline: bool,
    /// Bytes of the caller's buffer already consumed for the command in
    /// progress (including empty commands skipped before it).
    pos: usize,
    /// Multibulk arguments still expected (0: at a command boundary).
    mb_remaining: usize,
    /// Length of the bulk whose header was parsed but payload not yet seen.
    bulk_len: usize,
    /// Buffer offset up to which a delimiter search already failed.
    scan: usize,
    /// Buffer length seen by the last call, for `bulk_remaining`.
    avail: usize,
    /// The last call returned a command: its args stay valid until the next
    /// call, which must start from a clean state.
    returned: bool,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new(ParserLimits::default())
    }
}

impl Parser {
    pub fn new(limits: ParserLimits) -> Self {
        Parser {
            limits,
            args: Vec::new(),
            scratch: Vec::new(),
            inline: false,
            pos: 0,
            mb_remaining: 0,
            bulk_len: NO_BULK,
            scan: 0,
            avail: 0,
            returned: false,
        }
    }

    /// Limits can change at runtime (CONFIG SET proto-max-bulk-len).
    pub fn set_limits(&mut self, limits: ParserLimits) {
        self.limits = limits;
    }

    pub fn limits(&self) -> ParserLimits {
        self.limits
    }

    /// Forget any partial command (e.g. after the connection's buffer was
    /// discarded).
    pub fn reset(&mut self) {
        self.start_command();
        self.pos = 0;
        self.avail = 0;
        self.returned = false;
    }

    fn start_command(&mut self) {
        self.args.clear();
        if self.args.capacity() > KEEP_ARGS_CAP {
            self.args.shrink_to(KEEP_ARGS_CAP);
        }
        if self.scratch.capacity() > KEEP_SCRATCH_CAP {
            self.scratch = Vec::new();
        }
        self.inline = false;
        self.mb_remaining = 0;
        self.bulk_len = NO_BULK;
    }

    /// Parse the next command from `buf`, which starts at the first byte not
    /// yet consumed.
    ///
    /// * `Ok(Some(n))`: a full command was parsed and `n` bytes consumed; its
    ///   arguments are readable with [`argc`](Self::argc) /
    ///   [`arg`](Self::arg) / [`args`](Self::args) (passing the same `buf`)
    ///   until the next call.
    /// * `Ok(None)`: incomplete. The next call must pass the same buffer start
    ///   with more bytes appended; nothing already parsed is rescanned.
    ///
    /// Empty commands (`*0`, `*-1`, blank inline lines) are consumed silently;
    /// their bytes are included in the `n` of the next command returned.
    /// Errors are fatal for the connection; the state afterwards is
    /// unspecified (call [`reset`](Self::reset) to reuse the parser).
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        assert!(
            self.returned || buf.len() >= self.pos,
            "Parser::next: buffer shrank while a command was in progress"
        );
        if self.returned {
            self.returned = false;
            self.pos = 0;
            self.scan = 0;
            self.start_command();
        }
        self.avail = buf.len();
        let r = self.parse(buf);
        if let Ok(Some(_)) = r {
            self.returned = true;
        }
        r
    }

    #[inline]
    fn parse(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        loop {
            if self.mb_remaining == 0 {
                // At a command boundary.
                let Some(&first) = buf.get(self.pos) else {
                    return Ok(None);
                };
                if first != b'*' {
                    match self.parse_inline(buf)? {
                        None => return Ok(None),
                        Some(true) => return Ok(Some(self.pos)),
                        Some(false) => continue, // blank line skipped
                    }
                }
                let count = match fast_header(buf, self.pos, b'*') {
                    Some((v, next)) if v <= i32::MAX as usize => {
                        self.pos = next;
                        v as i64
                    }
                    _ => {
                        let Some(cr) = self.find_cr(buf, ProtocolError::TooBigMbulkCount)? else {
                            return Ok(None);
                        };
                        let count = match parse_i64(&buf[self.pos + 1..cr]) {
                            Some(v) if v <= i32::MAX as i64 => v,
                            _ => return Err(ProtocolError::InvalidMultibulkLength),
                        };
                        // Redis skips the byte after '\r' without checking it.
                        self.pos = cr + 2;
                        count
                    }
                };
                if count <= 0 {
                    continue; // empty command
                }
                if count > UNAUTH_MAX_ARGS && self.limits.unauthenticated {
                    return Err(ProtocolError::UnauthenticatedMultibulkLength);
                }
                self.start_command();
                self.mb_remaining = count as usize;
                self.args.reserve(self.mb_remaining.min(PREALLOC_ARGS));
            }

            while self.mb_remaining > 0 {
                if self.bulk_len == NO_BULK {
                    if let Some((len, next)) = fast_header(buf, self.pos, b'$') {
                        if len as u64 > self.limits.max_bulk_len {
                            return Err(ProtocolError::InvalidBulkLength);
                        }
                        if len > UNAUTH_MAX_BULK && self.limits.unauthenticated {
                            return Err(ProtocolError::UnauthenticatedBulkLength);
                        }
                        self.pos = next;
                        self.bulk_len = len;
                    }
                }
                if self.bulk_len == NO_BULK {
                    let Some(cr) = self.find_cr(buf, ProtocolError::TooBigBulkCount)? else {
                        return Ok(None);
                    };
                    let first = buf[self.pos];
                    if first != b'$' {
                        return Err(ProtocolError::ExpectedDollar(first));
                    }
                    let len = match parse_i64(&buf[self.pos + 1..cr]) {
                        Some(v) if v >= 0 && v as u64 <= self.limits.max_bulk_len => v,
                        _ => return Err(ProtocolError::InvalidBulkLength),
                    };
                    if len as u64 > UNAUTH_MAX_BULK as u64 && self.limits.unauthenticated {
                        return Err(ProtocolError::UnauthenticatedBulkLength);
                    }
                    self.pos = cr + 2;
                    self.bulk_len = usize::try_from(len).unwrap_or(usize::MAX - 2);
                }
                // Payload plus the two trailing bytes (not verified, like Redis).
                if buf.len() - self.pos < self.bulk_len + 2 {
                    return Ok(None);
                }
                self.args.push((self.pos, self.pos + self.bulk_len));
                self.pos += self.bulk_len + 2;
                self.bulk_len = NO_BULK;
                self.mb_remaining -= 1;
            }
            return Ok(Some(self.pos));
        }
    }

    /// Find the '\r' ending a `*`/`$` header line starting at `pos`; `None`
    /// when more bytes are needed (also when '\r' is the last byte, since the
    /// byte after it must be present to be skipped).
    #[inline]
    fn find_cr(
        &mut self,
        buf: &[u8],
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        // Redis 7.0 uses strchr here too: a NUL before the '\r' hides it.
        let from = self.scan.max(self.pos);
        let hit = buf[from..].iter().position(|&c| c == b'\r' || c == 0);
        match hit {
            Some(off) if buf[from + off] == b'\r' => {
                let cr = from + off;
                if cr + 2 > buf.len() {
                    self.scan = cr;
                    return Ok(None);
                }
                Ok(Some(cr))
            }
            _ => {
                if buf.len() - self.pos > self.limits.max_inline_len {
                    return Err(too_big);
                }
                self.scan = hit.map_or(buf.len(), |off| from + off);
                Ok(None)
            }
        }
    }

    /// Inline command at `pos`. `Some(true)`: command ready; `Some(false)`:
    /// blank line consumed; `None`: need more bytes.
    #[cold]
    fn parse_inline(&mut self, buf: &[u8]) -> Result<Option<bool>, ProtocolError> {
        // Redis looks for the newline with strchr on a NUL-terminated
        // buffer, so a NUL before the '\n' hides it: the request then only
        // ends by exceeding the inline limit. We reproduce that.
        let from = self.scan.max(self.pos);
        let hit = buf[from..].iter().position(|&c| c == b'\n' || c == 0);
        let nl = match hit {
            Some(off) if buf[from + off] == b'\n' => from + off,
            _ => {
                if buf.len() - self.pos > self.limits.max_inline_len {
                    return Err(ProtocolError::TooBigInlineRequest);
                }
                self.scan = hit.map_or(buf.len(), |off| from + off);
                return Ok(None);
            }
        };
        let mut line = &buf[self.pos..nl];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        self.start_command();
        self.inline = true;
        split_args(line, &mut self.scratch, &mut self.args)?;
        self.pos = nl + 1;
        Ok(Some(!self.args.is_empty()))
    }

    /// Number of arguments of the command returned by the last `next`.
    #[inline]
    pub fn argc(&self) -> usize {
        self.args.len()
    }

    /// Argument `i` of the last command; `buf` must be the buffer passed to
    /// `next`. Panics if `i >= argc()`.
    #[inline]
    pub fn arg<'a>(&'a self, buf: &'a [u8], i: usize) -> &'a [u8] {
        let (s, e) = self.args[i];
        if self.inline {
            &self.scratch[s..e]
        } else {
            &buf[s..e]
        }
    }

    /// All arguments of the last command.
    #[inline]
    pub fn args<'a>(&'a self, buf: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        (0..self.args.len()).map(move |i| self.arg(buf, i))
    }

    /// While a bulk argument's payload is incomplete: bytes still needed to
    /// finish it (payload plus CRLF), so the connection can reserve buffer
    /// capacity once for big values instead of growing repeatedly.
    pub fn bulk_remaining(&self) -> Option<usize> {
        if self.returned || self.mb_remaining == 0 || self.bulk_len == NO_BULK {
            return None;
        }
        let have = self.avail.saturating_sub(self.pos);
        Some((self.bulk_len + 2).saturating_sub(have))
    }

    /// While a bulk argument's payload is incomplete: where its payload starts (offset in the
    /// buffer given to `next`, i.e. from the start of the command in progress) and its declared
    /// length. CLIENT LIST shows a big argument being received the way Redis does (`qbuf` from
    /// the payload on, the arguments before it as `argv-mem`).
    pub fn bulk_progress(&self) -> Option<(usize, usize)> {
        if self.returned || self.mb_remaining == 0 || self.bulk_len == NO_BULK {
            return None;
        }
        Some((self.pos, self.bulk_len))
    }

    /// True while a non-empty command has been started but not completed
    /// (e.g. to decide whether a closed connection lost a partial command).
    pub fn is_partial(&self) -> bool {
        !self.returned && self.mb_remaining > 0
    }

    /// Multibulk arguments declared but not yet complete.
    pub fn pending_args(&self) -> usize {
        if self.returned {
            0
        } else {
            self.mb_remaining
        }
    }

    /// Heap bytes held by the parser (for client memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.args.capacity() * std::mem::size_of::<(usize, usize)>() + self.scratch.capacity()
    }
}

/// Fused scan+parse for the common `$<digits>\r\n` / `*<digits>\r\n` header: returns the
/// length and the offset after the header, or `None` for anything unusual
/// (incomplete, negative, leading zero, long), which the strict general path
/// then handles with identical results.
#[inline(always)]
fn fast_header(buf: &[u8], pos: usize, prefix: u8) -> Option<(usize, usize)> {
    let h = buf.get(pos..)?;
    if h.first() != Some(&prefix) {
        return None;
    }
    let d0 = h.get(1)?.wrapping_sub(b'1');
    if d0 > 8 {
        return None;
    }
    let mut v = d0 as usize + 1;
    // Up to 15 digits: no overflow, well below any usize/u64 limit concern.
    for i in 2..17 {
        let c = *h.get(i)?;
        let d = c.wrapping_sub(b'0');
        if d <= 9 {
            v = v * 10 + d as usize;
        } else if c == b'\r' {
            // The byte after '\r' must be present (it is skipped unchecked).
            return if h.len() > i + 1 {
                Some((v, pos + i + 2))
            } else {
                None
            };
        } else {
            return None;
        }
    }
    None
}

/// C `isspace` in the "C" locale, which Redis's inline splitter uses.
#[inline]
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits one line into arguments with the rules of Redis `sdssplitargs`, as for inline
/// commands: the one splitter also behind `redis.conf` lines. `None` for unbalanced quotes (or
/// a closing quote not followed by a space). The line must not contain NUL.
pub fn split_line(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut ranges = Vec::new();
    split_args(line, &mut out, &mut ranges).ok()?;
    Some(ranges.iter().map(|&(a, b)| out[a..b].to_vec()).collect())
}

/// Split an inline request line into arguments with the rules of Redis
/// `sdssplitargs`. The line never contains NUL (see `parse_inline`), so
/// `at` returning 0 past the end plays the role of C's terminator.
fn split_args(
    line: &[u8],
    out: &mut Vec<u8>,
    args: &mut Vec<(usize, usize)>,
) -> Result<(), ProtocolError> {
    let at = |i: usize| -> u8 { line.get(i).copied().unwrap_or(0) };
    let mut p = 0;
    loop {
        while p < line.len() && is_c_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(());
        }
        let start = out.len();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            let c = at(p);
            if in_dq {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(h), Some(l)) = (hex_val(at(p + 2)), hex_val(at(p + 3))) {
                        out.push(h * 16 + l);
                        p += 4;
                        continue;
                    }
                }
                if c == b'\\' && at(p + 1) != 0 {
                    let e = match at(p + 1) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    };
                    out.push(e);
                    p += 2;
                } else if c == b'"' {
                    // A closing quote must be followed by a space or the end.
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    out.push(c);
                    p += 1;
                }
            } else if in_sq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    out.push(b'\'');
                    p += 2;
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    out.push(c);
                    p += 1;
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    _ => out.push(c),
                }
                p += 1;
            }
        }
        args.push((start, out.len()));
    }
}
