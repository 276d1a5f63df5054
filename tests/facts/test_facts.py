"""The encoded facts and the small functions over them."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from builder.facts import cuda, drivers, gpus, torch_builds
from builder.facts.driver_version import DriverVersion
from builder.matrix import validate


def test_cuda_12_8_minimum_drivers_keep_nvidias_spelling() -> None:
    assert str(cuda.release(Version("12.8.1")).min_driver) == "570.124.06"
    assert str(cuda.release(Version("12.8")).min_driver) == "570.26"  # 12.8 means the GA
    assert cuda.release(Version("12.8.1")).min_driver > cuda.release(Version("12.8.0")).min_driver


def test_unknown_cuda_release_names_the_known_ones() -> None:
    with pytest.raises(cuda.UnknownCudaRelease, match=r"12\.8\.2 .*known: 12\.0\.0, .*12\.8\.1"):
        cuda.release(Version("12.8.2"))


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        ("570.124.06", "12.8"),
        ("565.57.01", "12.7"),
        ("550.54.14", "12.4"),
        ("580.65.06", "13.0"),
        ("590.48.01", "13.1"),  # nvidia-smi's banner on 590.48.01
        ("595.71.05", "13.2"),  # and on 595.71.05
        ("510.54", "11.6"),
        ("470.256.02", "11.4"),
    ],
)
def test_driver_cuda_version(driver: str, expected: str) -> None:
    assert cuda.driver_cuda_version(DriverVersion(driver)) == Version(expected)


def test_driver_older_than_any_known_branch_has_no_cuda_version() -> None:
    assert cuda.driver_cuda_version(DriverVersion("390.157")) is None


def test_a_branch_past_the_table_is_never_extrapolated() -> None:
    assert cuda.driver_cuda_version(DriverVersion("640.1")) is None


@pytest.mark.parametrize(("branch", "minor"), [(590, "13.1"), (595, "13.2"), (610, "13.3"),
                                              (615, "13.4"), (620, "13.5")])  # fmt: skip
def test_the_2026_branches_know_their_cuda_minor(branch: int, minor: str) -> None:
    entry = drivers.branch_cuda(branch)
    assert entry is not None and entry.minor_known and entry.cuda == Version(minor)
    assert entry.source.ref.startswith("https://")


def test_the_2026_branches_stand_where_nvidia_puts_them() -> None:
    day = dt.date(2026, 12, 2)
    states = {b: drivers.branch_status(b, day).state for b in (590, 595, 610, 615, 620)}
    # R590 is a new feature branch R610 replaced; R615 is the current one (no end-of-life date)
    assert states == {590: "unlisted", 595: "ending", 610: "eol", 615: "supported",
                      620: "supported"}  # fmt: skip
    assert "R610 shipped" in drivers.branch_status(590, day).text
    assert drivers.branch_status(620, day).eol == dt.date(2029, 9, 30)
    assert drivers.PROPRIETARY_REMOVED_FROM_BRANCH == 620


def test_cuda_tag() -> None:
    assert cuda.cuda_tag(Version("12.8.1")) == "cu128"


@given(
    st.tuples(st.integers(0, 899), st.integers(0, 999), st.integers(0, 999)),
    st.tuples(st.integers(0, 899), st.integers(0, 999), st.integers(0, 999)),
)
def test_driver_version_orders_numerically_and_prints_as_written(
    a: tuple[int, int, int], b: tuple[int, int, int]
) -> None:
    ta = f"{a[0] + 100}.{a[1]}.{a[2]:02d}"
    tb = f"{b[0] + 100}.{b[1]}.{b[2]:02d}"
    va, vb = DriverVersion(ta), DriverVersion(tb)
    assert str(va) == ta
    assert (va < vb) == ((a[0], a[1], a[2]) < (b[0], b[1], b[2]))


@pytest.mark.parametrize(
    "bad",
    ["", "5", "10", "570", "abc", "057.124.06", "0570.124.06", "570.1234.06", "5700.1",
     "570.124.06.1", "570.1.2.3.4", "570;rm", "570.124.06\n", " 570.124.06"],
)  # fmt: skip
def test_driver_version_rejects_non_versions(bad: str) -> None:
    with pytest.raises(ValueError, match="not a driver version"):
        DriverVersion(bad)
    assert not validate.DRIVER_VERSION.matches(bad)  # the matrix refuses it too


@pytest.mark.parametrize("text", ["570.26", "570.124.06", "580.65.06", "390.157", "999.999.999"])
def test_matrix_and_parser_take_the_same_driver_versions(text: str) -> None:
    assert validate.DRIVER_VERSION.matches(text)
    assert str(DriverVersion(text)) == text == str(DriverVersion.parse(f" {text}\n"))


def test_a_branch_start_is_below_every_release_of_the_branch() -> None:
    start = DriverVersion.branch_start(580)
    assert str(start) == "580"
    assert (
        DriverVersion("579.999.99") < start < DriverVersion("580.0.01") < DriverVersion("580.65.06")
    )
    with pytest.raises(ValueError, match="not a driver branch"):
        DriverVersion.branch_start(57)


cc = st.tuples(st.integers(3, 13), st.integers(0, 9))


@given(cc, cc)
def test_sass_never_runs_across_majors(sass: gpus.CC, device: gpus.CC) -> None:
    if sass[0] != device[0]:
        assert not gpus.sass_runs_on(sass, device)
    else:
        assert gpus.sass_runs_on(sass, device) == (device[1] >= sass[1])


@given(cc)
def test_sass_runs_on_its_own_arch(c: gpus.CC) -> None:
    assert gpus.sass_runs_on(c, c)


def test_blackwell_coverage_of_cu128_wheels() -> None:
    arches = torch_builds.CU128_ARCH_LIST["2.9"]
    assert gpus.covering_sass(arches, gpus.GPUS["b200"].cc) == "sm_100"
    assert gpus.covering_sass(arches, gpus.GPUS["b300"].cc) == "sm_100"  # 10.3: same major
    assert gpus.covering_sass(arches, gpus.GPUS["rtx5090"].cc) == "sm_120"
    assert gpus.covering_sass(arches, gpus.GPUS["gb10"].cc) == "sm_120"  # 12.1
    assert (
        gpus.covering_sass(("sm_100a",), (10, 0)) is None
    )  # arch-specific cubins are not portable
    assert gpus.covering_sass(("sm_90",), (10, 0)) is None


@pytest.mark.parametrize(
    ("text", "cc_"),
    [("sm_100", (10, 0)), ("sm_90a", (9, 0)), ("compute_120", (12, 0)), ("sm_103f", (10, 3))],
)
def test_parse_sm(text: str, cc_: gpus.CC) -> None:
    assert gpus.parse_sm(text) == cc_


@pytest.mark.parametrize("bad", ["sm_", "sm_x0", "gfx90a", "sm_9"])
def test_parse_sm_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not an arch name"):
        gpus.parse_sm(bad)


def test_torch_arch_lists() -> None:
    assert torch_builds.arch_list(Version("2.9.1+cu128"), "cuda") == (
        "sm_70",
        "sm_75",
        "sm_80",
        "sm_86",
        "sm_90",
        "sm_100",
        "sm_120",
    )
    assert "sm_70" not in (torch_builds.arch_list(Version("2.11.0"), "cuda") or ())
    assert torch_builds.arch_list(Version("2.13.0+cpu"), "cpu") == ()
    assert torch_builds.arch_list(Version("2.12.0"), "cuda") is None


def test_cu128_stops_at_2_11() -> None:
    assert torch_builds.has_cu128(Version("2.11.0"))
    assert not torch_builds.has_cu128(Version("2.12.0"))
    assert not torch_builds.has_cu128(Version("2.6.0"))


def test_python_tags() -> None:
    assert "3.9" in (torch_builds.python_tags(Version("2.8.0")) or ())
    assert "3.9" not in (torch_builds.python_tags(Version("2.9.1")) or ())
    assert "3.14" in (torch_builds.python_tags(Version("2.10.0")) or ())


@pytest.mark.parametrize(
    ("torch", "ao"),
    [
        ("2.8.0", "0.13.0"),
        ("2.9.0", "0.14.1"),
        ("2.9.1+cu128", "0.15.0"),
        ("2.10.0", "0.16.0"),
        ("2.11.0", "0.17.0"),
        ("2.11.1", "0.17.0"),
        ("2.13.0+cpu", "0.18.0"),
        ("2.7.1", None),
    ],
)
def test_torchao_pairing(torch: str, ao: str | None) -> None:
    assert torch_builds.torchao_for(Version(torch)) == ao


def test_every_gpu_has_a_source_and_open_modules_on_blackwell() -> None:
    for g in gpus.GPUS.values():
        assert g.source.ref
        if g.cc[0] >= 10 or g.key == "gh200":
            assert g.needs_open_modules, g.key


def test_el10_host_facts_share_the_image_facts_dates() -> None:
    """A Rocky 10 or CentOS Stream 10 host ends when its image OS does: one date, one place."""
    from builder.facts.host import host_os_lifecycle
    from builder.facts.oses import DISTROS

    for os_id, key in (("rocky", "rocky10"), ("centos", "centos-stream10")):
        known = host_os_lifecycle(os_id, "10.1")
        assert known is not None and known.family == "el10", os_id
        assert (known.eol, known.source) == (DISTROS[key].eol, DISTROS[key].eol_source)
    assert host_os_lifecycle("rocky", "11.0") is None


def test_cuda13_wheels_share_one_directory_but_nccl_keeps_its_own() -> None:
    from builder.facts.cuda_wheels import wheel_dir

    assert [wheel_dir(12, n) for n in ("cublas", "nccl")] == ["cublas", "nccl"]
    assert [wheel_dir(13, n) for n in ("cublas", "cuda_runtime", "nccl", "cudnn")] == [
        "cu13",
        "cu13",
        "nccl",
        "cudnn",
    ]
