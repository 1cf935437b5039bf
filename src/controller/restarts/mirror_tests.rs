//! What the watches keep of a pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::core::{ObjectMeta, PartialObjectMetaExt};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::*;

fn pod(hash: Option<&str>, deleting: bool) -> PartialObjectMeta<Pod> {
    ObjectMeta {
        name: Some("p".into()),
        namespace: Some("a".into()),
        annotations: hash.map(|h| BTreeMap::from([(HASH_ANNOTATION.to_string(), h.to_string())])),
        deletion_timestamp: deleting.then(|| Time(Timestamp::now())),
        ..ObjectMeta::default()
    }
    .into_request_partial::<Pod>()
}

#[test]
fn a_pod_is_kept_with_its_hash_and_dropped_once_it_is_being_deleted() {
    let mut pods: Mirror<PodEntry> = Mirror::default();
    pods.apply(
        watcher::Event::Apply(pod(Some("0123456789abcdef"), false)),
        read_pod,
    );
    let kept = pods.get("a", "p").unwrap();
    assert_eq!(&*kept.hash, "0123456789abcdef");
    assert_eq!((kept.owner.clone(), kept.evict), (None, None));
    // Evicted (or deleted), it terminates for its grace period: neither evicted again nor
    // reported while it goes.
    pods.apply(
        watcher::Event::Apply(pod(Some("0123456789abcdef"), true)),
        read_pod,
    );
    assert!(
        pods.objects.is_empty(),
        "its namespace goes with its last pod"
    );
    let mut interned = Interned::default();
    assert!(read_pod(&pod(Some("0123456789abcdef"), true), &mut interned).is_none());
    assert!(
        read_pod(&pod(None, false), &mut interned).is_none(),
        "no hash: not kept"
    );
}

/// Pods share one copy of their hash and owner, and the copies no pod holds are forgotten
/// at the next list, or prune.
#[test]
fn pods_share_their_strings_until_none_holds_them() {
    let owned = |name: &str, hash: &str, rs: &str| {
        let mut pod = pod(Some(hash), false);
        pod.metadata.name = Some(name.into());
        pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: rs.into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        watcher::Event::Apply(pod)
    };
    let mut pods: Mirror<PodEntry> = Mirror::default();
    pods.apply(owned("p1", "0123456789abcdef", "web-1"), read_pod);
    pods.apply(owned("p2", "0123456789abcdef", "web-1"), read_pod);
    let (p1, p2) = (pods.get("a", "p1").unwrap(), pods.get("a", "p2").unwrap());
    assert!(Arc::ptr_eq(&p1.hash, &p2.hash));
    let (o1, o2) = (p1.owner.clone().unwrap(), p2.owner.clone().unwrap());
    assert!(Arc::ptr_eq(&o1.name, &o2.name) && &*o1.name == "web-1" && &*o1.kind == "ReplicaSet");
    assert!(Arc::ptr_eq(&o1.uid, &o2.uid));
    drop((o1, o2));
    // Both roll to a new ReplicaSet and hash: the old strings are forgotten.
    pods.apply(owned("p1", "fedcba9876543210", "web-2"), read_pod);
    pods.apply(owned("p2", "fedcba9876543210", "web-2"), read_pod);
    pods.interned.prune();
    let mut kept: Vec<&str> = pods.interned.0.iter().map(|s| &**s).collect();
    kept.sort();
    assert_eq!(kept, ["ReplicaSet", "fedcba9876543210", "u", "web-2"]);
}

fn reference(kind: &str, name: &str, uid: &str) -> Option<Vec<OwnerReference>> {
    Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        ..Default::default()
    }])
}

/// A pod's owner is its ReplicaSet's Deployment only under the uids the watches hold: a pod
/// that names the ReplicaSet of another workload under a uid of its own choosing is not its.
#[test]
fn a_pods_owner_is_checked_against_the_live_uids() {
    let mut watched = Watched::default();
    let mut deployment = Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("a".into()),
            uid: Some("web-uid".into()),
            ..ObjectMeta::default()
        },
        ..Deployment::default()
    };
    deployment.spec.template.metadata = Some(ObjectMeta::default());
    watched
        .deployments
        .apply(watcher::Event::Apply(deployment), |d, _| {
            Workload::of_deployment(d)
        });
    let rs = ObjectMeta {
        name: Some("web-1".into()),
        namespace: Some("a".into()),
        uid: Some("rs-uid".into()),
        owner_references: reference("Deployment", "web", "web-uid"),
        ..ObjectMeta::default()
    }
    .into_request_partial::<ReplicaSet>();
    watched
        .replica_sets
        .apply(watcher::Event::Apply(rs), read_replica_set);
    let owned = |uid: &str| {
        let mut pod = pod(Some("0123456789abcdef"), false);
        pod.metadata.owner_references = reference("ReplicaSet", "web-1", uid);
        let entry = read_pod(&pod, &mut Interned::default()).unwrap();
        watched.owner("a", &entry)
    };
    assert_eq!(
        owned("rs-uid"),
        Owner::Workload(Key {
            kind: Kind::Deployment,
            namespace: "a".into(),
            name: "web".into()
        })
    );
    assert_eq!(
        owned("planted"),
        Owner::Unverified("ReplicaSet web-1".into())
    );
}
