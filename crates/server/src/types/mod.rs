//! Value representations stored in the shard tables.

pub mod compact;
pub mod hash;
pub mod key;
pub mod list;
pub mod set;
pub mod value;
pub mod zset;

pub use compact::CompactStr;
pub use key::KeyStr;
pub use value::{Kind, Value, ValueMut, ValueRef};
