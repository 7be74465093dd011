//! `--snapshot_cron`: Dragonfly's snapshot schedule in standard 5-field cron syntax
//! (`minute hour day-of-month month day-of-week`, local time, minute granularity).
//!
//! Each field is `*`, a value, a range `a-b`, a step `*/n` or `a-b/n`, or a comma list of those;
//! months and weekdays also take names (`JAN`, `MON`), and weekday 7 is Sunday like 0. As in
//! Vixie cron, when both day fields are restricted a day matching either one matches.

/// A parsed schedule: one bit per allowed value of each field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    mdays: u32,
    months: u16,
    wdays: u8,
    mday_any: bool,
    wday_any: bool,
}

/// A local time, as the fields cron matches.
#[derive(Clone, Copy, Debug)]
pub struct Tm {
    pub minute: u32,
    pub hour: u32,
    /// 1..=31
    pub mday: u32,
    /// 1..=12
    pub month: u32,
    /// 0..=6, Sunday = 0
    pub wday: u32,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

impl Cron {
    /// Parses a 5-field expression; the error says which field is wrong.
    pub fn parse(expr: &str) -> Result<Cron, String> {
        let f: Vec<&str> = expr.split_whitespace().collect();
        if f.len() != 5 {
            return Err(format!(
                "a cron schedule has 5 fields (minute hour day-of-month month day-of-week), got {}",
                f.len()
            ));
        }
        let minutes = field(f[0], 0, 59, &[], "minute")?;
        let hours = field(f[1], 0, 23, &[], "hour")? as u32;
        let mdays = field(f[2], 1, 31, &[], "day of month")? as u32;
        let months = field(f[3], 1, 12, &MONTHS, "month")? as u16;
        let mut wdays = field(f[4], 0, 7, &DAYS, "day of week")?;
        if wdays & (1 << 7) != 0 {
            wdays |= 1; // 7 is Sunday too
        }
        Ok(Cron {
            minutes,
            hours,
            mdays,
            months,
            wdays: (wdays & 0x7f) as u8,
            mday_any: f[2] == "*",
            wday_any: f[4] == "*",
        })
    }

    /// Does the minute `t` belong to the schedule?
    pub fn matches(&self, t: &Tm) -> bool {
        let mday = self.mdays & (1 << t.mday) != 0;
        let wday = self.wdays & (1 << t.wday) != 0;
        let day = match (self.mday_any, self.wday_any) {
            (false, false) => mday || wday,
            _ => mday && wday,
        };
        self.minutes & (1 << t.minute) != 0
            && self.hours & (1 << t.hour) != 0
            && self.months & (1 << t.month) != 0
            && day
    }
}

/// One field as a bit set of the values `lo..=hi` it allows.
fn field(s: &str, lo: u32, hi: u32, names: &[&str], what: &str) -> Result<u64, String> {
    let bad = || format!("invalid cron {what} field '{s}'");
    let value = |v: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
            // Month names start at 1, weekday names at 0.
            return Ok(i as u32 + lo);
        }
        match v.parse::<u32>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(n),
            _ => Err(bad()),
        }
    };
    let mut bits = 0u64;
    for part in s.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, st)) => match st.parse::<u32>() {
                Ok(n) if n > 0 => (r, n),
                _ => return Err(bad()),
            },
            None => (part, 1),
        };
        let (a, b) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            // `5/15` means from 5 to the end, every 15.
            (v, if step > 1 { hi } else { v })
        };
        if a > b {
            return Err(bad());
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

/// The local time of `unix_secs`.
pub fn local_tm(unix_secs: i64) -> Tm {
    let secs = unix_secs as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed struct we own.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    Tm {
        minute: tm.tm_min as u32,
        hour: tm.tm_hour as u32,
        mday: tm.tm_mday as u32,
        month: tm.tm_mon as u32 + 1,
        wday: tm.tm_wday as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tm(minute: u32, hour: u32, mday: u32, month: u32, wday: u32) -> Tm {
        Tm {
            minute,
            hour,
            mday,
            month,
            wday,
        }
    }

    #[test]
    fn dragonfly_examples() {
        let every = Cron::parse("* * * * *").unwrap();
        assert!(every.matches(&tm(7, 3, 9, 4, 2)));
        let five = Cron::parse("*/5 * * * *").unwrap();
        assert!(five.matches(&tm(0, 1, 1, 1, 1)) && five.matches(&tm(55, 1, 1, 1, 1)));
        assert!(!five.matches(&tm(3, 1, 1, 1, 1)));
        let h2 = Cron::parse("5 */2 * * *").unwrap();
        assert!(h2.matches(&tm(5, 4, 1, 1, 1)) && !h2.matches(&tm(5, 5, 1, 1, 1)));
        let midnight = Cron::parse("0 0 * * *").unwrap();
        assert!(midnight.matches(&tm(0, 0, 20, 6, 3)) && !midnight.matches(&tm(0, 1, 20, 6, 3)));
        let weekdays = Cron::parse("0 6 * * 1-5").unwrap();
        assert!(weekdays.matches(&tm(0, 6, 2, 2, 1)) && !weekdays.matches(&tm(0, 6, 2, 2, 0)));
    }

    #[test]
    fn names_lists_steps_and_day_rules() {
        let c = Cron::parse("0,30 9-17/4 * JAN-mar sun,7").unwrap();
        assert!(c.matches(&tm(30, 13, 5, 2, 0)));
        assert!(!c.matches(&tm(30, 11, 5, 2, 0)) && !c.matches(&tm(30, 13, 5, 4, 0)));
        // Both day fields restricted: either matches.
        let c = Cron::parse("0 0 1 * MON").unwrap();
        assert!(c.matches(&tm(0, 0, 1, 5, 4)) && c.matches(&tm(0, 0, 9, 5, 1)));
        assert!(!c.matches(&tm(0, 0, 9, 5, 2)));
        // Only one restricted: it alone decides.
        let c = Cron::parse("0 0 * * MON").unwrap();
        assert!(!c.matches(&tm(0, 0, 1, 5, 4)));
        assert!(Cron::parse("5/20 * * * *")
            .unwrap()
            .matches(&tm(45, 0, 1, 1, 1)));
    }

    #[test]
    fn errors_name_the_field() {
        for (e, what) in [
            ("* * * *", "5 fields"),
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day of month"),
            ("* * * 13 *", "month"),
            ("* * * * 8", "day of week"),
            ("*/0 * * * *", "minute"),
            ("5-1 * * * *", "minute"),
            ("x * * * *", "minute"),
        ] {
            let err = Cron::parse(e).unwrap_err();
            assert!(err.contains(what), "{e}: {err}");
        }
    }
}
