//! Fault containment (design note: `docs/design/fault-containment.md`).
//!
//! Rule: a panic inside one command's execution costs that command only. It is caught at the
//! command boundary (the coordinator's `commands::execute`, and each shard-side hop or squashed
//! command), the client gets `-ERR internal error ...`, the event is logged and counted, and
//! every other client and key keeps working. A panic anywhere else on a shard thread (the
//! inbox machinery, the transaction lock table, the ticker) means the engine's own state may be
//! inconsistent: the process exits at once with status 70 and the cause in the log, rather than
//! lingering half-dead.

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Exit status of a process stopped by an uncontained internal fault (BSD's EX_SOFTWARE).
pub const FATAL_EXIT_STATUS: i32 = 70;

thread_local! {
    /// The last panic seen on this thread, as the panic hook described it.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Marker payload of a panic re-raised on the coordinator for a hop that panicked on another
/// shard thread (raised with `resume_unwind`, so the hook does not log it a second time).
pub struct RemotePanic;

/// A caught panic: what the hook logged about it.
#[derive(Debug, Clone)]
pub struct Fault {
    pub text: String,
}

impl Fault {
    fn from_payload(p: Box<dyn Any + Send>) -> Fault {
        if p.is::<RemotePanic>() {
            return Fault {
                text: "a hop panicked on another shard thread (logged there)".into(),
            };
        }
        let payload = payload_text(&*p);
        // The hook's line has the thread and location; use it when it is about this panic.
        let text = match LAST.with(|l| l.borrow_mut().take()) {
            Some(t) if t.ends_with(&payload) => t,
            _ => payload,
        };
        Fault { text }
    }
}

fn payload_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-text panic payload)".to_string()
    }
}

/// Logs every panic with its thread and location (one line), and remembers it for the
/// containment site, which then logs what it did about it.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let loc = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let text = format!(
            "panic on thread '{}' at {loc}: {}",
            thread.name().unwrap_or("?"),
            payload_text(info.payload())
        );
        crate::log_warning!("{text}");
        LAST.with(|l| *l.borrow_mut() = Some(text));
    }));
}

/// Runs `f`, catching a panic. Command code reached from the engine (hops, quick operations,
/// parked work) runs through this so that a panic unwinds no further than the command.
#[inline]
pub fn contain<R>(f: impl FnOnce() -> R) -> Result<R, Fault> {
    catch_unwind(AssertUnwindSafe(f)).map_err(Fault::from_payload)
}

/// Runs engine code that has no command boundary inside it: a panic here leaves engine state
/// that nothing can vouch for, so the process exits.
pub fn or_exit<R>(what: &str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => fatal(&format!("{what}: {}", Fault::from_payload(p).text)),
    }
}

/// Logs the cause and exits the process at once (no destructors, no further work).
pub fn fatal(why: &str) -> ! {
    crate::log_warning!(
        "FATAL internal error outside any command ({why}); exiting with status \
         {FATAL_EXIT_STATUS} because engine state may be inconsistent"
    );
    // SAFETY: _exit only ends the process; nothing of ours runs afterwards.
    unsafe { libc::_exit(FATAL_EXIT_STATUS) }
}

/// A future whose panics are caught and returned as `Err(Fault)` (the coordinator's command
/// boundary: handlers are async and may panic in any poll).
pub struct CatchUnwind<F>(F);

impl<F: Future> CatchUnwind<F> {
    pub fn new(f: F) -> Self {
        CatchUnwind(f)
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Fault>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of the only field, which is never moved out of `self`.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(r)) => Poll::Ready(Ok(r)),
            Ok(Poll::Pending) => Poll::Pending,
            // The inner future is never polled again (async blocks are poisoned after a panic).
            Err(p) => Poll::Ready(Err(Fault::from_payload(p))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contain_returns_the_panic_text() {
        install_panic_hook();
        let r: Result<(), Fault> = contain(|| panic!("boom {}", 7));
        let f = r.unwrap_err();
        assert!(f.text.contains("boom 7"), "{}", f.text);
        assert!(f.text.contains("guard.rs"), "location logged: {}", f.text);
        assert_eq!(contain(|| 5).unwrap(), 5);
    }

    #[test]
    fn catch_unwind_future() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let r = rt.block_on(CatchUnwind::new(async {
            tokio::task::yield_now().await;
            if true {
                panic!("async boom");
            }
            1
        }));
        assert!(r.unwrap_err().text.contains("async boom"));
        let ok = rt.block_on(CatchUnwind::new(async { 3 }));
        assert_eq!(ok.unwrap(), 3);
    }

    #[test]
    fn remote_panic_marker() {
        let r: Result<(), Fault> = contain(|| std::panic::resume_unwind(Box::new(RemotePanic)));
        assert!(r.unwrap_err().text.contains("another shard thread"));
    }
}
