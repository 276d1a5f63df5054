"""Parsers of mokutil: the Secure Boot state, whether the DKMS key is enrolled, the enrolled
keys (pure)."""

from __future__ import annotations

import re


def sb_state(text: str) -> str | None:
    """`mokutil --sb-state`: "SecureBoot enabled|disabled"; "This system doesn't support Secure
    Boot" / "EFI variables are not supported on this system" on legacy BIOS."""
    low = text.lower()
    if "secureboot enabled" in low:
        return "enabled"
    if "secureboot disabled" in low:
        return "disabled"
    if "not supported" in low or "doesn't support" in low:
        return "unsupported"
    return None


def mok_test_key(text: str) -> str | None:
    """`mokutil --test-key KEY`: "KEY is already enrolled", "... is not enrolled", "... is
    already in the enrollment request" (enrolment pending the next boot)."""
    low = text.lower()
    if "is not enrolled" in low:
        return "not-enrolled"
    if "enrollment request" in low:
        return "pending"
    if "already enrolled" in low or "built-in trusted keyring" in low:
        return "enrolled"
    return None


def mok_list_enrolled(text: str) -> list[str]:
    """`mokutil --list-enrolled`: one "[key N]" block per key; returns each Subject line."""
    return [m.strip() for m in re.findall(r"Subject:\s*(.+)", text)]
