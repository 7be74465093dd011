//! Placeholder for the Hash value type; the collections work (issue 5) replaces it with the real
//! compact and large encodings. Only what `Value` needs is here.

#[derive(Default, Clone)]
pub struct Hash {
    len: usize,
}

impl Hash {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        "listpack"
    }

    /// Heap bytes owned beyond the object itself (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        0
    }

    /// PLACEHOLDER (same signature as the real Hash): a field's value. Used by SORT's `->`
    /// patterns.
    pub fn get(&self, field: &[u8]) -> Option<HVal<'_>> {
        let _ = field;
        None
    }
}

/// PLACEHOLDER mirror of the real `hash::HVal` (a borrowed field value).
#[derive(Clone, Copy)]
pub enum HVal<'a> {
    Bytes(&'a [u8]),
}

impl HVal<'_> {
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            HVal::Bytes(b) => b.to_vec(),
        }
    }
}
