//! Tests of the memcached request parser. Every reply below was observed from the real
//! memcached 1.6.18 (`memcached -p PORT -U 0 -t 1`) given the same bytes.

use super::*;

fn p(b: &[u8]) -> Parse<'_> {
    parse(b, &Limits::default())
}

#[track_caller]
fn ok(b: &[u8]) -> (Request<'_>, usize) {
    match p(b) {
        Parse::Request(r, n) => (r, n),
        other => panic!("{:?} -> {:?}", String::from_utf8_lossy(b), other),
    }
}

#[track_caller]
fn req(b: &[u8], cmd: Cmd) -> Request<'_> {
    let (r, n) = ok(b);
    assert_eq!(r.cmd, cmd);
    assert_eq!(n, b.len(), "consumed");
    r
}

#[track_caller]
fn err(b: &[u8]) -> (Vec<u8>, usize, bool) {
    match p(b) {
        Parse::Error {
            reply,
            consumed,
            close,
        } => (reply.into_owned(), consumed, close),
        // (Refused for its size, with the key's item unlinked: answered as an error.)
        Parse::TooLarge {
            reply, consumed, ..
        } => (reply.to_vec(), consumed, false),
        other => panic!("{:?} -> {:?}", String::from_utf8_lossy(b), other),
    }
}

/// `b` answers `reply` and drops `consumed` bytes, keeping the connection.
#[track_caller]
fn assert_err(b: &[u8], reply: &[u8], consumed: usize) {
    let (r, c, close) = err(b);
    assert_eq!(
        String::from_utf8_lossy(&r),
        String::from_utf8_lossy(reply),
        "reply to {:?}",
        String::from_utf8_lossy(b)
    );
    assert_eq!(c, consumed, "consumed by {:?}", String::from_utf8_lossy(b));
    assert!(!close);
}

/// The whole of `b` (a line) answers `reply`.
#[track_caller]
fn line_err(b: &[u8], reply: &[u8]) {
    assert_err(b, reply, b.len());
}

#[track_caller]
fn incomplete(b: &[u8]) {
    assert!(matches!(p(b), Parse::Incomplete), "{:?}", p(b));
}

fn keys<'r>(r: &'r Request) -> Vec<&'r [u8]> {
    r.keys.iter().map(|k| &k[..]).collect()
}

const ERR: &[u8] = b"ERROR\r\n";
const FMT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";

// --- framing -------------------------------------------------------------------------------

#[test]
fn incomplete_until_line_ends() {
    incomplete(b"");
    incomplete(b"get a");
    incomplete(b"get a\r");
    let r = req(b"get a\r\n", Cmd::Get);
    assert_eq!(keys(&r), [b"a"]);
    // A bare \n ends a line too.
    let r = req(b"get a\n", Cmd::Get);
    assert_eq!(keys(&r), [b"a"]);
    // Only the line is consumed.
    let (_, n) = ok(b"get a\r\nget b\r\n");
    assert_eq!(n, 7);
}

#[test]
fn only_one_cr_is_stripped_and_tabs_are_not_separators() {
    // "get a\r\r\n" asks for the key "a\r" (memcached: END).
    let r = req(b"get a\r\r\n", Cmd::Get);
    assert_eq!(keys(&r), [&b"a\r"[..]]);
    // "set a\t0 0 1" has 4 tokens: ERROR, then the data line is another ERROR.
    line_err(b"set a\t0 0 1\r\n", ERR);
    // Leading, trailing and repeated spaces are fine.
    let r = req(b"  get  a   b  \r\n", Cmd::Get);
    assert_eq!(keys(&r), [b"a", b"b"]);
}

#[test]
fn empty_and_short_lines_are_errors() {
    line_err(b"\r\n", ERR);
    line_err(b"\n", ERR);
    line_err(b"g\r\n", ERR);
    line_err(b"m\r\n", ERR);
    line_err(b"\x00\r\n", ERR);
}

#[test]
fn nul_ends_the_line_early() {
    // memcached reads the line as a C string.
    let r = req(b"get a\x00 zzz\r\n", Cmd::Get);
    assert_eq!(keys(&r), [b"a"]);
    line_err(b"ver\x00sion\r\n", ERR);
    req(b"version\x00junk\r\n", Cmd::Version);
    let r = req(b"mg a v\x00 zz\r\n", Cmd::MetaGet);
    assert_eq!(r.meta.len(), 1);
}

#[test]
fn commands_are_case_sensitive() {
    line_err(b"GET a\r\n", ERR);
    line_err(b"STATS\r\n", ERR);
    line_err(b"MG a\r\n", ERR);
    line_err(b"Set a 0 0 1\r\n", ERR);
}

#[test]
fn long_lines_close_the_connection() {
    // Up to MAX_LINE bytes without a newline: wait.
    let mut b = b"set ".to_vec();
    b.resize(MAX_LINE, b'k');
    incomplete(&b);
    // One more: memcached closes without a reply.
    b.push(b'k');
    assert_eq!(err(&b), (vec![], MAX_LINE + 1, true));
    // The same line with its newline already there closes too (split-independent).
    b.extend_from_slice(b" 0 0 1\r\nx\r\n");
    assert_eq!(err(&b), (vec![], MAX_LINE + 1, true));
    // A line of exactly MAX_LINE bytes before its \n is read (memcached: bad format for the
    // 2044-byte key, then ERROR for the data line).
    let mut b = b"set ".to_vec();
    b.resize(MAX_LINE - 6, b'k');
    b.extend_from_slice(b" 0 0 1\n");
    assert_eq!(b.len(), MAX_LINE + 1);
    line_err(&b, FMT);
    // Junk closes.
    let junk = b"xyz ".repeat(600);
    assert!(err(&junk).2);
}

#[test]
fn long_get_lines_are_served() {
    // memcached 1.6.18 served `get k k k ...` of 400 KB, split over two writes: END.
    let mut b = b"get ".to_vec();
    b.extend_from_slice(&b"k ".repeat(200_000));
    incomplete(&b);
    b.extend_from_slice(b"\r\n");
    let r = req(&b, Cmd::Get);
    assert_eq!(r.keys.len(), 200_000);
    let mut b = b"gets ".to_vec();
    b.extend_from_slice(&b"k ".repeat(2000));
    b.extend_from_slice(b"\r\n");
    assert_eq!(req(&b, Cmd::Gets).keys.len(), 2000);
    // Up to 100 leading spaces.
    let mut b = vec![b' '; 100];
    b.extend_from_slice(b"get ");
    b.extend_from_slice(&b"k ".repeat(2000));
    incomplete(&b);
    b.extend_from_slice(b"\r\n");
    assert_eq!(req(&b, Cmd::Get).keys.len(), 2000);
    // 101 spaces: closed.
    let mut b = vec![b' '; 101];
    b.extend_from_slice(b"get ");
    b.extend_from_slice(&b"k ".repeat(2000));
    assert!(err(&b).2);
    // gat is served too (memcached serves it when the line arrives in one read).
    let mut b = b"gat 0 ".to_vec();
    b.extend_from_slice(&b"k ".repeat(2000));
    b.extend_from_slice(b"\r\n");
    assert_eq!(req(&b, Cmd::Gat).keys.len(), 2000);
    // Our bound.
    let mut b = b"get ".to_vec();
    b.resize(MAX_RETRIEVAL_LINE, b'k');
    incomplete(&b);
    b.push(b'k');
    assert_eq!(err(&b), (vec![], MAX_RETRIEVAL_LINE + 1, true));
}

// --- retrieval -----------------------------------------------------------------------------

#[test]
fn get_and_gat() {
    let r = req(b"get a b c\r\n", Cmd::Get);
    assert_eq!(keys(&r), [b"a", b"b", b"c"]);
    line_err(b"get\r\n", ERR);
    line_err(b"gets\r\n", ERR);
    line_err(b"gat\r\n", ERR);
    line_err(b"getx a\r\n", ERR);
    let r = req(b"gat 10 a b\r\n", Cmd::Gat);
    assert_eq!((r.exptime, keys(&r)), (10, vec![&b"a"[..], b"b"]));
    // No key at all: memcached answers END.
    let r = req(b"gat 10\r\n", Cmd::Gat);
    assert!(r.keys.is_empty());
    let r = req(b"gats 1\r\n", Cmd::Gats);
    assert!(r.keys.is_empty());
    line_err(b"gat x a\r\n", b"CLIENT_ERROR invalid exptime argument\r\n");
    // bget: an ancient alias.
    req(b"bget a\r\n", Cmd::Get);
    // More than memcached's 24 tokens.
    let mut b = b"get".to_vec();
    for _ in 0..30 {
        b.extend_from_slice(b" a");
    }
    b.extend_from_slice(b" \r\n");
    assert_eq!(req(&b, Cmd::Get).keys.len(), 30);
}

#[test]
fn get_key_length() {
    let k250 = vec![b'k'; 250];
    let mut b = b"get a ".to_vec();
    b.extend_from_slice(&k250);
    b.extend_from_slice(b"\r\n");
    assert_eq!(req(&b, Cmd::Get).keys.len(), 2);
    // A 251-byte key anywhere fails the line (the values of the keys before it are dropped).
    let mut b = b"get a ".to_vec();
    b.extend_from_slice(&[b'k'; 251]);
    b.extend_from_slice(b" b\r\n");
    line_err(&b, FMT);
    // Control characters are fine in keys (memcached stored and served "a\x01b").
    let r = req(b"get a\x01b\r\n", Cmd::Get);
    assert_eq!(keys(&r), [b"a\x01b"]);
}

// --- storage -------------------------------------------------------------------------------

#[test]
fn set_and_friends() {
    for (name, cmd) in [
        ("set", Cmd::Set),
        ("add", Cmd::Add),
        ("replace", Cmd::Replace),
        ("append", Cmd::Append),
        ("prepend", Cmd::Prepend),
    ] {
        let b = format!("{name} k 5 100 3\r\nabc\r\n");
        let r = req(b.as_bytes(), cmd);
        assert_eq!(keys(&r), [b"k"]);
        assert_eq!(
            (r.flags, r.exptime, r.data, r.noreply),
            (5, 100, &b"abc"[..], false)
        );
        let b = format!("{name} k 5 100 3 noreply\r\nabc\r\n");
        assert!(req(b.as_bytes(), cmd).noreply);
    }
    let r = req(b"cas k 1 2 3 99\r\nabc\r\n", Cmd::Cas);
    assert_eq!((r.flags, r.exptime, r.cas, r.data), (1, 2, 99, &b"abc"[..]));
    assert!(req(b"cas a 0 0 1 5 noreply\r\nx\r\n", Cmd::Cas).noreply);
    // Empty value.
    assert_eq!(req(b"set a 0 0 0\r\n\r\n", Cmd::Set).data, b"");
    incomplete(b"set a 0 0 0\r\n\n");
    // A bare \n ends the line but not the data block.
    assert_eq!(req(b"set a 0 0 1\nx\r\n", Cmd::Set).data, b"x");
    // A last token that is not noreply is ignored (memcached: STORED).
    assert!(!req(b"set a 0 0 1 foo\r\nx\r\n", Cmd::Set).noreply);
    // "1\r": the line's extra \r is whitespace after the number (memcached: STORED).
    assert_eq!(req(b"set a 0 0 1\r\r\nx\r\n", Cmd::Set).data, b"x");
}

#[test]
fn set_data_arrives_in_pieces() {
    let full = b"set a 0 0 5\r\nhello\r\n";
    for n in 0..full.len() {
        incomplete(&full[..n]);
    }
    assert_eq!(req(full, Cmd::Set).data, b"hello");
}

#[test]
fn set_token_count() {
    line_err(b"set a 0 0\r\n", ERR);
    line_err(b"set a 0 0 1 noreply x\r\n", ERR);
    line_err(b"cas a 0 0 1\r\n", ERR);
    // `set a 0 0 noreply` has six tokens and a bad length: silent.
    line_err(b"set a 0 0 noreply\r\n", b"");
}

#[test]
fn bad_data_chunk() {
    // memcached reads exactly length + 2 bytes, then checks that they end in \r\n; the rest
    // is the next command ("\r\n" there: ERROR).
    assert_err(
        b"set a 0 0 1\r\nabc\r\n",
        b"CLIENT_ERROR bad data chunk\r\n",
        16,
    );
    line_err(b"\r\n", ERR);
    assert_err(
        b"set a 0 0 1\nx\nget a\r\n",
        b"CLIENT_ERROR bad data chunk\r\n",
        15,
    );
    assert_err(
        b"set a 0 0 1\r\nx\n\r\nversion\r\n",
        b"CLIENT_ERROR bad data chunk\r\n",
        16,
    );
    // noreply silences it.
    assert_err(b"set a 0 0 1 noreply\r\nabc\r\n", b"", 24);
}

#[test]
fn storage_numbers() {
    // Flags: unsigned 32-bit after a 64-bit strtoul.
    assert_eq!(req(b"set a 4294967296 0 1\r\nx\r\n", Cmd::Set).flags, 0);
    assert_eq!(
        req(b"set a 18446744073709551615 0 1\r\nx\r\n", Cmd::Set).flags,
        u32::MAX
    );
    // A refused line does not swallow the data block: memcached answers ERROR to it.
    assert_err(b"set a -1 0 1\r\nx\r\n", FMT, 14);
    line_err(b"set a 99999999999999999999 0 1\r\n", FMT);
    line_err(b"set a x 0 1\r\n", FMT);
    // Exptime and length: 64-bit strtol truncated to 32 bits.
    assert_eq!(
        req(b"set a 0 -2147483649 1\r\nx\r\n", Cmd::Set).exptime,
        2147483647
    );
    assert_eq!(
        req(b"set a 0 2147483648 1\r\nx\r\n", Cmd::Set).exptime,
        -2147483648
    );
    assert_eq!(req(b"set a 0 4294967297 1\r\nx\r\n", Cmd::Set).exptime, 1);
    assert_eq!(req(b"set a 0 0 4294967297\r\nx\r\n", Cmd::Set).data, b"x");
    line_err(b"set a 0 0 -1\r\n", FMT);
    line_err(b"set a 0 0 2147483646\r\n", FMT);
    line_err(b"set a 0 0 2147483647\r\n", FMT);
    line_err(b"set a 0 0 99999999999999999999\r\n", FMT);
    line_err(b"set a 0 0 x\r\n", FMT);
    line_err(b"set a 0 0 0x1\r\n", FMT);
    // Leading whitespace, a sign, and anything after a whitespace byte are accepted.
    assert_eq!(req(b"set a 0 \t5 1\r\nx\r\n", Cmd::Set).exptime, 5);
    assert_eq!(req(b"set a 0 5\tz 1\r\nx\r\n", Cmd::Set).exptime, 5);
    assert_eq!(req(b"set a +0 -0 1\r\nx\r\n", Cmd::Set).flags, 0);
    // noreply silences the error (memcached then answers ERROR to the data line).
    line_err(b"set a 0 0 abc noreply\r\n", b"");
    // cas value.
    line_err(b"cas a 0 0 1 x\r\n", FMT);
    line_err(b"cas a 0 0 1 -1\r\n", FMT);
}

#[test]
fn storage_key_length() {
    let mut b = b"set ".to_vec();
    b.extend_from_slice(&[b'k'; 251]);
    b.extend_from_slice(b" 0 0 1\r\n");
    line_err(&b, FMT);
    let mut b = b"set ".to_vec();
    b.extend_from_slice(&[b'k'; 251]);
    b.extend_from_slice(b" 0 0 1 noreply\r\n");
    line_err(&b, b"");
    let r = req(b"set a\x01b 0 0 1\r\nx\r\n", Cmd::Set);
    assert_eq!(keys(&r), [b"a\x01b"]);
}

#[test]
fn too_large_is_swallowed() {
    const TL: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
    // memcached 1.6.18 -I 1m: the largest value under key "a", flags 0 is 1048516 bytes; 4
    // fewer with non-zero flags; 9 fewer under a 10-byte key.
    for (line, fits) in [
        ("set a 0 0 1048516", true),
        ("set a 0 0 1048517", false),
        ("set a 1 0 1048512", true),
        ("set a 1 0 1048513", false),
        ("set a 1 0 1048516", false),
        ("set abcdefghij 0 0 1048507", true),
        ("set abcdefghij 0 0 1048508", false),
    ] {
        let b = format!("{line}\r\n");
        let vlen: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
        if fits {
            incomplete(b.as_bytes());
        } else {
            // Decided on the line: every byte of the block is swallowed, even unsent ones.
            assert_err(b.as_bytes(), TL, b.len() + vlen + 2);
        }
    }
    let mut b = b"set a 0 0 1048516\r\n".to_vec();
    b.resize(b.len() + 1048516, b'x');
    b.extend_from_slice(b"\r\n");
    assert_eq!(req(&b, Cmd::Set).data.len(), 1048516);
    // noreply: silent, still swallowed.
    let b = b"set a 0 0 2000000 noreply\r\n";
    assert_err(b, b"", b.len() + 2_000_002);
    // The largest length memcached accepts at all.
    let b = b"set a 0 0 2147483645\r\n";
    assert_err(b, TL, b.len() + 2_147_483_647);
}

// --- other text commands -------------------------------------------------------------------

#[test]
fn incr_decr() {
    let r = req(b"incr a 5\r\n", Cmd::Incr);
    assert_eq!((keys(&r), r.num, r.noreply), (vec![&b"a"[..]], 5, false));
    assert!(req(b"decr a 5 noreply\r\n", Cmd::Decr).noreply);
    assert_eq!(
        req(b"incr a 18446744073709551615\r\n", Cmd::Incr).num,
        u64::MAX
    );
    const DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
    line_err(b"incr a -1\r\n", DELTA);
    line_err(b"incr a 18446744073709551616\r\n", DELTA);
    line_err(b"incr a 1x\r\n", DELTA);
    line_err(b"incr a x noreply\r\n", b"");
    // strtoull quirks memcached lets through.
    assert_eq!(req(b"incr a -18446744073709551615\r\n", Cmd::Incr).num, 1);
    assert_eq!(req(b"incr a \t2\r\n", Cmd::Incr).num, 2);
    assert_eq!(req(b"incr a 3\tzz\r\n", Cmd::Incr).num, 3);
    assert_eq!(req(b"incr a +4\r\n", Cmd::Incr).num, 4);
    // A fifth token that is not noreply is ignored.
    assert!(!req(b"incr a 1 foo\r\n", Cmd::Incr).noreply);
    // `decr noreply 1` decrements the key "noreply" (memcached: NOT_FOUND).
    let r = req(b"decr noreply 1\r\n", Cmd::Decr);
    assert_eq!((keys(&r), r.noreply), (vec![&b"noreply"[..]], false));
    line_err(b"incr a\r\n", ERR);
    line_err(b"incr a 1 2 3\r\n", ERR);
}

#[test]
fn delete() {
    const USAGE: &[u8] =
        b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
    assert!(!req(b"delete a\r\n", Cmd::Delete).noreply);
    assert!(!req(b"delete a 0\r\n", Cmd::Delete).noreply);
    assert!(req(b"delete a noreply\r\n", Cmd::Delete).noreply);
    assert!(req(b"delete a 0 noreply\r\n", Cmd::Delete).noreply);
    line_err(b"delete a 1\r\n", USAGE);
    line_err(b"delete a 00\r\n", USAGE);
    line_err(b"delete a 0 0\r\n", USAGE);
    line_err(b"delete a 1 noreply\r\n", b"");
    line_err(b"delete a noreply noreply\r\n", b"");
    line_err(b"delete a x y z\r\n", ERR);
    line_err(b"delete\r\n", ERR);
    let mut b = b"delete ".to_vec();
    b.extend_from_slice(&[b'k'; 251]);
    b.extend_from_slice(b"\r\n");
    line_err(&b, FMT);
}

#[test]
fn touch() {
    let r = req(b"touch a 10\r\n", Cmd::Touch);
    assert_eq!(
        (keys(&r), r.exptime, r.noreply),
        (vec![&b"a"[..]], 10, false)
    );
    assert!(req(b"touch a 1 noreply\r\n", Cmd::Touch).noreply);
    assert!(!req(b"touch a 10 foo\r\n", Cmd::Touch).noreply);
    line_err(b"touch a\r\n", ERR);
    line_err(b"touch a 1 2 3\r\n", ERR);
    line_err(
        b"touch a x\r\n",
        b"CLIENT_ERROR invalid exptime argument\r\n",
    );
    line_err(b"touch a x noreply\r\n", b"");
}

#[test]
fn flush_all() {
    let r = req(b"flush_all\r\n", Cmd::FlushAll);
    assert_eq!((r.num, r.exptime, r.noreply), (0, 0, false));
    let r = req(b"flush_all 10\r\n", Cmd::FlushAll);
    assert_eq!((r.num, r.exptime), (10, 10));
    assert!(req(b"flush_all noreply\r\n", Cmd::FlushAll).noreply);
    assert!(req(b"flush_all 0 noreply\r\n", Cmd::FlushAll).noreply);
    // A third token that is not noreply is ignored (memcached: OK).
    let r = req(b"flush_all 0 20\r\n", Cmd::FlushAll);
    assert_eq!((r.num, r.noreply), (0, false));
    let r = req(b"flush_all -5\r\n", Cmd::FlushAll);
    assert_eq!((r.num, r.exptime), (0, -5));
    assert_eq!(req(b"flush_all 4294967297\r\n", Cmd::FlushAll).num, 1);
    line_err(
        b"flush_all x\r\n",
        b"CLIENT_ERROR invalid exptime argument\r\n",
    );
    line_err(
        b"flush_all noreply 10\r\n",
        b"CLIENT_ERROR invalid exptime argument\r\n",
    );
    line_err(b"flush_all noreply noreply\r\n", b"");
    line_err(b"flush_all 1 2 3\r\n", ERR);
}

#[test]
fn verbosity_version_quit_stats_shutdown() {
    let r = req(b"verbosity 1\r\n", Cmd::Verbosity);
    assert_eq!((r.num, r.noreply), (1, false));
    assert!(req(b"verbosity 1 noreply\r\n", Cmd::Verbosity).noreply);
    assert!(!req(b"verbosity 1 2\r\n", Cmd::Verbosity).noreply);
    line_err(b"verbosity\r\n", ERR);
    line_err(b"verbosity 1 2 3\r\n", ERR);
    line_err(b"verbosity x\r\n", FMT);
    line_err(b"verbosity noreply\r\n", b"");
    req(b"version\r\n", Cmd::Version);
    req(b"version foo\r\n", Cmd::Version);
    req(b"quit\r\n", Cmd::Quit);
    req(b"quit foo\r\n", Cmd::Quit);
    assert!(req(b"stats\r\n", Cmd::Stats).args.is_empty());
    let r = req(b"stats detail on\r\n", Cmd::Stats);
    assert_eq!(r.args.as_slice(), [&b"detail"[..], b"on"]);
    line_err(b"shutdown\r\n", b"ERROR: shutdown not enabled\r\n");
    line_err(b"slabs automove 1\r\n", ERR);
    line_err(b"nonsense\r\n", ERR);
}

// --- meta ----------------------------------------------------------------------------------

fn flags(r: &Request) -> Vec<(char, String)> {
    r.meta
        .iter()
        .map(|f| (f.c as char, String::from_utf8_lossy(f.tok).into_owned()))
        .collect()
}

#[test]
fn mg() {
    let r = req(b"mg a v k s f t c h l O123 q u T30\r\n", Cmd::MetaGet);
    assert_eq!(keys(&r), [b"a"]);
    let letters: String = r.meta.iter().map(|f| f.c as char).collect();
    assert_eq!(letters, "vksftchlOquT");
    assert_eq!(r.meta_flag(b'O'), Some(&b"123"[..]));
    assert_eq!(r.exptime, 30);
    assert!(req(b"mg a\r\n", Cmd::MetaGet).meta.is_empty());
    // Every letter of 1.6.18's table is accepted by every meta command.
    req(b"mg a P L I\r\n", Cmd::MetaGet);
    req(b"mg a O\r\n", Cmd::MetaGet);
    // A token glued to a no-token flag is ignored (memcached answers as for `v`).
    assert_eq!(
        flags(&req(b"mg a vfoo\r\n", Cmd::MetaGet)),
        [('v', "foo".into())]
    );
    line_err(b"mg\r\n", ERR);
    line_err(b"mx a\r\n", ERR);
    line_err(b"mgg a\r\n", ERR);
    line_err(b"mz\r\n", ERR);
}

#[test]
fn meta_flag_errors() {
    const INVALID: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
    const DUP: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
    const TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
    line_err(b"mg a z\r\n", INVALID);
    line_err(b"mg a E5\r\n", INVALID);
    line_err(b"mg a S5\r\n", INVALID);
    for l in [b'W', b'X', b'Z', b'n', b'o', b'x'] {
        line_err(format!("mg a {}\r\n", l as char).as_bytes(), INVALID);
    }
    line_err(b"mg a v v\r\n", DUP);
    line_err(b"mg a \xffv\r\n", DUP);
    line_err(b"mg a T\r\n", TOKEN);
    line_err(b"mg a Tx\r\n", TOKEN);
    line_err(b"mg a T-5 N\r\n", TOKEN);
    line_err(b"mg a Cx\r\n", TOKEN);
    line_err(b"mg a Cx1\r\n", TOKEN);
    line_err(b"mg a C-1\r\n", TOKEN);
    line_err(b"mg a C 1\r\n", INVALID);
    // F sets no message of its own.
    line_err(b"mg a Fx\r\n", FMT);
    line_err(b"mg a Fx Tx\r\n", TOKEN);
    line_err(b"mg a Tx Fx\r\n", TOKEN);
    // An unknown flag stops at once; a bad token does not.
    line_err(b"mg a Tx z\r\n", INVALID);
    line_err(
        b"mg a M\r\n",
        b"CLIENT_ERROR incorrect length for M token\r\n",
    );
    line_err(
        b"mg a Mxx\r\n",
        b"CLIENT_ERROR incorrect length for M token\r\n",
    );
    line_err(
        b"mg a Dx\r\n",
        b"CLIENT_ERROR invalid numeric delta value\r\n",
    );
    line_err(
        b"mg a Jx\r\n",
        b"CLIENT_ERROR invalid numeric initial value\r\n",
    );
    // Opaque: 32 bytes with its letter.
    let o31 = format!("mg a O{} v\r\n", "1".repeat(31));
    req(o31.as_bytes(), Cmd::MetaGet);
    let o32 = format!("mg a O{} v\r\n", "1".repeat(32));
    line_err(o32.as_bytes(), b"CLIENT_ERROR opaque token too long\r\n");
    // Key length, checked before the flags.
    let long = format!("mg {} zz zz\r\n", "k".repeat(251));
    line_err(long.as_bytes(), FMT);
}

#[test]
fn meta_flag_count() {
    let fl = [
        "v", "k", "s", "f", "t", "c", "h", "l", "u", "O1", "T1", "N1", "R1", "F1", "C1", "I", "P",
        "L", "q",
    ];
    let line = |cmd: &str, n: usize| format!("{cmd} a {}\r\n", fl[..n].join(" "));
    req(line("mg", 17).as_bytes(), Cmd::MetaGet);
    line_err(
        line("mg", 18).as_bytes(),
        b"CLIENT_ERROR options flags are too long\r\n",
    );
    req(line("md", 17).as_bytes(), Cmd::MetaDelete);
    line_err(
        line("md", 18).as_bytes(),
        b"CLIENT_ERROR options flags too long\r\n",
    );
    req(line("ma", 17).as_bytes(), Cmd::MetaArithmetic);
    line_err(
        line("ma", 19).as_bytes(),
        b"CLIENT_ERROR options flags too long\r\n",
    );
    // ms: the length token counts; the error does not swallow the block.
    let ms = |n: usize| format!("ms a 1 {}\r\n", fl[..n].join(" "));
    let b = format!("{}x\r\n", ms(16));
    req(b.as_bytes(), Cmd::MetaSet);
    line_err(
        ms(17).as_bytes(),
        b"CLIENT_ERROR options flags too long\r\n",
    );
    // A repeated flag is found first.
    line_err(
        format!("mg a {}\r\n", "v ".repeat(17)).as_bytes(),
        b"CLIENT_ERROR duplicate flag\r\n",
    );
}

#[test]
fn base64_keys() {
    const DECODE: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
    let r = req(b"mg YQ== b v\r\n", Cmd::MetaGet);
    assert_eq!(keys(&r), [b"a"]);
    assert!(matches!(r.keys[0], Cow::Owned(_)));
    assert!(r.has_meta(b'b'));
    // Decoding stops after the first padded group; bytes outside the alphabet are skipped.
    assert_eq!(keys(&req(b"mg YQ==YWJj b v k\r\n", Cmd::MetaGet)), [b"a"]);
    assert_eq!(keys(&req(b"mg Y!Q== b v k\r\n", Cmd::MetaGet)), [b"a"]);
    assert_eq!(keys(&req(b"mg YWJj b\r\n", Cmd::MetaGet)), [b"abc"]);
    line_err(b"mg YQ b v\r\n", DECODE);
    line_err(b"mg ==== b\r\n", DECODE);
    line_err(b"mg a b\r\n", DECODE);
    line_err(b"mg a k b\r\n", DECODE);
    assert_eq!(crate::base64::decode(b"A=AA"), Some(vec![0, 0]));
    assert_eq!(crate::base64::decode(b"A==="), None);
    assert_eq!(crate::base64::decode(b""), None);
    assert_eq!(crate::base64::decode(b"AAAA"), Some(vec![0, 0, 0]));
    assert_eq!(crate::base64::decode(b"/+8="), Some(vec![0xff, 0xef]));
}

#[test]
fn ms() {
    let r = req(b"ms a 3 T30 F7 C9 MA q k O1\r\nabc\r\n", Cmd::MetaSet);
    assert_eq!(keys(&r), [b"a"]);
    assert_eq!((r.data, r.exptime, r.flags, r.cas), (&b"abc"[..], 30, 7, 9));
    assert_eq!(r.meta_flag(b'M'), Some(&b"A"[..]));
    assert_eq!(r.meta.len(), 7);
    for m in ["E", "A", "P", "R", "S"] {
        req(format!("ms a 1 M{m}\r\nx\r\n").as_bytes(), Cmd::MetaSet);
    }
    req(b"ms a 1 I\r\nx\r\n", Cmd::MetaSet);
    assert_eq!(req(b"ms a 0\r\n\r\n", Cmd::MetaSet).data, b"");
    assert_eq!(req(b"ms a 1\nx\r\n", Cmd::MetaSet).data, b"x");
    assert_eq!(req(b"ms a 4294967297\r\nx\r\n", Cmd::MetaSet).data, b"x");
    assert_eq!(req(b"ms a 1 F4294967296\r\nx\r\n", Cmd::MetaSet).flags, 0);
    let r = req(b"ms YWJj 1 b k\r\nx\r\n", Cmd::MetaSet);
    assert_eq!(keys(&r), [b"abc"]);
    incomplete(b"ms a 3 T30\r\nab");
    line_err(b"ms\r\n", ERR);
}

#[test]
fn ms_errors() {
    // Before the length is known: the block is not swallowed (memcached answers ERROR to it).
    line_err(b"ms a\r\n", FMT);
    line_err(b"ms a x\r\n", FMT);
    line_err(b"ms a -1\r\n", FMT);
    line_err(b"ms a 2147483646\r\n", FMT);
    let long = format!("ms {} 1\r\n", "k".repeat(251));
    line_err(long.as_bytes(), FMT);
    // After it: swallowed (memcached's next reply is the MN of the following line).
    for (line, reply) in [
        (
            "ms a 1 T",
            &b"CLIENT_ERROR bad token in command line format\r\n"[..],
        ),
        ("ms a 1 z", b"CLIENT_ERROR invalid flag\r\n"),
        ("ms a 1 S1", b"CLIENT_ERROR invalid flag\r\n"),
        ("ms a 1 v v", b"CLIENT_ERROR duplicate flag\r\n"),
        ("ms a 1 MX", b"CLIENT_ERROR invalid mode for ms M token\r\n"),
        ("ms a 1 Me", b"CLIENT_ERROR invalid mode for ms M token\r\n"),
        ("ms a 1 MI", b"CLIENT_ERROR invalid mode for ms M token\r\n"),
        (
            "ms a 1 Mxx",
            b"CLIENT_ERROR incorrect length for M token\r\n",
        ),
        ("ms a 1 Fx", FMT),
        ("ms a 1 F-1", FMT),
        ("ms a 1 b", b"CLIENT_ERROR error decoding key\r\n"),
        (
            "ms a 1 Cx MX",
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (
            "ms a 1 MX Cx",
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (
            "ms a 1 O11111111111111111111111111111111",
            b"CLIENT_ERROR opaque token too long\r\n",
        ),
        (
            "ms a 1 MX O11111111111111111111111111111111",
            b"CLIENT_ERROR invalid mode for ms M token\r\n",
        ),
    ] {
        let b = format!("{line}\r\n");
        assert_err(b.as_bytes(), reply, b.len() + 3);
    }
    // q silences neither a bad chunk nor a refusal.
    assert_err(
        b"ms a 1 q\r\nxyz\r\n",
        b"CLIENT_ERROR bad data chunk\r\n",
        13,
    );
    let b = b"ms a 2000000 q\r\n";
    assert_err(
        b,
        b"SERVER_ERROR object too large for cache\r\n",
        b.len() + 2_000_002,
    );
    // Too large counts the decoded key and the F flags.
    let b = b"ms a 1048516\r\n";
    incomplete(b);
    let b = b"ms YQ== 1048516 b\r\n";
    incomplete(b);
    let b = b"ms a 1048516 F1\r\n";
    assert_err(
        b,
        b"SERVER_ERROR object too large for cache\r\n",
        b.len() + 1_048_518,
    );
}

#[test]
fn md() {
    const BAD: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
    let r = req(b"md a q C5 T10 I\r\n", Cmd::MetaDelete);
    assert_eq!((r.cas, r.exptime), (5, 10));
    // M is not checked by md.
    req(b"md a Mx\r\n", Cmd::MetaDelete);
    line_err(b"md\r\n", ERR);
    for l in ["md a z", "md a v v", "md a Tx", "md a b", "md a Cx"] {
        line_err(format!("{l}\r\n").as_bytes(), BAD);
    }
    line_err(
        format!("md a O{}\r\n", "1".repeat(32)).as_bytes(),
        b"CLIENT_ERROR opaque token too long\r\n",
    );
    line_err(format!("md {}\r\n", "k".repeat(251)).as_bytes(), FMT);
}

#[test]
fn ma() {
    const BAD: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
    const MODE: &[u8] = b"CLIENT_ERROR invalid mode for ma M token\r\n";
    let r = req(b"ma a\r\n", Cmd::MetaArithmetic);
    assert_eq!(r.num, 1);
    let r = req(b"ma a D5 J7 N0 MD v\r\n", Cmd::MetaArithmetic);
    assert_eq!(r.num, 5);
    assert_eq!(r.meta_flag(b'J').and_then(parse_u64), Some(7));
    for m in ["I", "+", "D", "-"] {
        req(format!("ma a M{m}\r\n").as_bytes(), Cmd::MetaArithmetic);
    }
    line_err(b"ma\r\n", ERR);
    for l in [
        "ma a z",
        "ma a Dx",
        "ma a D-1",
        "ma a D18446744073709551616",
        "ma a MX z",
        "ma a Mxy",
    ] {
        line_err(format!("{l}\r\n").as_bytes(), BAD);
    }
    line_err(b"ma a MX\r\n", MODE);
    line_err(b"ma a Md\r\n", MODE);
    line_err(b"ma a Mi\r\n", MODE);
    line_err(format!("ma a MX O{}\r\n", "1".repeat(32)).as_bytes(), MODE);
    line_err(
        format!("ma b O{}\r\n", "1".repeat(32)).as_bytes(),
        b"CLIENT_ERROR opaque token too long\r\n",
    );
}

#[test]
fn me_and_mn() {
    let r = req(b"me a\r\n", Cmd::MetaDebug);
    assert_eq!(keys(&r), [b"a"]);
    let r = req(b"me YQ== b\r\n", Cmd::MetaDebug);
    assert_eq!(keys(&r), [b"a"]);
    assert!(r.has_meta(b'b'));
    // b only right after the key, and only alone; anything else is ignored.
    assert_eq!(keys(&req(b"me YQ== k b\r\n", Cmd::MetaDebug)), [b"YQ=="]);
    assert_eq!(keys(&req(b"me a bb\r\n", Cmd::MetaDebug)), [b"a"]);
    assert_eq!(keys(&req(b"me a zz\r\n", Cmd::MetaDebug)), [b"a"]);
    line_err(b"me\r\n", FMT);
    line_err(b"me YQ b\r\n", FMT);
    line_err(format!("me {}\r\n", "k".repeat(251)).as_bytes(), FMT);
    req(b"mn\r\n", Cmd::MetaNoop);
    req(b"mn foo bar\r\n", Cmd::MetaNoop);
    let (_, n) = ok(b"mn\nmn\r\n");
    assert_eq!(n, 3);
}

// --- numbers and deadlines -----------------------------------------------------------------

#[test]
fn numbers() {
    assert_eq!(parse_i32(b"-0"), Some(0));
    assert_eq!(parse_i32(b"+"), None);
    assert_eq!(parse_i32(b"-"), None);
    assert_eq!(parse_i32(b""), None);
    assert_eq!(parse_i32(b" "), None);
    assert_eq!(parse_i32(b"9223372036854775807"), Some(-1));
    assert_eq!(parse_i32(b"9223372036854775808"), None);
    assert_eq!(parse_i32(b"-9223372036854775808"), Some(0));
    assert_eq!(parse_i32(b"-9223372036854775809"), None);
    assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse_u64(b"18446744073709551616"), None);
    assert_eq!(parse_u64(b"-9223372036854775808"), None);
    assert_eq!(
        parse_u64(b"-9223372036854775809"),
        Some(9223372036854775807)
    );
    assert_eq!(parse_u64(b"1\r"), Some(1));
    assert_eq!(parse_u64(b"1\x0b?"), Some(1));
    assert_eq!(parse_u32(b"4294967297"), Some(1));
}

#[test]
fn deadlines() {
    let now = 1_700_000_000_000;
    assert_eq!(deadline_ms(0, now), None);
    assert_eq!(deadline_ms(10, now), Some(now + 10_000));
    assert_eq!(deadline_ms(-1, now), Some(now - 1));
    assert_eq!(deadline_ms(2_592_000, now), Some(now + 2_592_000_000));
    assert_eq!(deadline_ms(2_592_001, now), Some(2_592_001_000));
}

// --- properties ----------------------------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;

    const SMALL: Limits = Limits { max_item_size: 200 };

    /// One parse result, comparable.
    fn summary(p: &Parse) -> String {
        format!("{p:?}")
    }

    /// Parses a stream fed in `chunks` the way a session does; every result in order.
    fn drive(chunks: &[&[u8]], limits: &Limits) -> Vec<String> {
        let mut buf: Vec<u8> = Vec::new();
        let mut skip = 0usize;
        let mut out = Vec::new();
        for chunk in chunks {
            let n = skip.min(chunk.len());
            skip -= n;
            buf.extend_from_slice(&chunk[n..]);
            loop {
                let (s, consumed, stop) = {
                    let p = parse(&buf, limits);
                    let s = summary(&p);
                    match p {
                        Parse::Incomplete => break,
                        Parse::Request(_, n) => {
                            assert!(n > 0 && n <= buf.len());
                            (s, n, false)
                        }
                        Parse::Error {
                            consumed, close, ..
                        } => {
                            assert!(consumed > 0);
                            (s, consumed, close)
                        }
                        Parse::TooLarge { consumed, .. } => {
                            assert!(consumed > buf.len().min(consumed - 1));
                            (s, consumed, false)
                        }
                    }
                };
                out.push(s);
                if stop {
                    return out;
                }
                if consumed > buf.len() {
                    skip = consumed - buf.len();
                    buf.clear();
                    break;
                }
                buf.drain(..consumed);
            }
        }
        out
    }

    fn check_prefixes(b: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
        let full = parse(b, limits);
        let fs = summary(&full);
        match &full {
            Parse::Request(_, n) => prop_assert!(*n <= b.len()),
            Parse::Error {
                reply,
                consumed,
                close,
            } => {
                prop_assert!(*consumed > 0);
                if *consumed > b.len() && !*close {
                    // Only a swallowed data block reaches past the buffer.
                    let r: &[u8] = reply;
                    prop_assert!(
                        r.is_empty() || r == E_TOO_LARGE || r.starts_with(b"CLIENT_ERROR")
                    );
                    let line = b.iter().position(|&c| c == b'\n').unwrap() + 1;
                    prop_assert!(*consumed > line);
                }
            }
            Parse::TooLarge {
                reply, consumed, ..
            } => {
                // Only a swallowed data block, past its line.
                prop_assert!(reply.is_empty() || *reply == E_TOO_LARGE);
                let line = b.iter().position(|&c| c == b'\n').unwrap() + 1;
                prop_assert!(*consumed > line);
            }
            Parse::Incomplete => {}
        }
        for k in 0..b.len() {
            let p = parse(&b[..k], limits);
            if !matches!(p, Parse::Incomplete) {
                prop_assert_eq!(summary(&p), fs.clone(), "prefix {}", k);
            }
        }
        Ok(())
    }

    fn token() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"get".to_vec()),
            Just(b"gat".to_vec()),
            Just(b"set".to_vec()),
            Just(b"cas".to_vec()),
            Just(b"incr".to_vec()),
            Just(b"delete".to_vec()),
            Just(b"flush_all".to_vec()),
            Just(b"mg".to_vec()),
            Just(b"ms".to_vec()),
            Just(b"ma".to_vec()),
            Just(b"md".to_vec()),
            Just(b"me".to_vec()),
            Just(b"noreply".to_vec()),
            Just(b"0".to_vec()),
            Just(b"-1".to_vec()),
            Just(b"YQ==".to_vec()),
            "[0-9]{1,4}".prop_map(|s| s.into_bytes()),
            "[a-zA-Z][0-9a-z]{0,3}".prop_map(|s| s.into_bytes()),
            prop::collection::vec(any::<u8>(), 0..4),
        ]
    }

    fn junk() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![
                token(),
                Just(b" ".to_vec()),
                Just(b" ".to_vec()),
                Just(b"\r\n".to_vec()),
                Just(b"\n".to_vec()),
                Just(b"\r".to_vec()),
            ],
            0..40,
        )
        .prop_map(|v| v.concat())
    }

    fn key() -> impl Strategy<Value = String> {
        "[a-z0-9_:]{1,12}"
    }

    fn valid() -> impl Strategy<Value = Vec<u8>> {
        let data = prop::collection::vec(any::<u8>(), 0..300);
        let set =
            (key(), any::<u32>(), -5..100i32, data, any::<bool>()).prop_map(|(k, f, e, d, nr)| {
                let nr = if nr { " noreply" } else { "" };
                let mut b = format!("set {k} {f} {e} {}{nr}\r\n", d.len()).into_bytes();
                b.extend_from_slice(&d);
                b.extend_from_slice(b"\r\n");
                b
            });
        let text = prop_oneof![
            prop::collection::vec(key(), 1..6).prop_map(|k| format!("get {}\r\n", k.join(" "))),
            (0..100i32, prop::collection::vec(key(), 1..4))
                .prop_map(|(e, k)| format!("gats {e} {}\r\n", k.join(" "))),
            (
                key(),
                "[a-z]{0,300}",
                prop::sample::subsequence(
                    vec![" T5", " F3", " C7", " MS", " q", " k", " Oab", " I"],
                    0..5
                )
                .prop_map(|v| v.concat())
            )
                .prop_map(|(k, d, fl)| format!("ms {k} {}{fl}\r\n{d}\r\n", d.len())),
            (key(), any::<u64>()).prop_map(|(k, n)| format!("incr {k} {n}\r\n")),
            (key(), any::<bool>())
                .prop_map(|(k, nr)| format!("delete {k}{}\r\n", if nr { " noreply" } else { "" })),
            (
                key(),
                prop::sample::subsequence(
                    vec![" v", " k", " s", " t", " c", " f", " q", " T30", " Oxy", " h", " l"],
                    0..7
                )
                .prop_map(|v| v.concat())
            )
                .prop_map(|(k, fl)| format!("mg {k}{fl}\r\n")),
            Just("mn\r\n".to_string()),
            Just("version\n".to_string()),
            (key(), 0..10u64).prop_map(|(k, d)| format!("ma {k} D{d} MI v\r\n")),
        ]
        .prop_map(String::into_bytes);
        prop_oneof![set, text]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..600)) {
            check_prefixes(&b, &SMALL)?;
        }

        #[test]
        fn token_soup_is_split_independent(b in junk(), cut in prop::collection::vec(any::<prop::sample::Index>(), 0..5)) {
            check_prefixes(&b, &SMALL)?;
            check_prefixes(&b, &Limits::default())?;
            let mut cuts: Vec<usize> = cut.iter().map(|i| i.index(b.len() + 1)).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for c in cuts {
                chunks.push(&b[at..c]);
                at = c;
            }
            chunks.push(&b[at..]);
            prop_assert_eq!(drive(&chunks, &SMALL), drive(&[&b], &SMALL));
        }

        #[test]
        fn valid_pipelines_split_anywhere(
            reqs in prop::collection::vec(valid(), 1..8),
            cut in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let b = reqs.concat();
            let whole = drive(&[&b], &Limits::default());
            prop_assert_eq!(whole.len(), reqs.len());
            for s in &whole {
                prop_assert!(s.starts_with("Request("), "{}", s);
            }
            let mut cuts: Vec<usize> = cut.iter().map(|i| i.index(b.len() + 1)).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for c in cuts {
                chunks.push(&b[at..c]);
                at = c;
            }
            chunks.push(&b[at..]);
            prop_assert_eq!(drive(&chunks, &Limits::default()), whole.clone());
            // With a tiny item limit some sets are refused and swallowed: still split-proof.
            let small = drive(&[&b], &SMALL);
            prop_assert_eq!(drive(&chunks, &SMALL), small);
        }
    }
}

/// memcached unlinks the key's current item when a `set` or any `ms` is refused for its size
/// (observed: after it, `get` misses), but not for `add`/`append`/...
#[test]
fn too_large_set_and_ms_unlink_the_key() {
    let big = |line: &str| -> Vec<u8> { line.as_bytes().to_vec() };
    match p(&big("set a1 0 0 2000000\r\n")) {
        Parse::TooLarge { key, reply, .. } => {
            assert_eq!(&key[..], b"a1");
            assert_eq!(reply, E_TOO_LARGE);
        }
        other => panic!("{other:?}"),
    }
    match p(&big("set a1 0 0 2000000 noreply\r\n")) {
        Parse::TooLarge { reply, .. } => assert!(reply.is_empty()),
        other => panic!("{other:?}"),
    }
    match p(&big("ms YTI= 2000000 MA b\r\n")) {
        Parse::TooLarge { key, .. } => assert_eq!(&key[..], b"a2"),
        other => panic!("{other:?}"),
    }
    for line in ["add a1 0 0 2000000\r\n", "append a1 0 0 2000000\r\n"] {
        assert!(matches!(p(&big(line)), Parse::Error { .. }), "{line}");
    }
}
