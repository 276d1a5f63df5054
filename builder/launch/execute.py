"""Run a ContainerRun through the engine (builder/engines: podman-py or the docker SDK): create,
start, stream its output, wait, remove - and make sure it never trains on unsupervised.

A training run needs more than ContainerRunner.run: its output as it comes, the trainer's exit code,
Ctrl-C, SIGTERM or a hang-up (SIGHUP) passed on to the trainer as a stop (it checkpoints and
exits 130/143), and the container gone afterwards. Whatever happens to this process - an
exception, a signal - the `finally` removes the container; for what no `finally` survives
(SIGKILL, the OOM killer) a watchdog process (supervise.py) stops and removes it.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import IO

from builder.engines.base import ContainerRun, EngineError
from builder.engines.roles import TrainingRunner
from builder.launch import supervise

Write = Callable[[bytes], None]
# what each signal to `trainimg run` becomes for the container: a hang-up (ssh gone) is a stop
FORWARDED = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGTERM"}


@contextlib.contextmanager
def _forward_signals(send: Callable[[str], None]) -> Iterator[None]:
    """SIGINT/SIGTERM/SIGHUP to trainimg become a signal to the container, once each; the
    trainer then finishes its step, checkpoints and exits 130/143, which is what we return."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        target = FORWARDED[signal.Signals(signum)]
        threading.Thread(target=send, args=(target,), daemon=True).start()

    previous = {s: signal.signal(s, handler) for s in FORWARDED}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _pump(open_stream: Callable[[], Iterator[bytes]], write: Write, ended: threading.Event) -> None:
    """Copy the container's stream to `write`. A follow request made just after start can
    end at once, empty (podman 4.3: measured here), so an empty stream is asked for again
    until the container has ended; a stream that delivered anything is read to its end."""
    while True:
        got = False
        with contextlib.suppress(Exception):  # the stream breaks when the container goes
            for chunk in open_stream():
                got = True
                write(chunk)
        if got or ended.is_set():
            return
        ended.wait(0.2)


def _writer(stream: IO[str]) -> Write:
    def write(data: bytes) -> None:
        with contextlib.suppress(OSError, ValueError):  # a terminal that hung up
            buffer = getattr(stream, "buffer", None)
            if buffer is not None:
                buffer.write(data)
                buffer.flush()
            else:
                stream.write(data.decode("utf-8", errors="replace"))
                stream.flush()

    return write


def execute(
    engine: TrainingRunner,
    run: ContainerRun,
    *,
    out: Write | None = None,
    err: Write | None = None,
    on_started: Callable[[str], None] | None = None,
    watchdog: bool = True,
) -> int:
    """Create and start the container, stream stdout/stderr, return the trainer's exit code.
    The container is removed whatever happens (an engine error, Ctrl-C); with `watchdog`, a
    supervise.py process stops and removes it should this process die first."""
    out = out or _writer(sys.stdout)
    err = err or _writer(sys.stderr)
    cid = None
    guard: supervise.Watchdog | None = None
    try:
        try:
            cid = engine.create_container(run)
            if watchdog:
                guard = supervise.Watchdog.start(engine, cid, run.stop_timeout)
            engine.start_container(cid)
        except EngineError as exc:
            raise EngineError(f"{run.engine}: could not start {run.image}: {exc}") from None
        if on_started is not None:
            on_started(cid)
        started = cid
        ended = threading.Event()
        pumps = [
            threading.Thread(
                target=_pump,
                args=(functools.partial(engine.follow_logs, started, stderr=s), w, ended),
                daemon=True,
            )
            for s, w in ((False, out), (True, err))
        ]
        for t in pumps:
            t.start()
        with _forward_signals(lambda sig: _quiet(engine.kill_container, started, sig)):
            code = engine.wait_container(started)
        ended.set()
        for t in pumps:
            t.join(timeout=30)
        return code
    finally:
        if cid is not None:
            _remove(engine, cid, run)
        if guard is not None:
            guard.release()


def _remove(engine: TrainingRunner, cid: str, run: ContainerRun) -> None:
    try:
        engine.remove_container(cid)
    except EngineError as exc:  # the engine went away meanwhile: say what is left behind
        raise EngineError(
            f"{run.engine}: could not remove container {run.name} ({exc}); remove it with "
            f"`{run.engine} rm -f {run.name}`"
        ) from None


def _quiet(fn: Callable[[str, str], None], cid: str, sig: str) -> None:
    with contextlib.suppress(Exception):
        fn(cid, sig)
