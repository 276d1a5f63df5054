"""How host and record data appear in a message: printable characters only, short, never
through repr (a host's file or a record can hold anything, control characters included)."""

from __future__ import annotations


def shown(text: object, limit: int = 80) -> str:
    """`text` for a one-line message: non-printable characters as `?`, at most `limit` kept."""
    raw = str(text)
    clean = "".join(ch if ch.isprintable() else "?" for ch in raw[:limit])
    return clean + ("..." if len(raw) > limit else "")
