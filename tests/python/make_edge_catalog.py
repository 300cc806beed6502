#!/usr/bin/env python3
"""Writes tests/fixtures/registry/edge-catalog: a small hand-made File-Based Catalog that
exercises what the catalog server must get right beyond the upstream examples — JSON and YAML
files (with `...` markers), bundle objects as JSON, YAML and `ref` files, bundles without an
image, olm.csv.metadata (synthetic CSVs), deprecations of packages, channels and bundles,
required APIs and packages, skips of bundles outside the channel, a custom schema blob and an
.indexignore. Run it again after editing; the output is deterministic."""

import base64
import json
import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "registry" / "edge-catalog"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def prop(t, v):
    return {"type": t, "value": v}


def csv(name, version, desc, replaces=None):
    c = {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "annotations": {"capabilities": "Basic Install"}},
        "spec": {
            "displayName": "Alpha <Operator> & friends",
            "description": desc,
            "version": version,
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
        },
    }
    if replaces:
        c["spec"]["replaces"] = replaces
    return c


WIDGET_CRD_YAML = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.alpha.example.com
spec:
  group: alpha.example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
"""

GADGET_CRD_JSON = json.dumps({
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.beta.example.com"},
    "spec": {"group": "beta.example.com", "names": {"kind": "Gadget", "plural": "gadgets"},
             "scope": "Namespaced", "versions": [{"name": "v1", "served": True, "storage": True}]},
}, indent=2)


def alpha():
    blobs = [
        {"schema": "olm.package", "name": "alpha-op", "defaultChannel": "stable",
         "icon": {"base64data": "PHN2Zy8+", "mediatype": "image/svg+xml"},
         "description": "Alpha operator: <b>widgets</b> & more"},
        {"schema": "olm.channel", "name": "candidate", "package": "alpha-op", "entries": [
            {"name": "alpha-op.v1.2.0"},
            {"name": "alpha-op.v1.3.0-rc.1", "replaces": "alpha-op.v1.2.0", "skips": ["alpha-op.v1.1.0"]},
        ]},
        {"schema": "olm.channel", "name": "stable", "package": "alpha-op", "entries": [
            {"name": "alpha-op.v1.0.0"},
            {"name": "alpha-op.v1.1.0", "replaces": "alpha-op.v1.0.0", "skips": ["alpha-op.v0.9.0"],
             "skipRange": ">=0.9.0 <1.1.0"},
            {"name": "alpha-op.v1.2.0", "replaces": "alpha-op.v1.1.0", "skips": ["alpha-op.v1.0.0"]},
        ]},
        {"schema": "olm.bundle", "name": "alpha-op.v1.0.0", "package": "alpha-op",
         "image": "quay.io/example/alpha-op-bundle:v1.0.0",
         "properties": [
             prop("olm.package", {"packageName": "alpha-op", "version": "1.0.0"}),
             prop("olm.gvk", {"group": "alpha.example.com", "kind": "Widget", "version": "v1alpha1"}),
             prop("olm.bundle.object", {"data": b64(json.dumps(csv("alpha-op.v1.0.0", "1.0.0", "first <release>"), indent=1))}),
             prop("olm.bundle.object", {"data": b64(WIDGET_CRD_YAML)}),
         ],
         "relatedImages": [{"name": "operator", "image": "quay.io/example/alpha-op:v1.0.0"}]},
        {"schema": "olm.bundle", "name": "alpha-op.v1.1.0", "package": "alpha-op",
         "image": "quay.io/example/alpha-op-bundle:v1.1.0",
         "properties": [
             prop("olm.package", {"packageName": "alpha-op", "version": "1.1.0"}),
             prop("olm.gvk", {"group": "alpha.example.com", "kind": "Widget", "version": "v1alpha1"}),
             prop("olm.gvk", {"group": "alpha.example.com", "kind": "Widget", "version": "v1"}),
             prop("olm.gvk.required", {"group": "beta.example.com", "kind": "Gadget", "version": "v1"}),
             prop("olm.package.required", {"packageName": "beta-op", "versionRange": ">=1.0.0 <2.0.0"}),
             prop("olm.bundle.object", {"data": b64(json.dumps(csv("alpha-op.v1.1.0", "1.1.0", "second", "alpha-op.v1.0.0")))}),
         ]},
        {"schema": "olm.bundle", "name": "alpha-op.v1.2.0", "package": "alpha-op", "image": "",
         "properties": [
             prop("olm.package", {"packageName": "alpha-op", "version": "1.2.0"}),
             prop("olm.gvk", {"group": "alpha.example.com", "kind": "Widget", "version": "v1"}),
             prop("example.com/tuning", {"zeta": [3, 2, 1], "alpha": {"y": True, "x": "<x>"}}),
             prop("olm.bundle.object", {"data": b64(yaml.safe_dump(csv("alpha-op.v1.2.0", "1.2.0", "third & last", "alpha-op.v1.1.0")))}),
             prop("olm.bundle.object", {"data": b64(WIDGET_CRD_YAML)}),
         ]},
        {"schema": "olm.bundle", "name": "alpha-op.v1.3.0-rc.1", "package": "alpha-op",
         "image": "quay.io/example/alpha-op-bundle:v1.3.0-rc.1",
         "properties": [
             prop("olm.package", {"packageName": "alpha-op", "version": "1.3.0-rc.1"}),
             prop("olm.gvk", {"group": "alpha.example.com", "kind": "Widget", "version": "v1"}),
         ]},
        {"schema": "olm.deprecations", "package": "alpha-op", "entries": [
            {"reference": {"schema": "olm.channel", "name": "candidate"}, "message": "candidate is frozen"},
            {"reference": {"schema": "olm.bundle", "name": "alpha-op.v1.0.0"}, "message": "1.0.0 has a CVE; upgrade"},
        ]},
    ]
    # opm render style: JSON values back to back, 4-space indent.
    return "".join(json.dumps(b, indent=4) + "\n" for b in blobs)


def beta():
    docs = [
        {"schema": "olm.package", "name": "beta-op", "defaultChannel": "fast",
         "description": "Beta operator"},
        {"schema": "olm.channel", "name": "fast", "package": "beta-op", "entries": [
            {"name": "beta-op.v1.0.0"},
            {"name": "beta-op.v1.1.0", "replaces": "beta-op.v1.0.0"},
        ]},
        {"schema": "olm.bundle", "name": "beta-op.v1.0.0", "package": "beta-op",
         "image": "quay.io/example/beta-op-bundle:v1.0.0",
         "properties": [
             prop("olm.package", {"packageName": "beta-op", "version": "1.0.0"}),
             prop("olm.gvk", {"group": "beta.example.com", "kind": "Gadget", "version": "v1"}),
             prop("olm.csv.metadata", {
                 "displayName": "Beta Operator",
                 "annotations": {"capabilities": "Seamless Upgrades", "alm-examples": "[]"},
                 "labels": {"operatorframework.io/arch.amd64": "supported"},
                 "crdDescriptions": {"owned": [{"name": "gadgets.beta.example.com", "version": "v1",
                                                "kind": "Gadget", "displayName": "Gadget",
                                                "specDescriptors": [{"path": "size", "value": 3}]}]},
                 "installModes": [{"type": "OwnNamespace", "supported": True},
                                  {"type": "AllNamespaces", "supported": False}],
                 "keywords": ["gadgets"],
                 "provider": {"name": "Example & Co"},
                 "maintainers": [{"name": "Ops", "email": "ops@example.com"}],
                 "links": [{"name": "Docs", "url": "https://example.com/docs"}],
                 "maturity": "stable",
                 "minKubeVersion": "1.28.0",
             }),
         ],
         "relatedImages": [{"name": "operator", "image": "quay.io/example/beta-op:v1.0.0"}]},
        {"schema": "olm.bundle", "name": "beta-op.v1.1.0", "package": "beta-op",
         "image": "quay.io/example/beta-op-bundle:v1.1.0",
         "properties": [
             prop("olm.package", {"packageName": "beta-op", "version": "1.1.0"}),
             prop("olm.gvk", {"group": "beta.example.com", "kind": "Gadget", "version": "v1"}),
             prop("olm.gvk", {"group": "alpha.example.com", "kind": "Widget", "version": "v1"}),
             prop("olm.bundle.object", {"ref": "objects/beta-op.v1.1.0.csv.yaml"}),
             prop("olm.bundle.object", {"ref": "../shared-objects/gadget-crd.json"}),
         ]},
        {"schema": "example.com/release-notes", "package": "beta-op", "name": "1.1.0",
         "notes": ["adds Widget v1", "faster"], "severity": 2},
        {"schema": "olm.deprecations", "package": "beta-op", "entries": [
            {"reference": {"schema": "olm.package"}, "message": "beta-op is deprecated; use gamma-op"},
        ]},
    ]
    # The comment goes inside the first document: opm rejects a leading comment-only document
    # ("object '' is missing root schema field"), as its golden outputs show.
    out = ""
    for i, d in enumerate(docs):
        out += "---\n" + ("# beta-op catalog: YAML with document end markers\n" if i == 0 else "")
        out += yaml.safe_dump(d, sort_keys=False) + "...\n"
    return out


def main():
    if ROOT.exists():
        shutil.rmtree(ROOT)
    (ROOT / "alpha-op").mkdir(parents=True)
    (ROOT / "beta-op" / "objects").mkdir(parents=True)
    (ROOT / "shared-objects").mkdir(parents=True)
    (ROOT / "alpha-op" / "catalog.json").write_text(alpha())
    (ROOT / "beta-op" / "catalog.yaml").write_text(beta())
    (ROOT / "beta-op" / "objects" / "beta-op.v1.1.0.csv.yaml").write_text(
        yaml.safe_dump(csv("beta-op.v1.1.0", "1.1.0", "beta <two>", "beta-op.v1.0.0")))
    (ROOT / "shared-objects" / "gadget-crd.json").write_text(GADGET_CRD_JSON + "\n")
    (ROOT / "README.md").write_text("Not part of the catalog (see .indexignore).\n")
    (ROOT / ".indexignore").write_text("README.md\n/beta-op/objects\n/shared-objects\n")


if __name__ == "__main__":
    main()
