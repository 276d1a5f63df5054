"""Fixtures for the trainer tests.

In-process runs skip the ~2 s torch import of a subprocess; the tests that need a real
process (signals, tracebacks, torchrun) start one with trainer_helpers.run_module.
"""

from __future__ import annotations

import pytest

from tests.trainer.trainer_helpers import Result, RunCli
from trainer.cli import main
from trainer.fp8 import torchao_backend


@pytest.fixture(scope="session")
def torchao() -> None:
    """torchao imported (trainer.fp8.torchao_backend.load): a test that converts layers or asks
    torchao's size filter takes this, and is marked integration by it (tests/conftest.py)."""
    torchao_backend.load()


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """`run_cli("train", "--steps", "4")`: exit code and captured output of trainer.cli.main."""

    def run(*argv: str) -> Result:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
