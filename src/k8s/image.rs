//! Container image references, as a container's `image` takes them and the
//! distribution reference grammar defines them:
//! `[REGISTRY[:PORT]/]PATH[:TAG][@ALGORITHM:HEX]`.

/// The longest repository name (registry and path) the grammar allows.
const MAX_NAME_LEN: usize = 255;
/// The longest tag.
const MAX_TAG_LEN: usize = 128;

/// Why `text` is not an image reference that names one image: the problem,
/// and what a valid one looks like. A reference without a tag or a digest is
/// refused too: the kubelet would pull `:latest`, which moves.
pub fn check_pinned(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("is empty".into());
    }
    if let Some(c) = text.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("holds {c:?}: an image reference has no spaces"));
    }
    let (rest, digest) = match text.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (text, None),
    };
    if let Some(digest) = digest {
        check_digest(digest)?;
    }
    // A tag follows the last ':' after the last '/' (a ':' before it is a port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        check_tag(tag)?;
    }
    check_name(name)?;
    if tag.is_none() && digest.is_none() {
        return Err(
            "has neither a tag nor a digest: the kubelet would pull :latest, which changes under the replicas; add the tag (:v0.1.0) or the digest (@sha256:...)"
                .into(),
        );
    }
    Ok(())
}

/// `[REGISTRY/]PATH`: the registry is the first component when it holds a
/// '.' or a ':' or is `localhost`; the path's components are lower case.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("has no repository name before its tag or digest".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "has a repository name of {} characters, more than {MAX_NAME_LEN}",
            name.len()
        ));
    }
    let mut components: Vec<&str> = name.split('/').collect();
    let first = components[0];
    let is_registry = components.len() > 1
        && (first.contains(['.', ':']) || first == "localhost" || first != first.to_lowercase());
    if is_registry {
        check_registry(first)?;
        components.remove(0);
    }
    for component in components {
        check_path_component(component)?;
    }
    Ok(())
}

/// `HOST[:PORT]`: DNS labels (any case) separated by '.', an IPv6 address in
/// brackets, and a port of digits.
fn check_registry(registry: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("has a registry {registry:?} that {why}"));
    let (host, port) = if let Some(inner) = registry.strip_prefix('[') {
        let Some((address, after)) = inner.split_once(']') else {
            return bad("opens '[' without closing it");
        };
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return bad("has no IPv6 address in its brackets");
        }
        match after {
            "" => ("", None),
            _ => match after.strip_prefix(':') {
                Some(port) => ("", Some(port)),
                None => return bad("has something after its ']' other than :PORT"),
            },
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return bad("has a port that is not a number");
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if !registry.starts_with('[') && !host.split('.').all(label) {
        return bad("is not a host name: letters, digits and '-' between dots, then :PORT");
    }
    Ok(())
}

/// Lower-case letters and digits, separated by one '.', one or two '_', or
/// any number of '-'.
fn check_path_component(component: &str) -> Result<(), String> {
    let bad = || {
        Err(format!(
            "has a path component {component:?} that is not lower-case letters and digits separated by '.', '_', '__' or '-'"
        ))
    };
    let bytes = component.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(alnum) || !bytes.last().is_some_and(alnum) {
        return bad();
    }
    let mut run = String::new();
    for &b in bytes {
        if alnum(&b) {
            if !matches!(run.as_str(), "" | "." | "_" | "__") && !run.bytes().all(|s| s == b'-') {
                return bad();
            }
            run.clear();
        } else if matches!(b, b'.' | b'_' | b'-') {
            run.push(b as char);
        } else {
            return bad();
        }
    }
    Ok(())
}

/// A word character, then word characters, '.' and '-': at most 128.
fn check_tag(tag: &str) -> Result<(), String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let ok = tag.len() <= MAX_TAG_LEN
        && tag.bytes().next().is_some_and(word)
        && tag.bytes().all(|b| word(b) || b == b'.' || b == b'-');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "has a tag {tag:?} that is not letters, digits, '_', '.' and '-' (starting with a letter, digit or '_'), at most {MAX_TAG_LEN}"
        )),
    }
}

/// `ALGORITHM:HEX`; `sha256` with exactly 64 lower-case hex digits, `sha512`
/// with 128.
fn check_digest(digest: &str) -> Result<(), String> {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Err(format!(
            "has a digest {digest:?} without its algorithm: write @sha256:<64 hex digits>"
        ));
    };
    let want = match algorithm {
        "sha256" => 64,
        "sha512" => 128,
        other => {
            return Err(format!(
                "has a digest of algorithm {other:?}: write @sha256:<64 hex digits>"
            ));
        }
    };
    let hex_ok = hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex.len() != want || !hex_ok {
        return Err(format!(
            "has a digest {digest:?} whose {algorithm} is not {want} lower-case hex digits ({} given)",
            hex.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn pinned_references_are_taken() {
        for text in [
            "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0".to_string(),
            "mirror.example:5000/linkerd/multus:0.1.0".into(),
            format!("mirror.example:5000/linkerd/multus@sha256:{SHA}"),
            format!("mirror.example/linkerd/multus:0.1.0@sha256:{SHA}"),
            "localhost/linkerd-multus:dev".into(),
            "localhost:5000/a__b/c-d--e.f_g:1.0-rc_1".into(),
            "multus:v1".into(),
            "Registry.Example.COM/x:y".into(),
            "[fd00::1]:5000/x:y".into(),
            "10.0.0.1:5000/x:y".into(),
        ] {
            assert_eq!(check_pinned(&text), Ok(()), "{text}");
        }
    }

    #[test]
    fn bad_references_say_what_is_wrong() {
        for (text, want) in [
            ("", "is empty".to_string()),
            ("a b:1", "holds ' '".into()),
            (
                "mirror.example/linkerd/multus",
                "has neither a tag nor a digest".into(),
            ),
            (
                "mirror.example/Linkerd/multus:1",
                "path component \"Linkerd\"".into(),
            ),
            ("x/a..b:1", "path component \"a..b\"".into()),
            ("x/-a:1", "path component \"-a\"".into()),
            ("x/a___b:1", "path component \"a___b\"".into()),
            ("x:v1:", "has a tag \"\"".into()),
            ("x:.v1", "has a tag \".v1\"".into()),
            (":v1", "has no repository name".into()),
            (
                "x@sha256:abc",
                "has a digest \"sha256:abc\" whose sha256 is not 64 lower-case hex digits (3 given)"
                    .into(),
            ),
            (
                &*format!("x@sha256:{}", SHA.to_uppercase()),
                "is not 64 lower-case hex digits".into(),
            ),
            ("x@md5:abc", "algorithm \"md5\"".into()),
            ("x@abc", "without its algorithm".into()),
            ("mirror.example:port/x:1", "has a port that is not a number".into()),
            ("bad_host.example/x:1", "is not a host name".into()),
            ("[fd00::1/x:1", "opens '['".into()),
        ] {
            let got = check_pinned(text).unwrap_err();
            assert!(got.contains(&want), "{text:?}: {got}");
        }
        let long = format!("x/{}:1", "a".repeat(300));
        assert!(check_pinned(&long).unwrap_err().contains("more than 255"));
    }
}
