//! A client socket: TCP or a unix socket (`unixsocket`). Sessions read and write through these
//! halves and never care which kind they have; only set-up (addresses, TCP options) differs.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{tcp, unix, TcpStream, UnixStream};

/// An accepted connection, before it is split.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// The reading half of a connection.
pub enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    Unix(unix::OwnedReadHalf),
}

/// The writing half of a connection (shared by the session and its reply output).
pub enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Unix(unix::OwnedWriteHalf),
    /// No socket: an internal client's replies (background saves) go nowhere.
    Null,
}

/// Addresses as CLIENT LIST shows them: `ip:port` for TCP, `path:0` for a unix socket.
pub struct Addrs {
    pub peer: String,
    pub local: String,
    /// Loopback or unix socket: what protected mode and `enable-debug-command local` trust.
    pub is_local: bool,
    pub unix: bool,
}

impl Stream {
    pub fn raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    pub fn addrs(&self) -> Addrs {
        match self {
            Stream::Tcp(s) => {
                let peer = s.peer_addr().ok();
                Addrs {
                    peer: peer.map(|a| a.to_string()).unwrap_or_default(),
                    local: s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
                    is_local: peer.is_some_and(|p| p.ip().is_loopback()),
                    unix: false,
                }
            }
            Stream::Unix(s) => {
                let path = s
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                    .unwrap_or_default();
                Addrs {
                    peer: format!("{path}:0"),
                    local: format!("{path}:0"),
                    is_local: true,
                    unix: true,
                }
            }
        }
    }

    /// TCP options (no-delay, keepalive); nothing for unix sockets.
    pub fn tune(&self, keepalive_secs: u64) {
        let Stream::Tcp(s) = self else { return };
        let _ = s.set_nodelay(true);
        if keepalive_secs > 0 {
            // As Redis: first probe after `tcp-keepalive` idle seconds, then every third of it.
            let ka = socket2::TcpKeepalive::new()
                .with_time(std::time::Duration::from_secs(keepalive_secs))
                .with_interval(std::time::Duration::from_secs((keepalive_secs / 3).max(1)))
                .with_retries(3);
            let _ = socket2::SockRef::from(s).set_tcp_keepalive(&ka);
        }
    }

    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Tcp(r), WriteHalf::Tcp(w))
            }
            Stream::Unix(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Unix(r), WriteHalf::Unix(w))
            }
        }
    }
}

impl ReadHalf {
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            ReadHalf::Tcp(r) => r.readable().await,
            ReadHalf::Unix(r) => r.readable().await,
        }
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadHalf::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            ReadHalf::Unix(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl WriteHalf {
    #[inline]
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            WriteHalf::Tcp(w) => w.try_write(buf),
            WriteHalf::Unix(w) => w.try_write(buf),
            WriteHalf::Null => Ok(buf.len()),
        }
    }

    pub async fn writable(&self) -> io::Result<()> {
        match self {
            WriteHalf::Tcp(w) => w.writable().await,
            WriteHalf::Unix(w) => w.writable().await,
            WriteHalf::Null => Ok(()),
        }
    }
}
