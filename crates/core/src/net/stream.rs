//! A connection's socket: TCP, TLS over TCP, or a unix socket (`unixsocket`). Sessions read and
//! write through these halves and never care which kind they have; only set-up (addresses, TCP
//! options, the TLS handshake) differs.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{tcp, unix, TcpStream, UnixStream};

use super::tls::TlsIo;

/// A connection, before it is split.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// After its handshake (`tls::accept`, `tls::connect`).
    Tls(Rc<TlsIo>),
}

/// The reading half of a connection.
pub enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    Unix(unix::OwnedReadHalf),
    Tls(Rc<TlsIo>),
}

/// The writing half of a connection (shared by the session and its reply output).
pub enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Unix(unix::OwnedWriteHalf),
    Tls(Rc<TlsIo>),
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
    /// Opens TCP to `host:port` (TLS when `tls`), within `timeout`.
    pub async fn connect(
        host: &str,
        port: u16,
        tls: bool,
        timeout: std::time::Duration,
    ) -> io::Result<Stream> {
        let tcp = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timeout"))??;
        let _ = tcp.set_nodelay(true);
        if tls {
            Ok(Stream::Tls(Rc::new(super::tls::connect(tcp, host).await?)))
        } else {
            Ok(Stream::Tcp(tcp))
        }
    }

    fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Tcp(s) => Some(s),
            Stream::Tls(t) => Some(t.tcp()),
            Stream::Unix(_) => None,
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(t) => t.tcp().as_raw_fd(),
        }
    }

    pub fn addrs(&self) -> Addrs {
        if let Stream::Unix(s) = self {
            let path = s
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                .unwrap_or_default();
            return Addrs {
                peer: format!("{path}:0"),
                local: format!("{path}:0"),
                is_local: true,
                unix: true,
            };
        }
        let peer = self.tcp().and_then(|s| s.peer_addr().ok());
        Addrs {
            peer: peer.map(|a| a.to_string()).unwrap_or_default(),
            local: self
                .tcp()
                .and_then(|s| s.local_addr().ok())
                .map(|a| a.to_string())
                .unwrap_or_default(),
            is_local: peer.is_some_and(|p| p.ip().is_loopback()),
            unix: false,
        }
    }

    /// TCP options (no-delay, keepalive); nothing for unix sockets.
    pub fn tune(&self, keepalive_secs: u64) {
        let Some(s) = self.tcp() else { return };
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
            Stream::Tls(t) => (ReadHalf::Tls(t.clone()), WriteHalf::Tls(t)),
        }
    }
}

impl ReadHalf {
    pub async fn readable(&self) -> io::Result<()> {
        match self {
            ReadHalf::Tcp(r) => r.readable().await,
            ReadHalf::Unix(r) => r.readable().await,
            ReadHalf::Tls(t) => t.readable().await,
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
            ReadHalf::Tls(t) => t.poll_read(cx, buf),
        }
    }
}

impl WriteHalf {
    #[inline]
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            WriteHalf::Tcp(w) => w.try_write(buf),
            WriteHalf::Unix(w) => w.try_write(buf),
            WriteHalf::Tls(t) => t.try_write(buf),
            WriteHalf::Null => Ok(buf.len()),
        }
    }

    /// Output taken by `try_write` but not on the socket yet (TLS records a full socket did not
    /// take): the connection still has output pending until `flush_backlog` sends it.
    #[inline]
    pub fn backlogged(&self) -> bool {
        match self {
            WriteHalf::Tls(t) => t.backlogged(),
            _ => false,
        }
    }

    /// Sends what `backlogged` reports, as far as the socket takes it now.
    pub fn flush_backlog(&self) -> io::Result<()> {
        match self {
            WriteHalf::Tls(t) => t.flush_backlog(),
            _ => Ok(()),
        }
    }

    pub async fn writable(&self) -> io::Result<()> {
        match self {
            WriteHalf::Tcp(w) => w.writable().await,
            WriteHalf::Unix(w) => w.writable().await,
            WriteHalf::Tls(t) => t.writable().await,
            WriteHalf::Null => Ok(()),
        }
    }
}

/// For links that write with `AsyncWriteExt` (a replica's link to its primary).
impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match this.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
            match this {
                WriteHalf::Tcp(w) => std::task::ready!(w.as_ref().poll_write_ready(cx))?,
                WriteHalf::Unix(w) => std::task::ready!(w.as_ref().poll_write_ready(cx))?,
                WriteHalf::Tls(t) => std::task::ready!(t.tcp().poll_write_ready(cx))?,
                WriteHalf::Null => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.backlogged() {
            this.flush_backlog()?;
            if let WriteHalf::Tls(t) = this {
                if t.backlogged() {
                    std::task::ready!(t.tcp().poll_write_ready(cx))?;
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}
