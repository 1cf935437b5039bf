//! Server-side apply, creates, merge patches and token requests from the test process, as
//! `kubectl apply --server-side -f -`, `kubectl create`, `kubectl annotate` and `kubectl
//! create token` make them. An apply PATCHes each document of a YAML stream to its object's
//! path as `application/apply-patch+yaml`, that path found from the API server's discovery
//! (kept per API version, read again while a kind is missing, as just after its CRD is
//! applied). The fixtures apply hundreds of objects a run; a
//! `kubectl` process each cost a tenth of a second of CPU, and kubectl took a third of the
//! suite's CPU (`perf record -a` over a run, by command). Where kubectl is the subject (the
//! docs' commands, the shipped packages applied as a user applies them), the tests still
//! run it.

use std::collections::HashMap;

use bytes::Bytes;

use super::super::https::Connection;
use super::super::yaml::parse_yaml_stream;
use super::*;

/// How long a kind may be missing from discovery (its CRD applied a moment before) before
/// an apply fails.
const DISCOVERY_WAIT: Duration = Duration::from_secs(10);

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A resource of an API version, as discovery lists it.
#[derive(Clone, Debug)]
struct Resource {
    /// Its plural name in paths: `pods`.
    name: String,
    namespaced: bool,
}

/// Discovery's answers, by API version then kind.
#[derive(Default)]
pub(super) struct Discovery(Mutex<HashMap<String, HashMap<String, Resource>>>);

/// One object of the stream: where it goes and its text.
struct Document<'a> {
    api_version: String,
    kind: String,
    name: String,
    namespace: Option<String>,
    text: &'a str,
}

impl ControlPlane {
    /// `kubectl apply --server-side --field-manager=MANAGER -f -` of `yaml` as the admin, from
    /// this process: kubectl's lines (`kind/name serverside-applied`), or what failed.
    pub fn apply_as(&self, manager: &str, yaml: &str) -> Result<String, String> {
        let documents = documents(yaml)?;
        self.with_connection(async |connection| {
            let mut applied = String::new();
            for document in &documents {
                let resource = self.resource(connection, document).await?;
                let path = object_path(document, &resource);
                let query = format!("{path}?fieldManager={manager}&fieldValidation=Strict");
                let (status, body) = send(
                    connection,
                    hyper::Method::PATCH,
                    &query,
                    "application/apply-patch+yaml",
                    document.text,
                )
                .await?;
                if !(200..300).contains(&status) {
                    return Err(format!(
                        "{} {}: the API server answered {status}: {}",
                        document.kind,
                        path,
                        String::from_utf8_lossy(&body)
                    ));
                }
                writeln!(
                    applied,
                    "{}/{} serverside-applied",
                    document.kind.to_lowercase(),
                    document.name
                )
                .unwrap();
            }
            Ok(applied)
        })
    }

    /// A token of ServiceAccount `namespace/name` for `seconds` (the TokenRequest API, as
    /// `kubectl create token --duration` asks it).
    pub fn create_token(&self, namespace: &str, name: &str, seconds: u64) -> String {
        let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token");
        let request = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        })
        .to_string();
        let answer = self
            .json_request(hyper::Method::POST, &path, "application/json", &request)
            .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"));
        answer["status"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token in {answer}"))
            .to_string()
    }

    /// Creates `pod` in the namespace its metadata names, as the admin, as `kubectl create -o
    /// json -f -` (with `dry_run`, `--dry-run=server`) does: the pod the API server stored, or
    /// would store, or what failed.
    pub fn create_pod(
        &self,
        pod: &serde_json::Value,
        dry_run: bool,
    ) -> Result<serde_json::Value, String> {
        let namespace = pod["metadata"]["namespace"]
            .as_str()
            .ok_or_else(|| format!("no metadata.namespace in {pod}"))?;
        let path = match dry_run {
            true => format!("/api/v1/namespaces/{namespace}/pods?dryRun=All"),
            false => format!("/api/v1/namespaces/{namespace}/pods"),
        };
        let body = pod.to_string();
        self.json_request(hyper::Method::POST, &path, "application/json", &body)
    }

    /// A JSON merge patch of the object at `path` as the admin, as `kubectl patch --type=merge`
    /// (and `kubectl annotate --overwrite`) makes it: the object as patched, or what failed.
    pub fn merge_patch(
        &self,
        path: &str,
        patch: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let patch = patch.to_string();
        self.json_request(
            hyper::Method::PATCH,
            path,
            "application/merge-patch+json",
            &patch,
        )
    }

    /// `kubectl annotate namespace NAMESPACE --overwrite KEY=VALUE` as the admin, from this
    /// process (a merge patch); panics with what failed.
    pub fn annotate_namespace(&self, namespace: &str, key: &str, value: &str) {
        let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
        self.merge_patch(&format!("/api/v1/namespaces/{namespace}"), &patch)
            .unwrap_or_else(|e| panic!("annotating namespace {namespace} {key}={value}: {e}"));
    }

    /// Sends `body` to `path` and reads the JSON the API server answers with 2xx.
    fn json_request(
        &self,
        method: hyper::Method,
        path: &str,
        content_type: &str,
        body: &str,
    ) -> Result<serde_json::Value, String> {
        let (status, answer) = self.with_connection(async |connection| {
            send(connection, method.clone(), path, content_type, body).await
        })?;
        if !(200..300).contains(&status) {
            return Err(format!(
                "{method} {path}: the API server answered {status}: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
        serde_json::from_slice(&answer).map_err(|e| format!("{method} {path}: {e}"))
    }

    /// Waits until CRD `name` is Established, as `kubectl wait --for=condition=Established
    /// --timeout=60s crd/NAME` does; panics with its last state after 60 s.
    pub fn wait_established(&self, name: &str) {
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let crd = self.get_json(&path);
            let established = crd.as_ref().is_some_and(|crd| {
                crd["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "CRD {name} is not Established after 60 s: {crd:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `work` on one connection to the first API server, as the admin, on a runtime of
    /// its own.
    fn with_connection<T>(
        &self,
        work: impl AsyncFnOnce(&mut Connection) -> Result<T, String>,
    ) -> Result<T, String> {
        let connector =
            super::super::https::connector(&self.ca.pem, Some(&self.admin), &[b"http/1.1"]);
        let addr = self.api.url.trim_start_matches("https://");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime");
        runtime.block_on(async {
            let mut connection =
                tokio::time::timeout(REQUEST_TIMEOUT, Connection::open(addr, &connector))
                    .await
                    .map_err(|_| format!("connecting to {addr}: no answer in 30 s"))?
                    .map_err(|e| format!("connecting to {addr}: {e}"))?;
            work(&mut connection).await
        })
    }

    /// The resource of `document`'s kind, from discovery: read again, for up to
    /// [`DISCOVERY_WAIT`], while the kind is missing.
    async fn resource(
        &self,
        connection: &mut Connection,
        document: &Document<'_>,
    ) -> Result<Resource, String> {
        let cached = |discovery: &Discovery| {
            let known = discovery.0.lock().unwrap_or_else(|p| p.into_inner());
            known
                .get(&document.api_version)
                .and_then(|kinds| kinds.get(&document.kind))
                .cloned()
        };
        if let Some(resource) = cached(&self.discovery) {
            return Ok(resource);
        }
        let deadline = Instant::now() + DISCOVERY_WAIT;
        loop {
            let kinds = discover(connection, &document.api_version).await?;
            self.discovery
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(document.api_version.clone(), kinds);
            if let Some(resource) = cached(&self.discovery) {
                return Ok(resource);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the API server serves no kind {} in {} (is its CRD installed?)",
                    document.kind, document.api_version
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The kinds `api_version` serves, from its discovery document; none when it is not served.
async fn discover(
    connection: &mut Connection,
    api_version: &str,
) -> Result<HashMap<String, Resource>, String> {
    let path = version_path(api_version);
    let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, connection.get(&path))
        .await
        .map_err(|_| format!("GET {path}: no answer in 30 s"))?
        .map_err(|e| format!("GET {path}: {e}"))?;
    if status == 404 {
        return Ok(HashMap::new());
    }
    let list: serde_json::Value = match status {
        200 => serde_json::from_slice(&body).map_err(|e| format!("GET {path}: {e}"))?,
        _ => {
            return Err(format!(
                "GET {path}: {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
    };
    Ok(list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let name = r["name"].as_str()?;
            // Subresources (`pods/status`) share their parent's kind.
            (!name.contains('/')).then(|| {
                let resource = Resource {
                    name: name.to_string(),
                    namespaced: r["namespaced"].as_bool().unwrap_or(false),
                };
                (r["kind"].as_str().unwrap_or_default().to_string(), resource)
            })
        })
        .collect())
}

/// Sends `body` with `method` to `path`, within [`REQUEST_TIMEOUT`].
async fn send(
    connection: &mut Connection,
    method: hyper::Method,
    path: &str,
    content_type: &str,
    body: &str,
) -> Result<(u16, Bytes), String> {
    let sent = connection.send_body(
        method.clone(),
        path,
        content_type,
        Bytes::copy_from_slice(body.as_bytes()),
    );
    tokio::time::timeout(REQUEST_TIMEOUT, sent)
        .await
        .map_err(|_| format!("{method} {path}: no answer in 30 s"))?
        .map_err(|e| format!("{method} {path}: {e}"))
}

/// The path of an API version: `/api/v1` for the core group, `/apis/GROUP/VERSION` for the
/// others.
fn version_path(api_version: &str) -> String {
    match api_version.contains('/') {
        true => format!("/apis/{api_version}"),
        false => format!("/api/{api_version}"),
    }
}

/// The object's path: in its namespace (`default` when it names none, as kubectl's
/// context gives) when its kind is namespaced.
fn object_path(document: &Document<'_>, resource: &Resource) -> String {
    let group = version_path(&document.api_version);
    match resource.namespaced {
        true => format!(
            "{group}/namespaces/{}/{}/{}",
            document.namespace.as_deref().unwrap_or("default"),
            resource.name,
            document.name
        ),
        false => format!("{group}/{}/{}", resource.name, document.name),
    }
}

/// The objects of a YAML stream, split at its `---` lines as kubectl splits it; documents
/// that hold nothing are left out.
fn documents(yaml: &str) -> Result<Vec<Document<'_>>, String> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in yaml.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare.starts_with("--- ") {
            chunks.push(&yaml[start..offset]);
            start = offset + line.len();
        }
        offset += line.len();
    }
    chunks.push(&yaml[start..]);
    let mut documents = Vec::new();
    for (i, text) in chunks.into_iter().enumerate() {
        let parsed = parse_yaml_stream(text).map_err(|e| format!("document {}: {e}", i + 1))?;
        let Some(object) = parsed.first() else {
            continue;
        };
        let field = |path: &[&str]| object.str_at(path).map(str::to_string);
        let missing = |what: &str| format!("document {} has no {what}:\n{text}", i + 1);
        documents.push(Document {
            api_version: field(&["apiVersion"]).ok_or_else(|| missing("apiVersion"))?,
            kind: field(&["kind"]).ok_or_else(|| missing("kind"))?,
            name: field(&["metadata", "name"]).ok_or_else(|| missing("metadata.name"))?,
            namespace: field(&["metadata", "namespace"]),
            text,
        });
    }
    Ok(documents)
}
