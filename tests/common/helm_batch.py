"""Runs many scripts/helm.py commands in one process, for the tests (tests/common/helm.rs):

    helm_batch.py HELM_PY REQUESTS_JSON

REQUESTS_JSON is a JSON list of argument lists, each what scripts/helm.py is given on its
command line. Each runs through scripts/helm.py's own main(), its stdout and stderr captured
apart, in order; prints a JSON list of {"code", "stdout", "stderr"}, one per request. Loading
Python and Helm's SDK (libhelm_c.so) takes most of a lone `helm.py template`'s time: a table
of renders loads them once. The requests share one environment (HELM_* and KUBECONFIG, which
libhelm_c reads once, when it loads), so they are commands that read no cluster.
"""

import contextlib
import importlib.util
import io
import json
import sys


def main() -> int:
    helm_py, requests = sys.argv[1], json.loads(sys.argv[2])
    spec = importlib.util.spec_from_file_location("helm_py", helm_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = []
    for args in requests:
        stdout, stderr = io.StringIO(), io.StringIO()
        sys.argv = [helm_py, *args]
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = module.main() or 0
            except SystemExit as e:
                # argparse's refusal of the command line (2), --help (0), sys.exit("why") (1).
                code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        results.append({"code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()})
    sys.stdout.write(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
