//! Which namespaces the extension may take and give back. `install` puts it
//! only in a namespace of its own, and `uninstall` deletes a namespace only
//! when it is that: marked by [`MARK`] (which `install` sets on a namespace it
//! makes, and keeps on one it made) and not [`reserved`], whatever marks it
//! carries. Deleting a namespace deletes everything in it, so a namespace of
//! someone else's is never emitted for deletion.

/// The annotation that makes a namespace the extension's own.
pub const MARK: &str = "multus.linkerd.io/namespace-owner";

/// The value of [`MARK`].
pub const MARK_VALUE: &str = "linkerd-multus";

/// Whose a namespace is when the extension may never have it as its
/// namespace (`None` when it may): one list with the NAD controller's
/// restarts, [`crate::k8s::reserved`]. Any other namespace that exists is
/// refused by `install` unless it carries [`MARK`]; this list also holds where
/// the cluster is not read, and against a mark set by hand.
pub use crate::k8s::reserved::reserved;

/// Whether `annotations` hold the extension's mark.
pub fn marked<'a>(mut annotations: impl Iterator<Item = (&'a str, &'a str)>) -> bool {
    annotations.any(|(k, v)| k == MARK && v == MARK_VALUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_mark_marks() {
        for (annotations, want) in [
            (vec![(MARK, MARK_VALUE)], true),
            (vec![("a", "b"), (MARK, MARK_VALUE)], true),
            (vec![(MARK, "someone-else")], false),
            (vec![("linkerd.io/extension", "multus")], false),
            (vec![], false),
        ] {
            assert_eq!(marked(annotations.into_iter()), want);
        }
    }
}
