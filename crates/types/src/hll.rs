//! HyperLogLog as Redis stores it: a string value with a 16-byte header ("HYLL", encoding,
//! three zero bytes, the cached cardinality little-endian with its top bit meaning "stale") and
//! 16384 six-bit registers, either dense (12288 bytes) or sparse (run-length opcodes ZERO,
//! XZERO and VAL). The bytes are Redis's exactly, so GET/DUMP of an HLL are identical to
//! redis-server's and an HLL made by either counts the same in the other. The algorithms are
//! Redis's `hyperloglog.c` (MurmurHash64A, the sparse update rules, Ertl's estimator).
//!
//! Every reader here is bounds-checked: a corrupted value (from SET, RESTORE or a file) gives
//! `Err(Corrupt)` (the `-INVALIDOBJ` reply), never a panic or an out-of-range access.

/// Register index bits.
const P: u32 = 14;
/// Hash bits left for the zero run.
const Q: u32 = 64 - P;
pub const REGISTERS: usize = 1 << P;
const P_MASK: u64 = REGISTERS as u64 - 1;
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
pub const HDR: usize = 16;
pub const DENSE_SIZE: usize = HDR + (REGISTERS * BITS).div_ceil(8);
pub const DENSE: u8 = 0;
pub const SPARSE: u8 = 1;

const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// A corrupted HLL (Redis's `-INVALIDOBJ Corrupted HLL object detected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

pub const ERR_INVALID: &str = "INVALIDOBJ Corrupted HLL object detected";
pub const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

/// MurmurHash2, 64-bit (Redis's endian-neutral `MurmurHash64A`).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element goes to and the length of its hash's `000..1` run (1..=Q+1).
pub fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & P_MASK) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A new, empty HLL: sparse, one XZERO opcode covering every register, cached count 0.
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(SPARSE_XZERO_MAX_LEN);
        push_xzero(&mut v, n);
        left -= n;
    }
    v
}

/// Redis's `isHLLObjectOrReply` on the bytes of a string value.
pub fn is_hll(b: &[u8]) -> bool {
    b.len() >= HDR
        && &b[..4] == b"HYLL"
        && b[4] <= SPARSE
        && (b[4] != DENSE || b.len() == DENSE_SIZE)
}

pub fn encoding(b: &[u8]) -> u8 {
    b[4]
}

/// The cached cardinality, if valid.
pub fn cached(b: &[u8]) -> Option<u64> {
    (b[15] & 0x80 == 0).then(|| u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")))
}

pub fn set_cache(b: &mut [u8], card: u64) {
    b[8..16].copy_from_slice(&card.to_le_bytes());
}

pub fn invalidate_cache(b: &mut [u8]) {
    b[15] |= 0x80;
}

// ---------------------------------------------------------------------------------------------
// Dense registers (`regs` is the 12288 bytes after the header).

#[inline]
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let b0 = regs[byte] as u32;
    // The last register's second byte is past the array (Redis reads the sds terminator, 0).
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u32) as u8
}

#[inline]
pub fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * BITS / 8;
    let fb = (i * BITS) & 7;
    let v = val as u32;
    regs[byte] &= !((REGISTER_MAX as u32) << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    if let Some(b) = regs.get_mut(byte + 1) {
        let fb8 = 8 - fb;
        *b &= !((REGISTER_MAX as u32) >> fb8) as u8;
        *b |= (v >> fb8) as u8;
    }
}

/// Raises register `i` to `count`: true when it changed.
#[inline]
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse opcodes.

enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

impl Op {
    fn span(&self) -> usize {
        match *self {
            Op::Zero(n) | Op::XZero(n) | Op::Val(_, n) => n,
        }
    }
}

/// The opcode at `b[p..]` and its length in bytes.
#[inline]
fn read_op(b: &[u8], p: usize) -> Option<(Op, usize)> {
    let c = *b.get(p)?;
    Some(if c & 0xc0 == 0 {
        (Op::Zero((c & 0x3f) as usize + 1), 1)
    } else if c & 0x80 == 0 {
        let lo = *b.get(p + 1)? as usize;
        (Op::XZero(((((c & 0x3f) as usize) << 8) | lo) + 1), 2)
    } else {
        (Op::Val(((c >> 2) & 0x1f) + 1, (c & 0x3) as usize + 1), 1)
    })
}

fn push_zero(v: &mut Vec<u8>, len: usize) {
    v.push((len - 1) as u8);
}

fn push_xzero(v: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    v.push((l >> 8) as u8 | 0x40);
    v.push((l & 0xff) as u8);
}

fn val_byte(val: u8, len: usize) -> u8 {
    (((val - 1) << 2) | (len as u8 - 1)) | 0x80
}

/// Calls `f(first_register, op)` for every opcode; Err when the opcodes do not cover exactly
/// the 16384 registers (or are cut short).
fn walk_sparse(b: &[u8], mut f: impl FnMut(usize, &Op)) -> Result<(), Corrupt> {
    let mut p = HDR;
    let mut idx = 0usize;
    while p < b.len() {
        let (op, len) = read_op(b, p).ok_or(Corrupt)?;
        let span = op.span();
        if idx + span > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, &op);
        idx += span;
        p += len;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// Redis's `hllSparseToDense`: the same HLL in dense form (header and cached count kept).
pub fn sparse_to_dense(b: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&b[..HDR]);
    d[4] = DENSE;
    let regs = &mut d[HDR..];
    walk_sparse(b, |first, op| {
        if let Op::Val(v, n) = *op {
            for i in first..first + n {
                dense_set(regs, i, v);
            }
        }
    })?;
    Ok(d)
}

/// Redis's `hllSparseSet`: raises register `index` to `count` in sparse HLL `b`, promoting it
/// to dense when the value is too big for a VAL opcode or the string would outgrow
/// `max_bytes`. Ok(true) when a register changed.
pub fn sparse_set(
    b: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(b, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let mut p = HDR;
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let found = loop {
        let Some((op, oplen)) = read_op(b, p) else {
            return Err(Corrupt);
        };
        let span = op.span();
        if index < first + span {
            break (op, oplen);
        }
        prev = Some(p);
        p += oplen;
        first += span;
    };
    let (op, oplen) = found;
    let span = op.span();
    // A: a VAL already at least `count`; B: a VAL of length 1; C: a ZERO of length 1.
    let mut updated = false;
    match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => {
            b[p] = val_byte(count, 1);
            updated = true;
        }
        _ => {}
    }
    if !updated {
        // D: split the opcode into up to three.
        let last = first + span - 1;
        let mut seq: Vec<u8> = Vec::with_capacity(5);
        match op {
            Op::Zero(_) | Op::XZero(_) => {
                let zeros = |seq: &mut Vec<u8>, len: usize| {
                    if len > SPARSE_ZERO_MAX_LEN {
                        push_xzero(seq, len);
                    } else {
                        push_zero(seq, len);
                    }
                };
                if index != first {
                    zeros(&mut seq, index - first);
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    zeros(&mut seq, last - index);
                }
            }
            Op::Val(cur, _) => {
                if index != first {
                    seq.push(val_byte(cur, index - first));
                }
                seq.push(val_byte(count, 1));
                if index != last {
                    seq.push(val_byte(cur, last - index));
                }
            }
        }
        if seq.len() > oplen && b.len() + (seq.len() - oplen) > max_bytes {
            return promote(b, index, count);
        }
        b.splice(p..p + oplen, seq);
    }
    // Step 4: merge adjacent VAL opcodes of the same value, scanning up to 5 opcodes from the
    // one before the change.
    let mut q = prev.unwrap_or(HDR);
    let mut scan = 5;
    while q < b.len() && scan > 0 {
        scan -= 1;
        let c = b[q];
        if c & 0xc0 == 0x40 {
            q += 2;
            continue;
        }
        if c & 0xc0 == 0 {
            q += 1;
            continue;
        }
        if q + 1 < b.len() && b[q + 1] & 0x80 != 0 {
            let (v1, l1) = (((c >> 2) & 0x1f) + 1, (c & 3) as usize + 1);
            let n = b[q + 1];
            let (v2, l2) = (((n >> 2) & 0x1f) + 1, (n & 3) as usize + 1);
            if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                b[q + 1] = val_byte(v1, l1 + l2);
                b.remove(q);
                // Try to merge the merged opcode with the next one too (this counts as one
                // of the five, as in Redis).
                continue;
            }
        }
        q += 1;
    }
    invalidate_cache(b);
    Ok(true)
}

/// Sparse to dense, then the register update on the dense form (Redis's `promote:` path).
fn promote(b: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    let mut d = sparse_to_dense(b)?;
    dense_set(&mut d[HDR..], index, count);
    *b = d;
    Ok(true)
}

/// PFADD's work on one element of a dense HLL's registers, in place: true when one changed.
pub fn add_dense(regs: &mut [u8], ele: &[u8]) -> bool {
    let (index, count) = pat_len(ele);
    dense_raise(regs, index, count)
}

/// PFADD's work on one element: Ok(true) when a register changed. `b` may turn dense.
pub fn add(b: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    match b[4] {
        DENSE => Ok(dense_raise(&mut b[HDR..], index, count)),
        SPARSE => sparse_set(b, index, count, max_bytes),
        _ => Err(Corrupt),
    }
}

/// Raises register `index` to at least `count` (PFMERGE's write of the merged registers).
pub fn raise(b: &mut Vec<u8>, index: usize, count: u8, max_bytes: usize) -> Result<bool, Corrupt> {
    match b[4] {
        DENSE => Ok(dense_raise(&mut b[HDR..], index, count)),
        SPARSE => sparse_set(b, index, count, max_bytes),
        _ => Err(Corrupt),
    }
}

/// `max[i] = max(max[i], register i of b)` (Redis's `hllMerge`).
pub fn merge_into(max: &mut [u8; REGISTERS], b: &[u8]) -> Result<(), Corrupt> {
    match b[4] {
        DENSE => {
            let regs = &b[HDR..];
            for (i, m) in max.iter_mut().enumerate() {
                let v = dense_get(regs, i);
                if v > *m {
                    *m = v;
                }
            }
            Ok(())
        }
        _ => walk_sparse(b, |first, op| {
            if let Op::Val(v, n) = *op {
                for m in &mut max[first..first + n] {
                    if v > *m {
                        *m = v;
                    }
                }
            }
        }),
    }
}

/// The register histogram of HLL `b` (64 slots, as Redis's `reghisto`).
fn histogram(b: &[u8]) -> Result<[u32; 64], Corrupt> {
    let mut h = [0u32; 64];
    match b[4] {
        DENSE => {
            let regs = &b[HDR..];
            for i in 0..REGISTERS {
                h[dense_get(regs, i) as usize] += 1;
            }
        }
        _ => walk_sparse(b, |_, op| match *op {
            Op::Zero(n) | Op::XZero(n) => h[0] += n as u32,
            Op::Val(v, n) => h[v as usize] += n as u32,
        })?,
    }
    Ok(h)
}

/// Cardinality of HLL `b` (Redis's `hllCount`).
pub fn count(b: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(b)?))
}

/// Cardinality of raw registers (PFCOUNT of several keys).
pub fn count_raw(regs: &[u8; REGISTERS]) -> u64 {
    let mut h = [0u32; 64];
    // Eight registers at a time: most are zero in all but the largest HLLs (as Redis).
    for w in regs.chunks_exact(8) {
        if u64::from_ne_bytes(w.try_into().expect("8 bytes")) == 0 {
            h[0] += 8;
        } else {
            for &r in w {
                h[(r & 63) as usize] += 1;
            }
        }
    }
    estimate(&h)
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prime = z;
        z += x * y;
        y += y;
        if z_prime == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prime = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z_prime == z {
            return z / 3.0;
        }
    }
}

/// Ertl's estimator over the register histogram, as Redis computes it.
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// PFDEBUG DECODE's text of a sparse HLL.
pub fn decode(b: &[u8]) -> Result<String, Corrupt> {
    let mut out = Vec::new();
    let mut p = HDR;
    while p < b.len() {
        let (op, len) = read_op(b, p).ok_or(Corrupt)?;
        out.push(match op {
            Op::Zero(n) => format!("z:{n}"),
            Op::XZero(n) => format!("Z:{n}"),
            Op::Val(v, n) => format!("v:{v},{n}"),
        });
        p += len;
    }
    Ok(out.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes after a sparse header: every operation either works or reports a corrupt
        /// HLL, never panics, and an add keeps the HLL countable or corrupt, never worse.
        #[test]
        fn arbitrary_sparse_bodies_never_panic(
            body in proptest::collection::vec(any::<u8>(), 0..64),
            eles in proptest::collection::vec(any::<u32>(), 0..20),
        ) {
            let mut b = new_sparse();
            b.truncate(HDR);
            b.extend_from_slice(&body);
            let _ = count(&b);
            let _ = sparse_to_dense(&b);
            let _ = decode(&b);
            let mut max = [0u8; REGISTERS];
            let _ = merge_into(&mut max, &b);
            for e in eles {
                let _ = add(&mut b, &e.to_le_bytes(), 3000);
            }
            let _ = count(&b);
        }

        /// Sparse and dense forms of the same elements hold the same registers and count.
        #[test]
        fn sparse_matches_dense(eles in proptest::collection::vec(any::<u64>(), 0..400)) {
            let mut s = new_sparse();
            let mut d = sparse_to_dense(&s).unwrap();
            for e in &eles {
                let a = add(&mut s, &e.to_le_bytes(), 3000).unwrap();
                let b = add(&mut d, &e.to_le_bytes(), 3000).unwrap();
                prop_assert_eq!(a, b);
            }
            let as_dense = if encoding(&s) == SPARSE { sparse_to_dense(&s).unwrap() } else { s.clone() };
            prop_assert_eq!(&as_dense[HDR..], &d[HDR..]);
            prop_assert_eq!(count(&s), count(&d));
        }
    }

    #[test]
    fn empty_hll_is_redis_bytes() {
        let v = new_sparse();
        assert_eq!(v.len(), 18);
        assert_eq!(&v[..5], b"HYLL\x01");
        assert_eq!(&v[16..], &[0x7f, 0xff]);
        assert_eq!(count(&v), Ok(0));
    }

    #[test]
    fn dense_registers_do_not_disturb_neighbours() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        let mut want = vec![0u8; REGISTERS];
        let mut x = 12345u64;
        for _ in 0..3 {
            for (i, w) in want.iter_mut().enumerate() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = ((x >> 33) & 63) as u8;
                *w = r;
                dense_set(&mut regs, i, r);
            }
            for (i, w) in want.iter().enumerate() {
                assert_eq!(dense_get(&regs, i), *w, "register {i}");
            }
        }
    }

    #[test]
    fn sparse_and_dense_agree_and_error_is_small() {
        let mut sparse = new_sparse();
        let mut dense = sparse_to_dense(&sparse).unwrap();
        let mut checkpoint = 1u64;
        for j in 1..=100_000u64 {
            let ele = j.to_le_bytes();
            add(&mut sparse, &ele, 3000).unwrap();
            add(&mut dense, &ele, 3000).unwrap();
            if j == checkpoint {
                assert_eq!(count(&sparse), count(&dense), "at {j}");
                let c = count(&dense).unwrap() as i64;
                let err = (c - j as i64).unsigned_abs();
                let max = ((1.04 / (REGISTERS as f64).sqrt()) * 6.0 * j as f64).ceil() as u64;
                assert!(err <= max.max(1), "card {j} estimated {c}");
                checkpoint *= 10;
            }
        }
        assert_eq!(encoding(&sparse), DENSE, "grew past 3000 bytes");
    }

    #[test]
    fn corrupt_sparse_is_an_error_not_a_panic() {
        let mut v = new_sparse();
        v.truncate(17); // XZERO cut in half
        assert_eq!(count(&v), Err(Corrupt));
        let mut w = new_sparse();
        w.push(0x00); // one register too many
        assert_eq!(count(&w), Err(Corrupt));
        assert_eq!(sparse_to_dense(&w), Err(Corrupt));
        let mut short = new_sparse();
        short[16] = 0x40; // XZERO of 1 register: too few
        short[17] = 0;
        assert_eq!(count(&short), Err(Corrupt));
        // Adding to it never panics, whatever register the element hits.
        for i in 0..2000u32 {
            let mut e = short.clone();
            let _ = add(&mut e, &i.to_le_bytes(), 3000);
        }
    }
}
