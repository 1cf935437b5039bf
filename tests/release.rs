//! What a release ships, made and checked here as `.github/workflows/release.yml` makes and
//! checks it, without the network and without signing:
//!
//! * cargo-deny's policy (deny.toml) on both workspaces: bans, licenses and sources offline,
//!   advisories against the dated RustSec snapshot of `../shared/advisory-db` (the release
//!   checks the live database); each rule also refuses a planted offender;
//! * `scripts/dist.sh`: the static binary built by `cargo auditable`, its dependency list read
//!   back with `rust-audit-info`, and its CycloneDX SBOM, valid against the CycloneDX 1.5
//!   schema;
//! * `scripts/image-sbom.py` on the image `scripts/container.sh` builds, its hashes checked
//!   against the files in the image;
//! * `scripts/release-manifests.sh`: the kpt packages with the image pinned by digest.
//!
//! A test binary of its own (Cargo.toml's `[[test]] release`), run after the suite as
//! `container` is: it builds the static release binary and the image when they are not built
//! yet (every core, for minutes). The tools come from scripts/install-test-tools.sh
//! (target/cargo-tools: cargo-deny, cargo-auditable, rust-audit-info, cargo-cyclonedx;
//! target/tools: the CycloneDX schema validator); a missing one fails with what to run.

mod common;

use crate::common::process::Guarded;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::output_text as text;
use common::*;

/// The directory cargo-deny 0.20 opens for the default database URL
/// (`https://github.com/rustsec/advisory-db`): the URL's last segment and its XXH64 hash.
const ADVISORY_DB_DIR: &str = "advisory-db-3157b0e258782691";
const HOST_TARGET: &str = "x86_64-unknown-linux-gnu";
const INSTALL: &str = "run scripts/install-test-tools.sh (it installs the release tools, pinned, \
                       into target/cargo-tools, and the CycloneDX validator into target/tools)";

/// A command run in the checkout, with the release tools first on PATH and no variable of
/// `cargo test`'s own.
fn command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    without_cargo_test_env(&mut cmd)
        .env("PATH", path_with_cargo_tools())
        .current_dir(repo_path("."));
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.guarded_output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}; {INSTALL}"))
}

/// `cargo deny` at the pinned version, or a panic saying how to install it.
fn cargo_deny() -> Command {
    let version = run(command("cargo").args(["deny", "--version"]));
    assert!(
        version.status.success(),
        "cargo-deny is not installed: {INSTALL}\n{}",
        text(&version)
    );
    let mut cmd = command("cargo");
    cmd.arg("deny");
    cmd
}

/// Every crate of both lockfiles downloaded (cargo-deny reads their manifests through
/// `cargo metadata`, offline), once for the binary.
fn fetched() {
    static FETCHED: OnceLock<()> = OnceLock::new();
    FETCHED.get_or_init(|| {
        for manifest in ["Cargo.toml", "fuzz/Cargo.toml"] {
            let out =
                run(command("cargo").args(["fetch", "--locked", "--manifest-path", manifest]));
            assert!(
                out.status.success(),
                "cargo fetch ({manifest}): {}",
                text(&out)
            );
        }
    });
}

/// The RustSec snapshot of `../shared/advisory-db` (or `$ADVISORY_DB_BUNDLE`), cloned into a
/// folder laid out as cargo-deny's `db-path` (deny.toml reads `$ADVISORY_DBS`).
fn advisory_dbs() -> tempfile::TempDir {
    let bundle = std::env::var_os("ADVISORY_DB_BUNDLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_path("../shared/advisory-db/advisory-db.bundle"));
    assert!(
        bundle.is_file(),
        "no RustSec snapshot at {}: the advisory check needs ../shared/advisory-db (or \
         ADVISORY_DB_BUNDLE naming a git bundle of rustsec/advisory-db)",
        bundle.display()
    );
    let dbs = tempfile::tempdir().unwrap();
    let out = run(Command::new("git").args([
        "clone",
        "--quiet",
        &bundle.to_string_lossy(),
        &dbs.path().join(ADVISORY_DB_DIR).to_string_lossy(),
    ]));
    assert!(
        out.status.success(),
        "git clone of {}: {}",
        bundle.display(),
        text(&out)
    );
    dbs
}

/// `cargo deny --offline check ARGS` on the workspace of `manifest` with deny.toml, the
/// advisory databases in `dbs`.
fn deny_check(manifest: &str, dbs: &Path, args: &[&str]) -> Output {
    fetched();
    run(cargo_deny()
        .args(["--offline", "--manifest-path", manifest])
        .args(["--config", "deny.toml", "check"])
        .args(args)
        .env("ADVISORY_DBS", dbs))
}

#[test]
fn both_workspaces_pass_bans_licenses_and_sources_offline() {
    let dbs = tempfile::tempdir().unwrap();
    // The main workspace: a skip, a license or an exception nothing needs any more is an error
    // too, so deny.toml says what the tree is, not what it was.
    let out = deny_check(
        "Cargo.toml",
        dbs.path(),
        &[
            "-D",
            "unmatched-skip",
            "-D",
            "license-not-encountered",
            "-D",
            "license-exception-not-encountered",
            "bans",
            "licenses",
            "sources",
        ],
    );
    assert!(
        out.status.success() && text(&out).contains("bans ok, licenses ok, sources ok"),
        "cargo deny check: {}",
        text(&out)
    );
    // The fuzz workspace, with the same file (its graph is smaller: the skips are not needed).
    let out = deny_check(
        "fuzz/Cargo.toml",
        dbs.path(),
        &["bans", "licenses", "sources"],
    );
    assert!(
        out.status.success(),
        "cargo deny check (fuzz/): {}",
        text(&out)
    );
}

#[test]
fn both_workspaces_pass_the_advisories_of_the_snapshot() {
    let dbs = advisory_dbs();
    for manifest in ["Cargo.toml", "fuzz/Cargo.toml"] {
        let out = deny_check(manifest, dbs.path(), &["advisories"]);
        assert!(
            out.status.success(),
            "cargo deny check advisories ({manifest}) against the snapshot: {}",
            text(&out)
        );
        assert!(text(&out).contains("advisories ok"), "{}", text(&out));
    }
}

/// An advisory against a crate of the tree, added to a copy of the snapshot, fails the check
/// with its id and the crate: the check reads the database it is given, and matches the lock.
#[test]
fn a_planted_advisory_fails_the_check() {
    let dbs = advisory_dbs();
    let crate_dir = dbs
        .path()
        .join(ADVISORY_DB_DIR)
        .join("crates/saphyr-parser");
    std::fs::create_dir_all(&crate_dir).unwrap();
    std::fs::write(
        crate_dir.join("RUSTSEC-2099-0001.md"),
        "```toml\n[advisory]\nid = \"RUSTSEC-2099-0001\"\npackage = \"saphyr-parser\"\n\
         date = \"2026-11-01\"\nurl = \"https://example.invalid/RUSTSEC-2099-0001\"\n\
         categories = [\"memory-corruption\"]\n\n[versions]\npatched = [\">= 99.0.0\"]\n```\n\n\
         # Planted by tests/release.rs\n\nEvery version before 99 is affected.\n",
    )
    .unwrap();
    assert_refused(
        deny_check("Cargo.toml", dbs.path(), &["advisories"]),
        "the planted advisory passed",
        &["RUSTSEC-2099-0001", "saphyr-parser"],
    );
}

/// A workspace of path crates (nothing to download): `planted` depends on `openssl` (banned by
/// deny.toml) and `copyleft` (GPL-3.0-only, not on the allow-list); its metadata, edited, also
/// takes a crate from a git repository. Each rule refuses its offender, by name.
#[test]
fn planted_offenders_fail_bans_licenses_and_sources() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let manifest = |dir: &str, name: &str, version: &str, license: &str, deps: &str| {
        std::fs::create_dir_all(root.join(dir).join("src")).unwrap();
        std::fs::write(
            root.join(dir).join("Cargo.toml"),
            format!(
                "[package]\nname = \"{name}\"\nversion = \"{version}\"\nedition = \"2021\"\n\
                 license = \"{license}\"\npublish = false\n\n[dependencies]\n{deps}"
            ),
        )
        .unwrap();
        std::fs::write(root.join(dir).join("src/lib.rs"), "").unwrap();
    };
    manifest(
        ".",
        "planted",
        "0.1.0",
        "Apache-2.0",
        "openssl = { path = \"openssl\", version = \"0.10.0\" }\n\
         copyleft = { path = \"copyleft\", version = \"1.0.0\" }\n",
    );
    std::fs::write(
        root.join("Cargo.toml"),
        std::fs::read_to_string(root.join("Cargo.toml")).unwrap() + "\n[workspace]\n",
    )
    .unwrap();
    manifest("openssl", "openssl", "0.10.0", "Apache-2.0", "");
    manifest("copyleft", "copyleft", "1.0.0", "GPL-3.0-only", "");
    let config = repo_path("deny.toml");
    let metadata = run(command("cargo")
        .args(["metadata", "--format-version", "1", "--offline"])
        .current_dir(root));
    assert!(
        metadata.status.success(),
        "cargo metadata: {}",
        text(&metadata)
    );
    let deny = |which: &str, metadata_path: Option<&Path>| {
        let mut cmd = cargo_deny();
        cmd.args(["--offline", "--manifest-path"])
            .arg(root.join("Cargo.toml"))
            .arg("--config")
            .arg(&config);
        if let Some(path) = metadata_path {
            cmd.arg("--metadata-path").arg(path);
        }
        run(cmd
            .args(["check", which])
            .env("ADVISORY_DBS", root.join("dbs")))
    };

    assert_refused(
        deny("bans", None),
        "openssl passed the bans",
        &["openssl", "TLS is rustls with ring"],
    );

    assert_refused(
        deny("licenses", None),
        "GPL-3.0-only passed",
        &["copyleft", "GPL-3.0-only"],
    );

    // Sources: the same graph, `openssl` coming from a git repository instead of a path
    // (cargo metadata cannot fetch one offline, so the metadata is edited).
    let json = String::from_utf8(metadata.stdout).unwrap();
    let old_id = json
        .split('"')
        .find(|s| s.starts_with("path+file://") && s.ends_with("openssl#0.10.0"))
        .expect("the openssl package id in cargo metadata")
        .to_string();
    let source = "git+https://github.com/example/openssl?rev=0123456#0123456789abcdef0123456789abcdef01234567";
    let mut metadata: serde_json::Value =
        serde_json::from_str(&json.replace(&old_id, &format!("{source}#openssl@0.10.0"))).unwrap();
    for package in metadata["packages"].as_array_mut().unwrap() {
        if package["name"] == "openssl" {
            package["source"] = source.into();
        }
    }
    let edited = root.join("metadata.json");
    std::fs::write(&edited, metadata.to_string()).unwrap();
    assert_refused(
        deny("sources", Some(&edited)),
        "a git source passed",
        &["github.com/example/openssl"],
    );
}

/// That `out` is a failure that names each of `needles` on stderr; `what` says what passed.
fn assert_refused(out: Output, what: &str, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: {}", text(&out));
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "no {needle:?} in the refusal: {stderr}"
        );
    }
}

/// scripts/dist.sh's output for this host, made once (PROFILE=release: the static build
/// scripts/test.sh has made already, at the opt-level it sets; the release builds `dist`).
/// Kept to the binary's end, which no drop reaches: the watchdog removes the folder.
fn dist() -> &'static (tempfile::TempDir, PathBuf, process::Entry) {
    static DIST: OnceLock<(tempfile::TempDir, PathBuf, process::Entry)> = OnceLock::new();
    DIST.get_or_init(|| {
        let out_dir = tempfile::tempdir().unwrap();
        let watched = process::leave_to_watchdog(out_dir.path());
        let out = run(command("scripts/dist.sh")
            .arg(out_dir.path())
            .env("PROFILE", "release")
            .env_remove("GITHUB_REF_NAME"));
        assert!(out.status.success(), "scripts/dist.sh: {}", text(&out));
        let binary = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().next().unwrap());
        (out_dir, binary, watched)
    })
}

fn version() -> String {
    let manifest = std::fs::read_to_string(repo_path("Cargo.toml")).unwrap();
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap()
        .to_string()
}

/// `rust-audit-info BINARY`, parsed.
fn audit_info(binary: &Path) -> serde_json::Value {
    let out = run(command("rust-audit-info").arg(binary));
    assert!(
        out.status.success(),
        "rust-audit-info {}: {}",
        binary.display(),
        text(&out)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Validates `path` against the CycloneDX 1.5 JSON schema (strict: no unknown property), with
/// cyclonedx-python-lib from target/tools.
fn assert_valid_cyclonedx(path: &Path) {
    let python = repo_path("target/tools/bin/python");
    assert!(python.is_file(), "no {}: {INSTALL}", python.display());
    let out = run(Command::new(python)
        .args([
            "-c",
            "import sys\n\
             from cyclonedx.schema import SchemaVersion\n\
             from cyclonedx.validation.json import JsonStrictValidator\n\
             error = JsonStrictValidator(SchemaVersion.V1_5).validate_str(open(sys.argv[1]).read())\n\
             sys.exit(f'invalid: {error}' if error else 0)\n",
        ])
        .arg(path));
    assert!(
        out.status.success(),
        "{} against CycloneDX 1.5: {}",
        path.display(),
        text(&out)
    );
}

#[test]
fn the_release_binary_carries_its_dependency_list_and_its_sbom_names_the_same() {
    let (_, binary, _) = dist();
    let version = version();
    let name = binary.file_name().unwrap().to_string_lossy().to_string();
    assert_eq!(name, format!("linkerd-multus-v{version}-{HOST_TARGET}"));

    // Read back from the binary: its root and the crates a user would look for.
    let info = audit_info(binary);
    let packages = info["packages"].as_array().unwrap();
    let has = |name: &str| packages.iter().find(|p| p["name"] == name);
    let root = packages.iter().find(|p| p["root"] == true).unwrap();
    assert_eq!(root["name"], "linkerd-multus");
    assert_eq!(root["version"], version.as_str());
    let lock = std::fs::read_to_string(repo_path("Cargo.lock")).unwrap();
    for name in ["kube-client", "rustls", "ring", "saphyr-parser", "tokio"] {
        let package = has(name).unwrap_or_else(|| panic!("{name} is not in the binary's list"));
        let locked = format!(
            "name = \"{name}\"\nversion = \"{}\"",
            package["version"].as_str().unwrap()
        );
        assert!(
            lock.contains(&locked),
            "{name} in the binary is not Cargo.lock's: {package}"
        );
    }
    // Nothing the shipped binary does not link: test-only crates are not in it.
    for name in ["tempfile", "proptest", "criterion"] {
        assert!(has(name).is_none(), "{name} is in the binary's list");
    }

    // The SBOM: valid CycloneDX 1.5, the binary at its top, every crate with its purl, its
    // license and, for crates.io's, Cargo.lock's checksum.
    let sbom_path = PathBuf::from(format!("{}.cdx.json", binary.display()));
    assert_valid_cyclonedx(&sbom_path);
    let sbom: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sbom_path).unwrap()).unwrap();
    assert_eq!(sbom["metadata"]["component"]["name"], "linkerd-multus");
    assert_eq!(sbom["metadata"]["component"]["version"], version.as_str());
    let components = sbom["components"].as_array().unwrap();
    assert_eq!(
        components.len() + 1,
        packages.len(),
        "the SBOM and the binary differ in size"
    );
    for c in components {
        let (name, version) = (c["name"].as_str().unwrap(), c["version"].as_str().unwrap());
        assert_eq!(c["purl"], format!("pkg:cargo/{name}@{version}"), "{c}");
        assert!(
            c["licenses"].as_array().is_some_and(|l| !l.is_empty()),
            "{name}: no license"
        );
        let sha = c["hashes"][0]["content"].as_str().unwrap_or_default();
        assert!(
            lock.contains(&format!("checksum = \"{sha}\"")) && sha.len() == 64,
            "{name} {version}: the SBOM's SHA-256 is not Cargo.lock's checksum"
        );
    }
}

/// A binary built without cargo auditable (the test binary itself) carries no list, and
/// rust-audit-info says so: the read-back above cannot pass on any binary.
#[test]
fn a_binary_without_the_list_is_refused_by_the_read_back() {
    let me = std::env::current_exe().unwrap();
    let out = run(command("rust-audit-info").arg(&me));
    assert!(
        !out.status.success(),
        "rust-audit-info found a list in {}",
        me.display()
    );
}

/// The image scripts/container.sh builds (the static binary of scripts/dist.sh, FROM scratch),
/// named as a release names it, and the files in it.
#[test]
fn the_image_sbom_describes_the_image_byte_for_byte() {
    let (out_dir, binary, _) = dist();
    let image = dev_image();
    let built = run(command("scripts/container.sh").env("IMAGE", &image));
    assert!(
        built.status.success(),
        "scripts/container.sh: {}",
        text(&built)
    );
    let digest =
        run(command("podman").args(["image", "inspect", "--format", "{{.Digest}}", &image]));
    let digest = String::from_utf8_lossy(&digest.stdout).trim().to_string();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "digest {digest:?}"
    );

    let tag = format!("v{}", version());
    let out = run(command("python3").args([
        "scripts/image-sbom.py",
        "--image",
        "ghcr.io/linkerd-multus/linkerd-multus",
        "--tag",
        &tag,
        "--digest",
        &digest,
        "--binary",
        &format!("linux/amd64={}", binary.display()),
    ]));
    assert!(
        out.status.success(),
        "scripts/image-sbom.py: {}",
        text(&out)
    );
    let path = out_dir.path().join("image.cdx.json");
    std::fs::write(&path, &out.stdout).unwrap();
    assert_valid_cyclonedx(&path);
    let sbom: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let top = &sbom["metadata"]["component"];
    assert_eq!(top["type"], "container");
    assert_eq!(
        top["purl"],
        format!(
            "pkg:oci/linkerd-multus@sha256%3A{}?repository_url=ghcr.io/linkerd-multus/linkerd-multus&tag={tag}",
            &digest[7..]
        )
    );

    // Each file the SBOM lists, hashed as it is in the image.
    let container = run(command("podman").args(["create", &image]));
    assert!(
        container.status.success(),
        "podman create: {}",
        text(&container)
    );
    let id = String::from_utf8_lossy(&container.stdout)
        .trim()
        .to_string();
    let copied = tempfile::tempdir().unwrap();
    let mut checked = Vec::new();
    for component in sbom["components"].as_array().unwrap() {
        let in_image = match component["type"].as_str() {
            Some("file") => component["name"].as_str().unwrap().to_string(),
            Some("application") => component["properties"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "oci:path")
                .unwrap()["value"]
                .as_str()
                .unwrap()
                .to_string(),
            other => panic!("unexpected component type {other:?}"),
        };
        let local = copied.path().join(checked.len().to_string());
        let cp = run(command("podman")
            .args(["cp", &format!("{id}:{in_image}")])
            .arg(&local));
        assert!(cp.status.success(), "podman cp {in_image}: {}", text(&cp));
        let sha = run(Command::new("sha256sum").arg(&local));
        let sha = String::from_utf8_lossy(&sha.stdout);
        assert_eq!(
            component["hashes"][0]["content"].as_str(),
            sha.split_whitespace().next(),
            "{in_image}: the SBOM's SHA-256 is not the image's file"
        );
        checked.push(in_image);
    }
    let _ = run(command("podman").args(["rm", &id]));
    assert_eq!(
        checked,
        ["/usr/local/bin/linkerd-multus", "/etc/passwd", "/etc/group"]
    );
    // The binary's crates are all there, under refs of their own target.
    let binary_sbom = &sbom["components"][0];
    assert_eq!(binary_sbom["bom-ref"], HOST_TARGET);
    assert!(
        binary_sbom["components"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["bom-ref"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{HOST_TARGET}/"))),
    );
}

#[test]
fn the_released_packages_pin_the_image_by_tag_and_digest_and_change_nothing_else() {
    let tag = format!("v{}", version());
    let digest = format!("sha256:{}", "ab".repeat(32));
    let reference = format!("ghcr.io/linkerd-multus/linkerd-multus:{tag}@{digest}");
    let out_dir = tempfile::tempdir().unwrap();
    let out = run(command("scripts/release-manifests.sh")
        .arg(&reference)
        .arg(out_dir.path()));
    assert!(
        out.status.success(),
        "scripts/release-manifests.sh: {}",
        text(&out)
    );
    let tarball = out_dir
        .path()
        .join(format!("linkerd-multus-{tag}-packages.tar.gz"));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        tarball.to_string_lossy()
    );
    let unpacked = tempfile::tempdir().unwrap();
    let tar = run(Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(unpacked.path()));
    assert!(tar.status.success(), "tar: {}", text(&tar));
    let packages = unpacked
        .path()
        .join(format!("linkerd-multus-{tag}-packages"));

    // Every file is the repository's, but for the image lines.
    let mut pinned = 0;
    let mut files = 0;
    for package in [
        "deploy",
        "deploy-nad-controller",
        "deploy-network-resources",
        "deploy-restarts",
    ] {
        for file in walk(&repo_path(package)) {
            let rel = file.strip_prefix(repo_path(".")).unwrap();
            let ours = std::fs::read_to_string(&file).unwrap();
            let released = std::fs::read_to_string(packages.join(rel))
                .unwrap_or_else(|e| panic!("{} is not in the tarball: {e}", rel.display()));
            files += 1;
            for (a, b) in ours.lines().zip(released.lines()) {
                if a != b {
                    assert_eq!(
                        a.replace(
                            &format!("linkerd-multus:{tag}"),
                            &format!("linkerd-multus:{tag}@{digest}")
                        ),
                        b,
                        "{}: a line other than the image changed",
                        rel.display()
                    );
                    pinned += 1;
                }
            }
            assert_eq!(
                ours.lines().count(),
                released.lines().count(),
                "{}",
                rel.display()
            );
        }
    }
    assert!(files > 10, "{files} files");
    assert_eq!(
        pinned, 2,
        "the webhook's and the NAD controller's container images, one each"
    );

    // Reproducible: the same input gives the same bytes.
    let again = tempfile::tempdir().unwrap();
    let out = run(command("scripts/release-manifests.sh")
        .arg(&reference)
        .arg(again.path()));
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(&tarball).unwrap(),
        std::fs::read(again.path().join(tarball.file_name().unwrap())).unwrap(),
        "two runs gave different tarballs"
    );

    // Refused: a reference without a digest, and one of another version.
    for wrong in [
        format!("ghcr.io/linkerd-multus/linkerd-multus:{tag}"),
        format!(
            "ghcr.io/linkerd-multus/linkerd-multus:{}@{digest}",
            "v9.9.9"
        ),
    ] {
        let out = run(command("scripts/release-manifests.sh")
            .arg(&wrong)
            .arg(again.path()));
        assert!(!out.status.success(), "{wrong} was taken");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&wrong),
            "{}",
            text(&out)
        );
    }
}

/// Every file under `dir`, sorted.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}
