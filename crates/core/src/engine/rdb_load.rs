//! Reading a snapshot file into per-shard batches.
//!
//! The whole file is checked before anything is handed to a shard: the CRC64 trailer first (a
//! file truncated or altered anywhere fails here, with nothing loaded), then every entry is
//! parsed and rebuilt. Only a file that parsed completely becomes a dataset, so a bad file is
//! never served half-loaded: start-up exits with the file, offset and what was expected.

use std::path::Path;

use damselfly_types::key::KeyStr;
use damselfly_types::rdb::object::{read_object, EncLimits};
use damselfly_types::rdb::verify_trailer;
use damselfly_types::rdb::wire::{opcode, RdbError, RdbErrorKind, Reader};
use damselfly_types::value::Value;

/// Newest RDB version we read: Redis 7.4's (its field-TTL hashes are the only addition we use;
/// a newer file's other additions are refused by type).
pub const MAX_READ_VERSION: u32 = 12;

/// One key for one shard.
pub struct Entry {
    pub db: usize,
    pub key: KeyStr,
    pub value: Value,
    pub expire_at: Option<u64>,
    /// The earliest field deadline of a hash with field TTLs.
    pub field_deadline: Option<u64>,
    /// A memcache item's client flags (the `mc-flags` AUX field before it).
    pub mc_flags: u32,
}

/// A parsed file: its keys by shard, and what INFO reports about the load.
pub struct Dataset {
    pub shards: Vec<Vec<Entry>>,
    /// Function libraries' code (FUNCTION2 records), for the scripting layer to load.
    pub functions: Vec<Vec<u8>>,
    pub keys_loaded: u64,
    pub keys_expired: u64,
    /// The keys skipped as expired (database, name): a primary that continues its replication
    /// stream after the load sends their DELs (Redis's master does).
    pub expired: Vec<(usize, Vec<u8>)>,
    /// The `repl-stream-db` aux field: the database a replication stream that follows this
    /// snapshot is in (a replica's snapshot for its own replica: the stream it forwards does
    /// not start with a SELECT).
    pub repl_stream_db: Option<usize>,
    /// The `repl-id` and `repl-offset` aux fields (a replica's snapshot): where in its
    /// primary's history the data stands.
    pub repl_position: Option<(String, u64)>,
}

/// Why a file could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    Io(std::io::Error),
    Format(RdbError),
    /// `SELECTDB n` beyond the configured databases.
    TooManyDbs {
        db: u64,
        dbnum: usize,
    },
    DuplicateKey {
        db: usize,
        key: Vec<u8>,
    },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Io(e) => write!(f, "{e}"),
            LoadError::Format(e) => write!(f, "{e}"),
            LoadError::TooManyDbs { db, dbnum } => write!(
                f,
                "FATAL: Data file was created with a Redis server configured to handle more than \
                 {dbnum} databases (it selects db {db}). Exiting"
            ),
            LoadError::DuplicateKey { db, key } => write!(
                f,
                "RDB has duplicated key '{}' in DB {db}",
                String::from_utf8_lossy(key)
            ),
        }
    }
}

impl From<RdbError> for LoadError {
    fn from(e: RdbError) -> Self {
        LoadError::Format(e)
    }
}

/// Reads the file at `path` (None: no such file, which is a fresh start, not an error).
pub fn load_path(
    path: &Path,
    shards: usize,
    dbnum: usize,
    now: u64,
    lim: &EncLimits,
) -> Result<Option<Dataset>, LoadError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LoadError::Io(e)),
    };
    parse(&bytes, shards, dbnum, now, lim).map(Some)
}

/// [`load_path`] with `key-load-delay` (a Redis debugging knob the test suite uses to make a
/// load slow: microseconds per key, negative nanoseconds).
pub fn load_path_slowly(
    path: &Path,
    shards: usize,
    dbnum: usize,
    now: u64,
    lim: &EncLimits,
    key_delay: i64,
) -> Result<Option<Dataset>, LoadError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LoadError::Io(e)),
    };
    parse_inner(&bytes, shards, dbnum, now, lim, key_delay).map(Some)
}

/// Parses a whole file image. Keys whose deadline is at or before `now` are dropped (counted in
/// `keys_expired`), as a Redis master does.
pub fn parse(
    file: &[u8],
    shards: usize,
    dbnum: usize,
    now: u64,
    lim: &EncLimits,
) -> Result<Dataset, LoadError> {
    parse_inner(file, shards, dbnum, now, lim, 0)
}

fn parse_inner(
    file: &[u8],
    shards: usize,
    dbnum: usize,
    now: u64,
    lim: &EncLimits,
    key_delay: i64,
) -> Result<Dataset, LoadError> {
    let mut r = Reader::new(file);
    let version = r.read_header(MAX_READ_VERSION)?;
    if version >= 5 {
        verify_trailer(file)?;
    }
    let mut out = Dataset {
        shards: (0..shards.max(1)).map(|_| Vec::new()).collect(),
        keys_loaded: 0,
        keys_expired: 0,
        expired: Vec::new(),
        functions: Vec::new(),
        repl_stream_db: None,
        repl_position: None,
    };
    let mut db = 0usize;
    let mut expire_at: Option<u64> = None;
    // Client flags of the memcache item that comes next (snapshot.rs: MC_FLAGS_AUX).
    let mut mc_flags: u32 = 0;
    loop {
        let t = r.read_u8()?;
        match t {
            opcode::EOF => {
                if version >= 5 {
                    r.read_checksum()?;
                }
                if !r.is_at_end() {
                    return Err(r
                        .error(RdbErrorKind::Other("data after the end of the file"))
                        .into());
                }
                return Ok(out);
            }
            opcode::SELECTDB => {
                let n = r.read_plain_len()?;
                if n >= dbnum as u64 {
                    return Err(LoadError::TooManyDbs { db: n, dbnum });
                }
                db = n as usize;
            }
            opcode::RESIZEDB => {
                r.read_plain_len()?;
                r.read_plain_len()?;
            }
            opcode::AUX => {
                // redis-ver, ctime, used-mem, repl ids...: informational for a load; "lua"
                // scripts of old files are not cached (SCRIPT LOAD them again).
                let k = r.read_string()?;
                let v = r.read_string()?;
                if &k[..] == super::snapshot::MC_FLAGS_AUX {
                    mc_flags = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                } else if &k[..] == b"repl-id" && v.len() == 40 {
                    let id = String::from_utf8_lossy(&v).into_owned();
                    let off = out.repl_position.take().map_or(0, |(_, o)| o);
                    out.repl_position = Some((id, off));
                } else if &k[..] == b"repl-offset" {
                    if let Some(off) = std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()) {
                        let id = out
                            .repl_position
                            .take()
                            .map_or_else(String::new, |(i, _)| i);
                        out.repl_position = Some((id, off));
                    }
                } else if &k[..] == b"repl-stream-db" {
                    out.repl_stream_db = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .filter(|&d: &usize| d < dbnum);
                }
            }
            opcode::EXPIRETIME_MS => expire_at = Some(r.read_millis()?.max(0) as u64),
            opcode::EXPIRETIME => expire_at = Some((r.read_secs()?.max(0) as u64) * 1000),
            opcode::IDLE => {
                r.read_plain_len()?;
            }
            opcode::FREQ => {
                r.read_u8()?;
            }
            opcode::MODULE_AUX => {
                return Err(r
                    .error(RdbErrorKind::Other("module data is not supported"))
                    .into())
            }
            opcode::FUNCTION2 => out.functions.push(r.read_string_vec()?),
            opcode::FUNCTION_PRE_GA => {
                return Err(r
                    .error(RdbErrorKind::Other(
                        "the file holds functions in Redis 7.0 RC's format, which is not supported",
                    ))
                    .into())
            }
            t => {
                let key = r.read_string()?;
                let obj = read_object(&mut r, t, lim)?;
                if key_delay != 0 {
                    super::snapshot::debug_delay(key_delay);
                }
                let at = expire_at.take();
                let flags = std::mem::take(&mut mc_flags);
                let Some(obj) = obj else {
                    continue; // an empty collection: skipped, as Redis does
                };
                if at.is_some_and(|at| at <= now) {
                    out.keys_expired += 1;
                    out.expired.push((db, key.into_owned()));
                    continue;
                }
                out.keys_loaded += 1;
                let shard = super::shard_of(&key, shards);
                out.shards[shard].push(Entry {
                    db,
                    key: KeyStr::from_bytes(&key),
                    value: obj.value,
                    expire_at: at,
                    field_deadline: obj.field_deadline,
                    mc_flags: flags,
                });
            }
        }
    }
}

/// Puts a shard's batch into its (empty) databases. A key met twice means a corrupt file
/// (Redis stops too); the load fails and the caller does not serve the data.
pub fn apply(shard: &mut super::shard::Shard, batch: Vec<Entry>) -> Result<(), LoadError> {
    for e in batch {
        let db = shard.db(e.db);
        let key = e.key;
        if db.prime().find(key.key()).is_some() {
            return Err(LoadError::DuplicateKey {
                db: e.db,
                key: key.to_vec(),
            });
        }
        if let Some(at) = e.field_deadline {
            db.hfe.set(key.key(), Some(at));
        }
        let pos = db.insert_new_owned(key, e.value, e.expire_at);
        if e.mc_flags != 0 {
            db.set_mc_state(
                pos,
                super::mcstate::McState {
                    flags: e.mc_flags,
                    ..Default::default()
                },
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use damselfly_types::compact::CompactStr;
    use damselfly_types::hash::Hash;
    use damselfly_types::list::{Fill, List};
    use damselfly_types::rdb::object::write_object;
    use damselfly_types::rdb::Writer;
    use damselfly_types::set::Set;
    use damselfly_types::zset::ZSet;
    use proptest::prelude::*;

    /// A small valid file with every type, in two dbs, one key with a deadline.
    fn sample_file() -> Vec<u8> {
        let lim = EncLimits::default();
        let mut h = Hash::default();
        for i in 0..20 {
            h.set(
                format!("f{i}").as_bytes(),
                format!("{i}").as_bytes(),
                lim.hash,
                false,
            );
        }
        let big: Vec<Vec<u8>> = (0..300).map(|i| format!("elem{i}").into_bytes()).collect();
        let values = [
            Value::str(CompactStr::from_value(b"12345")),
            Value::str(CompactStr::from_value(&b"abc".repeat(40))),
            Value::list(List::from_iter(big.iter().map(|v| &v[..]), Fill::new(-2))),
            Value::hash(h),
            Value::set(Set::from_members([&b"1"[..], b"2", b"x"], 512)),
            Value::set(Set::from_members([&b"7"[..], b"-9"], 512)),
            Value::zset(ZSet::from_sorted(
                &[(b"a".to_vec(), 1.0), (b"b".to_vec(), 2.5)],
                &lim.zset,
            )),
        ];
        let mut w = Writer::new(Vec::new());
        w.write_header().unwrap();
        w.write_aux(b"redis-ver", b"7.0.15").unwrap();
        for (db, chunk) in [(0u64, &values[..4]), (3, &values[4..])] {
            w.write_selectdb(db).unwrap();
            for (i, v) in chunk.iter().enumerate() {
                if i == 1 {
                    w.write_expire_ms(4_000_000_000_000).unwrap();
                }
                write_object(&mut w, Some(format!("k{db}:{i}").as_bytes()), v, &lim).unwrap();
            }
        }
        w.finish().unwrap()
    }

    #[test]
    fn sample_round_trips() {
        let ds = parse(&sample_file(), 2, 16, 0, &EncLimits::default()).unwrap();
        assert_eq!(ds.keys_loaded, 7);
        let n: usize = ds.shards.iter().map(Vec::len).sum();
        assert_eq!(n, 7);
        // Expired at load time: dropped and counted.
        let ds = parse(&sample_file(), 2, 16, u64::MAX, &EncLimits::default()).unwrap();
        assert_eq!((ds.keys_loaded, ds.keys_expired), (5, 2));
        // A db beyond `databases`.
        assert!(matches!(
            parse(&sample_file(), 2, 2, 0, &EncLimits::default()),
            Err(LoadError::TooManyDbs { db: 3, dbnum: 2 })
        ));
    }

    /// Without its checksum (a zero trailer means "not computed"), a mutated file reaches the
    /// parser itself: it answers Ok or an error, never panics.
    fn unchecked(mut f: Vec<u8>) -> Vec<u8> {
        let n = f.len();
        if n >= 8 {
            f[n - 8..].fill(0);
        }
        f
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn mutated_files_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            cut in any::<prop::sample::Index>(),
            truncate in any::<bool>(),
        ) {
            let mut f = sample_file();
            for (at, v) in flips {
                let i = at.index(f.len());
                f[i] = v;
            }
            if truncate {
                f.truncate(cut.index(f.len()));
            }
            let _ = parse(&unchecked(f.clone()), 3, 16, 0, &EncLimits::default());
            // With the checksum kept, any change is refused.
            prop_assert!(parse(&f, 3, 16, 0, &EncLimits::default()).is_err() || f == sample_file());
        }
    }
}
