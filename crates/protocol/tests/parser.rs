//! Request parser behaviour, checked against Redis 7.0 replies.

use damselfly_protocol::{Parser, ParserLimits, ProtocolError};

type Cmd = Vec<Vec<u8>>;

/// Feeds the whole input; returns parsed commands with consumed counts, and
/// the terminal state (incomplete or error).
fn parse_all(input: &[u8]) -> (Vec<(Cmd, usize)>, Result<(), ProtocolError>) {
    parse_all_with(Parser::default(), input)
}

fn parse_all_with(mut p: Parser, input: &[u8]) -> (Vec<(Cmd, usize)>, Result<(), ProtocolError>) {
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let buf = &input[start..];
        match p.next(buf) {
            Ok(Some(n)) => {
                assert!(n > 0 && n <= buf.len());
                let args: Cmd = p.args(buf).map(|a| a.to_vec()).collect();
                assert_eq!(args.len(), p.argc());
                for (i, a) in args.iter().enumerate() {
                    assert_eq!(p.arg(buf, i), &a[..]);
                }
                out.push((args, n));
                start += n;
            }
            Ok(None) => return (out, Ok(())),
            Err(e) => return (out, Err(e)),
        }
    }
}

fn cmds(input: &[u8]) -> Vec<Vec<String>> {
    let (c, r) = parse_all(input);
    assert_eq!(r, Ok(()), "input {:?}", String::from_utf8_lossy(input));
    c.into_iter()
        .map(|(a, _)| {
            a.into_iter()
                .map(|x| String::from_utf8_lossy(&x).into_owned())
                .collect()
        })
        .collect()
}

fn err(input: &[u8]) -> ProtocolError {
    let (_, r) = parse_all(input);
    r.expect_err("expected a protocol error")
}

#[test]
fn multibulk_basic() {
    let input = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
    let (c, r) = parse_all(input);
    assert_eq!(r, Ok(()));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].1, input.len());
    assert_eq!(
        c[0].0,
        vec![b"SET".to_vec(), b"key".to_vec(), b"value".to_vec()]
    );
}

#[test]
fn multibulk_zero_copy() {
    let input = b"*1\r\n$4\r\nPING\r\n";
    let mut p = Parser::default();
    assert_eq!(p.next(input), Ok(Some(input.len())));
    let a = p.arg(input, 0);
    assert_eq!(a.as_ptr(), input[8..].as_ptr());
}

#[test]
fn pipeline_and_binary() {
    let input =
        b"*2\r\n$4\r\nECHO\r\n$3\r\na\0b\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$0\r\n\r\n";
    let (c, r) = parse_all(input);
    assert_eq!(r, Ok(()));
    assert_eq!(c.len(), 3);
    assert_eq!(c[0].0[1], b"a\0b");
    assert_eq!(c[1].0, vec![b"PING".to_vec()]);
    assert_eq!(c[2].0[1], b"");
    assert_eq!(c.iter().map(|x| x.1).sum::<usize>(), input.len());
}

#[test]
fn bulk_terminator_not_checked() {
    // Redis skips the two bytes after a payload without checking them.
    let input = b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n";
    assert_eq!(cmds(input), vec![vec!["PING"], vec!["PING"]]);
    // Same for the byte after '\r' in a header.
    assert_eq!(cmds(b"*1\rx$4\ryPING\r\n"), vec![vec!["PING"]]);
}

#[test]
fn empty_commands_skipped() {
    let input = b"*0\r\n*-1\r\n*-5\r\n\r\n   \r\n\n \t \r\n*1\r\n$4\r\nPING\r\n";
    let (c, r) = parse_all(input);
    assert_eq!(r, Ok(()));
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].1,
        input.len(),
        "consumed count includes skipped empties"
    );
    // Only empties: nothing returned, incomplete.
    let (c, r) = parse_all(b"*0\r\n\r\n");
    assert!(c.is_empty());
    assert_eq!(r, Ok(()));
}

#[test]
fn multibulk_errors() {
    assert_eq!(err(b"*abc\r\n"), ProtocolError::InvalidMultibulkLength);
    assert_eq!(
        err(b"*3000000000\r\n"),
        ProtocolError::InvalidMultibulkLength
    );
    assert_eq!(
        err(b"*2147483648\r\n"),
        ProtocolError::InvalidMultibulkLength
    );
    assert_eq!(err(b"*-0\r\n"), ProtocolError::InvalidMultibulkLength);
    assert_eq!(err(b"*01\r\n"), ProtocolError::InvalidMultibulkLength);
    assert_eq!(err(b"*+1\r\n"), ProtocolError::InvalidMultibulkLength);
    assert_eq!(err(b"*\r\n"), ProtocolError::InvalidMultibulkLength);
    assert_eq!(err(b"*1 \r\n"), ProtocolError::InvalidMultibulkLength);
    assert_eq!(err(b"*1\xff\r\n"), ProtocolError::InvalidMultibulkLength);
    // i32::MAX is accepted (and waits for the arguments).
    let (c, r) = parse_all(b"*2147483647\r\n$1\r\na\r\n");
    assert!(c.is_empty());
    assert_eq!(r, Ok(()));
}

#[test]
fn bulk_errors() {
    assert_eq!(err(b"*1\r\n$-10\r\n"), ProtocolError::InvalidBulkLength);
    assert_eq!(err(b"*1\r\n$-1\r\n"), ProtocolError::InvalidBulkLength);
    assert_eq!(err(b"*1\r\n$abc\r\n"), ProtocolError::InvalidBulkLength);
    assert_eq!(err(b"*1\r\n$\r\n"), ProtocolError::InvalidBulkLength);
    assert_eq!(err(b"*1\r\n$01\r\n"), ProtocolError::InvalidBulkLength);
    assert_eq!(
        err(b"*2\r\n$4\r\necho\r\n$536870913\r\n"),
        ProtocolError::InvalidBulkLength
    );
    let (c, r) = parse_all(b"*2\r\n$4\r\necho\r\n$536870912\r\n");
    assert!(c.is_empty());
    assert_eq!(r, Ok(()));
    // Configurable limit.
    let limits = ParserLimits {
        max_bulk_len: 3,
        ..ParserLimits::default()
    };
    let (_, r) = parse_all_with(Parser::new(limits), b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(r, Err(ProtocolError::InvalidBulkLength));
    let (c, r) = parse_all_with(Parser::new(limits), b"*1\r\n$3\r\nGET\r\n");
    assert_eq!((c.len(), r), (1, Ok(())));
}

#[test]
fn expected_dollar() {
    assert_eq!(err(b"*1\r\nfoo\r\n"), ProtocolError::ExpectedDollar(b'f'));
    assert_eq!(err(b"*1\r\n\r\n"), ProtocolError::ExpectedDollar(b'\r'));
    assert_eq!(err(b"*1\r\n\xff\r\n"), ProtocolError::ExpectedDollar(0xff));
    // Without a '\r' yet it is just incomplete, as in Redis.
    let (c, r) = parse_all(b"*1\r\nfoo");
    assert!(c.is_empty());
    assert_eq!(r, Ok(()));
}

#[test]
fn too_big_lines() {
    let mut v = vec![b'x'; 64 * 1024];
    assert_eq!(parse_all(&v).1, Ok(()), "exactly the limit still waits");
    v.push(b'x');
    assert_eq!(err(&v), ProtocolError::TooBigInlineRequest);

    let mut v = b"*".to_vec();
    v.extend_from_slice(&[b'1'; 70000]);
    assert_eq!(err(&v), ProtocolError::TooBigMbulkCount);

    let mut v = b"*1\r\n$".to_vec();
    v.extend_from_slice(&[b'1'; 70000]);
    assert_eq!(err(&v), ProtocolError::TooBigBulkCount);

    // A long inline line that arrives complete is fine (Redis only errors
    // while still waiting for the newline).
    let mut v = b"set k ".to_vec();
    v.extend_from_slice(&[b'v'; 70000]);
    v.extend_from_slice(b"\r\n");
    let c = cmds(&v);
    assert_eq!(c[0][2].len(), 70000);
}

#[test]
fn nul_hides_line_end() {
    // Redis 7.0 searches line ends with strchr: a NUL before the terminator
    // makes it wait (until the inline limit is exceeded).
    for input in [
        &b"ping\0\r\n"[..],
        b"*1\0\r\n",
        b"*1\r\n$1\0\r\na\r\n",
        b"\0\r\nping\r\n",
    ] {
        let (c, r) = parse_all(input);
        assert!(c.is_empty(), "{input:?}");
        assert_eq!(r, Ok(()));
    }
    let mut v = b"ping\0\r\n".to_vec();
    v.extend_from_slice(&[b'x'; 70000]);
    assert_eq!(err(&v), ProtocolError::TooBigInlineRequest);
    let mut v = b"*1\0\r\n".to_vec();
    v.extend_from_slice(&[b'x'; 70000]);
    assert_eq!(err(&v), ProtocolError::TooBigMbulkCount);
}

#[test]
fn error_messages() {
    let cases = [
        (
            ProtocolError::InvalidMultibulkLength,
            "Protocol error: invalid multibulk length",
        ),
        (
            ProtocolError::InvalidBulkLength,
            "Protocol error: invalid bulk length",
        ),
        (
            ProtocolError::ExpectedDollar(b'f'),
            "Protocol error: expected '$', got 'f'",
        ),
        (
            ProtocolError::ExpectedDollar(b'\r'),
            "Protocol error: expected '$', got ' '",
        ),
        (
            ProtocolError::TooBigInlineRequest,
            "Protocol error: too big inline request",
        ),
        (
            ProtocolError::TooBigMbulkCount,
            "Protocol error: too big mbulk count string",
        ),
        (
            ProtocolError::TooBigBulkCount,
            "Protocol error: too big bulk count string",
        ),
        (
            ProtocolError::UnbalancedQuotes,
            "Protocol error: unbalanced quotes in request",
        ),
    ];
    for (e, msg) in cases {
        assert_eq!(e.to_string(), msg);
        assert_eq!(e.message_bytes(), msg.as_bytes());
    }
    assert_eq!(
        ProtocolError::ExpectedDollar(0xff).message_bytes(),
        b"Protocol error: expected '$', got '\xff'"
    );
    let boxed: Box<dyn std::error::Error> = Box::new(ProtocolError::InvalidBulkLength);
    assert_eq!(boxed.to_string(), "Protocol error: invalid bulk length");
}

#[test]
fn inline_basic() {
    assert_eq!(cmds(b"PING\r\n"), vec![vec!["PING"]]);
    assert_eq!(cmds(b"PING\n"), vec![vec!["PING"]]);
    assert_eq!(cmds(b"  set   a\tb  \r\n"), vec![vec!["set", "a", "b"]]);
    // Vertical tab is a separator only between tokens (isspace), not inside.
    assert_eq!(cmds(b"echo a\x0bb\r\n"), vec![vec!["echo", "a\x0bb"]]);
    assert_eq!(cmds(b"\x0b\x0cecho x\r\n"), vec![vec!["echo", "x"]]);
    // A lone '\r' inside a line separates arguments.
    assert_eq!(cmds(b"set a b\rset\n"), vec![vec!["set", "a", "b", "set"]]);
    // Mixed with multibulk.
    assert_eq!(
        cmds(b"PING\r\n*1\r\n$4\r\nPING\r\nECHO x\n"),
        vec![vec!["PING"], vec!["PING"], vec!["ECHO", "x"]]
    );
}

#[test]
fn inline_quotes() {
    let c = parse_all(b"echo \"a\\x41\\n\\r\\t\\b\\a\\\\\\\"\\q\" 'b\\'c' d\r\n").0;
    assert_eq!(
        c[0].0,
        vec![
            b"echo".to_vec(),
            b"aA\n\r\t\x08\x07\\\"q".to_vec(),
            b"b'c".to_vec(),
            b"d".to_vec()
        ]
    );
    // Incomplete \x escape is just 'x'.
    assert_eq!(cmds(b"echo \"a\\x4\"\r\n"), vec![vec!["echo", "ax4"]]);
    assert_eq!(cmds(b"echo \"\\xZZ\"\r\n"), vec![vec!["echo", "xZZ"]]);
    // Single quotes keep backslashes other than \'.
    assert_eq!(cmds(b"echo 'a\\nb'\r\n"), vec![vec!["echo", "a\\nb"]]);
    // Empty quoted arguments.
    assert_eq!(cmds(b"set k \"\"\r\n"), vec![vec!["set", "k", ""]]);
    assert_eq!(cmds(b"set k ''\r\n"), vec![vec!["set", "k", ""]]);
    // Quotes may start mid-token.
    assert_eq!(cmds(b"echo ab\"c d\"\r\n"), vec![vec!["echo", "abc d"]]);
    // Quote closed right before the line end.
    assert_eq!(cmds(b"echo \"x\"\n"), vec![vec!["echo", "x"]]);
    // Only quoted empties are still a command.
    assert_eq!(cmds(b"\"\"\r\n"), vec![vec![""]]);
}

#[test]
fn inline_unbalanced() {
    for bad in [
        &b"echo \"abc\r\n"[..],
        b"echo \"abc\"d\r\n",
        b"echo 'ab'c\r\n",
        b"echo 'abc\r\n",
        b"echo \"a\\\"\r\n",
        b"\"\r\n",
    ] {
        assert_eq!(
            err(bad),
            ProtocolError::UnbalancedQuotes,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn resumable_byte_by_byte() {
    let input: &[u8] = b"*0\r\n*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\nPING\r\n";
    let mut p = Parser::default();
    let mut got = Vec::new();
    let mut start = 0;
    for end in 1..=input.len() {
        loop {
            let buf = &input[start..end];
            match p.next(buf).unwrap() {
                Some(n) => {
                    got.push((p.args(buf).map(|a| a.to_vec()).collect::<Vec<_>>(), n));
                    start += n;
                }
                None => break,
            }
        }
    }
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1, 4 + 33);
    assert_eq!(got[1].0, vec![b"PING".to_vec()]);
    assert_eq!(start, input.len());
}

#[test]
fn bulk_remaining_tracks_big_value() {
    let value = vec![b'v'; 100_000];
    let mut input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n".to_vec();
    let header_len = input.len();
    input.extend_from_slice(&value);
    input.extend_from_slice(b"\r\n");

    let mut p = Parser::default();
    assert_eq!(p.next(&input[..5]), Ok(None));
    assert_eq!(p.bulk_remaining(), None, "no bulk header parsed yet");
    assert_eq!(p.next(&input[..10]), Ok(None));
    // "SE" of "SET\r\n" arrived: 3 bytes to go.
    assert_eq!(p.bulk_remaining(), Some(3));
    assert_eq!(p.next(&input[..header_len]), Ok(None));
    assert_eq!(p.bulk_remaining(), Some(100_002));
    assert!(p.is_partial());
    assert_eq!(p.pending_args(), 1);
    assert_eq!(p.next(&input[..header_len + 1000]), Ok(None));
    assert_eq!(p.bulk_remaining(), Some(99_002));
    assert_eq!(p.next(&input[..input.len() - 1]), Ok(None));
    assert_eq!(p.bulk_remaining(), Some(1));
    assert_eq!(p.next(&input), Ok(Some(input.len())));
    assert_eq!(p.bulk_remaining(), None);
    assert!(!p.is_partial());
    assert_eq!(p.argc(), 3);
    assert_eq!(p.arg(&input, 2), &value[..]);
}

#[test]
fn huge_declared_count_does_not_preallocate() {
    let mut p = Parser::default();
    assert_eq!(p.next(b"*2147483647\r\n"), Ok(None));
    assert!(p.heap_bytes() <= 1024 * 16 + 64, "heap {}", p.heap_bytes());
}

#[test]
fn million_args_in_small_reads_is_linear() {
    // 1M args fed 7 bytes at a time; quadratic rescanning would take minutes.
    let n = 1_000_000;
    let mut input = format!("*{n}\r\n").into_bytes();
    for _ in 0..n {
        input.extend_from_slice(b"$1\r\nx\r\n");
    }
    let mut p = Parser::default();
    let t = std::time::Instant::now();
    let mut end = 0;
    let res = loop {
        end = (end + 7).min(input.len());
        if let Some(c) = p.next(&input[..end]).unwrap() {
            break c;
        }
        assert!(end < input.len());
    };
    assert_eq!(res, input.len());
    assert_eq!(p.argc(), n);
    assert!(t.elapsed().as_secs() < 20);
    // Capacity is released before the next command.
    assert_eq!(p.next(b"*1\r\n$4\r\nPING\r\n"), Ok(Some(14)));
    assert!(p.heap_bytes() <= 1024 * 16 + 64);
}

#[test]
fn long_header_in_small_reads_is_linear() {
    // A 60KB inline line delivered 1 byte at a time must not rescan.
    let mut input = b"echo ".to_vec();
    input.extend_from_slice(&[b'a'; 60_000]);
    input.extend_from_slice(b"\r\n");
    let mut p = Parser::default();
    let t = std::time::Instant::now();
    for end in 1..input.len() {
        assert_eq!(p.next(&input[..end]), Ok(None));
    }
    assert_eq!(p.next(&input), Ok(Some(input.len())));
    assert!(t.elapsed().as_secs() < 5);
}

#[test]
fn set_limits_applies() {
    let mut p = Parser::default();
    p.set_limits(ParserLimits {
        max_bulk_len: 10,
        max_inline_len: 16,
        unauthenticated: false,
    });
    assert_eq!(p.limits().max_inline_len, 16);
    assert_eq!(p.next(&[b'x'; 17]), Err(ProtocolError::TooBigInlineRequest));
    p.reset();
    assert_eq!(
        p.next(b"*1\r\n$11\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
}

#[test]
fn unauthenticated_limits() {
    let limits = ParserLimits {
        unauthenticated: true,
        ..ParserLimits::default()
    };
    let ten = format!("*10\r\n{}", "$1\r\nx\r\n".repeat(10));
    assert!(Parser::new(limits).next(ten.as_bytes()).unwrap().is_some());
    assert_eq!(
        Parser::new(limits).next(b"*11\r\n"),
        Err(ProtocolError::UnauthenticatedMultibulkLength)
    );
    assert_eq!(
        Parser::new(limits).next(b"*1\r\n$16385\r\n"),
        Err(ProtocolError::UnauthenticatedBulkLength)
    );
    assert_eq!(
        Parser::new(limits).next(b"*1\r\n$16385x\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
    let ok = format!("*1\r\n${}\r\n{}\r\n", 16384, "y".repeat(16384));
    assert!(Parser::new(limits).next(ok.as_bytes()).unwrap().is_some());
}
