//! The Redis version whose behaviour damselfly matches: reported by INFO, HELLO, `--version`,
//! the HTTP console and Lua's `REDIS_VERSION`, so clients and tools that check it (and gate
//! features on it) treat damselfly as that redis-server.

/// `redis_version`.
pub const REDIS_VERSION: &str = "7.0.15";
