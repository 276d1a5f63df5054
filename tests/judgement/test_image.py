"""The one image judgement (builder/judgement/image.py) on one driver and its GPUs: forward and
minor-version compatibility, architectures, kernel modules, requirements, lifecycle - as
preflight, compat, run, verify and the matrix call it (tests/judgement/test_one_verdict.py
drives them all over one grid)."""

from __future__ import annotations

import datetime as dt

import pytest
from packaging.version import Version

from builder.facts import drivers
from builder.facts.driver_version import DriverVersion
from builder.judgement.gpu_identity import identify
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState, requirements_from_env
from builder.judgement.severity import BLOCK
from tests.judgement.images import gpu, image, nvidia_12_8_1, on, pypi


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


def test_a_branch_known_to_its_cuda_major_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A branch NVIDIA publishes to its CUDA major only ("CUDA 14"): a 12.8 image is decided; a
    14.1 one is not (unknown, not broken, not extrapolated). R610-R620 are known to their minor
    now (builder/facts/drivers.py), so a branch past the table stands in."""
    entry = drivers.BranchCuda(650, Version("14"), drivers.LIFECYCLE_SOURCE, minor_known=False)
    monkeypatch.setitem(drivers.BRANCH_CUDA, 650, entry)
    judge.cache_clear()
    try:
        assert on(image(), "650.10.01", (gpu("h100"),)).status == "ok"
        v = on(image(requirements=("cuda>=14.1",), cuda="14.1.0"), "650.10.01", (gpu("h100"),))
        assert v.status == "unknown" and v.codes == ("require.cuda-unknown",)
    finally:
        judge.cache_clear()


def test_r620_reports_cuda_13_5() -> None:
    v = on(image(requirements=("cuda>=13.2",), cuda="13.2.0"), "620.70.06", (gpu("h100"),))
    assert v.status == "ok", v.reasons
    v = on(image(requirements=("cuda>=13.6",), cuda="13.6.0"), "620.70.06", (gpu("h100"),))
    assert v.status == "broken"


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
    assert requirements_from_env(env) == (("arch>=8.0", "cuda>=12.8"), "env")
    # the toolkit adds the legacy cuda>= even beside other NVIDIA_REQUIRE_* (GetRequirements)
    mixed = requirements_from_env({"CUDA_VERSION": "12.8.1", "NVIDIA_REQUIRE_ARCH": "arch>=8.0"})
    assert mixed[0] == ("arch>=8.0", "cuda>=12.8") and "legacy" in mixed[1]
    bad = requirements_from_env({"CUDA_VERSION": "12.8.1.0"})  # not semver: the hook fails
    assert bad[0] == () and "CUDA_VERSION='12.8.1.0'" in bad[1]
    legacy = requirements_from_env({"CUDA_VERSION": "11.8.0"})
    assert legacy == (("cuda>=11.8",), "implicit from CUDA_VERSION (legacy image)")
    assert requirements_from_env({"PATH": "/bin"}) == ((), "")


# --- the fact corrections of issue 28 (first and last branches, each with its source) ----------
def test_first_branches_follow_the_open_modules_readme() -> None:
    """GH200 (10de:2342) from 535.43.19, the RTX PRO 6000 Server (2bb5) from 575.57.08, the H200
    NVL (233b) from 565.57.01 while the H200 SXM (2335) keeps R550."""
    gh200 = identify(pci_id=0x2342, nvml_name="NVIDIA GH200 120GB")
    assert gh200.min_branch == 535
    assert "gpu.branch-too-old" not in on(image(), "535.216.03", (gh200,)).codes
    assert "gpu.branch-too-old" in on(image(), "530.30.02", (gh200,)).codes
    server = identify(pci_id=0x2BB5)
    assert server.min_branch == 575
    assert "gpu.branch-too-old" in on(image(), "570.124.06", (server,)).codes
    nvl, sxm = identify(pci_id=0x233B), identify(pci_id=0x2335)
    assert (nvl.min_branch, sxm.min_branch) == (565, 550)
    assert "gpu.branch-too-old" in on(image(), "550.144.03", (nvl,)).codes
    assert "gpu.branch-too-old" not in on(image(), "550.144.03", (sxm,)).codes
    for g in (gh200.catalogue, server.catalogue):
        assert g is not None and "open-gpu-kernel-modules/blob/5" in g.source.ref


@pytest.mark.parametrize(("pci", "last", "past"), [(0x102D, 470, "535.216.03"),
                                                   (0x13F2, 580, "595.71.05"),
                                                   (0x13BD, 580, "595.71.05")])  # fmt: skip
def test_kepler_and_maxwell_have_their_last_branch(pci: int, last: int, past: str) -> None:
    """Tesla K80 ends with R470, Tesla M60/M10 with R580: past it, the GPU is not driven."""
    board = identify(pci_id=pci)
    assert board.catalogue is not None and board.last_branch == last
    v = on(image(), past, (board,))
    assert "gpu.branch-dropped" in v.codes and v.status == "broken"


def test_a_titan_of_cc_7_0_is_not_a_tesla_v100() -> None:
    """`compat --cc 7.0 --brand TITAN`: a TITAN V cannot use cuda-compat (no forward
    compatibility), so it is not judged as the V100 the capability alone would suggest."""
    titan = identify(cc=(7, 0), nvml_brand="TITAN")
    assert titan.catalogue is None and titan.datacenter is False
    tesla = identify(cc=(7, 0), nvml_brand="Tesla")
    assert tesla.catalogue is not None and tesla.catalogue.key == "v100"


def test_a_quadro_gv100_is_judged_by_its_chip_with_its_pci_id() -> None:
    """Quadro GV100 (10de:1dba) is not in the catalogue: its chip (GV100) gives CC 7.0, so an
    image without sm_70 kernels has none for it - said with the board's id."""
    board = identify(pci_id=0x1DBA, nvml_name="Quadro GV100")
    assert board.cc == (7, 0) and board.chip is not None and board.libnvc_brand == "quadro"
    assert board.name == "Quadro GV100 [10de:1dba]"
    v = on(image(arch_list=("sm_80", "sm_90", "sm_100", "sm_120")), "570.124.06", (board,))
    assert "image.no-kernel-image" in v.codes and "gpu.not-in-catalogue" in v.codes
    assert any("[10de:1dba]" in r for r in v.reasons)
