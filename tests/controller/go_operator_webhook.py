"""A stand-in for the Go operator's pod webhook, for tests/controller/migration.rs.

The operator (Linkerd Multus Network Attach Operator, api/v1/pod_webhook.go) is a Go binary
in an image; neither is on the machines these tests run on. This stand-in answers the API
server's AdmissionReviews as the operator's handler does, defects included (DOMAIN.md 1):

* `linkerd.io/multus` and `linkerd.io/inject` are read from the pod, falling back to its
  namespace's annotations (given here as JSON, where the operator reads them from the API);
* it attaches when multus is `enabled` and inject `enabled` or `ingress`, or in the
  control-plane namespace when the pod has a non-empty `linkerd.io/control-plane-component`;
* it splits the networks annotation on `,` without trimming and appends `,linkerd-cni` unless
  an item equals `linkerd-cni` exactly (so `a, linkerd-cni` gets a second one, and a JSON list
  is broken);
* it writes the two copied annotations onto the pod it patches, even as empty strings.

Usage: go_operator_webhook.py CERT KEY CONTROL_PLANE_NAMESPACE NAMESPACES_JSON
Prints the port it listens on (127.0.0.1, chosen by the system), then serves until killed.
"""

import base64
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NETWORKS = "k8s.v1.cni.cncf.io/networks"
NAD = "linkerd-cni"
COPIED = ("linkerd.io/multus", "linkerd.io/inject")

CERT, KEY, CONTROL_PLANE, NAMESPACES = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])


def patched(request):
    """The pod's new annotations, or None when the operator leaves it."""
    pod = request["object"]
    namespace = request["namespace"]
    annotations = dict(pod["metadata"].get("annotations") or {})
    from_namespace = NAMESPACES.get(namespace, {})
    for key in COPIED:
        if not annotations.get(key):
            annotations[key] = from_namespace.get(key, "")
    labels = pod["metadata"].get("labels") or {}
    wanted = (
        annotations["linkerd.io/multus"] == "enabled"
        and annotations["linkerd.io/inject"] in ("enabled", "ingress")
    ) or (namespace == CONTROL_PLANE and labels.get("linkerd.io/control-plane-component"))
    if not wanted:
        return None
    value = annotations.get(NETWORKS, "")
    if not value:
        annotations[NETWORKS] = NAD
    elif NAD not in value.split(","):
        annotations[NETWORKS] = value + "," + NAD
    return annotations


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        response = {"uid": request["uid"], "allowed": True}
        annotations = patched(request)
        if annotations is not None:
            patch = [{"op": "add", "path": "/metadata/annotations", "value": annotations}]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        body = json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
