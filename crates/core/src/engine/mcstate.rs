//! Memcached item state that Redis values do not have: 32-bit client flags, the CAS unique,
//! and the meta protocol's stale/win marks.
//!
//! Why a side table: most keys never carry any of it (every key written over RESP, and memcache
//! items stored with flags 0 whose CAS nobody asked for), and the 24-byte main slot has no room.
//! So, like expiry, a key with state has `FLAG_MC` in its main-table slot and an entry in a
//! second Dash table of its db; other keys cost nothing and their lookups never touch it.
//! Whether an item was fetched since it was stored (`mg ... h`) is one more slot bit,
//! `FLAG_FETCHED`, so reads never create state.
//!
//! CAS values are handed out lazily: an item gets one the first time a client asks (`gets`,
//! `mg c`, `ms c`...). Any change to the value (through either protocol) drops the state, so a
//! CAS taken before the change can never match the item after it, which is all memcached's
//! `cas` promises. Client flags survive the changes memcached keeps them across (append,
//! incr, touch): the memcache executor re-applies them.

use damselfly_dash::{DashTable, FLAG_C, FLAG_D};

use damselfly_types::KeyStr;

/// Slot flag: the key has an entry in its db's memcache state table.
pub const FLAG_MC: u8 = FLAG_C;
/// Slot flag: the item was fetched over the memcache protocol since it was last written.
pub const FLAG_FETCHED: u8 = FLAG_D;

/// One item's memcache state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct McState {
    /// The client flags stored with the item.
    pub flags: u32,
    /// Meta protocol marks (`STALE`, `WIN_SENT`, `KEY_BINARY`).
    pub marks: u32,
    /// The CAS unique; 0 = none handed out since the item last changed.
    pub cas: u64,
}

impl McState {
    /// `md ... I` / `mg` invalidation: the item is stale until rewritten.
    pub const STALE: u32 = 1;
    /// A client got the `W` (win) token for this item; later ones get `Z`.
    pub const WIN_SENT: u32 = 2;
    /// Stored by `ms` with a base64 key (`b`): `mg ... k` echoes the key that way.
    pub const KEY_BINARY: u32 = 4;

    /// Nothing worth keeping (the table holds only items with some state).
    #[inline]
    pub fn is_empty(&self) -> bool {
        *self == McState::default()
    }
}

/// Key → state, for the keys whose slot has `FLAG_MC`.
pub type McTable = DashTable<KeyStr, McState, { damselfly_dash::buckets_for::<KeyStr, McState>() }>;
