//! `diff`, the CI gate over files: its diff and exit codes, and the old `check PATH...`
//! that says where the gate went.

use super::*;
use crate::common::process::Guarded;

#[test]
fn diff_fails_with_a_diff_until_the_package_is_rendered() {
    let dir = example_copy();
    let p = dir.path();
    let before = snapshot(p);
    let out = render(&["diff", "."], p);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("--- a/apps/web.yaml\n+++ b/apps/web.yaml\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("-        k8s.v1.cni.cncf.io/networks: storage@net1\n+        k8s.v1.cni.cncf.io/networks: storage@net1,linkerd-cni\n"));
    assert!(out.stdout.contains(
        "--- /dev/null\n+++ b/namespaces/networkattachmentdefinition_demo_linkerd-cni.yaml\n"
    ));
    assert!(
        out.stderr.contains("2 files are not rendered"),
        "{}",
        out.stderr
    );
    assert_eq!(snapshot(p), before, "diff must not write anything");
    // --diff shows the same change and succeeds.
    let diff = render(&["render", "--diff", "."], p);
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    assert_eq!(diff.stdout, out.stdout);

    // Rendered by the real kpt with the same binary: diff passes.
    add_exec_pipeline(p);
    let kpt = Command::new("kpt")
        .args(["fn", "render", "--allow-exec", "."])
        .current_dir(p)
        .guarded_output()
        .expect("kpt is not installed: the tests run the real kpt (see README.md)");
    assert!(
        kpt.status.success(),
        "{}",
        String::from_utf8_lossy(&kpt.stderr)
    );
    let ok = render(&["diff", "."], p);
    assert_eq!(ok.code, 0, "{}\n{}", ok.stdout, ok.stderr);
    assert_eq!(ok.stdout, "");
    // An edit that forgets to render fails again.
    let web = p.join("apps/web.yaml");
    let text = std::fs::read_to_string(&web).unwrap();
    std::fs::write(
        &web,
        text.replace("storage@net1,linkerd-cni", "storage@net1"),
    )
    .unwrap();
    let stale = render(&["diff", "."], p);
    assert_eq!(stale.code, 1);
    // The Kptfile runs the binary by exec:, so the command named is the one kpt accepts.
    assert_eq!(
        stale.stderr,
        "1 file is not rendered; run the render (kpt fn render --allow-exec) and commit the result\n"
    );
    assert!(
        stale
            .stdout
            .contains("+        k8s.v1.cni.cncf.io/networks: storage@net1,linkerd-cni")
    );
}

#[test]
fn diff_help_lists_its_exit_codes() {
    let out = render(&["diff", "--help"], Path::new("/"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.ends_with(
            "\n\nExit codes:\n  0  every file is rendered\n  1  rendering would change a file: the diff is on stdout\n  2  the files could not be checked (an input or a setting is wrong, an opt-in annotation is written wrong (a value neither enabled nor disabled, a misspelt key), or the rules found an error: stderr says which), or the command line is wrong\n"
        ),
        "{}",
        out.stdout
    );
    // The codes are the ones diff returns: 2 for a command line it cannot read.
    assert_eq!(render(&["diff"], Path::new("/")).code, 2);
}

/// The gate was `check PATH...` until `check` became the Linkerd extension's:
/// the old form says where it went, with exit 2 (a gate that cannot check),
/// and `--reference` reads what `--context` read.
#[test]
fn the_old_check_says_the_gate_is_diff_now() {
    let dir = example_copy();
    let p = dir.path();
    let old = render(&["check", "."], p);
    assert_eq!(old.code, 2, "{}", old.stderr);
    assert_eq!(old.stdout, "");
    assert!(
        old.stderr
            .contains("run `linkerd-multus diff .` (its --context is now --reference"),
        "{}",
        old.stderr
    );
    let new = render(&["diff", "."], p);
    assert_eq!(new.code, 1, "{}", new.stderr);
    let diff = render(&["diff", "--context", "x", "."], p);
    assert_eq!(diff.code, 2, "diff takes no --context: {}", diff.stderr);
    assert!(diff.stderr.contains("--context"), "{}", diff.stderr);
}

#[test]
fn diff_reports_errors_apart_from_differences() {
    let dir = example_copy();
    std::fs::write(dir.path().join("apps/bad.yaml"), "- not an object\n").unwrap();
    let out = render(&["diff", "."], dir.path());
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .starts_with("error: apps/bad.yaml (document 1): not a Kubernetes object")
    );
}
