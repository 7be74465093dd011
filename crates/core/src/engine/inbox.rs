//! Cross-thread message passing between shard threads.
//!
//! Each destination thread owns one `Inbox` holding one queue per source thread, so producers never
//! contend with each other. A destination is woken (a syscall, through tokio's `Notify`) only when
//! its inbox goes from empty to non-empty: the `pending` flag records that a wake-up is already on
//! its way, and the owner clears it before draining.

use crossbeam_queue::SegQueue;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::Notify;

use super::worker::Worker;

/// Work shipped to another thread: runs there with that thread's worker (shard, clients).
pub type Task = Box<dyn FnOnce(&Worker) + Send>;

/// One message: work to run, or the result of a call this thread made (its own variant so that
/// a reply costs one allocation, the result's, rather than also a closure around it).
pub enum Msg {
    Run(Task),
    Done(usize, Box<dyn std::any::Any + Send>),
}

pub struct Inbox {
    queues: Vec<SegQueue<Msg>>,
    pending: AtomicBool,
    notify: Notify,
    /// Number of times a producer actually had to wake this thread (exposed in INFO).
    pub wakeups: AtomicU64,
}

impl Inbox {
    /// `sources` = number of threads that may send (shard threads plus one slot for outsiders).
    pub fn new(sources: usize) -> Self {
        Inbox {
            queues: (0..sources).map(|_| SegQueue::new()).collect(),
            pending: AtomicBool::new(false),
            notify: Notify::new(),
            wakeups: AtomicU64::new(0),
        }
    }

    pub fn push(&self, src: usize, msg: Msg) {
        let src = src.min(self.queues.len() - 1);
        self.queues[src].push(msg);
        if !self.pending.swap(true, Ordering::SeqCst) {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            self.notify.notify_one();
        }
    }

    /// Waits until there may be messages.
    pub async fn wait(&self) {
        self.notify.notified().await;
    }

    /// Clears the pending flag; must be called before draining so that a push racing with the
    /// drain re-arms the wake-up.
    pub fn begin_drain(&self) {
        self.pending.swap(false, Ordering::SeqCst);
    }

    /// Pops up to `budget` messages round-robin over sources into `out`. Returns true if every
    /// queue was found empty (so the owner may sleep).
    pub fn pop_batch(&self, budget: usize, out: &mut Vec<Msg>) -> bool {
        let mut taken = 0;
        let mut all_empty = true;
        for q in &self.queues {
            while taken < budget {
                match q.pop() {
                    Some(m) => {
                        out.push(m);
                        taken += 1;
                    }
                    None => break,
                }
            }
            if !q.is_empty() {
                all_empty = false;
            }
        }
        all_empty
    }
}
