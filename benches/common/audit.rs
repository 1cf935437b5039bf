//! The benchmarks against a real kube-apiserver (`mod kube_apiserver` of the
//! tests' harness in each): a second API server on the same etcd that audits
//! its requests, which requests a client made there by verb and resource, and
//! an admin client of the first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use crate::kube_apiserver::{ApiServer, ControlPlane};

/// An audit policy that logs every request's metadata once, when it is answered.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n- level: Metadata\n";

/// The requests in the audit log after line `from`, by `verb resource`: the
/// admin's only (the client's, not the API server's own); and the log's length
/// in whole lines: a last line without its newline is still being written, and
/// is read next time.
pub fn audited(log: &Path, from: usize) -> Result<(usize, BTreeMap<String, usize>)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut counts = BTreeMap::new();
    let lines: Vec<&str> = crate::requests::whole_lines(&text).collect();
    for line in &lines[from.min(lines.len())..] {
        let event: Value = serde_json::from_str(line)?;
        if event["user"]["username"] != "admin" {
            continue;
        }
        let resource = event["objectRef"]["resource"].as_str().unwrap_or("-");
        let verb = event["verb"].as_str().unwrap_or("-");
        *counts.entry(format!("{verb} {resource}")).or_insert(0) += 1;
    }
    Ok((lines.len(), counts))
}

/// A second API server of `plane`, ready, that writes every request into its
/// audit log in `dir`; the server and the log's path.
pub fn audited_api_server(plane: &ControlPlane, dir: &Path) -> Result<(ApiServer, PathBuf)> {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, AUDIT_POLICY)?;
    let audit = dir.join("audit.log");
    let server = plane.new_api_server(&[
        &format!("--audit-policy-file={}", policy.display()),
        &format!("--audit-log-path={}", audit.display()),
        "--audit-log-mode=blocking",
    ]);
    plane.start_ready(&server);
    Ok((server, audit))
}

/// A client of `plane`'s first API server as its admin, on `runtime`.
pub fn admin_client(
    plane: &ControlPlane,
    runtime: &tokio::runtime::Runtime,
) -> Result<kube::Client> {
    rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(&plane.admin_kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        anyhow::Ok(kube::Client::try_from(config)?)
    })
}
