//! Differential generators for the hash commands (see `differential.rs` for the runner).

use super::*;

pub static SPECS: &[Spec] = &[];
