//! TLS for the webhook: rustls with ring, TLS 1.2 and 1.3 only, certificate
//! and key from PEM files, optional client-certificate verification, and a
//! reload when the files change on disk. A reload swaps the configuration new
//! handshakes use; open connections keep theirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, anyhow};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// The files the TLS configuration comes from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The serving certificate chain, PEM.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
    /// CA certificates client certificates must chain to, PEM; none means no client authentication.
    pub client_ca: Option<PathBuf>,
}

/// The current TLS configuration and the file contents it was built from.
pub struct Tls {
    files: TlsFiles,
    state: RwLock<(Arc<ServerConfig>, Contents)>,
}

impl Tls {
    /// Loads the files; the error names the file at fault.
    pub fn load(files: TlsFiles) -> anyhow::Result<Tls> {
        let contents = read_all(&files)?;
        let config = build(&files, &contents)?;
        Ok(Tls {
            files,
            state: RwLock::new((Arc::new(config), contents)),
        })
    }

    /// The configuration for a new handshake.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// Reloads when a file changed: `Ok(true)` when the configuration was
    /// replaced, `Ok(false)` when nothing changed, and an error (the old
    /// configuration stays) when the new files do not make one.
    pub fn reload(&self) -> anyhow::Result<bool> {
        let contents = read_all(&self.files)?;
        if self.state.read().unwrap_or_else(|e| e.into_inner()).1 == contents {
            return Ok(false);
        }
        let config = build(&self.files, &contents)?;
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = (Arc::new(config), contents);
        Ok(true)
    }

    /// When the serving certificate in use expires: its first certificate's notAfter, in
    /// seconds since the Unix epoch (`None` when it does not parse as X.509).
    pub fn not_after(&self) -> Option<i64> {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        let der = CertificateDer::pem_slice_iter(&state.1.cert).next()?.ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
        Some(cert.validity().not_after.timestamp())
    }

    /// Checks the files every `interval` and reloads them when they change,
    /// calling `observe` with each reload's result.
    pub async fn watch(self: Arc<Self>, interval: Duration, observe: impl Fn(bool)) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            match self.reload() {
                Ok(false) => {}
                Ok(true) => {
                    tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
                    observe(true);
                }
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "TLS files changed but do not load; serving with the previous certificate");
                    observe(false);
                }
            }
        }
    }
}

/// The bytes of the files, compared to see whether a reload is due.
#[derive(PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

fn read_all(files: &TlsFiles) -> anyhow::Result<Contents> {
    let read =
        |path: &Path| std::fs::read(path).with_context(|| format!("reading {}", path.display()));
    Ok(Contents {
        cert: read(&files.cert)?,
        key: read(&files.key)?,
        client_ca: files.client_ca.as_deref().map(read).transpose()?,
    })
}

fn build(files: &TlsFiles, contents: &Contents) -> anyhow::Result<ServerConfig> {
    let certs = certificates(&files.cert, &contents.cert)?;
    let key = PrivateKeyDer::from_pem_slice(&contents.key)
        .map_err(|e| anyhow!("{}: no PEM private key: {e}", files.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS 1.2 and 1.3 with ring")?;
    let builder = match (&files.client_ca, &contents.client_ca) {
        (Some(path), Some(pem)) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in certificates(path, pem)? {
                roots
                    .add(cert)
                    .with_context(|| format!("{}: not a CA certificate", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .with_context(|| format!("{}: client certificate verifier", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).with_context(|| {
        format!(
            "{} and {} do not make a serving certificate",
            files.cert.display(),
            files.key.display()
        )
    })?;
    // The API server speaks HTTP/2 when offered, HTTP/1.1 otherwise.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

fn certificates(path: &Path, pem: &[u8]) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{}: not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(anyhow!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expiry the metrics show is the serving certificate's notAfter, and follows a reload.
    #[test]
    fn not_after_is_the_serving_certificate_s_and_follows_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: None,
        };
        let write = |(year, month, day): (i32, u8, u8)| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(vec!["webhook".to_string()]).unwrap();
            params.not_after = rcgen::date_time_ymd(year, month, day);
            let cert = params.self_signed(&key).unwrap();
            std::fs::write(&files.cert, cert.pem()).unwrap();
            std::fs::write(&files.key, key.serialize_pem()).unwrap();
        };
        let cases = [
            ((2030, 1, 2), 1_893_542_400),
            ((2031, 6, 30), 1_940_544_000),
        ];
        write(cases[0].0);
        let tls = Tls::load(files.clone()).unwrap();
        assert_eq!(tls.not_after(), Some(cases[0].1));
        write(cases[1].0);
        assert!(tls.reload().unwrap());
        assert_eq!(tls.not_after(), Some(cases[1].1));
    }
}
