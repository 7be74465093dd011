//! An ACL user (Redis 7.0's `user`): on/off, passwords as SHA-256 hex, a root selector and
//! any added selectors.

use sha2::{Digest, Sha256};

use super::selector::{has_spaces, Denied, RuleError, Selector};
use crate::commands::registry::Entry;

#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` / `skip-sanitize-payload` (None: neither was set).
    pub sanitize: Option<bool>,
    /// SHA-256 hex digests, in the order added.
    pub passwords: Vec<String>,
    /// The root selector first, then the added ones.
    pub selectors: Vec<Selector>,
    /// Allows everything (checks skipped): the root selector is unrestricted.
    pub unrestricted: bool,
}

/// Redis's `ACLHashPassword`: lowercase hex SHA-256.
pub fn hash_password(pass: &[u8]) -> String {
    let d = Sha256::digest(pass);
    let mut s = String::with_capacity(64);
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

impl User {
    /// A new user: off, no passwords, no permissions (`ACLCreateUser`).
    pub fn new(name: &str, pubsub_all: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, pubsub_all)],
            unrestricted: false,
        }
    }

    /// The built-in `default` user: on, nopass, everything allowed.
    pub fn default_user() -> User {
        let mut u = User::new("default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            u.apply(op.as_bytes(), false).expect("default user rules");
        }
        u
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Applies one rule (Redis's `ACLSetUser`); `pubsub_all` is `acl-pubsub-default`.
    pub fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        let r = self.apply_inner(op, pubsub_all);
        self.unrestricted = self.root().unrestricted();
        r
    }

    fn apply_inner(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let h = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            if !self.passwords.contains(&h) {
                self.passwords.push(h);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let h = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            let Some(i) = self.passwords.iter().position(|p| *p == h) else {
                return Err(RuleError::NoSuchPassword);
            };
            self.passwords.remove(i);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(false, pubsub_all);
            let inner = &op[1..op.len() - 1];
            let words = crate::config::file::split_args(&String::from_utf8_lossy(inner))
                .map_err(|_| RuleError::Syntax)?;
            for w in words {
                s.apply(w.as_bytes())?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for op in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply_inner(op.as_bytes(), pubsub_all)?;
            }
            if pubsub_all {
                self.apply_inner(b"allchannels", pubsub_all)?;
            }
            for op in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply_inner(op.as_bytes(), pubsub_all)?;
            }
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// Applies rules as one change (`ACLStringSetUser`): selectors spread over several
    /// arguments are merged first; on any error nothing is applied and Redis's message is
    /// returned.
    pub fn apply_all(&mut self, ops: &[&[u8]], pubsub_all: bool) -> Result<(), String> {
        let merged = merge_selectors(ops).map_err(|at| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(ops[at])
            )
        })?;
        let mut staged = self.clone();
        for op in &merged {
            staged.apply(op, pubsub_all).map_err(|e| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        *self = staged;
        Ok(())
    }

    /// May `pass` log in as this user (not checking on/off)?
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        self.passwords
            .iter()
            .any(|p| constant_time_eq(p.as_bytes(), h.as_bytes()))
    }

    /// The user in rule form, as ACL LIST and the ACL file show it (`ACLDescribeUser`).
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.flag_names() {
            out.extend_from_slice(f.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for (i, s) in self.selectors.iter().enumerate() {
            if i == 0 {
                out.extend_from_slice(&s.describe());
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&s.describe());
                out.push(b')');
            }
        }
        out
    }

    /// The user flags in Redis's order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        match self.sanitize {
            Some(false) => v.push("skip-sanitize-payload"),
            Some(true) => v.push("sanitize-payload"),
            None => {}
        }
        v
    }

    /// May this user run `entry` with `args` (`ACLCheckAllUserCommandPerm`)? On refusal the
    /// most relevant reason over all selectors and the argument index it names.
    pub fn check(&self, entry: &Entry, args: &[&[u8]]) -> Result<(), (Denied, usize)> {
        if self.unrestricted {
            return Ok(());
        }
        let mut keys = None;
        let mut worst = (Denied::Cmd, 0usize);
        for s in &self.selectors {
            match s.check(entry, args, &mut keys) {
                Ok(()) => return Ok(()),
                Err((d, at)) => {
                    if d > worst.0 || (d == worst.0 && at > worst.1) {
                        worst = (d, at);
                    }
                }
            }
        }
        Err(worst)
    }

    /// Can this user run `entry` with `args` and reach every key with the access `flags`
    /// describe (`ACLUserCheckCmdWithUnrestrictedKeyAccess`: SORT's BY and GET)?
    pub fn all_keys_for(&self, entry: &Entry, args: &[&[u8]], flags: u16) -> bool {
        let mut keys = None;
        self.selectors
            .iter()
            .any(|s| s.check(entry, args, &mut keys).is_ok() && s.all_keys_for(flags))
    }

    /// May this user publish or subscribe to `channel` (some selector allows it)?
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.channel_allowed(channel, is_pattern))
    }
}

/// `ACLMergeSelectorArguments`: `(` ... `)` spread over arguments become one argument. On an
/// unmatched `(`, the index of the argument that opened it.
pub fn merge_selectors(ops: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in ops.iter().enumerate() {
        if let Some((_, acc)) = open.as_mut() {
            acc.push(b' ');
            acc.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open selector").1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// Valid user name: no spaces or NULs.
pub fn valid_name(name: &[u8]) -> bool {
    !has_spaces(name)
}

/// Compares without an early exit on the first differing byte (the time taken says nothing
/// about how much of a guessed password was right).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_needs_equal_bytes() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
    }

    #[test]
    fn password_hash_is_redis_sha256_hex() {
        // ACL SETUSER u >passwd4 in Redis stores this digest (unit/acl).
        assert_eq!(
            hash_password(b"passwd4"),
            "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6"
        );
    }

    #[test]
    fn selectors_spread_over_arguments_merge() {
        let ops: Vec<&[u8]> = vec![b"on", b"(~a", b"+get", b")", b"(~b)"];
        assert_eq!(
            merge_selectors(&ops).unwrap(),
            vec![b"on".to_vec(), b"(~a +get )".to_vec(), b"(~b)".to_vec()]
        );
        assert_eq!(merge_selectors(&[b"(~a".as_slice()]), Err(0));
    }
}
