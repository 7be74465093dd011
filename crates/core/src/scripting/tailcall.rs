//! Scripts keep their frame across `return f(...)`.
//!
//! Lua 5.1 compiles `return f(...)` to a tail call (`OP_TAILCALL`), which replaces the
//! caller's frame by the callee's when the callee is a Lua function. Redis's `redis.call` is a
//! C function, whose tail calls leave the script's frame in place, so an error it raises names
//! the script's line (`... script: ..., on @user_script:1.`). Ours is a Lua function (it must
//! be able to yield while a command runs on another shard), so `return redis.call(...)` lost
//! that line. Compiled scripts and libraries therefore have every `OP_TAILCALL` turned into
//! `OP_CALL`: the compiler always follows a tail call with `OP_RETURN A 0`, and `OP_CALL A B
//! 0` leaves the results where that return takes them from, so what the function returns is
//! unchanged. The only difference is the stack depth of deep tail recursion (Lua's limit of
//! 20000 nested calls then applies), which no Redis script relies on.
//!
//! The patch edits the compiled chunk (`string.dump`'s format, lundump.c) and loads it back;
//! an unexpected format leaves the function as it was.

use mlua::{Function, Lua};

/// `OP_CALL` and `OP_TAILCALL` in Lua 5.1's opcode numbering (lopcodes.h).
const OP_CALL: u32 = 28;
const OP_TAILCALL: u32 = 29;

/// `f` (just compiled from source `name`) with its tail calls made plain calls, or `f` itself
/// if its compiled form is not what this understands.
pub fn without_tail_calls(lua: &Lua, f: Function, name: &str) -> Function {
    let mut chunk = f.dump(false);
    match patch(&mut chunk) {
        Some(0) | None => f,
        Some(_) => lua
            .load(&chunk[..])
            .set_name(name)
            .set_mode(mlua::ChunkMode::Binary)
            .into_function()
            .unwrap_or(f),
    }
}

/// Rewrites every `OP_TAILCALL` of a dumped chunk in place; the number rewritten, or None when
/// the chunk is not a Lua 5.1 dump with 4-byte instructions and ints.
fn patch(chunk: &mut [u8]) -> Option<usize> {
    let header = chunk.get(..12)?;
    if &header[..4] != b"\x1bLua" || header[4] != 0x51 || header[5] != 0 {
        return None;
    }
    let r = Reader {
        little: header[6] == 1,
        size_t: header[8] as usize,
        number: header[10] as usize,
    };
    // int and Instruction must be 4 bytes (all the platforms we build for).
    if header[7] != 4 || header[9] != 4 || !matches!(r.size_t, 4 | 8) {
        return None;
    }
    let mut pos = 12;
    let n = r.function(chunk, &mut pos)?;
    (pos == chunk.len()).then_some(n)
}

struct Reader {
    little: bool,
    size_t: usize,
    number: usize,
}

impl Reader {
    fn int(&self, c: &[u8], pos: &mut usize) -> Option<u32> {
        let b: [u8; 4] = c.get(*pos..*pos + 4)?.try_into().ok()?;
        *pos += 4;
        Some(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    fn size(&self, c: &[u8], pos: &mut usize) -> Option<usize> {
        let b = c.get(*pos..*pos + self.size_t)?;
        *pos += self.size_t;
        let mut v = 0u64;
        for i in 0..self.size_t {
            let byte = if self.little {
                b[self.size_t - 1 - i]
            } else {
                b[i]
            };
            v = (v << 8) | byte as u64;
        }
        usize::try_from(v).ok()
    }

    fn skip(&self, c: &[u8], pos: &mut usize, n: usize) -> Option<()> {
        let end = pos.checked_add(n)?;
        (end <= c.len()).then(|| *pos = end)
    }

    fn string(&self, c: &[u8], pos: &mut usize) -> Option<()> {
        let n = self.size(c, pos)?;
        self.skip(c, pos, n)
    }

    /// One function (lundump.c's LoadFunction): patches its code, then its nested functions.
    fn function(&self, c: &mut [u8], pos: &mut usize) -> Option<usize> {
        self.string(c, pos)?; // source
        self.skip(c, pos, 4 + 4 + 4)?; // linedefined, lastlinedefined, 4 single bytes
        let ncode = self.int(c, pos)? as usize;
        let mut patched = 0;
        for _ in 0..ncode {
            let at = *pos;
            let ins = self.int(c, pos)?;
            if ins & 0x3f == OP_TAILCALL {
                let new = (ins & !0x3f) | OP_CALL;
                let bytes = if self.little {
                    new.to_le_bytes()
                } else {
                    new.to_be_bytes()
                };
                c[at..at + 4].copy_from_slice(&bytes);
                patched += 1;
            }
        }
        let nconst = self.int(c, pos)?;
        for _ in 0..nconst {
            let t = *c.get(*pos)?;
            *pos += 1;
            match t {
                0 => {}
                1 => self.skip(c, pos, 1)?,
                3 => self.skip(c, pos, self.number)?,
                4 => self.string(c, pos)?,
                _ => return None,
            }
        }
        let nproto = self.int(c, pos)?;
        for _ in 0..nproto {
            patched += self.function(c, pos)?;
        }
        let nline = self.int(c, pos)? as usize;
        self.skip(c, pos, nline.checked_mul(4)?)?;
        let nlocal = self.int(c, pos)?;
        for _ in 0..nlocal {
            self.string(c, pos)?;
            self.skip(c, pos, 8)?;
        }
        let nup = self.int(c, pos)?;
        for _ in 0..nup {
            self.string(c, pos)?;
        }
        Some(patched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_calls_become_calls_with_the_same_results() {
        let lua = unsafe { Lua::unsafe_new() };
        let src = "local function id(...) return ... end \
                   local function f(n) if n == 0 then return id(1, 2, 3) end return f(n - 1) end \
                   return f(5)";
        let f = lua.load(src).set_name("@t").into_function().unwrap();
        let mut chunk = f.dump(false);
        assert_eq!(patch(&mut chunk), Some(3));
        // Nothing left to patch once patched.
        assert_eq!(patch(&mut chunk.clone()), Some(0));
        let g = without_tail_calls(&lua, f, "@t");
        let (a, b, c): (i64, i64, i64) = g.call(()).unwrap();
        assert_eq!((a, b, c), (1, 2, 3));
        // The caller's frame is still there when the callee runs: its line is visible.
        lua.globals()
            .set(
                "where",
                lua.create_function(|lua, ()| {
                    let line = lua.inspect_stack(2).map(|d| d.curr_line()).unwrap_or(-1);
                    Ok(line)
                })
                .unwrap(),
            )
            .unwrap();
        let f = lua
            .load("\n\nlocal function w() return where() end\nreturn w()")
            .set_name("@t")
            .into_function()
            .unwrap();
        let g = without_tail_calls(&lua, f, "@t");
        let line: i64 = g.call(()).unwrap();
        assert_eq!(line, 4);
        // A chunk that is not a dump is refused, not misread.
        assert_eq!(patch(&mut b"\x1bLuaQ\x00garbage".to_vec()), None);
    }
}
