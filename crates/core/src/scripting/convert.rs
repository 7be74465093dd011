//! Conversions between command replies and Lua values, as Redis's `redisProtocolToLuaType` and
//! `luaReplyToRedisReply` define them.
//!
//! A command run by `redis.call` writes its reply into a buffer in the script's protocol
//! (`redis.setresp`); `reply_to_lua` reads it back into Lua values. What the script returns is
//! written into the caller's reply by `lua_to_reply`, in the caller's protocol.

use damselfly_protocol::Reply;
use mlua::{ffi, Lua, Table, Value};

/// Nesting kept when converting Lua tables to replies (Redis stops at the Lua stack limit; a
/// self-referencing table must not recurse forever).
const MAX_DEPTH: usize = 1000;

/// One reply from `buf` at `*pos` as a Lua value (Redis's protocol-to-Lua rules, see
/// `push_reply`).
pub fn reply_to_lua(lua: &Lua, buf: &[u8], pos: &mut usize) -> mlua::Result<Value> {
    let mut p = *pos;
    // SAFETY: `push_reply` pushes one value on the stack `exec_raw` set up, which returns it;
    // its only Lua error (stack overflow, memory) is caught by `exec_raw`'s protected call.
    let v = unsafe {
        lua.exec_raw::<Value>((), |state| {
            if !push_reply(state, buf, &mut p) {
                mlua::ffi::luaL_error(state, c"reply too deeply nested".as_ptr());
            }
        })
    }?;
    *pos = p;
    Ok(v)
}

/// Pushes one reply from `buf` at `*pos` onto the Lua stack (Redis's `redisProtocolToLuaType`):
/// integers are numbers, bulk strings strings, nil bulk/array `false`, status `{ok=...}`,
/// error `{err=...}`, arrays tables; RESP3 types as Redis 7 maps them (null `nil`, booleans,
/// `{double=}`, `{big_number=}`, `{map=}`, `{set=}`, `{verbatim_string={format=, string=}}`).
/// Written against the C API because redis.call's synchronous path (a C function) converts
/// every reply with it. False when the stack cannot grow (a reply nested too deep).
///
/// # Safety
/// `state` is a valid Lua state. Pushing may raise a Lua memory error (a `longjmp` through
/// this frame, which owns nothing that needs dropping).
pub unsafe fn push_reply(state: *mut ffi::lua_State, buf: &[u8], pos: &mut usize) -> bool {
    if ffi::lua_checkstack(state, 4) == 0 {
        return false;
    }
    let kind = buf[*pos];
    let line_end = find_crlf(buf, *pos + 1);
    let line = &buf[*pos + 1..line_end];
    *pos = line_end + 2;
    let num = |l: &[u8]| -> i64 {
        std::str::from_utf8(l)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let push_str = |b: &[u8]| ffi::lua_pushlstring(state, b.as_ptr() as *const _, b.len());
    // Sets field `name` of the table under the value on the top to that value.
    let set_field = |name: &std::ffi::CStr| {
        ffi::lua_pushstring(state, name.as_ptr());
        ffi::lua_insert(state, -2);
        ffi::lua_rawset(state, -3);
    };
    // A one-field table holding the value on the top.
    let wrap = |name: &std::ffi::CStr| {
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_insert(state, -2);
        set_field(name);
    };
    match kind {
        b':' => ffi::lua_pushnumber(state, num(line) as f64),
        b'+' => {
            push_str(line);
            wrap(c"ok");
        }
        b'-' => {
            // The failed command's error is in the statistics already (Redis marks the table
            // so that the script's own error reply does not count it again).
            ffi::lua_createtable(state, 0, 2);
            push_str(line);
            set_field(c"err");
            ffi::lua_pushboolean(state, 1);
            set_field(c"ignore_error_stats_update");
        }
        b'$' | b'=' => {
            let n = num(line);
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return true;
            }
            let body = &buf[*pos..*pos + n as usize];
            *pos += n as usize + 2;
            if kind == b'=' {
                // "txt:..." : format and text.
                let (fmt, text) = if body.len() >= 4 {
                    (&body[..3], &body[4..])
                } else {
                    (&b"txt"[..], body)
                };
                ffi::lua_createtable(state, 0, 2);
                push_str(fmt);
                set_field(c"format");
                push_str(text);
                set_field(c"string");
                wrap(c"verbatim_string");
            } else {
                push_str(body);
            }
        }
        b'*' | b'~' | b'>' => {
            let n = num(line);
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return true;
            }
            if kind == b'~' {
                ffi::lua_createtable(state, 0, n.min(1 << 16) as i32);
                for _ in 0..n {
                    if !push_reply(state, buf, pos) {
                        return false;
                    }
                    ffi::lua_pushboolean(state, 1);
                    ffi::lua_rawset(state, -3);
                }
                wrap(c"set");
            } else {
                ffi::lua_createtable(state, n.min(1 << 16) as i32, 0);
                for i in 0..n {
                    if !push_reply(state, buf, pos) {
                        return false;
                    }
                    ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
                }
            }
        }
        b'%' => {
            let n = num(line);
            ffi::lua_createtable(state, 0, n.clamp(0, 1 << 16) as i32);
            for _ in 0..n.max(0) {
                if !push_reply(state, buf, pos) || !push_reply(state, buf, pos) {
                    return false;
                }
                ffi::lua_rawset(state, -3);
            }
            wrap(c"map");
        }
        b'|' => {
            // Attributes are out-of-band: skipped, the reply that follows is the value.
            let n = num(line);
            for _ in 0..n.max(0) * 2 {
                if !push_reply(state, buf, pos) {
                    return false;
                }
                ffi::lua_pop(state, 1);
            }
            return push_reply(state, buf, pos);
        }
        b'_' => ffi::lua_pushnil(state),
        b'#' => ffi::lua_pushboolean(state, (line == b"t") as i32),
        b',' => {
            let s = std::str::from_utf8(line).unwrap_or("0");
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                "nan" => f64::NAN,
                s => s.parse().unwrap_or(0.0),
            };
            ffi::lua_pushnumber(state, d);
            wrap(c"double");
        }
        b'(' => {
            push_str(line);
            wrap(c"big_number");
        }
        _ => ffi::lua_pushnil(state),
    }
    true
}

fn find_crlf(buf: &[u8], from: usize) -> usize {
    buf[from..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(buf.len(), |p| from + p)
}

/// A one-field table (`{ok=...}`, `{err=...}`, `{double=...}`...).
pub fn single(lua: &Lua, field: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, v)?;
    Ok(Value::Table(t))
}

/// Writes what the script returned into `reply` (Redis's `luaReplyToRedisReply`). `script_resp3`:
/// the script's own protocol (`redis.setresp`), which decides how booleans come out.
/// Returns true when the reply is an error the statistics counted already (an error table of
/// a redis.call: `ignore_error_stats_update`).
pub fn lua_to_reply(v: &Value, reply: &mut Reply, script_resp3: bool) -> bool {
    write_value(v, reply, script_resp3, 0);
    match v {
        Value::Table(t) => {
            matches!(t.raw_get::<Value>("err"), Ok(Value::String(_)))
                && matches!(
                    t.raw_get::<Value>("ignore_error_stats_update"),
                    Ok(Value::Boolean(true))
                )
        }
        _ => false,
    }
}

fn write_value(v: &Value, reply: &mut Reply, script_resp3: bool, depth: usize) {
    match v {
        Value::String(s) => reply.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if !script_resp3 {
                if *b {
                    reply.int(1);
                } else {
                    reply.null();
                }
            } else {
                reply.bool(*b);
            }
        }
        Value::Integer(i) => reply.int(*i),
        Value::Number(n) => reply.int(number_to_int(*n)),
        Value::Table(t) if depth < MAX_DEPTH => write_table(t, reply, script_resp3, depth),
        Value::Table(_) => reply.error("ERR reached lua stack limit"),
        _ => reply.null(),
    }
}

/// Lua numbers become integers by C's truncating cast, as Redis's `(long long)lua_tonumber`:
/// on x86-64 a NaN or a value outside the i64 range (2^63, what INCR's 9223372036854775807
/// becomes as a Lua number) gives i64::MIN, where Rust's `as` would saturate.
fn number_to_int(n: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn write_table(t: &Table, reply: &mut Reply, script_resp3: bool, depth: usize) {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        let msg = e.as_bytes();
        reply.error_bytes(&sanitize_error(&msg));
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        reply.simple(&String::from_utf8_lossy(&s.as_bytes()));
        return;
    }
    if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
        reply.double(d);
        return;
    }
    if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
        reply.double(d as f64);
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        let digits: String = String::from_utf8_lossy(&s.as_bytes())
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        reply.big_number(&digits);
        return;
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        reply.map(pairs.len());
        for (k, v) in &pairs {
            write_value(k, reply, script_resp3, depth + 1);
            write_value(v, reply, script_resp3, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let members: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| k)
            .collect();
        reply.set(members.len());
        for k in &members {
            write_value(k, reply, script_resp3, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(vs)) = t.raw_get::<Value>("verbatim_string") {
        let format: Option<mlua::String> = vs.raw_get("format").ok();
        let text: Option<mlua::String> = vs.raw_get("string").ok();
        if let (Some(f), Some(s)) = (format, text) {
            let f = f.to_string_lossy();
            if f.len() == 3 {
                reply.verbatim(&f, &s.as_bytes());
                return;
            }
        }
    }
    // An array, up to the first nil.
    let mut items = Vec::new();
    let mut i = 1;
    loop {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
        i += 1;
    }
    reply.array(items.len());
    for v in &items {
        write_value(v, reply, script_resp3, depth + 1);
    }
}

/// An error text as Redis sends it from a script: new lines become spaces (the reply is one
/// line).
fn sanitize_error(msg: &[u8]) -> Vec<u8> {
    msg.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_truncate_like_a_c_cast() {
        assert_eq!(number_to_int(3.9), 3);
        assert_eq!(number_to_int(-3.9), -3);
        assert_eq!(number_to_int(9_223_372_036_854_775_807.0), i64::MIN);
        assert_eq!(number_to_int(-9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(number_to_int(1e300), i64::MIN);
        assert_eq!(number_to_int(f64::NAN), i64::MIN);
    }

    fn roundtrip(bytes: &[u8], resp3: bool) -> Vec<u8> {
        let lua = Lua::new();
        let mut pos = 0;
        let v = reply_to_lua(&lua, bytes, &mut pos).unwrap();
        assert_eq!(pos, bytes.len());
        let mut r = Reply::new(if resp3 {
            damselfly_protocol::RespVersion::Resp3
        } else {
            damselfly_protocol::RespVersion::Resp2
        });
        lua_to_reply(&v, &mut r, resp3);
        r.take()
    }

    #[test]
    fn replies_come_back_as_redis_writes_them() {
        assert_eq!(roundtrip(b":42\r\n", false), b":42\r\n");
        assert_eq!(roundtrip(b"$3\r\nabc\r\n", false), b"$3\r\nabc\r\n");
        assert_eq!(roundtrip(b"+OK\r\n", false), b"+OK\r\n");
        assert_eq!(roundtrip(b"-ERR bad\r\n", false), b"-ERR bad\r\n");
        // nil bulk -> false -> nil in RESP2.
        assert_eq!(roundtrip(b"$-1\r\n", false), b"$-1\r\n");
        assert_eq!(
            roundtrip(b"*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n", false),
            b"*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n"
        );
        // Arrays stop at the first nil (a RESP3 null inside an array).
        assert_eq!(roundtrip(b"*3\r\n:1\r\n_\r\n:3\r\n", true), b"*1\r\n:1\r\n");
        assert_eq!(
            roundtrip(b"%1\r\n$1\r\nk\r\n:1\r\n", true),
            b"%1\r\n$1\r\nk\r\n:1\r\n"
        );
        assert_eq!(roundtrip(b",1.5\r\n", true), b",1.5\r\n");
        assert_eq!(roundtrip(b"#t\r\n", true), b"#t\r\n");
        assert_eq!(roundtrip(b"(123\r\n", true), b"(123\r\n");
    }
}
