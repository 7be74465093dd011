//! Snapshots and DUMP/RESTORE against real redis-server 7.0, both directions: a dataset with
//! every type and encoding (small and large, binary keys and values, integers, expiries, several
//! databases) saved by one server loads into the other and compares equal key by key (type,
//! value, encoding, TTL within a second); `redis-check-rdb` accepts our files; DUMP payloads
//! restore across. Plus the failure paths: bad files stop start-up with the file and offset,
//! bad payloads are refused with Redis's errors, DEBUG RELOAD round-trips.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run_to_exit, Gen, RedisServer, Server};
use redis::{Connection, Value};

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "dfly-persist-{tag}-{}-{}",
        std::process::id(),
        common::free_port()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn q(con: &mut Connection, args: &[&[u8]]) -> Value {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
        .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(args[0])))
}

fn qs(con: &mut Connection, args: &[&str]) -> Value {
    let b: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    q(con, &b)
}

/// Fills dbs 0, 1 and 5 with every type in every encoding Redis 7.0 has.
fn populate(con: &mut Connection) {
    let mut g = Gen(0x9E37_79B9_7F4A_7C15);
    for db in ["0", "1", "5"] {
        qs(con, &["SELECT", db]);
        let p = format!("d{db}:");
        let k = |s: &str| format!("{p}{s}");
        // Strings: integers (int encoding), short (embstr), long compressible (LZF in the file),
        // random binary, empty, and a binary key.
        qs(con, &["SET", &k("int"), "12345"]);
        qs(con, &["SET", &k("neg"), "-7"]);
        qs(con, &["SET", &k("maxint"), "9223372036854775807"]);
        qs(con, &["SET", &k("notint"), "007"]);
        qs(con, &["SET", &k("short"), "hello world"]);
        qs(con, &["SET", &k("long"), &"abcdefgh".repeat(2000)]);
        q(con, &[b"SET", k("random").as_bytes(), &g.bytes(5000)]);
        qs(con, &["SET", &k("empty"), ""]);
        q(con, &[b"SET", b"\x00\xff bin\r\nkey", &g.bytes(33)]);
        // Lists: one listpack node; many nodes with mixed elements.
        qs(
            con,
            &["RPUSH", &k("list:small"), "a", "1", "-2", "bee", "3.5"],
        );
        let mut args: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), k("list:big").into_bytes()];
        for i in 0..3000 {
            args.push(match i % 4 {
                0 => i.to_string().into_bytes(),
                1 => format!("elem-{i}").into_bytes(),
                2 => g.bytes(1 + (i % 700)),
                _ => (-(i as i64) * 1_000_003).to_string().into_bytes(),
            });
        }
        q(con, &args.iter().map(|a| a.as_slice()).collect::<Vec<_>>());
        // Hashes: listpack, hashtable by count, hashtable by value size.
        qs(
            con,
            &["HSET", &k("hash:small"), "f1", "v1", "n", "42", "neg", "-1"],
        );
        let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), k("hash:big").into_bytes()];
        for i in 0..600 {
            args.push(format!("field{i}").into_bytes());
            args.push(if i % 3 == 0 {
                i.to_string().into_bytes()
            } else {
                g.bytes(i % 90)
            });
        }
        q(con, &args.iter().map(|a| a.as_slice()).collect::<Vec<_>>());
        qs(con, &["HSET", &k("hash:wide"), "f", &"x".repeat(100)]);
        // Sets: intset, intset too big (hashtable), strings.
        qs(
            con,
            &[
                "SADD",
                &k("set:ints"),
                "1",
                "2",
                "-3",
                "100000",
                "-9000000000",
            ],
        );
        let ints: Vec<String> = (0..700).map(|i| (i * 7919).to_string()).collect();
        let mut args = vec!["SADD", &*k("set:manyints")]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        args.extend(ints);
        qs(con, &args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        qs(con, &["SADD", &k("set:strs"), "a", "b", "c", "1"]);
        // Sorted sets: listpack (odd scores), skiplist.
        qs(
            con,
            &[
                "ZADD",
                &k("zset:small"),
                "1",
                "a",
                "2.5",
                "b",
                "-inf",
                "c",
                "inf",
                "d",
                "0.1",
                "e",
                "-0",
                "f",
                "1e300",
                "g",
            ],
        );
        let mut args: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), k("zset:big").into_bytes()];
        for i in 0..400 {
            args.push(format!("{}", (i as f64) * 1.25 - 100.0).into_bytes());
            args.push(if i % 2 == 0 {
                format!("m{i}").into_bytes()
            } else {
                g.bytes(1 + i % 80)
            });
        }
        q(con, &args.iter().map(|a| a.as_slice()).collect::<Vec<_>>());
        // Streams: several nodes (fields like and unlike the master entry, integer-looking and
        // binary values), deleted entries, groups with pending entries and consumers, an empty
        // stream that only has a group.
        let sk = k("stream");
        for i in 1..=250u64 {
            let id = format!("{}-{}", 1000 + i / 3, i % 3);
            let v = g.bytes(1 + (i as usize) % 40);
            if i % 7 == 0 {
                q(
                    con,
                    &[
                        b"XADD",
                        sk.as_bytes(),
                        id.as_bytes(),
                        b"other",
                        &v,
                        b"n",
                        b"12",
                    ],
                );
            } else {
                q(
                    con,
                    &[
                        b"XADD",
                        sk.as_bytes(),
                        id.as_bytes(),
                        b"f",
                        &v,
                        b"n",
                        i.to_string().as_bytes(),
                    ],
                );
            }
        }
        qs(con, &["XDEL", &sk, "1001-0", "1010-2", "1050-1"]);
        qs(con, &["XGROUP", "CREATE", &sk, "g1", "0"]);
        qs(con, &["XGROUP", "CREATE", &sk, "g2", "$"]);
        qs(
            con,
            &[
                "XREADGROUP",
                "GROUP",
                "g1",
                "alice",
                "COUNT",
                "5",
                "STREAMS",
                &sk,
                ">",
            ],
        );
        qs(
            con,
            &[
                "XREADGROUP",
                "GROUP",
                "g1",
                "bob",
                "COUNT",
                "3",
                "STREAMS",
                &sk,
                ">",
            ],
        );
        qs(con, &["XACK", &sk, "g1", "1001-1"]);
        qs(con, &["XGROUP", "CREATECONSUMER", &sk, "g2", "carol"]);
        qs(
            con,
            &["XGROUP", "CREATE", &k("stream:empty"), "g", "$", "MKSTREAM"],
        );
        // Expiries on every type.
        for t in [
            "int",
            "list:small",
            "hash:small",
            "set:ints",
            "zset:small",
            "long",
        ] {
            qs(con, &["PEXPIRE", &k(t), "3600000"]);
        }
    }
    qs(con, &["SELECT", "0"]);
}

/// Everything observable about a db: key -> (type, encoding, canonical value, deadline in unix
/// ms or -1).
type Snapshot = BTreeMap<Vec<u8>, (String, String, Vec<Vec<u8>>, i64)>;

fn bulk(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        Value::Okay => b"OK".to_vec(),
        Value::Int(i) => i.to_string().into_bytes(),
        Value::Nil => b"(nil)".to_vec(),
        other => panic!("not a bulk: {other:?}"),
    }
}

/// Every leaf of a reply, in order (nested arrays flattened, nil as "(nil)").
fn flatten(v: &Value, out: &mut Vec<Vec<u8>>) {
    match v {
        Value::Array(a) => {
            out.push(format!("[{}", a.len()).into_bytes());
            for x in a {
                flatten(x, out);
            }
        }
        other => out.push(bulk(other)),
    }
}

fn items(v: Value) -> Vec<Vec<u8>> {
    match v {
        Value::Array(a) => a.iter().map(bulk).collect(),
        other => panic!("not an array: {other:?}"),
    }
}

fn snapshot(con: &mut Connection, db: &str) -> Snapshot {
    qs(con, &["SELECT", db]);
    let mut keys = items(qs(con, &["KEYS", "*"]));
    keys.sort();
    let mut out = Snapshot::new();
    for key in keys {
        let t = String::from_utf8(bulk(&q(con, &[b"TYPE", &key]))).unwrap();
        let enc = String::from_utf8(bulk(&q(con, &[b"OBJECT", b"ENCODING", &key]))).unwrap();
        let mut val = match t.as_str() {
            "string" => vec![bulk(&q(con, &[b"GET", &key]))],
            "list" => items(q(con, &[b"LRANGE", &key, b"0", b"-1"])),
            "hash" => {
                let flat = items(q(con, &[b"HGETALL", &key]));
                let mut pairs: Vec<Vec<u8>> = flat
                    .chunks(2)
                    .map(|c| [c[0].clone(), b"=".to_vec(), c[1].clone()].concat())
                    .collect();
                pairs.sort();
                pairs
            }
            "set" => {
                let mut m = items(q(con, &[b"SMEMBERS", &key]));
                m.sort();
                m
            }
            "zset" => items(q(con, &[b"ZRANGE", &key, b"0", b"-1", b"WITHSCORES"])),
            // Entries, the stream's IDs and counters, groups and their pending entries (times
            // left out: a restore keeps them, a comparison across servers cannot).
            "stream" => {
                let mut out = Vec::new();
                flatten(&q(con, &[b"XRANGE", &key, b"-", b"+"]), &mut out);
                let info = q(con, &[b"XINFO", b"STREAM", &key]);
                let Value::Array(kv) = info else {
                    panic!("XINFO STREAM: {info:?}")
                };
                for pair in kv.chunks(2) {
                    let name = bulk(&pair[0]);
                    if [
                        &b"length"[..],
                        b"last-generated-id",
                        b"max-deleted-entry-id",
                        b"entries-added",
                        b"recorded-first-entry-id",
                        b"groups",
                    ]
                    .contains(&&name[..])
                    {
                        out.push(name);
                        flatten(&pair[1], &mut out);
                    }
                }
                flatten(&q(con, &[b"XINFO", b"GROUPS", &key]), &mut out);
                let groups = q(con, &[b"XINFO", b"GROUPS", &key]);
                if let Value::Array(gs) = groups {
                    for g in gs {
                        let Value::Array(f) = g else { continue };
                        let name = bulk(&f[1]);
                        flatten(&q(con, &[b"XPENDING", &key, &name]), &mut out);
                        let Value::Array(cs) = q(con, &[b"XINFO", b"CONSUMERS", &key, &name])
                        else {
                            panic!("XINFO CONSUMERS")
                        };
                        for c in cs {
                            let Value::Array(cf) = c else { continue };
                            out.push(bulk(&cf[1]));
                            out.push(bulk(&cf[3]));
                        }
                    }
                }
                out
            }
            other => panic!("unexpected type {other}"),
        };
        val.shrink_to_fit();
        // The absolute deadline: stable however long a test takes between two snapshots.
        let ttl = match q(con, &[b"PEXPIRETIME", &key]) {
            Value::Int(i) => i,
            other => panic!("PEXPIRETIME: {other:?}"),
        };
        out.insert(key, (t, enc, val, ttl));
    }
    qs(con, &["SELECT", "0"]);
    out
}

/// Same keys, types, encodings and values; deadlines within a second (-1 stays -1).
fn assert_same(a: &Snapshot, b: &Snapshot, what: &str) {
    if a.len() != b.len() || a.keys().zip(b.keys()).any(|(x, y)| x != y) {
        let show = |m: &Snapshot, other: &Snapshot| -> Vec<String> {
            m.keys()
                .filter(|k| !other.contains_key(*k))
                .take(10)
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect()
        };
        panic!(
            "{what}: key sets differ ({} vs {} keys); only in the first: {:?}; only in the second: {:?}",
            a.len(),
            b.len(),
            show(a, b),
            show(b, a)
        );
    }
    for (k, (ta, ea, va, xa)) in a {
        let (tb, eb, vb, xb) = &b[k];
        let name = String::from_utf8_lossy(k);
        assert_eq!(ta, tb, "{what}: type of {name}");
        assert_eq!(ea, eb, "{what}: encoding of {name}");
        assert!(
            va == vb,
            "{what}: value of {name} differs ({} vs {} items)",
            va.len(),
            vb.len()
        );
        assert!(
            (*xa == -1 && *xb == -1) || (*xa > 0 && *xb > 0 && (xa - xb).abs() <= 1000),
            "{what}: deadline of {name}: {xa} vs {xb}"
        );
    }
}

/// [`assert_same`] for every db of [`all_dbs`].
fn assert_dbs_same(a: &[Snapshot], b: &[Snapshot], what: &str) {
    for (a, b) in a.iter().zip(b) {
        assert_same(a, b, what);
    }
}

fn all_dbs(con: &mut Connection) -> Vec<Snapshot> {
    ["0", "1", "5"].iter().map(|db| snapshot(con, db)).collect()
}

fn check_rdb(path: &Path) {
    let out = Command::new("redis-check-rdb")
        .arg(path)
        .output()
        .expect("redis-check-rdb is installed with redis-server");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("RDB looks OK"),
        "redis-check-rdb:\n{text}"
    );
}

#[test]
fn damselfly_snapshot_loads_into_redis() {
    let dir = tmpdir("d2r");
    let d = dir.to_str().unwrap();
    let dfly = Server::start(&[
        "--proactor_threads=3",
        "--dir",
        d,
        "--dbfilename",
        "dfly.rdb",
    ]);
    let mut con = dfly.client();
    populate(&mut con);
    let ours = all_dbs(&mut con);
    assert_eq!(bulk(&qs(&mut con, &["SAVE"])), b"OK");
    let file = dir.join("dfly.rdb");
    check_rdb(&file);
    let redis = RedisServer::start_with(&["--dir", d, "--dbfilename", "dfly.rdb"]);
    let theirs = all_dbs(&mut redis.client());
    assert_dbs_same(&ours, &theirs, "damselfly SAVE -> redis-server load");
    // And back: the same file into a fresh damselfly with another shard count.
    drop(dfly);
    let again = Server::start(&[
        "--proactor_threads=2",
        "--dir",
        d,
        "--dbfilename",
        "dfly.rdb",
    ]);
    let back = all_dbs(&mut again.client());
    assert_dbs_same(&ours, &back, "damselfly SAVE -> damselfly load");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_snapshot_loads_into_damselfly() {
    let dir = tmpdir("r2d");
    let d = dir.to_str().unwrap();
    let redis = RedisServer::start_with(&["--dir", d, "--dbfilename", "redis.rdb"]);
    let mut rcon = redis.client();
    populate(&mut rcon);
    let theirs = all_dbs(&mut rcon);
    assert_eq!(bulk(&qs(&mut rcon, &["SAVE"])), b"OK");
    let dfly = Server::start(&[
        "--proactor_threads=3",
        "--dir",
        d,
        "--dbfilename",
        "redis.rdb",
    ]);
    let ours = all_dbs(&mut dfly.client());
    assert_dbs_same(&theirs, &ours, "redis-server SAVE -> damselfly load");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dump_payloads_restore_both_ways() {
    let dfly = Server::start(&["--proactor_threads=3"]);
    let redis = RedisServer::start();
    let (mut dc, mut rc) = (dfly.client(), redis.client());
    populate(&mut dc);
    populate(&mut rc);
    let want = snapshot(&mut dc, "0");
    assert_same(&want, &snapshot(&mut rc, "0"), "same commands, same data");
    for key in want.keys() {
        let ours = bulk(&q(&mut dc, &[b"DUMP", key]));
        let theirs = bulk(&q(&mut rc, &[b"DUMP", key]));
        // Ours into Redis and Redis's into ours, under new names in db 9.
        for (con, payload) in [(&mut rc, &ours), (&mut dc, &theirs)] {
            qs(con, &["SELECT", "9"]);
            let r = q(con, &[b"RESTORE", key, b"0", payload, b"REPLACE"]);
            assert_eq!(
                bulk(&r),
                b"OK",
                "RESTORE of {}",
                String::from_utf8_lossy(key)
            );
            qs(con, &["SELECT", "0"]);
        }
    }
    let mut a = snapshot(&mut dc, "9");
    let mut b = snapshot(&mut rc, "9");
    // RESTORE with ttl 0 drops the TTLs; compare everything else with the source.
    let mut src = want.clone();
    for s in [&mut a, &mut b, &mut src] {
        for v in s.values_mut() {
            v.3 = -1;
        }
    }
    assert_same(&src, &a, "redis DUMP -> damselfly RESTORE");
    assert_same(&src, &b, "damselfly DUMP -> redis RESTORE");
}

#[test]
fn restore_errors_match_redis() {
    let dfly = Server::start(&[]);
    let redis = RedisServer::start();
    for srv in [&dfly, &redis] {
        let mut c = srv.client();
        qs(&mut c, &["SET", "k", "v"]);
        qs(&mut c, &["RPUSH", "l", "a", "b"]);
    }
    let payload = bulk(&qs(&mut redis.client(), &["DUMP", "l"]));
    let mut bad_crc = payload.clone();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 1;
    let mut bad_body = payload.clone();
    bad_body[3] ^= 0x55;
    // Re-seal the corrupted body with a valid footer: only the format check can catch it.
    let body = &bad_body[..n - 10];
    let sealed = {
        let mut v = body.to_vec();
        v.extend_from_slice(&payload[n - 10..n - 8]);
        let crc = crc64_redis(&v);
        v.extend_from_slice(&crc.to_le_bytes());
        v
    };
    let cases: Vec<Vec<Vec<u8>>> = vec![
        vec![
            b"RESTORE".to_vec(),
            b"k".to_vec(),
            b"0".to_vec(),
            payload.clone(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"n".to_vec(),
            b"-1".to_vec(),
            payload.clone(),
        ],
        vec![b"RESTORE".to_vec(), b"n".to_vec(), b"0".to_vec(), bad_crc],
        vec![
            b"RESTORE".to_vec(),
            b"n".to_vec(),
            b"0".to_vec(),
            b"short".to_vec(),
        ],
        vec![b"RESTORE".to_vec(), b"n".to_vec(), b"0".to_vec(), sealed],
        vec![
            b"RESTORE".to_vec(),
            b"n".to_vec(),
            b"0".to_vec(),
            payload.clone(),
            b"BOGUS".to_vec(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"n".to_vec(),
            b"0".to_vec(),
            payload.clone(),
            b"IDLETIME".to_vec(),
            b"-1".to_vec(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"n".to_vec(),
            b"0".to_vec(),
            payload.clone(),
            b"FREQ".to_vec(),
            b"256".to_vec(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"n".to_vec(),
            b"x".to_vec(),
            payload.clone(),
        ],
        vec![
            b"RESTORE".to_vec(),
            b"past".to_vec(),
            b"1".to_vec(),
            payload.clone(),
            b"ABSTTL".to_vec(),
        ],
        vec![b"EXISTS".to_vec(), b"past".to_vec()],
        vec![b"DUMP".to_vec(), b"missing".to_vec()],
    ];
    for case in cases {
        let raw = common::encode(&case);
        let a = dfly.raw(&raw);
        let b = redis.raw(&raw);
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "reply to {:?}",
            String::from_utf8_lossy(&case[..case.len().min(3)].concat())
        );
    }
}

/// Redis's CRC-64 (Jones, reflected), bit by bit: an independent check of the payload footer.
fn crc64_redis(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[test]
fn debug_reload_keeps_everything() {
    let dir = tmpdir("reload");
    let d = dir.to_str().unwrap();
    let dfly = Server::start(&["--proactor_threads=3", "--dir", d]);
    let mut con = dfly.client();
    populate(&mut con);
    let before = all_dbs(&mut con);
    assert_eq!(bulk(&qs(&mut con, &["DEBUG", "RELOAD"])), b"OK");
    let after = all_dbs(&mut con);
    assert_dbs_same(&before, &after, "DEBUG RELOAD");
    assert!(
        dir.join("dump.rdb").exists(),
        "the default dbfilename 'dump' gets .rdb"
    );
    let info = bulk(&qs(&mut con, &["INFO", "persistence"]));
    let info = String::from_utf8_lossy(&info);
    assert!(info.contains("rdb_saves:1"), "{info}");
    assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A truncated or corrupted file stops start-up with a non-zero exit and a message naming the
/// file and the offset; nothing is served.
#[test]
fn bad_files_stop_startup() {
    let dir = tmpdir("bad");
    let d = dir.to_str().unwrap();
    {
        let dfly = Server::start(&["--dir", d]);
        let mut con = dfly.client();
        populate(&mut con);
        qs(&mut con, &["SAVE"]);
    }
    let good = std::fs::read(dir.join("dump.rdb")).unwrap();
    let mut truncated = good.clone();
    truncated.truncate(good.len() / 2);
    let mut flipped = good.clone();
    let mid = good.len() / 3;
    flipped[mid] ^= 0x20;
    let mut version = good.clone();
    version[5..9].copy_from_slice(b"0099");
    for (what, bytes, expect) in [
        ("truncated", truncated, "offset"),
        ("bit flip", flipped, "checksum"),
        ("version", version, "version"),
    ] {
        std::fs::write(dir.join("dump.rdb"), &bytes).unwrap();
        let (status, text) = run_to_exit(&["--dir", d]);
        assert!(!status.success(), "{what}: started anyway:\n{text}");
        assert!(text.contains("dump.rdb"), "{what}: no file name:\n{text}");
        assert!(
            text.to_lowercase().contains(expect),
            "{what}: expected '{expect}':\n{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn info_field(con: &mut Connection, field: &str) -> String {
    let info = String::from_utf8(bulk(&qs(con, &["INFO", "persistence"]))).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .trim()
        .to_string()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `save <seconds> <changes>` points save in the background; SIGTERM with save points saves
/// and the next start loads it; BGSAVE answers at once and reports through INFO.
#[test]
fn save_points_bgsave_and_sigterm() {
    let dir = tmpdir("points");
    let d = dir.to_str().unwrap();
    let mut srv = Server::start(&["--dir", d, "--save", "1 2"]);
    let mut con = srv.client();
    assert_eq!(info_field(&mut con, "rdb_saves"), "0");
    qs(&mut con, &["SET", "a", "1"]);
    // One change is below the point's two: nothing happens.
    std::thread::sleep(std::time::Duration::from_millis(1300));
    assert_eq!(info_field(&mut con, "rdb_saves"), "0");
    qs(&mut con, &["SET", "b", "2"]);
    wait_until("the save point", || {
        info_field(&mut con, "rdb_saves") == "1"
    });
    assert_eq!(info_field(&mut con, "rdb_changes_since_last_save"), "0");
    assert!(dir.join("dump.rdb").exists());
    assert_eq!(
        bulk(&qs(&mut con, &["BGSAVE"])),
        b"Background saving started"
    );
    wait_until("BGSAVE", || {
        info_field(&mut con, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "ok");
    qs(&mut con, &["SET", "c", "3"]);
    // SAFETY: signals our own child.
    unsafe { libc::kill(srv.pid() as i32, libc::SIGTERM) };
    assert!(srv
        .wait_exit(std::time::Duration::from_secs(10))
        .expect("exits")
        .success());
    assert!(srv
        .output()
        .contains("Saving the final RDB snapshot before exiting."));
    let srv = Server::start(&["--dir", d]);
    let mut con = srv.client();
    assert_eq!(
        items(qs(&mut con, &["MGET", "a", "b", "c"])),
        [b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `shutdown-on-sigterm` / `shutdown-on-sigint` (Redis 7.0): `save` saves without save points,
/// `nosave` exits without saving despite them.
#[test]
fn shutdown_on_signal_flags() {
    let dir = tmpdir("sigflags");
    let d = dir.to_str().unwrap();
    for (save, param, flags, signal, saved) in [
        ("", "shutdown-on-sigterm", "save", libc::SIGTERM, true),
        (
            "60 1",
            "shutdown-on-sigint",
            "nosave now",
            libc::SIGINT,
            false,
        ),
    ] {
        let _ = std::fs::remove_file(dir.join("dump.rdb"));
        let mut srv = Server::start(&["--dir", d, "--save", save]);
        let mut con = srv.client();
        qs(&mut con, &["SET", "k", "v"]);
        qs(&mut con, &["CONFIG", "SET", param, flags]);
        assert_eq!(
            items(qs(&mut con, &["CONFIG", "GET", param])),
            [param.as_bytes().to_vec(), flags.as_bytes().to_vec()]
        );
        // SAFETY: signals our own child.
        unsafe { libc::kill(srv.pid() as i32, signal) };
        assert!(srv
            .wait_exit(std::time::Duration::from_secs(10))
            .expect("exits")
            .success());
        assert_eq!(dir.join("dump.rdb").exists(), saved, "{param} {flags}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The crash test: `kill -9` during a BGSAVE leaves the previous snapshot, which the restart
/// loads; after a completed BGSAVE taken while a client writes, `kill -9` and restart give
/// exactly a point in time: the base dataset intact and the writer's keys a gap-free prefix.
#[test]
fn kill_9_during_and_after_bgsave() {
    let dir = tmpdir("crash");
    let d = dir.to_str().unwrap();
    let args = ["--proactor_threads=2", "--dir", d];
    let mut srv = Server::start(&args);
    let mut con = srv.client();
    qs(&mut con, &["DEBUG", "POPULATE", "400000", "base", "100"]);
    qs(&mut con, &["SET", "generation", "1"]);
    assert_eq!(bulk(&qs(&mut con, &["SAVE"])), b"OK");
    let digest1 = bulk(&qs(&mut con, &["DEBUG", "DIGEST"]));
    // Generation 2: more data, then a BGSAVE killed while its temporary file exists.
    qs(&mut con, &["SET", "generation", "2"]);
    qs(&mut con, &["DEBUG", "POPULATE", "400000", "more", "100"]);
    let temp = dir.join(format!("temp-{}.rdb", srv.pid()));
    assert_eq!(
        bulk(&qs(&mut con, &["BGSAVE"])),
        b"Background saving started"
    );
    let mut killed_mid_save = false;
    for _ in 0..20_000 {
        if temp.exists() {
            // SAFETY: signals our own child.
            unsafe { libc::kill(srv.pid() as i32, libc::SIGKILL) };
            killed_mid_save = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    assert!(
        killed_mid_save,
        "the BGSAVE ended before the test saw its temporary file"
    );
    srv.wait_exit(std::time::Duration::from_secs(10))
        .expect("killed");
    let srv = Server::start(&args);
    let mut con = srv.client();
    assert_eq!(bulk(&qs(&mut con, &["GET", "generation"])), b"1");
    assert_eq!(
        bulk(&qs(&mut con, &["DEBUG", "DIGEST"])),
        digest1,
        "the previous snapshot, exactly"
    );

    // A BGSAVE under write load, then kill -9 after it completed.
    let port = srv.port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: () = redis::cmd("SET")
                    .arg(format!("w:{n}"))
                    .arg(n)
                    .query(&mut c)
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(
        bulk(&qs(&mut con, &["BGSAVE"])),
        b"Background saving started"
    );
    wait_until("BGSAVE", || {
        info_field(&mut con, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "ok");
    std::thread::sleep(std::time::Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    let mut srv = srv;
    // SAFETY: signals our own child.
    unsafe { libc::kill(srv.pid() as i32, libc::SIGKILL) };
    srv.wait_exit(std::time::Duration::from_secs(10))
        .expect("killed");
    let srv = Server::start(&args);
    let mut con = srv.client();
    let wkeys = items(qs(&mut con, &["KEYS", "w:*"]));
    let mut ns: Vec<u64> = wkeys
        .iter()
        .map(|k| std::str::from_utf8(&k[2..]).unwrap().parse().unwrap())
        .collect();
    ns.sort_unstable();
    assert!(
        !ns.is_empty() && (ns.len() as u64) < written,
        "{} of {written} writes",
        ns.len()
    );
    assert!(
        ns.iter().enumerate().all(|(i, &n)| i as u64 == n),
        "the snapshot is a point in time: writes 0..{} without gaps",
        ns.len()
    );
    for k in &wkeys {
        assert_eq!(bulk(&q(&mut con, &[b"GET", k])), k[2..].to_vec());
    }
    qs(&mut con, &["DEL", "generation"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With save points and `stop-writes-on-bgsave-error yes` (the default), a failed background
/// save makes writes (and PING) answer MISCONF, as in Redis, until a save succeeds again.
#[test]
fn failed_bgsave_stops_writes_until_a_save_succeeds() {
    let dir = tmpdir("misconf");
    let d = dir.to_str().unwrap();
    let srv = Server::start(&["--dir", d, "--save", "3600 1"]);
    let mut con = srv.client();
    qs(&mut con, &["SET", "a", "1"]);
    // A non-empty directory where the file goes: the final rename fails.
    std::fs::create_dir_all(dir.join("dump.rdb").join("x")).unwrap();
    assert_eq!(
        bulk(&qs(&mut con, &["BGSAVE"])),
        b"Background saving started"
    );
    wait_until("BGSAVE", || {
        info_field(&mut con, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "err");
    let misconf = "MISCONF Redis is configured to save RDB snapshots";
    for cmd in [&b"SET a 2\r\n"[..], b"PING\r\n", b"DEL a\r\n"] {
        let r = String::from_utf8_lossy(&srv.raw(cmd)).into_owned();
        assert!(r.starts_with(&format!("-{misconf}")), "{r}");
    }
    assert_eq!(srv.raw(b"GET a\r\n"), b"$1\r\n1\r\n", "reads go on");
    std::fs::remove_dir_all(dir.join("dump.rdb")).unwrap();
    assert_eq!(
        bulk(&qs(&mut con, &["BGSAVE"])),
        b"Background saving started"
    );
    wait_until("BGSAVE", || {
        info_field(&mut con, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(srv.raw(b"SET a 2\r\n"), b"+OK\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--snapshot_cron` takes 5-field cron expressions (checked field by field) and shows in
/// CONFIG GET; a bad one is refused with the field named.
#[test]
fn snapshot_cron_is_validated() {
    let srv = Server::start(&["--snapshot_cron", "*/5 * * * *"]);
    let mut con = srv.client();
    assert_eq!(
        items(qs(&mut con, &["CONFIG", "GET", "snapshot_cron"])),
        [b"snapshot_cron".to_vec(), b"*/5 * * * *".to_vec()]
    );
    assert_eq!(
        bulk(&qs(
            &mut con,
            &["CONFIG", "SET", "snapshot_cron", "0 6 * * MON-FRI"]
        )),
        b"OK"
    );
    let r = String::from_utf8_lossy(&srv.raw(&common::encode(&[
        "CONFIG",
        "SET",
        "snapshot_cron",
        "61 * * * *",
    ])))
    .into_owned();
    assert!(
        r.starts_with("-ERR") && r.contains("invalid cron minute field '61'"),
        "{r}"
    );
    let (status, text) = run_to_exit(&["--snapshot_cron", "* * *"]);
    assert!(!status.success() && text.contains("5 fields"), "{text}");
}

/// While the start-up snapshot loads the server answers, as Redis: `-LOADING` for commands that
/// need the data, INFO says `loading:1`; then everything is there.
#[test]
fn loading_state_while_the_snapshot_loads() {
    let dir = tmpdir("loading");
    let d = dir.to_str().unwrap();
    {
        let srv = Server::start(&["--dir", d]);
        let mut con = srv.client();
        qs(&mut con, &["DEBUG", "POPULATE", "20000"]);
        assert_eq!(bulk(&qs(&mut con, &["SAVE"])), b"OK");
    }
    let port = common::free_port();
    let mut child = Command::new(common::dfly_bin())
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            d,
        ])
        .args(["--key-load-delay", "200", "--proactor_threads", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let conn = || loop {
        if let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let ping = common::raw_exchange(conn(), b"PING\r\n", std::time::Duration::from_millis(300));
    assert_eq!(
        String::from_utf8_lossy(&ping.data),
        "-LOADING Redis is loading the dataset in memory\r\n"
    );
    let info = common::raw_exchange(
        conn(),
        b"INFO persistence\r\n",
        std::time::Duration::from_millis(300),
    );
    assert!(String::from_utf8_lossy(&info.data).contains("loading:1"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = common::raw_exchange(conn(), b"DBSIZE\r\n", std::time::Duration::from_millis(300));
        if r.data == b":20000\r\n" {
            break;
        }
        assert!(
            r.data.starts_with(b"-LOADING"),
            "{:?}",
            String::from_utf8_lossy(&r.data)
        );
        assert!(std::time::Instant::now() < deadline, "still loading");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// FLUSHALL with save points saves the empty dataset (so a restart does not bring the old file
/// back) and resets the change counter, as Redis; without save points it does neither.
#[test]
fn flushall_saves_when_save_points_are_set() {
    let dir = tmpdir("flushall");
    let d = dir.to_str().unwrap();
    let srv = Server::start(&["--dir", d, "--save", "3600 1"]);
    let mut con = srv.client();
    qs(&mut con, &["SET", "k", "v"]);
    assert_eq!(bulk(&qs(&mut con, &["SAVE"])), b"OK");
    qs(&mut con, &["SET", "k2", "v"]);
    qs(&mut con, &["FLUSHALL"]);
    assert_eq!(info_field(&mut con, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut con, "rdb_saves"), "2");
    drop(srv);
    // Without save points (`save ""`; the default has Redis's) FLUSHALL does not save.
    let srv = Server::start(&["--dir", d, "--save", ""]);
    let mut con = srv.client();
    assert_eq!(
        bulk(&qs(&mut con, &["DBSIZE"])),
        b"0",
        "the saved file is the empty dataset"
    );
    qs(&mut con, &["SET", "k", "v"]);
    qs(&mut con, &["FLUSHALL"]);
    assert_eq!(info_field(&mut con, "rdb_changes_since_last_save"), "2");
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGSAVE is a point in time while clients keep writing: the server serves every command
/// during the save (the walk runs in steps between them), and the file holds exactly the
/// dataset as it was when BGSAVE ran, whatever the writes did meanwhile: overwrites, deletes,
/// inserts that split segments, expiries, changes inside every collection type, RENAME,
/// SWAPDB, FLUSHDB and MULTI/EXEC across shards. The file is then loaded by redis-server.
#[test]
fn bgsave_is_a_point_in_time_under_writes() {
    let dir = tmpdir("pit");
    let d = dir.to_str().unwrap();
    let dfly = Server::start(&[
        "--proactor_threads=3",
        "--dir",
        d,
        "--dbfilename",
        "pit.rdb",
        // Dragonfly's cap on KEYS replies (8192) would hide most of the keys compared here.
        "--keys_output_limit",
        "1000000",
    ]);
    let mut con = dfly.client();
    populate(&mut con);
    qs(&mut con, &["DEBUG", "POPULATE", "20000", "bulk", "40"]);
    // Collections big enough for the walk to write them in pieces across steps.
    for batch in 0..20 {
        let ids: Vec<String> = (batch * 1000..(batch + 1) * 1000)
            .map(|i| format!("e{i}"))
            .collect();
        let mut sadd = vec!["SADD", "huge:set"];
        let mut rpush = vec!["RPUSH", "huge:list"];
        let mut hset = vec!["HSET", "huge:hash"];
        let mut zadd = vec!["ZADD", "huge:zset"];
        let mut gone = vec!["SADD", "huge:gone"];
        for id in &ids {
            sadd.push(id);
            rpush.push(id);
            hset.extend([id.as_str(), id.as_str()]);
            zadd.extend([&id[1..], id.as_str()]);
            gone.push(id);
        }
        for cmd in [sadd, rpush, hset, zadd, gone] {
            qs(&mut con, &cmd);
        }
    }
    let before = all_dbs(&mut con);
    // Slow the walk down (an async pause per key written by the walk) so that every write
    // below lands while the save runs.
    qs(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "500"]);
    assert_eq!(
        bulk(&qs(&mut con, &["BGSAVE"])),
        b"Background saving started"
    );
    let t0 = std::time::Instant::now();
    // A write to a bucket the walk has not reached writes that bucket itself, so the walk
    // has less left to do: touch only some of the keys, or it would end with the writes.
    for i in 0..3000 {
        let k = format!("bulk:{i}");
        match i % 5 {
            0 => qs(&mut con, &["SET", &k, "changed"]),
            1 => qs(&mut con, &["DEL", &k]),
            2 => qs(&mut con, &["PEXPIRE", &k, "1"]),
            3 => qs(&mut con, &["APPEND", &k, "+"]),
            _ => qs(&mut con, &["SET", &format!("new:{i}"), "x"]),
        };
    }
    qs(&mut con, &["SADD", "huge:set", "new"]);
    qs(&mut con, &["RPUSH", "huge:list", "new"]);
    qs(&mut con, &["HSET", "huge:hash", "new", "v"]);
    qs(&mut con, &["ZADD", "huge:zset", "-1", "new"]);
    qs(&mut con, &["DEL", "huge:gone"]);
    for db in ["0", "5"] {
        qs(&mut con, &["SELECT", db]);
        let p = format!("d{db}:");
        let k = |s: &str| format!("{p}{s}");
        qs(&mut con, &["RPUSH", &k("list:big"), "more"]);
        qs(&mut con, &["LPOP", &k("list:small")]);
        qs(&mut con, &["HSET", &k("hash:big"), "field1", "new"]);
        qs(&mut con, &["HDEL", &k("hash:small"), "f1"]);
        qs(&mut con, &["SADD", &k("set:ints"), "77"]);
        qs(&mut con, &["SREM", &k("set:strs"), "a"]);
        qs(&mut con, &["ZADD", &k("zset:big"), "5", "m0"]);
        qs(&mut con, &["ZREM", &k("zset:small"), "a"]);
        qs(&mut con, &["PERSIST", &k("int")]);
        qs(&mut con, &["EXPIRE", &k("short"), "100"]);
        qs(&mut con, &["RENAME", &k("long"), &k("renamed")]);
        qs(&mut con, &["INCR", &k("int")]);
        qs(&mut con, &["MULTI"]);
        qs(&mut con, &["SET", &k("neg"), "0"]);
        qs(&mut con, &["DEL", &k("hash:wide")]);
        qs(
            &mut con,
            &["MSET", &k("notint"), "1", "fresh:a", "1", "fresh:b", "2"],
        );
        qs(&mut con, &["EXEC"]);
    }
    qs(&mut con, &["SELECT", "0"]);
    qs(&mut con, &["SWAPDB", "1", "5"]);
    qs(&mut con, &["SELECT", "1"]);
    qs(&mut con, &["FLUSHDB"]);
    qs(&mut con, &["SET", "after-flush", "1"]);
    qs(&mut con, &["SELECT", "0"]);
    assert_eq!(
        info_field(&mut con, "rdb_bgsave_in_progress"),
        "1",
        "the save must still run after the writes ({:?}), or this test proves nothing",
        t0.elapsed()
    );
    qs(&mut con, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_until("BGSAVE", || {
        info_field(&mut con, "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_field(&mut con, "rdb_last_bgsave_status"), "ok");
    // The live dataset did change.
    assert_eq!(bulk(&qs(&mut con, &["GET", "bulk:0"])), b"changed");
    let file = dir.join("pit.rdb");
    check_rdb(&file);
    let redis = RedisServer::start_with(&["--dir", d, "--dbfilename", "pit.rdb"]);
    let theirs = all_dbs(&mut redis.client());
    assert_dbs_same(&before, &theirs, "BGSAVE under writes -> redis-server load");
    drop(dfly);
    let _ = std::fs::remove_dir_all(&dir);
}
