//! Networking: listeners, connections and client bookkeeping.

pub mod client;
pub mod connection;
pub mod http;
pub mod listener;
