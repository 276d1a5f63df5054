"""SIGTERM/SIGINT (`podman stop`, Ctrl-C) become a request to stop after the current step.

The handler only records the signal; the loop finishes the step it is in, saves a checkpoint
and exits with 128 + the signal number, without a traceback. The step in flight is not lost
and the checkpoint is never written from inside a signal handler.
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum

    def install(self) -> StopRequest:
        for sig in _SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
