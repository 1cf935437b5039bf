//! The listening sockets: one socket takes IPv4 and IPv6 on an IPv6 address
//! (IPV6_V6ONLY off, whatever the system's default), and `[::]` falls back to
//! `0.0.0.0` on a kernel without IPv6.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

/// The backlog of pending connections, as `std` and tokio use.
const BACKLOG: i32 = 1024;

/// Binds `addr` for `flag` (named in errors and logs): an IPv6 address
/// accepts IPv4 too; an unspecified IPv6 address on a kernel without IPv6
/// falls back to `0.0.0.0` on the same port, with a log line.
pub fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<TcpListener> {
    match bind_socket(addr) {
        Ok(listener) => Ok(listener),
        Err(e) if no_ipv6(addr, &e) => {
            let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, addr.port()));
            tracing::warn!(
                error = %e,
                "{flag} {addr}: this kernel has no IPv6; listening on {v4} instead (IPv4 only)"
            );
            bind_socket(v4).with_context(|| format!("{flag} {v4} (instead of {addr}, no IPv6)"))
        }
        Err(e) => Err(e).with_context(|| format!("{flag} {addr}")),
    }
}

/// [`bind`], and the address bound: `0.0.0.0` where the kernel has no IPv6.
pub fn bind_as(addr: SocketAddr, flag: &str) -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listener = bind(addr, flag)?;
    let bound = listener.local_addr().unwrap_or(addr);
    Ok((listener, bound))
}

fn bind_socket(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        // Linux defaults to dual-stack (net.ipv6.bindv6only=0), but a node may
        // say otherwise: set it, so `[::]` takes IPv4 too.
        socket.set_only_v6(false)?;
    }
    // A restarted webhook binds at once, though the old sockets are in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    TcpListener::from_std(socket.into())
}

/// Whether binding `addr` failed because the kernel has no IPv6 at all: only
/// for an unspecified IPv6 address, which then has an IPv4 equivalent.
fn no_ipv6(addr: SocketAddr, error: &io::Error) -> bool {
    addr.is_ipv6()
        && addr.ip().is_unspecified()
        && (error.kind() == io::ErrorKind::AddrNotAvailable
            || error.raw_os_error() == Some(libc::EAFNOSUPPORT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unspecified_ipv6_address_falls_back_and_only_for_missing_ipv6() {
        let no_family = io::Error::from_raw_os_error(libc::EAFNOSUPPORT);
        let not_available = io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        let in_use = io::Error::from_raw_os_error(libc::EADDRINUSE);
        let cases = [
            ("[::]:8443", &no_family, true),
            ("[::]:8443", &not_available, true),
            ("[::]:8443", &in_use, false),
            ("[::1]:8443", &no_family, false),
            ("[fd00::2]:8443", &not_available, false),
            ("0.0.0.0:8443", &no_family, false),
            ("127.0.0.1:8443", &not_available, false),
        ];
        for (addr, error, want) in cases {
            assert_eq!(
                no_ipv6(addr.parse().unwrap(), error),
                want,
                "{addr}: {error}"
            );
        }
    }

    #[tokio::test]
    async fn an_ipv6_socket_takes_ipv4_too() {
        let Ok(listener) = bind_socket("[::]:0".parse().unwrap()) else {
            // No IPv6 here: the fallback is what runs, and is tested above.
            return;
        };
        let port = listener.local_addr().unwrap().port();
        let connect = tokio::net::TcpStream::connect(("127.0.0.1", port));
        let (connected, accepted) = tokio::join!(connect, listener.accept());
        connected.unwrap();
        let (_, peer) = accepted.unwrap();
        assert!(
            peer.ip().to_canonical().is_ipv4(),
            "an IPv4 peer, mapped: {peer}"
        );
    }
}
