//! The webhook's certificate: the configuration's caBundle verifies the
//! serving certificate of the Secret `linkerd-multus-webhook-tls` for the
//! Service's DNS name (chain, name and time, by rustls's WebPKI verifier, as
//! the API server's client would), and the certificate is not about to
//! expire ([`EXPIRY_WARNING`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::EXTENSION;
use super::extension::{Installed, TLS_SECRET, WEBHOOK, read_error};
use super::report::Check;
use super::snapshot::get_opt;
use super::wait::{Pass, Retry};

/// A certificate that expires sooner than this is a warning.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(60 * 24 * 3600);

/// The DNS name the API server calls the webhook by.
pub fn service_dns_name(namespace: &str) -> String {
    format!("{WEBHOOK}.{namespace}.svc")
}

/// The caBundle, the Secret and the expiry checks.
pub async fn check(
    client: &Client,
    installed: &Installed,
    config: &MutatingWebhookConfiguration,
    pass: &mut Pass,
) {
    let ns = &installed.namespace;
    let description = format!("{WEBHOOK} MutatingWebhookConfiguration has a caBundle");
    let bundles: Vec<&[u8]> = config
        .webhooks
        .iter()
        .flatten()
        .map(|w| {
            w.client_config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.as_slice())
                .unwrap_or_default()
        })
        .collect();
    if bundles.iter().any(|b| b.is_empty()) {
        let error =
            format!("MutatingWebhookConfiguration {WEBHOOK} has a webhook without a caBundle");
        let hint = format!(
            "with cert-manager, its cainjector writes it (annotation cert-manager.io/inject-ca-from: {ns}/{WEBHOOK}): kubectl -n cert-manager logs deploy/cert-manager-cainjector; without it, reinstall: linkerd multus install | kubectl apply -f -"
        );
        pass.add(
            EXTENSION,
            Check::error(description, error, hint),
            Retry::Yes,
        );
        return;
    }
    pass.add(EXTENSION, Check::success(description), Retry::No);
    let dns = service_dns_name(ns);
    let description = format!("the caBundle verifies the serving certificate for {dns}");
    let at = format!("Secret {ns}/{TLS_SECRET}");
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let cert = match get_opt(api.get(TLS_SECRET)).await {
        Err(e) => return pass.add(EXTENSION, read_error(&description, &at, &e), Retry::Yes),
        Ok(secret) => secret.and_then(|s| s.data?.get("tls.crt").map(|c| c.0.clone())),
    };
    let Some(cert) = cert else {
        let error = format!("{at} not found, or without tls.crt");
        let hint = format!(
            "with cert-manager: kubectl -n {ns} describe certificate {WEBHOOK}; without it, reinstall: linkerd multus install | kubectl apply -f -"
        );
        return pass.add(
            EXTENSION,
            Check::error(description, error, hint),
            Retry::Yes,
        );
    };
    let now = SystemTime::now();
    let verified = bundles
        .iter()
        .try_for_each(|bundle| verify(bundle, &cert, &dns, now));
    let hint = format!(
        "the caBundle must hold the CA that signed {at}: with cert-manager, it re-injects it (kubectl -n {ns} describe certificate {WEBHOOK}); without it, reinstall: linkerd multus install | kubectl apply -f -"
    );
    match verified {
        Ok(()) => pass.add(EXTENSION, Check::success(description), Retry::No),
        Err(e) => {
            let check = Check::error(description, format!("{at}: {e}"), hint);
            pass.add(EXTENSION, check, Retry::Yes)
        }
    }
    expiry_check(ns, &at, &cert, now, pass);
}

/// The check of the certificate's expiry.
fn expiry_check(ns: &str, at: &str, cert: &[u8], now: SystemTime, pass: &mut Pass) {
    let description = "the webhook's serving certificate is valid for at least 60 days";
    let check = match not_after(cert).map(|end| expiry(end, now)) {
        Err(e) => Check::error(
            description,
            format!("{at}: {e}"),
            "fix tls.crt: it must be a PEM certificate",
        ),
        Ok(Expiry::Later) => Check::success(description),
        Ok(Expiry::Soon(days)) => Check::warning(
            description,
            format!("{at} expires in {days} days"),
            renew_hint(ns),
        ),
        Ok(Expiry::Expired) => {
            Check::error(description, format!("{at} has expired"), renew_hint(ns))
        }
    };
    pass.add(EXTENSION, check, Retry::No);
}

fn renew_hint(ns: &str) -> String {
    format!(
        "renew it: with cert-manager, cmctl renew -n {ns} {WEBHOOK}; without it, reinstall with a new certificate: linkerd multus install | kubectl apply -f - (with the Helm chart: helm upgrade, which renews it within 60 days of expiry)"
    )
}

/// Why a certificate does not verify.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Not a PEM certificate.
    #[error("{0} holds no PEM certificate")]
    NoCertificate(&'static str),
    /// Not readable.
    #[error("{0}")]
    Unreadable(String),
    /// The verifier's verdict.
    #[error("the caBundle does not verify it: {0}")]
    Rejected(rustls::Error),
}

/// Verifies the chain `cert` (PEM: the leaf, then intermediates) for `dns`
/// at `now` against the CAs of `bundle` (PEM).
pub fn verify(bundle: &[u8], cert: &[u8], dns: &str, now: SystemTime) -> Result<(), CertError> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(bundle).flatten() {
        roots
            .add(ca)
            .map_err(|e| CertError::Unreadable(format!("caBundle: {e}")))?;
    }
    if roots.is_empty() {
        return Err(CertError::NoCertificate("the caBundle"));
    }
    let chain: Vec<CertificateDer> = CertificateDer::pem_slice_iter(cert).flatten().collect();
    let (leaf, intermediates) = chain
        .split_first()
        .ok_or(CertError::NoCertificate("tls.crt"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| CertError::Unreadable(e.to_string()))?;
    let name =
        ServerName::try_from(dns.to_string()).map_err(|e| CertError::Unreadable(e.to_string()))?;
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    verifier
        .verify_server_cert(
            leaf,
            intermediates,
            &name,
            &[],
            UnixTime::since_unix_epoch(since),
        )
        .map(|_| ())
        .map_err(CertError::Rejected)
}

/// The end of the first certificate's validity (PEM).
pub fn not_after(cert: &[u8]) -> Result<SystemTime, CertError> {
    let der = CertificateDer::pem_slice_iter(cert)
        .flatten()
        .next()
        .ok_or(CertError::NoCertificate("tls.crt"))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| CertError::Unreadable(format!("tls.crt: {e}")))?;
    let seconds = parsed.validity().not_after.timestamp();
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds.max(0) as u64))
}

/// How soon a certificate expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// In [`EXPIRY_WARNING`] or later.
    Later,
    /// Within it: in this many whole days.
    Soon(u64),
    /// Already.
    Expired,
}

/// How soon `not_after` comes from `now`.
pub fn expiry(not_after: SystemTime, now: SystemTime) -> Expiry {
    match not_after.duration_since(now) {
        Err(_) => Expiry::Expired,
        Ok(left) if left < EXPIRY_WARNING => Expiry::Soon(left.as_secs() / 86_400),
        Ok(_) => Expiry::Later,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

    fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        (pem, Issuer::new(params, key))
    }

    fn leaf(issuer: &Issuer<'static, KeyPair>, dns: &str, days: i64) -> String {
        leaf_at(issuer, dns, days, SystemTime::now())
    }

    /// A leaf valid from a day before `now` to `days` after it (whole seconds, as X.509
    /// writes them).
    fn leaf_at(issuer: &Issuer<'static, KeyPair>, dns: &str, days: i64, now: SystemTime) -> String {
        let mut params = CertificateParams::new(vec![dns.to_string()]).unwrap();
        let day = Duration::from_secs(86_400);
        params.not_before = (now - day).into();
        params.not_after = match days {
            d if d >= 0 => now + day * d as u32,
            d => now - day * d.unsigned_abs() as u32,
        }
        .into();
        params
            .signed_by(&KeyPair::generate().unwrap(), issuer)
            .unwrap()
            .pem()
    }

    #[test]
    fn the_bundle_must_verify_the_chain_for_the_service_name() {
        let (pem, issuer) = ca("a");
        let (other, _) = ca("b");
        let dns = service_dns_name("linkerd-multus");
        let good = leaf(&issuer, &dns, 365);
        let now = SystemTime::now();
        assert!(verify(pem.as_bytes(), good.as_bytes(), &dns, now).is_ok());
        for (bundle, cert, name) in [
            (other.as_str(), good.as_str(), dns.as_str()),
            (
                pem.as_str(),
                good.as_str(),
                "linkerd-multus-webhook.elsewhere.svc",
            ),
            (pem.as_str(), "", dns.as_str()),
            ("", good.as_str(), dns.as_str()),
        ] {
            assert!(
                verify(bundle.as_bytes(), cert.as_bytes(), name, now).is_err(),
                "{name}"
            );
        }
        let expired = leaf(&issuer, &dns, -1);
        assert!(verify(pem.as_bytes(), expired.as_bytes(), &dns, now).is_err());
    }

    /// The leaves expire relative to one fixed instant, half a second past a whole one: a
    /// leaf made after `now` (as under load, seconds later) would expire a day later than
    /// counted.
    #[test]
    fn expiry_within_sixty_days_warns() {
        let (_, issuer) = ca("a");
        let now = SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_500);
        for (days, want) in [
            (365, Expiry::Later),
            (61, Expiry::Later),
            (30, Expiry::Soon(29)),
            (-2, Expiry::Expired),
        ] {
            let cert = leaf_at(&issuer, "x.svc", days, now);
            assert_eq!(
                expiry(not_after(cert.as_bytes()).unwrap(), now),
                want,
                "{days}"
            );
        }
    }
}
