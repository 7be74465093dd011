//! HTTP on the main port: a tiny console and Prometheus `/metrics`, recognised by the first
//! request line (`GET /path HTTP/1.x`), as Dragonfly does.
//!
//! With a password set (`requirepass`), both need HTTP Basic authentication as the `default`
//! user with that password (what AUTH checks), so the port does not hand its statistics to
//! whoever reaches it; `http_metrics_nopass yes` leaves `/metrics` open for scrapers, and
//! `--admin_port` with `--admin_nopass` serves both without a password.

use tokio::io::AsyncReadExt;

use super::stream::{ReadHalf, WriteHalf};

use crate::commands::ConnCtx;

/// A page's body, made from the connection's context (the admin layer's `/metrics` and
/// console: installed by the crate root, [`install_pages`], as the network names no layer
/// above it).
pub type Page = for<'a> fn(
    &'a mut ConnCtx,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + 'a>>;

/// `/metrics` and the console page.
pub struct Pages {
    pub metrics: Page,
    pub console: Page,
}

static PAGES: std::sync::OnceLock<Pages> = std::sync::OnceLock::new();

/// Installs the pages served over HTTP (lib.rs does, before the listeners start).
pub fn install_pages(pages: Pages) {
    let _ = PAGES.set(pages);
}

/// True when the buffered bytes start with an HTTP request line rather than a Redis command.
/// ("GET key" is a valid inline Redis command, so require the "HTTP/1." marker.)
pub fn looks_like_http(buf: &[u8]) -> bool {
    let line_end = buf.iter().position(|&c| c == b'\n').unwrap_or(buf.len());
    let line = &buf[..line_end];
    let is_method = line.starts_with(b"GET /") || line.starts_with(b"HEAD /");
    is_method && line.windows(7).any(|w| w == b"HTTP/1.")
}

/// The most of a request head read before answering (the rest is ignored).
const MAX_HEAD: usize = 16 * 1024;

pub async fn serve(
    cx: &mut ConnCtx,
    reader: &mut ReadHalf,
    stream: &WriteHalf,
    mut request: Vec<u8>,
    open: bool,
) -> std::io::Result<()> {
    // The whole head: the first read may have ended inside it.
    while !request.windows(4).any(|w| w == b"\r\n\r\n")
        && !request.windows(2).any(|w| w == b"\n\n")
        && request.len() < MAX_HEAD
    {
        request.reserve(4096);
        if reader.read_buf(&mut request).await? == 0 {
            break;
        }
    }
    let line_end = request
        .iter()
        .position(|&c| c == b'\n')
        .unwrap_or(request.len());
    let line = String::from_utf8_lossy(&request[..line_end]).into_owned();
    let target = line.split_whitespace().nth(1).unwrap_or("/");
    // Ignore any query string ("/metrics?name[]=x" from Prometheus-style scrapers).
    let path = target.split('?').next().unwrap_or("/").to_string();
    let (status, ctype, body) = if !open && !authorized(cx, &request, &path) {
        (
            "401 Unauthorized",
            "text/plain",
            "authentication required\n".to_string(),
        )
    } else if let (true, Some(p)) = (path == "/metrics", PAGES.get()) {
        ("200 OK", "text/plain; version=0.0.4", (p.metrics)(cx).await)
    } else if let (true, Some(p)) = (
        (path == "/" || path == "/index.html") && cx.shared().config.http_admin_console(),
        PAGES.get(),
    ) {
        ("200 OK", "text/html; charset=utf-8", (p.console)(cx).await)
    } else {
        ("404 Not Found", "text/plain", "not found\n".to_string())
    };
    let challenge = if status.starts_with("401") {
        "WWW-Authenticate: Basic realm=\"damselfly\", charset=\"UTF-8\"\r\n"
    } else {
        ""
    };
    let head = format!("HTTP/1.1 {status}\r\n{challenge}Content-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    super::session::write_all(stream, head.as_bytes()).await?;
    if !line.starts_with("HEAD") {
        super::session::write_all(stream, body.as_bytes()).await?;
    }
    Ok(())
}

/// May this request see `path`? Always when a new connection needs no AUTH; otherwise with
/// the credentials of an enabled ACL user in an `Authorization: Basic` header (or for
/// `/metrics` when `http_metrics_nopass` says so).
fn authorized(cx: &ConnCtx, request: &[u8], path: &str) -> bool {
    let cfg = &cx.shared().config;
    if !crate::acl::auth_required() || (path == "/metrics" && cfg.http_metrics_nopass()) {
        return true;
    }
    let Some(cred) = basic_credentials(request) else {
        return false;
    };
    let Some(colon) = cred.iter().position(|&c| c == b':') else {
        return false;
    };
    let (user, pass) = (&cred[..colon], &cred[colon + 1..]);
    crate::acl::authenticate(user, pass).is_some()
}

/// The decoded `user:password` of the request's `Authorization: Basic ...` header.
fn basic_credentials(request: &[u8]) -> Option<Vec<u8>> {
    request.split(|&c| c == b'\n').find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&c| c == b':')?;
        if !line[..colon].eq_ignore_ascii_case(b"authorization") {
            return None;
        }
        let value = line[colon + 1..].trim_ascii();
        let (scheme, token) = value.split_at(value.iter().position(|&c| c == b' ')?);
        if !scheme.eq_ignore_ascii_case(b"basic") {
            return None;
        }
        crate::base64::decode(token.trim_ascii())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_read_from_any_case_header() {
        let req =
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nauthorization: Basic ZGVmYXVsdDpwdw==\r\n\r\n";
        assert_eq!(basic_credentials(req).as_deref(), Some(&b"default:pw"[..]));
        let req = b"GET / HTTP/1.1\r\nAuthorization: Bearer abc\r\n\r\n";
        assert_eq!(basic_credentials(req), None);
        assert_eq!(basic_credentials(b"GET / HTTP/1.1\r\n\r\n"), None);
    }
}
