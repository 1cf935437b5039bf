//! Admission over HTTPS: captured requests patched, pods without their NAD, settings from
//! flags and the environment, client certificates and certificate reloads.

use super::*;

#[test]
fn captured_requests_get_the_core_patch_over_https() {
    let c = cluster();
    let ca = Ca::new("linkerd-multus test CA");
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1", "localhost"]),
        &[],
    );
    let rt = runtime();
    rt.block_on(http1_answers(&webhook, &ca, &c));
    rt.block_on(http2_answers(&webhook, &ca, &c));
    admissions_are_counted(&webhook);
}

/// Over HTTP/1.1: the core patch on both paths and for a dry run, no patch where the
/// annotations are missing, the OpenShift proxy UID, a warning for a bad annotation.
async fn http1_answers(webhook: &Webhook, ca: &Ca, c: &Cluster) {
    let tls = connector(&ca.pem, None, &[b"http/1.1"]);
    let mut conn = Connection::open(&webhook.addr, &tls).await.unwrap();
    let expected = json!([
        {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "linkerd-cni"},
        {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created"},
        {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": NAD_HASH}
    ]);
    // The same answer on the default path and the original operator's, for a dry run too.
    for (path, fixture) in [
        ("/mutate", CREATE),
        ("/annotate-multus-v1-pod", CREATE),
        ("/mutate", DRY_RUN),
    ] {
        let (status, body) = conn
            .post(path, moved(fixture, &c.demo, json!({})))
            .await
            .unwrap();
        assert_eq!(status, 200, "{path}");
        let response = response_of(&body);
        let uid = serde_json::from_str::<Value>(fixture).unwrap()["request"]["uid"].clone();
        assert_eq!(response["uid"], uid);
        assert_eq!(response["allowed"], true);
        assert_eq!(response["patchType"], "JSONPatch");
        assert_eq!(patch_of(&response), expected, "{path}");
    }
    // A namespace without the annotations: allowed, no patch.
    let (_, body) = conn
        .post("/mutate", review_in(&c.plain, json!({})))
        .await
        .unwrap();
    let response = response_of(&body);
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");
    // The OpenShift UID range gives the proxy UID.
    let (_, body) = conn
        .post("/mutate", review_in(&c.openshift, json!({})))
        .await
        .unwrap();
    let patch = patch_of(&response_of(&body));
    assert!(
        patch.as_array().unwrap().contains(&json!(
            {"op": "add", "path": "/metadata/annotations/config.linkerd.io~1proxy-uid", "value": "1000682102"}
        )),
        "{patch}"
    );
    // A malformed networks annotation: allowed with a warning (the default --on-error).
    let (_, body) = conn
        .post(
            "/mutate",
            review_in(&c.demo, json!({"k8s.v1.cni.cncf.io/networks": "a,,b"})),
        )
        .await
        .unwrap();
    let response = response_of(&body);
    assert_eq!(response["allowed"], true);
    assert!(
        response["warnings"][0]
            .as_str()
            .unwrap()
            .contains("k8s.v1.cni.cncf.io/networks: item 2"),
        "{response}"
    );
    bad_requests_are_refused(&mut conn, webhook, ca).await;
}

/// Bodies that are not reviews, wrong paths and methods, oversized bodies.
async fn bad_requests_are_refused(conn: &mut Connection, webhook: &Webhook, ca: &Ca) {
    let (status, body) = conn.post("/mutate", Bytes::from("{}")).await.unwrap();
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("not an admission.k8s.io/v1 AdmissionReview"));
    let (status, _) = conn.post("/other", Bytes::from(CREATE)).await.unwrap();
    assert_eq!(status, 404);
    // A body over the limit is refused on its declared length, before it is sent.
    let response = raw_exchange(
        &webhook.addr,
        &ca.pem,
        &format!(
            "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            7 * 1024 * 1024
        ),
    )
    .await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("--max-body-bytes"), "{response}");
}

/// HTTP/2, as the API server negotiates it.
async fn http2_answers(webhook: &Webhook, ca: &Ca, c: &Cluster) {
    let tls = connector(&ca.pem, None, &[b"h2"]);
    let tcp = tokio::net::TcpStream::connect(&webhook.addr).await.unwrap();
    let stream = tls
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::post(format!("https://{}/mutate", webhook.addr))
        .body(http_body_util::Full::new(moved(CREATE, &c.demo, json!({}))))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
}

/// The metrics count every admission of the test by its outcome.
fn admissions_are_counted(webhook: &Webhook) {
    let metric = |l: &str| webhook.metric(l);
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"patched\"}"),
        5.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"unchanged\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"warned\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_requests_total{outcome=\"invalid\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_admission_patches_total{change=\"attached\"}"),
        5.0
    );
    assert_eq!(
        metric("linkerd_multus_http_refusals_total{reason=\"too_large\"}"),
        1.0
    );
    assert_eq!(
        metric("linkerd_multus_http_refusals_total{reason=\"not_found\"}"),
        1.0
    );
    // The test's own three and the API server's (default, kube-system, ...).
    assert!(metric("linkerd_multus_namespace_cache_namespaces") >= 7.0);
    assert_eq!(metric("linkerd_multus_namespace_cache_synced"), 1.0);
    assert_eq!(
        metric("linkerd_multus_admission_request_duration_seconds_count"),
        8.0
    );
}

/// A pod the rules attach in a namespace without the NAD: denied by default,
/// naming the namespace, the NAD and the ways out; with `--missing-nad
/// attach`, attached with a warning; once the NAD exists, attached quietly.
#[test]
fn a_pod_in_a_namespace_without_the_nad_is_denied_unless_told_otherwise() {
    let c = cluster();
    let bare = c
        .plane
        .namespace("bare", &[(MULTUS, "enabled"), (INJECT, "enabled")]);
    let ca = Ca::new("CA");
    let account = c.webhook_account();
    let deny = Webhook::start(&account, &ca.leaf(&["127.0.0.1"]), &[]);
    let attach = Webhook::start(
        &account,
        &ca.leaf(&["127.0.0.1"]),
        &["--missing-nad", "attach"],
    );
    let response = post_once(&deny, &ca, review_in(&bare, json!({})));
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        response["status"]["message"],
        format!(
            "linkerd-multus: namespace {bare} has no NetworkAttachmentDefinition linkerd-cni, which Multus needs to start this pod with Linkerd-CNI: render the NAD from Git (linkerd-multus generates it for namespaces annotated linkerd.io/multus: enabled), or run the NAD controller so that it makes it (linkerd multus install --manage-nads)"
        )
    );
    let response = post_once(&attach, &ca, review_in(&bare, json!({})));
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_some(), "{response}");
    assert_eq!(
        response["warnings"],
        json!([format!(
            "linkerd-multus: namespace {bare} has no NetworkAttachmentDefinition linkerd-cni yet: the NAD controller makes it where it runs (linkerd-multus controller); until it exists the pod's sandbox fails and kubelet retries it (--missing-nad attach)"
        )])
    );
    // The NAD rendered from Git and applied: both webhooks see it through their watch.
    c.put_nad(&bare, "linkerd-cni", &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    for webhook in [&deny, &attach] {
        loop {
            let response = post_once(webhook, &ca, review_in(&bare, json!({})));
            if response["allowed"] == true && response.get("warnings").is_none() {
                assert!(response.get("patch").is_some(), "{response}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the NAD never reached the cache: {response}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A NAD of the rules' name that is another network (a user's macvlan
/// `linkerd-cni`): the pod is not attached to it; the `--on-error` answer,
/// naming the NAD, what it runs and the ways out, as the render's error does.
#[test]
fn a_pod_whose_nad_is_another_network_is_not_attached_to_it() {
    let c = cluster();
    let taken = c
        .plane
        .namespace("taken", &[(MULTUS, "enabled"), (INJECT, "enabled")]);
    c.put_nad_config(
        &taken,
        "linkerd-cni",
        &[],
        r#"{"cniVersion": "0.3.1", "type": "macvlan", "master": "eth1"}"#,
    );
    let ca = Ca::new("CA");
    let account = c.webhook_account();
    let allow = Webhook::start(&account, &ca.leaf(&["127.0.0.1"]), &[]);
    let deny = Webhook::start(&account, &ca.leaf(&["127.0.0.1"]), &["--on-error", "deny"]);
    let message = format!(
        "linkerd-multus: NetworkAttachmentDefinition {taken}/linkerd-cni runs macvlan, not linkerd-cni: it is another network with the name the rules need for Linkerd-CNI, and the pod would join it instead, so it is not attached. Rename that network, or run the webhook and the render with another NAD name (--nad-name, nadName); if it is meant to be Linkerd-CNI's, label it app.kubernetes.io/managed-by: linkerd-multus and render it from Git"
    );
    let response = post_once(&allow, &ca, review_in(&taken, json!({})));
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");
    assert_eq!(response["warnings"], json!([message]));
    let response = post_once(&deny, &ca, review_in(&taken, json!({})));
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["message"], message);
    // Made Linkerd-CNI's: both webhooks attach the pod once their watch has it.
    c.put_nad(&taken, "linkerd-cni", &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    for webhook in [&allow, &deny] {
        loop {
            let response = post_once(webhook, &ca, review_in(&taken, json!({})));
            if response["allowed"] == true && response.get("warnings").is_none() {
                assert!(response.get("patch").is_some(), "{response}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the NAD's new config never reached the cache: {response}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn core_settings_come_from_flags_and_the_environment() {
    let c = cluster();
    c.put_nad(&c.openshift, "mesh", &[]);
    let ca = Ca::new("CA");
    let webhook = Webhook::start_with_env(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &["--nad-name", "mesh"],
        &[("LINKERD_MULTUS_PROXY_UID_OFFSET", "5")],
    );
    runtime().block_on(async {
        let tls = connector(&ca.pem, None, &[]);
        let mut conn = Connection::open(&webhook.addr, &tls).await.unwrap();
        let (_, body) = conn
            .post("/mutate", review_in(&c.openshift, json!({})))
            .await
            .unwrap();
        let patch = patch_of(&response_of(&body));
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/metadata/annotations/k8s.v1.cni.cncf.io~1networks", "value": "mesh"},
                {"op": "add", "path": "/metadata/annotations/config.linkerd.io~1proxy-uid", "value": "1000680005"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1owned", "value": "network=created,proxy-uid=1000680005"},
                {"op": "add", "path": "/metadata/annotations/multus.linkerd.io~1config-hash", "value": NAD_HASH}
            ])
        );
    });
}

#[test]
fn client_certificates_are_required_with_client_ca() {
    let c = cluster();
    let ca = Ca::new("serving CA");
    let clients = Ca::new("client CA");
    let strangers = Ca::new("another CA");
    let dir = tempfile::tempdir().unwrap();
    let client_ca = dir.path().join("client-ca.crt");
    std::fs::write(&client_ca, &clients.pem).unwrap();
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &["--client-ca", client_ca.to_str().unwrap()],
    );
    runtime().block_on(async {
        let good = connector(&ca.pem, Some(&clients.leaf(&["apiserver"])), &[]);
        let mut conn = Connection::open(&webhook.addr, &good).await.unwrap();
        let (status, _) = conn.post("/mutate", Bytes::from(CREATE)).await.unwrap();
        assert_eq!(status, 200);
        for (name, tls) in [
            ("no client certificate", connector(&ca.pem, None, &[])),
            (
                "a certificate of another CA",
                connector(&ca.pem, Some(&strangers.leaf(&["x"])), &[]),
            ),
        ] {
            // TLS 1.3 reports a refused client certificate on the first read.
            let refused = match Connection::open(&webhook.addr, &tls).await {
                Err(_) => true,
                Ok(mut conn) => conn.post("/mutate", Bytes::from(CREATE)).await.is_err(),
            };
            assert!(refused, "{name} was let in");
        }
    });
}

#[test]
fn certificates_reload_without_dropping_connections() {
    let c = cluster();
    let first = Ca::new("first CA");
    let second = Ca::new("second CA");
    let webhook = Webhook::start(&c.webhook_account(), &first.leaf(&["127.0.0.1"]), &[]);
    runtime().block_on(async {
        let mut old = Connection::open(&webhook.addr, &connector(&first.pem, None, &[]))
            .await
            .unwrap();
        second.leaf(&["127.0.0.1"]).write(&webhook.dir);
        let deadline = Instant::now() + Duration::from_secs(10);
        let trusts_second = connector(&second.pem, None, &[]);
        loop {
            if Connection::open(&webhook.addr, &trusts_second)
                .await
                .is_ok()
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new certificate was never served"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The connection made before the reload still works.
        let (status, _) = old.post("/mutate", Bytes::from(CREATE)).await.unwrap();
        assert_eq!(status, 200);
        // A broken file is refused and the current certificate stays.
        std::fs::write(webhook.dir.join("tls.crt"), "not a certificate").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while webhook.metric("linkerd_multus_tls_reloads_total{result=\"error\"}") < 1.0 {
            assert!(Instant::now() < deadline, "the broken file was not noticed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            Connection::open(&webhook.addr, &trusts_second)
                .await
                .is_ok()
        );
    });
    assert_eq!(
        webhook.metric("linkerd_multus_tls_reloads_total{result=\"success\"}"),
        1.0
    );
}
