"""Image impact: where images come from, and how one image is judged on one driver (the one
judgement, builder/judgement/image.py, as preflight, compat, run, verify and the matrix call
it; tests/preflight/test_one_verdict.py drives them all over one grid)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from builder.facts.cuda import CudaSource
from builder.facts.driver_version import DriverVersion
from builder.judgement.finding import Finding
from builder.judgement.gpu_identity import GpuIdentity, from_catalogue, identify
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState
from builder.judgement.severity import BLOCK, OK, SKIP, WARN
from builder.preflight import images as img
from builder.preflight.impact import Row, impact_check
from builder.preflight.parsers import LocalImage, podman_inspect
from tests.preflight.fakehost import FIXTURES

NVIDIA = (FIXTURES / "nvidia_require_cuda.yaml").read_text()
CU128_ARCHES = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def gpu(key: str, brand: str = "") -> GpuIdentity:
    return from_catalogue(key, brand)


def image(**kw: object) -> img.ImageRecord:
    base: dict[str, object] = {
        "name": "x", "source": "matrix", "requirements": (nvidia_12_8_1(),),
        "requirement_origin": "env", "arch_list": CU128_ARCHES, "cuda": "12.8.1",
        "driver_min": "570.124.06", "cuda_source": CudaSource.COMPAT,
    }  # fmt: skip
    base.update(kw)
    return img.ImageRecord(**base)  # type: ignore[arg-type]


def pypi(**kw: object) -> img.ImageRecord:
    """The Debian cu128 cell's image: CUDA from PyPI's wheels, no cuda-compat, no windows."""
    base: dict[str, object] = {"requirements": ("cuda>=12.8",), "cuda_source": CudaSource.PYPI}
    base.update(kw)
    return image(**base)


def nvidia_12_8_1() -> str:
    import yaml

    return str(yaml.safe_load(NVIDIA)[0]["value"])


def on(
    rec: img.ImageRecord, driver: str | None, gpus: tuple[GpuIdentity, ...], module: str = "open"
) -> ImageVerdict:
    state = DriverState(DriverVersion(driver), module) if driver else None
    return judge(rec.facts, state, gpus, None)


def test_cpu_and_no_driver() -> None:
    cpu = image(requirements=(), cuda=None, arch_list=())
    assert on(cpu, "570.124.06", (gpu("h100"),)).status == "cpu"
    assert on(image(), None, (gpu("h100"),)).status == "no-driver"


def test_native_forward_compat_and_same_minor() -> None:
    h100 = (gpu("h100"),)
    assert on(image(), "570.124.06", h100) == ImageVerdict("ok", ())
    fwd = on(image(), "550.144.03", h100)
    assert fwd.status == "fwd-compat" and fwd.codes == ("fwd.compat",)
    # a 12.8 driver runs every 12.8.x application: 570.26 and 570.86.15 are not MVC for 12.8.1
    for same_minor in ("570.26", "570.86.15"):
        assert on(image(), same_minor, h100).status == "ok"
    # the 12.8 image on every branch whose CUDA major is newer: R580 .. R620 (CUDA 13)
    for newer in ("580.65.06", "595.71.05", "610.10.01", "620.10.01"):
        assert on(image(), newer, h100).status == "ok", newer


def test_pypi_cuda_takes_minor_version_compatibility_not_forward_compatibility() -> None:
    """The Debian cu128 image ships no cuda-compat: below R570 it runs through minor-version
    compatibility (the legacy hook refusing its label), on a GeForce as on an H100."""
    for g in (gpu("h100"), gpu("rtx4090")):
        v = on(pypi(), "535.216.03", (g,))
        assert v.status == "mvc" and v.codes == ("require.hook-refuses", "cuda.mvc"), v
    # an image built before the label fix (windows, no compat): the windows are no path
    old = on(pypi(requirements=(nvidia_12_8_1(),)), "550.144.03", (gpu("h100"),))
    assert old.status == "mvc" and "require.window-without-compat" in old.codes
    # below the MVC floor of CUDA 12 (525.60.13): nothing runs it
    assert on(pypi(), "470.256.02", (gpu("h100"),)).status == "broken"


def test_forward_compat_needs_a_data_center_gpu() -> None:
    pro = on(image(), "565.57.01", (gpu("rtx-pro-6000", "NVIDIA RTX"),))
    assert pro.status == "broken"
    assert {"fwd.ineligible-gpu", "gpu.branch-too-old"} <= set(pro.codes)
    server = on(image(), "565.57.01", (gpu("rtx-pro-6000-server", "NVIDIA RTX"),))
    assert "fwd.ineligible-gpu" not in server.codes and "fwd.compat" in server.codes
    geforce = on(image(), "550.144.03", (gpu("rtx4090", "GeForce"),))
    assert geforce.status == "broken"
    assert set(geforce.codes) >= {"require.unsatisfied", "fwd.ineligible-gpu"}


def test_arch_list_against_compute_capability() -> None:
    hopper_only = image(arch_list=("sm_80", "sm_90"))
    b200 = on(hopper_only, "570.124.06", (gpu("b200"),))
    assert b200.status == "broken" and b200.codes == ("image.no-kernel-image",)
    assert "no kernel image for NVIDIA B200 (sm_100)" in b200.reasons[0]
    assert on(image(), "580.65.06", (gpu("b300"),)).status == "ok"  # sm_100 SASS runs on 10.3
    unknown = on(image(arch_list=None), "570.124.06", (gpu("h100"),))
    assert unknown.status == "ok" and unknown.codes == ("image.arch-unknown",)


def test_kernel_modules_and_branches_per_gpu() -> None:
    assert on(image(), "570.124.06", (gpu("b200"),), "proprietary").codes == (
        "gpu.needs-open-modules",
    )
    assert on(image(), "570.124.06", (gpu("h100"),), "proprietary").status == "ok"
    v100 = (gpu("v100"),)
    volta = image(arch_list=("sm_70", "sm_80"))
    assert "gpu.open-unsupported" in on(volta, "580.65.06", v100, "open").codes
    assert on(volta, "580.65.06", v100, "proprietary").status == "ok"
    dropped = on(volta, "595.71.05", v100, "proprietary")
    assert dropped.status == "broken" and "gpu.branch-dropped" in dropped.codes
    assert "driver.proprietary-removed" in on(image(), "620.10.01", (gpu("h100"),),
                                              "proprietary").codes  # fmt: skip


def test_a_b200_known_only_by_its_pci_id_and_an_unidentified_board() -> None:
    b200 = identify(pci_id=0x2901, pci_text="")  # lspci: "NVIDIA Corporation Device [10de:2901]"
    assert b200.catalogue is not None and b200.catalogue.key == "b200"
    assert on(image(), "550.144.03", (b200,), "proprietary").status == "broken"
    newer = identify(pci_id=0x29FE)  # an unlisted id of the GB100 block: still Blackwell
    assert newer.needs_open_modules and newer.cc == (10, 0)
    nothing = identify(pci_id=0x5F00)
    v = on(image(), "580.65.06", (nothing,))
    assert v.codes == ("gpu.unidentified",) and v.severity is BLOCK


def test_every_requirement_must_hold_and_a_bad_one_breaks() -> None:
    two = image(requirements=("cuda>=12.8", "arch>=10.0"))
    hopper = on(two, "570.124.06", (gpu("h100"),))
    assert hopper.status == "broken" and "no term of 'arch>=10.0' holds" in hopper.reasons[0]
    assert on(two, "570.124.06", (gpu("b200"),)).status == "ok"
    bad = on(image(requirements=("cuda>=twelve",)), "570.124.06", (gpu("h100"),))
    assert bad.status == "broken" and "invalid expression" in bad.reasons[0]
    assert "digits and dots only" in bad.reasons[0]


def test_a_branch_known_to_its_cuda_major_only() -> None:
    """R620 reports "CUDA 13": a 12.8 image is decided; a 13.1 one is not (unknown, not
    broken, not extrapolated)."""
    assert on(image(), "620.10.01", (gpu("h100"),)).status == "ok"
    v = on(image(requirements=("cuda>=13.1",), cuda="13.1.0"), "620.10.01", (gpu("h100"),))
    assert v.status == "unknown" and v.codes == ("require.cuda-unknown",)


def test_lifecycle_is_part_of_the_verdict_with_a_day() -> None:
    day = dt.date(2026, 12, 1)
    v = judge(image().facts, DriverState(DriverVersion("550.144.03"), "open"), (gpu("h100"),), day)
    assert "driver.unlisted" in v.codes and v.status == "fwd-compat"
    strict = judge(image().facts, DriverState(DriverVersion("550.144.03"), "open"), (), day,
                   strict=True)  # fmt: skip
    assert strict.severity is BLOCK


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
    v = on(rec, "570.124.06", (gpu("h100"),))
    assert "require.disabled" in v.codes


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


_SEVERE = {"ok": None, "fwd-compat": ("fwd.compat", WARN), "broken": ("require.unsatisfied", BLOCK)}


def verdict(status: str) -> ImageVerdict:
    how = _SEVERE.get(status)
    found = (Finding("image.compat", how[1], status, reason=how[0]),) if how else ()
    return ImageVerdict(status, found)


def row(now: str, after: str | None) -> Row:
    return Row(image(), verdict(now), verdict(after) if after else None)


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
    target = DriverVersion("570.124.06")
    assert impact_check([row("ok", "ok")], target, []).severity is OK
    assert impact_check([row("ok", "fwd-compat")], target, []).severity is WARN
    breaks = impact_check([row("ok", "broken"), row("ok", "ok")], target, [])
    assert breaks.severity is BLOCK and "1 work now and break" in breaks.message
    assert breaks.reason == "require.unsatisfied"  # the fleet counts hosts per reason code
    assert impact_check([row("no-driver", None)], None, []).severity is SKIP
    assert impact_check([], target, ["no matrix"]).severity is SKIP
