"""Endpoint discovery: the documented order, explicit endpoints never fall through, and a
clear error (exit 2) when nothing answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.engines.base import EngineUnavailable
from builder.engines.discover import (
    DOCKER_SOCKETS,
    ROOTFUL_PODMAN,
    Endpoint,
    EngineSearch,
    discover,
)
from tests.engine_fixtures import FakeApiFactory
from tests.helpers import REPO


def test_nothing_reachable_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(EngineUnavailable) as err:
        discover(
            EngineSearch(
                env={"XDG_RUNTIME_DIR": str(tmp_path)},
                docker_sockets=[tmp_path / "d.sock"],
                rootful_podman=tmp_path / "p.sock",
            )
        )
    message = str(err.value)
    assert err.value.exit_code == 2
    assert "podman system service" in message
    assert "TRAINIMG_PODMAN_ROOT" in message
    assert str(tmp_path / "p.sock") in message  # says where it looked


def test_explicit_endpoint_that_does_not_answer_is_named(tmp_path: Path) -> None:
    dead = f"unix://{tmp_path}/dead.sock"
    with pytest.raises(EngineUnavailable, match=r"CONTAINER_HOST"):
        discover(EngineSearch(env={"CONTAINER_HOST": dead}, rootful_podman=tmp_path / "p.sock"))
    with pytest.raises(EngineUnavailable, match=r"--url"):
        discover(EngineSearch(url=dead, env={}))


def test_order(tmp_path: Path, fake_apis: FakeApiFactory) -> None:
    rootful = fake_apis(tmp_path / "podman.sock")
    dock = fake_apis(tmp_path / "docker.sock")
    runtime = tmp_path / "xdg"
    (runtime / "podman").mkdir(parents=True)
    rootless = fake_apis(runtime / "podman" / "podman.sock")
    env = {"XDG_RUNTIME_DIR": str(runtime)}

    def find(
        engine: str | None = None,
        url: str | None = None,
        rootful: str = "podman.sock",
        **extra: str,
    ) -> Endpoint:
        return discover(
            EngineSearch(
                engine,
                url,
                env={**env, **extra},
                docker_sockets=[tmp_path / "docker.sock"],
                rootful_podman=tmp_path / rootful,
            )
        )

    ep = find()
    assert (ep.kind, ep.url) == ("podman", rootful.url)
    ep = find("docker")
    assert (ep.kind, ep.url) == ("docker", dock.url)
    # CONTAINER_HOST beats the sockets; with --engine docker the docker SDK uses it.
    ep = find("docker", CONTAINER_HOST=rootless.url)
    assert (ep.kind, ep.url, ep.source) == ("docker", rootless.url, "CONTAINER_HOST")
    # DOCKER_HOST means the docker SDK, and podman-py never takes it.
    ep = find(DOCKER_HOST=dock.url)
    assert (ep.kind, ep.source) == ("docker", "DOCKER_HOST")
    ep = find("podman", DOCKER_HOST=dock.url)
    assert (ep.kind, ep.url) == ("podman", rootful.url)
    # --url beats everything.
    ep = find(url=rootless.url, CONTAINER_HOST=dock.url)
    assert (ep.kind, ep.url, ep.source) == ("podman", rootless.url, "--url")
    # Without the rootful socket the rootless one is next; --engine podman never takes docker's.
    assert find(rootful="none.sock").url == rootless.url
    env.pop("XDG_RUNTIME_DIR")
    assert find(rootful="none.sock").kind == "docker"
    with pytest.raises(EngineUnavailable):
        find("podman", rootful="none.sock")


@pytest.mark.skipif(
    any(p.exists() for p in (ROOTFUL_PODMAN, *DOCKER_SOCKETS)),
    reason="this host has a system engine socket, so `no engine` cannot be shown here",
)
@pytest.mark.integration
def test_cli_without_engine_exits_2(tmp_path: Path) -> None:
    unset = ("CONTAINER_HOST", "DOCKER_HOST", "TRAINIMG_PODMAN_ROOT", "TRAINIMG_ENGINE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "builder.cli",
            "build",
            "--matrix",
            str(REPO / "matrix.yaml"),
            "--trainer",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "no container engine is reachable" in proc.stderr
    assert "podman system service" in proc.stderr
    assert "Traceback" not in proc.stderr
