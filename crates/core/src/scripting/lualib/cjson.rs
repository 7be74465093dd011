//! lua-cjson 2.1.0 (`cjson` global) with the behaviour of Redis' bundled copy:
//! same array/object detection, sparse-array rules, `%.14g` numbers, token
//! scanner quirks (strtod-based numbers, NUL-terminated input) and messages.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Error, Function, LightUserData, Lua, MultiValue, Result, Table, Value};

/// Mutable settings shared by all functions of one `cjson` instance.
#[derive(Clone, Copy)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0 = error, 1 = emit `inf`/`nan`, 2 = emit `null`.
    encode_invalid_numbers: i32,
    encode_number_precision: i32,
    encode_keep_buffer: bool,
    decode_invalid_numbers: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            encode_number_precision: 14,
            encode_keep_buffer: true,
            decode_invalid_numbers: true,
        }
    }
}

struct State {
    cfg: Config,
    /// Reused output buffer, kept only while `encode_keep_buffer` is on.
    buf: Vec<u8>,
}

type Shared = Rc<RefCell<State>>;

/// Registers the global `cjson` table.
pub fn register(lua: &Lua) -> Result<()> {
    let t = new_instance(lua)?;
    lua.globals().set("cjson", t)
}

/// Builds one independent `cjson` module table (also used by `cjson.new`).
fn new_instance(lua: &Lua) -> Result<Table> {
    let st: Shared = Rc::new(RefCell::new(State {
        cfg: Config::default(),
        buf: Vec::new(),
    }));
    let t = lua.create_table()?;
    let s = st.clone();
    let raw_encode = lua.create_function(move |l, (n, args): (usize, Table)| {
        if n != 1 {
            return Err(arg_error(l, 1, "encode", "expected 1 argument"));
        }
        let v = exact_arg(&args, 1)?;
        encode(l, &s, &v)
    })?;
    t.set("encode", exact_wrapper(lua, raw_encode)?)?;
    t.set(
        "decode",
        lua.create_function({
            let s = st.clone();
            move |l, a: MultiValue| decode(l, &s, a)
        })?,
    )?;
    t.set(
        "encode_sparse_array",
        lua.create_function({
            let s = st.clone();
            move |l, a: MultiValue| {
                arg_init(l, &a, 3, "encode_sparse_array")?;
                let mut st = s.borrow_mut();
                let c = &mut st.cfg;
                let mut conv = c.sparse_convert as i32;
                let r1 = enum_option(l, &a, 1, &mut conv, None, "encode_sparse_array");
                c.sparse_convert = conv != 0;
                let r1 = r1?;
                let r2 = int_option(
                    l,
                    &a,
                    2,
                    &mut c.sparse_ratio,
                    0,
                    i32::MAX,
                    "encode_sparse_array",
                )?;
                let r3 = int_option(
                    l,
                    &a,
                    3,
                    &mut c.sparse_safe,
                    0,
                    i32::MAX,
                    "encode_sparse_array",
                )?;
                Ok((r1, r2, r3))
            }
        })?,
    )?;
    t.set(
        "encode_max_depth",
        int_setting(lua, &st, "encode_max_depth", 1, i32::MAX, |c| {
            &mut c.encode_max_depth
        })?,
    )?;
    t.set(
        "decode_max_depth",
        int_setting(lua, &st, "decode_max_depth", 1, i32::MAX, |c| {
            &mut c.decode_max_depth
        })?,
    )?;
    t.set(
        "encode_number_precision",
        int_setting(lua, &st, "encode_number_precision", 1, 14, |c| {
            &mut c.encode_number_precision
        })?,
    )?;
    t.set(
        "encode_keep_buffer",
        lua.create_function({
            let s = st.clone();
            move |l, a: MultiValue| {
                arg_init(l, &a, 1, "encode_keep_buffer")?;
                let mut st = s.borrow_mut();
                let mut v = st.cfg.encode_keep_buffer as i32;
                let r = enum_option(l, &a, 1, &mut v, None, "encode_keep_buffer");
                st.cfg.encode_keep_buffer = v != 0;
                if v == 0 {
                    st.buf = Vec::new();
                }
                r
            }
        })?,
    )?;
    t.set(
        "encode_invalid_numbers",
        lua.create_function({
            let s = st.clone();
            move |l, a: MultiValue| {
                arg_init(l, &a, 1, "encode_invalid_numbers")?;
                let mut st = s.borrow_mut();
                let opts: &[&str] = &["off", "on", "null"];
                enum_option(
                    l,
                    &a,
                    1,
                    &mut st.cfg.encode_invalid_numbers,
                    Some(opts),
                    "encode_invalid_numbers",
                )
            }
        })?,
    )?;
    t.set(
        "decode_invalid_numbers",
        lua.create_function({
            let s = st.clone();
            move |l, a: MultiValue| {
                arg_init(l, &a, 1, "decode_invalid_numbers")?;
                let mut st = s.borrow_mut();
                let mut v = st.cfg.decode_invalid_numbers as i32;
                let r = enum_option(l, &a, 1, &mut v, None, "decode_invalid_numbers");
                st.cfg.decode_invalid_numbers = v != 0;
                r
            }
        })?,
    )?;
    t.set("new", lua.create_function(|l, ()| new_instance(l))?)?;
    t.set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn int_setting(
    lua: &Lua,
    st: &Shared,
    name: &'static str,
    min: i32,
    max: i32,
    field: fn(&mut Config) -> &mut i32,
) -> Result<Function> {
    let s = st.clone();
    lua.create_function(move |l, a: MultiValue| {
        arg_init(l, &a, 1, name)?;
        let mut st = s.borrow_mut();
        int_option(l, &a, 1, field(&mut st.cfg), min, max, name)
    })
}

// ---------------------------------------------------------------------------
// Argument helpers mirroring lauxlib behaviour.

use super::args::{exact_arg, type_name};

const WRAPPER_NAME: &str = "cjson";

/// [`super::args::exact_wrapper`] named after this library.
fn exact_wrapper(lua: &Lua, f: Function) -> Result<Function> {
    super::args::exact_wrapper(lua, f, WRAPPER_NAME)
}

/// [`super::args::arg_error`] for this library's functions.
fn arg_error(lua: &Lua, narg: usize, fallback: &str, msg: &str) -> Error {
    super::args::arg_error(lua, narg, fallback, msg, Some(WRAPPER_NAME))
}

fn arg_init(lua: &Lua, a: &MultiValue, nargs: usize, fname: &str) -> Result<()> {
    if a.len() > nargs {
        return Err(arg_error(lua, nargs + 1, fname, "found too many arguments"));
    }
    Ok(())
}

fn int_option(
    lua: &Lua,
    a: &MultiValue,
    idx: usize,
    setting: &mut i32,
    min: i32,
    max: i32,
    fname: &str,
) -> Result<i32> {
    let v = a.get(idx - 1).cloned().unwrap_or(Value::Nil);
    if !v.is_nil() {
        let n = match &v {
            Value::Integer(i) => Some(*i as f64),
            Value::Number(n) => Some(*n),
            Value::String(_) => lua.coerce_number(v.clone())?,
            _ => None,
        };
        let Some(n) = n else {
            let msg = format!("number expected, got {}", type_name(&v));
            return Err(arg_error(lua, idx, fname, &msg));
        };
        // luaL_checkinteger truncates to lua_Integer, then C narrows to int.
        let value = (n as i64) as i32;
        if !(min <= value && value <= max) {
            let msg = format!("expected integer between {min} and {max}");
            return Err(arg_error(lua, 1, fname, &msg));
        }
        *setting = value;
    }
    Ok(*setting)
}

/// `json_enum_option`: booleans map to off/on, strings must be in `options`.
fn enum_option(
    lua: &Lua,
    a: &MultiValue,
    idx: usize,
    setting: &mut i32,
    options: Option<&[&str]>,
    fname: &str,
) -> Result<Value> {
    let options = options.unwrap_or(&["off", "on"]);
    let v = a.get(idx - 1).cloned().unwrap_or(Value::Nil);
    match &v {
        Value::Nil => {}
        Value::Boolean(b) => *setting = *b as i32,
        _ => {
            let s = match &v {
                Value::String(_) | Value::Integer(_) | Value::Number(_) => {
                    lua.coerce_string(v.clone())?
                }
                _ => None,
            };
            let Some(s) = s else {
                let msg = format!("string expected, got {}", type_name(&v));
                return Err(arg_error(lua, idx, fname, &msg));
            };
            let bytes = s.as_bytes();
            match options.iter().position(|o| o.as_bytes() == &bytes[..]) {
                Some(p) => *setting = p as i32,
                None => {
                    let msg = format!("invalid option '{}'", String::from_utf8_lossy(&bytes));
                    return Err(arg_error(lua, idx, fname, &msg));
                }
            }
        }
    }
    if *setting == 0 || *setting == 1 {
        Ok(Value::Boolean(*setting == 1))
    } else {
        Ok(Value::String(
            lua.create_string(options[*setting as usize])?,
        ))
    }
}

// ---------------------------------------------------------------------------
// Encoding.

fn encode(lua: &Lua, st: &Shared, v: &Value) -> Result<mlua::String> {
    let (cfg, mut buf) = {
        let mut s = st.borrow_mut();
        let buf = if s.cfg.encode_keep_buffer {
            std::mem::take(&mut s.buf)
        } else {
            Vec::new()
        };
        (s.cfg, buf)
    };
    buf.clear();
    let res = Encoder { cfg }.append(v, 0, &mut buf);
    let out = res.and_then(|()| lua.create_string(&buf));
    if cfg.encode_keep_buffer {
        st.borrow_mut().buf = buf;
    }
    out
}

struct Encoder {
    cfg: Config,
}

fn serialise_error(ty: &str, reason: &str) -> Error {
    Error::RuntimeError(format!("Cannot serialise {ty}: {reason}"))
}

impl Encoder {
    fn append(&self, v: &Value, depth: i32, out: &mut Vec<u8>) -> Result<()> {
        match v {
            Value::String(s) => append_string(&s.as_bytes(), out),
            Value::Integer(i) => self.append_number(*i as f64, out)?,
            Value::Number(n) => self.append_number(*n, out)?,
            Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Nil => out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
            Value::Table(t) => {
                let depth = depth + 1;
                if depth > self.cfg.encode_max_depth {
                    return Err(Error::RuntimeError(format!(
                        "Cannot serialise, excessive nesting ({depth})"
                    )));
                }
                match self.array_length(t)? {
                    Some(len) if len > 0 => self.append_array(t, len, depth, out)?,
                    _ => self.append_object(t, depth, out)?,
                }
            }
            other => return Err(serialise_error(type_name(other), "type not supported")),
        }
        Ok(())
    }

    /// `Some(max index)` when every key is a positive integer (and the table
    /// is not excessively sparse), `None` when it must be an object.
    fn array_length(&self, t: &Table) -> Result<Option<i64>> {
        let mut max: i64 = 0;
        let mut items: i64 = 0;
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, _) = pair?;
            let k = match k {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => return Ok(None),
            };
            if k == 0.0 || k.floor() != k || k < 1.0 {
                return Ok(None);
            }
            // C stores the max in an int; mimic its (x86) conversion.
            let ki = if k < 2147483648.0 {
                k as i64
            } else {
                i32::MIN as i64
            };
            if ki > max {
                max = ki;
            }
            items += 1;
        }
        let c = &self.cfg;
        if c.sparse_ratio > 0 && max > items * c.sparse_ratio as i64 && max > c.sparse_safe as i64 {
            if !c.sparse_convert {
                return Err(serialise_error("table", "excessively sparse array"));
            }
            return Ok(None);
        }
        Ok(Some(max))
    }

    fn append_array(&self, t: &Table, len: i64, depth: i32, out: &mut Vec<u8>) -> Result<()> {
        out.push(b'[');
        for i in 1..=len {
            if i > 1 {
                out.push(b',');
            }
            let v = match t.raw_get::<Value>(i)? {
                Value::Integer(0) => Value::Number(t.raw_get::<f64>(i)?),
                v => v,
            };
            self.append(&v, depth, out)?;
        }
        out.push(b']');
        Ok(())
    }

    fn append_object(&self, t: &Table, depth: i32, out: &mut Vec<u8>) -> Result<()> {
        out.push(b'{');
        let mut first = true;
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            if !first {
                out.push(b',');
            }
            first = false;
            match &k {
                Value::Integer(i) => {
                    out.push(b'"');
                    self.append_number(*i as f64, out)?;
                    out.extend_from_slice(b"\":");
                }
                Value::Number(n) => {
                    out.push(b'"');
                    self.append_number(*n, out)?;
                    out.extend_from_slice(b"\":");
                }
                Value::String(s) => {
                    append_string(&s.as_bytes(), out);
                    out.push(b':');
                }
                other => {
                    return Err(serialise_error(
                        type_name(other),
                        "table key must be a number or string",
                    ));
                }
            }
            let v = match v {
                Value::Integer(0) => Value::Number(t.raw_get::<f64>(k).unwrap_or(0.0)),
                v => v,
            };
            self.append(&v, depth, out)?;
        }
        out.push(b'}');
        Ok(())
    }

    fn append_number(&self, n: f64, out: &mut Vec<u8>) -> Result<()> {
        match self.cfg.encode_invalid_numbers {
            0 => {
                if !n.is_finite() {
                    return Err(serialise_error("number", "must not be NaN or Inf"));
                }
            }
            1 => {
                if n.is_nan() {
                    out.extend_from_slice(b"nan");
                    return Ok(());
                }
            }
            _ => {
                if !n.is_finite() {
                    out.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        format_g(n, self.cfg.encode_number_precision as usize, out);
        Ok(())
    }
}

fn append_string(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
            }
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

/// C's `printf("%.<prec>g", n)`.
fn format_g(n: f64, prec: usize, out: &mut Vec<u8>) {
    if n.is_nan() {
        out.extend_from_slice(if n.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return;
    }
    if n.is_infinite() {
        out.extend_from_slice(if n < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    let p = prec.max(1);
    if n == 0.0 {
        out.extend_from_slice(if n.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    let sci = format!("{:.*e}", p - 1, n);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        out.extend_from_slice(strip_zeros(mant).as_bytes());
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(e.to_string().as_bytes());
    } else {
        let fixed = format!("{:.*}", (p as i32 - 1 - exp) as usize, n);
        out.extend_from_slice(strip_zeros(&fixed).as_bytes());
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

// ---------------------------------------------------------------------------
// Decoding.

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Number => "T_NUMBER",
            Tok::Boolean => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: Tok,
    index: usize,
    num: f64,
    boolean: bool,
    err: &'static str,
}

struct Parser<'a> {
    /// Input up to (not including) the first NUL, which the C code treats
    /// as the end of the document.
    data: &'a [u8],
    pos: usize,
    depth: i32,
    cfg: Config,
    tmp: Vec<u8>,
}

fn decode(lua: &Lua, st: &Shared, a: MultiValue) -> Result<Value> {
    if a.len() != 1 {
        return Err(arg_error(lua, 1, "decode", "expected 1 argument"));
    }
    let v = a.into_iter().next().unwrap_or(Value::Nil);
    let s = match &v {
        Value::String(_) | Value::Integer(_) | Value::Number(_) => lua.coerce_string(v.clone())?,
        _ => None,
    };
    let Some(s) = s else {
        let msg = format!("string expected, got {}", type_name(&v));
        return Err(arg_error(lua, 1, "decode", &msg));
    };
    let bytes = s.as_bytes();
    if bytes.len() >= 2 && (bytes[0] == 0 || bytes[1] == 0) {
        return Err(Error::RuntimeError(
            "JSON parser does not support UTF-16 or UTF-32".into(),
        ));
    }
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    let cfg = st.borrow().cfg;
    let mut p = Parser {
        data: &bytes[..end],
        pos: 0,
        depth: 0,
        cfg,
        tmp: Vec::new(),
    };
    let tok = p.next_token();
    let value = p.process_value(lua, &tok)?;
    let tok = p.next_token();
    if tok.kind != Tok::End {
        return Err(p.parse_error("the end", &tok));
    }
    Ok(value)
}

impl Parser<'_> {
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn token(&self, kind: Tok, index: usize) -> Token {
        Token {
            kind,
            index,
            num: 0.0,
            boolean: false,
            err: "",
        }
    }

    fn error_token(&self, err: &'static str) -> Token {
        Token {
            kind: Tok::Error,
            index: self.pos,
            num: 0.0,
            boolean: false,
            err,
        }
    }

    fn parse_error(&self, expected: &str, tok: &Token) -> Error {
        let found = if tok.kind == Tok::Error {
            tok.err
        } else {
            tok.kind.name()
        };
        Error::RuntimeError(format!(
            "Expected {expected} but found {found} at character {}",
            tok.index + 1
        ))
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let ch = self.at(start);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(kind) = single {
            self.pos += 1;
            return self.token(kind, start);
        }
        if ch == 0 {
            return self.token(Tok::End, start);
        }
        let rest = &self.data[start..];
        match ch {
            b'"' => self.string_token(),
            b'-' | b'0'..=b'9' => {
                if !self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                    return self.error_token("invalid number");
                }
                self.number_token()
            }
            b'+' | b'f' | b'i' | b'I' | b'n' | b'N' | b't' => {
                if rest.starts_with(b"true") {
                    self.pos += 4;
                    Token {
                        boolean: true,
                        ..self.token(Tok::Boolean, start)
                    }
                } else if rest.starts_with(b"false") {
                    self.pos += 5;
                    self.token(Tok::Boolean, start)
                } else if rest.starts_with(b"null") {
                    self.pos += 4;
                    self.token(Tok::Null, start)
                } else if self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                    self.number_token()
                } else {
                    self.error_token("invalid token")
                }
            }
            _ => self.error_token("invalid token"),
        }
    }

    /// Detects numbers that are not strict JSON (`+1`, `0x1`, `01`, inf, nan).
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        } else if c <= b'9' {
            return false;
        }
        let rest = &self.data[p.min(self.data.len())..];
        let ci = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        ci(b"inf") || ci(b"nan")
    }

    fn number_token(&mut self) -> Token {
        let start = self.pos;
        let (num, used) = strtod(&self.data[start..]);
        if used == 0 {
            return self.error_token("invalid number");
        }
        self.pos += used;
        Token {
            num,
            ..self.token(Tok::Number, start)
        }
    }

    fn string_token(&mut self) -> Token {
        let start = self.pos;
        self.pos += 1;
        self.tmp.clear();
        loop {
            let ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return self.error_token("unexpected end of string");
            }
            if ch == b'\\' {
                let esc = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 0x0c,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape() {
                            continue;
                        }
                        return self.error_token("invalid unicode escape code");
                    }
                    _ => return self.error_token("invalid escape code"),
                };
                self.tmp.push(esc);
                self.pos += 2;
                continue;
            }
            self.tmp.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        self.token(Tok::Str, start)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            let d = (self.at(at + i) as char).to_digit(16)?;
            v = (v << 4) | d;
        }
        Some(v)
    }

    /// Decodes `\uXXXX` (and a following low surrogate) at `pos` into `tmp`.
    fn unicode_escape(&mut self) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let t = &mut self.tmp;
        if cp <= 0x7F {
            t.push(cp as u8);
        } else if cp <= 0x7FF {
            t.extend_from_slice(&[(cp >> 6) as u8 | 0xC0, (cp & 0x3F) as u8 | 0x80]);
        } else if cp <= 0xFFFF {
            t.extend_from_slice(&[
                (cp >> 12) as u8 | 0xE0,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        } else {
            t.extend_from_slice(&[
                (cp >> 18) as u8 | 0xF0,
                ((cp >> 12) & 0x3F) as u8 | 0x80,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]);
        }
        self.pos += len;
        true
    }

    fn descend(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth {
            return Err(Error::RuntimeError(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            )));
        }
        Ok(())
    }

    fn process_value(&mut self, lua: &Lua, tok: &Token) -> Result<Value> {
        Ok(match tok.kind {
            Tok::Str => Value::String(lua.create_string(&self.tmp)?),
            Tok::Number => Value::Number(tok.num),
            Tok::Boolean => Value::Boolean(tok.boolean),
            Tok::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
            Tok::ObjBegin => Value::Table(self.parse_object(lua)?),
            Tok::ArrBegin => Value::Table(self.parse_array(lua)?),
            _ => return Err(self.parse_error("value", tok)),
        })
    }

    fn parse_object(&mut self, lua: &Lua) -> Result<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if tok.kind == Tok::ObjEnd {
            self.depth -= 1;
            return Ok(t);
        }
        loop {
            if tok.kind != Tok::Str {
                return Err(self.parse_error("object key string", &tok));
            }
            let key = lua.create_string(&self.tmp)?;
            tok = self.next_token();
            if tok.kind != Tok::Colon {
                return Err(self.parse_error("colon", &tok));
            }
            tok = self.next_token();
            let v = self.process_value(lua, &tok)?;
            t.raw_set(key, v)?;
            tok = self.next_token();
            if tok.kind == Tok::ObjEnd {
                self.depth -= 1;
                return Ok(t);
            }
            if tok.kind != Tok::Comma {
                return Err(self.parse_error("comma or object end", &tok));
            }
            tok = self.next_token();
        }
    }

    fn parse_array(&mut self, lua: &Lua) -> Result<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if tok.kind == Tok::ArrEnd {
            self.depth -= 1;
            return Ok(t);
        }
        let mut i: i64 = 1;
        loop {
            let v = self.process_value(lua, &tok)?;
            t.raw_set(i, v)?;
            i += 1;
            tok = self.next_token();
            if tok.kind == Tok::ArrEnd {
                self.depth -= 1;
                return Ok(t);
            }
            if tok.kind != Tok::Comma {
                return Err(self.parse_error("comma or array end", &tok));
            }
            tok = self.next_token();
        }
    }
}

/// C `strtod` on a byte slice: returns the value and the bytes consumed
/// (0 when no number could be parsed). Handles decimal, hex, inf and nan.
fn strtod(s: &[u8]) -> (f64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let neg = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let rest = &s[i.min(s.len())..];
    let starts_ci = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    if starts_ci(b"infinity") {
        return (sign(f64::INFINITY), i + 8);
    }
    if starts_ci(b"inf") {
        return (sign(f64::INFINITY), i + 3);
    }
    if starts_ci(b"nan") {
        let mut j = i + 3;
        if at(j) == b'(' {
            let mut k = j + 1;
            while at(k).is_ascii_alphanumeric() || at(k) == b'_' {
                k += 1;
            }
            if at(k) == b')' {
                j = k + 1;
            }
        }
        return (sign(f64::NAN), j);
    }
    if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' {
        if let Some((v, used)) = parse_hex(&s[i + 2..]) {
            return (sign(v), i + 2 + used);
        }
        return (sign(0.0), i + 1);
    }
    // Decimal: digits [. digits] [e [+-] digits]
    let mut j = i;
    let mut digits = 0;
    while at(j).is_ascii_digit() {
        j += 1;
        digits += 1;
    }
    if at(j) == b'.' {
        j += 1;
        while at(j).is_ascii_digit() {
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0);
    }
    if at(j) | 0x20 == b'e' {
        let mut k = j + 1;
        if at(k) == b'+' || at(k) == b'-' {
            k += 1;
        }
        if at(k).is_ascii_digit() {
            while at(k).is_ascii_digit() {
                k += 1;
            }
            j = k;
        }
    }
    let mut text = String::with_capacity(j - i + 2);
    text.push('0');
    text.push_str(std::str::from_utf8(&s[i..j]).unwrap_or("0"));
    let text = text.replace(".e", ".0e").replace(".E", ".0E");
    let text = if text.ends_with('.') {
        format!("{text}0")
    } else {
        text
    };
    (sign(text.parse::<f64>().unwrap_or(0.0)), j)
}

/// Hex mantissa (after `0x`) with optional fraction and binary exponent.
fn parse_hex(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let mut mant: u128 = 0;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut push = |d: u32, frac: bool, exp: &mut i64| {
        if mant < (1u128 << 120) {
            mant = (mant << 4) | d as u128;
            if frac {
                *exp -= 4;
            }
        } else if !frac {
            *exp += 4;
        }
    };
    while let Some(d) = (at(i) as char).to_digit(16) {
        push(d, false, &mut exp);
        i += 1;
        any = true;
    }
    if at(i) == b'.' {
        let mut j = i + 1;
        let mut frac_any = false;
        while let Some(d) = (at(j) as char).to_digit(16) {
            push(d, true, &mut exp);
            j += 1;
            frac_any = true;
        }
        if any || frac_any {
            i = j;
            any = true;
        }
    }
    if !any {
        return None;
    }
    if at(i) | 0x20 == b'p' {
        let mut k = i + 1;
        let neg = at(k) == b'-';
        if at(k) == b'+' || at(k) == b'-' {
            k += 1;
        }
        if at(k).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(k).is_ascii_digit() {
                e = (e * 10 + (at(k) - b'0') as i64).min(1 << 20);
                k += 1;
            }
            exp += if neg { -e } else { e };
            i = k;
        }
    }
    let v = mant as f64 * 2f64.powi(exp.clamp(-2000, 2000) as i32);
    Some((v, i))
}
