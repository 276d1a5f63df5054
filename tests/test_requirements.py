"""NVIDIA_REQUIRE_CUDA: written exactly as NVIDIA's own CUDA 12.8.1 images carry it."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from builder.requirements import RequirementSyntaxError, nvidia_require_cuda, parse

# Copied from NVIDIA's dist/12.8.1/rockylinux9/base/Dockerfile (GitHub copy of
# gitlab.com/nvidia/container-images/cuda, pranavmishra90/nvidia-container-images-cuda@60a1c892).
NVIDIA_12_8_1 = (
    (Path(__file__).parent / "data" / "nvidia_require_cuda_12.8.1.txt").read_text().strip()
)


def test_written_exactly_like_nvidias_12_8_1_images() -> None:
    assert nvidia_require_cuda(Version("12.8.1")) == NVIDIA_12_8_1


def test_round_trip() -> None:
    assert str(parse(NVIDIA_12_8_1)) == NVIDIA_12_8_1
    req = parse(NVIDIA_12_8_1)
    assert len(req.terms) == 1 + 5 * 12
    assert not any(c.value == "geforce" for t in req.terms for c in t.conditions)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("cuda>=12.8 gpu=1", "unknown key 'gpu'"),
        ("cuda=>12.8", "unparsable"),
        ("cuda>=12.8;rm", "unparsable"),
        ("brand=tesla,,driver>=535", "unparsable"),
    ],
)
def test_parse_errors(text: str, why: str) -> None:
    with pytest.raises(RequirementSyntaxError, match=why):
        parse(text)
