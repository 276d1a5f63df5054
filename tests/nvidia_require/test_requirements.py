"""builder.nvidia_require against NVIDIA's own NVIDIA_REQUIRE_CUDA for CUDA 12.8 images and the
semantics of libnvidia-container's DSL (NVIDIA/libnvidia-container src/cli/dsl.c, configure.c)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from builder.facts.driver_version import DriverVersion
from builder.nvidia_require.admission import DriverFacts, VisibleGpu, evaluate
from builder.nvidia_require.syntax import RequirementSyntaxError, parse_require
from builder.nvidia_require.write import nvidia_require_cuda

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "nvidia_require_cuda.yaml"
NVIDIA_12_8_1 = yaml.safe_load(FIXTURE.read_text())[0]["value"]

H100 = VisibleGpu("9.0", "unknown")  # NVML brand NVIDIA: libnvidia-container reports "Unknown"
TESLA_V100 = VisibleGpu("7.0", "Tesla")
RTX4090 = VisibleGpu("8.9", "geforce")
B200 = VisibleGpu("10.0", "unknown")


def host(driver: str, *gpus: VisibleGpu) -> DriverFacts:
    return DriverFacts.for_driver(DriverVersion(driver), gpus)


def test_the_fixture_is_nvidias_string_and_ours_writes_the_same() -> None:
    req = parse_require(NVIDIA_12_8_1)
    assert str(req.terms[0]) == "cuda>=12.8"
    assert len(req.terms) == 1 + 12 * 5  # twelve brands x branches 470, 535, 550, 560, 565
    assert "brand=geforce" not in NVIDIA_12_8_1
    assert nvidia_require_cuda(Version("12.8.1")) == NVIDIA_12_8_1


@pytest.mark.parametrize(
    ("driver", "gpu", "satisfied", "fwd_only"),
    [
        ("570.124.06", H100, True, False),  # R570 supports CUDA 12.8: the cuda>= term
        ("580.65.06", RTX4090, True, False),  # newer drivers pass for every brand
        ("565.57.01", H100, True, True),  # 12.7 driver: only the brand=unknown R565 window
        ("550.144.03", TESLA_V100, True, True),  # brand compared without case ("Tesla")
        ("535.230.02", B200, True, True),  # the label admits it; the rules do not (impact)
        ("565.57.01", RTX4090, False, False),  # no geforce window: unsatisfied
        ("550.144.03", RTX4090, False, False),
        ("545.29.06", H100, False, False),  # 545 is in no window and supports CUDA 12.3
        ("470.256.02", H100, True, True),  # the oldest window
        ("471.11", H100, False, False),  # driver<471 excludes 471.x
    ],
)
def test_nvidia_12_8_1_on_hosts(
    driver: str, gpu: VisibleGpu, satisfied: bool, fwd_only: bool
) -> None:
    verdict = evaluate(parse_require(NVIDIA_12_8_1), host(driver, gpu))
    assert verdict.satisfied is satisfied
    assert verdict.forward_compat_only is fwd_only
    if not satisfied:
        assert verdict.failed_gpu == gpu


def test_every_gpu_must_pass_and_the_first_failing_one_is_named() -> None:
    verdict = evaluate(parse_require(NVIDIA_12_8_1), host("565.57.01", H100, RTX4090))
    assert not verdict.satisfied
    assert verdict.failed_gpu == RTX4090
    assert [str(t) for t in verdict.matched] == ["brand=unknown,driver>=565,driver<566"]


def test_without_gpus_brand_and_arch_hold() -> None:
    # configure.c: no visible device -> evaluated once, arch/brand conditions are satisfied
    verdict = evaluate(parse_require(NVIDIA_12_8_1), host("565.57.01"))
    assert verdict.satisfied and verdict.forward_compat_only
    assert evaluate(parse_require("arch>=10.0"), host("570.124.06")).satisfied


def test_space_is_or_comma_is_and() -> None:
    req = parse_require("cuda>=13.0 driver>=570,arch=9.0")
    assert evaluate(req, host("570.124.06", H100)).satisfied
    assert not evaluate(req, host("570.124.06", B200)).satisfied  # arch 10.0 != 9.0
    assert not evaluate(req, host("565.57.01", H100)).satisfied


def test_dotted_numeric_comparison() -> None:
    assert evaluate(parse_require("driver>=570.124.6"), host("570.124.06")).satisfied  # 06 == 6
    assert not evaluate(parse_require("driver>570.124.06"), host("570.124.06")).satisfied
    assert evaluate(parse_require("driver<570.124.10"), host("570.124.06")).satisfied  # not lexical
    assert evaluate(parse_require("arch>=10.0"), host("580.65.06", B200)).satisfied
    assert not evaluate(parse_require("arch>=10.0"), host("580.65.06", H100)).satisfied  # 9 < 10
    assert evaluate(parse_require("driver!=570"), host("570.124.06")).satisfied  # 570.124.06 != 570


def test_cuda_key_is_the_drivers_cuda_version() -> None:
    assert evaluate(parse_require("cuda>=12.8"), host("570.86.15")).satisfied
    assert not evaluate(parse_require("cuda>=12.8"), host("565.57.01")).satisfied  # R565 -> 12.7
    assert evaluate(parse_require("cuda=12.7"), host("565.57.01")).satisfied


def test_keys_match_without_case_and_empty_conditions_are_skipped() -> None:
    req = parse_require("CUDA>=12.8 Brand=Tesla,,Driver>=550,driver<551,")
    assert [c.key for c in req.terms[1].conditions] == ["brand", "driver", "driver"]
    assert evaluate(req, host("550.144.03", VisibleGpu("7.0", "TESLA"))).satisfied


@pytest.mark.parametrize(
    "text",
    [
        "",  # nothing at all
        "cuda>=12.8 foo=1",  # an unknown key
        "cuda=>12.8",  # not an operator
        "cuda>=12.8a",  # versions are digits and dots only ("invalid expression")
        "driver>=r570",
        "brand>=tesla",  # brands compare with = and != only
        "cuda>=",
    ],
)
def test_what_libnvidia_container_refuses_does_not_lint(text: str) -> None:
    with pytest.raises(RequirementSyntaxError):
        parse_require(text, strict=True)
