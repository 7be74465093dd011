//! What a module that owns parameters is told about them, without the configuration naming it.
//!
//! The configuration code sits below every subsystem (engine, replication, ACL, persistence,
//! process): it stores values and checks them against their table type, and each owner
//! registers [`Hook`]s for the rest — a check only it can make (`notify-keyspace-events` flag
//! letters, a cron expression), what to do once a value is stored (`maxmemory` reaches the
//! evictor), and what `CONFIG REWRITE` writes when the live state differs from the stored
//! value (`replicaof` after a REPLICAOF command). The server installs every owner's table
//! once, before the first directive is read (`damselfly::install`), so the
//! dependency points up the stack only at the top.

use std::sync::OnceLock;

/// Checks a value and returns its canonical form, or why it is refused.
pub type Check = fn(&str) -> Result<String, String>;
/// Checks every line of a repeated directive so far (the newest last).
pub type CheckLines = fn(&[Vec<String>]) -> Result<(), String>;

/// One owner's hooks for one parameter (or a repeated directive such as `user`).
pub struct Hook {
    /// The parameter's canonical name, or the directive (`user`, `rename-command`).
    pub param: &'static str,
    /// Checks a value the table's type accepted and returns its canonical form; runs before
    /// the value is stored, at start-up and on CONFIG SET.
    pub check: Option<Check>,
    /// Applies a stored value (each time it is stored: defaults when the configuration is
    /// made, then every directive and CONFIG SET).
    pub apply: Option<fn(&str)>,
    /// The value `CONFIG REWRITE` writes, from the stored one.
    pub rewrite: Option<fn(&str) -> String>,
    /// A repeated directive: checks all its lines so far (the newest last).
    pub check_lines: Option<CheckLines>,
    /// A repeated directive's lines as its owner knows them now, for `CONFIG REWRITE`.
    pub lines: Option<fn() -> Vec<String>>,
}

impl Hook {
    /// A hook that does nothing yet; fill in what the owner needs.
    pub const fn new(param: &'static str) -> Hook {
        Hook {
            param,
            check: None,
            apply: None,
            rewrite: None,
            check_lines: None,
            lines: None,
        }
    }
}

static HOOKS: OnceLock<Vec<&'static Hook>> = OnceLock::new();

/// Installs every owner's hooks, before any configuration is made (a `Config` made earlier
/// missed its defaults' `apply`). The first call wins; later calls are no-ops, so tests may
/// call it freely. Returns whether this call installed them.
pub fn install(tables: &[&'static [Hook]]) -> bool {
    let mut set = false;
    HOOKS.get_or_init(|| {
        set = true;
        tables.iter().flat_map(|t| t.iter()).collect()
    });
    set
}

fn hooks_for(param: &str) -> impl Iterator<Item = &'static Hook> + '_ {
    HOOKS
        .get()
        .map(|v| v.as_slice())
        .unwrap_or(&[])
        .iter()
        .copied()
        .filter(move |h| h.param == param)
}

/// The owners' checks of `param`'s value `v`, in turn; the canonical value they return.
pub(super) fn check(param: &str, v: String) -> Result<String, String> {
    let mut v = v;
    for h in hooks_for(param) {
        if let Some(f) = h.check {
            v = f(&v)?;
        }
    }
    Ok(v)
}

/// Tells the owners of `param` its stored value.
pub(super) fn apply(param: &str, v: &str) {
    for h in hooks_for(param) {
        if let Some(f) = h.apply {
            f(v);
        }
    }
}

/// Does an owner `apply` the values of `param` (the table test counts it as read)?
#[cfg(test)]
pub(super) fn applied(param: &str) -> bool {
    hooks_for(param).any(|h| h.apply.is_some())
}

/// What `CONFIG REWRITE` writes for `param` stored as `v`.
pub(super) fn rewrite(param: &str, v: String) -> String {
    hooks_for(param).fold(v, |v, h| match h.rewrite {
        Some(f) => f(&v),
        None => v,
    })
}

/// The owners' checks of a repeated directive's lines.
pub(super) fn check_lines(directive: &str, lines: &[Vec<String>]) -> Result<(), String> {
    for h in hooks_for(directive) {
        if let Some(f) = h.check_lines {
            f(lines)?;
        }
    }
    Ok(())
}

/// A repeated directive's current lines from its owner (`None`: no owner says).
pub(super) fn lines(directive: &str) -> Option<Vec<String>> {
    hooks_for(directive).find_map(|h| h.lines.map(|f| f()))
}
