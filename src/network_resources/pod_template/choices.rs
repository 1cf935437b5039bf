//! What a pod template chooses for itself: the container that receives the
//! network resources, opting out of the rules, and devices that come through
//! Dynamic Resource Allocation claims rather than device plugins.

use std::collections::BTreeMap;

use super::{Applied, container_name, containers, present};
use crate::k8s::workload::template_annotations;
use crate::network_resources::error::Error;
use crate::network_resources::settings::Settings;
use crate::yaml::{Map, Node};

/// The pod-template annotation naming the container that receives the
/// network resources (default: the first container).
pub const CONTAINER_ANNOTATION: &str = "multus.linkerd.io/network-resources-container";

/// The pod-template annotation that opts a workload out of the rules
/// (`disabled`; `enabled` is the default).
pub const OPT_OUT_ANNOTATION: &str = "multus.linkerd.io/network-resources-injection";

/// What the template's annotations choose.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Choices<'a> {
    /// The container named by [`CONTAINER_ANNOTATION`].
    pub container: Option<&'a str>,
    /// Whether [`OPT_OUT_ANNOTATION`] is `disabled`.
    pub opted_out: bool,
}

/// Reads the choices of a pod template's annotations.
pub(super) fn choices(t: &Map) -> Result<Choices<'_>, Error> {
    let mut out = Choices::default();
    let Some(annotations) = template_annotations(t) else {
        return Ok(out);
    };
    let text = |annotation: &'static str| match present(annotations.get(annotation)) {
        None => Ok(None),
        Some(value) => value.as_str().map(Some).ok_or_else(|| Error::Annotation {
            annotation,
            message: format!("is {}, not a string", value.kind_name()),
        }),
    };
    out.opted_out = match text(OPT_OUT_ANNOTATION)?.map(str::trim) {
        None | Some("enabled") => false,
        Some("disabled") => true,
        Some(other) => {
            return Err(Error::Annotation {
                annotation: OPT_OUT_ANNOTATION,
                message: format!("{other:?} is not one of enabled, disabled"),
            });
        }
    };
    out.container = match text(CONTAINER_ANNOTATION)?.map(str::trim) {
        Some("") => {
            return Err(Error::Annotation {
                annotation: CONTAINER_ANNOTATION,
                message: "is empty: name a container of the pod template, or remove it".into(),
            });
        }
        name => name,
    };
    Ok(out)
}

/// Linkerd's proxy, which its injector puts first in a meshed pod (so that the
/// application starts once the proxy is ready): never the default receiver of
/// a NIC's device requests, which are the application's.
const LINKERD_PROXY: &str = "linkerd-proxy";

/// The index of the container that receives the resources: the one named,
/// else the first that is not Linkerd's proxy (the injector's first
/// container, whichever webhook ran first), else the first.
pub(super) fn target(spec: &Map, chosen: Option<&str>) -> Result<usize, Error> {
    let all = containers(spec);
    let Some(name) = chosen else {
        return Ok(all
            .iter()
            .position(|c| container_name(c) != LINKERD_PROXY)
            .unwrap_or(0));
    };
    all.iter()
        .position(|c| container_name(c) == name)
        .ok_or_else(|| Error::UnknownContainer {
            annotation: CONTAINER_ANNOTATION,
            name: name.to_string(),
            containers: all.iter().map(container_name).collect(),
        })
}

/// Takes out of `counts` the resources whose devices come through the pod's
/// `spec.resourceClaims` (all of them, or those `claimedResourceNames`
/// lists), with a warning naming them; none when the template has no claim.
pub(super) fn without_claimed(
    spec: Option<&Map>,
    settings: &Settings,
    counts: &mut BTreeMap<String, u64>,
    out: &mut Applied,
) -> Result<(), Error> {
    let claims = match spec.and_then(|s| present(s.get("resourceClaims"))) {
        None => return Ok(()),
        Some(Node::Seq(claims)) => claims,
        Some(other) => {
            return Err(Error::Shape(format!(
                "spec.resourceClaims is {}, not a list",
                other.kind_name()
            )));
        }
    };
    if claims.items.is_empty() {
        return Ok(());
    }
    let claimed: Vec<String> = counts
        .keys()
        .filter(|r| {
            settings
                .claimed_resource_names
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == *r))
        })
        .cloned()
        .collect();
    if claimed.is_empty() {
        return Ok(());
    }
    for r in &claimed {
        counts.remove(r);
    }
    out.warnings.push(format!(
        "the pod template has spec.resourceClaims: no device-plugin request for {}, whose devices are taken to come through its claims (claimedResourceNames)",
        claimed.join(", ")
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_document;

    fn template(src: &str) -> Map {
        parse_document(src).unwrap().as_map().unwrap().clone()
    }

    /// Annotations, and the container and opt-out read, or a part of the error.
    type ChoiceCase = (
        &'static str,
        Result<(Option<&'static str>, bool), &'static str>,
    );

    /// The template's spec, `claimedResourceNames`, the resources left to request.
    type ClaimCase = (
        &'static str,
        Option<&'static [&'static str]>,
        &'static [&'static str],
    );

    #[test]
    fn reads_the_annotations() {
        let cases: [ChoiceCase; 7] = [
            ("{}", Ok((None, false))),
            (
                "{network-resources-container: ' app '}",
                Ok((Some("app"), false)),
            ),
            ("{network-resources-injection: disabled}", Ok((None, true))),
            ("{network-resources-injection: enabled}", Ok((None, false))),
            (
                "{network-resources-injection: 'off'}",
                Err("\"off\" is not one of enabled, disabled"),
            ),
            ("{network-resources-container: ''}", Err("is empty")),
            (
                "{network-resources-container: [a]}",
                Err("is a sequence, not a string"),
            ),
        ];
        for (annotations, want) in cases {
            let annotations = annotations.replace("network-", "multus.linkerd.io/network-");
            let t = template(&format!("metadata: {{annotations: {annotations}}}"));
            let got = choices(&t)
                .map(|c| (c.container, c.opted_out))
                .map_err(|e| e.to_string());
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{annotations}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{annotations}: {got}"),
                (got, _) => panic!("{annotations}: {got:?}"),
            }
        }
    }

    #[test]
    fn finds_the_target_container() {
        let spec = template("containers: [{name: sidecar}, {name: app}]");
        assert_eq!(target(&spec, None), Ok(0));
        assert_eq!(target(&spec, Some("app")), Ok(1));
        for (containers, want) in [
            ("[{name: linkerd-proxy}, {name: app}]", 1),
            ("[{name: app}, {name: linkerd-proxy}]", 0),
            ("[{name: linkerd-proxy}]", 0),
            ("[]", 0),
        ] {
            let spec = template(&format!("containers: {containers}"));
            assert_eq!(target(&spec, None), Ok(want), "{containers}");
        }
        let meshed = template("containers: [{name: linkerd-proxy}, {name: app}]");
        assert_eq!(target(&meshed, Some("linkerd-proxy")), Ok(0));
        assert_eq!(
            target(&spec, Some("compute")).unwrap_err().to_string(),
            "annotation multus.linkerd.io/network-resources-container names container \"compute\", which the pod template does not have (its containers: sidecar, app)"
        );
    }

    #[test]
    fn claimed_resources_by_setting() {
        let counts = BTreeMap::from([("r/a".to_string(), 2), ("r/b".to_string(), 1)]);
        let cases: [ClaimCase; 5] = [
            ("containers: []", None, &["r/a", "r/b"]),
            ("resourceClaims: []", None, &["r/a", "r/b"]),
            ("resourceClaims: [{name: vf}]", None, &[]),
            ("resourceClaims: [{name: vf}]", Some(&["r/b"]), &["r/a"]),
            ("resourceClaims: [{name: gpu}]", Some(&[]), &["r/a", "r/b"]),
        ];
        for (spec, claimed, want) in cases {
            let settings = Settings {
                claimed_resource_names: claimed
                    .map(|names| names.iter().map(|n| n.to_string()).collect()),
                ..Settings::default()
            };
            let mut left = counts.clone();
            let mut out = Applied::default();
            let spec = template(spec);
            without_claimed(Some(&spec), &settings, &mut left, &mut out).unwrap();
            let left: Vec<&str> = left.keys().map(String::as_str).collect();
            assert_eq!(left, want, "{spec:?} {claimed:?}");
            assert_eq!(
                out.warnings.len(),
                usize::from(want.len() < 2),
                "{claimed:?}"
            );
        }
    }
}
