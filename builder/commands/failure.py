"""What escapes a command, as the one line `trainimg: error: <what>: <why>` (exit 2): an
OSError by its errno (the file it names, what the system said, what would help), and the
errors of the engine SDKs and of requests cut to their human part (engines/messages.py).
Anything else is a bug of ours and keeps its traceback."""

from __future__ import annotations

import errno

from builder.engines.messages import human
from builder.host.shown import shown

HINTS: dict[int, str] = {
    errno.ENOSPC: "the filesystem is full: free space there, or write somewhere else",
    errno.EDQUOT: "over the disk quota there: free space, or write somewhere else",
    errno.EACCES: "choose a place you may write, or fix its permissions",
    errno.EPERM: "choose a place you may write, or fix its permissions",
    errno.EROFS: "that filesystem is mounted read-only: write somewhere else",
    errno.EEXIST: "it exists already: remove it, or choose another name",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EISDIR: "it is a directory: name a file",
}
# The top-level packages whose errors are an engine's or a registry's answer, not a bug.
CLIENT_PACKAGES = frozenset({"podman", "docker", "requests", "urllib3"})


def _from_client(exc: BaseException) -> bool:
    return any(c.__module__.split(".")[0] in CLIENT_PACKAGES for c in type(exc).__mro__[:-2])


def os_error(exc: OSError) -> str:
    """`<file>: <what the system said>; <what would help>`."""
    why = (exc.strerror or str(exc)).lower()
    hint = HINTS.get(exc.errno or 0, "")
    tail = f"{why}; {hint}" if hint else why
    if exc.filename is None:
        return tail
    what = shown(exc.filename, 200)
    if exc.filename2 is not None:
        what += f" -> {shown(exc.filename2, 200)}"
    return f"{what}: {tail}"


def message_for(exc: BaseException) -> str | None:
    """The message for `exc`, or None when it is not one a user can act on (a bug)."""
    if _from_client(exc):
        return f"{type(exc).__name__}: {shown(human(str(exc)), 400)}"
    if isinstance(exc, OSError):
        return os_error(exc)
    return None
