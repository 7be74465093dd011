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

/// `rename-command` directives in effect: a name clients use (lowercase) to the original name
/// of the command it reaches, or to None for a name renamed away. Set once at start-up, only
/// when the configuration renames something (the lookups then pay one atomic load).
type Renames = StdHashMap<Vec<u8>, Option<&'static str>>;

static RENAMES: OnceLock<Renames> = OnceLock::new();

/// The command table's configuration hook (config::hooks): `rename-command` directives are
/// checked against the table as they are read.
pub const CONFIG_HOOKS: &[crate::config::hooks::Hook] = &[crate::config::hooks::Hook {
    check_lines: Some(|lines| {
        let pairs: Vec<(String, String)> = lines
            .iter()
            .map(|l| {
                let mut it = l.iter().cloned();
                (it.next().unwrap_or_default(), it.next().unwrap_or_default())
            })
            .collect();
        plan_renames(&pairs).map(|_| ())
    }),
    ..crate::config::hooks::Hook::new("rename-command")
}];

/// Applies `rename-command <old> <new>` directives in order as Redis does to its command table
/// (a later one may rename the result of an earlier one; an empty new name removes the
/// command). Err: Redis's reason for the first directive that cannot apply.
pub fn plan_renames(directives: &[(String, String)]) -> Result<Renames, String> {
    let reg = registry();
    let mut renames = Renames::new();
    let resolve = |r: &Renames, name: &[u8]| -> Option<&'static str> {
        match r.get(name) {
            Some(target) => *target,
            None => reg.lookup_original(name).map(|e| e.spec.name),
        }
    };
    for (old, new) in directives {
        let old = old.to_ascii_lowercase().into_bytes();
        let Some(target) = resolve(&renames, &old) else {
            return Err("No such command in rename-command".into());
        };
        renames.insert(old, None);
        if !new.is_empty() {
            let new = new.to_ascii_lowercase().into_bytes();
            if resolve(&renames, &new).is_some() {
                return Err("Target command name already exists".into());
            }
            renames.insert(new, Some(target));
        }
    }
    Ok(renames)
}

/// Installs the start-up's renames (see `RENAMES`); nothing when there are none.
pub fn install_renames(directives: &[(String, String)]) -> Result<(), String> {
    if directives.is_empty() {
        return Ok(());
    }
    let _ = RENAMES.set(plan_renames(directives)?);
    Ok(())
}

impl Registry {
    /// A command by the name a client sends (`rename-command` applies).
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<&Entry> {
        match RENAMES.get() {
            None => self.lookup_original(name),
            Some(r) => self.lookup_renamed(r, name),
        }
    }

    /// A command by its own name, whatever `rename-command` did: for the server's internal
    /// uses (a shutdown's SAVE, memcache's SET).
    #[inline]
    pub fn lookup_original(&self, name: &[u8]) -> Option<&Entry> {
        let mut buf = [0u8; 32];
        let key = lower(name, &mut buf)?;
        self.by_name.get(key)
    }

    #[cold]
    fn lookup_renamed(&self, r: &Renames, name: &[u8]) -> Option<&Entry> {
        match r.get(&name.to_ascii_lowercase()) {
            Some(Some(orig)) => self.by_name.get(orig.as_bytes()),
            Some(None) => None,
            None => self.lookup_original(name),
        }
    }

    /// A command by its full name: `get`, or `config|get` for a subcommand (ASCII
    /// case-insensitive, as COMMAND INFO and ACL rules name them). A command without
    /// subcommands has none to name.
    pub fn by_fullname(&self, name: &[u8]) -> Option<&Entry> {
        self.by_fullname_in(name, Registry::lookup)
    }

    /// A command or subcommand by its own full name (an entry's `static_name`), whatever
    /// `rename-command` did.
    pub fn by_original_fullname(&self, name: &[u8]) -> Option<&Entry> {
        self.by_fullname_in(name, Registry::lookup_original)
    }

    fn by_fullname_in<'a>(
        &'a self,
        name: &[u8],
        lookup: fn(&'a Registry, &[u8]) -> Option<&'a Entry>,
    ) -> Option<&'a Entry> {
        match name.iter().position(|&b| b == b'|') {
            None => lookup(self, name),
            Some(bar) => {
                let top = lookup(self, &name[..bar])?;
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

/// Every family's spec list, as the crate root installs them ([`install`]): the framework names
/// no family, so a family (or a subsystem's own commands: ACL, EVAL, SAVE, SYNC...) lives
/// with its code and is added in one place, `damselfly::install`.
static FAMILIES: OnceLock<Vec<&'static [CommandSpec]>> = OnceLock::new();

/// Installs the command table's families; the first call wins (before the table is built).
pub fn install(families: Vec<&'static [CommandSpec]>) {
    let _ = FAMILIES.set(families);
}

pub fn families() -> &'static [&'static [CommandSpec]] {
    // A unit test builds the table without `main`: the crate root installs what it has.
    #[cfg(test)]
    crate::install_for_tests();
    FAMILIES
        .get()
        .expect("the command families are installed first (damselfly::install)")
}

pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut by_name = HashMap::default();
        let mut id = 0;
        for fam in families().iter() {
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
