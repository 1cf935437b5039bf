#!/usr/bin/env bash
# Makes the webhook's certificates without cert-manager: a CA and a serving certificate for
# the Service's names, with openssl only. With --apply it also stores the serving certificate
# in the Secret the Deployment mounts and writes the CA into the MutatingWebhookConfiguration's
# caBundle (kubectl, current context). See deploy/README.md, "Certificates without
# cert-manager".
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: deploy/certs.sh --out DIR [options]

Writes into DIR (created with mode 0700):
  ca.crt ca.key     a CA (kept when DIR already has one, so the caBundle stays valid)
  tls.crt tls.key   a serving certificate signed by that CA (made anew on every run), for
                    SERVICE, SERVICE.NAMESPACE, SERVICE.NAMESPACE.svc and
                    SERVICE.NAMESPACE.svc.cluster.local, plus every --san

The keys must not land in Git: DIR is refused when it is inside a Git work tree.

Options:
  --out DIR              where to write the files (required)
  --namespace NS         namespace of the webhook's Service [linkerd-multus]
  --service NAME         name of the webhook's Service [linkerd-multus-webhook]
  --san NAME|IP          an extra subjectAltName, e.g. the IP address of a webhook run outside
                         the cluster (repeatable)
  --days N               validity of the serving certificate in days [365]
  --ca-days N            validity of a new CA in days [3650]
  --apply                also (kubectl, current context) create or update the Secret
                         NAMESPACE/SECRET (tls.crt, tls.key, ca.crt) and set the caBundle of
                         every webhook of the MutatingWebhookConfiguration WEBHOOK_CONFIG;
                         both the namespace and the configuration must exist (apply the
                         package first)
  --secret NAME          the Secret for --apply [linkerd-multus-webhook-tls]
  --webhook-config NAME  the MutatingWebhookConfiguration for --apply [linkerd-multus-webhook]
  --allow-git            write into DIR even inside a Git work tree
  -h, --help             this help

Renewal: run it again with the same DIR and --apply; the CA is kept, the webhook reloads the
new files when the kubelet updates the Secret's volume (about a minute).

Example:
  deploy/certs.sh --out ~/linkerd-multus-certs
  kubectl apply -f deploy/namespace.yaml && kubectl apply -R -f deploy/
  deploy/certs.sh --out ~/linkerd-multus-certs --apply
EOF
}

die() { echo "error: $*" >&2; exit 1; }

out=""
namespace=linkerd-multus
service=linkerd-multus-webhook
secret=linkerd-multus-webhook-tls
webhook_config=linkerd-multus-webhook
days=365
ca_days=3650
apply=false
allow_git=false
sans=()

need_value() { if [ "$#" -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value (see --help)"; fi; }

while [ "$#" -gt 0 ]; do
  case "$1" in
    --out) need_value "$@"; out=$2; shift 2 ;;
    --namespace) need_value "$@"; namespace=$2; shift 2 ;;
    --service) need_value "$@"; service=$2; shift 2 ;;
    --san) need_value "$@"; sans+=("$2"); shift 2 ;;
    --days) need_value "$@"; days=$2; shift 2 ;;
    --ca-days) need_value "$@"; ca_days=$2; shift 2 ;;
    --secret) need_value "$@"; secret=$2; shift 2 ;;
    --webhook-config) need_value "$@"; webhook_config=$2; shift 2 ;;
    --apply) apply=true; shift ;;
    --allow-git) allow_git=true; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

[ -n "$out" ] || die "--out DIR is required (see --help)"
[[ "$days" =~ ^[1-9][0-9]*$ ]] || die "--days must be a positive number, not '$days'"
[[ "$ca_days" =~ ^[1-9][0-9]*$ ]] || die "--ca-days must be a positive number, not '$ca_days'"
command -v openssl >/dev/null 2>&1 || die "openssl is not installed"
if [ "$apply" = true ]; then
  command -v kubectl >/dev/null 2>&1 || die "--apply needs kubectl"
fi

# --- subjectAltNames --------------------------------------------------------------------------
dns=("$service" "$service.$namespace" "$service.$namespace.svc" "$service.$namespace.svc.cluster.local")
ips=()
for san in ${sans[@]+"${sans[@]}"}; do
  if [[ "$san" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || [[ "$san" == *:* ]]; then
    ips+=("$san")
  elif [[ "$san" =~ ^[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?$ ]]; then
    dns+=("$san")
  else
    die "--san '$san' is neither a DNS name nor an IP address"
  fi
done

# --- Where the files go -----------------------------------------------------------------------
# Checked on the nearest existing directory, before anything is created.
existing=$out
while [ ! -d "$existing" ]; do existing=$(dirname "$existing"); done
if [ "$allow_git" = false ] && command -v git >/dev/null 2>&1 \
  && git -C "$existing" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  die "$out is inside a Git work tree ($(git -C "$existing" rev-parse --show-toplevel)): the private keys must not be committed; choose a directory outside it, or pass --allow-git"
fi
umask 077
mkdir -p "$out"
chmod 700 "$out"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cnf=$tmp/openssl.cnf
{
  echo "[req]"
  echo "distinguished_name = dn"
  echo "prompt = no"
  echo "[dn]"
  echo "CN = $service"
  echo "[ca_ext]"
  echo "basicConstraints = critical, CA:TRUE"
  echo "keyUsage = critical, keyCertSign, cRLSign"
  echo "subjectKeyIdentifier = hash"
  echo "[server_ext]"
  echo "basicConstraints = critical, CA:FALSE"
  echo "keyUsage = critical, digitalSignature"
  echo "extendedKeyUsage = serverAuth"
  echo "subjectKeyIdentifier = hash"
  echo "authorityKeyIdentifier = keyid"
  echo "subjectAltName = @alt"
  echo "[alt]"
  i=0
  for name in "${dns[@]}"; do i=$((i + 1)); echo "DNS.$i = $name"; done
  i=0
  for ip in ${ips[@]+"${ips[@]}"}; do i=$((i + 1)); echo "IP.$i = $ip"; done
} > "$cnf"

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# --- The CA -----------------------------------------------------------------------------------
if [ -s "$out/ca.crt" ] && [ -s "$out/ca.key" ]; then
  echo "keeping the CA in $out (ca.crt, ca.key)"
else
  newkey "$out/ca.key"
  openssl req -x509 -new -config "$cnf" -extensions ca_ext -key "$out/ca.key" -sha256 \
    -days "$ca_days" -subj "/CN=$service-ca" -out "$out/ca.crt" 2>/dev/null \
    || die "openssl could not make the CA"
  echo "wrote a new CA: $out/ca.crt, $out/ca.key"
fi

# --- The serving certificate ------------------------------------------------------------------
newkey "$tmp/tls.key"
openssl req -new -config "$cnf" -key "$tmp/tls.key" -subj "/CN=$service.$namespace.svc" \
  -out "$tmp/tls.csr" 2>/dev/null || die "openssl could not make the certificate request"
openssl x509 -req -in "$tmp/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" \
  -set_serial "0x$(openssl rand -hex 16)" -sha256 -days "$days" \
  -extfile "$cnf" -extensions server_ext -out "$tmp/tls.crt" 2>/dev/null \
  || die "openssl could not sign the serving certificate"
openssl verify -CAfile "$out/ca.crt" "$tmp/tls.crt" >/dev/null \
  || die "the new serving certificate does not verify against $out/ca.crt"
mv "$tmp/tls.key" "$out/tls.key"
mv "$tmp/tls.crt" "$out/tls.crt"
chmod 600 "$out/ca.key" "$out/tls.key"
chmod 644 "$out/ca.crt" "$out/tls.crt"
all_sans=("${dns[@]}" ${ips[@]+"${ips[@]}"})
echo "wrote $out/tls.crt, $out/tls.key (valid $days days for: ${all_sans[*]})"

ca_bundle=$(base64 < "$out/ca.crt" | tr -d '\n')

if [ "$apply" = false ]; then
  echo
  echo "caBundle (the CA certificate, public; goes in clientConfig.caBundle):"
  echo "$ca_bundle"
  echo
  echo "Next: apply the package, then run this again with --apply to store the Secret"
  echo "$namespace/$secret and set the caBundle of $webhook_config."
  exit 0
fi

# --- --apply ----------------------------------------------------------------------------------
kubectl get namespace "$namespace" >/dev/null \
  || die "namespace $namespace not found: apply the package first (deploy/README.md)"
webhooks=$(kubectl get mutatingwebhookconfiguration "$webhook_config" \
  -o jsonpath='{range .webhooks[*]}{.name}{"\n"}{end}') \
  || die "MutatingWebhookConfiguration $webhook_config not found: apply the package first (deploy/README.md)"
inject=$(kubectl get mutatingwebhookconfiguration "$webhook_config" \
  -o jsonpath='{.metadata.annotations.cert-manager\.io/inject-ca-from}')
if [ -n "$inject" ]; then
  echo "warning: $webhook_config still has the annotation cert-manager.io/inject-ca-from=$inject;" >&2
  echo "  if cert-manager runs, its cainjector will overwrite the caBundle: remove the annotation" >&2
  echo "  from deploy/mutatingwebhookconfiguration.yaml and apply again (deploy/README.md)." >&2
fi

# Server-side apply: unlike client-side `kubectl apply`, it keeps no copy of the object (the
# private key) in a last-applied-configuration annotation.
kubectl -n "$namespace" create secret generic "$secret" --type=kubernetes.io/tls \
  --from-file=tls.crt="$out/tls.crt" --from-file=tls.key="$out/tls.key" \
  --from-file=ca.crt="$out/ca.crt" --dry-run=client -o yaml \
  | kubectl apply --server-side --force-conflicts --field-manager=linkerd-multus-certs -f - \
  || die "could not store the Secret $namespace/$secret"

count=$(printf '%s' "$webhooks" | grep -c . || true)
[ "$count" -gt 0 ] || die "MutatingWebhookConfiguration $webhook_config has no webhooks"
patch="["
for ((i = 0; i < count; i++)); do
  [ "$i" -eq 0 ] || patch+=","
  patch+="{\"op\":\"add\",\"path\":\"/webhooks/$i/clientConfig/caBundle\",\"value\":\"$ca_bundle\"}"
done
patch+="]"
kubectl patch mutatingwebhookconfiguration "$webhook_config" --type=json -p "$patch" \
  || die "could not set the caBundle of $webhook_config"
echo "stored $namespace/$secret and set the caBundle of $webhook_config ($count webhook(s))"
echo "the webhook picks up the new files when the kubelet updates the Secret's volume"
