//! What an idle connection costs the webhook, for benches/hostile.rs.

use crate::process::Guarded;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;

use super::common::status_kib;
use super::https::{self, Ca, connector};
use super::servers::Server;

/// The kinds of idle connection measured.
const KINDS: [&str; 3] = ["silent TCP", "TLS handshake done", "after one request"];

/// What an idle connection costs: for each kind, a webhook of its own (a
/// fresh heap; room for them all where the build has `--max-connections`;
/// `--header-timeout 60s`, so that none closes while they are counted) and
/// the anonymous memory (RssAnon) `count` of them add, per connection.
pub fn probe(
    count: usize,
    review: &Bytes,
    bin: &Path,
    dir: &Path,
    kubeconfig: &Path,
    ca: &Ca,
) -> Result<()> {
    let (cert, key) = ca.leaf(&["127.0.0.1"]).write(dir);
    let help = std::process::Command::new(bin)
        .args(["webhook", "--help"])
        .guarded_output()?;
    let mut extra = vec!["--header-timeout".to_string(), "60s".to_string()];
    let help = String::from_utf8_lossy(&help.stdout);
    let limited = help.contains("--max-connections");
    // Every connection comes from one address here.
    let flags = ["--max-connections", "--max-connections-per-peer"];
    for flag in flags.iter().filter(|f| help.contains(&format!("{f} "))) {
        extra.extend([flag.to_string(), (2 * count).to_string()]);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tls = connector(&ca.pem, None, &[b"http/1.1"]);
    let settle = || std::thread::sleep(Duration::from_millis(1_500));
    let mut added = Vec::new();
    for kind in 0..KINDS.len() {
        let mut server = Server::webhook_binary(bin, dir, kubeconfig, &cert, &key, &extra)?;
        server.wait_ready(Duration::from_secs(60))?;
        let (pid, addr) = (server.child.id(), server.addr.clone());
        // A first review: what every connection shares is in place.
        runtime.block_on(async {
            let mut conn = https::Connection::open(&addr, &tls).await?;
            conn.post("/mutate", review.clone()).await?;
            anyhow::Ok(())
        })?;
        settle();
        let before = status_kib(pid, "RssAnon:");
        let held = runtime.block_on(async {
            let mut held = Vec::new();
            for _ in 0..count {
                let tcp = tokio::net::TcpStream::connect(&addr).await?;
                held.push(match kind {
                    0 => Held::Tcp(tcp),
                    1 => Held::Tls(Box::new(tls.connect("127.0.0.1".try_into()?, tcp).await?)),
                    _ => {
                        drop(tcp);
                        let mut conn = https::Connection::open(&addr, &tls).await?;
                        conn.post("/mutate", review.clone()).await?;
                        Held::Http(conn)
                    }
                });
            }
            anyhow::Ok(held)
        })?;
        settle();
        added.push((status_kib(pid, "RssAnon:") - before) / count as f64);
        drop(held);
    }
    let figures: Vec<String> = KINDS
        .iter()
        .zip(&added)
        .map(|(kind, kib)| format!("{kind} {kib:.1} KiB"))
        .collect();
    println!(
        "\nper idle connection (RssAnon added by {count} of a kind, in a webhook of its own{}): {}",
        if limited {
            ", --max-connections (and per peer) raised to hold them"
        } else {
            ""
        },
        figures.join(", ")
    );
    Ok(())
}

/// A connection held open while it is counted.
#[allow(dead_code)]
enum Held {
    Tcp(tokio::net::TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>),
    Http(https::Connection),
}
