//! What owns a stale pod, taken from the cluster rather than from the pod: whoever may patch
//! a pod (not delete it) may write any ownerReference on it, so one counts only when its uid
//! is the live owner's, through the ReplicaSet to its Deployment.

use super::{Key, Kind};

/// What owns a pod, resolved through its ReplicaSet to the Deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A workload the controller restarts.
    Workload(Key),
    /// A Job (a CronJob's too): never restarted.
    Job(String),
    /// No controller: a naked pod.
    Naked,
    /// Another controller (a ReplicaSet without Deployment, an operator's kind).
    Other(String),
    /// An owner (`KIND NAME`) whose uid is not the one the ownerReference names: a pod
    /// that says it is another's.
    Unverified(String),
}

/// A pod, read as metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// What owns it.
    pub owner: Owner,
    /// Its [`super::HASH_ANNOTATION`].
    pub hash: Option<String>,
    /// Its [`super::EVICT_ANNOTATION`]: only `Some(false)` counts (it opts out).
    pub evict: Option<bool>,
}

/// The controller an ownerReference names (`controller: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerRef<'a> {
    /// Its kind.
    pub kind: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The uid it names.
    pub uid: &'a str,
}

/// A live ReplicaSet: its uid and its own controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaSetOf<'a> {
    /// Its `metadata.uid`.
    pub uid: &'a str,
    /// Its controller (a Deployment's ReplicaSet names it).
    pub controller: Option<ControllerRef<'a>>,
}

/// The live objects of a namespace an owner is checked against.
pub struct Live<'a> {
    /// A ReplicaSet by name, if the watches hold it.
    pub replica_set: &'a dyn Fn(&str) -> Option<ReplicaSetOf<'a>>,
    /// A workload's uid, if the watches hold it.
    pub workload_uid: &'a dyn Fn(&Key) -> Option<&'a str>,
}

/// The owner of a pod of `namespace` whose controller is `controller`. A workload the watches
/// do not hold is still named (the planner finds no workload and leaves it); one they hold
/// under another uid is [`Owner::Unverified`].
pub fn owner(namespace: &str, controller: Option<ControllerRef<'_>>, live: &Live<'_>) -> Owner {
    let Some(reference) = controller else {
        return Owner::Naked;
    };
    let named = |r: &ControllerRef<'_>| format!("{} {}", r.kind, r.name);
    let verified = |r: &ControllerRef<'_>, kind| {
        let key = Key {
            kind,
            namespace: namespace.to_string(),
            name: r.name.to_string(),
        };
        match (live.workload_uid)(&key) {
            Some(uid) if uid != r.uid => Owner::Unverified(named(r)),
            _ => Owner::Workload(key),
        }
    };
    match reference.kind {
        "Job" => Owner::Job(reference.name.to_string()),
        "ReplicaSet" => match (live.replica_set)(reference.name) {
            None => Owner::Other(named(&reference)),
            Some(rs) if rs.uid != reference.uid => Owner::Unverified(named(&reference)),
            Some(rs) => match rs.controller {
                Some(d) if d.kind == "Deployment" => verified(&d, Kind::Deployment),
                _ => Owner::Other(named(&reference)),
            },
        },
        kind => match Kind::of_owner(kind) {
            Some(kind @ (Kind::StatefulSet | Kind::DaemonSet)) => verified(&reference, kind),
            _ => Owner::Other(named(&reference)),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn reference<'a>(kind: &'a str, name: &'a str, uid: &'a str) -> Option<ControllerRef<'a>> {
        Some(ControllerRef { kind, name, uid })
    }

    fn workload(kind: Kind, name: &str) -> Owner {
        Owner::Workload(Key {
            kind,
            namespace: "a".into(),
            name: name.into(),
        })
    }

    #[test]
    fn an_owner_counts_only_under_its_live_uid() {
        let replica_sets = BTreeMap::from([
            (
                "web-1",
                ("rs-uid", reference("Deployment", "web", "web-uid")),
            ),
            ("stray-1", ("stray-uid", None)),
            (
                "forged-1",
                ("forged-uid", reference("Deployment", "web", "old-uid")),
            ),
        ]);
        let workloads =
            BTreeMap::from([("web", "web-uid"), ("db", "db-uid"), ("agent", "agent-uid")]);
        let replica_set = |name: &str| {
            let (uid, controller) = replica_sets.get(name)?;
            Some(ReplicaSetOf {
                uid,
                controller: *controller,
            })
        };
        let workload_uid = |key: &Key| workloads.get(key.name.as_str()).copied();
        let live = Live {
            replica_set: &replica_set,
            workload_uid: &workload_uid,
        };
        for (what, controller, want) in [
            ("naked", None, Owner::Naked),
            (
                "a Deployment's pod",
                reference("ReplicaSet", "web-1", "rs-uid"),
                workload(Kind::Deployment, "web"),
            ),
            (
                "a ReplicaSet of that name, not that uid",
                reference("ReplicaSet", "web-1", "planted"),
                Owner::Unverified("ReplicaSet web-1".into()),
            ),
            (
                "a ReplicaSet whose Deployment is another of that name",
                reference("ReplicaSet", "forged-1", "forged-uid"),
                Owner::Unverified("Deployment web".into()),
            ),
            (
                "a ReplicaSet of no Deployment",
                reference("ReplicaSet", "stray-1", "stray-uid"),
                Owner::Other("ReplicaSet stray-1".into()),
            ),
            (
                "a ReplicaSet the watches do not hold",
                reference("ReplicaSet", "gone-1", "x"),
                Owner::Other("ReplicaSet gone-1".into()),
            ),
            (
                "a StatefulSet's pod",
                reference("StatefulSet", "db", "db-uid"),
                workload(Kind::StatefulSet, "db"),
            ),
            (
                "a pod naming a DaemonSet under another uid",
                reference("DaemonSet", "agent", "web-uid"),
                Owner::Unverified("DaemonSet agent".into()),
            ),
            (
                "a Deployment named directly (no ReplicaSet)",
                reference("Deployment", "web", "web-uid"),
                Owner::Other("Deployment web".into()),
            ),
            (
                "a Job's",
                reference("Job", "nightly-1", "j"),
                Owner::Job("nightly-1".into()),
            ),
            (
                "an operator's",
                reference("Cluster", "pg", "p"),
                Owner::Other("Cluster pg".into()),
            ),
        ] {
            assert_eq!(owner("a", controller, &live), want, "{what}");
        }
    }
}
