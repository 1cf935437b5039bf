//! The webhook's certificates without cert-manager: a CA and a serving
//! certificate for the Service's names, made at install time, or kept from
//! the cluster while they are good, so that installing again changes nothing.
//!
//! The Secret's `ca.crt` is the trust bundle the MutatingWebhookConfiguration's
//! `caBundle` carries, cluster-wide: the CA, and after a renewal also the old
//! CA while it is valid, so the replicas still serving the old certificate
//! keep being trusted until they reload the new one. So a Secret is kept
//! only when `install` made it ([`made_by_install`]: its label and type, a
//! self-signed CA limited to pathLen 0, a serving certificate for exactly the
//! Service's names, ECDSA P-256 keys), and its `ca.crt` is rebuilt from the
//! issuing CA and at most the previous one; a Secret of anyone else's is
//! replaced, and none of its CAs is trusted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};
use x509_parser::pem::Pem;

use super::super::{EXTENSION_LABEL, NAME};

/// The webhook's Service.
pub const SERVICE: &str = "linkerd-multus-webhook";

/// The Secret the Deployment mounts.
pub const SECRET: &str = "linkerd-multus-webhook-tls";

/// The Secret's type.
pub const SECRET_TYPE: &str = "kubernetes.io/tls";

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

/// The Secret as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its type.
    pub type_: Option<String>,
    /// Its files.
    pub certs: Certificates,
}

/// What became of the cluster's Secret, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No Secret: made anew.
    New,
    /// Kept as it is.
    Kept,
    /// Kept, its `ca.crt` rebuilt without this many certificates `install`
    /// did not put there.
    Rebuilt(usize),
    /// Made anew, and why; the CA of the old ones stays in the bundle.
    Renewed(String),
    /// Not made by `install` (why): replaced, none of its CAs trusted.
    Replaced(String),
}

impl Decision {
    /// What to say on stderr about the Secret `namespace/SECRET`.
    pub fn note(&self, namespace: &str) -> String {
        let at = format!("{namespace}/{SECRET}");
        match self {
            Decision::New => format!("made new webhook certificates (no Secret {at})"),
            Decision::Kept => format!("kept the webhook's certificates of {at}"),
            Decision::Rebuilt(n) => format!(
                "kept the webhook's certificates of {at}; its ca.crt is rebuilt from the CA that issued tls.crt and the previous one, without {n} certificate(s) install did not put there"
            ),
            Decision::Renewed(why) => format!(
                "made new webhook certificates ({why}); the old CA stays in the caBundle while the replicas reload"
            ),
            Decision::Replaced(why) => format!(
                "replaced the Secret {at}: install did not make it ({why}); made new webhook certificates, and none of its CAs is trusted"
            ),
        }
    }
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
/// `install` made it and it is good at `now` for [`KEEP_MIN_VALIDITY`] more,
/// its bundle rebuilt; new ones otherwise, with the CA of the old certificate
/// kept in the bundle while it is valid when `install` made it.
pub fn keep_or_renew(
    namespace: &str,
    existing: Option<Existing>,
    now: OffsetDateTime,
) -> anyhow::Result<(Certificates, Decision)> {
    let Some(existing) = existing else {
        return Ok((generate(namespace, now, None)?, Decision::New));
    };
    let issuer = match made_by_install(&existing, namespace) {
        Ok(issuer) => issuer,
        Err(why) => {
            return Ok((generate(namespace, now, None)?, Decision::Replaced(why)));
        }
    };
    let certs = existing.certs;
    match still_good(&certs, &issuer, now) {
        Ok(()) => {
            let (ca_bundle, dropped) = rebuilt_bundle(&certs.ca_bundle, &issuer, now);
            let decision = match dropped {
                0 if ca_bundle == certs.ca_bundle => Decision::Kept,
                n => Decision::Rebuilt(n),
            };
            Ok((Certificates { ca_bundle, ..certs }, decision))
        }
        Err(why) => {
            let ca = parse(&issuer).ok();
            let old_ca = ca
                .filter(|ca| valid_through(ca, now, now.unix_timestamp()).is_ok())
                .map(|_| pem_text(&issuer));
            let new = generate(namespace, now, old_ca.as_deref())?;
            Ok((new, Decision::Renewed(why)))
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

/// The CA (DER) that issued the Secret's serving certificate when `install`
/// made the Secret: labelled as the extension's, of type `kubernetes.io/tls`,
/// its `tls.crt` for exactly the Service's names with an ECDSA P-256 key,
/// issued by a CA of its `ca.crt` that signed itself, is limited to pathLen 0
/// and has an ECDSA P-256 key, as [`generate`] makes them. `Err` says why not.
pub fn made_by_install(existing: &Existing, namespace: &str) -> Result<Vec<u8>, String> {
    let label = |key: &str| existing.labels.get(key).map(String::as_str);
    if label(EXTENSION_LABEL) != Some(NAME) {
        return Err(format!("it lacks install's label {EXTENSION_LABEL}={NAME}"));
    }
    if existing.type_.as_deref() != Some(SECRET_TYPE) {
        return Err(format!(
            "its type is {:?}, not {SECRET_TYPE}",
            existing.type_.as_deref().unwrap_or_default()
        ));
    }
    let cert_pems = pems(&existing.certs.cert).map_err(|e| format!("tls.crt: {e:#}"))?;
    let pem = cert_pems.first().ok_or("tls.crt holds no certificate")?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("tls.crt is not a certificate: {e}"))?;
    if cert.is_ca() {
        return Err("tls.crt is a CA".into());
    }
    let want: BTreeSet<String> = names(namespace).into_iter().collect();
    let held = subject_names(&cert)?;
    if held != want {
        return Err(format!(
            "tls.crt is for {}, not exactly {}",
            joined(&held),
            joined(&want)
        ));
    }
    if !p256(&cert) {
        return Err("tls.crt's key is not ECDSA P-256".into());
    }
    let cas = pems(&existing.certs.ca_bundle).map_err(|e| format!("ca.crt: {e:#}"))?;
    let issuer = cas
        .iter()
        .find(|p| {
            p.parse_x509()
                .is_ok_and(|ca| ca.is_ca() && cert.verify_signature(Some(ca.public_key())).is_ok())
        })
        .ok_or("ca.crt holds no CA that signed tls.crt")?;
    let ca = issuer.parse_x509().map_err(|e| e.to_string())?;
    install_shaped_ca(&ca).map_err(|why| format!("the CA that signed tls.crt {why}"))?;
    Ok(issuer.contents.clone())
}

/// Whether `ca` is a CA as [`generate`] makes one: `Err` says why not.
fn install_shaped_ca(ca: &X509Certificate) -> Result<(), &'static str> {
    if ca.subject().as_raw() != ca.issuer().as_raw() || ca.verify_signature(None).is_err() {
        return Err("is not self-signed");
    }
    let constraints = ca.basic_constraints().ok().flatten().map(|c| c.value);
    if !constraints.is_some_and(|c| c.ca && c.path_len_constraint == Some(0)) {
        return Err("is not limited to pathLen 0");
    }
    if !p256(ca) {
        return Err("has no ECDSA P-256 key");
    }
    Ok(())
}

/// Whether the certificate's key is ECDSA on P-256, the key type `install` makes.
fn p256(cert: &X509Certificate) -> bool {
    let algorithm = &cert.public_key().algorithm;
    algorithm.algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY
        && algorithm
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok())
            .is_some_and(|curve| curve == OID_EC_P256)
}

/// Whether the certificates install made may be kept: `Err` says why not.
fn still_good(existing: &Certificates, issuer: &[u8], now: OffsetDateTime) -> Result<(), String> {
    let cert_pems = pems(&existing.cert).map_err(|e| format!("tls.crt: {e:#}"))?;
    let pem = cert_pems.first().ok_or("tls.crt holds no certificate")?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("tls.crt is not a certificate: {e}"))?;
    let horizon = (now + KEEP_MIN_VALIDITY).unix_timestamp();
    valid_through(&cert, now, horizon).map_err(|e| format!("tls.crt {e}"))?;
    let key = KeyPair::from_pem(&existing.key).map_err(|e| format!("tls.key: {e}"))?;
    if key.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
        return Err("tls.key is not the key of tls.crt".into());
    }
    let ca = parse(issuer).map_err(|e| format!("its CA: {e}"))?;
    valid_through(&ca, now, horizon).map_err(|e| format!("its CA {e}"))
}

/// The bundle of a kept Secret: the issuing CA, then at most one other CA of
/// `bundle` shaped as `install` makes them and valid at `now` (the previous
/// one, trusted while replicas may still serve its certificate); and how
/// many certificates of `bundle` were left out.
fn rebuilt_bundle(bundle: &str, issuer: &[u8], now: OffsetDateTime) -> (String, usize) {
    let all = pems(bundle).unwrap_or_default();
    let previous = all.iter().find(|p| {
        p.contents != issuer
            && p.parse_x509().is_ok_and(|ca| {
                ca.is_ca()
                    && install_shaped_ca(&ca).is_ok()
                    && valid_through(&ca, now, now.unix_timestamp()).is_ok()
            })
    });
    let mut out = pem_text(issuer);
    let mut kept = 1;
    if let Some(previous) = previous {
        out.push_str(&pem_text(&previous.contents));
        kept += 1;
    }
    (out, all.len().saturating_sub(kept))
}

fn parse(der: &[u8]) -> anyhow::Result<X509Certificate<'_>> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).context("not a certificate")?;
    Ok(cert)
}

fn joined(names: &BTreeSet<String>) -> String {
    match names.is_empty() {
        true => "no name".into(),
        false => names.iter().cloned().collect::<Vec<_>>().join(", "),
    }
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

/// The names of the certificate's subjectAltName: DNS names only.
fn subject_names(cert: &X509Certificate) -> Result<BTreeSet<String>, String> {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Ok(BTreeSet::new());
    };
    san.value
        .general_names
        .iter()
        .map(|n| match n {
            GeneralName::DNSName(name) => Ok(name.to_string()),
            other => Err(format!("tls.crt names {other}, not only DNS names")),
        })
        .collect()
}

fn pems(text: &str) -> anyhow::Result<Vec<Pem>> {
    Pem::iter_from_buffer(text.as_bytes())
        .map(|p| p.context("not PEM"))
        .collect()
}

/// A certificate's PEM text from its DER, as rcgen writes it.
fn pem_text(der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
#[path = "certificates_tests.rs"]
mod tests;
