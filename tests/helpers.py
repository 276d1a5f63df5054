"""Constants and small helpers shared by the build tests."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from builder.build.builder import Ui
from builder.engines.local_podman import LocalPodman

REPO = Path(__file__).resolve().parents[1]
CPU_CELL = "debian12-cpu-py3.11-torch2.13.0-runtime"
# buildah ("[2/3] STEP 3/9: ..." in multi-stage builds) | Docker's classic builder ("Step 3/9 : ")
_STEP = re.compile(r"^(?:\[\d+/\d+\] )?(?:STEP|Step) \d+/\d+ ?: (.*)$")
CACHE_MARKER = re.compile(r"^(?:-->| --->) Using cache")


class RecordingUi(Ui):
    """Keeps what the builder shows, for assertions."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.events: list[str] = []

    def line(self, cell: str, text: str) -> None:
        self.lines.append(text)

    def event(self, cell: str, text: str) -> None:
        self.events.append(text)


def steps_and_cache(lines: list[str]) -> list[tuple[str, bool]]:
    """(instruction, taken from the layer cache) for every STEP of a build log."""
    steps: list[tuple[str, bool]] = []
    for line in lines:
        m = _STEP.match(line)
        if m:
            steps.append((m.group(1), False))
        elif CACHE_MARKER.match(line) and steps:
            steps[-1] = (steps[-1][0], True)
    return steps


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


RunCli = Callable[..., CliResult]
MakeProject = Callable[..., Path]


def repo_refs(local_podman: LocalPodman, name: str) -> list[str]:
    """Every `repo:tag` of image repository `name` in the test store."""
    out = local_podman.podman(
        "images", "--filter", f"reference={name}", "--format", "{{.Repository}}:{{.Tag}}"
    )
    return sorted(out.split())
