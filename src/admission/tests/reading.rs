//! Reading a review: bodies that are not reviews and the object read as far
//! as the rules go.

use super::*;

#[test]
fn bodies_that_are_not_reviews_are_refused() {
    for (body, want) in [
        ("nope", "not a JSON object"),
        ("[]", "not a JSON object"),
        (
            r#"{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}"#,
            "admissionReviewVersions: [v1]",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#,
            "has no request",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}"#,
            "request does not parse",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}"#,
            "does not parse",
        ),
        (
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": {"metadata": "x"}}}"#,
            "request does not parse: invalid type: string",
        ),
    ] {
        let err = parse(body.as_bytes()).unwrap_err().to_string();
        assert!(err.contains(want), "{body}: {err}");
    }
    // A byte that is not UTF-8 in a string the rules read, and in a member they skip
    // (found by the fuzzer: serde_json skips such members without checking their bytes).
    let skipped = CREATE.replacen('{', "{\"spec\": {\"pod\u{1}\": 1}, ", 1);
    for text in [CREATE.replacen("pod2", "pod\u{1}", 1), skipped] {
        let mut bytes = text.into_bytes();
        let at = bytes.iter().position(|b| *b == 1).unwrap();
        bytes[at] = 0x90;
        let err = parse(&bytes).unwrap_err().to_string();
        assert!(
            err.contains("not UTF-8 JSON: invalid utf-8 sequence of 1 bytes from index"),
            "{err}"
        );
    }
}

#[test]
fn the_object_is_read_as_far_as_the_rules_go() {
    let request = parse(CREATE.as_bytes()).unwrap();
    let full: Value = serde_json::from_str(CREATE).unwrap();
    let object = request.object.as_ref().unwrap();
    let metadata = object.metadata.as_ref().unwrap();
    let annotations = metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations.to_value().unwrap(),
        full["request"]["object"]["metadata"]["annotations"]
    );
    let applied = "kubectl.kubernetes.io/last-applied-configuration";
    assert_eq!(
        annotations.lookup(applied),
        full["request"]["object"]["metadata"]["annotations"][applied].as_str()
    );
    assert_eq!(
        metadata.labels.as_ref().unwrap().lookup("app"),
        Some("pod2")
    );
    let view = object.to_value().unwrap();
    assert_eq!(view["spec"], full["request"]["object"]["spec"]);
    assert_eq!(view["metadata"]["name"], "pod2");
    assert!(view.get("status").is_none());
    assert!(view["metadata"].get("managedFields").is_none());
}

#[test]
fn strings_with_escapes_are_read_too() {
    let body = r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u\u0031", "object": {"metadata": {"annotations": {"a\"b": "c\nd", "n": 5, "m": {}, "z": null}}}}}"#;
    let request = parse(body.as_bytes()).unwrap();
    assert_eq!(request.uid, "u1");
    let metadata = request.object.as_ref().unwrap().metadata.as_ref().unwrap();
    let annotations = metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations.lookup("a\"b"), Some("c\nd"));
    for (name, kind) in [("n", "a scalar"), ("m", "a mapping"), ("z", "null")] {
        assert_eq!(annotations.lookup(name), None, "{name}");
        assert_eq!(annotations.get(name).unwrap().kind_name(), kind, "{name}");
    }
}

#[test]
fn labels_and_annotations_that_are_not_objects() {
    for (value, want) in [
        (json!("x"), Strings::Other(json!("x"))),
        (json!([1]), Strings::Other(json!([1]))),
        (json!(7), Strings::Other(json!(7))),
    ] {
        let body = review("UPDATE", "pods", json!({"metadata": {"labels": value}}));
        let request = parse(body.as_bytes()).unwrap();
        let metadata = request.object.unwrap().metadata.unwrap();
        assert_eq!(metadata.labels, Some(want));
    }
}
