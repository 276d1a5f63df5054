"""`trainimg compat`: one image, one driver, one GPU, no host; the same evaluator as preflight."""

from __future__ import annotations

import json
from typing import Any

import pytest

from builder.cli import main
from tests.preflight.conftest import PREFLIGHT_MATRIX

CELL = "rocky9-cu128-py3.12-torch2.11.0-runtime"


# A day every branch these tests name was supported (R570 reached its end of life 2026-02-28):
# the lifecycle is part of the verdict (test_the_lifecycle_is_compat_s_too).
BEFORE_R570_EOL = "2025-06-01"


def compat(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    today = () if "--today" in args else ("--today", BEFORE_R570_EOL)
    code = main(["compat", "--matrix", str(PREFLIGHT_MATRIX), *today, *args])
    out, err = capsys.readouterr()
    return code, out, err


def codes(doc: dict[str, Any]) -> list[str]:
    """The reason codes of compat's JSON verdict (its findings, paired with their messages)."""
    return [f["code"] for f in doc["verdict"]["findings"]]


def test_a_requirement_on_595_is_judged_with_cuda_13_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = compat(capsys, "--require", "cuda>=13.1", "--driver", "595.71.05", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verdict"]["status"] == "ok" and doc["cuda"] == "13.2"
    assert doc["terms"] == [
        {"requirement": "cuda>=13.1", "decided_by": "cuda>=13.1", "holds": True}
    ]
    code, out, _ = compat(capsys, "--require", "cuda>=13.1", "--driver", "580.65.06")
    assert code == 1 and "unsatisfied condition: cuda>=13.1" in out


@pytest.mark.parametrize(("driver", "cuda"), [("610.57.04", "13.3"), ("615.38.02", "13.4"),
                                              ("620.70.06", "13.5")])  # fmt: skip
def test_the_2026_branches_know_their_cuda_minor(
    capsys: pytest.CaptureFixture[str], driver: str, cuda: str
) -> None:
    """R610+ are known to their minor (NVIDIA's redistrib manifests): cuda>=13.2 holds on all
    three, where it was "unknown ... update your driver" while 595.71.05 was ok."""
    today = ("--today", "2026-12-02")
    code, out, _ = compat(capsys, "--require", "cuda>=13.2", "--driver", driver, *today, "--json")
    doc = json.loads(out)
    assert doc["cuda"] == cuda and doc["verdict"]["status"] == "ok", doc
    assert code == (0 if driver[:3] != "610" else 3)  # R610 is past its end of life: a warning
    code, out, _ = compat(capsys, "--require", "cuda>=13.6", "--driver", driver, *today)
    assert code == 1 and "unsatisfied condition: cuda>=13.6" in out


def test_a_cell_on_geforce_and_on_a_data_center_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = compat(capsys, CELL, "--driver", "565.57.01", "--gpu", "rtx4090")
    assert code == 1 and "verdict: broken" in out and "804" in out
    code, out, _ = compat(capsys, CELL, "--driver", "565.57.01", "--gpu", "h100", "--json")
    doc = json.loads(out)
    assert code == 3 and doc["verdict"]["status"] == "fwd-compat"
    (term,) = doc["terms"]
    assert term["holds"] and term["decided_by"] == "brand=unknown,driver>=565,driver<566"
    code, _, _ = compat(capsys, CELL, "--driver", "570.124.06", "--cc", "9.0")
    assert code == 0


def test_ngc_server_ready_rtx_gets_forward_compatibility_its_workstation_twin_does_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a CUDA 13.0 image on R575 (CUDA 12.9) through a brand window: forward compatibility.
    # libnvidia-container reports the "NVIDIA RTX" brand as Unknown. The Server Edition
    # (10de:2bb5) is first listed by the 575.57.08 open-modules README: R570 does not drive it.
    req = "cuda>=13.0 brand=unknown,driver>=575,driver<576"
    server = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    code, out, _ = compat(
        capsys, "--require", req, "--driver", "575.57.08", "--gpu", server, "--brand",
        "NVIDIA RTX", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    assert doc["verdict"]["status"] == "fwd-compat" and code == 3, doc
    assert doc["gpu"]["libnvidia_container_brand"] == "unknown"
    code, out, _ = compat(
        capsys, "--require", req, "--driver", "575.57.08", "--gpu", "rtx-pro-6000", "--brand",
        "NVIDIA RTX", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 1 and any("804" in f["message"] for f in doc["verdict"]["findings"]), doc
    code, out, _ = compat(capsys, "--require", req, "--driver", "570.124.06", "--gpu", server,
                          "--json")  # fmt: skip
    assert code == 1 and "gpu.branch-too-old" in codes(json.loads(out))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--driver", "570.124.06"), "give IMAGE|CELL or --require"),
        ((CELL, "--require", "cuda>=12.8", "--driver", "570.124.06"), "one of them"),
        (("no-such-cell-or-image", "--driver", "570.124.06"), "is not a matrix cell"),
        (("--require", "cuda>=12.8", "--driver", "570.124.06", "--gpu", "v100x"), "not a GPU"),
        (("--require", "cuda>=12.8", "--driver", "570.124.06", "--cc", "nine"), "not a compute"),
        (
            ("--require", "cuda>=12.8", "--driver", "570.124.06", "--brand", "Tesla"),
            "--brand needs",
        ),
    ],
)
def test_bad_input_is_exit_2(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, out, err = compat(capsys, *args)
    assert code == 2 and out == "" and message in err and "Traceback" not in err


@pytest.mark.parametrize("bad", ["0570.124.06", "057.124.06", "570.1234.06", "570.124.06.1"])
def test_a_bad_driver_is_an_argument_error(capsys: pytest.CaptureFixture[str], bad: str) -> None:
    """What matrix.yaml's min_version refuses, --driver refuses too: one grammar."""
    with pytest.raises(SystemExit) as exc:
        compat(capsys, "--require", "cuda>=12.8", "--driver", bad)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert f"argument --target-driver/--driver: not a driver version: {bad!r}" in err
    assert "a three-digit branch without a leading zero, parts of 1-3 digits" in err


def test_a_tag_of_images_lock_json_is_an_image(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    import shutil
    from pathlib import Path

    root = Path(str(tmp_path))
    shutil.copy(PREFLIGHT_MATRIX, root / "matrix.yaml")
    (root / "images").mkdir()
    record = {
        "tags": ["localhost/trainimg:cu128"],
        "cuda": "12.8.1",
        "labels": {"io.trainimg.cuda.arch-list": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"},
    }
    lock = {"schema": 1, "cells": {CELL: record}}
    (root / "images" / "lock.json").write_text(json.dumps(lock))
    code = main(["compat", "--matrix", str(root / "matrix.yaml"), "--today", BEFORE_R570_EOL,
                 "localhost/trainimg:cu128",
                 "--driver", "570.124.06", "--gpu", "b200", "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr()[0])
    assert code == 0 and doc["image"]["image"] == "localhost/trainimg:cu128"
    assert doc["image"]["source"] == "matrix+lock" and doc["verdict"]["status"] == "ok"


def test_the_lifecycle_is_compat_s_too(capsys: pytest.CaptureFixture[str]) -> None:
    """The same standing of a branch on the same day as preflight and the matrix give it."""
    code, out, _ = compat(
        capsys, CELL, "--driver", "570.124.06", "--gpu", "h100", "--today", "2026-12-01", "--json"
    )
    doc = json.loads(out)
    assert code == 3 and doc["verdict"]["status"] == "ok"
    assert "driver.eol" in codes(doc)


def test_nvml_names_the_module_flavour_and_a_v100(capsys: pytest.CaptureFixture[str]) -> None:
    """A real NVML name is a GPU; a Volta board on the open modules, or on a branch past R580,
    does not run."""
    code, out, _ = compat(
        capsys, "--require", "cuda>=12.2", "--driver", "580.65.06", "--gpu",
        "Tesla V100-SXM2-16GB", "--json",
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 1 and "gpu.open-unsupported" in codes(doc), doc
    assert doc["gpu"]["identified_by"] == "NVML name" and doc["kernel_module"] == "open"
    code, out, _ = compat(
        capsys, "--require", "cuda>=12.2", "--driver", "580.65.06", "--module", "proprietary",
        "--gpu", "v100",
    )  # fmt: skip
    assert code == 0, out
    code, out, _ = compat(
        capsys, "--require", "cuda>=12.2", "--driver", "595.71.05", "--module", "proprietary",
        "--gpu", "v100",
    )  # fmt: skip
    assert code == 1 and "[gpu.branch-dropped]" in out


def test_compat_takes_preflight_s_flag_names_and_keeps_its_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One vocabulary: --target-driver/--target-module (preflight's) judge what --driver/--module
    (compat's own, kept) do."""
    own = compat(capsys, CELL, "--driver", "580.65.06", "--module", "proprietary", "--json")
    shared = compat(
        capsys, CELL, "--target-driver", "580.65.06", "--target-module", "proprietary", "--json"
    )
    assert own == shared and json.loads(own[1])["kernel_module"] == "proprietary"
