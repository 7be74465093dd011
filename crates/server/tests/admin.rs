//! Integration tests for connection and server administration commands: HELLO AUTH CLIENT INFO
//! CONFIG COMMAND DEBUG SLOWLOG SHUTDOWN, the HTTP `/metrics` endpoint and redis-cli.

mod common;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// Damselfly with `--proactor_threads=4` plus `extra`.
fn start(extra: &[&str]) -> common::Server {
    common::Server::start_threads(4, extra)
}

/// A connection for exact bytes (replies read with a 100 ms timeout, see [`Raw::send_until`]).
fn raw(srv: &common::Server) -> Raw {
    let s = srv.connect();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    Raw { s, buf: Vec::new() }
}

/// Raw RESP over TCP, for checking exact bytes.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    /// Sends `req` and returns everything received until `done(received)` holds (or 5 s pass).
    fn send_until(&mut self, req: &str, done: impl Fn(&[u8]) -> bool) -> String {
        self.s.write_all(req.as_bytes()).expect("write");
        self.buf.clear();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut tmp = [0u8; 65536];
        while !done(&self.buf) && Instant::now() < deadline {
            match self.s.read(&mut tmp) {
                Ok(0) => break,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(_) => {}
            }
        }
        String::from_utf8_lossy(&self.buf).into_owned()
    }

    /// Sends `req` and reads until the reply ends with `suffix`.
    fn send_expect_end(&mut self, req: &str, suffix: &str) -> String {
        let suf = suffix.as_bytes().to_vec();
        let out = self.send_until(req, move |b| b.ends_with(&suf));
        assert!(
            out.ends_with(suffix),
            "reply {out:?} should end with {suffix:?}"
        );
        out
    }

    fn send_exact(&mut self, req: &str, expected: &str) {
        let want = expected.len();
        let out = self.send_until(req, move |b| b.len() >= want);
        assert_eq!(out, expected, "reply to {req:?}");
    }
}

fn q<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn q_err(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<redis::Value>(con) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => format!(
            "{} {}",
            e.code().unwrap_or("?"),
            e.detail().unwrap_or_default()
        ),
    }
}

#[test]
fn hello_resp2_and_resp3_shapes() {
    let srv = start(&[]);
    let mut r = raw(&srv);
    let out = r.send_expect_end("HELLO 3\r\n", "$7\r\nmodules\r\n*0\r\n");
    assert!(out.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:"), "{out}");
    assert!(out.contains("$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"));
    // RESP3 now: maps and nulls change encoding.
    r.send_exact("CONFIG GET hz\r\n", "%1\r\n$2\r\nhz\r\n$3\r\n100\r\n");
    r.send_exact("GET nokey\r\n", "_\r\n");
    let out = r.send_expect_end("HELLO 2\r\n", "$7\r\nmodules\r\n*0\r\n");
    assert!(out.starts_with("*14\r\n$6\r\nserver\r\n"), "{out}");
    assert!(out.contains("$5\r\nproto\r\n:2\r\n"));
    r.send_exact("GET nokey\r\n", "$-1\r\n");
    r.send_exact("HELLO 4\r\n", "-NOPROTO unsupported protocol version\r\n");
    r.send_exact(
        "HELLO x\r\n",
        "-ERR Protocol version is not an integer or out of range\r\n",
    );
    r.send_exact(
        "HELLO 3 foo\r\n",
        "-ERR Syntax error in HELLO option 'foo'\r\n",
    );
    // SETNAME inside HELLO; RESET goes back to RESP2 and clears the name.
    let out = r.send_expect_end("HELLO 3 SETNAME app\r\n", "*0\r\n");
    assert!(out.starts_with("%7\r\n"));
    r.send_exact("CLIENT GETNAME\r\n", "$3\r\napp\r\n");
    r.send_exact("RESET\r\n", "+RESET\r\n");
    r.send_exact("CLIENT GETNAME\r\n", "$-1\r\n");
    r.send_exact("PING\r\n", "+PONG\r\n");
    r.send_exact("ECHO hi\r\n", "$2\r\nhi\r\n");
}

#[test]
fn auth_with_requirepass() {
    let srv = start(&["--requirepass=secret"]);
    let mut r = raw(&srv);
    r.send_exact("GET a\r\n", "-NOAUTH Authentication required.\r\n");
    r.send_exact("HELLO 3\r\n", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n");
    r.send_exact(
        "AUTH wrong\r\n",
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    r.send_exact(
        "AUTH someone secret\r\n",
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    r.send_exact("AUTH a b c\r\n", "-ERR syntax error\r\n");
    r.send_exact("AUTH secret\r\n", "+OK\r\n");
    r.send_exact("GET a\r\n", "$-1\r\n");
    // RESET drops the authentication.
    r.send_exact("RESET\r\n", "+RESET\r\n");
    r.send_exact("GET a\r\n", "-NOAUTH Authentication required.\r\n");
    r.send_exact("AUTH default secret\r\n", "+OK\r\n");

    // HELLO with AUTH authenticates and switches protocol at once.
    let mut r2 = raw(&srv);
    let out = r2.send_expect_end("HELLO 3 AUTH default secret\r\n", "*0\r\n");
    assert!(out.starts_with("%7\r\n"), "{out}");
    r2.send_exact("GET a\r\n", "_\r\n");
    let mut r3 = raw(&srv);
    r3.send_exact(
        "HELLO 3 AUTH default nope\r\n",
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );

    // Without a password configured.
    let open = start(&[]);
    let mut c = open.client();
    assert_eq!(
        q_err(&mut c, &["AUTH", "x"]),
        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    );
}

#[test]
fn client_commands() {
    let srv = start(&[]);
    let mut a = srv.client();
    let mut b = srv.client();
    let ida: i64 = q(&mut a, &["CLIENT", "ID"]);
    let idb: i64 = q(&mut b, &["CLIENT", "ID"]);
    assert_ne!(ida, idb);
    let none: Option<String> = q(&mut a, &["CLIENT", "GETNAME"]);
    assert_eq!(none, None);
    let _: () = q(&mut a, &["CLIENT", "SETNAME", "alpha"]);
    let name: String = q(&mut a, &["CLIENT", "GETNAME"]);
    assert_eq!(name, "alpha");
    assert_eq!(
        q_err(&mut a, &["CLIENT", "SETNAME", "a b"]),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );

    // CLIENT LIST sees connections of every thread.
    let mut others: Vec<redis::Connection> = (0..6).map(|_| srv.client()).collect();
    let list: String = q(&mut b, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 8, "{list}");
    assert!(list.contains(&format!("id={ida} ")) && list.contains("name=alpha"));
    assert!(list.contains("cmd=client|list"));
    assert!(list.ends_with('\n'));
    let one: String = q(&mut b, &["CLIENT", "LIST", "ID", &ida.to_string()]);
    assert_eq!(one.lines().count(), 1);
    assert!(one.starts_with(&format!("id={ida} addr=")));
    let typed: String = q(&mut b, &["CLIENT", "LIST", "TYPE", "normal"]);
    assert_eq!(typed.lines().count(), 8);
    assert_eq!(
        q_err(&mut b, &["CLIENT", "LIST", "TYPE", "foo"]),
        "ERR Unknown client type 'foo'"
    );
    let info: String = q(&mut a, &["CLIENT", "INFO"]);
    assert!(info.starts_with(&format!("id={ida} ")) && info.contains("name=alpha"));
    assert!(info.contains("lib-name=redis-rs"), "{info}");

    // CLIENT KILL (new form) across threads.
    let killed: i64 = q(&mut b, &["CLIENT", "KILL", "ID", &ida.to_string()]);
    assert_eq!(killed, 1);
    std::thread::sleep(Duration::from_millis(100));
    assert!(redis::cmd("PING").query::<String>(&mut a).is_err());
    // Old form by address.
    let addr_line: String = q(&mut others[0], &["CLIENT", "INFO"]);
    let addr = addr_line
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .expect("addr")
        .to_string();
    let _: () = q(&mut b, &["CLIENT", "KILL", &addr]);
    std::thread::sleep(Duration::from_millis(100));
    assert!(redis::cmd("PING").query::<String>(&mut others[0]).is_err());
    assert_eq!(
        q_err(&mut b, &["CLIENT", "KILL", "1.2.3.4:5"]),
        "ERR No such client"
    );
    assert_eq!(
        q_err(&mut b, &["CLIENT", "KILL", "ID", "0"]),
        "ERR client-id should be greater than 0"
    );
    // SKIPME defaults to yes.
    let me: i64 = q(&mut b, &["CLIENT", "KILL", "ID", &idb.to_string()]);
    assert_eq!(me, 0);
    let pong: String = q(&mut b, &["PING"]);
    assert_eq!(pong, "PONG");
    let list: String = q(&mut b, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 6, "{list}");
    drop(others);

    // CLIENT REPLY.
    let mut r = raw(&srv);
    r.send_exact(
        "CLIENT REPLY OFF\r\nPING\r\nCLIENT REPLY ON\r\nPING\r\n",
        "+OK\r\n+PONG\r\n",
    );
    r.send_exact("CLIENT REPLY SKIP\r\nPING a\r\nPING b\r\n", "$1\r\nb\r\n");
    r.send_exact("CLIENT REPLY maybe\r\n", "-ERR syntax error\r\n");
    r.send_exact("CLIENT NO-EVICT on\r\n", "+OK\r\n");
    r.send_exact("CLIENT NO-TOUCH off\r\n", "+OK\r\n");
    r.send_exact(
        "CLIENT SETINFO lib-name x y\r\n",
        "-ERR wrong number of arguments for 'client|setinfo' command\r\n",
    );
    r.send_exact(
        "CLIENT SETINFO foo bar\r\n",
        "-ERR Unrecognized option 'foo'\r\n",
    );
    r.send_exact(
        "CLIENT FOO\r\n",
        "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n",
    );
    let help = r.send_until("CLIENT HELP\r\n", |b| {
        b.ends_with(b"+    Prints this help.\r\n")
    });
    assert!(help.contains("+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"));
}

fn info_map(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn info_sections() {
    let srv = start(&[]);
    let mut c = srv.client();
    for i in 0..20 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    let _: Option<String> = q(&mut c, &["GET", "k1"]);
    let _: Option<String> = q(&mut c, &["GET", "missing"]);
    let _ = q_err(&mut c, &["NOSUCHCMD"]);

    let all: String = q(&mut c, &["INFO"]);
    assert!(
        all.starts_with("# Server\r\nredis_version:7.0.15\r\n"),
        "{all}"
    );
    for h in [
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# CPU",
        "# Keyspace",
    ] {
        assert!(all.contains(h), "missing {h}");
    }
    assert!(!all.contains("# Commandstats"));
    let m = info_map(&all);
    assert_eq!(m["redis_mode"], "standalone");
    assert_eq!(m["role"], "master");
    assert_eq!(m["db0"], "keys=20,expires=0,avg_ttl=0");
    assert!(m["used_memory"].parse::<u64>().expect("used_memory") > 0);
    assert!(m["used_memory_rss"].parse::<u64>().expect("rss") > 0);
    assert!(m.contains_key("used_cpu_user") && m.contains_key("mem_allocator"));
    assert_eq!(m["keyspace_hits"], "1");
    assert_eq!(m["keyspace_misses"], "1");
    assert_eq!(m["tcp_port"], srv.port().to_string());
    assert_eq!(m["aof_enabled"], "0");
    assert_eq!(m["rdb_bgsave_in_progress"], "0");
    assert!(m["connected_clients"].parse::<u64>().expect("clients") >= 1);
    assert!(m["total_commands_processed"].parse::<u64>().expect("cmds") >= 22);

    let two: String = q(&mut c, &["INFO", "keyspace", "server"]);
    assert!(two.starts_with("# Server\r\n"));
    assert!(two.contains("\r\n\r\n# Keyspace\r\ndb0:keys=20,expires=0,avg_ttl=0\r\n"));
    assert!(!two.contains("# Clients"));
    let none: String = q(&mut c, &["INFO", "nosuchsection"]);
    assert_eq!(none, "");

    let cs: String = q(&mut c, &["INFO", "commandstats"]);
    let m = info_map(&cs);
    assert!(
        m["cmdstat_set"].starts_with("calls=20,usec="),
        "{}",
        m["cmdstat_set"]
    );
    assert!(m["cmdstat_set"].ends_with(",rejected_calls=0,failed_calls=0"));
    assert!(m["cmdstat_get"].starts_with("calls=2,"));
    let es: String = q(&mut c, &["INFO", "errorstats"]);
    assert!(es.contains("errorstat_ERR:count="), "{es}");
    let every: String = q(&mut c, &["INFO", "everything"]);
    assert!(every.contains("# Commandstats") && every.contains("# Errorstats"));
}

#[test]
fn config_get_set_resetstat() {
    let srv = start(&[]);
    let mut c = srv.client();
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "hz", "maxmemory"]);
    assert_eq!(m.get("hz").map(String::as_str), Some("100"));
    assert_eq!(m.get("maxmemory").map(String::as_str), Some("0"));
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "slowlog-*"]);
    assert!(m.contains_key("slowlog-log-slower-than") && m.contains_key("slowlog-max-len"));
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "hz", "20", "proto-max-bulk-len", "1mb"],
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "hz", "proto-max-bulk-len"]);
    assert_eq!(m["hz"], "20");
    assert_eq!(m["proto-max-bulk-len"], "1048576");
    // A setting the server cannot honour yet is refused, not accepted and ignored, and the
    // whole CONFIG SET with it.
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "hz", "30", "appendonly", "yes"]),
        "ERR CONFIG SET failed (possibly related to argument 'appendonly') - the append-only file is not implemented yet"
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "hz", "appendonly"]);
    assert_eq!((m["hz"].as_str(), m["appendonly"].as_str()), ("20", "no"));
    // All or nothing.
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "hz", "30", "maxmemory", "bogus"]),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"
    );
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "hz"]);
    assert_eq!(m["hz"], "20");
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "nosuch", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "hz", "abc"]),
        "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"
    );
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "hz", "10", "hz", "11"]),
        "ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter"
    );
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "hz", "10", "maxmemory"]),
        "ERR syntax error"
    );
    assert_eq!(
        q_err(&mut c, &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );
    // requirepass takes effect for new connections.
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", "pw"]);
    let mut r = raw(&srv);
    r.send_exact("GET x\r\n", "-NOAUTH Authentication required.\r\n");
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", ""]);
    // Parser limits apply to connections made after the change.
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1000000"]),
        "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive"
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1100000"]);
    let mut r = raw(&srv);
    r.send_exact(
        "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$2000000\r\n",
        "-ERR Protocol error: invalid bulk length\r\n",
    );

    for _ in 0..5 {
        let _: () = q(&mut c, &["SET", "a", "b"]);
    }
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    let cs: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(!cs.contains("cmdstat_set"), "{cs}");
    let st: String = q(&mut c, &["INFO", "stats"]);
    let m = info_map(&st);
    assert!(m["total_commands_processed"].parse::<u64>().expect("n") <= 2);
    assert_eq!(m["total_error_replies"], "0");
    let help: Vec<String> = q(&mut c, &["CONFIG", "HELP"]);
    assert!(help[0].starts_with("CONFIG <subcommand>"));
}

#[test]
fn command_introspection() {
    let srv = start(&[]);
    let mut c = srv.client();
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    assert!(count >= 20, "{count}");
    let all: Vec<redis::Value> = q(&mut c, &["COMMAND"]);
    assert_eq!(all.len() as i64, count);
    let info: Vec<redis::Value> = q(&mut c, &["COMMAND", "INFO", "get", "nosuch", "config"]);
    assert_eq!(info.len(), 3);
    let redis::Value::Array(get) = &info[0] else {
        panic!("{:?}", info[0])
    };
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], redis::Value::BulkString(b"get".to_vec()));
    assert_eq!(get[1], redis::Value::Int(2));
    assert_eq!(get[3], redis::Value::Int(1));
    assert_eq!(get[4], redis::Value::Int(1));
    assert_eq!(get[5], redis::Value::Int(1));
    assert_eq!(info[1], redis::Value::Nil);
    let redis::Value::Array(cfg) = &info[2] else {
        panic!()
    };
    let redis::Value::Array(subs) = &cfg[9] else {
        panic!()
    };
    assert!(subs.len() >= 4);

    let list: Vec<String> = q(&mut c, &["COMMAND", "LIST"]);
    assert!(list.contains(&"get".to_string()) && list.contains(&"config|get".to_string()));
    let pat: Vec<String> = q(
        &mut c,
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "config*"],
    );
    assert!(pat.iter().all(|n| n.starts_with("config")) && pat.len() >= 5);
    let acl: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "string"]);
    assert!(acl.contains(&"get".to_string()) && !acl.contains(&"ping".to_string()));

    let docs: HashMap<String, redis::Value> = q(&mut c, &["COMMAND", "DOCS", "get", "config"]);
    let get_doc: HashMap<String, redis::Value> =
        redis::from_redis_value(&docs["get"]).expect("doc map");
    assert!(get_doc.contains_key("summary") && get_doc.contains_key("since"));
    assert_eq!(
        get_doc["group"],
        redis::Value::BulkString(b"string".to_vec())
    );
    let cfg_doc: HashMap<String, redis::Value> =
        redis::from_redis_value(&docs["config"]).expect("doc map");
    assert!(cfg_doc.contains_key("subcommands"));

    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "SET", "k1", "v"]);
    assert_eq!(keys, vec!["k1"]);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "DEL", "a", "b", "c"]);
    assert_eq!(keys, vec!["a", "b", "c"]);
    let keys: Vec<String> = q(&mut c, &["COMMAND", "GETKEYS", "MEMORY", "USAGE", "mk"]);
    assert_eq!(keys, vec!["mk"]);
    assert_eq!(
        q_err(&mut c, &["COMMAND", "GETKEYS", "PING", "x"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        q_err(&mut c, &["COMMAND", "GETKEYS", "SET", "a"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        q_err(&mut c, &["COMMAND", "GETKEYS", "NOSUCH", "a"]),
        "ERR Invalid command specified"
    );
}

#[test]
fn debug_populate_memory_time() {
    let srv = start(&[]);
    let mut c = srv.client();
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "10000"]);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 10000);
    let v: String = q(&mut c, &["GET", "key:42"]);
    assert_eq!(v, "value:42");
    // Existing keys are skipped, not overwritten.
    let _: () = q(&mut c, &["SET", "key:1", "mine"]);
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "10001"]);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 10001);
    let v: String = q(&mut c, &["GET", "key:1"]);
    assert_eq!(v, "mine");
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "3", "p", "12"]);
    let v: Vec<u8> = q(&mut c, &["GET", "p:2"]);
    assert_eq!(v, b"value:2\0\0\0\0\0");
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "3", "t", "3"]);
    let v: String = q(&mut c, &["GET", "t:2"]);
    assert_eq!(v, "val");
    assert_eq!(
        q_err(&mut c, &["DEBUG", "POPULATE", "-1"]),
        "ERR value is out of range, must be positive"
    );
    let obj: String = q(&mut c, &["DEBUG", "OBJECT", "key:42"]);
    assert!(
        obj.starts_with("Value at:0x") && obj.contains(" encoding:embstr "),
        "{obj}"
    );
    assert_eq!(
        q_err(&mut c, &["DEBUG", "OBJECT", "nokey"]),
        "ERR no such key"
    );
    // Save, flush, load back (in the server's own --dir: see common::Server::start).
    let before: i64 = q(&mut c, &["DBSIZE"]);
    let _: () = q(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), before);
    assert_eq!(
        q_err(&mut c, &["DEBUG", "RELOAD", "BOGUS"]),
        "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."
    );
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.01"]);
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);

    let usage: i64 = q(&mut c, &["MEMORY", "USAGE", "key:42"]);
    assert!((32..200).contains(&usage), "{usage}");
    let usage_none: Option<i64> = q(&mut c, &["MEMORY", "USAGE", "nokey"]);
    assert_eq!(usage_none, None);
    let stats: HashMap<String, redis::Value> = q(&mut c, &["MEMORY", "STATS"]);
    assert_eq!(stats["keys.count"], redis::Value::Int(10007));
    assert!(stats.contains_key("peak.allocated") && stats.contains_key("dataset.bytes"));

    let t: Vec<String> = q(&mut c, &["TIME"]);
    let secs: u64 = t[0].parse().expect("secs");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("now")
        .as_secs();
    assert!(secs.abs_diff(now) < 5);
    assert!(t[1].parse::<u64>().expect("usec") < 1_000_000);
    let ls: i64 = q(&mut c, &["LASTSAVE"]);
    assert!(ls > 0);
    let latest: Vec<redis::Value> = q(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty());
}

#[test]
fn slowlog_records_commands() {
    let srv = start(&[]);
    let mut c = srv.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let _: () = q(&mut c, &["SET", "slowkey", "v"]);
    let mut others: Vec<redis::Connection> = (0..4).map(|_| srv.client()).collect();
    for (i, o) in others.iter_mut().enumerate() {
        let _: () = q(o, &["SET", &format!("o{i}"), "v"]);
    }
    let len: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    assert!(len >= 6, "{len}");
    let entries: Vec<redis::Value> = q(&mut c, &["SLOWLOG", "GET", "-1"]);
    assert!(entries.len() >= 6);
    let mut last_id = i64::MAX;
    let mut saw = false;
    for e in &entries {
        let redis::Value::Array(f) = e else { panic!() };
        assert_eq!(f.len(), 6);
        let redis::Value::Int(id) = f[0] else {
            panic!()
        };
        assert!(id < last_id, "ids must be descending");
        last_id = id;
        let args: Vec<String> = redis::from_redis_value(&f[3]).expect("args");
        if args == ["SET", "slowkey", "v"] {
            saw = true;
        }
    }
    assert!(saw);
    let two: Vec<redis::Value> = q(&mut c, &["SLOWLOG", "GET", "2"]);
    assert_eq!(two.len(), 2);
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let len: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    assert!(len <= 1, "{len}");
    assert_eq!(
        q_err(&mut c, &["SLOWLOG", "GET", "x"]),
        "ERR count should be greater than or equal to -1"
    );
    // Long argument lists are trimmed like Redis.
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let mut big = redis::cmd("DEL");
    for i in 0..40 {
        big.arg(format!("k{i}"));
    }
    let _: i64 = big.query(&mut c).expect("del");
    let entries: Vec<redis::Value> = q(&mut c, &["SLOWLOG", "GET", "10"]);
    let found = entries.iter().any(|e| {
        let redis::Value::Array(f) = e else {
            return false;
        };
        let args: Vec<String> = redis::from_redis_value(&f[3]).unwrap_or_default();
        args.len() == 32 && args[31] == "... (10 more arguments)"
    });
    assert!(found);
}

#[test]
fn shutdown_exits_process() {
    let mut srv = start(&[]);
    let mut c = srv.client();
    let mut r = raw(&srv);
    r.send_exact("SHUTDOWN ABORT\r\n", "-ERR No shutdown in progress.\r\n");
    r.send_exact("SHUTDOWN FOO\r\n", "-ERR syntax error\r\n");
    assert!(redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query::<redis::Value>(&mut c)
        .is_err());
    // The SHUTDOWN's connection closed after the listeners did: a client that saw it close is
    // refused, as when Redis has exited (the suite's "SHUTDOWN NOSAVE can kill a timedout
    // script anyway" connects right away).
    let e = TcpStream::connect(("127.0.0.1", srv.port())).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
    let status = srv
        .wait_exit(Duration::from_secs(10))
        .expect("server did not exit");
    assert!(status.success(), "{status:?}");
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn http_metrics_and_console() {
    let srv = start(&[]);
    let mut c = srv.client();
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "100"]);
    let _: () = q(&mut c, &["SET", "e", "1"]);
    let _: Option<String> = q(&mut c, &["GET", "key:1"]);
    let out = http_get(srv.port(), "/metrics");
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("# TYPE dragonfly_db_keys gauge\n"));
    assert!(out.contains("dragonfly_db_keys{db=\"db0\"} 101\n"), "{out}");
    assert!(out.contains("dragonfly_db_keys_expiring{db=\"db0\"} 0\n"));
    assert!(out.contains("\ndragonfly_uptime_in_seconds "));
    assert!(out.contains("\ndragonfly_connected_clients "));
    assert!(out.contains("\ndragonfly_memory_used_bytes "));
    assert!(out.contains("\ndragonfly_keyspace_hits_total 1\n"));
    assert!(out.contains("\ndragonfly_commands_processed_total "));
    assert!(out.contains("dragonfly_commands_total{cmd=\"set\"} 1\n"));
    let page = http_get(srv.port(), "/");
    assert!(page.starts_with("HTTP/1.1 200 OK\r\n") && page.contains("<html>"));
    let nf = http_get(srv.port(), "/nope");
    assert!(nf.starts_with("HTTP/1.1 404"));
}

fn http_get_auth(port: u16, path: &str, auth: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    // The head in two writes: the server must read all of it before judging.
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n").as_bytes())
        .expect("write");
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(format!("Authorization: {auth}\r\n\r\n").as_bytes())
        .expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// With requirepass set, the console and /metrics need HTTP Basic authentication as the
/// default user (they answered anyone before); `http_metrics_nopass yes` opens /metrics alone.
#[test]
fn http_needs_the_password_when_one_is_set() {
    let srv = start(&["--requirepass", "s3cret"]);
    for path in ["/", "/metrics"] {
        let out = http_get(srv.port(), path);
        assert!(
            out.starts_with("HTTP/1.1 401 Unauthorized\r\n"),
            "{path}: {out}"
        );
        assert!(
            out.contains("WWW-Authenticate: Basic realm=\"damselfly\""),
            "{out}"
        );
        assert!(
            !out.contains("dragonfly_") && !out.contains("<html>"),
            "{out}"
        );
        // default:wrong
        let out = http_get_auth(srv.port(), path, "Basic ZGVmYXVsdDp3cm9uZw==");
        assert!(out.starts_with("HTTP/1.1 401"), "{path}: {out}");
        // someone:s3cret
        let out = http_get_auth(srv.port(), path, "Basic c29tZW9uZTpzM2NyZXQ=");
        assert!(out.starts_with("HTTP/1.1 401"), "{path}: {out}");
        // default:s3cret
        let out = http_get_auth(srv.port(), path, "Basic ZGVmYXVsdDpzM2NyZXQ=");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {out}");
    }
    let mut c = redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", srv.port()))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "http_metrics_nopass", "yes"]);
    let out = http_get(srv.port(), "/metrics");
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(http_get(srv.port(), "/").starts_with("HTTP/1.1 401"));
}

/// `--admin_port`: an operator's way in that maxclients does not count against; with
/// `--admin_nopass` it needs no AUTH (RESP) and no HTTP authentication.
#[test]
fn admin_port_is_open_when_clients_are_not() {
    let admin = common::free_port();
    let a = admin.to_string();
    let srv = start(&[
        "--maxclients",
        "1",
        "--requirepass",
        "pw",
        "--admin_port",
        &a,
        "--admin_nopass",
        "yes",
    ]);
    let mut first = srv.raw_conn();
    assert_eq!(first.q("AUTH pw"), common::Resp::Simple(b"OK".to_vec()));
    // The main port is full...
    let full = srv.raw(b"PING\r\n");
    assert_eq!(full, b"-ERR max number of clients reached\r\n");
    // ...the admin port is not, and needs no password.
    let mut op = common::RawConn::new(TcpStream::connect(("127.0.0.1", admin)).unwrap());
    assert_eq!(op.q("PING"), common::Resp::Simple(b"PONG".to_vec()));
    assert_eq!(op.q("DBSIZE"), common::Resp::Int(0));
    let m = http_get(admin, "/metrics");
    assert!(m.starts_with("HTTP/1.1 200 OK\r\n"), "{m}");
    let cfg = op.q("CONFIG GET admin_port");
    assert_eq!(
        cfg,
        common::Resp::Array(vec![
            common::Resp::Bulk(b"admin_port".to_vec()),
            common::Resp::Bulk(a.clone().into_bytes())
        ])
    );
    drop(op);
    drop(first);
    drop(srv);
    // Without admin_nopass the admin port asks for the password like the main one.
    let admin = common::free_port();
    let a = admin.to_string();
    let _srv = start(&["--requirepass", "pw", "--admin_port", &a]);
    let mut op = common::RawConn::new(TcpStream::connect(("127.0.0.1", admin)).unwrap());
    assert!(matches!(op.q("DBSIZE"), common::Resp::Error(e) if e.starts_with(b"NOAUTH")));
    assert!(http_get(admin, "/metrics").starts_with("HTTP/1.1 401"));
}

#[test]
fn redis_cli_works() {
    if Command::new("redis-cli").arg("--version").output().is_err() {
        eprintln!("redis-cli not installed; skipping");
        return;
    }
    let srv = start(&[]);
    let run = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .arg("-p")
            .arg(srv.port().to_string())
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(run(&["ping"]).trim(), "PONG");
    assert!(run(&["info"]).contains("redis_version:7.0.15"));
    assert!(run(&["info", "server"]).contains("# Server"));
    assert_eq!(run(&["set", "a", "1"]).trim(), "OK");
    assert_eq!(run(&["get", "a"]).trim(), "1");
    // RESP3 mode (redis-cli -3 sends HELLO 3).
    assert_eq!(run(&["-3", "ping"]).trim(), "PONG");
    assert!(run(&["-3", "config", "get", "hz"]).contains("hz"));
}

/// DEBUG DIGEST / DIGEST-VALUE: equal contents give equal digests whatever the encoding and
/// insertion order, any change changes them, and nothing digests to forty zeros (Redis's test
/// suite compares digests before and after conversions and copies).
#[test]
fn debug_digest_follows_contents_not_encodings() {
    let srv = start(&["--proactor_threads=2"]);
    let mut con = srv.client();
    let zeros = "0".repeat(40);
    let digest = |con: &mut redis::Connection| -> String { q(con, &["DEBUG", "DIGEST"]) };
    assert_eq!(digest(&mut con), zeros);
    let _: i64 = q(&mut con, &["HSET", "h1", "a", "1", "b", "2"]);
    let _: () = q(
        &mut con,
        &["CONFIG", "SET", "hash-max-listpack-entries", "0"],
    );
    let _: i64 = q(&mut con, &["HSET", "h2", "b", "2", "a", "1"]);
    let _: i64 = q(&mut con, &["RPUSH", "l1", "x", "y"]);
    let _: i64 = q(&mut con, &["RPUSH", "l2", "y", "x"]);
    let _: i64 = q(&mut con, &["SADD", "s1", "1", "2", "3"]);
    let _: i64 = q(&mut con, &["SADD", "s2", "3", "2", "1", "z"]);
    let _: i64 = q(&mut con, &["SREM", "s2", "z"]);
    let d: Vec<String> = q(
        &mut con,
        &[
            "DEBUG",
            "DIGEST-VALUE",
            "h1",
            "h2",
            "l1",
            "l2",
            "s1",
            "s2",
            "missing",
        ],
    );
    assert_eq!(
        d[0], d[1],
        "listpack and hashtable hashes with the same fields"
    );
    assert_ne!(d[2], d[3], "lists are ordered");
    assert_eq!(
        d[4], d[5],
        "intset and hashtable sets with the same members"
    );
    assert_eq!(d[6], zeros);
    assert!(d[..6].iter().all(|x| x.len() == 40 && *x != zeros));
    let before = digest(&mut con);
    let _: i64 = q(&mut con, &["EXPIRE", "l1", "100"]);
    let with_ttl = digest(&mut con);
    assert_ne!(before, with_ttl, "expiry is part of the dataset digest");
    let _: i64 = q(&mut con, &["PERSIST", "l1"]);
    assert_eq!(digest(&mut con), before);
    let _: () = q(&mut con, &["FLUSHALL"]);
    assert_eq!(digest(&mut con), zeros);
}

#[test]
fn lolwut_prints_the_version_and_art() {
    let srv = start(&[]);
    let mut c = srv.raw_conn();
    assert_eq!(
        c.cmd(&["LOLWUT"]),
        common::Resp::Bulk(b"Redis ver. 7.0.15\n".to_vec())
    );
    let text = |r: common::Resp| match r {
        common::Resp::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other}"),
    };
    let five = text(c.cmd(&["LOLWUT", "VERSION", "5", "20", "2", "3"]));
    assert!(five.ends_with("Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"));
    // 20 columns of braille characters per line.
    assert_eq!(five.lines().next().unwrap().chars().count(), 20);
    let six = text(c.cmd(&["LOLWUT", "VERSION", "6", "10", "4"]));
    assert!(six.contains("Plaguemon"));
    assert_eq!(six.lines().next().unwrap().matches("\x1b[0m").count(), 10);
    assert_eq!(
        text(c.cmd(&["LOLWUT", "VERSION", "7"])),
        "Redis ver. 7.0.15\n"
    );
    assert!(c.cmd(&["LOLWUT", "VERSION", "x"]).is_error());
    assert!(c.cmd(&["LOLWUT", "VERSION", "5", "nan"]).is_error());
}
