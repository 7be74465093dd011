//! Helpers shared by command families: argument parsing with Redis's error texts and owned
//! argument copies for cross-thread execution. (Reaching shards: `ConnCtx::hops`.)

use damselfly_protocol::Reply;

/// Keyspace notifications, for command code: `ev::emit(ev::LIST, "lpush", c.db, key)`.
pub use crate::engine::notify as ev;

pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A key holds another type than the command works on: the typed error of the families'
/// lookups (`Result<Option<&ZSet>, WrongType>`), answered with [`ERR_WRONGTYPE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongType;

impl WrongType {
    /// Redis's reply.
    pub const fn text(self) -> &'static str {
        ERR_WRONGTYPE
    }
}
pub const ERR_NO_KEY: &str = "ERR no such key";
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_DB_INDEX: &str = "ERR DB index is out of range";

/// An argument as Redis's `%.<max>s` prints it into an error message: the raw bytes up to the
/// first NUL, at most `max` of them (no UTF-8 repair: replies echo the client's bytes).
pub fn cstr(a: &[u8], max: usize) -> &[u8] {
    let a = &a[..a.len().min(max)];
    match a.iter().position(|&c| c == 0) {
        Some(nul) => &a[..nul],
        None => a,
    }
}

/// An error reply assembled from byte pieces (for messages quoting client arguments, which
/// need not be UTF-8; see `cstr`).
pub fn error_parts(reply: &mut Reply, parts: &[&[u8]]) {
    reply.error_bytes(&parts.concat());
}

#[inline]
pub fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

/// Redis `string2ll` semantics.
#[inline]
pub fn parse_i64(a: &[u8]) -> Option<i64> {
    damselfly_types::compact::parse_strict_i64(a)
}

/// Parses an integer argument or writes Redis's error.
pub fn int_arg(reply: &mut Reply, a: &[u8]) -> Option<i64> {
    let v = parse_i64(a);
    if v.is_none() {
        reply.error(ERR_NOT_INT);
    }
    v
}

/// Arguments copied into one allocation so they can travel to another thread.
pub struct OwnedArgs {
    data: Vec<u8>,
    /// End offset of each argument in `data` (full width: arguments and their total are bounded
    /// only by proto-max-bulk-len and the query buffer limit, both configurable past 4 GiB).
    ends: Vec<usize>,
}

impl OwnedArgs {
    pub fn new(args: &[&[u8]]) -> Self {
        let total: usize = args.iter().map(|a| a.len()).sum();
        let mut data = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(args.len());
        for a in args {
            data.extend_from_slice(a);
            ends.push(data.len());
        }
        OwnedArgs { data, ends }
    }

    /// Heap bytes held (for client memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.ends.capacity() * std::mem::size_of::<usize>()
    }

    /// Sized in a first pass over `args`: growing the buffers showed up as ~4% of an MSET.
    pub fn collect<'a>(args: impl Iterator<Item = &'a [u8]> + Clone) -> Self {
        let (n, total) = args.clone().fold((0, 0), |(n, t), a| (n + 1, t + a.len()));
        let mut data = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(n);
        for a in args {
            data.extend_from_slice(a);
            ends.push(data.len());
        }
        OwnedArgs { data, ends }
    }

    /// The arguments `items[at..at + width]` (clipped) for every `at` of `starts`, in order:
    /// one shard's share of a multi-key command (plain loops: the iterator form of `collect`
    /// cost twice as much here).
    pub fn from_groups(
        items: &[&[u8]],
        starts: impl Iterator<Item = usize> + Clone,
        width: usize,
    ) -> Self {
        let (mut n, mut total) = (0usize, 0usize);
        for at in starts.clone() {
            for a in &items[at..(at + width).min(items.len())] {
                n += 1;
                total += a.len();
            }
        }
        let mut data = Vec::with_capacity(total);
        let mut ends = Vec::with_capacity(n);
        for at in starts {
            for a in &items[at..(at + width).min(items.len())] {
                data.extend_from_slice(a);
                ends.push(data.len());
            }
        }
        OwnedArgs { data, ends }
    }

    pub fn slices(&self) -> Vec<&[u8]> {
        let mut out = Vec::with_capacity(self.ends.len());
        let mut start = 0usize;
        for &e in &self.ends {
            out.push(&self.data[start..e]);
            start = e;
        }
        out
    }
}

/// Redis `getIntFromObjectOrReply(c, o, &v, NULL)` (SELECT, MOVE, COPY DB): a C `int`. Not an
/// integer: "value is not an integer or out of range"; an integer outside the int range gets
/// `getRangeLongFromObjectOrReply`'s own message.
pub fn int32_arg(reply: &mut Reply, a: &[u8]) -> Option<i32> {
    let v = int_arg(reply, a)?;
    match i32::try_from(v) {
        Ok(v) => Some(v),
        Err(_) => {
            reply.error(ERR_INT_RANGE);
            None
        }
    }
}

pub const ERR_INT_RANGE: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";

/// A blocking command's timeout in seconds (BLPOP, BLMOVE, BZPOPMIN, BZMPOP...), as Redis 7.0's
/// `getTimeoutFromObjectOrReply` reads it: a long double, times 1000, rounded up, cast to long
/// long. None: block forever (0).
pub fn parse_timeout(a: &[u8]) -> Result<Option<std::time::Duration>, &'static str> {
    let Some(secs) = damselfly_protocol::double::parse_f64(a).or_else(|| {
        // strtold accepts values beyond the double range; they end up out of range below.
        let s = std::str::from_utf8(a).ok()?;
        let v: f64 = s.parse().ok()?;
        (!v.is_nan() && a.first().is_some_and(|c| !c.is_ascii_whitespace())).then_some(v)
    }) else {
        return Err("ERR timeout is not a float or out of range");
    };
    let ms = (secs * 1000.0).ceil();
    // (long long) of an out-of-range value is LLONG_MIN on x86-64; every f64 in [-2^63, 2^63)
    // converts exactly (the old bound, 9.2e18, refused timeouts Redis and BLPOP accept).
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let ms = if ms.is_finite() && (-TWO_63..TWO_63).contains(&ms) {
        ms as i64
    } else {
        i64::MIN
    };
    if ms < 0 {
        return Err("ERR timeout is negative");
    }
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}
