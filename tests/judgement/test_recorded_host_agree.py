"""A recorded host whose GPU is not in the catalogue (el9-rtx4080-r550: a GeForce RTX 4080,
10de:2704) judged by preflight, by `trainimg run --dry-run` and by verify's host check: the
same status and reason codes for each image, the GPU named with its PCI id, never "no GPU"
(issue 28: `run` and `verify` looked GPUs up by name and lost the whole list on one miss)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
import shutil
from pathlib import Path

import pytest

from builder.cli import main
from builder.judgement.image import ImageVerdict
from builder.launch import hostfacts
from builder.launch.expected_image import expected_image
from builder.launch.gpucheck import check_driver
from builder.preflight import images as img
from builder.preflight.fleet import preflight_host
from builder.preflight.hostio import ReadOnlyHost
from builder.preflight.inventory import Target
from builder.spec import labels as lab
from builder.verify.host_compat import read_this_host, verdict_here
from builder.workspace import open_workspace
from tests.preflight.conftest import REPO, context
from tests.preflight.fakehost import FIXTURES, FakeHost, Fixture

HOST = "el9-rtx4080-r550"
ROOT = FIXTURES / HOST / "files"
CELLS = (
    "rocky9-cu128-py3.12-torch2.11.0-runtime",  # cuda-compat: GeForce cannot use it (804)
    "debian12-cu128-py3.11-torch2.9.1-runtime",  # PyPI's CUDA: minor-version compatibility
)
TODAY = dt.date.today()  # `trainimg run` judges on the calendar's day: so do the others here


@functools.cache
def preflight_rows() -> dict[str, ImageVerdict]:
    ws = open_workspace(REPO / "matrix.yaml", strict=False)
    records = img.from_workspace(ws)
    ctx = dataclasses.replace(context(records), today=TODAY)
    fake = FakeHost(Fixture.load_fixture(HOST))
    report = preflight_host(Target(HOST, f"fake://{HOST}"), ctx, lambda _: ReadOnlyHost(fake, HOST))
    return {row.image.cell: row.now for row in report.rows if row.image.cell in CELLS}


def blocking_codes(verdict: ImageVerdict) -> set[str]:
    return {f.reason for f in verdict.findings if f.reason and f.severity.rank >= 2}


def test_preflight_identifies_the_uncatalogued_board_by_its_pci_id() -> None:
    rows = preflight_rows()
    assert set(rows) == set(CELLS)
    codes = {c for v in rows.values() for c in v.codes}
    assert "gpu.not-in-catalogue" in codes and "gpu.none-visible" not in codes


@pytest.mark.parametrize("cell", CELLS)
def test_run_dry_run_agrees_with_preflight(
    cell: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(hostfacts, "read_host", functools.partial(hostfacts.read_host, root=ROOT))
    code = main(["run", cell, "--matrix", str(REPO / "matrix.yaml"), "--engine", "podman",
                 "--dry-run", "--gpus", "all", "--", "--steps", "1"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    line = next(x for x in err.splitlines() if "on driver 550.144.03" in x)
    want = preflight_rows()[cell]
    said = set(re.findall(r"\[([a-z]+\.[a-z-]+)\]", line))
    assert said == blocking_codes(want), line
    assert want.status in line or "will not run" in line
    assert "GeForce RTX 4080 [10de:2704]" in line and "not identified" not in line


@pytest.mark.parametrize("cell", CELLS)
def test_verify_host_check_agrees_with_preflight(cell: str) -> None:
    host = read_this_host(ROOT)
    assert host["count"] == 1 and host["gpus"] == [
        {"name": "NVIDIA GeForce RTX 4080 [10de:2704]", "pci_id": 0x2704, "bus": "0000:01:00.0"}
    ]
    ws = open_workspace(REPO / "matrix.yaml", strict=False)
    c = ws.expansion.find(cell)
    assert c is not None
    image = {"ref": cell, "labels": lab.cell_labels(c, ws.matrix.project), "env": lab.env(c)}
    got = verdict_here({"image": image, "host_driver": host}, TODAY)
    want = preflight_rows()[cell]
    assert got is not None and (got.status, set(got.codes)) == (want.status, set(want.codes))


def test_an_unnamed_board_is_unknown_alone_never_no_gpu(tmp_path: Path) -> None:
    """Two boards: an H100 and one nothing names (no model line, an id in no table): the H100 is
    judged as an H100, the other is `gpu.unidentified` with its id and address."""
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n"
    )
    for bus, model, device in (("0000:18:00.0", "NVIDIA H100 80GB HBM3", "0x2330"),
                               ("0000:2a:00.0", "", "0x9999")):  # fmt: skip
        info = tmp_path / "proc/driver/nvidia/gpus" / bus / "information"
        info.parent.mkdir(parents=True)
        info.write_text(f"Model: \t\t {model}\nBus Location: \t {bus}\n")
        sysfs = tmp_path / "sys/bus/pci/devices" / bus
        sysfs.mkdir(parents=True)
        (sysfs / "vendor").write_text("0x10de\n")
        (sysfs / "device").write_text(f"{device}\n")
    host = hostfacts.read_host("podman", False, [], env={}, root=tmp_path)
    assert host.gpu_count == 2 and len(host.gpus) == 2
    h100, odd = host.gpus
    assert h100.catalogue is not None and h100.catalogue.key == "h100"
    assert not odd.known and "10de:9999" in odd.name and odd.bus == "0000:2a:00.0"
    ws = open_workspace(REPO / "matrix.yaml", strict=False)
    c = ws.expansion.find(CELLS[0])
    assert c is not None
    image = expected_image(CELLS[0], c, ws.matrix.project)
    verdict = check_driver(CELLS[0], image, host, True, dt.date(2026, 12, 2))
    assert verdict.verdict is not None and "gpu.unidentified" in verdict.verdict.codes
    assert "gpu.none-visible" not in verdict.verdict.codes
    assert "not identified: unidentified NVIDIA GPU (10de:9999) at 0000:2a:00.0" in verdict.message


def test_run_prints_a_hostile_model_name_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ESC sequence in the driver's model name (/proc) reaches run's message as `\\x1b`."""
    shutil.copytree(ROOT, tmp_path / "root")
    info = tmp_path / "root/proc/driver/nvidia/gpus/0000:01:00.0/information"
    info.write_text(info.read_text().replace("RTX 4080", "RTX 4080\x1b[2K\x1b[1Gok"))
    root = tmp_path / "root"
    monkeypatch.setattr(hostfacts, "read_host", functools.partial(hostfacts.read_host, root=root))
    main(["run", CELLS[0], "--matrix", str(REPO / "matrix.yaml"), "--engine", "podman",
          "--dry-run", "--gpus", "all", "--", "--steps", "1"])  # fmt: skip
    err = capsys.readouterr().err
    assert "\x1b" not in err and "RTX 4080\\x1b[2K\\x1b[1Gok [10de:2704]" in err
