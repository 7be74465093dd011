//! Bitmap commands: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO.

use super::CommandSpec;

pub static COMMANDS: &[CommandSpec] = &[];
