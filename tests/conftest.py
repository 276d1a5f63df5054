"""Shared fixtures: an isolated podman (its own config, storage and API socket) and the offline
base image, made by the test session itself on a fresh machine and cached in .cache/ after."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.base_image import BaseSpec, make_offline_base
from builder.engines.local_podman import LocalPodman

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("TRAINIMG_TEST_CACHE", REPO / ".cache" / "test"))
BASE_TAG = "localhost/trainimg-base:bookworm"


def _need_podman() -> None:
    missing = [t for t in ("podman", "runc") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: run scripts/setup.sh")


@pytest.fixture(scope="session")
def local_podman() -> LocalPodman:
    """The isolated podman store; CONTAINERS_CONF/CONTAINERS_STORAGE_CONF are exported for the
    podman CLI that testinfra's podman:// backend runs."""
    _need_podman()
    local = LocalPodman(CACHE / "podman")
    local.configure()
    return local


@pytest.fixture(scope="session")
def podman_service(local_podman: LocalPodman) -> Iterator[str]:
    """The libpod + Docker-compatible API on a private unix socket; its unix:// URL."""
    url = local_podman.start_service()
    try:
        yield url
    finally:
        local_podman.stop_service()


@pytest.fixture(scope="session")
def offline_base(local_podman: LocalPodman) -> str:
    """localhost/trainimg-base:bookworm, made with debootstrap -> podman import if missing."""
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap not installed: run scripts/setup.sh")
    make_offline_base(BaseSpec(tag=BASE_TAG), CACHE / "base", local_podman.podman)
    return BASE_TAG
