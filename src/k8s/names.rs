//! Kubernetes names: DNS-1123 labels (namespaces, object names) and
//! qualified names (label and annotation keys); the valid name nearest to a
//! misspelt one.

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

/// The name of `valid` nearest to `written`, when one is close enough to be
/// what was meant: at most 2 edits (a transposition is one), or a quarter of
/// the name's length for long names, letter case aside. Ties go to the first.
pub fn nearest<'a>(written: &str, valid: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let written = written.to_ascii_lowercase();
    valid
        .into_iter()
        .map(|name| {
            let distance = strsim::osa_distance(&written, &name.to_ascii_lowercase());
            (distance, name)
        })
        .filter(|(distance, name)| *distance <= 2.max(name.len() / 4))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_names() {
        let keys = ["cniNamespace", "linkerdNamespace", "nadName", "nadSyncWave"];
        for (written, want) in [
            ("nadNme", Some("nadName")),
            ("nadNmae", Some("nadName")),
            ("nadname", Some("nadName")),
            ("NADNAME", Some("nadName")),
            ("cniNamspace", Some("cniNamespace")),
            ("linkerdNamespaces", Some("linkerdNamespace")),
            ("replicas", None),
            ("colour", None),
            ("", None),
        ] {
            assert_eq!(nearest(written, keys), want, "{written:?}");
        }
    }

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
