//! What runs a container: the image's entrypoint and user, and the two
//! runtimes (a process of the test build, or the image under podman).

use std::path::PathBuf;

/// The image every shipped manifest names.
pub const PUBLISHED_IMAGE: &str = "ghcr.io/linkerd-multus/linkerd-multus:v0.1.0";

/// How the node runs a container.
#[derive(Clone)]
pub enum Runtime {
    /// The binary of this test build as the image's entrypoint, a process of
    /// the user the image or the pod names (see the module's differences).
    Process,
    /// The image itself: `podman run` with the pod's user, read-only root
    /// filesystem, capabilities, mounts at their own paths and the host's
    /// network; `image` replaces the manifest's [`PUBLISHED_IMAGE`].
    Podman { podman: PathBuf, image: String },
}

/// The image's `ENTRYPOINT` and `USER`, read from the Dockerfile's runtime
/// stage, so a manifest is run with what the image gives it.
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub user: (u32, u32),
    pub path: String,
}

impl ImageConfig {
    /// The runtime stage of this repository's Dockerfile.
    pub fn of_dockerfile() -> ImageConfig {
        let text =
            std::fs::read_to_string(super::super::repo_path("Dockerfile")).expect("the Dockerfile");
        let line = |prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("the Dockerfile has no {prefix}line"))
                .trim()
                .to_string()
        };
        let entrypoint: Vec<String> = serde_json::from_str(&line("ENTRYPOINT "))
            .expect("the Dockerfile's ENTRYPOINT in its JSON form");
        let user = line("USER ");
        let (uid, gid) = user.split_once(':').unwrap_or((&user, &user));
        ImageConfig {
            entrypoint,
            user: (
                uid.parse().expect("a numeric USER"),
                gid.parse().expect("a numeric USER group"),
            ),
            path: line("ENV PATH=").to_string(),
        }
    }
}

/// The program of a process runtime for `argv0`, which must be the image's
/// entrypoint: the test build's binary.
pub fn program(argv0: &str, image: &ImageConfig) -> PathBuf {
    assert_eq!(
        Some(argv0),
        image.entrypoint.first().map(String::as_str),
        "the container runs {argv0}, which the image does not hold (its ENTRYPOINT is {:?})",
        image.entrypoint
    );
    PathBuf::from(super::super::bin())
}
