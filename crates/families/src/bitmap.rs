//! Bitmap commands: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD BITFIELD_RO.
//!
//! Semantics, replies and error texts follow Redis 7.0 `bitops.c`. Bit 0 is the most significant
//! bit of byte 0. Strings are edited in place (`CompactStr::make_raw_mut`), so SETBIT on a large
//! bitmap does not copy it.

use crate::string::{cstr, in_order, opt_is, read_strings, ReadStr};
use damselfly_core::commands::spec::prelude::*;
use damselfly_core::commands::util::*;
use damselfly_core::commands::{BoxFut, CmdCtx, ConnCtx};
use damselfly_core::engine::db::TtlMode;
use damselfly_types::compact::{IntBuf, MAX_LEN};
use damselfly_types::{CompactStr, Value, ValueMut, ValueRef};

const G: Group = Group::Bitmap;

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("setbit", 4, WRITE | DENYOOM, range(1, 1, 1), Shard(setbit))
        .doc(G, "1.0.0", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist."),
    cmd("getbit", 3, READONLY | FAST, range(1, 1, 1), Shard(getbit))
        .doc(G, "1.0.0", "Returns a bit value by offset."),
    cmd("bitcount", -2, READONLY, range(1, 1, 1), Shard(bitcount))
        .doc(G, "1.0.0", "Counts the number of set bits (population counting) in a string."),
    cmd("bitpos", -3, READONLY, range(1, 1, 1), Shard(bitpos))
        .doc(G, "1.0.0", "Finds the first set (1) or clear (0) bit in a string."),
    cmd("bitop", -4, WRITE | DENYOOM, range(2, -1, 1), Conn(bitop))
        .doc(G, "1.0.0", "Performs bitwise operations on multiple strings, and stores the result."),
    cmd("bitfield", -2, WRITE | DENYOOM, range(1, 1, 1), Shard(bitfield))
        .doc(G, "1.0.0", "Performs arbitrary bitfield integer operations on strings."),
    cmd("bitfield_ro", -2, READONLY | FAST, range(1, 1, 1), Shard(bitfield_ro))
        .doc(G, "1.0.0", "Performs arbitrary read-only bitfield integer operations on strings."),
];

const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const ERR_BIT_VALUE: &str = "ERR bit is not an integer or out of range";
const ERR_BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Redis `getBitOffsetFromArgument`. With `hash`, `#N` means `N * bits`.
fn bit_offset(cx: &mut CmdCtx<'_>, arg: &[u8], hash: bool, bits: u32) -> Option<u64> {
    let usehash = hash && bits > 0 && arg.first() == Some(&b'#');
    let digits = if usehash { &arg[1..] } else { arg };
    let Some(mut off) = parse_i64(digits) else {
        cx.reply.error(ERR_BIT_OFFSET);
        return None;
    };
    if usehash {
        off = off.wrapping_mul(bits as i64);
    }
    let max = cx
        .shared
        .config
        .proto_max_bulk_len()
        .min(MAX_LEN as u64 - 1);
    if off < 0 || (off as u64 >> 3) >= max {
        cx.reply.error(ERR_BIT_OFFSET);
        return None;
    }
    Some(off as u64)
}

/// Redis `lookupStringForBitCommand`: the string at `key`, created or zero-padded so that bit
/// `maxbit` exists, as mutable bytes, and whether it was created or grown (then WATCH has
/// been told; otherwise the caller calls `touch_key` if it changes a byte). None after
/// replying WRONGTYPE.
fn string_for_bits<'c>(
    cx: &'c mut CmdCtx<'_>,
    key: &[u8],
    maxbit: u64,
) -> Option<(&'c mut [u8], bool)> {
    let need = (maxbit >> 3) as usize + 1;
    let now = cx.now;
    let db = &mut cx.shard.dbs[cx.db];
    let pos = match db.find(key, now) {
        Some(pos) => pos,
        None => db.insert_new(key, Value::str(CompactStr::empty()), TtlMode::Clear),
    };
    let grows = db.at(pos).1.as_str().is_some_and(|s| s.len() < need);
    if grows {
        db.touch_key(key);
    }
    match db.at_mut_quiet(pos).view_mut() {
        ValueMut::Str(s) => Some((s.make_raw_mut(need), grows)),
        _ => {
            cx.reply.error(ERR_WRONGTYPE);
            None
        }
    }
}

fn setbit(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(off) = bit_offset(cx, args[2], false, 0) else {
        return;
    };
    let on = match parse_i64(args[3]) {
        Some(v) if v & !1 == 0 => v as u8,
        _ => {
            cx.reply.error(ERR_BIT_VALUE);
            return;
        }
    };
    let key = args[1];
    let Some((b, grew)) = string_for_bits(cx, key, off) else {
        return;
    };
    let byte = (off >> 3) as usize;
    let bit = 7 - (off & 7) as u8;
    let old = (b[byte] >> bit) & 1;
    b[byte] = (b[byte] & !(1 << bit)) | (on << bit);
    if old != on {
        cx.db().touch_key(key);
    }
    if grew || old != on {
        ev::emit(ev::STRING, "setbit", cx.db, key);
    }
    cx.reply.int(old as i64);
}

fn getbit(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(off) = bit_offset(cx, args[2], false, 0) else {
        return;
    };
    let now = cx.now;
    match cx.shard.dbs[cx.db].get_read(args[1], now).map(|v| v.view()) {
        None => cx.reply.int(0),
        Some(ValueRef::Str(s)) => {
            let mut ib: IntBuf = [0u8; 20];
            let b = s.bytes(&mut ib);
            let byte = (off >> 3) as usize;
            let v = b.get(byte).map_or(0, |&c| (c >> (7 - (off & 7))) & 1);
            cx.reply.int(v as i64);
        }
        Some(_) => cx.reply.error(ERR_WRONGTYPE),
    }
}

/// Parses a BYTE|BIT unit word; None is a syntax error.
fn unit_is_bit(a: &[u8]) -> Option<bool> {
    if opt_is(a, "bit") {
        Some(true)
    } else if opt_is(a, "byte") {
        Some(false)
    } else {
        None
    }
}

/// Converts a user range to a byte range plus edge masks, as Redis 7.0 BITCOUNT/BITPOS do.
/// Returns (start, end, first_byte_neg_mask, last_byte_neg_mask); start > end means empty.
fn byte_range(mut start: i64, mut end: i64, strlen: usize, isbit: bool) -> (i64, i64, u8, u8) {
    let mut totlen = strlen as i64;
    if isbit {
        totlen <<= 3;
    }
    if start < 0 {
        start = start.saturating_add(totlen);
    }
    if end < 0 {
        end = end.saturating_add(totlen);
    }
    start = start.max(0);
    end = end.max(0);
    if end >= totlen {
        end = totlen - 1;
    }
    let (mut first, mut last) = (0u8, 0u8);
    if isbit && start <= end {
        first = !((1u32 << (8 - (start & 7))) - 1) as u8;
        last = ((1u32 << (7 - (end & 7))) - 1) as u8;
        start >>= 3;
        end >>= 3;
    }
    (start, end, first, last)
}

fn popcount(b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        n += u64::from_ne_bytes(w).count_ones() as u64;
    }
    n + chunks
        .remainder()
        .iter()
        .map(|x| x.count_ones() as u64)
        .sum::<u64>()
}

fn bitcount(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    // Redis 7.0 looks the key up before parsing the range: a missing key is 0 whatever follows.
    let now = cx.now;
    let mut ib: IntBuf = [0u8; 20];
    let p: &[u8] = match cx.shard.dbs[cx.db].get_read(args[1], now).map(|v| v.view()) {
        None => {
            cx.reply.int(0);
            return;
        }
        Some(ValueRef::Str(s)) => s.bytes(&mut ib),
        Some(_) => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
    };
    let (start, end, first, last) = match args.len() {
        2 => (0, p.len() as i64 - 1, 0, 0),
        4 | 5 => {
            let Some(s) = int_arg(cx.reply, args[2]) else {
                return;
            };
            let Some(e) = int_arg(cx.reply, args[3]) else {
                return;
            };
            // Both negative and reversed: empty. Redis 7.0 answers this before it even looks at
            // the BYTE|BIT word (found by the differential test).
            if s < 0 && e < 0 && s > e {
                cx.reply.int(0);
                return;
            }
            let isbit = if args.len() == 5 {
                match unit_is_bit(args[4]) {
                    Some(b) => b,
                    None => {
                        cx.reply.error(ERR_SYNTAX);
                        return;
                    }
                }
            } else {
                false
            };
            byte_range(s, e, p.len(), isbit)
        }
        _ => {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
    };
    if start > end {
        cx.reply.int(0);
        return;
    }
    let (s, e) = (start as usize, end as usize);
    let mut count = popcount(&p[s..=e]);
    if first != 0 {
        count -= (p[s] & first).count_ones() as u64;
    }
    if last != 0 {
        count -= (p[e] & last).count_ones() as u64;
    }
    cx.reply.int(count as i64);
}

/// Redis `redisBitpos`: position of the first `bit` in `b`; for a 0 not found this is the bit
/// just past the end, for a 1 not found it is -1.
fn find_bit(b: &[u8], bit: bool) -> i64 {
    let skip = if bit { 0u8 } else { 0xff };
    for (i, &c) in b.iter().enumerate() {
        if c != skip {
            let x = if bit { c } else { !c };
            return (i as i64) * 8 + x.leading_zeros() as i64;
        }
    }
    if bit {
        -1
    } else {
        (b.len() as i64) * 8
    }
}

fn bitpos(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    let Some(bitarg) = int_arg(cx.reply, args[2]) else {
        return;
    };
    if bitarg != 0 && bitarg != 1 {
        cx.reply.error("ERR The bit argument must be 1 or 0.");
        return;
    }
    let bit = bitarg == 1;
    let now = cx.now;
    let mut ib: IntBuf = [0u8; 20];
    let p: &[u8] = match cx.shard.dbs[cx.db].get_read(args[1], now).map(|v| v.view()) {
        // A missing key is an infinite run of zeros.
        None => {
            cx.reply.int(if bit { -1 } else { 0 });
            return;
        }
        Some(ValueRef::Str(s)) => s.bytes(&mut ib),
        Some(_) => {
            cx.reply.error(ERR_WRONGTYPE);
            return;
        }
    };
    let mut end_given = false;
    let (mut start, end, first, last) = match args.len() {
        3 => (0, p.len() as i64 - 1, 0, 0),
        4..=6 => {
            let Some(s) = int_arg(cx.reply, args[3]) else {
                return;
            };
            let mut isbit = false;
            if args.len() == 6 {
                match unit_is_bit(args[5]) {
                    Some(b) => isbit = b,
                    None => {
                        cx.reply.error(ERR_SYNTAX);
                        return;
                    }
                }
            }
            let totlen = p.len() as i64;
            let e = if args.len() >= 5 {
                let Some(e) = int_arg(cx.reply, args[4]) else {
                    return;
                };
                end_given = true;
                e
            } else if isbit {
                (totlen << 3) + 7
            } else {
                totlen - 1
            };
            byte_range(s, e, p.len(), isbit)
        }
        _ => {
            cx.reply.error(ERR_SYNTAX);
            return;
        }
    };
    // An empty range contains neither a 0 nor a 1.
    if start > end {
        cx.reply.int(-1);
        return;
    }
    let mut bytes = end - start + 1;
    let pos = 'search: {
        if first != 0 {
            let c = p[start as usize];
            let mut tmp = if bit { c & !first } else { c | first };
            if last != 0 && bytes == 1 {
                tmp = if bit { tmp & !last } else { tmp | last };
            }
            let pos = find_bit(&[tmp], bit);
            if bytes == 1 || (pos != -1 && pos != 8) {
                break 'search pos;
            }
            start += 1;
            bytes -= 1;
        }
        let curbytes = bytes - (last != 0) as i64;
        if curbytes > 0 {
            let s = start as usize;
            let pos = find_bit(&p[s..s + curbytes as usize], bit);
            if bytes == curbytes || (pos != -1 && pos != curbytes << 3) {
                break 'search pos;
            }
            start += curbytes;
            bytes -= curbytes;
        }
        let c = p[end as usize];
        let tmp = if bit { c & !last } else { c | last };
        find_bit(&[tmp], bit)
    };
    // With an explicit end, a 0 "found" just past the range is not in the range.
    if end_given && !bit && pos == bytes << 3 {
        cx.reply.int(-1);
        return;
    }
    cx.reply
        .int(if pos != -1 { pos + (start << 3) } else { pos });
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

fn bitop<'a>(cx: &'a mut ConnCtx, args: &'a [&'a [u8]]) -> BoxFut<'a> {
    Box::pin(async move {
        let name = cstr(args[1]);
        let op = if eq_ic(name, "and") {
            BitOp::And
        } else if eq_ic(name, "or") {
            BitOp::Or
        } else if eq_ic(name, "xor") {
            BitOp::Xor
        } else if eq_ic(name, "not") {
            BitOp::Not
        } else {
            cx.reply.error(ERR_SYNTAX);
            return;
        };
        if op == BitOp::Not && args.len() != 4 {
            cx.reply
                .error("ERR BITOP NOT must be called with a single source key.");
            return;
        }
        // Read every source on its shard, then compute and write on the destination's.
        let n = args.len() - 3;
        let dest = args[2].to_vec();
        let written = read_strings(cx.hops(), &args[3..])
            .on_key(args[2], move |c: &mut CmdCtx<'_>, parts| {
                let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(n);
                for v in in_order(parts, n) {
                    match v {
                        ReadStr::Missing => srcs.push(Vec::new()),
                        ReadStr::Str(b) => srcs.push(b),
                        ReadStr::WrongType => return None,
                    }
                }
                let res = compute_bitop(op, &srcs);
                let now = c.now;
                let db = c.db();
                if res.is_empty() {
                    if db.remove(&dest, now).is_some() {
                        ev::emit(ev::GENERIC, "del", db.index, &dest);
                    }
                } else {
                    db.set(
                        &dest,
                        Value::str(CompactStr::from_value_raw(&res)),
                        TtlMode::Clear,
                        now,
                    );
                    ev::emit(ev::STRING, "set", db.index, &dest);
                }
                Some(res.len())
            })
            .run()
            .await;
        match written {
            Some(len) => cx.reply.int(len as i64),
            None => cx.reply.error(ERR_WRONGTYPE),
        }
    })
}

/// The BITOP result over `srcs` (missing bytes count as zero); empty if every source is empty.
fn compute_bitop(op: BitOp, srcs: &[Vec<u8>]) -> Vec<u8> {
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    if maxlen == 0 {
        return Vec::new();
    }
    let mut res = vec![0u8; maxlen];
    match op {
        BitOp::Not => {
            for (r, s) in res.iter_mut().zip(&srcs[0]) {
                *r = !s;
            }
            // Bytes past the source are 0, so NOT makes them 0xff; maxlen == src len here.
        }
        BitOp::And => {
            let minlen = srcs.iter().map(|s| s.len()).min().unwrap_or(0);
            res[..minlen].copy_from_slice(&srcs[0][..minlen]);
            for s in &srcs[1..] {
                for (r, b) in res[..minlen].iter_mut().zip(s) {
                    *r &= b;
                }
            }
        }
        BitOp::Or | BitOp::Xor => {
            for s in srcs {
                for (r, b) in res.iter_mut().zip(s) {
                    if op == BitOp::Or {
                        *r |= b;
                    } else {
                        *r ^= b;
                    }
                }
            }
        }
    }
    res
}

// ---------------------------------------------------------------------------------------------
// BITFIELD
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    IncrBy,
}

#[derive(Clone, Copy)]
struct Field {
    op: FieldOp,
    offset: u64,
    value: i64,
    bits: u32,
    signed: bool,
    overflow: Overflow,
}

/// Redis `getBitfieldTypeFromArgument`: `i1..i64` or `u1..u63` (case-sensitive).
fn bitfield_type(a: &[u8]) -> Option<(bool, u32)> {
    let signed = match a.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return None,
    };
    let bits = parse_i64(cstr(&a[1..]))?;
    if bits < 1 || (signed && bits > 64) || (!signed && bits > 63) {
        return None;
    }
    Some((signed, bits as u32))
}

fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for j in 0..bits as u64 {
        let o = offset + j;
        let byte = (o >> 3) as usize;
        let bit = p.get(byte).map_or(0, |&c| (c >> (7 - (o & 7))) & 1);
        v = (v << 1) | bit as u64;
    }
    v
}

fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned(p, offset, bits) as i64;
    if bits < 64 && v & (1i64 << (bits - 1)) != 0 {
        v |= -1i64 << bits;
    }
    v
}

fn set_unsigned(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..bits as u64 {
        let bitval = (value >> (bits as u64 - 1 - j)) & 1;
        let o = offset + j;
        let byte = (o >> 3) as usize;
        let bit = 7 - (o & 7);
        if let Some(c) = p.get_mut(byte) {
            *c = (*c & !(1 << bit)) | ((bitval as u8) << bit);
        }
    }
}

/// Redis `checkUnsignedBitfieldOverflow`: (overflowed, wrapped-or-saturated value).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> (bool, u64) {
    let max: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let wrap = || {
        let mask = if bits >= 64 { 0 } else { u64::MAX << bits };
        value.wrapping_add(incr as u64) & !mask
    };
    if value > max || (incr > 0 && incr > maxincr) {
        match ow {
            Overflow::Wrap => (true, wrap()),
            Overflow::Sat => (true, max),
            Overflow::Fail => (true, 0),
        }
    } else if incr < 0 && incr < minincr {
        match ow {
            Overflow::Wrap => (true, wrap()),
            Overflow::Sat => (true, 0),
            Overflow::Fail => (true, 0),
        }
    } else {
        (false, 0)
    }
}

/// Redis `checkSignedBitfieldOverflow`: (overflowed, wrapped-or-saturated value).
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> (bool, i64) {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let msb = 1u64 << (bits - 1);
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & msb != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        match ow {
            Overflow::Wrap => (true, wrap()),
            Overflow::Sat => (true, max),
            Overflow::Fail => (true, 0),
        }
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        match ow {
            Overflow::Wrap => (true, wrap()),
            Overflow::Sat => (true, min),
            Overflow::Fail => (true, 0),
        }
    } else {
        (false, 0)
    }
}

fn bitfield(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    bitfield_generic(cx, args, false);
}

fn bitfield_ro(cx: &mut CmdCtx<'_>, args: &[&[u8]]) {
    bitfield_generic(cx, args, true);
}

fn bitfield_generic(cx: &mut CmdCtx<'_>, args: &[&[u8]], ro: bool) {
    let mut ops: Vec<Field> = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut readonly = true;
    let mut highest_write: u64 = 0;
    let mut j = 2;
    while j < args.len() {
        let remargs = args.len() - j - 1;
        let sub = args[j];
        let op = if opt_is(sub, "get") && remargs >= 2 {
            FieldOp::Get
        } else if opt_is(sub, "set") && remargs >= 3 {
            FieldOp::Set
        } else if opt_is(sub, "incrby") && remargs >= 3 {
            FieldOp::IncrBy
        } else if opt_is(sub, "overflow") && remargs >= 1 {
            let t = args[j + 1];
            overflow = if opt_is(t, "wrap") {
                Overflow::Wrap
            } else if opt_is(t, "sat") {
                Overflow::Sat
            } else if opt_is(t, "fail") {
                Overflow::Fail
            } else {
                cx.reply.error("ERR Invalid OVERFLOW type specified");
                return;
            };
            j += 2;
            continue;
        } else {
            cx.reply.error(ERR_SYNTAX);
            return;
        };
        let Some((signed, bits)) = bitfield_type(args[j + 1]) else {
            cx.reply.error(ERR_BITFIELD_TYPE);
            return;
        };
        let Some(offset) = bit_offset(cx, args[j + 2], true, bits) else {
            return;
        };
        let mut value = 0;
        if op != FieldOp::Get {
            readonly = false;
            highest_write = highest_write.max(offset + bits as u64 - 1);
            let Some(v) = int_arg(cx.reply, args[j + 3]) else {
                return;
            };
            value = v;
        }
        ops.push(Field {
            op,
            offset,
            value,
            bits,
            signed,
            overflow,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }

    if readonly {
        // Reads only: a missing key reads as zeros.
        let now = cx.now;
        let mut ib: IntBuf = [0u8; 20];
        let p: &[u8] = match cx.shard.dbs[cx.db].get_read(args[1], now).map(|v| v.view()) {
            None => &[],
            Some(ValueRef::Str(s)) => s.bytes(&mut ib),
            Some(_) => {
                cx.reply.error(ERR_WRONGTYPE);
                return;
            }
        };
        cx.reply.array(ops.len());
        for f in &ops {
            if f.signed {
                cx.reply.int(get_signed(p, f.offset, f.bits));
            } else {
                cx.reply.int(get_unsigned(p, f.offset, f.bits) as i64);
            }
        }
        return;
    }
    if ro {
        cx.reply
            .error("ERR BITFIELD_RO only supports the GET subcommand");
        return;
    }
    if (highest_write >> 3) as usize + 1 > MAX_LEN {
        cx.reply.error(ERR_BIT_OFFSET);
        return;
    }
    let key = args[1];
    // Replies are written into a side buffer because the string borrow holds `cx`.
    let mut out = damselfly_protocol::Reply::new(cx.reply.ver);
    let mut changes = 0usize;
    {
        let Some((p, _)) = string_for_bits(cx, key, highest_write) else {
            return;
        };
        out.array(ops.len());
        for f in &ops {
            match f.op {
                FieldOp::Get => {
                    if f.signed {
                        out.int(get_signed(p, f.offset, f.bits));
                    } else {
                        out.int(get_unsigned(p, f.offset, f.bits) as i64);
                    }
                }
                FieldOp::Set | FieldOp::IncrBy if f.signed => {
                    let old = get_signed(p, f.offset, f.bits);
                    let (ovf, newval, ret) = if f.op == FieldOp::IncrBy {
                        let (o, w) = signed_overflow(old, f.value, f.bits, f.overflow);
                        let n = if o { w } else { old.wrapping_add(f.value) };
                        (o, n, n)
                    } else {
                        let (o, w) = signed_overflow(f.value, 0, f.bits, f.overflow);
                        (o, if o { w } else { f.value }, old)
                    };
                    if ovf && f.overflow == Overflow::Fail {
                        out.null();
                    } else {
                        out.int(ret);
                        set_unsigned(p, f.offset, f.bits, newval as u64);
                        changes += 1;
                    }
                }
                FieldOp::Set | FieldOp::IncrBy => {
                    let old = get_unsigned(p, f.offset, f.bits);
                    let (ovf, newval, ret) = if f.op == FieldOp::IncrBy {
                        let (o, w) = unsigned_overflow(old, f.value, f.bits, f.overflow);
                        let n = if o {
                            w
                        } else {
                            old.wrapping_add(f.value as u64)
                        };
                        (o, n, n)
                    } else {
                        let v = f.value as u64;
                        let (o, w) = unsigned_overflow(v, 0, f.bits, f.overflow);
                        (o, if o { w } else { v }, old)
                    };
                    if ovf && f.overflow == Overflow::Fail {
                        out.null();
                    } else {
                        out.int(ret as i64);
                        set_unsigned(p, f.offset, f.bits, newval);
                        changes += 1;
                    }
                }
            }
        }
    }
    if changes > 0 {
        cx.db().touch_key(key);
        ev::emit(ev::STRING, "setbit", cx.db, key);
    }
    cx.reply.raw(&out.take());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitfield_overflow_math() {
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), (true, -128));
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Sat), (true, 127));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), (true, -128));
        assert!(!signed_overflow(5, 1, 8, Overflow::Wrap).0);
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            (true, i64::MIN)
        );
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Wrap), (true, 0));
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Sat), (true, 255));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Sat), (true, 0));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Wrap), (true, 255));
    }

    #[test]
    fn bit_get_set_roundtrip() {
        let mut p = vec![0u8; 4];
        set_unsigned(&mut p, 3, 13, 0x1abc);
        assert_eq!(get_unsigned(&p, 3, 13), 0x1abc);
        assert_eq!(get_signed(&p, 3, 13), 0x1abc - 0x2000);
        assert_eq!(find_bit(&[0xff, 0xf0], false), 12);
        assert_eq!(find_bit(&[0xff], false), 8);
        assert_eq!(find_bit(&[0, 0], true), -1);
        assert_eq!(find_bit(&[0, 1], true), 15);
    }

    #[test]
    fn bitop_results() {
        let a = vec![0b1100_1100u8, 0xff];
        let b = vec![0b1010_1010u8];
        assert_eq!(
            compute_bitop(BitOp::And, &[a.clone(), b.clone()]),
            vec![0b1000_1000, 0]
        );
        assert_eq!(
            compute_bitop(BitOp::Or, &[a.clone(), b.clone()]),
            vec![0b1110_1110, 0xff]
        );
        assert_eq!(
            compute_bitop(BitOp::Xor, &[a.clone(), b]),
            vec![0b0110_0110, 0xff]
        );
        assert_eq!(compute_bitop(BitOp::Not, &[a]), vec![0b0011_0011, 0]);
        assert!(compute_bitop(BitOp::Or, &[vec![], vec![]]).is_empty());
    }
}
