//! Placeholder for the Set value type; the collections work (issue 5) replaces it with the real
//! compact and large encodings. Only what `Value` needs is here.

#[derive(Default, Clone)]
pub struct Set {
    len: usize,
}

impl Set {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        "intset"
    }

    /// Heap bytes owned beyond the object itself (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        0
    }
}
