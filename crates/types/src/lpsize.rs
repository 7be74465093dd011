//! Sizes of Redis's listpacks, without building one: what a structure that is not a listpack
//! (our stream nodes) needs to cut itself exactly where redis-server's listpacks are cut, and
//! what the RDB listpack writer (`rdb::listpack`) sizes its elements with.

use damselfly_protocol::double::parse_i64 as parse_canonical_i64;

/// Header size: total bytes + count.
pub const HEADER_SIZE: usize = 6;

/// `STREAM_LISTPACK_MAX_SIZE`: Redis never lets a node listpack grow past this (1 GiB), and
/// uses it for `stream-node-max-bytes 0`.
pub const STREAM_LISTPACK_MAX_SIZE: usize = 1 << 30;

/// Bytes an integer element takes in a listpack (encoding, data and back-length), as
/// `rdb::listpack::LpBuilder::push_int` writes it.
pub fn int_element_size(v: i64) -> usize {
    let data = if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if i16::try_from(v).is_ok() {
        3
    } else if (-(1 << 23)..(1 << 23)).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    };
    data + 1
}

/// Bytes a string element takes in a listpack, as `rdb::listpack::LpBuilder::push_bytes` writes it
/// (canonical integers as integers). Lets a structure that is not a listpack (our stream
/// nodes) cut itself where Redis's listpacks would be cut.
pub fn element_size(s: &[u8]) -> usize {
    if let Some(v) = parse_canonical_i64(s) {
        return int_element_size(v);
    }
    let len = s.len();
    let head = if len < 64 {
        1
    } else if len < 4096 {
        2
    } else {
        5
    };
    let l = head + len;
    let backlen = if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2097151 {
        3
    } else if l < 268435455 {
        4
    } else {
        5
    };
    l + backlen
}

/// Bytes one entry adds to a Redis node listpack: flags, ms-diff, seq-diff, (without
/// `same_fields`) the field count and names, the values, lp-count. `id_delta_*` are the ID
/// minus the master ID, part by part, as wrapping differences
/// (`id.ms.wrapping_sub(master.ms) as i64`). Deleting an entry later does not change its size
/// (the flags stay one byte).
pub fn redis_entry_lp_bytes(
    id_delta_ms: i64,
    id_delta_seq: i64,
    same_fields: bool,
    fields: &[(&[u8], &[u8])],
) -> usize {
    let n = fields.len() as i64;
    // Flags are 0..=3: one byte plus back-length.
    let mut total = 2 + int_element_size(id_delta_ms) + int_element_size(id_delta_seq);
    let mut lp_count = n + 3;
    if !same_fields {
        total += int_element_size(n);
        lp_count += n + 1;
    }
    for (f, v) in fields {
        if !same_fields {
            total += element_size(f);
        }
        total += element_size(v);
    }
    total + int_element_size(lp_count)
}

/// Bytes of a node listpack holding only its master entry with the given live and deleted
/// counts: the 6-byte header, `live deleted num-fields field.. 0`, and the 1-byte end. A
/// node's `lpBytes` is this plus [`redis_entry_lp_bytes`] of each entry it holds (deleted
/// ones included); Redis rewrites the counts in place, so the size moves when they cross an
/// encoding boundary (127 → 128 takes one byte more).
pub fn redis_node_header_lp_bytes(live: u64, deleted: u64, master_fields: &[&[u8]]) -> usize {
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    HEADER_SIZE
        + int_element_size(as_i64(live))
        + int_element_size(as_i64(deleted))
        + int_element_size(master_fields.len() as i64)
        + master_fields.iter().map(|f| element_size(f)).sum::<usize>()
        + int_element_size(0)
        + 1
}

/// [`redis_node_header_lp_bytes`] of a new node (count 1, deleted 0): with the
/// [`redis_entry_lp_bytes`] of its first entry (`same_fields`, deltas 0), the `lpBytes` of
/// the node `XADD` creates.
pub fn redis_master_lp_bytes(master_fields: &[&[u8]]) -> usize {
    redis_node_header_lp_bytes(1, 0, master_fields)
}

/// Whether redis-server 7.0 appends an entry to a new node rather than to the tail node
/// (`streamAppendItem`). `tail_lp_bytes` is the tail node's `lpBytes` (see
/// [`redis_node_header_lp_bytes`]), `tail_entries` its live + deleted entries,
/// `new_entry_raw_len` the sum of the lengths of the new entry's field names and values as
/// given (Redis's `totelelen`: raw bytes, not their listpack encoding),
/// `node_max_bytes`/`node_max_entries` the `stream-node-max-bytes`/`-entries` settings
/// (0 = no limit; bytes are capped at [`STREAM_LISTPACK_MAX_SIZE`]).
pub fn redis_needs_new_node(
    tail_lp_bytes: usize,
    tail_entries: u64,
    new_entry_raw_len: usize,
    node_max_bytes: usize,
    node_max_entries: u64,
) -> bool {
    let max_bytes = if node_max_bytes == 0 || node_max_bytes > STREAM_LISTPACK_MAX_SIZE {
        STREAM_LISTPACK_MAX_SIZE
    } else {
        node_max_bytes
    };
    tail_lp_bytes.saturating_add(new_entry_raw_len) >= max_bytes
        || (node_max_entries != 0 && tail_entries >= node_max_entries)
}
