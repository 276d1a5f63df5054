"""What a long step shows while it runs: its output lines, and a heartbeat when it is silent.

debootstrap, apt, `pip download`, a build, a push and verify's checks each take minutes; a
user (or a CI log) that sees nothing for minutes cannot tell work from a hang. Every long step
speaks through one Progress: on a terminal a rich status line (the step, its seconds, its
measure, its last output line); anywhere else plain lines without timestamps or escapes (a CI
log stamps its own). While a step prints nothing, a heartbeat line comes at least every
HEARTBEAT_S seconds with whatever measure is cheap ("debootstrap bookworm: 40 s, 312 MB
written"). `quiet` shows nothing at all. Progress only ever writes to its stream (stderr): it
never changes what a command prints on stdout or the exit code it returns.

A leaf, like errors.py and atomic_file.py: build/, verify/ and the commands all use it, and it
imports nothing of trainimg.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from rich.console import Console
from rich.status import Status
from rich.text import Text

# The longest silence a running step is left in, in seconds: issue 33 asks for a line at least
# every 10 s; 8 leaves room for a slow tick on a loaded machine.
HEARTBEAT_S = 8.0
_TERMINAL_TICK_S = 1.0  # how often a terminal's status line shows the seconds again

Measure = Callable[[], str]


def size(n: int) -> str:
    """Bytes as a heartbeat says them: 12 MB, 1.19 GB."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


class RunningStep:
    """One running step: its name, when it started, when it last showed anything, and the
    measure a heartbeat reports. Made by Progress.begin (or Progress.step)."""

    def __init__(self, progress: Progress, name: str, measure: Measure | None) -> None:
        self._progress = progress
        self.name = name
        self.measure = measure
        self.started = time.monotonic()
        self.heard = self.started
        self.last_line = ""
        self.measured = ""  # the measure as the last heartbeat read it

    def elapsed(self) -> int:
        return int(time.monotonic() - self.started)

    def line(self, text: str) -> None:
        """One line of the step's own output (a tool's stdout): shown, and the step is heard."""
        self._progress.step_line(self, text)

    def touch(self, text: str = "") -> None:
        """The step showed `text` itself (e.g. the build's own console): heard, nothing said."""
        self._progress.step_line(self, text, say=False)

    def end(self, text: str | None = None) -> None:
        """The step is over; `text` (e.g. "done") is said with its seconds."""
        self._progress.finish(self, text)

    def heartbeat(self) -> str:
        """What a heartbeat says: its seconds and the measure, else that it still runs."""
        measured = ""
        if self.measure is not None:
            try:
                measured = self.measure()
            except OSError:  # a measure of files that moved under it: say the seconds only
                measured = ""
        self.measured = measured
        if measured:
            return f"{self.name}: {self.elapsed()} s, {measured}"
        return f"{self.name}: still running ({self.elapsed()} s)"


class Progress:
    """The one voice of every long step (module docstring). Thread-safe: parallel builds and a
    tool's reader thread speak through one Progress."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        quiet: bool = False,
        heartbeat_s: float = HEARTBEAT_S,
        terminal: bool | None = None,
    ) -> None:
        if heartbeat_s <= 0:
            raise ValueError(f"heartbeat_s must be positive, not {heartbeat_s}")
        self._stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.heartbeat_s = heartbeat_s
        self.terminal = _isatty(self._stream) if terminal is None else terminal
        self._lock = threading.RLock()
        self._steps: list[RunningStep] = []
        self._wake = threading.Event()
        self._ticker: threading.Thread | None = None
        self._status: Status | None = None
        self.console: Console | None = None
        if self.terminal and not quiet:
            self.console = Console(
                file=self._stream, force_terminal=True, highlight=False, soft_wrap=True
            )

    def say(self, text: str) -> None:
        """One line for the user (not tied to a step's silence)."""
        if self.quiet:
            return
        with self._lock:
            if self.console is not None:
                self.console.print(Text(text), highlight=False, soft_wrap=True)
            else:
                self._stream.write(text + "\n")
                self._stream.flush()

    def begin(self, name: str, measure: Measure | None = None) -> RunningStep:
        step = RunningStep(self, name, measure)
        if self.quiet:
            return step
        with self._lock:
            self._steps.append(step)
            if self._ticker is None:
                self._wake = threading.Event()  # its own: an old ticker still ending keeps its
                self._ticker = threading.Thread(
                    target=self._tick, args=(self._wake,), name="progress", daemon=True
                )
                self._ticker.start()
            self._show_status()
        return step

    @contextlib.contextmanager
    def step(
        self, name: str, measure: Measure | None = None, *, done: str | None = "done"
    ) -> Iterator[RunningStep]:
        """A step for the `with` block; `done` is said when the block ends without an error
        (an error speaks for itself)."""
        step = self.begin(name, measure)
        try:
            yield step
        except BaseException:
            step.end()
            raise
        step.end(done)

    def step_line(self, step: RunningStep, text: str, *, say: bool = True) -> None:
        if self.quiet:
            return
        with self._lock:
            step.heard = time.monotonic()
            step.last_line = text or step.last_line
            if self.console is not None:
                self._show_status()
            elif say:
                self.say(f"{step.name}: {text}")

    def finish(self, step: RunningStep, text: str | None) -> None:
        if self.quiet:
            return
        ticker = None
        with self._lock:
            if step in self._steps:
                self._steps.remove(step)
            if not self._steps:
                ticker, self._ticker = self._ticker, None
                self._wake.set()
                if self._status is not None:
                    self._status.stop()
                    self._status = None
            else:
                self._show_status()
            if text:
                self.say(f"{step.name}: {text} ({step.elapsed()} s)")
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=5)

    def _tick(self, wake: threading.Event) -> None:
        """The heartbeat thread: runs while any step does (until `wake` is set)."""
        while True:
            with self._lock:
                steps = list(self._steps)
                if not steps or wake.is_set():
                    return
            now = time.monotonic()
            due = [s for s in steps if now - s.heard >= self.heartbeat_s]
            for s in due:
                said = s.heartbeat()  # a measure may read the disk: outside the lock
                with self._lock:
                    if s in self._steps and not wake.is_set():
                        s.heard = time.monotonic()
                        if self.console is None:
                            self.say(said)
            with self._lock:
                if not wake.is_set():
                    self._show_status()
            wake.wait(self._next_wait(steps))

    def _next_wait(self, steps: list[RunningStep]) -> float:
        if self.console is not None:
            return _TERMINAL_TICK_S
        now = time.monotonic()
        return max(0.05, min(s.heard + self.heartbeat_s - now for s in steps))

    def _show_status(self) -> None:
        """The terminal's status line: every running step, its seconds and its last line."""
        if self.console is None or not self._steps:
            return
        parts = []
        for s in self._steps:
            seconds = f"{s.elapsed()} s" + (f", {s.measured}" if s.measured else "")
            tail = f" | {s.last_line}" if s.last_line else ""
            parts.append(f"{s.name} ({seconds}){tail}")
        text = Text("; ".join(parts), overflow="ellipsis", no_wrap=True)
        if self._status is None:
            self._status = Status(text, console=self.console)
            self._status.start()
        else:
            self._status.update(text)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream is no terminal
        return False


SILENT = Progress(quiet=True)
