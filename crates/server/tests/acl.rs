//! ACL against the real binary with 4 shard threads (connections and keys land on different
//! threads): a restricted user cannot run a denied command, touch a denied key pattern or
//! subscribe to a denied channel, at top level, pipelined, inside MULTI/EXEC and in scripts;
//! ACL LOG records each refusal; deleting a user or revoking its channels closes its
//! connections; the ACL file round-trips; the HTTP console needs credentials.
//! `DFLY_TEST_TARGET=redis` runs the same expectations against redis-server.

mod common;

use std::io::{Read, Write};

use common::{bulk, ok, RawConn, Resp, Server};

fn start() -> Server {
    Server::start_threads(4, &[])
}

fn conn(s: &Server) -> RawConn {
    s.raw_conn()
}

fn is_err(r: &Resp, prefix: &str) -> bool {
    matches!(r, Resp::Error(e) if e.starts_with(prefix.as_bytes()))
}

fn text(r: &Resp) -> String {
    match r {
        Resp::Bulk(b) | Resp::Simple(b) | Resp::Error(b) => String::from_utf8_lossy(b).into(),
        r => panic!("expected text, got {r}"),
    }
}

/// The map reply `r` (RESP2: flat pairs) as (field, value) pairs.
fn pairs(r: Resp) -> Vec<(String, Resp)> {
    let Resp::Array(items) = r else {
        panic!("expected a map, got {r}")
    };
    items
        .chunks(2)
        .map(|kv| (text(&kv[0]), kv[1].clone()))
        .collect()
}

fn field(r: &[(String, Resp)], name: &str) -> Resp {
    r.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no field {name}"))
}

/// The newest ACL LOG entry as (reason, context, object, username).
fn last_log(c: &mut RawConn) -> (String, String, String, String) {
    let Resp::Array(entries) = c.q("ACL LOG 1") else {
        panic!("ACL LOG")
    };
    let e = pairs(entries.into_iter().next().expect("a log entry"));
    (
        text(&field(&e, "reason")),
        text(&field(&e, "context")),
        text(&field(&e, "object")),
        text(&field(&e, "username")),
    )
}

#[test]
fn restricted_user_commands_keys_and_log() {
    let s = start();
    let mut admin = conn(&s);
    assert_eq!(
        admin.q("ACL SETUSER app on >pw +@read +set -debug ~app:* resetchannels"),
        ok()
    );
    let mut c = conn(&s);
    assert_eq!(c.q("AUTH app pw"), ok());
    // ACL WHOAMI is a command like any other (@slow): not in this user's rules.
    assert!(is_err(&c.q("ACL WHOAMI"), "NOPERM"));
    // Allowed commands on allowed keys, whatever shard the keys live on.
    for i in 0..32 {
        let k = format!("app:{i}");
        assert_eq!(c.cmd(&["SET", &k, "v"]), ok());
        assert_eq!(c.cmd(&["GET", &k]), bulk("v"));
    }
    // A denied command.
    let r = c.q("DEL app:1");
    assert_eq!(
        text(&r),
        "NOPERM this user has no permissions to run the 'del' command"
    );
    assert_eq!(
        last_log(&mut admin),
        (
            "command".into(),
            "toplevel".into(),
            "del".into(),
            "app".into()
        )
    );
    // A denied key, wherever it sits among the command's keys.
    let r = c.q("MGET app:1 other app:2");
    assert_eq!(
        text(&r),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert_eq!(last_log(&mut admin).2, "other");
    // Pipelined: every command is checked, the allowed ones still run in order.
    let mut batch = Vec::new();
    for i in 0..50 {
        batch.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n$6\r\napp:{i:02}\r\n$1\r\nx\r\n").as_bytes(),
        );
        batch.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n$5\r\nno:{i:02}\r\n").as_bytes());
    }
    c.send_raw(&batch);
    for _ in 0..50 {
        assert_eq!(c.read(), ok());
        assert!(is_err(&c.read(), "NOPERM"));
    }
    // The server keeps serving the admin meanwhile; the denied writes did nothing.
    assert_eq!(admin.q("EXISTS no:00"), Resp::Int(0));
    assert_eq!(admin.q("GET app:07"), bulk("x"));
}

#[test]
fn multi_exec_and_scripts_are_checked_per_command() {
    let s = start();
    let mut admin = conn(&s);
    assert_eq!(
        admin.q("ACL SETUSER tx on nopass +multi +exec +discard +incr +eval ~t:*"),
        ok()
    );
    let mut c = conn(&s);
    assert_eq!(c.q("AUTH tx any"), ok());
    // Queued commands are checked when queued: the transaction is aborted.
    assert_eq!(c.q("MULTI"), ok());
    assert!(is_err(&c.q("INCR other"), "NOPERM"));
    assert!(is_err(&c.q("EXEC"), "EXECABORT"));
    assert_eq!(
        last_log(&mut admin),
        ("key".into(), "multi".into(), "other".into(), "tx".into())
    );
    // Permissions revoked between queueing and EXEC: the command fails inside EXEC.
    assert_eq!(c.q("MULTI"), ok());
    assert_eq!(c.q("INCR t:1"), Resp::Simple(b"QUEUED".to_vec()));
    assert_eq!(admin.q("ACL SETUSER tx -incr"), ok());
    let Resp::Array(replies) = c.q("EXEC") else {
        panic!("EXEC")
    };
    assert!(text(&replies[0]).starts_with("NOPERM ACLs rules changed"));
    assert_eq!(last_log(&mut admin).1, "multi");
    assert_eq!(admin.q("ACL SETUSER tx +incr"), ok());
    // Scripts: each redis.call is checked against the caller's user.
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "t:2"]),
        Resp::Int(1)
    );
    let r = c.cmd(&["EVAL", "return redis.call('incr', 'nope')", "0"]);
    assert!(
        text(&r).contains("The user executing the script can't access at least one of the keys"),
        "{r}"
    );
    assert_eq!(
        last_log(&mut admin),
        ("key".into(), "lua".into(), "nope".into(), "tx".into())
    );
    let r = c.cmd(&["EVAL", "return redis.call('get', 't:2')", "0"]);
    assert!(
        text(&r).contains("The user executing the script can't run this command"),
        "{r}"
    );
    assert_eq!(admin.q("EXISTS nope"), Resp::Int(0));
}

#[test]
fn channels_are_checked_and_revoked_subscribers_are_closed() {
    let s = start();
    let mut admin = conn(&s);
    assert_eq!(
        admin.q("ACL SETUSER ps on >p +@pubsub +client resetchannels &news:* &alerts"),
        ok()
    );
    let mut c = conn(&s);
    assert_eq!(c.q("AUTH ps p"), ok());
    assert_eq!(c.q("PUBLISH news:1 hi"), Resp::Int(0));
    assert_eq!(
        text(&c.q("PUBLISH sports x")),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    assert_eq!(
        last_log(&mut admin),
        (
            "channel".into(),
            "toplevel".into(),
            "sports".into(),
            "ps".into()
        )
    );
    // A pattern subscription must name an allowed pattern literally.
    assert!(is_err(&c.q("PSUBSCRIBE news:1*"), "NOPERM"));
    let mut sub = conn(&s);
    assert_eq!(sub.q("AUTH ps p"), ok());
    assert_eq!(sub.q("CLIENT SETNAME watcher"), ok());
    sub.send(&["SUBSCRIBE", "alerts"]);
    let _ = sub.read();
    assert!(text(&admin.q("CLIENT LIST")).contains("name=watcher"));
    // Narrowing the channels closes the subscriber at once; widening keeps it.
    assert_eq!(
        admin.q("ACL SETUSER ps resetchannels &news:* &alerts &more"),
        ok()
    );
    assert!(text(&admin.q("CLIENT LIST")).contains("name=watcher"));
    assert_eq!(admin.q("ACL SETUSER ps resetchannels &news:*"), ok());
    assert!(!text(&admin.q("CLIENT LIST")).contains("name=watcher"));
    assert!(sub.try_read().is_err());
}

#[test]
fn users_rules_roundtrip_and_deleted_users_lose_their_connections() {
    let s = start();
    let mut admin = conn(&s);
    assert_eq!(
        admin.q("ACL SETUSER u1 on >secret ~k* %R~r* &ch -@all +get +client|id (+set ~w*)"),
        ok()
    );
    let u = pairs(admin.q("ACL GETUSER u1"));
    // Single commands follow the command table's order (Redis's is its hash table's).
    assert_eq!(text(&field(&u, "commands")), "-@all +client|id +get");
    assert_eq!(text(&field(&u, "keys")), "~k* %R~r*");
    assert_eq!(text(&field(&u, "channels")), "&ch");
    let Resp::Array(pw) = field(&u, "passwords") else {
        panic!("passwords")
    };
    assert_eq!(pw.len(), 1);
    assert_eq!(text(&pw[0]).len(), 64);
    let Resp::Array(list) = admin.q("ACL LIST") else {
        panic!("ACL LIST")
    };
    let line = list
        .iter()
        .map(text)
        .find(|l| l.starts_with("user u1 "))
        .unwrap();
    assert!(line.ends_with("(~w* resetchannels -@all +set)"), "{line}");
    // Errors name the modifier and change nothing.
    assert_eq!(
        text(&admin.q("ACL SETUSER u1 +nosuchcmd")),
        "ERR Error in ACL SETUSER modifier '+nosuchcmd': Unknown command or category name in ACL"
    );
    assert_eq!(text(&admin.q("ACL DRYRUN u1 get r1")), "OK",);
    assert_eq!(
        text(&admin.q("ACL DRYRUN u1 set r1 v")),
        "This user has no permissions to access the 'r1' key"
    );
    assert_eq!(text(&admin.q("ACL DRYRUN u1 set w1 v")), "OK");
    // Bad logins are logged; good ones switch the user.
    let mut c = conn(&s);
    assert!(is_err(&c.q("AUTH u1 wrong"), "WRONGPASS"));
    assert_eq!(
        last_log(&mut admin),
        ("auth".into(), "toplevel".into(), "AUTH".into(), "u1".into())
    );
    assert_eq!(c.q("AUTH u1 secret"), ok());
    assert!(matches!(c.q("CLIENT ID"), Resp::Int(_)));
    assert!(text(&admin.q("CLIENT LIST")).contains("user=u1"));
    assert_eq!(admin.q("CLIENT KILL USER nosuch").to_string(), {
        Resp::Error(b"ERR No such user 'nosuch'".to_vec()).to_string()
    });
    // Deleting the user closes its connection.
    assert_eq!(admin.q("ACL DELUSER u1 nosuch"), Resp::Int(1));
    assert!(c.try_read().is_err() || c.try_read().is_err());
    assert_eq!(
        text(&admin.q("ACL DELUSER default")),
        "ERR The 'default' user cannot be removed"
    );
}

#[test]
fn requirepass_is_the_default_users_password_and_http_needs_it() {
    let s = Server::start_threads(2, &["--requirepass", "s3cret"]);
    let mut c = conn(&s);
    assert!(is_err(&c.q("GET x"), "NOAUTH"));
    assert!(is_err(&c.q("AUTH default nope"), "WRONGPASS"));
    assert_eq!(c.q("AUTH s3cret"), ok());
    assert_eq!(c.q("ACL SETUSER web on >webpw +@all ~*"), ok());
    // The console refuses without credentials and accepts any enabled user's.
    let get = |auth: Option<&str>| -> String {
        let mut t = s.connect();
        let hdr = auth
            .map(|a| {
                format!(
                    "Authorization: Basic {}\r\n",
                    damselfly::base64::encode(a.as_bytes())
                )
            })
            .unwrap_or_default();
        write!(t, "GET / HTTP/1.1\r\nHost: x\r\n{hdr}\r\n").unwrap();
        let mut out = String::new();
        let _ = t.read_to_string(&mut out);
        out.lines().next().unwrap_or_default().to_string()
    };
    assert!(get(None).contains("401"), "{}", get(None));
    assert!(get(Some("web:bad")).contains("401"));
    assert!(get(Some("web:webpw")).contains("200"));
    assert!(get(Some("default:s3cret")).contains("200"));
    // CONFIG SET requirepass changes the default user's password.
    assert_eq!(c.q("CONFIG SET requirepass other"), ok());
    let mut d = conn(&s);
    assert!(is_err(&d.q("AUTH s3cret"), "WRONGPASS"));
    assert_eq!(d.q("AUTH other"), ok());
}

#[test]
fn aclfile_save_and_load() {
    let dir = std::env::temp_dir().join(format!("damselfly-acl-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("users.acl");
    std::fs::write(
        &file,
        "user alice on >a ~* &* +@all\nuser default on nopass ~* &* +@all\n",
    )
    .unwrap();
    let s = Server::start(&["--aclfile", file.to_str().unwrap()]);
    let mut c = conn(&s);
    assert_eq!(c.q("AUTH alice a"), ok());
    assert_eq!(c.q("ACL SETUSER eve on >e +get ~*"), ok());
    assert_eq!(c.q("ACL SAVE"), ok());
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("user eve on #"), "{saved}");
    // A broken file changes nothing and says why.
    std::fs::write(&file, format!("{saved}user alice on nopass\n")).unwrap();
    let r = text(&c.q("ACL LOAD"));
    assert!(r.contains("Duplicate user 'alice' found"), "{r}");
    std::fs::write(&file, saved).unwrap();
    // LOAD replaces the users: connections of non-default users close.
    assert_eq!(c.q("ACL LOAD"), ok());
    assert!(c.try_read().is_err() || c.try_read().is_err());
    let mut d = conn(&s);
    assert_eq!(d.q("AUTH eve e"), ok());
    assert!(is_err(&d.q("SET k v"), "NOPERM"));
    let _ = std::fs::remove_dir_all(&dir);
}
