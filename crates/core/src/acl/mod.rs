//! ACL with Redis 7.0's semantics (docs/design/security.md): users and their selectors
//! (`selector.rs`, `user.rs`), the user table, the ACL log, and ACL files.
//!
//! The table is process-wide and changes rarely (ACL SETUSER/DELUSER/LOAD, CONFIG SET
//! requirepass). It sits behind a mutex that no command takes: a connection holds an `Arc` of
//! its user and the table version it was taken at, and per command compares one atomic with
//! that version (re-reading its user only after a change). Permission checks run on the
//! connection's thread, before anything is sent to a shard.

pub mod commands;
pub mod selector;
pub mod user;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

pub use selector::Denied;
pub use user::User;

/// The users, by name (byte order, as Redis's radix tree lists them).
pub type Users = BTreeMap<String, Arc<User>>;

fn table() -> MutexGuard<'static, Users> {
    static TABLE: OnceLock<Mutex<Users>> = OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut m = Users::new();
        m.insert("default".into(), Arc::new(User::default_user()));
        Mutex::new(m)
    });
    t.lock().unwrap_or_else(|e| e.into_inner())
}

static VERSION: AtomicU64 = AtomicU64::new(1);
/// The default user needs AUTH (it has passwords, or is off): Redis's `authRequired`.
static AUTH_REQUIRED: AtomicBool = AtomicBool::new(false);
/// `acl-pubsub-default allchannels`.
static PUBSUB_ALL: AtomicBool = AtomicBool::new(false);

/// The table's version: it changes with every change of any user.
#[inline]
pub fn version() -> u64 {
    VERSION.load(Ordering::Acquire)
}

/// Must a new connection authenticate before running commands?
#[inline]
pub fn auth_required() -> bool {
    AUTH_REQUIRED.load(Ordering::Relaxed)
}

pub fn pubsub_all() -> bool {
    PUBSUB_ALL.load(Ordering::Relaxed)
}

/// `acl-pubsub-default`: the channels new users and selectors start with.
pub fn set_pubsub_default(all: bool) {
    PUBSUB_ALL.store(all, Ordering::Relaxed);
}

/// Runs `f` on the user table; a change is published to the connections (version bump).
pub fn modify<R>(f: impl FnOnce(&mut Users) -> R) -> R {
    let mut t = table();
    let r = f(&mut t);
    let d = t.get("default").cloned();
    drop(t);
    if let Some(d) = d {
        AUTH_REQUIRED.store(!d.nopass || !d.enabled, Ordering::Relaxed);
    }
    VERSION.fetch_add(1, Ordering::AcqRel);
    r
}

/// Reads the user table.
pub fn read<R>(f: impl FnOnce(&Users) -> R) -> R {
    f(&table())
}

pub fn get(name: &[u8]) -> Option<Arc<User>> {
    let name = std::str::from_utf8(name).ok()?;
    table().get(name).cloned()
}

pub fn default_user() -> Arc<User> {
    get(b"default").expect("the default user always exists")
}

/// `requirepass`: the default user's only password (empty: nopass), as Redis's
/// `ACLUpdateDefaultUserPassword`.
pub fn set_default_password(pass: &str) {
    modify(|t| {
        let mut u = (**t.get("default").expect("default user")).clone();
        let all = pubsub_all();
        let _ = u.apply(b"resetpass", all);
        if pass.is_empty() {
            let _ = u.apply(b"nopass", all);
        } else {
            let mut op = b">".to_vec();
            op.extend_from_slice(pass.as_bytes());
            let _ = u.apply(&op, all);
        }
        t.insert("default".into(), Arc::new(u));
    });
}

/// The user `name` when `pass` logs in as it (on, and a password matches or nopass).
pub fn authenticate(name: &[u8], pass: &[u8]) -> Option<Arc<User>> {
    let u = get(name)?;
    (u.enabled && u.password_ok(pass)).then_some(u)
}

/// A connection's user: the `Arc` it runs as, and the table version it was read at.
pub struct ConnUser {
    pub user: Arc<User>,
    pub version: u64,
}

impl ConnUser {
    pub fn default_user() -> ConnUser {
        ConnUser {
            version: version(),
            user: default_user(),
        }
    }

    /// Switches to `user` (AUTH, HELLO AUTH, RESET).
    pub fn set(&mut self, user: Arc<User>) {
        self.user = user;
        self.version = version();
    }

    /// Re-reads the user after a table change. False: the user was deleted (the connection
    /// must close, as Redis frees the clients of a deleted user).
    pub fn refresh(&mut self) -> bool {
        let v = version();
        if v == self.version {
            return true;
        }
        self.version = v;
        match get(self.user.name.as_bytes()) {
            Some(u) => {
                self.user = u;
                true
            }
            None => false,
        }
    }

    /// Nothing to check for this command: the table did not change and the user may do
    /// anything.
    #[inline]
    pub fn fast_ok(&self) -> bool {
        self.user.unrestricted && self.version == version()
    }
}

// ---------------------------------------------------------------------------------------------
// The ACL log
// ---------------------------------------------------------------------------------------------

/// Where a refusal happened (Redis's `ACL_LOG_CTX_*`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// What was refused: a command, a key, a channel, or a login.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reason {
    Cmd,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Cmd => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

impl From<Denied> for Reason {
    fn from(d: Denied) -> Reason {
        match d {
            Denied::Cmd => Reason::Cmd,
            Denied::Key => Reason::Key,
            Denied::Channel => Reason::Channel,
        }
    }
}

pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix ms of the last occurrence.
    pub ctime: u64,
    pub client_info: String,
}

fn log() -> MutexGuard<'static, VecDeque<LogEntry>> {
    static LOG: Mutex<VecDeque<LogEntry>> = Mutex::new(VecDeque::new());
    LOG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Similar events within a minute bump one entry's count.
const GROUPING_MS: u64 = 60_000;

/// Records a refusal (Redis's `addACLLogEntry`): a similar recent entry among the newest ten is
/// bumped and moved to the front, otherwise a new entry goes in front and the log is trimmed
/// to `max_len`.
pub fn log_event(e: LogEntry, max_len: usize) {
    let mut l = log();
    let hit = l.iter().take(10).position(|c| {
        c.reason == e.reason
            && c.context == e.context
            && c.ctime.abs_diff(e.ctime) <= GROUPING_MS
            && c.object == e.object
            && c.username == e.username
    });
    if let Some(i) = hit {
        let mut c = l.remove(i).expect("entry");
        c.count += 1;
        c.ctime = e.ctime;
        c.client_info = e.client_info;
        l.push_front(c);
    } else {
        l.push_front(e);
        l.truncate(max_len);
    }
}

pub fn log_reset() {
    log().clear();
}

/// Runs `f` over the newest `count` entries.
pub fn log_read<R>(count: usize, f: impl FnOnce(&mut dyn Iterator<Item = &LogEntry>) -> R) -> R {
    let l = log();
    let mut it = l.iter().take(count);
    f(&mut it)
}

pub fn log_len() -> usize {
    log().len()
}

impl LogEntry {
    /// ACL LOG's fields for this entry (age in seconds at `now_ms`).
    pub fn fields(&self, now_ms: u64) -> [(&'static str, LogValue<'_>); 7] {
        [
            ("count", LogValue::Int(self.count as i64)),
            ("reason", LogValue::Str(self.reason.name().as_bytes())),
            ("context", LogValue::Str(self.context.name().as_bytes())),
            ("object", LogValue::Str(&self.object)),
            ("username", LogValue::Str(&self.username)),
            (
                "age-seconds",
                LogValue::Double(now_ms.saturating_sub(self.ctime) as f64 / 1000.0),
            ),
            ("client-info", LogValue::Str(self.client_info.as_bytes())),
        ]
    }
}

pub enum LogValue<'a> {
    Int(i64),
    Str(&'a [u8]),
    Double(f64),
}

// ---------------------------------------------------------------------------------------------
// ACL files and `user` directives
// ---------------------------------------------------------------------------------------------

/// Applies `user` lines (each: name, then rules) to a table (Redis's `ACLLoadFromFile` checks
/// and messages; `origin` names the file for errors). Returns the new table, or every error
/// found (nothing is applied then).
pub fn load_lines(text: &str, origin: &str) -> Result<Users, String> {
    let all = pubsub_all();
    let mut users = Users::new();
    let mut errors = String::new();
    for (i, line) in text.split('\n').enumerate() {
        let n = i + 1;
        let line = line.trim_matches(|c| c == ' ' || c == '\t' || c == '\r' || c == '\n');
        if line.is_empty() {
            continue;
        }
        let argv: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        if argv.is_empty() {
            continue;
        }
        if argv[0] != "user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{origin}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if !user::valid_name(name.as_bytes()) {
            errors.push_str(&format!(
                "'{origin}:{n}: username '{name}' contains invalid characters. "
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {n}. "
            ));
            continue;
        }
        let ops: Vec<&[u8]> = argv[2..].iter().map(|w| w.as_bytes()).collect();
        let merged = match user::merge_selectors(&ops) {
            Ok(m) => m,
            Err(_) => {
                errors.push_str(&format!(
                    "{origin}:{n}: Unmatched parenthesis in selector definition."
                ));
                continue;
            }
        };
        let mut u = User::new(name, all);
        let mut syntax = false;
        for op in merged {
            if let Err(e) = u.apply(&op, all) {
                if e == selector::RuleError::UnknownCommand {
                    errors.push_str(&format!(
                        "{origin}:{n}: Error in applying operation '{}': {}. ",
                        String::from_utf8_lossy(&op),
                        e.text()
                    ));
                } else if !syntax {
                    errors.push_str(&format!("{origin}:{n}: {}. ", e.text()));
                    syntax = true;
                }
            }
        }
        users.insert(name.to_string(), Arc::new(u));
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    if !users.contains_key("default") {
        users.insert("default".into(), Arc::new(User::default_user()));
    }
    Ok(users)
}

/// Replaces the whole table (ACL LOAD, startup); returns the names of the users that were
/// replaced or removed, whose connections must close (all but `default`).
pub fn replace_all(users: Users) -> Vec<String> {
    modify(|t| {
        let gone: Vec<String> = t.keys().filter(|n| *n != "default").cloned().collect();
        *t = users;
        gone
    })
}

/// The table in ACL-file form: one `user <name> <rules>` line per user.
pub fn to_lines() -> Vec<u8> {
    let mut out = Vec::new();
    read(|t| {
        for (name, u) in t {
            out.extend_from_slice(b"user ");
            out.extend_from_slice(name.as_bytes());
            out.push(b' ');
            out.extend_from_slice(&u.describe());
            out.push(b'\n');
        }
    });
    out
}

/// Writes the table to `path` atomically (temp file, then rename), as ACL SAVE.
pub fn save(path: &std::path::Path) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, to_lines())?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Validates `user` directives of the configuration (Redis's `ACLAppendUserForLoading`):
/// unknown commands are tolerated there, other errors and duplicates are not.
pub fn check_config_user(args: &[String], seen: &[Vec<String>]) -> Result<(), String> {
    let Some(name) = args.first() else {
        return Err("wrong number of arguments".into());
    };
    if seen.iter().any(|u| u.first() == Some(name)) {
        return Err("Duplicate user found. A user can only be defined once in config files".into());
    }
    let ops: Vec<&[u8]> = args[1..].iter().map(|w| w.as_bytes()).collect();
    let merged = user::merge_selectors(&ops)
        .map_err(|_| "Unmatched parenthesis in acl selector".to_string())?;
    let mut u = User::new(name, pubsub_all());
    for op in merged {
        match u.apply(&op, pubsub_all()) {
            Err(e) if e != selector::RuleError::UnknownCommand => {
                return Err(format!(
                    "Error in user declaration '{}': {}",
                    String::from_utf8_lossy(&op),
                    e.text()
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Startup (Redis's `ACLLoadUsersAtStartup`): `user` directives, or the ACL file, not both.
pub fn load_at_startup(users: &[Vec<String>], aclfile: &str) -> Result<(), String> {
    if !aclfile.is_empty() && !users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let all = pubsub_all();
    for args in users {
        let name = &args[0];
        let ops: Vec<&[u8]> = args[1..].iter().map(|w| w.as_bytes()).collect();
        let merged =
            user::merge_selectors(&ops).map_err(|_| "Unmatched parenthesis".to_string())?;
        let mut u = if name == "default" {
            let mut d = (*default_user()).clone();
            let _ = d.apply(b"reset", all);
            d
        } else {
            User::new(name, all)
        };
        for op in merged {
            u.apply(&op, all).map_err(|e| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{name}': {}",
                    String::from_utf8_lossy(&op),
                    e.text()
                )
            })?;
        }
        modify(|t| t.insert(name.clone(), Arc::new(u)));
    }
    if !aclfile.is_empty() {
        let text = std::fs::read_to_string(aclfile)
            .map_err(|e| format!("Error loading ACLs, opening file '{aclfile}': {e}"))?;
        let users = load_lines(&text, aclfile)?;
        replace_all(users);
    }
    Ok(())
}

/// ACL's configuration hooks (config::hooks): `requirepass` is the default user's password,
/// `user` directives are checked as ACL SETUSER rules and rewritten from the live users.
pub const CONFIG_HOOKS: &[crate::config::hooks::Hook] = {
    use crate::config::hooks::Hook;
    &[
        Hook {
            apply: Some(set_default_password),
            ..Hook::new("requirepass")
        },
        Hook {
            apply: Some(|v| set_pubsub_default(v == "allchannels")),
            ..Hook::new("acl-pubsub-default")
        },
        Hook {
            check_lines: Some(|lines| match lines.split_last() {
                Some((new, seen)) => check_config_user(new, seen),
                None => Ok(()),
            }),
            // Redis's rewriteConfigUserOption: the users as ACL knows them now.
            lines: Some(|| {
                String::from_utf8_lossy(&to_lines())
                    .lines()
                    .map(str::to_string)
                    .collect()
            }),
            ..Hook::new("user")
        },
    ]
};
