"""NVIDIA driver versions: compared as numbers, printed exactly as NVIDIA writes them.

packaging's Version compares 570.124.06 correctly but prints it as 570.124.6; a driver version
that changes its spelling in a label or a message would be a lie, so this keeps the text.
"""

from __future__ import annotations

import re

from packaging.version import Version

_DRIVER = re.compile(r"[0-9]{2,4}(\.[0-9]{1,4}){0,3}")


class DriverVersion(Version):
    def __init__(self, text: str) -> None:
        if not _DRIVER.fullmatch(text):
            raise ValueError(f"not a driver version: {text!r} (expected e.g. 570.124.06)")
        super().__init__(text)
        self._text = text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<DriverVersion({self._text!r})>"
