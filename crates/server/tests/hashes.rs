//! Hash commands against the real binary (`--proactor_threads=4`), asserting exact replies:
//! every command's happy path, wrong types, error texts (Redis 7.0 for the classic commands,
//! 7.4 for field expiry), RESP3 shapes, encoding conversions, HSCAN while the hash grows, and
//! per-field expiry (passive and active).

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::{bulk, err, ok, RawConn, Resp, Server};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn start() -> (Server, RawConn) {
    let srv = Server::start(&["--proactor_threads=4"]);
    let c = srv.raw_conn();
    (srv, c)
}

fn int(i: i64) -> Resp {
    Resp::Int(i)
}

fn arr(v: Vec<Resp>) -> Resp {
    Resp::Array(v)
}

fn bulks(v: &[&str]) -> Resp {
    arr(v.iter().map(|s| bulk(s)).collect())
}

fn ints(v: &[i64]) -> Resp {
    arr(v.iter().map(|&i| int(i)).collect())
}

fn strings(r: &Resp) -> Vec<String> {
    match r {
        Resp::Array(v) | Resp::Set(v) => v
            .iter()
            .map(|x| String::from_utf8_lossy(x.as_bytes().unwrap_or(b"?")).into_owned())
            .collect(),
        other => panic!("not an array: {other}"),
    }
}

fn sorted(r: &Resp) -> Vec<String> {
    let mut v = strings(r);
    v.sort();
    v
}

#[test]
fn basic_commands() {
    let (_s, mut c) = start();
    assert_eq!(c.q("HSET h a 1 b 2 c 3"), int(3));
    assert_eq!(c.q("HSET h a 10 d 4"), int(1));
    assert_eq!(c.q("HMSET h e 5"), ok());
    assert_eq!(c.q("HGET h a"), bulk("10"));
    assert_eq!(c.q("HGET h zz"), Resp::Nil);
    assert_eq!(c.q("HGET nokey a"), Resp::Nil);
    assert_eq!(
        c.q("HMGET h a zz e"),
        arr(vec![bulk("10"), Resp::Nil, bulk("5")])
    );
    assert_eq!(c.q("HMGET nokey a b"), arr(vec![Resp::Nil, Resp::Nil]));
    assert_eq!(c.q("HLEN h"), int(5));
    assert_eq!(c.q("HLEN nokey"), int(0));
    assert_eq!(c.q("HEXISTS h a"), int(1));
    assert_eq!(c.q("HEXISTS h zz"), int(0));
    assert_eq!(c.q("HEXISTS nokey a"), int(0));
    assert_eq!(c.q("HSTRLEN h a"), int(2));
    assert_eq!(c.q("HSTRLEN h zz"), int(0));
    // Listpack order is insertion order, updates in place (as Redis).
    assert_eq!(c.q("HKEYS h"), bulks(&["a", "b", "c", "d", "e"]));
    assert_eq!(c.q("HVALS h"), bulks(&["10", "2", "3", "4", "5"]));
    assert_eq!(
        c.q("HGETALL h"),
        bulks(&["a", "10", "b", "2", "c", "3", "d", "4", "e", "5"])
    );
    assert_eq!(c.q("HKEYS nokey"), arr(vec![]));
    assert_eq!(c.q("HGETALL nokey"), arr(vec![]));
    assert_eq!(c.q("HSETNX h a x"), int(0));
    assert_eq!(c.q("HSETNX h f 6"), int(1));
    assert_eq!(c.q("HDEL h a zz b"), int(2));
    assert_eq!(c.q("HDEL nokey a"), int(0));
    assert_eq!(c.q("HDEL h c d e f"), int(4));
    // Emptied hash is deleted.
    assert_eq!(c.q("EXISTS h"), int(0));
    assert_eq!(c.q("TYPE h"), Resp::Simple(b"none".to_vec()));
    assert_eq!(c.q("HSET h x y"), int(1));
    assert_eq!(c.q("TYPE h"), Resp::Simple(b"hash".to_vec()));
    // Binary-safe fields and values.
    let r = c.cmd(&[&b"HSET"[..], b"bin", b"\x00\xff", b"", b"", b"v\r\n"]);
    assert_eq!(r, int(2));
    assert_eq!(
        c.cmd(&[&b"HGET"[..], b"bin", b"\x00\xff"]),
        Resp::Bulk(b"".to_vec())
    );
    assert_eq!(
        c.cmd(&[&b"HGET"[..], b"bin", b""]),
        Resp::Bulk(b"v\r\n".to_vec())
    );
}

#[test]
fn arity_and_wrong_type() {
    let (_s, mut c) = start();
    assert_eq!(
        c.q("HSET h a 1 b"),
        err("ERR wrong number of arguments for 'hset' command")
    );
    assert_eq!(
        c.q("HMSET h a 1 b"),
        err("ERR wrong number of arguments for 'hmset' command")
    );
    assert_eq!(
        c.q("HSET h a"),
        err("ERR wrong number of arguments for 'hset' command")
    );
    assert_eq!(c.q("EXISTS h"), int(0));
    assert_eq!(c.q("SET s v"), ok());
    for cmd in [
        "HSET s a 1",
        "HMSET s a 1",
        "HSETNX s a 1",
        "HGET s a",
        "HMGET s a",
        "HDEL s a",
        "HEXISTS s a",
        "HLEN s",
        "HSTRLEN s a",
        "HKEYS s",
        "HVALS s",
        "HGETALL s",
        "HINCRBY s a 1",
        "HINCRBYFLOAT s a 1",
        "HRANDFIELD s",
        "HRANDFIELD s 2",
        "HSCAN s 0",
        "HEXPIRE s 10 FIELDS 1 a",
        "HPEXPIRE s 10 FIELDS 1 a",
        "HEXPIREAT s 10 FIELDS 1 a",
        "HPEXPIREAT s 10 FIELDS 1 a",
        "HTTL s FIELDS 1 a",
        "HPTTL s FIELDS 1 a",
        "HEXPIRETIME s FIELDS 1 a",
        "HPEXPIRETIME s FIELDS 1 a",
        "HPERSIST s FIELDS 1 a",
    ] {
        assert_eq!(c.q(cmd), err(WRONGTYPE), "{cmd}");
    }
    assert_eq!(c.q("GET s"), bulk("v"));
    // Hash commands on other types, and other types' commands on a hash.
    assert_eq!(c.q("HSET h a 1"), int(1));
    assert_eq!(c.q("GET h"), err(WRONGTYPE));
    assert_eq!(c.q("INCR h"), err(WRONGTYPE));
}

#[test]
fn counters() {
    let (_s, mut c) = start();
    assert_eq!(c.q("HINCRBY h n 5"), int(5));
    assert_eq!(c.q("HINCRBY h n -7"), int(-2));
    assert_eq!(c.q("HGET h n"), bulk("-2"));
    assert_eq!(
        c.q("HINCRBY h n x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.q("HINCRBY s n x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.cmd(&["HSET", "h", "s", "1.5", "sp", " 1"]), int(2));
    assert_eq!(
        c.q("HINCRBY h sp 1"),
        err("ERR hash value is not an integer")
    );
    assert_eq!(
        c.q("HINCRBY h s 1"),
        err("ERR hash value is not an integer")
    );
    assert_eq!(c.q("HSET h big 9223372036854775800"), int(1));
    assert_eq!(
        c.q("HINCRBY h big 100"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(c.q("HGET h big"), bulk("9223372036854775800"));
    // HINCRBYFLOAT: Redis's long double formatting.
    assert_eq!(c.q("HINCRBYFLOAT f x 1.23"), bulk("1.23"));
    assert_eq!(c.q("HINCRBYFLOAT f x 0.77"), bulk("2"));
    assert_eq!(c.q("HINCRBYFLOAT f x -0.1"), bulk("1.9"));
    assert_eq!(
        c.q("HINCRBYFLOAT f x 3.0e3"),
        bulk("3001.89999999999999991")
    );
    assert_eq!(c.q("HINCRBYFLOAT f y 5.0e3"), bulk("5000"));
    assert_eq!(
        c.q("HINCRBYFLOAT f x abc"),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        c.q("HINCRBYFLOAT f x +inf"),
        err("ERR value is NaN or Infinity")
    );
    assert_eq!(
        c.q("HINCRBYFLOAT nokey x +inf"),
        err("ERR value is NaN or Infinity")
    );
    assert_eq!(c.q("EXISTS nokey"), int(0));
    assert_eq!(c.q("HSET f s abc"), int(1));
    assert_eq!(
        c.q("HINCRBYFLOAT f s 1"),
        err("ERR hash value is not a float")
    );
    assert_eq!(c.q("HSET f z 1e4932"), int(1));
    assert_eq!(
        c.q("HINCRBYFLOAT f z 1e4932"),
        err("ERR increment would produce NaN or Infinity")
    );
    let r = c.cmd(&[&b"HSET"[..], b"f", b"nul", b"1\x002"]);
    assert_eq!(r, int(1));
    assert_eq!(
        c.q("HINCRBYFLOAT f nul 1"),
        err("ERR hash value is not a float")
    );
}

#[test]
fn encodings_convert_like_redis() {
    let (_s, mut c) = start();
    assert_eq!(
        c.q("CONFIG GET hash-max-listpack-entries"),
        bulks(&["hash-max-listpack-entries", "512"])
    );
    assert_eq!(c.q("HSET h a 1"), int(1));
    assert_eq!(c.q("OBJECT ENCODING h"), bulk("listpack"));
    // A value over hash-max-listpack-value (64).
    let long = "x".repeat(65);
    assert_eq!(c.cmd(&["HSET", "h", "b", &long]), int(1));
    assert_eq!(c.q("OBJECT ENCODING h"), bulk("hashtable"));
    assert_eq!(c.cmd(&["HGET", "h", "b"]), bulk(&long));
    // Never converts back.
    assert_eq!(c.q("HDEL h b"), int(1));
    assert_eq!(c.q("OBJECT ENCODING h"), bulk("hashtable"));
    // HSETNX converts only when it writes (Redis 7.0 checks existence first).
    assert_eq!(c.q("HSET n a 1"), int(1));
    assert_eq!(c.cmd(&["HSETNX", "n", "a", &long]), int(0));
    assert_eq!(c.q("OBJECT ENCODING n"), bulk("listpack"));
    assert_eq!(c.cmd(&["HSETNX", "n", "b", &long]), int(1));
    assert_eq!(c.q("OBJECT ENCODING n"), bulk("hashtable"));
    // Entry count, with a lowered threshold (the ziplist alias works too).
    assert_eq!(c.q("CONFIG SET hash-max-ziplist-entries 4"), ok());
    for i in 0..4 {
        assert_eq!(c.cmd(&["HSET", "e", &format!("f{i}"), "v"]), int(1));
    }
    assert_eq!(c.q("OBJECT ENCODING e"), bulk("listpack"));
    assert_eq!(c.q("HSET e f4 v"), int(1));
    assert_eq!(c.q("OBJECT ENCODING e"), bulk("hashtable"));
    // HINCRBYFLOAT result longer than the value limit converts.
    assert_eq!(c.q("CONFIG SET hash-max-listpack-value 8"), ok());
    assert_eq!(c.q("HSET small tmp 0"), int(1));
    assert_eq!(c.q("HINCRBYFLOAT small tmp 0.000005"), bulk("0.000005"));
    assert_eq!(c.q("OBJECT ENCODING small"), bulk("listpack"));
    assert_eq!(c.q("HINCRBYFLOAT small tmp 0.0000005"), bulk("0.0000055"));
    assert_eq!(c.q("OBJECT ENCODING small"), bulk("hashtable"));
    assert_eq!(c.q("HINCRBY big abcdefghi 1"), int(1));
    assert_eq!(c.q("OBJECT ENCODING big"), bulk("hashtable"));
    // Contents survive conversion, including int-looking values.
    assert_eq!(c.q("CONFIG SET hash-max-listpack-value 64"), ok());
    assert_eq!(c.q("CONFIG SET hash-max-listpack-entries 3"), ok());
    assert_eq!(c.q("HSET m i -12 j 007 k 9223372036854775808 l x"), int(4));
    assert_eq!(c.q("OBJECT ENCODING m"), bulk("hashtable"));
    assert_eq!(
        sorted(&c.q("HGETALL m")),
        vec!["-12", "007", "9223372036854775808", "i", "j", "k", "l", "x"]
    );
    assert_eq!(c.q("HSTRLEN m j"), int(3));
    assert!(c.q("MEMORY USAGE m").as_int().unwrap_or(0) > 0);
}

#[test]
fn big_hash_against_model() {
    let (_s, mut c) = start();
    let mut model: HashMap<String, String> = HashMap::new();
    for i in 0..2000 {
        let f = format!("field:{}", i * 7 % 1500);
        let v = format!("v{i}");
        let r = c.cmd(&["HSET", "big", &f, &v]);
        assert_eq!(r, int(model.insert(f, v).is_none() as i64));
        if i % 3 == 0 {
            let f = format!("field:{}", i % 1500);
            let r = c.cmd(&["HDEL", "big", &f]);
            assert_eq!(r, int(model.remove(&f).is_some() as i64));
        }
    }
    assert_eq!(c.q("OBJECT ENCODING big"), bulk("hashtable"));
    assert_eq!(c.q("HLEN big"), int(model.len() as i64));
    let all = strings(&c.q("HGETALL big"));
    let got: HashMap<String, String> = all
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    assert_eq!(got, model);
    for (f, v) in model.iter().take(100) {
        assert_eq!(c.cmd(&["HGET", "big", f]), bulk(v));
    }
}

#[test]
fn hrandfield_shapes() {
    let (_s, mut c) = start();
    assert_eq!(c.q("HRANDFIELD nokey"), Resp::Nil);
    assert_eq!(c.q("HRANDFIELD nokey 5"), arr(vec![]));
    assert_eq!(c.q("HSET h a 1 b 2 c 3"), int(3));
    assert_eq!(c.q("HRANDFIELD h 0"), arr(vec![]));
    let one = c.q("HRANDFIELD h");
    assert!(["a", "b", "c"].iter().any(|x| one == bulk(x)), "{one}");
    assert_eq!(sorted(&c.q("HRANDFIELD h 10")), vec!["a", "b", "c"]);
    assert_eq!(
        c.q("HRANDFIELD h 10 WITHVALUES"),
        bulks(&["a", "1", "b", "2", "c", "3"])
    );
    let two = strings(&c.q("HRANDFIELD h 2"));
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1]);
    let rep = strings(&c.q("HRANDFIELD h -20 WITHVALUES"));
    assert_eq!(rep.len(), 40);
    for p in rep.chunks(2) {
        let expect = match p[0].as_str() {
            "a" => "1",
            "b" => "2",
            "c" => "3",
            x => panic!("unknown field {x}"),
        };
        assert_eq!(p[1], expect);
    }
    assert_eq!(strings(&c.q("HRANDFIELD h -1001")).len(), 1001);
    assert_eq!(
        c.q("HRANDFIELD h x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q("HRANDFIELD h 1 WITHVALUE"), err("ERR syntax error"));
    assert_eq!(c.q("HRANDFIELD h 1 WITHVALUES x"), err("ERR syntax error"));
    assert_eq!(
        c.q("HRANDFIELD h -9223372036854775808"),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
    assert_eq!(
        c.q("HRANDFIELD h -9223372036854770000 WITHVALUES"),
        err("ERR value is out of range")
    );
    // RESP3: WITHVALUES pairs are 2-element arrays.
    assert!(!c.q("HELLO 3").is_error());
    match c.q("HRANDFIELD h 2 WITHVALUES") {
        Resp::Array(v) => {
            assert_eq!(v.len(), 2);
            for p in v {
                assert!(matches!(&p, Resp::Array(x) if x.len() == 2), "{p}");
            }
        }
        other => panic!("{other}"),
    }
    match c.q("HRANDFIELD h -3") {
        Resp::Array(v) => assert!(v.len() == 3 && v.iter().all(|x| x.as_bytes().is_some())),
        other => panic!("{other}"),
    }
    assert_eq!(
        c.q("HGETALL h"),
        Resp::Map(vec![
            (bulk("a"), bulk("1")),
            (bulk("b"), bulk("2")),
            (bulk("c"), bulk("3"))
        ])
    );
    assert_eq!(c.q("HGETALL nokey"), Resp::Map(vec![]));
    assert_eq!(c.q("HRANDFIELD nokey"), Resp::Nil);
    // Big hash: distinct picks and uniform-ish coverage.
    assert!(!c.q("HELLO 2").is_error());
    for i in 0..1000 {
        c.cmd(&["HSET", "big", &format!("f{i}"), &i.to_string()]);
    }
    for n in [10, 400, 999, 1000, 5000] {
        let got = strings(&c.cmd(&["HRANDFIELD", "big", &n.to_string()]));
        assert_eq!(got.len(), n.min(1000));
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), got.len());
    }
    let pairs = strings(&c.q("HRANDFIELD big 50 WITHVALUES"));
    for p in pairs.chunks(2) {
        assert_eq!(p[0], format!("f{}", p[1]));
    }
}

fn scan_all(
    c: &mut RawConn,
    key: &str,
    extra: &[&str],
    mut between: impl FnMut(&mut RawConn),
) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let mut args = vec!["HSCAN", key, &cursor];
        args.extend_from_slice(extra);
        let r = c.cmd(&args);
        let Resp::Array(v) = r else { panic!("{r}") };
        cursor = String::from_utf8(v[0].as_bytes().unwrap().to_vec()).unwrap();
        out.extend(strings(&v[1]));
        between(c);
        if cursor == "0" {
            return out;
        }
    }
}

#[test]
fn hscan_small_and_big() {
    let (_s, mut c) = start();
    assert_eq!(c.q("HSCAN nokey 0"), arr(vec![bulk("0"), arr(vec![])]));
    assert_eq!(c.q("HSCAN nokey x"), err("ERR invalid cursor"));
    assert_eq!(c.q("HSET h a 1 b 2 ab 3"), int(3));
    assert_eq!(
        c.q("HSCAN h 0"),
        arr(vec![bulk("0"), bulks(&["a", "1", "b", "2", "ab", "3"])])
    );
    assert_eq!(
        c.q("HSCAN h 0 MATCH a*"),
        arr(vec![bulk("0"), bulks(&["a", "1", "ab", "3"])])
    );
    assert_eq!(
        c.q("HSCAN h 0 NOVALUES"),
        arr(vec![bulk("0"), bulks(&["a", "b", "ab"])])
    );
    assert_eq!(c.q("HSCAN h 0 COUNT 0"), err("ERR syntax error"));
    assert_eq!(
        c.q("HSCAN h 0 COUNT x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.q("HSCAN h 0 FOO"), err("ERR syntax error"));
    assert_eq!(c.q("HSCAN h 0 MATCH"), err("ERR syntax error"));
    // Options are parsed after the key lookup, as in Redis.
    assert_eq!(
        c.q("HSCAN nokey 0 COUNT 0"),
        arr(vec![bulk("0"), arr(vec![])])
    );

    for i in 0..1000 {
        c.cmd(&["HSET", "big", &format!("f{i}"), "v"]);
    }
    let got = scan_all(&mut c, "big", &["COUNT", "7"], |_| {});
    let set: HashSet<&String> = got.iter().step_by(2).collect();
    assert_eq!(set.len(), 1000);
    let got = scan_all(&mut c, "big", &["MATCH", "f1*", "NOVALUES"], |_| {});
    let set: HashSet<&String> = got.iter().collect();
    assert_eq!(set.len(), 111);
}

#[test]
fn hscan_guarantee_while_growing_and_shrinking() {
    let (_s, mut c) = start();
    for i in 0..600 {
        c.cmd(&["HSET", "h", &format!("stable{i}"), "v"]);
    }
    let mut round = 0;
    let got = scan_all(&mut c, "h", &["COUNT", "5", "NOVALUES"], |c| {
        round += 1;
        // Grow fast (several doublings), then delete everything that was added.
        if round < 40 {
            let mut args = vec!["HSET".to_string(), "h".to_string()];
            for j in 0..150 {
                args.push(format!("tmp{round}_{j}"));
                args.push("x".to_string());
            }
            c.cmd(&args);
        } else if round < 80 {
            let mut args = vec!["HDEL".to_string(), "h".to_string()];
            for j in 0..150 {
                args.push(format!("tmp{}_{j}", round - 40));
            }
            c.cmd(&args);
        }
    });
    let set: HashSet<&String> = got.iter().collect();
    for i in 0..600 {
        assert!(set.contains(&format!("stable{i}")), "missed stable{i}");
    }
}

#[test]
fn field_expiry_commands() {
    let (_s, mut c) = start();
    // Missing key: -2 per field.
    assert_eq!(c.q("HEXPIRE nokey 100 FIELDS 2 a b"), ints(&[-2, -2]));
    assert_eq!(c.q("HTTL nokey FIELDS 1 a"), ints(&[-2]));
    assert_eq!(c.q("HPERSIST nokey FIELDS 1 a"), ints(&[-2]));
    assert_eq!(c.q("HSET h a 1 b 2 c 3 d 4"), int(4));
    assert_eq!(c.q("HTTL h FIELDS 2 a zz"), ints(&[-1, -2]));
    assert_eq!(c.q("HEXPIRE h 100 FIELDS 2 a zz"), ints(&[1, -2]));
    assert_eq!(c.q("HTTL h FIELDS 2 a b"), ints(&[100, -1]));
    let pttl = c.q("HPTTL h FIELDS 1 a");
    let Resp::Array(v) = &pttl else { panic!() };
    let ms = v[0].as_int().unwrap();
    assert!((99_000..=100_000).contains(&ms), "{ms}");
    // NX / XX / GT / LT.
    assert_eq!(c.q("HEXPIRE h 200 NX FIELDS 2 a b"), ints(&[0, 1]));
    assert_eq!(c.q("HEXPIRE h 300 XX FIELDS 2 a c"), ints(&[1, 0]));
    assert_eq!(c.q("HEXPIRE h 250 GT FIELDS 3 a b c"), ints(&[0, 1, 0]));
    assert_eq!(c.q("HEXPIRE h 150 LT FIELDS 3 a b c"), ints(&[1, 1, 1]));
    assert_eq!(c.q("HTTL h FIELDS 4 a b c d"), ints(&[150, 150, 150, -1]));
    // Absolute forms.
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = now_s + 1000;
    assert_eq!(
        c.cmd(&["HEXPIREAT", "h", &at.to_string(), "FIELDS", "1", "d"]),
        ints(&[1])
    );
    assert_eq!(c.q("HEXPIRETIME h FIELDS 2 d zz"), ints(&[at as i64, -2]));
    assert_eq!(
        c.q("HPEXPIRETIME h FIELDS 1 d"),
        ints(&[(at * 1000) as i64])
    );
    assert_eq!(
        c.cmd(&[
            "HPEXPIREAT",
            "h",
            &(at * 1000 + 5).to_string(),
            "FIELDS",
            "1",
            "d"
        ]),
        ints(&[1])
    );
    assert_eq!(
        c.q("HPEXPIRETIME h FIELDS 1 d"),
        ints(&[(at * 1000 + 5) as i64])
    );
    // HPERSIST.
    assert_eq!(c.q("HPERSIST h FIELDS 3 a zz a"), ints(&[1, -2, -1]));
    assert_eq!(c.q("HTTL h FIELDS 1 a"), ints(&[-1]));
    // HSET drops a field's TTL; HINCRBY keeps it.
    assert_eq!(c.q("HSET h b 5"), int(0));
    assert_eq!(c.q("HTTL h FIELDS 1 b"), ints(&[-1]));
    assert_eq!(c.q("HSET h n 1"), int(1));
    assert_eq!(c.q("HEXPIRE h 100 FIELDS 1 n"), ints(&[1]));
    assert_eq!(c.q("HINCRBY h n 1"), int(2));
    assert_eq!(c.q("HTTL h FIELDS 1 n"), ints(&[100]));
    // A time in the past deletes (2); the last field's deletion deletes the key.
    assert_eq!(c.q("HPEXPIREAT h 1 FIELDS 2 a zz"), ints(&[2, -2]));
    assert_eq!(c.q("HEXISTS h a"), int(0));
    assert_eq!(c.q("HSET one x 1"), int(1));
    assert_eq!(c.q("HEXPIRE one 0 FIELDS 1 x"), ints(&[2]));
    assert_eq!(c.q("EXISTS one"), int(0));
}

#[test]
fn field_expiry_errors() {
    let (_s, mut c) = start();
    assert_eq!(c.q("HSET h a 1"), int(1));
    let cases = [
        (
            "HEXPIRE h x FIELDS 1 a",
            "ERR value is not an integer or out of range",
        ),
        (
            "HEXPIRE h -1 FIELDS 1 a",
            "ERR invalid expire time, must be >= 0",
        ),
        (
            "HEXPIRE h 70368744177 FIELDS 1 a",
            "ERR invalid expire time in 'hexpire' command",
        ),
        (
            "HPEXPIRE h 70368744177663 FIELDS 1 a",
            "ERR invalid expire time in 'hpexpire' command",
        ),
        (
            "HEXPIREAT h 70368744178 FIELDS 1 a",
            "ERR invalid expire time in 'hexpireat' command",
        ),
        (
            "HEXPIRE h 10 FIELD 1 a",
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ),
        (
            "HEXPIRE h 10 NX XX FIELDS 1 a",
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ),
        (
            "HEXPIRE h 10 FIELDS 0 a",
            "ERR Parameter `numFields` should be greater than 0",
        ),
        (
            "HEXPIRE h 10 FIELDS x a",
            "ERR Parameter `numFields` should be greater than 0",
        ),
        (
            "HEXPIRE h 10 FIELDS 2 a",
            "ERR The `numfields` parameter must match the number of arguments",
        ),
        (
            "HEXPIRE h 10 FIELDS 1 a b",
            "ERR The `numfields` parameter must match the number of arguments",
        ),
        (
            "HTTL h FIELD 1 a",
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ),
        (
            "HTTL h FIELDS 0 a",
            "ERR Number of fields must be a positive integer",
        ),
        (
            "HPERSIST h FIELDS -1 a",
            "ERR Number of fields must be a positive integer",
        ),
        (
            "HPTTL h FIELDS 3 a b",
            "ERR The `numfields` parameter must match the number of arguments",
        ),
        (
            "HEXPIRE h 10 FIELDS 1",
            "ERR wrong number of arguments for 'hexpire' command",
        ),
        (
            "HTTL h FIELDS 1",
            "ERR wrong number of arguments for 'httl' command",
        ),
    ];
    for (cmd, e) in cases {
        assert_eq!(c.q(cmd), err(e), "{cmd}");
    }
    assert_eq!(c.q("HTTL h FIELDS 1 a"), ints(&[-1]));
}

#[test]
fn expired_fields_are_invisible_and_reclaimed() {
    let (_s, mut c) = start();
    assert_eq!(c.q("HSET h a 1 b 2 c 3"), int(3));
    assert_eq!(c.q("HPEXPIRE h 50 FIELDS 2 a b"), ints(&[1, 1]));
    assert_eq!(c.q("HSET big x 1"), int(1));
    let long = "y".repeat(100);
    assert_eq!(c.cmd(&["HSET", "big", "long", &long]), int(1));
    assert_eq!(c.q("OBJECT ENCODING big"), bulk("hashtable"));
    assert_eq!(c.q("HPEXPIRE big 50 FIELDS 2 x long"), ints(&[1, 1]));
    std::thread::sleep(Duration::from_millis(120));
    // Passive: every read hides expired fields.
    assert_eq!(c.q("HGET h a"), Resp::Nil);
    assert_eq!(c.q("HLEN h"), int(1));
    assert_eq!(c.q("HGETALL h"), bulks(&["c", "3"]));
    assert_eq!(c.q("HTTL h FIELDS 2 a c"), ints(&[-2, -1]));
    // The hash whose fields all expired is gone.
    assert_eq!(c.q("EXISTS big"), int(0));

    // Active: without touching the key, the shard's expiry step deletes it.
    assert_eq!(c.q("HSET act f 1 g 2"), int(2));
    assert_eq!(c.q("HPEXPIRE act 30 FIELDS 2 f g"), ints(&[1, 1]));
    assert_eq!(c.q("HSET keep f 1 g 2"), int(2));
    assert_eq!(c.q("HPEXPIRE keep 30 FIELDS 1 f"), ints(&[1]));
    let mut gone = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(20));
        // DBSIZE does not touch individual keys.
        if c.q("DBSIZE") == int(2) {
            gone = true;
            break;
        }
    }
    assert!(gone, "act was not reclaimed actively");
    assert_eq!(c.q("HGETALL keep"), bulks(&["g", "2"]));
    // A renamed hash keeps its TTLs and still expires.
    assert_eq!(c.q("HSET r f 1 g 2"), int(2));
    assert_eq!(c.q("HPEXPIRE r 40 FIELDS 1 f"), ints(&[1]));
    assert_eq!(c.q("RENAME r r2"), ok());
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(c.q("HGETALL r2"), bulks(&["g", "2"]));
}
