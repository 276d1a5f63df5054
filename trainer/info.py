"""`trainer info`: what this image's Python stack and GPUs can do, with no GPU required.

Versions are read from package metadata, so reporting torchao or Transformer Engine never
imports them (importing TE without a GPU can fail or be slow). `arch_flags` are the SASS/PTX
targets the torch build carries (only CUDA builds have them; reading them needs no GPU).
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

import torch

from trainer import __version__
from trainer.fp8 import mxfp8, rules
from trainer.fp8_names import Recipe
from trainer.machine import cpu_scaled_mm
from trainer.mfu import peak_for
from trainer.presets import PRESETS

_TE_DISTRIBUTIONS = ("transformer_engine", "transformer-engine", "transformer_engine_torch")


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _arch_flags() -> list[str] | None:
    get = getattr(torch._C, "_cuda_getArchFlags", None)
    if get is None:
        return None
    flags = get()
    return flags.split() if flags else []


def _devices() -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        name = torch.cuda.get_device_name(i)
        major, minor = torch.cuda.get_device_capability(i)
        out.append(
            {
                "index": i,
                "name": name,
                "compute_capability": f"{major}.{minor}",
                "fp8": rules.device_problem(name, (major, minor), Recipe.TENSORWISE) is None,
                "fp8_rowwise": rules.device_problem(name, (major, minor), Recipe.ROWWISE) is None,
                "mxfp8": rules.device_problem(name, (major, minor), Recipe.MXFP8) is None,
                "mfu_peak_known": peak_for(name) is not None,
            }
        )
    return out


def _mxfp8() -> dict[str, Any]:
    """MXFP8 training: torchao's module (>= 0.17), the CUDA runtime its CUDA kernels link, and
    what stops it on this install (GPUs: each device's `mxfp8`; the CPU emulates it)."""
    problem = mxfp8.module_problem()
    if problem is None and torch.version.cuda is None:
        problem = "this torch has no CUDA build: MXFP8 runs only emulated, on the CPU"
    return {
        "module": mxfp8.module_problem() is None,
        "kernel_cudart": mxfp8.kernel_cudart(),
        "problem": problem or mxfp8.kernel_problem(),
    }


def collect() -> dict[str, Any]:
    return {
        "trainer_version": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "arch_flags": _arch_flags(),
        "devices": _devices(),
        "fp8": {
            "torchao": _version("torchao"),
            "transformer_engine": _version(*_TE_DISTRIBUTIONS),
            "scaled_mm_cpu": cpu_scaled_mm(),
            "mxfp8": _mxfp8(),
        },
        "numpy": _version("numpy"),
        "presets": list(PRESETS),
    }


def _mx_line(mx: dict[str, Any]) -> str:
    if not mx["module"]:
        return f"no: {mx['problem']}"
    if mx["problem"]:
        return f"emulated on the CPU only: {mx['problem']}"
    return "yes (torchao's module and CUDA kernels for this torch's CUDA; GPUs: sm_100/sm_103)"


def human(info: dict[str, Any]) -> str:
    fp8 = info["fp8"]
    lines = [
        f"trainer      {info['trainer_version']}",
        f"python       {info['python']}",
        f"torch        {info['torch']} (CUDA {info['torch_cuda'] or 'none'})",
        f"arch flags   {' '.join(info['arch_flags']) if info['arch_flags'] else '-'}",
        f"torchao      {fp8['torchao'] or 'not installed'}",
        f"TE           {fp8['transformer_engine'] or 'not installed'}",
        f"CPU FP8 GEMM {'yes' if fp8['scaled_mm_cpu'] else 'no'} (torch._scaled_mm on CPU)",
        f"MXFP8        {_mx_line(fp8['mxfp8'])}",
        f"presets      {', '.join(info['presets'])}",
    ]
    if not info["devices"]:
        lines.append(
            "GPUs         none visible" + ("" if info["cuda_available"] else " (CUDA unavailable)")
        )
    for dev in info["devices"]:
        fp8 = "yes" if dev["fp8"] else "no"
        rowwise = "yes" if dev["fp8_rowwise"] else "no"
        mx = "yes" if dev["mxfp8"] else "no"
        lines.append(
            f"GPU {dev['index']}        {dev['name']} (CC {dev['compute_capability']}, "
            f"FP8 {fp8}, row-wise {rowwise}, MXFP8 {mx})"
        )
    return "\n".join(lines)
