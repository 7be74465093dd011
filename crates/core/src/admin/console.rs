//! The HTML console served at `/` (with `http_admin_console`).

use std::fmt::Write as _;

use super::stats_snapshot::gather;
use crate::commands::ConnCtx;
use crate::process::sysinfo::human_bytes;
use crate::version::REDIS_VERSION;

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The HTML console at `/`.
pub async fn console_page(cx: &mut ConnCtx) -> String {
    let t = gather(cx).await;
    let shared = cx.shared();
    let rows: Vec<(&str, String)> = vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("redis_version", REDIS_VERSION.to_string()),
        (
            "uptime_in_seconds",
            shared.started.elapsed().as_secs().to_string(),
        ),
        ("threads", shared.threads.to_string()),
        ("connected_clients", t.clients.to_string()),
        ("used_memory", human_bytes(t.mem.allocated)),
        ("used_memory_rss", human_bytes(t.mem.rss)),
        ("used_memory_peak", human_bytes(t.mem.peak)),
        ("keys", t.keys().to_string()),
        ("expiring_keys", t.expires().to_string()),
        ("total_commands_processed", t.commands_processed.to_string()),
        ("keyspace_hits", t.hits.to_string()),
        ("keyspace_misses", t.misses.to_string()),
        ("expired_keys", t.expired.to_string()),
        ("total_error_replies", t.total_error_replies.to_string()),
    ];
    let mut body = String::new();
    for (k, v) in rows {
        let _ = write!(body, "<tr><td>{}</td><td>{}</td></tr>", k, html_escape(&v));
    }
    format!(
        "<!DOCTYPE html>\n<html><head><title>damselfly</title><style>body{{font-family:sans-serif}}td{{padding:2px 12px}}</style></head>\
         <body><h1>damselfly v{}</h1><table>{}</table><p><a href=\"/metrics\">/metrics</a></p></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        body
    )
}
