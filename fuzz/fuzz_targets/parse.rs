//! Feeds arbitrary bytes to the RESP parser in chunks chosen by the input
//! itself, checking it never panics, always makes progress, and keeps its
//! memory bounded by what it received.
#![no_main]

use damselfly_protocol::{Parser, ParserLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    // First bytes pick limits and the chunk pattern; the rest is the stream.
    let small = data[0] & 1 == 1;
    let limits = if small {
        ParserLimits {
            max_bulk_len: (data[0] >> 1) as u64,
            max_inline_len: data[1] as usize,
            unauthenticated: data[0] & 2 == 2,
        }
    } else {
        ParserLimits::default()
    };
    let chunk_seed = data[2] as usize;
    let input = &data[3..];

    let mut p = Parser::new(limits);
    let mut start = 0;
    let mut end = 0;
    let mut step = 0;
    while end < input.len() {
        step += 1;
        end = (end + 1 + (chunk_seed * step) % 97).min(input.len());
        loop {
            let buf = &input[start..end];
            match p.next(buf) {
                Ok(Some(n)) => {
                    assert!(n > 0 && n <= buf.len());
                    assert!(p.argc() > 0);
                    let total: usize = p.args(buf).map(|a| a.len()).sum();
                    assert!(total <= 4 * buf.len());
                    start += n;
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = e.to_string();
                    return;
                }
            }
        }
        let received = end - start + 1;
        assert!(p.heap_bytes() <= 2 * (16 * (1024 + received) + received) + 64 * 1024);
        if let Some(r) = p.bulk_remaining() {
            assert!(r > 0);
        }
    }
});
