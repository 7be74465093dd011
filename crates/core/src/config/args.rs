//! Start-up configuration: `damselfly [config-file | -] [options...]`, as `redis-server`.
//!
//! Sources are applied in order, later ones winning: `DFLY_<flag>` environment variables, the
//! configuration file (with its includes), configuration from standard input (`-`), then the
//! command line. Every source becomes a list of directives applied by one function, and every
//! bad directive of every source is reported (Redis's `*** FATAL CONFIG FILE ERROR ***` block,
//! naming the file and line), not only the first.
//!
//! Command-line options take both Redis's and Dragonfly's forms: `--save 900 1 300 10` (a
//! `--name` starts a directive, the words after it are its arguments), `--port=6380`,
//! `-port 6380`, a bare `--flag` for a boolean yes and `--noflag` for no, and `--flagfile FILE`
//! with one option per line.

use std::path::Path;

use super::file::{self, Directive, LineError, Origin};
use super::{find_param, Config, ConfigError, Kind, Param, PARAMS};

/// What `parse_args` decided.
pub enum Startup {
    Run(Box<Config>),
    /// Print this and exit 0 (--help, --version).
    Exit(String),
}

/// Parses the environment and the command line (see the module comment).
pub fn parse_args(args: &[String], env: &[(String, String)]) -> Result<Startup, ConfigError> {
    if let Some(first) = args.first() {
        match first.as_str() {
            "-v" | "--version" | "-version" => return Ok(Startup::Exit(version_text())),
            "-h" | "--help" | "-help" | "--helpfull" => return Ok(Startup::Exit(help_text())),
            _ => {}
        }
    }
    let mut directives = Vec::new();
    let mut errors = Vec::new();
    for (k, v) in env {
        if let Some(flag) = k.strip_prefix("DFLY_") {
            if find_param(flag).is_some() {
                directives.push(Directive {
                    name: flag.to_string(),
                    args: vec![v.clone()],
                    origin: Origin::Env { var: k.clone() },
                    text: format!("{k}={v}"),
                });
            }
        }
    }
    // `redis-server /path/redis.conf [options]` and `redis-server - [options]`.
    let (config_path, mut rest) = match args.first() {
        Some(a) if !a.starts_with('-') => (Some(a.as_str()), &args[1..]),
        _ => (None, args),
    };
    let stdin = args.first().is_some_and(|a| a == "-")
        || (args.len() > 1 && args.last().is_some_and(|a| a == "-"));
    if args.first().is_some_and(|a| a == "-") {
        rest = &args[1..];
    }
    if rest.last().is_some_and(|a| a == "-") {
        rest = &rest[..rest.len() - 1];
    }
    if let Some(path) = config_path {
        file::read_file(Path::new(path), &mut directives, &mut errors);
    }
    if stdin {
        let mut text = String::new();
        if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
            return Err(ConfigError::Io(format!(
                "can't read the configuration from standard input: {e}"
            )));
        }
        file::read_text(
            &text,
            |line| Origin::Stdin { line },
            0,
            &mut directives,
            &mut errors,
        );
    }
    let mut exit = None;
    command_line(rest, 0, &mut directives, &mut exit)?;
    if let Some(text) = exit {
        return Ok(Startup::Exit(text));
    }

    // Made absolute before `dir` changes the working directory.
    let config_abs = config_path.map(|p| file::absolute(Path::new(p)));
    let cfg = Config::new();
    // A value damselfly refuses counts only if no later source overrides it (`redis.conf` says
    // `save 900 1`, the command line `--save ""`): it is reported at the directive that set it.
    let mut set_by: std::collections::HashMap<&'static str, &Directive> = Default::default();
    // `save` lines add up (Redis's setConfigSaveOption while reading the configuration): the
    // first replaces the built-in save points, each later one appends its own, `save ""` clears.
    let mut save_seen = false;
    for d in &directives {
        let mut args: Vec<&str> = d.args.iter().map(String::as_str).collect();
        let save_points;
        if d.name.eq_ignore_ascii_case("save") {
            if save_seen && !args.iter().all(|a| a.is_empty()) {
                save_points = cfg.get("save").unwrap_or_default();
                args = save_points.split_whitespace().chain(args).collect();
            }
            save_seen = true;
        }
        match cfg.set_overridable(&d.name, &args) {
            Ok(name) => {
                set_by.insert(name, d);
            }
            Err(e) => errors.push(LineError {
                origin: d.origin.clone(),
                text: d.text.clone(),
                reason: e.reason(),
            }),
        }
    }
    for (name, why) in cfg.refused() {
        if let Some(d) = set_by.get(name) {
            errors.push(LineError {
                origin: d.origin.clone(),
                text: d.text.clone(),
                reason: format!("refused: {why}"),
            });
        }
    }
    if !errors.is_empty() {
        return Err(ConfigError::Fatal(
            errors.iter().map(LineError::fatal_block).collect(),
        ));
    }
    cfg.set_config_file(config_abs);
    Ok(Startup::Run(Box::new(cfg)))
}

/// `-name` (gflags style, one dash) starts an option only for known names, so that `-2` and
/// `-::1` stay arguments.
fn dash_option(word: &str) -> Option<&str> {
    if word.starts_with("--") {
        return None;
    }
    let n = word.strip_prefix('-')?;
    known(split_eq(n).0).then_some(n)
}

fn known(name: &str) -> bool {
    matches!(
        name,
        "help" | "h" | "helpfull" | "version" | "v" | "flagfile"
    ) || find_param(name).is_some()
        || is_negated_bool(name)
}

fn is_bool(name: &str) -> bool {
    find_param(name).is_some_and(|p| matches!(p.kind, Kind::Bool))
}

fn is_negated_bool(name: &str) -> bool {
    find_param(name).is_none() && name.strip_prefix("no").is_some_and(is_bool)
}

/// One option of the command line: a name, an inline `=value`, and the words after it.
struct Group {
    name: String,
    inline: Option<String>,
    args: Vec<String>,
}

/// Groups the command line into options the way redis-server does: `--name` starts an option
/// and the words after it are its arguments; right after a bare `--name` the next word is an
/// argument even when it starts with `--` (`--masterauth --secret`), except after a boolean
/// (Dragonfly's bare `--flag`) and after `--save` (Redis: `--save --port 1` is `save ""`). One
/// word with spaces (`"--maxmemory 700mb"`) is split like a config line; words before any
/// option form one (`loglevel verbose`, which Redis accepts too).
fn group(words: &[String]) -> Result<Vec<Group>, ConfigError> {
    let mut groups: Vec<Group> = Vec::new();
    let mut handled = true;
    for w in words {
        let body = match w.strip_prefix("--") {
            Some(b) if handled && !b.is_empty() => Some(b),
            _ => dash_option(w),
        };
        let Some(body) = body else {
            match groups.last_mut() {
                Some(g) if g.inline.is_none() => g.args.push(w.clone()),
                _ => groups.push(Group {
                    name: w.clone(),
                    inline: None,
                    args: Vec::new(),
                }),
            }
            handled = true;
            continue;
        };
        let eq_form = split_eq(body).1.is_some() && !split_eq(body).0.contains(' ');
        if body.contains(' ') && !eq_form {
            let words = super::file::split_args(body)
                .map_err(|e| ConfigError::Io(format!("{e}: '{w}'")))?;
            let mut it = words.into_iter();
            let name = it.next().unwrap_or_default();
            groups.push(Group {
                name,
                inline: None,
                args: it.collect(),
            });
            handled = true;
            continue;
        }
        let (name, inline) = split_eq(body);
        handled = inline.is_some() || is_bool(name) || is_negated_bool(name) || name == "save";
        groups.push(Group {
            name: name.to_string(),
            inline: inline.map(str::to_string),
            args: Vec::new(),
        });
    }
    Ok(groups)
}

fn command_line(
    words: &[String],
    depth: usize,
    out: &mut Vec<Directive>,
    exit: &mut Option<String>,
) -> Result<(), ConfigError> {
    if depth > 8 {
        return Err(ConfigError::Io("flagfile nesting too deep".into()));
    }
    for Group { name, inline, args } in group(words)? {
        let n = out.len() + 1;
        match name.as_str() {
            "help" | "h" | "helpfull" => {
                *exit = Some(help_text());
                continue;
            }
            "version" | "v" => {
                *exit = Some(version_text());
                continue;
            }
            "flagfile" => {
                let Some(path) = inline.or_else(|| args.first().cloned()) else {
                    return Err(ConfigError::Io("--flagfile needs a path".into()));
                };
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| ConfigError::Io(format!("cannot read flagfile {path}: {e}")))?;
                let lines: Vec<String> = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string)
                    .collect();
                command_line(&lines, depth + 1, out, exit)?;
                continue;
            }
            _ => {}
        }
        let args = match inline {
            Some(v) => vec![v],
            None => args,
        };
        // As Redis shows a command-line option in its error block: `port "6379" "6380"`.
        let text = std::iter::once(name.clone())
            .chain(args.iter().map(|a| file::repr_arg(a)))
            .collect::<Vec<_>>()
            .join(" ");
        let origin = Origin::CommandLine { n };
        let (name, args) = if !args.is_empty() {
            (name, args)
        } else if is_bool(&name) {
            (name, vec!["yes".to_string()])
        } else if is_negated_bool(&name) {
            (name[2..].to_string(), vec!["no".to_string()])
        } else if name.eq_ignore_ascii_case("save") {
            // `--save` alone (Redis): no save points.
            (name, vec![String::new()])
        } else {
            (name, args)
        };
        out.push(Directive {
            name,
            args,
            origin,
            text,
        });
    }
    Ok(())
}

fn split_eq(body: &str) -> (&str, Option<&str>) {
    match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    }
}

/// `--version`: the shape of `redis-server --version`, so tools that parse it (`v=` is the Redis
/// version whose behaviour damselfly matches) keep working; damselfly's own version is last.
pub fn version_text() -> String {
    format!(
        "Damselfly server v={} sha=00000000:0 malloc=jemalloc bits={} build=0 damselfly={}\n",
        crate::version::REDIS_VERSION,
        usize::BITS,
        env!("CARGO_PKG_VERSION")
    )
}

/// `--help`'s sections, in the order they are printed.
const AREAS: &[&str] = &[
    "Network and clients",
    "Process, threads and keyspace",
    "Memory and eviction",
    "Persistence",
    "Replication",
    "Security: passwords, ACL, TLS",
    "Scripting",
    "Data structure encodings",
    "Logging and observability",
    "Memcached protocol",
];

/// The `--help` section of a parameter: by name, so that a newcomer finds a flag by what it is
/// about; `help_lists_every_flag_in_an_area` keeps every parameter classified.
fn area(name: &str) -> Option<&'static str> {
    let has = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    let a = if name.starts_with("memcached") {
        9
    } else if has(&[
        "tls",
        "no_tls",
        "requirepass",
        "acl",
        "protected-mode",
        "enable-",
    ]) {
        5
    } else if has(&["repl", "replica", "master", "min-replicas", "propagation-"]) {
        4
    } else if has(&[
        "save",
        "dir",
        "dbfilename",
        "snapshot",
        "rdb",
        "append",
        "aof",
        "auto-aof",
        "no-append",
        "stop-writes",
        "loading-",
        "key-load",
        "shutdown-",
    ]) {
        3
    } else if has(&[
        "maxmemory",
        "cache_mode",
        "lazyfree",
        "lfu",
        "activerehashing",
        "active-",
    ]) {
        2
    } else if has(&["lua", "busy"]) {
        6
    } else if has(&["list-", "hash-", "set-max", "zset-", "hll-", "stream-"]) {
        7
    } else if has(&[
        "log",
        "slowlog",
        "latency",
        "always-show",
        "set-proc",
        "proc-title",
    ]) {
        8
    } else if has(&[
        "proactor",
        "pin_",
        "shard_",
        "hz",
        "dynamic-hz",
        "daemonize",
        "pidfile",
        "supervised",
        "oom-",
        "disable-thp",
        "jemalloc",
        "databases",
        "keys_output",
    ]) {
        1
    } else if has(&[
        "port",
        "bind",
        "admin",
        "unixsocket",
        "tcp-",
        "timeout",
        "maxclients",
        "client-",
        "proto-",
        "primary_port",
        "http",
        "notify-keyspace",
        "tracking-",
    ]) {
        0
    } else {
        return None;
    };
    Some(AREAS[a])
}

pub fn help_text() -> String {
    let mut s = String::from(
        "damselfly: a multi-threaded, shared-nothing in-memory store speaking the Redis and Memcached protocols.\n\n\
         Usage: damselfly [/path/to/redis.conf | -] [--flag value ...] [--flag=value ...] [--flagfile=FILE]\n\
         A configuration file uses redis.conf's syntax (`-` reads it from standard input); options\n\
         on the command line override it. Every flag can also be given as an environment variable\n\
         DFLY_<flag>.\n",
    );
    let line = |s: &mut String, p: &Param| {
        let names: Vec<String> = std::iter::once(p.name)
            .chain(p.aliases.iter().copied())
            .map(|n| format!("--{n}"))
            .collect();
        let def = if p.name == "proactor_threads" {
            "number of CPUs".to_string()
        } else {
            format!("{:?}", p.default)
        };
        s.push_str(&format!(
            "  {:<44} {} (default: {})\n",
            names.join(", "),
            p.help,
            def
        ));
    };
    for &title in AREAS.iter() {
        s.push_str(&format!("\n{title}:\n"));
        for p in PARAMS.iter().filter(|p| area(p.name) == Some(title)) {
            line(&mut s, p);
        }
    }
    let other: Vec<&Param> = PARAMS.iter().filter(|p| area(p.name).is_none()).collect();
    if !other.is_empty() {
        s.push_str("\nOther:\n");
        for p in other {
            line(&mut s, p);
        }
    }
    s.push_str("\nStart-up:\n  --flagfile FILE                              read one --flag=value per line\n  --help, --version\n");
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn help_lists_every_flag_in_an_area() {
        for p in PARAMS {
            assert!(area(p.name).is_some(), "--{} has no --help section", p.name);
        }
        let help = help_text();
        assert!(!help.contains("\nOther:"));
        for title in AREAS {
            let at = help.find(&format!("\n{title}:\n")).unwrap();
            assert!(
                help[at..].lines().nth(2).unwrap().starts_with("  --"),
                "{title} is empty"
            );
        }
        for (flag, title) in [
            ("--tls-port", "Security: passwords, ACL, TLS"),
            ("--save", "Persistence"),
            ("--replicaof", "Replication"),
            ("--supervised", "Process, threads and keyspace"),
            ("--port", "Network and clients"),
        ] {
            let section = help.find(&format!("\n{title}:\n")).unwrap();
            let next = help[section + 1..]
                .find("\n\n")
                .map_or(help.len(), |n| section + 1 + n);
            let listed = help[section..next].lines().any(|l| {
                l.starts_with(&format!("  {flag} ")) || l.starts_with(&format!("  {flag},"))
            });
            assert!(listed, "{flag} not under {title}");
        }
    }

    use super::*;

    fn cfg(args: &[&str]) -> Result<Config, ConfigError> {
        let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse_args(&a, &[])? {
            Startup::Run(c) => Ok(*c),
            Startup::Exit(_) => panic!("exit"),
        }
    }

    #[test]
    fn redis_and_dragonfly_option_forms() {
        let rest = [
            "--list-max-listpack-size",
            "-3",
            "--bind",
            "127.0.0.1",
            "-::1",
            "--requirepass",
            "--not-an-option",
            "--active_expire_enabled",
            "--noprotected_mode",
            "-dbnum",
            "4",
            "--port=7000",
        ];
        let c = cfg(&[&["--save", "900", "1"][..], &rest].concat()).unwrap();
        assert_eq!(c.get("save").as_deref(), Some("900 1"));
        // `appendonly yes` is refused (no AOF yet), reported in Redis's format.
        let c = cfg(&[&["--appendonly", "yes"][..], &rest].concat());
        let Err(ConfigError::Fatal(text)) = c else {
            panic!("appendonly yes accepted")
        };
        assert_eq!(text.matches("FATAL CONFIG FILE ERROR").count(), 1, "{text}");
        assert!(text.contains(">>> 'appendonly \"yes\"'"), "{text}");
        let c = cfg(&[&["--save"][..], &rest].concat()).unwrap();
        assert_eq!(c.get("save").as_deref(), Some(""));
        assert_eq!(c.get("list-max-listpack-size").as_deref(), Some("-3"));
        assert_eq!(c.get("bind").as_deref(), Some("127.0.0.1 -::1"));
        assert_eq!(c.get("requirepass").as_deref(), Some("--not-an-option"));
        assert!(c.bool("active-expire-enabled"));
        assert!(!c.protected_mode());
        assert_eq!(c.dbnum(), 4);
        assert_eq!(c.port(), 7000);
    }

    #[test]
    fn every_bad_option_is_reported() {
        let Err(ConfigError::Fatal(text)) =
            cfg(&["--port", "x", "--nosuch", "1", "--hz", "1", "2"])
        else {
            panic!("accepted")
        };
        assert_eq!(text.matches("FATAL CONFIG FILE ERROR").count(), 3, "{text}");
        assert!(
            text.contains("argument couldn't be parsed into an integer"),
            "{text}"
        );
        assert!(text.contains(">>> 'nosuch \"1\"'"), "{text}");
        assert!(text.contains("wrong number of arguments"), "{text}");
    }

    #[test]
    fn config_file_then_command_line() {
        let dir = std::env::temp_dir().join(format!("dfly-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.conf");
        std::fs::write(
            &f,
            "port 7100\nhz 20\nclient-output-buffer-limit pubsub 64mb 16mb 90\n",
        )
        .unwrap();
        let c = cfg(&[f.to_str().unwrap(), "--hz", "30"]).unwrap();
        assert_eq!(c.port(), 7100);
        assert_eq!(c.hz(), 30);
        assert_eq!(
            c.get("client-output-buffer-limit").as_deref(),
            Some("normal 0 0 0 slave 268435456 67108864 60 pubsub 67108864 16777216 90")
        );
        assert_eq!(c.config_file().as_deref(), Some(f.as_path()));
        std::fs::write(&f, "port 7100\ndaemonize maybe\nfoo bar\n").unwrap();
        let Err(ConfigError::Fatal(text)) = cfg(&[f.to_str().unwrap()]) else {
            panic!("accepted")
        };
        assert!(
            text.contains(&format!("{}, at line 2", f.display())),
            "{text}"
        );
        assert!(text.contains("argument must be 'yes' or 'no'"), "{text}");
        assert!(
            text.contains(">>> 'foo bar'\nBad directive or wrong number of arguments"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The command-line cases of Redis's own suite (unit/introspection.tcl).
    #[test]
    fn redis_command_line_error_cases() {
        let fatal = |args: &[&str]| match cfg(args) {
            Err(ConfigError::Fatal(t)) => t,
            _ => panic!("{args:?} accepted"),
        };
        let has = |t: &str, line: &str, why: &str| {
            assert!(t.contains(&format!(">>> '{line}'\n")), "{line}: {t}");
            assert!(t.contains(why), "{why}: {t}");
        };
        has(&fatal(&["--port"]), "port", "wrong number of arguments");
        has(
            &fatal(&["--port", "6380", "--loglevel"]),
            "loglevel",
            "wrong number of arguments",
        );
        has(
            &fatal(&["--port", "6379", "6380"]),
            "port \"6379\" \"6380\"",
            "wrong number of arguments",
        );
        has(
            &fatal(&["--port", "--loglevel", "verbose"]),
            "port \"--loglevel\" \"verbose\"",
            "wrong number of arguments",
        );
        has(
            &fatal(&["--port", "--bla", "--loglevel", "verbose"]),
            "port \"--bla\"",
            "argument couldn't be parsed into an integer",
        );
        has(
            &fatal(&["--logfile", "--my--log--file", "--loglevel", "--bla"]),
            "loglevel \"--bla\"",
            "argument(s) must be one of the following",
        );
        has(
            &fatal(&["--replicaof", "127.0.0.1", "abc"]),
            "replicaof \"127.0.0.1\" \"abc\"",
            "Invalid master port",
        );
        // What Redis accepts: values starting with `--`, `--save` alone, one word with spaces,
        // and words before any option.
        let c = cfg(&[
            "--proc-title-template",
            "--save",
            "--save",
            "",
            "--loglevel",
            "verbose",
        ])
        .unwrap();
        assert_eq!(c.get("proc-title-template").as_deref(), Some("--save"));
        assert_eq!(c.get("save").as_deref(), Some(""));
        assert_eq!(c.get("loglevel").as_deref(), Some("verbose"));
        let c = cfg(&["--loglevel", "verbose", "--save"]).unwrap();
        assert_eq!(c.get("save").as_deref(), Some(""));
        let c = cfg(&[
            "/dev/null",
            "loglevel",
            "verbose",
            "--hz '42'",
            "--maxmemory-policy noeviction",
        ])
        .unwrap();
        assert_eq!(c.get("loglevel").as_deref(), Some("verbose"));
        assert_eq!(c.hz(), 42);
        assert_eq!(c.get("maxmemory-policy").as_deref(), Some("noeviction"));
    }

    #[test]
    fn later_sources_override_refused_values() {
        let dir = std::env::temp_dir().join(format!("dfly-override-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.conf");
        std::fs::write(&f, "save 900 1\nappendonly yes\n").unwrap();
        let c = cfg(&[f.to_str().unwrap(), "--save", "", "--appendonly", "no"]).unwrap();
        assert_eq!(c.get("save").as_deref(), Some(""));
        let Err(ConfigError::Fatal(text)) = cfg(&[f.to_str().unwrap(), "--save", ""]) else {
            panic!("appendonly yes accepted")
        };
        assert_eq!(text.matches("FATAL").count(), 1, "{text}");
        assert!(
            text.contains(&format!("{}, at line 2", f.display())),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn version_parses_like_redis_servers() {
        let v = version_text();
        let third = v.split_whitespace().nth(2).unwrap();
        assert_eq!(third, "v=7.0.15", "{v}");
        assert!(v.contains(concat!("damselfly=", env!("CARGO_PKG_VERSION"))));
    }
}
