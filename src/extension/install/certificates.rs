//! The webhook's certificates without cert-manager: a CA and a serving
//! certificate for the Service's names, made at install time, or kept from
//! the cluster while they are good, so that installing again changes nothing.
//!
//! The Secret's `ca.crt` is the trust bundle the MutatingWebhookConfiguration's
//! `caBundle` carries: the CA, and after a renewal also the old CA while it is
//! valid, so the replicas still serving the old certificate keep being
//! trusted until they reload the new one.

use std::time::Duration;

use anyhow::{Context as _, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

/// The webhook's Service.
pub const SERVICE: &str = "linkerd-multus-webhook";

/// The Secret the Deployment mounts.
pub const SECRET: &str = "linkerd-multus-webhook-tls";

/// How long a new serving certificate is valid.
pub const SERVING_VALIDITY: Duration = Duration::from_secs(365 * 86_400);

/// How long a new CA is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 86_400);

/// A certificate kept from the cluster must stay valid at least this long.
pub const KEEP_MIN_VALIDITY: Duration = Duration::from_secs(60 * 86_400);

/// The webhook's TLS files, PEM: what the Secret holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificates {
    /// `tls.crt`: the serving certificate.
    pub cert: String,
    /// `tls.key`: its private key.
    pub key: String,
    /// `ca.crt`: the CAs the API server trusts (the `caBundle`).
    pub ca_bundle: String,
}

/// What became of the cluster's certificates, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Kept as they are.
    Kept,
    /// Made anew, and why.
    New(String),
}

/// The names the serving certificate must hold for a webhook in `namespace`.
pub fn names(namespace: &str) -> Vec<String> {
    vec![
        SERVICE.to_string(),
        format!("{SERVICE}.{namespace}"),
        format!("{SERVICE}.{namespace}.svc"),
        format!("{SERVICE}.{namespace}.svc.cluster.local"),
    ]
}

/// The certificates to install in `namespace`: `existing` (the Secret's) when
/// they are good at `now` for [`KEEP_MIN_VALIDITY`] more, new ones otherwise,
/// with the CA of the old certificate kept in the bundle while it is valid.
pub fn keep_or_renew(
    namespace: &str,
    existing: Option<Certificates>,
    now: OffsetDateTime,
) -> anyhow::Result<(Certificates, Decision)> {
    let Some(existing) = existing else {
        let new = generate(namespace, now, None)?;
        return Ok((new, Decision::New(format!("no Secret {SECRET}"))));
    };
    match still_good(&existing, namespace, now) {
        Ok(()) => Ok((existing, Decision::Kept)),
        Err(why) => {
            let old_ca = issuing_ca(&existing, now);
            let new = generate(namespace, now, old_ca.as_deref())?;
            Ok((new, Decision::New(why)))
        }
    }
}

/// A new CA and serving certificate; `old_ca` (PEM) joins the bundle after the new CA.
pub fn generate(
    namespace: &str,
    now: OffsetDateTime,
    old_ca: Option<&str>,
) -> anyhow::Result<Certificates> {
    let not_before = now - Duration::from_secs(3600);
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, format!("{SERVICE}-ca"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = not_before;
    ca.not_after = now + CA_VALIDITY;
    let ca_key = KeyPair::generate().context("a key for the CA")?;
    let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;
    let issuer = Issuer::new(ca, ca_key);

    let names = names(namespace);
    let mut serving = CertificateParams::new(names.clone())?;
    serving.distinguished_name = rcgen::DistinguishedName::new();
    serving
        .distinguished_name
        .push(DnType::CommonName, names[2].clone());
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.use_authority_key_identifier_extension = true;
    serving.not_before = not_before;
    serving.not_after = now + SERVING_VALIDITY;
    let key = KeyPair::generate().context("a key for the serving certificate")?;
    let cert = serving
        .signed_by(&key, &issuer)
        .context("signing the serving certificate")?;

    let mut ca_bundle = ca_cert.pem();
    if let Some(old) = old_ca {
        ca_bundle.push_str(old);
    }
    Ok(Certificates {
        cert: cert.pem(),
        key: key.serialize_pem(),
        ca_bundle,
    })
}

/// Whether `existing` may be kept: `Err` says why not.
fn still_good(existing: &Certificates, namespace: &str, now: OffsetDateTime) -> Result<(), String> {
    let cert_pems = pems(&existing.cert).map_err(|e| format!("tls.crt: {e:#}"))?;
    let pem = cert_pems.first().ok_or("tls.crt holds no certificate")?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("tls.crt is not a certificate: {e}"))?;
    let horizon = (now + KEEP_MIN_VALIDITY).unix_timestamp();
    valid_through(&cert, now, horizon).map_err(|e| format!("tls.crt {e}"))?;
    let held = dns_names(&cert);
    for name in names(namespace) {
        if !held.contains(&name) {
            return Err(format!("tls.crt is not valid for {name}"));
        }
    }
    let key = KeyPair::from_pem(&existing.key).map_err(|e| format!("tls.key: {e}"))?;
    if key.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
        return Err("tls.key is not the key of tls.crt".into());
    }
    let cas = pems(&existing.ca_bundle).map_err(|e| format!("ca.crt: {e:#}"))?;
    let issuer = cas
        .iter()
        .filter_map(|p| p.parse_x509().ok())
        .find(|ca| ca.is_ca() && cert.verify_signature(Some(ca.public_key())).is_ok())
        .ok_or("ca.crt holds no CA that signed tls.crt")?;
    valid_through(&issuer, now, horizon).map_err(|e| format!("its CA {e}"))
}

/// The CA of the bundle that signed the old certificate, PEM, while it is valid at `now`.
fn issuing_ca(existing: &Certificates, now: OffsetDateTime) -> Option<String> {
    let cert_pems = pems(&existing.cert).ok()?;
    let cert = cert_pems.first()?.parse_x509().ok()?;
    let ca_pems = pems(&existing.ca_bundle).ok()?;
    ca_pems.iter().find_map(|pem| {
        let ca = pem.parse_x509().ok()?;
        let signed = ca.is_ca() && cert.verify_signature(Some(ca.public_key())).is_ok();
        let valid = valid_through(&ca, now, now.unix_timestamp()).is_ok();
        (signed && valid).then(|| pem_text(pem))
    })
}

/// Whether `cert` is valid from `now` through `until` (Unix seconds).
fn valid_through(cert: &X509Certificate, now: OffsetDateTime, until: i64) -> anyhow::Result<()> {
    let validity = cert.validity();
    if validity.not_before.timestamp() > now.unix_timestamp() {
        bail!("is not valid yet");
    }
    if validity.not_after.timestamp() <= until {
        bail!(
            "expires within {} days ({})",
            KEEP_MIN_VALIDITY.as_secs() / 86_400,
            validity.not_after
        );
    }
    Ok(())
}

fn dns_names(cert: &X509Certificate) -> Vec<String> {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(name) => Some(name.to_string()),
            _ => None,
        })
        .collect()
}

fn pems(text: &str) -> anyhow::Result<Vec<Pem>> {
    Pem::iter_from_buffer(text.as_bytes())
        .map(|p| p.context("not PEM"))
        .collect()
}

/// A certificate's PEM text, as rcgen writes it.
fn pem_text(pem: &Pem) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(&pem.contents);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    #[test]
    fn new_certificates_are_valid_for_the_services_names() {
        let certs = generate("mesh", now(), None).unwrap();
        still_good(&certs, "mesh", now()).unwrap();
        assert_eq!(pems(&certs.ca_bundle).unwrap().len(), 1);
        let err = still_good(&certs, "other", now()).unwrap_err();
        assert_eq!(err, "tls.crt is not valid for linkerd-multus-webhook.other");
    }

    #[test]
    fn good_certificates_are_kept_as_they_are() {
        let certs = generate("mesh", now(), None).unwrap();
        let (kept, decision) = keep_or_renew("mesh", Some(certs.clone()), now()).unwrap();
        assert_eq!((kept, decision), (certs, Decision::Kept));
    }

    /// Renewed: what is wrong, and whether the old CA stays in the bundle.
    #[test]
    fn renewals_say_why_and_keep_a_valid_old_ca() {
        let old = generate("mesh", now(), None).unwrap();
        let other = generate("mesh", now(), None).unwrap();
        let soon = now() + SERVING_VALIDITY - 30 * DAY;
        let cases = [
            (
                "expiring",
                old.clone(),
                soon,
                "tls.crt expires within 60 days",
                true,
            ),
            (
                "other namespace",
                generate("x", now(), None).unwrap(),
                now(),
                "not valid for",
                true,
            ),
            (
                "foreign key",
                Certificates {
                    key: other.key.clone(),
                    ..old.clone()
                },
                now(),
                "tls.key is not the key of tls.crt",
                true,
            ),
            (
                "foreign CA",
                Certificates {
                    ca_bundle: other.ca_bundle.clone(),
                    ..old.clone()
                },
                now(),
                "ca.crt holds no CA that signed tls.crt",
                false,
            ),
            (
                "garbage",
                Certificates {
                    cert: "x".into(),
                    ..old.clone()
                },
                now(),
                "tls.crt holds no certificate",
                false,
            ),
        ];
        for (what, existing, at, why, old_ca_kept) in cases {
            let (new, decision) = keep_or_renew("mesh", Some(existing.clone()), at).unwrap();
            let Decision::New(reason) = decision else {
                panic!("{what}: kept");
            };
            assert!(reason.contains(why), "{what}: {reason}");
            still_good(&new, "mesh", at).unwrap();
            let bundle = pems(&new.ca_bundle).unwrap().len();
            assert_eq!(bundle, if old_ca_kept { 2 } else { 1 }, "{what}");
            if old_ca_kept {
                assert!(new.ca_bundle.ends_with(&existing.ca_bundle), "{what}");
            }
        }
        let (_, decision) = keep_or_renew("mesh", None, now()).unwrap();
        assert_eq!(decision, Decision::New(format!("no Secret {SECRET}")));
    }

    /// The old certificate still verifies against the renewed bundle.
    #[test]
    fn the_old_certificate_verifies_against_the_new_bundle() {
        let old = generate("mesh", now(), None).unwrap();
        let later = now() + SERVING_VALIDITY - 10 * DAY;
        let (new, _) = keep_or_renew("mesh", Some(old.clone()), later).unwrap();
        let moved = Certificates {
            ca_bundle: new.ca_bundle.clone(),
            ..old
        };
        assert_eq!(
            still_good(&moved, "mesh", now()),
            Ok(()),
            "the old certificate against the new bundle"
        );
    }
}
