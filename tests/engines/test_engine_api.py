"""Both SDK engines against a broken engine API: a clear EngineError, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.engines.base import BuildFailed, BuildRequest, EngineError, ImageNotFound, RunSpec
from builder.engines.docker import DockerEngine
from builder.engines.podman import PodmanEngine
from tests.engine_fixtures import FakeApi

ENGINES: dict[str, type[PodmanEngine] | type[DockerEngine]] = {
    "podman": PodmanEngine,
    "docker": DockerEngine,
}


@pytest.fixture(params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest, fake_api: FakeApi) -> PodmanEngine | DockerEngine:
    return ENGINES[str(request.param)](fake_api.url)


def test_api_error_during_build(
    engine: PodmanEngine | DockerEngine, fake_api: FakeApi, tmp_path: Path
) -> None:
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Containerfile").write_text("FROM scratch\n")
    with pytest.raises(EngineError) as err:
        engine.build(BuildRequest(tmp_path / "ctx"))
    assert not isinstance(err.value, BuildFailed)
    assert "no space left on device" in str(err.value)
    assert engine.base_url in str(err.value)
    assert any(r.startswith("POST") and "/build" in r for r in fake_api.requests)


def test_missing_image(engine: PodmanEngine | DockerEngine) -> None:
    assert not engine.image_exists("localhost/nothing:here")
    with pytest.raises(ImageNotFound, match="localhost/nothing:here"):
        engine.inspect_image("localhost/nothing:here")
    with pytest.raises(ImageNotFound, match=r"localhost/nothing:here.*trainimg build"):
        engine.run(RunSpec("localhost/nothing:here"))


def test_version(engine: PodmanEngine | DockerEngine) -> None:
    assert engine.version() == "fake-1.0"
