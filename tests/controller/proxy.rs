//! A TCP proxy that holds back what the API server sends by a delay set at
//! run time, while what the client sends goes through at once: the
//! controller's watches then see the cluster late, but its writes land now,
//! which is how a lagging cache meets an object it has not seen. TLS passes
//! through untouched (the API server's certificate names 127.0.0.1).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running proxy; its threads end with the process.
pub struct DelayProxy {
    /// `127.0.0.1:PORT`.
    pub address: String,
    delay_ms: Arc<AtomicU64>,
}

impl DelayProxy {
    /// Proxies to `upstream` (`https://127.0.0.1:PORT` or `127.0.0.1:PORT`), without delay.
    pub fn start(upstream: &str) -> DelayProxy {
        let upstream = upstream.trim_start_matches("https://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let delay = delay_ms.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if let Ok(server) = TcpStream::connect(&upstream) {
                    connect(client, server, delay.clone());
                }
            }
        });
        DelayProxy { address, delay_ms }
    }

    /// Holds back what the server sends by `delay` from now on.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }
}

/// Copies client to server at once, and server to client `delay` late, in order.
fn connect(client: TcpStream, server: TcpStream, delay: Arc<AtomicU64>) {
    let (client_in, server_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || copy(client_in, server_out));
    let (sender, receiver) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut server = server;
        let mut buffer = vec![0; 64 * 1024];
        loop {
            match server.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let due = Instant::now() + Duration::from_millis(delay.load(Ordering::Relaxed));
                    if sender.send((due, buffer[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        let mut client = client;
        for (due, bytes) in receiver {
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if client.write_all(&bytes).is_err() {
                break;
            }
        }
        client.shutdown(Shutdown::Write).ok();
    });
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    std::io::copy(&mut from, &mut to).ok();
    to.shutdown(Shutdown::Write).ok();
}
