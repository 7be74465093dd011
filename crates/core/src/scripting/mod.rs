//! Lua scripting (EVAL and friends): one Lua 5.1 interpreter per thread, the script cache, and
//! how a script's `redis.call` reaches the keyspace. Design: docs/design/scripting.md.
//!
//! A script runs as a coroutine driven by the EVAL handler's future (`run`). `redis.call` is an
//! async Lua function: it leaves its command in this thread's `REQUEST` slot and waits; the
//! handler, seeing the coroutine pending with a request, executes the command through
//! `commands::execute` inside the script's transaction and hands the reply back. So commands
//! reach other shards by the usual hops, the thread keeps serving others meanwhile, and the
//! handler is the only place that touches the connection.

pub mod busy;
pub mod commands;
pub mod convert;
pub mod functions;
pub mod lualib;
pub mod slot;
mod tailcall;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use crate::engine::Worker;

/// DEBUG set-disable-deny-scripts: scripts may run `noscript` commands (a test aid, as in
/// Redis).
pub static DENY_SCRIPT_OFF: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// A script's id: the hex SHA1 of its body, as Redis names scripts.
pub type Sha = [u8; 40];

/// Maps keyed by script id, looked up on every EVALSHA: a script id is a hex SHA1, uniform
/// already, so its first 16 digits make the hash (SipHash over 40 bytes showed in profiles).
type ShaMap<V> = HashMap<Sha, V, std::hash::BuildHasherDefault<ShaHasher>>;

#[derive(Default)]
struct ShaHasher(u64);

impl std::hash::Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8).take(2) {
            let mut a = [0u8; 8];
            a[..c.len()].copy_from_slice(c);
            self.0 = (self.0 ^ u64::from_le_bytes(a)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_usize(&mut self, _: usize) {}
}

pub fn sha1_hex(body: &[u8]) -> Sha {
    let hex = sha1_smol::Sha1::from(body).digest().to_string();
    let mut out = [0u8; 40];
    out.copy_from_slice(hex.as_bytes());
    out
}

/// A script's flags from its `#!lua flags=...` shebang (Redis 7). A script without a shebang
/// runs in compatibility mode: it may write, and the server's state is checked per command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    pub shebang: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot: bool,
}

/// Redis's `evalExtractShebangFlags`: the flags and the length of the shebang line (the body
/// compiled starts after it, so line numbers count from the shebang line's newline).
pub fn parse_shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    let mut flags = ScriptFlags::default();
    if !body.starts_with(b"#!") {
        return Ok((flags, 0));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    if parts.is_empty() {
        return Err("Invalid engine in script shebang".into());
    }
    if parts[0] != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {}", parts[0]));
    }
    flags.shebang = true;
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {p}"));
        };
        for f in list.split(',') {
            match f {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot = true,
                "" if list.is_empty() => {}
                other => return Err(format!("Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok((flags, end))
}

/// A script error on its way out of Lua: the error reply's text (code first) and, when known,
/// the script line it happened on. Carried through Lua as a Rust error value so that neither
/// the text nor the line is lost to Lua's string conversion.
#[derive(Debug, Clone)]
pub struct ScriptError {
    pub msg: String,
    pub line: Option<i64>,
    /// A redis.call's error, counted in the error statistics when the command failed (Redis's
    /// `ignore_error_stats_update`): the script's own error reply does not count it again.
    pub counted: bool,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for ScriptError {}

/// A Lua `error(value)` raised by the script, as its text (position included): kept apart from
/// errors of Rust functions, which get their caller's position added (`error_text`).
#[derive(Debug, Clone)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// A command a running script asked for (`redis.call`/`redis.pcall`), answered with its reply
/// bytes in the script's protocol.
pub struct Request {
    pub args: Vec<Vec<u8>>,
    pub done: tokio::sync::oneshot::Sender<Vec<u8>>,
}

/// The running script's settings that its `redis.*` functions read and change. One per thread
/// is enough: scripts hold every shard exclusively, so at most one runs at a time (see
/// `scripting::commands`), and it is reset when a script starts.
pub struct RunState {
    pub resp3: Cell<bool>,
    pub running: Cell<bool>,
    /// The ACL user of the client running the script (what redis.acl_check_cmd asks about);
    /// `None` for a user who may run anything (most scripts: no reference count to touch).
    pub user: RefCell<Option<Arc<crate::acl::User>>>,
}

/// The Lua interpreter of one thread, with the scripts compiled on it.
pub(crate) struct Vm {
    lua: Lua,
    /// The protected environment scripts run in (a read-only view of the real globals).
    env: Table,
    compiled: RefCell<ShaMap<std::rc::Rc<Compiled>>>,
    /// Coroutines of functions that returned normally, reused by the next ones
    /// (`Thread::reset`): creating one per call was a large share of a short script's cost and
    /// garbage.
    threads: RefCell<Vec<mlua::Thread>>,
    /// The same for EVAL scripts, with their futures (see `Pooled`).
    pool: RefCell<Vec<Pooled>>,
    /// The collector pause set now (`tune_gc`).
    gc_pause: Cell<std::os::raw::c_int>,
    /// The interpreter's main state, for the C-API work done between scripts
    /// (`set_keys_argv`).
    main: *mut mlua::ffi::lua_State,
    /// Registry references: the real globals, and the KEYS and ARGV tables (with their
    /// global's name) that the next script reuses.
    real_ref: std::os::raw::c_int,
    keys_ref: Cell<(&'static std::ffi::CStr, std::os::raw::c_int)>,
    argv_ref: Cell<(&'static std::ffi::CStr, std::os::raw::c_int)>,
    /// Function libraries run on this interpreter: name -> (the code that ran, its
    /// functions' callbacks).
    #[allow(clippy::type_complexity)]
    functions: RefCell<HashMap<String, (Arc<str>, HashMap<String, Function>)>>,
}

thread_local! {
    static VM: RefCell<Option<std::rc::Rc<Vm>>> = const { RefCell::new(None) };
    /// This thread's copy of the script cache (every thread has every script: a script loaded
    /// on one connection is callable from all).
    static BODIES: RefCell<ShaMap<Arc<[u8]>>> = RefCell::new(ShaMap::default());
    static REQUEST: RefCell<Option<Request>> = const { RefCell::new(None) };
    pub static RUN: RunState = const {
        RunState {
            resp3: Cell::new(false),
            running: Cell::new(false),
            user: RefCell::new(None),
        }
    };
    /// A panic of the synchronous redis.call path, raised again by the driver (`Running::next`).
    static PANICKED: RefCell<Option<Box<dyn std::any::Any + Send>>> = const { RefCell::new(None) };
    /// The driver's synchronous path for redis.call, set only while it polls the script.
    static INLINE: Cell<Option<Inline>> = const { Cell::new(None) };
    /// The buffer of the last synchronous redis.call's reply, for the next one's.
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// An empty buffer for a synchronous redis.call's reply (the previous call's, when small: a
/// reply buffer per call was an allocation per call).
pub fn reply_buf() -> Vec<u8> {
    SPARE.with(|s| s.take())
}

/// The driver's synchronous redis.call (see `Running::next`): runs the command right away and
/// returns its reply (in the script's protocol), or `None` when the command must take the
/// asynchronous path (a hop to another shard, a coordinator command).
///
/// # Safety
/// The function gets back the pointer it was registered with; the driver guarantees that the
/// pointer is valid and unaliased for the duration of the poll it registered it for.
pub type InlineFn = unsafe fn(*mut (), &[&[u8]]) -> Option<Vec<u8>>;

#[derive(Clone, Copy)]
pub struct Inline {
    pub run: InlineFn,
    pub data: *mut (),
}

pub(crate) fn vm() -> std::rc::Rc<Vm> {
    VM.with(|v| {
        v.borrow_mut()
            .get_or_insert_with(|| std::rc::Rc::new(new_vm().expect("Lua interpreter set-up")))
            .clone()
    })
}

/// This thread's interpreter, if it has one (none is started).
fn current_vm() -> Option<std::rc::Rc<Vm>> {
    VM.with(|v| v.borrow().clone())
}

/// Is `sha` in the cache (SCRIPT EXISTS, EVALSHA)?
pub fn cached(sha: &Sha) -> Option<Arc<[u8]>> {
    BODIES.with(|b| b.borrow().get(sha).cloned())
}

/// INFO's `number_of_cached_scripts` and `used_memory_scripts_eval` (this thread's copy).
pub fn cache_stats() -> (usize, usize) {
    BODIES.with(|b| {
        let b = b.borrow();
        (b.len(), b.values().map(|v| v.len() + 40 + 64).sum())
    })
}

/// Bytes the thread's Lua heap uses (INFO `used_memory_lua`).
pub fn lua_memory() -> usize {
    VM.with(|v| v.borrow().as_ref().map_or(0, |vm| vm.lua.used_memory()))
}

/// Adds a script to every thread's cache; returns once all have it.
pub async fn cache_add(worker: &std::rc::Rc<Worker>, sha: Sha, body: Arc<[u8]>) {
    if cached(&sha).is_some() {
        return;
    }
    worker
        .broadcast(move |_| {
            BODIES.with(|b| {
                b.borrow_mut().entry(sha).or_insert_with(|| body.clone());
            })
        })
        .await;
}

/// SCRIPT FLUSH: every thread forgets its scripts and starts a fresh interpreter.
pub async fn cache_flush(worker: &std::rc::Rc<Worker>) {
    worker
        .broadcast(|_| {
            BODIES.with(|b| b.borrow_mut().clear());
            VM.with(|v| *v.borrow_mut() = None);
        })
        .await;
}

/// A script compiled on this thread's interpreter, with what every run needs from its body.
pub struct Compiled {
    pub func: Function,
    /// `func` in the registry: what a pooled coroutine is started with (`Vm::coroutine`).
    key: mlua::RegistryKey,
    pub flags: ScriptFlags,
    /// What errors call the script: its id.
    pub name: std::rc::Rc<str>,
}

/// The script `sha` as compiled on this thread, if it was (EVALSHA's one lookup: a script
/// compiled here is in this thread's cache, as SCRIPT FLUSH drops both together).
pub fn compiled(sha: &Sha) -> Option<std::rc::Rc<Compiled>> {
    VM.with(|v| {
        v.borrow()
            .as_ref()
            .and_then(|vm| vm.compiled.borrow().get(sha).cloned())
    })
}

/// Compiles `body` on this thread's interpreter (cached by `sha`). The error text is Redis's
/// ("Error compiling script (new function): user_script:1: ..."), or the shebang's.
pub fn compile(sha: &Sha, body: &[u8]) -> Result<std::rc::Rc<Compiled>, String> {
    let vm = vm();
    if let Some(c) = vm.compiled.borrow().get(sha) {
        return Ok(c.clone());
    }
    let (flags, skip) = parse_shebang(body)?;
    let f = vm
        .lua
        .load(&body[skip..])
        .set_name("@user_script")
        .into_function()
        .map_err(|e| {
            let msg = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            };
            format!("Error compiling script (new function): {msg}")
        })?;
    let f = tailcall::without_tail_calls(&vm.lua, f, "@user_script");
    vm.globals_env(&f);
    let key = vm
        .lua
        .create_registry_value(f.clone())
        .map_err(|e| format!("Error compiling script (new function): {e}"))?;
    let c = std::rc::Rc::new(Compiled {
        func: f,
        key,
        flags,
        // (A script id is hex: ASCII.)
        name: std::str::from_utf8(sha).unwrap_or_default().into(),
    });
    vm.compiled.borrow_mut().insert(*sha, c.clone());
    Ok(c)
}

/// How a script ended: what it returned, or its error reply text (without the leading '-').
pub enum Outcome {
    Value(Value),
    /// The error reply, and whether the error statistics counted it already.
    Error(String, bool),
}

/// A script on its way: poll `next` for the commands it asks for, until it ends.
pub struct Running<F> {
    fut: Coroutine<F>,
    name: std::rc::Rc<str>,
    /// The chunk name errors cite: "@user_script" (EVAL) or "@user_function" (FCALL).
    source: &'static str,
}

/// A script's coroutine as a future, held in place (no allocation per script: mlua's coroutine
/// futures are `Unpin`), or why it could not start.
pub enum Coroutine<T> {
    Started(T),
    Failed(Option<mlua::Error>),
}

/// A script's coroutine future that can serve the next script once this one returned normally
/// (a finished Lua 5.1 coroutine is reused by pushing the next function on its empty stack).
pub trait Reusable: Future<Output = mlua::Result<Value>> + Unpin {
    /// Keeps the coroutine for the next script.
    fn recycle(self);
}

/// An EVAL script's coroutine: mlua's future over it, kept whole between scripts (it resumes
/// whatever function its coroutine holds next), with the coroutine's state. Reusing the future
/// and the coroutine saves a coroutine reset and two references per script.
pub struct Pooled {
    fut: Box<dyn Future<Output = mlua::Result<Value>> + Unpin>,
    state: *mut mlua::ffi::lua_State,
    /// The main state of the interpreter it belongs to (`Vm::main`).
    owner: *mut mlua::ffi::lua_State,
}

impl Future for Pooled {
    type Output = mlua::Result<Value>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut *self.fut).poll(cx)
    }
}

impl Reusable for Pooled {
    fn recycle(self) {
        // Not into another interpreter (SCRIPT FLUSH replaced this one while the script ran).
        if let Some(vm) = current_vm().filter(|vm| vm.main == self.owner) {
            let mut pool = vm.pool.borrow_mut();
            if pool.len() < POOL_MAX {
                pool.push(self);
            }
        }
    }
}

/// A function's coroutine (FCALL passes its KEYS and ARGV as arguments on the first resume,
/// which a pooled future cannot): mlua's future, and the coroutine for `Vm::thread` to reset.
pub struct Fresh<T> {
    fut: T,
    thread: mlua::Thread,
    /// As `Pooled::owner`.
    owner: *mut mlua::ffi::lua_State,
}

impl<T: Future<Output = mlua::Result<Value>> + Unpin> Future for Fresh<T> {
    type Output = mlua::Result<Value>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.fut).poll(cx)
    }
}

impl<T: Future<Output = mlua::Result<Value>> + Unpin> Reusable for Fresh<T> {
    fn recycle(self) {
        if let Some(vm) = current_vm().filter(|vm| vm.main == self.owner) {
            vm.recycle(self.thread);
        }
    }
}

/// Finished coroutines kept for reuse (per pool).
const POOL_MAX: usize = 4;

impl<T: Future<Output = mlua::Result<Value>> + Unpin> Future for Coroutine<T> {
    type Output = mlua::Result<Value>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            Coroutine::Started(t) => std::pin::Pin::new(t).poll(cx),
            Coroutine::Failed(e) => std::task::Poll::Ready(Err(e
                .take()
                .unwrap_or_else(|| mlua::Error::RuntimeError("script aborted".into())))),
        }
    }
}

/// What a running script does next.
pub enum Step {
    /// It waits for this command (answer through `Request::done`).
    Call(Request),
    /// It ended.
    Done(Outcome),
}

/// Starts compiled script `script` with `keys` and `argv` (the KEYS and ARGV globals). `name`
/// is what errors call the script (`f_<sha>`).
pub fn start(
    script: &Compiled,
    name: std::rc::Rc<str>,
    keys: &[&[u8]],
    argv: &[&[u8]],
    threshold_ms: u64,
    started: u64,
) -> Running<Pooled> {
    let vm = vm();
    RUN.with(|r| {
        r.resp3.set(false);
        r.running.set(true);
    });
    let fut = match set_keys_argv(&vm, keys, argv).and_then(|()| vm.coroutine(script)) {
        Ok(co) => {
            // SAFETY: the coroutine lives in `co`, which the run holds until it ends.
            unsafe { busy::begin(co.state, threshold_ms, started, false) };
            Coroutine::Started(co)
        }
        Err(e) => Coroutine::Failed(Some(e)),
    };
    Running {
        fut,
        name,
        source: "@user_script",
    }
}

/// Sets the KEYS and ARGV globals for a script. The tables of the previous script are reused
/// when small (emptied first, their metatable removed: a script cannot keep a reference to
/// them, as EVAL scripts have no state that outlives them), filled through the C API on the
/// main state.
fn set_keys_argv(vm: &Vm, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<()> {
    use mlua::ffi;
    let l = vm.main;
    // SAFETY: `main` is the interpreter's main state, idle here (no Lua runs on it while a
    // script starts); the stack is left as found. Without a protected call, a memory error
    // would end the process (Lua's panic), as for mlua's own unprotected calls when no memory
    // limit is set (none is): the protected call cost more than filling the tables.
    unsafe {
        let top = ffi::lua_gettop(l);
        if ffi::lua_checkstack(l, 8) == 0 {
            return Err(mlua::Error::StackError);
        }
        for (slot, items) in [(&vm.keys_ref, keys), (&vm.argv_ref, argv)] {
            let (name, mut r) = slot.get();
            let reuse = r != ffi::LUA_NOREF && items.len() <= REUSE_MAX && {
                ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, r as ffi::lua_Integer);
                if ffi::lua_objlen(l, -1) <= REUSE_MAX {
                    true
                } else {
                    ffi::lua_pop(l, 1);
                    false
                }
            };
            if !reuse {
                ffi::lua_createtable(l, items.len().min(1 << 20) as i32, 0);
            }
            fill_array(l, items, reuse);
            if !reuse {
                // The new table becomes the global (raw: `real`'s __index raises the
                // nonexistent-global error) and the one the next script reuses.
                ffi::lua_rawgeti(l, ffi::LUA_REGISTRYINDEX, vm.real_ref as ffi::lua_Integer);
                ffi::lua_pushstring(l, name.as_ptr());
                ffi::lua_pushvalue(l, -3);
                ffi::lua_rawset(l, -3);
                ffi::lua_pop(l, 1);
                ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, r);
                r = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                slot.set((name, r));
            }
            ffi::lua_settop(l, top);
        }
    }
    Ok(())
}

/// Lua's collector pause (how far the heap grows past what the last cycle left before the
/// next starts, in percent) while the interpreter's heap is under `GC_SMALL_HEAP_KB`. Scripts'
/// garbage is short-lived (KEYS strings, replies): collected sooner, its memory is reused while
/// still in cache. Measured on a one-key EVALSHA at -P 30 against Lua's default of 200: 150
/// +4.8% throughput, 110 +2.8% (more marking), 400 -3% (the heap walks out of cache). Past
/// the limit the default holds: a large live set would be marked too often.
const GC_PAUSE_SMALL: std::os::raw::c_int = 150;
const GC_PAUSE_DEFAULT: std::os::raw::c_int = 200;
const GC_SMALL_HEAP_KB: std::os::raw::c_int = 4096;

/// KEYS and ARGV tables up to this length are reused by the next script.
const REUSE_MAX: usize = 64;

/// Fills the table on the top of the stack with `items` as `1..=n`; `clear`: the table was used
/// before, so everything else it holds goes (and its metatable).
///
/// # Safety
/// A table on the top of `state`'s stack, with room for three more values.
unsafe fn fill_array(state: *mut mlua::ffi::lua_State, items: &[&[u8]], clear: bool) {
    use mlua::ffi;
    for (i, a) in items.iter().enumerate() {
        ffi::lua_pushlstring(state, a.as_ptr() as *const _, a.len());
        ffi::lua_rawseti(state, -2, (i + 1) as ffi::lua_Integer);
    }
    if !clear {
        return;
    }
    ffi::lua_pushnil(state);
    ffi::lua_setmetatable(state, -2);
    // Every key after `n` in traversal order: the array part beyond it, then the hash part.
    if items.is_empty() {
        ffi::lua_pushnil(state);
    } else {
        ffi::lua_pushinteger(state, items.len() as ffi::lua_Integer);
    }
    while ffi::lua_next(state, -2) != 0 {
        ffi::lua_pop(state, 1);
        // Setting an existing field to nil during the traversal is allowed.
        ffi::lua_pushvalue(state, -1);
        ffi::lua_pushnil(state);
        ffi::lua_rawset(state, -4);
    }
}

/// Starts function callback `f` (FCALL) with the KEYS and ARGV tables as its arguments (new
/// tables: a library may keep what its functions get).
pub fn start_function(
    f: &Function,
    name: std::rc::Rc<str>,
    keys: &[&[u8]],
    argv: &[&[u8]],
    threshold_ms: u64,
    started: u64,
) -> Running<impl Reusable> {
    let vm = vm();
    let lua = vm.lua.clone();
    RUN.with(|r| {
        r.resp3.set(false);
        r.running.set(true);
    });
    let setup = (|| {
        let k = string_array(&lua, keys)?;
        let a = string_array(&lua, argv)?;
        Ok::<_, mlua::Error>((vm.thread(f)?, k, a))
    })();
    let fut = match setup {
        Ok((thread, k, a)) => {
            // SAFETY: the coroutine lives in `thread`, which the run holds until it ends.
            unsafe { busy::begin(thread.to_pointer() as *mut _, threshold_ms, started, true) };
            Coroutine::Started(Fresh {
                fut: thread.clone().into_async::<Value>((k, a)),
                thread,
                owner: vm.main,
            })
        }
        Err(e) => Coroutine::Failed(Some(e)),
    };
    Running {
        fut,
        name,
        source: "@user_function",
    }
}

impl<F: Reusable> Running<F> {
    /// Runs the script until it ends or asks for a command the synchronous path `inline`
    /// (valid while this call polls) does not serve.
    pub async fn next(&mut self, inline: Option<Inline>) -> Step {
        std::future::poll_fn(|cx| self.poll_step(inline, cx)).await
    }

    /// One poll of `next` made here and now (with a waker that does nothing: a script that
    /// waits must be polled again, which `next` does first). None: it waits.
    pub fn poll_now(&mut self, inline: Option<Inline>) -> Option<Step> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match self.poll_step(inline, &mut cx) {
            std::task::Poll::Ready(step) => Some(step),
            std::task::Poll::Pending => None,
        }
    }

    fn poll_step(
        &mut self,
        inline: Option<Inline>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Step> {
        // Poll the script; when it stops on a redis.call, take the command it left.
        let outer = INLINE.with(|i| i.replace(inline));
        let r = std::pin::Pin::new(&mut self.fut).poll(cx);
        INLINE.with(|i| i.set(outer));
        if let Some(payload) = PANICKED.with(|p| p.borrow_mut().take()) {
            std::panic::resume_unwind(payload);
        }
        let r = match r {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => {
                return match REQUEST.with(|q| q.borrow_mut().take()) {
                    Some(req) => std::task::Poll::Ready(Step::Call(req)),
                    None => std::task::Poll::Pending,
                }
            }
        };
        RUN.with(|r| r.running.set(false));
        if r.is_ok() {
            if let Coroutine::Started(co) =
                std::mem::replace(&mut self.fut, Coroutine::Failed(None))
            {
                co.recycle();
            }
        }
        vm().tune_gc();
        std::task::Poll::Ready(Step::Done(match r {
            Ok(v) => Outcome::Value(v),
            Err(e) => Outcome::Error(
                error_reply(&e, &self.name, self.source),
                script_error(&e).is_some_and(|se| se.counted),
            ),
        }))
    }
}

impl<F> Drop for Running<F> {
    fn drop(&mut self) {
        RUN.with(|r| r.running.set(false));
        busy::end();
    }
}

fn string_array(lua: &Lua, items: &[&[u8]]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, a) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(a)?)?;
    }
    Ok(t)
}

/// The error reply of a failed script (Redis 7's form: the error, then ` script: <name>, on
/// @user_script:<line>.` when the line is known).
fn error_reply(e: &mlua::Error, name: &str, source: &str) -> String {
    let (msg, line) = match script_error(e) {
        Some(se) => (se.msg.clone(), se.line),
        None => {
            let text = error_text(e);
            let line = position_line(&text);
            (format!("ERR {text}"), line)
        }
    };
    match line {
        Some(l) => format!("{msg} script: {name}, on {source}:{l}."),
        None => msg,
    }
}

/// The text of a Lua `error(...)` inside an mlua error, if that is what it is.
fn raised(e: &mlua::Error) -> Option<&str> {
    match e {
        mlua::Error::ExternalError(x) => x.downcast_ref::<Raised>().map(|r| r.0.as_str()),
        mlua::Error::CallbackError { cause, .. } => raised(cause),
        mlua::Error::WithContext { cause, .. } => raised(cause),
        _ => None,
    }
}

/// The ScriptError inside an mlua error (raised by redis.call, error_reply...), if any.
fn script_error(e: &mlua::Error) -> Option<&ScriptError> {
    match e {
        mlua::Error::ExternalError(x) => x.downcast_ref::<ScriptError>(),
        mlua::Error::CallbackError { cause, .. } => script_error(cause),
        mlua::Error::WithContext { cause, .. } => script_error(cause),
        _ => None,
    }
}

/// The plain message of a Lua error (without mlua's traceback decoration).
pub(crate) fn error_text(e: &mlua::Error) -> String {
    match e {
        // mlua appends the coroutine's traceback; Redis's errors have none.
        mlua::Error::RuntimeError(s) => s
            .split_once("\nstack traceback:")
            .map_or(s.as_str(), |(m, _)| m)
            .to_string(),
        mlua::Error::MemoryError(s) => s.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::CallbackError { cause, traceback } => {
            if let mlua::Error::ExternalError(x) = &**cause {
                if let Some(r) = x.downcast_ref::<Raised>() {
                    return r.0.clone();
                }
            }
            // A Rust function failed: as for Lua's C functions (luaL_where(L, 1)), the message
            // starts with its caller's position when the caller is the script.
            let text = error_text(cause);
            match caller_position(traceback) {
                Some(pos) if !text.starts_with("user_") => format!("{pos} {text}"),
                _ => text,
            }
        }
        mlua::Error::WithContext { cause, .. } => error_text(cause),
        mlua::Error::ExternalError(x) => x.to_string(),
        other => other.to_string(),
    }
}

/// From a callback's traceback ("[C]: in function 'decode'" then its caller's frame): the
/// caller's position ("user_script:3:") when the caller is the script's own code. The frame
/// of a library's argument wrapper (`lualib::args::exact_wrapper`, chunks named after the
/// library) stands for the C function Redis has there, so the script's frame is the one after.
fn caller_position(traceback: &str) -> Option<String> {
    let wrapper = |l: &str| {
        ["cjson:", "cmsgpack:", "struct:"]
            .iter()
            .any(|w| l.starts_with(w))
    };
    let caller = traceback
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "stack traceback:")
        .find(|l| !l.starts_with("[C]:") && !wrapper(l))?;
    let (chunk, rest) = ["user_script:", "user_function:"]
        .iter()
        .find_map(|c| caller.strip_prefix(c).map(|r| (*c, r)))?;
    let end = rest.find(':')?;
    rest[..end].parse::<i64>().ok()?;
    Some(format!("{chunk}{}:", &rest[..end]))
}

/// The line in a Lua position prefix ("user_script:12: ...").
fn position_line(text: &str) -> Option<i64> {
    let rest = text
        .strip_prefix("user_script:")
        .or_else(|| text.strip_prefix("user_function:"))?;
    let end = rest.find(':')?;
    rest[..end].parse().ok()
}

/// Raises `msg` (an error reply text, code first) from a Rust function the script called, at
/// the script line that called it (a plain Rust function keeps its caller's frame).
fn raise(lua: &Lua, msg: String) -> mlua::Error {
    let line = (1..4).find_map(|level| {
        let d = lua.inspect_stack(level)?;
        let l = d.curr_line();
        let src = d.source().source;
        let ours = matches!(src.as_deref(), Some("@user_script" | "@user_function"));
        (ours && l >= 0).then_some(l as i64)
    });
    raise_line(msg, line)
}

fn raise_line(msg: String, line: Option<i64>) -> mlua::Error {
    mlua::Error::external(ScriptError {
        msg,
        line,
        counted: false,
    })
}

/// Redis's `luaPushErrorBuff` on a message: "-CODE rest" keeps its code, anything else gets
/// "ERR ".
fn error_text_with_code(msg: &str) -> String {
    let msg = msg.trim_end_matches(['\r', '\n']);
    match msg.strip_prefix('-') {
        Some(rest) => match rest.find(' ') {
            Some(_) => rest.to_string(),
            None => format!("ERR {rest}"),
        },
        None => format!("ERR {msg}"),
    }
}

/// The value a Lua `pcall` gives for a failed call: the error reply's text for script errors
/// (Redis 7's pcall unwraps its error tables), the message otherwise.
fn pcall_error_value(lua: &Lua, e: &mlua::Error) -> mlua::Result<Value> {
    if let Some(r) = raised(e) {
        return Ok(Value::String(lua.create_string(r)?));
    }
    Ok(match script_error(e) {
        Some(se) => Value::String(lua.create_string(&se.msg)?),
        None => Value::String(lua.create_string(error_text(e))?),
    })
}

/// The arguments of redis.call as bytes (numbers as Redis prints them, "%.17g"), or the error
/// to give.
fn call_args(args: MultiValue) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    let mut out = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Value::String(s) => out.push(s.as_bytes().to_vec()),
            Value::Integer(i) => out.push(i.to_string().into_bytes()),
            Value::Number(n) => out.push(format_g17(n).into_bytes()),
            _ => return Err("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    Ok(out)
}

/// C's `%.17g`.
fn format_g17(n: f64) -> String {
    let mut buf = [0u8; 64];
    let fmt = b"%.17g\0";
    // SAFETY: snprintf writes at most buf.len() bytes, NUL-terminated, from a valid format.
    let len = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            fmt.as_ptr() as *const libc::c_char,
            n,
        )
    };
    String::from_utf8_lossy(&buf[..(len.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

/// redis.call / redis.pcall: hands the command to the running script's driver and converts
/// the reply. `raise`: redis.call (an error reply stops the script) rather than redis.pcall.
/// Returns `(true, reply)`, or `(false, message)` for an error the Lua wrapper raises at the
/// caller's line (see CALL_WRAPPERS: the line is looked up only then).
async fn redis_call(
    lua: Lua,
    args: MultiValue,
    raise_errors: bool,
) -> mlua::Result<(bool, Value, bool)> {
    let raise = |lua: &Lua, msg: &str| -> mlua::Result<(bool, Value, bool)> {
        Ok((false, Value::String(lua.create_string(msg)?), false))
    };
    if !RUN.with(|r| r.running.get()) {
        return raise(
            &lua,
            "ERR redis.call/pcall can only be called inside a script invocation",
        );
    }
    let args = match call_args(args) {
        Ok(a) => a,
        Err(msg) if raise_errors => return raise(&lua, msg),
        Err(msg) => {
            let v = convert::single(&lua, "err", Value::String(lua.create_string(msg)?))?;
            return Ok((true, v, false));
        }
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    REQUEST.with(|q| *q.borrow_mut() = Some(Request { args, done: tx }));
    let reply = rx
        .await
        .map_err(|_| mlua::Error::RuntimeError("script aborted".into()))?;
    call_result(&lua, &reply, raise_errors)
}

/// redis.call / redis.pcall with many arguments, which the wrapper passes as a table `t` of
/// `n` values (always the asynchronous path: rare, and the C path's stack is small).
async fn big_call(lua: Lua, t: Table, n: i64, raise_errors: bool) -> mlua::Result<MultiValue> {
    let args = (1..=n)
        .map(|i| t.raw_get::<Value>(i))
        .collect::<mlua::Result<MultiValue>>()?;
    let (ok, v, counted) = redis_call(lua, args, raise_errors).await?;
    Ok(MultiValue::from_iter([
        Value::Boolean(ok),
        v,
        Value::Boolean(counted),
    ]))
}

/// redis.call's result for a command's `reply`: see `redis_call`. (The command's error, if
/// it failed, is in the statistics already.)
fn call_result(lua: &Lua, reply: &[u8], raise_errors: bool) -> mlua::Result<(bool, Value, bool)> {
    if raise_errors && reply.first() == Some(&b'-') {
        let end = reply
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(reply.len());
        return Ok((
            false,
            Value::String(lua.create_string(&reply[1..end])?),
            true,
        ));
    }
    let mut pos = 0;
    Ok((true, convert::reply_to_lua(lua, reply, &mut pos)?, false))
}

/// Past this many arguments, redis.call's arguments travel in a table (the wrapper's `big`):
/// a C function's stack holds at most 8000 values, and Redis's scripts may pass 7999.
const BIG_ARGS: i32 = 1000;

/// The synchronous first try of redis.call / redis.pcall (`fast` in CALL_WRAPPERS), a C
/// function: the arguments are read in place, the driver's `Inline` path runs the command, the
/// reply is pushed with `convert::push_reply`, with none of mlua's callback machinery (that
/// and copying the arguments were most of a short script's cost). Returns `(ok, value,
/// counted)` as `redis_call`, or nothing when the command must go the asynchronous way (not
/// inline, no script running, an argument neither string nor number).
///
/// # Safety
/// Called by Lua as a C function with a valid state. A Lua memory error raised while pushing
/// unwinds by `longjmp` through this frame: what it owns then (the reply) leaks.
unsafe extern "C-unwind" fn fast_call_c(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    unsafe { fast_call(l, true) }
}

/// `fast_call_c` for redis.pcall.
///
/// # Safety
/// As `fast_call_c`.
unsafe extern "C-unwind" fn fast_pcall_c(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    unsafe { fast_call(l, false) }
}

/// See `fast_call_c`.
///
/// # Safety
/// As `fast_call_c`.
unsafe fn fast_call(l: *mut mlua::ffi::lua_State, raise_errors: bool) -> std::os::raw::c_int {
    use mlua::ffi;
    let Some(inline) = INLINE.with(|i| i.get()) else {
        return 0;
    };
    let n = ffi::lua_gettop(l);
    // Past BIG_ARGS the arguments travel in a table (the wrapper's `big`).
    if n == 0 || n > BIG_ARGS || !RUN.with(|r| r.running.get()) || ffi::lua_checkstack(l, 8) == 0 {
        return 0;
    }
    // Numbers become strings as Redis formats them (%.17g), in place.
    for i in 1..=n {
        match ffi::lua_type(l, i) {
            ffi::LUA_TSTRING => {}
            ffi::LUA_TNUMBER => {
                let s = format_g17(ffi::lua_tonumber(l, i));
                ffi::lua_pushlstring(l, s.as_ptr() as *const _, s.len());
                ffi::lua_replace(l, i);
            }
            _ => return 0,
        }
    }
    let argv: smallvec::SmallVec<[&[u8]; 8]> = (1..=n)
        .map(|i| {
            let mut len = 0usize;
            let p = ffi::lua_tolstring(l, i, &mut len);
            // SAFETY: a string on the stack stays alive (and unmoved) while it is there.
            unsafe { std::slice::from_raw_parts(p as *const u8, len) }
        })
        .collect();
    // A panic must not unwind through Lua's C frames: it is kept and raised again by the
    // driver once the poll is back in Rust (as mlua does for its callbacks); the script takes
    // the asynchronous path meanwhile, which the driver never serves.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `inline` was registered by the driver for this poll (see `Running::next`).
        unsafe { (inline.run)(inline.data, &argv) }
    }));
    let reply = match ran {
        Ok(Some(reply)) => reply,
        Ok(None) => return 0,
        Err(payload) => {
            PANICKED.with(|p| *p.borrow_mut() = Some(payload));
            return 0;
        }
    };
    drop(argv);
    if raise_errors && reply.first() == Some(&b'-') {
        let end = reply
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(reply.len());
        ffi::lua_pushboolean(l, 0);
        ffi::lua_pushlstring(l, reply[1..].as_ptr() as *const _, end.saturating_sub(1));
        ffi::lua_pushboolean(l, 1);
        return 3;
    }
    ffi::lua_pushboolean(l, 1);
    let mut pos = 0;
    let pushed = convert::push_reply(l, &reply, &mut pos);
    if reply.capacity() <= 4096 {
        let mut reply = reply;
        reply.clear();
        SPARE.with(|s| s.set(reply));
    } else {
        drop(reply);
    }
    if !pushed {
        return ffi::luaL_error(l, c"reply too deeply nested".as_ptr());
    }
    2
}

impl Vm {
    /// The protected environment scripts and functions run in.
    fn env(&self) -> mlua::Result<Table> {
        Ok(self.env.clone())
    }

    /// The coroutine (with its future) to run compiled script `script` in: a finished one from
    /// the pool with the script's function pushed from the registry, else a new one.
    fn coroutine(&self, script: &Compiled) -> mlua::Result<Pooled> {
        use mlua::ffi;
        if let Some(co) = self.pool.borrow_mut().pop() {
            // SAFETY: `co.state` is a finished coroutine (status ok, empty stack: mlua's future
            // empties it when the script returns), idle; pushing a function makes it a new one
            // that its future resumes from the start.
            unsafe {
                if ffi::lua_checkstack(co.state, 1) == 0 {
                    return Err(mlua::Error::StackError);
                }
                ffi::lua_rawgeti(
                    co.state,
                    ffi::LUA_REGISTRYINDEX,
                    script.key.id() as ffi::lua_Integer,
                );
            }
            return Ok(co);
        }
        let thread = self.lua.create_thread(script.func.clone())?;
        let state = thread.to_pointer() as *mut ffi::lua_State;
        Ok(Pooled {
            fut: Box::new(thread.into_async::<Value>(())),
            state,
            owner: self.main,
        })
    }

    /// A coroutine to run `f` in (a function's): a finished one from the pool, else a new one.
    fn thread(&self, f: &Function) -> mlua::Result<mlua::Thread> {
        let pooled = self.threads.borrow_mut().pop();
        match pooled {
            Some(t) if t.reset(f.clone()).is_ok() => Ok(t),
            _ => self.lua.create_thread(f.clone()),
        }
    }

    /// After a script: Lua's collector pause for the heap's size (see `GC_PAUSE_SMALL`).
    fn tune_gc(&self) {
        use mlua::ffi;
        // SAFETY: `main` is the interpreter's main state; no script runs on it now.
        let kb = unsafe { ffi::lua_gc(self.main, ffi::LUA_GCCOUNT, 0) };
        let pause = if kb < GC_SMALL_HEAP_KB {
            GC_PAUSE_SMALL
        } else {
            GC_PAUSE_DEFAULT
        };
        if self.gc_pause.replace(pause) != pause {
            // SAFETY: as above.
            unsafe { ffi::lua_gc(self.main, ffi::LUA_GCSETPAUSE, pause) };
        }
    }

    /// Gives back the coroutine of a script that returned normally.
    fn recycle(&self, t: mlua::Thread) {
        let mut pool = self.threads.borrow_mut();
        if pool.len() < POOL_MAX && t.status() == mlua::ThreadStatus::Finished {
            pool.push(t);
        }
    }

    /// Scripts see the protected globals.
    fn globals_env(&self, f: &Function) {
        let _ = f.set_environment(self.env.clone());
    }
}

/// Lua code that builds the protected environment: `real` holds every global; the script's
/// environment is an empty table whose reads of a missing name and whose writes are errors,
/// as Redis's read-only global table; library tables are read-only views too.
/// redis.call and redis.pcall as Lua functions that pass their caller's line to the Rust side
/// (error replies name it; Redis's error handler finds it the same way).
const CALL_WRAPPERS: &str = r#"
local raw_call, raw_pcall, fast_call, fast_pcall, getinfo, raise_at, big_call, big_pcall, BIG = ...
local select = select
local function line()
  -- The innermost frame of the script itself (a `return redis.call(...)` is a tail call that
  -- leaves none: no line then).
  for level = 3, 12 do
    local i = getinfo(level, 'Sl')
    if not i then break end
    if (i.source == '@user_script' or i.source == '@user_function') and i.currentline >= 0 then
      return i.currentline
    end
  end
  return -1
end
-- redis.call and redis.pcall: the same wrapper over their own Rust functions.
local function wrapper(fast, raw, big)
  -- The asynchronous way (and a failed call): a separate function, so that the common case
  -- (`fast` ran the command) is one C call from a function without locals to spare.
  local function slow(ok, v, counted, ...)
    if ok == nil then
      local n = select('#', ...)
      if n > BIG then
        ok, v, counted = big({...}, n)
      else
        ok, v, counted = raw(...)
      end
    end
    if ok then return v end
    raise_at(v, line(), counted)
  end
  return function(...)
    local ok, v, counted = fast(...)
    if ok then return v end
    return slow(ok, v, counted, ...)
  end
end
return wrapper(fast_call, raw_call, big_call), wrapper(fast_pcall, raw_pcall, big_pcall)
"#;

const PROTECT: &str = r#"
local real, readonly, getinfo, raise_at = ...
local rawset_, setmetatable_, getmetatable_, error_, type_ = rawset, setmetatable, getmetatable, error, type
local function deny() error_("Attempt to modify a readonly table", 2) end
local function view(t)
  local v = {}
  readonly[v] = true
  setmetatable_(v, {__index = t, __newindex = deny, __metatable = false})
  return v
end
for _, name in ipairs({"string", "math", "table", "redis", "bit", "cjson", "cmsgpack", "struct", "os", "coroutine"}) do
  if real[name] then real[name] = view(real[name]) end
end
-- Redis's patched rawset/setmetatable refuse read-only tables (no position in the message).
local function refuse()
  local i = getinfo(3, 'l')
  raise_at("ERR Attempt to modify a readonly table", i and i.currentline or -1)
end
real.rawset = function(t, k, v)
  if readonly[t] then refuse() end
  return rawset_(t, k, v)
end
real.setmetatable = function(t, m)
  if readonly[t] then refuse() end
  return setmetatable_(t, m)
end
-- Binary chunks are refused (Redis: loading bytecode is a way out of the sandbox).
local loadstring_ = real.loadstring
real.loadstring = function(s, name)
  if type_(s) == 'string' and s:sub(1, 1) == '\27' then
    return nil, 'attempt to load a binary chunk'
  end
  return loadstring_(s, name)
end
-- The strings' metatable is shared by every script: read-only too.
local smt = getmetatable_('')
if smt then smt.__metatable = view(smt) end
local env = {}
readonly[env] = true
real._G = env
-- Reads go env -> real by a table __index (no function call for a name that exists); a
-- missing name reaches real's own __index, which raises Redis's error in the script's frame.
local function missing(_, k)
  error_("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
-- getmetatable(_G) shows what Redis's shows (a function __index), never `real` itself.
setmetatable_(env, {
  __index = real,
  __newindex = deny,
  __metatable = view({__index = missing, __newindex = deny}),
})
setmetatable_(real, {__index = missing, __metatable = false})
return env
"#;

/// A new interpreter with what Redis 7.0 gives scripts: base (without file access), table,
/// string, math, the `redis` table, `bit`, and `os.clock`; globals protected.
fn new_vm() -> mlua::Result<Vm> {
    // SAFETY: `debug` is loaded only so that redis.call can find its caller's line; it is
    // removed from the globals below, before any script can reach it (as Redis does).
    let lua = unsafe {
        Lua::unsafe_new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::DEBUG,
            LuaOptions::default(),
        )
    };
    let g = lua.globals();
    register_redis(&lua, &g)?;
    let getinfo: Function = g.raw_get::<Table>("debug")?.raw_get("getinfo")?;
    // debug served redis.call's line lookup above; scripts do not get it (as in Redis).
    // setfenv, getfenv and newproxy reach past the protection: only with
    // lua-enable-deprecated-api (Redis 7.0.15's default is off).
    let deprecated = Worker::current().is_some_and(|w| w.shared.config.lua_enable_deprecated_api());
    if !deprecated {
        for name in ["setfenv", "getfenv", "newproxy"] {
            g.raw_set(name, Value::Nil)?;
        }
    }
    for name in [
        "dofile", "loadfile", "print", "module", "require", "package", "debug",
    ] {
        g.raw_set(name, Value::Nil)?;
    }
    // os: only clock (the rest reaches the machine).
    let os = lua.create_table()?;
    let real_os: Table = g.raw_get("os")?;
    os.raw_set("clock", real_os.raw_get::<Function>("clock")?)?;
    g.raw_set("os", os)?;
    register_pcall(&lua, &g)?;
    lualib::register_all(&lua)?;

    // Everything now in the globals moves to `real`; the globals table itself stays as it is
    // for the interpreter, and scripts get the protected environment.
    let real = lua.create_table()?;
    for pair in g.pairs::<Value, Value>() {
        let (k, v) = pair?;
        real.raw_set(k, v)?;
    }
    let readonly = lua.create_table()?;
    let weak = lua.create_table()?;
    weak.raw_set("__mode", "k")?;
    readonly.set_metatable(Some(weak));
    let env: Table = lua.load(PROTECT).set_name("=protect").call((
        real.clone(),
        readonly,
        getinfo,
        raise_at(&lua)?,
    ))?;
    lua.set_named_registry_value("damselfly_real_globals", real.clone())?;
    let (mut main, mut real_ref) = (std::ptr::null_mut(), mlua::ffi::LUA_NOREF);
    // SAFETY: reads the main state's pointer (no coroutine runs yet) and takes a registry
    // reference to `real` (the argument on the stack).
    unsafe {
        lua.exec_raw::<()>(real, |state| {
            main = state;
            real_ref = mlua::ffi::luaL_ref(state, mlua::ffi::LUA_REGISTRYINDEX);
        })?
    };
    lua.set_named_registry_value("damselfly_env", env.clone())?;
    Ok(Vm {
        lua,
        env,
        compiled: RefCell::new(ShaMap::default()),
        threads: RefCell::new(Vec::new()),
        pool: RefCell::new(Vec::new()),
        gc_pause: Cell::new(GC_PAUSE_DEFAULT),
        main,
        real_ref,
        keys_ref: Cell::new((c"KEYS", mlua::ffi::LUA_NOREF)),
        argv_ref: Cell::new((c"ARGV", mlua::ffi::LUA_NOREF)),
        functions: RefCell::new(HashMap::new()),
    })
}

/// `raise_at(msg, line[, counted])`: raises error reply `msg` as the script's error at `line`
/// (-1: none); `counted`: see `ScriptError`.
fn raise_at(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(
        |_, (msg, line, counted): (String, i64, Option<bool>)| -> mlua::Result<()> {
            Err(mlua::Error::external(ScriptError {
                msg,
                line: (line >= 0).then_some(line),
                counted: counted.unwrap_or(false),
            }))
        },
    )
}

fn register_redis(lua: &Lua, g: &Table) -> mlua::Result<()> {
    let redis = lua.create_table()?;
    let raw_call =
        lua.create_async_function(|lua, args: MultiValue| redis_call(lua, args, true))?;
    let raw_pcall =
        lua.create_async_function(|lua, args: MultiValue| redis_call(lua, args, false))?;
    let debug: Table = g.raw_get("debug")?;
    let getinfo: Function = debug.raw_get("getinfo")?;
    let (call, pcall): (Function, Function) = lua.load(CALL_WRAPPERS).set_name("=redis").call((
        raw_call,
        raw_pcall,
        // SAFETY: C functions with the lua_CFunction contract (see `fast_call_c`).
        unsafe { lua.create_c_function(fast_call_c)? },
        unsafe { lua.create_c_function(fast_pcall_c)? },
        getinfo,
        raise_at(lua)?,
        lua.create_async_function(|lua, (t, n): (Table, i64)| big_call(lua, t, n, true))?,
        lua.create_async_function(|lua, (t, n): (Table, i64)| big_call(lua, t, n, false))?,
        BIG_ARGS,
    ))?;
    redis.raw_set("call", call)?;
    redis.raw_set("pcall", pcall)?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| {
            let msg = match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => s.to_string_lossy(),
                // Returned, not raised (Redis's luaPushError without lua_error).
                _ => {
                    return convert::single(
                        lua,
                        "err",
                        Value::String(lua.create_string("ERR wrong number or type of arguments")?),
                    )
                }
            };
            let text = if msg.starts_with('-') {
                msg.to_string()
            } else {
                format!("-{msg}")
            };
            convert::single(
                lua,
                "err",
                Value::String(lua.create_string(error_text_with_code(&text))?),
            )
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
            (1, Some(Value::String(s))) => convert::single(lua, "ok", Value::String(s.clone())),
            _ => convert::single(
                lua,
                "err",
                Value::String(lua.create_string("ERR wrong number or type of arguments")?),
            ),
        })?,
    )?;
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise(lua, "ERR wrong number of arguments".into()));
            }
            let bytes: Vec<u8> = match args.front() {
                Some(Value::String(s)) => s.as_bytes().to_vec(),
                Some(Value::Integer(i)) => i.to_string().into_bytes(),
                Some(Value::Number(n)) => lua_number_string(*n).into_bytes(),
                _ => Vec::new(),
            };
            lua.create_string(sha1_hex(&bytes))
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() < 2 {
                return Err(raise(
                    lua,
                    "ERR redis.log() requires two arguments or more.".into(),
                ));
            }
            let level = match args.front() {
                Some(Value::Integer(i)) => *i,
                Some(Value::Number(n)) => *n as i64,
                _ => {
                    return Err(raise(
                        lua,
                        "ERR First argument must be a number (log level).".into(),
                    ))
                }
            };
            if !(0..=3).contains(&level) {
                return Err(raise(lua, "ERR Invalid debug level.".into()));
            }
            let text: Vec<String> = args
                .iter()
                .skip(1)
                .map(|v| match v {
                    Value::String(s) => s.to_string_lossy().to_string(),
                    Value::Integer(i) => i.to_string(),
                    Value::Number(n) => lua_number_string(*n),
                    _ => String::new(),
                })
                .collect();
            let line = text.join(" ");
            match level {
                0 => crate::log_at!(crate::log::Level::Debug, "{line}"),
                1 => crate::log_verbose!("{line}"),
                2 => crate::log_notice!("{line}"),
                _ => crate::log_warning!("{line}"),
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|lua, args: MultiValue| {
            let v =
                single_number_arg(lua, &args, "setresp", "requires one argument.")?.unwrap_or(0);
            if v != 2 && v != 3 {
                return Err(raise(lua, "ERR RESP version must be 2 or 3.".into()));
            }
            RUN.with(|r| r.resp3.set(v == 3));
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| {
            let v = single_number_arg(lua, &args, "set_repl", "requires two arguments.")?
                .unwrap_or(-1);
            if !(0..=3).contains(&v) {
                return Err(raise(
                    lua,
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                        .into(),
                ));
            }
            // Nothing replicates yet; the flags are accepted as Redis accepts them.
            Ok(())
        })?,
    )?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(|lua, args: MultiValue| {
            // Redis's luaRedisAclCheckCmdPermissionsCommand: may the script's user run this
            // command with these arguments (keys and channels included)?
            let Some(user) = RUN.with(|r| r.running.get().then(|| r.user.borrow().clone())) else {
                return Err(raise(
                    lua,
                    "ERR redis.acl_check_cmd can only be called inside a script invocation".into(),
                ));
            };
            let args = call_args(args).map_err(|m| raise(lua, m.into()))?;
            let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let Some(entry) = crate::scripting::commands::resolve(&argv) else {
                return Err(raise(
                    lua,
                    "ERR Invalid command passed to redis.acl_check_cmd()".into(),
                ));
            };
            Ok(user.is_none_or(|u| u.check(entry, &argv).is_ok()))
        })?,
    )?;
    for (k, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(k, v)?;
    }
    let version = crate::version::REDIS_VERSION;
    redis.raw_set("REDIS_VERSION", version)?;
    let num = version
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .fold(0i64, |acc, p| (acc << 8) | p);
    redis.raw_set("REDIS_VERSION_NUM", num)?;
    g.raw_set("redis", redis)?;
    Ok(())
}

/// The one numeric argument of redis.setresp / redis.set_repl (only inside a script, as
/// Redis): None when it is not a number. `count_error`: Redis's text for a wrong count.
fn single_number_arg(
    lua: &Lua,
    args: &MultiValue,
    func: &str,
    count_error: &str,
) -> mlua::Result<Option<i64>> {
    if !RUN.with(|r| r.running.get()) {
        return Err(raise(
            lua,
            format!("ERR redis.{func} can only be called inside a script invocation"),
        ));
    }
    if args.len() != 1 {
        return Err(raise(lua, format!("ERR redis.{func}() {count_error}")));
    }
    Ok(match args.front() {
        Some(Value::Integer(i)) => Some(*i),
        Some(Value::Number(n)) => Some(*n as i64),
        _ => None,
    })
}

/// Lua's `%.14g` number formatting (tostring of a number).
fn lua_number_string(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Redis's patched `luaB_unpack`: the count as an unsigned difference, refused from `INT_MAX`
/// up or past what the stack holds.
///
/// # Safety
/// Called by Lua as a C function with a valid state. Errors unwind by `longjmp` through this
/// frame, which owns nothing that needs dropping.
unsafe extern "C-unwind" fn unpack_c(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    use std::os::raw::c_int;
    unsafe {
        ffi::luaL_checktype(l, 1, ffi::LUA_TTABLE);
        let i = ffi::luaL_optinteger(l, 2, 1) as c_int;
        let e = if ffi::lua_isnoneornil(l, 3) != 0 {
            ffi::lua_objlen(l, 1) as c_int
        } else {
            ffi::luaL_checkinteger(l, 3) as c_int
        };
        if i > e {
            return 0;
        }
        let n = (e as u32).wrapping_sub(i as u32);
        if n >= i32::MAX as u32 || ffi::lua_checkstack(l, n as c_int + 1) == 0 {
            return ffi::luaL_error(l, c"too many results to unpack".as_ptr());
        }
        let mut k = i;
        loop {
            ffi::lua_rawgeti_(l, 1, k);
            if k == e {
                break;
            }
            k += 1;
        }
        n as c_int + 1
    }
}

/// `pcall` and `xpcall` that a redis.call inside them can wait through: Lua 5.1's own cannot be
/// yielded across, and every redis.call yields the script's coroutine.
fn register_pcall(lua: &Lua, g: &Table) -> mlua::Result<()> {
    // unpack with Redis's fix (stock 5.1 computes the count of a huge range in an overflowing
    // int: unpack({}, -2, 2^31-1)). A plain C function, as Lua's own: it returns as many values
    // as its stack holds (Redis's scripts unpack 7999, where an mlua callback needs slots of its
    // own), and its errors carry the calling script's position.
    // SAFETY: `unpack_c` follows the lua_CFunction contract (see there).
    g.raw_set("unpack", unsafe { lua.create_c_function(unpack_c) }?)?;
    // error(): as Lua's, but a table with an `err` field stays an error reply (Redis 7's error
    // tables), and the text survives the trip through Rust.
    g.raw_set(
        "error",
        lua.create_function(
            |lua, (v, level): (Value, Option<i64>)| -> mlua::Result<()> {
                let level = level.unwrap_or(1);
                let position = |lua: &Lua| -> Option<(String, i64)> {
                    if level <= 0 {
                        return None;
                    }
                    let d = lua.inspect_stack(level as usize)?;
                    let line = d.curr_line();
                    let src = d.source().short_src.map(|s| s.to_string())?;
                    (line >= 0).then(|| (format!("{src}:{line}: "), line as i64))
                };
                match &v {
                    Value::Table(t) => {
                        if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                            let line = lua
                                .inspect_stack(1)
                                .map(|d| d.curr_line() as i64)
                                .filter(|&l| l >= 0);
                            let counted = matches!(
                                t.raw_get::<Value>("ignore_error_stats_update"),
                                Ok(Value::Boolean(true))
                            );
                            return Err(mlua::Error::external(ScriptError {
                                msg: e.to_string_lossy().to_string(),
                                line,
                                counted,
                            }));
                        }
                        Err(mlua::Error::external(Raised(format!("{v:?}"))))
                    }
                    Value::String(s) => {
                        let text = s.to_string_lossy().to_string();
                        let pos = position(lua).map(|p| p.0).unwrap_or_default();
                        Err(mlua::Error::external(Raised(format!("{pos}{text}"))))
                    }
                    Value::Integer(_) | Value::Number(_) => {
                        let text = match v {
                            Value::Integer(i) => i.to_string(),
                            Value::Number(n) => lua_number_string(n),
                            _ => unreachable!(),
                        };
                        let pos = position(lua).map(|p| p.0).unwrap_or_default();
                        Err(mlua::Error::external(Raised(format!("{pos}{text}"))))
                    }
                    Value::Nil => Err(mlua::Error::external(Raised("nil".into()))),
                    other => Err(mlua::Error::external(Raised(other.type_name().to_string()))),
                }
            },
        )?,
    )?;
    g.raw_set(
        "pcall",
        lua.create_async_function(|lua, mut args: MultiValue| async move {
            let f = args.pop_front().unwrap_or(Value::Nil);
            let mut out = MultiValue::new();
            match run_protected(&lua, f, args).await {
                Ok(vals) => {
                    out.push_back(Value::Boolean(true));
                    out.extend(vals);
                }
                Err(e) => {
                    out.push_back(Value::Boolean(false));
                    out.push_back(pcall_error_value(&lua, &e)?);
                }
            }
            Ok(out)
        })?,
    )?;
    g.raw_set(
        "xpcall",
        lua.create_async_function(|lua, (f, handler): (Value, Value)| async move {
            let mut out = MultiValue::new();
            match run_protected(&lua, f, MultiValue::new()).await {
                Ok(vals) => {
                    out.push_back(Value::Boolean(true));
                    out.extend(vals);
                }
                Err(e) => {
                    out.push_back(Value::Boolean(false));
                    let err = pcall_error_value(&lua, &e)?;
                    match handler {
                        Value::Function(h) => out.extend(h.call::<MultiValue>(err)?),
                        _ => out.push_back(err),
                    }
                }
            }
            Ok(out)
        })?,
    )?;
    Ok(())
}

/// Calls `f(args)` in its own coroutine, so that its redis.calls can wait.
async fn run_protected(lua: &Lua, f: Value, args: MultiValue) -> mlua::Result<MultiValue> {
    let f = match f {
        Value::Function(f) => f,
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "attempt to call a {} value",
                other.type_name()
            )))
        }
    };
    let thread = lua.create_thread(f)?;
    thread.into_async::<MultiValue>(args).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_flags() {
        assert_eq!(parse_shebang(b"return 1").unwrap().1, 0);
        let (f, n) = parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(f.shebang && f.no_writes && f.allow_oom && !f.allow_stale);
        assert_eq!(n, 31);
        assert_eq!(
            parse_shebang(b"#!lua flags=bad\n").unwrap_err(),
            "Unexpected flag in script shebang: bad"
        );
        assert_eq!(
            parse_shebang(b"#!python\n").unwrap_err(),
            "Unexpected engine in script shebang: #!python"
        );
        assert_eq!(
            parse_shebang(b"#!lua").unwrap_err(),
            "Invalid script shebang"
        );
        assert!(parse_shebang(b"#!lua flags=\nreturn 1").unwrap().0.shebang);
    }

    #[test]
    fn sha1_is_redis_script_id() {
        assert_eq!(
            &sha1_hex(b"return 1"),
            b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn error_codes_as_redis_pushes_them() {
        assert_eq!(error_text_with_code("-MY err"), "MY err");
        assert_eq!(error_text_with_code("-x"), "ERR x");
        assert_eq!(error_text_with_code("plain"), "ERR plain");
        assert_eq!(position_line("user_script:12: boom"), Some(12));
        assert_eq!(format_g17(0.1), "0.10000000000000001");
    }
}
