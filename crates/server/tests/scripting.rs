//! Scripting, differentially and under concurrency.
//!
//! - `scripts_match_redis`: every script below runs with EVAL on damselfly and on a real
//!   redis-server; the replies must be equal, byte for byte (errors included, with Redis 7's
//!   ` script: <sha>, on @user_script:<line>.` suffix). The snippets cover the engine (reply
//!   conversions both ways, errors, pcall, global protection, redis.* helpers) and the
//!   libraries Redis ships with its Lua (bit, cjson, cmsgpack, struct).
//! - `transfers_stay_atomic_across_shards`: many clients move amounts between keys on
//!   different shards with scripts (declaring their keys or not) while readers check that the
//!   total never changes.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{RedisServer, Resp, Server};

/// Engine behaviour: conversions, errors, protection, helpers.
const ENGINE: &[&str] = &[
    "return 1",
    "return 3.99",
    "return -3.99",
    "return 'x'",
    "return true",
    "return false",
    "return nil",
    "return {1,2,3,'ciao',{1,2}}",
    "return {1,2,nil,4}",
    "return {err='My Error'}",
    "return {ok='FINE'}",
    "return {err='line\\r\\nbreak'}",
    "return redis.error_reply('My Error')",
    "return redis.error_reply('x')",
    "return redis.error_reply('-X y')",
    "return redis.status_reply('FOO')",
    "return redis.error_reply()",
    "return redis.sha1hex('')",
    "return redis.sha1hex('Pizza & Mandolino')",
    "return redis.REDIS_VERSION_NUM > 0",
    "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
    "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}",
    "redis.set_repl(redis.REPL_ALL) return 1",
    "redis.set_repl(12345)",
    "return redis.replicate_commands()",
    "redis.setresp(4)",
    "redis.log(redis.LOG_WARNING, 'from a script') return 1",
    "redis.log(42, 'x')",
    "redis.call('set','s','1') return redis.call('incr','s')",
    "redis.call('del','l') redis.call('rpush','l','a','b') return redis.call('lrange','l',0,-1)",
    "redis.call('del','h') redis.call('hset','h','f','v') return redis.call('hgetall','h')",
    "return redis.call('get','no-such-key')",
    "return redis.call('exists','no-such-key')",
    "local r = redis.call('ping') return type(r) .. ':' .. r.ok",
    "return redis.pcall('incr','l')",
    "return redis.call('incr','l')",
    "local x = redis.call('incr','l') return x",
    "\nlocal a = 1\nlocal x = redis.call('nosuch')",
    "return redis.call('nosuch')",
    "return redis.call()",
    "return redis.call('get', {})",
    "return redis.call('set')",
    "return redis.call('subscribe', 'x')",
    "local ok, e = pcall(function() return redis.call('incr','l') end) return {tostring(ok), e}",
    "return {pcall(error, 'x')}",
    "return {pcall(function() error({err='tbl'}) end)}",
    "local ok, e = pcall(function() local x = nil + 1 end) return {tostring(ok), e}",
    "error('boom')",
    "\n\nerror('boom on three')",
    "a = 5",
    "return b",
    "string.x = 1",
    "setmetatable(_G, {})",
    "rawset(_G, 'x', 1)",
    "return loadfile",
    "return print",
    "return tostring(#KEYS) .. tostring(#ARGV)",
    "return redis.call('type', 'h')",
    "local t = {} for i = 1, 100 do t[i] = i end return t",
    "return tostring(math.floor(3.7)) .. string.format('%05.1f', 3.14159) .. table.concat({'a','b'}, ',')",
    "return string.rep('x', 3)",
    "return redis.call('set', 'n', 3.5) .. redis.call('get', 'n')",
    "return redis.call('set', 'n', 0.1) .. redis.call('get', 'n')",
    "return 'unterminated",
];

pub const SNIPPETS: &[&str] = &[
    // ---- bit ----
    "return tostring(bit.tobit(0xffffffff))",
    "return tostring(bit.tobit(2^32 + 5))",
    "return tostring(bit.tobit(-1.5)) .. ' ' .. tostring(bit.tobit(1.5)) .. ' ' .. tostring(bit.tobit(2.5))",
    "return tostring(bit.tobit(1/0)) .. ' ' .. tostring(bit.tobit(0/0)) .. ' ' .. tostring(bit.tobit(2^60+3))",
    "return tostring(bit.tobit('0x10')) .. ' ' .. tostring(bit.tobit(' 12 '))",
    "return bit.tohex(255) .. ' ' .. bit.tohex(-1) .. ' ' .. bit.tohex(255, 2) .. ' ' .. bit.tohex(255, -4) .. ' ' .. bit.tohex(0x1234, 0) .. ' ' .. bit.tohex(1, 20) .. ' ' .. bit.tohex(1, -2^31)",
    "return tostring(bit.bnot(0)) .. ' ' .. tostring(bit.bnot(5))",
    "return tostring(bit.band(0xff, 0x0f, 0x3)) .. ' ' .. tostring(bit.bor(1, 2, 4, 8)) .. ' ' .. tostring(bit.bxor(0xf0, 0xff))",
    "return tostring(bit.band(7))",
    "return tostring(bit.lshift(1, 31)) .. ' ' .. tostring(bit.lshift(1, 32)) .. ' ' .. tostring(bit.lshift(1, -1)) .. ' ' .. tostring(bit.lshift(3, 33))",
    "return tostring(bit.rshift(-1, 28)) .. ' ' .. tostring(bit.arshift(-256, 4)) .. ' ' .. tostring(bit.rshift(0x80000000, 31))",
    "return tostring(bit.rol(0x12345678, 8)) .. ' ' .. tostring(bit.ror(0x12345678, 8)) .. ' ' .. tostring(bit.rol(1, 0)) .. ' ' .. tostring(bit.ror(1, 32))",
    "return tostring(bit.bswap(0x12345678)) .. ' ' .. tostring(bit.bswap(-1))",
    "return bit.band(nil)",
    "return bit.band(1, 2, 'x')",
    "return bit.lshift(1)",
    "return bit.tohex(1, nil)",
    "return bit.tobit({})",
    "local f = bit.bor; local r = f(true) return r",
    "return pcall(bit.band, nil)",
    // ---- cjson encode ----
    "return cjson.encode({1, 2, 3, 'a', true, false})",
    "return cjson.encode({})",
    "return cjson.encode({a = 1})",
    "return cjson.encode({a = {b = {c = {1, 2, {d = 'x'}}}}})",
    "return cjson.encode('he said \"hi\"\\n\\t/\\\\ \\1\\31\\127 \\200')",
    "return cjson.encode('a\\0b')",
    "return cjson.encode(3.14159265358979) .. ' ' .. cjson.encode(1e300) .. ' ' .. cjson.encode(-0.0) .. ' ' .. cjson.encode(0.1) .. ' ' .. cjson.encode(1e-5) .. ' ' .. cjson.encode(123456789012345678)",
    "return cjson.encode(2^53) .. ' ' .. cjson.encode(1/3) .. ' ' .. cjson.encode(100) .. ' ' .. cjson.encode(1e15) .. ' ' .. cjson.encode(1e14) .. ' ' .. cjson.encode(-1.5e-10)",
    "return cjson.encode(nil) .. cjson.encode(cjson.null) .. cjson.encode(true)",
    "return cjson.encode({[1] = 1, [2] = 2, [4] = 4})",
    "return cjson.encode({[1] = 'a', [20] = 'b'})",
    "return cjson.encode({[2] = 'x'})",
    "return cjson.encode({[1.5] = 'x'})",
    "return cjson.encode({[0] = 'x'})",
    "return cjson.encode({[-1] = 'x'})",
    "return cjson.encode({[true] = 1})",
    "return cjson.encode(function() end)",
    "return cjson.encode({f = tostring})",
    "return cjson.encode(0/0)",
    "return cjson.encode(1/0)",
    "return cjson.encode({[1/0] = 1})",
    "return cjson.encode()",
    "return cjson.encode(1, 2)",
    "local t = {} t[1] = t return cjson.encode(t)",
    "local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end return cjson.encode(t)",
    "local t = {} local c = t for i = 1, 999 do c[1] = {} c = c[1] end return #cjson.encode(t)",
    "cjson.encode_max_depth(3) local ok, e = pcall(cjson.encode, {{{{1}}}}) cjson.encode_max_depth(1000) return tostring(e)",
    "return cjson.encode(coroutine.create(function() end))",
    "return tostring(cjson.encode_invalid_numbers())",
    "cjson.encode_invalid_numbers(true) local s = cjson.encode({0/0, 1/0, -1/0}) cjson.encode_invalid_numbers(false) return s",
    "cjson.encode_invalid_numbers('null') local s = cjson.encode({0/0, 1/0}) cjson.encode_invalid_numbers('off') return s",
    "return cjson.encode_invalid_numbers('maybe')",
    "cjson.encode_number_precision(3) local s = cjson.encode(3.14159) cjson.encode_number_precision(14) return s",
    "return cjson.encode_number_precision(15)",
    "return cjson.encode_number_precision(0)",
    "return tostring(cjson.encode_number_precision())",
    "cjson.encode_sparse_array(true) local s = cjson.encode({[1] = 'a', [20] = 'b'}) cjson.encode_sparse_array(false) return s",
    "local a, b, c = cjson.encode_sparse_array() return tostring(a) .. tostring(b) .. tostring(c)",
    "cjson.encode_sparse_array(false, 0) local s = cjson.encode({[1] = 'a', [200] = 'b'}) cjson.encode_sparse_array(false, 2, 10) return s",
    "return cjson.encode_sparse_array(false, -1)",
    "return tostring(cjson.encode_keep_buffer(false)) .. cjson.encode({1}) .. tostring(cjson.encode_keep_buffer(true))",
    "return cjson.encode_keep_buffer('yes')",
    "return cjson.encode_max_depth(1, 2)",
    "return tostring(cjson.decode_max_depth()) .. ' ' .. tostring(cjson.encode_max_depth())",
    "return cjson.encode(setmetatable({}, {__index = function() return 1 end}))",
    "return cjson._NAME .. ' ' .. cjson._VERSION",
    // ---- cjson decode ----
    "return cjson.encode(cjson.decode('[1,2,3,\"x\",true,false,null]'))",
    "return cjson.encode(cjson.decode(' { \"a\" : [ 1 , { \"b\" : null } ] } '))",
    "return type(cjson.decode('null')) .. tostring(cjson.decode('null') == cjson.null)",
    "return tostring(cjson.decode('1e2')) .. ' ' .. tostring(cjson.decode('-0.5')) .. ' ' .. tostring(cjson.decode('123456789012345678901234567890'))",
    "return cjson.decode('\"\\\\u00e9\\\\u20AC\\\\ud83d\\\\ude00\\\\u0000x\"')",
    "return cjson.decode('\"\\\\b\\\\f\\\\n\\\\r\\\\t\\\\/\\\\\\\\\\\\\"\"')",
    "return cjson.decode('x')",
    "return cjson.decode('')",
    "return cjson.decode('[1,2')",
    "return cjson.decode('[1,,2]')",
    "return cjson.decode('{\"a\" 1}')",
    "return cjson.decode('{1:2}')",
    "return cjson.decode('{\"a\":1,}')",
    "return cjson.decode('[1] x')",
    "return cjson.decode('\"abc')",
    "return cjson.decode('\"\\\\q\"')",
    "return cjson.decode('\"\\\\u12\"')",
    "return cjson.decode('\"\\\\ud800\"')",
    "return cjson.decode('\"\\\\udc00\\\\ud800\"')",
    "return cjson.decode('\"\\\\ud800\\\\u0041\"')",
    "return cjson.decode('tru')",
    "return cjson.decode('nul')",
    "return cjson.decode('-')",
    "return tostring(cjson.decode('NaN')) .. ' ' .. tostring(cjson.decode('-Infinity')) .. ' ' .. tostring(cjson.decode('0x10')) .. ' ' .. tostring(cjson.decode('+5')) .. ' ' .. tostring(cjson.decode('inf'))",
    "return tostring(cjson.decode('007')) .. ' ' .. tostring(cjson.decode('1.')) .. ' ' .. tostring(cjson.decode('.5'))",
    "cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '0x10') cjson.decode_invalid_numbers(true) return tostring(e)",
    "cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '[1, NaN]') cjson.decode_invalid_numbers(true) return tostring(e)",
    "cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '007') cjson.decode_invalid_numbers(true) return tostring(e)",
    "return cjson.decode('1\\0')",
    "return cjson.decode('[1]\\0garbage')",
    "return cjson.decode('\"a\\0b\"')",
    "return cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001))",
    "return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))",
    "cjson.decode_max_depth(2) local ok, e = pcall(cjson.decode, '{\"a\":{\"b\":[1]}}') cjson.decode_max_depth(1000) return tostring(e)",
    "return cjson.decode()",
    "return cjson.decode('1', '2')",
    "return cjson.decode({})",
    "return tostring(cjson.decode(123))",
    "return cjson.decode('\"\\1\"')",
    "return cjson.decode('[\"a\"\\t,\\r\\n\"b\"]')[2]",
    "local t = cjson.decode('{\"1\":\"a\",\"2\":\"b\"}') return tostring(t[1]) .. tostring(t['1'])",
    "local t = {} for i = 1, 10000 do t[i] = {id = i, name = 'n' .. i, v = i * 0.5} end local s = cjson.encode(t) local d = cjson.decode(s) return #s .. ' ' .. #d .. ' ' .. d[10000].name",
    // ---- cmsgpack ----
    "return cmsgpack.pack(1, -1, 127, 128, -32, -33, 255, 256, 65535, 65536, -128, -129, -32768, -32769, 2^32-1, 2^32, -2^31, -2^31-1, 2^53, -2^53)",
    "return cmsgpack.pack(0.5, 1.1, -0.0, 1/0, -1/0, 2^63, -2^63, 1e300)",
    "return cmsgpack.pack(0/0) == string.char(0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0) and 'nan1' or (cmsgpack.pack(0/0) == string.char(0xcb, 0xff, 0xf8, 0, 0, 0, 0, 0, 0) and 'nan2' or 'other')",
    "return cmsgpack.pack('', 'abc', string.rep('x', 31), string.rep('y', 32), string.rep('z', 255), string.rep('w', 256), 'a\\0b')",
    "return #cmsgpack.pack(string.rep('x', 65535)) .. ' ' .. #cmsgpack.pack(string.rep('x', 65536))",
    "return cmsgpack.pack({}, {1, 2, 3}, {a = 1}, {[1] = 1, [3] = 3}, {[1.5] = 1}, true, false, nil, tostring)",
    "local t = {} for i = 1, 16 do t[i] = i end return cmsgpack.pack(t)",
    "local t = {} for i = 1, 70000 do t[i] = i end local p = cmsgpack.pack(t) return #p .. ' ' .. p:sub(1, 5)",
    "local t = {} t[1] = t return cmsgpack.pack(t)",
    "local t = {} local c = t for i = 1, 20 do c.x = {} c = c.x end return cmsgpack.pack(t)",
    "return cmsgpack.pack()",
    "local t = {} for i = 1, 20 do t['k' .. i] = i end local u = cmsgpack.unpack(cmsgpack.pack(t)) local s = 0 for k, v in pairs(u) do s = s + v end return tostring(s)",
    "local a, b, c, d = cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, {4}}, true)) return tostring(a) .. b .. cjson.encode(c) .. tostring(d)",
    "local v = {cmsgpack.unpack(string.char(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), string.char(0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0), string.char(0xcf, 0, 0x20, 0, 0, 0, 0, 0, 1))} return tostring(v[1])",
    "local a, b, c = cmsgpack.unpack(string.char(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xcf, 0, 0x20, 0, 0, 0, 0, 0, 1)) return tostring(a) .. ' ' .. tostring(b) .. ' ' .. string.format('%.0f', c)",
    "local a, b, c, d, e = cmsgpack.unpack(string.char(0xd0, 0x80, 0xd1, 0xff, 0x00, 0xd2, 0x80, 0, 0, 0, 0xce, 0xff, 0xff, 0xff, 0xff, 0xcd, 0xff, 0xff)) return a .. ' ' .. b .. ' ' .. c .. ' ' .. string.format('%.0f', d) .. ' ' .. e",
    "local a, b = cmsgpack.unpack(string.char(0xca, 0x3f, 0xc0, 0, 0, 0xcb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18)) return tostring(a) .. ' ' .. tostring(b)",
    "local a, b = cmsgpack.unpack(string.char(0xc0, 0xc2)) return tostring(a) .. tostring(b)",
    "return cmsgpack.unpack(string.char(0xc1))",
    "return cmsgpack.unpack(string.char(0xcd, 0x01))",
    "return cmsgpack.unpack(string.char(0x93, 1, 2))",
    "return cmsgpack.unpack(string.char(0xdb, 0, 0, 0, 5, 65))",
    "return cmsgpack.unpack(string.char(0xd9, 3) .. 'abc')",
    "return cmsgpack.unpack(string.char(0xda, 0, 2) .. 'ab') .. cmsgpack.unpack(string.char(0xdb, 0, 0, 0, 1) .. 'z')",
    "return cjson.encode(cmsgpack.unpack(string.char(0xdc, 0, 2, 1, 2, 0xde, 0, 1, 0xa1, 0x6b, 0xa1, 0x76)))",
    "return cjson.encode({cmsgpack.unpack(string.char(0xdd, 0, 0, 0, 1, 7, 0xdf, 0, 0, 0, 1, 1, 2))})",
    "return tostring(cmsgpack.unpack(''))",
    "return cmsgpack.unpack()",
    "return cmsgpack.unpack({})",
    "local n, a = cmsgpack.unpack_one(cmsgpack.pack(1, 2)) local m, b = cmsgpack.unpack_one(cmsgpack.pack(1, 2), n) return n .. ' ' .. a .. ' ' .. m .. ' ' .. b",
    "local r = {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)} return table.concat(r, ',')",
    "local r = {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 5, 1)} return table.concat(r, ',')",
    "return cmsgpack.unpack_one('abc', 10)",
    "return cmsgpack.unpack_one('abc', -1)",
    "return cmsgpack.unpack_limit('abc', -1)",
    "return cmsgpack.unpack_limit('abc')",
    "return cmsgpack.unpack_limit('abc', 'x')",
    "return tostring(cmsgpack.unpack_one('abc', 3))",
    "local t = {} for i = 1, 10000 do t[i] = {id = i, name = 'n' .. i} end local p = cmsgpack.pack(t) local u = cmsgpack.unpack(p) return #p .. ' ' .. #u .. ' ' .. u[10000].name",
    "return cmsgpack._NAME .. ' ' .. cmsgpack._VERSION",
    // ---- struct ----
    "return struct.pack('>i4', 1) .. struct.pack('<i4', 1) .. struct.pack('b', -1) .. struct.pack('B', 255) .. struct.pack('>h', -2) .. struct.pack('<H', 65535)",
    "return struct.pack('<l', -1) .. struct.pack('>L', 2^40) .. struct.pack('<T', 5) .. struct.pack('>I3', 0x010203) .. struct.pack('<i16', -1)",
    "return struct.pack('>d', 1.5) .. struct.pack('<f', -2.25) .. struct.pack('>f', 1/3)",
    "return struct.pack('s', 'abc') .. struct.pack('c5', 'hello world') .. struct.pack('c0', 'xyz') .. struct.pack('z', 'q')",
    "return struct.pack('c10', 'abc')",
    "return struct.pack('!4 b i4 b d', 1, 2, 3, 4.5)",
    "return struct.pack('!8 b d', 1, 2) .. struct.pack('! b d', 1, 2) .. struct.pack('!2 b i4', 1, 2)",
    "return struct.pack('!3 i', 1)",
    "return struct.pack('bxxb', 1, 2)",
    "return struct.pack('i33', 1)",
    "return struct.pack('i999999999999', 1)",
    "return struct.pack('y', 1)",
    "return struct.pack('i', 'x')",
    "return struct.pack('i')",
    "return struct.pack()",
    "return tostring(struct.size('>i4 b h d !8 d')) .. ' ' .. tostring(struct.size('c10x')) .. ' ' .. tostring(struct.size('!4 b i'))",
    "return struct.size('s')",
    "return struct.size('c0')",
    "return struct.size('y')",
    "local a, b, c = struct.unpack('>i4 b', struct.pack('>i4 b', -5, 7)) return a .. ' ' .. b .. ' ' .. c",
    "local a, b, c, d = struct.unpack('<H I3 L', struct.pack('<H I3 L', 65535, 0xabcdef, 2^33)) return a .. ' ' .. b .. ' ' .. string.format('%.0f', c) .. ' ' .. d",
    "local a, b, c = struct.unpack('<d >f', struct.pack('<d >f', 3.25, -0.5)) return a .. ' ' .. b .. ' ' .. c",
    "local a, b, c = struct.unpack('s z', 'hi\\0there\\0') return a .. '|' .. b .. '|' .. c",
    "local a, b = struct.unpack('b c0', struct.pack('b c0', 3, 'abc')) return a .. ' ' .. tostring(b)",
    "return struct.unpack('c0', 'abc')",
    "return struct.unpack('>i4', 'abc')",
    "return struct.unpack('s', 'abc')",
    "return struct.unpack('b', 'abc', 0)",
    "local a, b = struct.unpack('b', 'abc', 3) return a .. ' ' .. b",
    "return struct.unpack('b', 'abc', 4)",
    "return struct.unpack('b', 'abc', 2^40)",
    "local a, b = struct.unpack('!4 b i4', struct.pack('!4 b i4', 1, 2)) return a .. ' ' .. b",
    "local a, b = struct.unpack('i17', string.rep('\\255', 17)) return tostring(a) .. ' ' .. b",
    "local a, b = struct.unpack('>I8', string.rep('\\255', 8)) return string.format('%.0f', a) .. ' ' .. b",
    "return struct.unpack('i', nil)",
    "return tostring(struct.pack('i0', 1))",
    "local a, b = struct.unpack('>i2 x x', 'ab\\0\\0') return a .. ' ' .. b",
    "return struct.unpack('y', 'abc')",
    "return struct.pack('>i4', 2^31) .. struct.pack('>i4', -2^31) .. struct.pack('>I4', -1) .. struct.pack('>i4', 1.9) .. struct.pack('>i4', -1.9)",
    "return struct.pack('!16 i', 1)",
    "return struct.pack('!17 i', 1)",
    "return struct.pack('>i8', 2^63)",
    "return struct.pack('c', 'x') .. struct.pack('c1', '')",
    // ---- extra edge cases ----
    "return struct.pack('ii', 1)",
    "return struct.pack('>d', -0.0) .. struct.pack('<d', 1e-300) .. struct.pack('f', 1e-40)",
    "return cjson.encode({-0.0, 1e-20, 5e-324}) .. cjson.encode(1e-300)",
    "return cmsgpack.pack(1e-20, -0.0, {1e-30})",
    "return cjson.encode({['a\\0b'] = 1})",
    "return tostring(cjson.decode('[1,2,3]')[3]) .. tostring(#cjson.decode('[]'))",
    "return cjson.encode(cjson.decode('{\"a\":[]}'))",
    "return cjson.encode({1, nil, 3})",
    "return cjson.encode({[1] = 1, [2] = 2, x = 3})",
    "local t = {} for i = 1, 11 do t[i * 2] = i end return cjson.encode(t)",
    "return cjson.decode('  \\n 42 \\t ')",
    "return tostring(cjson.decode('1E400')) .. ' ' .. tostring(cjson.decode('-1e-400')) .. ' ' .. tostring(cjson.decode('0x1p4')) .. ' ' .. tostring(cjson.decode('0x.8'))",
    "return cjson.decode('[1 2]')",
    "return cjson.decode('{\"a\":1 \"b\":2}')",
    "return cjson.decode(']')",
    "return cjson.decode('\"\\\\u00\"')",
    "return bit.tohex(bit.bor(bit.lshift(0xdead, 16), 0xbeef))",
    "return cmsgpack.unpack_limit(cmsgpack.pack(1, 2), 0)",
    "local r = {cmsgpack.unpack_one(cmsgpack.pack(7), 0)} return table.concat(r, ',')",
    "return cmsgpack.unpack(string.char(0x91, 0xc1))",
    "return cmsgpack.unpack(string.char(0xd9))",
    "return struct.unpack('c0', 'abc', 2)",
    "return struct.unpack('i', 'abcd', -1)",
    "local a, b = struct.unpack('>i2', '\\255\\254') return a .. ' ' .. b",
    "return struct.size('!') .. ' ' .. struct.size('<>') .. ' ' .. struct.size('i32')",
    "return struct.size('!5')",
    "return cjson.new().encode({1})",
    // ---- errors of a tail call and of a plain call name the script's line alike ----
    "redis.call('set', 'tc', 'a')\nreturn redis.call('incr', 'tc')",
    "redis.call('set', 'tc', 'a')\nlocal x = redis.call('incr', 'tc')\nreturn x",
    "local x = cjson.encode(function() end)\nreturn x",
    "local function f(n) if n == 0 then return 'done' end return f(n - 1) end\nreturn f(1000)",
    // ---- plain Lua errors, to check the error plumbing ----
    "error('boom')",
];

/// EVAL `script` with no keys on `conn`.
fn eval(conn: &mut common::RawConn, script: &str) -> Resp {
    conn.cmd(&["EVAL", script, "0"])
}

#[test]
fn scripts_match_redis() {
    let ours = Server::start(&[]);
    let redis = RedisServer::start();
    let (mut a, mut b) = (ours.raw_conn(), redis.raw_conn());
    let mut failures = Vec::new();
    for script in ENGINE.iter().chain(SNIPPETS) {
        let want = eval(&mut b, script);
        let got = eval(&mut a, script);
        if want != got {
            failures.push(format!("{script}\n  redis:     {want}\n  damselfly: {got}"));
        }
    }
    // EVALSHA, SCRIPT LOAD/EXISTS/FLUSH, numkeys errors.
    for cmd in [
        &["SCRIPT", "LOAD", "return 'loaded'"][..],
        &["EVALSHA", "dc2b4fbc4b0d7e5d0ba2d9b4ea2a6cd36a0b0ae5", "0"],
        &[
            "SCRIPT",
            "EXISTS",
            "dc2b4fbc4b0d7e5d0ba2d9b4ea2a6cd36a0b0ae5",
            "ffffffffffffffffffffffffffffffffffffffff",
        ],
        &["EVAL", "return KEYS[1] .. ARGV[1]", "1", "k", "a"],
        &["EVAL", "return 1", "2", "k"],
        &["EVAL", "return 1", "-1"],
        &["EVAL", "return 1", "x"],
        &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
        &["EVALSHA", "short", "0"],
        &["EVAL_RO", "return redis.call('set', 'a', 'b')", "0"],
        &["EVAL_RO", "return redis.call('get', 'a')", "0"],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')",
            "0",
        ],
        &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"],
        &["EVAL", "#!lua flags=bad\nreturn 1", "0"],
        &["EVAL", "#!lua\nreturn redis.call('set', 'a', 'b')", "0"],
        &["EVAL_RO", "#!lua\nreturn 1", "0"],
        &["EVAL", "#!nolua\nreturn 1", "0"],
        &["SCRIPT", "FLUSH"],
        &["SCRIPT", "FLUSH", "BAD"],
        &[
            "SCRIPT",
            "EXISTS",
            "dc2b4fbc4b0d7e5d0ba2d9b4ea2a6cd36a0b0ae5",
        ],
        &["SCRIPT", "KILL"],
        &["SCRIPT", "NOSUCH"],
    ] {
        let want = b.cmd(cmd);
        let got = a.cmd(cmd);
        if want != got {
            failures.push(format!("{cmd:?}\n  redis:     {want}\n  damselfly: {got}"));
        }
    }
    // RESP3 callers and scripts.
    a.cmd(&["HELLO", "3"]);
    b.cmd(&["HELLO", "3"]);
    for script in [
        "return true",
        "return false",
        "return nil",
        "redis.setresp(3) return redis.call('hgetall', 'h')",
        "redis.setresp(3) return true",
        "redis.setresp(3) return false",
        "redis.setresp(3) return {double=3.5}",
        "redis.setresp(3) return {big_number='123456789012345678901234567890'}",
        "redis.setresp(3) return {map={a=1}}",
        "redis.setresp(3) return {set={a=true}}",
        "redis.setresp(3) return redis.call('get', 'no-such-key')",
        "return redis.call('hgetall', 'h')",
        "return {double=3.5}",
    ] {
        let want = eval(&mut b, script);
        let got = eval(&mut a, script);
        if want != got {
            failures.push(format!(
                "RESP3 {script}\n  redis:     {want}\n  damselfly: {got}"
            ));
        }
    }
    for f in &failures {
        eprintln!("MISMATCH {f}");
    }
    assert!(
        failures.is_empty(),
        "{} scripts differ from redis-server",
        failures.len()
    );
}

/// The same scripts by EVALSHA on one shard thread, where a script that ends without waiting
/// runs outside any future (`run_quick`): replies and errors as redis-server's.
#[test]
fn scripts_by_id_on_one_thread_match_redis() {
    let ours = Server::start_threads(1, &[]);
    let redis = RedisServer::start();
    let (mut a, mut b) = (ours.raw_conn(), redis.raw_conn());
    let mut failures = Vec::new();
    for script in ENGINE.iter().chain(SNIPPETS) {
        let (want_sha, got_sha) = (
            b.cmd(&["SCRIPT", "LOAD", script]),
            a.cmd(&["SCRIPT", "LOAD", script]),
        );
        if want_sha != got_sha {
            failures.push(format!(
                "LOAD {script}
  redis: {want_sha}
  damselfly: {got_sha}"
            ));
            continue;
        }
        let Some(sha) = want_sha
            .as_bytes()
            .map(|s| String::from_utf8_lossy(s).into_owned())
        else {
            continue;
        };
        let (want, got) = (
            b.cmd(&["EVALSHA", &sha, "0"]),
            a.cmd(&["EVALSHA", &sha, "0"]),
        );
        if want != got {
            failures.push(format!("{script}\n  redis:     {want}\n  damselfly: {got}"));
        }
    }
    for f in &failures {
        eprintln!("MISMATCH {f}");
    }
    assert!(failures.is_empty(), "{} scripts differ", failures.len());
}

/// On one shard thread a script run by EVALSHA starts outside any future; past the busy
/// threshold it must still let the thread's other clients in (they get -BUSY), and SCRIPT KILL
/// from one of them must end it.
#[test]
fn a_busy_script_by_id_on_one_thread_can_be_killed() {
    let srv = Server::start_threads(1, &["--busy-reply-threshold", "50"]);
    let mut c = srv.raw_conn();
    let Resp::Bulk(sha) = c.cmd(&["SCRIPT", "LOAD", "redis.call('get', 'k') while true do end"])
    else {
        panic!("SCRIPT LOAD")
    };
    let sha = String::from_utf8(sha).unwrap();
    let runner = {
        let mut conn = srv.raw_conn();
        std::thread::spawn(move || conn.cmd(&["EVALSHA", &sha, "0"]))
    };
    let mut other = srv.raw_conn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match other.cmd(&["PING"]) {
            Resp::Error(e) if e.starts_with(b"BUSY") => break,
            _ if std::time::Instant::now() > deadline => panic!("never busy"),
            _ => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Resp::Simple(b"OK".to_vec()));
    match runner.join().unwrap() {
        Resp::Error(e) => {
            let e = String::from_utf8_lossy(&e);
            assert!(e.contains("Script killed by user"), "{e}")
        }
        r => panic!("killed script replied {r}"),
    }
    assert_eq!(other.cmd(&["PING"]), Resp::Simple(b"PONG".to_vec()));
}

/// The accounts of the transfer test: `{a}`..`{h}` hash to different shards.
const ACCOUNTS: [&str; 8] = [
    "acct:{a}", "acct:{b}", "acct:{c}", "acct:{d}", "acct:{e}", "acct:{f}", "acct:{g}", "acct:{h}",
];
const START: i64 = 1000;

#[test]
fn transfers_stay_atomic_across_shards() {
    transfers_stay_atomic(4, "");
}

/// With one shard thread a script starts without being queued (it usually ends before anything
/// else runs); one that waits halfway (an MGET takes the asynchronous path between its two
/// writes) must be queued with its whole-keyspace lock by then.
#[test]
fn transfers_stay_atomic_on_one_thread_across_waits() {
    transfers_stay_atomic(1, "redis.call('mget', 'acct:0', 'acct:1') ");
}

/// Scripts move amounts between accounts (declared keys, undeclared keys, and a script that
/// declares half of them) while readers check that the total never changes; `between` runs
/// between each transfer's two writes.
fn transfers_stay_atomic(threads: usize, between: &str) {
    let srv = Server::start_threads(threads, &[]);
    let mut c = srv.raw_conn();
    for k in ACCOUNTS {
        c.cmd(&["SET", k, &START.to_string()]);
    }
    let total = START * ACCOUNTS.len() as i64;
    // Declared keys, and the same move through keys the script did not declare.
    let declared = format!(
        "local n = tonumber(ARGV[1]) \
        if tonumber(redis.call('get', KEYS[1])) >= n then \
          redis.call('decrby', KEYS[1], n) {between}redis.call('incrby', KEYS[2], n) end return 1"
    );
    let undeclared = format!(
        "local from, to, n = ARGV[1], ARGV[2], tonumber(ARGV[3]) \
        if tonumber(redis.call('get', from)) >= n then \
          redis.call('decrby', from, n) {between}redis.call('incrby', to, n) end return 1"
    );
    // Declares the source only, and reaches the destination after its first write: that run
    // is undone and done again under the whole-keyspace lock. A counter in a comment makes
    // each call a new script, so it happens every time.
    let half = format!(
        "local n = tonumber(ARGV[2]) \
        if tonumber(redis.call('get', KEYS[1])) >= n then \
          redis.call('decrby', KEYS[1], n) {between}redis.call('incrby', ARGV[1], n) end return 1"
    );
    let sum = "local s = 0 for _, k in ipairs(KEYS) do s = s + tonumber(redis.call('get', k)) end return s";
    // The declared transfer by id too (one shard thread: the synchronous start, which goes
    // on asynchronously when the script waits halfway).
    let Resp::Bulk(declared_sha) = c.cmd(&["SCRIPT", "LOAD", &declared]) else {
        panic!("SCRIPT LOAD")
    };
    let declared_sha = String::from_utf8(declared_sha).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..6u64 {
        let mut conn = srv.raw_conn();
        let (declared, undeclared, half) = (declared.clone(), undeclared.clone(), half.clone());
        let declared_sha = declared_sha.clone();
        writers.push(std::thread::spawn(move || {
            let mut x = w * 7919 + 1;
            for i in 0..300u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let from = ACCOUNTS[(x >> 33) as usize % 8];
                let to = ACCOUNTS[(x >> 40) as usize % 8];
                let n = ((x >> 50) % 50).to_string();
                let r = match i % 4 {
                    0 => conn.cmd(&["EVAL", &declared, "2", from, to, &n]),
                    3 => conn.cmd(&["EVALSHA", &declared_sha, "2", from, to, &n]),
                    1 => conn.cmd(&["EVAL", &undeclared, "0", from, to, &n]),
                    _ => {
                        let body = format!("{half} -- {w} {i}");
                        conn.cmd(&["EVAL", &body, "1", from, to, &n])
                    }
                };
                assert_eq!(r, Resp::Int(1), "transfer failed: {r}");
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let mut conn = srv.raw_conn();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut args = vec!["EVAL", sum, "8"];
                args.extend(ACCOUNTS);
                assert_eq!(
                    conn.cmd(&args),
                    Resp::Int(total),
                    "a script saw a half-done transfer"
                );
                let mut mget = vec!["MGET"];
                mget.extend(ACCOUNTS);
                let Resp::Array(vals) = conn.cmd(&mget) else {
                    panic!("MGET")
                };
                let s: i64 = vals
                    .iter()
                    .map(|v| {
                        std::str::from_utf8(v.as_bytes().unwrap())
                            .unwrap()
                            .parse::<i64>()
                            .unwrap()
                    })
                    .sum();
                assert_eq!(s, total, "MGET saw a half-done transfer");
                checks += 1;
            }
            checks
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let checks: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(checks > 0);
    let mut args = vec!["EVAL", sum, "8"];
    args.extend(ACCOUNTS);
    assert_eq!(c.cmd(&args), Resp::Int(total));
}

/// A script that declared some keys and reaches another after writing starts over under the
/// whole-keyspace lock with its writes undone: every effect happens exactly once, values,
/// types and expiries as they were before the first run.
#[test]
fn undeclared_key_after_a_write_runs_once() {
    let srv = Server::start_threads(4, &[]);
    let mut c = srv.raw_conn();
    c.cmd(&["SET", "n", "10"]);
    c.cmd(&["PEXPIRE", "n", "100000"]);
    c.cmd(&["RPUSH", "l", "a", "b"]);
    c.cmd(&["HSET", "h", "f", "1"]);
    for i in 0..20 {
        // A new script each time (the comment), so that none is known to need the lock yet.
        let body = format!(
            "redis.call('incr', KEYS[1]) redis.call('rpush', KEYS[2], ARGV[2]) \
             redis.call('hincrby', KEYS[3], 'f', 1) redis.call('set', KEYS[4], ARGV[2]) \
             redis.call('set', ARGV[1], ARGV[2]) \
             return {{redis.call('get', KEYS[1]), redis.call('llen', KEYS[2])}} -- {i}"
        );
        let r = c.cmd(&[
            "EVAL",
            &body,
            "4",
            "n",
            "l",
            "h",
            "fresh",
            "other",
            &i.to_string(),
        ]);
        assert_eq!(
            r.to_string(),
            Resp::Array(vec![
                Resp::Bulk((11 + i).to_string().into_bytes()),
                Resp::Int(3 + i as i64)
            ])
            .to_string(),
            "run {i}"
        );
    }
    assert_eq!(c.cmd(&["GET", "n"]), Resp::Bulk(b"30".to_vec()));
    let Resp::Int(ttl) = c.cmd(&["PTTL", "n"]) else {
        panic!("PTTL")
    };
    assert!(ttl > 90_000, "the expiry survived the undo: {ttl}");
    assert_eq!(c.cmd(&["LLEN", "l"]), Resp::Int(22));
    assert_eq!(c.cmd(&["LINDEX", "l", "2"]), Resp::Bulk(b"0".to_vec()));
    assert_eq!(c.cmd(&["HGET", "h", "f"]), Resp::Bulk(b"21".to_vec()));
    assert_eq!(c.cmd(&["GET", "fresh"]), Resp::Bulk(b"19".to_vec()));
    assert_eq!(c.cmd(&["GET", "other"]), Resp::Bulk(b"19".to_vec()));
    // The same script again: known to need the lock now, it runs once under it.
    let body = "redis.call('incr', KEYS[1]) redis.call('set', ARGV[1], 'y') return redis.call('get', KEYS[1]) -- 0";
    for want in ["31", "32"] {
        assert_eq!(
            c.cmd(&["EVAL", body, "1", "n", "other"]),
            Resp::Bulk(want.as_bytes().to_vec())
        );
    }
    // A keyless read of the keyspace (RANDOMKEY) and another database count as undeclared.
    let body = "redis.call('incr', KEYS[1]) local k = redis.call('randomkey') redis.call('select', 9) redis.call('set', 'in9', 'z') return redis.call('get', 'in9')";
    assert_eq!(c.cmd(&["EVAL", body, "1", "n"]), Resp::Bulk(b"z".to_vec()));
    assert_eq!(c.cmd(&["GET", "n"]), Resp::Bulk(b"33".to_vec()));
}

const LIB: &str = "#!lua name=banklib\nredis.register_function('balance', function(keys, args) return redis.call('get', keys[1]) end)\nredis.register_function{function_name='bump', callback=function(keys, args) return redis.call('incr', keys[1]) end, flags={'allow-oom'}}";

/// Function libraries live in the snapshot (FUNCTION2 records): damselfly's file loads into a
/// fresh damselfly (other shard count) and into redis-server, and redis-server's into
/// damselfly; DEBUG RELOAD keeps them, and with NOFLUSH refuses to load over them, as Redis.
#[test]
fn functions_survive_restarts_both_ways() {
    let dir = std::env::temp_dir().join(format!(
        "dfly-functions-{}-{}",
        std::process::id(),
        common::free_port()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let ours = Server::start(&["--proactor_threads=3", "--dir", d, "--dbfilename", "f.rdb"]);
    let mut c = ours.raw_conn();
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", LIB]),
        Resp::Bulk(b"banklib".to_vec())
    );
    c.cmd(&["SET", "acct", "10"]);
    assert_eq!(c.cmd(&["FCALL", "bump", "1", "acct"]), Resp::Int(11));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), Resp::Simple(b"OK".to_vec()));
    assert_eq!(c.cmd(&["FCALL", "bump", "1", "acct"]), Resp::Int(12));
    let Resp::Error(e) = c.cmd(&["DEBUG", "RELOAD", "NOFLUSH"]) else {
        panic!("DEBUG RELOAD NOFLUSH over existing libraries must fail");
    };
    assert!(String::from_utf8_lossy(&e).contains("Error trying to load the RDB"));
    assert_eq!(c.cmd(&["SAVE"]), Resp::Simple(b"OK".to_vec()));
    drop(c);
    drop(ours);
    // A fresh damselfly with another shard count has them on every thread.
    let again = Server::start(&["--proactor_threads=2", "--dir", d, "--dbfilename", "f.rdb"]);
    for _ in 0..4 {
        let mut c = again.raw_conn();
        assert_eq!(
            c.cmd(&["FCALL", "balance", "1", "acct"]),
            Resp::Bulk(b"12".to_vec())
        );
    }
    drop(again);
    // redis-server loads damselfly's file, functions included...
    let redis = RedisServer::start_with(&["--dir", d, "--dbfilename", "f.rdb"]);
    let mut r = redis.raw_conn();
    assert_eq!(r.cmd(&["FCALL", "bump", "1", "acct"]), Resp::Int(13));
    assert_eq!(r.cmd(&["SAVE"]), Resp::Simple(b"OK".to_vec()));
    drop(r);
    drop(redis);
    // ...and damselfly loads redis-server's.
    let back = Server::start(&["--dir", d, "--dbfilename", "f.rdb"]);
    let mut c = back.raw_conn();
    assert_eq!(c.cmd(&["FCALL", "bump", "1", "acct"]), Resp::Int(14));
    let Resp::Array(libs) = c.cmd(&["FUNCTION", "LIST"]) else {
        panic!("FUNCTION LIST")
    };
    assert_eq!(libs.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
