//! Reply encoder: appends RESP2/RESP3 frames to a growable buffer that the
//! connection flushes once per batch of commands.

use crate::double::{write_g17, write_i64, write_u64, G17_MAX_LEN};

/// Protocol version negotiated with HELLO; changes how nulls, maps, sets,
/// booleans and doubles are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RespVersion {
    #[default]
    Resp2,
    Resp3,
}

/// Longest error code we remember for error statistics (Redis looks for the
/// space within the first 32 bytes).
const MAX_CODE: usize = 32;

/// Reply buffer plus the error accounting INFO errorstats needs.
pub struct Reply {
    pub buf: Vec<u8>,
    pub ver: RespVersion,
    errors: u64,
    code: [u8; MAX_CODE],
    code_len: usize,
    has_code: bool,
}

impl Reply {
    pub fn new(ver: RespVersion) -> Self {
        Self::with_capacity(ver, 0)
    }

    pub fn with_capacity(ver: RespVersion, cap: usize) -> Self {
        Reply {
            buf: Vec::with_capacity(cap),
            ver,
            errors: 0,
            code: [0; MAX_CODE],
            code_len: 0,
            has_code: false,
        }
    }

    #[inline]
    pub fn is_resp3(&self) -> bool {
        self.ver == RespVersion::Resp3
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops the bytes but keeps capacity and error counters.
    #[inline]
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Takes the encoded bytes, leaving an empty buffer (same version).
    #[inline]
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Appends pre-encoded protocol bytes verbatim.
    #[inline]
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    #[inline]
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// `+s`; CR/LF would break framing, so they become spaces.
    #[inline]
    pub fn simple(&mut self, s: &str) {
        self.line(b'+', s.as_bytes());
    }

    #[inline]
    fn line(&mut self, prefix: u8, s: &[u8]) {
        self.buf.reserve(s.len() + 3);
        self.buf.push(prefix);
        let start = self.buf.len();
        self.buf.extend_from_slice(s);
        for c in &mut self.buf[start..] {
            if *c == b'\r' || *c == b'\n' {
                *c = b' ';
            }
        }
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `-msg`, where `msg` starts with the error code ("ERR syntax error",
    /// "WRONGTYPE ..."). A leading '-' in `msg` is not doubled. Also counts
    /// the error for INFO stats.
    pub fn error(&mut self, msg: &str) {
        self.error_bytes(msg.as_bytes());
    }

    /// [`error`](Self::error) for messages that are not valid UTF-8 (e.g. a
    /// protocol error quoting a raw byte).
    pub fn error_bytes(&mut self, msg: &[u8]) {
        let msg = msg.strip_prefix(b"-").unwrap_or(msg);
        // As Redis's addReplyErrorFormat: CR/LF at either end are trimmed, those inside
        // become spaces (`line`).
        let nl = |c: &u8| *c == b'\r' || *c == b'\n';
        let start = msg.iter().position(|c| !nl(c)).unwrap_or(msg.len());
        let end = msg.iter().rposition(|c| !nl(c)).map_or(start, |e| e + 1);
        let msg = &msg[start..end];
        self.line(b'-', msg);
        self.errors += 1;
        // Same rule as Redis afterErrorReply: the code is the text before the
        // first space if that space is within the first 32 bytes, else "ERR".
        let window = &msg[..msg.len().min(MAX_CODE - 1)];
        let code: &[u8] = match window.iter().position(|&c| c == b' ') {
            Some(sp) if std::str::from_utf8(&msg[..sp]).is_ok() => &msg[..sp],
            _ => b"ERR",
        };
        self.code[..code.len()].copy_from_slice(code);
        self.code_len = code.len();
        self.has_code = true;
    }

    /// Number of error replies written since creation or
    /// [`clear_error_count`](Self::clear_error_count).
    #[inline]
    pub fn errors_written(&self) -> u64 {
        self.errors
    }

    /// Code (first word) of the most recent error reply, e.g. "ERR".
    pub fn last_error_code(&self) -> Option<&str> {
        if !self.has_code {
            return None;
        }
        std::str::from_utf8(&self.code[..self.code_len]).ok()
    }

    pub fn clear_error_count(&mut self) {
        self.errors = 0;
        self.has_code = false;
        self.code_len = 0;
    }

    /// `<prefix><n>\r\n` without allocating.
    #[inline]
    fn header(&mut self, prefix: u8, n: u64) {
        if n < 10 {
            self.buf
                .extend_from_slice(&[prefix, b'0' + n as u8, b'\r', b'\n']);
            return;
        }
        let mut tmp = [0u8; 20];
        let len = write_u64(n, &mut tmp);
        self.buf.reserve(len + 3);
        self.buf.push(prefix);
        self.buf.extend_from_slice(&tmp[20 - len..]);
        self.buf.extend_from_slice(b"\r\n");
    }

    #[inline]
    pub fn int(&mut self, v: i64) {
        if (0..10).contains(&v) {
            self.buf
                .extend_from_slice(&[b':', b'0' + v as u8, b'\r', b'\n']);
            return;
        }
        let mut tmp = [0u8; 20];
        let len = write_i64(v, &mut tmp);
        self.buf.push(b':');
        self.buf.extend_from_slice(&tmp[20 - len..]);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// Just the `$len\r\n` header, for callers streaming a payload in parts
    /// (they must append exactly `len` bytes and then `\r\n`).
    #[inline]
    pub fn bulk_header(&mut self, len: usize) {
        self.header(b'$', len as u64);
    }

    #[inline]
    pub fn bulk(&mut self, b: &[u8]) {
        self.buf.reserve(b.len() + 16);
        self.header(b'$', b.len() as u64);
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    #[inline]
    pub fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }

    /// Integer as a bulk string (e.g. HINCRBY-style values stored as text).
    #[inline]
    pub fn bulk_int(&mut self, v: i64) {
        let mut tmp = [0u8; 20];
        let len = write_i64(v, &mut tmp);
        self.bulk(&tmp[20 - len..]);
    }

    /// Null bulk string (RESP3 has a single null type).
    #[inline]
    pub fn null(&mut self) {
        if self.is_resp3() {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// Null array (e.g. BLPOP timeout, EXEC aborted).
    #[inline]
    pub fn null_array(&mut self) {
        if self.is_resp3() {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    #[inline]
    pub fn array(&mut self, n: usize) {
        self.header(b'*', n as u64);
    }

    #[inline]
    pub fn empty_array(&mut self) {
        self.buf.extend_from_slice(b"*0\r\n");
    }

    /// Map of `n` pairs; RESP2 clients get a flat array of 2n elements.
    #[inline]
    pub fn map(&mut self, n: usize) {
        if self.is_resp3() {
            self.header(b'%', n as u64);
        } else {
            self.header(b'*', 2 * n as u64);
        }
    }

    #[inline]
    pub fn set(&mut self, n: usize) {
        let p = if self.is_resp3() { b'~' } else { b'*' };
        self.header(p, n as u64);
    }

    /// Out-of-band push (pub/sub messages, invalidations).
    #[inline]
    pub fn push(&mut self, n: usize) {
        let p = if self.is_resp3() { b'>' } else { b'*' };
        self.header(p, n as u64);
    }

    /// RESP3 attribute header (`|n`); RESP2 has no attributes, so nothing is
    /// written and the caller must not emit the pairs either.
    #[inline]
    pub fn attribute(&mut self, n: usize) {
        if self.is_resp3() {
            self.header(b'|', n as u64);
        }
    }

    #[inline]
    pub fn bool(&mut self, b: bool) {
        let s: &[u8] = match (self.is_resp3(), b) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        };
        self.buf.extend_from_slice(s);
    }

    /// Redis 7.0 addReplyDouble: `%.17g`, as a RESP3 double or a RESP2 bulk.
    pub fn double(&mut self, d: f64) {
        let mut tmp = [0u8; G17_MAX_LEN];
        let n = write_g17(d, &mut tmp);
        if self.is_resp3() {
            self.buf.push(b',');
            self.buf.extend_from_slice(&tmp[..n]);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(&tmp[..n]);
        }
    }

    /// RESP3 big number (`(digits`); RESP2 gets a bulk string like Redis.
    pub fn big_number(&mut self, digits: &str) {
        if self.is_resp3() {
            self.line(b'(', digits.as_bytes());
        } else {
            self.bulk(digits.as_bytes());
        }
    }

    /// Verbatim string with a 3-letter format ("txt", "mkd"); plain bulk in
    /// RESP2.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        if self.is_resp3() {
            let f = format.as_bytes();
            debug_assert_eq!(f.len(), 3, "verbatim format must be 3 bytes");
            self.header(b'=', (text.len() + f.len() + 1) as u64);
            self.buf.extend_from_slice(f);
            self.buf.push(b':');
            self.buf.extend_from_slice(text);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text);
        }
    }

    /// Starts an aggregate whose length is not known yet; returns a handle for
    /// [`end_array_deferred`](Self::end_array_deferred). Deferred aggregates
    /// must be ended in LIFO order (inner before outer).
    #[inline]
    pub fn begin_array_deferred(&mut self) -> usize {
        self.buf.len()
    }

    /// Inserts the `*n` header at the handle's position (moves the elements
    /// written since, which is cheap compared to building them).
    pub fn end_array_deferred(&mut self, handle: usize, n: usize) {
        self.insert_header(handle, b'*', n as u64);
    }

    #[inline]
    pub fn begin_map_deferred(&mut self) -> usize {
        self.buf.len()
    }

    pub fn end_map_deferred(&mut self, handle: usize, pairs: usize) {
        if self.is_resp3() {
            self.insert_header(handle, b'%', pairs as u64);
        } else {
            self.insert_header(handle, b'*', 2 * pairs as u64);
        }
    }

    #[inline]
    pub fn begin_set_deferred(&mut self) -> usize {
        self.buf.len()
    }

    pub fn end_set_deferred(&mut self, handle: usize, n: usize) {
        let p = if self.is_resp3() { b'~' } else { b'*' };
        self.insert_header(handle, p, n as u64);
    }

    fn insert_header(&mut self, at: usize, prefix: u8, n: u64) {
        let mut tmp = [0u8; 24];
        let mut digits = [0u8; 20];
        let dl = write_u64(n, &mut digits);
        tmp[0] = prefix;
        tmp[1..1 + dl].copy_from_slice(&digits[20 - dl..]);
        tmp[1 + dl] = b'\r';
        tmp[2 + dl] = b'\n';
        let hl = dl + 3;
        let old = self.buf.len();
        assert!(at <= old, "deferred handle past end of reply buffer");
        self.buf.resize(old + hl, 0);
        self.buf.copy_within(at..old, at + hl);
        self.buf[at..at + hl].copy_from_slice(&tmp[..hl]);
    }
}

impl Default for Reply {
    fn default() -> Self {
        Reply::new(RespVersion::Resp2)
    }
}
