"""builder/progress.py: plain lines off a terminal, a heartbeat in every silence, -q silent."""

from __future__ import annotations

import io
import re
import time

import pytest

from builder.progress import HEARTBEAT_S, Progress, size

ANSI = re.compile(r"\x1b\[")


def test_a_silent_step_gets_heartbeats_with_its_measure() -> None:
    out = io.StringIO()
    progress = Progress(out, heartbeat_s=0.1)
    with progress.step("debootstrap bookworm", lambda: "12 MB written"):
        time.sleep(0.4)
    lines = out.getvalue().splitlines()
    beats = [line for line in lines if line.startswith("debootstrap bookworm: 0 s, 12 MB written")]
    assert len(beats) >= 2, lines
    assert lines[-1].startswith("debootstrap bookworm: done (")
    assert not ANSI.search(out.getvalue())


def test_output_lines_are_shown_and_put_off_the_heartbeat() -> None:
    out = io.StringIO()
    progress = Progress(out, heartbeat_s=0.25)
    with progress.step("pip download") as step:
        for n in range(6):  # a line every 0.05 s: never 0.25 s of silence
            step.line(f"Collecting wheel{n}")
            time.sleep(0.05)
    lines = out.getvalue().splitlines()
    assert [line for line in lines if "Collecting" in line] == [
        f"pip download: Collecting wheel{n}" for n in range(6)
    ]
    assert not [line for line in lines if "still running" in line], lines


def test_a_step_without_a_measure_says_it_still_runs() -> None:
    out = io.StringIO()
    with Progress(out, heartbeat_s=0.1).step("push r/x:cell", done=None):
        time.sleep(0.25)
    assert "push r/x:cell: still running (0 s)" in out.getvalue().splitlines()


def test_quiet_prints_nothing_and_the_step_still_runs() -> None:
    out = io.StringIO()
    progress = Progress(out, quiet=True, heartbeat_s=0.05)
    with progress.step("debootstrap bookworm", lambda: "1 MB written") as step:
        step.line("I: Retrieving InRelease")
        progress.say("base: import")
        time.sleep(0.12)
    assert out.getvalue() == ""


def test_an_error_in_the_step_says_no_done_and_passes_through() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), Progress(out, heartbeat_s=5).step("build x"):
        raise RuntimeError("boom")
    assert "done" not in out.getvalue()


def test_a_terminal_gets_a_rich_status_line_not_plain_lines() -> None:
    out = io.StringIO()
    progress = Progress(out, terminal=True, heartbeat_s=0.1)
    with progress.step("verify training_bf16") as step:
        step.line("step 3/12")
        time.sleep(0.2)
    text = out.getvalue()
    assert ANSI.search(text)  # the status line draws itself with escapes
    assert "verify training_bf16" in text
    assert "still running" not in text  # no scrolling heartbeat lines on a terminal


def test_the_default_heartbeat_is_under_ten_seconds_and_sizes_read_well() -> None:
    assert 0 < HEARTBEAT_S <= 10
    assert size(12_300_000) == "12 MB" and size(1_190_000_000) == "1.19 GB"
    with pytest.raises(ValueError, match="heartbeat_s"):
        Progress(heartbeat_s=0)
