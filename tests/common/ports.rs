//! Ports for the processes a test or benchmark starts to listen on.
#![allow(dead_code)]

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A TCP port no socket holds, for a process the test starts to listen on.
///
/// Not one the kernel hands out (`bind(…:0)`): that port comes from the
/// ephemeral range, the same range every outgoing connection takes its local
/// port from, so between the test dropping it and the process binding it, a
/// connection to the API server could take it ("Address already in use", seen
/// in CI). The ports here lie below the ephemeral range, which the kernel never
/// picks on its own; each is handed out once per test binary (an atomic
/// counter, from an offset set by the PID so two binaries start apart), and
/// only after binding it on every address, IPv4 and IPv6, proved no one
/// listens there.
pub fn free_port() -> u16 {
    static NEXT: AtomicUsize = AtomicUsize::new(usize::MAX);
    let (low, high) = unpicked_ports();
    let span = high - low;
    let _ = NEXT.compare_exchange(
        usize::MAX,
        std::process::id() as usize * 389 % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let port = (low + NEXT.fetch_add(1, Ordering::Relaxed) % span) as u16;
        if port_is_free(port) {
            return port;
        }
    }
    panic!("no free port in {low}..{high}");
}

/// Two free ports, the second the next after the first, both the caller's alone: for a
/// process that derives a port from another (scripts/e2e-webhook.sh runs the NAD controller
/// on the port after the webhook's ops port). Each port of [`free_port`] is handed out once,
/// so the pair is two it handed out in a row; another test taking one between them breaks
/// the run, and the next pair is tried.
pub fn free_port_pair() -> (u16, u16) {
    let mut first = free_port();
    loop {
        let second = free_port();
        if second == first + 1 {
            return (first, second);
        }
        first = second;
    }
}

/// The ports below the kernel's ephemeral range (`ip_local_port_range`), from
/// 10000 up, so that well-known services stay out of the way.
fn unpicked_ports() -> (usize, usize) {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<usize>().ok())
        .unwrap_or(32768);
    assert!(
        low > 11000,
        "the ephemeral port range starts at {low}: the tests need the ports from 10000 to 11000 outside it (sysctl net.ipv4.ip_local_port_range)"
    );
    (10000, low)
}

/// Whether a listener can bind `port` on every address: IPv6's wildcard takes
/// IPv4 too, unless the machine has no IPv6.
fn port_is_free(port: u16) -> bool {
    match TcpListener::bind(("::", port)) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => false,
        Err(_) => TcpListener::bind(("0.0.0.0", port)).is_ok(),
    }
}
