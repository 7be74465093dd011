//! Value representations stored in the shard tables.

pub mod compact;
pub mod key;
pub mod value;

pub use compact::CompactStr;
pub use key::KeyStr;
pub use value::Value;
