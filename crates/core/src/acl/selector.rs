//! One ACL selector: the commands, keys and channels it allows (Redis 7.0's `aclSelector`),
//! changed by the rules of `ACL SETUSER` and described back in the same language.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::commands::key_flags;
use crate::commands::registry::{registry, Entry};
use crate::commands::spec::acl as cat;
use crate::config::glob::matches as glob_match;

/// Key pattern permissions (`%R~`, `%W~`, `~` = both).
pub const PERM_READ: u8 = 1;
pub const PERM_WRITE: u8 = 2;
pub const PERM_ALL: u8 = PERM_READ | PERM_WRITE;

/// Why a check failed, ordered as Redis's `ACL_DENIED_*` codes (a later one is the more
/// relevant error when several selectors fail).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Denied {
    Cmd = 1,
    Key = 2,
    Channel = 4,
}

/// Why a rule was refused (Redis's errno values in `ACLSetUser`), with Redis's texts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RuleError {
    UnknownCommand,
    Syntax,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    SubcommandFirstArg,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// The command table as ACL sees it: per dense command id, its categories and subcommands,
/// plus the top-level commands in a stable order (for descriptions).
struct Cmds {
    count: usize,
    cats: Vec<u32>,
    subs: Vec<Vec<usize>>,
    names: Vec<&'static str>,
    /// Top-level ids, by name.
    tops: Vec<usize>,
}

fn cmds() -> &'static Cmds {
    static CMDS: OnceLock<Cmds> = OnceLock::new();
    CMDS.get_or_init(|| {
        let reg = registry();
        let count = reg.count;
        let mut c = Cmds {
            count,
            cats: vec![0; count],
            subs: vec![Vec::new(); count],
            names: vec![""; count],
            tops: Vec::new(),
        };
        for e in reg.all() {
            c.tops.push(e.id);
            c.cats[e.id] = e.spec.acl_categories();
            c.names[e.id] = e.static_name;
            let mut subs: Vec<&Entry> = e.subs.values().collect();
            subs.sort_by(|a, b| a.fullname.cmp(&b.fullname));
            for s in subs {
                c.cats[s.id] = s.spec.acl_categories();
                c.names[s.id] = s.static_name;
                c.subs[e.id].push(s.id);
            }
        }
        c
    })
}

/// Redis's `ACLLookupCommand`: `name` or `container|sub` (case-insensitive).
pub fn lookup(name: &[u8]) -> Option<&'static Entry> {
    registry().by_fullname(name)
}

/// A category name without its `@` (`ACLGetCommandCategoryFlagByName`).
pub fn category(name: &[u8]) -> Option<u32> {
    cat::NAMES
        .iter()
        .find(|(_, n)| n.as_bytes()[1..].eq_ignore_ascii_case(name))
        .map(|(bit, _)| *bit)
}

/// One key pattern with its permissions.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub perm: u8,
}

impl KeyPattern {
    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.perm {
            PERM_READ => b"%R~".as_slice(),
            PERM_WRITE => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

#[derive(Clone, Debug)]
pub struct Selector {
    pub root: bool,
    pub allkeys: bool,
    pub allchannels: bool,
    allcommands: bool,
    /// Set by `+@all`/`allcommands` only: the rules describe as starting from `+@all`.
    future: bool,
    bits: Vec<u64>,
    /// Allowed first arguments of otherwise denied commands (`+select|0`), by command id.
    firstargs: BTreeMap<usize, Vec<Vec<u8>>>,
    pub keys: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// A selector with no permissions (channels per `acl-pubsub-default`).
    pub fn new(root: bool, all_channels: bool) -> Selector {
        Selector {
            root,
            allkeys: false,
            allchannels: all_channels,
            allcommands: false,
            future: false,
            bits: vec![0; cmds().count.div_ceil(64)],
            firstargs: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// `ACLChangeSelectorPerm`: a command and all its subcommands.
    fn change_perm(&mut self, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        for &s in &cmds().subs[id] {
            self.set_bit(s, allow);
        }
    }

    fn set_category(&mut self, flag: u32, allow: bool) {
        let c = cmds();
        for &top in &c.tops {
            if c.cats[top] & flag != 0 {
                self.change_perm(top, allow);
            }
            for &s in &c.subs[top] {
                if c.cats[s] & flag != 0 {
                    self.change_perm(s, allow);
                }
            }
        }
    }

    fn all_commands(&mut self, allow: bool) {
        let fill = if allow { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|w| *w = fill);
        self.allcommands = allow;
        self.future = allow;
        self.firstargs.clear();
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || op == b"~*" {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || op == b"&*" {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all_commands(true);
        } else if is("nocommands") || is("-@all") {
            self.all_commands(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut perm = 0u8;
            let mut at = 1;
            if op[0] == b'%' {
                let mut ok = true;
                while at < op.len() {
                    match op[at].to_ascii_uppercase() {
                        b'R' if perm & PERM_READ == 0 => perm |= PERM_READ,
                        b'W' if perm & PERM_WRITE == 0 => perm |= PERM_WRITE,
                        b'~' => {
                            at += 1;
                            break;
                        }
                        _ => {
                            ok = false;
                            break;
                        }
                    }
                    at += 1;
                }
                if perm == 0 || !ok {
                    return Err(RuleError::Syntax);
                }
            } else {
                perm = PERM_ALL;
            }
            let pattern = &op[at.min(op.len())..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(k) => k.perm |= perm,
                None => self.keys.push(KeyPattern {
                    pattern: pattern.to_vec(),
                    perm,
                }),
            }
            self.allkeys = false;
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.allchannels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let e = lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change_perm(e.id, true);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let e = lookup(base).ok_or(RuleError::UnknownCommand)?;
                    if base.contains(&b'|') {
                        return Err(RuleError::SubcommandFirstArg);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !e.subs.is_empty() {
                        let s = lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change_perm(s.id, true);
                    } else {
                        let list = self.firstargs.entry(e.id).or_default();
                        if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                            list.push(sub.to_vec());
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let e = lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(e.id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let flag = category(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.set_category(flag, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Counts the commands of category `flag` this selector allows and denies.
    fn count_category(&self, flag: u32) -> (usize, usize) {
        let c = cmds();
        let (mut on, mut off) = (0, 0);
        for id in 0..c.count {
            if c.cats[id] & flag != 0 {
                if self.bit(id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// The command rules that rebuild this selector's command bitmap (Redis's
    /// `ACLDescribeSelectorCommandRules`): `+@all` or `-@all`, the categories that fit best,
    /// then single commands and allowed first arguments.
    pub fn describe_commands(&self) -> String {
        let mut rules = String::new();
        let additive = !self.future;
        let mut fake = Selector::new(false, false);
        if additive {
            rules.push_str("-@all ");
            fake.all_commands(false);
        } else {
            rules.push_str("+@all ");
            fake.all_commands(true);
        }
        let mut temp = self.clone();
        let mut applied = vec![false; cat::NAMES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0usize);
            for (j, (flag, _)) in cat::NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(*flag);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let (flag, name) = cat::NAMES[j];
            fake.set_category(flag, additive);
            temp.set_category(flag, !additive);
            rules.push(if additive { '+' } else { '-' });
            rules.push_str(name);
            rules.push(' ');
            applied[j] = true;
        }
        let c = cmds();
        for &top in &c.tops {
            self.describe_single(&mut fake, top, &mut rules);
            for &s in &c.subs[top] {
                self.describe_single(&mut fake, s, &mut rules);
            }
        }
        rules.pop();
        debug_assert_eq!(
            fake.bits, self.bits,
            "ACL description does not rebuild: {rules}"
        );
        rules
    }

    fn describe_single(&self, fake: &mut Selector, id: usize, rules: &mut String) {
        let name = cmds().names[id];
        let user = self.bit(id);
        if user != fake.bit(id) {
            rules.push(if user { '+' } else { '-' });
            rules.push_str(name);
            rules.push(' ');
            fake.change_perm(id, user);
        }
        if !user {
            if let Some(args) = self.firstargs.get(&id) {
                for a in args {
                    rules.push('+');
                    rules.push_str(name);
                    rules.push('|');
                    rules.push_str(&String::from_utf8_lossy(a));
                    rules.push(' ');
                }
            }
        }
    }

    /// The key patterns as ACL GETUSER shows them (`~*` for all keys).
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// The channel patterns as ACL GETUSER shows them.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The whole selector in rule form (`ACLDescribeSelector`): keys, channels, commands.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
        out
    }

    /// Allows every command, key and channel (so checks can be skipped)?
    pub fn unrestricted(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// May this selector run `entry` with `args` (Redis's `ACLSelectorCheckCmd`)? On refusal,
    /// the reason and the argument index of the key or channel refused.
    pub fn check(
        &self,
        entry: &Entry,
        args: &[&[u8]],
        keys: &mut Option<Vec<(usize, u16)>>,
    ) -> Result<(), (Denied, usize)> {
        use crate::commands::flags::NO_AUTH;
        if !self.allcommands && entry.spec.flags & NO_AUTH == 0 && !self.bit(entry.id) {
            let at = if entry.fullname.contains('|') { 2 } else { 1 };
            let allowed = args.len() >= 2
                && args.get(at).is_some_and(|a| {
                    self.firstargs
                        .get(&entry.id)
                        .is_some_and(|l| l.iter().any(|f| f.eq_ignore_ascii_case(a)))
                });
            if !allowed {
                return Err((Denied::Cmd, 0));
            }
        }
        if !self.allkeys && !entry.spec.keys.is_none() {
            // The common case (one key range, flags fixed by the command): no list built.
            if let (Some(flags), Some((first, last, step))) = (
                key_flags::range_flags(entry, args),
                entry.spec.keys.range(args.len()),
            ) {
                for pos in (first..=last).step_by(step) {
                    if !self.key_allowed(args[pos], flags) {
                        return Err((Denied::Key, pos));
                    }
                }
                return self.check_channels(entry, args);
            }
            let refs = keys.get_or_insert_with(|| key_flags::key_refs(entry, args));
            for &(pos, flags) in refs.iter() {
                if !self.key_allowed(args[pos], flags) {
                    return Err((Denied::Key, pos));
                }
            }
        }
        self.check_channels(entry, args)
    }

    fn check_channels(&self, entry: &Entry, args: &[&[u8]]) -> Result<(), (Denied, usize)> {
        if !self.allchannels && entry.spec.flags & crate::commands::flags::PUBSUB != 0 {
            for (pos, pattern) in channels(entry, args) {
                if !self.channel_allowed(args[pos], pattern) {
                    return Err((Denied::Channel, pos));
                }
            }
        }
        Ok(())
    }

    /// `ACLSelectorCheckKey`: some pattern with the permissions the key's access needs matches.
    pub fn key_allowed(&self, key: &[u8], flags: u16) -> bool {
        if self.allkeys {
            return true;
        }
        let need = needed_perm(flags);
        self.keys
            .iter()
            .any(|k| k.perm & need == need && glob_match(&k.pattern, key, false))
    }

    /// `ACLSelectorHasUnrestrictedKeyAccess`: a `*` pattern with the permissions `flags` need.
    pub fn all_keys_for(&self, flags: u16) -> bool {
        if self.allkeys {
            return true;
        }
        let need = needed_perm(flags);
        self.keys
            .iter()
            .any(|k| k.perm & need == need && k.pattern == b"*")
    }

    /// `ACLCheckChannelAgainstList` on this selector (all channels allowed included).
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.allchannels || channel_in(&self.channels, channel, is_pattern)
    }
}

/// The permissions a key access needs: read for ACCESS, write for INSERT/DELETE/UPDATE, none
/// (any pattern) for an existence or length check.
fn needed_perm(flags: u16) -> u8 {
    let mut need = 0;
    if flags & key_flags::ACCESS != 0 {
        need |= PERM_READ;
    }
    if flags & (key_flags::INSERT | key_flags::DELETE | key_flags::UPDATE) != 0 {
        need |= PERM_WRITE;
    }
    need
}

/// A channel against a list of ACL channel patterns: a channel name is matched as a glob, a
/// subscription pattern (PSUBSCRIBE) only literally.
pub fn channel_in(list: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p.as_slice() == channel
        } else {
            glob_match(p, channel, false)
        }
    })
}

/// The channels a command publishes or subscribes to, with whether each is a pattern (Redis's
/// `getChannelsFromCommand`, the publish and subscribe kinds: unsubscribing needs no
/// permission).
pub fn channels(entry: &Entry, args: &[&[u8]]) -> Vec<(usize, bool)> {
    match entry.fullname.as_str() {
        "publish" | "spublish" if args.len() > 1 => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..args.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// Spaces or NULs (`ACLStringHasSpaces`): refused in user names and patterns.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b == 0 || b == b' ' || (b'\t'..=b'\r').contains(&b))
}
