//! What the rules own on a workload: the record in [`OWNED_ANNOTATION`] of what they added
//! (the networks entry, the proxy UID), read back so that a later render or UPDATE takes
//! exactly that back.

use std::fmt;

use compact_str::ToCompactString;

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
    pub proxy_uid: Option<String>,
}

impl Owned {
    /// Reads the record; `None` when absent.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut owned = Owned::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some(("network", "created")) => owned.network = Some(NetworkOwnership::Created),
                Some(("network", "appended")) => owned.network = Some(NetworkOwnership::Appended),
                Some(("proxy-uid", v)) if !v.is_empty() => owned.proxy_uid = Some(v.to_string()),
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
}

impl fmt::Display for Owned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let network = match self.network {
            Some(NetworkOwnership::Created) => Some("network=created"),
            Some(NetworkOwnership::Appended) => Some("network=appended"),
            None => None,
        };
        if let Some(network) = network {
            f.write_str(network)?;
        }
        if let Some(uid) = &self.proxy_uid {
            let comma = if network.is_some() { "," } else { "" };
            write!(f, "{comma}proxy-uid={uid}")?;
        }
        Ok(())
    }
}

/// The edit of the record of what the function owns, when it changes.
pub(super) fn record_edit(before: &Owned, after: &Owned) -> Option<Edit> {
    (after != before).then(|| {
        let value = (!after.is_empty()).then(|| after.to_compact_string());
        (OWNED_ANNOTATION, value)
    })
}
