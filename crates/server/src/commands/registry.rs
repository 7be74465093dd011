//! The command lookup table, built once from every family's spec list.

use std::collections::HashMap as StdHashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// FNV-1a: command names are a few bytes, where SipHash's setup cost dominates a lookup.
#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<Fnv>>;

use super::CommandSpec;

pub struct Entry {
    pub spec: &'static CommandSpec,
    /// Dense id used to index per-thread command statistics.
    pub id: usize,
    /// "get", or "config|get" for a subcommand.
    pub fullname: String,
    /// Same as `fullname`, leaked once at startup so connections can hold it as `&'static str`.
    pub static_name: &'static str,
    pub subs: HashMap<Vec<u8>, Entry>,
}

impl Entry {
    pub fn sub(&self, name: &[u8]) -> Option<&Entry> {
        let mut buf = [0u8; 32];
        let key = lower(name, &mut buf)?;
        self.subs.get(key)
    }
}

pub struct Registry {
    pub by_name: HashMap<Vec<u8>, Entry>,
    pub count: usize,
}

fn lower<'a>(name: &[u8], buf: &'a mut [u8; 32]) -> Option<&'a [u8]> {
    if name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    Some(&buf[..name.len()])
}

impl Registry {
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<&Entry> {
        let mut buf = [0u8; 32];
        let key = lower(name, &mut buf)?;
        self.by_name.get(key)
    }

    /// A command by its full name: `get`, or `config|get` for a subcommand (ASCII
    /// case-insensitive, as COMMAND INFO and ACL rules name them). A command without
    /// subcommands has none to name.
    pub fn by_fullname(&self, name: &[u8]) -> Option<&Entry> {
        match name.iter().position(|&b| b == b'|') {
            None => self.lookup(name),
            Some(bar) => {
                let top = self.lookup(&name[..bar])?;
                if top.subs.is_empty() {
                    return None;
                }
                top.sub(&name[bar + 1..])
            }
        }
    }

    /// Every top-level entry, sorted by name.
    pub fn all(&self) -> Vec<&Entry> {
        let mut v: Vec<&Entry> = self.by_name.values().collect();
        v.sort_by(|a, b| a.fullname.cmp(&b.fullname));
        v
    }

    /// Entry by dense id (for statistics output).
    pub fn by_id(&self) -> Vec<&Entry> {
        let mut out: Vec<Option<&Entry>> = vec![None; self.count];
        for e in self.by_name.values() {
            out[e.id] = Some(e);
            for s in e.subs.values() {
                out[s.id] = Some(s);
            }
        }
        out.into_iter().flatten().collect()
    }
}

pub fn families() -> Vec<&'static [CommandSpec]> {
    #[allow(unused_mut)]
    let mut v: Vec<&'static [CommandSpec]> = vec![
        super::string::COMMANDS,
        super::bitmap::COMMANDS,
        super::keys::COMMANDS,
        super::connection::COMMANDS,
        super::acl::COMMANDS,
        super::admin::COMMANDS,
        super::multi::COMMANDS,
        super::persistence::COMMANDS,
        super::migrate::COMMANDS,
        super::replication::COMMANDS,
        super::scripting::COMMANDS,
        super::list::COMMANDS,
        super::hash::COMMANDS,
        super::set::COMMANDS,
        super::zset::COMMANDS,
        super::geo::COMMANDS,
        super::hll::COMMANDS,
        super::stream::COMMANDS,
        super::sort::COMMANDS,
        super::pubsub::COMMANDS,
    ];
    // Test-only commands that panic on purpose (never in a release build's table).
    #[cfg(any(debug_assertions, feature = "fault-injection"))]
    v.push(super::fault::COMMANDS);
    v
}

pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut by_name = HashMap::default();
        let mut id = 0;
        for fam in families() {
            for spec in fam.iter() {
                let mut subs = HashMap::default();
                for sub in spec.subcommands {
                    let fullname = format!("{}|{}", spec.name, sub.name);
                    let static_name: &'static str = Box::leak(fullname.clone().into_boxed_str());
                    id += 1;
                    subs.insert(
                        sub.name.as_bytes().to_vec(),
                        Entry {
                            spec: sub,
                            id,
                            fullname,
                            static_name,
                            subs: HashMap::default(),
                        },
                    );
                }
                id += 1;
                let prev = by_name.insert(
                    spec.name.as_bytes().to_vec(),
                    Entry {
                        spec,
                        id,
                        fullname: spec.name.to_string(),
                        static_name: spec.name,
                        subs,
                    },
                );
                debug_assert!(prev.is_none(), "duplicate command {}", spec.name);
            }
        }
        Registry {
            by_name,
            count: id + 1,
        }
    })
}
