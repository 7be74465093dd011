//! HTTP on the main port: a tiny console and Prometheus `/metrics`, recognised by the first
//! request line (`GET /path HTTP/1.x`), as Dragonfly does.

use super::stream::WriteHalf;

use crate::commands::ConnCtx;

/// True when the buffered bytes start with an HTTP request line rather than a Redis command.
/// ("GET key" is a valid inline Redis command, so require the "HTTP/1." marker.)
pub fn looks_like_http(buf: &[u8]) -> bool {
    let line_end = buf.iter().position(|&c| c == b'\n').unwrap_or(buf.len());
    let line = &buf[..line_end];
    let is_method = line.starts_with(b"GET /") || line.starts_with(b"HEAD /");
    is_method && line.windows(7).any(|w| w == b"HTTP/1.")
}

pub async fn serve(cx: &mut ConnCtx, stream: &WriteHalf, request: Vec<u8>) -> std::io::Result<()> {
    let line_end = request
        .iter()
        .position(|&c| c == b'\n')
        .unwrap_or(request.len());
    let line = String::from_utf8_lossy(&request[..line_end]).into_owned();
    let target = line.split_whitespace().nth(1).unwrap_or("/");
    // Ignore any query string ("/metrics?name[]=x" from Prometheus-style scrapers).
    let path = target.split('?').next().unwrap_or("/").to_string();
    let (status, ctype, body) = if path == "/metrics" {
        (
            "200 OK",
            "text/plain; version=0.0.4",
            crate::commands::admin::prometheus_metrics(cx).await,
        )
    } else if (path == "/" || path == "/index.html")
        && cx.shared().config.bool("http_admin_console")
    {
        (
            "200 OK",
            "text/html; charset=utf-8",
            crate::commands::admin::console_page(cx).await,
        )
    } else {
        ("404 Not Found", "text/plain", "not found\n".to_string())
    };
    let head = format!("HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    super::session::write_all(stream, head.as_bytes()).await?;
    if !line.starts_with("HEAD") {
        super::session::write_all(stream, body.as_bytes()).await?;
    }
    Ok(())
}
