"""Host and record strings reach a terminal as printable text only (issue 28: an `ESC[2K ESC[1G`
in a GPU name erased the `block` line of the report and painted a fake "ok"; a newline in probe
output forged report lines), and a record refuses a hard link to a file outside it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from builder.cli import main
from builder.host.shown import printable, shown
from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK
from builder.preflight.record import Record
from builder.preflight.report import HostReport, render_fleet
from tests.preflight.conftest import PREFLIGHT_MATRIX
from tests.preflight.fakehost import FIXTURES

ERASE = "\x1b[2K\x1b[1G"  # erase the line, cursor to column 1
FAKE_OK = f"{ERASE}el9-geforce  ok     nothing to fix"


def test_printable_shows_control_characters_as_escapes() -> None:
    assert printable(f"A{ERASE}B\nC\tD\x7f\u2028é") == "A\\x1b[2K\\x1b[1GB\\nC\\tD\\x7f\\u2028é"
    assert printable("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
    assert shown("x" * 90 + "\n", 5) == "xxxxx..." and shown("a\nb") == "a\\nb"


def hostile_record(tmp_path: Path) -> Path:
    """el9-geforce whose NVML name carries an erase sequence and whose lspci line carries a
    newline and a forged report line."""
    base = tmp_path / "el9-geforce"
    shutil.copytree(FIXTURES / "el9-geforce", base)
    smi = base / "out" / "smi.txt"
    smi.write_text(smi.read_text().replace("NVIDIA GeForce RTX 4090", f"NVIDIA GeForce{FAKE_OK}"))
    q = base / "out" / "smi-q.txt"
    q.write_text(q.read_text().replace("NVIDIA GeForce RTX 4090", f"NVIDIA GeForce{FAKE_OK}"))
    return base


@pytest.mark.parametrize("verbose", [False, True])
def test_an_escape_sequence_in_a_gpu_name_never_reaches_the_terminal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, verbose: bool
) -> None:
    base = hostile_record(tmp_path)
    args = ["preflight", "--matrix", str(PREFLIGHT_MATRIX), "--from", str(base),
            "--today", "2026-11-29", *(["--verbose"] if verbose else [])]  # fmt: skip
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 4, err
    assert "\x1b" not in out + err
    assert all(line.isprintable() for line in out.splitlines())
    assert "block" in out  # the verdict line is still there, not painted over
    if verbose:
        assert "NVIDIA GeForce\\x1b[2K\\x1b[1Gel9-geforce  ok" in out


def test_a_newline_in_a_host_string_is_shown_not_obeyed() -> None:
    """A newline inside a host's value (a CDI device name, a probe's message) cannot start a
    report line of its own; the host's name cannot repaint the line either."""
    forged = "el9-geforce  ok     nothing to fix"
    gpu = f"NVIDIA GeForce RTX 4090\n{forged}"  # a GPU name as a CDI spec or JSON can carry it
    check = Finding("gpu.inventory", BLOCK, f"1x {gpu} (CC 8.9)", "look at the GPU\nnow")
    report = HostReport(f"gpu7{ERASE}", [check])
    for verbose in (False, True):
        text = render_fleet([report], None, verbose=verbose)
        lines = text.splitlines()
        assert not any(line.startswith(forged) for line in lines), text
        assert "\x1b" not in text and "gpu7\\x1b[2K" in text
        assert "RTX 4090\\nel9-geforce" in text
        assert all(line.isprintable() for line in lines)


def test_compat_prints_record_strings_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    """compat prints an image's requirement terms (a record's or an engine's label) as text."""
    code = main(["compat", "--matrix", str(PREFLIGHT_MATRIX), "--today", "2026-11-29",
                 "--require", f"cuda>=12.8{ERASE}", "--driver", "580.65.06"])  # fmt: skip
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\\x1b[2K" in out, out
    assert code == 1  # the escape makes the term an invalid expression: it fails, said plainly


def test_a_record_file_that_is_a_hard_link_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_text("root:x:0:0\n")
    base = tmp_path / "rec"
    shutil.copytree(FIXTURES / "el9-h100", base)
    for rel in ("out/dkms.txt", "files/etc/os-release"):
        target = base / rel
        target.unlink()
        os.link(outside, target)
        with pytest.raises(Exception, match=rf"{rel}.* has 2 names \(a hard link; refused"):
            Record.load(base)
        target.unlink()
        target.write_text("restored\n")


def test_a_recorded_sysfs_id_that_is_a_hard_link_or_a_fifo_is_refused(tmp_path: Path) -> None:
    """The sysfs witness's files are record files like any other: a hard link to a file
    outside the record, or a FIFO (a read that never ends), refuses the record unread."""
    base = tmp_path / "rec"
    shutil.copytree(FIXTURES / "el9-b200-proprietary-no-lspci", base)
    rel = "files/sys/bus/pci/devices/0000:18:00.0/device"
    target = base / rel
    outside = tmp_path / "secret"
    outside.write_text("0x2901\n")
    target.unlink()
    os.link(outside, target)
    with pytest.raises(Exception, match=r"0000:18:00.0/device has 2 names \(a hard link"):
        Record.load(base)
    target.unlink()
    os.mkfifo(target)
    with pytest.raises(Exception, match=r"0000:18:00.0/device is not a regular file"):
        Record.load(base)
