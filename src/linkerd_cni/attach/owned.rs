//! What the rules own on a workload: the record in [`OWNED_ANNOTATION`] of what they added
//! (the networks entry, the proxy UID), read back so that a later render or UPDATE takes
//! exactly that back.

use std::fmt;

use compact_str::CompactString;

use super::Edit;

/// Records on a workload what the function added to it.
pub const OWNED_ANNOTATION: &str = "multus.linkerd.io/owned";

/// How the function came to own the networks entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkOwnership {
    /// It created the annotation.
    Created,
    /// It appended its entry to the user's annotation.
    Appended,
}

/// What the function added to a workload, as recorded in [`OWNED_ANNOTATION`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    /// The networks entry.
    pub network: Option<NetworkOwnership>,
    /// The proxy UID value it set.
    pub proxy_uid: Option<CompactString>,
}

impl Owned {
    /// Reads the record; `None` when absent.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut owned = Owned::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some(("network", "created")) => owned.network = Some(NetworkOwnership::Created),
                Some(("network", "appended")) => owned.network = Some(NetworkOwnership::Appended),
                Some(("proxy-uid", v)) if !v.is_empty() => owned.proxy_uid = Some(v.into()),
                _ => {
                    return Err(format!(
                        "{part:?} is not one of network=created, network=appended, proxy-uid=<uid>; the function writes this annotation, remove it to start afresh"
                    ));
                }
            }
        }
        Ok(owned)
    }

    /// Whether nothing is owned.
    pub fn is_empty(&self) -> bool {
        self.network.is_none() && self.proxy_uid.is_none()
    }

    /// The record's two parts: the networks entry's, and the proxy UID.
    fn parts(&self) -> (Option<&'static str>, Option<&str>) {
        let network = self.network.map(|n| match n {
            NetworkOwnership::Created => "network=created",
            NetworkOwnership::Appended => "network=appended",
        });
        (network, self.proxy_uid.as_deref())
    }

    /// The record's text, written into a string made at its length: one allocation at most
    /// (an entry and a proxy UID take more than a `CompactString` holds inline), never grown.
    fn text(&self) -> CompactString {
        let (network, uid) = self.parts();
        let len = network.map_or(0, str::len)
            + uid.map_or(0, |uid| {
                usize::from(network.is_some()) + PROXY_UID_PART.len() + uid.len()
            });
        let mut text = CompactString::with_capacity(len);
        fmt::write(&mut text, format_args!("{self}")).expect("writing to a string");
        text
    }
}

/// What the record says before the proxy UID it set.
const PROXY_UID_PART: &str = "proxy-uid=";

impl fmt::Display for Owned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (network, uid) = self.parts();
        if let Some(network) = network {
            f.write_str(network)?;
        }
        if let Some(uid) = uid {
            let comma = if network.is_some() { "," } else { "" };
            write!(f, "{comma}{PROXY_UID_PART}{uid}")?;
        }
        Ok(())
    }
}

/// The edit of the record of what the function owns, when it changes.
pub(super) fn record_edit(before: &Owned, after: &Owned) -> Option<Edit> {
    (after != before).then(|| {
        let value = (!after.is_empty()).then(|| after.text());
        (OWNED_ANNOTATION, value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_its_text_made_at_its_length() {
        let uid = |uid: &str| Some(CompactString::from(uid));
        for (network, proxy_uid, want) in [
            (Some(NetworkOwnership::Created), None, "network=created"),
            (
                Some(NetworkOwnership::Created),
                uid("1000682102"),
                "network=created,proxy-uid=1000682102",
            ),
            (
                Some(NetworkOwnership::Appended),
                uid("1000682102"),
                "network=appended,proxy-uid=1000682102",
            ),
            (None, uid("5"), "proxy-uid=5"),
            (None, None, ""),
        ] {
            let owned = Owned { network, proxy_uid };
            let text = owned.text();
            assert_eq!((text.as_str(), owned.to_string().as_str()), (want, want));
            // Written into a string of its length: never grown, so allocated once at most.
            let made = CompactString::with_capacity(want.len()).capacity();
            assert_eq!(text.capacity(), made, "{want}");
        }
    }
}
