//! What the controller owns: exactly the NADs it made. Its own, edited or
//! deleted by hand, is put back within seconds, taking back only its fields;
//! a NAD it did not make is never adopted, even where its cache has not seen
//! it yet; an invalid ConfigMap writes nothing.

use std::time::Duration;

use serde_json::Value;

use super::harness::{
    BOUND, CONFIG_MAP, Controller, NAD, Setup, eventually, labelled_by_controller, setup,
    with_one_nad,
};
use super::proxy::DelayProxy;

/// Who owns `spec.config` of a NAD, by its managedFields: (manager, operation).
fn config_owners(nad: &Value) -> Vec<(String, String)> {
    nad["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["fieldsV1"]["f:spec"].get("f:config").is_some())
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["operation"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn kubectl_nad(s: &Setup, namespace: &str, args: &[&str]) {
    let mut all = vec![args[0], NAD, "linkerd-cni", "-n", namespace];
    all.extend(&args[1..]);
    s.plane.kubectl(&all);
}

/// Sets a NAD's `spec.config` by hand, as `kubectl patch` does.
fn edit_config(s: &Setup, namespace: &str, config: &str) {
    let patch = serde_json::json!({"spec": {"config": config}}).to_string();
    kubectl_nad(s, namespace, &["patch", "--type=merge", "-p", &patch]);
}

/// One test's namespace, its controller and the config it must keep.
struct Owned {
    s: Setup,
    namespace: String,
    controller: Controller,
    want: String,
}

impl Owned {
    fn config(&self) -> Value {
        self.s.nad(&self.namespace).unwrap()["spec"]["config"].clone()
    }

    fn is_put_back(&self) -> bool {
        self.config().as_str() == Some(self.want.as_str())
    }
}

/// Hand edits of the controller's own NAD are put back within seconds, by
/// taking back exactly its fields; a field it does not own stays; deleted,
/// it comes back; an invalid ConfigMap writes nothing; unlabelled by hand,
/// it is the user's and stays as edited.
#[test]
fn its_own_nad_edited_or_deleted_by_hand_is_put_back_within_seconds() {
    let (s, namespace, controller) = with_one_nad("owned");
    let want = s.rendered_config(CONFIG_MAP);
    let owned = Owned {
        s,
        namespace,
        controller,
        want,
    };
    an_edit_is_put_back(&owned);
    a_deleted_nad_is_made_again(&owned);
    an_invalid_config_map_writes_nothing(&owned);
    unlabelled_it_is_the_user_s(&owned);
}

/// `spec.config` edited with kubectl patch, and an annotation of the user's added.
fn an_edit_is_put_back(o: &Owned) {
    let (s, namespace) = (&o.s, o.namespace.as_str());
    kubectl_nad(s, namespace, &["annotate", "team=payments"]);
    edit_config(s, namespace, r#"{"edited": true}"#);
    let took = eventually("the edited spec.config put back", BOUND, || o.is_put_back());
    eprintln!("spec.config put back {took:?} after the edit");
    assert!(took < Duration::from_secs(10), "put back in {took:?}");
    let nad = s.nad(namespace).unwrap();
    assert!(labelled_by_controller(&nad), "{nad}");
    assert_eq!(
        config_owners(&nad),
        [(
            "linkerd-multus-controller".to_string(),
            "Update".to_string()
        )],
        "the field taken back from kubectl-patch: {nad}"
    );
    assert_eq!(
        nad["metadata"]["annotations"]["team"], "payments",
        "a field it does not own stays"
    );
    eventually("the Event of the NAD put back", BOUND, || {
        s.event_reasons(namespace)
            .contains(&"NADUpdated".to_string())
    });
}

fn a_deleted_nad_is_made_again(o: &Owned) {
    kubectl_nad(&o.s, &o.namespace, &["delete"]);
    let took = eventually("the deleted NAD made again", BOUND, || {
        o.s.nad(&o.namespace).is_some()
    });
    assert!(took < Duration::from_secs(10), "made again in {took:?}");
    assert!(o.is_put_back());
}

/// Another plugin type in the ConfigMap: nothing written, and it says why.
fn an_invalid_config_map_writes_nothing(o: &Owned) {
    let (s, namespace, controller) = (&o.s, o.namespace.as_str(), &o.controller);
    let writes = controller.writes();
    s.put_config_map(&CONFIG_MAP.replace(r#""type": "linkerd-cni""#, r#""type": "bridge""#));
    eventually("the ConfigMap found invalid", BOUND, || {
        controller.metric("linkerd_multus_cni_config_map_valid ") == Some(0.0)
    });
    eventually("the Event on the invalid ConfigMap", BOUND, || {
        s.events_about(&s.cni, "linkerd-cni-config")
            .iter()
            .any(|e| {
                e["reason"] == "InvalidConfig"
                    && e["note"]
                        .as_str()
                        .is_some_and(|n| n.contains(r#""type" is "bridge", not "linkerd-cni""#))
            })
    });
    edit_config(s, namespace, r#"{"edited": 2}"#);
    let edited = s.version(namespace);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        s.version(namespace),
        edited,
        "nothing written without a valid config"
    );
    assert_eq!(controller.writes(), writes);
    s.put_config_map(CONFIG_MAP);
    eventually("put back once the ConfigMap is fixed", BOUND, || {
        o.is_put_back()
    });
}

/// Its label removed by hand: the user's now, and left as the user edits it.
fn unlabelled_it_is_the_user_s(o: &Owned) {
    let (s, namespace) = (&o.s, o.namespace.as_str());
    kubectl_nad(s, namespace, &["label", "app.kubernetes.io/created-by-"]);
    edit_config(s, namespace, r#"{"mine": 1}"#);
    let version = s.version(namespace);
    let writes = o.controller.writes();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(s.version(namespace), version);
    assert_eq!(o.controller.writes(), writes);
}

/// A user's NAD made by hand where the controller's cache has none yet (its
/// view of the cluster held back 5 s by a proxy): the controller's create
/// answers AlreadyExists, the NAD stays the user's, a Warning Event says why,
/// and nothing retries. (One Git holds is left without a word: `git`.)
#[test]
fn a_user_s_nad_its_cache_has_not_seen_is_never_adopted() {
    let s = setup();
    let namespace = s.plane.namespace("late", &[]);
    let proxy = DelayProxy::start(s.plane.url());
    let controller = Controller::start_behind(&s, &proxy.address);
    eventually("leading", BOUND, || controller.leader() == Some(1.0));
    eventually("every namespace reconciled", BOUND, || {
        controller
            .metric("linkerd_multus_nad_reconciles_total{outcome=\"unchanged\"}")
            .is_some_and(|n| n >= 3.0)
    });
    let writes = controller.writes();
    // Enabled now, the user's NAD 2.5 s later: the controller learns of the
    // annotation 5 s late and its create reaches the API server at once, so
    // the user's NAD is there up to 2.5 s before the create (the time kubectl
    // has to write it), and the controller learns of it 2.5 s after it
    // decided to create (the time it has to decide, on a loaded machine).
    proxy.set_delay(Duration::from_secs(5));
    s.annotate(&namespace, "enabled");
    std::thread::sleep(Duration::from_millis(2500));
    // Made by hand (kubectl create): no render's mark, no one's apply.
    s.plane.kubectl_ok(
        &["create", "-f", "-"],
        &format!(
            "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: {namespace}\nspec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"name\": \"linkerd-cni\", \"type\": \"linkerd-cni\"}}'\n"
        ),
    );
    let version = s.version(&namespace).unwrap();
    let took = eventually("the Event saying the NAD exists", BOUND, || {
        s.event_reasons(&namespace)
            .contains(&"NADExists".to_string())
    });
    eprintln!("NADExists {took:?} after the user's NAD");
    proxy.set_delay(Duration::ZERO);
    let event = s
        .events_about("default", &namespace)
        .into_iter()
        .find(|e| e["reason"] == "NADExists")
        .unwrap();
    assert_eq!(event["type"], "Warning");
    let note = event["note"].as_str().unwrap();
    assert!(
        note.contains(&format!(
            "NetworkAttachmentDefinition {namespace}/linkerd-cni exists already"
        )) && note.contains("app.kubernetes.io/created-by: linkerd-multus-controller"),
        "{note}"
    );
    assert_eq!(controller.writes(), writes + 1.0, "one create, refused");
    // Nothing retries, nothing takes it over.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(controller.writes(), writes + 1.0, "{}", controller.log());
    let nad = s.nad(&namespace).unwrap();
    assert_eq!(
        nad["metadata"]["resourceVersion"].as_str(),
        Some(version.as_str())
    );
    assert!(!labelled_by_controller(&nad), "{nad}");
    assert_eq!(
        config_owners(&nad),
        [("kubectl-create".to_string(), "Update".to_string())]
    );
}
