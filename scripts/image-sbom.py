#!/usr/bin/env python3
"""The CycloneDX 1.5 SBOM of the released image, from the SBOMs of the binaries in it.

The image is FROM scratch (Dockerfile, target runtime-prebuilt): per platform, the static
binary at /usr/local/bin/linkerd-multus, and /etc/passwd and /etc/group from container/.
So its SBOM is the image (the manifest list's digest, as a purl) holding, per platform, the
binary (its SHA-256, with the crates its own SBOM lists, from scripts/dist.sh) and the two
files. bom-refs of each binary's crates are prefixed with its target, as the two binaries
share crates and a BOM's refs are unique. The serial number is derived from the image
digest, so the same image gives the same SBOM but for the timestamp ($SOURCE_DATE_EPOCH when
set). .github/workflows/release.yml runs it after the push; tests/release.rs runs it on the
image scripts/container.sh builds.

    scripts/image-sbom.py --image ghcr.io/OWNER/NAME --tag v0.1.0 --digest sha256:HEX \\
        --binary linux/amd64=dist/linkerd-multus-v0.1.0-x86_64-unknown-linux-gnu \\
        [--binary linux/arm64=...] > image.cdx.json

Each --binary is a platform and the path of a binary; its SBOM is the same path with
.cdx.json appended.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import sys
import urllib.parse
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What the Dockerfile copies besides the binary: the path in the image, the file here.
FILES = [("/etc/passwd", "container/passwd"), ("/etc/group", "container/group")]
BINARY_PATH = "/usr/local/bin/linkerd-multus"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def fail(message):
    sys.exit(f"error: scripts/image-sbom.py: {message}")


def image_purl(image, tag, digest):
    """A purl of type oci (github.com/package-url/purl-spec): the last path segment as the
    name, the digest as the version, the repository and tag as qualifiers."""
    name = image.rsplit("/", 1)[-1]
    qualifiers = urllib.parse.urlencode({"repository_url": image, "tag": tag}, safe="/")
    return f"pkg:oci/{name}@{urllib.parse.quote(digest, safe='')}?{qualifiers}"


def prefixed(ref, prefix):
    return f"{prefix}/{ref}"


def binary_component(platform, path):
    sbom_path = path + ".cdx.json"
    try:
        with open(sbom_path) as f:
            sbom = json.load(f)
    except OSError as e:
        fail(f"no SBOM for {path} ({e}): scripts/dist.sh writes it beside the binary")
    top = sbom["metadata"]["component"]
    target = next(
        (p["value"] for p in sbom["metadata"].get("properties", [])
         if p["name"] == "cdx:rustc:sbom:target:triple"),
        None,
    )
    if target is None or not path.endswith(target):
        fail(f"{sbom_path} describes target {target}, not the one {path} is named after")
    ref = target
    crates = []
    for c in sbom.get("components", []):
        c = dict(c)
        c["bom-ref"] = prefixed(c["bom-ref"], ref)
        crates.append(c)
    component = {
        "type": "application",
        "bom-ref": ref,
        "name": top["name"],
        "version": top["version"],
        "description": top.get("description", ""),
        "hashes": [{"alg": "SHA-256", "content": sha256(path)}],
        "licenses": top.get("licenses", []),
        "purl": top["purl"],
        "properties": [
            {"name": "oci:platform", "value": platform},
            {"name": "oci:path", "value": BINARY_PATH},
            {"name": "cdx:rustc:sbom:target:triple", "value": target},
        ],
        "components": crates,
    }
    dependencies = []
    for d in sbom.get("dependencies", []):
        on = [prefixed(r, ref) for r in d.get("dependsOn", [])]
        if d["ref"] == top["bom-ref"]:
            dependencies.append({"ref": ref, "dependsOn": on})
        else:
            dependencies.append({"ref": prefixed(d["ref"], ref), "dependsOn": on})
    return component, dependencies


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True, help="repository, e.g. ghcr.io/OWNER/NAME")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--digest", required=True, help="the pushed manifest list's digest")
    parser.add_argument("--binary", action="append", required=True, metavar="PLATFORM=PATH")
    args = parser.parse_args()
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", args.digest):
        fail(f"--digest {args.digest!r} is not sha256: and 64 lowercase hex digits")

    components, dependencies, platforms = [], [], []
    for spec in args.binary:
        platform, sep, path = spec.partition("=")
        if not sep or not re.fullmatch(r"linux/[a-z0-9]+", platform):
            fail(f"--binary {spec!r} is not PLATFORM=PATH (linux/amd64=dist/...)")
        component, deps = binary_component(platform, path)
        components.append(component)
        dependencies.extend(deps)
        platforms.append(component["bom-ref"])
    files = []
    for in_image, here in FILES:
        files.append({
            "type": "file",
            "bom-ref": f"file:{in_image}",
            "name": in_image,
            "hashes": [{"alg": "SHA-256", "content": sha256(os.path.join(ROOT, here))}],
        })
    components.extend(files)

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc))
    version = components[0]["version"]
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, image_purl(args.image, args.tag, args.digest))}",
        "version": 1,
        "metadata": {
            "timestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": [{"vendor": "linkerd-multus", "name": "scripts/image-sbom.py", "version": version}],
            "component": {
                "type": "container",
                "bom-ref": "image",
                "name": args.image,
                "version": args.tag,
                "purl": image_purl(args.image, args.tag, args.digest),
            },
        },
        "components": components,
        "dependencies": [
            {"ref": "image", "dependsOn": platforms + [f["bom-ref"] for f in files]},
            *dependencies,
            *({"ref": f["bom-ref"], "dependsOn": []} for f in files),
        ],
    }
    json.dump(bom, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
