//! The memcached protocol on `--memcached_port`: text and meta commands (memcached 1.6), served
//! by the same shard threads and keyspace as RESP (docs/design/memcache.md).
//!
//! - `proto.rs`: framing and validation of requests.
//! - `ops.rs`: what each request does on the shard that owns its key.
//! - `session.rs`: a connection: read, parse, run pipelined requests one message per shard,
//!   write the replies in order.
//! - `stats.rs`: the counters `stats` reports.

pub mod ops;
pub mod proto;
pub mod session;
pub mod stats;
