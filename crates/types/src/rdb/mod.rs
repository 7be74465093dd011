//! Redis RDB format codec, version 10 (what redis-server 7.0 writes and
//! loads): byte-level primitives only, with no dependency on the rest of
//! the server.
//!
//! - [`crc64`]: the checksum of file trailers and DUMP payloads.
//! - [`lzf`]: LZF compression of long strings.
//! - [`wire`]: constants, [`Writer`]/[`Reader`] for lengths, strings,
//!   numbers, header and trailer, typed [`RdbError`]s, DUMP footers.
//! - [`listpack`], [`ziplist`], [`intset`], [`zipmap`]: the packed blobs
//!   embedded as strings in object payloads ([`PackedEntry`] is their
//!   element type).
//! - [`stream`]: stream objects (`RDB_TYPE_STREAM_LISTPACKS*`) to and from a neutral image.
//!
//! Decoders validate like Redis's `*ValidateIntegrity(deep=1)` and never
//! allocate more than a bound derived from their input's length.

pub mod crc64;
pub mod intset;
pub mod listpack;
pub mod lzf;
pub mod object;
pub mod stream;
pub mod stream_value;
pub mod wire;
pub mod ziplist;
pub mod zipmap;

pub use listpack::{LpBuilder, PackedEntry};
pub use wire::{
    check_dump_payload, dump_payload, opcode, verify_trailer, BlobError, DumpError, Len, RdbError,
    RdbErrorKind, RdbType, Reader, Writer, RDB_VERSION,
};
