"""The verify container's lifecycle: always removed (success, failure, Ctrl-C, SIGTERM), and
GPUs attached only where this host can give them."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from builder.engines.base import EngineError, RunSpec
from builder.spec.labels import VERIFY_LABEL
from builder.verify.lifecycle import plan_gpus, running_container
from tests.fake_engine import FakeEngine


def test_removed_after_success() -> None:
    engine = FakeEngine()
    with running_container(engine, "img", gpus=False, name="v1") as name:
        assert name == "v1" and engine.containers(VERIFY_LABEL) == ["v1"]
        spec = engine.running["v1"]
        assert spec.entrypoint == ["sleep"] and spec.command == ["infinity"]
        assert spec.network == "none" and spec.labels == {VERIFY_LABEL: "verify"} and not spec.gpus
    assert engine.containers() == []
    assert engine.calls[-1] == ("remove", "v1")


def test_removed_after_failure() -> None:
    engine = FakeEngine()
    with pytest.raises(RuntimeError, match="boom"), running_container(engine, "img", gpus=True):
        raise RuntimeError("boom")
    assert engine.containers() == []
    assert engine.calls[0][0] == "start" and engine.calls[-1][0] == "remove"


def test_removed_after_ctrl_c() -> None:
    engine = FakeEngine()
    with pytest.raises(KeyboardInterrupt), running_container(engine, "img", gpus=False):
        raise KeyboardInterrupt
    assert engine.containers() == []


def test_removed_after_sigterm_and_handler_restored() -> None:
    engine = FakeEngine()
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), running_container(engine, "img", gpus=False):
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("SIGTERM did not interrupt the with-block")
    assert engine.containers() == []
    assert signal.getsignal(signal.SIGTERM) is before


def test_removed_when_start_is_interrupted() -> None:
    """Ctrl-C while the engine starts the container: remove by the name chosen up front."""
    engine = FakeEngine()

    def interrupt(spec: RunSpec) -> None:
        raise KeyboardInterrupt

    engine.on_start = interrupt
    with pytest.raises(KeyboardInterrupt), running_container(engine, "img", gpus=False, name="v2"):
        pytest.fail("not reached")
    assert ("remove", "v2") in engine.calls and engine.containers() == []


def test_second_ctrl_c_during_removal_still_removes() -> None:
    engine = FakeEngine()
    real_remove = engine.remove_container
    hits = []

    def flaky(name: str) -> None:
        hits.append(name)
        if len(hits) == 1:
            raise KeyboardInterrupt
        real_remove(name)

    engine.remove_container = flaky  # type: ignore[method-assign]
    with running_container(engine, "img", gpus=False, name="v3"):
        pass
    assert hits == ["v3", "v3"] and engine.containers() == []


def test_removal_error_is_reported_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    engine = FakeEngine()

    def broken(name: str) -> None:
        raise EngineError("engine went away")

    engine.remove_container = broken  # type: ignore[method-assign]
    with running_container(engine, "img", gpus=False, name="v4"):
        pass
    assert "could not remove container v4: engine went away" in capsys.readouterr().err


def test_gpu_plan_podman_cdi(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    plan = plan_gpus("podman", cdi_dirs=[cdi, tmp_path / "absent"])
    assert not plan.attach and "no CDI spec for nvidia.com/gpu" in plan.reason
    assert "nvidia-ctk cdi generate" in plan.reason
    (cdi / "other.yaml").write_text("cdiVersion: 0.5.0\nkind: vendor.com/fpga\n")
    assert not plan_gpus("podman", cdi_dirs=[cdi]).attach
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    plan = plan_gpus("podman", cdi_dirs=[cdi])
    assert plan.attach and str(cdi / "nvidia.yaml") in plan.reason


def test_gpu_plan_docker_and_overrides(tmp_path: Path) -> None:
    dev = tmp_path / "nvidia0"
    assert not plan_gpus("docker", device=dev).attach
    dev.write_text("")
    assert plan_gpus("docker", device=dev).attach
    assert not plan_gpus("docker", "off", device=dev).attach
    assert plan_gpus("podman", "on", cdi_dirs=[]).attach
    # run's words, one meaning on both commands; on/off kept as the old spellings
    assert plan_gpus("podman", "all", cdi_dirs=[]).attach
    assert not plan_gpus("docker", "none", device=dev).attach
    assert plan_gpus("docker", "none", device=dev).reason == "GPUs not attached (--gpus none)"
