//! Differential generators for the zset commands (see `differential.rs` for the runner).

use super::*;

pub static SPECS: &[Spec] = &[];
