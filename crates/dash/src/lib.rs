//! Dash-style segmented hash table: the per-shard main dictionary of Damselfly.
//!
//! Layout (after Dragonfly's Dashtable / the Dash paper):
//!
//! * A *directory* of `2^global_depth` entries, indexed by the top
//!   `global_depth` bits of the 64-bit hash, points at *segments*. A segment
//!   has a `local_depth <= global_depth` and is referenced by
//!   `2^(global_depth - local_depth)` consecutive directory entries.
//! * A segment holds `B - STASH_BUCKETS` regular buckets plus [`STASH_BUCKETS`]
//!   stash buckets of [`SLOTS`] slots each (`B` is the table's const parameter,
//!   [`DEFAULT_BUCKETS`] unless chosen with [`buckets_for`] to fit the entry size). Entries are stored inline
//!   (`MaybeUninit<(K, V)>`), there is no per-entry heap node.
//! * A key's *home* bucket is derived from the low 32 hash bits (independent of
//!   the directory bits). The key lives in its home bucket, the neighbour
//!   (`home + 1`, wrapping) or one of the stash buckets. Every bucket keeps a
//!   one-byte fingerprint per slot, a busy mask, a "probe" mask (slot holds an
//!   entry whose home is the previous bucket), four user flag masks, a `u32`
//!   version, and a user access byte per slot with a `u32` bucket clock it is
//!   relative to (the server's LRU/LFU data); stashed entries remember their home bucket, and each bucket
//!   counts how many of its entries live in the stash so lookups skip the
//!   stash when nothing overflowed.
//! * When an insert finds no room (after trying Dash's displacement), the
//!   segment splits: the directory doubles if needed (pointers only) and the
//!   entries whose next hash bit is 1 move to a fresh segment, keeping their
//!   bucket and slot. The whole table is never rehashed at once.
//!
//! SCAN: entries are ordered by `(home bucket, 48-bit hash prefix)`. One scan
//! step visits, for one home bucket `b`, every entry of one segment whose home
//! is `b`. The cursor encodes `b` and the start of the next hash-prefix range;
//! since prefix ranges are independent of how segments are split, growth
//! between steps never makes a scan skip a key.

#![deny(unsafe_op_in_unsafe_fn)]

use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
use std::fmt;
use std::mem::{size_of, MaybeUninit};
use std::ptr;

/// Keys stored in the table expose their bytes for hashing/equality.
pub trait TableKey {
    fn key_bytes(&self) -> &[u8];
}

impl TableKey for Vec<u8> {
    #[inline]
    fn key_bytes(&self) -> &[u8] {
        self
    }
}

impl TableKey for Box<[u8]> {
    #[inline]
    fn key_bytes(&self) -> &[u8] {
        self
    }
}

const HASH_SEED: u64 = 0x6461_6d73_656c_666c; // "damself"

/// The table's key hash: xxh3-64 with a fixed seed.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, HASH_SEED)
}

/// Flag bits per slot.
pub const FLAG_A: u8 = 1;
pub const FLAG_B: u8 = 2;
pub const FLAG_C: u8 = 4;
pub const FLAG_D: u8 = 8;

/// Slots per bucket.
pub const SLOTS: usize = 14;
/// Stash buckets per segment (any geometry).
pub const STASH_BUCKETS: usize = 4;
/// Buckets per segment of the default geometry (`DashTable<K, V>`): 51 regular + 4 stash. With
/// 32-byte entries a segment is 28,224 bytes, just under jemalloc's 28 KiB size class (56
/// buckets would round up to 32 KiB and waste 12%). Tables with other entry sizes should use
/// [`buckets_for`] as their `B` parameter so their segments fill their size class too.
pub const DEFAULT_BUCKETS: usize = 55;
/// Regular buckets per segment (default geometry).
pub const REGULAR_BUCKETS: usize = DEFAULT_BUCKETS - STASH_BUCKETS;
/// All buckets per segment (default geometry).
pub const BUCKETS: usize = DEFAULT_BUCKETS;
/// Slots per segment (default geometry).
pub const SEGMENT_SLOTS: usize = BUCKETS * SLOTS;
/// Most buckets a segment may have (bucket indices and stash homes are bytes).
pub const MAX_BUCKETS: usize = 255;
/// Fewest buckets a segment may have (a home, its neighbour and the stash).
pub const MIN_BUCKETS: usize = STASH_BUCKETS + 2;

const PAGE: usize = 4096;

/// Size of a `Segment<K, V, B>` where `(K, V)` has the given size and alignment (mirrors the
/// `repr(C)` layout; checked against `size_of` in the tests).
const fn segment_size(buckets: usize, entry_size: usize, entry_align: usize) -> usize {
    let meta = buckets * size_of::<Meta>();
    let slots_at = round_up(meta, entry_align);
    let tail_at = slots_at + buckets * SLOTS * entry_size;
    // stash_home, then local_depth and len (u32).
    let end = round_up(tail_at + STASH_BUCKETS * SLOTS, 4) + 8;
    round_up(end, PAGE)
}

const fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// The allocation a page-aligned block of `size` bytes really takes: pages up to 16 KiB, then
/// jemalloc's large size classes (4 per doubling: 16, 20, 24, 28, 32, 40, 48, 56, 64 KiB...).
const fn size_class(size: usize) -> usize {
    let size = round_up(size, PAGE);
    if size <= 4 * PAGE {
        return size;
    }
    let mut group = 4 * PAGE;
    loop {
        let step = group / 4;
        let mut c = group;
        while c <= 2 * group {
            if c >= size {
                return c;
            }
            c += step;
        }
        group *= 2;
    }
}

/// Bucket count for a table of `(K, V)` entries: the default geometry's segment, rounded up to
/// its allocation size class, then filled with as many buckets as fit in that size. Same
/// footprint per segment as the default, no padding. Use it as the table's `B`:
/// `DashTable<K, V, { buckets_for::<K, V>() }>` (with concrete `K` and `V`).
pub const fn buckets_for<K, V>() -> usize {
    let (size, align) = (size_of::<(K, V)>(), std::mem::align_of::<(K, V)>());
    let class = size_class(segment_size(DEFAULT_BUCKETS, size, align));
    let mut b = DEFAULT_BUCKETS;
    while b < MAX_BUCKETS && size_class(segment_size(b + 1, size, align)) <= class {
        b += 1;
    }
    b
}

const FULL: u16 = (1 << SLOTS) - 1;
/// Bits of hash prefix encoded in a scan cursor.
const PREFIX_BITS: u32 = 48;
const PREFIX_MASK: u64 = (1 << PREFIX_BITS) - 1;
/// Maximum local depth (a segment must cover at least one prefix position).
const MAX_DEPTH: u32 = PREFIX_BITS;

#[inline]
fn home_bucket(hash: u64, regular: usize) -> usize {
    // Multiply-shift over the low 32 bits: uniform in 0..regular, independent of
    // the directory bits (the top ones).
    (((hash as u32 as u64) * regular as u64) >> 32) as usize
}

#[inline]
fn fingerprint(hash: u64) -> u8 {
    (hash >> 32) as u8
}

#[inline]
fn next_bucket(b: usize, regular: usize) -> usize {
    if b + 1 == regular {
        0
    } else {
        b + 1
    }
}

#[inline]
fn prev_bucket(b: usize, regular: usize) -> usize {
    if b == 0 {
        regular - 1
    } else {
        b - 1
    }
}

/// Opaque stable position of an entry (valid until the next insert/remove).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pos {
    seg: u32,
    bucket: u8,
    slot: u8,
}

impl Pos {
    /// Segment id (index into the segment array; stable until `clear`).
    pub fn segment(&self) -> usize {
        self.seg as usize
    }
    /// Bucket index within the segment (`>= B - STASH_BUCKETS` for stash).
    pub fn bucket(&self) -> usize {
        self.bucket as usize
    }
    /// Slot index within the bucket.
    pub fn slot(&self) -> usize {
        self.slot as usize
    }
}

/// A bucket's physical place: segment and bucket index. Snapshots walk buckets in this order
/// ([`DashTable::next_bucket_id`]) and version them one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BucketId {
    seg: u32,
    bucket: u8,
}

impl BucketId {
    /// The first bucket of the first segment: where a walk over every bucket starts.
    pub const FIRST: BucketId = BucketId { seg: 0, bucket: 0 };
}

impl Pos {
    /// The bucket holding this position.
    #[inline]
    pub fn bucket_id(&self) -> BucketId {
        BucketId {
            seg: self.seg,
            bucket: self.bucket,
        }
    }
}

/// Per-bucket metadata. All of a segment's `Meta`s are stored
/// contiguously ahead of the slots, so a lookup's home and neighbour
/// metadata share two adjacent cache lines.
#[repr(C, align(16))]
struct Meta {
    /// Reserved for forkless snapshots.
    version: u32,
    /// The bucket's access clock: what the slots' `access` bytes are relative to (the user
    /// defines both; see [`DashTable::access`]).
    clock: u32,
    busy: u16,
    flag_a: u16,
    flag_b: u16,
    flag_c: u16,
    flag_d: u16,
    /// Slot holds an entry whose home is the previous bucket (regular buckets only).
    probe: u16,
    /// Bytes `0..SLOTS`: one-byte fingerprint per slot. Byte `STASHED`: the
    /// number of entries homed at this (regular) bucket that live in the
    /// stash. Byte 15 is unused. Packed as 16 bytes so fingerprints can be
    /// matched with two 64-bit SWAR compares.
    fp: [u8; 16],
    /// One user byte per slot (the server keeps LRU/LFU access data here: the slot itself has
    /// no spare bits). It moves with its entry; a move between buckets goes through the table's
    /// [`Rebase`] function since it is relative to the bucket's `clock`.
    access: [u8; SLOTS],
}

const _: () = assert!(size_of::<Meta>() == 64);

/// Converts a slot's access byte from one bucket clock to another when an entry moves between
/// buckets: `rebase(byte, from_clock, to_clock)`.
pub type Rebase = fn(u8, u32, u32) -> u8;

fn keep_access(a: u8, _from: u32, _to: u32) -> u8 {
    a
}

/// Index in `Meta::fp` of the stash overflow counter.
const STASHED: usize = SLOTS;

/// Bit `i` set iff byte `i` of `word` equals `byte` (8-byte SWAR compare).
#[inline]
fn match_bytes(word: u64, byte: u8) -> u16 {
    const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = word ^ (byte as u64).wrapping_mul(0x0101_0101_0101_0101);
    // High bit of each byte set iff that byte of `x` is zero (exact, no
    // false positives: no carries cross bytes).
    let t = !(((x & LO7) + LO7) | x | LO7);
    // Gather the 8 high bits into the top byte (all partial products land
    // on distinct bit positions, so there are no carries).
    (((t >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56) as u16
}

impl Meta {
    #[inline]
    fn match_fp(&self, fp: u8) -> u16 {
        // The 16 fingerprint bytes as two little-endian words (infallible, no slicing).
        let all = u128::from_le_bytes(self.fp);
        let (lo, hi) = (all as u64, (all >> 64) as u64);
        (match_bytes(lo, fp) | (match_bytes(hi, fp) << 8)) & self.busy
    }

    #[inline]
    fn stashed(&self) -> u8 {
        self.fp[STASHED]
    }

    #[inline]
    fn free_slot(&self) -> Option<usize> {
        let free = !self.busy & FULL;
        if free == 0 {
            None
        } else {
            Some(free.trailing_zeros() as usize)
        }
    }

    #[inline]
    fn count(&self) -> u32 {
        self.busy.count_ones()
    }

    #[inline]
    fn is_busy(&self, slot: usize) -> bool {
        slot < SLOTS && self.busy & (1 << slot) != 0
    }

    #[inline]
    fn flags(&self, slot: usize) -> u8 {
        (((self.flag_a >> slot) & 1) as u8 * FLAG_A)
            | (((self.flag_b >> slot) & 1) as u8 * FLAG_B)
            | (((self.flag_c >> slot) & 1) as u8 * FLAG_C)
            | (((self.flag_d >> slot) & 1) as u8 * FLAG_D)
    }

    #[inline]
    fn set_flags(&mut self, slot: usize, flags: u8) {
        let bit = 1u16 << slot;
        self.flag_a = (self.flag_a & !bit) | if flags & FLAG_A != 0 { bit } else { 0 };
        self.flag_b = (self.flag_b & !bit) | if flags & FLAG_B != 0 { bit } else { 0 };
        self.flag_c = (self.flag_c & !bit) | if flags & FLAG_C != 0 { bit } else { 0 };
        self.flag_d = (self.flag_d & !bit) | if flags & FLAG_D != 0 { bit } else { 0 };
    }
}

/// A segment: metadata of all buckets, then the inline slots.
///
/// Invariant: `slots[b][s]` is initialised iff bit `s` of `meta[b].busy` is set.
/// Page-aligned: jemalloc pads every large allocation that has no alignment requirement by one
/// page ("cache-oblivious" placement), which costs 4 KiB per 28 KiB segment (~8 bytes per key at
/// 1M keys). With page alignment the segment is exactly its size class.
#[repr(C, align(4096))]
struct Segment<K, V, const B: usize> {
    meta: [Meta; B],
    slots: [[MaybeUninit<(K, V)>; SLOTS]; B],
    /// Home bucket of each stash slot's entry.
    stash_home: [u8; STASH_BUCKETS * SLOTS],
    local_depth: u32,
    len: u32,
}

impl<K, V, const B: usize> Segment<K, V, B> {
    const REGULAR: usize = B - STASH_BUCKETS;

    fn new_boxed(local_depth: u32) -> Box<Self> {
        let layout = Layout::new::<Self>();
        // SAFETY: the layout has non-zero size (metadata fields). Every field
        // of `Segment` is an integer, an array of integers or `MaybeUninit`,
        // so the all-zero bit pattern is a valid value (empty buckets). The
        // pointer comes from the global allocator with `Self`'s layout, as
        // `Box::from_raw` requires.
        let mut seg = unsafe {
            let p = alloc_zeroed(layout) as *mut Self;
            if p.is_null() {
                handle_alloc_error(layout);
            }
            Box::from_raw(p)
        };
        seg.local_depth = local_depth;
        seg
    }

    /// # Safety
    /// `(bucket, slot)` must be busy.
    #[inline]
    unsafe fn entry(&self, bucket: usize, slot: usize) -> &(K, V) {
        debug_assert!(self.meta[bucket].is_busy(slot));
        // SAFETY: busy slots are initialised (caller contract).
        unsafe { self.slots[bucket][slot].assume_init_ref() }
    }

    /// # Safety
    /// `(bucket, slot)` must be busy.
    #[inline]
    unsafe fn entry_mut(&mut self, bucket: usize, slot: usize) -> &mut (K, V) {
        debug_assert!(self.meta[bucket].is_busy(slot));
        // SAFETY: busy slots are initialised (caller contract).
        unsafe { self.slots[bucket][slot].assume_init_mut() }
    }

    /// Write an entry into a free slot (flags cleared). Low-level: does not
    /// maintain `len` or stash bookkeeping (see `put_at`).
    #[inline]
    fn put(&mut self, bucket: usize, slot: usize, fp: u8, probe: bool, kv: (K, V)) {
        let m = &mut self.meta[bucket];
        let bit = 1u16 << slot;
        assert!(m.busy & bit == 0, "slot already occupied");
        m.busy |= bit;
        m.fp[slot] = fp;
        m.access[slot] = 0;
        m.flag_a &= !bit;
        m.flag_b &= !bit;
        m.flag_c &= !bit;
        m.flag_d &= !bit;
        if probe {
            m.probe |= bit;
        } else {
            m.probe &= !bit;
        }
        self.slots[bucket][slot].write(kv);
    }

    /// Move an entry out of a busy slot and clear the slot's metadata.
    /// Returns the entry and its flags. Low-level (see `take_at`).
    ///
    /// # Safety
    /// `(bucket, slot)` must be busy.
    #[inline]
    unsafe fn take(&mut self, bucket: usize, slot: usize) -> ((K, V), u8) {
        let m = &mut self.meta[bucket];
        debug_assert!(m.is_busy(slot));
        let flags = m.flags(slot);
        let bit = !(1u16 << slot);
        m.busy &= bit;
        m.flag_a &= bit;
        m.flag_b &= bit;
        m.flag_c &= bit;
        m.flag_d &= bit;
        m.probe &= bit;
        // SAFETY: the slot was busy, hence initialised; it is now marked free
        // so the value is read out exactly once.
        (
            unsafe { self.slots[bucket][slot].assume_init_read() },
            flags,
        )
    }

    #[inline]
    fn stash_home(&self, bucket: usize, slot: usize) -> usize {
        self.stash_home[(bucket - Self::REGULAR) * SLOTS + slot] as usize
    }

    /// Home bucket of the busy entry at (bucket, slot).
    #[inline]
    fn home_of(&self, bucket: usize, slot: usize) -> usize {
        if bucket >= Self::REGULAR {
            self.stash_home(bucket, slot)
        } else if self.meta[bucket].probe & (1 << slot) != 0 {
            prev_bucket(bucket, Self::REGULAR)
        } else {
            bucket
        }
    }

    /// Place an entry with the given home bucket and fingerprint in this
    /// segment. Returns `(bucket, slot)` or `None` if the segment is full for
    /// this home.
    fn place(
        &mut self,
        home: usize,
        fp: u8,
        kv: (K, V),
        rebase: Rebase,
    ) -> Result<(usize, usize), (K, V)> {
        match self.find_room(home, rebase) {
            Some((bucket, slot)) => {
                self.put_at(home, bucket, slot, fp, kv, 0);
                Ok((bucket, slot))
            }
            None => Err(kv),
        }
    }

    /// Write an entry for `home` into the free (bucket, slot), maintaining
    /// probe/stash metadata and `len`.
    #[inline]
    fn put_at(&mut self, home: usize, bucket: usize, slot: usize, fp: u8, kv: (K, V), flags: u8) {
        if bucket >= Self::REGULAR {
            self.stash_home[(bucket - Self::REGULAR) * SLOTS + slot] = home as u8;
            self.meta[home].fp[STASHED] += 1;
            self.put(bucket, slot, fp, false, kv);
        } else {
            self.put(bucket, slot, fp, bucket != home, kv);
        }
        if flags != 0 {
            self.meta[bucket].set_flags(slot, flags);
        }
        self.len += 1;
    }

    /// Remove the busy entry at (bucket, slot), maintaining metadata.
    ///
    /// # Safety
    /// The slot must be busy.
    #[inline]
    unsafe fn take_at(&mut self, bucket: usize, slot: usize) -> ((K, V), u8, u8) {
        if bucket >= Self::REGULAR {
            let home = self.stash_home(bucket, slot);
            self.meta[home].fp[STASHED] -= 1;
        }
        let fp = self.meta[bucket].fp[slot];
        self.len -= 1;
        // SAFETY: caller guarantees the slot is busy.
        let (kv, flags) = unsafe { self.take(bucket, slot) };
        (kv, flags, fp)
    }

    /// Find a free (bucket, slot) for an entry homed at `home`, displacing
    /// one entry if that makes room. Returns `None` if home, neighbour,
    /// displacement and stash all fail.
    fn find_room(&mut self, home: usize, rebase: Rebase) -> Option<(usize, usize)> {
        let nb = next_bucket(home, Self::REGULAR);
        let ch = self.meta[home].count();
        let cn = self.meta[nb].count();
        if (ch as usize) < SLOTS || (cn as usize) < SLOTS {
            // Balanced insert: the less loaded of home and neighbour.
            let b = if ch <= cn { home } else { nb };
            return Some((b, self.meta[b].free_slot()?));
        }
        // Displacement 1: move an entry living in its own home `nb` on to
        // `nb + 1`, freeing a slot in `nb`.
        let nn = next_bucket(nb, Self::REGULAR);
        if let Some(dst) = self.meta[nn].free_slot() {
            let movable = self.meta[nb].busy & !self.meta[nb].probe;
            if movable != 0 {
                let src = movable.trailing_zeros() as usize;
                self.move_within(nb, src, nn, dst, rebase);
                return Some((nb, src));
            }
        }
        // Displacement 2: move an entry in `home` whose home is `home - 1`
        // back to `home - 1`.
        let pb = prev_bucket(home, Self::REGULAR);
        if let Some(dst) = self.meta[pb].free_slot() {
            let movable = self.meta[home].busy & self.meta[home].probe;
            if movable != 0 {
                let src = movable.trailing_zeros() as usize;
                self.move_within(home, src, pb, dst, rebase);
                return Some((home, src));
            }
        }
        // Stash.
        for i in 0..STASH_BUCKETS {
            let b = Self::REGULAR + (home + i) % STASH_BUCKETS;
            if let Some(s) = self.meta[b].free_slot() {
                return Some((b, s));
            }
        }
        None
    }

    /// Move a busy regular-bucket entry to a free slot of another regular
    /// bucket that is also valid for its home.
    fn move_within(
        &mut self,
        from_b: usize,
        from_s: usize,
        to_b: usize,
        to_s: usize,
        rebase: Rebase,
    ) {
        let home = self.home_of(from_b, from_s);
        debug_assert!(to_b == home || to_b == next_bucket(home, Self::REGULAR));
        let access = self.meta[from_b].access[from_s];
        let (from_clock, to_clock) = (self.meta[from_b].clock, self.meta[to_b].clock);
        // SAFETY: callers pass a busy source slot (taken from busy masks).
        let (kv, flags, fp) = unsafe { self.take_at(from_b, from_s) };
        self.put_at(home, to_b, to_s, fp, kv, flags);
        self.meta[to_b].access[to_s] = if self.meta[to_b].busy == 1 << to_s {
            // The bucket was empty: its clock means nothing yet, take the entry's.
            self.meta[to_b].clock = from_clock;
            access
        } else {
            rebase(access, from_clock, to_clock)
        };
    }
}

/// Dash-style segmented hash table. See the crate docs.
pub struct DashTable<K, V, const B: usize = DEFAULT_BUCKETS> {
    dir: Vec<u32>,
    segs: Vec<Box<Segment<K, V, B>>>,
    global_depth: u32,
    len: usize,
    rebase: Rebase,
}

impl<K: TableKey, V, const B: usize> Default for DashTable<K, V, B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: TableKey + fmt::Debug, V: fmt::Debug, const B: usize> fmt::Debug for DashTable<K, V, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: TableKey, V, const B: usize> DashTable<K, V, B> {
    const REGULAR: usize = B - STASH_BUCKETS;
    /// Evaluated (at compile time) by `new`: rejects unusable bucket counts.
    const GEOMETRY_OK: () = assert!(
        B >= MIN_BUCKETS && B <= MAX_BUCKETS,
        "dash table: bucket count out of range"
    );

    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::GEOMETRY_OK;
        DashTable {
            dir: vec![0],
            segs: vec![Segment::new_boxed(0)],
            global_depth: 0,
            len: 0,
            rebase: keep_access,
        }
    }

    /// Sets how access bytes are converted when an entry moves between buckets (the default
    /// keeps the byte as it is).
    pub fn set_rebase(&mut self, rebase: Rebase) {
        self.rebase = rebase;
    }

    /// The access byte of the entry at `pos` and its bucket's clock.
    #[inline]
    pub fn access(&self, pos: Pos) -> (u8, u32) {
        let m = self.check(pos);
        (m.access[pos.slot as usize], m.clock)
    }

    /// Sets the access byte of the entry at `pos`.
    #[inline]
    pub fn set_access(&mut self, pos: Pos, a: u8) {
        self.check(pos);
        self.meta_mut(pos).access[pos.slot as usize] = a;
    }

    /// The clock, access bytes and busy mask of bucket `b`, to update together (advancing a
    /// bucket's clock re-expresses every byte relative to the new clock).
    #[inline]
    pub fn bucket_access_mut(&mut self, b: BucketId) -> (&mut u32, &mut [u8; SLOTS], u16) {
        let m = &mut self.segs[b.seg as usize].meta[b.bucket as usize];
        (&mut m.clock, &mut m.access, m.busy)
    }

    /// Whether an insert of a key hashed `hash` finds a free slot without a split (home or
    /// neighbour or stash has one; displacement is not counted).
    pub fn has_room(&self, hash: u64) -> bool {
        let seg = &self.segs[self.seg_index(hash)];
        let home = home_bucket(hash, Self::REGULAR);
        let nb = next_bucket(home, Self::REGULAR);
        seg.meta[home].free_slot().is_some()
            || seg.meta[nb].free_slot().is_some()
            || (Self::REGULAR..B).any(|b| seg.meta[b].free_slot().is_some())
    }

    /// Calls `f` for every entry whose removal makes room for an insert of a key hashed `hash`
    /// without a split: those in its home bucket, the neighbour and the stash.
    pub fn room_candidates<F: FnMut(Pos)>(&self, hash: u64, mut f: F) {
        let si = self.seg_index(hash);
        let seg = &self.segs[si];
        let home = home_bucket(hash, Self::REGULAR);
        let nb = next_bucket(home, Self::REGULAR);
        for b in [home, nb].into_iter().chain(Self::REGULAR..B) {
            let mut m = seg.meta[b].busy;
            while m != 0 {
                let s = m.trailing_zeros();
                m &= m - 1;
                f(Pos {
                    seg: si as u32,
                    bucket: b as u8,
                    slot: s as u8,
                });
            }
        }
    }

    /// Bytes of one segment: what an insert that splits one adds.
    pub const fn segment_bytes() -> usize {
        size_of::<Segment<K, V, B>>()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total slots.
    pub fn capacity(&self) -> usize {
        self.segs.len() * (B * SLOTS)
    }

    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    pub fn global_depth(&self) -> u32 {
        self.global_depth
    }

    /// Bytes allocated by the table structure itself (segments, directory,
    /// segment pointer array) — includes the inline `(K, V)` slots but not
    /// heap memory owned by keys/values.
    pub fn mem_usage(&self) -> usize {
        self.segs.len() * size_of::<Segment<K, V, B>>()
            + self.segs.capacity() * size_of::<Box<Segment<K, V, B>>>()
            + self.dir.capacity() * size_of::<u32>()
            + size_of::<Self>()
    }

    #[inline]
    fn seg_index(&self, hash: u64) -> usize {
        if self.global_depth == 0 {
            0
        } else {
            self.dir[(hash >> (64 - self.global_depth)) as usize] as usize
        }
    }

    #[inline]
    fn meta(&self, pos: Pos) -> &Meta {
        &self.segs[pos.seg as usize].meta[pos.bucket as usize]
    }

    #[inline]
    fn meta_mut(&mut self, pos: Pos) -> &mut Meta {
        &mut self.segs[pos.seg as usize].meta[pos.bucket as usize]
    }

    /// Panics unless `pos` refers to an occupied slot.
    #[inline]
    fn check(&self, pos: Pos) -> &Meta {
        let m = self.meta(pos);
        assert!(m.is_busy(pos.slot as usize), "invalid Pos {pos:?}");
        m
    }

    pub fn find(&self, key: &[u8]) -> Option<Pos> {
        self.find_hashed(key, hash_key(key))
    }

    /// Stage 1 of a batched lookup: start loading the home bucket's metadata for `hash`.
    /// Lookups of a pipeline are prefetched in stages so their cache misses overlap (the
    /// technique Valkey 8 uses for its dictionary) instead of being paid one after another.
    #[inline]
    pub fn prefetch_meta(&self, hash: u64) {
        let seg = &self.segs[self.seg_index(hash)];
        let home = home_bucket(hash, Self::REGULAR);
        prefetch(&seg.meta[home] as *const Meta as *const u8);
    }

    /// Stage 2: with the metadata cached, start loading the slots whose fingerprint matches
    /// (home and neighbour bucket).
    #[inline]
    pub fn prefetch_slots(&self, hash: u64) {
        let seg = &self.segs[self.seg_index(hash)];
        let home = home_bucket(hash, Self::REGULAR);
        let fp = fingerprint(hash);
        let hb = &seg.meta[home];
        let mut m = hb.match_fp(fp) & !hb.probe;
        while m != 0 {
            let s = m.trailing_zeros() as usize;
            prefetch(seg.slots[home][s].as_ptr() as *const u8);
            m &= m - 1;
        }
        let nbi = next_bucket(home, Self::REGULAR);
        let nb = &seg.meta[nbi];
        let mut m = nb.match_fp(fp) & nb.probe;
        while m != 0 {
            let s = m.trailing_zeros() as usize;
            prefetch(seg.slots[nbi][s].as_ptr() as *const u8);
            m &= m - 1;
        }
    }

    pub fn find_hashed(&self, key: &[u8], hash: u64) -> Option<Pos> {
        let si = self.seg_index(hash);
        let seg = &self.segs[si];
        let home = home_bucket(hash, Self::REGULAR);
        let fp = fingerprint(hash);
        let mk = |bucket: usize, slot: usize| Pos {
            seg: si as u32,
            bucket: bucket as u8,
            slot: slot as u8,
        };
        let hb = &seg.meta[home];
        let mut m = hb.match_fp(fp) & !hb.probe;
        while m != 0 {
            let s = m.trailing_zeros() as usize;
            // SAFETY: match_fp only reports busy slots.
            if unsafe { seg.entry(home, s) }.0.key_bytes() == key {
                return Some(mk(home, s));
            }
            m &= m - 1;
        }
        let nbi = next_bucket(home, Self::REGULAR);
        let nb = &seg.meta[nbi];
        let mut m = nb.match_fp(fp) & nb.probe;
        while m != 0 {
            let s = m.trailing_zeros() as usize;
            // SAFETY: match_fp only reports busy slots.
            if unsafe { seg.entry(nbi, s) }.0.key_bytes() == key {
                return Some(mk(nbi, s));
            }
            m &= m - 1;
        }
        if hb.stashed() == 0 {
            return None;
        }
        for i in 0..STASH_BUCKETS {
            let bi = Self::REGULAR + (home + i) % STASH_BUCKETS;
            let b = &seg.meta[bi];
            let mut m = b.match_fp(fp);
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                if seg.stash_home(bi, s) == home {
                    // SAFETY: match_fp only reports busy slots.
                    if unsafe { seg.entry(bi, s) }.0.key_bytes() == key {
                        return Some(mk(bi, s));
                    }
                }
                m &= m - 1;
            }
        }
        None
    }

    pub fn get(&self, key: &[u8]) -> Option<(&K, &V)> {
        self.find(key).map(|p| self.at(p))
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<(&K, &mut V)> {
        self.find(key).map(|p| self.at_mut(p))
    }

    /// Entry at `pos`. Panics if `pos` is not occupied.
    #[inline]
    pub fn at(&self, pos: Pos) -> (&K, &V) {
        self.check(pos);
        let seg = &self.segs[pos.seg as usize];
        // SAFETY: `check` asserted the slot is busy.
        let (k, v) = unsafe { seg.entry(pos.bucket as usize, pos.slot as usize) };
        (k, v)
    }

    /// Entry at `pos`, value mutable. Panics if `pos` is not occupied.
    #[inline]
    pub fn at_mut(&mut self, pos: Pos) -> (&K, &mut V) {
        self.check(pos);
        let seg = &mut self.segs[pos.seg as usize];
        // SAFETY: `check` asserted the slot is busy.
        let (k, v) = unsafe { seg.entry_mut(pos.bucket as usize, pos.slot as usize) };
        (&*k, v)
    }

    /// `FLAG_A..FLAG_D` bits of the slot.
    #[inline]
    pub fn flags(&self, pos: Pos) -> u8 {
        self.check(pos).flags(pos.slot as usize)
    }

    #[inline]
    pub fn set_flags(&mut self, pos: Pos, flags: u8) {
        self.check(pos);
        self.meta_mut(pos).set_flags(pos.slot as usize, flags);
    }

    /// Version of bucket `b`. Snapshots use versions to know which buckets they already
    /// wrote: see `persistence/snapshot.rs` in the server.
    #[inline]
    pub fn version_of(&self, b: BucketId) -> u64 {
        self.segs[b.seg as usize].meta[b.bucket as usize].version as u64
    }

    /// Versions are stored in 32 bits (one per snapshot: four billion snapshots).
    #[inline]
    pub fn set_version_of(&mut self, b: BucketId, v: u64) {
        debug_assert!(v <= u32::MAX as u64);
        self.segs[b.seg as usize].meta[b.bucket as usize].version = v as u32;
    }

    /// Calls `f` for every entry physically stored in bucket `b` (whatever its home).
    pub fn bucket_entries<F: FnMut(Pos, &K, &V)>(&self, b: BucketId, mut f: F) {
        let seg = &self.segs[b.seg as usize];
        let bi = b.bucket as usize;
        let mut m = seg.meta[bi].busy;
        while m != 0 {
            let s = m.trailing_zeros() as usize;
            m &= m - 1;
            // SAFETY: s is busy.
            let (k, v) = unsafe { seg.entry(bi, s) };
            let pos = Pos {
                seg: b.seg,
                bucket: b.bucket,
                slot: s as u8,
            };
            f(pos, k, v);
        }
    }

    /// The bucket after `b` in physical order (segment by segment, each segment's buckets in
    /// index order, stash included), or None after the last. Segments are only ever appended
    /// (a split adds one at the end), so a walk started at [`BucketId::FIRST`] meets every
    /// segment that exists when it ends, including those created meanwhile.
    pub fn next_bucket_id(&self, b: BucketId) -> Option<BucketId> {
        if (b.bucket as usize) + 1 < B {
            Some(BucketId {
                seg: b.seg,
                bucket: b.bucket + 1,
            })
        } else if (b.seg as usize) + 1 < self.segs.len() {
            Some(BucketId {
                seg: b.seg + 1,
                bucket: 0,
            })
        } else {
            None
        }
    }

    /// Clears flag bits `flags` (`FLAG_A`..`FLAG_D`) of every slot of bucket `b`.
    pub fn clear_bucket_flags(&mut self, b: BucketId, flags: u8) {
        let m = &mut self.segs[b.seg as usize].meta[b.bucket as usize];
        if flags & FLAG_A != 0 {
            m.flag_a = 0;
        }
        if flags & FLAG_B != 0 {
            m.flag_b = 0;
        }
        if flags & FLAG_C != 0 {
            m.flag_c = 0;
        }
        if flags & FLAG_D != 0 {
            m.flag_d = 0;
        }
    }

    /// Clears flag bits `flags` of every slot of the table (metadata only: no entry is read).
    pub fn clear_flags_everywhere(&mut self, flags: u8) {
        for seg in self.segs.iter_mut() {
            for m in seg.meta.iter_mut() {
                if flags & FLAG_A != 0 {
                    m.flag_a = 0;
                }
                if flags & FLAG_B != 0 {
                    m.flag_b = 0;
                }
                if flags & FLAG_C != 0 {
                    m.flag_c = 0;
                }
                if flags & FLAG_D != 0 {
                    m.flag_d = 0;
                }
            }
        }
    }

    /// Is `b` a bucket of this table (its segment exists)?
    #[inline]
    pub fn has_bucket(&self, b: BucketId) -> bool {
        (b.seg as usize) < self.segs.len() && (b.bucket as usize) < B
    }

    /// Calls `f` for every bucket between which an insert of a key with hash `hash` may move
    /// existing entries: none when the home bucket or its neighbour has room (the new entry
    /// goes there, nothing moves); the buckets a displacement moves an entry between and the
    /// stash when it needs them; every bucket of the segment when only a split makes room (a
    /// split moves entries to a new segment). A snapshot writes these buckets before the
    /// insert, so no entry moves between a bucket it has written and one it has not (which
    /// would lose or duplicate it).
    pub fn insert_buckets<F: FnMut(BucketId)>(&self, hash: u64, mut f: F) {
        let si = self.seg_index(hash);
        let seg = &self.segs[si];
        let id = |bucket: usize| BucketId {
            seg: si as u32,
            bucket: bucket as u8,
        };
        let home = home_bucket(hash, Self::REGULAR);
        let nb = next_bucket(home, Self::REGULAR);
        if (seg.meta[home].count() as usize) < SLOTS || (seg.meta[nb].count() as usize) < SLOTS {
            return;
        }
        let nn = next_bucket(nb, Self::REGULAR);
        let pb = prev_bucket(home, Self::REGULAR);
        let displace_next =
            seg.meta[nn].free_slot().is_some() && seg.meta[nb].busy & !seg.meta[nb].probe != 0;
        let displace_prev =
            seg.meta[pb].free_slot().is_some() && seg.meta[home].busy & seg.meta[home].probe != 0;
        let stash_room = (Self::REGULAR..B).any(|b| seg.meta[b].free_slot().is_some());
        if displace_next || displace_prev || stash_room {
            for b in [pb, home, nb, nn] {
                f(id(b));
            }
            for b in Self::REGULAR..B {
                f(id(b));
            }
        } else {
            for b in 0..B {
                f(id(b));
            }
        }
    }

    /// Version counter of the bucket holding `pos` (reserved for snapshots).
    #[inline]
    pub fn bucket_version(&self, pos: Pos) -> u64 {
        self.meta(pos).version as u64
    }

    #[inline]
    pub fn set_bucket_version(&mut self, pos: Pos, v: u64) {
        debug_assert!(v <= u32::MAX as u64);
        self.meta_mut(pos).version = v as u32;
    }

    /// Insert a key known to be absent; returns its position.
    pub fn insert_new(&mut self, key: K, value: V) -> Pos {
        let h = hash_key(key.key_bytes());
        self.insert_new_hashed(key, value, h)
    }

    /// Insert a key known to be absent whose hash is `hash` (= `hash_key(key)`).
    pub fn insert_new_hashed(&mut self, key: K, value: V, hash: u64) -> Pos {
        debug_assert_eq!(hash, hash_key(key.key_bytes()));
        let home = home_bucket(hash, Self::REGULAR);
        let fp = fingerprint(hash);
        let mut kv = (key, value);
        loop {
            let si = self.seg_index(hash);
            match self.segs[si].place(home, fp, kv, self.rebase) {
                Ok((bucket, slot)) => {
                    self.len += 1;
                    return Pos {
                        seg: si as u32,
                        bucket: bucket as u8,
                        slot: slot as u8,
                    };
                }
                Err(back) => {
                    kv = back;
                    self.split(si, hash);
                }
            }
        }
    }

    /// Insert or replace. Returns the previous value if the key existed (the
    /// stored key is kept and the new key dropped).
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let h = hash_key(key.key_bytes());
        match self.find_hashed(key.key_bytes(), h) {
            Some(p) => Some(std::mem::replace(self.at_mut(p).1, value)),
            None => {
                self.insert_new_hashed(key, value, h);
                None
            }
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<(K, V)> {
        self.find(key).map(|p| self.remove_at(p))
    }

    /// Remove the entry at `pos`. Panics if `pos` is not occupied.
    pub fn remove_at(&mut self, pos: Pos) -> (K, V) {
        self.check(pos);
        let seg = &mut self.segs[pos.seg as usize];
        // SAFETY: `check` asserted the slot is busy.
        let (kv, _, _) = unsafe { seg.take_at(pos.bucket as usize, pos.slot as usize) };
        self.len -= 1;
        kv
    }

    /// Drop everything and shrink back to one segment.
    pub fn clear(&mut self) {
        let rebase = self.rebase;
        drop(std::mem::take(self));
        self.rebase = rebase;
    }

    /// Split segment `si` (which `hash` maps to).
    fn split(&mut self, si: usize, hash: u64) {
        let ld = self.segs[si].local_depth;
        assert!(
            ld < MAX_DEPTH,
            "dash table: segment cannot split further (hash collisions?)"
        );
        if ld == self.global_depth {
            // Double the directory (pointers only).
            let old = std::mem::take(&mut self.dir);
            self.dir = Vec::with_capacity(old.len() * 2);
            for &s in &old {
                self.dir.push(s);
                self.dir.push(s);
            }
            self.global_depth += 1;
        }
        let gd = self.global_depth;
        let ni = self.segs.len();
        assert!(ni < u32::MAX as usize);
        self.segs.push(Segment::new_boxed(ld + 1));
        let (left, right) = self.segs.split_at_mut(ni);
        let old = &mut left[si];
        let new = &mut right[0];
        old.local_depth = ld + 1;
        let bit = 63 - ld;
        for b in 0..B {
            let mut m = old.meta[b].busy;
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                m &= m - 1;
                // SAFETY: s is busy.
                let h = hash_key(unsafe { old.entry(b, s) }.0.key_bytes());
                if (h >> bit) & 1 == 1 {
                    let home = old.home_of(b, s);
                    // SAFETY: s is busy.
                    let access = old.meta[b].access[s];
                    let (kv, flags, fp) = unsafe { old.take_at(b, s) };
                    // Same bucket and slot: valid for the same home.
                    new.put_at(home, b, s, fp, kv, flags);
                    new.meta[b].access[s] = access;
                }
            }
        }
        // Carry bucket versions over so snapshot bookkeeping stays conservative, and clocks so
        // the moved access bytes keep their meaning (same bucket index, same clock).
        for b in 0..B {
            new.meta[b].version = old.meta[b].version;
            new.meta[b].clock = old.meta[b].clock;
        }
        // Point the upper half of the old segment's directory range at the new one.
        let span = 1usize << (gd - ld);
        let start = ((hash >> (64 - gd)) as usize) & !(span - 1);
        for e in &mut self.dir[start + span / 2..start + span] {
            *e = ni as u32;
        }
    }

    /// One scan step: calls `f` for every entry of one segment whose home
    /// bucket is the cursor's bucket and returns the next cursor (0 when the
    /// scan is complete). Start with cursor 0. Cursors fit in 54 bits.
    pub fn scan<F: FnMut(Pos, &K, &V)>(&self, cursor: u64, mut f: F) -> u64 {
        let home = (cursor >> PREFIX_BITS) as usize;
        if home >= Self::REGULAR {
            return 0;
        }
        let prefix = cursor & PREFIX_MASK;
        let si = if self.global_depth == 0 {
            0
        } else {
            self.dir[(prefix >> (PREFIX_BITS - self.global_depth)) as usize] as usize
        };
        let seg = &self.segs[si];
        let width = 1u64 << (PREFIX_BITS - seg.local_depth);
        let next = (prefix & !(width - 1)) + width;
        let mut visit = |bucket: usize, mask: u16| {
            let mut m = mask;
            while m != 0 {
                let s = m.trailing_zeros() as usize;
                m &= m - 1;
                let pos = Pos {
                    seg: si as u32,
                    bucket: bucket as u8,
                    slot: s as u8,
                };
                // SAFETY: masks are subsets of busy.
                let (k, v) = unsafe { seg.entry(bucket, s) };
                f(pos, k, v);
            }
        };
        let hb = &seg.meta[home];
        visit(home, hb.busy & !hb.probe);
        let nbi = next_bucket(home, Self::REGULAR);
        let nb = &seg.meta[nbi];
        visit(nbi, nb.busy & nb.probe);
        if hb.stashed() > 0 {
            for bi in Self::REGULAR..B {
                let mut mask = 0u16;
                let mut m = seg.meta[bi].busy;
                while m != 0 {
                    let s = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if seg.stash_home(bi, s) == home {
                        mask |= 1 << s;
                    }
                }
                visit(bi, mask);
            }
        }
        if next > PREFIX_MASK {
            if home + 1 == Self::REGULAR {
                0
            } else {
                ((home + 1) as u64) << PREFIX_BITS
            }
        } else {
            ((home as u64) << PREFIX_BITS) | next
        }
    }

    /// A roughly uniformly random occupied position for a random `rnd`;
    /// `None` if the table is empty.
    pub fn random_pos(&self, rnd: u64) -> Option<Pos> {
        if self.len == 0 {
            return None;
        }
        let nsegs = self.segs.len();
        let mut si = (rnd % nsegs as u64) as usize;
        while self.segs[si].len == 0 {
            si = if si + 1 == nsegs { 0 } else { si + 1 };
        }
        let seg = &self.segs[si];
        let r = rnd >> 20;
        let start = (r % B as u64) as usize;
        let mut bi = start;
        loop {
            let busy = seg.meta[bi].busy;
            if busy != 0 {
                let n = busy.count_ones();
                let mut k = ((r >> 8) % n as u64) as u32;
                let mut m = busy;
                while k > 0 {
                    m &= m - 1;
                    k -= 1;
                }
                return Some(Pos {
                    seg: si as u32,
                    bucket: bi as u8,
                    slot: m.trailing_zeros() as u8,
                });
            }
            bi = if bi + 1 == B { 0 } else { bi + 1 };
            debug_assert_ne!(bi, start);
        }
    }

    /// Iterate over all entries (unspecified order).
    pub fn iter(&self) -> Iter<'_, K, V, B> {
        Iter {
            table: self,
            seg: 0,
            bucket: 0,
            mask: self.segs[0].meta[0].busy,
            left: self.len,
        }
    }

    /// Keep only the entries for which `f` returns true.
    pub fn retain<F: FnMut(&K, &mut V) -> bool>(&mut self, mut f: F) {
        let mut removed = 0;
        for seg in self.segs.iter_mut() {
            for b in 0..B {
                let mut m = seg.meta[b].busy;
                while m != 0 {
                    let s = m.trailing_zeros() as usize;
                    m &= m - 1;
                    // SAFETY: s is busy.
                    let (k, v) = unsafe { seg.entry_mut(b, s) };
                    if !f(k, v) {
                        // SAFETY: s is busy.
                        drop(unsafe { seg.take_at(b, s) });
                        removed += 1;
                    }
                }
            }
        }
        self.len -= removed;
    }

    /// Approximate table statistics: (len, capacity, load factor).
    pub fn load_factor(&self) -> f64 {
        self.len as f64 / self.capacity() as f64
    }

    /// Check internal invariants (for tests); panics on violation.
    #[doc(hidden)]
    pub fn check_invariants(&self) {
        let mut total = 0usize;
        for (si, seg) in self.segs.iter().enumerate() {
            let mut n = 0u32;
            let mut stashed = vec![0u8; Self::REGULAR];
            for b in 0..B {
                let bk = &seg.meta[b];
                assert_eq!(bk.busy & !FULL, 0);
                assert_eq!(bk.probe & !bk.busy, 0);
                assert_eq!(bk.flag_a & !bk.busy, 0);
                assert_eq!(bk.flag_b & !bk.busy, 0);
                assert_eq!(bk.flag_c & !bk.busy, 0);
                assert_eq!(bk.flag_d & !bk.busy, 0);
                let mut m = bk.busy;
                while m != 0 {
                    let s = m.trailing_zeros() as usize;
                    m &= m - 1;
                    n += 1;
                    // SAFETY: s is busy.
                    let h = hash_key(unsafe { seg.entry(b, s) }.0.key_bytes());
                    assert_eq!(self.seg_index(h), si, "entry in wrong segment");
                    assert_eq!(bk.fp[s], fingerprint(h));
                    let home = home_bucket(h, Self::REGULAR);
                    assert_eq!(seg.home_of(b, s), home);
                    if b >= Self::REGULAR {
                        stashed[home] += 1;
                    } else {
                        assert!(b == home || b == next_bucket(home, Self::REGULAR));
                    }
                }
            }
            for (b, &c) in stashed.iter().enumerate() {
                assert_eq!(seg.meta[b].stashed(), c);
            }
            assert_eq!(seg.len, n);
            total += n as usize;
            // Directory range of this segment.
            let refs = self.dir.iter().filter(|&&d| d as usize == si).count();
            assert_eq!(refs, 1 << (self.global_depth - seg.local_depth));
        }
        assert_eq!(total, self.len);
        assert_eq!(self.dir.len(), 1 << self.global_depth);
    }
}

/// Iterator over `(&K, &V)`.
pub struct Iter<'a, K, V, const B: usize = DEFAULT_BUCKETS> {
    table: &'a DashTable<K, V, B>,
    seg: usize,
    bucket: usize,
    mask: u16,
    left: usize,
}

impl<'a, K, V, const B: usize> Iterator for Iter<'a, K, V, B> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        loop {
            if self.mask != 0 {
                let s = self.mask.trailing_zeros() as usize;
                self.mask &= self.mask - 1;
                self.left -= 1;
                let seg = &self.table.segs[self.seg];
                // SAFETY: mask is a subset of the bucket's busy mask and the
                // table is borrowed immutably.
                let (k, v) = unsafe { seg.entry(self.bucket, s) };
                return Some((k, v));
            }
            self.bucket += 1;
            if self.bucket == B {
                self.bucket = 0;
                self.seg += 1;
                if self.seg == self.table.segs.len() {
                    return None;
                }
            }
            self.mask = self.table.segs[self.seg].meta[self.bucket].busy;
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<K, V, const B: usize> ExactSizeIterator for Iter<'_, K, V, B> {}

impl<'a, K: TableKey, V, const B: usize> IntoIterator for &'a DashTable<K, V, B> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V, B>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<K, V, const B: usize> Drop for DashTable<K, V, B> {
    fn drop(&mut self) {
        if !std::mem::needs_drop::<(K, V)>() {
            return;
        }
        for seg in self.segs.iter_mut() {
            for (bk, slots) in seg.meta.iter_mut().zip(seg.slots.iter_mut()) {
                let mut m = bk.busy;
                bk.busy = 0;
                while m != 0 {
                    let s = m.trailing_zeros() as usize;
                    m &= m - 1;
                    // SAFETY: s was busy (initialised); busy was cleared
                    // first so it is dropped exactly once.
                    unsafe { ptr::drop_in_place(slots[s].as_mut_ptr()) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// Non-binding hint to pull a cache line into L1.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
