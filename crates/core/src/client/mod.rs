//! Clients as the rest of the server sees them, apart from their sockets: each thread's
//! registry of its connections (metadata for CLIENT LIST/KILL, the queue of pushes a connection
//! is sent besides replies), output-buffer limits, client eviction and the client cron. The
//! socket side (listeners, sessions, TLS) is `net`, above this; pub/sub, tracking and the
//! command framework reach a connection through its handle here, never through `net`.

pub mod cron;
pub mod evict;
mod handle;
pub mod limits;
pub mod notify;
pub mod push;

pub use handle::*;
