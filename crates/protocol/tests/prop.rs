//! Property tests: chunking independence and robustness on hostile input.

use damselfly_protocol::{Parser, ParserLimits, ProtocolError};
use proptest::prelude::*;

type Cmd = Vec<Vec<u8>>;

/// Result of feeding a stream: commands with consumed counts, final outcome.
type Outcome = (Vec<(Cmd, usize)>, Result<(), ProtocolError>);

/// Feeds `input` to a parser, revealing it in chunks of the given sizes
/// (cycled), like a connection appending socket reads to its buffer and
/// draining consumed bytes.
fn feed(limits: ParserLimits, input: &[u8], chunks: &[usize]) -> Outcome {
    let mut p = Parser::new(limits);
    let mut out = Vec::new();
    let mut start = 0;
    let mut end = 0;
    let mut ci = 0;
    loop {
        let step = if chunks.is_empty() {
            input.len()
        } else {
            chunks[ci % chunks.len()].max(1)
        };
        ci += 1;
        end = (end + step).min(input.len());
        // Parse everything available; each success must consume bytes.
        loop {
            let buf = &input[start..end];
            match p.next(buf) {
                Ok(Some(n)) => {
                    assert!(
                        n > 0 && n <= buf.len(),
                        "bad consumed count {n} of {}",
                        buf.len()
                    );
                    out.push((p.args(buf).map(|a| a.to_vec()).collect(), n));
                    start += n;
                }
                Ok(None) => break,
                Err(e) => return (out, Err(e)),
            }
            // Memory stays bounded by the bytes received: every multibulk
            // argument costs at least 6 input bytes, inline args live in a
            // scratch buffer no bigger than the line.
            let received = end - start + 1;
            let bound = 2 * (16 * (1024 + received) + received) + 64 * 1024;
            assert!(p.heap_bytes() <= bound, "heap {} > {bound}", p.heap_bytes());
        }
        let received = end - start + 1;
        let bound = 2 * (16 * (1024 + received) + received) + 64 * 1024;
        assert!(p.heap_bytes() <= bound, "heap {} > {bound}", p.heap_bytes());
        if let Some(r) = p.bulk_remaining() {
            assert!(r > 0 && r <= limits.max_bulk_len as usize + 2);
        }
        if end == input.len() {
            return (out, Ok(()));
        }
    }
}

#[derive(Clone, Debug)]
enum Wire {
    Multibulk(Cmd),
    /// Inline command; args are encoded bare, double- or single-quoted.
    Inline(Vec<(Vec<u8>, u8)>),
    /// `*0`, `*-1`, blank inline line, ...
    Empty(&'static [u8]),
}

fn is_bare_safe(a: &[u8]) -> bool {
    !a.is_empty()
        && a.iter()
            .all(|&c| c.is_ascii_graphic() && c != b'"' && c != b'\'' && c != b'\\')
}

fn encode(cmds: &[Wire]) -> (Vec<u8>, Vec<Cmd>) {
    let mut out = Vec::new();
    let mut expected = Vec::new();
    for w in cmds {
        match w {
            Wire::Multibulk(args) => {
                out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
                for a in args {
                    out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                    out.extend_from_slice(a);
                    out.extend_from_slice(b"\r\n");
                }
                expected.push(args.clone());
            }
            Wire::Inline(args) => {
                for (i, (a, style)) in args.iter().enumerate() {
                    if i > 0 {
                        out.push(b' ');
                    }
                    match style % 3 {
                        // A bare first arg starting with '*' would read as multibulk.
                        0 if is_bare_safe(a) && !(i == 0 && a[0] == b'*') => {
                            out.extend_from_slice(a)
                        }
                        1 if !a
                            .iter()
                            .any(|&c| c == b'\'' || c == b'\n' || c == 0 || c == b'\\') =>
                        {
                            out.push(b'\'');
                            out.extend_from_slice(a);
                            out.push(b'\'');
                        }
                        _ => {
                            out.push(b'"');
                            for &c in a {
                                match c {
                                    b'"' => out.extend_from_slice(b"\\\""),
                                    b'\\' => out.extend_from_slice(b"\\\\"),
                                    b' '..=b'~' => out.push(c),
                                    _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
                                }
                            }
                            out.push(b'"');
                        }
                    }
                }
                out.extend_from_slice(b"\r\n");
                expected.push(args.iter().map(|(a, _)| a.clone()).collect());
            }
            Wire::Empty(b) => out.extend_from_slice(b),
        }
    }
    (out, expected)
}

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..24),
        "[a-zA-Z0-9_:.-]{1,12}".prop_map(|s| s.into_bytes()),
        prop::collection::vec(any::<u8>(), 200..1500),
    ]
}

fn wire() -> impl Strategy<Value = Wire> {
    prop_oneof![
        4 => prop::collection::vec(arg(), 1..6).prop_map(Wire::Multibulk),
        2 => prop::collection::vec((arg(), any::<u8>()), 1..5).prop_map(Wire::Inline),
        1 => prop::sample::select(vec![
            &b"*0\r\n"[..], b"*-1\r\n", b"*-42\r\n", b"\r\n", b"\n", b"   \t \r\n",
        ])
        .prop_map(Wire::Empty),
    ]
}

fn chunks() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        Just(vec![1]),
        prop::collection::vec(1usize..8, 1..16),
        prop::collection::vec(1usize..600, 1..16),
    ]
}

/// Small limits so the "too big" paths and the bulk limit are exercised.
fn limits() -> impl Strategy<Value = ParserLimits> {
    prop_oneof![
        Just(ParserLimits::default()),
        (0u64..64, 0usize..64, any::<bool>()).prop_map(|(b, i, u)| ParserLimits {
            max_bulk_len: b,
            max_inline_len: i,
            unauthenticated: u,
        }),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (
            any::<usize>(),
            prop::sample::select(b"*$\r\n0123456789-\" '\\\x00x".to_vec())
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(mut v: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let n = v.len().max(1);
        match *m {
            Mutation::Flip(i, b) if !v.is_empty() => v[i % n] ^= b,
            Mutation::Insert(i, b) => v.insert(i % (v.len() + 1), b),
            Mutation::Delete(i) if !v.is_empty() => {
                v.remove(i % n);
            }
            Mutation::Truncate(i) => v.truncate(i % (v.len() + 1)),
            _ => {}
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Valid streams parse to exactly the encoded commands, and the result is
    /// the same whatever the read boundaries.
    #[test]
    fn chunking_is_transparent(cmds in prop::collection::vec(wire(), 0..12), ch in chunks()) {
        let (bytes, expected) = encode(&cmds);
        let whole = feed(ParserLimits::default(), &bytes, &[]);
        prop_assert_eq!(&whole.1, &Ok(()));
        let got: Vec<Cmd> = whole.0.iter().map(|(c, _)| c.clone()).collect();
        prop_assert_eq!(&got, &expected);
        // Consumed counts cover the stream up to the last command.
        let total: usize = whole.0.iter().map(|(_, n)| n).sum();
        prop_assert!(total <= bytes.len());
        let split = feed(ParserLimits::default(), &bytes, &ch);
        prop_assert_eq!(split, whole);
    }

    /// Arbitrary bytes never panic or hang; below the inline limit even
    /// errors are independent of read boundaries.
    #[test]
    fn random_bytes_are_safe(bytes in prop::collection::vec(any::<u8>(), 0..3000), ch in chunks()) {
        let whole = feed(ParserLimits::default(), &bytes, &[]);
        let split = feed(ParserLimits::default(), &bytes, &ch);
        prop_assert_eq!(split, whole);
    }

    /// Protocol-shaped random input (headers, CRLFs, quotes) stresses the
    /// state machine more than uniform bytes.
    #[test]
    fn protocolish_bytes_are_safe(
        parts in prop::collection::vec(prop::sample::select(vec![
            &b"*"[..], b"$", b"\r\n", b"\r", b"\n", b"1", b"3", b"0", b"-1", b"12", b"x", b"\"", b"'",
            b"\\", b"\\x4", b" ", b"\0", b"*2\r\n", b"$3\r\nfoo\r\n", b"PING\r\n",
        ]), 0..200),
        ch in chunks(),
        lim in limits(),
    ) {
        let bytes = parts.concat();
        let whole = feed(lim, &bytes, &[]);
        let split = feed(lim, &bytes, &ch);
        if lim.max_inline_len >= bytes.len() {
            prop_assert_eq!(split, whole);
        }
    }

    /// Mutated valid streams, with tight limits, in random chunks.
    #[test]
    fn mutated_streams_are_safe(
        cmds in prop::collection::vec(wire(), 1..8),
        muts in prop::collection::vec(mutation(), 1..6),
        ch in chunks(),
        lim in limits(),
    ) {
        let (bytes, _) = encode(&cmds);
        let bytes = mutate(bytes, &muts);
        let whole = feed(lim, &bytes, &[]);
        let split = feed(lim, &bytes, &ch);
        if lim.max_inline_len >= bytes.len() {
            prop_assert_eq!(split, whole);
        }
    }
}
