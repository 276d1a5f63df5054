"""Fixtures of the `trainimg run` engine tests: the CPU image, the engine URLs per SDK, and
directories the image's user (uid 1000) may use."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.spec.labels import RUN_LABEL

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def run_image(request: pytest.FixtureRequest) -> str:
    """The CPU cell's image (tests/conftest.py `cpu_image`: built by trainimg's builder)."""
    return str(request.getfixturevalue("cpu_image"))


@pytest.fixture(scope="session")
def docker_api_url(podman_service: str) -> str:
    """Where the docker SDK path of `trainimg run` is tested: podman's Docker-compatible API
    (the build and registry tests also cover a real dockerd: tests/engine_fixtures.py)."""
    return podman_service


@pytest.fixture
def leftovers(podman_service: str) -> Iterator[object]:
    """Asserts that no container of `trainimg run` is left when the test ends."""
    from builder.engines.podman import PodmanEngine

    engine = PodmanEngine(podman_service)
    try:
        yield engine
        assert engine.containers(label=RUN_LABEL) == []
    finally:
        engine.close()


def shared_dir(path: Path, mode: int = 0o777) -> Path:
    """A directory uid 1000 (the image's user) may read and write, whoever runs the tests."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    return path


def losses(metrics: Path) -> dict[int, float]:
    """step -> loss of the trainer's `train` records in a metrics file (JSON lines)."""
    out = {}
    for line in metrics.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("event") == "train":
            out[int(rec["step"])] = float(rec["loss"])
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Done:
    code: int
    out: str
    err: str


def trainimg(
    url: str,
    *args: str,
    engine: str = "podman",
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> Done:
    """`trainimg ARGS` in a process of its own against the test session's service."""
    full = {**os.environ, "CONTAINER_HOST": url, **(env or {})}
    full.pop("TRAINIMG_PODMAN_ROOT", None)
    cmd = [sys.executable, "-m", "builder.cli", *args[:1], "--engine", engine, *args[1:]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full, cwd=REPO)
    return Done(p.returncode, p.stdout, p.stderr)


def spawn(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = {**os.environ, "CONTAINER_HOST": url, **(env or {})}
    full.pop("TRAINIMG_PODMAN_ROOT", None)
    return subprocess.Popen(
        [sys.executable, "-m", "builder.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        cwd=REPO,
    )
