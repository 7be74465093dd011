//! Placeholder for the List value type; the collections work (issue 5) replaces it with the real
//! compact and large encodings. Only what `Value` needs is here.

#[derive(Default, Clone)]
pub struct List {
    // PLACEHOLDER (set/sort branch): elements kept in a Vec so SORT ... STORE results can be
    // read back before the real List lands; the lead reconciles this at merge.
    items: Vec<Vec<u8>>,
}

/// PLACEHOLDER mirror of the real `list::Fill` (node-size policy from `list-max-listpack-size`),
/// used by SORT ... STORE (`commands/sort.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill(i64);

impl Fill {
    pub fn new(v: i64) -> Fill {
        Fill(v.clamp(-5, 1 << 15))
    }
}

impl List {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        "quicklist"
    }

    /// Heap bytes owned beyond the object itself (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        0
    }

    /// PLACEHOLDER (same signature as the real List): builds a list from elements. Used by SORT.
    pub fn from_iter<'a>(items: impl IntoIterator<Item = &'a [u8]>, _fill: Fill) -> List {
        List {
            items: items.into_iter().map(|v| v.to_vec()).collect(),
        }
    }

    /// PLACEHOLDER (same signature as the real List): all elements, head to tail. Used by SORT.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.items.clone()
    }
}
