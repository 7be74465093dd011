//! RDB wire primitives: constants, the length/string/number encodings, a
//! checksumming [`Writer`], a bounds-checked [`Reader`], typed errors, the
//! file trailer check and the DUMP payload footer.
//!
//! Everything here follows Redis 7.0's `rdb.c`/`rdb.h` (RDB version 10).
//! Formats, in brief:
//! - length (`rdbSaveLen`): `00xxxxxx` (6 bits), `01xxxxxx xxxxxxxx`
//!   (14 bits, big-endian), `0x80` + u32 BE, `0x81` + u64 BE; `11xxxxxx`
//!   marks a specially encoded string whose low 6 bits name the encoding.
//! - string: a length then raw bytes, or `0xC0`/`0xC1`/`0xC2` + i8/i16/i32 LE
//!   (canonical decimal integers), or `0xC3` + compressed length + original
//!   length + LZF data.
//! - multi-byte numbers outside lengths are little-endian.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};

use super::crc64::crc64;
use super::lzf::{self, LzfError};

/// The RDB version we write (Redis 7.0). Redis 7.2 writes 11, 7.4 writes 12.
pub const RDB_VERSION: u32 = 10;
/// File magic; followed by the version as four ASCII digits.
pub const RDB_MAGIC: &[u8; 5] = b"REDIS";

/// Special opcodes (`rdb.h` `RDB_OPCODE_*`), found where a type byte is expected.
pub mod opcode {
    /// Per-slot info (cluster), newer Redis (RDB 12 era); never written by 7.0.
    pub const SLOT_INFO: u8 = 244;
    /// Function library (Redis 7.0 GA).
    pub const FUNCTION2: u8 = 245;
    /// Function library as written by 7.0 release candidates.
    pub const FUNCTION_PRE_GA: u8 = 246;
    /// Module auxiliary data.
    pub const MODULE_AUX: u8 = 247;
    /// LRU idle time (a length, in seconds).
    pub const IDLE: u8 = 248;
    /// LFU frequency (one byte).
    pub const FREQ: u8 = 249;
    /// Auxiliary field: two strings.
    pub const AUX: u8 = 250;
    /// Hash table size hints: two lengths.
    pub const RESIZEDB: u8 = 251;
    /// Expire time in milliseconds (u64 LE) for the next key.
    pub const EXPIRETIME_MS: u8 = 252;
    /// Expire time in seconds (u32 LE) for the next key (old files).
    pub const EXPIRETIME: u8 = 253;
    /// Database number (a length) of the keys that follow.
    pub const SELECTDB: u8 = 254;
    /// End of file; followed by the 8-byte checksum (RDB >= 5).
    pub const EOF: u8 = 255;
}

/// Quicklist node containers in `RDB_TYPE_LIST_QUICKLIST_2` (`quicklist.h`).
pub mod quicklist_container {
    /// A single element stored as a plain string.
    pub const PLAIN: u64 = 1;
    /// A listpack of elements.
    pub const PACKED: u64 = 2;
}

/// Special string encodings (low 6 bits after a `11` length prefix).
pub mod enc {
    pub const INT8: u8 = 0;
    pub const INT16: u8 = 1;
    pub const INT32: u8 = 2;
    pub const LZF: u8 = 3;
}

macro_rules! rdb_types {
    ($( $(#[$m:meta])* $name:ident = $val:literal, $text:literal; )*) => {
        /// Object type byte (`rdb.h` `RDB_TYPE_*`).
        ///
        /// 0..=21 are what Redis 7.0 knows (it writes 0, 2, 5, 7, 11, 15..=20
        /// and loads all but 6); 21 is Redis 7.2's stream format; 22..=25 are
        /// Redis 7.4's hashes with field expiration (RDB version 12), listed
        /// so that errors can name them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum RdbType {
            $( $(#[$m])* $name = $val, )*
        }

        impl RdbType {
            /// Maps a type byte; None for opcodes and unknown values.
            pub fn from_u8(v: u8) -> Option<RdbType> {
                match v {
                    $( $val => Some(RdbType::$name), )*
                    _ => None,
                }
            }

            /// The `rdb.h` name, for error messages.
            pub fn name(self) -> &'static str {
                match self {
                    $( RdbType::$name => $text, )*
                }
            }
        }
    };
}

rdb_types! {
    String = 0, "RDB_TYPE_STRING";
    List = 1, "RDB_TYPE_LIST";
    Set = 2, "RDB_TYPE_SET";
    /// Sorted set with scores as ASCII doubles ([`Reader::read_double_old`]).
    Zset = 3, "RDB_TYPE_ZSET";
    Hash = 4, "RDB_TYPE_HASH";
    /// Sorted set with binary double scores.
    Zset2 = 5, "RDB_TYPE_ZSET_2";
    /// Module value from 4.0 release candidates (not loadable).
    ModulePreGa = 6, "RDB_TYPE_MODULE_PRE_GA";
    Module2 = 7, "RDB_TYPE_MODULE_2";
    HashZipmap = 9, "RDB_TYPE_HASH_ZIPMAP";
    ListZiplist = 10, "RDB_TYPE_LIST_ZIPLIST";
    SetIntset = 11, "RDB_TYPE_SET_INTSET";
    ZsetZiplist = 12, "RDB_TYPE_ZSET_ZIPLIST";
    HashZiplist = 13, "RDB_TYPE_HASH_ZIPLIST";
    ListQuicklist = 14, "RDB_TYPE_LIST_QUICKLIST";
    StreamListpacks = 15, "RDB_TYPE_STREAM_LISTPACKS";
    HashListpack = 16, "RDB_TYPE_HASH_LISTPACK";
    ZsetListpack = 17, "RDB_TYPE_ZSET_LISTPACK";
    ListQuicklist2 = 18, "RDB_TYPE_LIST_QUICKLIST_2";
    StreamListpacks2 = 19, "RDB_TYPE_STREAM_LISTPACKS_2";
    SetListpack = 20, "RDB_TYPE_SET_LISTPACK";
    /// Redis 7.2+ (RDB 11).
    StreamListpacks3 = 21, "RDB_TYPE_STREAM_LISTPACKS_3";
    /// Redis 7.4 release candidates (RDB 12).
    HashMetadataPreGa = 22, "RDB_TYPE_HASH_METADATA_PRE_GA";
    /// Redis 7.4 release candidates (RDB 12).
    HashListpackExPreGa = 23, "RDB_TYPE_HASH_LISTPACK_EX_PRE_GA";
    /// Redis 7.4+ (RDB 12): hash with field TTLs.
    HashMetadata = 24, "RDB_TYPE_HASH_METADATA";
    /// Redis 7.4+ (RDB 12): listpack hash with field TTLs.
    HashListpackEx = 25, "RDB_TYPE_HASH_LISTPACK_EX";
}

// ---------------------------------------------------------------------------
// Errors

/// A structural error inside an embedded blob (listpack, ziplist, intset,
/// zipmap): `at` is the byte offset within the blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobError {
    pub at: usize,
    pub reason: &'static str,
}

impl BlobError {
    pub(crate) fn new(at: usize, reason: &'static str) -> BlobError {
        BlobError { at, reason }
    }
}

impl fmt::Display for BlobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (blob byte {})", self.reason, self.at)
    }
}

/// What went wrong while reading an RDB stream.
#[derive(Debug, Clone, PartialEq)]
pub enum RdbErrorKind {
    UnexpectedEof,
    /// Bad length encoding, a special encoding where a plain length was
    /// required, or a length larger than the remaining input allows.
    BadLength,
    /// Unknown special string encoding (the low 6 bits).
    BadStringEncoding(u8),
    Lzf(LzfError),
    /// `expected` is the stored checksum, `actual` the computed one.
    BadChecksum {
        expected: u64,
        actual: u64,
    },
    BadVersion(u32),
    BadMagic,
    UnknownType(u8),
    BadListpack(BlobError),
    BadZiplist(BlobError),
    BadIntset(BlobError),
    BadZipmap(BlobError),
    BadDouble,
    Other(&'static str),
}

impl fmt::Display for RdbErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdbErrorKind::UnexpectedEof => f.write_str("unexpected end of data"),
            RdbErrorKind::BadLength => f.write_str("bad length encoding"),
            RdbErrorKind::BadStringEncoding(e) => write!(f, "unknown string encoding {e}"),
            RdbErrorKind::Lzf(e) => write!(f, "invalid LZF compressed string: {e}"),
            RdbErrorKind::BadChecksum { expected, actual } => write!(
                f,
                "RDB CRC error: wrong RDB checksum, stored {expected:#018x}, computed {actual:#018x}"
            ),
            RdbErrorKind::BadVersion(v) => write!(f, "can't handle RDB format version {v}"),
            RdbErrorKind::BadMagic => f.write_str("wrong signature (not an RDB file)"),
            RdbErrorKind::UnknownType(t) => write!(f, "unknown object type {t}"),
            RdbErrorKind::BadListpack(e) => write!(f, "invalid listpack: {e}"),
            RdbErrorKind::BadZiplist(e) => write!(f, "invalid ziplist: {e}"),
            RdbErrorKind::BadIntset(e) => write!(f, "invalid intset: {e}"),
            RdbErrorKind::BadZipmap(e) => write!(f, "invalid zipmap: {e}"),
            RdbErrorKind::BadDouble => f.write_str("bad double value"),
            RdbErrorKind::Other(s) => f.write_str(s),
        }
    }
}

/// An RDB decoding error at a byte offset of the input (absolute when the
/// [`Reader`] was given a base offset).
#[derive(Debug, Clone, PartialEq)]
pub struct RdbError {
    pub offset: u64,
    pub kind: RdbErrorKind,
}

impl RdbError {
    pub fn new(offset: u64, kind: RdbErrorKind) -> RdbError {
        RdbError { offset, kind }
    }
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RDB format error at offset {}: {}",
            self.offset, self.kind
        )
    }
}

impl std::error::Error for RdbError {}

impl From<RdbError> for io::Error {
    fn from(e: RdbError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

pub type Result<T, E = RdbError> = std::result::Result<T, E>;

// ---------------------------------------------------------------------------
// Integer <-> decimal helpers shared by the encoders.

/// Parses `s` as an i64 only if it is the canonical decimal form (Redis's `string2ll` /
/// `lpStringToInt64`: optional `-`, no leading zeros, no `+`, not `-0`, in range): such strings
/// are stored as integers by RDB and listpacks and read back identically. The server's one
/// implementation, the protocol crate's.
#[inline]
pub fn parse_canonical_i64(s: &[u8]) -> Option<i64> {
    damselfly_protocol::double::parse_i64(s)
}

/// Formats `v` in decimal into `buf`, returning the used tail (the protocol crate's writer).
#[inline]
pub fn format_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let n = damselfly_protocol::double::write_i64(v, buf);
    &buf[20 - n..]
}

// ---------------------------------------------------------------------------
// Writer

/// Bytes being serialized, kept as a list of buffers of about [`Parts::PART_BYTES`]: appending
/// never copies what is already there (a snapshot writes a big value through it, piece by
/// piece, without one huge buffer that grows by copying).
#[derive(Default)]
pub struct Parts {
    full: Vec<Vec<u8>>,
    cur: Vec<u8>,
}

impl Parts {
    pub const PART_BYTES: usize = 256 << 10;

    /// The buffers, in order.
    pub fn parts(mut self) -> Vec<Vec<u8>> {
        if !self.cur.is_empty() {
            self.full.push(self.cur);
        }
        self.full
    }
}

impl Write for Parts {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.cur.len() >= Self::PART_BYTES {
            let full = std::mem::replace(&mut self.cur, Vec::with_capacity(Self::PART_BYTES));
            self.full.push(full);
        }
        self.cur.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes RDB primitives to any `io::Write`, keeping a running CRC-64 and a
/// byte count of everything written (the checksum is what [`Writer::finish`]
/// appends, as Redis's rio does).
pub struct Writer<W: Write> {
    inner: W,
    crc: u64,
    written: u64,
    compression: bool,
    checksum: bool,
}

impl<W: Write> Writer<W> {
    /// A writer with Redis's defaults: `rdbcompression yes`, `rdbchecksum yes`.
    pub fn new(inner: W) -> Writer<W> {
        Writer {
            inner,
            crc: 0,
            written: 0,
            compression: true,
            checksum: true,
        }
    }

    /// `rdbcompression`: whether long strings may be LZF-compressed.
    pub fn set_compression(&mut self, on: bool) -> &mut Self {
        self.compression = on;
        self
    }

    pub fn compression(&self) -> bool {
        self.compression
    }

    /// `rdbchecksum`: when off, the trailer is eight zero bytes, which
    /// loaders take as "not computed" (and the CRC work is skipped).
    pub fn set_checksum(&mut self, on: bool) -> &mut Self {
        self.checksum = on;
        self
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// CRC-64 of everything written so far (0 when checksums are off).
    pub fn crc(&self) -> u64 {
        self.crc
    }

    /// The underlying writer, mutably (to flush and sync it mid-file); bytes written to it
    /// directly are not in the checksum.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The underlying writer (e.g. to inspect a `Vec` being filled).
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Gives back the underlying writer without writing the trailer (for
    /// DUMP payloads, which have their own footer: see [`dump_payload`]).
    pub fn into_inner(self) -> W {
        self.inner
    }

    pub fn write_raw(&mut self, data: &[u8]) -> io::Result<()> {
        self.inner.write_all(data)?;
        if self.checksum {
            self.crc = crc64(self.crc, data);
        }
        self.written += data.len() as u64;
        Ok(())
    }

    pub fn write_u8(&mut self, v: u8) -> io::Result<()> {
        self.write_raw(&[v])
    }

    /// A length, in the shortest of the four encodings (`rdbSaveLen`).
    pub fn write_len(&mut self, len: u64) -> io::Result<()> {
        let mut buf = [0u8; 9];
        let n = encode_len(len, &mut buf);
        self.write_raw(&buf[..n])
    }

    /// A string as `rdbSaveRawString` stores it: as an INT8/16/32 when it is
    /// a canonical decimal integer of at most 11 bytes that fits in 32 bits;
    /// else LZF-compressed when compression is on, it is longer than 20 bytes
    /// and LZF saves at least 4 bytes; else length + raw bytes.
    pub fn write_string(&mut self, s: &[u8]) -> io::Result<()> {
        if s.len() <= 11 {
            if let Some(v) = parse_canonical_i64(s) {
                let mut buf = [0u8; 5];
                if let Some(n) = encode_int(v, &mut buf) {
                    return self.write_raw(&buf[..n]);
                }
            }
        }
        if self.compression && lzf::worth_trying(s.len()) {
            if let Some(c) = lzf::compress(s) {
                self.write_u8(0xC0 | enc::LZF)?;
                self.write_len(c.len() as u64)?;
                self.write_len(s.len() as u64)?;
                return self.write_raw(&c);
            }
        }
        self.write_len(s.len() as u64)?;
        self.write_raw(s)
    }

    /// An integer-valued string (`rdbSaveLongLongAsStringObject`): INT8/16/32
    /// when it fits in 32 bits, else its decimal text (never compressed).
    pub fn write_int_string(&mut self, v: i64) -> io::Result<()> {
        let mut buf = [0u8; 5];
        if let Some(n) = encode_int(v, &mut buf) {
            return self.write_raw(&buf[..n]);
        }
        let mut dec = [0u8; 20];
        let s = format_i64(v, &mut dec);
        self.write_len(s.len() as u64)?;
        self.write_raw(s)
    }

    /// A binary double, 8 bytes little-endian (`rdbSaveBinaryDoubleValue`,
    /// used by `RDB_TYPE_ZSET_2` and listpack-less structures).
    pub fn write_binary_double(&mut self, v: f64) -> io::Result<()> {
        self.write_raw(&v.to_le_bytes())
    }

    /// A millisecond timestamp, 8 bytes little-endian.
    pub fn write_millis(&mut self, ms: i64) -> io::Result<()> {
        self.write_raw(&ms.to_le_bytes())
    }

    /// `REDIS0010`.
    pub fn write_header(&mut self) -> io::Result<()> {
        self.write_raw(RDB_MAGIC)?;
        self.write_raw(format!("{RDB_VERSION:04}").as_bytes())
    }

    /// An AUX field (`rdbSaveAuxField`): opcode, key string, value string.
    pub fn write_aux(&mut self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.write_u8(opcode::AUX)?;
        self.write_string(key)?;
        self.write_string(value)
    }

    /// An AUX field with an integer value (`rdbSaveAuxFieldStrInt`: the
    /// decimal text, which `write_string` may store as an integer).
    pub fn write_aux_int(&mut self, key: &[u8], value: i64) -> io::Result<()> {
        let mut dec = [0u8; 20];
        let s = format_i64(value, &mut dec);
        self.write_aux(key, s)
    }

    /// `SELECTDB` opcode and database number.
    pub fn write_selectdb(&mut self, db: u64) -> io::Result<()> {
        self.write_u8(opcode::SELECTDB)?;
        self.write_len(db)
    }

    /// `RESIZEDB` opcode with the key and expire counts.
    pub fn write_resizedb(&mut self, db_size: u64, expires_size: u64) -> io::Result<()> {
        self.write_u8(opcode::RESIZEDB)?;
        self.write_len(db_size)?;
        self.write_len(expires_size)
    }

    /// `EXPIRETIME_MS` opcode and absolute unix time in ms.
    pub fn write_expire_ms(&mut self, ms: i64) -> io::Result<()> {
        self.write_u8(opcode::EXPIRETIME_MS)?;
        self.write_millis(ms)
    }

    /// Writes the EOF opcode and the 8-byte little-endian CRC-64 of
    /// everything before it (zero if checksums are off), flushes, and returns
    /// the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.write_u8(opcode::EOF)?;
        let crc = if self.checksum { self.crc } else { 0 };
        self.inner.write_all(&crc.to_le_bytes())?;
        self.written += 8;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

/// Encodes a length into `buf`, returning the byte count (1, 2, 5 or 9).
pub fn encode_len(len: u64, buf: &mut [u8; 9]) -> usize {
    if len < 1 << 6 {
        buf[0] = len as u8;
        1
    } else if len < 1 << 14 {
        buf[0] = 0x40 | (len >> 8) as u8;
        buf[1] = len as u8;
        2
    } else if len <= u32::MAX as u64 {
        buf[0] = 0x80;
        buf[1..5].copy_from_slice(&(len as u32).to_be_bytes());
        5
    } else {
        buf[0] = 0x81;
        buf[1..9].copy_from_slice(&len.to_be_bytes());
        9
    }
}

/// Integer string encoding (`rdbEncodeInteger`): None if `v` needs more
/// than 32 bits.
pub fn encode_int(v: i64, buf: &mut [u8; 5]) -> Option<usize> {
    if let Ok(b) = i8::try_from(v) {
        buf[0] = 0xC0 | enc::INT8;
        buf[1] = b as u8;
        Some(2)
    } else if let Ok(h) = i16::try_from(v) {
        buf[0] = 0xC0 | enc::INT16;
        buf[1..3].copy_from_slice(&h.to_le_bytes());
        Some(3)
    } else if let Ok(w) = i32::try_from(v) {
        buf[0] = 0xC0 | enc::INT32;
        buf[1..5].copy_from_slice(&w.to_le_bytes());
        Some(5)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// Reader

/// A length as read by [`Reader::read_len`]: either a plain length or the
/// special string encoding number (`isencoded` in `rdbLoadLen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Len {
    Plain(u64),
    Encoded(u8),
}

/// Bounds-checked reader over an in-memory RDB image (a whole file, or a
/// DUMP payload). Never allocates more than a fixed multiple of the input
/// it has left: every length read from the input is checked against the
/// remaining bytes before use.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            base: 0,
        }
    }

    /// A reader whose error offsets are shifted by `base` (when `buf` is a
    /// slice of a larger file).
    pub fn with_base_offset(buf: &'a [u8], base: u64) -> Reader<'a> {
        Reader { buf, pos: 0, base }
    }

    /// Position within `buf`.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Absolute offset (base + position), as reported in errors.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// An error of `kind` at the current position.
    pub fn error(&self, kind: RdbErrorKind) -> RdbError {
        RdbError::new(self.offset(), kind)
    }

    fn error_at(&self, pos: usize, kind: RdbErrorKind) -> RdbError {
        RdbError::new(self.base + pos as u64, kind)
    }

    pub fn peek_u8(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    pub fn read_u8(&mut self) -> Result<u8> {
        let b = self
            .peek_u8()
            .ok_or_else(|| self.error(RdbErrorKind::UnexpectedEof))?;
        self.pos += 1;
        Ok(b)
    }

    /// The next `n` bytes, borrowed.
    pub fn read_bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(RdbErrorKind::UnexpectedEof));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.read_bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A length or special-encoding marker (`rdbLoadLenByRef`).
    pub fn read_len(&mut self) -> Result<Len> {
        let start = self.pos;
        let b = self.read_u8()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => {
                let lo = self.read_u8()?;
                Len::Plain(((b & 0x3f) as u64) << 8 | lo as u64)
            }
            3 => Len::Encoded(b & 0x3f),
            _ => match b {
                0x80 => Len::Plain(u32::from_be_bytes(self.read_array()?) as u64),
                0x81 => Len::Plain(u64::from_be_bytes(self.read_array()?)),
                _ => return Err(self.error_at(start, RdbErrorKind::BadLength)),
            },
        })
    }

    /// A plain length; a special encoding here is an error.
    pub fn read_plain_len(&mut self) -> Result<u64> {
        let start = self.pos;
        match self.read_len()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(self.error_at(start, RdbErrorKind::BadLength)),
        }
    }

    /// A plain length used as an element count, checked to be at most the
    /// remaining input (every element takes at least one byte), so callers
    /// may `Vec::with_capacity` it.
    pub fn read_count(&mut self) -> Result<usize> {
        let start = self.pos;
        let n = self.read_plain_len()?;
        if n > self.remaining() as u64 {
            return Err(self.error_at(start, RdbErrorKind::BadLength));
        }
        Ok(n as usize)
    }

    /// A string in any encoding: borrowed when stored raw, owned when it was
    /// an integer (decimal text) or LZF-compressed.
    pub fn read_string(&mut self) -> Result<Cow<'a, [u8]>> {
        let start = self.pos;
        match self.read_len()? {
            Len::Plain(n) => {
                if n > self.remaining() as u64 {
                    return Err(self.error_at(start, RdbErrorKind::BadLength));
                }
                Ok(Cow::Borrowed(self.read_bytes(n as usize)?))
            }
            Len::Encoded(e) => match e {
                enc::INT8 | enc::INT16 | enc::INT32 => {
                    let v = self.read_encoded_int(e)?;
                    let mut buf = [0u8; 20];
                    Ok(Cow::Owned(format_i64(v, &mut buf).to_vec()))
                }
                enc::LZF => {
                    let clen = self.read_plain_len()?;
                    let len = self.read_plain_len()?;
                    if clen > self.remaining() as u64 {
                        return Err(self.error_at(start, RdbErrorKind::BadLength));
                    }
                    let data = self.read_bytes(clen as usize)?;
                    let len = usize::try_from(len)
                        .map_err(|_| self.error_at(start, RdbErrorKind::BadLength))?;
                    lzf::decompress(data, len)
                        .map(Cow::Owned)
                        .map_err(|e| self.error_at(start, RdbErrorKind::Lzf(e)))
                }
                other => Err(self.error_at(start, RdbErrorKind::BadStringEncoding(other))),
            },
        }
    }

    /// [`Reader::read_string`] as an owned vector.
    pub fn read_string_vec(&mut self) -> Result<Vec<u8>> {
        self.read_string().map(Cow::into_owned)
    }

    /// A string that must hold an integer: INT8/16/32 directly, or decimal
    /// text (as `rdbLoadLongLongValue`-style callers expect, e.g. stream IDs
    /// in older formats). Non-integer text is `BadStringEncoding`.
    pub fn read_string_as_i64(&mut self) -> Result<i64> {
        let start = self.pos;
        if let Some(b) = self.peek_u8() {
            if b >> 6 == 3 && (b & 0x3f) <= enc::INT32 {
                self.pos += 1;
                return self.read_encoded_int(b & 0x3f);
            }
        }
        let s = self.read_string()?;
        std::str::from_utf8(&s)
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
            .ok_or_else(|| self.error_at(start, RdbErrorKind::Other("string is not an integer")))
    }

    fn read_encoded_int(&mut self, e: u8) -> Result<i64> {
        Ok(match e {
            enc::INT8 => self.read_u8()? as i8 as i64,
            enc::INT16 => i16::from_le_bytes(self.read_array()?) as i64,
            _ => i32::from_le_bytes(self.read_array()?) as i64,
        })
    }

    /// A binary double (8 bytes LE).
    pub fn read_double_binary(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.read_array()?))
    }

    /// A binary float (4 bytes LE; module values).
    pub fn read_float_binary(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.read_array()?))
    }

    /// The old ASCII double of `RDB_TYPE_ZSET` (`rdbLoadDoubleValue`): one
    /// length byte, where 253/254/255 stand for NaN/+inf/-inf, else that
    /// many bytes of `%.17g` text.
    pub fn read_double_old(&mut self) -> Result<f64> {
        let start = self.pos;
        let n = self.read_u8()?;
        match n {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            _ => {
                let s = self.read_bytes(n as usize)?;
                std::str::from_utf8(s)
                    .ok()
                    .and_then(|t| t.trim().parse::<f64>().ok())
                    .ok_or_else(|| self.error_at(start, RdbErrorKind::BadDouble))
            }
        }
    }

    /// A millisecond time (`rdbLoadMillisecondTime`), 8 bytes LE.
    pub fn read_millis(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.read_array()?))
    }

    /// A seconds time (`rdbLoadTime`, old EXPIRETIME opcode), 4 bytes LE.
    pub fn read_secs(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.read_array()?))
    }

    /// Reads `REDIS` + four version digits, accepting versions 1..=`max`
    /// (Redis 7.0 accepts 1..=10). Returns the version.
    pub fn read_header(&mut self, max: u32) -> Result<u32> {
        let start = self.pos;
        let magic = self
            .read_bytes(5)
            .map_err(|_| self.error_at(start, RdbErrorKind::BadMagic))?;
        if magic != RDB_MAGIC {
            return Err(self.error_at(start, RdbErrorKind::BadMagic));
        }
        let digits = self.read_bytes(4)?;
        let mut v = 0u32;
        for &d in digits {
            if !d.is_ascii_digit() {
                return Err(self.error_at(start + 5, RdbErrorKind::BadVersion(v)));
            }
            v = v * 10 + (d - b'0') as u32;
        }
        if v < 1 || v > max {
            return Err(self.error_at(start + 5, RdbErrorKind::BadVersion(v)));
        }
        Ok(v)
    }

    /// After the EOF opcode: reads the 8-byte checksum and checks it against
    /// the CRC-64 of everything before it in `buf`. A stored zero means
    /// "saved with rdbchecksum no" and passes, as in Redis.
    pub fn read_checksum(&mut self) -> Result<()> {
        let start = self.pos;
        let stored = u64::from_le_bytes(self.read_array()?);
        if stored == 0 {
            return Ok(());
        }
        let actual = crc64(0, &self.buf[..start]);
        if actual != stored {
            return Err(self.error_at(
                start,
                RdbErrorKind::BadChecksum {
                    expected: stored,
                    actual,
                },
            ));
        }
        Ok(())
    }
}

/// Checks the trailing checksum of a whole RDB file image (the last 8 bytes,
/// little-endian, over everything before them). Zero passes ("not computed").
pub fn verify_trailer(file: &[u8]) -> Result<()> {
    if file.len() < 8 {
        return Err(RdbError::new(0, RdbErrorKind::UnexpectedEof));
    }
    let mut r = Reader::new(file);
    r.pos = file.len() - 8;
    r.read_checksum()
}

// ---------------------------------------------------------------------------
// DUMP payloads

/// The reply Redis gives for any payload [`check_dump_payload`] rejects.
pub const DUMP_PAYLOAD_ERROR: &str = "DUMP payload version or checksum are wrong";

/// Why a DUMP payload was rejected. Redis replies [`DUMP_PAYLOAD_ERROR`] for
/// all of them (`verifyDumpPayload` returns C_ERR for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpError {
    /// Shorter than the 10-byte footer.
    TooShort,
    /// Footer RDB version newer than ours.
    BadVersion(u16),
    /// CRC-64 mismatch.
    BadChecksum,
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DUMP_PAYLOAD_ERROR)
    }
}

impl std::error::Error for DumpError {}

/// Wraps serialized object bytes (type byte + object) into a DUMP payload:
/// the bytes, the RDB version as u16 LE, then the CRC-64 (LE) of all that
/// (`createDumpPayload`).
pub fn dump_payload(object_bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(object_bytes.len() + 10);
    out.extend_from_slice(object_bytes);
    out.extend_from_slice(&(RDB_VERSION as u16).to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a RESTORE payload and returns the object bytes (type byte +
/// object). As Redis 7.0's `verifyDumpPayload`: the footer version may be
/// any value up to our RDB version (older payloads load fine), and the
/// CRC-64 must match (a zero CRC is *not* special here).
pub fn check_dump_payload(payload: &[u8]) -> Result<&[u8], DumpError> {
    verify_dump_payload(payload, false).map(|(obj, _)| obj)
}

/// [`check_dump_payload`] that also returns the footer version, and can skip
/// the CRC (Redis's `skip-checksum-validation` debug setting).
pub fn verify_dump_payload(payload: &[u8], skip_checksum: bool) -> Result<(&[u8], u16), DumpError> {
    if payload.len() < 10 {
        return Err(DumpError::TooShort);
    }
    let footer = payload.len() - 10;
    let version = u16::from_le_bytes([payload[footer], payload[footer + 1]]);
    if version as u32 > RDB_VERSION {
        return Err(DumpError::BadVersion(version));
    }
    if !skip_checksum {
        let mut stored = [0u8; 8];
        stored.copy_from_slice(&payload[footer + 2..]);
        if crc64(0, &payload[..footer + 2]) != u64::from_le_bytes(stored) {
            return Err(DumpError::BadChecksum);
        }
    }
    Ok((&payload[..footer], version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn written(f: impl FnOnce(&mut Writer<Vec<u8>>)) -> Vec<u8> {
        let mut w = Writer::new(Vec::new());
        f(&mut w);
        w.into_inner()
    }

    #[test]
    fn length_encodings() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (63, &[0x3f]),
            (64, &[0x40, 0x40]),
            (16383, &[0x7f, 0xff]),
            (16384, &[0x80, 0x00, 0x00, 0x40, 0x00]),
            (u32::MAX as u64, &[0x80, 0xff, 0xff, 0xff, 0xff]),
            (1 << 32, &[0x81, 0, 0, 0, 1, 0, 0, 0, 0]),
        ];
        for &(n, bytes) in cases {
            assert_eq!(written(|w| w.write_len(n).unwrap()), bytes, "{n}");
            let mut r = Reader::new(bytes);
            assert_eq!(r.read_len().unwrap(), Len::Plain(n));
            assert!(r.is_at_end());
        }
        let mut r = Reader::new(&[0x82]);
        assert_eq!(r.read_len().unwrap_err().kind, RdbErrorKind::BadLength);
        let mut r = Reader::new(&[0xC3]);
        assert_eq!(r.read_len().unwrap(), Len::Encoded(3));
    }

    #[test]
    fn string_encodings_match_redis() {
        // Canonical integers become INT8/16/32.
        assert_eq!(written(|w| w.write_string(b"64").unwrap()), [0xC0, 0x40]);
        assert_eq!(written(|w| w.write_string(b"-1").unwrap()), [0xC0, 0xff]);
        assert_eq!(
            written(|w| w.write_string(b"1000").unwrap()),
            [0xC1, 0xe8, 0x03]
        );
        assert_eq!(
            written(|w| w.write_string(b"-2147483648").unwrap()),
            [0xC2, 0x00, 0x00, 0x00, 0x80]
        );
        // Non-canonical or too wide: raw.
        assert_eq!(
            written(|w| w.write_string(b"007").unwrap()),
            [0x03, b'0', b'0', b'7']
        );
        assert_eq!(
            written(|w| w.write_string(b"+1").unwrap()),
            [0x02, b'+', b'1']
        );
        assert_eq!(
            written(|w| w.write_string(b"-0").unwrap()),
            [0x02, b'-', b'0']
        );
        assert_eq!(written(|w| w.write_string(b"2147483648").unwrap())[0], 10);
        assert_eq!(written(|w| w.write_string(b"").unwrap()), [0x00]);
        // Long repetitive strings compress; short ones do not.
        let long = vec![b'x'; 100];
        let out = written(|w| w.write_string(&long).unwrap());
        assert_eq!(out[0], 0xC3);
        let out_nc = written(|w| {
            w.set_compression(false);
            w.write_string(&long).unwrap()
        });
        assert_eq!(&out_nc[..2], &[0x40, 100]); // 14-bit length
        assert_eq!(out_nc.len(), 102);
        let twenty = vec![b'y'; 20];
        assert_eq!(written(|w| w.write_string(&twenty).unwrap())[0], 20);
        for buf in [out, out_nc] {
            let mut r = Reader::new(&buf);
            assert_eq!(&*r.read_string().unwrap(), &long[..]);
            assert!(r.is_at_end());
        }
    }

    #[test]
    fn int_strings() {
        assert_eq!(written(|w| w.write_int_string(5).unwrap()), [0xC0, 5]);
        let big = written(|w| w.write_int_string(1 << 40).unwrap());
        assert_eq!(big[0], 13);
        assert_eq!(&big[1..], b"1099511627776");
        let mut r = Reader::new(&big);
        assert_eq!(r.read_string_as_i64().unwrap(), 1 << 40);
        let mut r = Reader::new(&[0xC1, 0x00, 0x80]);
        assert_eq!(r.read_string_as_i64().unwrap(), -32768);
        let mut r = Reader::new(&[0xC1, 0x00, 0x80]);
        assert_eq!(&*r.read_string().unwrap(), b"-32768");
    }

    #[test]
    fn header_aux_and_trailer() {
        let mut w = Writer::new(Vec::new());
        w.write_header().unwrap();
        w.write_aux(b"redis-ver", b"7.0.0").unwrap();
        w.write_aux_int(b"redis-bits", 64).unwrap();
        w.write_selectdb(0).unwrap();
        w.write_resizedb(1, 0).unwrap();
        w.write_u8(RdbType::String as u8).unwrap();
        w.write_string(b"k").unwrap();
        w.write_string(b"v").unwrap();
        let file = w.finish().unwrap();
        assert_eq!(&file[..9], b"REDIS0010");
        assert_eq!(&file[9..21], b"\xfa\x09redis-ver\x05");
        verify_trailer(&file).unwrap();

        let mut r = Reader::new(&file);
        assert_eq!(r.read_header(RDB_VERSION).unwrap(), 10);
        assert_eq!(r.read_u8().unwrap(), opcode::AUX);
        assert_eq!(&*r.read_string().unwrap(), b"redis-ver");
        assert_eq!(&*r.read_string().unwrap(), b"7.0.0");
        assert_eq!(r.read_u8().unwrap(), opcode::AUX);
        assert_eq!(&*r.read_string().unwrap(), b"redis-bits");
        assert_eq!(r.read_string_as_i64().unwrap(), 64);
        assert_eq!(r.read_u8().unwrap(), opcode::SELECTDB);
        assert_eq!(r.read_plain_len().unwrap(), 0);
        assert_eq!(r.read_u8().unwrap(), opcode::RESIZEDB);
        assert_eq!(r.read_plain_len().unwrap(), 1);
        assert_eq!(r.read_plain_len().unwrap(), 0);
        assert_eq!(
            RdbType::from_u8(r.read_u8().unwrap()),
            Some(RdbType::String)
        );
        assert_eq!(&*r.read_string().unwrap(), b"k");
        assert_eq!(&*r.read_string().unwrap(), b"v");
        assert_eq!(r.read_u8().unwrap(), opcode::EOF);
        r.read_checksum().unwrap();
        assert!(r.is_at_end());

        // A flipped byte is caught, with the trailer's offset.
        let mut bad = file.clone();
        bad[12] ^= 1;
        let e = verify_trailer(&bad).unwrap_err();
        assert_eq!(e.offset, bad.len() as u64 - 8);
        assert!(matches!(e.kind, RdbErrorKind::BadChecksum { .. }));
        assert!(e.to_string().starts_with(&format!(
            "RDB format error at offset {}: RDB CRC error: wrong RDB checksum",
            bad.len() - 8
        )));

        // rdbchecksum no: zero trailer, which passes.
        let mut w = Writer::new(Vec::new());
        w.set_checksum(false);
        w.write_header().unwrap();
        let file = w.finish().unwrap();
        assert_eq!(&file[file.len() - 8..], &[0; 8]);
        verify_trailer(&file).unwrap();
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            Reader::new(b"REDIS0011").read_header(10).unwrap_err().kind,
            RdbErrorKind::BadVersion(11)
        );
        assert_eq!(
            Reader::new(b"REDIS0000").read_header(10).unwrap_err().kind,
            RdbErrorKind::BadVersion(0)
        );
        assert_eq!(
            Reader::new(b"RADIS0010").read_header(10).unwrap_err().kind,
            RdbErrorKind::BadMagic
        );
        assert_eq!(
            Reader::new(b"RED").read_header(10).unwrap_err().kind,
            RdbErrorKind::BadMagic
        );
        assert_eq!(Reader::new(b"REDIS0009").read_header(10).unwrap(), 9);
    }

    #[test]
    fn doubles_and_times() {
        let b = written(|w| {
            w.write_binary_double(1.5).unwrap();
            w.write_millis(-2).unwrap();
        });
        let mut r = Reader::new(&b);
        assert_eq!(r.read_double_binary().unwrap(), 1.5);
        assert_eq!(r.read_millis().unwrap(), -2);
        let mut r = Reader::new(b"\xff\xfe\xfd\x043.25\x01x");
        assert_eq!(r.read_double_old().unwrap(), f64::NEG_INFINITY);
        assert_eq!(r.read_double_old().unwrap(), f64::INFINITY);
        assert!(r.read_double_old().unwrap().is_nan());
        assert_eq!(r.read_double_old().unwrap(), 3.25);
        assert_eq!(
            r.read_double_old().unwrap_err().kind,
            RdbErrorKind::BadDouble
        );
        let mut r = Reader::new(&[1, 0, 0, 0]);
        assert_eq!(r.read_secs().unwrap(), 1);
    }

    #[test]
    fn huge_lengths_are_errors_not_allocations() {
        // A 2^60 string length in a 10-byte input.
        let mut r = Reader::with_base_offset(&[0x81, 0x10, 0, 0, 0, 0, 0, 0, 0, b'x'], 100);
        let e = r.read_string().unwrap_err();
        assert_eq!(e, RdbError::new(100, RdbErrorKind::BadLength));
        assert_eq!(
            e.to_string(),
            "RDB format error at offset 100: bad length encoding"
        );
        // LZF with an absurd uncompressed length.
        let mut r = Reader::new(&[0xC3, 0x02, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x00, b'a']);
        assert!(matches!(
            r.read_string().unwrap_err().kind,
            RdbErrorKind::Lzf(LzfError::ImpossibleLength)
        ));
        let mut r = Reader::new(&[0x80, 0, 0, 1, 0]);
        assert_eq!(r.read_count().unwrap_err().kind, RdbErrorKind::BadLength);
        let mut r = Reader::new(&[0xC4]);
        assert_eq!(
            r.read_string().unwrap_err().kind,
            RdbErrorKind::BadStringEncoding(4)
        );
    }

    #[test]
    fn dump_payloads() {
        let obj = [RdbType::String as u8, 0xC0, 7];
        let p = dump_payload(&obj);
        assert_eq!(p.len(), obj.len() + 10);
        assert_eq!(&p[3..5], &[10, 0]);
        assert_eq!(check_dump_payload(&p).unwrap(), &obj);
        assert_eq!(crc64(0, &p[..5]).to_le_bytes(), p[5..]);
        // The DUMP example from the Redis documentation (`SET mykey 10`,
        // `DUMP mykey` on an RDB 9 server): "\x00\xc0\n\t\x00\xbem\x06\x89Z(\x00\n".
        let real = b"\x00\xc0\n\t\x00\xbem\x06\x89Z(\x00\n";
        assert_eq!(verify_dump_payload(real, false).unwrap(), (&real[..3], 9));
        let mut bad = p.clone();
        bad[1] ^= 1;
        assert_eq!(check_dump_payload(&bad), Err(DumpError::BadChecksum));
        assert_eq!(check_dump_payload(&p[..9]), Err(DumpError::TooShort));
        // Older versions accepted; newer rejected.
        let mut old = obj.to_vec();
        old.extend_from_slice(&9u16.to_le_bytes());
        let c = crc64(0, &old);
        old.extend_from_slice(&c.to_le_bytes());
        assert_eq!(verify_dump_payload(&old, false).unwrap(), (&obj[..], 9));
        let mut new = obj.to_vec();
        new.extend_from_slice(&11u16.to_le_bytes());
        new.extend_from_slice(&[0; 8]);
        assert_eq!(check_dump_payload(&new), Err(DumpError::BadVersion(11)));
        assert_eq!(DumpError::TooShort.to_string(), DUMP_PAYLOAD_ERROR);
        assert_eq!(verify_dump_payload(&bad, true).unwrap().0, &bad[..3]);
    }

    #[test]
    fn canonical_ints() {
        for (s, v) in [
            (&b"0"[..], Some(0)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"-0", None),
            (b"01", None),
            (b"", None),
            (b"-", None),
            (b" 1", None),
            (b"1a", None),
            (b"+1", None),
            (b"99999999999999999999", None),
        ] {
            assert_eq!(
                parse_canonical_i64(s),
                v,
                "{:?}",
                String::from_utf8_lossy(s)
            );
        }
    }

    #[test]
    fn type_names() {
        assert_eq!(RdbType::from_u8(25), Some(RdbType::HashListpackEx));
        assert_eq!(RdbType::from_u8(8), None);
        assert_eq!(RdbType::from_u8(26), None);
        assert_eq!(RdbType::SetListpack.name(), "RDB_TYPE_SET_LISTPACK");
        for v in 0..=255u8 {
            if let Some(t) = RdbType::from_u8(v) {
                assert_eq!(t as u8, v);
            }
        }
    }

    proptest! {
        #[test]
        fn len_roundtrip(n in any::<u64>()) {
            let b = written(|w| w.write_len(n).unwrap());
            let mut r = Reader::new(&b);
            prop_assert_eq!(r.read_len().unwrap(), Len::Plain(n));
            prop_assert!(r.is_at_end());
        }

        #[test]
        fn string_roundtrip(s in proptest::collection::vec(any::<u8>(), 0..300), rep in any::<bool>(), comp in any::<bool>()) {
            let s = if rep { s.iter().map(|b| b % 3).collect() } else { s };
            let b = written(|w| { w.set_compression(comp); w.write_string(&s).unwrap() });
            let mut r = Reader::new(&b);
            prop_assert_eq!(&*r.read_string().unwrap(), &s[..]);
            prop_assert!(r.is_at_end());
        }

        #[test]
        fn int_string_roundtrip(v in any::<i64>()) {
            let mut dec = [0u8; 20];
            let text = format_i64(v, &mut dec).to_vec();
            let std_text = v.to_string();
            prop_assert_eq!(&text[..], std_text.as_bytes());
            prop_assert_eq!(parse_canonical_i64(&text), Some(v));
            let b = written(|w| { w.write_int_string(v).unwrap(); w.write_string(&text).unwrap() });
            let mut r = Reader::new(&b);
            prop_assert_eq!(&*r.read_string().unwrap(), &text[..]);
            prop_assert_eq!(r.read_string_as_i64().unwrap(), v);
        }

        #[test]
        fn reader_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(&data);
            while !r.is_at_end() {
                let before = r.pos();
                let _ = r.read_string();
                if r.pos() == before { break; }
            }
            let _ = verify_trailer(&data);
            let _ = check_dump_payload(&data);
            let _ = Reader::new(&data).read_double_old();
            let _ = Reader::new(&data).read_header(RDB_VERSION);
        }
    }
}
