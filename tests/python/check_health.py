#!/usr/bin/env python3
"""Checks a catalog server's grpc.health.v1 answers with grpcio-health-checking (an independent
client), the way kubelet's gRPC probe and grpc_health_probe ask.

  --expect loading-then-serving  the first answers are NOT_SERVING (and registry RPCs are
                                 UNAVAILABLE), then SERVING within --timeout seconds; a Watch
                                 stream opened while loading sees the flip
  --expect serving               SERVING for "" and api.Registry
  --expect never-serving         NOT_SERVING for --for seconds, RPCs UNAVAILABLE and, with
                                 --reason, the UNAVAILABLE message contains that text
"""

import argparse
import sys
import threading
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, str(Path(__file__).parent))
import registry_stubs  # noqa: E402

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
NAMES = {v: k for k, v in health_pb2.HealthCheckResponse.ServingStatus.items()}


def fail(msg):
    print(f"FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def status(stub, service):
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def wait_connect(channel, timeout):
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        fail(f"could not connect within {timeout}s")


def registry_call(addr, proto):
    pb, pbg = registry_stubs.load(proto)
    stub = pbg.RegistryStub(grpc.insecure_channel(addr))
    try:
        list(stub.ListPackages(pb.ListPackageRequest(), timeout=5))
        return None, None
    except grpc.RpcError as e:
        return e.code(), e.details()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--expect", required=True,
                    choices=["loading-then-serving", "serving", "never-serving"])
    ap.add_argument("--proto", help="registry.proto, to also check registry RPCs")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--for", dest="duration", type=float, default=3)
    ap.add_argument("--reason", help="text the UNAVAILABLE message must contain")
    a = ap.parse_args()

    channel = grpc.insecure_channel(a.addr)
    wait_connect(channel, a.timeout)
    stub = health_pb2_grpc.HealthStub(channel)

    # An unknown service is NOT_FOUND, as the gRPC health protocol says.
    try:
        status(stub, "no.such.Service")
        fail("Check(no.such.Service) should fail with NOT_FOUND")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.NOT_FOUND:
            fail(f"Check(no.such.Service): {e.code()}")

    if a.expect == "serving":
        for svc in ("", "api.Registry"):
            s = status(stub, svc)
            if s != SERVING:
                fail(f"Check({svc!r}) = {NAMES[s]}, want SERVING")
        print("OK: SERVING")
        return

    first = {svc: status(stub, svc) for svc in ("", "api.Registry")}
    for svc, s in first.items():
        if s != NOT_SERVING:
            fail(f"first Check({svc!r}) = {NAMES[s]}, want NOT_SERVING")
    if a.proto:
        code, details = registry_call(a.addr, a.proto)
        if code != grpc.StatusCode.UNAVAILABLE:
            fail(f"ListPackages before the catalog is loaded: {code}, want UNAVAILABLE")
        if a.reason and a.reason not in (details or ""):
            fail(f"UNAVAILABLE message {details!r} does not mention {a.reason!r}")

    if a.expect == "never-serving":
        end = time.time() + a.duration
        while time.time() < end:
            s = status(stub, "")
            if s != NOT_SERVING:
                fail(f"Check('') became {NAMES[s]}; the catalog is broken and must not be served")
            time.sleep(0.2)
        if a.proto:
            code, details = registry_call(a.addr, a.proto)
            if code != grpc.StatusCode.UNAVAILABLE or (a.reason and a.reason not in (details or "")):
                fail(f"ListPackages on a broken catalog: {code} {details!r}")
        print(f"OK: NOT_SERVING for {a.duration}s")
        return

    # loading-then-serving: a Watch opened now must report NOT_SERVING then SERVING.
    seen = []

    def watch():
        try:
            for r in stub.Watch(health_pb2.HealthCheckRequest(service="api.Registry"), timeout=a.timeout):
                seen.append(r.status)
                if r.status == SERVING:
                    return
        except grpc.RpcError:
            pass

    t = threading.Thread(target=watch)
    t.start()
    start = time.time()
    while status(stub, "") != SERVING:
        if time.time() - start > a.timeout:
            fail(f"not SERVING after {a.timeout}s")
        time.sleep(0.1)
    if status(stub, "api.Registry") != SERVING:
        fail("'' is SERVING but api.Registry is not")
    t.join(timeout=10)
    if not seen or seen[0] != NOT_SERVING or seen[-1] != SERVING:
        fail(f"Watch(api.Registry) saw {[NAMES[s] for s in seen]}, want NOT_SERVING ... SERVING")
    if a.proto:
        code, _ = registry_call(a.addr, a.proto)
        if code is not None:
            fail(f"ListPackages after SERVING failed: {code}")
    print(f"OK: NOT_SERVING then SERVING after {time.time() - start:.1f}s; watch saw "
          f"{[NAMES[s] for s in seen]}")


if __name__ == "__main__":
    main()
