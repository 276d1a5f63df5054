"""GPU facts: compute capability, NVML brand, and what each generation needs from the stack."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from builder.facts.sources import (
    BLACKWELL_COMPAT_GUIDE,
    CUDA_GPUS,
    OPEN_MODULES_BLOG,
    Source,
)

CC = tuple[int, int]


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    cc: CC
    brand: str  # the NVML brand string libnvidia-container matches against (lower case)
    datacenter: bool  # eligible for forward compatibility (cuda-compat)
    needs_open_modules: bool
    min_branch: int  # first driver branch that supports the GPU
    min_cuda: Version  # first toolkit with a native SASS target for this compute capability
    source: Source = CUDA_GPUS

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"


_UNCONF = Source(CUDA_GPUS.ref, confirmed=False)

# Compute capabilities: https://developer.nvidia.com/cuda-gpus.
# Open modules are required on Grace Hopper and Blackwell (open-modules blog).
# Min branches: Blackwell R570 (CUDA 12.8 -> 570.26). Earlier generations: the branch of the
# first CUDA with their target (11.0 -> R450, 11.8 -> R520), not read from a primary source.
# B300/GB300/GB10/Thor are not confirmed
# by a primary source and are set to R580, the first branch of the CUDA 13.0 that CUTLASS
# lists as their minimum. Brands: NVML reports "nvidia" for current data center boards.
GPUS: dict[str, Gpu] = {
    g.key: g
    for g in (
        Gpu("a100", "NVIDIA A100", (8, 0), "nvidia", True, False, 450, Version("11.0"), _UNCONF),
        Gpu("l4", "NVIDIA L4", (8, 9), "nvidia", True, False, 520, Version("11.8"), _UNCONF),
        Gpu("l40s", "NVIDIA L40S", (8, 9), "nvidia", True, False, 520, Version("11.8"), _UNCONF),
        Gpu(
            "rtx4090",
            "GeForce RTX 4090",
            (8, 9),
            "geforce",
            False,
            False,
            520,
            Version("11.8"),
            _UNCONF,
        ),
        Gpu("h100", "NVIDIA H100", (9, 0), "nvidia", True, False, 520, Version("11.8"), _UNCONF),
        Gpu("h200", "NVIDIA H200", (9, 0), "nvidia", True, False, 550, Version("11.8"), _UNCONF),
        Gpu("gh200", "NVIDIA GH200", (9, 0), "nvidia", True, True, 550, Version("11.8"), _UNCONF),
        Gpu("b200", "NVIDIA B200", (10, 0), "nvidia", True, True, 570, Version("12.8")),
        Gpu("gb200", "NVIDIA GB200", (10, 0), "nvidia", True, True, 570, Version("12.8")),
        Gpu("b300", "NVIDIA B300", (10, 3), "nvidia", True, True, 580, Version("12.9"), _UNCONF),
        Gpu("gb300", "NVIDIA GB300", (10, 3), "nvidia", True, True, 580, Version("12.9"), _UNCONF),
        Gpu("thor", "Jetson T5000", (11, 0), "nvidia", False, True, 580, Version("13.0"), _UNCONF),
        Gpu("rtx5090", "GeForce RTX 5090", (12, 0), "geforce", False, True, 570, Version("12.8")),
        Gpu(
            "rtx-pro-6000",
            "NVIDIA RTX PRO 6000 Blackwell",
            (12, 0),
            "nvidiartx",
            False,
            True,
            570,
            Version("12.8"),
        ),
        Gpu("gb10", "NVIDIA GB10", (12, 1), "nvidia", False, True, 580, Version("12.9"), _UNCONF),
    )
}
OPEN_MODULES_SOURCE = OPEN_MODULES_BLOG

# FP8 tensor cores start at sm_89 (Ada) and sm_90 (Hopper): PTX's mma/wgmma with .e4m3/.e5m2
# operands need sm_89 or newer (PTX ISA, warp-level mma); BF16 needs sm_80.
# torch._scaled_mm refuses anything below 8.9 (aten/src/ATen/native/cuda/Blas.cpp).
# The trainer applies the same rules on its own (trainer/fp8/rules.py: it never imports the
# builder); tests/test_fp8_rules_agree.py compares the two for every compute capability here.
FP8_MIN_CC: CC = (8, 9)
FP8_SOURCE = Source(
    "https://nvidia.github.io/TransformerEngine/ support matrix; "
    "pytorch aten/src/ATen/native/cuda/Blas.cpp (scaled_mm needs CC >= 9.0 or == 8.9)"
)
# Row-wise scaled_mm fails on sm_120 (cuBLAS NOT_SUPPORTED); use tensor-wise there. Its kernels
# cover sm_89, sm_9x and sm_10x/sm_11x (pytorch aten/src/ATen/native/cuda/RowwiseScaledMM.cu,
# dispatch_fp8_rowwise_kernel_on_sm, sends major 11 - Thor's sm_110 - to the Sm100 kernels), so
# every other FP8-capable GPU here has them.
ROWWISE_UNSUPPORTED_CC: tuple[CC, ...] = ((12, 0), (12, 1))
ROWWISE_SOURCE = Source("https://github.com/pytorch/pytorch/issues/192707")

SASS_COMPAT_SOURCE = BLACKWELL_COMPAT_GUIDE


def parse_sm(arch: str) -> CC:
    """'sm_100' -> (10, 0); 'sm_90a' -> (9, 0). Raises ValueError on anything else."""
    body = arch.removeprefix("sm_").removeprefix("compute_").rstrip("af")
    if not body.isdigit() or len(body) < 2:
        raise ValueError(f"not an arch name: {arch!r} (expected e.g. sm_90, sm_100)")
    return int(body[:-1]), int(body[-1])


def sass_runs_on(sass: CC, device: CC) -> bool:
    """SASS for sm_XY runs on devices of the same major X with minor >= Y (not across majors)."""
    return sass[0] == device[0] and device[1] >= sass[1]


def covering_sass(arches: tuple[str, ...], device: CC) -> str | None:
    """The compiled arch (plain sm_XY only) whose SASS runs on `device`, or None."""
    plain = (a for a in arches if a.startswith("sm_") and not a.endswith(("a", "f")))
    return next((a for a in plain if sass_runs_on(parse_sm(a), device)), None)


def by_cc(cc: CC) -> list[Gpu]:
    return [g for g in GPUS.values() if g.cc == cc]
