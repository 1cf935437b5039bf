#!/usr/bin/env python3
"""Writes charts/linkerd-multus/README.md's table of values from values.yaml's comments.

Each value is documented by the `# -- ` comment above it (continued by the `# ` lines that
follow), as helm-docs reads them; its default is the value in values.yaml. The README's text
outside the markers `<!-- values: begin -->` and `<!-- values: end -->` is kept as written.

    scripts/chart-readme.py           # rewrites the table
    scripts/chart-readme.py --check   # exits 1, saying so, when the table is not up to date

tests/helm_chart.rs runs the check. No dependency but Python 3 (values.yaml is read line by
line: block mappings of scalars, `[]` and `{}`, which is all it holds).
"""

import pathlib
import re
import sys

CHART = pathlib.Path(__file__).resolve().parent.parent / "charts" / "linkerd-multus"
BEGIN, END = "<!-- values: begin -->", "<!-- values: end -->"


def rows(values_text):
    """(key, type, default, description) for each documented value, in file order."""
    out, path, doc = [], [], None
    for line in values_text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("# -- "):
            doc = [stripped[5:]]
            continue
        if stripped.startswith("#"):
            if doc is not None:
                doc.append(stripped[1:].strip())
            continue
        if not stripped:
            doc = None
            continue
        m = re.match(r"^([A-Za-z0-9_]+):(.*)$", stripped)
        if not m:
            sys.exit(f"error: values.yaml: a line this script cannot read: {line!r}")
        key, value = m.group(1), m.group(2).strip()
        level = indent // 2
        path = path[:level] + [key]
        if value == "":
            doc = None
            continue
        if doc is None:
            sys.exit(f"error: values.yaml: {'.'.join(path)} has no `# -- ` comment")
        out.append((".".join(path), kind(value), value, " ".join(doc)))
        doc = None
    return out


def kind(value):
    if value in ("true", "false"):
        return "bool"
    if value == "[]":
        return "list"
    if value == "{}":
        return "object"
    if re.fullmatch(r"-?[0-9]+", value):
        return "int"
    return "string"


def table(values_text):
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for key, typ, default, doc in rows(values_text):
        escaped = doc.replace("|", "\\|")
        lines.append(f"| `{key}` | {typ} | `{default}` | {escaped} |")
    return "\n".join(lines)


def main():
    readme = CHART / "README.md"
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"error: {readme}: the markers {BEGIN} and {END} are missing")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table((CHART / 'values.yaml').read_text())}\n{END}{tail}"
    if "--check" in sys.argv[1:]:
        if new != text:
            sys.exit(f"error: {readme} is not what values.yaml gives: run scripts/chart-readme.py")
        return
    readme.write_text(new)


if __name__ == "__main__":
    main()
