"""The engine verify and arches talk to, found the way every trainimg command finds one."""

from __future__ import annotations

import importlib
from typing import Any, cast

from builder.engines.base import Engine
from builder.errors import TrainimgError


def connect(preference: str | None) -> Engine:
    """An engine (`podman`, `docker`, or the first that answers when None)."""
    try:
        discover: Any = importlib.import_module("builder.engines.discover")
    except ImportError:
        raise TrainimgError(
            "no container engine support in this trainimg (builder/engines/discover.py missing)"
        ) from None
    return cast(Engine, discover.connect(preference))
