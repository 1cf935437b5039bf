//! The API server's audit log as the benchmarks against a real kube-apiserver
//! read it: which requests a client made, by verb and resource.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

/// An audit policy that logs every request's metadata once, when it is answered.
pub const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n- level: Metadata\n";

/// The requests in the audit log after line `from`, by `verb resource`: the
/// admin's only (the client's, not the API server's own); and the log's length.
pub fn audited(log: &Path, from: usize) -> Result<(usize, BTreeMap<String, usize>)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut counts = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
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
