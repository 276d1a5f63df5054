"""`trainimg build` against the real podman service: the bad inputs a user meets (no base, a
missing wheel, a failing step, Ctrl-C) - the message, the exit code, and what is left behind
(nothing)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.build.wheelhouse import LOCK_NAME
from builder.engines.local_podman import LocalPodman
from tests.conftest import CACHE
from tests.helpers import CPU_CELL, REPO, MakeProject, RunCli, repo_refs

pytestmark = [pytest.mark.engine]

# Test templates: the smallest Containerfiles that reach the step under test quickly.
FAILING = """# Rendered by trainimg {{ version }} (test template)
FROM {{ base_ref }}
RUN echo 'about to fail' && exit 3
COPY trainer/ /opt/trainimg/trainer/
"""
SLOW = """# Rendered by trainimg {{ version }} (test template)
FROM {{ base_ref }}
RUN echo 'sleeping now' && sleep 5
COPY trainer/ /opt/trainimg/trainer/
"""
TINY = """# Rendered by trainimg {{ version }} (test template)
FROM {{ base_ref }}
COPY trainer/ /opt/trainimg/trainer/
"""
PREVIOUS = '{"cells": {}, "schema": 1}\n'


def common(matrix: Path, url: str, repo: str, trainer: Path, lock: Path) -> list[str]:
    return [
        "build",
        "--matrix",
        str(matrix),
        "--url",
        url,
        "--repository",
        repo,
        "--trainer",
        str(trainer),
        "--lock",
        str(lock),
        "--wheelhouse",  # the `wheelhouse` fixture's; a test may pass another after this
        str(CACHE / "wheelhouse"),
    ]


def test_missing_base_suggests_trainimg_base(
    make_project: MakeProject,
    run_cli: RunCli,
    podman_service: str,
    repo: str,
    trainer_dir: Path,
    tmp_path: Path,
    wheelhouse: Path,  # common() points --wheelhouse at it
) -> None:
    matrix = make_project(
        TINY,
        lambda t: t.replace("localhost/trainimg-base:bookworm", "localhost/trainimg-gone:bookworm"),
    )
    r = run_cli(*common(matrix, podman_service, repo, trainer_dir, tmp_path / "lock.json"))
    assert r.code == 2
    assert "localhost/trainimg-gone:bookworm" in r.err
    assert "`trainimg base`" in r.err
    assert not (tmp_path / "lock.json").exists()


def test_wheelhouse_without_a_needed_wheel_names_it(
    run_cli: RunCli,
    local_podman: LocalPodman,
    podman_service: str,
    offline_base: str,
    wheelhouse: Path,
    repo: str,
    trainer_dir: Path,
    tmp_path: Path,
) -> None:
    partial = tmp_path / "wh"
    partial.mkdir()
    for wheel in wheelhouse.glob("*.whl"):
        if not wheel.name.startswith("sympy-"):
            os.link(wheel, partial / wheel.name)
    args = common(REPO / "matrix.yaml", podman_service, repo, trainer_dir, tmp_path / "lock.json")
    r = run_cli(*args, "--wheelhouse", str(partial))
    assert r.code == 2
    assert "sympy==1.14.0 (needed by the cell's pins)" in r.err
    assert "trainimg wheelhouse" in r.err and CPU_CELL in r.err and str(partial) in r.err
    assert "Traceback" not in r.err
    # Another part of the closure missing, now with the lock present: still refused, named.
    shutil.copy(wheelhouse / LOCK_NAME, partial / LOCK_NAME)
    (sympy,) = wheelhouse.glob("sympy-*.whl")
    os.link(sympy, partial / sympy.name)
    (mpmath,) = partial.glob("mpmath-*.whl")
    mpmath.unlink()
    r = run_cli(*args, "--wheelhouse", str(partial))
    assert r.code == 2 and "mpmath" in r.err and "needed by" in r.err, r.err
    assert repo_refs(local_podman, repo) == []  # nothing half-built was tagged


@pytest.mark.usefixtures("wheelhouse")
def test_failing_run_step_reports_the_cell_and_its_log(
    make_project: MakeProject,
    run_cli: RunCli,
    podman_service: str,
    offline_base: str,
    local_podman: LocalPodman,
    repo: str,
    trainer_dir: Path,
    tmp_path: Path,
    wheelhouse: Path,  # common() points --wheelhouse at it
) -> None:
    matrix = make_project(FAILING)
    lock = tmp_path / "lock.json"
    lock.write_text(PREVIOUS)
    r = run_cli(*common(matrix, podman_service, repo, trainer_dir, lock))
    assert r.code == 1
    assert f"FAILED {CPU_CELL}" in " ".join(r.err.split())
    assert "about to fail" in r.err.split("FAILED", 1)[1]  # the tail of its log comes with it
    assert "Traceback" not in r.err
    assert lock.read_text() == PREVIOUS
    assert repo_refs(local_podman, repo) == []


@pytest.mark.usefixtures("wheelhouse")
def test_ctrl_c_leaves_no_tags_and_no_half_written_lock(
    make_project: MakeProject,
    podman_service: str,
    offline_base: str,
    local_podman: LocalPodman,
    repo: str,
    trainer_dir: Path,
    tmp_path: Path,
    wheelhouse: Path,  # common() points --wheelhouse at it
) -> None:
    matrix = make_project(SLOW)
    lock = tmp_path / "lock.json"
    lock.write_text(PREVIOUS)
    argv = [
        sys.executable,
        "-m",
        "builder.cli",
        *common(matrix, podman_service, repo, trainer_dir, lock),
    ]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
        # Ctrl-C reaches the CLI as from a terminal, even when pytest itself was started in the
        # background (SIGINT ignored, which a child would inherit)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
        for line in proc.stderr:
            seen.append(line)
            if "sleeping now" in line:
                break
            assert time.monotonic() < deadline, "".join(seen)
        else:
            pytest.fail("the build never reached its RUN step:\n" + "".join(seen))
        proc.send_signal(signal.SIGINT)
        _out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(seen) + rest
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err
    assert lock.read_text() == PREVIOUS
    assert sorted(p.name for p in lock.parent.iterdir() if p.name.startswith(".lock")) == []
    assert repo_refs(local_podman, repo) == []
    assert not list((matrix.parent / ".cache" / "build").glob(".context-*"))
    # The service runs the interrupted step to its end, then drops the build: still no tag.
    deadline = time.monotonic() + 120
    while any("working-container" in n for n in build_containers(local_podman)):
        assert time.monotonic() < deadline, "the interrupted build never ended"
        time.sleep(0.5)
    assert repo_refs(local_podman, repo) == []


def build_containers(local_podman: LocalPodman) -> list[str]:
    out = local_podman.podman("ps", "--all", "--external", "--format", "{{.Names}}")
    return out.split()


@pytest.mark.usefixtures("wheelhouse")
def test_build_and_skip_through_the_cli(
    make_project: MakeProject,
    run_cli: RunCli,
    podman_service: str,
    offline_base: str,
    local_podman: LocalPodman,
    repo: str,
    trainer_dir: Path,
    tmp_path: Path,
    wheelhouse: Path,  # common() points --wheelhouse at it
) -> None:
    matrix = make_project(TINY)
    lock = tmp_path / "lock.json"
    args = common(matrix, podman_service, repo, trainer_dir, lock)
    first = run_cli(*args, "--engine", "docker")
    assert first.code == 0, first.err
    cell_tag, image_id = first.out.split()
    assert cell_tag == f"{repo}:{CPU_CELL}" and image_id.startswith("sha256:")
    assert len(repo_refs(local_podman, repo)) == 2
    again = run_cli(*args)
    assert again.code == 0, again.err
    assert again.out.split() == [cell_tag, image_id]
    assert "up to date" in again.err
