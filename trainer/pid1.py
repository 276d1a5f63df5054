"""The trainer as a container's PID 1 (`podman run IMAGE train ...` without `--init`).

PID 1 has two duties no other process has: it must reap the orphans the kernel hands it
(torch.compile's worker pools, a killed DataLoader's children) or they stay zombies until the
container ends, and the kernel delivers it only the signals it has a handler for. So when the
trainer finds itself PID 1 it forks: the parent stays a minimal init - it forwards SIGTERM,
SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the trainer, reaps every child, and exits with
the trainer's exit code (128 + N when a signal killed it) - and the child runs the trainer as
usual. Under `--init` (catatonit, tini) or anywhere the trainer is not PID 1, nothing changes.
Stdlib only: it runs before torch is imported, so the fork is cheap.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal that killed."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def supervise(child: Callable[[], object]) -> NoReturn:
    """Fork; run `child` in the child process (it must exit by itself); be its init here."""
    sys.stdout.flush()
    sys.stderr.flush()
    trainer = os.fork()
    if trainer == 0:
        child()
        os._exit(0)
    for signum in FORWARDED:
        signal.signal(signum, lambda s, _frame: os.kill(trainer, s))
    while True:
        reaped, status = os.wait()  # any child: the trainer, or an orphan handed to PID 1
        if reaped == trainer:
            os._exit(exit_code(status))


def main_as_init_when_pid1(main: Callable[[], object]) -> None:
    """`main` (which exits by itself), under a minimal init when this process is PID 1."""
    if os.getpid() == 1:
        supervise(main)
    main()
