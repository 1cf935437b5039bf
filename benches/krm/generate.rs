//! The inputs of the KRM benchmark: kpt-shaped ResourceLists and packages of
//! realistic namespaces, workloads, Services, ConfigMaps and NADs.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::Result;

/// Resources per namespace group: 1 Namespace, 6 workloads, 2 Services,
/// 1 ConfigMap.
pub const GROUP: usize = 10;

/// Which rules the generated ResourceList asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rules {
    /// No functionConfig: Linkerd-CNI attachment; half the namespaces opt in.
    Linkerd,
    /// A NetworkResources functionConfig; each namespace has two NADs with a
    /// resource name (in place of the two Services) and every workload selects both.
    NetworkResources,
    /// The Linkerd-CNI rules with the secondary-network rule on for every namespace
    /// (`skipSecondarySubnets: enabled`): each namespace has two NADs with an IPAM (in place
    /// of the two Services) and every workload selects both.
    SkipSubnets,
}

impl Rules {
    pub fn tag(self) -> &'static str {
        match self {
            Rules::Linkerd => "linkerd",
            Rules::NetworkResources => "net-res",
            Rules::SkipSubnets => "skip",
        }
    }
}

pub fn kptfile(exec: &Path) -> String {
    format!(
        "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bench\n\
         pipeline:\n  mutators:\n  - exec: \"{}\"\n",
        exec.display()
    )
}

/// Writes the package: per namespace a directory with `namespace.yaml` and
/// `resources.yaml` (workloads, services, config map).
pub fn write_package(root: &Path, size: usize) -> Result<()> {
    fs::create_dir_all(root)?;
    fs::write(root.join("Kptfile"), kptfile(Path::new("/bin/true")))?;
    for g in 0..size / GROUP {
        let ns = namespace_name(g);
        let d = root.join(&ns);
        fs::create_dir_all(&d)?;
        let mut docs = Vec::with_capacity(GROUP);
        for slot in 0..GROUP {
            let mut s = String::new();
            resource(&mut s, g, slot, None, Rules::Linkerd);
            docs.push(s);
        }
        fs::write(d.join("namespace.yaml"), &docs[0])?;
        fs::write(d.join("resources.yaml"), docs[1..].join("---\n"))?;
    }
    Ok(())
}

/// kpt's annotations on an item, in the order kpt writes them.
struct Kpt<'a> {
    path: &'a str,
    index: usize,
    id: usize,
}

const PACKAGE_PATH: &str = "/tmp/linkerd-multus-bench/pkg";

/// A ResourceList as `kpt fn render` sends it: the Kptfile, then every
/// resource of the package with kpt's annotations, `size` resources in all.
pub fn resource_list(size: usize, exec: &Path, rules: Rules) -> String {
    let mut out = String::with_capacity(size * 1600 + 4096);
    out.push_str("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n");
    let mut item = String::new();
    let kptfile = Kpt {
        path: "Kptfile",
        index: 0,
        id: 1,
    };
    item.push_str("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bench\n");
    annotations(&mut item, 2, &[], Some(&kptfile));
    let _ = writeln!(
        item,
        "pipeline:\n  mutators:\n  - exec: \"{}\"",
        exec.display()
    );
    push_item(&mut out, &item);
    let mut id = 2;
    for g in 0..size / GROUP {
        let ns = namespace_name(g);
        let (ns_path, res_path) = (
            format!("{ns}/namespace.yaml"),
            format!("{ns}/resources.yaml"),
        );
        for slot in 0..GROUP {
            let kpt = Kpt {
                path: if slot == 0 { &ns_path } else { &res_path },
                index: slot.saturating_sub(1),
                id,
            };
            item.clear();
            resource(&mut item, g, slot, Some(&kpt), rules);
            push_item(&mut out, &item);
            id += 1;
        }
    }
    if rules == Rules::NetworkResources {
        out.push_str(
            "functionConfig:\n  apiVersion: multus.linkerd.io/v1alpha1\n  kind: NetworkResources\n  \
             metadata:\n    name: network-resources\n  spec:\n    downwardAPI: false\n",
        );
    }
    if rules == Rules::SkipSubnets {
        out.push_str(
            "functionConfig:\n  apiVersion: multus.linkerd.io/v1alpha1\n  kind: LinkerdMultus\n  \
             metadata:\n    name: linkerd-multus\n  spec:\n    skipSecondarySubnets: enabled\n    \
             clusterCIDRs: [10.128.0.0/14, 172.30.0.0/16]\n",
        );
    }
    out
}

/// Appends a top-level document as an item of `items:` (compact sequence).
fn push_item(out: &mut String, doc: &str) {
    for (i, line) in doc.lines().enumerate() {
        if line.is_empty() {
            out.push('\n');
            continue;
        }
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
}

fn namespace_name(g: usize) -> String {
    match g {
        0 => "linkerd-cni".into(),
        1 => "linkerd".into(),
        _ => format!("team-{g:05}"),
    }
}

const APPS: [&str; 20] = [
    "checkout",
    "payments",
    "catalog",
    "cart",
    "search",
    "orders",
    "shipping",
    "billing",
    "inventory",
    "auth",
    "profile",
    "reviews",
    "recommendations",
    "notifications",
    "gateway",
    "frontend",
    "email",
    "ledger",
    "pricing",
    "quotes",
];

fn app(g: usize, slot: usize) -> &'static str {
    APPS[(g * 7 + slot) % APPS.len()]
}

/// Writes `metadata.annotations` at `indent` (the key's own indent), user
/// annotations first, then kpt's. Writes nothing when both are empty.
fn annotations(out: &mut String, indent: usize, user: &[(&str, &str)], kpt: Option<&Kpt>) {
    if user.is_empty() && kpt.is_none() {
        return;
    }
    let p = " ".repeat(indent);
    let _ = writeln!(out, "{p}annotations:");
    for (k, v) in user {
        let _ = writeln!(out, "{p}  {k}: {v}");
    }
    if let Some(k) = kpt {
        let _ = write!(
            out,
            "{p}  config.kubernetes.io/index: '{index}'\n\
             {p}  config.kubernetes.io/path: '{path}'\n\
             {p}  internal.config.kubernetes.io/index: '{index}'\n\
             {p}  internal.config.kubernetes.io/package-path: '{PACKAGE_PATH}'\n\
             {p}  internal.config.kubernetes.io/path: '{path}'\n\
             {p}  internal.config.kubernetes.io/seqindent: 'compact'\n\
             {p}  internal.config.kubernetes.io/annotations-migration-resource-id: '{mid}'\n\
             {p}  internal.config.kubernetes.io/id: '{id}'\n\
             {p}  config.k8s.io/id: '{id}'\n",
            index = k.index,
            path = k.path,
            mid = k.id - 1,
            id = k.id,
        );
    }
}

/// Writes resource `slot` of namespace group `g` as a top-level document.
fn resource(out: &mut String, g: usize, slot: usize, kpt: Option<&Kpt>, rules: Rules) {
    let ns = namespace_name(g);
    match slot {
        0 => namespace(out, g, &ns, kpt),
        1..=6 => {
            let kind = [
                "Deployment",
                "Deployment",
                "StatefulSet",
                "Deployment",
                "CronJob",
                "StatefulSet",
            ][slot - 1];
            workload(out, g, slot, kind, &ns, kpt, rules);
        }
        7 | 8 if rules == Rules::NetworkResources => nad(out, slot, &ns, kpt),
        7 | 8 if rules == Rules::SkipSubnets => ipam_nad(out, g, slot, &ns, kpt),
        7 | 8 => service(out, g, slot, &ns, kpt),
        _ if g == 0 => cni_config_map(out, kpt),
        _ => config_map(out, g, &ns, kpt),
    }
}

fn namespace(out: &mut String, g: usize, ns: &str, kpt: Option<&Kpt>) {
    let _ = write!(
        out,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    \
         kubernetes.io/metadata.name: {ns}\n    team: {ns}\n    \
         pod-security.kubernetes.io/enforce: baseline\n"
    );
    let mut user: Vec<(&str, &str)> = vec![("owner", "platform-team@example.com")];
    // Half the namespaces opt in (not linkerd-cni itself), a third carry
    // OpenShift's uid range.
    if g.is_multiple_of(2) && g != 0 {
        user.push(("linkerd.io/multus", "enabled"));
        user.push(("linkerd.io/inject", "enabled"));
    }
    if g.is_multiple_of(3) {
        user.push(("openshift.io/sa.scc.uid-range", "1000000000/10000"));
        user.push((
            "openshift.io/sa.scc.supplemental-groups",
            "1000000000/10000",
        ));
    }
    annotations(out, 2, &user, kpt);
    out.push_str("spec:\n  finalizers:\n  - kubernetes\n");
}

/// A Deployment, StatefulSet or CronJob with a realistic pod template.
fn workload(
    out: &mut String,
    g: usize,
    slot: usize,
    kind: &str,
    ns: &str,
    kpt: Option<&Kpt>,
    rules: Rules,
) {
    let name = app(g, slot);
    let api = if kind == "CronJob" {
        "batch/v1"
    } else {
        "apps/v1"
    };
    let _ = write!(
        out,
        "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
         labels:\n    app.kubernetes.io/name: {name}\n    app.kubernetes.io/part-of: shop\n"
    );
    annotations(out, 2, &[], kpt);
    out.push_str("spec:\n");
    // Where the pod template's `metadata:` goes.
    let indent = match kind {
        "CronJob" => {
            let _ = write!(
                out,
                "  schedule: \"*/15 * * * *\"\n  concurrencyPolicy: Forbid\n  \
                 successfulJobsHistoryLimit: 3\n  jobTemplate:\n    spec:\n      \
                 backoffLimit: 2\n      template:\n"
            );
            8
        }
        _ => {
            let _ = write!(
                out,
                "  replicas: {}\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: {name}\n",
                1 + (g + slot) % 3
            );
            if kind == "StatefulSet" {
                let _ = writeln!(out, "  serviceName: {name}");
            }
            out.push_str("  template:\n");
            4
        }
    };
    pod_template(out, indent, g, slot, name, kind == "CronJob", rules);
    if kind == "StatefulSet" {
        out.push_str(
            "  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      \
             accessModes: [\"ReadWriteOnce\"]\n      resources:\n        requests:\n          \
             storage: 10Gi\n",
        );
    }
}

/// Writes `metadata:` and `spec:` of a pod template at `indent`.
fn pod_template(
    out: &mut String,
    indent: usize,
    g: usize,
    slot: usize,
    name: &str,
    job: bool,
    rules: Rules,
) {
    let p = " ".repeat(indent);
    pod_metadata(out, &p, g + slot, name, rules);
    let port = 8080 + slot;
    let _ = writeln!(out, "{p}spec:");
    if job {
        let _ = writeln!(out, "{p}  restartPolicy: OnFailure");
    }
    let _ = write!(
        out,
        "{p}  serviceAccountName: {name}\n\
         {p}  securityContext:\n\
         {p}    runAsNonRoot: true\n\
         {p}    fsGroup: 2000\n\
         {p}  containers:\n\
         {p}  - name: {name}\n\
         {p}    image: registry.example.com/shop/{name}:1.{minor}.{slot}\n\
         {p}    ports:\n\
         {p}    - name: http\n\
         {p}      containerPort: {port}\n\
         {p}      protocol: TCP\n\
         {p}    env:\n\
         {p}    - name: FEATURE_CACHE\n\
         {p}      value: \"yes\"\n\
         {p}    - name: POD_NAMESPACE\n\
         {p}      valueFrom:\n\
         {p}        fieldRef:\n\
         {p}          fieldPath: metadata.namespace\n\
         {p}    resources:\n\
         {p}      requests:\n\
         {p}        cpu: 100m\n\
         {p}        memory: 128Mi\n\
         {p}      limits:\n\
         {p}        memory: 256Mi\n",
        minor = g % 10,
    );
    if !job {
        let _ = write!(
            out,
            "{p}    readinessProbe:\n\
             {p}      httpGet:\n\
             {p}        path: /ready\n\
             {p}        port: http\n\
             {p}      periodSeconds: 10\n"
        );
    }
    let _ = write!(
        out,
        "{p}    volumeMounts:\n\
         {p}    - name: config\n\
         {p}      mountPath: /etc/{name}\n\
         {p}      readOnly: true\n\
         {p}  volumes:\n\
         {p}  - name: config\n\
         {p}    configMap:\n\
         {p}      name: {name}-settings\n\
         {p}      defaultMode: 0644\n"
    );
}

/// Writes a pod template's `metadata:` with the prefix `p`: the networks and
/// Linkerd annotations vary with `k`.
fn pod_metadata(out: &mut String, p: &str, k: usize, name: &str, rules: Rules) {
    let _ = writeln!(
        out,
        "{p}metadata:\n{p}  labels:\n{p}    app.kubernetes.io/name: {name}"
    );
    let _ = writeln!(
        out,
        "{p}  annotations:\n{p}    prometheus.io/scrape: \"true\""
    );
    if k.is_multiple_of(4) {
        let _ = writeln!(out, "{p}    linkerd.io/inject: enabled");
    }
    if rules == Rules::NetworkResources {
        let _ = writeln!(
            out,
            "{p}    k8s.v1.cni.cncf.io/networks: sriov-a, sriov-b@net2"
        );
    } else if rules == Rules::SkipSubnets {
        let _ = writeln!(
            out,
            "{p}    k8s.v1.cni.cncf.io/networks: storage, backup@net2"
        );
    } else if k.is_multiple_of(9) {
        let _ = writeln!(out, "{p}    k8s.v1.cni.cncf.io/networks: macvlan-conf@net1");
    }
    if k.is_multiple_of(11) {
        let _ = writeln!(out, "{p}    linkerd.io/multus: disabled");
    }
}

/// A NAD with a device-plugin resource (`sriov-a` also with a node selector).
fn nad(out: &mut String, slot: usize, ns: &str, kpt: Option<&Kpt>) {
    let name = if slot == 7 { "sriov-a" } else { "sriov-b" };
    let _ = write!(
        out,
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  \
         name: {name}\n  namespace: {ns}\n"
    );
    let resource = format!("intel.com/{}", name.replace('-', "_"));
    let mut user = vec![("k8s.v1.cni.cncf.io/resourceName", resource.as_str())];
    if slot == 7 {
        user.push((
            "k8s.v1.cni.cncf.io/nodeSelector",
            "feature.node.kubernetes.io/sriov=true",
        ));
    }
    annotations(out, 2, &user, kpt);
    let _ = write!(
        out,
        "spec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"name\": \"{name}\", \"type\": \"sriov\", \
         \"ipam\": {{\"type\": \"whereabouts\", \"range\": \"10.56.0.0/16\"}}}}'\n"
    );
}

/// A secondary network with an IPAM: `storage` (whereabouts, a route) or `backup` (static).
fn ipam_nad(out: &mut String, g: usize, slot: usize, ns: &str, kpt: Option<&Kpt>) {
    let name = if slot == 7 { "storage" } else { "backup" };
    let _ = write!(
        out,
        "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  \
         name: {name}\n  namespace: {ns}\n"
    );
    annotations(out, 2, &[], kpt);
    let (a, b) = (g / 256 % 256, g % 256);
    let ipam = if slot == 7 {
        format!(
            "{{\"type\": \"whereabouts\", \"range\": \"192.168.{b}.0/24\", \
             \"routes\": [{{\"dst\": \"10.{a}.{b}.0/24\"}}]}}"
        )
    } else {
        format!("{{\"type\": \"static\", \"addresses\": [{{\"address\": \"192.169.{b}.5/24\"}}]}}")
    };
    let _ = write!(
        out,
        "spec:\n  config: '{{\"cniVersion\": \"0.3.1\", \"name\": \"{name}\", \"type\": \"macvlan\", \
         \"master\": \"eth1\", \"ipam\": {ipam}}}'\n"
    );
}

fn service(out: &mut String, g: usize, slot: usize, ns: &str, kpt: Option<&Kpt>) {
    let name = app(g, slot - 6);
    let port = 8080 + slot - 6;
    let _ = write!(
        out,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
         labels:\n    app.kubernetes.io/name: {name}\n    app.kubernetes.io/part-of: shop\n"
    );
    annotations(out, 2, &[], kpt);
    let _ = write!(
        out,
        "spec:\n  type: ClusterIP\n  selector:\n    app.kubernetes.io/name: {name}\n  \
         ports:\n  - name: http\n    port: 80\n    targetPort: {port}\n    protocol: TCP\n"
    );
}

fn config_map(out: &mut String, g: usize, ns: &str, kpt: Option<&Kpt>) {
    let name = app(g, 1);
    let _ = write!(
        out,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-settings\n  namespace: {ns}\n  \
         labels:\n    app.kubernetes.io/name: {name}\n"
    );
    annotations(out, 2, &[], kpt);
    let _ = write!(
        out,
        "data:\n  LOG_LEVEL: info\n  ENABLE_TRACING: \"on\"\n  MAX_CONNECTIONS: \"512\"\n  \
         application.yaml: |\n    server:\n      port: 8081\n      shutdown: graceful\n    \
         database:\n      host: postgres.{ns}.svc.cluster.local\n      pool: 10\n    \
         cache:\n      ttl: 30s\n      enabled: yes\n"
    );
}

/// The Linkerd-CNI ConfigMap (fixtures/linkerd-cni/version-2.19.yaml).
fn cni_config_map(out: &mut String, kpt: Option<&Kpt>) {
    out.push_str(
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: linkerd-cni-config\n  \
         namespace: linkerd-cni\n  labels:\n    linkerd.io/cni-resource: \"true\"\n",
    );
    annotations(out, 2, &[], kpt);
    out.push_str(CNI_DATA);
}

const CNI_DATA: &str = r#"data:
  dest_cni_net_dir: "/etc/cni/net.d"
  dest_cni_bin_dir: "/opt/cni/bin"
  cni_network_config: |-
    {
      "name": "linkerd-cni",
      "type": "linkerd-cni",
      "log_level": "info",
      "kubernetes": {
          "kubeconfig": "__KUBECONFIG_FILEPATH__"
      },
      "linkerd": {
        "incoming-proxy-port": 4143,
        "outgoing-proxy-port": 4140,
        "proxy-uid": 2102,
        "ports-to-redirect": [],
        "inbound-ports-to-ignore": ["4191","4190"],
        "simulate": false,
        "use-wait-flag": false,
        "iptables-mode": "nft",
        "ipv6": false
      }
    }
"#;
