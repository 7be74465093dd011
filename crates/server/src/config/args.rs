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
use super::{find_param, Config, ConfigError, Kind, PARAMS};

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
    command_line(rest, 0, &mut directives, &mut errors, &mut exit)?;
    if let Some(text) = exit {
        return Ok(Startup::Exit(text));
    }

    let cfg = Config::new();
    // A value damselfly refuses counts only if no later source overrides it (`redis.conf` says
    // `save 900 1`, the command line `--save ""`): it is reported at the directive that set it.
    let mut set_by: std::collections::HashMap<&'static str, &Directive> = Default::default();
    for d in &directives {
        let args: Vec<&str> = d.args.iter().map(String::as_str).collect();
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
    if let Some(path) = config_path {
        cfg.set_config_file(Some(file::absolute(Path::new(path))));
    }
    Ok(Startup::Run(Box::new(cfg)))
}

/// Does this option word start a directive (rather than being an argument of the previous one)?
/// `--anything` does, except right after a bare `--name` that is not a boolean, where it is that
/// directive's argument (Redis: `--masterauth --secret`), unless it names a known option.
/// `-name` does only for known names, so `-2` and `-::1` stay arguments.
fn option_name(word: &str) -> Option<&str> {
    if let Some(n) = word.strip_prefix("--") {
        return (!n.is_empty()).then_some(n);
    }
    let n = word.strip_prefix('-')?;
    let n = n.split_once('=').map_or(n, |(n, _)| n);
    known(n).then_some(word.trim_start_matches('-'))
}

fn known(name: &str) -> bool {
    matches!(
        name,
        "help" | "h" | "helpfull" | "version" | "v" | "flagfile"
    ) || find_param(name).is_some()
        || name
            .strip_prefix("no")
            .and_then(find_param)
            .is_some_and(|p| matches!(p.kind, Kind::Bool))
}

fn command_line(
    words: &[String],
    depth: usize,
    out: &mut Vec<Directive>,
    errors: &mut Vec<LineError>,
    exit: &mut Option<String>,
) -> Result<(), ConfigError> {
    if depth > 8 {
        return Err(ConfigError::Io("flagfile nesting too deep".into()));
    }
    // (name, inline `=value`, following words)
    let mut groups: Vec<(String, Option<String>, Vec<String>)> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        let open_bare = groups.last().is_some_and(|(n, inline, args)| {
            inline.is_none()
                && args.is_empty()
                && !find_param(n).is_some_and(|p| matches!(p.kind, Kind::Bool))
        });
        match option_name(w) {
            Some(body) if !(open_bare && w.starts_with("--") && !known(split_eq(body).0)) => {
                let (name, inline) = split_eq(body);
                groups.push((name.to_string(), inline.map(str::to_string), Vec::new()));
            }
            _ => match groups.last_mut() {
                Some((_, None, args)) => args.push(w.clone()),
                _ => {
                    return Err(ConfigError::Io(format!(
                        "unexpected argument '{w}' (options look like --port 6379; a \
                         configuration file must come first)"
                    )))
                }
            },
        }
    }
    for (name, inline, args) in groups {
        let n = out.len() + 1;
        let text = std::iter::once(format!("--{name}"))
            .chain(inline.iter().map(|v| format!("={v}")))
            .chain(args.iter().map(|a| format!(" {}", file::quote_arg(a))))
            .collect::<String>();
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
                command_line(&lines, depth + 1, out, errors, exit)?;
                continue;
            }
            _ => {}
        }
        let origin = Origin::CommandLine { n };
        let (name, args) = match (inline, find_param(&name)) {
            (Some(v), _) => (name, vec![v]),
            (None, Some(_)) if !args.is_empty() => (name, args),
            (None, Some(p)) => match p.kind {
                Kind::Bool => (name, vec!["yes".to_string()]),
                // `--save` alone (Redis): no save points.
                Kind::Words(_) => (name, vec![String::new()]),
                _ => {
                    errors.push(LineError {
                        origin,
                        text,
                        reason: format!("option --{name} needs a value"),
                    });
                    continue;
                }
            },
            (None, None) => match name.strip_prefix("no").and_then(find_param) {
                Some(p) if matches!(p.kind, Kind::Bool) && args.is_empty() => {
                    (p.name.to_string(), vec!["no".to_string()])
                }
                _ => {
                    errors.push(LineError {
                        origin,
                        text,
                        reason: "Bad directive or wrong number of arguments (see --help)".into(),
                    });
                    continue;
                }
            },
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
        crate::commands::connection::REDIS_VERSION,
        usize::BITS,
        env!("CARGO_PKG_VERSION")
    )
}

pub fn help_text() -> String {
    let mut s = String::from(
        "damselfly: a multi-threaded, shared-nothing in-memory store speaking the Redis and Memcached protocols.\n\n\
         Usage: damselfly [/path/to/redis.conf | -] [--flag value ...] [--flag=value ...] [--flagfile=FILE]\n\
         A configuration file uses redis.conf's syntax (`-` reads it from standard input); options\n\
         on the command line override it. Every flag can also be given as an environment variable\n\
         DFLY_<flag>.\n\nFlags:\n",
    );
    for p in PARAMS {
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
    }
    s.push_str("  --flagfile FILE                              read one --flag=value per line\n  --help, --version\n");
    s
}

#[cfg(test)]
mod tests {
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
        let c = cfg(&[
            "--save",
            "900",
            "1",
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
        ]);
        // `save 900 1` is refused (no snapshots yet): every other directive is reported too.
        let Err(ConfigError::Fatal(text)) = c else {
            panic!("save 900 1 accepted")
        };
        assert_eq!(text.matches("FATAL CONFIG FILE ERROR").count(), 1, "{text}");
        assert!(text.contains(">>> '--save 900 1'"), "{text}");
        let c = cfg(&[
            "--save",
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
        ])
        .unwrap();
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
        assert!(text.contains(">>> '--nosuch 1'"), "{text}");
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

    #[test]
    fn later_sources_override_refused_values() {
        let dir = std::env::temp_dir().join(format!("dfly-override-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.conf");
        std::fs::write(&f, "save 900 1\nnotify-keyspace-events KEA\n").unwrap();
        let c = cfg(&[
            f.to_str().unwrap(),
            "--save",
            "",
            "--notify-keyspace-events",
            "",
        ])
        .unwrap();
        assert_eq!(c.get("save").as_deref(), Some(""));
        let Err(ConfigError::Fatal(text)) = cfg(&[f.to_str().unwrap(), "--save", ""]) else {
            panic!("notify-keyspace-events KEA accepted")
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
