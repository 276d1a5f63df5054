"""What an extension must not change, read from inside the parent's and the child's image, and
the comparison of the two (docs/build.md, "Extending a cell's image").

The fingerprint: torch's version with its local tag and CUDA release, the sha256 of its core
libraries (libtorch_cuda.so where present, libtorch_cpu.so), the SASS of every CUDA library the
parent has (the fatbin reader, builder/arches/fatbin.py, run inside), the nvidia-* wheels, the NCCL
and cuDNN versions torch reports, and the torchao operators that load. The child may add
libraries; every one of the parent's must be there, byte for byte the same kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from builder.arches.scan import scan_image
from builder.engines.image_probe import run_probe
from builder.engines.roles import ContainerRunner
from builder.spec.layout import VENV, VENV_PYTHON

# Runs with the image's own Python; prints one JSON line. Standard library and torch only.
FINGERPRINT_PROBE = r"""
import hashlib, json, os
import importlib.metadata as md
out = {}
names = {(d.metadata["Name"] or "").lower().replace("_", "-"): d.version
         for d in md.distributions()}
out["nvidia_wheels"] = sorted(f"{n}=={v}" for n, v in names.items() if n.startswith("nvidia-"))
import torch
out["torch"] = torch.__version__
out["torch_cuda"] = torch.version.cuda
libs = {}
lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
for lib in ("libtorch_cuda.so", "libtorch_cpu.so"):
    path = os.path.join(lib_dir, lib)
    if os.path.exists(path):
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        libs[lib] = h.hexdigest()
out["torch_libraries"] = libs
try:
    out["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None
except Exception as exc:
    out["nccl"] = f"unreadable: {type(exc).__name__}"
try:
    out["cudnn"] = torch.backends.cudnn.version()
except Exception as exc:
    out["cudnn"] = f"unreadable: {type(exc).__name__}"
try:
    import torchao
    out["torchao"] = torchao.__version__
    out["torchao_ops"] = sorted(
        n for n in torch._C._dispatch_get_all_op_names() if n.startswith("torchao::")
    )
except Exception as exc:
    out["torchao"] = f"unimportable: {type(exc).__name__}: {exc}"
    out["torchao_ops"] = []
print(json.dumps(out, sort_keys=True))
"""

FIELDS = ("torch", "torch_cuda", "torch_libraries", "nvidia_wheels", "nccl", "cudnn", "torchao",
          "torchao_ops")  # fmt: skip


@dataclass(frozen=True)
class Difference:
    field: str
    parent: object
    child: object

    def __str__(self) -> str:
        return f"{self.field}: the parent has {self.parent!r}, the extension {self.child!r}"


def read_fingerprint(engine: ContainerRunner, image: str) -> dict[str, Any]:
    """The fingerprint of `image` (two short containers: the probe, the fatbin reader)."""
    data = run_probe(engine, image, FINGERPRINT_PROBE, what="fingerprint")
    scan = scan_image(engine, image, [VENV], python=VENV_PYTHON)
    data["sass"] = {lib["path"]: list(lib["sass"]) for lib in scan["libraries"]}
    return data


def compare_fingerprints(parent: Mapping[str, Any], child: Mapping[str, Any]) -> list[Difference]:
    """Every way the child's stack differs from the parent's (empty: the same)."""
    out = [
        Difference(f, parent.get(f), child.get(f)) for f in FIELDS if parent.get(f) != child.get(f)
    ]
    child_sass = child.get("sass") or {}
    for path, sass in sorted((parent.get("sass") or {}).items()):
        if child_sass.get(path) != sass:
            out.append(Difference(f"SASS of {path}", sass, child_sass.get(path)))
    return out


def describe(fp: Mapping[str, Any]) -> str:
    libs = ", ".join(f"{k} {v[:12]}…" for k, v in sorted((fp.get("torch_libraries") or {}).items()))
    sass = sum(1 for v in (fp.get("sass") or {}).values() if v)
    return (
        f"torch {fp.get('torch')} (CUDA {fp.get('torch_cuda')}), {libs}; "
        f"{len(fp.get('nvidia_wheels') or [])} nvidia-* wheels, NCCL {fp.get('nccl')}, "
        f"cuDNN {fp.get('cudnn')}; torchao {fp.get('torchao')} with "
        f"{len(fp.get('torchao_ops') or [])} operators; {sass} libraries with SASS"
    )
