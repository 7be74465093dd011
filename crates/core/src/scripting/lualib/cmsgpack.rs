//! lua-cmsgpack 0.4.0 (`cmsgpack` global) as bundled with Redis: same
//! integer/float/double choices, array detection, 16-level nesting cap
//! (deeper tables encode as nil) and error messages.

use mlua::{Error, Function, Lua, MultiValue, Result, Table, Value};

/// Tables nested deeper than this are encoded as nil (guards cycles).
const MAX_NESTING: u32 = 16;

/// 2^63, the first double outside the range of `int64_t`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Registers the global `cmsgpack` table.
pub fn register(lua: &Lua) -> Result<()> {
    let t = lua.create_table()?;
    let raw_pack = lua.create_function(|l, (n, args): (usize, Table)| {
        if n == 0 {
            return Err(arg_error(l, 0, "pack", "MessagePack pack needs input."));
        }
        let mut buf = Vec::new();
        for i in 1..=n {
            encode(&exact_arg(&args, i)?, 0, &mut buf)?;
        }
        l.create_string(&buf)
    })?;
    t.set("pack", exact_wrapper(lua, raw_pack)?)?;
    t.set(
        "unpack",
        lua.create_function(|l, a: MultiValue| unpack_full(l, &a, 0, 0, "unpack"))?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|l, a: MultiValue| {
            let offset = opt_integer(l, &a, 2, 0, "unpack_one")?;
            unpack_full(l, &a, 1, offset, "unpack_one")
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|l, a: MultiValue| {
            let limit = check_integer(l, &a, 2, "unpack_limit")?;
            let offset = opt_integer(l, &a, 3, 0, "unpack_limit")?;
            unpack_full(l, &a, limit, offset, "unpack_limit")
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    lua.globals().set("cmsgpack", t)
}

// ---------------------------------------------------------------------------
// Encoding.

fn encode(v: &Value, level: u32, out: &mut Vec<u8>) -> Result<()> {
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(*i as f64, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    // Matches `(int64_t)n == n` on x86-64, where out-of-range casts yield
    // INT64_MIN (so 2^63 and NaN are not integers, -2^63 is).
    let is_int = n.is_finite() && (-TWO_63..TWO_63).contains(&n) && n.trunc() == n;
    if is_int {
        encode_int(n as i64, out);
    } else if (n as f32) as f64 == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A table is an array when its keys are exactly the integers 1..=count.
fn is_array(t: &Table) -> Result<bool> {
    let mut count: i64 = 0;
    let mut max: i64 = 0;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        // `(int)n == n` with x86 semantics for out-of-range values.
        if n <= 0.0 || n > i32::MAX as f64 || n.trunc() != n {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

fn encode_table(t: &Table, level: u32, out: &mut Vec<u8>) -> Result<()> {
    if is_array(t)? {
        let len = t.raw_len();
        encode_header(len, 0x90, 0xdc, out);
        for i in 1..=len {
            let v = match t.get::<Value>(i)? {
                Value::Integer(0) => Value::Number(t.raw_get::<f64>(i).unwrap_or(0.0)),
                v => v,
            };
            encode(&v, level + 1, out)?;
        }
    } else {
        let len = t.clone().pairs::<Value, Value>().count();
        encode_header(len, 0x80, 0xde, out);
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            let v = match v {
                Value::Integer(0) => Value::Number(t.raw_get::<f64>(k.clone()).unwrap_or(0.0)),
                v => v,
            };
            encode(&k, level + 1, out)?;
            encode(&v, level + 1, out)?;
        }
    }
    Ok(())
}

/// Array/map header: fix form, then 16-bit (`code16`) or 32-bit (`code16+1`).
fn encode_header(n: usize, fix: u8, code16: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(code16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(code16 + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

// ---------------------------------------------------------------------------
// Decoding.

enum DecodeError {
    Eof,
    BadFormat,
    Lua(Error),
}

impl From<Error> for DecodeError {
    fn from(e: Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> std::result::Result<&[u8], DecodeError> {
        if self.left() < n {
            return Err(DecodeError::Eof);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn be(&mut self, n: usize) -> std::result::Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn decode(&mut self, lua: &Lua) -> std::result::Result<Value, DecodeError> {
        if self.left() < 1 {
            return Err(DecodeError::Eof);
        }
        let c = self.data[self.pos];
        // Multi-byte items are checked for length before consuming anything.
        let need = |n: usize, cur: &Self| {
            if cur.left() < n {
                Err(DecodeError::Eof)
            } else {
                Ok(())
            }
        };
        let num = |n: f64| Ok(Value::Number(n));
        match c {
            0xcc | 0xd0 => need(2, self)?,
            0xcd | 0xd1 => need(3, self)?,
            0xce | 0xd2 | 0xca => need(5, self)?,
            0xcf | 0xd3 | 0xcb => need(9, self)?,
            _ => {}
        }
        match c {
            0xcc => {
                self.pos += 1;
                num(self.be(1)? as f64)
            }
            0xd0 => {
                self.pos += 1;
                num(self.be(1)? as u8 as i8 as f64)
            }
            0xcd => {
                self.pos += 1;
                num(self.be(2)? as f64)
            }
            0xd1 => {
                self.pos += 1;
                num(self.be(2)? as u16 as i16 as f64)
            }
            0xce => {
                self.pos += 1;
                num(self.be(4)? as f64)
            }
            0xd2 => {
                self.pos += 1;
                num(self.be(4)? as u32 as i32 as f64)
            }
            // uint64 goes through lua_pushinteger (signed) in the C code.
            0xcf | 0xd3 => {
                self.pos += 1;
                num(self.be(8)? as i64 as f64)
            }
            0xc0 => {
                self.pos += 1;
                Ok(Value::Nil)
            }
            0xc3 | 0xc2 => {
                self.pos += 1;
                Ok(Value::Boolean(c == 0xc3))
            }
            0xca => {
                self.pos += 1;
                num(f32::from_bits(self.be(4)? as u32) as f64)
            }
            0xcb => {
                self.pos += 1;
                num(f64::from_bits(self.be(8)?))
            }
            0xd9 | 0xda => {
                let hdr = if c == 0xd9 { 1 } else { 2 };
                need(1 + hdr, self)?;
                let l = u64::from_be_bytes({
                    let mut b = [0u8; 8];
                    b[8 - hdr..].copy_from_slice(&self.data[self.pos + 1..self.pos + 1 + hdr]);
                    b
                }) as usize;
                need(1 + hdr + l, self)?;
                self.pos += 1 + hdr;
                let s = self.take(l)?;
                Ok(Value::String(lua.create_string(s)?))
            }
            0xdb => {
                self.pos += 1;
                let l = self.be(4)? as usize;
                let s = self.take(l)?;
                Ok(Value::String(lua.create_string(s)?))
            }
            0xdc | 0xdd => {
                self.pos += 1;
                let l = self.be(if c == 0xdc { 2 } else { 4 })? as usize;
                self.array(lua, l)
            }
            0xde | 0xdf => {
                self.pos += 1;
                let l = self.be(if c == 0xde { 2 } else { 4 })? as usize;
                self.map(lua, l)
            }
            _ if c & 0x80 == 0 => {
                self.pos += 1;
                num(c as f64)
            }
            _ if c & 0xe0 == 0xe0 => {
                self.pos += 1;
                num(c as i8 as f64)
            }
            _ if c & 0xe0 == 0xa0 => {
                let l = (c & 0x1f) as usize;
                need(1 + l, self)?;
                self.pos += 1;
                let s = self.take(l)?;
                Ok(Value::String(lua.create_string(s)?))
            }
            _ if c & 0xf0 == 0x90 => {
                self.pos += 1;
                self.array(lua, (c & 0xf) as usize)
            }
            _ if c & 0xf0 == 0x80 => {
                self.pos += 1;
                self.map(lua, (c & 0xf) as usize)
            }
            _ => Err(DecodeError::BadFormat),
        }
    }

    fn array(&mut self, lua: &Lua, len: usize) -> std::result::Result<Value, DecodeError> {
        // Never trust the declared length for preallocation.
        let t = lua.create_table_with_capacity(len.min(self.left()), 0)?;
        for i in 1..=len {
            let v = self.decode(lua)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, len: usize) -> std::result::Result<Value, DecodeError> {
        let t = lua.create_table()?;
        for _ in 0..len {
            let k = self.decode(lua)?;
            let v = self.decode(lua)?;
            t.set(k, v)?;
        }
        Ok(Value::Table(t))
    }
}

fn unpack_full(
    lua: &Lua,
    a: &MultiValue,
    limit: i64,
    offset: i64,
    fname: &str,
) -> Result<MultiValue> {
    let v = a.front().cloned();
    let s = match &v {
        Some(v @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) => {
            lua.coerce_string(v.clone())?
        }
        _ => None,
    };
    let Some(s) = s else {
        let got = v.as_ref().map_or("no value", type_name);
        return Err(arg_error(
            lua,
            1,
            fname,
            &format!("string expected, got {got}"),
        ));
    };
    let data = s.as_bytes();
    let len = data.len();
    if offset < 0 || limit < 0 {
        return Err(Error::RuntimeError(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        )));
    } else if offset as u64 > len as u64 {
        return Err(Error::RuntimeError(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        )));
    }
    let decode_all = limit == 0 && offset == 0;
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut cur = Cursor {
        data: &data,
        pos: offset as usize,
    };
    let mut out = MultiValue::new();
    let mut cnt = 0;
    while cur.left() > 0 && cnt < limit {
        match cur.decode(lua) {
            Ok(v) => out.push_back(v),
            Err(DecodeError::Eof) => {
                return Err(Error::RuntimeError("Missing bytes in input.".into()));
            }
            Err(DecodeError::BadFormat) => {
                return Err(Error::RuntimeError("Bad data format in input.".into()));
            }
            Err(DecodeError::Lua(e)) => return Err(e),
        }
        cnt += 1;
    }
    if !decode_all {
        let next = if cur.left() == 0 { -1 } else { cur.pos as i64 };
        out.push_front(Value::Integer(next));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Argument helpers mirroring lauxlib behaviour.

/// `luaL_checkinteger`: numbers (or numeric strings) truncated to integers.
fn check_integer(lua: &Lua, a: &MultiValue, idx: usize, fname: &str) -> Result<i64> {
    let v = a.get(idx - 1).cloned();
    let n = match &v {
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(s @ Value::String(_)) => lua.coerce_number(s.clone())?,
        _ => None,
    };
    match n {
        Some(n) => Ok(n as i64),
        None => {
            let got = v.as_ref().map_or("no value", type_name);
            Err(arg_error(
                lua,
                idx,
                fname,
                &format!("number expected, got {got}"),
            ))
        }
    }
}

fn opt_integer(lua: &Lua, a: &MultiValue, idx: usize, default: i64, fname: &str) -> Result<i64> {
    match a.get(idx - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, a, idx, fname),
    }
}

use super::args::{exact_arg, type_name};

const WRAPPER_NAME: &str = "cmsgpack";

/// [`super::args::exact_wrapper`] named after this library.
fn exact_wrapper(lua: &Lua, f: Function) -> Result<Function> {
    super::args::exact_wrapper(lua, f, WRAPPER_NAME)
}

/// [`super::args::arg_error`] for this library's functions.
fn arg_error(lua: &Lua, narg: usize, fallback: &str, msg: &str) -> Error {
    super::args::arg_error(lua, narg, fallback, msg, Some(WRAPPER_NAME))
}
