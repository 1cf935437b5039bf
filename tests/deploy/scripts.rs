//! The scripts: `deploy/certs.sh` run for real (openssl), the e2e script and every shell
//! script under `bash -n` and shellcheck.

use super::*;

// ------------------------------------------------------------------------------------------
// deploy/certs.sh

fn openssl(args: &[&str]) -> Output {
    run(Command::new("openssl").args(args))
}

fn certs_sh(args: &[&str]) -> Output {
    run(Command::new("bash")
        .arg(repo_path("deploy/certs.sh"))
        .args(args))
}

fn sans(cert: &Path) -> String {
    let out = openssl(&[
        "x509",
        "-in",
        cert.to_str().unwrap(),
        "-noout",
        "-ext",
        "subjectAltName",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn verify(dir: &Path) {
    let ca = dir.join("ca.crt");
    let cert = dir.join("tls.crt");
    let out = openssl(&[
        "verify",
        "-CAfile",
        ca.to_str().unwrap(),
        "-purpose",
        "sslserver",
        cert.to_str().unwrap(),
    ]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains(": OK"),
        "openssl verify:\n{}",
        text(&out)
    );
}

#[test]
fn certs_sh_makes_a_certificate_the_ca_verifies() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("certs");
    let d = dir.to_str().unwrap();
    let out = certs_sh(&[
        "--out",
        d,
        "--san",
        "192.0.2.10",
        "--san",
        "webhook.example.test",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    verify(&dir);
    let names = sans(&dir.join("tls.crt"));
    for want in [
        format!("DNS:{NAME},"),
        format!("DNS:{NAME}.{NAMESPACE},"),
        format!("DNS:{NAME}.{NAMESPACE}.svc,"),
        format!("DNS:{NAME}.{NAMESPACE}.svc.cluster.local,"),
        "DNS:webhook.example.test".to_string(),
        "IP Address:192.0.2.10".to_string(),
    ] {
        assert!(names.contains(&want), "SANs lack {want}: {names}");
    }
    // The serving certificate's names are those of the cert-manager Certificate.
    let pkg = Package::load();
    for dns in strings(pkg.get("Certificate", NAME).at(&["spec", "dnsNames"])) {
        assert!(
            names.contains(&format!("DNS:{dns}")),
            "certs.sh lacks {dns}: {names}"
        );
    }
    for key in ["ca.key", "tls.key"] {
        let mode = std::fs::metadata(dir.join(key))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{key} mode {mode:o}");
    }
    let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("caBundle"), "{stdout}");

    // A second run keeps the CA (the caBundle stays valid) and makes a new serving
    // certificate for other names (another namespace).
    let ca_before = std::fs::read(dir.join("ca.crt")).unwrap();
    let cert_before = std::fs::read(dir.join("tls.crt")).unwrap();
    let out = certs_sh(&["--out", d, "--namespace", "mesh-webhook"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(dir.join("ca.crt")).unwrap(), ca_before);
    assert_ne!(std::fs::read(dir.join("tls.crt")).unwrap(), cert_before);
    verify(&dir);
    let names = sans(&dir.join("tls.crt"));
    assert!(
        names.contains(&format!("DNS:{NAME}.mesh-webhook.svc.cluster.local")),
        "{names}"
    );
    assert!(!names.contains("192.0.2.10"), "{names}");
}

#[test]
fn certs_sh_refuses_a_git_work_tree_and_bad_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let out = run(Command::new("git").args(["init", "-q"]).current_dir(&repo));
    assert!(out.status.success(), "{}", text(&out));
    let inside = repo.join("certs");
    let out = certs_sh(&["--out", inside.to_str().unwrap()]);
    assert!(
        !out.status.success(),
        "a directory in a Git work tree was accepted"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Git work tree"),
        "{}",
        text(&out)
    );
    assert!(!inside.exists(), "the refused directory was created");

    for bad in [
        vec![],
        vec!["--out"],
        vec!["--out", "/nonexistent/x", "--san", "not a name"],
        vec!["--out", "/nonexistent/x", "--days", "0"],
        vec!["--bogus"],
    ] {
        let out = certs_sh(&bad);
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("error: "),
            "{bad:?}: {}",
            text(&out)
        );
    }
    assert!(!Path::new("/nonexistent/x").exists());
    let out = certs_sh(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--apply"));
}

/// `--apply` with a stand-in kubectl that records its calls: the Secret holds the three files
/// and is stored with server-side apply; the caBundle patch carries the CA.
#[test]
fn certs_sh_apply_stores_the_secret_and_the_ca_bundle() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let log = tmp.path().join("kubectl.log");
    let fake = format!(
        r#"#!/usr/bin/env bash
echo "kubectl $*" >> '{log}'
case "$*" in
  "get namespace "*) exit 0 ;;
  *"jsonpath={{range .webhooks[*]}}"*) printf 'attach.multus.linkerd.io\n' ;;
  *"inject-ca-from"*) printf '' ;;
  *"create secret"*) echo "secret-yaml" ;;
  "apply "*) echo "stdin: $(cat)" >> '{log}' ;;
  "patch "*) ;;
  *) echo "unexpected kubectl $*" >&2; exit 1 ;;
esac
"#,
        log = log.display()
    );
    let kubectl = bin_dir.join("kubectl");
    std::fs::write(&kubectl, fake).unwrap();
    std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tmp.path().join("certs");
    let out = run(Command::new("bash")
        .arg(repo_path("deploy/certs.sh"))
        .args(["--out", dir.to_str().unwrap(), "--apply"])
        .env("PATH", &path));
    assert!(out.status.success(), "{}", text(&out));
    let calls = std::fs::read_to_string(&log).unwrap();
    let d = dir.display();
    assert!(
        calls.contains(&format!(
            "kubectl -n {NAMESPACE} create secret generic {TLS_SECRET} --type=kubernetes.io/tls --from-file=tls.crt={d}/tls.crt --from-file=tls.key={d}/tls.key --from-file=ca.crt={d}/ca.crt --dry-run=client -o yaml"
        )),
        "{calls}"
    );
    assert!(calls.contains("kubectl apply --server-side"), "{calls}");
    assert!(calls.contains("stdin: secret-yaml"), "{calls}");
    let b64 = run(Command::new("base64").arg("-w0").arg(dir.join("ca.crt")));
    let ca_bundle = String::from_utf8(b64.stdout).unwrap();
    assert!(ca_bundle.starts_with("LS0t"), "{ca_bundle}");
    let patch_line = calls
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "kubectl patch mutatingwebhookconfiguration {NAME} --type=json -p "
            ))
        })
        .unwrap_or_else(|| panic!("no caBundle patch in:\n{calls}"));
    let patch: serde_json::Value =
        serde_json::from_str(patch_line.split_once(" -p ").unwrap().1).expect("JSON patch");
    assert_eq!(
        patch,
        serde_json::json!([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": ca_bundle}])
    );
}

// ------------------------------------------------------------------------------------------
// Shell scripts.

#[test]
fn e2e_script_parses_and_explains_itself() {
    let script = repo_path("scripts/e2e-webhook.sh");
    let out = run(Command::new("bash").arg("-n").arg(&script));
    assert!(out.status.success(), "bash -n:\n{}", text(&out));
    let out = run(Command::new("bash").arg(&script).arg("--help"));
    assert!(out.status.success(), "{}", text(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    for want in [
        "--url",
        "--ca-file",
        "kind create cluster",
        "docker network inspect kind",
        "k3d",
        "k3s",
        "OpenShift",
        "--dry-run=server",
        "1000682102",
    ] {
        assert!(
            help.contains(want),
            "--help does not mention {want}:\n{help}"
        );
    }
    // Without --url it stops before touching any cluster, with a usage error.
    let out = run(Command::new("bash")
        .arg(&script)
        .env("KUBECONFIG", "/nonexistent"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--url is required"));
    let out = run(Command::new("bash")
        .arg(&script)
        .args(["--url", "http://192.0.2.1/mutate"])
        .env("KUBECONFIG", "/nonexistent"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("https://"),
        "{}",
        text(&out)
    );

    let readme = std::fs::read_to_string(repo_path("deploy/README.md")).unwrap();
    assert!(readme.contains("scripts/e2e-webhook.sh"));
}

/// scripts/survivors.sh names a process of this checkout's target/ still running (a planted
/// copy of `sleep`) and each file left in the tests' temporary folder, which it removes.
#[test]
fn survivors_script_names_a_planted_leak_and_what_is_left() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let planted = dir.path().join("sleep");
    std::fs::copy(which("sleep").expect("sleep on PATH"), &planted).unwrap();
    let leak = common::process::Guard::spawn(Command::new(&planted).arg("600")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::fs::create_dir(scratch.path().join(".tmpLeft")).unwrap();
    let out = run(Command::new(repo_path("scripts/survivors.sh"))
        .args(["--since", &leak.id().to_string(), "--grace", "0"])
        .arg(scratch.path()));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let named = format!("\n  {} {} 600\n", leak.id(), planted.display());
    assert!(stderr.contains(&named), "{named:?} not in:\n{stderr}");
    let left = format!("\n  {}\n", scratch.path().join(".tmpLeft").display());
    assert!(stderr.contains(&left), "{left:?} not in:\n{stderr}");
    assert!(!scratch.path().exists(), "the temporary folder is removed");
}

#[test]
fn shell_scripts_pass_shellcheck() {
    let shellcheck = which("shellcheck").unwrap_or_else(|| {
        panic!(
            "shellcheck is not installed: `apt-get install shellcheck` (Debian/Ubuntu; .ci/run \
             installs it); the shell-script tests need it (they do not skip)"
        )
    });
    let mut scripts = Vec::new();
    for dir in ["scripts", "deploy"] {
        for (rel, _) in snapshot(&repo_path(dir)) {
            if rel.ends_with(".sh") && !rel.contains('/') {
                scripts.push(repo_path(dir).join(rel));
            }
        }
    }
    assert!(scripts.iter().any(|s| s.ends_with("e2e-webhook.sh")));
    assert!(scripts.iter().any(|s| s.ends_with("certs.sh")));
    let out = run(Command::new(shellcheck).args(&scripts));
    assert!(out.status.success(), "shellcheck:\n{}", text(&out));
    for s in &scripts {
        let out = run(Command::new("bash").arg("-n").arg(s));
        assert!(
            out.status.success(),
            "bash -n {}:\n{}",
            s.display(),
            text(&out)
        );
    }
}
