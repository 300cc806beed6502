"""Generates Python gRPC stubs for a registry.proto at test time (grpcio-tools' protoc), into a
temporary directory, imports them and removes the directory (the modules stay loaded; a
directory per run would pile up in /tmp). The proto is either the project's own
(bundle-tool/crates/olmkit-catalog-server/proto/registry.proto) or operator-registry's upstream file."""

import importlib
import importlib.resources
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc


def load(proto: Path):
    proto = Path(proto).resolve()
    out = Path(tempfile.mkdtemp(prefix="registry-stubs-"))
    try:
        wkt = str(importlib.resources.files("grpc_tools") / "_proto")
        rc = protoc.main([
            "protoc",
            f"-I{proto.parent}",
            f"-I{wkt}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            proto.name,
        ])
        if rc != 0:
            raise SystemExit(f"protoc failed ({rc}) on {proto}")
        sys.path.insert(0, str(out))
        try:
            stem = proto.stem
            pb2 = importlib.import_module(f"{stem}_pb2")
            grpc_mod = importlib.import_module(f"{stem}_pb2_grpc")
        finally:
            sys.path.remove(str(out))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return pb2, grpc_mod
