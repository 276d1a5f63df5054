"""Pull a base image through the engine before a build, with the registry's credentials and
the engine's TLS setting, and make sure what arrived is what a pinned reference names.

The build itself then never pulls: credentials stay out of build arguments and history, and a
missing tag, a refused password or a digest mismatch fails while planning (exit 2), naming
the registry and the cell, before anything is built or recorded.
"""

from __future__ import annotations

import os

from builder.engines.base import EngineError
from builder.engines.roles import RegistryTransfer
from builder.errors import TrainimgError
from builder.registry import auth, reference


class PullError(TrainimgError):
    pass


def pull_base(engine: RegistryTransfer, ref_text: str, cell: str) -> None:
    ref = reference.parse_reference(ref_text, what=f"cell {cell}: base")
    creds = auth.lookup(ref.registry, os.environ)
    try:
        engine.pull(str(ref), creds, tls_verify=not reference.is_insecure(ref.registry))
    except EngineError as exc:
        raise PullError(
            f"cell {cell}: could not pull base {ref} from registry {ref.registry}: {exc}"
        ) from None
    if ref.digest and not engine.image_exists(f"{ref.name}@{ref.digest}"):
        tagged = f"{ref.name}:{ref.tag}" if ref.tag else None
        got = (
            engine.inspect_image(tagged).digest if tagged and engine.image_exists(tagged) else None
        )
        raise PullError(
            f"cell {cell}: base {ref} arrived with digest {got or 'unknown'}, not {ref.digest}: "
            "the registry served different content; pin it again (`trainimg pin`)"
        )
