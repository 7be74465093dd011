//! LuaBitOp 1.0 (`bit` global) as embedded by Redis' Lua 5.1.
//!
//! All operations work on 32-bit integers and return signed 32-bit results
//! as Lua numbers, exactly like the C library does on a double-based Lua.

use mlua::{Error, Lua, MultiValue, Result, Value};

/// Registers the global `bit` table.
pub fn register(lua: &Lua) -> Result<()> {
    let bit = lua.create_table()?;
    bit.set(
        "tobit",
        lua.create_function(|l, a: MultiValue| ret(barg(l, &a, 1, "tobit")?))?,
    )?;
    bit.set(
        "bnot",
        lua.create_function(|l, a: MultiValue| ret(!barg(l, &a, 1, "bnot")?))?,
    )?;
    bit.set("band", fold(lua, "band", |x, y| x & y)?)?;
    bit.set("bor", fold(lua, "bor", |x, y| x | y)?)?;
    bit.set("bxor", fold(lua, "bxor", |x, y| x ^ y)?)?;
    bit.set("lshift", shift(lua, "lshift", |b, n| b << n)?)?;
    bit.set("rshift", shift(lua, "rshift", |b, n| b >> n)?)?;
    bit.set(
        "arshift",
        shift(lua, "arshift", |b, n| ((b as i32) >> n) as u32)?,
    )?;
    bit.set("rol", shift(lua, "rol", |b, n| b.rotate_left(n))?)?;
    bit.set("ror", shift(lua, "ror", |b, n| b.rotate_right(n))?)?;
    bit.set(
        "bswap",
        lua.create_function(|l, a: MultiValue| ret(barg(l, &a, 1, "bswap")?.swap_bytes()))?,
    )?;
    bit.set("tohex", lua.create_function(tohex)?)?;
    lua.globals().set("bit", bit)
}

/// Results are reinterpreted as signed, as `BRET` does in the C code.
fn ret(b: u32) -> Result<f64> {
    Ok(b as i32 as f64)
}

fn fold(lua: &Lua, name: &'static str, op: fn(u32, u32) -> u32) -> Result<mlua::Function> {
    lua.create_function(move |l, a: MultiValue| {
        let mut b = barg(l, &a, 1, name)?;
        // The C code folds from the last argument down to the second; the
        // order only matters for which bad argument gets reported first.
        for i in (2..=a.len()).rev() {
            b = op(b, barg(l, &a, i, name)?);
        }
        ret(b)
    })
}

fn shift(lua: &Lua, name: &'static str, op: fn(u32, u32) -> u32) -> Result<mlua::Function> {
    lua.create_function(move |l, a: MultiValue| {
        let b = barg(l, &a, 1, name)?;
        let n = barg(l, &a, 2, name)? & 31;
        ret(op(b, n))
    })
}

fn tohex(l: &Lua, a: MultiValue) -> Result<mlua::String> {
    let mut b = barg(l, &a, 1, "tohex")?;
    let mut n: i32 = if a.len() < 2 {
        8
    } else {
        barg(l, &a, 2, "tohex")? as i32
    };
    let mut digits: &[u8; 16] = b"0123456789abcdef";
    if n == i32::MIN {
        n = i32::MIN + 1;
    }
    if n < 0 {
        n = -n;
        digits = b"0123456789ABCDEF";
    }
    let n = n.min(8) as usize;
    let mut buf = [0u8; 8];
    for slot in buf[..n].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    l.create_string(&buf[..n])
}

/// Converts argument `idx` (1-based) to 32 bits using the 2^52+2^51 trick,
/// so rounding and wrap-around match LuaBitOp bit for bit.
fn barg(lua: &Lua, args: &MultiValue, idx: usize, fname: &str) -> Result<u32> {
    let v = args.get(idx - 1).cloned();
    let n = match &v {
        Some(Value::Number(n)) => Some(*n),
        Some(Value::Integer(i)) => Some(*i as f64),
        Some(s @ Value::String(_)) => lua.coerce_number(s.clone())?,
        _ => None,
    };
    match n {
        Some(n) => Ok((n + 6755399441055744.0).to_bits() as u32),
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

use super::args::type_name;

/// [`super::args::arg_error`] for the running function (bit's functions are called directly).
fn arg_error(lua: &Lua, narg: usize, fallback: &str, msg: &str) -> Error {
    super::args::arg_error(lua, narg, fallback, msg, None)
}
