//! Roberto Ierusalimschy's `struct` library (`struct` global) as shipped in
//! Redis, including its bounds checks (CVE-2020-14147 fixes) and the quirks
//! of 64-bit `long` arithmetic for integers wider than 8 bytes.

use mlua::{Error, Function, Lua, MultiValue, Result, Table, Value};

/// Largest integral size accepted by `i`/`I`.
const MAXINTSIZE: usize = 32;
/// Default alignment for `!` without a number (x86-64 double alignment).
const MAXALIGN: usize = 8;

/// 2^63, the first double outside the range of `int64_t`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Registers the global `struct` table.
pub fn register(lua: &Lua) -> Result<()> {
    let t = lua.create_table()?;
    let raw_pack = lua.create_function(|l, (n, args): (usize, Table)| {
        let mut a = (1..=n)
            .map(|i| exact_arg(&args, i))
            .collect::<Result<Vec<Value>>>()?;
        // After checking the format, the C code pushes a nil marker, so the
        // first missing value argument reads as `nil` rather than "no value".
        if n >= 1 {
            a.push(Value::Nil);
        }
        pack(l, &a)
    })?;
    t.set("pack", exact_wrapper(lua, raw_pack)?)?;
    t.set(
        "unpack",
        lua.create_function(|l, a: MultiValue| unpack(l, &a.into_iter().collect::<Vec<_>>()))?,
    )?;
    t.set(
        "size",
        lua.create_function(|l, a: MultiValue| size(l, &a.into_iter().collect::<Vec<_>>()))?,
    )?;
    lua.globals().set("struct", t)
}

#[derive(Clone, Copy)]
struct Header {
    little: bool,
    align: usize,
}

/// Format string as C sees it: stops at the first NUL.
struct Fmt<'a> {
    s: &'a [u8],
    i: usize,
}

impl Fmt<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.s.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    fn getnum(&mut self, df: usize) -> Result<usize> {
        if !self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Ok(df);
        }
        let mut a: i32 = 0;
        while let Some(&c) = self.s.get(self.i).filter(|c| c.is_ascii_digit()) {
            let d = (c - b'0') as i32;
            if a > i32::MAX / 10 || a * 10 > i32::MAX - d {
                return Err(Error::RuntimeError("integral size overflow".into()));
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a as usize)
    }

    fn optsize(&mut self, opt: u8) -> Result<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.getnum(1)?,
            b'i' | b'I' => {
                let sz = self.getnum(4)?;
                if sz > MAXINTSIZE {
                    return Err(Error::RuntimeError(format!(
                        "integral size {sz} is larger than limit of {MAXINTSIZE}"
                    )));
                }
                sz
            }
            _ => 0,
        })
    }

    fn control(&mut self, lua: &Lua, opt: u8, h: &mut Header, fname: &str) -> Result<()> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.getnum(MAXALIGN)?;
                if !(a > 0 && a & (a - 1) == 0) {
                    return Err(Error::RuntimeError(format!(
                        "alignment {a} is not a power of 2"
                    )));
                }
                h.align = a;
            }
            _ => {
                let msg = format!("invalid format option '{}'", opt as char);
                return Err(arg_error(lua, 1, fname, &msg));
            }
        }
        Ok(())
    }
}

fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & (size - 1))) & (size - 1)
}

fn check_string(lua: &Lua, a: &[Value], idx: usize, fname: &str) -> Result<mlua::String> {
    let v = a.get(idx - 1);
    let s = match v {
        Some(v @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) => {
            lua.coerce_string(v.clone())?
        }
        _ => None,
    };
    s.ok_or_else(|| {
        let got = v.map_or("no value", type_name);
        arg_error(lua, idx, fname, &format!("string expected, got {got}"))
    })
}

fn check_number(lua: &Lua, a: &[Value], idx: usize, fname: &str) -> Result<f64> {
    let v = a.get(idx - 1);
    let n = match v {
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(s @ Value::String(_)) => lua.coerce_number(s.clone())?,
        _ => None,
    };
    n.ok_or_else(|| {
        let got = v.map_or("no value", type_name);
        arg_error(lua, idx, fname, &format!("number expected, got {got}"))
    })
}

/// Converts like the C code: `(unsigned long)(long)n` for negatives and
/// `(unsigned long)n` otherwise, with x86-64 out-of-range results.
fn to_uint(n: f64) -> u64 {
    if n < 0.0 {
        if n >= -TWO_63 {
            n as i64 as u64
        } else {
            i64::MIN as u64
        }
    } else if n < 1.8446744073709552e19 {
        n as u64
    } else {
        // gcc's double->uint64 sequence overflows to 2^63 here (and for NaN).
        1u64 << 63
    }
}

fn pack(lua: &Lua, a: &[Value]) -> Result<mlua::String> {
    let fmt_s = check_string(lua, a, 1, "pack")?;
    let fb = fmt_s.as_bytes();
    let end = fb.iter().position(|&c| c == 0).unwrap_or(fb.len());
    let mut fmt = Fmt {
        s: &fb[..end],
        i: 0,
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    let mut total: usize = 0;
    while let Some(opt) = fmt.next() {
        let mut size = fmt.optsize(opt)?;
        let toalign = gettoalign(total, &h, opt, size);
        total += toalign;
        out.resize(out.len() + toalign, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let mut value = to_uint(check_number(lua, a, arg, "pack")?);
                arg += 1;
                // Bytes beyond the 8 of a C `long` are always zero.
                let mut bytes = vec![0u8; size];
                for b in bytes.iter_mut().take(8) {
                    *b = value as u8;
                    value >>= 8;
                }
                if !h.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, a, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    f.to_le_bytes()
                } else {
                    f.to_be_bytes()
                });
            }
            b'd' => {
                let d = check_number(lua, a, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    d.to_le_bytes()
                } else {
                    d.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_string(lua, a, arg, "pack")?;
                arg += 1;
                let s = s.as_bytes();
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C code reports the *next* argument index here.
                    return Err(arg_error(lua, arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => fmt.control(lua, opt, &mut h, "pack")?,
        }
        total += size;
    }
    lua.create_string(&out)
}

fn getinteger(buf: &[u8], little: bool, signed: bool) -> f64 {
    let size = buf.len();
    let fold = |acc: u64, &b: &u8| (acc << 8) | b as u64;
    let l = if little {
        buf.iter().rev().fold(0, fold)
    } else {
        buf.iter().fold(0, fold)
    };
    if !signed {
        return l as f64;
    }
    // C shifts by size*8-1, which x86 masks to 6 bits.
    let shift = ((size as i64 * 8 - 1) & 63) as u32;
    let mask = u64::MAX << shift;
    let l = if l & mask != 0 { l | mask } else { l };
    l as i64 as f64
}

fn unpack(lua: &Lua, a: &[Value]) -> Result<MultiValue> {
    let fmt_s = check_string(lua, a, 1, "unpack")?;
    let data_s = check_string(lua, a, 2, "unpack")?;
    let data = data_s.as_bytes();
    let ld = data.len();
    let pos_arg = match a.get(2) {
        None | Some(Value::Nil) => 1.0,
        Some(_) => check_number(lua, a, 3, "unpack")?,
    };
    // luaL_optinteger then a size_t: negative offsets wrap to huge values.
    let mut pos = pos_arg as i64 as usize;
    if pos == 0 {
        return Err(arg_error(lua, 3, "unpack", "offset must be 1 or greater"));
    }
    pos -= 1;
    let fb = fmt_s.as_bytes();
    let end = fb.iter().position(|&c| c == 0).unwrap_or(fb.len());
    let mut fmt = Fmt {
        s: &fb[..end],
        i: 0,
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out: Vec<Value> = Vec::new();
    let short = |lua: &Lua| arg_error(lua, 2, "unpack", "data string too short");
    while let Some(opt) = fmt.next() {
        let mut size = fmt.optsize(opt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(short(lua));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = getinteger(&data[pos..pos + size], h.little, opt.is_ascii_lowercase());
                out.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let f = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(f as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let d = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.last() {
                        Some(v @ (Value::Number(_) | Value::Integer(_) | Value::String(_))) => {
                            lua.coerce_number(v.clone())?
                        }
                        _ => None,
                    };
                    let Some(n) = prev else {
                        return Err(Error::RuntimeError(
                            "format 'c0' needs a previous size".into(),
                        ));
                    };
                    size = n as usize;
                    out.pop();
                    if !(size <= ld && pos <= ld - size) {
                        return Err(short(lua));
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(Error::RuntimeError("unfinished string in data".into()));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => fmt.control(lua, opt, &mut h, "unpack")?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(out.into_iter().collect())
}

fn size(lua: &Lua, a: &[Value]) -> Result<f64> {
    let fmt_s = check_string(lua, a, 1, "size")?;
    let fb = fmt_s.as_bytes();
    let end = fb.iter().position(|&c| c == 0).unwrap_or(fb.len());
    let mut fmt = Fmt {
        s: &fb[..end],
        i: 0,
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next() {
        let size = fmt.optsize(opt)?;
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(lua, 1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error(lua, 1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            fmt.control(lua, opt, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

// ---------------------------------------------------------------------------
// Argument helpers mirroring lauxlib behaviour.

use super::args::{exact_arg, type_name};

const WRAPPER_NAME: &str = "struct";

/// [`super::args::exact_wrapper`] named after this library.
fn exact_wrapper(lua: &Lua, f: Function) -> Result<Function> {
    super::args::exact_wrapper(lua, f, WRAPPER_NAME)
}

/// [`super::args::arg_error`] for this library's functions.
fn arg_error(lua: &Lua, narg: usize, fallback: &str, msg: &str) -> Error {
    super::args::arg_error(lua, narg, fallback, msg, Some(WRAPPER_NAME))
}
