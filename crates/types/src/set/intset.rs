//! Sorted packed integers with the smallest width that fits every member (2, 4 or 8 bytes), like
//! Redis's intset. The buffer is exact-size: byte 0 holds the width, then `len` little-endian
//! integers. Width only ever grows (Redis never downgrades an intset either).

/// See the module docs.
#[derive(Clone)]
pub struct IntSet {
    data: Box<[u8]>,
}

/// Smallest width holding `v`.
#[inline]
fn width_for(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

#[inline]
fn read(b: &[u8], w: usize) -> i64 {
    match w {
        2 => i16::from_le_bytes([b[0], b[1]]) as i64,
        4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        _ => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[..8]);
            i64::from_le_bytes(a)
        }
    }
}

#[inline]
fn write(b: &mut [u8], w: usize, v: i64) {
    b[..w].copy_from_slice(&v.to_le_bytes()[..w]);
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet::new()
    }
}

impl IntSet {
    pub fn new() -> IntSet {
        IntSet {
            data: Box::new([2u8]),
        }
    }

    #[inline]
    fn width(&self) -> usize {
        self.data[0] as usize
    }

    #[inline]
    pub fn len(&self) -> usize {
        (self.data.len() - 1) / self.width()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.len() == 1
    }

    /// Bytes allocated for the buffer.
    pub fn heap_size(&self) -> usize {
        self.data.len()
    }

    /// The member at index `i` (ascending order).
    #[inline]
    pub fn get(&self, i: usize) -> i64 {
        let w = self.width();
        read(&self.data[1 + i * w..], w)
    }

    /// Binary search: Ok(index) when present, Err(insertion point) otherwise.
    pub fn search(&self, v: i64) -> Result<usize, usize> {
        let w = self.width();
        if width_for(v) > w {
            // Out of the current width: below or above every member.
            return Err(if v < 0 { 0 } else { self.len() });
        }
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let m = self.get(mid);
            if m == v {
                return Ok(mid);
            }
            if m < v {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Err(lo)
    }

    #[inline]
    pub fn contains(&self, v: i64) -> bool {
        self.search(v).is_ok()
    }

    /// Adds `v`; false when already present.
    pub fn insert(&mut self, v: i64) -> bool {
        let w = self.width();
        let need = width_for(v);
        if need > w {
            self.upgrade_and_add(v, need);
            return true;
        }
        let pos = match self.search(v) {
            Ok(_) => return false,
            Err(p) => p,
        };
        let mut buf = std::mem::take(&mut self.data).into_vec();
        buf.reserve_exact(w);
        let at = 1 + pos * w;
        let old_len = buf.len();
        buf.resize(old_len + w, 0);
        buf.copy_within(at..old_len, at + w);
        write(&mut buf[at..], w, v);
        self.data = buf.into_boxed_slice();
        true
    }

    /// Re-encodes every member at `nw` bytes and adds `v`, which lies outside the old width's
    /// range and therefore goes first (negative) or last.
    fn upgrade_and_add(&mut self, v: i64, nw: usize) {
        let n = self.len();
        let mut buf = vec![0u8; 1 + (n + 1) * nw];
        buf[0] = nw as u8;
        let off = if v < 0 { 1 } else { 0 };
        for i in 0..n {
            write(&mut buf[1 + (i + off) * nw..], nw, self.get(i));
        }
        let vpos = if v < 0 { 0 } else { n };
        write(&mut buf[1 + vpos * nw..], nw, v);
        self.data = buf.into_boxed_slice();
    }

    /// Removes `v`; false when absent.
    pub fn remove(&mut self, v: i64) -> bool {
        let Ok(pos) = self.search(v) else {
            return false;
        };
        self.remove_at(pos);
        true
    }

    pub fn remove_at(&mut self, pos: usize) {
        let w = self.width();
        let mut buf = std::mem::take(&mut self.data).into_vec();
        let at = 1 + pos * w;
        buf.copy_within(at + w.., at);
        buf.truncate(buf.len() - w);
        self.data = buf.into_boxed_slice();
    }

    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).map(move |i| self.get(i))
    }

    /// Encoded width in bytes (tests).
    #[cfg(test)]
    pub fn encoded_width(&self) -> usize {
        self.width()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_upgrade_and_order_holds() {
        let mut s = IntSet::new();
        assert!(s.insert(5));
        assert!(s.insert(-3));
        assert!(!s.insert(5));
        assert_eq!(s.encoded_width(), 2);
        assert!(s.insert(70_000));
        assert_eq!(s.encoded_width(), 4);
        assert!(s.insert(i64::MIN));
        assert_eq!(s.encoded_width(), 8);
        assert!(s.insert(i64::MAX));
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![i64::MIN, -3, 5, 70_000, i64::MAX]
        );
        assert!(s.remove(5));
        assert!(!s.remove(5));
        assert!(s.contains(-3) && !s.contains(4) && !s.contains(1 << 40));
        assert_eq!(s.len(), 4);
        assert_eq!(s.encoded_width(), 8);
    }
}
