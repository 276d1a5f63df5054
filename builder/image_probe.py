"""Run a short Python program inside an image, with the image's own venv Python, and take the
one JSON line it prints: how extend's fingerprint and the SBOM's inventory read an image (one
short container, no network, removed afterwards; builder/engines/base.Engine.run)."""

from __future__ import annotations

import json
from typing import Any

from builder.engines.base import Engine, RunSpec
from builder.errors import TrainimgError
from builder.labels import VENV, VERIFY_LABEL


def run_probe(
    engine: Engine, image: str, source: str, *, what: str, user: str | None = None
) -> dict[str, Any]:
    """The JSON object `source` printed last in `image`; TrainimgError saying `what` failed."""
    spec = RunSpec(
        image=image,
        entrypoint=[f"{VENV}/bin/python"],
        command=["-c", source],
        network="none",
        user=user,
        labels={VERIFY_LABEL: what},
    )
    result = engine.run(spec, timeout=600)
    line = next((ln for ln in reversed(result.stdout.splitlines()) if ln.startswith("{")), "")
    if result.exit_code != 0 or not line:
        raise TrainimgError(
            f"reading the {what} of {image} failed (exit {result.exit_code}): "
            f"{result.stderr.strip()[-800:]}"
        )
    data: dict[str, Any] = json.loads(line)
    return data
