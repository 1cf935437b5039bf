//! The answers to reviews: the missing-NAD check, the patch, what the webhook
//! cannot act on and the namespace it reads.

use super::*;

/// The denial of a pod whose namespace has no Linkerd-CNI NAD.
const DENY: &str = "linkerd-multus: namespace demo has no NetworkAttachmentDefinition linkerd-cni, which Multus needs to start this pod with Linkerd-CNI: render the NAD from Git (linkerd-multus generates it for namespaces annotated linkerd.io/multus: enabled), or run the NAD controller so that it makes it (linkerd multus install --manage-nads)";
/// The warning with `--missing-nad attach` (where the NAD controller runs).
const ATTACH: &str = "linkerd-multus: namespace demo has no NetworkAttachmentDefinition linkerd-cni yet: the NAD controller makes it where it runs (linkerd-multus controller); until it exists the pod's sandbox fails and kubelet retries it (--missing-nad attach)";

/// A missing-NAD case: its name, whether the NAD is there, the policy, the
/// outcome and the warnings.
type NadCase = (
    &'static str,
    bool,
    MissingNad,
    Outcome,
    &'static [&'static str],
);

/// The missing-NAD cases.
const NAD_CASES: &[NadCase] = &[
    (
        "present, deny",
        true,
        MissingNad::Deny,
        Outcome::Patched,
        &[],
    ),
    (
        "present, attach",
        true,
        MissingNad::Attach,
        Outcome::Patched,
        &[],
    ),
    (
        "missing, deny",
        false,
        MissingNad::Deny,
        Outcome::Denied,
        &[],
    ),
    (
        "missing, attach",
        false,
        MissingNad::Attach,
        Outcome::Patched,
        &[ATTACH],
    ),
    (
        "missing, ignore",
        false,
        MissingNad::Ignore,
        Outcome::Patched,
        &[],
    ),
];

/// The missing-NAD check: what each policy answers for a pod the rules
/// attach, with and without the NAD in its namespace.
#[test]
fn a_missing_nad_is_denied_or_warned_of_as_the_policy_says() {
    let ns = enabled_namespace();
    let with_nad = crate::network_resources::nad_table(&[("demo", "linkerd-cni", &[])]);
    let without = crate::network_resources::nad_table(&[("demo", "other", &[])]);
    for &(name, present, policy, outcome, warnings) in NAD_CASES {
        let request = parse(CREATE.as_bytes()).unwrap();
        let nads: &dyn NadConfigs = if present { &with_nad } else { &without };
        let check = NadCheck { nads, policy };
        let answer = answer(
            &request,
            &ns,
            &Settings::default(),
            None,
            Some(&check),
            OnError::Allow,
        );
        assert_eq!(answer.outcome, outcome, "{name}");
        let response = response(&answer);
        if outcome == Outcome::Denied {
            assert_eq!(response["allowed"], false, "{name}");
            assert_eq!(response["status"]["message"], DENY, "{name}");
        } else {
            let got: Vec<&str> = response["warnings"]
                .as_array()
                .map(|w| w.iter().map(|w| w.as_str().unwrap()).collect())
                .unwrap_or_default();
            assert_eq!(got, warnings, "{name}");
        }
    }
}

/// A pod the rules do not attach is never checked.
#[test]
fn a_pod_the_rules_do_not_attach_is_not_checked() {
    let without = crate::network_resources::nad_table(&[("demo", "other", &[])]);
    let body = review("CREATE", "pods", json!({"metadata": {"name": "p"}}));
    let request = parse(body.as_bytes()).unwrap();
    let empty = BTreeMap::new();
    let check = NadCheck {
        nads: &without,
        policy: MissingNad::Deny,
    };
    let answer = answer(
        &request,
        &empty,
        &Settings::default(),
        None,
        Some(&check),
        OnError::Allow,
    );
    assert_eq!(answer.outcome, Outcome::Unchanged);
}

#[test]
fn the_captured_request_gets_the_minimal_patch() {
    let ns = enabled_namespace();
    for fixture in [CREATE, DRY_RUN] {
        let request = parse(fixture.as_bytes()).unwrap();
        let answer = answer(
            &request,
            &ns,
            &Settings::default(),
            None,
            None,
            OnError::Allow,
        );
        assert_eq!(answer.outcome, Outcome::Patched);
        let response = response(&answer);
        assert_eq!(response["uid"], *request.uid);
        assert_eq!(response["allowed"], true);
        assert_eq!(response["patchType"], "JSONPatch");
        assert_eq!(
            patch_of(&response),
            json!([
                {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created"}
            ])
        );
    }
}

#[test]
fn a_pod_left_alone_gets_no_patch() {
    let request = parse(CREATE.as_bytes()).unwrap();
    let empty = BTreeMap::new();
    let answer = answer(
        &request,
        &empty,
        &Settings::default(),
        None,
        None,
        OnError::Allow,
    );
    assert_eq!(answer.outcome, Outcome::Unchanged);
    let response = response(&answer);
    assert_eq!(response, json!({"uid": *request.uid, "allowed": true}));
}

#[test]
fn what_the_webhook_cannot_act_on() {
    let ns = enabled_namespace();
    let bad_networks =
        json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "a,,b"}}});
    let cases: Vec<(&str, String, &dyn Lookup, OnError, Outcome, &str)> = vec![
        (
            "not pods",
            review("CREATE", "services", json!({})),
            &ns,
            OnError::Deny,
            Outcome::Warned,
            "/services is not pods",
        ),
        (
            "delete",
            review("DELETE", "pods", json!({})),
            &ns,
            OnError::Deny,
            Outcome::Warned,
            "operation \"DELETE\"",
        ),
        (
            "bad annotation, allow",
            review("CREATE", "pods", bad_networks.clone()),
            &ns,
            OnError::Allow,
            Outcome::Warned,
            "annotation k8s.v1.cni.cncf.io/networks: item 2",
        ),
        (
            "bad annotation, deny",
            review("CREATE", "pods", bad_networks),
            &ns,
            OnError::Deny,
            Outcome::Denied,
            "annotation k8s.v1.cni.cncf.io/networks: item 2",
        ),
        (
            "annotations not a map",
            review("UPDATE", "pods", json!({"metadata": {"annotations": "x"}})),
            &ns,
            OnError::Allow,
            Outcome::Warned,
            "metadata.annotations is not a mapping",
        ),
    ];
    for (name, body, ns, on_error, outcome, message) in cases {
        let request = parse(body.as_bytes()).unwrap();
        let answer = answer(&request, ns, &Settings::default(), None, None, on_error);
        assert_eq!(answer.outcome, outcome, "{name}");
        let response = response(&answer);
        assert_eq!(response["uid"], "u1", "{name}");
        let text = if outcome == Outcome::Denied {
            assert_eq!(response["allowed"], false, "{name}");
            assert_eq!(response["status"]["code"], 403, "{name}");
            response["status"]["message"].as_str().unwrap().to_string()
        } else {
            assert_eq!(response["allowed"], true, "{name}");
            response["warnings"][0].as_str().unwrap().to_string()
        };
        assert!(text.starts_with(PREFIX), "{name}: {text}");
        assert!(text.contains(message), "{name}: {text}");
    }
}

/// The webhook reads a namespace only for the reviews the rules act on, and
/// answers a pod it cannot decide on as `--on-error` says.
#[test]
fn reviews_that_need_the_namespace_and_the_answer_without_it() {
    for (name, body, acts) in [
        ("pod create", review("CREATE", "pods", json!({})), true),
        ("pod update", review("UPDATE", "pods", json!({})), true),
        ("not pods", review("CREATE", "services", json!({})), false),
        ("delete", review("DELETE", "pods", json!({})), false),
        (
            "no object",
            json!({"apiVersion": API_VERSION, "kind": KIND, "request": {"uid": "u1", "resource": {"resource": "pods"}, "operation": "CREATE"}}).to_string(),
            false,
        ),
    ] {
        assert_eq!(acts_on(&parse(body.as_bytes()).unwrap()), acts, "{name}");
    }
    let body = review("CREATE", "pods", json!({}));
    let request = parse(body.as_bytes()).unwrap();
    let why = "namespace demo could not be read: timed out".to_string();
    let allowed = unavailable(&request, OnError::Allow, why.clone());
    assert_eq!(allowed.outcome, Outcome::Warned);
    let allowed = response(&allowed);
    assert_eq!(allowed["allowed"], true);
    assert!(allowed.get("patch").is_none());
    assert_eq!(allowed["warnings"], json!([format!("{PREFIX}{why}")]));
    let denied = unavailable(&request, OnError::Deny, why.clone());
    assert_eq!(denied.outcome, Outcome::Denied);
    let denied = response(&denied);
    assert_eq!(denied["allowed"], false);
    assert_eq!(denied["status"]["message"], format!("{PREFIX}{why}"));
}

#[test]
fn updates_detach_what_the_webhook_added() {
    let pod = json!({"metadata": {"annotations": {
        "multus.linkerd.io/owned": "network=created",
        "k8s.v1.cni.cncf.io/networks": "linkerd-cni",
        "linkerd.io/multus": "disabled"
    }}});
    let ns = enabled_namespace();
    let answer = answer(
        &parse(review("UPDATE", "pods", pod).as_bytes()).unwrap(),
        &ns,
        &Settings::default(),
        None,
        None,
        OnError::Allow,
    );
    assert_eq!(answer.changes[..], [Change::Detached]);
    assert_eq!(
        patch_of(&response(&answer)),
        json!([
            {"op": "remove", "path": "/metadata/annotations/multus.linkerd.io~1owned"},
            {"op": "remove", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks"}
        ])
    );
}

/// A NAD of the rules' name that runs another network, as the NAD cache
/// reports it.
struct TakenNad(crate::network_resources::NadTable);

impl Nads for TakenNad {
    fn annotations(&self, namespace: &str, name: &str) -> Option<&dyn Lookup> {
        self.0.annotations(namespace, name)
    }
}

impl NadConfigs for TakenNad {
    fn config_hash(&self, _: &str, _: &str) -> Option<&str> {
        None
    }
    fn other_network(&self, namespace: &str, name: &str) -> Option<&str> {
        self.0.annotations(namespace, name).map(|_| "macvlan")
    }
    fn ipam(
        &self,
        _: &str,
        _: &str,
    ) -> Option<&Result<crate::multus::ipam::Ipam, crate::multus::ipam::IpamError>> {
        None
    }
    fn plugin_settings(
        &self,
        _: &str,
        _: &str,
    ) -> Option<&crate::linkerd_cni::skip_subnets::PluginSettings> {
        None
    }
}

/// A pod the rules would attach to a NAD that runs another network is not
/// attached: the `--on-error` answer, whatever the missing-NAD policy.
#[test]
fn a_nad_that_is_another_network_gets_the_on_error_answer() {
    let ns = enabled_namespace();
    let taken = TakenNad(crate::network_resources::nad_table(&[(
        "demo",
        "linkerd-cni",
        &[],
    )]));
    let message = "linkerd-multus: NetworkAttachmentDefinition demo/linkerd-cni runs macvlan, not linkerd-cni: it is another network with the name the rules need for Linkerd-CNI, and the pod would join it instead, so it is not attached. Rename that network, or run the webhook and the render with another NAD name (--nad-name, nadName); if it is meant to be Linkerd-CNI's, label it app.kubernetes.io/managed-by: linkerd-multus and render it from Git";
    for policy in [MissingNad::Deny, MissingNad::Attach] {
        for (on_error, outcome) in [
            (OnError::Allow, Outcome::Warned),
            (OnError::Deny, Outcome::Denied),
        ] {
            let request = parse(CREATE.as_bytes()).unwrap();
            let check = NadCheck {
                nads: &taken,
                policy,
            };
            let answer = answer(
                &request,
                &ns,
                &Settings::default(),
                None,
                Some(&check),
                on_error,
            );
            assert_eq!(answer.outcome, outcome, "{policy:?} {on_error:?}");
            let response = response(&answer);
            assert!(response.get("patch").is_none(), "{response}");
            match outcome {
                Outcome::Denied => assert_eq!(response["status"]["message"], message),
                _ => assert_eq!(response["warnings"], json!([message])),
            }
        }
    }
}

#[test]
fn the_nads_read_are_those_of_a_pod_the_rules_attach() {
    let enabled = enabled_namespace();
    let empty = BTreeMap::new();
    let selecting = json!({"metadata": {"name": "p", "annotations": {
        "k8s.v1.cni.cncf.io/networks": "a, other/b, a",
    }}});
    let plain = json!({"metadata": {"name": "p"}});
    let own = ("demo", "linkerd-cni");
    type Case<'a> = (
        &'a Value,
        &'a BTreeMap<String, String>,
        bool,
        &'a [(&'a str, &'a str)],
    );
    let cases: &[Case] = &[
        // Attached: the Linkerd-CNI NAD, then each selected once.
        (&plain, &enabled, false, &[own]),
        (
            &selecting,
            &enabled,
            false,
            &[own, ("demo", "a"), ("other", "b")],
        ),
        // Not attached: the Linkerd-CNI rules read none.
        (&plain, &empty, false, &[]),
        (&selecting, &empty, false, &[]),
        // The network-resources rules read the NADs of every pod.
        (
            &selecting,
            &empty,
            true,
            &[own, ("demo", "a"), ("other", "b")],
        ),
    ];
    for (object, namespace, network_resources, want) in cases {
        let body = review("CREATE", "pods", (*object).clone());
        let request = parse(body.as_bytes()).unwrap();
        let read = nads_read(
            &request,
            *namespace,
            &Settings::default(),
            *network_resources,
        );
        let read: Vec<(&str, &str)> = read.iter().map(|(n, m)| (n.as_str(), m.as_str())).collect();
        assert_eq!(
            read, *want,
            "{object} in {namespace:?}, network resources {network_resources}"
        );
    }
    let body = review("DELETE", "pods", plain.clone());
    let request = parse(body.as_bytes()).unwrap();
    assert!(nads_read(&request, &enabled, &Settings::default(), true).is_empty());
}
