//! Placeholder for the ZSet value type; the collections work (issue 5) replaces it with the real
//! compact and large encodings. Only what `Value` needs is here.

#[derive(Default, Clone)]
pub struct ZSet {
    len: usize,
}

impl ZSet {
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

    /// PLACEHOLDER (same signature as the real ZSet): calls `f` for ranks `start..end` (end
    /// exclusive) in score order, or from `end - 1` down when `rev`. Used by SORT.
    pub fn range(&self, start: usize, end: usize, rev: bool, f: impl FnMut(&[u8], f64)) {
        let _ = (start, end, rev, f);
    }
}
