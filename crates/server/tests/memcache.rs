//! The memcached protocol on damselfly's `--memcached_port`: text and meta commands as memcached
//! 1.6.18 answers them (every expectation here was checked against real memcached:
//! `MC_TEST_TARGET=memcached cargo test -p damselfly --test memcache` runs the same tests against
//! it; the damselfly-only ones, sharing the keyspace with RESP, then return early).

mod common;
#[path = "common/memcached.rs"]
mod memcached;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use memcached::{McConn, McTarget, Which};

fn target() -> McTarget {
    McTarget::start(Which::from_env("MC_TEST_TARGET"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `get key` → Some((flags, value)) / None.
fn get(c: &mut McConn, key: &str) -> Option<(u32, String)> {
    let r = c.get_all(&format!("get {key}\r\n"));
    match r.as_slice() {
        [] => None,
        [v] => {
            let (head, data) = v.split_once("\r\n").unwrap();
            let t: Vec<&str> = head.split(' ').collect();
            assert_eq!(t[0], "VALUE", "{v:?}");
            assert_eq!(t[1], key);
            assert_eq!(t[3].parse::<usize>().unwrap(), data.len());
            Some((t[2].parse().unwrap(), data.to_string()))
        }
        more => panic!("get {key}: {more:?}"),
    }
}

fn set(c: &mut McConn, key: &str, flags: u32, exp: i64, val: &str) {
    let r = c.cmd(&format!(
        "set {key} {flags} {exp} {}\r\n{val}\r\n",
        val.len()
    ));
    assert_eq!(r, "STORED", "set {key}");
}

fn gets_cas(c: &mut McConn, key: &str) -> u64 {
    let r = c.get_all(&format!("gets {key}\r\n"));
    assert_eq!(r.len(), 1, "gets {key}: {r:?}");
    let head = r[0].split("\r\n").next().unwrap();
    head.split(' ').nth(4).unwrap().parse().unwrap()
}

#[test]
fn basic_text_commands() {
    let t = target();
    let mut c = t.conn();
    assert_eq!(get(&mut c, "a"), None);
    set(&mut c, "a", 0, 0, "hello");
    assert_eq!(get(&mut c, "a"), Some((0, "hello".into())));
    assert_eq!(c.cmd("add a 0 0 1\r\nx\r\n"), "NOT_STORED");
    assert_eq!(c.cmd("add b 5 0 2\r\nbb\r\n"), "STORED");
    assert_eq!(get(&mut c, "b"), Some((5, "bb".into())));
    assert_eq!(c.cmd("replace nope 0 0 1\r\nx\r\n"), "NOT_STORED");
    assert_eq!(c.cmd("replace a 7 0 3\r\nbye\r\n"), "STORED");
    assert_eq!(get(&mut c, "a"), Some((7, "bye".into())));
    assert_eq!(c.cmd("append a 99 0 2\r\n!!\r\n"), "STORED");
    assert_eq!(c.cmd("prepend a 99 0 2\r\n<<\r\n"), "STORED");
    // append/prepend keep the item's flags.
    assert_eq!(get(&mut c, "a"), Some((7, "<<bye!!".into())));
    assert_eq!(c.cmd("append nope 0 0 1\r\nx\r\n"), "NOT_STORED");
    assert_eq!(c.cmd("prepend nope 0 0 1\r\nx\r\n"), "NOT_STORED");
    // Empty values.
    set(&mut c, "e", 0, 0, "");
    assert_eq!(get(&mut c, "e"), Some((0, String::new())));
    // Multi-key get: hits only, in request order, a repeated key twice.
    assert_eq!(
        c.get_all("get a nope b a\r\n"),
        vec![
            "VALUE a 7 7\r\n<<bye!!".to_string(),
            "VALUE b 5 2\r\nbb".into(),
            "VALUE a 7 7\r\n<<bye!!".into()
        ]
    );
    assert_eq!(c.cmd("touch a 1000\r\n"), "TOUCHED");
    assert_eq!(c.cmd("touch nope 1000\r\n"), "NOT_FOUND");
    assert_eq!(
        c.get_all("gat 0 a nope\r\n"),
        vec!["VALUE a 7 7\r\n<<bye!!".to_string()]
    );
    assert_eq!(c.cmd("delete a\r\n"), "DELETED");
    assert_eq!(c.cmd("delete a\r\n"), "NOT_FOUND");
    assert_eq!(get(&mut c, "a"), None);
    assert_eq!(c.cmd("verbosity 1\r\n"), "OK");
    assert!(c.cmd("version\r\n").starts_with("VERSION "));
    assert_eq!(c.cmd("flush_all\r\n"), "OK");
    assert_eq!(get(&mut c, "b"), None);
    assert_eq!(c.cmd("flush_all 0\r\n"), "OK");
    assert_eq!(c.cmd("bogus\r\n"), "ERROR");
    assert_eq!(c.cmd("GET b\r\n"), "ERROR", "commands are case-sensitive");
    assert_eq!(c.cmd("\r\n"), "ERROR");
    // Keys: 250 bytes is the longest accepted.
    let k250 = "k".repeat(250);
    set(&mut c, &k250, 0, 0, "x");
    assert_eq!(get(&mut c, &k250), Some((0, "x".into())));
    let k251 = "k".repeat(251);
    assert_eq!(
        c.cmd(&format!("get {k251}\r\n")),
        "CLIENT_ERROR bad command line format"
    );
    // quit closes the connection.
    c.send(b"quit\r\n");
    let (rest, closed) = c.drain(Duration::from_secs(2));
    assert!(rest.is_empty() && closed, "quit: {rest:?} closed={closed}");
}

#[test]
fn flags_are_32_bit() {
    let t = target();
    let mut c = t.conn();
    for f in [0u32, 1, 65535, 65536, 2147483648, 4294967295] {
        set(&mut c, "f", f, 0, "v");
        assert_eq!(get(&mut c, "f"), Some((f, "v".into())), "flags {f}");
        assert_eq!(c.cmd(&format!("ms f 1 F{f}\r\nw\r\n")), "HD");
        c.send(b"mg f f v\r\n");
        assert_eq!(c.reply(), format!("VA 1 f{f}\r\nw"));
    }
    assert_eq!(
        c.cmd("set f -1 0 1\r\nx\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    // The data line is then read as a command.
    assert_eq!(c.line_str(), "ERROR");
}

#[test]
fn cas_semantics() {
    let t = target();
    let mut c = t.conn();
    set(&mut c, "c", 0, 0, "one");
    let c1 = gets_cas(&mut c, "c");
    assert_eq!(gets_cas(&mut c, "c"), c1, "reads do not change the cas");
    assert_eq!(c.cmd(&format!("cas c 3 0 3 {c1}\r\ntwo\r\n")), "STORED");
    assert_eq!(get(&mut c, "c"), Some((3, "two".into())));
    let c2 = gets_cas(&mut c, "c");
    assert_ne!(c2, c1);
    assert_eq!(c.cmd(&format!("cas c 0 0 5 {c1}\r\nthree\r\n")), "EXISTS");
    assert_eq!(get(&mut c, "c"), Some((3, "two".into())));
    assert_eq!(c.cmd(&format!("cas nope 0 0 1 {c1}\r\nx\r\n")), "NOT_FOUND");
    // Every write gives a new cas.
    assert_eq!(c.cmd("append c 0 0 1\r\n!\r\n"), "STORED");
    let c3 = gets_cas(&mut c, "c");
    assert!(c3 != c2 && c3 != c1);
    assert_eq!(c.cmd("incr n 1\r\n"), "NOT_FOUND");
    set(&mut c, "n", 0, 0, "5");
    let n1 = gets_cas(&mut c, "n");
    assert_eq!(c.cmd("incr n 1\r\n"), "6");
    assert_ne!(gets_cas(&mut c, "n"), n1);
    // cas noreply: silent either way.
    let c4 = gets_cas(&mut c, "c");
    c.send(
        format!("cas c 0 0 1 {c4} noreply\r\nz\r\ncas c 0 0 1 {c4} noreply\r\ny\r\n").as_bytes(),
    );
    assert_eq!(get(&mut c, "c"), Some((0, "z".into())));
    // Meta: mg c returns the same number gets does; ms C compares it.
    let c5 = gets_cas(&mut c, "c");
    assert_eq!(c.cmd("mg c c\r\n"), format!("HD c{c5}"));
    assert_eq!(c.cmd(&format!("ms c 1 C{}\r\nq\r\n", c5 + 1000)), "EX");
    assert_eq!(c.cmd(&format!("ms c 1 C{c5}\r\nq\r\n")), "HD");
    assert_eq!(c.cmd(&format!("md c C{c5}\r\n")), "EX");
    assert_eq!(c.cmd(&format!("ms nope 1 C{c5}\r\nq\r\n")), "NF");
}

#[test]
fn incr_decr_rules() {
    let t = target();
    let mut c = t.conn();
    set(&mut c, "n", 0, 0, "18446744073709551615");
    assert_eq!(c.cmd("incr n 1\r\n"), "0", "incr wraps at 2^64");
    set(&mut c, "n", 0, 0, "18446744073709551615");
    assert_eq!(c.cmd("incr n 2\r\n"), "1");
    assert_eq!(c.cmd("incr n 18446744073709551615\r\n"), "0");
    set(&mut c, "n", 0, 0, "10");
    assert_eq!(c.cmd("decr n 3\r\n"), "7");
    assert_eq!(c.cmd("decr n 100\r\n"), "0", "decr stops at 0");
    assert_eq!(c.cmd("decr n 1\r\n"), "0");
    // A shorter result may be space-padded in place (memcached does); the number is what counts.
    let (_, v) = get(&mut c, "n").unwrap();
    assert_eq!(v.trim_end(), "0");
    assert_eq!(c.cmd("incr n 41\r\n"), "41");
    assert_eq!(get(&mut c, "n").unwrap().1.trim_end(), "41");
    set(&mut c, "big", 0, 0, "99");
    assert_eq!(c.cmd("incr big 1\r\n"), "100");
    assert_eq!(get(&mut c, "big"), Some((0, "100".into())));
    set(&mut c, "s", 0, 0, "abc");
    assert_eq!(
        c.cmd("incr s 1\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value"
    );
    assert_eq!(
        c.cmd("decr s 1\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value"
    );
    set(&mut c, "s", 0, 0, "12a");
    assert_eq!(
        c.cmd("incr s 1\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value"
    );
    assert_eq!(c.cmd("incr nope 1\r\n"), "NOT_FOUND");
    assert_eq!(c.cmd("decr nope 1\r\n"), "NOT_FOUND");
    assert_eq!(
        c.cmd("incr n -1\r\n"),
        "CLIENT_ERROR invalid numeric delta argument"
    );
    assert_eq!(
        c.cmd("incr n abc\r\n"),
        "CLIENT_ERROR invalid numeric delta argument"
    );
    assert_eq!(
        c.cmd("incr n 18446744073709551616\r\n"),
        "CLIENT_ERROR invalid numeric delta argument"
    );
    // Flags survive incr.
    set(&mut c, "fl", 42, 0, "1");
    assert_eq!(c.cmd("incr fl 1\r\n"), "2");
    assert_eq!(get(&mut c, "fl"), Some((42, "2".into())));
}

#[test]
fn exptime_rules() {
    let t = target();
    let mut c = t.conn();
    // Negative: gone at once (and a previous value with it).
    set(&mut c, "x", 0, 0, "old");
    set(&mut c, "x", 0, -1, "new");
    assert_eq!(get(&mut c, "x"), None);
    // Over 30 days: an absolute unix time; one in the past is gone at once.
    set(&mut c, "past", 0, now() as i64 - 10, "v");
    assert_eq!(get(&mut c, "past"), None);
    set(&mut c, "past2", 0, 2_592_001, "v");
    assert_eq!(get(&mut c, "past2"), None);
    // One 10 s ahead is there, with about 10 s to live.
    set(&mut c, "future", 0, now() as i64 + 10, "v");
    assert_eq!(get(&mut c, "future"), Some((0, "v".into())));
    let r = c.cmd("mg future t\r\n");
    let ttl: i64 = r.strip_prefix("HD t").unwrap().parse().unwrap();
    assert!((7..=11).contains(&ttl), "ttl {ttl}");
    // 30 days exactly is still relative.
    set(&mut c, "rel", 0, 2_592_000, "v");
    let r = c.cmd("mg rel t\r\n");
    let ttl: i64 = r.strip_prefix("HD t").unwrap().parse().unwrap();
    assert!((2_591_990..=2_592_001).contains(&ttl), "ttl {ttl}");
    // No expiry: t-1.
    set(&mut c, "forever", 0, 0, "v");
    assert_eq!(c.cmd("mg forever t\r\n"), "HD t-1");
    // touch / gat with a negative time expire the item.
    assert_eq!(c.cmd("touch forever -1\r\n"), "TOUCHED");
    assert_eq!(get(&mut c, "forever"), None);
    set(&mut c, "g", 0, 0, "v");
    assert_eq!(
        c.get_all("gat -1 g\r\n"),
        vec!["VALUE g 0 1\r\nv".to_string()]
    );
    assert_eq!(get(&mut c, "g"), None);
    // A real expiry: 1 s relative is gone within about 2 s.
    set(&mut c, "short", 0, 1, "v");
    let t0 = Instant::now();
    while get(&mut c, "short").is_some() {
        assert!(
            t0.elapsed() < Duration::from_secs(4),
            "1 s item still there"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        c.cmd("touch g abc\r\n"),
        "CLIENT_ERROR invalid exptime argument"
    );
}

#[test]
fn get_500_keys_in_order() {
    let t = target();
    let mut c = t.conn();
    let mut w = Vec::new();
    for i in 0..500 {
        if i % 3 != 0 {
            w.extend_from_slice(
                format!("set key:{i} {i} 0 {}\r\nv{i}\r\n", 1 + i.to_string().len()).as_bytes(),
            );
        }
    }
    w.extend_from_slice(b"mn\r\n");
    c.send(&w);
    for i in 0..500 {
        if i % 3 != 0 {
            assert_eq!(c.line_str(), "STORED");
        }
    }
    assert_eq!(c.line_str(), "MN");
    let keys: Vec<String> = (0..500).rev().map(|i| format!("key:{i}")).collect();
    let r = c.get_all(&format!("get {}\r\n", keys.join(" ")));
    let want: Vec<String> = (0..500)
        .rev()
        .filter(|i| i % 3 != 0)
        .map(|i| format!("VALUE key:{i} {i} {}\r\nv{i}", 1 + i.to_string().len()))
        .collect();
    assert_eq!(r.len(), want.len());
    assert_eq!(r, want);
    let r = c.get_all(&format!("gets {}\r\n", keys.join(" ")));
    assert_eq!(r.len(), want.len());
}

#[test]
fn pipeline_of_10000_commands_in_one_write() {
    let t = target();
    let mut s = t.stream();
    let mut w = Vec::new();
    for i in 0..10_000 {
        match i % 4 {
            0 => w.extend_from_slice(
                format!("set p{} 0 0 {}\r\n{i}\r\n", i % 100, i.to_string().len()).as_bytes(),
            ),
            1 => w.extend_from_slice(format!("get p{}\r\n", (i - 1) % 100).as_bytes()),
            2 => w.extend_from_slice(format!("incr p{} 1\r\n", (i - 2) % 100).as_bytes()),
            _ => w.extend_from_slice(format!("mg p{} v\r\n", (i - 3) % 100).as_bytes()),
        }
    }
    let mut want = Vec::new();
    for i in 0..10_000 {
        match i % 4 {
            0 => want.extend_from_slice(b"STORED\r\n"),
            1 => {
                let v = (i - 1).to_string();
                want.extend_from_slice(
                    format!("VALUE p{} 0 {}\r\n{v}\r\nEND\r\n", (i - 1) % 100, v.len()).as_bytes(),
                )
            }
            2 => want.extend_from_slice(format!("{}\r\n", i - 1).as_bytes()),
            _ => {
                // The incremented value, space-padded to the old length where it got shorter
                // (never here: i-1 has at least as many digits as i-3).
                let v = (i - 2).to_string();
                want.extend_from_slice(format!("VA {}\r\n{v}\r\n", v.len()).as_bytes())
            }
        }
    }
    let mut writer = s.try_clone().unwrap();
    let h = std::thread::spawn(move || writer.write_all(&w).unwrap());
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while got.len() < want.len() {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed after {} bytes", got.len());
        got.extend_from_slice(&buf[..n]);
    }
    h.join().unwrap();
    if got != want {
        let p = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "pipeline replies differ at byte {p}: got {:?} want {:?}",
            String::from_utf8_lossy(&got[p.saturating_sub(40)..(p + 40).min(got.len())]),
            String::from_utf8_lossy(&want[p.saturating_sub(40)..(p + 40).min(want.len())])
        );
    }
}

#[test]
fn noreply() {
    let t = target();
    let mut c = t.conn();
    c.send(
        b"set a 1 0 1 noreply\r\n1\r\nadd a 0 0 1 noreply\r\n2\r\nreplace a 2 0 1 noreply\r\n3\r\n\
          append a 0 0 1 noreply\r\n4\r\nprepend a 0 0 1 noreply\r\n0\r\nincr a 5 noreply\r\n\
          decr a 1 noreply\r\ntouch a 100 noreply\r\nset d 0 0 1 noreply\r\nx\r\n\
          delete d noreply\r\ndelete d noreply\r\nincr nope 1 noreply\r\nflush_all noreply\r\n\
          set z 0 0 1 noreply\r\nz\r\nmn\r\n",
    );
    assert_eq!(c.line_str(), "MN", "noreply commands answered");
    assert_eq!(get(&mut c, "a"), None, "flush_all noreply flushed");
    assert_eq!(get(&mut c, "z"), Some((0, "z".into())));
    c.send(b"set a 1 0 1 noreply\r\n1\r\nincr a 5 noreply\r\nmn\r\n");
    assert_eq!(c.line_str(), "MN");
    assert_eq!(get(&mut c, "a"), Some((1, "6".into())));
    // Meta quiet mode: ms/md successes are silent, mg misses are silent, failures are not.
    c.send(b"ms q 1 q\r\nx\r\nmg q v q\r\nmg nope v q\r\nmd nope q\r\nms q 1 q ME\r\ny\r\nmn\r\n");
    assert_eq!(c.reply(), "VA 1\r\nx");
    assert_eq!(c.line_str(), "NF");
    assert_eq!(c.line_str(), "NS");
    assert_eq!(c.line_str(), "MN");
}

#[test]
fn one_keyspace_with_resp() {
    let t = target();
    let Some(srv) = t.resp() else {
        return; // memcached has no RESP side
    };
    let mut c = t.conn();
    let mut r = srv.client();
    set(&mut c, "shared", 0, 0, "from-memcache");
    let v: Option<Vec<u8>> = redis::cmd("GET").arg("shared").query(&mut r).unwrap();
    assert_eq!(v.as_deref(), Some(&b"from-memcache"[..]));
    let _: () = redis::cmd("SET")
        .arg("fromresp")
        .arg("hello")
        .query(&mut r)
        .unwrap();
    assert_eq!(get(&mut c, "fromresp"), Some((0, "hello".into())));
    let _: () = redis::cmd("DEL").arg("shared").query(&mut r).unwrap();
    assert_eq!(get(&mut c, "shared"), None);
    // Many keys, so that they spread over both shards.
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("rk{i}"))
            .arg(i)
            .query(&mut r)
            .unwrap();
    }
    let keys: Vec<String> = (0..50).map(|i| format!("rk{i}")).collect();
    let got = c.get_all(&format!("get {}\r\n", keys.join(" ")));
    assert_eq!(got.len(), 50);
    assert_eq!(c.cmd("incr rk7 3\r\n"), "10");
    let v: i64 = redis::cmd("GET").arg("rk7").query(&mut r).unwrap();
    assert_eq!(v, 10);
}

fn used_memory(srv: &common::Server) -> u64 {
    let mut rc = srv.raw_conn();
    let info = rc.q("INFO memory");
    let text = String::from_utf8_lossy(info.as_bytes().unwrap()).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap_or_else(|| panic!("no used_memory in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Another client still gets answers.
fn assert_responsive(t: &McTarget) {
    let mut c = t.conn();
    set(&mut c, "alive", 0, 0, "yes");
    assert_eq!(get(&mut c, "alive"), Some((0, "yes".into())));
}

#[test]
fn bad_input_binary_garbage() {
    let t = target();
    let mut g = common::Gen(0x1234_5678_9abc_def1);
    for round in 0..20 {
        let mut c = t.conn();
        let mut junk = g.bytes(500 + 100 * round);
        junk[0] = b'z'; // not the binary protocol's magic byte
        c.send(&junk);
        c.send(b"\r\nmn\r\n");
        // memcached answers every line with an error (or closes when a line is too long);
        // whatever it does, the server must go on serving others.
        let _ = c.drain(Duration::from_millis(100));
    }
    assert_responsive(&t);
    // After garbage lines the same connection goes on.
    let mut c = t.conn();
    c.send(b"\x01\x02\x03 \xff\xfe\r\nmn\r\n");
    assert_eq!(c.line_str(), "ERROR");
    assert_eq!(c.line_str(), "MN");
}

#[test]
fn bad_input_huge_announced_set() {
    let t = target();
    let before = t.resp().map(used_memory);
    let mut hog = t.conn();
    // Announces ~2 GB and sends nothing more: memcached refuses it (too large) and swallows what
    // follows; nothing may be allocated up front.
    hog.send(b"set huge 0 0 2000000000\r\n");
    hog.send(&vec![b'a'; 1 << 20]);
    std::thread::sleep(Duration::from_millis(200));
    assert_responsive(&t);
    if let (Some(srv), Some(before)) = (t.resp(), before) {
        let after = used_memory(srv);
        assert!(
            after < before + 64 * 1024 * 1024,
            "used_memory grew from {before} to {after}"
        );
        assert!(srv.rss_kb() < 1024 * 1024, "rss {} KiB", srv.rss_kb());
    }
    // Over INT_MAX: a bad command line, answered at once.
    let mut c = t.conn();
    assert_eq!(
        c.cmd("set huge 0 0 3000000000\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    drop(hog);
    assert_responsive(&t);
}

#[test]
fn bad_input_data_never_arrives() {
    let t = target();
    let mut c = t.conn();
    set(&mut c, "half", 0, 0, "old");
    let mut s = t.stream();
    s.write_all(b"set half 0 0 100\r\n0123456789").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        get(&mut c, "half"),
        Some((0, "old".into())),
        "partial data stored"
    );
    s.shutdown(Shutdown::Both).unwrap();
    drop(s);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(get(&mut c, "half"), Some((0, "old".into())));
    assert_responsive(&t);
}

#[test]
fn bad_input_oversized_value() {
    let t = target();
    let mut c = t.conn();
    let n = 1024 * 1024 + 100 * 1024; // 1.1 MiB, over the default 1 MiB item size
    let mut w = format!("set big 0 0 {n}\r\n").into_bytes();
    w.extend(std::iter::repeat_n(b'x', n));
    w.extend_from_slice(b"\r\n");
    let mut writer = c.stream.try_clone().unwrap();
    let h = std::thread::spawn(move || writer.write_all(&w).unwrap());
    assert_eq!(c.line_str(), "SERVER_ERROR object too large for cache");
    h.join().unwrap();
    // The data was swallowed: the connection goes on.
    set(&mut c, "small", 0, 0, "ok");
    assert_eq!(get(&mut c, "small"), Some((0, "ok".into())));
    assert_eq!(get(&mut c, "big"), None);
    // Same through ms.
    let mut w = format!("ms big {n} T0\r\n").into_bytes();
    w.extend(std::iter::repeat_n(b'x', n));
    w.extend_from_slice(b"\r\nmn\r\n");
    let mut writer = c.stream.try_clone().unwrap();
    let h = std::thread::spawn(move || writer.write_all(&w).unwrap());
    assert_eq!(c.line_str(), "SERVER_ERROR object too large for cache");
    h.join().unwrap();
    assert_eq!(c.line_str(), "MN");
    // Bad data chunk: the announced length is wrong.
    assert_eq!(
        c.cmd("set k 0 0 3\r\nabcdef\r\n"),
        "CLIENT_ERROR bad data chunk"
    );
    assert_eq!(c.line_str(), "ERROR");
    assert_eq!(c.cmd("mn\r\n"), "MN");
}

#[test]
fn meta_get() {
    let t = target();
    let mut c = t.conn();
    assert_eq!(c.cmd("mg m v\r\n"), "EN");
    assert_eq!(c.cmd("ms m 5 F9 T1000\r\nhello\r\n"), "HD");
    // Without flags: HD, no value.
    assert_eq!(c.cmd("mg m\r\n"), "HD");
    let cas = gets_cas(&mut c, "m");
    c.send(b"mg m s v f k O123 c\r\n");
    assert_eq!(c.reply(), format!("VA 5 s5 f9 km O123 c{cas}\r\nhello"));
    let r = c.cmd("mg m t\r\n");
    let ttl: i64 = r.strip_prefix("HD t").unwrap().parse().unwrap();
    assert!((997..=1000).contains(&ttl), "{r}");
    // Quiet: a miss says nothing, a hit is answered; mn flushes.
    c.send(b"mg nope v q\r\nmg m v q\r\nmn\r\n");
    assert_eq!(c.reply(), "VA 5\r\nhello");
    assert_eq!(c.line_str(), "MN");
    // A miss echoes O and k.
    assert_eq!(c.cmd("mg nope O77 k v\r\n"), "EN O77 knope");
    // T updates the TTL.
    assert_eq!(c.cmd("mg m T0\r\n"), "HD");
    assert_eq!(c.cmd("mg m t\r\n"), "HD t-1");
    // base64 keys.
    assert_eq!(c.cmd("ms Zm9v 3 b\r\nbar\r\n"), "HD");
    c.send(b"mg Zm9v b v\r\n");
    assert_eq!(c.reply(), "VA 3\r\nbar");
    assert_eq!(c.cmd("mg !!!! b v\r\n"), "CLIENT_ERROR error decoding key");
    assert_eq!(c.cmd("mg m v v\r\n"), "CLIENT_ERROR duplicate flag");
    assert_eq!(c.cmd("mg m !\r\n"), "CLIENT_ERROR invalid flag");
}

#[test]
fn meta_set_modes() {
    let t = target();
    let mut c = t.conn();
    assert_eq!(c.cmd("ms s 2 ME\r\nv1\r\n"), "HD", "add on a miss");
    assert_eq!(c.cmd("ms s 2 ME\r\nv2\r\n"), "NS", "add on a hit");
    assert_eq!(c.cmd("ms s 2 MA\r\nv3\r\n"), "HD", "append");
    assert_eq!(c.cmd("ms s 2 MP\r\nv0\r\n"), "HD", "prepend");
    assert_eq!(get(&mut c, "s"), Some((0, "v0v1v3".into())));
    assert_eq!(c.cmd("ms s 2 MR\r\nr1\r\n"), "HD", "replace on a hit");
    assert_eq!(c.cmd("ms nope 2 MR\r\nr1\r\n"), "NS", "replace on a miss");
    assert_eq!(c.cmd("ms nope 2 MA\r\nr1\r\n"), "NS", "append on a miss");
    assert_eq!(c.cmd("ms s 2 MS\r\nss\r\n"), "HD");
    assert_eq!(get(&mut c, "s"), Some((0, "ss".into())));
    let r = c.cmd("ms s 2 c k O5\r\nxx\r\n");
    let cas = gets_cas(&mut c, "s");
    assert_eq!(r, format!("HD c{cas} ks O5"));
    assert_eq!(
        c.cmd("ms s 2 MX\r\nxx\r\n"),
        "CLIENT_ERROR invalid mode for ms M token"
    );
    // The refused data block was swallowed.
    assert_eq!(c.cmd("mn\r\n"), "MN");
    assert_eq!(
        c.cmd("ms s abc\r\nxx\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(c.line_str(), "ERROR");
    // T-1: stored already expired.
    assert_eq!(c.cmd("ms s 2 T-1\r\nxx\r\n"), "HD");
    assert_eq!(get(&mut c, "s"), None);
    assert_eq!(c.cmd("ms s 2\r\nab\r\n"), "HD");
    assert_eq!(c.cmd("ms s 1 q\r\nz\r\nmn\r\n"), "MN");
    assert_eq!(get(&mut c, "s"), Some((0, "z".into())));
}

#[test]
fn meta_delete_arithmetic_noop() {
    let t = target();
    let mut c = t.conn();
    assert_eq!(c.cmd("md d\r\n"), "NF");
    assert_eq!(c.cmd("ms d 1\r\nx\r\n"), "HD");
    assert_eq!(c.cmd("md d k O1\r\n"), "HD kd O1");
    assert_eq!(c.cmd("md d\r\n"), "NF");
    // Quiet: success silent.
    assert_eq!(c.cmd("ms d 1\r\nx\r\n"), "HD");
    assert_eq!(c.cmd("md d q\r\nmn\r\n"), "MN");
    assert_eq!(get(&mut c, "d"), None);
    // I: invalidate (stale, a win token for the next reader) instead of removing.
    assert_eq!(c.cmd("ms d 1\r\nx\r\n"), "HD");
    assert_eq!(c.cmd("md d I T30\r\n"), "HD");
    c.send(b"mg d v\r\n");
    assert_eq!(c.reply(), "VA 1 X W\r\nx");
    c.send(b"mg d v\r\n");
    assert_eq!(c.reply(), "VA 1 Z X\r\nx");

    // ma: NF on a miss; N autovivifies with J (initial value, returned as is).
    assert_eq!(c.cmd("ma a\r\n"), "NF");
    c.send(b"ma a N0 J13 v\r\n");
    assert_eq!(c.reply(), "VA 2\r\n13");
    c.send(b"ma a v\r\n");
    assert_eq!(c.reply(), "VA 2\r\n14");
    c.send(b"ma a D10 v\r\n");
    assert_eq!(c.reply(), "VA 2\r\n24");
    c.send(b"ma a MD D100 v\r\n");
    assert_eq!(c.reply(), "VA 1\r\n0", "decr stops at 0");
    c.send(b"ma a M- D1 v\r\n");
    assert_eq!(c.reply(), "VA 1\r\n0");
    c.send(b"ma a MI D18446744073709551615 v\r\n");
    assert_eq!(c.reply(), "VA 20\r\n18446744073709551615");
    c.send(b"ma a M+ D1 v\r\n");
    assert_eq!(c.reply(), "VA 1\r\n0", "incr wraps");
    assert_eq!(c.cmd("ma a\r\n"), "HD");
    let cas = gets_cas(&mut c, "a");
    c.send(b"ma a c t v\r\n");
    let r = c.reply();
    let head = r.split("\r\n").next().unwrap();
    let ncas: u64 = head.split(' ').nth(2).unwrap()[1..].parse().unwrap();
    assert_ne!(ncas, cas);
    assert_eq!(r, format!("VA 1 c{ncas} t-1\r\n2"));
    assert_eq!(c.cmd(&format!("ma a C{cas}\r\n")), "EX");
    assert_eq!(c.cmd(&format!("ma a C{ncas}\r\n")), "HD");
    assert_eq!(
        c.cmd("ma a MX\r\n"),
        "CLIENT_ERROR invalid mode for ma M token"
    );
    assert_eq!(c.cmd("ms s 1\r\nx\r\n"), "HD");
    assert_eq!(
        c.cmd("ma s\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value"
    );
    // mn
    assert_eq!(c.cmd("mn\r\n"), "MN");
    c.send(b"mn\r\nmn\r\nmn\r\n");
    for _ in 0..3 {
        assert_eq!(c.line_str(), "MN");
    }
}

/// Client flags survive a snapshot (an `mc-flags` AUX field before the item, which
/// redis-server skips): DEBUG RELOAD keeps them, and redis-server loads the same file with
/// the values intact.
#[test]
fn flags_survive_snapshots_and_redis_loads_the_file() {
    let t = McTarget::damselfly(&["--proactor_threads", "2", "--dbfilename", "mc.rdb"]);
    let srv = t.resp().expect("damselfly");
    let mut c = t.conn();
    for i in 0..40 {
        set(&mut c, &format!("f{i}"), 1000 + i, 0, &format!("v{i}"));
    }
    set(&mut c, "plain", 0, 0, "p");
    set(&mut c, "ttl", 77, 100_000, "t");
    let mut r = srv.client();
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut r).unwrap();
    for i in 0..40 {
        assert_eq!(
            get(&mut c, &format!("f{i}")),
            Some((1000 + i, format!("v{i}"))),
            "f{i} after DEBUG RELOAD"
        );
    }
    assert_eq!(get(&mut c, "plain"), Some((0, "p".into())));
    assert_eq!(get(&mut c, "ttl"), Some((77, "t".into())));
    let ttl: i64 = redis::cmd("TTL").arg("ttl").query(&mut r).unwrap();
    assert!(ttl > 99_000, "{ttl}");
    // A value changed over RESP is a plain string again: its flags go.
    let _: () = redis::cmd("SET")
        .arg("f0")
        .arg("resp")
        .query(&mut r)
        .unwrap();
    assert_eq!(get(&mut c, "f0"), Some((0, "resp".into())));
    let _: () = redis::cmd("SAVE").query(&mut r).unwrap();
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut r)
        .unwrap();
    let redis_srv = common::RedisServer::start_with(&["--dir", &dir[1], "--dbfilename", "mc.rdb"]);
    let mut rr = redis_srv.client();
    let n: i64 = redis::cmd("DBSIZE").query(&mut rr).unwrap();
    assert_eq!(n, 42);
    let v: String = redis::cmd("GET").arg("f7").query(&mut rr).unwrap();
    assert_eq!(v, "v7");
}

/// maxmemory applies to memcache writes: `noeviction` refuses them with memcached's
/// `SERVER_ERROR out of memory storing object` (the connection goes on, reads work), an
/// eviction policy makes room instead (`stats` counts the evictions).
#[test]
fn maxmemory_applies_to_memcache_writes() {
    let value = "v".repeat(4000);
    let t = McTarget::damselfly(&[
        "--proactor_threads",
        "2",
        "--maxmemory",
        "8mb",
        "--maxmemory-policy",
        "noeviction",
    ]);
    let mut c = t.conn();
    let mut refused = 0;
    for i in 0..10_000 {
        let line = format!("set big{i} 0 0 {}\r\n{value}\r\n", value.len());
        match c.cmd(&line).as_str() {
            "STORED" => {}
            "SERVER_ERROR out of memory storing object" => refused += 1,
            other => panic!("set big{i}: {other}"),
        }
        if refused > 10 {
            break;
        }
    }
    assert!(refused > 0, "never refused under an 8 MB limit");
    assert_eq!(
        get(&mut c, "big0"),
        Some((0, value.clone())),
        "reads still work"
    );
    assert_eq!(c.cmd("delete big0\r\n"), "DELETED", "deletes still work");

    let t = McTarget::damselfly(&[
        "--proactor_threads",
        "2",
        "--maxmemory",
        "8mb",
        "--maxmemory-policy",
        "allkeys-lru",
    ]);
    let mut c = t.conn();
    for i in 0..5_000 {
        let line = format!("set big{i} 0 0 {}\r\n{value}\r\n", value.len());
        assert_eq!(c.cmd(&line), "STORED", "set big{i} with an eviction policy");
    }
    c.send(b"stats\r\n");
    let mut evictions = None;
    loop {
        let l = c.line_str();
        if l == "END" {
            break;
        }
        if let Some(v) = l.strip_prefix("STAT evictions ") {
            evictions = v.parse::<u64>().ok();
        }
    }
    assert!(evictions.is_some_and(|e| e > 1000), "{evictions:?}");
}

/// A memcache-only server: `--port 0` with a memcache port listens there alone.
#[test]
fn memcache_port_alone() {
    let mport = common::free_port();
    let dir = std::env::temp_dir().join(format!("dfly-mconly-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = std::process::Command::new(common::dfly_bin())
        .args([
            "--port",
            "0",
            "--memcached_port",
            &mport.to_string(),
            "--dir",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start damselfly");
    let pid = child.id();
    let ready = memcached::wait_mc_ready(mport, pid, Some(&mut child));
    let result = std::panic::catch_unwind(|| {
        ready.expect("memcache port answers");
        let mut c = McConn::new(std::net::TcpStream::connect(("127.0.0.1", mport)).unwrap());
        set(&mut c, "only", 3, 0, "mc");
        assert_eq!(get(&mut c, "only"), Some((3, "mc".into())));
    });
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
