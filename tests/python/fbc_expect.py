"""What operator-registry's gRPC API should answer for a File-Based Catalog, computed in
Python straight from the FBC files, independently of the Rust server under test.

The rules follow operator-registry (pkg/cache, pkg/api/model_to_api.go, alpha/declcfg):
- a channel head is the entry that no other entry of the channel replaces or skips;
- bundles served by single-bundle RPCs have replaces/skips cleared; ListBundles keeps them
  and clears csvJson/object when the bundle has an image;
- objects are the olm.bundle.object payloads (base64 data or ref), JSON kept verbatim, YAML
  converted; csvJson is the first object of kind ClusterServiceVersion, else a CSV built from
  olm.csv.metadata;
- dependencies: olm.gvk.required -> olm.gvk, olm.package.required -> olm.package with a
  "version" range; properties leave out olm.bundle.object and olm.csv.metadata.
"""

import base64
import fnmatch
import json
import os
from pathlib import Path

import yaml


class _StrTimestampLoader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings (YAML 1.2 has no timestamp type)."""


_StrTimestampLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for (tag, rx) in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _ignored(rel: str, patterns):
    for base, pat in patterns:
        if base and not rel.startswith(base + "/"):
            continue
        sub = rel[len(base) + 1:] if base else rel
        p = pat.rstrip("/")
        if p.startswith("/"):
            if fnmatch.fnmatch(sub, p[1:]):
                return True
        elif fnmatch.fnmatch(sub, p) or fnmatch.fnmatch(os.path.basename(sub), p):
            return True
        # a pattern naming a directory excludes what is under it
        parts = sub.split("/")
        for i in range(1, len(parts)):
            if fnmatch.fnmatch("/".join(parts[:i]), p.lstrip("/")) or fnmatch.fnmatch(parts[i - 1], p):
                return True
    return False


def catalog_files(root: Path):
    """Files of a catalog in lexical walk order, .indexignore honoured (simple gitignore)."""
    patterns = []
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        if ".indexignore" in filenames:
            for line in (Path(dirpath) / ".indexignore").read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    patterns.append((rel_dir, line))
        for name in sorted(filenames):
            if name == ".indexignore":
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not _ignored(rel, patterns):
                out.append((rel, Path(dirpath) / name))
    return out


def parse_stream(text: str):
    text = text.lstrip("\ufeff")
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        dec = json.JSONDecoder()
        i = 0
        docs = []
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                return docs
            v, i = dec.raw_decode(text, i)
            docs.append(v)
    return [d for d in yaml.load_all(text, Loader=_StrTimestampLoader) if d is not None]


def sort_keys(v):
    if isinstance(v, dict):
        return {k: sort_keys(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sort_keys(x) for x in v]
    return v


def load(root: Path):
    """The blobs of a catalog, by schema, each with the file it came from."""
    cat = {"packages": [], "channels": [], "bundles": [], "deprecations": [], "others": []}
    for rel, path in catalog_files(Path(root)):
        for doc in parse_stream(path.read_text(encoding="utf-8")):
            doc = dict(doc)
            doc["__file__"] = rel
            schema = doc.get("schema")
            key = {
                "olm.package": "packages",
                "olm.channel": "channels",
                "olm.bundle": "bundles",
                "olm.deprecations": "deprecations",
            }.get(schema, "others")
            cat[key].append(doc)
    return cat


def to_json_object(data: bytes) -> str:
    """k8s yaml.ToJSON: JSON is returned verbatim, YAML is converted (keys sorted)."""
    if data.lstrip()[:1] == b"{":
        return data.decode("utf-8")
    v = yaml.load(data.decode("utf-8"), Loader=_StrTimestampLoader)
    return go_json(sort_keys(v))


def go_json(v) -> str:
    """json.Marshal output: compact, non-ASCII kept, HTML characters escaped."""
    s = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, esc)
    return s


class Expected:
    def __init__(self, root):
        self.root = Path(root)
        self.cat = load(self.root)
        c = self.cat
        self.packages = {p["name"]: p for p in c["packages"]}
        self.channels = {}
        for ch in c["channels"]:
            self.channels.setdefault(ch["package"], {})[ch["name"]] = ch
        self.bundles = {(b["package"], b["name"]): b for b in c["bundles"]}
        self.dep_pkg, self.dep_ch, self.dep_bundle = {}, {}, {}
        for d in c["deprecations"]:
            for e in d.get("entries", []):
                ref = e["reference"]
                if ref["schema"] == "olm.package":
                    self.dep_pkg[d["package"]] = e["message"]
                elif ref["schema"] == "olm.channel":
                    self.dep_ch[(d["package"], ref["name"])] = e["message"]
                elif ref["schema"] == "olm.bundle":
                    self.dep_bundle[(d["package"], ref["name"])] = e["message"]

    # --- graph -----------------------------------------------------------------------------
    def package_names(self):
        return sorted(self.packages)

    def channel_names(self, pkg):
        return sorted(self.channels.get(pkg, {}))

    def entries(self, pkg, ch):
        return self.channels[pkg][ch].get("entries") or []

    def head(self, pkg, ch):
        entries = self.entries(pkg, ch)
        names = {e["name"] for e in entries}
        incoming = set()
        for e in entries:
            if e.get("replaces") in names:
                incoming.add(e["replaces"])
            for s in e.get("skips") or []:
                if s in names:
                    incoming.add(s)
        heads = [e["name"] for e in entries if e["name"] not in incoming]
        assert len(heads) == 1, f"{pkg}/{ch}: heads {heads}"
        return heads[0]

    def members(self):
        """(package, channel, entry) for every channel entry."""
        for pkg in self.package_names():
            for ch in self.channel_names(pkg):
                for e in self.entries(pkg, ch):
                    yield pkg, ch, e

    def entry(self, pkg, ch, name):
        if ch not in self.channels.get(pkg, {}):
            return None
        for e in self.entries(pkg, ch):
            if e["name"] == name:
                return e
        return None

    # --- bundles -----------------------------------------------------------------------------
    def props(self, b, typ):
        return [p["value"] for p in b.get("properties") or [] if p["type"] == typ]

    def objects(self, b):
        out = []
        for v in self.props(b, "olm.bundle.object"):
            if v.get("data"):
                data = base64.b64decode(v["data"])
            elif v.get("ref"):
                data = (self.root / os.path.dirname(b["__file__"]) / v["ref"]).read_bytes()
            else:
                data = b""
            out.append(to_json_object(data))
        return out

    def csv_json(self, b, objects):
        for o in objects:
            try:
                if json.loads(o).get("kind") == "ClusterServiceVersion":
                    return o
            except ValueError:
                continue
        return None

    def payload(self, b):
        """(csvJson, objects, synthetic) for a bundle blob; csvJson is a parsed dict for a
        synthetic CSV (compared semantically), else the exact string."""
        objects = self.objects(b)
        csv = self.csv_json(b, objects)
        if csv is not None:
            return csv, objects, False
        metas = self.props(b, "olm.csv.metadata")
        if len(metas) == 1:
            return self.synthetic_csv(b, metas[0]), (objects or None), True
        return "", objects, False

    def synthetic_csv(self, b, meta):
        pkg = self.packages[b["package"]]
        version = self.props(b, "olm.package")[0]["version"]
        spec = {
            "install": {"strategy": "deployment", "spec": {"deployments": None}},
            "version": version,
            "customresourcedefinitions": meta.get("crdDescriptions") or {},
            "apiservicedefinitions": meta.get("apiServiceDefinitions") or {},
            "displayName": meta.get("displayName", ""),
            "provider": meta.get("provider") or {},
            "cleanup": {"enabled": False},
        }
        for src, dst in [("maturity", "maturity"), ("nativeAPIs", "nativeAPIs"),
                         ("minKubeVersion", "minKubeVersion"), ("keywords", "keywords"),
                         ("maintainers", "maintainers"), ("links", "links"),
                         ("installModes", "installModes")]:
            if meta.get(src):
                spec[dst] = meta[src]
        desc = meta.get("description") or pkg.get("description") or ""
        if desc:
            spec["description"] = desc
        if pkg.get("icon"):
            spec["icon"] = [{"base64data": pkg["icon"]["base64data"], "mediatype": pkg["icon"]["mediatype"]}]
        if b.get("relatedImages"):
            spec["relatedImages"] = [{"name": r.get("name", ""), "image": r["image"]} for r in b["relatedImages"]]
        md = {"name": b["name"], "creationTimestamp": None}
        if meta.get("labels"):
            md["labels"] = meta["labels"]
        if meta.get("annotations"):
            md["annotations"] = meta["annotations"]
        return {"kind": "ClusterServiceVersion", "apiVersion": "operators.coreos.com/v1alpha1",
                "metadata": md, "spec": spec, "status": {"cleanup": {}}}

    def bundle(self, pkg, ch, name, listed=False):
        """The expected api.Bundle (as a dict) of a channel member."""
        b = self.bundles[(pkg, name)]
        e = self.entry(pkg, ch, name)
        gvk = lambda v: {"group": v.get("group", ""), "version": v.get("version", ""), "kind": v.get("kind", "")}
        deps = []
        for p in b.get("properties") or []:
            if p["type"] == "olm.gvk.required":
                deps.append(("olm.gvk", p["value"]))
            elif p["type"] == "olm.package.required":
                deps.append(("olm.package", {"packageName": p["value"]["packageName"],
                                             "version": p["value"]["versionRange"]}))
        image = b.get("image", "")
        if listed and image:
            csv, objects, synthetic = "", [], False
        else:
            csv, objects, synthetic = self.payload(b)
        return {
            "csvName": name,
            "packageName": pkg,
            "channelName": ch,
            "bundlePath": image,
            "version": self.props(b, "olm.package")[0]["version"],
            "skipRange": e.get("skipRange", ""),
            "replaces": e.get("replaces", "") if listed else "",
            "skips": list(e.get("skips") or []) if listed else [],
            "providedApis": [gvk(v) for v in self.props(b, "olm.gvk")],
            "requiredApis": [gvk(v) for v in self.props(b, "olm.gvk.required")],
            "dependencies": deps,
            "properties": [(p["type"], p["value"]) for p in b.get("properties") or []
                           if p["type"] not in ("olm.bundle.object", "olm.csv.metadata")],
            "deprecation": self.dep_bundle.get((pkg, name)),
            "csvJson": csv,
            "synthetic": synthetic,
            "objects": objects,
        }

    # --- edge queries --------------------------------------------------------------------------
    def entries_that_replace(self, name):
        out = set()
        for pkg, ch, e in self.members():
            if e.get("replaces") == name or name in (e.get("skips") or []):
                out.add((pkg, ch, e["name"], e.get("replaces", "")))
        return out

    def provides(self, pkg, name, g):
        return any(gvk.get("group") == g[0] and gvk.get("version") == g[1] and gvk.get("kind") == g[2]
                   for gvk in self.props(self.bundles[(pkg, name)], "olm.gvk"))

    def all_gvks(self):
        out = set()
        for b in self.bundles.values():
            for v in self.props(b, "olm.gvk"):
                out.add((v.get("group", ""), v.get("version", ""), v.get("kind", "")))
        return sorted(out)

    def entries_that_provide(self, g, latest=False):
        out = []
        for pkg, ch, e in self.members():
            if latest and e["name"] != self.head(pkg, ch):
                continue
            if not self.provides(pkg, e["name"], g):
                continue
            rep = e.get("replaces", "")
            out.append((pkg, ch, e["name"], rep))
            names = {x["name"] for x in self.entries(pkg, ch)}
            for s in e.get("skips") or []:
                if s != rep and (not latest or s in names):
                    out.append((pkg, ch, e["name"], s))
        return out

    def default_provider(self, g):
        for pkg in self.package_names():
            ch = self.packages[pkg].get("defaultChannel")
            if ch in self.channels.get(pkg, {}) and self.provides(pkg, self.head(pkg, ch), g):
                return pkg, ch, self.head(pkg, ch)
        return None
