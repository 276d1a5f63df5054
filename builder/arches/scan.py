"""Scan an image's CUDA libraries by running the fatbin reader inside it.

The reader (builder/arches/fatbin.py, standard library only) is passed to the image's own Python
as a `-c` script, so it reads each library in place and only a small JSON comes back. Copying the
libraries out of a created container instead would move ~1.7 GB per torch image (libtorch_cuda.so
alone is 1 GB) through the engine's tar stream into a temporary file, to read ~200 KB of
headers; running inside costs one short container, no GPU and no network.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from builder.arches import fatbin
from builder.engines.base import RunSpec
from builder.engines.roles import ContainerRunner
from builder.errors import TrainimgError
from builder.spec.labels import VERIFY_LABEL
from builder.spec.layout import library_roots

# Where trainimg images keep CUDA libraries (the image layout, builder/spec/layout.py).
IMAGE_ROOTS = library_roots()


def reader_source() -> str:
    return Path(fatbin.__file__).read_text(encoding="utf-8")


def reader_argv(python: str, roots: Sequence[str]) -> list[str]:
    """The command line that runs the reader with `python` over `roots` (missing ones skipped)."""
    return [python, "-c", reader_source(), "--skip-missing", *roots]


def parse_output(stdout: str, where: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                break
            if isinstance(data, dict) and "libraries" in data:
                return data
    raise TrainimgError(f"{where}: the fatbin reader printed no result: {stdout.strip()[-500:]!r}")


def scan_image(
    engine: ContainerRunner,
    image: str,
    roots: Sequence[str] = IMAGE_ROOTS,
    *,
    python: str = "python3",
) -> dict[str, Any]:
    """ScanResult.to_dict() of the libraries under `roots` inside `image` (one short run)."""
    argv = reader_argv(python, roots)
    spec = RunSpec(
        image=image,
        entrypoint=argv[:1],
        command=argv[1:],
        network="none",
        labels={VERIFY_LABEL: "arches"},
    )
    result = engine.run(spec, timeout=600)
    if result.exit_code != 0:
        hint = ""
        if result.exit_code in (126, 127) or "executable file not found" in result.stderr:
            hint = f" (the image has no {python}: scan an exported filesystem directory instead)"
        raise TrainimgError(
            f"scanning {image} failed with exit code {result.exit_code}{hint}: "
            f"{result.stderr.strip()[-800:]}"
        )
    return parse_output(result.stdout, image)
