//! The libraries Redis ships with its Lua: `bit` (LuaBitOp), `cjson`, `cmsgpack` and `struct`,
//! written in Rust to behave as Redis 7.0's C versions (checked against a real redis-server by
//! `tests/scripting_libs.rs`).

mod args;
pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod r#struct;

/// Registers every library as a global in `lua`.
pub fn register_all(lua: &mlua::Lua) -> mlua::Result<()> {
    bit::register(lua)?;
    cjson::register(lua)?;
    cmsgpack::register(lua)?;
    r#struct::register(lua)?;
    Ok(())
}
