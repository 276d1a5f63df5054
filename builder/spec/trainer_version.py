"""The bundled trainer's `__version__`, read from trainer/__init__.py as text.

The builder never imports the trainer (it imports torch): the build labels the image with this
version and verify expects it inside. One reader, so both agree on what the version is.
"""

from __future__ import annotations

import re
from pathlib import Path

from builder.errors import TrainimgError

TRAINER_DIR = Path(__file__).resolve().parents[2] / "trainer"  # the checkout's trainer package
_VERSION = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*["']([^"'\n]+)["']""", re.M)
SAFE_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$")


class TrainerVersionError(TrainimgError):
    pass


def trainer_version(trainer_dir: Path = TRAINER_DIR) -> str:
    """`__version__` of the trainer package at `trainer_dir`; it becomes an image label, so it
    must be a plain version string."""
    init = trainer_dir / "__init__.py"
    try:
        text = init.read_text(encoding="utf-8")
    except OSError:
        raise TrainerVersionError(
            f"{init} is missing: the trainer package must be at {trainer_dir}"
        ) from None
    m = _VERSION.search(text)
    if not m:
        raise TrainerVersionError(
            f'{init} sets no `__version__ = "X.Y.Z"`: the image label needs it'
        )
    version = m.group(1)
    if not SAFE_VERSION.match(version):
        raise TrainerVersionError(f"{init}: __version__ {version!r} is not a plain version string")
    return version
