//! Whether the server is busy with a script past its time limit (`-BUSY` for every command but
//! the few Redis allows). In the core so that the command framework and the replica's link read
//! it without naming scripting; `scripting::busy` runs scripts' hooks and sets it.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// A script has run past the threshold somewhere: "the busy script" (scripts on different
/// threads may run at once; the first past its threshold is the one the server is busy with).
pub static BUSY: AtomicBool = AtomicBool::new(false);
/// What it is: 1 an EVAL script, 2 a function.
pub static KIND: AtomicU8 = AtomicU8::new(0);

/// Redis's replies.
pub const ERR_BUSY_SCRIPT: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const ERR_BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// Is a script past its threshold (commands get `-BUSY`)? Which error then.
#[inline]
pub fn busy() -> Option<&'static str> {
    if !BUSY.load(Ordering::Relaxed) {
        return None;
    }
    Some(if KIND.load(Ordering::Relaxed) == 2 {
        ERR_BUSY_FUNCTION
    } else {
        ERR_BUSY_SCRIPT
    })
}
