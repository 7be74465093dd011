//! Per-thread counters. Each thread counts for the connections it owns; INFO sums them over all
//! threads with a broadcast, so no counter is shared between threads on the hot path.

use std::collections::HashMap;

#[derive(Default, Clone, Copy, Debug)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

/// One SLOWLOG entry.
#[derive(Clone, Debug)]
pub struct SlowEntry {
    pub id: u64,
    pub unix_secs: u64,
    pub usec: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: String,
}

#[derive(Default)]
pub struct ThreadStats {
    pub commands_processed: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Indexed by command id (see `commands::registry`).
    pub cmd: Vec<CmdStat>,
    pub errors: HashMap<String, u64>,
    pub total_error_replies: u64,
    /// Commands that panicked and were contained (the client got `-ERR internal error`).
    pub internal_errors: u64,
    /// Clients closed for passing `client-output-buffer-limit` / `client-query-buffer-limit`.
    pub obuf_limit_disconnections: u64,
    pub qbuf_limit_disconnections: u64,
    pub slowlog: std::collections::VecDeque<SlowEntry>,
    /// Per-command latency histograms (LATENCY HISTOGRAM, INFO latencystats), indexed by
    /// command id; created on a command's first call, as Redis does.
    pub lat_hist: Vec<Option<Box<crate::latency::Hdr>>>,
}

impl ThreadStats {
    #[inline]
    pub fn cmd_mut(&mut self, id: usize) -> &mut CmdStat {
        if self.cmd.len() <= id {
            self.cmd.resize(id + 1, CmdStat::default());
        }
        &mut self.cmd[id]
    }

    #[inline]
    pub fn hist_mut(&mut self, id: usize) -> &mut crate::latency::Hdr {
        if self.lat_hist.len() <= id {
            self.lat_hist.resize_with(id + 1, || None);
        }
        self.lat_hist[id].get_or_insert_with(Default::default)
    }

    pub fn reset(&mut self) {
        self.lat_hist.clear();
        self.commands_processed = 0;
        self.net_input_bytes = 0;
        self.net_output_bytes = 0;
        self.cmd.clear();
        self.errors.clear();
        self.total_error_replies = 0;
        self.internal_errors = 0;
        self.obuf_limit_disconnections = 0;
        self.qbuf_limit_disconnections = 0;
    }
}
