//! The server log: Redis's line format (`pid:M 25 Nov 2026 01:02:03.456 * message`), filtered by
//! `loglevel` and written to `logfile` (stdout when empty, as Redis). Log lines are rare (startup,
//! shutdown, contained faults), so each is formatted and written with one `write` call; a file
//! opened with O_APPEND keeps concurrent lines from different threads whole.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// Redis's levels, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
    /// `loglevel nothing`: no line passes.
    Nothing = 4,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            "nothing" => Level::Nothing,
            _ => return None,
        })
    }

    /// The mark Redis puts before the message.
    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning | Level::Nothing => '#',
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static FILE: OnceLock<std::fs::File> = OnceLock::new();

/// Applies `loglevel` (CONFIG SET changes it at runtime through `Config`'s mirror).
pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

/// Opens `logfile` for appending (once, at startup). Errors name the file.
pub fn open_file(path: &str) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("can't open the log file {path}: {e}"))
        })?;
    let _ = FILE.set(f);
    Ok(())
}

#[inline]
pub fn enabled(l: Level) -> bool {
    l != Level::Nothing && l as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Writes one log line at level `l`.
pub fn line(l: Level, msg: &str) {
    if !enabled(l) {
        return;
    }
    let text = format_line(std::process::id(), crate::clock::unix_ms(), l, msg);
    write_out(&text);
}

/// Writes `text` as it is, without the line prefix (the start-up logo), at level `l`.
pub fn raw(l: Level, text: &str) {
    if enabled(l) {
        write_out(text);
    }
}

/// To `logfile`, or to standard output when it is empty (as Redis: tools and Redis's test
/// runner read the log from the server's stdout).
fn write_out(text: &str) {
    match FILE.get() {
        Some(mut f) => {
            let _ = f.write_all(text.as_bytes());
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
    }
}

fn format_line(pid: u32, unix_ms: u64, l: Level, msg: &str) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = unix_ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let sod = secs % 86_400;
    format!(
        "{pid}:M {d:02} {} {y} {:02}:{:02}:{:02}.{:03} {} {msg}\n",
        MONTHS[(m - 1) as usize],
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        unix_ms % 1000,
        l.mark()
    )
}

/// Days since 1970-01-01 → (year, month 1-12, day 1-31) in the proleptic Gregorian calendar
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `log_notice!("ready on {}", port)` and friends.
#[macro_export]
macro_rules! log_at {
    ($level:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level) {
            $crate::log::line($level, &format!($($arg)*));
        }
    };
}

#[macro_export]
macro_rules! log_notice {
    ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Notice, $($arg)*) };
}

#[macro_export]
macro_rules! log_warning {
    ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Warning, $($arg)*) };
}

#[macro_export]
macro_rules! log_verbose {
    ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Verbose, $($arg)*) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_line_format() {
        // 2026-11-25 01:02:03.456 UTC
        let ms = 1_795_568_523_456;
        assert_eq!(
            format_line(42, ms, Level::Notice, "Ready to accept connections"),
            "42:M 25 Nov 2026 01:02:03.456 * Ready to accept connections\n"
        );
        assert_eq!(
            format_line(1, 0, Level::Warning, "x"),
            "1:M 01 Jan 1970 00:00:00.000 # x\n"
        );
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn levels_filter() {
        set_level(Level::Warning);
        assert!(!enabled(Level::Notice) && enabled(Level::Warning));
        set_level(Level::Nothing);
        assert!(!enabled(Level::Warning));
        set_level(Level::Notice);
        assert!(enabled(Level::Notice) && !enabled(Level::Verbose));
        assert_eq!(Level::parse("verbose"), Some(Level::Verbose));
        assert_eq!(Level::parse("loud"), None);
    }
}
