//! The webhook's caches: following the watch, reading live what they cannot vouch for, and
//! readiness until synced and draining on SIGTERM.

use super::*;

/// The annotations of a namespace the rules attach.
const ENABLED: [(&str, &str); 2] = [(MULTUS, "enabled"), (INJECT, "enabled")];

/// The webhook's own API server, on the binary's etcd, to stop and start
/// again. Without a watch cache, a resumed watch is answered from etcd's
/// history, the one place where compaction shows: a watch cache would
/// answer a restarted server's watchers from its own, younger window.
fn own_api_server(c: &Cluster) -> ApiServer {
    c.plane.new_api_server(&["--watch-cache=false"])
}

/// The live reads of `w` of `object` that ended in `result`.
fn live_reads(w: &Webhook, object: &str, result: &str) -> f64 {
    w.metric(&format!(
        "linkerd_multus_live_reads_total{{object=\"{object}\",result=\"{result}\"}}"
    ))
}

/// Waits up to a minute for `check`, failing with `what`.
fn eventually(what: &str, mut check: Box<dyn FnMut() -> bool + '_>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sets `namespace`'s Multus annotation to `value` (and its Linkerd one to enabled).
fn annotate(c: &Cluster, namespace: &str, value: &str) {
    c.plane.kubectl(&[
        "annotate",
        "namespace",
        namespace,
        "--overwrite",
        &format!("{MULTUS}={value}"),
        &format!("{INJECT}=enabled"),
    ]);
}

#[test]
fn the_cache_follows_the_watch_resumes_it_and_lists_again_when_its_version_expires() {
    let c = cluster();
    let server = own_api_server(&c);
    c.plane.start_ready(&server);
    let (_, kubeconfig) = c.account_on(&server, WEBHOOK_ROLE);
    let ca = Ca::new("CA");
    let webhook = Webhook::start(&kubeconfig, &ca.leaf(&["127.0.0.1"]), &[]);
    // A connection per review: the webhook closes idle ones.
    let patched = |namespace: &str| {
        post_once(&webhook, &ca, review_in(namespace, json!({})))
            .get("patch")
            .is_some()
    };
    let annotate = |namespace: &str, value: &str| annotate(&c, namespace, value);
    let lists = |w: &Webhook| w.metric("linkerd_multus_namespace_cache_lists_total");
    assert_eq!(lists(&webhook), 1.0);
    assert!(!patched(&c.plain));
    annotate(&c.plain, "enabled");
    eventually(
        "the annotation change to reach the cache",
        Box::new(|| patched(&c.plain)),
    );

    // The API server stops: the webhook serves from its last state, and says so.
    server.stop();
    eventually(
        "the broken watch to show in the metrics",
        Box::new(|| webhook.metric("linkerd_multus_namespace_watch_up") == 0.0),
    );
    assert!(patched(&c.plain));
    assert!(patched(&c.demo));
    assert_eq!(webhook.ops_get("/readyz").unwrap().0, 200);
    std::thread::sleep(Duration::from_millis(1100));
    assert!(webhook.metric("linkerd_multus_namespace_cache_age_seconds") >= 1.0);
    // Annotated (through the other API server) while the webhook's is down.
    annotate(&c.demo, "disabled");
    c.plane.start_ready(&server);
    eventually(
        "the watch to recover",
        Box::new(|| webhook.metric("linkerd_multus_namespace_watch_up") == 1.0),
    );
    eventually(
        "the change made while the API server was down to reach the cache",
        Box::new(|| !patched(&c.demo)),
    );
    assert_eq!(
        webhook.metric("linkerd_multus_namespace_cache_age_seconds"),
        0.0
    );
    assert_eq!(lists(&webhook), 1.0, "the watch resumed without a new list");

    // Down again; meanwhile etcd's history is compacted past the webhook's
    // resourceVersion: the resumed watch gets 410 Gone and the cache lists again.
    server.stop();
    eventually(
        "the broken watch to show in the metrics",
        Box::new(|| webhook.metric("linkerd_multus_namespace_watch_up") == 0.0),
    );
    annotate(&c.demo, "enabled");
    c.plane.compact_etcd();
    c.plane.start_ready(&server);
    eventually(
        "a new list after the expired resourceVersion",
        Box::new(|| lists(&webhook) == 2.0),
    );
    assert!(patched(&c.demo));
    assert_eq!(webhook.metric("linkerd_multus_namespace_watch_up"), 1.0);
    webhook.signal(nix::sys::signal::Signal::SIGTERM);
    let (_, stderr) = webhook.stop();
    for want in [
        "namespace watch broken; serving from the last known namespaces",
        "namespace watch recovered",
        "namespace watch expired (410 Gone); listing again",
    ] {
        assert!(stderr.contains(want), "{want} not in {stderr}");
    }
}

/// A cache whose watch is up answers for what it lacks: reviews naming
/// made-up namespaces cost no API call, so a flood of them spends nothing
/// another tenant needs; a namespace and its NAD made a moment before their
/// pod are waited for (the watch brings them), not read.
#[test]
fn a_cache_whose_watch_is_up_answers_for_what_it_lacks() {
    let c = cluster();
    let ca = Ca::new("CA");
    // Waits of up to 5 s for the watch: generous for a loaded machine.
    let webhook = Webhook::start(
        &c.webhook_account(),
        &ca.leaf(&["127.0.0.1"]),
        &["--live-read-timeout", "5s"],
    );
    let made_up = std::thread::scope(|s| {
        let flood: Vec<_> = (0..16)
            .map(|t| {
                let (webhook, ca) = (&webhook, &ca);
                s.spawn(move || {
                    (0..2)
                        .map(|i| {
                            post_once(
                                webhook,
                                ca,
                                review_in(&format!("made-up-{t}-{i}"), json!({})),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // Meanwhile a tenant makes a namespace and its NAD, and at once its pod.
        let fresh = c.plane.namespace("fresh", &ENABLED);
        c.put_nad(&fresh, "linkerd-cni", &[]);
        let response = post_once(&webhook, &ca, review_in(&fresh, json!({})));
        assert!(response.get("warnings").is_none(), "{response}");
        assert!(
            patch_of(&response).to_string().contains("linkerd-cni"),
            "{response}"
        );
        flood
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect::<Vec<_>>()
    });
    for response in &made_up {
        assert_eq!(response["allowed"], true, "{response}");
        assert!(response.get("patch").is_none(), "{response}");
        let warning = response["warnings"][0].as_str().unwrap_or_default();
        assert!(
            warning.contains(
                "does not exist: the webhook's cache, whose watch is up, does not hold it"
            ),
            "{response}"
        );
    }
    for object in ["namespace", "nad"] {
        for result in ["found", "absent", "failed", "refused", "remembered"] {
            assert_eq!(
                live_reads(&webhook, object, result),
                0.0,
                "{object} {result}"
            );
        }
    }
}

/// What the caches cannot vouch for is read live before a pod is decided:
/// a namespace and a NAD missing from caches whose watch is down (within
/// `--max-watch-outage`) are read and the pod attached; a namespace the API
/// server does not have, or cannot give, gets the `--on-error` answer. A
/// cache whose watch has been down longer than `--max-watch-outage` fails
/// /readyz with the reason, and its replica reads even the namespaces it holds.
#[test]
fn what_the_caches_cannot_vouch_for_is_read_live_or_answered_as_on_error_says() {
    let c = cluster();
    let server = c.plane.new_api_server(&[]);
    c.plane.start_ready(&server);
    let (account, kubeconfig) = c.account_on(&server, WEBHOOK_ROLE);
    let ca = Ca::new("CA");
    let leaf = ca.leaf(&["127.0.0.1"]);
    // Both synced now; one tolerates an hour without its watches, one a second.
    let patient = Webhook::start(&kubeconfig, &leaf, &["--max-watch-outage", "1h"]);
    let strict = Webhook::start(&kubeconfig, &leaf, &["--max-watch-outage", "1s"]);
    assert_eq!(live_reads(&patient, "namespace", "found"), 0.0);

    // The account keeps `get` but loses list and watch; the API server
    // restarts, so the watches must be made again, and cannot be.
    c.grant(&account, GET_ONLY_ROLE);
    c.revoke(&account, WEBHOOK_ROLE);
    server.stop();
    c.plane.start_ready(&server);
    for w in [&patient, &strict] {
        w.wait_for_metric(
            "linkerd_multus_namespace_watch_up",
            0.0,
            "the broken watch never showed",
        );
    }
    let body = strict.wait_for("/readyz", 503);
    for want in [
        "not ready: the namespace watch has been down for ",
        "longer than --max-watch-outage 1s",
        "forbidden",
    ] {
        assert!(body.contains(want), "{want:?} not in {body}");
    }
    assert_eq!(patient.ops_get("/readyz").unwrap().0, 200);

    what_no_cache_holds_is_read_live(&c, &ca, &patient, &strict);

    a_namespace_that_does_not_exist_gets_on_error(&c, &ca, &patient);

    a_flood_of_made_up_namespaces_leaves_a_tenant_its_reads(&c, &ca, &strict);

    // No rights at all: the live read fails, and the pod gets --on-error too.
    c.revoke(&account, GET_ONLY_ROLE);
    let denier = Webhook::spawn(&kubeconfig, &leaf, &["--on-error", "deny"], &[]);
    let later = c.plane.namespace("later", &ENABLED);
    let deadline = Instant::now() + Duration::from_secs(60);
    let response = loop {
        // The revocation reaches the API server's authorizer within moments.
        let response = post_once(&patient, &ca, review_in(&later, json!({})));
        if response["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("forbidden"))
            || Instant::now() > deadline
        {
            break response;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains(&format!(
            "namespace {later} is not in the webhook's cache, and reading it live failed"
        )) && warning.contains("forbidden"),
        "{response}"
    );
    assert!(response.get("patch").is_none(), "{response}");
    assert!(live_reads(&patient, "namespace", "failed") >= 1.0);
    never_synced_is_not_ready_and_denies(&c, &ca, &denier);

    // The rights back: the watches resume and the strict replica is ready again.
    c.grant(&account, WEBHOOK_ROLE);
    strict.wait_for("/readyz", 200);
    denier.wait_for("/readyz", 200);
    assert_eq!(strict.metric("linkerd_multus_namespace_watch_up"), 1.0);
}

/// A namespace and its NAD made after the watches broke: in neither cache, read live; the
/// strict replica reads live even what it holds.
fn what_no_cache_holds_is_read_live(c: &Cluster, ca: &Ca, patient: &Webhook, strict: &Webhook) {
    // A namespace and its NAD made after the watches broke: in neither cache.
    let fresh = c.plane.namespace("fresh", &ENABLED);
    c.put_nad(&fresh, "linkerd-cni", &[]);
    for w in [patient, strict] {
        let response = post_once(w, ca, review_in(&fresh, json!({})));
        assert_eq!(response["allowed"], true, "{response}");
        assert!(response.get("warnings").is_none(), "{response}");
        let patch = patch_of(&response).to_string();
        assert!(patch.contains("linkerd-cni"), "{patch}");
    }
    assert_eq!(live_reads(patient, "namespace", "found"), 1.0);
    assert_eq!(live_reads(patient, "nad", "found"), 1.0);
    // The strict replica's cache no longer vouches even for what it holds.
    let response = post_once(strict, ca, review_in(&c.demo, json!({})));
    assert!(patch_of(&response).to_string().contains("linkerd-cni"));
    assert_eq!(live_reads(strict, "namespace", "found"), 2.0);
    assert_eq!(live_reads(patient, "namespace", "found"), 1.0);
    post_once(patient, ca, review_in(&c.demo, json!({})));
    assert_eq!(
        live_reads(patient, "namespace", "found"),
        1.0,
        "a cache within its outage answers from what it holds"
    );
}

/// A namespace that does not exist: the --on-error answer, never a guess.
fn a_namespace_that_does_not_exist_gets_on_error(c: &Cluster, ca: &Ca, patient: &Webhook) {
    // A namespace that does not exist: the --on-error answer, never a guess.
    let ghost = c.plane.unique_name("ghost");
    let response = post_once(patient, ca, review_in(&ghost, json!({})));
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");
    let warning = response["warnings"][0].as_str().unwrap().to_string();
    assert!(
        warning.contains(&format!(
            "namespace {ghost} is in neither the webhook's cache nor the API server"
        )),
        "{warning}"
    );
    assert_eq!(live_reads(patient, "namespace", "absent"), 1.0);
    // Asked again at once: the answer is remembered, not read again.
    let again = post_once(patient, ca, review_in(&ghost, json!({})));
    assert_eq!(again["warnings"], response["warnings"], "{again}");
    assert_eq!(live_reads(patient, "namespace", "absent"), 1.0);
    assert_eq!(live_reads(patient, "namespace", "remembered"), 1.0);
}

/// Reviews naming made-up namespaces, as fast as 16 clients send them, until
/// their share of the live-read budget is spent: a tenant's review in a
/// namespace the cache knows is still read live and its pod attached.
fn a_flood_of_made_up_namespaces_leaves_a_tenant_its_reads(c: &Cluster, ca: &Ca, strict: &Webhook) {
    let refused = || live_reads(strict, "namespace", "refused");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..16 {
            let stop = &stop;
            s.spawn(move || {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let namespace = format!("made-up-{t}-{i}");
                    let response = post_once(strict, ca, review_in(&namespace, json!({})));
                    assert!(response.get("patch").is_none(), "{response}");
                    i += 1;
                }
            });
        }
        // The metrics are read here alone: the ops port lets one address
        // have a few requests at once.
        let deadline = Instant::now() + Duration::from_secs(60);
        while refused() == 0.0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert!(
        refused() > 0.0,
        "the flood never spent the strangers' share"
    );
    let response = post_once(strict, ca, review_in(&c.demo, json!({})));
    assert!(response.get("warnings").is_none(), "{response}");
    assert!(
        patch_of(&response).to_string().contains("linkerd-cni"),
        "{response}"
    );
}

/// A webhook that never synced: not ready, and denying under --on-error deny.
fn never_synced_is_not_ready_and_denies(c: &Cluster, ca: &Ca, denier: &Webhook) {
    // Never synced: /readyz says so, and a review that reaches it anyway is
    // denied with the reason under --on-error deny.
    let body = denier.wait_for("/readyz", 503);
    assert!(
        body.contains("the namespace cache has not synced yet"),
        "{body}"
    );
    let response = post_once(denier, ca, review_in(&c.demo, json!({})));
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("forbidden"),
        "{response}"
    );
}

#[test]
fn not_ready_until_synced_and_sigterm_drains_requests_in_flight() {
    let c = cluster();
    // An API server of this test's own, not started yet.
    let server = c.plane.new_api_server(&[]);
    let (_, kubeconfig) = c.account_on(&server, WEBHOOK_ROLE);
    let ca = Ca::new("CA");
    let leaf = ca.leaf(&["127.0.0.1"]);
    let webhook = json_logging_webhook(&kubeconfig, &leaf, "500ms");
    let body = webhook.wait_for("/readyz", 503);
    assert!(body.contains("not synced"), "{body}");
    assert_eq!(webhook.ops_get("/healthz").unwrap().0, 200);
    c.plane.start_ready(&server);
    webhook.wait_for("/readyz", 200);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, body) = rt.block_on(sigterm_mid_request(&webhook, &ca, &c));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":true"));
    let (code, stderr) = webhook.stop();
    assert_eq!(code, Some(0), "{stderr}");
    // JSON logs: one object per line, the shutdown told.
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let messages: Vec<&str> = lines.iter().filter_map(|l| l["message"].as_str()).collect();
    for want in [
        "namespace cache synced",
        "shutting down: /readyz fails from now on",
        "drained",
        "stopped",
    ] {
        assert!(
            messages.iter().any(|m| m.starts_with(want)),
            "{want} not in {messages:?}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "patched" && l["namespace"] == c.demo.as_str())
    );
}

/// A webhook logging JSON (each patch at debug) with `shutdown_delay`.
fn json_logging_webhook(kubeconfig: &Path, leaf: &Leaf, shutdown_delay: &str) -> Webhook {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = leaf.write(dir.path());
    let (port, ops_port) = (free_port(), free_port());
    let child = Guard::spawn(
        Command::new(bin())
            .args([
                "webhook",
                "--log-format",
                "json",
                // Each patch is logged at debug.
                "--log-level",
                "info,linkerd_multus=debug",
                "--shutdown-delay",
                shutdown_delay,
            ])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--ops-listen", &format!("127.0.0.1:{ops_port}")])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("RUST_LOG")
            .stderr(Stdio::piped()),
    )
    .unwrap();
    Webhook {
        child,
        addr: format!("127.0.0.1:{port}"),
        ops: format!("127.0.0.1:{ops_port}"),
        dir: dir.path().to_path_buf(),
        _dir: dir,
    }
}

/// A review's headers and half its body, then SIGTERM, then the rest: its status and the
/// response.
async fn sigterm_mid_request(webhook: &Webhook, ca: &Ca, c: &Cluster) -> (u16, String) {
    let tls = connector(&ca.pem, None, &[b"http/1.1"]);
    let tcp = tokio::net::TcpStream::connect(&webhook.addr).await.unwrap();
    let mut stream = tls
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap();
    // Headers and half the body, then SIGTERM, then the rest.
    let create = moved(CREATE, &c.demo, json!({}));
    let half = create.len() / 2;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let head = format!(
        "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        create.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&create[..half]).await.unwrap();
    stream.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    webhook.signal(nix::sys::signal::Signal::SIGTERM);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, _) = webhook.ops_get("/readyz").unwrap();
    assert_eq!(status, 503, "not ready while shutting down");
    stream.write_all(&create[half..]).await.unwrap();
    let mut text = Vec::new();
    stream.read_to_end(&mut text).await.unwrap();
    let text = String::from_utf8(text).unwrap();
    let status: u16 = text.split(' ').nth(1).unwrap().parse().unwrap();
    (status, text)
}

/// The API server pools its webhook connections by the Service, not by
/// endpoint: it keeps sending reviews over a kept-alive HTTP/1 connection to
/// a replica that has left the endpoints, and one sent as the replica closes
/// that connection, idle between two reviews, is lost (as in the rollout of
/// tests/shipped/rollout.rs). From SIGTERM on, each answer says
/// `Connection: close` and the connection closes after it, so no review can
/// meet its closing; a new connection is still answered during the delay.
#[test]
fn after_sigterm_each_http1_answer_closes_its_connection() {
    let c = cluster();
    let ca = Ca::new("CA");
    // A delay long enough for the exchanges after SIGTERM, however slow.
    let webhook = json_logging_webhook(&c.webhook_account(), &ca.leaf(&["127.0.0.1"]), "10s");
    webhook.wait_for("/readyz", 200);
    let rt = runtime();
    let review = || review_in(&c.demo, json!({}));
    let mut kept = rt.block_on(open_http1(&webhook, &ca));
    let first = rt.block_on(exchange(&mut kept, &review()));
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(!closes(&first), "kept alive before SIGTERM:\n{first}");
    webhook.signal(nix::sys::signal::Signal::SIGTERM);
    webhook.wait_for("/readyz", 503);
    // The next review over the kept-alive connection: answered, and the
    // connection closed after it.
    let second = rt.block_on(exchange(&mut kept, &review()));
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains("\"allowed\":true"), "{second}");
    assert!(
        closes(&second),
        "no Connection: close after SIGTERM:\n{second}"
    );
    assert!(
        rt.block_on(closed(&mut kept)),
        "the connection stayed open after an answer that closes it"
    );
    // A client that still picks this replica gets a new connection answered.
    let mut new = rt.block_on(open_http1(&webhook, &ca));
    let third = rt.block_on(exchange(&mut new, &review()));
    assert!(third.starts_with("HTTP/1.1 200"), "{third}");
    assert!(closes(&third), "{third}");
}

type Http1 = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A TLS connection to the webhook speaking HTTP/1.1.
async fn open_http1(webhook: &Webhook, ca: &Ca) -> Http1 {
    let tcp = tokio::net::TcpStream::connect(&webhook.addr).await.unwrap();
    connector(&ca.pem, None, &[b"http/1.1"])
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap()
}

/// POSTs `review` over `stream` (kept alive: no `Connection` header) and
/// reads one answer, head and body, by its Content-Length.
async fn exchange(stream: &mut Http1, review: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let head = format!(
        "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        review.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(review).await.unwrap();
    stream.flush().await.unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.unwrap();
        assert_eq!(n, 1, "closed before the answer's head ended: {answer:?}");
        answer.push(byte[0]);
    }
    let text = String::from_utf8(answer.clone()).unwrap();
    let length: usize = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no Content-Length in {text}"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    answer.extend_from_slice(&body);
    String::from_utf8(answer).unwrap()
}

/// Whether `answer`'s head says `Connection: close`.
fn closes(answer: &str) -> bool {
    let head = answer.split("\r\n\r\n").next().unwrap_or_default();
    head.lines()
        .any(|l| l.eq_ignore_ascii_case("connection: close"))
}

/// Whether the server closes `stream` (EOF or reset) within 5 s, nothing more sent.
async fn closed(stream: &mut Http1) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}
