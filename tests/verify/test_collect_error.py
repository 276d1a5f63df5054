"""pytest exits INTERRUPTED both for Ctrl-C and for a suite that cannot be collected; verify must
tell them apart (a collection error is a failed report, not a KeyboardInterrupt)."""

from __future__ import annotations

import pytest

from builder.verify.report import Collector


def test_a_collection_error_is_a_failed_check_not_an_interrupt(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken="import no_such_module_here\n")
    collector = Collector()
    code = pytester.inline_run("-p", "no:cacheprovider", plugins=[collector]).ret
    assert code == pytest.ExitCode.INTERRUPTED  # what pytest says for both
    assert not collector.keyboard_interrupt
    (result,) = collector.results()
    assert result.outcome == "error" and "could not be collected" in result.message


def test_ctrl_c_is_an_interrupt(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stop="def test_stop():\n    raise KeyboardInterrupt\n")
    collector = Collector()
    pytester.inline_run("-p", "no:cacheprovider", plugins=[collector], no_reraise_ctrlc=True)
    assert collector.keyboard_interrupt
