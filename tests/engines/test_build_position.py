"""Where a build is, from its step lines in both builders' dialects (engines/build_log.py), and
the build's console lines that say it (commands/build_cmd.py's RichUi)."""

from __future__ import annotations

import io
import time

from rich.console import Console

from builder.commands.build_output import RichUi
from builder.engines.build_log import StagePosition
from builder.progress import Progress


def test_buildah_names_its_stages() -> None:
    where = StagePosition()
    assert str(where) == ""
    assert where.see("[1/3] STEP 1/6: FROM localhost/debian12-base:bookworm AS os")
    assert str(where) == "stage 1/3, step 1/6"
    assert not where.see("Copying blob sha256:1234")
    assert where.see("[3/3] STEP 4/9: COPY --from=venv /opt/venv /opt/venv")
    assert str(where) == "stage 3/3, step 4/9"


def test_buildah_without_stages_and_docker_count_from_lines() -> None:
    where = StagePosition()
    assert where.see("STEP 2/5: RUN true")
    assert str(where) == "stage 1, step 2/5"
    docker = StagePosition()
    for line in ("Step 1/20 : FROM base AS os", "Step 2/20 : RUN true", "Step 9/20 : FROM os"):
        assert docker.see(line)
    assert str(docker) == "stage 2, step 9/20"


def test_the_build_heartbeat_says_the_stage_and_step() -> None:
    out = io.StringIO()
    progress = Progress(out, heartbeat_s=0.15)
    console = Console(file=io.StringIO(), width=200)
    ui = RichUi(console, multi=False, quiet=False, progress=progress)
    ui.started("cpu")
    ui.line("cpu", "[2/3] STEP 5/9: RUN pip install --no-index -r /w/torch/requirements.txt")
    time.sleep(0.4)  # a silent RUN step
    ui.finished("cpu")
    beats = [line for line in out.getvalue().splitlines() if line.startswith("build cpu: ")]
    assert beats and all(b.endswith(", stage 2/3, step 5/9") for b in beats), out.getvalue()
    assert "STEP 5/9: RUN pip install" in console.file.getvalue()  # type: ignore[attr-defined]


def test_docker_step_lines_say_their_stage() -> None:
    console = Console(file=io.StringIO(), width=200)
    ui = RichUi(console, multi=False, quiet=True)
    ui.started("cpu")
    for line in ("Step 1/3 : FROM base AS os", "some output", "Step 3/3 : FROM os"):
        ui.line("cpu", line)
    ui.finished("cpu")
    shown = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert shown == ["  (stage 1) Step 1/3 : FROM base AS os", "  (stage 2) Step 3/3 : FROM os"]
