#!/usr/bin/env python3
"""Regenerate the Helm fixtures under testdata/helm/ with the real Helm SDK.

Run by hand, not in CI. The fixtures are what `helm template` prints, produced
by Helm's own Go code (Helm SDK v4.2.3) through the PyPI package
`helm-python-sdk` 0.2.2 (import name `helm_python`), which bundles
`libhelm_c.so` and needs neither a `helm` binary nor a cluster.

Setup (prebuilt wheels; this was run on Linux x86_64 with Python 3.11):

    python3 -m venv /tmp/helm-venv
    /tmp/helm-venv/bin/pip install 'helm-python-sdk==0.2.2'

Regenerate (from the repository root):

    /tmp/helm-venv/bin/python scripts/helm-fixtures.py
    /tmp/helm-venv/bin/python scripts/helm-fixtures.py --check   # compare only

What is rendered:

* testdata/helm/web/template.yaml: the chart functions/linkerd-multus/examples/helm/web, release
  `web`, namespace `demo`, default values
  (= `helm template web functions/linkerd-multus/examples/helm/web -n demo`).
* testdata/helm/linkerd2-cni/template.yaml: only with `--linkerd-chart DIR`,
  DIR being a linkerd2-cni chart directory with the `partials` library chart
  under DIR/charts/partials (it is not kept in this repository; see
  testdata/helm/README.md for the files it was reconstructed from). Release
  `linkerd2-cni`, namespace `linkerd-cni`, default values.

How the text is made: `Config.install(..., dry_run="client")` returns the
release, whose `manifest` is Helm's sorted `---\\n# Source: <chart>/templates/<file>`
stream; `helm template` prints `strings.TrimSpace(manifest)` plus a newline and
then the hooks (pkg/cmd/template.go). The SDK's release summary carries no
hooks, so a chart whose templates render a `helm.sh/hook` object is refused
here rather than written without its hooks.

`--postrender-stdin DIR` additionally runs each chart through a throw-away
Helm 4 post-renderer plugin and writes, into DIR (outside the repository
unless you choose otherwise), exactly what Helm 4 feeds a `postrenderer/v1`
plugin on stdin (`<name>.postrender-stdin.yaml`) and the plugin's argv and
HELM_* environment (`<name>.postrender-env.txt`). The recording plugin is a
/bin/sh script, so this option needs a POSIX system.

libhelm_c (Go) only sees the environment the process started with, so the
script re-runs itself in a child process whose environment keeps Helm away
from the user's Helm configuration, plugins and kubeconfig.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HELM_DIR = REPO / "testdata" / "helm"
EXPECTED_SDK = "v4.2.3"

# (fixture name, chart path or None when given on the command line, release, namespace)
WEB = ("web", REPO / "functions" / "linkerd-multus" / "examples" / "helm" / "web", "web", "demo")
LINKERD = ("linkerd2-cni", None, "linkerd2-cni", "linkerd-cni")

PROBE_PLUGIN = """\
apiVersion: v1
type: postrenderer/v1
name: fixture-probe
version: 0.1.0
runtime: subprocess
runtimeConfig:
  platformCommand:
    - command: ${HELM_PLUGIN_DIR}/probe.sh
"""

PROBE_SCRIPT = """\
#!/bin/sh
# Records what Helm hands a post-renderer plugin, and returns it unchanged.
set -e
{ printf 'argv:'; printf ' %s' "$0" "$@"; printf '\\n'; env | grep '^HELM_' | sort; } > "$PROBE_OUT.postrender-env.txt"
cat > "$PROBE_OUT.postrender-stdin.yaml"
cat "$PROBE_OUT.postrender-stdin.yaml"
"""


def helm_template_text(helm, chart: Path, release: str, namespace: str, post_renderer: str | None = None) -> str:
    """What `helm template RELEASE CHART -n NAMESPACE` prints (charts without hooks)."""
    with helm.Chart.load(chart) as loaded:
        rendered = loaded.render(None, name=release, namespace=namespace, is_install=True)
    for path, text in sorted(rendered.items()):
        if re.search(r"^\s*[\"']?helm\.sh/hook[\"']?\s*:", text, re.MULTILINE):
            sys.exit(f"error: {path} renders a Helm hook; the SDK's release summary has no hooks, "
                     "so this script cannot reproduce `helm template` for this chart")

    with helm.Config(namespace=namespace, storage_driver="memory") as cfg:
        if post_renderer is None:
            rel = cfg.install(chart, release, None, namespace=namespace, dry_run="client")
        else:
            # helm_python 0.2.2 does not expose the post-renderer options of
            # helm-c-sdk's install call; pass them through the raw call.
            import json
            from helm_python import _native

            opts = {"namespace": namespace, "dry_run": "client", "post_renderer": post_renderer}
            payload = _native.call_string(
                "helm_install", cfg._raw(), _native.HANDLE(0), _native.HANDLE(0),
                os.fspath(chart), release, None, json.dumps(opts))
            rel = json.loads(payload)
    return rel["manifest"].strip() + "\n"


def check_stream(name: str, text: str) -> list[str]:
    """Sanity checks on the stream, and the quirks worth knowing about."""
    if not text.startswith("---\n# Source: "):
        sys.exit(f"error: {name}: output does not start with '---' and a '# Source:' comment")
    docs = text.count("\n# Source: ")
    seps = len(re.findall(r"^---$", text, re.MULTILINE))
    if docs != seps:
        sys.exit(f"error: {name}: {seps} '---' separators for {docs} '# Source:' comments")
    notes = [f"{docs} documents, each '---' + '# Source: <chart>/templates/<file>'; leading '---'"]
    blank_before_sep = len(re.findall(r"\n\n---\n", text))
    if blank_before_sep:
        notes.append(f"{blank_before_sep} blank line(s) before a '---'")
    trailing = [i + 1 for i, line in enumerate(text.split("\n")) if line != line.rstrip()]
    if trailing:
        notes.append(f"trailing whitespace on line(s) {trailing}")
    if re.search(r"^---\n# Source: [^\n]*\n(---|\Z)", text, re.MULTILINE):
        notes.append("an empty document")
    return notes


def make_probe_plugin(plugins_dir: Path) -> None:
    plugin = plugins_dir / "fixture-probe"
    plugin.mkdir(parents=True)
    (plugin / "plugin.yaml").write_text(PROBE_PLUGIN)
    script = plugin / "probe.sh"
    script.write_text(PROBE_SCRIPT)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 when a fixture differs from a fresh rendering")
    parser.add_argument("--linkerd-chart", type=Path, metavar="DIR",
                        help="linkerd2-cni chart directory (with charts/partials) to render as well")
    parser.add_argument("--postrender-stdin", type=Path, metavar="DIR",
                        help="also record what Helm 4 gives a postrenderer/v1 plugin, into DIR")
    args = parser.parse_args()

    jobs = [WEB]
    if args.linkerd_chart:
        if not (args.linkerd_chart / "charts" / "partials" / "Chart.yaml").is_file():
            sys.exit(f"error: {args.linkerd_chart}/charts/partials is missing (the library chart)")
        jobs.append((LINKERD[0], args.linkerd_chart.resolve(), LINKERD[2], LINKERD[3]))

    tmp_env = os.environ.get("HELM_FIXTURES_TMP")
    if tmp_env is None:
        # libhelm_c (Go) sees the environment the process started with, not later
        # changes made from Python, so run the work in a child with the environment
        # set up front: Helm kept away from the user's configuration, plugins and
        # cluster (a client-side dry run never contacts one anyway).
        tmp = Path(tempfile.mkdtemp(prefix="helm-fixtures-"))
        try:
            env = {k: v for k, v in os.environ.items() if k != "HELM_NAMESPACE"}
            for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
                env[var] = str(tmp / var.lower())
            env["HELM_PLUGINS"] = str(tmp / "plugins")
            env["KUBECONFIG"] = str(tmp / "no-kubeconfig")
            env["PROBE_OUT"] = str(tmp / "probe")
            env["HELM_FIXTURES_TMP"] = str(tmp)
            if args.postrender_stdin:
                make_probe_plugin(tmp / "plugins")
            return subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env, check=False).returncode
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    tmp = Path(tmp_env)
    if args.postrender_stdin:
        args.postrender_stdin.mkdir(parents=True, exist_ok=True)

    import helm_python as helm  # after the environment is set

    sdk = helm.helm_sdk_version()
    print(f"helm-python-sdk {helm.__version__}, helm-c-sdk {helm.helm_c_version()}, Helm SDK {sdk}")
    if sdk != EXPECTED_SDK:
        print(f"warning: the fixtures were made with Helm SDK {EXPECTED_SDK}, this is {sdk}",
              file=sys.stderr)

    failed = False
    for name, chart, release, namespace in jobs:
        text = helm_template_text(helm, chart, release, namespace)
        notes = check_stream(name, text)
        out = HELM_DIR / name / "template.yaml"
        rel_out = out.relative_to(REPO)
        if args.check:
            old = out.read_text() if out.exists() else ""
            if old != text:
                failed = True
                print(f"{rel_out}: DIFFERS")
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), text.splitlines(True), str(rel_out), "fresh"))
            else:
                print(f"{rel_out}: up to date")
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
            print(f"wrote {rel_out}")
        for note in notes:
            print(f"  {note}")

        if args.postrender_stdin:
            after = helm_template_text(helm, chart, release, namespace, post_renderer="fixture-probe")
            for suffix in (".postrender-stdin.yaml", ".postrender-env.txt"):
                shutil.move(tmp / f"probe{suffix}", args.postrender_stdin / f"{name}{suffix}")
            print(f"  recorded {args.postrender_stdin / name}.postrender-stdin.yaml"
                  f" (output {'identical to' if after == text else 'differs from'} plain rendering)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
