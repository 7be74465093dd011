//! Compact hash encoding: one exact-size byte buffer of `field value field value ...`, each
//! string written as a LEB128 length followed by its bytes (one header byte for strings under
//! 128 bytes, so a pair of short strings costs two bytes of overhead; Redis's listpack spends
//! two bytes per string). Pairs keep insertion order and an update rewrites the value in place,
//! like Redis's listpack, so HGETALL/HKEYS/HSCAN order matches Redis for small hashes.
//!
//! The buffer is a `Box<[u8]>` of exactly the used length: an insert turns it into a `Vec`,
//! grows it with `reserve_exact` (a `realloc` that jemalloc usually does in place) and turns it
//! back, so there is never spare capacity.

/// Reads the length header at `pos`: (length, header size).
#[inline]
fn read_len(buf: &[u8], pos: usize) -> (usize, usize) {
    let b0 = buf[pos];
    if b0 < 0x80 {
        return (b0 as usize, 1);
    }
    let mut v = (b0 & 0x7f) as usize;
    let mut shift = 7;
    let mut i = pos + 1;
    loop {
        let b = buf[i];
        v |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b < 0x80 {
            return (v, i - pos);
        }
        shift += 7;
    }
}

#[inline]
fn len_size(mut len: usize) -> usize {
    let mut n = 1;
    while len >= 0x80 {
        len >>= 7;
        n += 1;
    }
    n
}

#[inline]
fn write_len(out: &mut Vec<u8>, mut len: usize) {
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
}

/// Where a pair lives in the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Loc {
    /// Start of the field's header.
    pub start: usize,
    /// Start of the value's header.
    pub val: usize,
    /// Value bytes.
    pub val_data: usize,
    pub val_len: usize,
    /// One past the value's last byte.
    pub end: usize,
}

#[derive(Clone, Default)]
pub struct Lp {
    buf: Box<[u8]>,
}

impl Lp {
    /// Bytes used (MEMORY USAGE).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            pos: 0,
        }
    }

    /// Locates `field`.
    pub fn find(&self, field: &[u8]) -> Option<Loc> {
        let buf = &self.buf[..];
        let mut pos = 0;
        while pos < buf.len() {
            let (flen, fh) = read_len(buf, pos);
            let fdata = pos + fh;
            let val = fdata + flen;
            let (vlen, vh) = read_len(buf, val);
            let end = val + vh + vlen;
            if flen == field.len() && &buf[fdata..val] == field {
                return Some(Loc {
                    start: pos,
                    val,
                    val_data: val + vh,
                    val_len: vlen,
                    end,
                });
            }
            pos = end;
        }
        None
    }

    #[inline]
    pub fn value_at(&self, loc: &Loc) -> &[u8] {
        &self.buf[loc.val_data..loc.val_data + loc.val_len]
    }

    #[inline]
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|l| self.value_at(&l))
    }

    fn edit(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let mut v = std::mem::take(&mut self.buf).into_vec();
        f(&mut v);
        self.buf = v.into_boxed_slice();
    }

    /// Appends a pair (the caller knows `field` is absent).
    pub fn push(&mut self, field: &[u8], value: &[u8]) {
        let add = len_size(field.len()) + field.len() + len_size(value.len()) + value.len();
        self.edit(|v| {
            v.reserve_exact(add);
            write_len(v, field.len());
            v.extend_from_slice(field);
            write_len(v, value.len());
            v.extend_from_slice(value);
        });
    }

    /// Replaces the value of the pair at `loc`, keeping its position.
    pub fn set_value(&mut self, loc: &Loc, value: &[u8]) {
        let old = loc.end - loc.val;
        let new = len_size(value.len()) + value.len();
        if old == new {
            let h = len_size(value.len());
            self.buf[loc.val + h..loc.end].copy_from_slice(value);
            return;
        }
        let mut repl = Vec::with_capacity(new);
        write_len(&mut repl, value.len());
        repl.extend_from_slice(value);
        self.edit(|v| {
            if new > old {
                v.reserve_exact(new - old);
            }
            v.splice(loc.val..loc.end, repl);
            if new < old {
                v.shrink_to_fit();
            }
        });
    }

    /// Removes the pair at `loc`.
    pub fn remove(&mut self, loc: &Loc) {
        self.edit(|v| {
            v.drain(loc.start..loc.end);
            v.shrink_to_fit();
        });
    }
}

pub struct Iter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let (flen, fh) = read_len(self.buf, self.pos);
        let f0 = self.pos + fh;
        let (vlen, vh) = read_len(self.buf, f0 + flen);
        let v0 = f0 + flen + vh;
        self.pos = v0 + vlen;
        Some((&self.buf[f0..f0 + flen], &self.buf[v0..v0 + vlen]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_find_update_remove() {
        let mut lp = Lp::default();
        lp.push(b"a", b"1");
        lp.push(b"bb", &[7u8; 200]);
        lp.push(b"", b"");
        assert_eq!(lp.get(b"a"), Some(&b"1"[..]));
        assert_eq!(lp.get(b"bb").map(|v| v.len()), Some(200));
        assert_eq!(lp.get(b""), Some(&b""[..]));
        assert_eq!(lp.get(b"c"), None);
        let l = lp.find(b"a").unwrap();
        lp.set_value(&l, &[1u8; 300]);
        let l = lp.find(b"bb").unwrap();
        lp.set_value(&l, b"x");
        let l = lp.find(b"").unwrap();
        lp.set_value(&l, b"y");
        let got: Vec<(Vec<u8>, Vec<u8>)> =
            lp.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), vec![1u8; 300]),
                (b"bb".to_vec(), b"x".to_vec()),
                (b"".to_vec(), b"y".to_vec())
            ]
        );
        let l = lp.find(b"bb").unwrap();
        lp.remove(&l);
        assert_eq!(lp.iter().count(), 2);
        assert_eq!(lp.bytes(), 1 + 1 + 2 + 300 + 1 + 1 + 1);
    }

    #[test]
    fn long_lengths_round_trip() {
        for n in [0usize, 127, 128, 16383, 16384, 70000] {
            let mut v = Vec::new();
            write_len(&mut v, n);
            assert_eq!(v.len(), len_size(n));
            assert_eq!(read_len(&v, 0), (n, v.len()));
        }
    }
}
