"""What the verify checks share: the failure that names what to do, the image's labels, whether
the cell is a CUDA one, and the `detail` callback a passing check describes itself with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import pytest

Detail = Callable[[str], None]


def fail(message: str) -> NoReturn:
    pytest.fail(message, pytrace=False)


def labels(ctx: dict[str, Any]) -> dict[str, str]:
    return dict(ctx["image"]["labels"])


def is_cuda(expect: dict[str, Any]) -> bool:
    return expect.get("accelerator") == "cuda"
