#!/usr/bin/env python3
"""Helm's own code (Helm SDK v4.2.3, through the PyPI package helm-python-sdk 0.2.2, which
bundles libhelm_c.so) for the tests of charts/linkerd-multus: what `helm lint`, `helm
template`, `helm install | upgrade | rollback | uninstall` do, with no helm binary.
scripts/install-test-tools.sh installs the package, pinned, into target/tools; the tests run
this script with target/tools/bin/python (tests/helm_chart.rs).

    helm.py lint CHART [--values JSON]
    helm.py template CHART --release NAME --namespace NS [--values JSON]
        [--post-renderer PLUGIN [--post-renderer-arg ARG]...]
    helm.py install CHART --release NAME --namespace NS [--values JSON] [--create-namespace]
    helm.py upgrade CHART --release NAME --namespace NS [--values JSON]
    helm.py rollback --release NAME --namespace NS --revision N
    helm.py uninstall --release NAME --namespace NS
    helm.py history --release NAME --namespace NS
    helm.py package CHART --version X.Y.Z --image-digest sha256:HEX --out DIR
    helm.py push ARCHIVE --remote oci://HOST/PATH

template prints the manifest (what `helm template` prints for a chart without hooks); the
cluster commands take the cluster from $KUBECONFIG and print the release summary as JSON
(its manifest included). package writes the chart's archive for release X.Y.Z (version
X.Y.Z, appVersion vX.Y.Z, the image pinned by that tag and the digest) into DIR and prints
its path; push uploads an archive (logged in as $REGISTRY_USER with $REGISTRY_TOKEN when
set) and prints {"ref", "digest"} of what the registry holds. With --post-renderer, template runs the postrenderer/v1 plugin
PLUGIN (from $HELM_PLUGINS) on the rendered manifests as `helm template --post-renderer`
does. Each exits 1 with Helm's message on stderr when Helm refuses.
libhelm_c (Go) reads its environment once, when it loads: set HELM_* and KUBECONFIG before
this script starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

EXPECTED_SDK = "v4.2.3"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["lint", "template", "install", "upgrade", "rollback",
                                            "uninstall", "history", "package", "push"])
    parser.add_argument("chart", nargs="?")
    parser.add_argument("--release", default="linkerd-multus")
    parser.add_argument("--namespace", default="linkerd-multus")
    parser.add_argument("--values", default="{}", help="the values, as JSON")
    parser.add_argument("--create-namespace", action="store_true")
    parser.add_argument("--revision", type=int)
    parser.add_argument("--timeout", type=int, default=120, help="seconds, for cluster calls")
    parser.add_argument("--version", help="the release's version, X.Y.Z (package)")
    parser.add_argument("--image-digest", help="the released image's digest (package)")
    parser.add_argument("--out", default="dist", help="where package writes the archive")
    parser.add_argument("--remote", help="oci://HOST/PATH (push)")
    parser.add_argument("--post-renderer", help="a postrenderer/v1 plugin's name (template)")
    parser.add_argument("--post-renderer-arg", action="append", default=[],
                        help="an argument for the post-renderer (repeat it)")
    args = parser.parse_args()
    values = json.loads(args.values)

    import helm_python as helm

    if helm.helm_sdk_version() != EXPECTED_SDK:
        print(f"error: Helm SDK {helm.helm_sdk_version()}, the tests are made for {EXPECTED_SDK}: "
              "run scripts/install-test-tools.sh", file=sys.stderr)
        return 1
    try:
        if args.command == "package":
            return package(helm, args)
        if args.command == "push":
            client = helm.RegistryClient()
            host = args.remote.removeprefix("oci://").split("/", 1)[0]
            if os.environ.get("REGISTRY_TOKEN"):
                client.login(host, os.environ.get("REGISTRY_USER", ""), os.environ["REGISTRY_TOKEN"])
            helm.push(args.chart, args.remote, client=client)
            with helm.Chart.load_archive(args.chart) as chart:
                ref = f"{args.remote}/{chart.name}:{chart.version}"
            digest = client.resolve(ref)["digest"]
            json.dump({"ref": ref.removeprefix("oci://"), "digest": digest}, sys.stdout)
            sys.stdout.write("\n")
            return 0
        if args.command == "lint":
            report = helm.lint(args.chart, values, strict=True, namespace=args.namespace)
            for message in report.get("messages", []):
                print(f"{message.get('severity')} {message.get('path')}: {message.get('error')}")
            for error in report.get("errors", []) or []:
                print(f"error: {error}", file=sys.stderr)
            return 1 if report.get("errors") else 0
        if args.command == "template":
            # A client-side dry run: no cluster is read, lookup finds nothing.
            with helm.Config(namespace=args.namespace, storage_driver="memory",
                             kubeconfig_path=os.devnull) as cfg:
                if args.post_renderer:
                    # helm-python-sdk 0.2.2 does not expose helm-c-sdk's post-renderer
                    # options; its raw install call takes them.
                    from helm_python import _native

                    opts = {"namespace": args.namespace, "dry_run": "client",
                            "post_renderer": args.post_renderer,
                            "post_renderer_args": args.post_renderer_arg}
                    release = json.loads(_native.call_string(
                        "helm_install", cfg._raw(), _native.HANDLE(0), _native.HANDLE(0),
                        os.fspath(args.chart), args.release, json.dumps(values),
                        json.dumps(opts)))
                else:
                    release = cfg.install(args.chart, args.release, values,
                                          namespace=args.namespace, dry_run="client")
            sys.stdout.write(release["manifest"].strip() + "\n")
            return 0
        with helm.Config(namespace=args.namespace) as cfg:
            if args.command == "install":
                release = cfg.install(args.chart, args.release, values, namespace=args.namespace,
                                      create_namespace=args.create_namespace,
                                      timeout=args.timeout)
            elif args.command == "upgrade":
                release = cfg.upgrade(args.chart, args.release, values, namespace=args.namespace,
                                      timeout=args.timeout)
            elif args.command == "rollback":
                cfg.rollback(args.release, version=args.revision, timeout=args.timeout)
                release = cfg.status(args.release)
            elif args.command == "uninstall":
                release = cfg.uninstall(args.release, timeout=args.timeout)
            else:
                release = cfg.history(args.release)
        json.dump(release, sys.stdout)
        sys.stdout.write("\n")
        return 0
    except helm.HelmError as e:
        print(f"error: helm {args.command}: {e}", file=sys.stderr)
        return 1


def package(helm, args) -> int:
    """The chart of release args.version, the image pinned by its tag and args.image_digest."""
    import re
    import shutil
    import tempfile

    if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", args.version or ""):
        print(f"error: --version {args.version!r} is not X.Y.Z", file=sys.stderr)
        return 1
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", args.image_digest or ""):
        print(f"error: --image-digest {args.image_digest!r} is not sha256:<64 hex>", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, os.path.basename(os.path.normpath(args.chart)))
        shutil.copytree(args.chart, copy)
        values_path = os.path.join(copy, "values.yaml")
        with open(values_path) as f:
            text = f.read()
        # image.tag and image.digest, each the one such line of values.yaml.
        for key, value in (("tag", f"v{args.version}"), ("digest", args.image_digest)):
            text, count = re.subn(rf'(?m)^(  {key}: )""$', rf'\g<1>"{value}"', text)
            if count != 1:
                print(f"error: {values_path}: {count} `  {key}: \"\"` lines, not 1",
                      file=sys.stderr)
                return 1
        pinned = text
        with open(values_path, "w") as f:
            f.write(pinned)
        os.makedirs(args.out, exist_ok=True)
        archive = helm.package(copy, destination=args.out, version=args.version,
                               app_version=f"v{args.version}")
    print(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
