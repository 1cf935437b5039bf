//! The settings of the Linkerd-CNI rules: the `LinkerdMultus` kind (or a
//! ConfigMap), read from a `functionConfig`, a settings file, flags or
//! environment variables.

use std::collections::BTreeMap;

use ipnet::IpNet;

use crate::k8s::names::{is_dns1123_label, is_qualified_name};
use crate::k8s::workload::WorkloadKind;
use crate::krm::function_config::{
    SettingsError, SettingsKind, annotation_sets, bad, label, structured, text, workload_kinds,
};
use crate::linkerd_cni::rollout::ConfigRollout;
use crate::multus::nad::CNI_VERSIONS;
use crate::yaml::{Map, Node};

/// The kind of the typed settings object.
pub const KIND: &str = "LinkerdMultus";

/// Every settings key, in the order the docs list them.
pub const KEYS: &[&str] = &[
    "cniNamespace",
    "linkerdNamespace",
    "nadName",
    "cniKubeconfig",
    "cniVersion",
    "uidRangeAnnotation",
    "proxyUIDOffset",
    "namespaces",
    "workloadKinds",
    "defaultNamespace",
    "configRollout",
    "nadSyncWave",
    "skipSecondarySubnets",
    "clusterCIDRs",
    "protectedCIDRs",
];

/// What the function works with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Namespace of the Linkerd-CNI ConfigMap.
    pub cni_namespace: String,
    /// The Linkerd control-plane namespace.
    pub linkerd_namespace: String,
    /// Name of the NetworkAttachmentDefinition.
    pub nad_name: String,
    /// Kubeconfig path for the plugin; derived from the ConfigMap when unset.
    pub cni_kubeconfig: Option<String>,
    /// `cniVersion` added to NAD configs that have none.
    pub cni_version: String,
    /// Namespace annotation holding the OpenShift UID range.
    pub uid_range_annotation: String,
    /// Offset of the proxy UID in that range.
    pub proxy_uid_offset: u64,
    /// Annotations of namespaces whose Namespace object is not in the input.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Workload kinds beyond the built-in ones.
    pub workload_kinds: Vec<WorkloadKind>,
    /// The namespace of resources that have no `metadata.namespace`: the one
    /// `helm install -n`, Argo CD's destination or `kubectl apply -n` puts them in.
    pub default_namespace: Option<String>,
    /// Which attached pod templates carry the hash of their NAD config.
    pub config_rollout: ConfigRollout,
    /// Argo CD's sync wave for generated NADs (`argocd.argoproj.io/sync-wave`),
    /// so that Argo CD applies them before the workloads that select them.
    pub nad_sync_wave: Option<String>,
    /// Whether meshed pods skip the subnets of their secondary networks
    /// (`config.linkerd.io/skip-subnets`) where neither the pod nor its
    /// namespace says otherwise.
    pub skip_secondary_subnets: bool,
    /// The cluster's pod and service networks, which no skipped subnet may overlap.
    pub cluster_cidrs: Vec<IpNet>,
    /// Other networks whose traffic stays meshed (the nodes', load-balancer pools), which no
    /// skipped subnet may overlap either.
    pub protected_cidrs: Vec<IpNet>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cni_namespace: "linkerd-cni".into(),
            linkerd_namespace: "linkerd".into(),
            nad_name: "linkerd-cni".into(),
            cni_kubeconfig: None,
            cni_version: "0.3.0".into(),
            uid_range_annotation: "openshift.io/sa.scc.uid-range".into(),
            proxy_uid_offset: 2102,
            namespaces: BTreeMap::new(),
            workload_kinds: Vec::new(),
            default_namespace: None,
            config_rollout: ConfigRollout::Off,
            nad_sync_wave: None,
            skip_secondary_subnets: false,
            cluster_cidrs: Vec::new(),
            protected_cidrs: Vec::new(),
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
                "cniNamespace" => self.cni_namespace = label(key, value)?,
                "linkerdNamespace" => self.linkerd_namespace = label(key, value)?,
                "nadName" => self.nad_name = label(key, value)?,
                "cniKubeconfig" => self.cni_kubeconfig = Some(absolute_path(key, value)?),
                "cniVersion" => self.cni_version = cni_version(key, value)?,
                "uidRangeAnnotation" => self.uid_range_annotation = annotation_key(key, value)?,
                "proxyUIDOffset" => self.proxy_uid_offset = proxy_uid_offset(key, value)?,
                "namespaces" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.namespaces = namespaces(key, &parsed)?;
                }
                "workloadKinds" => {
                    let parsed = structured(key, value, from_config_map)?;
                    self.workload_kinds = workload_kinds(key, &parsed)?;
                }
                "defaultNamespace" => self.default_namespace = Some(label(key, value)?),
                "configRollout" => self.config_rollout = config_rollout(key, value)?,
                "nadSyncWave" => self.nad_sync_wave = Some(sync_wave(key, value)?),
                "skipSecondarySubnets" => self.skip_secondary_subnets = switch(key, value)?,
                "clusterCIDRs" => self.cluster_cidrs = cidrs(key, value, from_config_map)?,
                "protectedCIDRs" => self.protected_cidrs = cidrs(key, value, from_config_map)?,
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

fn absolute_path(key: &str, value: &Node) -> Result<String, SettingsError> {
    let path = text(key, value)?;
    if !path.starts_with('/') {
        return Err(bad(key, format!("{path:?} is not an absolute path")));
    }
    Ok(path)
}

fn cni_version(key: &str, value: &Node) -> Result<String, SettingsError> {
    let v = text(key, value)?;
    if !CNI_VERSIONS.contains(&v.as_str()) {
        return Err(bad(
            key,
            format!(
                "{v:?} is not a CNI spec version; valid: {}",
                CNI_VERSIONS.join(", ")
            ),
        ));
    }
    Ok(v)
}

fn annotation_key(key: &str, value: &Node) -> Result<String, SettingsError> {
    let v = text(key, value)?;
    if !is_qualified_name(&v) {
        return Err(bad(key, format!("{v:?} is not a valid annotation key")));
    }
    Ok(v)
}

fn proxy_uid_offset(key: &str, value: &Node) -> Result<u64, SettingsError> {
    let v = text(key, value)?;
    let offset = v.parse::<u32>().map_err(|_| {
        bad(
            key,
            format!("{v:?} is not a whole number from 0 to 4294967295"),
        )
    })?;
    Ok(offset.into())
}

fn config_rollout(key: &str, value: &Node) -> Result<ConfigRollout, SettingsError> {
    let v = text(key, value)?;
    ConfigRollout::parse(&v).ok_or_else(|| {
        bad(
            key,
            format!(
                "{v:?} is not a rollout mode; valid: {}",
                ConfigRollout::VALUES.join(", ")
            ),
        )
    })
}

fn sync_wave(key: &str, value: &Node) -> Result<String, SettingsError> {
    let v = text(key, value)?;
    if v.trim().parse::<i32>().is_err() || v.trim() != v {
        return Err(bad(
            key,
            format!(
                "{v:?} is not a whole number, as Argo CD's sync waves are (\"-1\" applies the NADs before wave 0)"
            ),
        ));
    }
    Ok(v)
}

/// `enabled` or `disabled`, as the opt-in annotations read.
fn switch(key: &str, value: &Node) -> Result<bool, SettingsError> {
    let v = text(key, value)?;
    crate::k8s::namespace::switch(&v)
        .ok_or_else(|| bad(key, format!("{v:?} is neither enabled nor disabled")))
}

/// A list of CIDRs: a YAML list, or one string of them split at commas (a ConfigMap's,
/// a flag's or a variable's); an empty string (flag or variable) is none, not a YAML error.
fn cidrs(key: &str, value: &Node, from_config_map: bool) -> Result<Vec<IpNet>, SettingsError> {
    if value.as_text().is_some_and(|t| t.trim().is_empty()) {
        return Ok(Vec::new());
    }
    let value = &structured(key, value, from_config_map)?;
    let what = "must be a list of CIDRs such as 10.244.0.0/16";
    let texts: Vec<&str> = match (value.as_seq(), value.as_text()) {
        (Some(list), _) => list
            .items
            .iter()
            .map(|item| item.as_text().ok_or_else(|| bad(key, what)))
            .collect::<Result<_, _>>()?,
        (None, Some(text)) => text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect(),
        _ => return Err(bad(key, what)),
    };
    let mut out: Vec<IpNet> = Vec::new();
    for text in texts {
        let net = text
            .trim()
            .parse::<IpNet>()
            .map_err(|_| bad(key, format!("{text:?} is not a CIDR such as 10.244.0.0/16")))?;
        if !out.contains(&net.trunc()) {
            out.push(net.trunc());
        }
    }
    Ok(out)
}

impl Settings {
    /// Settings that contradict each other, as one line naming both.
    pub fn conflict(&self) -> Option<String> {
        (self.skip_secondary_subnets && self.cluster_cidrs.is_empty()).then(|| {
            "skipSecondarySubnets is enabled but clusterCIDRs is not set: without the cluster's pod and service networks, a secondary network's subnet that overlaps them would take meshed traffic away from the proxy; set clusterCIDRs (for example 10.244.0.0/16,10.96.0.0/12)".to_string()
        })
    }
}

fn namespaces(
    key: &str,
    value: &Node,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, SettingsError> {
    annotation_sets(key, value, "namespace names", |name| {
        (!is_dns1123_label(name)).then(|| format!("{name:?} is not a namespace name"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(src: &str) -> Result<Settings, SettingsError> {
        crate::krm::function_config::read(src)
    }

    #[test]
    fn typed_and_config_map_forms_agree() {
        let typed = read(
            "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nmetadata: {name: x}\nspec:\n  cniNamespace: cni\n  proxyUIDOffset: 7\n  cniVersion: 1.0.0\n  configRollout: labelled\n  namespaces:\n    demo: {annotations: {linkerd.io/multus: enabled}}\n  workloadKinds:\n  - {apiVersion: argoproj.io/v1alpha1, kind: Rollout, podTemplatePath: /spec/template}\n",
        )
        .unwrap();
        let cm = read(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: function-input}\ndata:\n  cniNamespace: cni\n  proxyUIDOffset: \"7\"\n  cniVersion: 1.0.0\n  configRollout: labelled\n  namespaces: '{demo: {annotations: {linkerd.io/multus: enabled}}}'\n  workloadKinds: |\n    - apiVersion: argoproj.io/v1alpha1\n      kind: Rollout\n      podTemplatePath: /spec/template\n",
        )
        .unwrap();
        assert_eq!(typed, cm);
        assert_eq!(typed.cni_namespace, "cni");
        assert_eq!(typed.proxy_uid_offset, 7);
        assert_eq!(typed.namespaces["demo"]["linkerd.io/multus"], "enabled");
        assert_eq!(typed.workload_kinds.len(), 1);
        assert_eq!(typed.config_rollout, ConfigRollout::Labelled);
    }

    /// A list in the typed object, a list or a comma-separated string in a ConfigMap (and so
    /// in a flag or variable): the same networks, masked, each once; for the cluster's
    /// networks and the protected ones alike.
    #[test]
    fn cidr_list_forms_agree() {
        let want: Vec<IpNet> = ["10.244.0.0/16", "10.96.0.0/12", "fd00:10::/56"]
            .iter()
            .map(|n| n.parse().unwrap())
            .collect();
        type Field = fn(&Settings) -> &Vec<IpNet>;
        let cases: [(&str, Field); 2] = [
            ("clusterCIDRs", |s| &s.cluster_cidrs),
            ("protectedCIDRs", |s| &s.protected_cidrs),
        ];
        for (key, field) in cases {
            let typed = read(&format!(
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nspec:\n  {key}: [10.244.0.0/16, 10.96.0.1/12, fd00:10::/56]\n"
            ))
            .unwrap();
            assert_eq!(field(&typed), &want, "{key}");
            for data in [
                "10.244.0.0/16, 10.96.0.1/12,fd00:10::/56,10.244.0.0/16",
                "'[10.244.0.0/16, 10.96.0.0/12, fd00:10::/56]'",
            ] {
                let cm = read(&format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  {key}: {data}\n"
                ))
                .unwrap();
                assert_eq!(field(&cm), &want, "{key}: {data}");
            }
            let empty = read(&format!(
                "apiVersion: v1\nkind: ConfigMap\ndata:\n  {key}: ''\n"
            ))
            .unwrap();
            assert_eq!(field(&empty), &Vec::<IpNet>::new(), "{key}");
        }
    }

    /// skipSecondarySubnets needs the cluster's networks; the protected ones are optional.
    #[test]
    fn skipping_needs_the_cluster_networks_only() {
        let on = |cluster: &[&str], protected: &[&str]| Settings {
            skip_secondary_subnets: true,
            cluster_cidrs: cluster.iter().map(|n| n.parse().unwrap()).collect(),
            protected_cidrs: protected.iter().map(|n| n.parse().unwrap()).collect(),
            ..Settings::default()
        };
        assert_eq!(on(&["10.244.0.0/16"], &[]).conflict(), None);
        let conflict = on(&[], &["192.168.0.0/16"]).conflict().unwrap();
        assert!(
            conflict.starts_with("skipSecondarySubnets is enabled but clusterCIDRs is not set"),
            "{conflict}"
        );
    }

    #[test]
    fn config_rollout_values() {
        // A plain `off` is a YAML 1.1 boolean to some readers: the text is what counts.
        for (value, want) in [
            ("off", ConfigRollout::Off),
            ("\"off\"", ConfigRollout::Off),
            ("all", ConfigRollout::All),
            ("labelled", ConfigRollout::Labelled),
        ] {
            let typed = read(&format!(
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nspec:\n  configRollout: {value}\n"
            ))
            .unwrap();
            assert_eq!(typed.config_rollout, want, "{value}");
        }
        let mut settings = Settings::default();
        settings.override_with([("configRollout", "all")]).unwrap();
        assert_eq!(settings.config_rollout, ConfigRollout::All);
    }

    #[test]
    fn nad_sync_wave_is_a_whole_number() {
        for (value, want) in [
            ("\"-1\"", Some("-1")),
            ("-5", Some("-5")),
            ("\"0\"", Some("0")),
        ] {
            let typed = read(&format!(
                "apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nspec:\n  nadSyncWave: {value}\n"
            ))
            .unwrap();
            assert_eq!(typed.nad_sync_wave.as_deref(), want, "{value}");
        }
        assert_eq!(Settings::default().nad_sync_wave, None);
    }

    #[test]
    fn errors_name_the_key_and_the_choices() {
        let cm = |data: &str| {
            read(&format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  {data}\n"
            ))
        };
        let cases = [
            (
                "cniNamspace: x",
                "unknown setting \"cniNamspace\" (did you mean cniNamespace?); valid settings are cniNamespace,",
            ),
            (
                "nadNme: x\n  proxyUIDOffset: abc\n  nadname: y",
                "unknown settings \"nadNme\" (did you mean nadName?) and \"nadname\" (did you mean nadName?); valid settings are cniNamespace,",
            ),
            (
                "proxyUIDOffset: abc",
                "setting proxyUIDOffset: \"abc\" is not a whole number",
            ),
            (
                "proxyUIDOffset: \"-1\"",
                "setting proxyUIDOffset: \"-1\" is not a whole number",
            ),
            (
                "cniVersion: 9.9.9",
                "setting cniVersion: \"9.9.9\" is not a CNI spec version; valid: 0.1.0,",
            ),
            (
                "nadName: Linkerd_CNI",
                "setting nadName: \"Linkerd_CNI\" is not a DNS-1123 label",
            ),
            (
                "cniKubeconfig: etc/kc",
                "setting cniKubeconfig: \"etc/kc\" is not an absolute path",
            ),
            (
                "uidRangeAnnotation: 'a b'",
                "setting uidRangeAnnotation: \"a b\" is not a valid annotation key",
            ),
            (
                "configRollout: labeled",
                "setting configRollout: \"labeled\" is not a rollout mode; valid: off, all, labelled",
            ),
            (
                "configRollout: ''",
                "setting configRollout: \"\" is not a rollout mode; valid: off, all, labelled",
            ),
            (
                "nadSyncWave: first",
                "setting nadSyncWave: \"first\" is not a whole number, as Argo CD's sync waves are",
            ),
            ("namespaces: '[a'", "setting namespaces: is not valid YAML"),
            (
                "skipSecondarySubnets: \"true\"",
                "setting skipSecondarySubnets: \"true\" is neither enabled nor disabled",
            ),
            (
                "clusterCIDRs: 10.244.0.0/16,10.96.0.0",
                "setting clusterCIDRs: \"10.96.0.0\" is not a CIDR such as 10.244.0.0/16",
            ),
            (
                "clusterCIDRs: '{a: b}'",
                "setting clusterCIDRs: must be a list of CIDRs such as 10.244.0.0/16",
            ),
            (
                "protectedCIDRs: 192.168.0.0/16,192.168.1",
                "setting protectedCIDRs: \"192.168.1\" is not a CIDR such as 10.244.0.0/16",
            ),
            (
                "protectedCIDRs: '[[192.168.0.0/16]]'",
                "setting protectedCIDRs: must be a list of CIDRs such as 10.244.0.0/16",
            ),
            (
                "namespaces: '{Demo: {}}'",
                "setting namespaces: \"Demo\" is not a namespace name",
            ),
            (
                "namespaces: '{demo: {labels: {}}}'",
                "setting namespaces: demo: unknown field \"labels\"",
            ),
            (
                "workloadKinds: '[{apiVersion: apps/v1, kind: Deployment, podTemplatePath: /spec/template}]'",
                "setting workloadKinds: item 0: apps/Deployment is built in",
            ),
            (
                "workloadKinds: '[{apiVersion: x/v1, kind: K, podTemplatePath: spec}]'",
                "setting workloadKinds: item 0: podTemplatePath \"spec\" is not a JSON pointer",
            ),
            (
                "workloadKinds: '[{apiVersion: x/v1, kind: K}]'",
                "setting workloadKinds: item 0: podTemplatePath is required",
            ),
        ];
        for (data, want) in cases {
            let err = cm(data).unwrap_err().to_string();
            assert!(err.starts_with(want), "{data}: {err}");
        }
    }

    #[test]
    fn the_object_is_a_linkerd_multus_or_a_config_map() {
        let err = read("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "functionConfig must be a LinkerdMultus (multus.linkerd.io/v1alpha1) or a ConfigMap, not Secret (v1)"
        );
        let err = read("apiVersion: multus.linkerd.io/v1alpha1\nkind: LinkerdMultus\nnadName: x\n")
            .unwrap_err();
        assert!(err.to_string().contains("settings go under spec"), "{err}");
    }
}
