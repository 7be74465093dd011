//! MONITOR: every executed command, on any thread, as one line to every monitoring connection
//! (Redis's `replicationFeedMonitors`). Monitors are kept like Pub/Sub subscribers: a replica
//! of the list on every thread, updated by broadcast, read without locks; with no monitor, a
//! command costs one relaxed load. The line is formatted once and shared.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{Delivery, Sub};
use crate::engine::Worker;

/// Connections in MONITOR mode, server-wide.
static COUNT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MONITORS: RefCell<Vec<Sub>> = const { RefCell::new(Vec::new()) };
}

/// Is anyone monitoring (so that the caller should format a line)?
#[inline]
pub fn active() -> bool {
    COUNT.load(Ordering::Relaxed) != 0
}

/// Makes connection `conn` (on this thread) a monitor; returns once every thread knows.
pub async fn add(worker: &Rc<Worker>, conn: u64) {
    let sub = Sub {
        thread: worker.id,
        conn,
    };
    COUNT.fetch_add(1, Ordering::Relaxed);
    worker
        .broadcast(move |_| MONITORS.with(|m| m.borrow_mut().push(sub)))
        .await;
}

/// Connection `conn` (on this thread) stops monitoring (RESET, disconnect).
pub fn remove(worker: &Rc<Worker>, conn: u64) {
    let sub = Sub {
        thread: worker.id,
        conn,
    };
    COUNT.fetch_sub(1, Ordering::Relaxed);
    for t in 0..worker.threads() {
        worker.post(t, move |_| {
            MONITORS.with(|m| m.borrow_mut().retain(|s| *s != sub));
        });
    }
}

/// Feeds one executed command: `args` in db `db` from client `addr`, at unix time `now_us`.
/// Passwords are shown as `(redacted)` as in Redis (AUTH, HELLO ... AUTH).
pub fn feed(worker: &Rc<Worker>, db: usize, addr: &str, args: &[&[u8]], now_us: u64) {
    let line = format_line(db, addr, args, now_us);
    let line: Arc<[u8]> = Arc::from(line.into_bytes());
    let mut per_thread: Vec<Vec<(u64, Delivery)>> = Vec::new();
    MONITORS.with(|m| {
        for s in m.borrow().iter() {
            if per_thread.len() <= s.thread {
                per_thread.resize_with(s.thread + 1, Vec::new);
            }
            per_thread[s.thread].push((s.conn, Delivery::Monitor(line.clone())));
        }
    });
    for (thread, deliveries) in per_thread.into_iter().enumerate() {
        if !deliveries.is_empty() {
            worker.post(thread, move |_| {
                for (conn, d) in deliveries {
                    crate::client::with_local(conn, |h| {
                        if h.monitor.get() && !h.killed.get() {
                            h.push(d);
                        }
                    });
                }
            });
        }
    }
}

/// `1339518083.107412 [0 127.0.0.1:60866] "keys" "*"`.
fn format_line(db: usize, addr: &str, args: &[&[u8]], now_us: u64) -> String {
    let mut s = format!(
        "{}.{:06} [{db} {addr}]",
        now_us / 1_000_000,
        now_us % 1_000_000
    );
    let hidden = redacted(args);
    for (i, a) in args.iter().enumerate() {
        s.push(' ');
        if hidden.iter().any(|r| i >= r.0 && i < r.1) {
            s.push_str("\"(redacted)\"");
        } else {
            s.push_str(&crate::client::limits::repr(a, usize::MAX));
        }
    }
    s
}

/// The argument ranges (start, end) Redis hides: AUTH's arguments, HELLO's AUTH user and
/// password, MIGRATE's AUTH password and AUTH2 user and password.
fn redacted(args: &[&[u8]]) -> smallvec::SmallVec<[(usize, usize); 2]> {
    let mut out = smallvec::SmallVec::new();
    let Some(name) = args.first() else {
        return out;
    };
    if name.eq_ignore_ascii_case(b"auth") {
        out.push((1, args.len()));
    } else if name.eq_ignore_ascii_case(b"hello") {
        if let Some(at) = args.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
            out.push((at + 1, (at + 3).min(args.len())));
        }
    } else if name.eq_ignore_ascii_case(b"migrate") {
        // As migrateCommand redacts while it parses its options (up to KEYS).
        let mut j = 6;
        while j < args.len() {
            let a = args[j];
            if a.eq_ignore_ascii_case(b"auth") {
                out.push((j + 1, (j + 2).min(args.len())));
                j += 1;
            } else if a.eq_ignore_ascii_case(b"auth2") {
                out.push((j + 1, (j + 3).min(args.len())));
                j += 2;
            } else if a.eq_ignore_ascii_case(b"keys") {
                break;
            }
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::format_line;

    #[test]
    fn lines_quote_and_redact_as_redis() {
        assert_eq!(
            format_line(
                0,
                "127.0.0.1:5000",
                &[b"set", b"foo", b"a\"b\n"],
                1_339_518_083_107_412
            ),
            r#"1339518083.107412 [0 127.0.0.1:5000] "set" "foo" "a\"b\n""#
        );
        assert_eq!(
            format_line(9, "x", &[b"auth", b"u", b"p"], 5),
            r#"0.000005 [9 x] "auth" "(redacted)" "(redacted)""#
        );
        assert_eq!(
            format_line(
                0,
                "x",
                &[b"migrate", b"h", b"1", b"k", b"9", b"5000", b"AUTH2", b"u", b"p", b"copy"],
                5
            ),
            r#"0.000005 [0 x] "migrate" "h" "1" "k" "9" "5000" "AUTH2" "(redacted)" "(redacted)" "copy""#
        );
        assert_eq!(
            format_line(
                0,
                "x",
                &[b"hello", b"2", b"AUTH", b"u", b"p", b"SETNAME", b"n"],
                0
            ),
            r#"0.000000 [0 x] "hello" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n""#
        );
    }
}
