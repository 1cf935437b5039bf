//! Certificates made at test time and a small HTTPS client, for the webhook
//! tests and its load benchmark.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// GETs `path` over plain HTTP/1.1 from `addr` (the webhook's ops port):
/// status and body.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).ok()?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    tcp.read_to_string(&mut text).ok()?;
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_string()))
}

/// A CA that signs serving and client certificates.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
}

/// A certificate and its key, PEM.
pub struct Leaf {
    pub cert: String,
    pub key: String,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `names` (DNS names or IP addresses).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        self.sign(
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap(),
        )
    }

    /// A leaf made from `params`, with a new key, signed by this CA.
    pub fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

impl Leaf {
    /// Writes `tls.crt` and `tls.key` into `dir`.
    pub fn write(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        // Written next to the target and renamed, as the kubelet swaps secret volumes.
        for (path, text) in [(&cert, &self.cert), (&key, &self.key)] {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, path).unwrap();
        }
        (cert, key)
    }
}

/// A TLS client trusting `ca`, presenting `client` when given, offering `alpn`.
pub fn connector(ca: &str, client: Option<&Leaf>, alpn: &[&[u8]]) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(leaf) => {
            let certs = CertificateDer::pem_slice_iter(leaf.cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

use rustls::pki_types::pem::PemObject;

/// An HTTP/1.1 keep-alive connection over TLS.
pub struct Connection {
    sender: http1::SendRequest<Full<Bytes>>,
    host: String,
}

impl Connection {
    /// Connects to `addr` and completes the TLS handshake.
    pub async fn open(addr: &str, connector: &TlsConnector) -> std::io::Result<Self> {
        Self::open_from(None, addr, connector).await
    }

    /// [`Connection::open`] from `source` (an address of this host), when given.
    pub async fn open_from(
        source: Option<std::net::IpAddr>,
        addr: &str,
        connector: &TlsConnector,
    ) -> std::io::Result<Self> {
        let tcp = match source {
            None => TcpStream::connect(addr).await?,
            Some(source) => {
                let target: std::net::SocketAddr = addr.parse().map_err(std::io::Error::other)?;
                let socket = match source {
                    std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                    std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
                };
                socket.bind(std::net::SocketAddr::new(source, 0))?;
                socket.connect(target).await?
            }
        };
        tcp.set_nodelay(true)?;
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string();
        // `[::1]` in an address and a Host header, `::1` as a name.
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(name.to_string()).expect("a server name");
        let tls = connector.connect(name, tcp).await?;
        let (sender, connection) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(connection);
        Ok(Connection { sender, host })
    }

    /// GETs `path`, asking for JSON; returns the status and the body.
    pub async fn get(&mut self, path: &str) -> Result<(u16, Bytes), hyper::Error> {
        let request = hyper::Request::get(path)
            .header("host", &self.host)
            .header("accept", "application/json")
            .body(Full::new(Bytes::new()))
            .unwrap();
        self.send(request).await
    }

    /// POSTs `body` to `path`; returns the status and the body.
    pub async fn post(&mut self, path: &str, body: Bytes) -> Result<(u16, Bytes), hyper::Error> {
        let request = hyper::Request::post(path)
            .header("host", &self.host)
            .header("content-type", "application/json")
            .body(Full::new(body))
            .unwrap();
        self.send(request).await
    }

    /// Sends `body` to `path` with `method` and `content_type`; returns the status and the
    /// body.
    pub async fn send_body(
        &mut self,
        method: hyper::Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Result<(u16, Bytes), hyper::Error> {
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host)
            .header("accept", "application/json")
            .header("content-type", content_type)
            .body(Full::new(body))
            .unwrap();
        self.send(request).await
    }

    /// Sends `request` once the connection is ready; returns the status and the body.
    async fn send(
        &mut self,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<(u16, Bytes), hyper::Error> {
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}
