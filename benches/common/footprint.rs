//! What an idle connection costs the webhook, for benches/hostile.rs.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;

use super::common::memory_mib;
use super::https::{self, Ca, connector};
use super::servers::Server;

/// What an idle connection costs: a webhook of its own (a fresh heap, and
/// room for every probe connection where the build has `--max-connections`)
/// and the VmRSS each kind adds, the kinds held open together.
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
        .output()?;
    let mut extra = Vec::new();
    if String::from_utf8_lossy(&help.stdout).contains("--max-connections") {
        extra = vec!["--max-connections".to_string(), (4 * count).to_string()];
    }
    let mut server = Server::webhook_binary(bin, dir, kubeconfig, &cert, &key, &extra)?;
    server.wait_ready(Duration::from_secs(60))?;
    let (pid, addr) = (server.child.id(), server.addr.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let tls = connector(&ca.pem, None, &[b"http/1.1"]);
    // A first review: what every connection shares is in place.
    runtime.block_on(async {
        let mut conn = https::Connection::open(&addr, &tls).await?;
        conn.post("/mutate", review.clone()).await?;
        anyhow::Ok(())
    })?;
    let settle = || std::thread::sleep(Duration::from_millis(1_500));
    let mut added = Vec::new();
    let mut held_tcp = Vec::new();
    let mut held_tls = Vec::new();
    let mut held_http = Vec::new();
    for kind in 0..3 {
        settle();
        let before = memory_mib(pid).0;
        runtime.block_on(async {
            for _ in 0..count {
                let tcp = tokio::net::TcpStream::connect(&addr).await?;
                match kind {
                    0 => held_tcp.push(tcp),
                    1 => held_tls.push(tls.connect("127.0.0.1".try_into()?, tcp).await?),
                    _ => {
                        let mut conn = https::Connection::open(&addr, &tls).await?;
                        conn.post("/mutate", review.clone()).await?;
                        held_http.push(conn);
                    }
                }
            }
            anyhow::Ok(())
        })?;
        settle();
        added.push((memory_mib(pid).0 - before) * 1024.0 / count as f64);
    }
    println!(
        "
per connection (VmRSS added by {} of each kind, held together, in a webhook of its own{}): silent TCP {:.1} KiB, TLS handshake done {:.1} KiB, after one request {:.1} KiB",
        count,
        if extra.is_empty() { "" } else { ", --max-connections raised to hold them" },
        added[0],
        added[1],
        added[2]
    );
    Ok(())
}
