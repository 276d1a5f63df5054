"""verify end to end: inspect the image, start it, run the suite against it, remove it."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from builder.arches.scan import IMAGE_ROOTS
from builder.build import lock as lockfile
from builder.engines.roles import EngineConnection, InspectAndRun
from builder.errors import TrainimgError
from builder.judgement.registry import Registered, registered
from builder.progress import SILENT, Progress
from builder.spec.labels import CELL_LABEL
from builder.verify import expect as expectations
from builder.verify import host_compat, suite
from builder.verify.lifecycle import plan_gpus, running_container
from builder.verify.live import CheckLines
from builder.verify.report import CheckResult, Collector, Report
from builder.verify.suite import (  # noqa: F401 - registers the verify checks, in run order
    test_1_versions,
    test_2_gpu_code,
    test_3_training,
    test_4_extensions,
    test_5_configuration,
)
from builder.verify.target import find_cell
from builder.workspace import Workspace

SUITE_DIR = Path(suite.__file__).resolve().parent
DEFAULT_STEPS = 12


def suite_checks() -> tuple[Registered, ...]:
    """The checks, in the order they run: the suite's tests, each registered once as a verify
    check with a one-line summary (--help lists them; tests/verify holds docs/verify.md to them)."""
    return registered("verify")


def pytest_args(context_file: Path, junitxml: str | None, only: str | None = None) -> list[str]:
    """The suite runs isolated from any project configuration (no ini, no outer conftest)."""
    args = [
        str(SUITE_DIR),
        "-c",
        os.devnull,
        "--rootdir",
        str(SUITE_DIR),
        "--confcutdir",
        str(SUITE_DIR),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:terminal",
        "-o",
        "junit_suite_name=trainimg-verify",
        "-o",
        "junit_family=xunit2",
        "--trainimg-context",
        str(context_file),
    ]
    if junitxml:
        args += ["--junitxml", junitxml]
    if only:
        args += ["-k", only]
    return args


def run_suite(
    ctx: dict[str, Any],
    junitxml: str | None = None,
    only: str | None = None,
    progress: Progress = SILENT,
) -> tuple[int, list[CheckResult]]:
    collector = Collector()
    lines = CheckLines(collector, progress)
    with tempfile.TemporaryDirectory(prefix="trainimg-verify-") as tmp:
        context_file = Path(tmp) / "context.json"
        context_file.write_text(json.dumps(ctx), encoding="utf-8")
        code = pytest.main(pytest_args(context_file, junitxml, only), plugins=[collector, lines])
    if code == pytest.ExitCode.INTERRUPTED and not collector.keyboard_interrupt:
        # a collection error (reported as the "collect" check's error), not a Ctrl-C
        code = pytest.ExitCode.TESTS_FAILED
    return int(code), collector.results()


@contextlib.contextmanager
def cli_environment(engine: EngineConnection) -> Iterator[None]:
    """testinfra's docker:// backend runs the docker CLI: point it at the engine's socket.
    (podman:// runs the podman CLI, which follows CONTAINERS_CONF like the engine does.)"""
    old = os.environ.get("DOCKER_HOST")
    if engine.name == "docker" and engine.base_url.startswith(("unix://", "tcp://")):
        os.environ["DOCKER_HOST"] = engine.base_url
    try:
        yield
    finally:
        if engine.name == "docker":
            if old is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = old


def supply_context(
    image_id: str,
    workspace: Workspace | None,
    lock_path: Path | None = None,
    sbom_path: Path | None = None,
) -> dict[str, Any]:
    """What the supply_chain check compares: the lock record naming `image_id` (and an SBOM)."""
    if lock_path is None and workspace is not None:
        lock_path = workspace.root / lockfile.DEFAULT_PATH
    sbom = json.loads(sbom_path.read_text(encoding="utf-8")) if sbom_path else None
    if lock_path is None or not lock_path.is_file():
        return {"record": None, "sbom": sbom, "reason": "no lock file (images/lock.json) here"}
    found = [r for r in lockfile.read(lock_path).values() if r.image_id == image_id]
    if not found:
        reason = f"no record of {lock_path} names image {image_id[:19]} (built elsewhere?)"
        return {"record": None, "sbom": sbom, "reason": reason}
    return {"record": found[0].to_json(), "sbom": sbom, "lock": str(lock_path)}


def verify(
    engine: InspectAndRun,
    image: str,
    *,
    workspace: Workspace | None,
    gpus: str = "auto",
    steps: int = DEFAULT_STEPS,
    junitxml: str | None = None,
    roots: Sequence[str] = IMAGE_ROOTS,
    only: str | None = None,
    supply: dict[str, Any] | None = None,
    progress: Progress = SILENT,
) -> Report:
    """Run every check against `image`; raises KeyboardInterrupt after cleanup on Ctrl-C."""
    info = engine.inspect_image(image)
    cell = find_cell(workspace, info.labels.get(CELL_LABEL, ""))
    if cell is not None and workspace is not None:
        expect = expectations.from_cell(cell, workspace.matrix.project)
    else:
        expect = expectations.from_labels(dict(info.labels))
    plan = plan_gpus(engine.name, gpus)
    gpu: dict[str, Any] = {"attached": plan.attach, "reason": plan.reason}
    with running_container(engine, image, gpus=plan.attach) as name, cli_environment(engine):
        ctx = {
            "host": f"{engine.name}://{name}",
            "engine": engine.name,
            "container": name,
            "image": {
                "ref": image,
                "id": info.id,
                "labels": dict(info.labels),
                "env": dict(info.env),
                "user": info.user,
                "entrypoint": list(info.entrypoint),
            },
            "gpu": gpu,
            "host_driver": host_compat.read_this_host() if plan.attach else {},
            "expect": expect,
            "train": {"steps": steps},
            "scan_roots": list(roots),
            "supply": supply_context(info.id, workspace) if supply is None else supply,
        }
        code, checks = run_suite(ctx, junitxml, only, progress)
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        raise TrainimgError(f"no check matches --only {only!r}: see `trainimg verify --help`")
    return Report(
        image=image,
        image_id=info.id,
        cell=expect.get("cell"),
        matrix=expect["source"] == "matrix",
        engine=engine.name,
        container=name,
        gpu=gpu,
        checks=checks,
        pytest_exit=code,
    )
