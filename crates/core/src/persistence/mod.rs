//! Persistence: RDB snapshots (SAVE, BGSAVE, load on start-up, save on shutdown) and DUMP /
//! RESTORE payloads, in Redis's RDB format so that files and payloads move between damselfly
//! and redis-server both ways (design: docs/design/snapshots.md).
//!
//! - `damselfly_types::rdb` — the format: byte-level codec (`wire`, packed blobs) and our values
//!   as objects (`object`).
//! - `engine::snapshot` (in the core: replication streams the same snapshot) — writing: shards
//!   serialize their own data into chunks, one writer thread writes the file and commits it
//!   atomically; `engine::persist::State` is the bookkeeping INFO persistence reports.
//!   `engine::rdb_load` reads a file back into per-shard batches, all-or-nothing.
//! - `cron`     — `snapshot_cron` schedules.
//!
//! The commands (SAVE, BGSAVE, DEBUG RELOAD) and the save driver live in `commands.rs`; DUMP and
//! RESTORE are the `commands::dump` family.

pub mod commands;
pub mod cron;

use std::path::PathBuf;

use crate::config::Config;

/// Where snapshots go: `dbfilename` in the working directory (the process moved into `dir` at
/// start-up, as Redis does). As in Dragonfly, a name without an extension gets `.rdb`, and
/// `{timestamp}` is replaced by the save's local time (`2026-11-25T10:48:02`), so every save
/// keeps its own file; loading then picks the newest such file.
pub fn snapshot_path(cfg: &Config) -> PathBuf {
    let name = file_name(cfg);
    PathBuf::from(name.replace("{timestamp}", &timestamp()))
}

/// The configured file name with its extension.
fn file_name(cfg: &Config) -> String {
    let mut name = cfg.dbfilename();
    if name.is_empty() {
        name = "dump".into();
    }
    let base = name.rsplit('/').next().unwrap_or(&name);
    if !base.contains('.') {
        name.push_str(".rdb");
    }
    name
}

/// The file to load at start-up: `dbfilename`, or with `{timestamp}` the newest file its
/// pattern matches (names sort by time).
pub fn load_path(cfg: &Config) -> PathBuf {
    let name = file_name(cfg);
    let Some((pre, post)) = name.split_once("{timestamp}") else {
        return PathBuf::from(name);
    };
    let (dir, pre) = match pre.rsplit_once('/') {
        Some((d, p)) => (
            PathBuf::from(if d.is_empty() { "/" } else { d }),
            p.to_string(),
        ),
        None => (PathBuf::from("."), pre.to_string()),
    };
    let newest = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&pre) && n.ends_with(post) && n.len() >= pre.len() + post.len())
        .max();
    match newest {
        Some(n) => dir.join(n),
        None => PathBuf::from(name.replace("{timestamp}", "")),
    }
}

/// Local time as `YYYY-MM-DDTHH:MM:SS`.
fn timestamp() -> String {
    let secs = (crate::clock::unix_ms() / 1000) as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed struct we own.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Persistence's configuration hooks (config::hooks).
pub const CONFIG_HOOKS: &[crate::config::hooks::Hook] = &[crate::config::hooks::Hook {
    check: Some(|v| {
        if !v.is_empty() {
            cron::Cron::parse(v)?;
        }
        Ok(v.to_string())
    }),
    ..crate::config::hooks::Hook::new("snapshot_cron")
}];
