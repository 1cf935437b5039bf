//! The order `kubectl apply -f -` needs a stream in: what other objects
//! depend on first. CustomResourceDefinitions (a NAD's kind is one), then
//! Namespaces, then NetworkAttachmentDefinitions (the pods of a workload
//! select them by name when they are created), then everything else. The sort
//! is stable, so objects of one rank keep the order they came in, and sorting
//! a sorted stream changes nothing.

use crate::k8s::resource::{ResourceRef, resource_ref};
use crate::multus::nad;
use crate::yaml::Node;

/// When an object is applied: lower first.
fn rank(r: &ResourceRef) -> u8 {
    match (r.group(), r.kind.as_str()) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 0,
        ("", "Namespace") => 1,
        _ if nad::is_nad(r) => 2,
        _ => 3,
    }
}

/// Sorts `items` into apply order; what is not a resource goes with the rest.
pub fn sort(items: &mut [Node]) {
    items.sort_by_cached_key(|item| resource_ref(item).map_or(3, |r| rank(&r)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_stream;

    fn kinds(items: &[Node]) -> Vec<String> {
        items
            .iter()
            .map(|i| {
                let r = resource_ref(i).unwrap();
                format!("{}/{}", r.kind, r.name)
            })
            .collect()
    }

    #[test]
    fn prerequisites_first_and_stable() {
        let stream = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: linkerd-cni, namespace: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
---
apiVersion: v1
kind: Namespace
metadata: {name: legacy}
---
apiVersion: example.com/v1
kind: Namespace
metadata: {name: not-core}
";
        let mut items = parse_stream(stream).unwrap();
        sort(&mut items);
        let want = [
            "CustomResourceDefinition/things.example.com",
            "Namespace/shop",
            "Namespace/legacy",
            "NetworkAttachmentDefinition/linkerd-cni",
            "Deployment/web",
            "Service/web",
            "Namespace/not-core",
        ];
        assert_eq!(kinds(&items), want);
        sort(&mut items);
        assert_eq!(kinds(&items), want, "sorting again changes nothing");
    }
}
