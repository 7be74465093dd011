//! The script slot: one script at a time per thread (its interpreter's globals, KEYS and ARGV
//! among them, belong to the running script). Taken by every script, so it is thread-local
//! and free of atomics: an uncontended take and release are two `Cell` writes (a tokio
//! `Mutex` behind an `Arc` cost an atomic clone and drop, a compare-and-swap and a futex-backed
//! release per script, ~3% of a one-key EVALSHA). Waiters are served first come, first served,
//! the slot handed from the holder to the next waiter directly.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// A waiter's state, shared between its future and the queue.
#[derive(Default)]
struct Waiter {
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

struct Slot {
    held: Cell<bool>,
    waiters: RefCell<VecDeque<Rc<Waiter>>>,
}

thread_local! {
    static SLOT: Slot = const {
        Slot {
            held: Cell::new(false),
            waiters: RefCell::new(VecDeque::new()),
        }
    };
}

/// Holding the slot; dropping it hands the slot to the next waiter.
pub struct Held(());

impl Drop for Held {
    fn drop(&mut self) {
        release();
    }
}

/// The slot at once, when free.
pub fn try_take() -> Option<Held> {
    SLOT.with(|s| (!s.held.replace(true)).then(|| Held(())))
}

/// The slot, waiting behind the scripts that asked for it earlier.
pub async fn take() -> Held {
    if let Some(h) = try_take() {
        return h;
    }
    let w = Rc::new(Waiter::default());
    SLOT.with(|s| s.waiters.borrow_mut().push_back(w.clone()));
    Wait(Some(w)).await;
    Held(())
}

/// Passes the slot to the first waiter still waiting, or frees it.
fn release() {
    let next = SLOT.with(|s| {
        let next = s.waiters.borrow_mut().pop_front();
        if next.is_none() {
            s.held.set(false);
        }
        next
    });
    if let Some(w) = next {
        w.granted.set(true);
        if let Some(waker) = w.waker.take() {
            waker.wake();
        }
    }
}

/// Waiting for the slot; dropped before its turn it leaves the queue, after it (granted but
/// not polled again) it passes the slot on.
struct Wait(Option<Rc<Waiter>>);

impl Future for Wait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(w) = &self.0 else {
            return Poll::Ready(());
        };
        if w.granted.get() {
            self.0 = None;
            return Poll::Ready(());
        }
        *w.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        let Some(w) = self.0.take() else {
            return;
        };
        if w.granted.get() {
            release();
        } else {
            SLOT.with(|s| s.waiters.borrow_mut().retain(|x| !Rc::ptr_eq(x, &w)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
        let mut cx = Context::from_waker(Waker::noop());
        f.poll(&mut cx)
    }

    #[test]
    fn waiters_are_served_in_order_and_a_dropped_waiter_leaves_the_queue() {
        let first = try_take().expect("free slot");
        assert!(try_take().is_none());
        // A failed try leaves the slot with its holder.
        assert!(SLOT.with(|s| s.held.get()));
        assert!(try_take().is_none());
        let mut a = Box::pin(take());
        let mut b = Box::pin(take());
        let mut c = Box::pin(take());
        assert!(poll_once(a.as_mut()).is_pending());
        assert!(poll_once(b.as_mut()).is_pending());
        assert!(poll_once(c.as_mut()).is_pending());
        // b gives up before its turn: a, then c.
        drop(b);
        drop(first);
        assert!(try_take().is_none(), "handed to a, not freed");
        assert!(try_take().is_none(), "still a's");
        let Poll::Ready(ha) = poll_once(a.as_mut()) else {
            panic!("a was first")
        };
        assert!(poll_once(c.as_mut()).is_pending());
        drop(ha);
        let Poll::Ready(hc) = poll_once(c.as_mut()) else {
            panic!("c is next")
        };
        drop(hc);
        let again = try_take().expect("free once nobody waits");
        drop(again);
    }

    #[test]
    fn a_granted_waiter_dropped_before_running_passes_the_slot_on() {
        let first = try_take().expect("free slot");
        let mut a = Box::pin(take());
        let mut b = Box::pin(take());
        assert!(poll_once(a.as_mut()).is_pending());
        assert!(poll_once(b.as_mut()).is_pending());
        drop(first);
        drop(a);
        let Poll::Ready(hb) = poll_once(b.as_mut()) else {
            panic!("b gets the slot a dropped")
        };
        drop(hb);
        assert!(try_take().is_some());
    }
}
