//! Redis 7 functions: libraries of named Lua functions (FUNCTION LOAD, FCALL).
//!
//! Like the script cache, the library registry is replicated: every thread holds every
//! library's code and its functions' metadata (`LIBRARIES`), updated by broadcast before the
//! loading command answers. Each thread turns a library's code into callable functions on its
//! own interpreter the first time one of them is called there (`callback`).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, Lua, Table, Value};

use super::ScriptFlags;
use crate::engine::Worker;

/// A function as FUNCTION LIST shows it.
#[derive(Clone, Debug)]
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<String>,
    pub flags: ScriptFlags,
}

/// A loaded library.
#[derive(Clone, Debug)]
pub struct Library {
    pub name: String,
    pub code: Arc<str>,
    pub functions: Vec<FunctionInfo>,
}

thread_local! {
    /// Every library by name (the same on every thread).
    static LIBRARIES: RefCell<BTreeMap<String, Arc<Library>>> = const { RefCell::new(BTreeMap::new()) };
}

/// The library holding function `name`, and that function's entry.
pub fn find(name: &str) -> Option<(Arc<Library>, FunctionInfo)> {
    LIBRARIES.with(|l| {
        l.borrow().values().find_map(|lib| {
            lib.functions
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(name))
                .map(|f| (lib.clone(), f.clone()))
        })
    })
}

/// Every library, by name.
pub fn all() -> Vec<Arc<Library>> {
    LIBRARIES.with(|l| l.borrow().values().cloned().collect())
}

/// (libraries, functions) for FUNCTION STATS and INFO.
pub fn counts() -> (usize, usize) {
    LIBRARIES.with(|l| {
        let l = l.borrow();
        (l.len(), l.values().map(|x| x.functions.len()).sum())
    })
}

/// Bytes the libraries hold (INFO `used_memory_functions`).
pub fn memory() -> usize {
    LIBRARIES.with(|l| {
        l.borrow()
            .values()
            .map(|x| x.code.len() + x.name.len() + x.functions.len() * 96 + 64)
            .sum()
    })
}

/// Library names: letters, digits and underscores, at least one (Redis's
/// `functionsVerifyName`).
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The `#!lua name=<lib>` first line: (engine, library name, where the code starts).
fn metadata(code: &str) -> Result<(String, String, usize), String> {
    if !code.starts_with("#!") {
        return Err("Missing library metadata".into());
    }
    let end = code.find('\n').ok_or("Invalid library metadata")?;
    // "#!<engine> name=<lib>": the engine is what follows "#!" up to the first space (maybe
    // nothing); a quoted value loses its quotes, as Redis's sdssplitargs reads it.
    let line = &code[2..end];
    let (engine, rest) = line.split_once(' ').unwrap_or((line, ""));
    let engine = engine.to_string();
    let mut name = None;
    for p in rest.split(' ').filter(|p| !p.is_empty()) {
        let unquoted = p.strip_prefix("name=").map(|v| {
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v)
        });
        match unquoted {
            Some(n) if name.is_none() => name = Some(n.to_string()),
            Some(_) => {
                return Err("Invalid metadata value, name argument was given multiple times".into())
            }
            None => return Err(format!("Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("Library name was not given")?;
    Ok((engine, name, end))
}

/// How long library code may run at FUNCTION LOAD (Redis's LOAD_TIMEOUT_MS).
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// The library name in `code`'s metadata line, if it has a valid one.
pub fn library_name(code: &str) -> Option<String> {
    metadata(code).ok().map(|(_, name, _)| name)
}

/// What a library's code registers when it runs (`redis.register_function` calls).
type Registered = Vec<(FunctionInfo, Function)>;

/// Runs `code` (the whole library, metadata line included) on `lua` in the load environment
/// and returns what it registered. The load environment's `redis` table has
/// `register_function`, `log` and the constants; anything else there, and any global not in
/// the protected environment, is an error, as in Redis.
fn run_library(lua: &Lua, env: &Table, code: &str, skip: usize) -> Result<Registered, String> {
    let registered: Rc<RefCell<Registered>> = Rc::new(RefCell::new(Vec::new()));
    let f = lua
        .load(&code.as_bytes()[skip..])
        .set_name("@user_function")
        .into_function()
        .map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => {
                format!("Error compiling function: {message}")
            }
            other => format!("Error compiling function: {other}"),
        })?;
    let f = super::tailcall::without_tail_calls(lua, f, "@user_function");
    let reg = registered.clone();
    let mode = lua.create_table().map_err(|e| e.to_string())?;
    mode.raw_set("loading", true).map_err(|e| e.to_string())?;
    let mode_in = mode.clone();
    let register = lua
        .create_function(move |lua, args: mlua::MultiValue| {
            if !mode_in.raw_get::<bool>("loading").unwrap_or(false) {
                return Err(mlua::Error::external(super::ScriptError {
                    msg: "ERR redis.register_function can only be called on FUNCTION LOAD command"
                        .into(),
                    line: None,
                    counted: false,
                }));
            }
            let info = register_args(lua, args).map_err(|msg| {
                mlua::Error::external(super::ScriptError {
                    msg: format!("ERR {msg}"),
                    line: None,
                    counted: false,
                })
            })?;
            let mut reg = reg.borrow_mut();
            if !valid_name(&info.0.name) {
                return Err(mlua::Error::external(super::ScriptError {
                    msg: "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into(),
                    line: None,
                    counted: false,
                }));
            }
            if reg.iter().any(|(i, _)| i.name == info.0.name) {
                return Err(mlua::Error::external(super::ScriptError {
                    msg: "ERR Function already exists in the library".into(),
                    line: None,
                    counted: false,
                }));
            }
            reg.push(info);
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    let load_env = load_environment(lua, env, register, &mode).map_err(|e| e.to_string())?;
    f.set_environment(load_env).map_err(|e| e.to_string())?;
    // Library code gets LOAD_TIMEOUT to register its functions (Redis's FUNCTION LOAD
    // timeout): a loop at load time must not hold the thread.
    let started = std::time::Instant::now();
    lua.set_hook(
        mlua::HookTriggers::new().every_nth_instruction(100_000),
        move |_, _| {
            if started.elapsed() > LOAD_TIMEOUT {
                return Err(mlua::Error::external(super::ScriptError {
                    msg: "ERR FUNCTION LOAD timeout".into(),
                    line: None,
                    counted: false,
                }));
            }
            Ok(mlua::VmState::Continue)
        },
    );
    let ran = f.call::<()>(());
    lua.remove_hook();
    // The callbacks keep this environment: from now on it shows the full `redis` table.
    let _ = mode.raw_set("loading", false);
    ran.map_err(|e| {
        let text = super::error_text(&e);
        let text = if text.starts_with("ERR ") {
            text
        } else {
            format!("ERR {text}")
        };
        format!("Error registering functions: {text}")
    })?;
    let out = std::mem::take(&mut *registered.borrow_mut());
    Ok(out)
}

/// The environment library code runs in while loading: the protected globals, but with a
/// `redis` table that only registers functions and logs.
fn load_environment(
    lua: &Lua,
    env: &Table,
    register: Function,
    mode: &Table,
) -> mlua::Result<Table> {
    let redis: Table = env.get("redis")?;
    let load_redis = lua.create_table()?;
    load_redis.raw_set("register_function", register)?;
    for k in [
        "log",
        "LOG_DEBUG",
        "LOG_VERBOSE",
        "LOG_NOTICE",
        "LOG_WARNING",
        "REDIS_VERSION",
        "REDIS_VERSION_NUM",
    ] {
        load_redis.raw_set(k, redis.get::<Value>(k)?)?;
    }
    let load_env: Table = lua
        .load(
            r#"
local env, load_redis, mode, real = ...
local redis_view = setmetatable({}, {
  __index = function(_, k)
    local v = load_redis[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
return setmetatable({}, {
  __index = function(_, k)
    -- While loading, library code sees only its `redis` table (as in Redis); its functions
    -- later run with the scripts' globals.
    local v
    if mode.loading then
      if k == 'redis' then return redis_view end
    else
      v = rawget(real, k)
    end
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = false,
})
"#,
        )
        .set_name("=load_env")
        .call((
            env.clone(),
            load_redis,
            mode.clone(),
            lua.named_registry_value::<Table>("damselfly_real_globals")?,
        ))?;
    Ok(load_env)
}

/// redis.register_function's two forms: (name, callback) or {function_name=, callback=,
/// description=, flags={...}}.
fn register_args(_lua: &Lua, args: mlua::MultiValue) -> Result<(FunctionInfo, Function), String> {
    let args: Vec<Value> = args.into_iter().collect();
    match args.as_slice() {
        [Value::Table(t)] => {
            let (mut name, mut callback, mut description) = (None, None, None);
            let mut flags = ScriptFlags {
                shebang: true,
                ..Default::default()
            };
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                let Value::String(k) = k else {
                    return Err(
                        "named argument key given to redis.register_function is not a string"
                            .into(),
                    );
                };
                match k.to_string_lossy().to_ascii_lowercase().as_str() {
                    "function_name" => match v {
                        Value::String(s) => name = Some(s.to_string_lossy().to_string()),
                        _ => return Err("function_name argument given to redis.register_function must be a string".into()),
                    },
                    "description" => match v {
                        Value::String(s) => description = Some(s.to_string_lossy().to_string()),
                        _ => return Err("description argument given to redis.register_function must be a string".into()),
                    },
                    "callback" => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return Err("callback argument given to redis.register_function must be a function".into()),
                    },
                    "flags" => {
                        let Value::Table(ft) = v else {
                            return Err("flags argument to redis.register_function must be a table representing function flags".into());
                        };
                        for f in ft.sequence_values::<Value>() {
                            let Ok(Value::String(f)) = f else {
                                return Err("unknown flag given".into());
                            };
                            match f.to_string_lossy().as_ref() {
                                "no-writes" => flags.no_writes = true,
                                "allow-oom" => flags.allow_oom = true,
                                "allow-stale" => flags.allow_stale = true,
                                "no-cluster" => flags.no_cluster = true,
                                "allow-cross-slot-keys" => flags.allow_cross_slot = true,
                                _ => return Err("unknown flag given".into()),
                            }
                        }
                    }
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let name = name.ok_or("redis.register_function must get a function name argument")?;
            let callback = callback.ok_or("redis.register_function must get a callback argument")?;
            Ok((
                FunctionInfo {
                    name,
                    description,
                    flags,
                },
                callback,
            ))
        }
        [_] => Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into()),
        [n, f] => {
            let Value::String(n) = n else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Value::Function(f) = f else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            Ok((
                FunctionInfo {
                    name: n.to_string_lossy().to_string(),
                    description: None,
                    flags: ScriptFlags {
                        shebang: true,
                        ..Default::default()
                    },
                },
                f.clone(),
            ))
        }
        _ => Err("wrong number of arguments to redis.register_function".into()),
    }
}

/// FUNCTION LOAD on this thread: checks and runs `code`, returning the library to install
/// everywhere (Redis's `functionsCreateWithLibraryCtx`). `replace`: an existing library of the
/// same name is replaced.
pub fn prepare(code: &str, replace: bool) -> Result<Library, String> {
    let (engine, name, skip) = metadata(code)?;
    if !valid_name(&name) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    if !replace && LIBRARIES.with(|l| l.borrow().contains_key(&name)) {
        return Err(format!("Library '{name}' already exists"));
    }
    let vm = super::vm();
    let env = vm.env().map_err(|e| e.to_string())?;
    let registered = run_library(&vm.lua, &env, code, skip)?;
    if registered.is_empty() {
        return Err("No functions registered".into());
    }
    let clash = LIBRARIES.with(|l| {
        l.borrow().values().find_map(|lib| {
            if lib.name == name {
                return None;
            }
            registered
                .iter()
                .find(|(i, _)| lib.functions.iter().any(|f| f.name == i.name))
                .map(|(i, _)| i.name.clone())
        })
    });
    if let Some(f) = clash {
        return Err(format!("Function {f} already exists"));
    }
    let lib = Library {
        name,
        code: Arc::from(code),
        functions: registered.iter().map(|(i, _)| i.clone()).collect(),
    };
    // This thread has the callbacks already.
    let callbacks = registered
        .into_iter()
        .map(|(i, f)| (i.name, f))
        .collect::<HashMap<_, _>>();
    vm.functions
        .borrow_mut()
        .insert(lib.name.clone(), (lib.code.clone(), callbacks));
    Ok(lib)
}

/// Installs `libs` on every thread (replacing libraries of the same names; `flush` first
/// removes every library).
pub async fn install(worker: &Rc<Worker>, libs: Vec<Library>, flush: bool) {
    let libs = Arc::new(libs);
    worker
        .broadcast(move |_| {
            LIBRARIES.with(|l| {
                let mut l = l.borrow_mut();
                if flush {
                    l.clear();
                }
                for lib in libs.iter() {
                    l.insert(lib.name.clone(), Arc::new(lib.clone()));
                }
            })
        })
        .await;
}

/// Loads libraries from a snapshot on this thread: each is checked and compiled here, then
/// they replace this thread's libraries (`flush`) or join them (an existing name is an error).
pub fn load_here(codes: &[String], flush: bool, merge: bool) -> Result<(), String> {
    let mut libs = Vec::new();
    for code in codes {
        let lib = prepare(code, true)?;
        if !flush && !merge && LIBRARIES.with(|l| l.borrow().contains_key(&lib.name)) {
            return Err(format!("Library {} already exists", lib.name));
        }
        libs.push(lib);
    }
    LIBRARIES.with(|l| {
        let mut l = l.borrow_mut();
        if flush {
            l.clear();
        }
        for lib in libs {
            l.insert(lib.name.clone(), Arc::new(lib));
        }
    });
    Ok(())
}

/// `load_here` on every thread (DEBUG RELOAD); the first error, if any.
pub async fn load_all(
    worker: &Rc<Worker>,
    codes: Vec<String>,
    flush: bool,
    merge: bool,
) -> Result<(), String> {
    let codes = Arc::new(codes);
    let results = worker
        .broadcast(move |_| load_here(&codes, flush, merge))
        .await;
    results
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map(|_| ())
}

/// FUNCTION DELETE / FLUSH on every thread (`None`: all).
pub async fn remove(worker: &Rc<Worker>, name: Option<String>) {
    worker
        .broadcast(move |_| {
            LIBRARIES.with(|l| match &name {
                Some(n) => {
                    l.borrow_mut().remove(n);
                }
                None => l.borrow_mut().clear(),
            })
        })
        .await;
}

/// The callable of function `func` of `lib` on this thread, loading the library's code into
/// this thread's interpreter if it has not run here (or changed since).
pub fn callback(lib: &Library, func: &str) -> Result<Function, String> {
    let vm = super::vm();
    {
        let map = vm.functions.borrow();
        if let Some((code, cbs)) = map.get(&lib.name) {
            if Arc::ptr_eq(code, &lib.code) || **code == *lib.code {
                if let Some(f) = cbs.get(func) {
                    return Ok(f.clone());
                }
            }
        }
    }
    let (_, _, skip) = metadata(&lib.code)?;
    let env = vm.env().map_err(|e| e.to_string())?;
    let registered = run_library(&vm.lua, &env, &lib.code, skip)?;
    let cbs: HashMap<String, Function> = registered.into_iter().map(|(i, f)| (i.name, f)).collect();
    let f = cbs.get(func).cloned().ok_or("Function not found")?;
    vm.functions
        .borrow_mut()
        .insert(lib.name.clone(), (lib.code.clone(), cbs));
    Ok(f)
}
