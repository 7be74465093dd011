//! `damselfly-bench pubsub`: Pub/Sub fan-out load. Subscribers (by channel and by pattern)
//! and pipelining publishers on one single-threaded runtime (pin it with --cpus); reports
//! messages published and delivered per second and, given the server's pid, the server's CPU
//! time per delivered message.
//!
//! Channel names and payloads have fixed lengths, so every delivery of a kind has a known size
//! and subscribers only count bytes (no parsing on the load side). Publishers hold back while
//! more than a window of messages is undelivered, so the server's output buffers stay small
//! and what is measured is delivery, not buffering.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser, Debug, Clone)]
#[command(name = "damselfly-bench pubsub")]
pub struct PubSubOpts {
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(short, long)]
    pub port: u16,
    /// Channels published to (round-robin), named `chan:NNNNNN`.
    #[arg(long, default_value_t = 1)]
    pub channels: usize,
    /// Subscribers by channel: subscriber i subscribes to channels i, i+S, i+2S... (every
    /// channel has subscribers/channels of them when there are more subscribers than
    /// channels: subscriber i takes channel i % channels).
    #[arg(long, default_value_t = 1)]
    pub subscribers: usize,
    /// Pattern subscribers: subscriber j subscribes to `chan:0000J*`-style prefixes that
    /// split the channels into equal groups (10 patterns: each matches a tenth).
    #[arg(long, default_value_t = 0)]
    pub pattern_subscribers: usize,
    #[arg(long, default_value_t = 4)]
    pub publishers: usize,
    /// PUBLISH commands per round trip per publisher.
    #[arg(long, default_value_t = 16)]
    pub pipeline: usize,
    /// Payload bytes.
    #[arg(short = 'd', long, default_value_t = 32)]
    pub data_size: usize,
    #[arg(long, default_value_t = 10)]
    pub test_time: u64,
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// The server's pid, for its CPU time.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// CPUs to pin the load to.
    #[arg(long)]
    pub cpus: Option<usize>,
}

const NAME_DIGITS: usize = 6;

/// The channels subscriber `i` of `subscribers` takes: with at least as many subscribers as
/// channels, channel `i % channels`; otherwise every channel `c` with `c % subscribers == i`.
fn channels_of(i: usize, subscribers: usize, channels: usize) -> Vec<usize> {
    if subscribers >= channels {
        vec![i % channels]
    } else {
        (0..channels).filter(|c| c % subscribers == i).collect()
    }
}

fn channel(i: usize) -> String {
    format!("chan:{i:0NAME_DIGITS$}")
}

/// Encoded size of a `message` delivery (RESP2) for a channel name of `clen` and payload of
/// `plen` bytes; with `pattern`, of a `pmessage` delivery.
fn delivery_len(clen: usize, plen: usize, pattern: Option<usize>) -> usize {
    let bulk = |n: usize| 1 + n.to_string().len() + 2 + n + 2;
    match pattern {
        None => 4 + bulk(7) + bulk(clen) + bulk(plen),
        Some(p) => 4 + bulk(8) + bulk(p) + bulk(clen) + bulk(plen),
    }
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Reads until `n` more `\n` bytes have arrived (replies and confirmations whose content is not
/// needed); returns the bytes past them.
async fn skip_lines(s: &mut TcpStream, mut n: usize, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut extra = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    while n > 0 {
        let got = s.read(&mut chunk).await?;
        if got == 0 {
            return Err(std::io::Error::other("server closed the connection"));
        }
        for (i, &c) in chunk[..got].iter().enumerate() {
            if n == 0 {
                extra += got - i;
                break;
            }
            if c == b'\n' {
                n -= 1;
            }
        }
    }
    buf.clear();
    Ok(extra)
}

struct Shared {
    delivered_bytes: Vec<Rc<Cell<u64>>>,
    published: Cell<u64>,
    /// Deliveries each publish makes (for the in-flight window).
    fanout: f64,
    delivered: Cell<f64>,
    stop: Cell<bool>,
}

pub fn run(o: &PubSubOpts) -> Result<String, String> {
    if let Some(c) = o.cpus {
        crate::sys::pin_current_thread(&[c])?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, run_async(o.clone()))
}

async fn run_async(o: PubSubOpts) -> Result<String, String> {
    let addr = format!("{}:{}", o.host, o.port);
    let payload = vec![b'x'; o.data_size];
    let clen = 5 + NAME_DIGITS;
    // Pattern subscriber j: prefix `chan:` + the first digits that split the channels evenly
    // (with 1000 channels and 10 patterns: `chan:0000j*`, 100 channels each).
    let patterns: Vec<String> = (0..o.pattern_subscribers)
        .map(|j| {
            let group = o.channels.div_ceil(o.pattern_subscribers.max(1)).max(1);
            let first = channel(j * group);
            // Keep the digits that all channels of the group share.
            let mut keep = 5 + NAME_DIGITS;
            let last = channel(((j + 1) * group).min(o.channels).max(j * group + 1) - 1);
            while keep > 5 && first[..keep] != last[..keep] {
                keep -= 1;
            }
            format!("{}*", &first[..keep])
        })
        .collect();
    let mut fanout = 0.0;
    for c in 0..o.channels {
        let by_channel = (0..o.subscribers)
            .filter(|&i| channels_of(i, o.subscribers, o.channels).contains(&c))
            .count();
        let by_pattern = patterns
            .iter()
            .filter(|p| channel(c).starts_with(&p[..p.len() - 1]))
            .count();
        fanout += (by_channel + by_pattern) as f64;
    }
    fanout /= o.channels as f64;
    let shared = Rc::new(Shared {
        delivered_bytes: (0..o.subscribers + o.pattern_subscribers)
            .map(|_| Rc::new(Cell::new(0)))
            .collect(),
        published: Cell::new(0),
        fanout,
        delivered: Cell::new(0.0),
        stop: Cell::new(false),
    });
    // Subscribers.
    let mut sizes = Vec::new();
    for i in 0..o.subscribers + o.pattern_subscribers {
        let mut s = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
        s.set_nodelay(true).ok();
        let (names, size, cmd): (Vec<String>, usize, &[u8]) = if i < o.subscribers {
            let names: Vec<String> = channels_of(i, o.subscribers, o.channels)
                .into_iter()
                .map(channel)
                .collect();
            (names, delivery_len(clen, o.data_size, None), b"SUBSCRIBE")
        } else {
            let p = patterns[i - o.subscribers].clone();
            let plen = p.len();
            (
                vec![p],
                delivery_len(clen, o.data_size, Some(plen)),
                b"PSUBSCRIBE",
            )
        };
        sizes.push(size);
        let mut args: Vec<&[u8]> = vec![cmd];
        args.extend(names.iter().map(|n| n.as_bytes()));
        s.write_all(&encode(&args))
            .await
            .map_err(|e| e.to_string())?;
        // Each confirmation is 7 lines: *3, $N, word, $N, name, :count.
        let mut buf = Vec::new();
        let extra = skip_lines(&mut s, 6 * names.len(), &mut buf)
            .await
            .map_err(|e| e.to_string())?;
        let counter = shared.delivered_bytes[i].clone();
        counter.set(extra as u64);
        let sh = shared.clone();
        tokio::task::spawn_local(async move {
            let mut chunk = vec![0u8; 256 * 1024];
            while !sh.stop.get() {
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        counter.set(counter.get() + n as u64);
                        sh.delivered
                            .set(sh.delivered.get() + n as f64 / size as f64);
                    }
                }
            }
        });
    }
    // Publishers.
    let window = (o.publishers * o.pipeline * 8) as f64;
    for p in 0..o.publishers {
        let mut s = TcpStream::connect(&addr).await.map_err(|e| e.to_string())?;
        s.set_nodelay(true).ok();
        let sh = shared.clone();
        let (pipeline, channels, payload) = (o.pipeline, o.channels, payload.clone());
        tokio::task::spawn_local(async move {
            let mut next = p;
            let mut buf = Vec::new();
            while !sh.stop.get() {
                // Hold back while deliveries lag: measure delivery, not buffering.
                while sh.published.get() as f64 - sh.delivered.get() / sh.fanout.max(1.0) > window
                    && !sh.stop.get()
                {
                    tokio::task::yield_now().await;
                }
                let mut batch = Vec::new();
                for _ in 0..pipeline {
                    let ch = channel(next % channels);
                    next += 1;
                    batch.extend_from_slice(&encode(&[b"PUBLISH", ch.as_bytes(), &payload]));
                }
                if s.write_all(&batch).await.is_err() {
                    break;
                }
                if skip_lines(&mut s, pipeline, &mut buf).await.is_err() {
                    break;
                }
                sh.published.set(sh.published.get() + pipeline as u64);
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(o.warmup)).await;
    let total = |sh: &Shared| -> f64 {
        sh.delivered_bytes
            .iter()
            .zip(&sizes)
            .map(|(c, &size)| c.get() as f64 / size as f64)
            .sum()
    };
    let (d0, p0) = (total(&shared), shared.published.get());
    let cpu0 = o.server_pid.and_then(crate::sys::process_cpu_ns_precise);
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs(o.test_time)).await;
    let secs = t0.elapsed().as_secs_f64();
    let (d1, p1) = (total(&shared), shared.published.get());
    let cpu1 = o.server_pid.and_then(crate::sys::process_cpu_ns_precise);
    shared.stop.set(true);
    let delivered = d1 - d0;
    let published = (p1 - p0) as f64;
    let cpu_ns = match (cpu0, cpu1) {
        (Some(a), Some(b)) if delivered > 0.0 => format!("{:.1}", (b - a) as f64 / delivered),
        _ => "-".into(),
    };
    Ok(format!(
        "published_per_sec={:.0} delivered_per_sec={:.0} fanout={:.2} server_cpu_ns_per_delivery={}\n",
        published / secs,
        delivered / secs,
        fanout,
        cpu_ns
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_sizes_match_resp2() {
        let m = encode(&[b"message", b"chan:000001", b"xyz"]);
        assert_eq!(delivery_len(11, 3, None), m.len());
        let p = encode(&[b"pmessage", b"chan:0*", b"chan:000001", b"xyz"]);
        assert_eq!(delivery_len(11, 3, Some(7)), p.len());
    }
}
