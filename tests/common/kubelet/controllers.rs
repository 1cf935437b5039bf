//! The controllers of a controller-manager that a lone API server lacks, for
//! the pods of one Deployment: the endpoints and EndpointSlice controllers
//! (a ready pod's address in the Endpoints of each Service selecting it, a
//! terminating one's gone) and the Deployment controller's status.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::Node;
use super::pod::Pod;
use super::probes::mapped_port;

/// What the controllers write from: each pod's name, readiness,
/// termination and ports.
#[derive(PartialEq, Eq)]
pub struct State(Vec<(String, bool, bool, BTreeMap<i32, u16>)>);

impl State {
    pub fn of(pods: &[Pod]) -> State {
        State(
            pods.iter()
                .map(|p| {
                    (
                        p.name.clone(),
                        p.is_ready(),
                        p.is_terminating(),
                        p.ports.clone(),
                    )
                })
                .collect(),
        )
    }
}

/// The Services of `namespace` whose selector selects `labels`.
fn selecting(node: &Node, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<Service> {
    let api: Api<Service> = Api::namespaced(node.client.clone(), namespace);
    let services = node
        .block(api.list(&ListParams::default()))
        .expect("listing Services");
    services
        .into_iter()
        .filter(|s| {
            let selector = s.spec.as_ref().and_then(|s| s.selector.as_ref());
            selector.is_some_and(|sel| {
                !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
        })
        .collect()
}

/// Writes the Endpoints and EndpointSlices of every Service selecting the
/// pods, and the Deployment's status.
pub fn write(node: &Node, deployment: &Deployment, pods: &[Pod]) {
    let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
    let labels = deployment
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    for service in selecting(node, &namespace, &labels) {
        write_endpoints(node, &service, pods);
        write_slices(node, &service, pods);
    }
    write_status(node, deployment, pods);
}

/// For each Service port, the port each pod serves it on.
fn ports_of(service: &Service, pod: &Pod) -> Vec<serde_json::Value> {
    let container = &pod.object().spec.as_ref().unwrap().containers[0];
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|port| {
            let target = port
                .target_port
                .clone()
                .unwrap_or(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port.port));
            let mapped = mapped_port(&target, container, &pod.ports).ok()?;
            Some(json!({"name": port.name, "port": mapped, "protocol": port.protocol.as_deref().unwrap_or("TCP")}))
        })
        .collect()
}

fn target_ref(pod: &Pod) -> serde_json::Value {
    let meta = &pod.object().metadata;
    json!({"kind": "Pod", "name": meta.name, "namespace": meta.namespace, "uid": meta.uid})
}

/// One subset per pod: each listens on ports of its own.
fn write_endpoints(node: &Node, service: &Service, pods: &[Pod]) {
    let name = service.metadata.name.clone().unwrap_or_default();
    let namespace = service.metadata.namespace.clone().unwrap_or_default();
    let subsets: Vec<_> = pods
        .iter()
        .filter(|p| !p.is_terminating())
        .map(|pod| {
            let address = json!([{"ip": node.host_ip, "targetRef": target_ref(pod)}]);
            let key = if pod.is_ready() {
                "addresses"
            } else {
                "notReadyAddresses"
            };
            json!({key: address, "ports": ports_of(service, pod)})
        })
        .collect();
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": name, "namespace": namespace},
        "subsets": subsets,
    });
    let api: Api<Endpoints> = Api::namespaced(node.client.clone(), &namespace);
    let params = PatchParams::apply("endpoint-controller").force();
    node.block(api.patch(&name, &params, &Patch::Apply(endpoints)))
        .unwrap_or_else(|e| panic!("writing Endpoints {namespace}/{name}: {e}"));
}

/// One EndpointSlice per pod (its ports are its own); a terminating pod's
/// endpoint is neither ready nor serving until it has gone.
fn write_slices(node: &Node, service: &Service, pods: &[Pod]) {
    let name = service.metadata.name.clone().unwrap_or_default();
    let namespace = service.metadata.namespace.clone().unwrap_or_default();
    let api: Api<EndpointSlice> = Api::namespaced(node.client.clone(), &namespace);
    let params = PatchParams::apply("endpointslice-controller").force();
    let mut kept = Vec::new();
    for pod in pods {
        let slice_name = format!("{name}-{}", pod.name);
        let ready = pod.is_ready();
        let terminating = pod.is_terminating();
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": slice_name, "namespace": namespace, "labels": {
                "kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            }},
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": [node.host_ip],
                "conditions": {"ready": ready, "serving": ready, "terminating": terminating},
                "targetRef": target_ref(pod),
            }],
            "ports": ports_of(service, pod),
        });
        node.block(api.patch(&slice_name, &params, &Patch::Apply(slice)))
            .unwrap_or_else(|e| panic!("writing EndpointSlice {namespace}/{slice_name}: {e}"));
        kept.push(slice_name);
    }
    let selector = format!("kubernetes.io/service-name={name}");
    let slices = node
        .block(api.list(&ListParams::default().labels(&selector)))
        .expect("listing EndpointSlices");
    for slice in slices {
        let slice_name = slice.metadata.name.unwrap_or_default();
        if !kept.contains(&slice_name) {
            let _ = node.block(api.delete(&slice_name, &DeleteParams::default()));
        }
    }
}

/// The Deployment's status as its controller writes it (minReadySeconds 0:
/// ready is available).
fn write_status(node: &Node, deployment: &Deployment, pods: &[Pod]) {
    let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(node.client.clone(), &namespace);
    let Ok(current) = node.block(api.get(&name)) else {
        return;
    };
    let wanted = current.spec.replicas.unwrap_or(1);
    let live = pods.iter().filter(|p| !p.is_terminating()).count() as i32;
    let ready = pods.iter().filter(|p| p.is_ready()).count() as i32;
    let available = if ready >= wanted { "True" } else { "False" };
    let status = json!({"status": {
        "observedGeneration": current.metadata.generation,
        "replicas": live, "updatedReplicas": live,
        "readyReplicas": ready, "availableReplicas": ready,
        "unavailableReplicas": (wanted - ready).max(0),
        "conditions": [
            {"type": "Available", "status": available, "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
        ],
    }});
    let _ = node.block(api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)));
}

/// How many of `pods` are ready addresses of the Endpoints of the Services
/// selecting them, as the API server reads them.
pub fn ready_in_endpoints(node: &Node, namespace: &str, pods: &[Pod]) -> usize {
    let Some(first) = pods.first() else {
        return 0;
    };
    let labels = first.object().metadata.labels.clone().unwrap_or_default();
    let api: Api<Endpoints> = Api::namespaced(node.client.clone(), namespace);
    let mut least = usize::MAX;
    for service in selecting(node, namespace, &labels) {
        let name = service.metadata.name.unwrap_or_default();
        let endpoints = node.block(api.get_opt(&name)).ok().flatten();
        let ready = endpoints
            .and_then(|e| e.subsets)
            .unwrap_or_default()
            .iter()
            .flat_map(|s| s.addresses.clone().unwrap_or_default())
            .filter(|a| {
                let pod = a.target_ref.as_ref().and_then(|r| r.name.clone());
                pods.iter()
                    .any(|p| Some(&p.name) == pod.as_ref() && p.is_ready())
            })
            .count();
        least = least.min(ready);
    }
    if least == usize::MAX { 0 } else { least }
}
