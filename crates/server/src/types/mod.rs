//! Value representations stored in the shard tables.

pub mod compact;
pub mod geohash;
pub mod hash;
pub mod hll;
pub mod key;
pub mod list;
pub mod oatable;
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
