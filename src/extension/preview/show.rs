//! What the preview computes without the cluster: the NAD config of the new ConfigMap's file,
//! the hash each namespace's NAD will hold once the controller has written it, and the text
//! printed.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::extension::check::snapshot::{Meta, Nad};
use crate::linkerd_cni::cluster::{self, Action, LiveNad, needs_nad};
use crate::linkerd_cni::cni_config::CONFIG_MAP_NAME;
use crate::linkerd_cni::restarts::{EVICT_ANNOTATION, OPT_IN_ANNOTATION, Preview};
use crate::linkerd_cni::rollout::config_hash;
use crate::linkerd_cni::settings::Settings;
use crate::yaml::{Node, parse_stream};

/// The NAD config text the controller would copy from the ConfigMap in `text` (the one named
/// `linkerd-cni-config`, or the only ConfigMap of the file), or why there is none.
pub fn config_text(text: &str, settings: &Settings) -> Result<String, String> {
    let documents = parse_stream(text).map_err(|e| format!("not YAML: {e}"))?;
    let config_maps: Vec<&Node> = (documents.iter())
        .filter(|d| d.get_path(&["kind"]).and_then(|k| k.as_str()) == Some("ConfigMap"))
        .collect();
    let named = |d: &&Node| {
        d.get_path(&["metadata", "name"]).and_then(|n| n.as_str()) == Some(CONFIG_MAP_NAME)
    };
    let config_map = match config_maps.iter().copied().find(named) {
        Some(found) => found,
        None if config_maps.len() == 1 => config_maps[0],
        None => {
            return Err(format!(
                "holds no ConfigMap {CONFIG_MAP_NAME} (the Linkerd-CNI ConfigMap, as Linkerd's CNI chart renders it): give its YAML, e.g. helm template linkerd2-cni ... or kubectl get configmap -n linkerd-cni {CONFIG_MAP_NAME} -o yaml with your edit"
            ));
        }
    };
    let mut data = BTreeMap::new();
    for (key, value) in (config_map.get_path(&["data"]).and_then(|d| d.as_map()))
        .map(|m| m.entries.as_slice())
        .unwrap_or_default()
    {
        let (Some(key), Some(value)) = (key.as_text(), value.as_text()) else {
            return Err(format!(
                "ConfigMap {CONFIG_MAP_NAME}: data.{} is not a string; quote it",
                key.as_text().unwrap_or("?")
            ));
        };
        data.insert(key.to_string(), value.to_string());
    }
    cluster::config_text(Some(&data), settings)
        .map_err(|e| format!("ConfigMap {CONFIG_MAP_NAME}: {e}"))
}

/// The namespaces whose NAD the controller writes with the new config (made or changed),
/// and the hash of the config of every namespace's NAD once it has: the new `hash` where the
/// controller's NAD is (or will be), the NAD's own where Git or another writer holds it.
pub fn nad_hashes(
    namespaces: &[Meta],
    nads: &BTreeMap<String, Nad>,
    settings: &Settings,
    text: &str,
) -> (Vec<String>, BTreeMap<String, String>) {
    let (digest, hash) = (cluster::config_digest(text), config_hash(text));
    let mut written = Vec::new();
    let mut hashes = BTreeMap::new();
    for namespace in namespaces {
        let nad = nads.get(&namespace.name);
        let digests = nad.map(|n| n.config.as_deref().map(cluster::config_digest));
        let live = nad.zip(digests.as_ref()).map(|(nad, digest)| LiveNad {
            maker: nad.maker,
            config: digest.as_deref(),
            // Relabelling an earlier release's NAD changes no config: nothing to preview.
            legacy: false,
        });
        let needed = needs_nad(&namespace.name, &namespace.annotations, settings);
        let terminating = namespace.deletion_timestamp.is_some();
        let now = match cluster::decide(needed, terminating, live, Some(&digest)) {
            Action::Create | Action::Update => {
                written.push(namespace.name.clone());
                Some(hash.clone())
            }
            Action::Keep(_) => nad.and_then(|n| n.config.as_deref()).map(config_hash),
            Action::Delete => None,
        };
        if let Some(now) = now {
            hashes.insert(namespace.name.clone(), now);
        }
    }
    (written, hashes)
}

/// How the restarts are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// `--restart-concurrency`.
    pub concurrency: usize,
    /// `--restart-deadline`.
    pub deadline: Duration,
    /// Whether the controller runs with `--restart-stale-workloads`.
    pub on: bool,
}

/// The preview's text: the config, the NADs written, the restarts wave by wave, the
/// evictions, what is left to the user and what did not opt in.
pub fn text(file: &str, hash: &str, written: &[String], pacing: Pacing, p: &Preview) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!(
        "{file}: a Linkerd-CNI config of hash {hash}; the NAD controller writes it into the NAD of {} namespace(s){}",
        written.len(),
        match written.is_empty() {
            true => String::new(),
            false => format!(": {}", written.join(", ")),
        }
    ));
    if !pacing.on {
        line("the NAD controller runs without --restart-stale-workloads: it restarts and evicts nothing; what it would do with it follows".into());
    }
    let deadline = humantime::format_duration(pacing.deadline);
    match p.waves.is_empty() {
        true => line("restarts: none".into()),
        false => line(format!(
            "restarts, --restart-concurrency={} --restart-deadline={deadline}: each wave once the one before has rolled out, or its deadline has passed",
            pacing.concurrency
        )),
    }
    for (i, wave) in p.waves.iter().enumerate() {
        let keys: Vec<String> = wave.iter().map(ToString::to_string).collect();
        line(format!("  wave {}: {}", i + 1, keys.join(", ")));
    }
    if !p.evictions.is_empty() {
        line(format!(
            "evicted at once (their namespace is annotated {EVICT_ANNOTATION}=enabled):"
        ));
        for pod in &p.evictions {
            line(format!("  Pod {pod}"));
        }
    }
    if !p.left.is_empty() {
        line("left to you (each reported by a StaleConfig Event):".into());
        for (subject, why) in &p.left {
            line(format!("  {subject}: {why}"));
        }
    }
    if !p.unopted.is_empty() {
        line(format!(
            "not opted in, neither restarted nor reported (annotate the pod template or the namespace {OPT_IN_ANNOTATION}=enabled, or restart them yourself):"
        ));
        for key in &p.unopted {
            line(format!("  {key}"));
        }
    }
    line("nothing was changed".into());
    out
}

#[cfg(test)]
#[path = "show_tests.rs"]
mod tests;
