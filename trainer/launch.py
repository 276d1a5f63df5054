"""`python -m trainer.launch`: torchrun with the trainer's exit codes and the whole grace period.

It takes torchrun's arguments unchanged (`python -m trainer.launch --nproc-per-node 8 -m
trainer train ...`); every launch path uses it (`trainimg run`, `trainimg slurm`). Two things
differ from plain torchrun:

- **Signals.** torchrun answers SIGTERM/SIGINT by signalling its workers and SIGKILLing them
  30 s later (pytorch/pytorch#119856; `--shutdown-timeout` exists only in recent releases),
  then exits 1 with a traceback. Here the launcher forwards the signal to its workers and
  keeps supervising them: they finish the step, checkpoint together and exit 143/130 in their
  own time, within the grace period of whoever sent the signal (`podman stop -t`, Slurm's
  `--signal=B:TERM@S`), which then kills the container anyway.
- **Exit codes.** The workers' codes reach the caller: 0 finished, 2 bad input, 3 numerical
  stop, 4 stopped with nothing saved (no --ckpt-dir; a signal before the workers could catch
  it), 143/130 stopped with a checkpoint (exit_code_for below), one line on stderr, no
  traceback. Anything else (a crash, a worker killed by a signal nobody sent) keeps torchrun's
  failure report and exits 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from types import FrameType

from trainer.errors import (
    EXIT_BAD_INPUT,
    EXIT_NUMERICAL,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    EXIT_STOPPED_UNSAVED,
)

# The trainer's own failure codes, most telling first: a numerical stop or bad input must not
# be mistaken for "stopped, resume me" when ranks disagree, nor a rank that saved nothing (or
# died of the signal, so the collective checkpoint cannot be whole) for one that did.
PRECEDENCE = (EXIT_NUMERICAL, EXIT_BAD_INPUT, EXIT_STOPPED_UNSAVED, EXIT_SIGTERM, EXIT_SIGINT)
# a worker that died of one of these after the launcher passed that signal on was stopped
_STOP_DEATHS = (signal.SIGTERM, signal.SIGINT, signal.SIGKILL)
# how torchrun stops the other workers once one failed
_CLEANUP = (signal.SIGTERM, signal.SIGKILL)

SAYS = {
    EXIT_NUMERICAL: "numerical stop (see the workers' message); resume from the last "
    "checkpoint with other settings",
    EXIT_BAD_INPUT: "bad input (see the workers' message)",
    EXIT_STOPPED_UNSAVED: "stopped, nothing saved (no --ckpt-dir, or a worker died of the "
    "signal before it could checkpoint): there is nothing new to resume from",
    EXIT_SIGTERM: "stopped by SIGTERM: the workers checkpointed (with --ckpt-dir); start "
    "again with --resume",
    EXIT_SIGINT: "stopped by SIGINT: the workers checkpointed (with --ckpt-dir); start "
    "again with --resume",
}
# every worker died of the signal: it came before the trainer could catch it (still starting)
STOPPED_EARLY = "stopped before the workers were training: nothing was saved"


def exit_code_for(worker_codes: Collection[int], received: int | None = None) -> int | None:
    """The launcher's exit code for its failed workers' exit codes (pure).

    When one worker fails, torchrun stops the others (SIGTERM, then SIGKILL) and reports them
    too: those deaths go with the trainer's code of the one that failed. A worker killed by the
    signal the launcher passed on (`received`; it had not yet installed the trainer's handler)
    counts as stopped with nothing saved (EXIT_STOPPED_UNSAVED). None: a failure that is not
    the trainer's (exit 1, a signal nobody sent) - the caller keeps torchrun's report.
    """
    codes = set(worker_codes)
    if received is not None:
        codes = {EXIT_STOPPED_UNSAVED if -c in _STOP_DEATHS else c for c in codes}
    trainer_codes = codes & set(PRECEDENCE)
    if trainer_codes:
        codes -= {-int(s) for s in _CLEANUP}
    if not trainer_codes or codes != trainer_codes:
        return None
    return next(code for code in PRECEDENCE if code in codes)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (torchrun's workers are the launcher's children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(entry.name))
    return found


class Forwarder:
    """Replaces torchrun's signal handler: pass the signal to the workers, keep supervising.

    torchrun installs `_terminate_process_handler` when it starts the workers (it looks the
    name up then), and that handler raises into the agent, which SIGKILLs the workers 30 s
    later. Before any worker exists there is nothing to wait for: then torchrun's own handler
    runs and the agent stops at once.
    """

    def __init__(self, original: object, watchdog: Watchdog) -> None:
        self.original = original
        self.received: int | None = None
        self.watchdog = watchdog

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.watchdog.answered.set()
        workers = _children(os.getpid())
        if not workers:
            assert callable(self.original)
            self.original(signum, frame)
            return
        self.received = signum
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)


class Early(BaseException):
    """A stop signal while the launcher itself starts (importing torch, the rendezvous); a
    BaseException, so that no `except Exception` on the way (torch's optional imports) eats it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _early_exit(signum: int, why: str = "") -> int:
    print(
        f"trainer.launch: exit {EXIT_STOPPED_UNSAVED}: signal {signum} before the workers "
        f"started{why}: nothing was saved",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_STOPPED_UNSAVED


class Watchdog:
    """A stop signal the main thread cannot answer, because it is blocked in C++.

    Python runs a signal handler only between bytecodes: a launcher blocked in torch's
    rendezvous (the TCPStore connect to node 0, which retries until its timeout, 60 s to
    10 min) would hold a SIGTERM that long, past the sender's grace period. The C-level
    handler still writes the signal's number to the wakeup fd at once, and torch releases the
    GIL while it waits: this thread reads it, gives the main thread `patience` seconds to
    answer (a handler that sets `answered`), and if it has not and there are no workers (so
    nothing to checkpoint), ends the launcher with exit 4, stopped with nothing saved.
    """

    def __init__(self, patience: float = 5.0) -> None:
        self.patience = patience
        self.answered = threading.Event()
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        self._previous = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="trainer.launch-watchdog", daemon=True).start()

    def _watch(self) -> None:
        while data := self._read.recv(64):
            stops = [s for s in data if s in (signal.SIGTERM, signal.SIGINT)]
            if stops and not self.answered.wait(self.patience) and not _children(os.getpid()):
                code = _early_exit(stops[0], " (the launcher was blocked in torch's rendezvous)")
                os._exit(code)
            self.answered.clear()
        self._read.close()

    def close(self) -> None:
        signal.set_wakeup_fd(self._previous)
        self._write.close()  # ends the thread (recv returns b"")


def main(argv: Sequence[str] | None = None) -> int:
    # First of all: as a container's pid 1 the launcher would otherwise ignore SIGTERM (the
    # kernel drops signals pid 1 has no handler for) until torchrun installs its own
    watchdog = Watchdog()

    def stop_early(signum: int, frame: FrameType | None) -> None:
        watchdog.answered.set()
        raise Early(signum)

    previous = {s: signal.signal(s, stop_early) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _launch(argv, watchdog)
    except Early as exc:
        return _early_exit(exc.signum)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        watchdog.close()


def _launch(argv: Sequence[str] | None, watchdog: Watchdog) -> int:
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing import api
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    forwarder = Forwarder(api._terminate_process_handler, watchdog)
    api._terminate_process_handler = forwarder
    try:
        run.main(list(argv) if argv is not None else sys.argv[1:])
    except api.SignalException as exc:  # before the workers started
        return _early_exit(int(exc.sigval))
    except ChildFailedError as exc:
        codes = [f.exitcode for f in exc.failures.values()]
        mapped = exit_code_for(codes, forwarder.received)
        if mapped is None:
            print(exc.format_msg(), file=sys.stderr)  # type: ignore[no-untyped-call]
            return 1
        workers = ", ".join(str(c) for c in sorted(set(codes)))
        says = SAYS[mapped] if any(c >= 0 for c in codes) else STOPPED_EARLY
        print(f"trainer.launch: exit {mapped}: {says} (workers: {workers})", file=sys.stderr)
        return mapped
    finally:
        api._terminate_process_handler = forwarder.original  # type: ignore[assignment]
    return 0


if __name__ == "__main__":
    from trainer.pid1 import main_as_init_when_pid1

    main_as_init_when_pid1(lambda: sys.exit(main()))
