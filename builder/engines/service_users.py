"""Who uses an isolated podman API service ($TRAINIMG_PODMAN_ROOT): a reference count, so two
trainimg commands on one checkout can share the service and the last one out stops it.

`<root>/run/service.users` lists the pids of the commands using it, `<root>/run/service.pid`
the service's own pid; both change only under an exclusive fcntl lock on
`<root>/run/service.lock`, which is also held while the service starts (so two commands never
start two services on one socket). Pids of commands that died are dropped when read.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path


def _run(root: Path) -> Path:
    run = root / "run"
    run.mkdir(parents=True, exist_ok=True)
    return run


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    fd = os.open(_run(root) / "service.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _users(root: Path) -> list[int]:
    path = _run(root) / "service.users"
    try:
        pids = [int(p) for p in path.read_text().split()]
    except (OSError, ValueError):
        return []
    return [p for p in pids if _alive(p)]


def _write_users(root: Path, pids: list[int]) -> None:
    (_run(root) / "service.users").write_text("".join(f"{p}\n" for p in sorted(set(pids))))


def _service_pid(root: Path) -> int | None:
    """The recorded service pid, if that process is still a podman API service."""
    try:
        pid = int((_run(root) / "service.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if b"podman" in cmdline[0] and b"service" in cmdline else None


def join(root: Path, service_pid: int | None) -> None:
    """Count this process as a user (call under `locked`); record the service's pid when this
    process started it."""
    if service_pid is not None:
        (_run(root) / "service.pid").write_text(f"{service_pid}\n")
    elif _service_pid(root) is None:
        (_run(root) / "service.pid").unlink(missing_ok=True)  # stale: never kill a reused pid
    _write_users(root, [*_users(root), os.getpid()])


def leave(root: Path) -> bool:
    """Stop counting this process (call under `locked`); True when no user is left, and the
    service (whoever started it) has been stopped by its pid."""
    users = [p for p in _users(root) if p != os.getpid()]
    _write_users(root, users)
    if users:
        return False
    pid = _service_pid(root)
    (_run(root) / "service.pid").unlink(missing_ok=True)
    if pid is None:
        return True
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
    return True
