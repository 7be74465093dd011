//! Feeds arbitrary bytes to the snapshot loader and to the RESTORE object reader: both must
//! answer Ok or a typed error, never panic, hang or allocate beyond what the input can describe.
//! Seed it with real files (`damselfly SAVE`, `redis-server SAVE`) for depth; the zero checksum
//! trailer ("not computed") lets mutated bodies past the CRC check.
#![no_main]

use damselfly::engine::rdb_load as load;
use damselfly_types::rdb::object::{read_object, EncLimits};
use damselfly_types::rdb::Reader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lim = EncLimits::default();
    let _ = load::parse(data, 3, 16, 0, &lim);
    let mut r = Reader::new(data);
    if let Ok(t) = r.read_u8() {
        let _ = read_object(&mut r, t, &lim);
    }
});
