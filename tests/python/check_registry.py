#!/usr/bin/env python3
"""Queries a running catalog server with every api.Registry RPC and checks each answer against
expectations computed independently from the FBC files (fbc_expect.py).

Usage: check_registry.py --addr HOST:PORT --proto registry.proto --catalog DIR [--no-reflection]
Exit code 0 when every check passes; 1 with the list of failures otherwise.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).parent))
import fbc_expect  # noqa: E402
import registry_stubs  # noqa: E402


class Checker:
    def __init__(self):
        self.failures = []
        self.checks = 0

    def eq(self, what, got, want):
        self.checks += 1
        if got != want:
            self.failures.append(f"{what}:\n    got:  {got!r}\n    want: {want!r}")

    def true(self, what, cond, detail=""):
        self.checks += 1
        if not cond:
            self.failures.append(f"{what} {detail}")


def bundle_dict(b):
    return {
        "csvName": b.csvName,
        "packageName": b.packageName,
        "channelName": b.channelName,
        "bundlePath": b.bundlePath,
        "version": b.version,
        "skipRange": b.skipRange,
        "replaces": b.replaces,
        "skips": list(b.skips),
        "providedApis": [{"group": g.group, "version": g.version, "kind": g.kind} for g in b.providedApis],
        "requiredApis": [{"group": g.group, "version": g.version, "kind": g.kind} for g in b.requiredApis],
        "dependencies": [(d.type, json.loads(d.value)) for d in b.dependencies],
        "properties": [(p.type, json.loads(p.value)) for p in b.properties],
        "deprecation": b.deprecation.message if b.HasField("deprecation") else None,
        "csvJson": b.csvJson,
        "objects": list(b.object),
    }


def compare_bundle(ck, what, got_msg, want):
    got = bundle_dict(got_msg)
    for key in ("csvName", "packageName", "channelName", "bundlePath", "version", "skipRange",
                "replaces", "skips", "providedApis", "requiredApis", "dependencies", "properties",
                "deprecation"):
        ck.eq(f"{what} {key}", got[key], want[key])
    # Property values are compact JSON (no spaces outside strings), as opm normalises them.
    for p in got_msg.properties:
        ck.true(f"{what} property {p.type} is compact JSON",
                p.value == json.dumps(json.loads(p.value), separators=(",", ":"), ensure_ascii=False),
                p.value[:80])
    if want["synthetic"]:
        try:
            csv = json.loads(got["csvJson"])
        except ValueError:
            csv = None
        ck.eq(f"{what} synthetic csvJson", csv, want["csvJson"])
        if want["objects"] is None:
            ck.eq(f"{what} objects (the synthetic CSV)", got["objects"], [got["csvJson"]])
        else:
            ck.eq(f"{what} objects", got["objects"], want["objects"])
    else:
        ck.eq(f"{what} csvJson", got["csvJson"], want["csvJson"])
        ck.eq(f"{what} objects", got["objects"], want["objects"])


def expect_code(ck, what, code, fn):
    ck.checks += 1
    try:
        r = fn()
        if hasattr(r, "__iter__") and not isinstance(r, (str, bytes)):
            list(r)
        ck.failures.append(f"{what}: expected {code.name}, got a success")
    except grpc.RpcError as e:
        if e.code() != code:
            ck.failures.append(f"{what}: expected {code.name}, got {e.code().name}: {e.details()}")


def wait_serving(channel, timeout):
    """Waits like a readiness probe: until grpc.health.v1 says SERVING."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.time() + timeout
    while True:
        try:
            if health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                    health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        if time.time() > deadline:
            raise SystemExit(f"FAILED: the server was not SERVING after {timeout}s")
        time.sleep(0.1)


def run(addr, proto, catalog, reflection=True):
    pb, pbg = registry_stubs.load(proto)
    exp = fbc_expect.Expected(catalog)
    ck = Checker()
    channel = grpc.insecure_channel(addr, options=[("grpc.max_receive_message_length", 64 << 20)])
    wait_serving(channel, 120)
    stub = pbg.RegistryStub(channel)

    # ListPackages
    names = [p.name for p in stub.ListPackages(pb.ListPackageRequest())]
    ck.eq("ListPackages", sorted(names), exp.package_names())
    ck.eq("ListPackages order", names, sorted(names))

    # GetPackage
    for pkg in exp.package_names():
        p = stub.GetPackage(pb.GetPackageRequest(name=pkg))
        ck.eq(f"GetPackage({pkg}).name", p.name, pkg)
        ck.eq(f"GetPackage({pkg}).defaultChannelName", p.defaultChannelName,
              exp.packages[pkg].get("defaultChannel", ""))
        ck.eq(f"GetPackage({pkg}).channels",
              [(c.name, c.csvName, c.deprecation.message if c.HasField("deprecation") else None)
               for c in p.channels],
              [(ch, exp.head(pkg, ch), exp.dep_ch.get((pkg, ch))) for ch in exp.channel_names(pkg)])
        ck.eq(f"GetPackage({pkg}).deprecation",
              p.deprecation.message if p.HasField("deprecation") else None, exp.dep_pkg.get(pkg))

    # GetBundle for every channel member; GetBundleForChannel for every channel
    for pkg, ch, e in exp.members():
        b = stub.GetBundle(pb.GetBundleRequest(pkgName=pkg, channelName=ch, csvName=e["name"]))
        compare_bundle(ck, f"GetBundle({pkg},{ch},{e['name']})", b, exp.bundle(pkg, ch, e["name"]))
    for pkg in exp.package_names():
        for ch in exp.channel_names(pkg):
            b = stub.GetBundleForChannel(pb.GetBundleInChannelRequest(pkgName=pkg, channelName=ch))
            compare_bundle(ck, f"GetBundleForChannel({pkg},{ch})", b,
                           exp.bundle(pkg, ch, exp.head(pkg, ch)))

    # ListBundles: every member once, ordered by (channel, package, name), edges kept,
    # payload only for bundles without an image.
    listed = list(stub.ListBundles(pb.ListBundlesRequest()))
    keys = [(b.channelName, b.packageName, b.csvName) for b in listed]
    ck.eq("ListBundles members", sorted(keys), sorted((ch, pkg, e["name"]) for pkg, ch, e in exp.members()))
    ck.eq("ListBundles order", keys, sorted(keys))
    for b in listed:
        if exp.entry(b.packageName, b.channelName, b.csvName) is None \
                or (b.packageName, b.csvName) not in exp.bundles:
            ck.true(f"ListBundles[{b.packageName},{b.channelName},{b.csvName}] exists in the catalog", False)
            continue
        compare_bundle(ck, f"ListBundles[{b.packageName},{b.channelName},{b.csvName}]", b,
                       exp.bundle(b.packageName, b.channelName, b.csvName, listed=True))

    # Replacement edges
    replaced = set()
    for _, _, e in exp.members():
        if e.get("replaces"):
            replaced.add(e["replaces"])
        replaced.update(e.get("skips") or [])
    for name in sorted(replaced):
        got = {(x.packageName, x.channelName, x.bundleName, x.replaces)
               for x in stub.GetChannelEntriesThatReplace(pb.GetAllReplacementsRequest(csvName=name))}
        ck.eq(f"GetChannelEntriesThatReplace({name})", got, exp.entries_that_replace(name))
    for pkg in exp.package_names():
        for ch in exp.channel_names(pkg):
            for e in exp.entries(pkg, ch):
                targets = ([e["replaces"]] if e.get("replaces") else []) + list(e.get("skips") or [])
                for t in targets:
                    b = stub.GetBundleThatReplaces(
                        pb.GetReplacementRequest(csvName=t, pkgName=pkg, channelName=ch))
                    be = exp.entry(pkg, ch, b.csvName)
                    ck.true(f"GetBundleThatReplaces({t},{pkg},{ch}) -> {b.csvName}",
                            be is not None and (be.get("replaces") == t or t in (be.get("skips") or [])))
                    ck.eq(f"GetBundleThatReplaces({t},{pkg},{ch}) trimmed", (b.replaces, list(b.skips)), ("", []))

    # Providers
    for g in exp.all_gvks():
        req = dict(group=g[0], version=g[1], kind=g[2])
        got = sorted((x.packageName, x.channelName, x.bundleName, x.replaces)
                     for x in stub.GetChannelEntriesThatProvide(pb.GetAllProvidersRequest(**req)))
        ck.eq(f"GetChannelEntriesThatProvide({g})", got, sorted(exp.entries_that_provide(g)))
        want_latest = sorted(exp.entries_that_provide(g, latest=True))
        if want_latest:
            got = sorted((x.packageName, x.channelName, x.bundleName, x.replaces)
                         for x in stub.GetLatestChannelEntriesThatProvide(pb.GetLatestProvidersRequest(**req)))
            ck.eq(f"GetLatestChannelEntriesThatProvide({g})", got, want_latest)
        else:
            expect_code(ck, f"GetLatestChannelEntriesThatProvide({g})", grpc.StatusCode.NOT_FOUND,
                        lambda: stub.GetLatestChannelEntriesThatProvide(pb.GetLatestProvidersRequest(**req)))
        want = exp.default_provider(g)
        if want:
            b = stub.GetDefaultBundleThatProvides(pb.GetDefaultProviderRequest(**req))
            compare_bundle(ck, f"GetDefaultBundleThatProvides({g})", b, exp.bundle(*want))
        else:
            expect_code(ck, f"GetDefaultBundleThatProvides({g})", grpc.StatusCode.NOT_FOUND,
                        lambda: stub.GetDefaultBundleThatProvides(pb.GetDefaultProviderRequest(**req)))

    # Bad requests: NOT_FOUND, never a crash
    nf = grpc.StatusCode.NOT_FOUND
    pkg0 = exp.package_names()[0]
    ch0 = exp.channel_names(pkg0)[0]
    expect_code(ck, "GetPackage(unknown)", nf, lambda: stub.GetPackage(pb.GetPackageRequest(name="no-such-package")))
    expect_code(ck, "GetPackage('')", nf, lambda: stub.GetPackage(pb.GetPackageRequest()))
    expect_code(ck, "GetBundle(unknown package)", nf, lambda: stub.GetBundle(
        pb.GetBundleRequest(pkgName="no-such-package", channelName=ch0, csvName="x")))
    expect_code(ck, "GetBundle(unknown channel)", nf, lambda: stub.GetBundle(
        pb.GetBundleRequest(pkgName=pkg0, channelName="no-such-channel", csvName="x")))
    expect_code(ck, "GetBundle(unknown bundle)", nf, lambda: stub.GetBundle(
        pb.GetBundleRequest(pkgName=pkg0, channelName=ch0, csvName="no-such-bundle")))
    expect_code(ck, "GetBundleForChannel(unknown channel)", nf, lambda: stub.GetBundleForChannel(
        pb.GetBundleInChannelRequest(pkgName=pkg0, channelName="no-such-channel")))
    expect_code(ck, "GetChannelEntriesThatReplace(unknown)", nf, lambda: stub.GetChannelEntriesThatReplace(
        pb.GetAllReplacementsRequest(csvName="no-such-bundle")))
    expect_code(ck, "GetBundleThatReplaces(unknown)", nf, lambda: stub.GetBundleThatReplaces(
        pb.GetReplacementRequest(csvName="no-such-bundle", pkgName=pkg0, channelName=ch0)))
    expect_code(ck, "GetChannelEntriesThatProvide(unknown)", nf, lambda: stub.GetChannelEntriesThatProvide(
        pb.GetAllProvidersRequest(group="no.such", version="v0", kind="Nothing")))
    expect_code(ck, "GetDefaultBundleThatProvides(unknown)", nf, lambda: stub.GetDefaultBundleThatProvides(
        pb.GetDefaultProviderRequest(group="no.such", version="v0", kind="Nothing")))

    # Experimental custom-schema listing (needs the acknowledgement header).
    if hasattr(pbg, "ExperimentalRegistryStub"):
        from google.protobuf.json_format import MessageToDict
        ex = pbg.ExperimentalRegistryStub(channel)
        ack = [("x-acknowledge-experimental", "true")]

        def norm(v):
            if isinstance(v, dict):
                return {k: norm(x) for k, x in v.items() if k != "__file__"}
            if isinstance(v, list):
                return [norm(x) for x in v]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            return v

        by_key = {}
        for o in exp.cat["others"]:
            by_key.setdefault((o["schema"], o.get("package", "")), []).append(norm(o))
        for (schema, pkg), want in sorted(by_key.items()):
            got = [MessageToDict(x) for x in ex.ExperimentalListPackageCustomSchemas(
                pb.ExperimentalListPackageCustomSchemasRequest(schema=schema, packageName=pkg), metadata=ack)]
            ck.eq(f"ExperimentalListPackageCustomSchemas({schema},{pkg})", [norm(g) for g in got], want)
            silent = list(ex.ExperimentalListPackageCustomSchemas(
                pb.ExperimentalListPackageCustomSchemasRequest(schema=schema, packageName=pkg)))
            ck.eq(f"ExperimentalListPackageCustomSchemas({schema},{pkg}) without the header", silent, [])
        expect_code(ck, "ExperimentalListPackageCustomSchemas(no schema)", grpc.StatusCode.INVALID_ARGUMENT,
                    lambda: ex.ExperimentalListPackageCustomSchemas(
                        pb.ExperimentalListPackageCustomSchemasRequest(packageName=pkg0), metadata=ack))

    if reflection:
        from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
        db = ProtoReflectionDescriptorDatabase(channel)
        services = set(db.get_services())
        for s in ("api.Registry", "grpc.health.v1.Health"):
            ck.true(f"reflection lists {s}", s in services, f"(got {sorted(services)})")
        fd = db.FindFileContainingSymbol("api.Registry")
        ck.true("reflection serves the api.Registry file", fd is not None and fd.package == "api")

    return ck, len(listed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--proto", required=True)
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--no-reflection", action="store_true")
    a = ap.parse_args()
    ck, n = run(a.addr, a.proto, a.catalog, reflection=not a.no_reflection)
    if ck.failures:
        print(f"FAILED: {len(ck.failures)} of {ck.checks} checks", file=sys.stderr)
        for f in ck.failures[:60]:
            print(" - " + f, file=sys.stderr)
        sys.exit(1)
    print(f"OK: {ck.checks} checks passed ({n} bundles listed) against {a.catalog}")


if __name__ == "__main__":
    main()
