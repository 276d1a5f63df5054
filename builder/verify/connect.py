"""The engine verify and arches talk to, found the way every trainimg command finds one
(builder/engines/discover.py: --url, CONTAINER_HOST, DOCKER_HOST, $TRAINIMG_PODMAN_ROOT, the
usual sockets)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from builder.engines.base import Engine
from builder.engines.discover import KINDS, discover


def add_engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=KINDS,
        default=os.environ.get("TRAINIMG_ENGINE") or None,
        help="podman (podman-py) or docker (docker SDK); default: $TRAINIMG_ENGINE or discovery",
    )
    p.add_argument(
        "--url", help="the engine's API URL (unix:///..., tcp://...); default: discovery"
    )


@contextmanager
def engine_session(preference: str | None, url: str | None = None) -> Iterator[Engine]:
    """An engine for one command; afterwards it is closed, and an isolated podman service that
    discovery started for this command ($TRAINIMG_PODMAN_ROOT) is stopped."""
    endpoint = discover(preference, url)
    try:
        engine = endpoint.connect()
        try:
            yield engine
        finally:
            engine.close()
    finally:
        endpoint.close()
