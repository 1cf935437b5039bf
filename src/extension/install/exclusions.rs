//! The namespaces kept away from the webhook beside those the package always
//! leaves out: names, and prefixes ending in `*`. A namespaceSelector matches
//! exact names only, so the package's webhook carries them in a
//! `matchConditions` expression (setter `webhook-excluded-namespaces`) that
//! the API server evaluates before it calls the webhook: a pod there is
//! admitted without a call, whether the webhook answers or not.

use crate::k8s::names::is_dns1123_label;

/// What a platform adds to the namespaces kept away from the webhook, and the
/// namespaces of the Prometheus that scrapes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Platform {
    /// Any Kubernetes: nothing added; metrics from monitoring.
    #[default]
    #[value(name = "kubernetes")]
    Kubernetes,
    /// OpenShift: openshift and openshift-* kept away from the webhook (its
    /// control plane, networking, monitoring and operators run there);
    /// metrics from openshift-monitoring and openshift-user-workload-monitoring.
    #[value(name = "openshift")]
    OpenShift,
}

impl Platform {
    /// As the flag and the file spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Kubernetes => "kubernetes",
            Platform::OpenShift => "openshift",
        }
    }

    /// The platform named `text`.
    pub fn parse(text: &str) -> Option<Platform> {
        match text {
            "kubernetes" => Some(Platform::Kubernetes),
            "openshift" => Some(Platform::OpenShift),
            _ => None,
        }
    }

    /// The namespaces it keeps away from the webhook.
    pub fn excluded_namespaces(self) -> &'static [&'static str] {
        match self {
            Platform::Kubernetes => &[],
            Platform::OpenShift => &["openshift", "openshift-*"],
        }
    }

    /// The namespaces of its Prometheus, allowed to scrape the ops port.
    pub fn metrics_namespaces(self) -> &'static [&'static str] {
        match self {
            Platform::Kubernetes => &["monitoring"],
            Platform::OpenShift => &["openshift-monitoring", "openshift-user-workload-monitoring"],
        }
    }
}

/// Why `pattern` cannot be kept away from the webhook: it must be a namespace
/// name, or a prefix of one followed by `*`.
pub fn check(pattern: &str) -> Result<(), String> {
    match pattern.strip_suffix('*') {
        Some("") => Err(
            "keeps every namespace away from the webhook: no pod would be attached; name the namespaces, or prefixes such as openshift-*"
                .into(),
        ),
        Some(prefix) => {
            let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            let ok = prefix.len() < 63
                && prefix.as_bytes().first().is_some_and(alnum)
                && prefix.bytes().all(|b| alnum(&b) || b == b'-');
            match ok {
                true => Ok(()),
                false => Err(
                    "is not a prefix of a namespace name before its '*': lower-case letters, digits and '-', starting with a letter or digit (e.g. openshift-*)"
                        .into(),
                ),
            }
        }
        None if is_dns1123_label(pattern) => Ok(()),
        None => Err(
            "is neither a namespace name nor a prefix ending in '*': lower-case letters, digits and '-' (e.g. legacy-apps, or openshift-* for every namespace that starts so)"
                .into(),
        ),
    }
}

/// Whether `pattern` keeps `namespace` away, as the package's expression decides.
pub fn excludes(pattern: &str, namespace: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => namespace.starts_with(prefix),
        None => namespace == pattern,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prefixes() {
        for (pattern, ok) in [
            ("legacy-apps", true),
            ("openshift-*", true),
            ("openshift*", true),
            ("a*", true),
            ("*", false),
            ("-x*", false),
            ("Open*", false),
            ("open*shift", false),
            ("a_b", false),
            ("", false),
        ] {
            assert_eq!(check(pattern).is_ok(), ok, "{pattern}");
        }
        for (pattern, namespace, kept) in [
            ("openshift-*", "openshift-monitoring", true),
            ("openshift-*", "openshift", false),
            ("openshift", "openshift", true),
            ("openshift", "openshift-dns", false),
            ("legacy", "legacy-apps", false),
        ] {
            assert_eq!(excludes(pattern, namespace), kept, "{pattern} {namespace}");
        }
    }
}
