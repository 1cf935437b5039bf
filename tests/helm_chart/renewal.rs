//! Renewing the chart's certificates on `helm upgrade`, against a real kube-apiserver with
//! Helm 4.2.3's own code: at every step, a client that trusts only the caBundle the
//! MutatingWebhookConfiguration holds then (as the API server does) completes a TLS handshake
//! with a webhook serving the certificate of before the renewal (a replica that has not reloaded
//! yet) and with one serving the Secret's new certificate, each through the webhook's own TLS
//! code (`webhook::tls::Tls`).

use std::time::Duration;

use linkerd_multus::extension::install::certificates;
use linkerd_multus::webhook::tls::{Tls, TlsFiles};
use rustls::pki_types::ServerName;
use serde_json::Value;

use crate::common;
use common::helm::{CHART, helm};
use common::kube_apiserver::ControlPlane;
use common::output_text;

const NAMESPACE: &str = "linkerd-multus";

/// The Secret's files: serving certificate, key, trust bundle (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Served {
    cert: String,
    key: String,
    bundle: String,
}

/// A TLS handshake with a server that serves `served`'s certificate and key through the
/// webhook's own TLS configuration, from a client that trusts `bundle` alone and asks for the
/// Service's name: `Err` says why the client refused.
fn handshake(served: &Served, bundle: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &served.cert).unwrap();
    std::fs::write(&key, &served.key).unwrap();
    let tls = Tls::load(TlsFiles {
        cert,
        key,
        client_ca: None,
    })
    .expect("the webhook loads the Secret's certificate and key");
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    let connector = common::https::connector(bundle, None, &[b"http/1.1"]);
    let name = ServerName::try_from(format!("linkerd-multus-webhook.{NAMESPACE}.svc")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = async {
            let (tcp, _) = listener.accept().await.unwrap();
            // The server's side fails when the client refuses: the client says why.
            let _ = acceptor.accept(tcp).await;
        };
        let client = async {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            connector
                .connect(name, tcp)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let ((), result) = tokio::time::timeout(Duration::from_secs(30), async {
            tokio::join!(server, client)
        })
        .await
        .expect("the handshake ends within 30 s");
        result
    })
}

/// The PEM certificates of `bundle`, each once.
fn certificates_of(bundle: &str) -> Vec<String> {
    bundle
        .split_inclusive("-----END CERTIFICATE-----")
        .filter_map(|part| part.find("-----BEGIN").map(|at| part[at..].to_string()))
        .collect()
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn unb64(text: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .unwrap(),
    )
    .unwrap()
}

struct Release<'a> {
    plane: &'a ControlPlane,
}

impl Release<'_> {
    /// `helm COMMAND` of the chart as the release linkerd-multus, with `values`.
    fn run(&self, command: &str, values: &str, extra: &[&str]) -> Value {
        let mut args = vec![
            command,
            CHART,
            "--release",
            "linkerd-multus",
            "--namespace",
            NAMESPACE,
            "--values",
            values,
        ];
        args.extend(extra);
        let out = helm(&args, Some(self.plane.admin_kubeconfig.as_path()));
        assert!(out.status.success(), "helm {args:?}: {}", output_text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The Secret's files and its resourceVersion.
    fn secret(&self) -> (Served, String) {
        let json: Value = serde_json::from_str(&self.plane.kubectl(&[
            "get",
            "secret",
            "linkerd-multus-webhook-tls",
            "-n",
            NAMESPACE,
            "-o",
            "json",
        ]))
        .unwrap();
        let file = |key: &str| unb64(json["data"][key].as_str().unwrap());
        let served = Served {
            cert: file("tls.crt"),
            key: file("tls.key"),
            bundle: file("ca.crt"),
        };
        let version = json["metadata"]["resourceVersion"].as_str().unwrap();
        (served, version.to_string())
    }

    /// The caBundle of the webhook configuration, the same in both its webhooks (PEM).
    fn trusted(&self) -> String {
        let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/linkerd-multus-webhook";
        let config = self
            .plane
            .get_json(path)
            .unwrap_or_else(|| panic!("no MutatingWebhookConfiguration at {path}"));
        let bundles: Vec<&str> = (config["webhooks"].as_array().into_iter().flatten())
            .map(|webhook| {
                webhook["clientConfig"]["caBundle"]
                    .as_str()
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(bundles.len(), 2, "{bundles:?}");
        assert_eq!(
            bundles[0], bundles[1],
            "the two webhooks trust the same CAs"
        );
        unb64(bundles[0])
    }

    /// The Secret holding `served`'s files (without the extension's label unless `labelled`)
    /// and the caBundle its bundle, each applied whole with the release's field manager (Helm
    /// names it after its program, here python): what the release would have applied then.
    fn plant(&self, served: &Served, labelled: bool) {
        self.plant_object("secret", &|secret| {
            secret["data"] = serde_json::json!({
                "ca.crt": b64(&served.bundle),
                "tls.crt": b64(&served.cert),
                "tls.key": b64(&served.key),
            });
            if !labelled {
                let labels = secret["metadata"]["labels"].as_object_mut().unwrap();
                labels.remove("linkerd.io/extension");
            }
        });
        self.plant_object("mutatingwebhookconfiguration", &|mwc| {
            for webhook in mwc["webhooks"].as_array_mut().unwrap() {
                webhook["clientConfig"]["caBundle"] = Value::String(b64(&served.bundle));
            }
        });
    }

    fn plant_object(&self, kind: &str, edit: &dyn Fn(&mut Value)) {
        let mut args = vec!["get", kind, "-o", "json", "--show-managed-fields"];
        match kind {
            "secret" => args.extend(["linkerd-multus-webhook-tls", "-n", NAMESPACE]),
            _ => args.push("linkerd-multus-webhook"),
        }
        let mut object: Value = serde_json::from_str(&self.plane.kubectl(&args)).unwrap();
        let manager = object["metadata"]["managedFields"][0]["manager"]
            .as_str()
            .unwrap()
            .to_string();
        let metadata = object["metadata"].as_object_mut().unwrap();
        for field in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
        ] {
            metadata.remove(field);
        }
        edit(&mut object);
        self.plane.kubectl_ok(
            &[
                "apply",
                "--server-side",
                &format!("--field-manager={manager}"),
                "--force-conflicts",
                "-f",
                "-",
            ],
            &object.to_string(),
        );
    }
}

/// One step of the renewal: which certificates a client trusting the caBundle reaches.
fn step(release: &Release, label: &str, serving: &[(&str, &Served)]) -> String {
    let trusted = release.trusted();
    let mut seen = Vec::new();
    for (which, served) in serving {
        let result = handshake(served, &trusted);
        assert_eq!(
            result,
            Ok(()),
            "{label}: a client trusting the caBundle refused the webhook serving {which}"
        );
        seen.push(format!("{which}: verified"));
    }
    let line = format!(
        "{label}: caBundle of {} CA(s); {}",
        certificates_of(&trusted).len(),
        seen.join(", ")
    );
    eprintln!("{line}");
    line
}

/// The documented renewal: install; a year on, the certificate 30 days from its end (planted as
/// `install`'s code would have made it 335 days earlier, with the caBundle that trusted it);
/// `helm upgrade` renews it, keeping the old CA in the bundle after the new one; a later upgrade
/// keeps both; deleting the Secret and upgrading (the former procedure) makes new ones and
/// keeps the CA the configuration trusted; the RSA certificate of an earlier release of the chart
/// is renewed the same way. At each step both the certificate the replicas served
/// before and the Secret's current one verify against the caBundle of that moment, and the old
/// certificate would not have verified against the new CA alone.
#[test]
fn renewing_on_upgrade_keeps_the_webhook_trusted_at_every_step() {
    let plane = ControlPlane::own();
    let release = Release { plane };
    let mut steps = Vec::new();

    let installed = release.run("install", "{}", &["--create-namespace"]);
    assert_eq!(installed["revision"], 1, "{installed}");
    let (first, _) = release.secret();
    assert_eq!(release.trusted(), first.bundle);
    assert_eq!(certificates_of(&first.bundle).len(), 1);
    steps.push(step(&release, "1 install", &[("its certificate", &first)]));

    // A year on: the Secret and the caBundle as they would be 30 days before the certificate
    // ends, written with the release's field manager (what the release applied a year ago).
    let now = time::OffsetDateTime::now_utc();
    let made =
        certificates::generate(NAMESPACE, now - Duration::from_secs(335 * 86_400), None).unwrap();
    let old = Served {
        cert: made.cert,
        key: made.key,
        bundle: made.ca_bundle,
    };
    release.plant(&old, true);
    assert_eq!(release.secret().0, old);
    assert!(handshake(&first, &old.bundle).is_err(), "the plant took");
    steps.push(step(
        &release,
        "2 thirty days before the end",
        &[("the old certificate", &old)],
    ));

    // The upgrade renews: a new CA and certificate, the old CA kept after the new one.
    let upgraded = release.run("upgrade", "{}", &[]);
    assert_eq!(upgraded["revision"], 2, "{upgraded}");
    let (renewed, version) = release.secret();
    assert_ne!(renewed.cert, old.cert, "the certificate was not renewed");
    let cas = certificates_of(&renewed.bundle);
    let old_ca = certificates_of(&old.bundle);
    assert_eq!(cas.len(), 2, "the new CA, then the old: {cas:?}");
    assert_eq!(cas[1], old_ca[0], "the old CA stays, after the new one");
    assert_eq!(release.trusted(), renewed.bundle);
    let alone = handshake(&old, &cas[0]).expect_err("the old certificate under the new CA alone");
    assert!(alone.contains("UnknownIssuer"), "{alone}");
    steps.push(step(
        &release,
        "3 helm upgrade (renewed)",
        &[
            ("the old certificate", &old),
            ("the new certificate", &renewed),
        ],
    ));

    // A later upgrade with other values: nothing to renew, the Secret byte for byte.
    release.run("upgrade", r#"{"replicas": 3}"#, &[]);
    let (later, later_version) = release.secret();
    assert_eq!((&later, &later_version), (&renewed, &version));
    steps.push(step(
        &release,
        "4 a later helm upgrade (kept)",
        &[
            ("the old certificate", &old),
            ("the new certificate", &renewed),
        ],
    ));

    // The former procedure, the Secret deleted and the release upgraded: new ones, the CA the
    // configuration trusted (the one the replicas' certificate chains to) kept after them.
    plane.kubectl(&[
        "delete",
        "secret",
        "linkerd-multus-webhook-tls",
        "-n",
        NAMESPACE,
    ]);
    release.run("upgrade", r#"{"replicas": 3}"#, &[]);
    let (remade, _) = release.secret();
    let cas = certificates_of(&remade.bundle);
    assert_eq!(cas.len(), 2, "{cas:?}");
    assert_eq!(cas[1], certificates_of(&renewed.bundle)[0]);
    steps.push(step(
        &release,
        "5 Secret deleted, helm upgrade (made anew)",
        &[
            ("the previous certificate", &renewed),
            ("the new certificate", &remade),
        ],
    ));

    // The Secret an earlier release of the chart made (RSA, by the Helm functions it called,
    // rendered here by Helm from the same calls), with the caBundle it wrote: the first upgrade
    // to this release renews it to ECDSA P-256 and keeps its CA after the new one.
    let earlier = earlier_release_certificates();
    release.plant(&earlier, true);
    steps.push(step(
        &release,
        "6 the earlier release's RSA certificate",
        &[("its certificate", &earlier)],
    ));
    release.run("upgrade", r#"{"replicas": 3}"#, &[]);
    let (ecdsa, _) = release.secret();
    assert!(ecdsa.key.contains("BEGIN EC PRIVATE KEY"), "{}", ecdsa.key);
    let cas = certificates_of(&ecdsa.bundle);
    assert_eq!(cas.len(), 2, "{cas:?}");
    assert_eq!(cas[1], certificates_of(&earlier.bundle)[0]);
    steps.push(step(
        &release,
        "7 helm upgrade (renewed to ECDSA P-256)",
        &[
            ("the RSA certificate", &earlier),
            ("the new certificate", &ecdsa),
        ],
    ));
    assert_eq!(steps.len(), 7);
}

/// The certificates an earlier release of the chart made: its calls of Helm's genCA and
/// genSignedCert (RSA keys), rendered by Helm from a chart of those calls alone.
fn earlier_release_certificates() -> Served {
    let chart = tempfile::tempdir().unwrap();
    std::fs::create_dir(chart.path().join("templates")).unwrap();
    std::fs::write(
        chart.path().join("Chart.yaml"),
        "apiVersion: v2\nname: earlier\nversion: 0.0.1\n",
    )
    .unwrap();
    std::fs::write(
        chart.path().join("templates/certs.yaml"),
        r#"{{- $service := printf "linkerd-multus-webhook.%s.svc" .Release.Namespace -}}
{{- $ca := genCA "linkerd-multus-webhook-ca" 3650 -}}
{{- $names := list "linkerd-multus-webhook" (printf "linkerd-multus-webhook.%s" .Release.Namespace) $service (printf "%s.cluster.local" $service) -}}
{{- $cert := genSignedCert $service nil $names 365 $ca -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: earlier
data:
  ca.crt: {{ $ca.Cert | quote }}
  tls.crt: {{ $cert.Cert | quote }}
  tls.key: {{ $cert.Key | quote }}
"#,
    )
    .unwrap();
    let out = helm(
        &[
            "template",
            &chart.path().to_string_lossy(),
            "--namespace",
            NAMESPACE,
        ],
        None,
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let docs = common::parse_yaml_stream(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let file = |key: &str| docs[0].str_at(&["data", key]).unwrap().to_string();
    let served = Served {
        cert: file("tls.crt"),
        key: file("tls.key"),
        bundle: file("ca.crt"),
    };
    assert!(
        served.key.contains("BEGIN RSA PRIVATE KEY"),
        "{}",
        served.key
    );
    served
}

impl From<certificates::Certificates> for Served {
    fn from(certs: certificates::Certificates) -> Self {
        Served {
            cert: certs.cert,
            key: certs.key,
            bundle: certs.ca_bundle,
        }
    }
}

/// The chart's `helm upgrade` keeps or renews each Secret as `install` would at that moment
/// (`certificates::keep_or_renew`, its own code, on the same Secret): whether the certificate
/// stays, and which certificates of the old bundle stay in the caBundle.
#[test]
fn the_chart_keeps_or_renews_each_secret_as_install_does() {
    let plane = ControlPlane::own();
    let release = Release { plane };
    release.run("install", "{}", &["--create-namespace"]);
    let now = time::OffsetDateTime::now_utc();
    let made = |namespace: &str, days_ago: u64| -> Served {
        let at = now - Duration::from_secs(days_ago * 86_400);
        certificates::generate(namespace, at, None).unwrap().into()
    };
    let fresh = made(NAMESPACE, 10);
    // Its certificate ended 35 days ago; its CA is valid.
    let previous = made(NAMESPACE, 400);
    let expiring = made(NAMESPACE, 335);
    // Its CA ended 50 days ago.
    let dead = made(NAMESPACE, 3_700);
    let elsewhere = made("elsewhere", 10);
    let beside = |served: &Served, others: &[&str]| Served {
        bundle: std::iter::once(served.bundle.as_str())
            .chain(others.iter().copied())
            .collect(),
        ..served.clone()
    };
    let cases = [
        ("good", fresh.clone(), true),
        (
            "good, beside the previous CA, an expired CA and a serving certificate",
            beside(&fresh, &[&previous.bundle, &dead.bundle, &elsewhere.cert]),
            true,
        ),
        ("expiring in 30 days", expiring.clone(), true),
        (
            "expiring in 30 days, beside the previous CA",
            beside(&expiring, &[&previous.bundle]),
            true,
        ),
        ("ended 35 days ago, its CA valid", previous.clone(), true),
        ("for another namespace's names", elsewhere.clone(), true),
        ("without the extension's label", fresh.clone(), false),
    ];
    for (name, planted, labelled) in cases {
        release.plant(&planted, labelled);
        let labels: std::collections::BTreeMap<String, String> =
            serde_json::from_str(&plane.kubectl(&[
                "get",
                "secret",
                "linkerd-multus-webhook-tls",
                "-n",
                NAMESPACE,
                "-o",
                "jsonpath={.metadata.labels}",
            ]))
            .unwrap();
        let existing = certificates::Existing {
            labels,
            type_: Some(certificates::SECRET_TYPE.to_string()),
            certs: certificates::Certificates {
                cert: planted.cert.clone(),
                key: planted.key.clone(),
                ca_bundle: planted.bundle.clone(),
            },
        };
        let (want, decision) =
            certificates::keep_or_renew(NAMESPACE, Some(existing), time::OffsetDateTime::now_utc())
                .unwrap();
        let upgraded = release.run("upgrade", "{}", &[]);
        let (got, _) = release.secret();
        let kept = matches!(
            decision,
            certificates::Decision::Kept | certificates::Decision::Rebuilt(_)
        );
        assert_eq!(
            got.cert == planted.cert,
            kept,
            "{name}: install {decision:?}"
        );
        let old = certificates_of(&planted.bundle);
        let stays = |bundle: &str| -> Vec<String> {
            certificates_of(bundle)
                .into_iter()
                .filter(|c| old.contains(c))
                .collect()
        };
        assert_eq!(
            stays(&got.bundle),
            stays(&want.ca_bundle),
            "{name}: the old bundle's certificates kept; install {decision:?}"
        );
        assert_eq!(
            certificates_of(&got.bundle).len(),
            certificates_of(&want.ca_bundle).len(),
            "{name}: install {decision:?}"
        );
        assert_eq!(release.trusted(), got.bundle, "{name}");
        let notes = upgraded["notes"].as_str().unwrap_or_default();
        let said = notes
            .split("The webhook's certificates: ")
            .nth(1)
            .and_then(|rest| rest.split(". The next").next())
            .unwrap_or_else(|| panic!("{name}: the notes say nothing of them: {notes}"));
        eprintln!(
            "{name}: install {decision:?}; the chart: {}",
            said.replace('\n', " ")
        );
        assert_eq!(
            handshake(&got, &release.trusted()),
            Ok(()),
            "{name}: the Secret's certificate"
        );
    }
}
