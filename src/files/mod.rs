//! The fronts over manifest files: [`render`] (`render`, `render --diff`,
//! `check`, `post-render`) and [`validate`] (the `validate` command), with
//! what they share: reading manifests ([`manifests`]), unified diffs
//! ([`diff`]) and settings files.

pub mod diff;
pub mod manifests;
pub mod render;
pub mod validate;

use std::path::Path;

use crate::yaml::{self, Node};

/// The settings object of `--config FILE`; the error names the file.
pub fn read_config(path: &Path) -> Result<Node, String> {
    read_settings_file("--config", path)
}

/// Reads the YAML settings file `path` given as `source` (a flag, or an
/// environment variable); errors start with both.
pub fn read_settings_file(source: &str, path: &Path) -> Result<Node, String> {
    let at = format!("{source} {}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| format!("{at}: {e}"))?;
    yaml::parse_document(&text).map_err(|e| format!("{at}: not valid YAML: {e}"))
}
