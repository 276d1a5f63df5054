"""README.md's tour, and the command examples of docs/*.md, run as written.

Every shell block after README's two setup commands runs in page order through bash, from the
checkout root, in one shell session (what a command exports, `. .venv/bin/activate` and
`eval "$(trainimg env)"` included, carries to the next), as a user would paste them right after
scripts/demo.sh. "After the demo" is this test session's own state: its isolated store holds the
offline base and the default CPU image (the session builds them once; later sessions reuse
them), exported as $TRAINIMG_PODMAN_ROOT as `eval "$(trainimg env)"` would after the demo; the
checkout's .cache/wheelhouse is seeded from the session's wheelhouse when absent, as the demo
leaves it. Blocks marked `needs-gpu`/`needs-registry`/`needs-remote-host` must fail here with
their documented message (tests/docs/tour.py has the grammar).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.engines.local_podman import LocalPodman
from tests.conftest import REPO
from tests.docs.tour import Step, TourError, shown_in, steps

ENGINE_VARS = ("CONTAINER_HOST", "DOCKER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF")
SETUP = ["scripts/demo.sh", "scripts/test.sh"]
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
_SHELL_NOISE = ("PWD", "OLDPWD", "SHLVL", "_", "__TOUR_ENV")


class Session:
    """One shell session: each command runs in `bash -c` from the checkout root, and the
    environment it leaves is the next command's."""

    def __init__(self, env: dict[str, str], scratch: Path) -> None:
        self.env = env
        self.dump = scratch / "env"

    def run(self, command: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        self.dump.unlink(missing_ok=True)
        script = f"trap 'env -0 > \"$__TOUR_ENV\"' EXIT\nset -o pipefail\n{command}\n"
        proc = subprocess.run(
            ["bash", "-c", script],
            cwd=REPO,
            env={**self.env, "__TOUR_ENV": str(self.dump)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
        )
        if self.dump.exists():
            pairs = (e.split("=", 1) for e in self.dump.read_text().split("\0") if "=" in e)
            self.env = {k: v for k, v in pairs if k not in _SHELL_NOISE}
        return proc


def check(step: Step, proc: subprocess.CompletedProcess[str]) -> None:
    said = f"{step.where}: `{step.command}` (exit {proc.returncode}):\n{proc.stdout[-4000:]}"
    assert "Traceback (most recent call last)" not in proc.stdout, said
    if step.mark.kind in ("run", "exit"):
        assert proc.returncode == step.mark.status, said
        assert step.mark.text in proc.stdout, (
            f"{step.where}: {step.mark.text!r} not printed: {said}"
        )
        missing = shown_in(step.expected, proc.stdout)
        assert missing is None, (
            f"{step.where}: the page shows {missing!r}, the real output:\n{said}"
        )
    else:
        assert proc.returncode != 0, f"{step.where}: marked {step.mark.kind} but it ran: {said}"
        assert step.mark.text in proc.stdout, (
            f"{step.where}: marked {step.mark.kind}, documented message {step.mark.text!r}"
            f" not printed: {said}"
        )


def tour(page: str) -> list[Step]:
    blocks = steps(REPO / page, page)
    if page == "README.md":
        setup = [s.command.split("#")[0].strip() for s in blocks[0]]
        assert setup == SETUP, (
            f"README's first shell block should be the two setup commands: {setup}"
        )
        blocks = blocks[1:]
    return [s for block in blocks for s in block]


def test_pages_parse() -> None:
    """Every page's tour reads (marks known, skips with reasons), and README has one."""
    for page in PAGES:
        try:
            tour(page)
        except TourError as exc:
            pytest.fail(str(exc))
    assert len(tour("README.md")) >= 10


def _default_cell() -> tuple[str, str]:
    from builder.workspace import open_workspace

    ws = open_workspace(REPO / "matrix.yaml")
    cell = ws.matrix.project.default_cell
    return cell, f"{ws.matrix.project.repository}:{cell}"


def test_demo_prints_commands_the_tour_runs() -> None:
    """The demo's closing lines (CPU path) are commands README's tour runs as they are."""
    text = (REPO / "scripts" / "demo.sh").read_text()
    found = re.search(r"<<NEXT\n(.*?)\nNEXT\n", text, re.S)
    assert found, "scripts/demo.sh prints its next commands from a <<NEXT here-document"
    cell, image = _default_cell()
    values = {
        "$cli": "podman",
        "${run_args[*]}": "--network none",
        "$image": image,
        "$cell": cell,
        "\\$": "$",
    }
    commands = {s.command.split("  #")[0].strip() for s in tour("README.md")}
    printed = found.group(1).splitlines()[1:]  # the heading line is not a command
    assert printed[0].lstrip().startswith("cd "), printed
    for line in printed[1:]:
        for key, value in values.items():
            line = line.replace(key, value)
        assert line.strip() in commands, f"the demo prints {line.strip()!r}; README's tour lacks it"


@pytest.fixture(scope="session")
def after_demo(
    cpu_image: str, offline_base: str, wheelhouse: Path, local_podman: LocalPodman
) -> Iterator[dict[str, str]]:
    """The environment of a shell right after scripts/demo.sh (see the module's docstring);
    images/lock.json, which README's build command writes, is put back afterwards."""
    seeded = REPO / ".cache" / "wheelhouse"
    if not seeded.exists():
        shutil.copytree(wheelhouse, seeded, copy_function=os.link)
    lock = REPO / "images" / "lock.json"
    before = lock.read_bytes() if lock.exists() else None
    env = {k: v for k, v in os.environ.items() if k not in ENGINE_VARS}
    env["TRAINIMG_PODMAN_ROOT"] = str(local_podman.root)
    try:
        yield env
    finally:
        if before is None:
            lock.unlink(missing_ok=True)
        else:
            lock.write_bytes(before)


@pytest.mark.engine
@pytest.mark.slow
def _has_steps(page: str) -> bool:
    """Does the page have a shell block that can run here? (A page that does not parse is
    kept: test_pages_parse says why, and its tour fails.)"""
    try:
        return any(s.mark.kind != "skip" for s in tour(page))
    except (TourError, AssertionError):
        return True


@pytest.mark.parametrize("page", [p for p in PAGES if _has_steps(p)])
def test_tour(page: str, after_demo: dict[str, str], tmp_path: Path) -> None:
    todo = [s for s in tour(page) if s.mark.kind != "skip"]
    cell, image = _default_cell()
    session = Session(dict(after_demo), tmp_path)
    if page != "README.md":  # a docs page is read in the shell README's tour set up
        ready = session.run('. .venv/bin/activate && eval "$(trainimg env)"')
        assert ready.returncode == 0, ready.stdout
    for step in todo:
        command = re.sub(r"\bIMAGE\b", image, re.sub(r"\bCELL\b", cell, step.command))
        started = time.monotonic()
        proc = session.run(command)
        print(f"{time.monotonic() - started:6.1f}s  {step.where}  {command[:80]}")
        check(step, proc)
