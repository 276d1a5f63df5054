"""Run a long tool (debootstrap, apt-get in the new root, `pip download`) with its output
lines streamed through a progress step as they come, a deadline, and the last lines kept for
the error message of a failure.

capture_output would hold every line until the tool ends: minutes of silence. Here stdout and
stderr are one pipe read line by line by a thread; the step shows each line, and its heartbeat
covers the silences between them (builder/progress.py).
"""

from __future__ import annotations

import subprocess
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from builder.progress import RunningStep

KEPT_LINES = 15
_READER_GRACE_S = 5.0  # a grandchild that keeps the pipe open cannot hold us past this


@dataclass(frozen=True)
class Finished:
    """How the tool ended: its exit status and its last output lines."""

    argv: tuple[str, ...]
    returncode: int
    tail: tuple[str, ...]

    @property
    def tail_text(self) -> str:
        return "\n".join(self.tail)


def run_streamed(
    argv: Sequence[str],
    step: RunningStep,
    *,
    timeout: float,
    tail_lines: int = KEPT_LINES,
    env: Mapping[str, str] | None = None,
) -> Finished:
    """Run `argv` to its end, each output line through `step`. Past `timeout` seconds the tool
    is killed and subprocess.TimeoutExpired raised; Ctrl-C kills it too, and propagates."""
    tail: deque[str] = deque(maxlen=tail_lines)
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
        env=None if env is None else dict(env),
    )

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:  # universal newlines: a tool's \r redraws are lines too
            line = raw.rstrip()
            if line:
                tail.append(line)
                step.line(line)

    reader = threading.Thread(target=pump, name=f"output of {argv[0]}", daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except BaseException:  # the deadline, or Ctrl-C: the tool does not outlive us
        proc.kill()
        proc.wait()
        reader.join(_READER_GRACE_S)
        raise
    reader.join(_READER_GRACE_S)
    return Finished(tuple(argv), proc.returncode, tuple(tail))
