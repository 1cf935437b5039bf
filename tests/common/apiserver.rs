//! A stand-in for the one part of kube-apiserver the webhook uses: list and
//! watch of Namespaces as metadata, over plain HTTP. No kube-apiserver can be
//! installed on the build machines (no registry ships one); the real API
//! server is exercised by `scripts/e2e-webhook.sh` against a real cluster.
//! It answers what kube-rs's watcher asks: `GET /api/v1/namespaces` (a list
//! with a resourceVersion) and the same with `watch=true` (newline-delimited
//! events after a resourceVersion, held open), and it can go down and come back.
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

#[derive(Default)]
struct State {
    version: u64,
    namespaces: BTreeMap<String, Value>,
    /// Every change: (resourceVersion, watch event line).
    log: Vec<(u64, Bytes)>,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
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

fn object(name: &str, version: u64, annotations: &BTreeMap<String, String>) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {
            "name": name,
            "resourceVersion": version.to_string(),
            "labels": {"kubernetes.io/metadata.name": name},
            "annotations": annotations,
        }
    })
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
        let annotations: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        let version = state.version;
        let kind = if state.namespaces.contains_key(name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let object = object(name, version, &annotations);
        state.namespaces.insert(name.to_string(), object.clone());
        publish(&mut state, version, kind, object);
    }

    /// Deletes a namespace.
    pub fn delete(&self, name: &str) {
        let mut state = self.state.lock().unwrap();
        if let Some(mut object) = state.namespaces.remove(name) {
            state.version += 1;
            let version = state.version;
            object["metadata"]["resourceVersion"] = json!(version.to_string());
            publish(&mut state, version, "DELETED", object);
        }
    }

    /// Takes the server down (every request gets 500, open watches end) or brings it back.
    pub fn set_down(&self, down: bool) {
        let mut state = self.state.lock().unwrap();
        state.down = down;
        if down {
            state.watchers.clear();
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
        self.state.lock().unwrap().watchers.clear();
        if let Some(stop) = self.stop.take() {
            stop.send(()).ok();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

fn publish(state: &mut State, version: u64, kind: &str, object: Value) {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    line.push(b'\n');
    let line = Bytes::from(line);
    state.log.push((version, line.clone()));
    state.watchers.retain(|w| w.send(line.clone()).is_ok());
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
    // 500, as when etcd is unreachable: kube's client retries 429, 503 and 504 on its own.
    if state.down {
        return full(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "down for the test", "code": 500}),
        );
    }
    if request.uri().path() != "/api/v1/namespaces" {
        return full(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}),
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
        for (version, line) in &state.log {
            if *version > since {
                tx.send(line.clone()).ok();
            }
        }
        state.watchers.push(tx);
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
    state.lists += 1;
    let items: Vec<&Value> = state.namespaces.values().collect();
    full(
        StatusCode::OK,
        json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadataList",
            "metadata": {"resourceVersion": state.version.to_string()},
            "items": items,
        }),
    )
}
