//! Tests over the whole command table, which only this crate assembles ([`crate::install`]).

mod key_flags;
mod spec;

/// The whole table, installed as `main` installs it.
fn table() -> &'static damselfly_core::commands::registry::Registry {
    crate::install();
    damselfly_core::commands::registry::registry()
}
