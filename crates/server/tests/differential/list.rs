//! Differential generators for the list commands (see `differential.rs` for the runner).

use super::*;

pub static SPECS: &[Spec] = &[];
