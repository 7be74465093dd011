//! Accepting connections. Thread 0 accepts and hands sockets round-robin to the shard threads, so
//! connections spread evenly and each then lives on one thread for its whole life.

use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::rc::Rc;
use std::sync::atomic::Ordering;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

use crate::engine::Worker;

/// Binds every address of `bind` (space separated) on `port`, Redis-style.
pub fn bind_all(bind: &str, port: u16) -> std::io::Result<Vec<StdListener>> {
    let mut out = Vec::new();
    let spec = if bind.trim().is_empty() {
        "0.0.0.0"
    } else {
        bind
    };
    for host in spec.split_whitespace() {
        let host = host.trim_start_matches('-');
        let host = if host == "*" { "0.0.0.0" } else { host };
        let addrs: Vec<SocketAddr> = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}").to_socket_addrs()?.collect()
        } else {
            (host, port).to_socket_addrs()?.collect()
        };
        for addr in addrs {
            let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            sock.set_reuse_address(true)?;
            if addr.is_ipv6() {
                let _ = sock.set_only_v6(true);
            }
            sock.bind(&addr.into())?;
            sock.listen(511)?;
            sock.set_nonblocking(true)?;
            out.push(sock.into());
        }
    }
    Ok(out)
}

/// Accept loop (runs on thread 0).
pub async fn accept_loop(worker: Rc<Worker>, listener: StdListener) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            crate::log_warning!("listener setup failed: {e}");
            return;
        }
    };
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                crate::log_warning!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let threads = worker.threads();
        let target = worker
            .shared
            .next_conn_thread
            .fetch_add(1, Ordering::Relaxed)
            % threads;
        if target == worker.id {
            tokio::task::spawn_local(crate::net::session::serve(worker.clone(), stream));
        } else {
            match stream.into_std() {
                Ok(std_stream) => {
                    worker.post(target, move |w| {
                        match tokio::net::TcpStream::from_std(std_stream) {
                            Ok(s) => {
                                tokio::task::spawn_local(crate::net::session::serve(w.clone(), s));
                            }
                            Err(e) => crate::log_warning!("cannot adopt connection: {e}"),
                        }
                    })
                }
                Err(e) => crate::log_warning!("cannot move connection: {e}"),
            }
        }
    }
}
