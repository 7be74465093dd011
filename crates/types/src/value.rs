//! The value stored for a key: one tagged 8-byte word.
//!
//! The Dash slot is `(KeyStr, Value)`: 16 + 8 = 24 bytes, so `Value` must stay one word (an enum
//! of boxes would be 16 bytes and the slot 32). The low 3 bits say what the word holds:
//!
//! | tag | meaning |
//! |---|---|
//! | `0..=3` | a [`CompactStr`] (heap/boxed/inline/int string): the word *is* the string |
//! | `4` | `Box<List>` |
//! | `5` | `Box<Hash>` |
//! | `6` | `Box<Set>` |
//! | `7` | `Box<ZSet>` (bit 3 clear) or `Box<Stream>` (bit 3 set: the word is pointer + 15) |
//!
//! Collection objects are 8-aligned heap boxes, so their pointer leaves the tag bits free. Sorted
//! sets and streams are 16-aligned, so tag 7 has a fourth bit to tell them apart; a further
//! kind (JSON...) would do the same with another 16-aligned pointee.
//!
//! Access goes through [`Value::view`] / [`Value::view_mut`], which return borrowed enums, so a
//! family's command matches on its own kind and answers WRONGTYPE for anything else.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use super::compact::{tag, CompactStr};
use super::hash::Hash;
use super::list::List;
use super::set::Set;
use super::stream::Stream;
use super::zset::ZSet;

/// See the module docs.
#[repr(transparent)]
pub struct Value {
    w: NonNull<u8>,
}

// SAFETY: a Value uniquely owns its string or collection, like an enum of Boxes would.
unsafe impl Send for Value {}
unsafe impl Sync for Value {}

const _: () = assert!(std::mem::size_of::<Value>() == 8);
const _: () = assert!(std::mem::size_of::<Option<Value>>() == 8);
const _: () = assert!(std::mem::align_of::<List>() >= 8);
const _: () = assert!(std::mem::align_of::<Hash>() >= 8);
const _: () = assert!(std::mem::align_of::<Set>() >= 8);
const _: () = assert!(std::mem::align_of::<ZSet>() >= 16);
const _: () = assert!(std::mem::align_of::<Stream>() >= 16);

const TAG_LIST: usize = 4;
const TAG_HASH: usize = 5;
const TAG_SET: usize = 6;
const TAG_ZSET: usize = 7;
/// Tag 7 with the fourth bit set.
const TAG_STREAM: usize = 15;

/// Borrowed view of a value.
pub enum ValueRef<'a> {
    Str(&'a CompactStr),
    List(&'a List),
    Hash(&'a Hash),
    Set(&'a Set),
    ZSet(&'a ZSet),
    Stream(&'a Stream),
}

/// Mutable view of a value.
pub enum ValueMut<'a> {
    Str(&'a mut CompactStr),
    List(&'a mut List),
    Hash(&'a mut Hash),
    Set(&'a mut Set),
    ZSet(&'a mut ZSet),
    Stream(&'a mut Stream),
}

/// Owned value taken apart (for moving a collection out of the table).
pub enum Owned {
    Str(CompactStr),
    List(Box<List>),
    Hash(Box<Hash>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

/// The kind of a value (TYPE, SCAN TYPE).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Str,
    List,
    Hash,
    Set,
    ZSet,
    Stream,
}

impl Kind {
    /// Name reported by TYPE.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Str => "string",
            Kind::List => "list",
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    /// Parses a TYPE name (SCAN ... TYPE t), case-insensitively.
    pub fn from_name(n: &[u8]) -> Option<Kind> {
        let n = n.to_ascii_lowercase();
        Some(match &n[..] {
            b"string" => Kind::Str,
            b"list" => Kind::List,
            b"hash" => Kind::Hash,
            b"set" => Kind::Set,
            b"zset" => Kind::ZSet,
            b"stream" => Kind::Stream,
            _ => return None,
        })
    }
}

#[inline]
fn boxed<T>(b: Box<T>, t: usize) -> Value {
    let p = Box::into_raw(b) as *mut u8;
    // Pointer arithmetic keeps provenance; p is 8-aligned and non-null, so p + t is non-null.
    Value {
        w: unsafe { NonNull::new_unchecked(p.wrapping_add(t)) },
    }
}

impl Value {
    #[inline]
    pub fn str(s: CompactStr) -> Value {
        let s = ManuallyDrop::new(s);
        // SAFETY: CompactStr is a repr(transparent) NonNull<u8> with tags 0..=3.
        Value {
            w: unsafe { std::mem::transmute_copy::<CompactStr, NonNull<u8>>(&s) },
        }
    }

    pub fn list(l: List) -> Value {
        boxed(Box::new(l), TAG_LIST)
    }

    pub fn hash(h: Hash) -> Value {
        boxed(Box::new(h), TAG_HASH)
    }

    pub fn set(s: Set) -> Value {
        boxed(Box::new(s), TAG_SET)
    }

    pub fn zset(z: ZSet) -> Value {
        boxed(Box::new(z), TAG_ZSET)
    }

    pub fn stream(s: Stream) -> Value {
        boxed(Box::new(s), TAG_STREAM)
    }

    /// The low 3 bits, and for tag 7 the fourth (sorted set or stream).
    #[inline]
    fn tag(&self) -> usize {
        let w = self.w.as_ptr() as usize;
        let t = w & tag::MASK;
        if t == TAG_ZSET {
            w & 15
        } else {
            t
        }
    }

    /// The pointee of a collection word (tags 4..=7 and 15), provenance kept.
    #[inline]
    fn obj<T>(&self) -> *mut T {
        self.w.as_ptr().wrapping_sub(self.tag()) as *mut T
    }

    #[inline]
    pub fn kind(&self) -> Kind {
        match self.tag() {
            TAG_LIST => Kind::List,
            TAG_HASH => Kind::Hash,
            TAG_SET => Kind::Set,
            TAG_ZSET => Kind::ZSet,
            TAG_STREAM => Kind::Stream,
            _ => Kind::Str,
        }
    }

    #[inline]
    pub fn view(&self) -> ValueRef<'_> {
        // SAFETY: the tag says what the word holds; boxes are live while self is.
        unsafe {
            match self.tag() {
                TAG_LIST => ValueRef::List(&*self.obj::<List>()),
                TAG_HASH => ValueRef::Hash(&*self.obj::<Hash>()),
                TAG_SET => ValueRef::Set(&*self.obj::<Set>()),
                TAG_ZSET => ValueRef::ZSet(&*self.obj::<ZSet>()),
                TAG_STREAM => ValueRef::Stream(&*self.obj::<Stream>()),
                _ => ValueRef::Str(&*(self as *const Value as *const CompactStr)),
            }
        }
    }

    #[inline]
    pub fn view_mut(&mut self) -> ValueMut<'_> {
        // SAFETY: as in `view`, with unique access through &mut self.
        unsafe {
            match self.tag() {
                TAG_LIST => ValueMut::List(&mut *self.obj::<List>()),
                TAG_HASH => ValueMut::Hash(&mut *self.obj::<Hash>()),
                TAG_SET => ValueMut::Set(&mut *self.obj::<Set>()),
                TAG_ZSET => ValueMut::ZSet(&mut *self.obj::<ZSet>()),
                TAG_STREAM => ValueMut::Stream(&mut *self.obj::<Stream>()),
                _ => ValueMut::Str(&mut *(self as *mut Value as *mut CompactStr)),
            }
        }
    }

    /// Takes the value apart without copying.
    pub fn into_owned(self) -> Owned {
        let me = ManuallyDrop::new(self);
        // SAFETY: ownership moves out of `me`, which is never dropped.
        unsafe {
            match me.tag() {
                TAG_LIST => Owned::List(Box::from_raw(me.obj::<List>())),
                TAG_HASH => Owned::Hash(Box::from_raw(me.obj::<Hash>())),
                TAG_SET => Owned::Set(Box::from_raw(me.obj::<Set>())),
                TAG_ZSET => Owned::ZSet(Box::from_raw(me.obj::<ZSet>())),
                TAG_STREAM => Owned::Stream(Box::from_raw(me.obj::<Stream>())),
                _ => Owned::Str(std::mem::transmute_copy::<NonNull<u8>, CompactStr>(&me.w)),
            }
        }
    }

    /// Name reported by TYPE.
    pub fn type_name(&self) -> &'static str {
        self.kind().name()
    }

    /// Name reported by OBJECT ENCODING.
    pub fn encoding_name(&self) -> &'static str {
        match self.view() {
            ValueRef::Str(s) => s.encoding().name(),
            ValueRef::List(l) => l.encoding_name(),
            ValueRef::Hash(h) => h.encoding_name(),
            ValueRef::Set(s) => s.encoding_name(),
            ValueRef::ZSet(z) => z.encoding_name(),
            ValueRef::Stream(_) => "stream",
        }
    }

    /// Approximate bytes used outside the table slot (MEMORY USAGE).
    pub fn heap_size(&self) -> usize {
        match self.view() {
            ValueRef::Str(s) => s.heap_size(),
            ValueRef::List(l) => std::mem::size_of::<List>() + l.heap_size(),
            ValueRef::Hash(h) => std::mem::size_of::<Hash>() + h.heap_size(),
            ValueRef::Set(s) => std::mem::size_of::<Set>() + s.heap_size(),
            ValueRef::ZSet(z) => std::mem::size_of::<ZSet>() + z.heap_size(),
            ValueRef::Stream(x) => std::mem::size_of::<Stream>() + x.heap_size(),
        }
    }

    /// Starts loading the value's heap bytes into cache (batched-lookup prefetching).
    #[inline]
    pub fn prefetch(&self) {
        match self.tag() {
            TAG_LIST | TAG_HASH | TAG_SET | TAG_ZSET | TAG_STREAM => {
                damselfly_dash::prefetch(self.obj::<u8>() as *const u8)
            }
            _ => {
                if let ValueRef::Str(s) = self.view() {
                    if let Some(p) = s.heap_ptr() {
                        damselfly_dash::prefetch(p);
                    }
                }
            }
        }
    }

    #[inline]
    pub fn as_str(&self) -> Option<&CompactStr> {
        match self.view() {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    #[inline]
    pub fn as_str_mut(&mut self) -> Option<&mut CompactStr> {
        match self.view_mut() {
            ValueMut::Str(s) => Some(s),
            _ => None,
        }
    }

    #[inline]
    pub fn is_str(&self) -> bool {
        self.tag() < TAG_LIST
    }

    pub fn as_list(&self) -> Option<&List> {
        match self.view() {
            ValueRef::List(l) => Some(l),
            _ => None,
        }
    }
    pub fn as_list_mut(&mut self) -> Option<&mut List> {
        match self.view_mut() {
            ValueMut::List(l) => Some(l),
            _ => None,
        }
    }
    pub fn as_hash(&self) -> Option<&Hash> {
        match self.view() {
            ValueRef::Hash(h) => Some(h),
            _ => None,
        }
    }
    pub fn as_hash_mut(&mut self) -> Option<&mut Hash> {
        match self.view_mut() {
            ValueMut::Hash(h) => Some(h),
            _ => None,
        }
    }
    pub fn as_set(&self) -> Option<&Set> {
        match self.view() {
            ValueRef::Set(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_set_mut(&mut self) -> Option<&mut Set> {
        match self.view_mut() {
            ValueMut::Set(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_zset(&self) -> Option<&ZSet> {
        match self.view() {
            ValueRef::ZSet(z) => Some(z),
            _ => None,
        }
    }
    pub fn as_zset_mut(&mut self) -> Option<&mut ZSet> {
        match self.view_mut() {
            ValueMut::ZSet(z) => Some(z),
            _ => None,
        }
    }
    pub fn as_stream(&self) -> Option<&Stream> {
        match self.view() {
            ValueRef::Stream(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_stream_mut(&mut self) -> Option<&mut Stream> {
        match self.view_mut() {
            ValueMut::Stream(s) => Some(s),
            _ => None,
        }
    }
}

impl From<CompactStr> for Value {
    #[inline]
    fn from(s: CompactStr) -> Value {
        Value::str(s)
    }
}

impl Drop for Value {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the word; rebuilding the owner once and dropping it frees it once.
        let me = unsafe { std::ptr::read(self) };
        drop(me.into_owned());
    }
}

impl Clone for Value {
    fn clone(&self) -> Self {
        match self.view() {
            ValueRef::Str(s) => Value::str(s.clone()),
            ValueRef::List(l) => Value::list(l.clone()),
            ValueRef::Hash(h) => Value::hash(h.clone()),
            ValueRef::Set(s) => Value::set(s.clone()),
            ValueRef::ZSet(z) => Value::zset(z.clone()),
            ValueRef::Stream(x) => Value::stream(x.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_through_the_word() {
        for v in [
            CompactStr::from_value(b"12345"),
            CompactStr::from_bytes(b"abc"),
            CompactStr::from_bytes(&[7u8; 100]),
            CompactStr::from_bytes(&vec![1u8; 40_000]),
            CompactStr::from_int(i64::MIN),
        ] {
            let copy = v.to_vec();
            let val = Value::str(v);
            assert_eq!(val.kind(), Kind::Str);
            assert_eq!(val.as_str().unwrap().to_vec(), copy);
            let c = val.clone();
            assert_eq!(c.as_str().unwrap().to_vec(), copy);
            match val.into_owned() {
                Owned::Str(s) => assert_eq!(s.to_vec(), copy),
                _ => panic!("not a string"),
            }
        }
    }

    #[test]
    fn collections_keep_their_kind() {
        let vals = [
            Value::list(List::default()),
            Value::hash(Hash::default()),
            Value::set(Set::default()),
            Value::zset(ZSet::default()),
            Value::stream(Stream::default()),
        ];
        let kinds: Vec<Kind> = vals.iter().map(|v| v.kind()).collect();
        assert_eq!(
            kinds,
            [Kind::List, Kind::Hash, Kind::Set, Kind::ZSet, Kind::Stream]
        );
        for v in &vals {
            assert!(v.as_str().is_none());
            assert_eq!(v.clone().kind(), v.kind());
        }
        assert_eq!(Kind::from_name(b"ZSET"), Some(Kind::ZSet));
    }
}
