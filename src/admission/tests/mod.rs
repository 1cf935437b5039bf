//! The admission rules' unit tests, by topic: the answers to reviews, the
//! network-resources rules in them, the reading of a review, the patches and
//! the config-hash stamp.

mod answers;
mod patches;
mod reading;
mod resource_rules;
mod skip_subnets;
mod stamps;

use std::collections::BTreeMap;

use base64::Engine;
use proptest::prelude::*;
use serde_json::json;

use super::response::PREFIX;
use super::*;

const CREATE: &str = include_str!("../../../../shared/fixtures/admission/pod-create.json");
const DRY_RUN: &str = include_str!("../../../../shared/fixtures/admission/pod-create-dryrun.json");

fn enabled_namespace() -> BTreeMap<String, String> {
    [
        ("linkerd.io/multus", "enabled"),
        ("linkerd.io/inject", "enabled"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn response(answer: &Answer) -> Value {
    let review: Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(review["apiVersion"], API_VERSION);
    assert_eq!(review["kind"], KIND);
    review["response"].clone()
}

fn patch_of(response: &Value) -> Value {
    let b64 = response["patch"].as_str().expect("a patch");
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

/// The body of a review of `object`.
fn review(operation: &str, resource: &str, object: Value) -> String {
    review_in("demo", operation, resource, object)
}

/// The body of a review of `object` in namespace `namespace`.
fn review_in(namespace: &str, operation: &str, resource: &str, object: Value) -> String {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "request": {
            "uid": "u1",
            "resource": {"group": "", "version": "v1", "resource": resource},
            "namespace": namespace,
            "operation": operation,
            "object": object,
        }
    })
    .to_string()
}
