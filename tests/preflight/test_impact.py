"""Image impact: where images come from, and how one image is judged on one driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight import images as img
from builder.preflight.host_gpus import HostGpu
from builder.preflight.impact import ImageVerdict, Row, impact_check, judge_image
from builder.preflight.parsers import LocalImage, podman_inspect
from tests.preflight.fakehost import FIXTURES

NVIDIA = (FIXTURES / "nvidia_require_cuda.yaml").read_text()
CU128_ARCHES = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def gpu(key: str, brand: str | None = None) -> HostGpu:
    g = gpu_rules.GPUS[key]
    nvml = brand or ("GeForce" if g.brand == "geforce" else "NVIDIA")
    return HostGpu(0, f"GPU-{key}", g.name, g.cc, "0:1:0.0", "Enabled", nvml,
                   host_rules.libnvc_brand(nvml), "N/A", g)  # fmt: skip


def image(**kw: object) -> img.ImageRecord:
    base: dict[str, object] = {
        "name": "x", "source": "matrix", "requirements": (nvidia_12_8_1(),),
        "requirement_origin": "env", "arch_list": CU128_ARCHES, "cuda": "12.8.1",
        "driver_min": "570.124.06",
    }  # fmt: skip
    base.update(kw)
    return img.ImageRecord(**base)  # type: ignore[arg-type]


def nvidia_12_8_1() -> str:
    import yaml

    return str(yaml.safe_load(NVIDIA)[0]["value"])


def d(text: str) -> DriverVersion:
    return DriverVersion(text)


def test_cpu_and_no_driver() -> None:
    cpu = image(requirements=(), cuda=None, arch_list=())
    assert judge_image(cpu, d("570.124.06"), "open", [gpu("h100")]).status == "cpu"
    assert judge_image(image(), None, None, [gpu("h100")]).status == "no-driver"


def test_native_forward_compat_and_mvc() -> None:
    h100 = [gpu("h100")]
    assert judge_image(image(), d("570.124.06"), "open", h100) == ImageVerdict("ok", ())
    fwd = judge_image(image(), d("550.144.03"), "open", h100)
    assert fwd.status == "fwd-compat"
    assert not any("not in NVIDIA's forward-compatibility matrix" in r for r in fwd.reasons)
    mvc = judge_image(image(), d("570.86.15"), "open", h100)  # R570 but below 12.8.1's 570.124.06
    assert mvc.status == "mvc" and "minor-version compatibility" in mvc.reasons[0]


def test_forward_compat_needs_a_data_center_gpu() -> None:
    # RTX PRO 6000 (brand NVIDIA RTX -> "unknown" for libnvidia-container) passes the label's
    # window, but the catalogue says it cannot use cuda-compat; and it needs R570 anyway.
    pro = judge_image(image(), d("565.57.01"), "open", [gpu("rtx-pro-6000", "NVIDIA RTX")])
    assert pro.status == "broken"
    assert any("cannot use cuda-compat" in r for r in pro.reasons)
    assert any("needs driver branch R570+" in r for r in pro.reasons)


def test_arch_list_against_compute_capability() -> None:
    hopper_only = image(arch_list=("sm_80", "sm_90"))
    b200 = judge_image(hopper_only, d("570.124.06"), "open", [gpu("b200")])
    assert b200.status == "broken" and "no kernel image for NVIDIA B200 (sm_100)" in b200.reasons[0]
    b300 = judge_image(image(), d("580.65.06"), "open", [gpu("b300")])  # sm_100 SASS runs on 10.3
    assert b300.status == "ok"
    unknown = judge_image(image(arch_list=None), d("570.124.06"), "open", [gpu("h100")])
    assert unknown.status == "ok" and "arch list unknown" in unknown.reasons[0]


def test_open_module_rule_for_blackwell() -> None:
    verdict = judge_image(image(), d("570.124.06"), "proprietary", [gpu("b200")])
    assert verdict.status == "broken" and "open kernel modules" in verdict.reasons[0]
    assert judge_image(image(), d("570.124.06"), "proprietary", [gpu("h100")]).status == "ok"


def test_every_requirement_must_hold_and_a_bad_one_breaks() -> None:
    two = image(requirements=("cuda>=12.8", "arch>=10.0"))
    hopper = judge_image(two, d("570.124.06"), "open", [gpu("h100")])
    assert hopper.status == "broken" and "no term of 'arch>=10.0' holds" in hopper.reasons[0]
    assert judge_image(two, d("570.124.06"), "open", [gpu("b200")]).status == "ok"
    bad = judge_image(image(requirements=("cuda>=twelve",)), d("570.124.06"), "open", [gpu("h100")])
    assert bad.status == "broken" and "invalid expression" in bad.reasons[0]
    assert "digits and dots only" in bad.reasons[0]


def test_requirements_from_env_follow_the_toolkit() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.8", "NVIDIA_REQUIRE_JETPACK": "csv-mounts=all",
           "NVIDIA_REQUIRE_ARCH": "arch>=8.0"}  # fmt: skip
    assert img.requirements_from_env(env) == (("arch>=8.0", "cuda>=12.8"), "env")
    # the toolkit adds the legacy cuda>= even beside other NVIDIA_REQUIRE_* (GetRequirements)
    mixed = img.requirements_from_env(
        {"CUDA_VERSION": "12.8.1", "NVIDIA_REQUIRE_ARCH": "arch>=8.0"}
    )
    assert mixed[0] == ("arch>=8.0", "cuda>=12.8") and "legacy" in mixed[1]
    bad = img.requirements_from_env({"CUDA_VERSION": "12.8.1.0"})  # not semver: the hook fails
    assert bad[0] == () and "CUDA_VERSION='12.8.1.0'" in bad[1]
    legacy = img.requirements_from_env({"CUDA_VERSION": "11.8.0"})
    assert legacy == (("cuda>=11.8",), "implicit from CUDA_VERSION (legacy image)")
    assert img.requirements_from_env({"PATH": "/bin"}) == ((), "")


def test_local_images_from_the_h100_fixture() -> None:
    inspected = podman_inspect((FIXTURES / "el9-h100" / "out" / "podman-inspect.txt").read_text())
    records, skipped = img.from_local(inspected)
    assert skipped == 1  # the plain Rocky base asks for no GPU
    ours, nvidia = records
    assert ours.cell == "rocky9-cu128-py3.12-torch2.11.0-runtime" and ours.arch_list == CU128_ARCHES
    assert nvidia.requirements == (nvidia_12_8_1(),) and nvidia.arch_list is None
    disabled = LocalImage(
        "ab" * 32, ("x",), {}, {"CUDA_VERSION": "12.8.1", "NVIDIA_DISABLE_REQUIRE": "true"}
    )
    rec = img.from_local([disabled])[0][0]
    assert rec.disable_require and rec.requirements == ("cuda>=12.8",)
    v = judge_image(rec, d("570.124.06"), "open", [gpu("h100")])
    assert any("NVIDIA_DISABLE_REQUIRE" in r for r in v.reasons)


def test_lock_is_read_tolerantly(tmp_path: Path, matrix_images: list[img.ImageRecord]) -> None:
    missing, notes = img.from_lock(tmp_path / "lock.json")
    assert missing == [] and "cannot read" in notes[0]
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert "not JSON" in img.from_lock(bad)[1][0]
    noschema = tmp_path / "odd.json"
    noschema.write_text(json.dumps({"schema": 9}))
    assert "no `cells` mapping (schema 9)" in img.from_lock(noschema)[1][0]
    cell = matrix_images[0].cell
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"schema": 1, "cells": {
        cell: {"image_id": "sha256:1", "tags": [f"localhost/trainimg:{cell}"], "cuda": "12.8.1",
               "labels": {"io.trainimg.cuda.arch-list": "sm_90", "io.trainimg.cell": cell}},
        "old-cell": {"tags": [], "cuda": "12.8.1"},
        "broken-record": "nope",
    }}))  # fmt: skip
    records, notes = img.from_lock(lock)
    assert [r.cell for r in records] == [cell, "old-cell"]
    assert "cells.broken-record is not an object" in notes[0]
    assert records[0].requirement_origin.startswith("derived from CUDA 12.8.1")
    merged = img.merge(matrix_images, records)
    first = merged[0]
    assert first.source == "matrix+lock" and first.arch_list == ("sm_90",)  # what was built
    assert merged[-1].cell == "old-cell" and merged[-1].source == "lock"
    assert len(merged) == len(matrix_images) + 1


def row(now: str, after: str | None) -> Row:
    return Row(image(), ImageVerdict(now), ImageVerdict(after) if after else None)


@pytest.mark.parametrize(
    ("now", "after", "change"),
    [
        ("ok", "broken", "breaks"),
        ("ok", "fwd-compat", "degrades"),
        ("broken", "ok", "starts working"),
        ("fwd-compat", "ok", "improves"),
        ("ok", "ok", "unchanged"),
        ("no-driver", "ok", "new"),
        ("ok", None, ""),
    ],
)
def test_change(now: str, after: str | None, change: str) -> None:
    assert row(now, after).change == change


def test_impact_check_severity() -> None:
    target = d("570.124.06")
    assert impact_check([row("ok", "ok")], target, []).severity is OK
    assert impact_check([row("ok", "fwd-compat")], target, []).severity is WARN
    breaks = impact_check([row("ok", "broken"), row("ok", "ok")], target, [])
    assert breaks.severity is BLOCK and "1 work now and break" in breaks.message
    assert impact_check([row("no-driver", None)], None, []).severity is SKIP
    assert impact_check([], target, ["no matrix"]).severity is SKIP
