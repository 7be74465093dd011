//! Redis-compatible glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a-z]`, `\x` escapes.
//! Used by KEYS, SCAN MATCH and CONFIG GET. Iterative with backtracking to the last `*` only, so a
//! hostile pattern like `*a*a*a*...b` costs O(len(pattern) * len(s)), never exponential time.

#[inline]
fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// Matches a `[...]` class starting at `p[0] == '['` against `c`. Returns (matched, bytes of
/// pattern consumed).
fn class(p: &[u8], c: u8, nocase: bool) -> (bool, usize) {
    let mut i = 1;
    let not = p.get(1) == Some(&b'^');
    if not {
        i += 1;
    }
    let mut matched = false;
    loop {
        if i >= p.len() {
            // Unterminated class: the pattern end closes it.
            break;
        }
        if p[i] == b'\\' && i + 1 < p.len() {
            i += 1;
            if eq(p[i], c, nocase) {
                matched = true;
            }
        } else if p[i] == b']' {
            i += 1;
            break;
        } else if i + 2 < p.len() && p[i + 1] == b'-' {
            let (mut a, mut b) = (p[i], p[i + 2]);
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            let (a2, b2, c2) = if nocase {
                (
                    a.to_ascii_lowercase(),
                    b.to_ascii_lowercase(),
                    c.to_ascii_lowercase(),
                )
            } else {
                (a, b, c)
            };
            if c2 >= a2 && c2 <= b2 {
                matched = true;
            }
            i += 2;
        } else if eq(p[i], c, nocase) {
            matched = true;
        }
        i += 1;
    }
    (matched != not, i.min(p.len()))
}

/// Redis gives up on patterns whose match would nest more than this many `*` levels (its
/// protection against abusive patterns): such a pattern matches nothing.
const MAX_STAR_NESTING: usize = 1000;

/// Number of `*` groups that are followed by more pattern (a trailing `*` matches at once).
fn nesting_stars(p: &[u8]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < p.len() {
        match p[i] {
            b'\\' => i += 2,
            b'*' => {
                while i < p.len() && p[i] == b'*' {
                    i += 1;
                }
                if i < p.len() {
                    n += 1;
                }
            }
            _ => i += 1,
        }
    }
    n
}

pub fn matches(p: &[u8], s: &[u8], nocase: bool) -> bool {
    if p.len() > 2 * MAX_STAR_NESTING && nesting_stars(p) > MAX_STAR_NESTING {
        return false;
    }
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() {
            match p[pi] {
                b'*' => {
                    while pi < p.len() && p[pi] == b'*' {
                        pi += 1;
                    }
                    if pi == p.len() {
                        return true;
                    }
                    star = Some((pi, si));
                    continue;
                }
                b'?' => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                b'[' => {
                    let (ok, used) = class(&p[pi..], s[si], nocase);
                    if ok {
                        pi += used;
                        si += 1;
                        continue;
                    }
                }
                b'\\' if pi + 1 < p.len() => {
                    if eq(p[pi + 1], s[si], nocase) {
                        pi += 2;
                        si += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, s[si], nocase) {
                        pi += 1;
                        si += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::matches;
    #[test]
    fn globs() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"*", b"", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h*llo", b"heeeello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"foo\\*", b"foo*", false));
        assert!(!matches(b"foo\\*", b"foox", false));
        assert!(matches(b"MAXMEM*", b"maxmemory", true));
        assert!(!matches(b"a*b", b"acd", false));
        assert!(matches(b"a*b*c", b"axxbyyc", false));
        assert!(!matches(b"a*b*c", b"axxbyy", false));
        assert!(matches(b"key:*", b"key:1", false));
        assert!(!matches(b"*a*a*a*a*a*a*a*a*a*a*b", &[b'a'; 4000], false));
        // Redis 7's nesting limit: "*?" x 50000 matches nothing, even a 50000-char key.
        assert!(!matches(&b"*?".repeat(50_000), &[b'a'; 50_000], false));
        assert!(matches(&b"*?".repeat(500), &[b'a'; 500], false));
    }
}
