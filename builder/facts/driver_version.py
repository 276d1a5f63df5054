"""NVIDIA driver versions: the one grammar and the one parser, compared as numbers, printed
exactly as NVIDIA writes them.

packaging's Version compares 570.124.06 correctly but prints it as 570.124.6; a driver version
that changes its spelling in a label or a message would be a lie, so this keeps the text. Every
driver version trainimg reads (a matrix value, `--driver`, `--target-driver`, a host's module,
NVML, a package) goes through this module once; the rest of the code passes DriverVersion objects.
"""

from __future__ import annotations

import re

from packaging.version import Version

# The one driver-version grammar, as NVIDIA writes every Linux release: a three-digit branch
# without a leading zero, then one or two dotted parts of one to three digits (570.26,
# 570.124.06, 580.65.06); not `10`, `057.124.06`, `570.1234.06` or `570.124.06.1`. matrix.yaml
# (builder/matrix/validate.py), `--driver`, `--target-driver` and every version read from a host
# or a label pass it.
BRANCH_GRAMMAR = r"[1-9][0-9]{2}"
GRAMMAR = BRANCH_GRAMMAR + r"\.[0-9]{1,3}(?:\.[0-9]{1,3})?"
EXAMPLE = "570.124.06"
SHAPE = (
    "BRANCH.MINOR[.PATCH] as NVIDIA writes it: a three-digit branch without a leading zero, "
    "parts of 1-3 digits, e.g. 570.124.06 or 570.26"
)
_GRAMMAR = re.compile(GRAMMAR)


class DriverVersion(Version):
    def __init__(self, text: str) -> None:
        if not _GRAMMAR.fullmatch(text):
            raise ValueError(f"not a driver version: {text!r} (expected {SHAPE})")
        super().__init__(text)
        self._text = text

    @classmethod
    def branch_start(cls, branch: int) -> DriverVersion:
        """Below every release of `branch`, printed as NVIDIA writes such a floor (`580`)."""
        if not re.fullmatch(BRANCH_GRAMMAR, str(branch)):
            raise ValueError(f"not a driver branch: {branch!r} (expected e.g. 570)")
        out = cls.__new__(cls)
        Version.__init__(out, str(branch))
        out._text = str(branch)
        return out

    @classmethod
    def parse(cls, text: str | None) -> DriverVersion | None:
        """A version read from a host (surrounding blanks dropped); None when it is not one."""
        if not text:
            return None
        text = text.strip()
        return cls(text) if _GRAMMAR.fullmatch(text) else None

    @property
    def branch(self) -> int:
        return self.major

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<DriverVersion({self._text!r})>"
