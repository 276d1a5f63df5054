"""Every distribution an extension adds must import in the child: a smoke import of each of its
top-level modules, in a short container of the child as its unprivileged user.

`pip check` (in the child's build) proves the declared dependencies are there; it cannot see a
wheel built against another torch or CUDA (PyPI's torchvision 0.28.0 needs libtorch_cuda and
libcudart.so.13, which a CPU or CUDA 12.8 cell does not have). The top-level modules come from
the wheel's own RECORD (PEP 376/427): each first path component that is a package directory
or a module file, without the .dist-info and .data directories.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from builder.engines.image_probe import run_probe
from builder.engines.roles import ContainerRunner
from builder.errors import TrainimgError

# Runs with the image's own Python; prints one JSON line: {module: null | "Error: message"}.
_PROBE = r"""
import importlib, json
out = {}
for name in MODULES:
    try:
        importlib.import_module(name)
        out[name] = None
    except BaseException as exc:
        out[name] = f"{type(exc).__name__}: {exc}"[:400]
print(json.dumps({"imports": out}, sort_keys=True))
"""


def _module(first: str, is_dir: bool) -> str | None:
    if is_dir:
        ok = not first.endswith((".dist-info", ".data")) and first != "__pycache__"
        return first if ok and first.isidentifier() else None
    if first.endswith(".py") or first.endswith(".so"):
        stem = first.split(".", 1)[0]
        return stem if stem.isidentifier() else None
    return None


def top_level_modules(wheel: Path) -> list[str]:
    """The importable top-level names a wheel installs, from its RECORD."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
            lines = zf.read(record).decode("utf-8").splitlines()
    except (OSError, zipfile.BadZipFile, StopIteration, UnicodeDecodeError) as exc:
        raise TrainimgError(f"{wheel}: cannot read the wheel's RECORD ({exc})") from None
    out = set()
    for line in lines:
        path = line.split(",", 1)[0]
        first, sep, _rest = path.partition("/")
        name = _module(first, bool(sep))
        if name:
            out.add(name)
    return sorted(out)


def smoke_import(
    engine: ContainerRunner, image: str, modules: Mapping[str, Sequence[str]]
) -> list[str]:
    """Why each added distribution does not import in `image` (empty: all import)."""
    names = sorted({m for ms in modules.values() for m in ms})
    if not names:
        return []
    source = _PROBE.replace("MODULES", json.dumps(names))
    result: dict[str, str | None] = run_probe(engine, image, source, what="smoke import")["imports"]
    out = []
    for dist, ms in sorted(modules.items()):
        for m in ms:
            error = result.get(m, "not tried")
            if error:
                out.append(f"{dist}: `import {m}` fails in the child: {error}")
    return out
