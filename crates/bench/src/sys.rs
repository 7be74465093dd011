//! Small Linux helpers: CPU pinning, /proc readers, free ports.

use std::net::TcpListener;

/// Pin the calling thread (and threads it creates afterwards) to `cpus`.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), String> {
    set_affinity(0, cpus)
}

/// Pin process/thread `pid` (0 = caller) to `cpus`.
pub fn set_affinity(pid: libc::pid_t, cpus: &[usize]) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it and
    // sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus {
            if c >= libc::CPU_SETSIZE as usize {
                return Err(format!("cpu {c} out of range"));
            }
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "sched_setaffinity({cpus:?}): {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// utime + stime of a process (all its threads) in nanoseconds, from /proc/PID/stat.
pub fn process_cpu_ns(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces; fields restart after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 → index 0; utime is field 14 → index 11; stime index 12.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) * 1_000_000_000 / clock_ticks_per_sec())
}

/// CPU time of all live threads of `pid` in nanoseconds, from
/// /proc/PID/task/*/schedstat (ns resolution); falls back to /proc/PID/stat (clock ticks).
pub fn process_cpu_ns_precise(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    let mut any = false;
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for ent in rd.flatten() {
            let p = ent.path().join("schedstat");
            if let Ok(s) = std::fs::read_to_string(p) {
                if let Some(ns) = s
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse::<u64>().ok())
                {
                    total += ns;
                    any = true;
                }
            }
        }
    }
    if any {
        Some(total)
    } else {
        process_cpu_ns(pid)
    }
}

/// A `VmXXX:` value from /proc/PID/status, in bytes.
pub fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    for line in s.lines() {
        if let Some(rest) = line.strip_prefix(field) {
            let rest = rest.trim_start_matches(':').trim();
            let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
            return Some(kb * 1024);
        }
    }
    None
}

/// Current resident set size in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    proc_status_kb(pid, "VmRSS")
}

/// Peak resident set size in bytes.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    proc_status_kb(pid, "VmHWM")
}

/// A loopback TCP port that was free a moment ago.
pub fn free_port() -> Option<u16> {
    // Not from the ephemeral range (Linux: 32768+): such a port can be the local port of a
    // client socket by the time the server binds it. Distinct per process and per call.
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((std::process::id() % 397) * 31 + n) % 12_000;
        if TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return Some(port as u16);
        }
    }
    None
}

/// Find an executable on PATH.
pub fn which(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if let Ok(md) = std::fs::metadata(&p) {
            if md.is_file() && md.permissions().mode() & 0o111 != 0 {
                return Some(p);
            }
        }
    }
    None
}

/// The system calls memtier_benchmark (libevent's bufferevents) makes per request and
/// damselfly-bench's tokio loop does not: with them, both generators spend about the same CPU
/// per request, so where the load thread is the bottleneck (few connections, short pipelines)
/// they offer a server the same traffic.
///
/// libevent enables `EV_WRITE` when requests are queued and disables it once the output buffer
/// drained (an `epoll_ctl(EPOLL_CTL_MOD)` each), and asks the socket how much to read
/// (`ioctl(FIONREAD)`) before every `readv`. The mirror here is a private epoll instance holding
/// the connection's socket: the same kernel work, no effect on the real event loop.
pub struct LibeventCalls {
    epfd: libc::c_int,
    fd: libc::c_int,
}

impl LibeventCalls {
    pub fn new(fd: libc::c_int) -> Result<Self, String> {
        // SAFETY: epoll_create1 takes no pointers.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(format!(
                "epoll_create1: {}",
                std::io::Error::last_os_error()
            ));
        }
        let me = LibeventCalls { epfd, fd };
        me.ctl(libc::EPOLL_CTL_ADD, libc::EPOLLIN)?;
        Ok(me)
    }

    fn ctl(&self, op: libc::c_int, events: libc::c_int) -> Result<(), String> {
        let mut ev = libc::epoll_event {
            events: events as u32,
            u64: 0,
        };
        // SAFETY: `ev` lives across the call; both descriptors are open while `self` is.
        if unsafe { libc::epoll_ctl(self.epfd, op, self.fd, &mut ev) } != 0 {
            return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Requests were queued: libevent adds `EV_WRITE` to the socket's interest set.
    pub fn write_wanted(&self) {
        let _ = self.ctl(libc::EPOLL_CTL_MOD, libc::EPOLLIN | libc::EPOLLOUT);
    }

    /// The output buffer drained: libevent removes `EV_WRITE` again.
    pub fn write_done(&self) {
        let _ = self.ctl(libc::EPOLL_CTL_MOD, libc::EPOLLIN);
    }

    /// Before a read: `evbuffer_read` sizes it with `FIONREAD`.
    pub fn before_read(&self) {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int through the pointer.
        unsafe { libc::ioctl(self.fd, libc::FIONREAD, &mut n) };
    }
}

impl Drop for LibeventCalls {
    fn drop(&mut self) {
        // SAFETY: `epfd` is ours and closed once.
        unsafe { libc::close(self.epfd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_readers_work_on_self() {
        let pid = std::process::id();
        assert!(process_cpu_ns(pid).is_some());
        assert!(process_cpu_ns_precise(pid).is_some());
        assert!(rss_bytes(pid).unwrap() > 0);
        assert!(peak_rss_bytes(pid).unwrap() > 0);
        assert!(free_port().is_some());
    }

    #[test]
    fn libevent_calls_work_on_a_socket() {
        use std::os::fd::AsRawFd;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let calls = LibeventCalls::new(c.as_raw_fd()).unwrap();
        calls.write_wanted();
        calls.write_done();
        calls.before_read();
        assert!(calls.ctl(libc::EPOLL_CTL_MOD, libc::EPOLLIN).is_ok());
    }
}
