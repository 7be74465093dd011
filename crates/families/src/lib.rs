//! The data command families, on top of the command framework (`damselfly_core::commands`):
//! one module per family, each with its `COMMANDS` declarations and handlers. They reach
//! shards only through the hop API and name nothing above the framework; the crate root of
//! `damselfly` installs their tables. docs/architecture.md, "Adding a command family".

pub mod bitmap;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod list;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod zset;
