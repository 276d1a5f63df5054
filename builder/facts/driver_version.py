"""NVIDIA driver versions: the one parser, compared as numbers, printed exactly as NVIDIA writes
them.

packaging's Version compares 570.124.06 correctly but prints it as 570.124.6; a driver version
that changes its spelling in a label or a message would be a lie, so this keeps the text. Every
driver version trainimg reads (a matrix value, `--target-driver`, a host's module, NVML, a
package) goes through this module once; the rest of the code passes DriverVersion objects.
"""

from __future__ import annotations

import re

from packaging.version import Version

# What a driver version looks like anywhere: a branch of 2-4 digits without a leading zero,
# then up to three dotted parts (570, 570.26, 570.124.06; 4-part Jetson/vGPU builds too).
_DRIVER = re.compile(r"[1-9][0-9]{1,3}(?:\.[0-9]{1,4}){0,3}")
# What a user plans to install, as NVIDIA writes a Linux release: a three-digit branch, then one
# or two parts (570.26, 570.124.06, 580.65.06); not `10`, `0570.124.06` or `570.124.06.1`.
_RELEASE = re.compile(r"[1-9][0-9]{2}\.[0-9]{1,3}(?:\.[0-9]{1,3})?")
RELEASE_SHAPE = "BRANCH.MINOR[.PATCH] as NVIDIA writes it, e.g. 570.124.06 or 570.26"


class DriverVersion(Version):
    def __init__(self, text: str) -> None:
        if not _DRIVER.fullmatch(text):
            raise ValueError(f"not a driver version: {text!r} (expected e.g. 570.124.06)")
        super().__init__(text)
        self._text = text

    @classmethod
    def parse(cls, text: str | None) -> DriverVersion | None:
        """A version read from a host (surrounding blanks dropped); None when it is not one."""
        if not text:
            return None
        text = text.strip()
        return cls(text) if _DRIVER.fullmatch(text) else None

    @classmethod
    def planned(cls, text: str) -> DriverVersion:
        """A driver someone plans to install; ValueError naming the shape when it is not one."""
        if not _RELEASE.fullmatch(text):
            raise ValueError(f"not a driver version: {text!r} (expected {RELEASE_SHAPE})")
        return cls(text)

    @property
    def branch(self) -> int:
        return self.major

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<DriverVersion({self._text!r})>"
