//! Networking: listeners, connections and client bookkeeping.

pub mod client;
pub mod client_evict;
pub mod cron;
pub mod http;
pub mod limits;
pub mod listener;
pub mod notify;
pub mod session;
pub mod stream;
pub mod tls;
