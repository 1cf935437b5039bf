//! The CNI side: Multus's NetworkAttachmentDefinition CRD is served, and
//! the Linkerd-CNI ConfigMap is there and gives a NAD config by the rules
//! the NAD controller and `validate` apply ([`cluster::config_text`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use super::report::Check;
use super::snapshot::{ReadError, call, get_opt};
use super::wait::{Pass, Retry};
use crate::linkerd_cni::cluster;
use crate::linkerd_cni::cni_config::CONFIG_MAP_NAME;
use crate::linkerd_cni::settings::Settings;
use crate::multus::nad;

/// The description of the CRD check.
pub const CRD_DESCRIPTION: &str = "the NetworkAttachmentDefinition CRD is installed";

/// Whether the API server serves NetworkAttachmentDefinitions.
pub async fn crd_served(client: &Client) -> Result<bool, ReadError> {
    let resource = nad::api_resource();
    match call(client.list_api_group_resources(&resource.api_version)).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == resource.plural)),
        Err(e) if e.not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// The CRD's check.
pub fn crd_check(served: &Result<bool, ReadError>) -> (Check, Retry) {
    let resource = nad::api_resource();
    match served {
        Ok(true) => (Check::success(CRD_DESCRIPTION), Retry::No),
        Ok(false) => (
            Check::error(
                CRD_DESCRIPTION,
                format!(
                    "the API server does not serve {}/{}",
                    resource.api_version, resource.plural
                ),
                "install Multus, whose deployment installs the CRD network-attachment-definitions.k8s.cni.cncf.io",
            ),
            Retry::No,
        ),
        Err(e) => (
            Check::error(
                CRD_DESCRIPTION,
                format!("cannot read the API group {}: {e}", resource.api_version),
                "check the connection to the API server",
            ),
            Retry::Yes,
        ),
    }
}

/// The ConfigMap's `data`: `Ok(None)` when it does not exist.
pub async fn config_map(
    client: &Client,
    settings: &Settings,
) -> Result<Option<BTreeMap<String, String>>, ReadError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &settings.cni_namespace);
    Ok(get_opt(api.get(CONFIG_MAP_NAME))
        .await?
        .map(|cm| cm.data.unwrap_or_default()))
}

/// The ConfigMap's two checks in `category` (present, valid), and the NAD
/// config it gives when it is valid.
pub fn config_map_checks(
    category: &str,
    data: &Result<Option<BTreeMap<String, String>>, ReadError>,
    settings: &Settings,
    pass: &mut Pass,
) -> Option<String> {
    let at = format!("ConfigMap {}/{CONFIG_MAP_NAME}", settings.cni_namespace);
    let present = "the Linkerd-CNI ConfigMap exists";
    let data = match data {
        Err(e) => {
            let error = format!("cannot read {at}: {e}");
            let hint = format!(
                "check your rights: kubectl auth can-i get configmap/{CONFIG_MAP_NAME} -n {}",
                settings.cni_namespace
            );
            pass.add(category, Check::error(present, error, hint), Retry::Yes);
            return None;
        }
        Ok(None) => {
            let error = format!("{at} not found");
            let hint = format!(
                "install Linkerd-CNI (linkerd install-cni | kubectl apply -f -, or its Helm chart) in namespace {}",
                settings.cni_namespace
            );
            pass.add(category, Check::error(present, error, hint), Retry::No);
            return None;
        }
        Ok(Some(data)) => data,
    };
    pass.add(category, Check::success(present), Retry::No);
    let valid = "the Linkerd-CNI ConfigMap gives a valid NAD config";
    match cluster::config_text(Some(data), settings) {
        Ok(text) => {
            pass.add(category, Check::success(valid), Retry::No);
            Some(text)
        }
        Err(e) => {
            let hint = format!(
                "fix {at} (Linkerd's CNI chart writes it): kubectl -n {} edit configmap {CONFIG_MAP_NAME}",
                settings.cni_namespace
            );
            pass.add(
                category,
                Check::error(valid, format!("{at}: {e}"), hint),
                Retry::No,
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension::check::report::Outcome;

    #[test]
    fn the_config_map_is_checked_as_the_controller_checks_it() {
        let settings = Settings::default();
        let data = |config: &str| -> Result<Option<BTreeMap<String, String>>, ReadError> {
            Ok(Some(
                [("cni_network_config".to_string(), config.to_string())].into(),
            ))
        };
        for (input, want, config) in [
            (
                data(r#"{"name": "linkerd-cni", "type": "linkerd-cni"}"#),
                [Outcome::Success, Outcome::Success].as_slice(),
                true,
            ),
            (
                data(r#"{"name": "linkerd-cni", "type": "bridge"}"#),
                &[Outcome::Success, Outcome::Error],
                false,
            ),
            (Ok(None), &[Outcome::Error], false),
        ] {
            let mut pass = Pass::default();
            let got = config_map_checks("cni", &input, &settings, &mut pass);
            let results: Vec<Outcome> = pass.report.categories[0]
                .checks
                .iter()
                .map(|c| c.result)
                .collect();
            assert_eq!(results, want);
            assert_eq!(got.is_some(), config);
            assert!(!pass.retry);
        }
    }

    #[test]
    fn a_missing_crd_names_the_resource() {
        let (check, _) = crd_check(&Ok(false));
        assert_eq!(
            check.error.as_deref(),
            Some("the API server does not serve k8s.cni.cncf.io/v1/network-attachment-definitions")
        );
        assert_eq!(crd_check(&Ok(true)).0.result, Outcome::Success);
    }
}
