//! Value representations stored in the shard tables.

pub mod compact;
pub mod value;

pub use compact::CompactStr;
pub use value::Value;
