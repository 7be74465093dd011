//! HyperLogLog commands (being written).

use super::spec::prelude::*;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[];
