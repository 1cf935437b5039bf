//! A pod's volumes as the kubelet makes them: the files of a Secret, a
//! ConfigMap, a projected token or downward-API fields, written by its atomic
//! writer, so that an update is one rename (`..data`) and a reader never sees
//! half of it.
//!
//! The layout of a volume's folder:
//!
//! ```text
//! ..2026_11_27_15_04_05.123456789/tls.crt   the files of one version
//! ..data -> ..2026_11_27_15_04_05.123456789
//! tls.crt -> ..data/tls.crt                 one link per top-level name
//! ```

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{
    ConfigMap, KeyToPath, Pod, Secret, ServiceAccount, Volume as VolumeSpec,
};
use kube::Api;
use kube::api::PostParams;

use super::Node;
use super::pod::field;

/// The files of a volume: path → (bytes, mode).
pub type Files = BTreeMap<String, (Vec<u8>, u32)>;

/// One volume of a pod and what was last written into it.
pub struct Volume {
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    spec: VolumeSpec,
    written: Option<Files>,
    /// The projected token, requested once per pod start (the kubelet
    /// renews it at 80 % of its life, longer than any test).
    token: Option<(String, Instant)>,
}

/// Makes `dir` readable and searchable by every user: a container runs as
/// the image's user, not as the tests' root.
pub fn open_to_all(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", dir.display()));
}

impl Volume {
    pub fn new(spec: &VolumeSpec, pod_dir: &Path) -> Volume {
        let dir = pod_dir.join("volumes").join(&spec.name);
        std::fs::create_dir_all(&dir).expect("a volume's folder");
        open_to_all(&dir);
        Volume {
            name: spec.name.clone(),
            dir,
            spec: spec.clone(),
            written: None,
            token: None,
        }
    }

    /// Whether the container may start: every source it needs is there.
    pub fn is_set_up(&self) -> bool {
        self.written.is_some()
    }

    /// Reads the volume's sources and writes what changed. An `Err` says
    /// why the volume cannot be set up (a Secret missing that is not
    /// optional): the kubelet keeps the pod waiting and tries again.
    pub fn sync(&mut self, node: &Node, pod: &Pod) -> Result<(), String> {
        let files = self.files(node, pod)?;
        if self.written.as_ref() != Some(&files) {
            write_atomically(&self.dir, &files);
            self.written = Some(files);
        }
        Ok(())
    }

    fn files(&mut self, node: &Node, pod: &Pod) -> Result<Files, String> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let spec = self.spec.clone();
        if spec.empty_dir.is_some() {
            return Ok(Files::new());
        }
        if let Some(secret) = &spec.secret {
            let name = secret.secret_name.as_deref().unwrap_or_default();
            let data = secret_data(node, namespace, name)?;
            let mode = secret.default_mode.unwrap_or(0o644) as u32;
            return keyed(
                data,
                secret.items.as_deref(),
                mode,
                secret.optional,
                "Secret",
                name,
            );
        }
        if let Some(config_map) = &spec.config_map {
            let data = config_map_data(node, namespace, &config_map.name)?;
            let mode = config_map.default_mode.unwrap_or(0o644) as u32;
            let (items, optional) = (config_map.items.as_deref(), config_map.optional);
            return keyed(data, items, mode, optional, "ConfigMap", &config_map.name);
        }
        if let Some(projected) = &spec.projected {
            let mode = projected.default_mode.unwrap_or(0o644) as u32;
            let mut files = Files::new();
            for source in projected.sources.iter().flatten() {
                files.extend(self.projection(node, pod, source, mode)?);
            }
            return Ok(files);
        }
        panic!(
            "volume {}: the harness knows emptyDir, secret, configMap and projected volumes only",
            self.name
        )
    }

    fn projection(
        &mut self,
        node: &Node,
        pod: &Pod,
        source: &k8s_openapi::api::core::v1::VolumeProjection,
        mode: u32,
    ) -> Result<Files, String> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(token) = &source.service_account_token {
            let value = self.token(node, pod, token.audience.clone(), token.expiration_seconds)?;
            return Ok(Files::from([(
                token.path.clone(),
                (value.into_bytes(), mode),
            )]));
        }
        if let Some(config_map) = &source.config_map {
            let data = config_map_data(node, namespace, &config_map.name)?;
            let items = config_map.items.as_deref();
            return keyed(
                data,
                items,
                mode,
                config_map.optional,
                "ConfigMap",
                &config_map.name,
            );
        }
        if let Some(secret) = &source.secret {
            let data = secret_data(node, namespace, &secret.name)?;
            return keyed(
                data,
                secret.items.as_deref(),
                mode,
                secret.optional,
                "Secret",
                &secret.name,
            );
        }
        if let Some(downward) = &source.downward_api {
            let mut files = Files::new();
            for item in downward.items.iter().flatten() {
                let path = item
                    .field_ref
                    .as_ref()
                    .expect("a downward-API item's fieldRef");
                let value = field(pod, &path.field_path);
                let mode = item.mode.map_or(mode, |m| m as u32);
                files.insert(item.path.clone(), (value.into_bytes(), mode));
            }
            return Ok(files);
        }
        panic!("a projected source the harness does not know: {source:?}")
    }

    /// A token of the pod's ServiceAccount from the TokenRequest API, bound
    /// to the pod, as the kubelet asks for it.
    fn token(
        &mut self,
        node: &Node,
        pod: &Pod,
        audience: Option<String>,
        expiration: Option<i64>,
    ) -> Result<String, String> {
        if let Some((token, _)) = &self.token {
            return Ok(token.clone());
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let spec = pod.spec.as_ref().expect("a pod spec");
        let account = spec
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into());
        let request: TokenRequest = serde_json::from_value(serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {
                "audiences": audience.into_iter().collect::<Vec<_>>(),
                "expirationSeconds": expiration.unwrap_or(3607),
                "boundObjectRef": {
                    "apiVersion": "v1", "kind": "Pod",
                    "name": pod.metadata.name, "uid": pod.metadata.uid,
                },
            },
        }))
        .expect("a TokenRequest");
        let api: Api<ServiceAccount> = Api::namespaced(node.client.clone(), &namespace);
        let answer = node
            .block(api.create_token_request(&account, &PostParams::default(), &request))
            .map_err(|e| format!("a token for ServiceAccount {namespace}/{account}: {e}"))?;
        let token = answer
            .status
            .and_then(|s| s.token)
            .ok_or_else(|| format!("no token for ServiceAccount {namespace}/{account}"))?;
        self.token = Some((token.clone(), Instant::now()));
        Ok(token)
    }
}

/// How long a read of a volume's source may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads `kind` `namespace/name` within [`READ_TIMEOUT`]; `None` when missing.
fn read<K>(node: &Node, namespace: &str, name: &str, kind: &str) -> Result<Option<K>, String>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(node.client.clone(), namespace);
    node.block(async { tokio::time::timeout(READ_TIMEOUT, api.get_opt(name)).await })
        .map_err(|_| format!("reading {kind} {namespace}/{name}: timed out"))?
        .map_err(|e| format!("reading {kind} {namespace}/{name}: {e}"))
}

fn secret_data(node: &Node, namespace: &str, name: &str) -> Result<Option<Files>, String> {
    let secret: Option<Secret> = read(node, namespace, name, "Secret")?;
    Ok(secret.map(|s| {
        let data = s.data.unwrap_or_default().into_iter();
        data.map(|(k, v)| (k, (v.0, 0))).collect()
    }))
}

fn config_map_data(node: &Node, namespace: &str, name: &str) -> Result<Option<Files>, String> {
    let map: Option<ConfigMap> = read(node, namespace, name, "ConfigMap")?;
    Ok(map.map(|m| {
        let text = m.data.unwrap_or_default().into_iter();
        let binary = m.binary_data.unwrap_or_default().into_iter();
        text.map(|(k, v)| (k, (v.into_bytes(), 0)))
            .chain(binary.map(|(k, v)| (k, (v.0, 0))))
            .collect()
    }))
}

/// The files of a Secret's or ConfigMap's `data`, all keys or `items`.
fn keyed(
    data: Option<Files>,
    items: Option<&[KeyToPath]>,
    mode: u32,
    optional: Option<bool>,
    kind: &str,
    name: &str,
) -> Result<Files, String> {
    let Some(data) = data else {
        return if optional == Some(true) {
            Ok(Files::new())
        } else {
            Err(format!(
                "{kind} {name} not found (the volume is not optional)"
            ))
        };
    };
    let Some(items) = items else {
        return Ok(data.into_iter().map(|(k, (v, _))| (k, (v, mode))).collect());
    };
    let mut files = Files::new();
    for item in items {
        match data.get(&item.key) {
            Some((bytes, _)) => {
                let mode = item.mode.map_or(mode, |m| m as u32);
                files.insert(item.path.clone(), (bytes.clone(), mode));
            }
            None if optional == Some(true) => {}
            None => return Err(format!("{kind} {name} has no key {}", item.key)),
        }
    }
    Ok(files)
}

/// Writes `files` into `dir` as the kubelet's atomic writer does: a new
/// version folder, the `..data` link swapped to it by a rename, the
/// top-level links made or removed, the old version removed.
pub fn write_atomically(dir: &Path, files: &Files) {
    let version = format!("..{}", timestamp());
    let version_dir = dir.join(&version);
    for (path, (bytes, mode)) in files {
        let file = version_dir.join(path);
        let parent = file.parent().expect("a file's folder");
        std::fs::create_dir_all(parent).expect("a version folder");
        std::fs::write(&file, bytes).expect("writing a volume's file");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(*mode))
            .expect("a volume file's mode");
    }
    std::fs::create_dir_all(&version_dir).expect("a version folder");
    open_to_all(&version_dir);
    let old = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&version, &tmp).expect("the ..data_tmp link");
    std::fs::rename(&tmp, dir.join("..data")).expect("swapping ..data");
    let top: std::collections::BTreeSet<String> = files
        .keys()
        .map(|p| p.split('/').next().unwrap_or(p).to_string())
        .collect();
    for name in &top {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).expect("a file's link");
        }
    }
    for entry in std::fs::read_dir(dir).expect("a volume's folder").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !top.contains(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    if let Some(old) = old.filter(|o| o.as_os_str() != version.as_str()) {
        let _ = std::fs::remove_dir_all(dir.join(old));
    }
}

/// `2026_11_27_15_04_05.123456789` (UTC), as the kubelet names versions.
fn timestamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    let (days, rest) = (now.as_secs() / 86_400, now.as_secs() % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}_{month:02}_{day:02}_{:02}_{:02}_{:02}.{:09}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        now.subsec_nanos()
    )
}

/// The ServiceAccount admission plugin's volume (this API server runs with
/// the plugin off): the token, the cluster's CA and the namespace.
pub fn service_account_volume(name: &str) -> VolumeSpec {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    }))
    .expect("the ServiceAccount volume")
}

/// `kube-root-ca.crt` in `namespace`, as the controller-manager's root CA
/// publisher writes it.
pub fn publish_root_ca(node: &Node, namespace: &str) {
    let api: Api<ConfigMap> = Api::namespaced(node.client.clone(), namespace);
    let map = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": namespace},
        "data": {"ca.crt": node.api_ca},
    });
    let params = kube::api::PatchParams::apply("root-ca-cert-publisher").force();
    node.block(api.patch("kube-root-ca.crt", &params, &kube::api::Patch::Apply(map)))
        .unwrap_or_else(|e| panic!("publishing kube-root-ca.crt in {namespace}: {e}"));
}
