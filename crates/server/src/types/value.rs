//! The value stored for a key. Strings are a `CompactStr`; collection types (added by the
//! data-types work) are boxed so the enum stays 16 bytes (the tag byte of `CompactStr` leaves a
//! niche for the other variants).

use super::compact::CompactStr;

pub enum Value {
    Str(CompactStr),
}

const _: () = assert!(std::mem::size_of::<Value>() == 16);

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
