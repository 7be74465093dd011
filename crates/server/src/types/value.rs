//! The value stored for a key.
//!
//! The Dash slot is `(KeyStr, Value)`: 16 + 8 = 24 bytes, so `Value` must stay one 8-byte word.
//! Strings are a [`CompactStr`], a tagged word whose low 3 bits say what it holds (tags 0..=3:
//! heap/boxed/inline/int string). Tags 4..=7 (`compact::tag::FIRST_RESERVED` and up) are
//! reserved for collections: when the data-type work adds lists, hashes, sets, sorted sets and streams, `Value`
//! must become that same tagged word (a `#[repr(transparent)]` struct with an accessor returning
//! an enum of borrowed views), with collection objects behind an 8-aligned pointer tagged 4..=7
//! (e.g. 4 = list, 5 = hash, 6 = set, 7 = zset; rarer kinds such as streams behind a header in the
//! pointee). Boxing them as further enum variants here would grow the enum to 16 bytes and the
//! slot to 32. Until then this enum has a single variant and is exactly the word.

use super::compact::CompactStr;

pub enum Value {
    Str(CompactStr),
}

const _: () = assert!(std::mem::size_of::<Value>() == 8);

impl Value {
    /// Name reported by TYPE.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
        }
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding().name(),
        }
    }

    /// Approximate bytes used outside the table slot (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(s) => s.heap_size(),
        }
    }

    /// Starts loading the value's heap bytes into cache (batched-lookup prefetching).
    #[inline]
    pub fn prefetch(&self) {
        match self {
            Value::Str(s) => {
                if let Some(p) = s.heap_ptr() {
                    damselfly_dash::prefetch(p);
                }
            }
        }
    }

    #[inline]
    pub fn as_str(&self) -> Option<&CompactStr> {
        match self {
            Value::Str(s) => Some(s),
        }
    }

    #[inline]
    pub fn as_str_mut(&mut self) -> Option<&mut CompactStr> {
        match self {
            Value::Str(s) => Some(s),
        }
    }
}

impl Clone for Value {
    fn clone(&self) -> Self {
        match self {
            Value::Str(s) => Value::Str(s.clone()),
        }
    }
}
