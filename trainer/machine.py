"""Can this machine run the run: the device for the precision plan, a C compiler for
torch.compile, memory for the estimated step. Each check raises BadInput before the model exists."""

from __future__ import annotations

import os
import shutil

import torch

from trainer import memory, precision
from trainer.distributed import Dist
from trainer.errors import BadInput
from trainer.fp8 import rules
from trainer.fp8.converters import Fp8Converter


def cpu_scaled_mm() -> bool:
    """Whether this torch build runs torch._scaled_mm on the CPU (torch >= 2.13 does)."""
    try:
        a = torch.zeros(16, 16).to(torch.float8_e4m3fn)
        one = torch.ones((), dtype=torch.float32)
        torch._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    except (RuntimeError, NotImplementedError, AttributeError):
        return False
    return True


def check_device(
    plan: precision.Plan, device: torch.device, converter: Fp8Converter | None = None
) -> str:
    """The device's name; BadInput when it cannot run this precision plan."""
    if device.type == "cpu":
        if plan.uses_fp8:
            if converter is not None and converter.cuda_only:
                raise BadInput(f"fp8_backend {converter.backend} runs on CUDA devices only")
            if not cpu_scaled_mm():
                raise BadInput(
                    f"FP8 on the CPU needs torch._scaled_mm for CPU tensors (torch >= 2.13); "
                    f"this is torch {torch.__version__}. Use --preset bf16"
                )
        return "cpu"
    name = torch.cuda.get_device_name(device)
    cc = torch.cuda.get_device_capability(device)
    if plan.compute == torch.bfloat16 and cc < (8, 0):
        raise BadInput(
            f"bf16 needs compute capability 8.0 or newer; {name} has {cc[0]}.{cc[1]} "
            f"(sm_{cc[0]}{cc[1]}). Use --preset fp16"
        )
    if plan.uses_fp8:
        problem = rules.device_problem(name, cc, plan.config.fp8_recipe)
        if problem:
            raise BadInput(problem)
    return name


def has_compiler() -> bool:
    return bool(os.environ.get("CC")) or any(shutil.which(cc) for cc in ("cc", "gcc", "clang"))


def use_compile(asked: bool | None, plan: precision.Plan, device: torch.device) -> bool:
    """`train.compile` unset: on for FP8 on CUDA when a C compiler exists. torchao's FP8 casts
    are separate kernels in eager mode and only fuse under torch.compile; users report eager
    FP8 slower than BF16 (pytorch/ao#2262, pytorch/ao#1199)."""
    if asked is not None:
        return asked
    return plan.uses_fp8 and device.type == "cuda" and has_compiler()


def check_compiler() -> None:
    """torch.compile builds C code at run time (Inductor's CPU kernels, Triton's GPU launcher)."""
    if has_compiler():
        return
    raise BadInput(
        "train.compile needs a C compiler (Inductor's CPU kernels and Triton's launcher are "
        "built at run time) and there is none on PATH (or in CC); use a devel image or drop "
        "--compile"
    )


def check_memory(need: memory.Estimate, d: Dist, recompute: str, reserved: float = 0.0) -> None:
    """`reserved`: bytes another model in this process will still take (--compare's first
    side: its optimizer state and activations appear at its first step)."""
    have, where = memory.available(d.device)
    if have is not None and need.total + reserved > have:
        besides = (
            f" besides {reserved / (1 << 30):.1f} GiB for the other side of --compare (both "
            "models live at once)"
            if reserved
            else ""
        )
        raise BadInput(
            f"this configuration needs about {need.describe()}{besides}, more than the "
            f"{have / (1 << 30):.1f} GiB {where}: "
            f"{memory.advice(d.mode, recompute)}. (train.memory_check false skips "
            "this check)"
        )
