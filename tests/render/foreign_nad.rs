//! A NetworkAttachmentDefinition of the user's that holds the name the rules need (a macvlan
//! network named `linkerd-cni`): an error naming it, its file and the fix; nothing is printed,
//! so no workload is attached to it.

use super::*;

const MACVLAN: &str = "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: linkerd-cni\n  namespace: demo\nspec:\n  config: '{\"cniVersion\": \"0.3.1\", \"type\": \"macvlan\", \"master\": \"eth1\", \"ipam\": {\"type\": \"dhcp\"}}'\n";

#[test]
fn a_users_network_named_like_the_nad_is_an_error_with_the_fix() {
    let dir = example_copy();
    let p = dir.path();
    std::fs::write(p.join("apps/network.yaml"), MACVLAN).unwrap();
    let before = snapshot(p);

    let out = render(&["render", "."], p);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "", "nothing to apply, so nothing attached");
    assert_eq!(
        out.stderr,
        "error: NetworkAttachmentDefinition demo/linkerd-cni (apps/network.yaml): it runs macvlan, not linkerd-cni, yet namespace demo needs the name linkerd-cni for the NAD that attaches Linkerd-CNI: its workloads would join this network instead, so none is attached. Give the rules a name no NAD of the namespace has (the nadName setting, or --nad-name), or rename this network; if it is meant to be Linkerd-CNI's, label it app.kubernetes.io/managed-by: linkerd-multus and the render writes its spec.config\n"
    );
    // The same through kpt's protocol: an error result, no file written.
    assert_eq!(render(&["diff", "."], p).code, 2);
    assert_eq!(snapshot(p), before);

    // The first fix the message names: another name for the rules' NAD.
    let out = render(&["render", "--nad-name", "linkerd-mesh", "."], p);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let docs = parse_yaml_stream(&out.stdout).unwrap();
    assert_eq!(
        networks(find(&docs, "Deployment", "web")),
        "storage@net1,linkerd-mesh"
    );
    let macvlan = docs
        .iter()
        .find(|d| d.str_at(&["metadata", "name"]) == Some("linkerd-cni"))
        .unwrap();
    assert!(
        macvlan
            .str_at(&["spec", "config"])
            .unwrap()
            .contains("macvlan"),
        "the user's network is left as written"
    );

    // A Linkerd-CNI NAD written by hand (a config list holding linkerd-cni) is the user's to
    // keep: no error.
    std::fs::write(
        p.join("apps/network.yaml"),
        MACVLAN.replace(
            r#"{"cniVersion": "0.3.1", "type": "macvlan", "master": "eth1", "ipam": {"type": "dhcp"}}"#,
            r#"{"cniVersion": "0.3.1", "name": "linkerd-cni", "plugins": [{"type": "linkerd-cni", "kubernetes": {"kubeconfig": "/etc/cni/net.d/ZZZ-linkerd-cni-kubeconfig"}}]}"#,
        ),
    )
    .unwrap();
    let out = render(&["render", "."], p);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("warning: NetworkAttachmentDefinition demo/linkerd-cni (apps/network.yaml): this NetworkAttachmentDefinition has no app.kubernetes.io/managed-by: linkerd-multus label"),
        "{}",
        out.stderr
    );
}
