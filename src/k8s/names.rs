//! Kubernetes names: DNS-1123 labels (namespaces, object names) and
//! qualified names (label and annotation keys).

/// The longest DNS-1123 label.
const MAX_LABEL_LEN: usize = 63;

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, at most 63 characters.
pub fn is_dns1123_label(s: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    (1..=MAX_LABEL_LEN).contains(&bytes.len())
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// A Kubernetes qualified name: an optional DNS subdomain prefix and `/`, then a name.
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= MAX_LABEL_LEN
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix
        .is_none_or(|p| p.len() <= 253 && !p.is_empty() && p.split('.').all(is_dns1123_label));
    name_ok && prefix_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for (s, ok) in [
            ("openshift.io/sa.scc.uid-range", true),
            ("uid-range", true),
            ("a/b/c", false),
            ("/x", false),
            ("Example.com/x", false),
            ("x/", false),
        ] {
            assert_eq!(is_qualified_name(s), ok, "{s}");
        }
    }
}
