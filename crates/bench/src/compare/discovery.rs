//! The servers `compare` knows and finding their binaries (and versions).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::CompareOpts;
use crate::sys;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
    Damselfly,
    Redis,
    Valkey,
    KeyDb,
    Dragonfly,
    Memcached,
}

impl Kind {
    pub(super) fn all() -> [Kind; 6] {
        [
            Kind::Damselfly,
            Kind::Redis,
            Kind::Valkey,
            Kind::KeyDb,
            Kind::Dragonfly,
            Kind::Memcached,
        ]
    }
    /// Name in `--servers` and in log file names.
    pub(super) fn short(self) -> &'static str {
        match self {
            Kind::Damselfly => "damselfly",
            Kind::Redis => "redis",
            Kind::Valkey => "valkey",
            Kind::KeyDb => "keydb",
            Kind::Dragonfly => "dragonfly",
            Kind::Memcached => "memcached",
        }
    }
    /// Name in reports: the executable's.
    pub(super) fn display(self) -> &'static str {
        self.exe()
    }
    pub(super) fn exe(self) -> &'static str {
        match self {
            Kind::Damselfly => "damselfly",
            Kind::Redis => "redis-server",
            Kind::Valkey => "valkey-server",
            Kind::KeyDb => "keydb-server",
            Kind::Dragonfly => "dragonfly",
            Kind::Memcached => "memcached",
        }
    }
    pub(super) fn speaks_redis(self) -> bool {
        self != Kind::Memcached
    }
    /// Damselfly and Dragonfly serve memcache on `--memcached_port`.
    pub(super) fn speaks_memcache(self) -> bool {
        matches!(self, Kind::Memcached | Kind::Damselfly | Kind::Dragonfly)
    }
    /// The flag that prints the version (none asked of damselfly).
    fn version_flag(self) -> Option<&'static str> {
        match self {
            Kind::Damselfly => None,
            Kind::Memcached => Some("-V"),
            _ => Some("--version"),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct ServerSpec {
    pub(super) kind: Kind,
    pub(super) bin: PathBuf,
    pub(super) version: String,
}

/// First line of the command's stdout (stderr when stdout is blank), or None when it cannot be
/// started or runs past `secs`.
fn run_with_timeout(mut cmd: Command, secs: u64) -> Option<String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut s = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut s);
    }
    if s.trim().is_empty() {
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
    }
    Some(s.lines().next().unwrap_or("").trim().to_string())
}

/// Damselfly: --damselfly, then $DAMSELFLY_BIN, then ./target/release/damselfly, then PATH.
fn damselfly_bin(c: &CompareOpts) -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = [
        c.damselfly.clone(),
        std::env::var_os("DAMSELFLY_BIN").map(PathBuf::from),
        Some(PathBuf::from("target/release/damselfly")),
    ]
    .into_iter()
    .flatten()
    .collect();
    // Absolute path: servers are spawned from other working directories.
    match candidates.iter().find(|p| p.is_file()) {
        Some(p) => Some(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())),
        None => sys::which(Kind::Damselfly.exe()),
    }
}

/// The selected servers that are installed; a note (also printed) for each one skipped.
pub(super) fn discover(c: &CompareOpts, notes: &mut Vec<String>) -> Vec<ServerSpec> {
    let wanted = |k: Kind| c.servers.is_empty() || c.servers.iter().any(|s| s == k.short());
    let mut out = Vec::new();
    for k in Kind::all() {
        if !wanted(k) {
            continue;
        }
        let bin = if k == Kind::Damselfly {
            damselfly_bin(c)
        } else {
            sys::which(k.exe())
        };
        let Some(bin) = bin else {
            let msg = if k == Kind::Damselfly {
                "skip damselfly: binary not found (give --damselfly PATH or DAMSELFLY_BIN, or build target/release/damselfly)".to_string()
            } else {
                format!("skip {}: `{}` not found on PATH", k.display(), k.exe())
            };
            eprintln!("{msg}");
            notes.push(msg);
            continue;
        };
        let version = match k.version_flag() {
            None => String::new(),
            Some(flag) => {
                let mut cmd = Command::new(&bin);
                cmd.arg(flag);
                run_with_timeout(cmd, 5).unwrap_or_default()
            }
        };
        eprintln!("found {} at {} {}", k.display(), bin.display(), version);
        out.push(ServerSpec {
            kind: k,
            bin,
            version,
        });
    }
    out
}

/// Major version from `redis-server --version` ("Redis server v=7.0.15 ...").
pub(super) fn redis_major(version: &str) -> Option<u32> {
    let i = version.find("v=")?;
    version[i + 2..].split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_parse() {
        assert_eq!(
            redis_major("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc"),
            Some(7)
        );
    }
}
