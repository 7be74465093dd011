//! Long-running scripts: `busy-reply-threshold` (`lua-time-limit`), `-BUSY`, SCRIPT KILL and
//! FUNCTION KILL, as Redis 7.0 has them.
//!
//! A count hook on the script's coroutine runs every `HOOK_EVERY` Lua instructions. Once the
//! script has run longer than the threshold:
//! - the server is marked busy: every command but the few Redis allows (`ALLOW_BUSY`: SCRIPT
//!   KILL, FUNCTION KILL, SHUTDOWN NOSAVE...) is answered `-BUSY` on every thread;
//! - the hook yields the coroutine at each run, so that the script's own thread goes on serving
//!   its other connections (they get `-BUSY` or run a KILL) between slices of the script. The
//!   script keeps every shard locked, so nothing else touches the data meanwhile;
//! - a SCRIPT KILL (or FUNCTION KILL) that arrived makes the hook raise an error that ends the
//!   script, unless it already wrote (then the KILL was answered `-UNKILLABLE`).
//!
//! Lua 5.1 lets a count hook yield only when no C call is under the running Lua code (else
//! `lua_yield` raises "attempt to yield across metamethod/C-call boundary"); the hook reads the
//! interpreter's call counters to yield only then (`can_yield`).

use std::cell::Cell;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use mlua::ffi;

use crate::clock::Ticks;

/// Lua instructions between two hook runs (Redis uses the same count).
const HOOK_EVERY: c_int = 100_000;

/// The busy script's thread (`thread_token`).
static OWNER: AtomicUsize = AtomicUsize::new(0);
/// A KILL for it arrived.
static KILL: AtomicBool = AtomicBool::new(false);
/// It wrote (a KILL can no longer stop it).
static WROTE: AtomicBool = AtomicBool::new(false);

/// What FUNCTION STATS shows of a script running past its threshold: its name, its command,
/// when it started. Written when the script turns busy and when it ends (never per command).
static RUNNING: std::sync::Mutex<Option<Described>> = std::sync::Mutex::new(None);

/// A busy script as FUNCTION STATS shows it: name, command, start.
type Described = (String, Vec<Vec<u8>>, Instant);

thread_local! {
    /// The running script's name and command (`describe`), copied only if it turns busy.
    static DESCRIBED: Cell<Option<Borrowed>> = const { Cell::new(None) };
    /// The script running on this thread: its coroutine, when it started, its threshold (ms;
    /// 0: none).
    /// The running script's coroutine, start (in `clock::Ticks`: cheaper than an `Instant`
    /// for every script) and threshold in ms.
    static CURRENT: Cell<Option<(*mut ffi::lua_State, u64, u64)>> = const { Cell::new(None) };
    /// This thread's script: what it is (as KIND) and whether it wrote (as WROTE).
    static LOCAL_KIND: Cell<u8> = const { Cell::new(0) };
    static LOCAL_WROTE: Cell<bool> = const { Cell::new(false) };
}

/// A number that tells this thread apart (never 0).
fn thread_token() -> usize {
    thread_local! { static TOKEN: u8 = const { 0 }; }
    TOKEN.with(|t| t as *const u8 as usize)
}

/// Is this thread's script the busy one?
fn owns_busy() -> bool {
    BUSY.load(Ordering::Relaxed) && OWNER.load(Ordering::Relaxed) == thread_token()
}

pub use crate::engine::busy::{busy, ERR_BUSY_FUNCTION, ERR_BUSY_SCRIPT};
use crate::engine::busy::{BUSY, KIND};

/// The running script's name and command, borrowed: pointers to the driver's own (a script
/// runs often and turns busy rarely; copying them for every run cost a few allocations).
#[derive(Clone, Copy)]
struct Borrowed {
    name: *const str,
    /// The command's arguments: the address and length of the driver's `&[&[u8]]`.
    command: (usize, usize),
}

/// Names the script about to start (FUNCTION STATS shows it if it turns busy).
///
/// # Safety
/// `name` and `command` must stay alive and unmoved until `end` (the script's driver holds
/// them for the whole run, and `Running`'s drop calls `end`).
pub unsafe fn describe(name: &str, command: &[&[u8]]) {
    DESCRIBED.with(|d| {
        d.set(Some(Borrowed {
            name: name as *const str,
            command: (command.as_ptr() as usize, command.len()),
        }))
    });
}

/// The busy script: (name, command, milliseconds running).
pub fn running() -> Option<(String, Vec<Vec<u8>>, u64)> {
    let r = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    r.as_ref()
        .map(|(n, c, t)| (n.clone(), c.clone(), t.elapsed().as_millis() as u64))
}

/// A script starts on this thread in coroutine `state`; its clock started at `started`
/// (`Ticks`: its command's start).
///
/// # Safety
/// `state` must be the live coroutine the script runs in, kept alive until `end`.
pub unsafe fn begin(state: *mut ffi::lua_State, threshold_ms: u64, started: u64, function: bool) {
    LOCAL_WROTE.with(|w| w.set(false));
    LOCAL_KIND.with(|k| k.set(if function { 2 } else { 1 }));
    CURRENT.with(|c| c.set(Some((state, started, threshold_ms))));
    // SAFETY: `state` is live (the caller's contract); the hook only reads this thread's
    // CURRENT and the interpreter state.
    unsafe {
        ffi::lua_sethook(state, Some(hook), ffi::LUA_MASKCOUNT, HOOK_EVERY);
    }
}

/// The script ended (or was dropped).
pub fn end() {
    CURRENT.with(|c| c.set(None));
    DESCRIBED.with(|d| d.set(None));
    LOCAL_KIND.with(|k| k.set(0));
    if !owns_busy() {
        return;
    }
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = None;
    KILL.store(false, Ordering::Relaxed);
    WROTE.store(false, Ordering::Relaxed);
    KIND.store(0, Ordering::Relaxed);
    OWNER.store(0, Ordering::Relaxed);
    BUSY.store(false, Ordering::Release);
    crate::log_warning!("Slow script detected: script finished its execution after a long time");
}

/// The running script wrote.
pub fn note_write() {
    LOCAL_WROTE.with(|w| w.set(true));
    if owns_busy() {
        WROTE.store(true, Ordering::Relaxed);
    }
}

/// SCRIPT KILL (`function` false) / FUNCTION KILL: Ok when the kill was requested, else the
/// error reply.
pub fn kill(function: bool) -> Result<(), &'static str> {
    let kind = KIND.load(Ordering::Relaxed);
    if !BUSY.load(Ordering::Relaxed) || kind == 0 {
        return Err("NOTBUSY No scripts in execution right now.");
    }
    // The other kind of KILL is answered with the running kind's BUSY error.
    if function && kind != 2 {
        return Err(ERR_BUSY_SCRIPT);
    }
    if !function && kind == 2 {
        return Err(ERR_BUSY_FUNCTION);
    }
    if WROTE.load(Ordering::Relaxed) {
        return Err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
    }
    KILL.store(true, Ordering::Relaxed);
    Ok(())
}

/// The first fields of Lua 5.1.5's `struct lua_State` (lstate.h; the vendored interpreter is
/// exactly that version): what `lua_yield` checks before it lets a coroutine yield.
#[repr(C)]
struct StatePrefix {
    next: *mut c_void,
    tt: u8,
    marked: u8,
    status: u8,
    top: *mut c_void,
    base: *mut c_void,
    l_g: *mut c_void,
    ci: *mut c_void,
    savedpc: *const c_void,
    stack_last: *mut c_void,
    stack: *mut c_void,
    end_ci: *mut c_void,
    base_ci: *mut c_void,
    stacksize: c_int,
    size_ci: c_int,
    n_ccalls: u16,
    base_ccalls: u16,
}

/// May `state` yield now (no C call between the running code and the coroutine's base)?
///
/// # Safety
/// `state` must be a live Lua 5.1.5 state.
unsafe fn can_yield(state: *mut ffi::lua_State) -> bool {
    let s = &*(state as *const StatePrefix);
    s.n_ccalls <= s.base_ccalls
}

unsafe extern "C-unwind" fn hook(state: *mut ffi::lua_State, _ar: *mut ffi::lua_Debug) {
    let Some((main, start, threshold)) = CURRENT.with(|c| c.get()) else {
        return;
    };
    let elapsed_us = Ticks::to_us(Ticks::now().wrapping_sub(start));
    if threshold == 0 || elapsed_us / 1000 < threshold {
        return;
    }
    let now = Instant::now();
    let started = now
        .checked_sub(std::time::Duration::from_micros(elapsed_us))
        .unwrap_or(now);
    if !BUSY.load(Ordering::Relaxed) && !BUSY.swap(true, Ordering::Acquire) {
        // This script is the busy one now.
        if let Some(b) = DESCRIBED.with(|d| d.get()) {
            // SAFETY: the script is running, so its driver still holds what `describe` points
            // to (see `describe`).
            let (name, command) = unsafe {
                let args = std::slice::from_raw_parts(b.command.0 as *const &[u8], b.command.1);
                (
                    (*b.name).to_string(),
                    args.iter().map(|a| a.to_vec()).collect(),
                )
            };
            *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = Some((name, command, started));
        }
        KIND.store(LOCAL_KIND.with(|k| k.get()), Ordering::Relaxed);
        WROTE.store(LOCAL_WROTE.with(|w| w.get()), Ordering::Relaxed);
        KILL.store(false, Ordering::Relaxed);
        OWNER.store(thread_token(), Ordering::Relaxed);
        crate::log_warning!(
            "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the SCRIPT KILL command.",
            started.elapsed().as_millis()
        );
    }
    if owns_busy() && KILL.load(Ordering::Relaxed) && !WROTE.load(Ordering::Relaxed) {
        // Ends the script: the error unwinds (longjmp) to the coroutine's resume. Nothing
        // of this frame needs dropping.
        ffi::lua_pushstring(state, c"Script killed by user with SCRIPT KILL...".as_ptr());
        ffi::lua_error(state);
    }
    if state == main && can_yield(state) {
        ffi::lua_yield(state, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_prefix_matches_lua_5_1_5() {
        // nCcalls/baseCcalls sit after two ints that follow nine pointers and a header.
        assert_eq!(std::mem::offset_of!(StatePrefix, status), 10);
        assert_eq!(std::mem::offset_of!(StatePrefix, stacksize), 88);
        assert_eq!(std::mem::offset_of!(StatePrefix, n_ccalls), 96);
        assert_eq!(std::mem::offset_of!(StatePrefix, base_ccalls), 98);
    }

    #[test]
    fn counters_read_inside_a_c_call() {
        // Inside a C function called from Lua, nCcalls is above baseCcalls; at top level it
        // is not: what `can_yield` relies on.
        let lua = mlua::Lua::new();
        let inside = lua
            .create_function(|lua, ()| {
                let th = lua.current_thread();
                let st = th.to_pointer() as *mut ffi::lua_State;
                // SAFETY: the current thread's state is live during the call.
                Ok(unsafe { can_yield(st) })
            })
            .unwrap();
        lua.globals().set("probe", inside).unwrap();
        let r: bool = lua.load("return probe()").eval().unwrap();
        assert!(!r, "a C call is on the stack");
    }
}
