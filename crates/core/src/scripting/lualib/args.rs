//! What the libraries share: Lua's type names, `luaL_argerror`'s messages, and the wrapper
//! that keeps float arguments exact on their way into Rust.

use mlua::{Error, Function, Lua, Result, Table, Value};

/// Lua's own type names (mlua reports light userdata and integers differently).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// A Lua wrapper (chunk name `wrapper`) that forwards `(select('#', ...), {...})` so that
/// numbers reach Rust unmodified (mlua turns tiny floats and -0.0 into integer 0).
pub fn exact_wrapper(lua: &Lua, f: Function, wrapper: &str) -> Result<Function> {
    lua.load("local f = ... return function(...) return f(select('#', ...), {...}) end")
        .set_name(format!("={wrapper}"))
        .call(f)
}

/// Reads argument `i` from an [`exact_wrapper`] table, keeping float precision.
pub fn exact_arg(args: &Table, i: usize) -> Result<Value> {
    match args.raw_get::<Value>(i)? {
        Value::Integer(0) => Ok(Value::Number(args.raw_get::<f64>(i)?)),
        v => Ok(v),
    }
}

/// The message of `luaL_argerror`, naming the function as the caller sees it. `wrapper`: the
/// chunk name of the library's [`exact_wrapper`], when its functions are reached through one
/// (then the user-visible frame is the wrapper's, and a tail call into it hides its name:
/// `fallback` is used); without, the running function's own frame is asked.
pub fn arg_error(
    lua: &Lua,
    mut narg: usize,
    fallback: &str,
    msg: &str,
    wrapper: Option<&str>,
) -> Error {
    let names = |level: usize| {
        lua.inspect_stack(level).map(|d| {
            let n = d.names();
            (n.name.map(|s| s.into_owned()), n.name_what.unwrap_or(""))
        })
    };
    let (name, what) = match wrapper {
        None => names(0).unwrap_or((Some(fallback.to_string()), "")),
        Some(w) => {
            let wrapped = lua
                .inspect_stack(1)
                .is_some_and(|d| d.source().short_src.as_deref() == Some(w));
            let (mut name, what) = names(wrapped as usize).unwrap_or((None, ""));
            if wrapped && name.is_none() {
                name = Some(fallback.to_string());
            }
            (name, what)
        }
    };
    if what == "method" {
        narg -= 1;
        if narg == 0 {
            let name = name.unwrap_or_else(|| "?".into());
            return Error::RuntimeError(format!("calling '{name}' on bad self ({msg})"));
        }
    }
    let name = name.unwrap_or_else(|| "?".into());
    Error::RuntimeError(format!("bad argument #{narg} to '{name}' ({msg})"))
}
