//! Values and their encodings: the representations stored in the shard tables (strings,
//! lists, hashes, sets, sorted sets, streams, HyperLogLogs) and their RDB serialisation
//! (`rdb`), byte for byte as redis-server 7.0 writes it.
//!
//! The lowest layer of the server: it names no engine, configuration or command code (the
//! crate graph makes that a compile error), so it is built and tested on its own and a change
//! above it does not rebuild it. See docs/architecture.md.

pub mod compact;
pub mod digest;
pub mod geohash;
pub mod hash;
pub mod hll;
pub mod key;
pub mod list;
pub mod lpsize;
pub mod oatable;
pub mod rand;
pub mod rdb;
pub mod set;
pub mod stream;
pub mod value;
pub mod varint;
pub mod zset;

pub use compact::CompactStr;
pub use key::KeyStr;
pub use value::{Kind, Value, ValueMut, ValueRef};

/// Compact-encoding thresholds of a hash or sorted set (`*-max-listpack-entries` /
/// `*-max-listpack-value`), from the config at the time of the command.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub entries: usize,
    pub value: usize,
}

impl Limits {
    /// Whether `n` entries of at most `maxlen` bytes fit the compact encoding.
    #[inline]
    pub fn fits(&self, n: usize, maxlen: usize) -> bool {
        n <= self.entries && maxlen <= self.value
    }
}
