//! One client connection: read → parse every complete command in the buffer → execute each
//! (inline on this thread, or hop to the owning shard) → flush all replies with one write.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use damselfly_protocol::{Parser, ParserLimits, Reply, RespVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::client::{ClientHandle, ClientInfo};
use crate::commands::{self, ConnCtx, ReplyMode};
use crate::engine::Worker;

/// Initial read buffer and the minimum free space before a read.
const READ_CHUNK: usize = 16 * 1024;
/// Flush replies mid-batch beyond this, so one huge pipeline can't buffer unbounded output.
const FLUSH_THRESHOLD: usize = 256 * 1024;
/// Grow toward a large bulk in steps no bigger than this: memory follows bytes actually received,
/// so a client announcing a 512 MB bulk and sending nothing costs nothing.
const MAX_RESERVE_STEP: usize = 4 * 1024 * 1024;

pub const DENIED_MSG: &str = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.";

fn limits(w: &Worker) -> ParserLimits {
    ParserLimits {
        max_bulk_len: w.shared.config.proto_max_bulk_len(),
        ..ParserLimits::default()
    }
}

/// Serves one accepted socket until it closes.
pub async fn serve(worker: Rc<Worker>, mut stream: TcpStream) {
    let shared = worker.shared.clone();
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let local = stream.local_addr().ok();
    shared.total_connections.fetch_add(1, Ordering::Relaxed);

    // Protected mode: no password → loopback clients only.
    if shared.config.protected_mode() && !shared.config.has_password() {
        if let Some(p) = peer {
            if !p.ip().is_loopback() {
                let _ = stream
                    .write_all(format!("-{DENIED_MSG}\r\n").as_bytes())
                    .await;
                shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
    let connected = shared.connected_clients.fetch_add(1, Ordering::Relaxed) + 1;
    if connected > shared.config.maxclients() {
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
        shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return;
    }

    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let now = Instant::now();
    let fmt_addr = |a: Option<SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
    let handle = Rc::new(ClientHandle {
        info: std::cell::RefCell::new(ClientInfo {
            id,
            addr: fmt_addr(peer),
            laddr: fmt_addr(local),
            fd: raw_fd(&stream),
            name: String::new(),
            lib_name: String::new(),
            lib_ver: String::new(),
            db: 0,
            created: now,
            last_interaction: now,
            last_cmd: "NULL",
            resp: 2,
            multi: -1,
            qbuf: 0,
            omem: 0,
            flags: String::new(),
            user: "default".into(),
        }),
        killed: std::cell::Cell::new(false),
        wake: tokio::sync::Notify::new(),
    });
    worker.clients.borrow_mut().add(handle.clone());

    let mut cx = ConnCtx {
        worker: worker.clone(),
        client: handle.clone(),
        reply: Reply::with_capacity(RespVersion::Resp2, READ_CHUNK),
        db: 0,
        authed: !shared.config.has_password(),
        close: false,
        reply_mode: ReplyMode::On,
        no_touch: false,
        no_evict: false,
        cmd_name: "NULL",
        now_ms: crate::engine::clock::unix_ms(),
    };
    let _ = run(&mut cx, &mut stream).await;

    worker.clients.borrow_mut().remove(id);
    shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
}

fn raw_fd(s: &TcpStream) -> i32 {
    use std::os::fd::AsRawFd;
    s.as_raw_fd()
}

async fn run(cx: &mut ConnCtx, stream: &mut TcpStream) -> std::io::Result<()> {
    let mut rbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut parser = Parser::new(limits(&cx.worker));
    let mut start = 0usize;
    let mut first_read = true;
    loop {
        // Make room for the next read, reserving toward a large bulk in bounded steps.
        let want = parser
            .bulk_remaining()
            .unwrap_or(0)
            .clamp(READ_CHUNK, MAX_RESERVE_STEP);
        if rbuf.capacity() - rbuf.len() < want / 2 {
            rbuf.reserve(want);
        }
        let n = tokio::select! {
            biased;
            _ = cx.client.wake.notified() => 0,
            r = stream.read_buf(&mut rbuf) => r?,
        };
        if n == 0 || cx.client.killed.get() {
            return Ok(());
        }
        cx.worker.stats.borrow_mut().net_input_bytes += n as u64;
        cx.now_ms = crate::engine::clock::unix_ms();
        let batch_start = Instant::now();

        if first_read {
            first_read = false;
            if super::http::looks_like_http(&rbuf)
                && cx.shared().config.bool("primary_port_http_enabled")
            {
                return super::http::serve(cx, stream, rbuf).await;
            }
        }

        // Execute every complete command, then flush once.
        loop {
            let end = rbuf.len();
            match parser.next(&rbuf[start..end]) {
                Ok(Some(consumed)) => {
                    {
                        let buf = &rbuf[start..start + consumed];
                        let args: smallvec::SmallVec<[&[u8]; 8]> = parser.args(buf).collect();
                        if !args.is_empty() {
                            exec_one(cx, &args).await;
                        }
                        cx.client.info.borrow_mut().last_interaction = batch_start;
                    }
                    start += consumed;
                    if cx.close {
                        break;
                    }
                    if cx.reply.len() >= FLUSH_THRESHOLD {
                        flush(cx, stream).await?;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    cx.reply.error(&format!("ERR {e}"));
                    cx.close = true;
                    break;
                }
            }
        }
        flush(cx, stream).await?;
        if cx.close || cx.client.killed.get() {
            return Ok(());
        }
        if start == rbuf.len() {
            rbuf.clear();
            start = 0;
        } else if start > 0 {
            rbuf.drain(..start);
            start = 0;
        }
        let pending = rbuf.len() as u64;
        if pending > cx.shared().config.query_buffer_limit() {
            // Redis: "closing client that reached max query buffer length".
            return Ok(());
        }
        cx.client.info.borrow_mut().qbuf = rbuf.len();
    }
}

async fn exec_one(cx: &mut ConnCtx, args: &[&[u8]]) {
    let mark = cx.reply.len();
    commands::execute(cx, args).await;
    {
        let mut info = cx.client.info.borrow_mut();
        info.last_cmd = cx.cmd_name;
        info.db = cx.db;
    }
    match cx.reply_mode {
        ReplyMode::On => {}
        ReplyMode::Off => cx.reply.buf.truncate(mark),
        ReplyMode::Skip => {
            cx.reply.buf.truncate(mark);
            cx.reply_mode = ReplyMode::On;
        }
        ReplyMode::SkipNext => cx.reply_mode = ReplyMode::Skip,
    }
}

async fn flush(cx: &mut ConnCtx, stream: &mut TcpStream) -> std::io::Result<()> {
    if cx.reply.is_empty() {
        return Ok(());
    }
    stream.write_all(&cx.reply.buf).await?;
    cx.worker.stats.borrow_mut().net_output_bytes += cx.reply.len() as u64;
    cx.reply.clear();
    // Don't keep a huge buffer around after one big reply.
    if cx.reply.buf.capacity() > 4 * 1024 * 1024 {
        cx.reply.buf.shrink_to(READ_CHUNK);
    }
    Ok(())
}
