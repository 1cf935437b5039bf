//! The stand-in for the webhook's Service in the soak.

use super::*;

/// The stand-in for the webhook's Service: forwards each connection to the
/// first replica that accepts it, starting from a different one each time.
pub(super) struct Forwarder {
    pub(super) addr: SocketAddr,
    backends: Arc<Mutex<Vec<SocketAddr>>>,
}

impl Forwarder {
    pub(super) fn start(backends: Vec<SocketAddr>) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let backends = Arc::new(Mutex::new(backends));
        let shared = backends.clone();
        std::thread::spawn(move || {
            for (turn, client) in listener.incoming().enumerate() {
                let Ok(client) = client else { continue };
                let list = shared.lock().unwrap().clone();
                std::thread::spawn(move || forward(client, &list, turn));
            }
        });
        Forwarder { addr, backends }
    }

    pub(super) fn set_backends(&self, backends: Vec<SocketAddr>) {
        *self.backends.lock().unwrap() = backends;
    }
}

fn forward(client: TcpStream, backends: &[SocketAddr], turn: usize) {
    let n = backends.len();
    let Some(server) = (0..n).find_map(|i| {
        TcpStream::connect_timeout(&backends[(turn + i) % n], Duration::from_secs(1)).ok()
    }) else {
        return;
    };
    let pipe = |mut from: TcpStream, mut to: TcpStream| {
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 || to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            to.shutdown(std::net::Shutdown::Write).ok();
        });
    };
    pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
    pipe(server, client);
}
