//! A stand-in for the one part of kube-apiserver the webhook uses: list and
//! watch of Namespaces (as metadata) and of NetworkAttachmentDefinitions (all
//! namespaces, whole: each with [`NAD_CONFIG`], or a config of its own), over
//! plain HTTP. It answers what the webhook's caches ask:
//! `GET /api/v1/namespaces` or
//! `GET /apis/k8s.cni.cncf.io/v1/network-attachment-definitions` (a list with a
//! resourceVersion) and the same with `watch=true` (newline-delimited events
//! after a resourceVersion, held open), and it can go down and come back,
//! wholly or for one resource.
//!
//! Only the benchmarks use it; every test runs against a real kube-apiserver
//! (tests/common/kube_apiserver.rs). The webhook benchmark measures the
//! webhook's own HTTP path with 10,000 namespaces in its cache: through a real
//! API server those take about a minute to create on every run, and the API
//! server's own work would share the machine's two cores with the servers
//! being measured.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::mpsc;

type Body = BoxBody<Bytes, Infallible>;

/// The list and watch path of Namespaces.
pub const NAMESPACES: &str = "/api/v1/namespaces";
/// The list and watch path of NetworkAttachmentDefinitions in all namespaces.
pub const NADS: &str = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions";

/// The config of every NAD: Linkerd-CNI's as rendering gives it from the
/// version-2.19 ConfigMap (testdata/golden/generation-version-2-19). Its hash
/// is the webhook's stamp in `baseline::ATTACH_PATCH`.
pub const NAD_CONFIG: &str = r#"{
  "cniVersion": "0.3.0",
  "name": "linkerd-cni",
  "type": "linkerd-cni",
  "log_level": "info",
  "kubernetes": {
    "kubeconfig": "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"
  },
  "linkerd": {
    "incoming-proxy-port": 4143,
    "outgoing-proxy-port": 4140,
    "proxy-uid": 2102,
    "ports-to-redirect": [],
    "inbound-ports-to-ignore": [
      "4191",
      "4190"
    ],
    "simulate": false,
    "use-wait-flag": false,
    "iptables-mode": "nft",
    "ipv6": false
  }
}"#;

/// The objects of one resource and their history.
#[derive(Default)]
struct Collection {
    /// By `namespace/name` (`name` for Namespaces).
    objects: BTreeMap<String, Value>,
    /// Every change: (resourceVersion, watch event line).
    log: Vec<(u64, Bytes)>,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
    /// Every request for this resource gets 500.
    down: bool,
}

#[derive(Default)]
struct State {
    version: u64,
    collections: BTreeMap<&'static str, Collection>,
    down: bool,
    lists: usize,
}

/// The fake API server, serving on a thread of its own until dropped.
pub struct FakeApiServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn object(
    namespace: Option<&str>,
    name: &str,
    version: u64,
    annotations: &BTreeMap<String, String>,
) -> Value {
    let mut object = json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {
            "name": name,
            "resourceVersion": version.to_string(),
            "annotations": annotations,
        }
    });
    match namespace {
        Some(namespace) => object["metadata"]["namespace"] = json!(namespace),
        None => object["metadata"]["labels"] = json!({"kubernetes.io/metadata.name": name}),
    }
    object
}

impl FakeApiServer {
    /// Starts it on a free loopback port.
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding loopback");
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let served = state.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tokio::pin!(stopped);
                loop {
                    let tcp = tokio::select! {
                        accepted = listener.accept() => match accepted {
                            Ok((tcp, _)) => tcp,
                            Err(_) => continue,
                        },
                        _ = &mut stopped => break,
                    };
                    let state = served.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(answer(&request, &state)) }
                        });
                        http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), service)
                            .await
                            .ok();
                    });
                }
            });
        });
        FakeApiServer {
            url,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Creates or updates a namespace.
    pub fn put(&self, name: &str, annotations: &[(&str, &str)]) {
        self.put_object(NAMESPACES, None, name, annotations, NAD_CONFIG);
    }

    /// Deletes a namespace.
    pub fn delete(&self, name: &str) {
        self.delete_object(NAMESPACES, name);
    }

    /// Creates or updates a NetworkAttachmentDefinition.
    pub fn put_nad(&self, namespace: &str, name: &str, annotations: &[(&str, &str)]) {
        self.put_object(NADS, Some(namespace), name, annotations, NAD_CONFIG);
    }

    /// Creates or updates a NetworkAttachmentDefinition whose `spec.config` is `config`.
    pub fn put_nad_config(
        &self,
        namespace: &str,
        name: &str,
        annotations: &[(&str, &str)],
        config: &str,
    ) {
        self.put_object(NADS, Some(namespace), name, annotations, config);
    }

    /// Deletes a NetworkAttachmentDefinition.
    pub fn delete_nad(&self, namespace: &str, name: &str) {
        self.delete_object(NADS, &format!("{namespace}/{name}"));
    }

    fn put_object(
        &self,
        path: &'static str,
        namespace: Option<&str>,
        name: &str,
        annotations: &[(&str, &str)],
        config: &str,
    ) {
        let annotations: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let key = match namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.to_string(),
        };
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        let version = state.version;
        let collection = state.collections.entry(path).or_default();
        let kind = if collection.objects.contains_key(&key) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let mut object = object(namespace, name, version, &annotations);
        if path == NADS {
            object["apiVersion"] = json!("k8s.cni.cncf.io/v1");
            object["kind"] = json!("NetworkAttachmentDefinition");
            object["spec"] = json!({ "config": config });
        }
        collection.objects.insert(key, object.clone());
        publish(collection, version, kind, object);
    }

    fn delete_object(&self, path: &'static str, key: &str) {
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        let version = state.version;
        let collection = state.collections.entry(path).or_default();
        if let Some(mut object) = collection.objects.remove(key) {
            object["metadata"]["resourceVersion"] = json!(version.to_string());
            publish(collection, version, "DELETED", object);
        }
    }

    /// Takes one resource (`NAMESPACES`, `NADS`) down or brings it back.
    pub fn set_resource_down(&self, path: &'static str, down: bool) {
        let mut state = self.state.lock().unwrap();
        let collection = state.collections.entry(path).or_default();
        collection.down = down;
        if down {
            collection.watchers.clear();
        }
    }

    /// Takes the server down (every request gets 500, open watches end) or brings it back.
    pub fn set_down(&self, down: bool) {
        let mut state = self.state.lock().unwrap();
        state.down = down;
        if down {
            for collection in state.collections.values_mut() {
                collection.watchers.clear();
            }
        }
    }

    /// How many lists it has answered.
    pub fn lists(&self) -> usize {
        self.state.lock().unwrap().lists
    }

    /// Writes a kubeconfig pointing at it and returns its path.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user:\n    token: fake\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        for collection in self.state.lock().unwrap().collections.values_mut() {
            collection.watchers.clear();
        }
        if let Some(stop) = self.stop.take() {
            stop.send(()).ok();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

fn publish(collection: &mut Collection, version: u64, kind: &str, object: Value) {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    line.push(b'\n');
    let line = Bytes::from(line);
    collection.log.push((version, line.clone()));
    collection.watchers.retain(|w| w.send(line.clone()).is_ok());
}

fn full(status: StatusCode, body: Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    response
}

fn answer(request: &Request<Incoming>, state: &Mutex<State>) -> Response<Body> {
    let mut state = state.lock().unwrap();
    let path = match request.uri().path() {
        NAMESPACES => NAMESPACES,
        NADS => NADS,
        _ => {
            return full(
                StatusCode::NOT_FOUND,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}),
            );
        }
    };
    let version = state.version;
    let all_down = state.down;
    let collection = state.collections.entry(path).or_default();
    // 500, as when etcd is unreachable: kube's client retries 429, 503 and 504 on its own.
    if all_down || collection.down {
        return full(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "down for the test", "code": 500}),
        );
    }
    let query: BTreeMap<String, String> = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if query.get("watch").is_some_and(|v| v == "true" || v == "1") {
        let since: u64 = query
            .get("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let (tx, rx) = mpsc::unbounded_channel();
        for (version, line) in &collection.log {
            if *version > since {
                tx.send(line.clone()).ok();
            }
        }
        collection.watchers.push(tx);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            let line = rx.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(line)), rx))
        });
        let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
        response
            .headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        return response;
    }
    let (items, next, offset) = page(collection, &query);
    if offset == 0 {
        state.lists += 1;
    }
    let (api_version, kind) = match path {
        NADS => ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinitionList"),
        _ => ("meta.k8s.io/v1", "PartialObjectMetadataList"),
    };
    full(
        StatusCode::OK,
        json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"resourceVersion": version.to_string(), "continue": next},
            "items": items,
        }),
    )
}

/// One page of a list, as the API server pages: at most `limit` items from
/// the offset `continue` gives (its token here); the items, the next token
/// (empty on the last page) and the offset.
fn page(collection: &Collection, query: &BTreeMap<String, String>) -> (Vec<Value>, String, usize) {
    let number = |key: &str| query.get(key).and_then(|v| v.parse::<usize>().ok());
    let (limit, offset) = (
        number("limit").unwrap_or(usize::MAX),
        number("continue").unwrap_or(0),
    );
    let total = collection.objects.len();
    let end = offset.saturating_add(limit).min(total);
    let items = collection
        .objects
        .values()
        .skip(offset)
        .take(end.saturating_sub(offset))
        .cloned()
        .collect();
    let next = if end < total {
        end.to_string()
    } else {
        String::new()
    };
    (items, next, offset)
}
