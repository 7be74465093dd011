//! RESP wire protocol for Damselfly: request parsing, reply encoding and the
//! number formatting rules Redis 7.0 clients depend on.

pub mod double;
pub mod parser;
pub mod reply;

pub use parser::{Parser, ParserLimits, ProtocolError};
pub use reply::{Reply, RespVersion};
