//! Networking: listeners, connection sessions, TLS and the HTTP console. Client bookkeeping
//! (handles, limits, eviction) is `crate::client`, below this.

pub mod http;
pub mod listener;
pub mod session;
pub mod stream;
pub mod tls;
