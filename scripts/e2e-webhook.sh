#!/usr/bin/env bash
# End-to-end test of `linkerd-multus webhook` against a real cluster: registers a
# MutatingWebhookConfiguration for namespaces it creates (and only those), replays the Go
# operator's scenarios with `kubectl apply --dry-run=server`, checks the pods the API server
# returns, and removes everything it created. Run with --help for usage.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/e2e-webhook.sh --url URL [options]

Tests the linkerd-multus webhook through a real API server. By default it starts the webhook
on this machine (target/release/linkerd-multus webhook, `cargo build --release` first) with
a certificate made by deploy/certs.sh for the URL's host, registers a
MutatingWebhookConfiguration that calls URL with that CA, and creates test namespaces
labelled linkerd-multus-e2e=<run id>: the configuration selects those namespaces only, so the
rest of the cluster is never affected. Pods are only ever created with --dry-run=server.
Everything it created is deleted on exit (also on failure or Ctrl-C), unless --keep.

It prints PASS or FAIL per scenario, then "N passed, M failed", and exits 1 on any failure.

Scenarios (those of the Go operator, plus its known defects):
  namespace annotated linkerd.io/multus + linkerd.io/inject enabled -> pod gets linkerd-cni
  namespace without annotations -> pod unchanged
  pod annotations alone (plain namespace) -> attached
  linkerd.io/multus: disabled, or linkerd.io/inject: disabled, on the pod -> not attached
  networks annotation `a, <run>-other/b@net2`, and the same as a JSON list -> linkerd-cni
    appended once, in the same form; `a, linkerd-cni` -> unchanged
  control-plane pod (label linkerd.io/control-plane-component in the control-plane
    namespace) -> attached, no proxy UID; the same pod without the label -> not attached
  namespace with openshift.io/sa.scc.uid-range: 1000680000/10000 -> proxy-uid 1000682102;
    a pod that sets config.linkerd.io/proxy-uid keeps it
  idempotence: the mutated pods applied again come back unchanged
  pods not attached get no multus.linkerd.io/config-hash (an attached pod gets the hash of its
    NAD's config when the webhook reads NADs; tests/webhook/config_hash.rs checks its value)
With --manage-nads (the local webhook only; the NAD CRD must be installed), the script also runs
the NAD controller (`linkerd-multus controller`, a process of its own, as its Deployment runs
it), as the Go operator did, over a Linkerd-CNI ConfigMap in a namespace the script creates,
the webhook with --missing-nad attach, and:
  every namespace that needs the NAD (enabled, control plane) gets linkerd-cni from the
    controller, and the others none
Without it (and without --network-resources), the local webhook runs with --missing-nad ignore:
the scenarios need no NAD, so no Multus on the cluster.
With --network-resources, also those of network-resources-injector (the NAD CRD must be
installed; the script creates its NADs in a namespace of its own):
  a pod selecting resource-backed NADs -> requests and limits of the first container and the
    NADs' node selector
  a pod selecting a NAD that does not exist -> denied, with the webhook's message

Options:
  --url URL          the webhook URL the API server calls (required), e.g.
                     https://172.18.0.1:8443/mutate; its host goes into the certificate
  --kubeconfig FILE  the cluster [$KUBECONFIG, else ~/.kube/config]
  --context NAME     a context of that kubeconfig [its current context]
  --binary PATH      the webhook binary [target/release/linkerd-multus]
  --listen ADDR      where the local webhook listens [0.0.0.0:<port of URL>]
  --ops-listen ADDR  its /healthz /readyz /metrics address [127.0.0.1:19090]
  --ca-file FILE     do not start a webhook: test the one already serving URL, whose
                     serving certificate this CA signed (e.g. one made by deploy/certs.sh
                     with --san <host of URL>); the scenarios' namespaces have no NAD, so
                     that webhook must run with --missing-nad attach (beside the NAD
                     controller) or ignore
  --control-plane-namespace NS
                     with --ca-file: the --linkerd-namespace of that webhook. The
                     control-plane scenarios run only when NS does not exist yet (the script
                     creates it, and never touches a namespace it did not create)
  --network-resources
                     run the network-resources scenarios too; the local webhook is started
                     with --network-resources (with --ca-file: the webhook under test must
                     run with it, with the default resourceNameKeys)
  --manage-nads      run the NAD controller beside the local webhook (its ops port the next
                     port after --ops-listen's) and check the NADs it makes
  --timeout SECONDS  how long to wait for the webhook to see the test namespaces [90]
  --keep             leave the namespaces, the configuration and the webhook's log
  -h, --help         this help

Needs kubectl, python3, openssl and base64, and rights to create namespaces and
MutatingWebhookConfigurations. The local webhook uses the same kubeconfig to list and watch
Namespaces.

kind (the API server runs in a container on docker's "kind" network; it reaches this machine
through that network's gateway):
  kind create cluster
  cargo build --release
  gw=$(docker network inspect kind -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}' \
       | tr ' ' '\n' | grep -v : | head -n1)          # e.g. 172.18.0.1
  scripts/e2e-webhook.sh --url "https://$gw:8443/mutate"

k3d (k3s in docker; same idea, the network is k3d-<cluster name>):
  k3d cluster create e2e
  gw=$(docker network inspect k3d-e2e -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}' \
       | tr ' ' '\n' | grep -v : | head -n1)
  scripts/e2e-webhook.sh --url "https://$gw:8443/mutate"

k3s on this machine (the API server is a host process):
  scripts/e2e-webhook.sh --kubeconfig /etc/rancher/k3s/k3s.yaml --url https://127.0.0.1:8443/mutate
  (on another host, use an IP of this machine that the k3s server reaches)

OpenShift, or any cluster whose API server cannot reach your machine: deploy the webhook in
the cluster (deploy/README.md) with certificates from deploy/certs.sh that include the
Service's cluster IP (--san), then test it by that IP (an API server on the nodes' host
network, as on OpenShift, normally reaches Service IPs):
  ip=$(kubectl -n linkerd-multus get service linkerd-multus-webhook -o jsonpath='{.spec.clusterIP}')
  deploy/certs.sh --out ~/lm-certs --san "$ip" --apply
  scripts/e2e-webhook.sh --url "https://$ip:443/mutate" --ca-file ~/lm-certs/ca.crt
  (the deployed webhook's control-plane namespace, linkerd, exists: those two scenarios are
  skipped; the test namespaces carry multus.linkerd.io/webhook=disabled, so the package's own
  configuration leaves them to this test's configuration)
The test namespaces are created with OpenShift's sa.scc annotations set, which OpenShift keeps.
EOF
}

die() { echo "error: $*" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)

url=""
kubeconfig=${KUBECONFIG:-}
context=""
binary=$root/target/release/linkerd-multus
listen=""
ops_listen=127.0.0.1:19090
ca_file=""
cp_ns_given=""
timeout=90
keep=false
network_resources=false
manage_nads=false

need_value() { if [ "$#" -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value (see --help)"; fi; }

while [ "$#" -gt 0 ]; do
  case "$1" in
    --url) need_value "$@"; url=$2; shift 2 ;;
    --kubeconfig) need_value "$@"; kubeconfig=$2; shift 2 ;;
    --context) need_value "$@"; context=$2; shift 2 ;;
    --binary) need_value "$@"; binary=$2; shift 2 ;;
    --listen) need_value "$@"; listen=$2; shift 2 ;;
    --ops-listen) need_value "$@"; ops_listen=$2; shift 2 ;;
    --ca-file) need_value "$@"; ca_file=$2; shift 2 ;;
    --control-plane-namespace) need_value "$@"; cp_ns_given=$2; shift 2 ;;
    --timeout) need_value "$@"; timeout=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    --network-resources) network_resources=true; shift ;;
    --manage-nads) manage_nads=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

[ -n "$url" ] || die "--url is required (see --help)"
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds"

for tool in kubectl python3 openssl base64; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed"
done

# The parts of the URL: scheme, host (without IPv6 brackets), port, path.
read -r url_scheme url_host url_port url_path < <(python3 -c '
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
port = u.port or (443 if u.scheme == "https" else 0)
print(u.scheme or "-", u.hostname or "-", port, u.path or "-")
' "$url") || die "cannot parse --url $url"
[ "$url_scheme" = https ] || die "--url must be https:// (the API server calls webhooks over TLS)"
[ "$url_host" != - ] || die "--url $url has no host"
case "$url_path" in -|/) die "--url $url needs a path, e.g. /mutate" ;; esac

if [ -n "$cp_ns_given" ] && [ -z "$ca_file" ]; then
  die "--control-plane-namespace is for --ca-file (a webhook this script does not start)"
fi
if [ -n "$ca_file" ]; then
  [ -s "$ca_file" ] || die "--ca-file $ca_file: no such file"
else
  [ -x "$binary" ] || die "$binary not found: run 'cargo build --release' or pass --binary"
fi

# --- State and cleanup ------------------------------------------------------------------------
work=$(mktemp -d)
run_id=$(openssl rand -hex 3)
prefix=lm-e2e-$run_id
mwc_name=linkerd-multus-e2e-$run_id
created_namespaces=()
mwc_created=false
webhook_pid=""
controller_pid=""

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$keep" = true ]; then
    echo "--keep: left behind:"
    [ "$mwc_created" = true ] && echo "  kubectl delete mutatingwebhookconfiguration $mwc_name"
    [ "${#created_namespaces[@]}" -gt 0 ] && echo "  kubectl delete namespace ${created_namespaces[*]}"
    [ -n "$webhook_pid" ] && echo "  kill $webhook_pid   # the webhook; log: $work/webhook.log"
    [ -n "$controller_pid" ] && echo "  kill $controller_pid   # the NAD controller; log: $work/controller.log"
    echo "  rm -rf $work"
    exit "$rc"
  fi
  # The configuration first: from then on the API server no longer calls the webhook.
  if [ "$mwc_created" = true ]; then
    kc delete mutatingwebhookconfiguration "$mwc_name" --ignore-not-found >/dev/null 2>&1 \
      || echo "warning: could not delete MutatingWebhookConfiguration $mwc_name" >&2
  fi
  for pid in "$webhook_pid" "$controller_pid"; do
    if [ -n "$pid" ]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [ "${#created_namespaces[@]}" -gt 0 ]; then
    kc delete namespace "${created_namespaces[@]}" --ignore-not-found --wait=false >/dev/null 2>&1 \
      || echo "warning: could not delete namespaces ${created_namespaces[*]}" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One kubeconfig for kubectl and the local webhook: the chosen context, credentials inlined.
if [ -n "$kubeconfig" ]; then export KUBECONFIG=$kubeconfig; fi
view_args=(config view --minify --flatten)
if [ -n "$context" ]; then view_args+=(--context "$context"); fi
kubectl "${view_args[@]}" > "$work/kubeconfig" 2> "$work/kubeconfig.err" \
  || die "cannot read the kubeconfig: $(cat "$work/kubeconfig.err")"
export KUBECONFIG=$work/kubeconfig
kc() { kubectl "$@"; }
kc get --raw /readyz >/dev/null 2>&1 || kc version >/dev/null \
  || die "the cluster does not answer (kubectl version failed)"
if [ "$network_resources" = true ] || [ "$manage_nads" = true ]; then
  kc get crd network-attachment-definitions.k8s.cni.cncf.io >/dev/null 2>&1 \
    || die "--network-resources and --manage-nads need the NetworkAttachmentDefinition CRD (Multus installs it)"
fi

# The pod builder and the checks, in Python (no jq).
cat > "$work/e2e.py" <<'PY'
import json
import sys

NETWORKS = "k8s.v1.cni.cncf.io/networks"
PROXY_UID = "config.linkerd.io/proxy-uid"
# Set by the webhook on the pods it attaches when it reads their NAD: docs/webhook.md.
CONFIG_HASH = "multus.linkerd.io/config-hash"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def load(path):
    with open(path) as f:
        return json.load(f)


def annotations(pod):
    anns = dict((pod.get("metadata") or {}).get("annotations") or {})
    anns.pop(LAST_APPLIED, None)
    return anns


def pod(name, namespace, anns, labels):
    # Fit for Pod Security "restricted" and OpenShift's restricted-v2 SCC.
    meta = {"name": name, "namespace": namespace}
    if anns:
        meta["annotations"] = anns
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }],
        },
    }


def check(out_path, in_path, expectations):
    """Each expectation: networks=VALUE, networks=- (absent), proxy-uid=VALUE, proxy-uid=-,
    config-hash=- (absent), json-list (the networks annotation is a JSON list), unchanged (the
    webhook's keys are as in the input, but for the config hash of an attached pod, whose
    value depends on the NAD the webhook reads)."""
    got = annotations(load(out_path))
    sent = annotations(load(in_path))
    problems = []
    for exp in expectations:
        if exp == "unchanged":
            for key in sorted(set(got) | set(sent)):
                owned = key in (NETWORKS, PROXY_UID) or key.startswith("multus.linkerd.io/")
                if owned and key != CONFIG_HASH and got.get(key) != sent.get(key):
                    problems.append(f"{key}: sent {sent.get(key)!r}, got {got.get(key)!r}")
            continue
        if exp == "json-list":
            try:
                value = json.loads(got.get(NETWORKS, ""))
                if not isinstance(value, list):
                    raise ValueError("not a list")
            except ValueError as e:
                problems.append(f"{NETWORKS} is not a JSON list ({e}): {got.get(NETWORKS)!r}")
            continue
        key, _, want = exp.partition("=")
        if key in ("request", "limit", "node-selector"):
            name, _, value = want.rpartition("=")
            pod = load(out_path)
            if key == "node-selector":
                have = (pod["spec"].get("nodeSelector") or {}).get(name)
            else:
                resources = pod["spec"]["containers"][0].get("resources") or {}
                have = (resources.get(key + "s") or {}).get(name)
            if have != value:
                problems.append(f"{key} {name}: want {value!r}, got {have!r}")
            continue
        key = {"networks": NETWORKS, "proxy-uid": PROXY_UID, "config-hash": CONFIG_HASH}[key]
        have = got.get(key)
        if want == "-":
            if have is not None:
                problems.append(f"{key} should be absent, got {have!r}")
        elif have != want:
            problems.append(f"{key}: want {want!r}, got {have!r}")
    if problems:
        print("; ".join(problems))
        return 1
    return 0


def resubmit(out_path, in_path):
    """The pod as the API server returned it, to apply again: its metadata as mutated, the
    spec as first sent (defaults and other admission plugins' fields left out)."""
    out, sent = load(out_path), load(in_path)
    meta = {k: v for k, v in out["metadata"].items() if k in ("name", "namespace", "labels")}
    anns = annotations(out)
    if anns:
        meta["annotations"] = anns
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": sent["spec"]}


def same(first_path, second_path):
    a, b = annotations(load(first_path)), annotations(load(second_path))
    if CONFIG_HASH not in a:
        # The NAD was made meanwhile (--manage-nads): the second apply reads it.
        b.pop(CONFIG_HASH, None)
    if a == b:
        return 0
    diff = [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    print("changed on the second apply: " + "; ".join(diff))
    return 1


cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "pod":
    print(json.dumps(pod(args[0], args[1], json.loads(args[2]), json.loads(args[3])), indent=1))
elif cmd == "check":
    sys.exit(check(args[0], args[1], args[2:]))
elif cmd == "resubmit":
    print(json.dumps(resubmit(args[0], args[1]), indent=1))
elif cmd == "same":
    sys.exit(same(args[0], args[1]))
elif cmd == "readyz":
    import urllib.request
    try:
        with urllib.request.urlopen(args[0], timeout=2) as r:
            sys.exit(0 if r.status == 200 else 1)
    except Exception:
        sys.exit(1)
else:
    sys.exit(f"unknown command {cmd}")
PY
py() { python3 "$work/e2e.py" "$@"; }

# --- The webhook ------------------------------------------------------------------------------
if [ -n "$cp_ns_given" ]; then cp_ns=$cp_ns_given; else cp_ns=$prefix-linkerd; fi
cp_scenarios=true
if [ -n "$ca_file" ]; then
  ca_bundle=$(base64 < "$ca_file" | tr -d '\n')
  if [ -z "$cp_ns_given" ]; then
    cp_scenarios=false
  elif kc get namespace "$cp_ns" >/dev/null 2>&1; then
    echo "note: namespace $cp_ns exists: the control-plane scenarios are skipped (the script only touches namespaces it creates)"
    cp_scenarios=false
  fi
  echo "testing the webhook at $url (CA $ca_file)"
else
  bash "$root/deploy/certs.sh" --out "$work/certs" --san "$url_host" > "$work/certs.log" 2>&1 \
    || die "deploy/certs.sh failed: $(cat "$work/certs.log")"
  ca_bundle=$(base64 < "$work/certs/ca.crt" | tr -d '\n')
  webhook_args=(webhook
    --listen "${listen:-0.0.0.0:$url_port}"
    --ops-listen "$ops_listen"
    --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key"
    --linkerd-namespace "$cp_ns"
    --shutdown-delay 0s --log-level info)
  if [ "$manage_nads" = true ]; then
    # The Linkerd-CNI ConfigMap, and the Lease, in a namespace of the run's own.
    ns_cni=$prefix-cni
    printf '%s\n' 'apiVersion: v1' 'kind: Namespace' 'metadata:' "  name: $ns_cni" '  labels:' \
      "    linkerd-multus-e2e: \"$run_id\"" '---' 'apiVersion: v1' 'kind: ConfigMap' 'metadata:' \
      '  name: linkerd-cni-config' "  namespace: $ns_cni" 'data:' \
      '  cni_network_config: '"'"'{"name": "linkerd-cni", "type": "linkerd-cni", "log_level": "info", "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}, "linkerd": {"incoming-proxy-port": 4143, "outgoing-proxy-port": 4140, "proxy-uid": 2102, "ports-to-redirect": [], "inbound-ports-to-ignore": ["4191", "4190"], "simulate": false, "use-wait-flag": false, "iptables-mode": "nft"}}'"'" \
      > "$work/cni.yaml"
    kc create -f "$work/cni.yaml" >/dev/null
    created_namespaces+=("$ns_cni")
    webhook_args+=(--missing-nad attach)
    controller_ops="${ops_listen%:*}:$((${ops_listen##*:} + 1))"
    "$binary" controller --ops-listen "$controller_ops" --linkerd-namespace "$cp_ns" \
      --cni-namespace "$ns_cni" --lease-namespace "$ns_cni" --identity "e2e-$run_id" \
      --log-level info > "$work/controller.log" 2>&1 &
    controller_pid=$!
    echo "started the NAD controller (pid $controller_pid, ops $controller_ops); log: $work/controller.log"
  elif [ "$network_resources" = false ]; then
    webhook_args+=(--missing-nad ignore)
  fi
  if [ "$network_resources" = true ]; then
    printf '%s\n' 'apiVersion: multus.linkerd.io/v1alpha1' 'kind: NetworkResources' \
      'metadata:' '  name: e2e' 'spec: {}' > "$work/network-resources.yaml"
    webhook_args+=(--network-resources "$work/network-resources.yaml")
  fi
  # The webhook answers its --path (default /mutate) and the Go operator's path.
  case "$url_path" in
    /mutate|/annotate-multus-v1-pod) ;;
    *) webhook_args+=(--path "$url_path") ;;
  esac
  "$binary" "${webhook_args[@]}" > "$work/webhook.log" 2>&1 &
  webhook_pid=$!
  ops_host=${ops_listen%:*}
  case "$ops_host" in 0.0.0.0|"") ops_host=127.0.0.1 ;; "[::]") ops_host="[::1]" ;; esac
  readyz="http://$ops_host:${ops_listen##*:}/readyz"
  deadline=$((SECONDS + timeout))
  until py readyz "$readyz"; do
    if ! kill -0 "$webhook_pid" 2>/dev/null; then
      webhook_pid=""
      echo "error: the webhook exited; its log:" >&2
      cat "$work/webhook.log" >&2
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "error: the webhook is not ready at $readyz after ${timeout}s; its log:" >&2
      tail -n 30 "$work/webhook.log" >&2
      exit 1
    fi
    sleep 1
  done
  echo "started the webhook (pid $webhook_pid, $readyz ready); log: $work/webhook.log"
fi

# --- Namespaces and the configuration ---------------------------------------------------------
# OpenShift assigns the sa.scc annotations to namespaces that lack them; set all three so it
# keeps these values.
scc_annotations() {
  printf '    openshift.io/sa.scc.uid-range: %s/10000\n' "$1"
  printf '    openshift.io/sa.scc.supplemental-groups: %s/10000\n' "$1"
  printf '    openshift.io/sa.scc.mcs: "s0:c27,c4"\n'
}
create_namespace() { # name, then annotation lines (YAML, 4 spaces)
  local name=$1; shift
  {
    echo "apiVersion: v1"
    echo "kind: Namespace"
    echo "metadata:"
    echo "  name: $name"
    echo "  labels:"
    echo "    linkerd-multus-e2e: \"$run_id\""
    echo "    multus.linkerd.io/webhook: disabled"
    echo "  annotations:"
    echo "    linkerd-multus-e2e/purpose: scripts/e2e-webhook.sh"
    local line
    for line in "$@"; do echo "$line"; done
  } > "$work/ns-$name.yaml"
  kc create -f "$work/ns-$name.yaml" >/dev/null
  created_namespaces+=("$name")
}

ns_plain=$prefix-plain
ns_uid=$prefix-uid
ns_enabled=$prefix-enabled
create_namespace "$ns_plain"
create_namespace "$ns_uid" "    linkerd.io/multus: enabled" "    linkerd.io/inject: enabled" \
  "$(scc_annotations 1000680000)"
if [ "$cp_scenarios" = true ]; then
  create_namespace "$cp_ns" "$(scc_annotations 1000690000)"
fi
# The namespace the networks annotations of the scenarios name beside the pod's own.
ns_other=$prefix-other
create_namespace "$ns_other"
ns_nr=$prefix-nr
if [ "$network_resources" = true ]; then
  create_namespace "$ns_nr"
  cat > "$work/nads.yaml" <<EOF
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: sriov
  namespace: $ns_nr
  annotations:
    k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_e2e
    k8s.v1.cni.cncf.io/nodeSelector: feature.node.kubernetes.io/sriov=true
spec:
  config: '{"cniVersion": "0.3.1", "name": "sriov", "type": "sriov"}'
EOF
  kc create -f "$work/nads.yaml" >/dev/null
fi
# Created last: once the webhook attaches a pod here, it has seen every namespace above.
create_namespace "$ns_enabled" "    linkerd.io/multus: enabled" "    linkerd.io/inject: enabled"
echo "created namespaces ${created_namespaces[*]}"
if [ "$network_resources" = true ]; then
  # With the network-resources rules a pod selecting a NAD that does not exist is denied: give
  # every namespace the linkerd-cni NAD, as rendering its package does, and make the NADs the
  # scenarios' networks annotations select.
  nad() { # namespace name
    printf '%s\n' 'apiVersion: k8s.cni.cncf.io/v1' 'kind: NetworkAttachmentDefinition' \
      'metadata:' "  name: $2" "  namespace: $1" 'spec:' \
      "  config: '{\"cniVersion\": \"0.3.0\", \"name\": \"$2\", \"type\": \"$2\"}'" ---
  }
  {
    for ns in "${created_namespaces[@]}"; do nad "$ns" linkerd-cni; done
    nad "$ns_enabled" a
    nad "$ns_other" b
  } > "$work/linkerd-cni-nads.yaml"
  kc create -f "$work/linkerd-cni-nads.yaml" >/dev/null
fi

cat > "$work/mwc.yaml" <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: $mwc_name
  labels:
    linkerd-multus-e2e: "$run_id"
webhooks:
- name: e2e-$run_id.multus.linkerd.io
  admissionReviewVersions: [v1]
  sideEffects: None
  # Fail: a webhook that is not reached shows as an error, not as a pod left unchanged.
  failurePolicy: Fail
  matchPolicy: Equivalent
  reinvocationPolicy: IfNeeded
  timeoutSeconds: 10
  clientConfig:
    url: "$url"
    caBundle: $ca_bundle
  rules:
  - operations: [CREATE, UPDATE]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [pods]
    scope: Namespaced
  # Only this run's namespaces.
  namespaceSelector:
    matchLabels:
      linkerd-multus-e2e: "$run_id"
EOF
kc create -f "$work/mwc.yaml" >/dev/null
mwc_created=true
echo "registered MutatingWebhookConfiguration $mwc_name -> $url"

# --- Wait until the API server calls the webhook and the webhook knows the namespaces ---------
dry_run() { # in, out: the pod the API server would create
  kc apply --dry-run=server -o json -f "$1" > "$2" 2> "$2.err"
}
deadline=$((SECONDS + timeout))
py pod ready-check "$ns_enabled" '{}' '{}' > "$work/ready-check.in.json"
until dry_run "$work/ready-check.in.json" "$work/ready-check.out.json" \
  && py check "$work/ready-check.out.json" "$work/ready-check.in.json" networks=linkerd-cni >/dev/null; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "error: after ${timeout}s a pod in $ns_enabled is still not attached:" >&2
    cat "$work/ready-check.out.json.err" >&2
    if [ -s "$work/ready-check.out.json" ]; then
      py check "$work/ready-check.out.json" "$work/ready-check.in.json" networks=linkerd-cni >&2 || true
    fi
    if [ -n "$webhook_pid" ]; then tail -n 30 "$work/webhook.log" >&2; fi
    exit 1
  fi
  sleep 2
done

# --- Scenarios --------------------------------------------------------------------------------
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS  $1"; }
fail() { failed=$((failed + 1)); echo "FAIL  $1: $2"; }
skip() { echo "SKIP  $1: $2"; }

# scenario TITLE NAMESPACE POD ANNOTATIONS-JSON LABELS-JSON EXPECTATION...
scenario() {
  local title=$1 ns=$2 name=$3 anns=$4 labels=$5 reason
  shift 5
  py pod "$name" "$ns" "$anns" "$labels" > "$work/$name.in.json"
  if ! dry_run "$work/$name.in.json" "$work/$name.out.json"; then
    fail "$title" "kubectl apply --dry-run=server failed: $(tr '\n' ' ' < "$work/$name.out.json.err")"
    rm -f "$work/$name.out.json"
    return 0
  fi
  if reason=$(py check "$work/$name.out.json" "$work/$name.in.json" "$@"); then
    pass "$title"
  else
    fail "$title" "$reason"
  fi
}

# denied TITLE NAMESPACE POD ANNOTATIONS-JSON MESSAGE: the API server refuses the pod with the
# webhook's MESSAGE.
denied() {
  local title=$1 ns=$2 name=$3 anns=$4 message=$5
  py pod "$name" "$ns" "$anns" '{}' > "$work/$name.in.json"
  if dry_run "$work/$name.in.json" "$work/$name.out.json"; then
    fail "$title" "the pod was admitted"
  elif grep -qF "denied the request: $message" "$work/$name.out.json.err"; then
    pass "$title"
  else
    fail "$title" "not the expected message: $(tr '\n' ' ' < "$work/$name.out.json.err")"
  fi
}

# idempotent TITLE POD: the mutated pod applied again comes back with the same annotations.
idempotent() {
  local title=$1 name=$2 reason
  if [ ! -s "$work/$name.out.json" ]; then
    fail "$title" "no first result (see above)"
    return 0
  fi
  py resubmit "$work/$name.out.json" "$work/$name.in.json" > "$work/$name.again.in.json"
  if ! dry_run "$work/$name.again.in.json" "$work/$name.again.out.json"; then
    fail "$title" "kubectl apply --dry-run=server failed: $(tr '\n' ' ' < "$work/$name.again.out.json.err")"
    return 0
  fi
  if reason=$(py same "$work/$name.out.json" "$work/$name.again.out.json"); then
    pass "$title"
  else
    fail "$title" "$reason"
  fi
}

comma="a, $ns_other/b@net2"
json_list='[{"name": "a"}, {"name": "b", "namespace": "'$ns_other'", "interface": "net2"}]'
json_list_attached='[{"name": "a"}, {"name": "b", "namespace": "'$ns_other'", "interface": "net2"}, {"name": "linkerd-cni"}]'
as_json() { python3 -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' "$@"; }

scenario "enabled namespace: pod attached" "$ns_enabled" enabled '{}' '{}' \
  networks=linkerd-cni proxy-uid=-
scenario "namespace without annotations: pod unchanged" "$ns_plain" plain '{}' '{}' \
  unchanged networks=- proxy-uid=- config-hash=-
scenario "pod annotations alone: attached" "$ns_plain" pod-annotations \
  "$(as_json linkerd.io/multus enabled linkerd.io/inject enabled)" '{}' networks=linkerd-cni
scenario "linkerd.io/multus: disabled on the pod, enabled namespace: not attached" \
  "$ns_enabled" multus-disabled "$(as_json linkerd.io/multus disabled)" '{}' unchanged networks=- \
  config-hash=-
scenario "linkerd.io/inject: disabled on the pod, enabled namespace: not attached" \
  "$ns_enabled" inject-disabled "$(as_json linkerd.io/inject disabled)" '{}' unchanged networks=- \
  config-hash=-
scenario "comma-form networks annotation: linkerd-cni appended once" "$ns_enabled" comma \
  "$(as_json k8s.v1.cni.cncf.io/networks "$comma")" '{}' "networks=$comma, linkerd-cni"
scenario "JSON-list networks annotation: linkerd-cni appended once, still a list" "$ns_enabled" \
  json-list "$(as_json k8s.v1.cni.cncf.io/networks "$json_list")" '{}' \
  "networks=$json_list_attached" json-list
scenario "already attached (a, linkerd-cni): unchanged" "$ns_enabled" attached \
  "$(as_json k8s.v1.cni.cncf.io/networks 'a, linkerd-cni')" '{}' unchanged
if [ "$cp_scenarios" = true ]; then
  scenario "control-plane pod: attached, no proxy UID" "$cp_ns" control-plane '{}' \
    "$(as_json linkerd.io/control-plane-component destination)" networks=linkerd-cni proxy-uid=-
  scenario "control-plane namespace, pod without the label: not attached" "$cp_ns" \
    not-control-plane '{}' '{}' unchanged networks=- config-hash=-
else
  skip "control-plane pod" "needs a control-plane namespace the script creates (--control-plane-namespace)"
fi
scenario "OpenShift UID range: proxy-uid 1000682102" "$ns_uid" uid-range '{}' '{}' \
  networks=linkerd-cni proxy-uid=1000682102
scenario "OpenShift UID range, pod sets proxy-uid: kept" "$ns_uid" uid-kept \
  "$(as_json config.linkerd.io/proxy-uid 2102)" '{}' networks=linkerd-cni proxy-uid=2102
if [ "$network_resources" = true ]; then
  # The NAD cache follows a watch: wait until it has the NAD (until then the pod is denied).
  deadline=$((SECONDS + timeout))
  py pod nr-ready "$ns_nr" "$(as_json k8s.v1.cni.cncf.io/networks sriov)" '{}' > "$work/nr-ready.in.json"
  until dry_run "$work/nr-ready.in.json" "$work/nr-ready.out.json" || [ "$SECONDS" -ge "$deadline" ]; do
    sleep 1
  done
  scenario "network resources: requests, limits and node selector from the selected NADs" \
    "$ns_nr" nr-resources "$(as_json k8s.v1.cni.cncf.io/networks 'sriov, sriov@net2')" '{}' \
    request=intel.com/sriov_e2e=2 limit=intel.com/sriov_e2e=2 \
    node-selector=feature.node.kubernetes.io/sriov=true
  denied "network resources: a pod selecting a missing NAD is denied" "$ns_nr" nr-missing \
    "$(as_json k8s.v1.cni.cncf.io/networks 'sriov, gone')" \
    "linkerd-multus: pod $ns_nr/nr-missing: selects NetworkAttachmentDefinition $ns_nr/gone, which does not exist"
fi
if [ "$manage_nads" = true ]; then
  # nad_made NAMESPACE yes|no: whether the controller's linkerd-cni NAD is (or stays) there.
  nad_made() {
    kc get network-attachment-definitions.k8s.cni.cncf.io linkerd-cni -n "$1" \
      -o 'jsonpath={.metadata.labels.app\.kubernetes\.io/created-by}' 2>/dev/null || true
  }
  deadline=$((SECONDS + timeout))
  wanted=("$ns_enabled" "$ns_uid")
  if [ "$cp_scenarios" = true ]; then wanted+=("$cp_ns"); fi
  missing=("${wanted[@]}")
  while [ "${#missing[@]}" -gt 0 ] && [ "$SECONDS" -lt "$deadline" ]; do
    still=()
    for ns in "${missing[@]}"; do
      [ "$(nad_made "$ns")" = linkerd-multus-controller ] || still+=("$ns")
    done
    missing=("${still[@]}")
    [ "${#missing[@]}" -eq 0 ] || sleep 1
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    pass "NAD controller: every namespace that needs it has linkerd-cni (${wanted[*]})"
  else
    fail "NAD controller: every namespace that needs it has linkerd-cni" "none in ${missing[*]} after ${timeout}s"
  fi
  extra=""
  for ns in "$ns_plain" "$ns_other"; do
    [ -z "$(nad_made "$ns")" ] || extra="$extra $ns"
  done
  if [ -z "$extra" ]; then
    pass "NAD controller: no NAD where none is needed"
  else
    fail "NAD controller: no NAD where none is needed" "linkerd-cni in$extra"
  fi
fi
idempotent "idempotence: attached pod applied again" enabled
idempotent "idempotence: comma form applied again" comma
idempotent "idempotence: JSON list applied again" json-list
idempotent "idempotence: proxy UID applied again" uid-range

echo "$passed passed, $failed failed"
if [ "$failed" -gt 0 ] && [ -n "$webhook_pid" ]; then
  echo "last lines of the webhook's log:"
  tail -n 20 "$work/webhook.log"
fi
if [ "$failed" -gt 0 ] && [ -n "$controller_pid" ]; then
  echo "last lines of the NAD controller's log:"
  tail -n 20 "$work/controller.log"
fi
[ "$failed" -eq 0 ]
