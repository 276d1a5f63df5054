"""GPU facts: compute capability, NVML brand, and what each generation needs from the stack."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from builder.facts.drivers import ARCHITECTURE_MATRIX
from builder.facts.sources import (
    BLACKWELL_COMPAT_GUIDE,
    CUDA_GPUS,
    OPEN_MODULES_BLOG,
    Source,
)

CC = tuple[int, int]


@dataclass(frozen=True)
class Architecture:
    """A GPU generation: whether the open kernel modules drive it, and the last driver branch
    that supports it (None: ongoing)."""

    name: str
    open_modules: bool
    last_branch: int | None
    source: Source


# Open modules: "can be used on any Turing or later GPU" (the open modules' README and NVIDIA's
# open-modules blog); last branches: NVIDIA's CUDA Toolkit, Driver, and Architecture Matrix
# (Maxwell, Pascal and Volta end with R580).
_ARCH_SOURCE = Source(f"{ARCHITECTURE_MATRIX.ref}; {OPEN_MODULES_BLOG.ref}")
ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture("Kepler", False, 470, _ARCH_SOURCE),
        Architecture("Maxwell", False, 580, _ARCH_SOURCE),
        Architecture("Pascal", False, 580, _ARCH_SOURCE),
        Architecture("Volta", False, 580, _ARCH_SOURCE),
        Architecture("Turing", True, None, _ARCH_SOURCE),
        Architecture("Ampere", True, None, _ARCH_SOURCE),
        Architecture("Ada", True, None, _ARCH_SOURCE),
        Architecture("Hopper", True, None, _ARCH_SOURCE),
        Architecture("Blackwell", True, None, _ARCH_SOURCE),
    )
}


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
    architecture: str = ""  # a key of ARCHITECTURES

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def generation(self) -> Architecture:
        return ARCHITECTURES[self.architecture]

    @property
    def last_branch(self) -> int | None:
        """The last driver branch that supports the GPU (None: ongoing)."""
        return self.generation.last_branch

    @property
    def open_modules_ok(self) -> bool:
        """Do the open kernel modules drive it (Turing and newer)?"""
        return self.generation.open_modules


_UNCONF = Source(CUDA_GPUS.ref, confirmed=False)
_PRO_SERVER = Source(
    "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html "
    '("Select NGC Server Ready SKUs of RTX cards"; the SKU list is not on the page)',
    False,
)


def _first_listed(tag: str, device: str) -> Source:
    """The open-gpu-kernel-modules tag whose README first lists the device id (its first
    branch), as issue 28's per-tag survey found it (not re-read here)."""
    return Source(
        f"https://github.com/NVIDIA/open-gpu-kernel-modules/blob/{tag}/README.md "
        f"(Compatible GPUs: 10de:{device} first listed; read 2026-12-02 via issue 28)",
        False,
    )


_PRO_SERVER_FIRST = Source(
    f"{_PRO_SERVER.ref}; first branch: "
    "https://github.com/NVIDIA/open-gpu-kernel-modules/blob/575.57.08/README.md "
    "(10de:2bb5 first listed; read 2026-12-02 via issue 28)",
    False,
)


def _gpu(
    key: str,
    name: str,
    cc: CC,
    arch: str,
    *,
    brand: str = "nvidia",
    datacenter: bool = True,
    needs_open: bool = False,
    min_branch: int,
    min_cuda: str,
    source: Source = _UNCONF,
) -> Gpu:
    return Gpu(key, name, cc, brand, datacenter, needs_open, min_branch, Version(min_cuda), source,
               arch)  # fmt: skip


# Compute capabilities: https://developer.nvidia.com/cuda-gpus. Open modules are required on
# Grace Hopper and Blackwell (open-modules blog). Min branches: Blackwell R570 (CUDA 12.8 ->
# 570.26). Earlier generations: the branch of the first CUDA with their target (8.0 -> R367,
# 9.0 -> R384, 10.0 -> R410, 11.0 -> R450, 11.1 -> R455, 11.8 -> R520), not read from a primary
# source. B300/GB300/GB10/Thor are not confirmed by a primary source and are set to R580, the
# first branch of the CUDA 13.0 that CUTLASS lists as their minimum. Brands: NVML reports
# "Tesla" for Volta/Pascal boards, "NVIDIA" for current data center boards, "NVIDIA RTX" for
# professional ones, "GeForce" for consumer ones.
GPUS: dict[str, Gpu] = {
    g.key: g
    for g in (
        # Kepler and Maxwell data center boards: their last branches (R470, R580) are what a
        # fleet must know before an upgrade (issue 28); first branches not read from a primary
        # source.
        _gpu("k80", "Tesla K80", (3, 7), "Kepler", brand="tesla", min_branch=340,
             min_cuda="6.5"),
        _gpu("m10", "Tesla M10", (5, 0), "Maxwell", brand="tesla", min_branch=361,
             min_cuda="8.0"),
        _gpu("m60", "Tesla M60", (5, 2), "Maxwell", brand="tesla", min_branch=352,
             min_cuda="7.5"),
        _gpu("p100", "Tesla P100", (6, 0), "Pascal", brand="tesla", min_branch=367,
             min_cuda="8.0"),
        _gpu("p40", "Tesla P40", (6, 1), "Pascal", brand="tesla", min_branch=367, min_cuda="8.0"),
        _gpu("v100", "Tesla V100", (7, 0), "Volta", brand="tesla", min_branch=384,
             min_cuda="9.0"),
        _gpu("t4", "Tesla T4", (7, 5), "Turing", brand="tesla", min_branch=410, min_cuda="10.0"),
        _gpu("a100", "NVIDIA A100", (8, 0), "Ampere", min_branch=450, min_cuda="11.0"),
        _gpu("a30", "NVIDIA A30", (8, 0), "Ampere", min_branch=450, min_cuda="11.0"),
        _gpu("a10", "NVIDIA A10", (8, 6), "Ampere", min_branch=455, min_cuda="11.1"),
        _gpu("a40", "NVIDIA A40", (8, 6), "Ampere", min_branch=455, min_cuda="11.1"),
        _gpu("rtx-a6000", "NVIDIA RTX A6000", (8, 6), "Ampere", brand="nvidiartx",
             datacenter=False, min_branch=455, min_cuda="11.1"),
        _gpu("l4", "NVIDIA L4", (8, 9), "Ada", min_branch=520, min_cuda="11.8"),
        _gpu("l40", "NVIDIA L40", (8, 9), "Ada", min_branch=520, min_cuda="11.8"),
        _gpu("l40s", "NVIDIA L40S", (8, 9), "Ada", min_branch=520, min_cuda="11.8"),
        _gpu("rtx-6000-ada", "NVIDIA RTX 6000 Ada Generation", (8, 9), "Ada", brand="nvidiartx",
             datacenter=False, min_branch=520, min_cuda="11.8"),
        _gpu("rtx4090", "GeForce RTX 4090", (8, 9), "Ada", brand="geforce", datacenter=False,
             min_branch=520, min_cuda="11.8"),
        _gpu("h100", "NVIDIA H100", (9, 0), "Hopper", min_branch=520, min_cuda="11.8"),
        _gpu("h20", "NVIDIA H20", (9, 0), "Hopper", min_branch=535, min_cuda="11.8"),
        _gpu("h200", "NVIDIA H200", (9, 0), "Hopper", min_branch=550, min_cuda="11.8"),
        _gpu("gh200", "NVIDIA GH200", (9, 0), "Hopper", needs_open=True, min_branch=535,
             min_cuda="11.8", source=_first_listed("535.43.19", "2342")),
        _gpu("b200", "NVIDIA B200", (10, 0), "Blackwell", needs_open=True, min_branch=570,
             min_cuda="12.8", source=CUDA_GPUS),
        _gpu("gb200", "NVIDIA GB200", (10, 0), "Blackwell", needs_open=True, min_branch=570,
             min_cuda="12.8", source=CUDA_GPUS),
        _gpu("b300", "NVIDIA B300", (10, 3), "Blackwell", needs_open=True, min_branch=580,
             min_cuda="12.9"),
        _gpu("gb300", "NVIDIA GB300", (10, 3), "Blackwell", needs_open=True, min_branch=580,
             min_cuda="12.9"),
        _gpu("thor", "Jetson T5000", (11, 0), "Blackwell", datacenter=False, needs_open=True,
             min_branch=580, min_cuda="13.0"),
        _gpu("rtx5090", "GeForce RTX 5090", (12, 0), "Blackwell", brand="geforce",
             datacenter=False, needs_open=True, min_branch=570, min_cuda="12.8",
             source=CUDA_GPUS),
        _gpu("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell", (12, 0), "Blackwell",
             brand="nvidiartx", datacenter=False, needs_open=True, min_branch=570,
             min_cuda="12.8", source=CUDA_GPUS),
        # The passively cooled server board: taken as one of the "Select NGC Server Ready SKUs
        # of RTX cards" forward compatibility works on (the page names no SKU).
        _gpu("rtx-pro-6000-server", "NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0),
             "Blackwell", brand="nvidiartx", datacenter=True, needs_open=True, min_branch=575,
             min_cuda="12.8", source=_PRO_SERVER_FIRST),
        _gpu("rtx-pro-5000", "NVIDIA RTX PRO 5000 Blackwell", (12, 0), "Blackwell",
             brand="nvidiartx", datacenter=False, needs_open=True, min_branch=570,
             min_cuda="12.8", source=CUDA_GPUS),
        _gpu("gb10", "NVIDIA GB10", (12, 1), "Blackwell", datacenter=False, needs_open=True,
             min_branch=580, min_cuda="12.9"),
    )
}  # fmt: skip
OPEN_MODULES_SOURCE = OPEN_MODULES_BLOG

# FP8 tensor cores start at sm_89 (Ada) and sm_90 (Hopper): PTX's mma/wgmma with .e4m3/.e5m2
# operands need sm_89 or newer (PTX ISA, warp-level mma); BF16 needs sm_80.
# torch._scaled_mm refuses anything below 8.9 (aten/src/ATen/native/cuda/Blas.cpp).
# The trainer applies the same rules on its own (trainer/fp8/rules.py: it never imports the
# builder); tests/facts/test_fp8_rules_agree.py compares the two for every compute capability here.
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
