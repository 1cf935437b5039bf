//! `--pre`: what `install` needs, for the options it will be run with (the
//! same flags, or `--config` file). Multus's NAD CRD, the Linkerd-CNI
//! ConfigMap (valid), the Linkerd control plane's namespace, the extension's
//! namespace free or its own, and the rights to make exactly the objects
//! `install` prints for those options ([`needs`], derived from them so it
//! cannot drift), asked of the API server with SelfSubjectAccessReviews.

use std::collections::HashMap;

use futures_util::StreamExt as _;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, Client};

use super::report::Check;
use super::snapshot::{ReadError, call, get_opt};
use super::wait::{Pass, Retry};
use super::{Options, PRE, capped, cni, extension};
use crate::extension::install::cluster::{self, NamespaceState};
use crate::extension::install::options::Options as InstallOptions;
use crate::extension::install::{self, Error as InstallError, certificates, packages};
use crate::yaml::Node;

/// How many reviews are in flight at once.
const CONCURRENT_REVIEWS: usize = 8;

/// One question to the authorizer: may the caller do `verb` on `resource`
/// (in `namespace`; named `name`)?
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ask {
    /// The verb.
    pub verb: String,
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource, plural.
    pub resource: String,
    /// The namespace; none for cluster-scoped objects and cluster-wide rights.
    pub namespace: Option<String>,
    /// The object's name; none for `create` and rights on every object.
    pub name: Option<String>,
}

/// One right `install` needs: held when every ask of one of `ways` is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The verb, as the user reads it.
    pub verb: String,
    /// The object, as the user reads it: `resource/name`, ` in namespace`.
    pub object: String,
    /// Each way to hold it: the asks that must all be allowed.
    pub ways: Vec<Vec<Ask>>,
}

/// The review asking `ask`.
pub fn review(ask: &Ask) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(ask.group.clone()),
                resource: Some(ask.resource.clone()),
                namespace: ask.namespace.clone(),
                name: ask.name.clone(),
                verb: Some(ask.verb.clone()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    }
}

/// `resource.group` as kubectl names it.
fn qualified(group: &str, resource: &str) -> String {
    match group {
        "" => resource.to_string(),
        _ => format!("{resource}.{group}"),
    }
}

fn text<'a>(object: &'a Node, path: &[&str]) -> Option<&'a str> {
    object.get_path(path).and_then(Node::as_str)
}

fn strings(node: Option<&Node>) -> Vec<&str> {
    node.and_then(Node::as_seq)
        .map(|s| s.items.iter().filter_map(Node::as_str).collect())
        .unwrap_or_default()
}

/// The rights `install` needs for `options`, from the objects it prints:
/// `create`, `get` and `patch` of each (what `kubectl apply`, client- or
/// server-side, does, and what `install` reads of its namespace and Secret);
/// for each Role and ClusterRole, `escalate` on it or every right it grants;
/// for each binding, `bind` on the role it names or every right that role
/// grants where the binding grants it.
pub fn needs(options: &InstallOptions) -> anyhow::Result<Vec<Need>> {
    let placeholder = certificates::Certificates {
        cert: String::new(),
        key: String::new(),
        ca_bundle: String::new(),
    };
    let generated = options.certs == install::options::Certs::Generate;
    let callers = install::callers::Callers::unread(options);
    let objects = install::objects(options, generated.then_some(&placeholder), &callers)?;
    let mut needs = Vec::new();
    for object in &objects {
        let (Some(api_version), Some(kind), Some(name)) = (
            text(object, &["apiVersion"]),
            text(object, &["kind"]),
            text(object, &["metadata", "name"]),
        ) else {
            anyhow::bail!("an object without apiVersion, kind or name: {object:?}");
        };
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        let resource = packages::plural(kind);
        let namespace = text(object, &["metadata", "namespace"]).map(str::to_string);
        let at = namespace
            .as_ref()
            .map(|ns| format!(" in {ns}"))
            .unwrap_or_default();
        let display = format!("{}/{name}{at}", qualified(group, &resource));
        for verb in ["create", "get", "patch"] {
            let ask = Ask {
                verb: verb.into(),
                group: group.into(),
                resource: resource.clone(),
                namespace: namespace.clone(),
                name: (verb != "create").then(|| name.to_string()),
            };
            needs.push(Need {
                verb: verb.into(),
                object: display.clone(),
                ways: vec![vec![ask]],
            });
        }
        match kind {
            "ClusterRole" | "Role" => {
                let on = Ask {
                    verb: "escalate".into(),
                    group: group.into(),
                    resource: resource.clone(),
                    namespace: namespace.clone(),
                    name: Some(name.into()),
                };
                let granted = rights(object, namespace.as_deref());
                needs.push(Need {
                    verb: "escalate".into(),
                    object: display.clone(),
                    ways: vec![vec![on], granted],
                });
            }
            "ClusterRoleBinding" | "RoleBinding" => {
                let role_kind = text(object, &["roleRef", "kind"]).unwrap_or_default();
                let role_name = text(object, &["roleRef", "name"]).unwrap_or_default();
                let role_namespace = match role_kind {
                    "Role" => namespace.clone(),
                    _ => None,
                };
                let role = objects.iter().find(|o| {
                    text(o, &["kind"]) == Some(role_kind)
                        && text(o, &["metadata", "name"]) == Some(role_name)
                        && text(o, &["metadata", "namespace"]) == role_namespace.as_deref()
                });
                let role_resource = packages::plural(role_kind);
                let on = Ask {
                    verb: "bind".into(),
                    group: "rbac.authorization.k8s.io".into(),
                    resource: role_resource.clone(),
                    namespace: role_namespace.clone(),
                    name: Some(role_name.into()),
                };
                let mut ways = vec![vec![on]];
                if let Some(role) = role {
                    ways.push(rights(role, namespace.as_deref()));
                }
                let at = role_namespace
                    .map(|ns| format!(" in {ns}"))
                    .unwrap_or_default();
                needs.push(Need {
                    verb: "bind".into(),
                    object: format!(
                        "{}/{role_name}{at}",
                        qualified("rbac.authorization.k8s.io", &role_resource)
                    ),
                    ways,
                });
            }
            _ => {}
        }
    }
    Ok(needs)
}

/// Every right the rules of `role` grant, in `namespace` (none: cluster-wide).
fn rights(role: &Node, namespace: Option<&str>) -> Vec<Ask> {
    let mut asks = Vec::new();
    let rules = role
        .get_path(&["rules"])
        .and_then(Node::as_seq)
        .map(|s| s.items.as_slice())
        .unwrap_or_default();
    for rule in rules {
        let names = strings(rule.get_path(&["resourceNames"]));
        let names: Vec<Option<&str>> = match names.is_empty() {
            true => vec![None],
            false => names.into_iter().map(Some).collect(),
        };
        for group in strings(rule.get_path(&["apiGroups"])) {
            for resource in strings(rule.get_path(&["resources"])) {
                for verb in strings(rule.get_path(&["verbs"])) {
                    for name in &names {
                        asks.push(Ask {
                            verb: verb.into(),
                            group: group.into(),
                            resource: resource.into(),
                            namespace: namespace.map(str::to_string),
                            name: name.map(str::to_string),
                        });
                    }
                }
            }
        }
    }
    asks
}

/// The needs not held, each `verb,verb object`, the verbs of one object together.
pub fn denied(needs: &[Need], allowed: &HashMap<Ask, bool>) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for need in needs {
        let held = need
            .ways
            .iter()
            .any(|way| way.iter().all(|ask| allowed.get(ask) == Some(&true)));
        if held {
            continue;
        }
        match out.iter_mut().find(|(object, _)| *object == need.object) {
            Some((_, verbs)) => verbs.push(need.verb.clone()),
            None => out.push((need.object.clone(), vec![need.verb.clone()])),
        }
    }
    out.into_iter()
        .map(|(object, verbs)| format!("{} {object}", verbs.join(",")))
        .collect()
}

/// The `--pre` checks.
pub async fn check(client: &Client, options: &Options, pass: &mut Pass) {
    let (check, retry) = cni::crd_check(&cni::crd_served(client).await);
    pass.add(PRE, check, retry);
    let mut settings = extension::default_settings(options);
    if let Ok(install) = &options.install {
        settings.cni_namespace = install.cni_namespace.clone();
    }
    let data = cni::config_map(client, &settings).await;
    cni::config_map_checks(PRE, &data, &settings, pass);
    let ns = &options.linkerd_namespace;
    let description = "the Linkerd control plane's namespace exists";
    let api: Api<Namespace> = Api::all(client.clone());
    let (check, retry) = match get_opt(api.get(ns)).await {
        Ok(Some(_)) => (Check::success(description), Retry::No),
        Ok(None) => (
            Check::error(
                description,
                format!("Namespace {ns} not found"),
                "install Linkerd first (linkerd install --crds | kubectl apply -f -; linkerd install | kubectl apply -f -), or pass -L for its namespace",
            ),
            Retry::No,
        ),
        Err(e) => (
            extension::read_error(description, &format!("Namespace {ns}"), &e),
            Retry::Yes,
        ),
    };
    pass.add(PRE, check, retry);
    let install = match &options.install {
        Ok(install) => install,
        Err(e) => {
            let check = Check::error(
                "install's options are valid",
                e.clone(),
                "fix the flag or the --config file it names: check --pre takes install's",
            );
            return pass.add(PRE, check, Retry::No);
        }
    };
    namespace(client, install, pass).await;
    if install.restart_stale_workloads {
        policy_served(client, pass).await;
    }
    rights_check(client, install, pass).await;
}

/// With the restarts, the API server serves the ValidatingAdmissionPolicy that cuts their
/// rights (Kubernetes 1.30 or later).
async fn policy_served(client: &Client, pass: &mut Pass) {
    let description = "the API server serves ValidatingAdmissionPolicies (the restarts' policy)";
    let group = "admissionregistration.k8s.io/v1";
    let (check, retry) = match call(client.list_api_group_resources(group)).await {
        Ok(list) if list.resources.iter().any(|r| r.name == POLICIES) => {
            (Check::success(description), Retry::No)
        }
        Ok(_) => (
            Check::error(
                description,
                format!(
                    "the API server does not serve {group} {POLICIES}: Kubernetes 1.30 or later does"
                ),
                "upgrade the cluster to Kubernetes 1.30 or later, or install without --restart-stale-workloads",
            ),
            Retry::No,
        ),
        Err(e) => (extension::read_error(description, group, &e), Retry::Yes),
    };
    pass.add(PRE, check, retry);
}

/// The resource of the restarts' policy.
const POLICIES: &str = "validatingadmissionpolicies";

/// The extension's namespace is free, or the extension's own.
async fn namespace(client: &Client, install: &InstallOptions, pass: &mut Pass) {
    let description = "the extension's namespace does not exist or is linkerd-multus's own";
    let namespace = install.namespace.clone();
    let hint = "pass the namespace install will use (-n, as install's --namespace) that does not exist yet";
    let (check, retry) = match cluster::namespace(client, &namespace).await {
        Ok(NamespaceState::Absent | NamespaceState::Ours) => {
            (Check::success(description), Retry::No)
        }
        Ok(NamespaceState::Foreign) => (
            Check::error(
                description,
                InstallError::ForeignNamespace { namespace }.to_string(),
                hint,
            ),
            Retry::No,
        ),
        Ok(NamespaceState::Deleting) => (
            Check::error(
                description,
                InstallError::NamespaceDeleting {
                    namespace: namespace.clone(),
                }
                .to_string(),
                format!(
                    "wait until it is gone: kubectl wait --for=delete namespace/{namespace} --timeout=5m"
                ),
            ),
            Retry::Yes,
        ),
        Err(e) => (
            Check::error(
                description,
                format!("cannot read Namespace {namespace}: {e:#}"),
                "check the connection to the API server and your rights: kubectl auth can-i --list",
            ),
            Retry::Yes,
        ),
    };
    pass.add(PRE, check, retry);
}

/// Whether the caller may do each ask of `asks`, asked concurrently.
async fn ask_all(
    api: &Api<SelfSubjectAccessReview>,
    asks: Vec<Ask>,
    allowed: &mut HashMap<Ask, bool>,
) -> Result<(), ReadError> {
    let asks: Vec<Ask> = asks
        .into_iter()
        .filter(|a| !allowed.contains_key(a))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let answers: Vec<(Ask, Result<bool, ReadError>)> = futures_util::stream::iter(asks)
        .map(|ask| async move {
            let answer = call(api.create(&PostParams::default(), &review(&ask))).await;
            let ok = answer.map(|a| a.status.is_some_and(|s| s.allowed));
            (ask, ok)
        })
        .buffer_unordered(CONCURRENT_REVIEWS)
        .collect()
        .await;
    for (ask, answer) in answers {
        allowed.insert(ask, answer?);
    }
    Ok(())
}

async fn rights_check(client: &Client, install: &InstallOptions, pass: &mut Pass) {
    let description = "can create the extension's objects";
    let needs = match needs(install) {
        Ok(needs) => needs,
        Err(e) => {
            let check = Check::error(
                description,
                format!("the packages embedded in this binary: {e:#}"),
                "a defect of linkerd-multus: report it",
            );
            return pass.add(PRE, check, Retry::No);
        }
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut allowed = HashMap::new();
    // Each need's first way at once; the others (a role's rights) only where it is denied.
    let mut asks: Vec<Ask> = needs.iter().flat_map(|n| n.ways[0].clone()).collect();
    for way in 1.. {
        if let Err(e) = ask_all(&api, asks, &mut allowed).await {
            let check = extension::read_error(description, "a SelfSubjectAccessReview", &e);
            return pass.add(PRE, check, Retry::Yes);
        }
        asks = needs
            .iter()
            .filter(|n| {
                !n.ways[..way.min(n.ways.len())]
                    .iter()
                    .any(|w| w.iter().all(|a| allowed.get(a) == Some(&true)))
            })
            .filter_map(|n| n.ways.get(way).cloned())
            .flatten()
            .collect();
        if asks.is_empty() {
            break;
        }
    }
    let denied = denied(&needs, &allowed);
    let check = match denied.is_empty() {
        true => Check::success(description),
        false => Check::error(
            description,
            format!("you may not: {}", capped(&denied)),
            "install as a cluster administrator, or be granted these rights (kubectl auth can-i VERB RESOURCE/NAME -n NAMESPACE)",
        ),
    };
    pass.add(PRE, check, Retry::No);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(verb: &str, group: &str, resource: &str, ns: Option<&str>, name: Option<&str>) -> Ask {
        Ask {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
        }
    }

    /// Each object `install` prints for the options, by verb.
    fn objects_asked(options: &InstallOptions, verb: &str) -> Vec<String> {
        needs(options)
            .unwrap()
            .into_iter()
            .filter(|n| n.verb == verb)
            .map(|n| n.object)
            .collect()
    }

    #[test]
    fn the_defaults_ask_for_every_object_install_prints() {
        let options = InstallOptions::default();
        let ns = "linkerd-multus";
        assert_eq!(
            objects_asked(&options, "create"),
            [
                "namespaces/linkerd-multus".to_string(),
                format!("serviceaccounts/linkerd-multus-webhook in {ns}"),
                "clusterroles.rbac.authorization.k8s.io/linkerd-multus-webhook".into(),
                "clusterrolebindings.rbac.authorization.k8s.io/linkerd-multus-webhook".into(),
                format!("secrets/linkerd-multus-webhook-tls in {ns}"),
                format!("services/linkerd-multus-webhook in {ns}"),
                format!("services/linkerd-multus-webhook-metrics in {ns}"),
                format!("networkpolicies.networking.k8s.io/linkerd-multus-webhook in {ns}"),
                format!("poddisruptionbudgets.policy/linkerd-multus-webhook in {ns}"),
                format!("deployments.apps/linkerd-multus-webhook in {ns}"),
                "mutatingwebhookconfigurations.admissionregistration.k8s.io/linkerd-multus-webhook"
                    .into(),
            ]
        );
        assert_eq!(
            objects_asked(&options, "escalate"),
            ["clusterroles.rbac.authorization.k8s.io/linkerd-multus-webhook"]
        );
        assert_eq!(
            objects_asked(&options, "bind"),
            ["clusterroles.rbac.authorization.k8s.io/linkerd-multus-webhook"]
        );
    }

    #[test]
    fn the_parts_chosen_add_their_objects_where_they_go() {
        let options = InstallOptions {
            namespace: "mesh".into(),
            manage_nads: true,
            cni_namespace: "cni".into(),
            network_resources: true,
            certs: install::options::Certs::CertManager,
            ..InstallOptions::default()
        };
        let created = objects_asked(&options, "create");
        for want in [
            "namespaces/mesh",
            "roles.rbac.authorization.k8s.io/linkerd-multus-nad-controller in cni",
            "rolebindings.rbac.authorization.k8s.io/linkerd-multus-nad-controller in cni",
            "roles.rbac.authorization.k8s.io/linkerd-multus-nad-controller-events in default",
            "roles.rbac.authorization.k8s.io/linkerd-multus-nad-controller-lease in mesh",
            "configmaps/linkerd-multus-network-resources in mesh",
            "issuers.cert-manager.io/linkerd-multus-webhook-ca in mesh",
            "certificates.cert-manager.io/linkerd-multus-webhook in mesh",
        ] {
            assert!(
                created.iter().any(|c| c == want),
                "{want} not in {created:#?}"
            );
        }
        assert!(
            !created.iter().any(|c| c.starts_with("secrets/")),
            "{created:?}"
        );
        let bound = objects_asked(&options, "bind");
        assert!(
            bound.contains(
                &"roles.rbac.authorization.k8s.io/linkerd-multus-nad-controller-events in default"
                    .to_string()
            ),
            "{bound:?}"
        );
    }

    #[test]
    fn a_role_is_held_by_escalate_or_by_every_right_it_grants() {
        let options = InstallOptions::default();
        let needs = needs(&options).unwrap();
        let escalate = needs.iter().find(|n| n.verb == "escalate").unwrap();
        assert_eq!(
            escalate.ways[0],
            [ask(
                "escalate",
                "rbac.authorization.k8s.io",
                "clusterroles",
                None,
                Some("linkerd-multus-webhook")
            )]
        );
        let granted = &escalate.ways[1];
        assert_eq!(granted.len(), 6, "{granted:?}");
        assert!(granted.contains(&ask("watch", "", "namespaces", None, None)));
        let mut allowed: HashMap<Ask, bool> = needs
            .iter()
            .flat_map(|n| n.ways[0].iter().map(|a| (a.clone(), a.verb != "escalate")))
            .collect();
        assert_eq!(
            denied(&needs, &allowed),
            ["escalate clusterroles.rbac.authorization.k8s.io/linkerd-multus-webhook"]
        );
        allowed.extend(granted.iter().map(|a| (a.clone(), true)));
        assert_eq!(denied(&needs, &allowed), Vec::<String>::new());
        allowed.insert(ask("create", "", "namespaces", None, None), false);
        allowed.insert(
            ask("patch", "", "namespaces", None, Some("linkerd-multus")),
            false,
        );
        assert_eq!(
            denied(&needs, &allowed),
            ["create,patch namespaces/linkerd-multus"]
        );
    }

    #[test]
    fn reviews_carry_the_ask() {
        let asked = review(&ask("get", "apps", "deployments", Some("x"), Some("y")));
        let attributes = asked.spec.resource_attributes.unwrap();
        assert_eq!(
            (
                attributes.verb.as_deref(),
                attributes.group.as_deref(),
                attributes.resource.as_deref(),
                attributes.namespace.as_deref(),
                attributes.name.as_deref()
            ),
            (
                Some("get"),
                Some("apps"),
                Some("deployments"),
                Some("x"),
                Some("y")
            )
        );
        assert_eq!(qualified("apps", "deployments"), "deployments.apps");
        assert_eq!(qualified("", "secrets"), "secrets");
    }
}
