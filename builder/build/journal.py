"""The names (tags) applied for cells not yet done, so a failure or Ctrl-C can take them back.

Tagging and the lock record's write hold Ctrl-C until they are finished, so no name is left
half-applied; after Ctrl-C the journal refuses further names (`Cancelled`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from builder.engines.base import EngineError
from builder.engines.roles import ImageStore


class Cancelled(BaseException):
    """Raised inside a worker when the user pressed Ctrl-C."""


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C until the block is done (main thread only; others never receive it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        got.append(signum)

    old = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


class Journal:
    """Names applied for cells that are not done yet, so they can be taken back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[str, str | None]]] = {}
        self.cancelled = threading.Event()

    def tag(self, engine: ImageStore, cell: str, image_id: str, ref: str) -> None:
        with self._lock, sigint_deferred():
            if self.cancelled.is_set():
                raise Cancelled
            previous = engine.inspect_image(ref).id if engine.image_exists(ref) else None
            if previous == image_id:
                return
            self._pending.setdefault(cell, []).append((ref, previous))
            engine.tag(image_id, ref)

    def commit(self, cell: str, write: Callable[[], None]) -> None:
        with self._lock, sigint_deferred():
            if self.cancelled.is_set():
                raise Cancelled
            write()
            self._pending.pop(cell, None)

    def rollback(self, engine: ImageStore, cell: str | None = None) -> list[str]:
        """Undo the names of one cell (a failure) or of every pending cell (Ctrl-C)."""
        undone = []
        with self._lock, sigint_deferred():
            if cell is None:
                self.cancelled.set()
            cells = list(self._pending) if cell is None else [cell]
            for name in cells:
                for ref, previous in reversed(self._pending.pop(name, [])):
                    with contextlib.suppress(EngineError):
                        if previous is not None:
                            engine.tag(previous, ref)
                        else:
                            engine.remove_image(ref)
                    undone.append(ref)
        return undone
