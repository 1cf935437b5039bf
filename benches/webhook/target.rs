//! The servers the webhook benchmark measures: where each listens, its
//! process, and how its answers are judged. The load generator drives them
//! and the requests judge their answers; neither owns them.

/// One server under load: the webhook, the baseline or the reader.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) name: &'static str,
    pub(crate) addr: String,
    pub(crate) pid: u32,
    /// Whether answers are checked for a patch exactly on enabled namespaces.
    pub(crate) check_patch: bool,
}
