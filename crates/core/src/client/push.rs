//! What a connection is sent besides its replies: pub/sub messages, MONITOR lines, tracking
//! invalidations and, for a replica's connection, the replication stream. Pub/sub builds each
//! message once and shares it (`Arc`) between the queues (`ClientHandle::pushes`) of every
//! subscriber it reaches; the connection writes it in its own protocol.

use std::sync::Arc;

/// Invalidated keys (None: everything) as one message.
pub type Keys = Option<Arc<Vec<Box<[u8]>>>>;

/// The three Pub/Sub namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    /// Sharded channels (SSUBSCRIBE/SPUBLISH): their own namespace, no patterns.
    Shard,
}

/// A message as sent: encoded once per protocol and shared by every subscriber it reaches (a
/// delivery is then one copy into the subscriber's output). The RESP3 form (a push, `>`
/// instead of `*`) is made by the first RESP3 subscriber that writes it: most subscribers speak
/// RESP2, and a big message should not be held twice for nothing.
#[derive(Debug)]
struct Encoded {
    resp2: Box<[u8]>,
    resp3: std::sync::OnceLock<Box<[u8]>>,
}

impl Encoded {
    fn new(parts: &[&[u8]]) -> Encoded {
        Encoded {
            resp2: encode(b'*', parts),
            resp3: std::sync::OnceLock::new(),
        }
    }

    fn get(&self, resp3: bool) -> &[u8] {
        if !resp3 {
            return &self.resp2;
        }
        self.resp3.get_or_init(|| {
            let mut v = self.resp2.to_vec();
            v[0] = b'>';
            v.into_boxed_slice()
        })
    }
}

/// A published message (`message` or `smessage`).
#[derive(Debug)]
pub struct Message {
    pub channel: Box<[u8]>,
    enc: Encoded,
}

impl Message {
    pub fn new(word: &'static [u8], channel: &[u8], payload: &[u8]) -> Message {
        Message {
            channel: channel.into(),
            enc: Encoded::new(&[word, channel, payload]),
        }
    }
}

/// A message delivered through a pattern subscription (`pmessage`), encoded once per pattern.
#[derive(Debug)]
pub struct PatternMessage {
    pub pattern: Box<[u8]>,
    enc: Encoded,
}

impl PatternMessage {
    /// `parts`: `pmessage`, the pattern, the channel, the payload.
    pub fn new(pattern: Box<[u8]>, parts: &[&[u8]]) -> PatternMessage {
        PatternMessage {
            pattern,
            enc: Encoded::new(parts),
        }
    }
}

/// An array (`*`) or push (`>`) of bulk strings.
fn encode(kind: u8, parts: &[&[u8]]) -> Box<[u8]> {
    let mut v = Vec::with_capacity(parts.iter().map(|p| p.len() + 16).sum::<usize>() + 8);
    v.push(kind);
    v.extend_from_slice(parts.len().to_string().as_bytes());
    v.extend_from_slice(b"\r\n");
    for p in parts {
        v.push(b'$');
        v.extend_from_slice(p.len().to_string().as_bytes());
        v.extend_from_slice(b"\r\n");
        v.extend_from_slice(p);
        v.extend_from_slice(b"\r\n");
    }
    v.into_boxed_slice()
}

/// What a subscriber's connection is to send: `message`, `pmessage` (with the pattern that
/// matched) or `smessage`.
#[derive(Debug, Clone)]
pub enum Delivery {
    Message(Arc<Message>),
    Pattern(Arc<PatternMessage>),
    Shard(Arc<Message>),
    /// A MONITOR line (see `monitor`).
    Monitor(Arc<[u8]>),
    /// A tracking invalidation (see `tracking`): the keys (None: all, after a flush), sent as
    /// a `__redis__:invalidate` message (RESP2 redirection) rather than a push, and whether a
    /// null is RESP3's.
    Invalidate(Keys, bool, bool),
    /// `tracking-redir-broken` with the redirection's client id.
    RedirBroken(u64),
    /// Bytes of the replication stream, for a replica's connection (written as they are).
    Repl(Arc<[u8]>),
}

impl Delivery {
    /// Bytes it holds that count as the subscriber's output until it is written (a share of
    /// the message: its whole size, as Redis copies it into every subscriber's buffer).
    pub fn bytes(&self) -> usize {
        match self {
            Delivery::Message(m) | Delivery::Shard(m) => m.enc.resp2.len(),
            Delivery::Pattern(p) => p.enc.resp2.len(),
            Delivery::Monitor(line) => line.len() + 3,
            Delivery::Invalidate(keys, ..) => keys
                .as_ref()
                .map_or(8, |k| k.iter().map(|k| k.len() + 16).sum::<usize>() + 48),
            Delivery::RedirBroken(_) => 48,
            Delivery::Repl(b) => b.len(),
        }
    }

    /// Appends the message in the client's protocol: an array in RESP2, a push in RESP3.
    pub fn write(&self, reply: &mut damselfly_protocol::Reply) {
        match self {
            Delivery::Message(m) | Delivery::Shard(m) => {
                let r3 = reply.is_resp3();
                reply.raw(m.enc.get(r3));
            }
            Delivery::Pattern(p) => {
                let r3 = reply.is_resp3();
                reply.raw(p.enc.get(r3));
            }
            Delivery::Repl(bytes) => reply.raw(bytes),
            Delivery::Monitor(line) => {
                // A status line (its text is escaped: no CR or LF in it).
                reply.raw(b"+");
                reply.raw(line);
                reply.raw(b"\r\n");
            }
            Delivery::Invalidate(keys, message, null3) => {
                if *message {
                    reply.push(3);
                    reply.bulk(b"message");
                    reply.bulk(b"__redis__:invalidate");
                } else {
                    reply.push(2);
                    reply.bulk(b"invalidate");
                }
                match keys {
                    Some(ks) => {
                        reply.array(ks.len());
                        for k in ks.iter() {
                            reply.bulk(k);
                        }
                    }
                    None if *null3 => reply.raw(b"_\r\n"),
                    None => reply.raw(b"$-1\r\n"),
                }
            }
            Delivery::RedirBroken(id) => {
                reply.push(2);
                reply.bulk(b"tracking-redir-broken");
                reply.int(*id as i64);
            }
        }
    }
}
