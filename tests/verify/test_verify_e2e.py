"""`trainimg verify` end to end on a real podman: the CPU cell image passes (or skips with a
reason), images broken on purpose fail the right checks, and no container is ever left."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main
from builder.engines import discover as connect_mod
from builder.engines.base import ImageNotFound
from builder.spec.labels import VERIFY_LABEL
from builder.verify.report import Report
from builder.verify.runner import verify
from builder.verify.target import load_workspace

from .conftest import BROKEN

pytestmark = [pytest.mark.engine, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
WS = load_workspace(str(REPO / "matrix.yaml"))


def run(engine: Any, image: str, **kwargs: Any) -> Report:
    return verify(engine, image, workspace=WS, **kwargs)


def failing(report: Report) -> set[str]:
    return {c.name for c in report.checks if c.outcome in ("failed", "error")}


def outcomes(report: Report) -> dict[str, str]:
    return {c.name: c.outcome for c in report.checks}


def test_cpu_image_passes_or_skips_with_reasons(verify_cpu_image: str, verify_engine: Any) -> None:
    report = run(verify_engine, verify_cpu_image)
    assert report.ok, report.text()
    assert len(report.checks) == 19 and report.matrix
    for check in report.checks:
        assert check.outcome in ("passed", "skipped"), report.text()
        if check.outcome == "skipped":
            assert len(check.message) > 20, check  # a stated reason
    got = outcomes(report)
    assert got["nvidia_smi"] == "skipped" and "no GPU on this host" in _msg(report, "nvidia_smi")
    assert got["sm_kernels_arch_flags"] == "skipped"
    assert _msg(report, "sm_kernels_arch_flags").startswith("not applicable: a CPU cell")
    assert got["sm_kernels_fatbin_scan"] == "skipped" and got["cpp_extension"] == "skipped"
    assert got["cuda_extension"] == "skipped"
    assert got["gcc_version"] == "passed"  # the runtime image carries gcc for torch.compile
    for name in (
        "os_release",
        "python_version",
        "torch_version",
        "cuda_version",
        "labels",
        "nvidia_environment",
        "default_user_not_root",
        "train_bf16",
        "train_fp8_fwd",
        "train_compile",
        "train_any_uid",
    ):
        assert got[name] == "passed", report.text()
    any_uid = " ".join(next(c for c in report.checks if c.name == "train_any_uid").details)
    assert "uid 12345 gid 0 (getpass: trainer, HOME /home/trainer)" in any_uid, any_uid
    assert "resumed to step" in any_uid
    if (REPO / "trainer" / "__init__.py").is_file():  # the version this tree bundles
        assert got["trainer_version"] == "passed", report.text()
    bf16 = " ".join(next(c for c in report.checks if c.name == "train_bf16").details)
    assert "on the CPU, not a GPU" in bf16
    fp8 = " ".join(next(c for c in report.checks if c.name == "train_fp8_fwd").details)
    assert " FP8 layers (input amax up to " in fp8, fp8  # FP8 really ran, not BF16 alone
    assert verify_engine.containers(VERIFY_LABEL) == []


def _msg(report: Report, name: str) -> str:
    return next(c.message for c in report.checks if c.name == name)


def test_wrong_torch_label(broken_images: dict[str, str], verify_engine: Any) -> None:
    report = run(verify_engine, broken_images["wrong-torch-label"], only="not train_")
    assert failing(report) == {"torch_version", "labels"}, report.text()
    assert "label io.trainimg.torch.version says 9.9.9" in _msg(report, "torch_version")
    assert not report.ok


def test_root_user(broken_images: dict[str, str], verify_engine: Any) -> None:
    report = run(verify_engine, broken_images["root-user"], only="not train_")
    assert failing(report) == {"default_user_not_root"}, report.text()
    assert "default user is root" in _msg(report, "default_user_not_root")


def test_an_image_for_uid_1000_only(broken_images: dict[str, str], verify_engine: Any) -> None:
    """The image layout before any uid could run it: OpenShift's arbitrary uid finds no user
    name (getpass falls through to the passwd database) and could not write /ckpt."""
    report = run(verify_engine, broken_images["uid-1000-only"], only="train_any_uid")
    assert failing(report) == {"train_any_uid"}, report.text()
    message = _msg(report, "train_any_uid")
    assert "as uid 12345:0, Python cannot name a user or write HOME" in message, message
    assert "getpwuid(): uid not found: 12345" in message, message


def test_crashing_trainer(broken_images: dict[str, str], verify_engine: Any) -> None:
    report = run(verify_engine, broken_images["crashing-trainer"])
    assert failing(report) == {
        "train_bf16",
        "train_fp8_fwd",
        "train_compile",
        "train_any_uid",
    }, report.text()
    assert "trainer crashed on purpose" in _msg(report, "train_bf16")


def test_cli_reports(
    verify_engine: Any,
    verify_cpu_image: str,
    broken_images: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(connect_mod, "engine_session", _session(verify_engine))
    out_json, out_xml = tmp_path / "r.json", tmp_path / "r.xml"
    rc = main(
        [
            "verify",
            "--matrix",
            str(REPO / "matrix.yaml"),
            verify_cpu_image,
            "--only",
            "labels or user or torch",
            "--json",
            str(out_json),
            "--junitxml",
            str(out_xml),
        ]
    )
    assert rc == 0, capsys.readouterr()
    data = json.loads(out_json.read_text())
    assert data["ok"] and [c["name"] for c in data["checks"]] == [
        "torch_version",
        "labels",
        "default_user_not_root",
    ]
    assert "<testsuite" in out_xml.read_text()
    assert "OK: 3 checks: 3 passed" in capsys.readouterr().out
    rc = main(
        [
            "verify",
            "--matrix",
            str(REPO / "matrix.yaml"),
            broken_images["root-user"],
            "--only",
            "user",
            "--json",
            "-",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 1 and json.loads(captured.out)["ok"] is False
    assert "FAIL  default_user_not_root" in captured.err
    assert main(["verify", "localhost/no-such-image:1"]) == 2
    assert "no-such-image" in capsys.readouterr().err


def _session(engine: Any) -> Any:
    """engine_session for the CLI: hands over the test session's engine and leaves it open."""

    @contextlib.contextmanager
    def session(preference: str | None, url: str | None = None) -> Iterator[Any]:
        yield engine

    return session


def test_no_container_left_after_20_runs(
    verify_cpu_image: str, broken_images: dict[str, str], verify_engine: Any
) -> None:
    """20 verify runs, passing, failing, interrupted and refused: afterwards the engine holds
    exactly the containers it held before."""
    before_all = verify_engine.containers()
    assert verify_engine.containers(VERIFY_LABEL) == []
    images = [verify_cpu_image, *(broken_images[name] for name in BROKEN)]
    results = []
    for i in range(20):
        image = images[i % len(images)]
        if i == 7:  # Ctrl-C in the middle of the suite
            signal.signal(signal.SIGALRM, _interrupt)
            signal.setitimer(signal.ITIMER_REAL, 1.5)
            try:
                with pytest.raises(KeyboardInterrupt):
                    run(verify_engine, image, only="not train and not labels")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
            results.append("interrupted")
        elif i == 13:  # an image that is not there: refused before any container starts
            with pytest.raises(ImageNotFound):
                run(verify_engine, "localhost/trainimg-verify-missing:none")
            results.append("missing")
        else:
            report = run(verify_engine, image, only="torch or user or labels or os_release")
            results.append("ok" if report.ok else "failed")
        assert verify_engine.containers(VERIFY_LABEL) == [], f"run {i} left a container"
    assert verify_engine.containers() == before_all
    assert results.count("failed") >= 8 and results.count("ok") >= 4, results


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def test_arches_of_an_image(
    verify_cpu_image: str,
    verify_engine: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reader runs inside the image: the CPU cell carries no CUDA device code at all - torch
    is the CPU build, and a CPU cell's build drops torchao's optional CUDA extensions (the sm_90a
    CUTLASS and sm_100 MXFP8 kernels it could never load: builder/wheel_groups.CPU_TRIM) - so
    for a GPU the verdict says there is none, exit 1, after reading every shared library."""
    monkeypatch.setattr(connect_mod, "engine_session", _session(verify_engine))
    assert main(["arches", verify_cpu_image, "--json", "--gpu", "h100"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["target_kind"] == "image" and data["errors"] == []
    assert data["libraries"] == [] and data["without_device_code"] >= 20
    assert [g["verdict"] for g in data["gpus"]] == ["no-device-code"]
    assert verify_engine.containers(VERIFY_LABEL) == []


def test_docker_backend(
    verify_cpu_image: str, broken_images: dict[str, str], verify_docker_engine: Any
) -> None:
    """The same checks through testinfra's docker:// backend (the docker CLI on the engine's
    Docker-compatible socket)."""
    report = run(verify_docker_engine, verify_cpu_image, only="not train_")
    assert report.engine == "docker" and report.ok, report.text()
    assert "/dev/nvidia0 does not exist" in _msg(report, "nvidia_smi")
    report = run(verify_docker_engine, broken_images["root-user"], only="user or torch")
    assert failing(report) == {"default_user_not_root"}, report.text()
    assert verify_docker_engine.containers(VERIFY_LABEL) == []
