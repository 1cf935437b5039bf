//! The Kubernetes client of the extension's commands, from the flags every
//! Linkerd extension takes: `--kubeconfig`, `--context`, `--as`, `--as-group`
//! and `--api-addr`, read the way the Linkerd CLI reads them.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// How long connecting to the API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the API server may stay silent on one response.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Which API server to talk to, and as whom.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// `--api-addr`: `host:port` (or a URL) that overrides the kubeconfig's server.
    pub api_addr: Option<String>,
    /// `--context`: the kubeconfig context [default: its current context].
    pub context: Option<String>,
    /// `--as`: the user to impersonate.
    pub impersonate: Option<String>,
    /// `--as-group`: the groups to impersonate.
    pub impersonate_groups: Vec<String>,
    /// `--kubeconfig` [default: `$KUBECONFIG`, then `~/.kube/config`, then in-cluster].
    pub kubeconfig: Option<PathBuf>,
}

impl Target {
    /// The client configuration: the kubeconfig (or the in-cluster service
    /// account) with this target's overrides, and deadlines on connecting and reading.
    pub async fn config(&self) -> anyhow::Result<kube::Config> {
        let loaded = self.load().await;
        let mut config = match (loaded, &self.api_addr) {
            (Ok(mut config), Some(addr)) => {
                config.cluster_url = url(addr, "https")?;
                config
            }
            (Ok(config), None) => config,
            // As `kubectl --server` does: an address needs no kubeconfig.
            (Err(_), Some(addr)) => kube::Config::new(url(addr, "http")?),
            (Err(e), None) => return Err(e),
        };
        if let Some(user) = &self.impersonate {
            config.auth_info.impersonate = Some(user.clone());
        }
        if !self.impersonate_groups.is_empty() {
            config.auth_info.impersonate_groups = Some(self.impersonate_groups.clone());
        }
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(READ_TIMEOUT);
        Ok(config)
    }

    /// The client.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let config = self.config().await?;
        kube::Client::try_from(config).context("making the Kubernetes client")
    }

    async fn load(&self) -> anyhow::Result<kube::Config> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        if let Some(path) = &self.kubeconfig {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            return kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("loading the kubeconfig {}", path.display()));
        }
        if self.context.is_some() {
            return kube::Config::from_kubeconfig(&options)
                .await
                .context("loading the kubeconfig ($KUBECONFIG or ~/.kube/config)");
        }
        kube::Config::infer()
            .await
            .context("finding a kubeconfig ($KUBECONFIG, ~/.kube/config) or an in-cluster service account; pass --kubeconfig")
    }
}

/// An error of a call to the API server as `check`, `install` and
/// `uninstall` print it: the API server's message once, with its reason and
/// code (`namespaces is forbidden: User "x" cannot list ... (Forbidden,
/// 403)`), not kube's `Display`, which repeats the message in a debug dump of
/// the whole Status. Any other error reads as `{:#}` prints a chain, each
/// cause after a colon, a cause left out when the text before already says it.
pub fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    chain_text(std::iter::successors(Some(error), |e| e.source()))
}

/// An `anyhow` chain as [`error_text`] prints it: its contexts, then the cause.
pub fn anyhow_text(error: &anyhow::Error) -> String {
    chain_text(
        error
            .chain()
            .map(|e| e as &(dyn std::error::Error + 'static)),
    )
}

/// The API server's answer, once: `message (Reason, code)`.
pub fn status_text(status: &kube::core::Status) -> String {
    let message = status.message.trim();
    let message = match message.is_empty() {
        true => "the API server refused the request",
        false => message,
    };
    match (status.reason.is_empty(), status.code) {
        (true, 0) => message.to_string(),
        (true, code) => format!("{message} ({code})"),
        (false, 0) => format!("{message} ({})", status.reason),
        (false, code) => format!("{message} ({}, {code})", status.reason),
    }
}

fn chain_text<'a>(chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut text = String::new();
    for error in chain {
        let part = match error.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(status)) => status_text(status),
            _ => error.to_string(),
        };
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        if matches!(
            error.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(_))
        ) {
            break;
        }
    }
    text
}

/// `--api-addr` as a URL: `host:port` gets `scheme`.
fn url(addr: &str, scheme: &str) -> anyhow::Result<hyper::Uri> {
    let text = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("{scheme}://{addr}")
    };
    text.parse()
        .with_context(|| format!("--api-addr {addr}: not host:port or a URL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_addr_takes_a_scheme_when_it_has_none() {
        for (addr, scheme, want) in [
            ("127.0.0.1:6443", "https", "https://127.0.0.1:6443/"),
            ("localhost:8001", "http", "http://localhost:8001/"),
            ("http://127.0.0.1:8001", "https", "http://127.0.0.1:8001/"),
        ] {
            assert_eq!(url(addr, scheme).unwrap().to_string(), want, "{addr}");
        }
        assert!(url("a b:1", "https").is_err());
    }

    fn forbidden() -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure",
            "message": "namespaces is forbidden: User \"nobody\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope",
            "reason": "Forbidden",
            "details": {"kind": "namespaces"},
            "code": 403
        }))
        .unwrap();
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn an_api_error_is_the_api_server_s_message_once() {
        let message = "namespaces is forbidden: User \"nobody\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope";
        let want = format!("{message} (Forbidden, 403)");
        assert_eq!(error_text(&forbidden()), want);
        let chained = Err::<(), _>(forbidden())
            .context("listing Namespaces")
            .context("reading the cluster")
            .unwrap_err();
        assert_eq!(
            anyhow_text(&chained),
            format!("reading the cluster: listing Namespaces: {want}")
        );
        let kube_s_own = format!("{chained:#}");
        assert_eq!(
            kube_s_own.matches("at the cluster scope").count(),
            3,
            "{kube_s_own}"
        );
        for (status, want) in [
            (
                kube::core::Status::failure("gone", "").with_code(410),
                "gone (410)",
            ),
            (
                kube::core::Status::failure("", "NotFound"),
                "the API server refused the request (NotFound)",
            ),
            (kube::core::Status::failure("m", ""), "m"),
        ] {
            assert_eq!(status_text(&status), want);
        }
    }

    #[test]
    fn other_errors_read_as_their_chain_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Outer(#[source] std::io::Error);
        let e = kube::Error::Service(Box::new(Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ))));
        assert_eq!(
            error_text(&e),
            "ServiceError: client error (Connect): Connection refused (os error 111)"
        );
    }
}
