"""verify's word on the image and this host (builder/verify/host_compat.py): the one image x host
judgement on what verify reads, and whether NVIDIA_REQUIRE_CUDA claims only what the image has."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from builder.spec import labels as lab
from builder.verify.host_compat import compat_claim_problem, read_this_host, verdict_here
from builder.workspace import open_workspace

REPO = Path(__file__).resolve().parents[2]
DAY = dt.date(2026, 12, 1)


def ctx_of(cell_name: str, driver: str | None, gpus: list[dict[str, str]]) -> dict[str, object]:
    ws = open_workspace(REPO / "matrix.yaml", strict=False)
    cell = ws.expansion.find(cell_name)
    assert cell is not None
    return {
        "image": {"ref": cell_name, "id": "sha256:" + "1" * 64,
                  "labels": lab.cell_labels(cell, ws.matrix.project), "env": lab.env(cell)},
        "host_driver": {"driver": driver, "flavour": "open", "gpus": gpus},
    }  # fmt: skip


def test_the_label_claims_forward_compatibility_only_with_cuda_compat_inside() -> None:
    ws = open_workspace(REPO / "matrix.yaml", strict=False)
    el9 = ws.expansion.find("rocky9-cu128-py3.12-torch2.11.0-runtime")
    debian = ws.expansion.find("debian12-cu128-py3.11-torch2.9.1-runtime")
    assert el9 is not None and debian is not None
    with_windows = lab.env(el9)["NVIDIA_REQUIRE_CUDA"]
    assert compat_claim_problem(with_windows, compat_libs=True) == ""
    assert "ships no cuda-compat" in compat_claim_problem(with_windows, compat_libs=False)
    # the PyPI-CUDA image's label claims no window: nothing to hold it to
    assert lab.env(debian)["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.8"
    assert compat_claim_problem("cuda>=12.8", compat_libs=False) == ""


def test_verify_judges_the_image_on_this_host_as_run_and_preflight_do() -> None:
    b200 = [{"arch": "10.0", "brand": "unknown", "name": "NVIDIA B200"}]
    ok = verdict_here(ctx_of("rocky9-cu128-py3.12-torch2.11.0-runtime", "580.65.06", b200), DAY)
    assert ok is not None and ok.status == "ok"
    old = verdict_here(ctx_of("rocky9-cu128-py3.12-torch2.11.0-runtime", "550.144.03", b200), DAY)
    assert old is not None and "gpu.branch-too-old" in old.codes
    assert verdict_here(ctx_of("rocky9-cu128-py3.12-torch2.11.0-runtime", None, []), DAY) is None


def test_this_host_is_read_from_proc(tmp_path: Path) -> None:
    (tmp_path / "proc/driver/nvidia/gpus/0000:18:00.0").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n"
    )
    (tmp_path / "proc/driver/nvidia/gpus/0000:18:00.0/information").write_text(
        "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\n"
    )
    got = read_this_host(tmp_path)
    assert got["driver"] == "580.65.06" and got["flavour"] == "open"
    assert got["gpus"] == [{"name": "NVIDIA H100 80GB HBM3", "pci_id": None, "bus": "0000:18:00.0"}]
