"""Errors a user can act on. Each one names the file, the key path or value, and what is valid.

The CLI turns every TrainimgError into one message on stderr and its exit code, never a
traceback.
"""

from __future__ import annotations


class TrainimgError(Exception):
    """A failure the user can fix; `exit_code` is what the CLI returns."""

    exit_code = 2


class MatrixError(TrainimgError):
    """matrix.yaml is malformed or breaks a compatibility rule."""

    def __init__(
        self, path: str, message: str, keypath: str | None = None, line: int | None = None
    ) -> None:
        self.path = path
        self.message = message
        self.keypath = keypath
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return (
            f"{where}: {self.keypath}: {self.message}"
            if self.keypath
            else f"{where}: {self.message}"
        )


class RenderError(TrainimgError):
    """A template is missing, refers to an undefined value, or the output cannot be written."""
