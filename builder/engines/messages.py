"""An engine's error text cut to what a person reads. buildah and podman wrap a cause in every
layer it passes through and print Go values on the way (`committing container for step
{Env:[...] Command:run Args:[...] ...}: copying layers ...: no space left on device`), so the
cause may sit hundreds of characters in. Kept: the first clause (what was being done), the
clause that names an operating-system cause (ENOSPC, EACCES, ...), and what follows it."""

from __future__ import annotations

import errno
import os
import re

LIMIT = 300
# The causes a person can act on, as Go and C spell them (strerror), with what would help.
CAUSES: dict[str, str] = {
    os.strerror(errno.ENOSPC).lower(): "free space where the engine keeps its images "
    "(`podman system df`, `podman system prune`)",
    os.strerror(errno.EDQUOT).lower(): "the engine's storage is over its quota",
    os.strerror(errno.EROFS).lower(): "the engine's storage is mounted read-only",
    os.strerror(errno.EACCES).lower(): "",
    os.strerror(errno.ENOENT).lower(): "",
    os.strerror(errno.ECONNREFUSED).lower(): "is the engine or registry running there?",
}
_GO_VALUE = re.compile(r"[{&]?\{[A-Z][A-Za-z0-9]*:")


def without_go_values(text: str) -> str:
    """`text` with each printed Go struct (`{Env:[...] Command:run ...}`) as `{...}`."""
    out: list[str] = []
    i = 0
    while True:
        m = _GO_VALUE.search(text, i)
        if m is None:
            out.append(text[i:])
            return "".join(out)
        start = text.index("{", m.start())
        out.append(text[i:start])
        depth, j = 0, start
        while j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        out.append("{...}")
        i = j


def cause(text: str) -> str | None:
    """The operating-system cause `text` names, if any (lower case, as strerror says it)."""
    low = text.lower()
    found = [(low.find(c), c) for c in CAUSES if c in low]
    return min(found)[1] if found else None


def human(text: str, limit: int = LIMIT) -> str:
    """One line of at most about `limit` characters that keeps what was being done and why."""
    flat = " ".join(without_go_values(str(text)).split())
    why = cause(flat)
    hint = CAUSES.get(why or "", "")
    if len(flat) <= limit:
        return flat + (f"; {hint}" if hint else "")
    clauses = flat.split(": ")
    head = clauses[0][: limit // 3]
    at = next((i for i, c in enumerate(clauses) if why and why in c.lower()), len(clauses) - 1)
    if at > 1 and len(clauses[at - 1]) < limit // 3:
        at -= 1  # the clause before the cause says where (`write /var/tmp/...`)
    tail = ": ".join(clauses[max(at, 1) :])
    if len(tail) > limit - len(head):
        tail = tail[: limit - len(head)] + "..."
    return f"{head}: ...: {tail}" + (f"; {hint}" if hint else "")
