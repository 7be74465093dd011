//! Feeds arbitrary bytes to every RDB primitive decoder (LZF, listpack,
//! ziplist, intset, zipmap, the wire `Reader`, trailer and DUMP checks),
//! checking they never panic and that what decodes re-encodes consistently.
//! Allocation stays bounded by the input length: decoders check every
//! length they read against the bytes that remain before allocating.
#![no_main]

use damselfly_types::rdb::wire::{self, Reader};
use damselfly_types::rdb::{intset, listpack, lzf, ziplist, zipmap};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };

    // Packed blobs.
    if let Ok(entries) = listpack::decode(input) {
        let again = listpack::encode(entries.iter().copied());
        let back = listpack::decode(&again).expect("re-encoded listpack must decode");
        assert_eq!(back.len(), entries.len());
        for (a, b) in entries.iter().zip(&back) {
            assert_eq!(a.to_bytes(), b.to_bytes());
        }
    }
    let _ = ziplist::decode(input);
    if let Ok(values) = intset::decode(input) {
        assert_eq!(intset::decode(&intset::encode(&values)).unwrap(), values);
    }
    let _ = zipmap::decode(input);

    // LZF: a declared length from the first two bytes (bounded by u16), and
    // a roundtrip of the whole input.
    if input.len() >= 2 {
        let declared = u16::from_le_bytes([input[0], input[1]]) as usize;
        if let Ok(out) = lzf::decompress(&input[2..], declared) {
            assert_eq!(out.len(), declared);
        }
    }
    let c = lzf::compress_with_budget(input, usize::MAX).expect("unbounded budget");
    assert_eq!(lzf::decompress(&c, input.len()).unwrap(), input);
    if let Some(c) = lzf::compress(input) {
        assert!(c.len() + 4 <= input.len());
    }

    // Wire reader: a sequence of operations picked by the selector byte.
    let mut r = Reader::new(input);
    let mut op = sel;
    while !r.is_at_end() {
        let before = r.pos();
        let _ = match op % 12 {
            0 => r.read_string().map(drop),
            1 => r.read_len().map(drop),
            2 => r.read_plain_len().map(drop),
            3 => r.read_count().map(drop),
            4 => r.read_string_as_i64().map(drop),
            5 => r.read_double_old().map(drop),
            6 => r.read_double_binary().map(drop),
            7 => r.read_millis().map(drop),
            8 => r.read_secs().map(drop),
            9 => r.read_header(wire::RDB_VERSION).map(drop),
            10 => r.read_checksum(),
            _ => r.read_u8().map(drop),
        };
        if r.pos() == before {
            break;
        }
        op = op.rotate_left(3).wrapping_add(1);
    }
    let _ = wire::verify_trailer(input);
    if let Ok(obj) = wire::check_dump_payload(input) {
        assert_eq!(
            wire::check_dump_payload(&wire::dump_payload(obj)).unwrap(),
            obj
        );
    }
});
