"""How host and record data appear in a message: printable characters only, never through repr
(a host's file or a record can hold anything: ESC sequences that repaint a terminal line,
newlines that forge report lines). Every character that is not printable is shown as its
escape (`\\x1b`, `\\n`, `\\t`, `\\u2028`), so what a terminal receives is text alone."""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object) -> str:
    """`text` with every non-printable character as its escape; nothing cut."""
    raw = str(text)
    if raw.isprintable():
        return raw
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in raw)


def printable_lines(text: str) -> str:
    """Lines the program composed (joined by newlines), each line made printable: the program's
    own line breaks stay, any other control character is shown as its escape."""
    return "\n".join(printable(line) for line in text.split("\n"))


def shown(text: object, limit: int = 80) -> str:
    """`text` for a one-line message: non-printable characters as escapes, at most `limit`
    characters of the original kept."""
    raw = str(text)
    return printable(raw[:limit]) + ("..." if len(raw) > limit else "")
