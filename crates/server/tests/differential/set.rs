//! Differential generators for the set commands (see `differential.rs` for the runner).

use super::*;

pub static SPECS: &[Spec] = &[];
