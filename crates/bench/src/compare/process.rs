//! Starting and stopping the servers under test (pinned to their CPUs, on free loopback ports)
//! and the blocking admin probes used on them (RESP command, memcache `version`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::discovery::{redis_major, Kind, ServerSpec};
use super::{a, Outcome};
use crate::proto::{self, ReplyKind};
use crate::sys;

/// A started server; killed on drop if still running.
pub(super) struct Running {
    child: Child,
    pub(super) port: u16,
    /// Memcache port: the only port of memcached, `--memcached_port` of the others.
    pub(super) mc_port: Option<u16>,
    log: PathBuf,
}

impl Running {
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL after 5 s.
    pub(super) fn stop(&mut self) {
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last 5 lines of a log file on one line.
fn log_tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// Starts `spec` on a free port (and a memcache port when `need_mc`), pinned to `cpus`, logging
/// into `workdir`, and waits until it answers.
pub(super) fn start_server(
    spec: &ServerSpec,
    need_mc: bool,
    cpus: &[usize],
    workdir: &Path,
    debug_cmd: bool,
) -> Outcome<Running> {
    let port = sys::free_port().ok_or("no free port")?;
    let mut mc_port = None;
    let threads = cpus.len().max(1).to_string();
    let mut args: Vec<String> = Vec::new();
    match spec.kind {
        Kind::Damselfly | Kind::Dragonfly => {
            args.extend(a(&[
                "--port",
                &port.to_string(),
                "--proactor_threads",
                &threads,
            ]));
            if spec.kind == Kind::Dragonfly {
                args.extend(a(&["--bind", "127.0.0.1", "--dbfilename", ""]));
            }
            // DEBUG POPULATE (the memory scenario): refused by default, as in Redis 7.
            if spec.kind == Kind::Damselfly {
                args.extend(a(&["--enable-debug-command", "yes"]));
            }
            if need_mc {
                let m = sys::free_port().ok_or("no free port")?;
                args.extend(a(&["--memcached_port", &m.to_string()]));
                mc_port = Some(m);
            }
        }
        Kind::Redis | Kind::Valkey | Kind::KeyDb => {
            args.extend(a(&[
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--dir",
                &workdir.to_string_lossy(),
            ]));
            if debug_cmd && redis_major(&spec.version).unwrap_or(7) >= 7 && spec.kind != Kind::KeyDb
            {
                args.extend(a(&["--enable-debug-command", "yes"]));
            }
            if spec.kind == Kind::KeyDb {
                args.extend(a(&["--server-threads", &threads]));
            }
        }
        Kind::Memcached => {
            args.extend(a(&[
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-l",
                "127.0.0.1",
                "-t",
                &threads,
                "-m",
                "8192",
                "-c",
                "4096",
            ]));
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                args.extend(a(&["-u", "root"]));
            }
            mc_port = Some(port);
        }
    }
    let log = workdir.join(format!("{}-{port}.log", spec.kind.short()));
    let logf = std::fs::File::create(&log).map_err(|e| format!("log file: {e}"))?;
    let logf2 = logf.try_clone().map_err(|e| format!("log file: {e}"))?;
    let mut cmd = Command::new(&spec.bin);
    cmd.args(&args)
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stdout(logf)
        .stderr(logf2);
    let cpus_owned = cpus.to_vec();
    // SAFETY: the closure only calls sched_setaffinity (async-signal-safe) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if !cpus_owned.is_empty() {
                let _ = sys::set_affinity(0, &cpus_owned);
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("start {}: {e}", spec.bin.display()))?;
    let mut r = Running {
        child,
        port,
        mc_port,
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut redis_ready_at: Option<Instant> = None;
    loop {
        if let Ok(Some(st)) = r.child.try_wait() {
            return Err(format!(
                "{} exited at startup ({st}): {}",
                spec.kind.display(),
                log_tail(&r.log)
            ));
        }
        let ok_redis = !spec.kind.speaks_redis()
            || matches!(resp_command(port, &["PING"], 2), Ok((ReplyKind::Value, _)));
        let ok_mc = match r.mc_port {
            Some(m) => mc_ping(m).is_ok(),
            None => true,
        };
        if ok_redis && ok_mc {
            return Ok(r);
        }
        if ok_redis && spec.kind.speaks_redis() {
            let t = *redis_ready_at.get_or_insert_with(Instant::now);
            if t.elapsed() > Duration::from_secs(3) {
                r.stop();
                return Err(format!(
                    "{} serves RESP but nothing answers memcache on --memcached_port",
                    spec.kind.display()
                ));
            }
        }
        if Instant::now() > deadline {
            r.stop();
            return Err(format!(
                "{} did not answer within 15 s: {}",
                spec.kind.display(),
                log_tail(&r.log)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Blocking one-shot RESP command (admin path: PING, DEBUG POPULATE, FLUSHALL).
pub(super) fn resp_command(
    port: u16,
    args: &[&str],
    timeout_s: u64,
) -> Outcome<(ReplyKind, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    let to = Some(Duration::from_secs(timeout_s));
    s.set_read_timeout(to).map_err(|e| e.to_string())?;
    s.set_write_timeout(to).map_err(|e| e.to_string())?;
    let refs: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
    let mut out = Vec::new();
    proto::encode_command(&mut out, &refs);
    s.write_all(&out).map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        let n = s.read(&mut tmp).map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("connection closed".into());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some((used, kind)) = proto::parse_resp(&buf).map_err(|e| e.to_string())? {
            let text = String::from_utf8_lossy(&buf[..used]).trim().to_string();
            return Ok((kind, text));
        }
    }
}

fn mc_ping(port: u16) -> Outcome<()> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"version\r\n").map_err(|e| e.to_string())?;
    let mut tmp = [0u8; 256];
    let n = s.read(&mut tmp).map_err(|e| e.to_string())?;
    if tmp[..n].starts_with(b"VERSION") {
        Ok(())
    } else {
        Err("unexpected reply to version".into())
    }
}

/// The memcache `stats` reply as (name, value) pairs (`STAT <name> <value>` lines up to `END`).
pub(super) fn mc_stats(port: u16) -> Outcome<Vec<(String, String)>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"stats\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(stats) = parse_mc_stats(&buf)? {
            return Ok(stats);
        }
        let n = s.read(&mut tmp).map_err(|e| format!("read stats: {e}"))?;
        if n == 0 {
            return Err("connection closed during stats".into());
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// A complete `stats` reply (`None` until its `END` line arrived).
fn parse_mc_stats(buf: &[u8]) -> Outcome<Option<Vec<(String, String)>>> {
    let text = String::from_utf8_lossy(buf);
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    while let Some((line, tail)) = rest.split_once("\r\n") {
        rest = tail;
        if line == "END" {
            return Ok(Some(out));
        }
        let mut it = line.splitn(3, ' ');
        match (it.next(), it.next(), it.next()) {
            (Some("STAT"), Some(k), v) => out.push((k.to_string(), v.unwrap_or("").to_string())),
            _ => return Err(format!("unexpected line in stats reply: {line:?}")),
        }
    }
    Ok(None)
}

/// The integer stat `name` of a `stats` reply.
pub(super) fn stat_u64(stats: &[(String, String)], name: &str) -> Option<u64> {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_reply() {
        let r = b"STAT pid 7\r\nSTAT curr_items 1000000\r\nSTAT version 1.6.18\r\nEND\r\n";
        assert_eq!(parse_mc_stats(&r[..20]).unwrap(), None);
        let s = parse_mc_stats(r).unwrap().unwrap();
        assert_eq!(stat_u64(&s, "curr_items"), Some(1_000_000));
        assert_eq!(stat_u64(&s, "version"), None);
        assert_eq!(stat_u64(&s, "bytes"), None);
        assert!(parse_mc_stats(b"ERROR\r\n").is_err());
    }
}
