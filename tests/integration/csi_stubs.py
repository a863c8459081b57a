"""Python gRPC stubs for proto/csi.proto (and our own proto/rosetctl.proto), generated at test
time with grpc_tools.protoc."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace


def proto_path(name: str = "csi") -> Path:
    source = os.environ.get("ROSETCTL_SOURCE_DIR")
    root = Path(source) if source else Path(__file__).resolve().parents[2]
    return root / "proto" / f"{name}.proto"


def generate(out_dir: Path, name: str = "csi") -> SimpleNamespace:
    """Compiles proto/<name>.proto into out_dir and imports it: returns pb2 (messages) and grpc (stubs)."""
    proto = proto_path(name)
    if not proto.is_file():
        raise FileNotFoundError(f"{name}.proto not found at {proto} (set ROSETCTL_SOURCE_DIR)")
    done = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{proto.parent}",
         f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", str(proto)],
        capture_output=True, text=True, timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"grpc_tools.protoc failed on {proto}: {done.stderr}")
    sys.path.insert(0, str(out_dir))
    try:
        for module in (f"{name}_pb2", f"{name}_pb2_grpc"):
            sys.modules.pop(module, None)
        pb2 = importlib.import_module(f"{name}_pb2")
        grpc_module = importlib.import_module(f"{name}_pb2_grpc")
    finally:
        sys.path.remove(str(out_dir))
    return SimpleNamespace(pb2=pb2, grpc=grpc_module)
