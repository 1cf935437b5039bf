//! `linkerd multus preview` and the workloads Git or Helm hold, through the real API server
//! (issue 47, items 2 and 5): the preview lists, without changing anything, what the
//! controller then does once the ConfigMap is applied, in its order; a workload whose pod
//! template a team applies server-side is reported and never patched, and the team's next
//! applies succeed without `--force-conflicts`; a Helm release is restarted, and a later
//! `helm upgrade` still applies.

use std::process::Command;
use std::time::Duration;

use linkerd_multus::linkerd_cni::rollout::config_hash;
use serde_json::json;

use super::common::bin;
use super::common::helm::helm;
use super::common::process::Guard;
use super::harness::{BOUND, CONFIG_MAP, Setup, eventually};
use super::restarts::{
    Deployment, HASH, OLD, OPT_IN, audited_setup, complete, its_pod, names, namespace, patches,
    start, template_hash, warned, workload,
};

/// The flags of the controller here and of its Deployment, which the preview reads.
const FLAGS: [&str; 2] = ["--restart-concurrency=1", "--restart-deadline=2m"];
/// The team's field manager.
const TEAM: &str = "team-payments";

/// The installed NAD controller's Deployment as `install` makes it, as far as the preview
/// reads it: its arguments (no pod runs from it here; the test's controller process is the
/// controller).
fn installed(s: &Setup) {
    let mut args = vec![
        "controller".to_string(),
        format!("--cni-namespace={}", s.cni),
        format!("--linkerd-namespace={}", s.control_plane),
        "--restart-stale-workloads".to_string(),
    ];
    args.extend(FLAGS.iter().map(ToString::to_string));
    s.plane.apply(
        &json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "linkerd-multus-nad-controller", "namespace": "linkerd-multus"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "nad-controller"}},
                "template": {
                    "metadata": {"labels": {"app": "nad-controller"}},
                    "spec": {"containers": [{"name": "controller", "image": "registry.k8s.io/pause:3.10", "args": args}]}
                }
            }
        })
        .to_string(),
    );
}

/// The team's Deployment as its Git holds it, with `hash` in its pod template if any.
fn teams(namespace: &str, hash: Option<&str>) -> String {
    let mut annotations = json!({});
    if let Some(hash) = hash {
        annotations[HASH] = json!(hash);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "git", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "git"}},
            "template": {
                "metadata": {"labels": {"app": "git"}, "annotations": annotations},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    })
    .to_string()
}

/// `kubectl apply --server-side --field-manager=team-payments` of `yaml`, without
/// `--force-conflicts`: must succeed.
fn team_applies(s: &Setup, yaml: &str) {
    s.plane.kubectl_ok(
        &[
            "apply",
            "--server-side",
            &format!("--field-manager={TEAM}"),
            "-f",
            "-",
        ],
        yaml,
    );
}

/// The resourceVersion of every Deployment and NAD: what a change would move.
fn versions(s: &Setup) -> String {
    s.plane.kubectl(&[
        "get",
        "deployments,network-attachment-definitions.k8s.cni.cncf.io",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}={.metadata.resourceVersion} {end}",
    ])
}

/// The preview of `config_map` (a file), as the admin.
fn preview(s: &Setup, config_map: &str) -> String {
    let file = s.dir.path().join("new-config.yaml");
    std::fs::write(
        &file,
        config_map.replace("namespace: linkerd-cni", &format!("namespace: {}", s.cni)),
    )
    .unwrap();
    let out = Guard::output(
        Command::new(bin())
            .arg("preview")
            .arg("-f")
            .arg(&file)
            .arg("--kubeconfig")
            .arg(&s.plane.admin_kubeconfig),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The preview of an edited ConfigMap names, in waves of one, the opted-in workloads in the
/// controller's order (the namespaces in turn), leaves the team's Deployment to the team
/// (its field manager named), lists the one not opted in, and changes nothing. Applied, the
/// ConfigMap makes the controller restart exactly those, in that order; the team's
/// Deployment is reported, never patched, and the team's applies (as before, then rendered
/// with the new hash) succeed without --force-conflicts, after which nothing is patched.
#[test]
fn the_preview_is_what_the_controller_then_does_and_git_keeps_its_workloads() {
    let (s, audited, kubeconfig) = audited_setup();
    installed(&s);
    let controller = start(&s, "only", &kubeconfig, &FLAGS);
    let (a, current) = namespace(&s, "a", &[(OPT_IN, "enabled")]);
    let (b, _) = namespace(&s, "b", &[(OPT_IN, "enabled")]);
    let (c, _) = namespace(&s, "c", &[(OPT_IN, "enabled")]);
    let (d, _) = namespace(&s, "d", &[]);
    for (ns, name) in [(&a, "w0"), (&a, "w1"), (&b, "w0"), (&d, "plain")] {
        workload(&s, Deployment, ns, name, json!({}), &current);
    }
    // The team's Deployment, applied from its Git server-side.
    team_applies(&s, &teams(&c, None));
    complete(&s, Deployment, &c, "git");
    its_pod(&s, Deployment, &c, "git", &current);

    let edited = CONFIG_MAP.replace("\"log_level\": \"info\"", "\"log_level\": \"debug\"");
    assert_ne!(edited, CONFIG_MAP);
    let before = versions(&s);
    let text = preview(&s, &edited);
    eprintln!("{text}");
    let waves: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  wave "))
        .collect();
    assert_eq!(
        waves,
        [
            format!("1: Deployment {a}/w0"),
            format!("2: Deployment {b}/w0"),
            format!("3: Deployment {a}/w1"),
        ],
        "{text}"
    );
    let left = format!(
        "  Deployment {c}/git: runs an older Linkerd-CNI config, and field manager {TEAM} applies its pod template"
    );
    assert!(text.contains(&left), "{text}");
    assert!(
        text.contains(&format!("\n  Deployment {d}/plain\n")),
        "{text}"
    );
    assert!(
        text.contains("--restart-concurrency=1 --restart-deadline=2m"),
        "{text}"
    );
    assert!(text.ends_with("nothing was changed\n"), "{text}");
    assert_eq!(versions(&s), before, "the preview changed nothing");

    // Applied: the controller restarts the previewed waves in their order, one at a time.
    s.put_config_map(&edited);
    let (mut order, mut done) = (Vec::new(), 0);
    let restarted = |ns: &str, name: &str| !template_hash(&s, Deployment, ns, name).is_empty();
    for _ in 0..3 {
        eventually("the next restart", BOUND, || {
            patches(&s, &audited, Deployment).len() > done
        });
        let patched = patches(&s, &audited, Deployment);
        let last = &patched[patched.len() - 1];
        order.push(format!("Deployment {}/{}", last.namespace, last.name));
        done = patched.len();
        // One at a time: the next waits for this one's rollout.
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(
            patches(&s, &audited, Deployment).len(),
            done,
            "{}",
            controller.log()
        );
        complete(&s, Deployment, &last.namespace, &last.name);
    }
    let previewed: Vec<String> = waves.iter().map(|w| w[3..].to_string()).collect();
    assert_eq!(order, previewed, "{}", controller.log());
    assert!(restarted(&a, "w1") && !restarted(&d, "plain"));

    // The team's Deployment: reported, naming its field manager, never patched.
    eventually("the team's Deployment reported", BOUND, || {
        warned(&s, &c, "git", "StaleConfig")
    });
    assert_eq!(template_hash(&s, Deployment, &c, "git"), "");
    team_applies(&s, &teams(&c, None));
    let hash = s
        .nad(&c)
        .map(|nad| config_hash(nad["spec"]["config"].as_str().unwrap()))
        .unwrap();
    team_applies(&s, &teams(&c, Some(&hash)));
    assert_eq!(template_hash(&s, Deployment, &c, "git"), hash);
    std::thread::sleep(Duration::from_secs(5));
    let all = patches(&s, &audited, Deployment);
    assert_eq!(names(&all), ["w0", "w0", "w1"], "{}", controller.log());
}

/// A Helm release's Deployment (Helm 4 applies server-side, as field manager helm) opted in
/// through its chart's pod template is restarted by the controller, once, and a later `helm
/// upgrade` applies and keeps the restart's hash (no conflict, no roll back).
#[test]
fn a_helm_release_is_restarted_and_its_next_upgrade_applies() {
    let (s, audited, kubeconfig) = audited_setup();
    let controller = start(&s, "only", &kubeconfig, &[]);
    let (ns, current) = namespace(&s, "helm", &[]);
    let chart = s.dir.path().join("chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/deployment.yaml"),
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels:\n    app.kubernetes.io/instance: {{{{ .Release.Name }}}}\n    app.kubernetes.io/managed-by: {{{{ .Release.Service }}}}\n  annotations:\n    revision: {{{{ .Values.rev | default \"1\" | quote }}}}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n      annotations:\n        {OPT_IN}: enabled\n    spec:\n      containers:\n      - name: c\n        image: registry.k8s.io/pause:3.10\n"
        ),
    )
    .unwrap();
    let chart = chart.to_str().unwrap();
    let helm_does = |command: &str, values: &str| {
        let args = [
            command,
            chart,
            "--release",
            "web",
            "--namespace",
            &ns,
            "--values",
            values,
        ];
        let out = helm(&args, Some(&s.plane.admin_kubeconfig));
        assert!(
            out.status.success(),
            "helm {command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    helm_does("install", "{}");
    let annotation = |key: &str| {
        s.plane.kubectl(&[
            "get",
            "deployment",
            "-n",
            &ns,
            "web",
            "-o",
            &format!(
                "jsonpath={{.metadata.annotations.{}}}",
                key.replace('.', "\\.")
            ),
        ])
    };
    assert_eq!(annotation("meta.helm.sh/release-name"), "web");
    complete(&s, Deployment, &ns, "web");
    its_pod(&s, Deployment, &ns, "web", OLD);

    eventually("the release's Deployment restarted", BOUND, || {
        template_hash(&s, Deployment, &ns, "web") == current
    });
    complete(&s, Deployment, &ns, "web");
    helm_does("upgrade", r#"{"rev": "2"}"#);
    assert_eq!(annotation("revision"), "2", "the upgrade applied");
    assert_eq!(
        template_hash(&s, Deployment, &ns, "web"),
        current,
        "the upgrade kept the restart's hash"
    );
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        names(&patches(&s, &audited, Deployment)),
        ["web"],
        "restarted once: {}",
        controller.log()
    );
    assert!(!warned(&s, &ns, "web", "StaleConfig"));
}
