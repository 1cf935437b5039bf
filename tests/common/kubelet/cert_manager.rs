//! A stand-in for cert-manager and its cainjector (no registry here ships
//! cert-manager): minimal CRDs for `Issuer` and `Certificate` (their objects
//! kept as written), the Secrets of the Certificates issued as cert-manager
//! issues them from a self-signed Issuer and a CA Issuer, and the CA of the
//! Certificate named by `cert-manager.io/inject-ca-from` written into each
//! webhook's `caBundle`, as cainjector writes it.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

use super::super::https::Ca;
use super::Cluster;

const INJECT: &str = "cert-manager.io/inject-ca-from";

/// The stand-in, holding the CAs it made.
#[derive(Default)]
pub struct CertManager {
    /// The CAs by the Secret they were stored in: `namespace/name`.
    cas: BTreeMap<String, Ca>,
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cert-manager.io", "v1", kind),
        plural,
    )
}

impl CertManager {
    /// Installs the CRDs of `Issuer` and `Certificate` (objects kept as
    /// written) and waits until they are served.
    pub fn install_crds(cluster: &Cluster) {
        for (kind, plural) in [("Issuer", "issuers"), ("Certificate", "certificates")] {
            let crd = json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.cert-manager.io")},
                "spec": {
                    "group": "cert-manager.io", "scope": "Namespaced",
                    "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
                },
            });
            cluster.plane.apply(&crd.to_string());
            cluster.plane.kubectl(&[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{plural}.cert-manager.io"),
            ]);
        }
    }

    /// Issues every Certificate of `namespace` not issued yet, then injects
    /// the CAs: what cert-manager and cainjector do after an apply.
    pub fn reconcile(&mut self, cluster: &Cluster, namespace: &str) {
        let client = cluster.client();
        let certificates: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            namespace,
            &resource("Certificate", "certificates"),
        );
        let issuers: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), namespace, &resource("Issuer", "issuers"));
        let list = cluster
            .block(certificates.list(&ListParams::default()))
            .expect("listing Certificates");
        // The CA first: the serving Certificate's Issuer needs its Secret.
        let mut list = list.items;
        list.sort_by_key(|c| !c.data["spec"]["isCA"].as_bool().unwrap_or(false));
        for certificate in &list {
            self.issue(cluster, namespace, certificate, &issuers);
        }
        self.inject(cluster, &certificates);
    }

    fn issue(
        &mut self,
        cluster: &Cluster,
        namespace: &str,
        certificate: &DynamicObject,
        issuers: &Api<DynamicObject>,
    ) {
        let spec = &certificate.data["spec"];
        let secret_name = spec["secretName"]
            .as_str()
            .expect("a Certificate's secretName");
        let key = format!("{namespace}/{secret_name}");
        let issuer_name = spec["issuerRef"]["name"]
            .as_str()
            .expect("a Certificate's issuerRef");
        let issuer = cluster
            .block(issuers.get(issuer_name))
            .expect("the Certificate's Issuer");
        let (cert, private, ca) = if issuer.data["spec"].get("selfSigned").is_some() {
            let name = spec["commonName"].as_str().unwrap_or(secret_name);
            let made = self.cas.entry(key.clone()).or_insert_with(|| Ca::new(name));
            (made.pem.clone(), made.key_pem.clone(), made.pem.clone())
        } else {
            let ca_secret = issuer.data["spec"]["ca"]["secretName"]
                .as_str()
                .expect("a CA Issuer's secretName");
            let signer = self
                .cas
                .get(&format!("{namespace}/{ca_secret}"))
                .unwrap_or_else(|| panic!("Issuer {issuer_name}: no CA in Secret {ca_secret}"));
            let names: Vec<&str> = spec["dnsNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let leaf = signer.leaf(&names);
            (leaf.cert, leaf.key, signer.pem.clone())
        };
        let api: Api<Secret> = Api::namespaced(cluster.client(), namespace);
        if cluster
            .block(api.get_opt(secret_name))
            .ok()
            .flatten()
            .is_some()
        {
            return;
        }
        let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": secret_name, "namespace": namespace,
                "annotations": {"cert-manager.io/certificate-name": certificate.metadata.name}},
            "data": {"tls.crt": b64(&cert), "tls.key": b64(&private), "ca.crt": b64(&ca)},
        });
        let params = PatchParams::apply("cert-manager-certificates-issuing").force();
        cluster
            .block(api.patch(secret_name, &params, &Patch::Apply(secret)))
            .unwrap_or_else(|e| panic!("writing Secret {key}: {e}"));
    }

    /// cainjector: the `ca.crt` of the Certificate's Secret into every
    /// webhook of each configuration that names it.
    fn inject(&self, cluster: &Cluster, certificates: &Api<DynamicObject>) {
        let api: Api<MutatingWebhookConfiguration> = Api::all(cluster.client());
        let list = cluster
            .block(api.list(&ListParams::default()))
            .expect("listing webhook configurations");
        for config in list {
            let annotations = config.metadata.annotations.clone().unwrap_or_default();
            let Some((namespace, name)) = annotations.get(INJECT).and_then(|v| v.split_once('/'))
            else {
                continue;
            };
            let Ok(certificate) = cluster.block(certificates.get(name)) else {
                continue;
            };
            let secret_name = certificate.data["spec"]["secretName"]
                .as_str()
                .unwrap_or_default();
            let secrets: Api<Secret> = Api::namespaced(cluster.client(), namespace);
            let Some(secret) = cluster.block(secrets.get_opt(secret_name)).ok().flatten() else {
                continue;
            };
            let ca = secret
                .data
                .unwrap_or_default()
                .get("ca.crt")
                .cloned()
                .expect("ca.crt");
            let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &ca.0);
            let webhooks: Vec<Value> = config
                .webhooks
                .iter()
                .flatten()
                .map(|w| json!({"name": w.name, "clientConfig": {"caBundle": b64}}))
                .collect();
            let patch = json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": config.metadata.name}, "webhooks": webhooks,
            });
            let config_name = config.metadata.name.clone().unwrap_or_default();
            let params = PatchParams::apply("cert-manager-cainjector").force();
            cluster
                .block(api.patch(&config_name, &params, &Patch::Apply(patch)))
                .unwrap_or_else(|e| panic!("injecting the CA into {config_name}: {e}"));
        }
    }
}
