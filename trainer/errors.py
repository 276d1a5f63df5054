"""Exit codes and the errors that map to them.

The CLI turns each TrainerError into one message on stderr and its exit code, never a
traceback: an image's caller (podman, a scheduler) decides from the code alone whether to fix
the input, look at the numerics, or simply start the container again with --resume.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NUMERICAL = 3
# stopped by SIGTERM/SIGINT with nothing saved: no --ckpt-dir, or the signal came before the
# trainer could catch it (still starting). Distinct from 143/130, which promise a complete
# checkpoint to resume from, so that a scheduler requeues only on those.
EXIT_STOPPED_UNSAVED = 4
# `trainer gate`: the candidate's run fell outside the reference's band (trainer/gate.py); the
# runs themselves went fine, so neither 2 (input) nor 3 (a numerical stop of the reference)
EXIT_GATE_FAILED = 5


def exit_code_for_signal(signum: int) -> int:
    """128 + signal number, the shell's convention: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + signum


EXIT_SIGINT = exit_code_for_signal(signal.SIGINT)
EXIT_SIGTERM = exit_code_for_signal(signal.SIGTERM)


class TrainerError(Exception):
    """A failure with a message for the user; `exit_code` is what the process returns."""

    exit_code = EXIT_BAD_INPUT


class BadInput(TrainerError):
    """Config, data, device or checkpoint the trainer cannot use; found before training."""

    exit_code = EXIT_BAD_INPUT


class NumericalStop(TrainerError):
    """NaN/Inf in the loss or gradient norm, a collapsed loss scale, or a loss spike (if set to
    stop). The last good checkpoint is left as it was."""

    exit_code = EXIT_NUMERICAL


class OutOfMemory(TrainerError):
    """The device ran out of memory in a step: exit 2, a configuration to change."""

    exit_code = EXIT_BAD_INPUT


class Interrupted(TrainerError):
    """SIGTERM/SIGINT arrived: 128 + the signal when a checkpoint was saved, EXIT_STOPPED_UNSAVED
    when nothing was (no checkpoint dir)."""

    def __init__(self, signum: int, message: str, saved: bool = True) -> None:
        super().__init__(message)
        self.exit_code = exit_code_for_signal(signum) if saved else EXIT_STOPPED_UNSAVED
