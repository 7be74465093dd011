//! A connection's wake-up (CLIENT KILL, queued pushes, a resize of its query buffer): a
//! notification for futures of one thread. A connection and everything that wakes it share the
//! connection's thread, so no lock is needed; tokio's `Notify` locks a mutex on every poll of a
//! waiting `Notified`, which a connection's read loop does once per read (about 1% of a
//! one-command-per-read profile).
//!
//! Semantics: `notify_one` wakes every future created before it (each re-checks the state it
//! waits on, so an extra wake-up is harmless), and a notification nobody has seen yet is kept
//! for the next future (as tokio's permit): a wake-up is never lost.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Wakers kept before they are all woken at once (distinct tasks waiting on one connection are
/// few; a future dropped unfired leaves its waker until then).
const MAX_WAKERS: usize = 16;

#[derive(Default)]
pub struct LocalNotify {
    /// Notifications so far.
    count: Cell<u64>,
    /// The count a fired future saw: later futures wait for more.
    seen: Cell<u64>,
    wakers: RefCell<smallvec::SmallVec<[Waker; 2]>>,
}

impl LocalNotify {
    pub fn new() -> LocalNotify {
        LocalNotify::default()
    }

    /// Wakes the waiting futures (or the next one to wait).
    pub fn notify_one(&self) {
        self.count.set(self.count.get() + 1);
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for w in wakers {
            w.wake();
        }
    }

    /// A future that completes on the first notification it has not seen.
    pub fn notified(&self) -> Notified<'_> {
        Notified {
            notify: self,
            after: self.seen.get(),
        }
    }
}

pub struct Notified<'a> {
    notify: &'a LocalNotify,
    /// It completes once `count` passes this.
    after: u64,
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let n = self.notify;
        let count = n.count.get();
        if count > self.after {
            n.seen.set(count);
            return Poll::Ready(());
        }
        let mut wakers = n.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            if wakers.len() >= MAX_WAKERS {
                for w in wakers.drain(..) {
                    w.wake();
                }
            }
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll(f: &mut Notified<'_>, w: &Waker) -> bool {
        Pin::new(f).poll(&mut Context::from_waker(w)).is_ready()
    }

    #[test]
    fn wakes_the_waiter_and_keeps_an_unseen_notification() {
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let n = LocalNotify::new();
        let mut f = n.notified();
        assert!(!poll(&mut f, &waker));
        assert!(!poll(&mut f, &waker), "polled again: still waiting");
        n.notify_one();
        assert_eq!(
            counter.0.load(Ordering::Relaxed),
            1,
            "registered once, woken once"
        );
        assert!(poll(&mut f, &waker));
        // Seen: a new future waits for the next one.
        let mut g = n.notified();
        assert!(!poll(&mut g, &waker));
        // A notification with nobody waiting is kept for the next future.
        n.notify_one();
        let mut h = n.notified();
        assert!(poll(&mut h, &waker));
    }

    #[test]
    fn every_earlier_future_fires() {
        let waker = Waker::from(Arc::new(Counter(AtomicUsize::new(0))));
        let n = LocalNotify::new();
        let mut a = n.notified();
        let mut b = n.notified();
        assert!(!poll(&mut a, &waker) && !poll(&mut b, &waker));
        n.notify_one();
        assert!(poll(&mut a, &waker));
        assert!(poll(&mut b, &waker), "the other waiter is not starved");
    }

    #[test]
    fn wakers_stay_bounded() {
        let n = LocalNotify::new();
        let counters: Vec<_> = (0..40)
            .map(|_| Arc::new(Counter(AtomicUsize::new(0))))
            .collect();
        for c in &counters {
            let mut f = n.notified();
            assert!(!poll(&mut f, &Waker::from(c.clone())));
        }
        assert!(n.wakers.borrow().len() <= MAX_WAKERS);
        let woken: usize = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
        assert_eq!(
            woken + n.wakers.borrow().len(),
            40,
            "every dropped waker was woken"
        );
    }
}
