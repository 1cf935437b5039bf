//! The install certificates' unit tests: kept, renewed, replaced.

use super::*;

const DAY: Duration = Duration::from_secs(86_400);

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// The Secret `install` would have written for `certs`.
fn secret(certs: &Certificates) -> Existing {
    Existing {
        labels: BTreeMap::from([
            (EXTENSION_LABEL.to_string(), NAME.to_string()),
            ("app.kubernetes.io/part-of".into(), "linkerd-multus".into()),
        ]),
        type_: Some(SECRET_TYPE.into()),
        certs: certs.clone(),
    }
}

/// A CA and serving certificate as someone else makes them: `ca` shapes
/// the CA, `names` the serving certificate's DNS names.
fn foreign(
    ca: IsCa,
    self_signed: bool,
    names: &[&str],
    key: &'static rcgen::SignatureAlgorithm,
) -> Certificates {
    let mut root = CertificateParams::new(Vec::<String>::new()).unwrap();
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root_key = KeyPair::generate().unwrap();
    let root_cert = root.self_signed(&root_key).unwrap();
    let root = Issuer::new(root, root_key);
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = ca;
    let ca_key = KeyPair::generate_for(key).unwrap();
    let ca_cert = match self_signed {
        true => params.self_signed(&ca_key).unwrap(),
        false => params.signed_by(&ca_key, &root).unwrap(),
    };
    let issuer = Issuer::new(params, ca_key);
    let leaf =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    let leaf_key = KeyPair::generate_for(key).unwrap();
    let cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
    let mut ca_bundle = ca_cert.pem();
    if !self_signed {
        ca_bundle.push_str(&root_cert.pem());
    }
    Certificates {
        cert: cert.pem(),
        key: leaf_key.serialize_pem(),
        ca_bundle,
    }
}

#[test]
fn new_certificates_are_install_made_and_for_the_services_names() {
    let certs = generate("mesh", now(), None).unwrap();
    let issuer = made_by_install(&secret(&certs), "mesh").unwrap();
    still_good(&certs, &issuer, now()).unwrap();
    assert_eq!(pems(&certs.ca_bundle).unwrap().len(), 1);
    let err = made_by_install(&secret(&certs), "other").unwrap_err();
    assert!(
        err.starts_with("tls.crt is for linkerd-multus-webhook, linkerd-multus-webhook.mesh,"),
        "{err}"
    );
}

#[test]
fn good_certificates_are_kept_as_they_are() {
    let certs = generate("mesh", now(), None).unwrap();
    let (kept, decision) = keep_or_renew("mesh", Some(secret(&certs)), now()).unwrap();
    assert_eq!((kept, decision), (certs, Decision::Kept));
}

/// A Secret `install` did not make is replaced, and none of its CAs is trusted.
#[test]
fn a_secret_install_did_not_make_is_replaced() {
    let mine = generate("mesh", now(), None).unwrap();
    let names = names("mesh");
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let p256 = &rcgen::PKCS_ECDSA_P256_SHA256;
    let mut extra = names.clone();
    extra.push("evil.example.com");
    let unlabelled = Existing {
        labels: BTreeMap::new(),
        ..secret(&mine)
    };
    let opaque = Existing {
        type_: Some("Opaque".into()),
        ..secret(&mine)
    };
    let cases = [
        (
            "unlabelled",
            unlabelled,
            "it lacks install's label linkerd.io/extension=multus",
        ),
        (
            "opaque",
            opaque,
            "its type is \"Opaque\", not kubernetes.io/tls",
        ),
        (
            "an unconstrained CA",
            secret(&foreign(
                IsCa::Ca(BasicConstraints::Unconstrained),
                true,
                &names,
                p256,
            )),
            "the CA that signed tls.crt is not limited to pathLen 0",
        ),
        (
            "an intermediate CA",
            secret(&foreign(
                IsCa::Ca(BasicConstraints::Constrained(0)),
                false,
                &names,
                p256,
            )),
            "the CA that signed tls.crt is not self-signed",
        ),
        (
            "more names",
            secret(&foreign(
                IsCa::Ca(BasicConstraints::Constrained(0)),
                true,
                &extra,
                p256,
            )),
            "tls.crt is for evil.example.com, linkerd-multus-webhook,",
        ),
        (
            "another key type",
            secret(&foreign(
                IsCa::Ca(BasicConstraints::Constrained(0)),
                true,
                &names,
                &rcgen::PKCS_ECDSA_P384_SHA384,
            )),
            "tls.crt's key is not ECDSA P-256",
        ),
        (
            "a foreign CA",
            secret(&Certificates {
                ca_bundle: generate("mesh", now(), None).unwrap().ca_bundle,
                ..mine.clone()
            }),
            "ca.crt holds no CA that signed tls.crt",
        ),
        (
            "garbage",
            secret(&Certificates {
                cert: "x".into(),
                ..mine.clone()
            }),
            "tls.crt holds no certificate",
        ),
    ];
    for (what, existing, why) in cases {
        let (new, decision) = keep_or_renew("mesh", Some(existing.clone()), now()).unwrap();
        let Decision::Replaced(reason) = decision else {
            panic!("{what}: {decision:?}");
        };
        assert!(reason.starts_with(why), "{what}: {reason}");
        let issuer = made_by_install(&secret(&new), "mesh").unwrap();
        still_good(&new, &issuer, now()).unwrap();
        assert_eq!(
            pems(&new.ca_bundle).unwrap().len(),
            1,
            "{what}: only the new CA"
        );
    }
}

/// Renewed: what is wrong, and the old CA stays in the bundle while valid.
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
        ),
        (
            "foreign key",
            Certificates {
                key: other.key.clone(),
                ..old.clone()
            },
            now(),
            "tls.key is not the key of tls.crt",
        ),
    ];
    for (what, existing, at, why) in cases {
        let (new, decision) = keep_or_renew("mesh", Some(secret(&existing)), at).unwrap();
        let Decision::Renewed(reason) = decision else {
            panic!("{what}: {decision:?}");
        };
        assert!(reason.contains(why), "{what}: {reason}");
        let issuer = made_by_install(&secret(&new), "mesh").unwrap();
        still_good(&new, &issuer, at).unwrap();
        assert_eq!(pems(&new.ca_bundle).unwrap().len(), 2, "{what}");
        assert!(new.ca_bundle.ends_with(&existing.ca_bundle), "{what}");
    }
    let (_, decision) = keep_or_renew("mesh", None, now()).unwrap();
    assert_eq!(decision, Decision::New);
}

/// A kept Secret's bundle is rebuilt: its issuing CA and at most the
/// previous one; certificates planted beside them are dropped.
#[test]
fn a_kept_bundle_holds_the_issuing_ca_and_at_most_the_previous_one() {
    let old = generate("mesh", now(), None).unwrap();
    let later = now() + SERVING_VALIDITY - 10 * DAY;
    let (renewed, _) = keep_or_renew("mesh", Some(secret(&old)), later).unwrap();
    let (kept, decision) = keep_or_renew("mesh", Some(secret(&renewed)), later).unwrap();
    assert_eq!(
        (&kept, decision),
        (&renewed, Decision::Kept),
        "new CA, then the old"
    );

    let planted = generate("elsewhere", now(), None).unwrap().ca_bundle;
    let stranger = foreign(
        IsCa::Ca(BasicConstraints::Unconstrained),
        true,
        &["x"],
        &rcgen::PKCS_ECDSA_P256_SHA256,
    )
    .ca_bundle;
    let bundle = format!("{stranger}{}{planted}", renewed.ca_bundle);
    let tampered = Certificates {
        ca_bundle: bundle,
        ..renewed.clone()
    };
    let (kept, decision) = keep_or_renew("mesh", Some(secret(&tampered)), later).unwrap();
    assert_eq!(decision, Decision::Rebuilt(2));
    assert_eq!(
        kept, renewed,
        "the issuing CA and the previous one, in that order"
    );
    assert!(
        Decision::Rebuilt(2)
            .note("mesh")
            .contains("without 2 certificate(s)")
    );
}

/// The old certificate still verifies against the renewed bundle.
#[test]
fn the_old_certificate_verifies_against_the_new_bundle() {
    let old = generate("mesh", now(), None).unwrap();
    let later = now() + SERVING_VALIDITY - 10 * DAY;
    let (new, _) = keep_or_renew("mesh", Some(secret(&old)), later).unwrap();
    let moved = Certificates {
        ca_bundle: new.ca_bundle.clone(),
        ..old
    };
    let issuer = made_by_install(&secret(&moved), "mesh").unwrap();
    assert_eq!(still_good(&moved, &issuer, now()), Ok(()));
}
