//! zset commands (issue 5): placeholder table, filled in by the collections work.

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
