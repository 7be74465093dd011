//! `redis.conf` files: Redis's directive syntax (one directive per line, `#` comments, quoted
//! arguments with escapes, `include`), read into directives that `args.rs` applies together
//! with the command line, so both report errors the same way.

use std::path::{Path, PathBuf};

/// Where a directive came from, for error messages and CONFIG REWRITE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Line `line` (1-based) of a configuration file.
    File { path: PathBuf, line: usize },
    /// Configuration read from standard input (`damselfly -`).
    Stdin { line: usize },
    /// The `n`th directive of the command line.
    CommandLine { n: usize },
    /// A `DFLY_<flag>` environment variable.
    Env { var: String },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { path, line } => {
                write!(
                    f,
                    "the configuration file {}, at line {line}",
                    path.display()
                )
            }
            Origin::Stdin { line } => {
                write!(f, "the configuration from standard input, at line {line}")
            }
            Origin::CommandLine { n } => write!(f, "the command line, at option {n}"),
            Origin::Env { var } => write!(f, "the environment variable {var}"),
        }
    }
}

/// One directive: a name and its arguments, with the text it was read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub origin: Origin,
    /// The line (or option) as written, for `>>> '...'` in error messages.
    pub text: String,
}

/// A line that could not be read as a directive, or a file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineError {
    pub origin: Origin,
    pub text: String,
    pub reason: String,
}

impl LineError {
    /// Redis's `*** FATAL CONFIG FILE ERROR ***` block, naming the file as well as the line.
    pub fn fatal_block(&self) -> String {
        format!(
            "\n*** FATAL CONFIG FILE ERROR (damselfly {}) ***\nReading {}\n>>> '{}'\n{}\n",
            env!("CARGO_PKG_VERSION"),
            self.origin,
            self.text,
            self.reason
        )
    }
}

/// `include` nesting deeper than this is a loop.
const MAX_INCLUDE_DEPTH: usize = 16;

/// Reads `path` and every file it includes, in order. Lines that do not parse are returned as
/// errors alongside the directives that did, so that one run reports every bad line.
pub fn read_file(path: &Path, out: &mut Vec<Directive>, errors: &mut Vec<LineError>) {
    read_file_at(path, None, 0, out, errors)
}

fn read_file_at(
    path: &Path,
    included_from: Option<(&Origin, &str)>,
    depth: usize,
    out: &mut Vec<Directive>,
    errors: &mut Vec<LineError>,
) {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            let reason = format!(
                "can't open config file '{}': {}",
                path.display(),
                io_reason(&e)
            );
            let (origin, text) = match included_from {
                Some((o, t)) => (o.clone(), t.to_string()),
                None => (
                    Origin::File {
                        path: path.to_path_buf(),
                        line: 0,
                    },
                    String::new(),
                ),
            };
            errors.push(LineError {
                origin,
                text,
                reason,
            });
            return;
        }
    };
    let abs = absolute(path);
    read_text(
        &text,
        |line| Origin::File {
            path: abs.clone(),
            line,
        },
        depth,
        out,
        errors,
    );
}

/// Reads configuration text (a file's or standard input's).
pub fn read_text(
    text: &str,
    origin: impl Fn(usize) -> Origin,
    depth: usize,
    out: &mut Vec<Directive>,
    errors: &mut Vec<LineError>,
) {
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let origin = origin(i + 1);
        let words = match split_args(line) {
            Ok(w) => w,
            Err(reason) => {
                errors.push(LineError {
                    origin,
                    text: line.to_string(),
                    reason: reason.into(),
                });
                continue;
            }
        };
        let Some((name, args)) = words.split_first() else {
            continue;
        };
        let name = name.to_ascii_lowercase();
        if name == "include" {
            if args.len() != 1 {
                errors.push(LineError {
                    origin,
                    text: line.to_string(),
                    reason: "Bad directive or wrong number of arguments".into(),
                });
            } else if depth >= MAX_INCLUDE_DEPTH {
                errors.push(LineError {
                    origin,
                    text: line.to_string(),
                    reason: format!("include nesting deeper than {MAX_INCLUDE_DEPTH} (a loop?)"),
                });
            } else {
                read_file_at(
                    Path::new(&args[0]),
                    Some((&origin, line)),
                    depth + 1,
                    out,
                    errors,
                );
            }
            continue;
        }
        out.push(Directive {
            name,
            args: args.to_vec(),
            origin,
            text: line.to_string(),
        });
    }
}

/// An I/O error as the C library words it (`strerror`), for messages Redis words that way.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}

/// `path` made absolute against the current directory (CONFIG REWRITE must find the file after
/// `dir` changed the working directory).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// Splits a line into arguments as Redis does (`sdssplitargs`, the same splitter as inline
/// commands): words separated by spaces; `"..."` with `\n \r \t \b \a \\ \" \xHH` escapes;
/// `'...'` with `\'`; a closing quote must be followed by a space or the end of the line.
pub fn split_args(line: &str) -> Result<Vec<String>, &'static str> {
    if line.contains('\0') {
        return Err("NUL byte in configuration line");
    }
    damselfly_protocol::parser::split_line(line.as_bytes())
        .map(|words| {
            words
                .iter()
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect()
        })
        .ok_or("Unbalanced quotes in configuration line")
}

/// An argument always in double quotes, as Redis's `sdscatrepr` prints it (error messages).
pub fn repr_arg(a: &str) -> String {
    let q = quote_arg(a);
    if q.starts_with('"') {
        q
    } else {
        format!("\"{q}\"")
    }
}

/// Quotes an argument so that `split_args` reads it back unchanged (CONFIG REWRITE): bare when
/// it is a plain word, otherwise in double quotes with escapes, like Redis's `sdscatrepr`.
pub fn quote_arg(a: &str) -> String {
    let plain = !a.is_empty()
        && a.bytes()
            .all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\'' && c != b'\\');
    if plain {
        return a.to_string();
    }
    sdscatrepr(a.as_bytes())
}

/// Bytes in double quotes with Redis's `sdscatrepr` escapes (`\n`, `\x01`...): CONFIG
/// REWRITE's quoting, error messages, MONITOR and log lines.
pub fn sdscatrepr(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &c in bytes {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            7 => s.push_str("\\a"),
            8 => s.push_str("\\b"),
            c if c.is_ascii_graphic() || c == b' ' => s.push(c as char),
            c => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_like_redis() {
        assert_eq!(split_args("save 900 1").unwrap(), ["save", "900", "1"]);
        assert_eq!(split_args("  logfile ''  ").unwrap(), ["logfile", ""]);
        assert_eq!(
            split_args(r#"requirepass "a b\n\x41""#).unwrap(),
            ["requirepass", "a b\nA"]
        );
        assert_eq!(split_args(r"x 'it\'s'").unwrap(), ["x", "it's"]);
        assert_eq!(
            split_args("port \"12").unwrap_err(),
            "Unbalanced quotes in configuration line"
        );
        assert!(split_args("a \"b\"c").is_err());
        assert!(split_args("a 'b").is_err());
        assert_eq!(split_args("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn includes_and_errors_name_file_and_line() {
        let dir = std::env::temp_dir().join(format!("dfly-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let inc = dir.join("inc.conf");
        std::fs::write(&inc, "hz 50\nbad \"quote\n").unwrap();
        let main = dir.join("main.conf");
        std::fs::write(
            &main,
            format!(
                "# c\nport 7000\ninclude {}\ninclude /nonexistent/x.conf\nsave 900 1 300 10\n",
                inc.display()
            ),
        )
        .unwrap();
        let (mut out, mut errs) = (Vec::new(), Vec::new());
        read_file(&main, &mut out, &mut errs);
        let names: Vec<&str> = out.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["port", "hz", "save"]);
        assert_eq!(out[2].args, ["900", "1", "300", "10"]);
        assert_eq!(
            out[1].origin,
            Origin::File {
                path: inc.clone(),
                line: 1
            }
        );
        assert_eq!(errs.len(), 2);
        let b = errs[0].fatal_block();
        assert!(b.contains("FATAL CONFIG FILE ERROR"), "{b}");
        assert!(b.contains(&format!("{}, at line 2", inc.display())), "{b}");
        assert!(b.contains(">>> 'bad \"quote'"), "{b}");
        let b = errs[1].fatal_block();
        assert!(b.contains(&format!("{}, at line 4", main.display())), "{b}");
        assert!(
            b.contains("can't open config file '/nonexistent/x.conf': No such file or directory"),
            "{b}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn include_loops_stop() {
        let dir = std::env::temp_dir().join(format!("dfly-loop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.conf");
        std::fs::write(&a, format!("include {}\n", a.display())).unwrap();
        let (mut out, mut errs) = (Vec::new(), Vec::new());
        read_file(&a, &mut out, &mut errs);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].reason.contains("nesting"), "{:?}", errs[0]);
        let _ = std::fs::remove_dir_all(dir);
    }

    proptest! {
        /// Whatever CONFIG REWRITE quotes reads back as the same argument.
        #[test]
        fn quote_roundtrips(words in proptest::collection::vec(".*", 1..4)) {
            let line: Vec<String> = words.iter().map(|w| quote_arg(w)).collect();
            let back = split_args(&line.join(" ")).unwrap();
            // Non-ASCII characters go through as their UTF-8 bytes.
            prop_assert_eq!(back, words);
        }

        /// No input line crashes the splitter.
        #[test]
        fn split_never_panics(line in ".*") {
            let _ = split_args(&line);
        }
    }
}
