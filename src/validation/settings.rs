//! The `Validation` function configuration: what validation checks, read
//! from a settings object's `spec` (or a ConfigMap's `data`) and from flags.

use crate::k8s::names::is_dns1123_label;
use crate::k8s::workload::WorkloadKind;
use crate::krm::function_config::{
    SettingsError, SettingsKind, bad, boolean, label, structured, text, workload_kinds,
};
use crate::yaml::{Map, Node};

/// The kind of the typed configuration object.
pub const KIND: &str = "Validation";

/// Every setting of the kind, in the order the docs list them.
pub const KEYS: &[&str] = &[
    "namespaceIsolation",
    "globalNamespaces",
    "workloadKinds",
    "defaultNamespace",
];

/// The namespaces whose NADs any pod may select under namespace isolation,
/// when the settings name none: OpenShift's, as its cluster-network-operator
/// configures Multus (`"globalNamespaces":
/// "default,openshift-multus,openshift-sriov-network-operator"`; newer
/// releases with OpenShift Virtualization add `openshift-cnv`). Upstream
/// Multus allows only `default` (`defaultNonIsolatedNamespace` in its
/// `pkg/types/conf.go`), and a `globalNamespaces` setting replaces that list
/// rather than adding to it, as it does here.
pub const DEFAULT_GLOBAL_NAMESPACES: &[&str] = &[
    "default",
    "openshift-multus",
    "openshift-sriov-network-operator",
];

/// What validation checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Whether pods may select NADs only in their own namespace and the global ones.
    pub namespace_isolation: bool,
    /// Namespaces whose NADs any pod may select under namespace isolation.
    pub global_namespaces: Vec<String>,
    /// Workload kinds beyond the built-in ones.
    pub workload_kinds: Vec<WorkloadKind>,
    /// The namespace of resources that have no `metadata.namespace`.
    pub default_namespace: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace_isolation: false,
            global_namespaces: DEFAULT_GLOBAL_NAMESPACES
                .iter()
                .map(|n| n.to_string())
                .collect(),
            workload_kinds: Vec::new(),
            default_namespace: None,
        }
    }
}

impl SettingsKind for Settings {
    const KIND: &'static str = KIND;
    const KEYS: &'static [&'static str] = KEYS;

    fn apply(&mut self, spec: &Map, from_config_map: bool) -> Result<(), SettingsError> {
        for (key, value) in &spec.entries {
            let key = key.as_str().unwrap_or_default();
            match key {
                "namespaceIsolation" => self.namespace_isolation = boolean(key, value)?,
                "globalNamespaces" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.global_namespaces = global_namespaces(key, &parsed)?;
                }
                "workloadKinds" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.workload_kinds = workload_kinds(key, &parsed)?;
                }
                "defaultNamespace" => self.default_namespace = Some(label(key, value)?),
                _ => {
                    return Err(SettingsError::UnknownKeys {
                        keys: vec![key.to_string()],
                        valid: KEYS,
                    });
                }
            }
        }
        Ok(())
    }
}

/// A list of namespace names, or one string of comma-separated names as
/// Multus's own `globalNamespaces` is written.
fn global_namespaces(key: &str, value: &Node) -> Result<Vec<String>, SettingsError> {
    let names: Vec<String> = if let Some(seq) = value.as_seq() {
        seq.items
            .iter()
            .map(|item| {
                item.as_text()
                    .map(str::to_string)
                    .ok_or_else(|| bad(key, "must be a list of namespace names"))
            })
            .collect::<Result<_, _>>()?
    } else if value.is_null() {
        Vec::new()
    } else {
        text(key, value)?
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    if let Some(name) = names.iter().find(|n| !is_dns1123_label(n)) {
        return Err(bad(key, format!("{name:?} is not a namespace name")));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(src: &str) -> Result<Settings, SettingsError> {
        crate::krm::function_config::read(src)
    }

    #[test]
    fn settings_forms_and_errors() {
        let typed = read("apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nmetadata: {name: v}\nspec:\n  namespaceIsolation: true\n  globalNamespaces: [default, shared]\n  defaultNamespace: demo\n")
        .unwrap();
        let cm = read("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: v}\ndata:\n  namespaceIsolation: \"true\"\n  globalNamespaces: default, shared\n  defaultNamespace: demo\n")
        .unwrap();
        assert_eq!(typed, cm);
        assert!(typed.namespace_isolation);
        assert_eq!(typed.global_namespaces, ["default", "shared"]);
        let mut flags = Settings::default();
        flags
            .override_with([
                ("namespaceIsolation", "true"),
                ("globalNamespaces", "default,shared"),
                ("defaultNamespace", "demo"),
            ])
            .unwrap();
        assert_eq!(flags, typed);

        let spec = |body: &str| {
            read(&format!(
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: Validation\nspec:\n  {body}\n"
            ))
            .unwrap_err()
            .to_string()
        };
        for (body, want) in [
            (
                "namespaceIsolaton: true",
                "unknown setting \"namespaceIsolaton\" (did you mean namespaceIsolation?); valid settings are namespaceIsolation, globalNamespaces, workloadKinds, defaultNamespace",
            ),
            (
                "namespaceIsolaton: true\n  globalNamespace: [a]\n  colour: blue",
                "unknown settings \"namespaceIsolaton\" (did you mean namespaceIsolation?), \"globalNamespace\" (did you mean globalNamespaces?) and \"colour\"; valid settings are namespaceIsolation, globalNamespaces, workloadKinds, defaultNamespace",
            ),
            (
                "namespaceIsolation: yes",
                "setting namespaceIsolation: must be true or false",
            ),
            (
                "globalNamespaces: [Default]",
                "setting globalNamespaces: \"Default\" is not a namespace name",
            ),
            (
                "globalNamespaces: [{a: b}]",
                "setting globalNamespaces: must be a list of namespace names",
            ),
            (
                "defaultNamespace: [a]",
                "setting defaultNamespace: must be a string, not a sequence",
            ),
        ] {
            assert_eq!(spec(body), want, "{body}");
        }
        let err = read("apiVersion: v1\nkind: Secret\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "functionConfig must be a Validation (multus.linkerd.io/v1alpha1) or a ConfigMap, not Secret (v1)"
        );
    }
}
