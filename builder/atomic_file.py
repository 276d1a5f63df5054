"""Files other processes may read while we write them: written beside, fsynced, renamed."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def _mode(path: Path) -> int:
    """The mode the file gets: the one it has, else what open() would give a new file (0666
    less the umask) - not mkstemp's 0600, which made lock files and Containerfiles private."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for every thread
    for a moment): Linux says it in /proc/self/status."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync, then rename: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None and exc.errno is not None:
            # a failed write or fsync names no file: name the one we wrote
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
