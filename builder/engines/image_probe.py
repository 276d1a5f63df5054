"""Run a short Python program inside an image, with the image's own venv Python, and take the
one JSON line it prints: how extend's fingerprint and the SBOM's inventory read an image (one
short container, no network, removed afterwards; builder/engines/roles.ContainerRunner.run)."""

from __future__ import annotations

import json
from typing import Any

from builder.engines.base import RunSpec
from builder.engines.roles import ContainerRunner
from builder.errors import TrainimgError
from builder.spec.labels import VERIFY_LABEL
from builder.spec.layout import VENV_PYTHON


def run_probe(
    engine: ContainerRunner, image: str, source: str, *, what: str, user: str | None = None
) -> dict[str, Any]:
    """The JSON object `source` printed last in `image`; TrainimgError saying `what` failed."""
    spec = RunSpec(
        image=image,
        entrypoint=[VENV_PYTHON],
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
