"""Compares what a front of linkerd-multus wrote with the manifests it read.

Run by tests/fidelity.rs with the Python of target/tools (scripts/install-test-tools.sh):

    fidelity_compare.py INPUT_DIR OUTPUT_FILE stream|resourcelist

Each input document and each output document is read twice, by PyYAML (YAML 1.1,
as Kubernetes reads YAML) and by ruamel.yaml's pure reader (YAML 1.2). For each
reader, every input document must come out holding the same data. The only
differences allowed are the function's own: on a workload it changed (it carries
multus.linkerd.io/owned), that record and the networks annotation it created; and
the NetworkAttachmentDefinitions it generated (labelled managed-by linkerd-multus).

Prints a JSON summary on success: the documents compared, changed and generated.
Exits 1 naming the reader, the document and the first path that differs otherwise.
"""

import json
import os
import sys

import yaml
from ruamel.yaml import YAML

OWNED = "multus.linkerd.io/owned"
NETWORKS = "k8s.v1.cni.cncf.io/networks"
MANAGED_BY = "app.kubernetes.io/managed-by"


def pyyaml(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def ruamel(text):
    reader = YAML(typ="safe", pure=True)
    return [d for d in reader.load_all(text) if d is not None]


READERS = [("PyYAML 6 (YAML 1.1)", pyyaml), ("ruamel.yaml (YAML 1.2)", ruamel)]


def identity(doc):
    meta = doc.get("metadata") or {}
    return "%s %s %s/%s" % (
        doc.get("apiVersion"),
        doc.get("kind"),
        meta.get("namespace") or "",
        meta.get("name"),
    )


def first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return "%s: %r != %r" % (path, a, b)
    if isinstance(a, dict):
        if list(a) != list(b):
            return "%s: keys %r != %r" % (path, list(a), list(b))
        for key in a:
            found = first_difference(a[key], b[key], "%s.%s" % (path, key))
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d items != %d items" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, "%s[%d]" % (path, i))
            if found:
                return found
        return None
    return None if a == b else "%s: %r != %r" % (path, a, b)


def without_function_edits(out, before):
    """The output document less what the function itself added to it."""
    annotations = (out.get("metadata") or {}).get("annotations") or {}
    if OWNED not in annotations:
        return out, False
    out = dict(out)
    meta = dict(out["metadata"])
    meta["annotations"] = {k: v for k, v in annotations.items() if k != OWNED}
    out["metadata"] = meta
    record = annotations[OWNED]
    if "network=created" in record:
        spec = dict(out["spec"])
        template = dict(spec["template"])
        tmeta = dict(template["metadata"])
        tmeta["annotations"] = {
            k: v for k, v in tmeta["annotations"].items() if k != NETWORKS
        }
        template["metadata"] = tmeta
        spec["template"] = template
        out["spec"] = spec
    return out, True


def input_texts(directory):
    for name in sorted(os.listdir(directory)):
        if name.endswith((".yaml", ".yml", ".json")):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                yield name, f.read()


def main():
    directory, output, kind = sys.argv[1:4]
    with open(output, encoding="utf-8") as f:
        out_text = f.read()
    summary = {}
    for reader_name, read in READERS:
        inputs = {}
        for name, text in input_texts(directory):
            for doc in read(text):
                inputs[identity(doc)] = (name, doc)
        outs = read(out_text)
        if kind == "resourcelist":
            if len(outs) != 1 or outs[0].get("kind") != "ResourceList":
                sys.exit("%s: the output is not one ResourceList" % reader_name)
            outs = outs[0].get("items") or []
        compared, changed, generated, seen = [], [], [], set()
        for out in outs:
            key = identity(out)
            if key not in inputs:
                labels = (out.get("metadata") or {}).get("labels") or {}
                if labels.get(MANAGED_BY) == "linkerd-multus":
                    generated.append(key)
                    continue
                sys.exit("%s: the output holds %s, which is not in the input" % (reader_name, key))
            if key in seen:
                sys.exit("%s: the output holds %s twice" % (reader_name, key))
            seen.add(key)
            name, before = inputs[key]
            after, edited = without_function_edits(out, before)
            found = first_difference(before, after)
            if found:
                sys.exit(
                    "%s reads %s (from %s) differently after the %s front: %s"
                    % (reader_name, key, name, kind, found)
                )
            (changed if edited else compared).append(key)
        missing = sorted(set(inputs) - seen)
        if missing:
            sys.exit("%s: the output lacks %s" % (reader_name, ", ".join(missing)))
        this = {"unchanged": len(compared), "changed": changed, "generated": generated}
        if summary and summary != this:
            sys.exit("the readers disagree: %r != %r" % (summary, this))
        summary = this
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
