//! FAILOVER (Redis 6.2+): a primary hands its role to one of its replicas without losing a
//! write. Writes pause (`engine::pause::failover_pause`), the primary waits until the target
//! replica acknowledged the whole stream (*waiting-for-sync*; with `TIMEOUT` it gives up, or
//! with `FORCE` goes on anyway), then becomes a replica of the target and asks it
//! `PSYNC <replid> <offset> FAILOVER` (*failover-in-progress*). The target, whose history is
//! ours, promotes itself and answers `+CONTINUE`; the failover is then over and the paused
//! writes go on (answered `-READONLY`, as the server is a replica now). A refused PSYNC makes
//! the server a primary again (a new replication id; its replicas reconnect and continue).
//!
//! The state is process-wide (one failover at a time); the watcher that moves it along is a
//! task on the thread that ran FAILOVER, woken every 10 ms (Redis checks before each sleep).

use std::rc::Rc;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use crate::engine::Worker;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    None,
    WaitForSync,
    InProgress,
}

struct State {
    phase: Phase,
    /// The replica to hand over to (chosen when it caught up, without `TO`).
    target: Option<(String, u16)>,
    /// Unix ms the wait for the target ends at (0: no `TIMEOUT`).
    end_ms: u64,
    force: bool,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    Mutex::new(State {
        phase: Phase::None,
        target: None,
        end_ms: 0,
        force: false,
    })
});

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn phase() -> Phase {
    state().phase
}

/// INFO's `master_failover_state`.
pub fn phase_word() -> &'static str {
    match phase() {
        Phase::None => "no-failover",
        Phase::WaitForSync => "waiting-for-sync",
        Phase::InProgress => "failover-in-progress",
    }
}

/// What FAILOVER asked for, checked by the command.
pub struct Request {
    pub target: Option<(String, u16)>,
    pub timeout_ms: u64,
    pub force: bool,
}

/// Starts a failover (the command checked it may): writes pause and the watcher runs on
/// this thread.
pub fn begin(w: &Rc<Worker>, req: Request) {
    {
        let mut s = state();
        s.phase = Phase::WaitForSync;
        s.end_ms = if req.timeout_ms > 0 {
            crate::clock::unix_ms() + req.timeout_ms
        } else {
            0
        };
        s.force = req.force;
        s.target = req.target;
    }
    crate::engine::pause::failover_pause(true);
    tokio::task::spawn_local(watch(w.clone()));
}

/// Redis's `clearFailoverState`: no failover, writes go on.
pub fn clear() {
    let mut s = state();
    s.phase = Phase::None;
    s.target = None;
    s.end_ms = 0;
    s.force = false;
    drop(s);
    crate::engine::pause::failover_pause(false);
}

/// Redis's `abortFailover`: logged; a server already a replica of the target is a primary
/// again.
pub async fn abort(w: &Rc<Worker>, why: &str) {
    let (phase, target) = {
        let s = state();
        (s.phase, s.target.clone())
    };
    if phase == Phase::None {
        return;
    }
    match &target {
        Some((h, p)) => crate::log_notice!("FAILOVER to {h}:{p} aborted: {why}"),
        None => crate::log_notice!("FAILOVER to any replica aborted: {why}"),
    }
    if phase == Phase::InProgress {
        let mut icx = crate::commands::ConnCtx::internal(w.clone());
        crate::replication::commands::unset_master(&mut icx).await;
    }
    clear();
}

/// The handshake with the target ended (`accepted`: `+CONTINUE` or `+FULLRESYNC`).
pub async fn psync_answered(w: &Rc<Worker>, accepted: bool) {
    if phase() != Phase::InProgress {
        return;
    }
    if accepted {
        clear();
    } else {
        abort(w, "Failover target rejected psync request").await;
    }
}

/// Moves a waiting failover along (Redis's `updateFailoverStatus`) until it leaves the
/// waiting phase.
async fn watch(w: Rc<Worker>) {
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (phase, target, end_ms, force) = {
            let s = state();
            (s.phase, s.target.clone(), s.end_ms, s.force)
        };
        if phase != Phase::WaitForSync {
            return;
        }
        if end_ms != 0 && crate::clock::unix_ms() >= end_ms {
            if force {
                if let Some((h, p)) = target {
                    crate::log_notice!("FAILOVER to {h}:{p} time out exceeded, failing over.");
                    hand_over(&w, h, p);
                    return;
                }
            }
            abort(&w, "Replica never caught up before timeout").await;
            return;
        }
        // Everything written before the pause is in the stream once the journal drained.
        let offset = super::settled_offset().await;
        let caught_up = {
            let m = super::master();
            match &target {
                Some((h, p)) => m
                    .replicas
                    .iter()
                    .find(|r| r.ip == *h && r.port == *p)
                    .filter(|r| r.ack_offset == offset)
                    .map(|r| (r.ip.clone(), r.port)),
                None => m
                    .replicas
                    .iter()
                    .find(|r| r.online && r.ack_offset == offset)
                    .map(|r| (r.ip.clone(), r.port)),
            }
        };
        if let Some((h, p)) = caught_up {
            crate::log_notice!("Failover target {h}:{p} is synced, failing over.");
            hand_over(&w, h, p);
            return;
        }
    }
}

/// Becomes a replica of the target; the link's PSYNC carries `FAILOVER`.
fn hand_over(w: &Rc<Worker>, host: String, port: u16) {
    {
        let mut s = state();
        if s.phase != Phase::WaitForSync {
            return;
        }
        s.phase = Phase::InProgress;
        s.target = Some((host.clone(), port));
    }
    // Our replicas stay: they continue with us once the target accepted (a new id then
    // makes us drop them so that they learn it).
    super::replica::start(w, host, port);
}

/// Is `host:port` an attached replica (by its address and announced port), and online?
pub fn find_replica(host: &str, port: u16) -> Option<bool> {
    super::master()
        .replicas
        .iter()
        .find(|r| r.ip == host && r.port == port)
        .map(|r| r.online)
}
