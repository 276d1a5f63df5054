"""FP8 training through torchao: float8 Linear (dynamic scaling, tensorwise or row-wise) and
MXFP8 weights. The pieces only; which of them a recipe uses is its converter's (converters.py).

`fp8-fwd` (the default preset) is expressed by disabling the three backward casts, so the
backward GEMMs run in BF16; `fp8` keeps torchao's E5M2 gradient cast. torchao is imported only
when FP8 is asked for, with its import-time notices about optional kernels silenced.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from trainer.errors import BadInput
from trainer.fp8 import mxfp8

_NOISY_LOGGERS = ("torchao", "torch.utils._pytree")


@contextmanager
def _quiet_import() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def load() -> Any:
    """torchao's float8 config module, or BadInput when torchao is not installed."""
    try:
        with _quiet_import():
            float8 = importlib.import_module("torchao.float8")
            importlib.import_module("torchao.float8.config")
    except ImportError as exc:
        raise BadInput(
            f"FP8 needs torchao, which is not importable here ({exc}); use --preset bf16"
        ) from exc
    return float8


def precompute_scales(model: nn.Module) -> None:
    """After each optimizer step under FSDP2 float8 all-gather: every FP8 weight's amax in one
    all-reduce instead of one per layer."""
    utils = importlib.import_module("torchao.float8.fsdp_utils")
    utils.precompute_float8_dynamic_scale_for_fsdp(model)


def _casts() -> tuple[Any, Any, Any]:
    cfg_mod = importlib.import_module("torchao.float8.config")
    return cfg_mod.CastConfig, cfg_mod.ScalingType, cfg_mod.ScalingGranularity


def forward_only_config(target: torch.dtype, *, rowwise: bool, all_gather: bool) -> Any:
    """Float8LinearConfig with the forward in FP8 and the three backward casts disabled, so the
    backward GEMMs run in BF16 (`fp8-fwd`). Row-wise scales are rounded to powers of 2."""
    float8 = load()
    cast, scaling, gran = _casts()
    forward = cast(
        scaling_type=scaling.DYNAMIC,
        scaling_granularity=gran.AXISWISE if rowwise else gran.TENSORWISE,
        target_dtype=target,
    )
    off = cast(scaling_type=scaling.DISABLED)
    return float8.Float8LinearConfig(
        cast_config_input=forward,
        cast_config_weight=forward,
        cast_config_grad_output=off,
        cast_config_input_for_grad_weight=off,
        cast_config_weight_for_grad_input=off,
        round_scales_to_power_of_2=rowwise,
        enable_fsdp_float8_all_gather=all_gather,
    )


def tensorwise_config(forward: torch.dtype, backward: torch.dtype, *, all_gather: bool) -> Any:
    """Float8LinearConfig with one dynamic scale per tensor, `backward` for the gradients."""
    float8 = load()
    cast, scaling, gran = _casts()
    fwd, grad = (
        cast(scaling_type=scaling.DYNAMIC, scaling_granularity=gran.TENSORWISE, target_dtype=t)
        for t in (forward, backward)
    )
    return float8.Float8LinearConfig(
        cast_config_input=fwd,
        cast_config_weight=fwd,
        cast_config_grad_output=grad,
        enable_fsdp_float8_all_gather=all_gather,
    )


def recipe_config(recipe: str) -> Any:
    """torchao's own Float8LinearConfig for a named recipe (`rowwise`, `rowwise_with_gw_hp`).

    `from_recipe_name` takes its own `Float8LinearRecipeName` or an exact `str`: it tests
    `type(name) == str`, so the trainer's StrEnum member fell through every branch
    ("unknown recipe_name rowwise"). The name is turned into torchao's type here."""
    float8 = load()
    names = importlib.import_module("torchao.float8.config").Float8LinearRecipeName
    try:
        name = names(str(recipe))  # a StrEnum member prints as its value
    except ValueError as exc:
        valid = ", ".join(n.value for n in names)
        raise BadInput(f"fp8_recipe {recipe}: torchao has no such recipe; one of: {valid}") from exc
    return float8.Float8LinearConfig.from_recipe_name(name)


def size_filter(recipe: str) -> Callable[[nn.Module, str], bool] | None:
    """torchao's auto-filter for `recipe` (torchtitan's `filter_fqns` + auto-filter): a Linear
    whose GEMM is too small for FP8 to beat BF16 on an H100 stays BF16. None when this torchao
    has no such filter (it is an experimental API: `_auto_filter_for_recipe`)."""
    load()
    utils = importlib.import_module("torchao.float8.float8_linear_utils")
    auto = getattr(utils, "_auto_filter_for_recipe", None)
    if auto is None:
        return None
    chosen: Callable[[nn.Module, str], bool] = auto(recipe, [])
    return chosen


@contextmanager
def compute_weights(modules: list[nn.Module], dtype: torch.dtype) -> Iterator[None]:
    """Show the FP8 layers their fp32 master weights as `dtype` copies for one forward.

    FSDP2's MixedPrecisionPolicy(param_dtype=bf16) does this for sharded runs (torchtitan's
    setup); a single process or DDP has no such cast, and torchao's high-precision backward
    GEMMs (the casts `fp8-fwd` disables) would meet an fp32 weight and a bf16 gradient. The
    cast is differentiable (the gradient reaches the fp32 master in fp32) and happens before
    the blocks run, outside any activation-checkpointed region, so a recompute sees the same
    copies. Autograd keeps what the backward needs after the masters are put back.
    """
    swapped: list[tuple[nn.Module, nn.Parameter]] = []
    try:
        for module in modules:
            master = module._parameters["weight"]
            if master is not None and master.dtype != dtype:
                swapped.append((module, master))
                module._parameters["weight"] = master.to(dtype)  # type: ignore[assignment]
        yield
    finally:
        for module, master in swapped:
            module._parameters["weight"] = master


def _has_cuda_kernel(op: str) -> bool:
    """Whether the dispatcher has a CUDA kernel for `op` (torchao's extensions register theirs
    when they load)."""
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op, "CUDA"))
    except RuntimeError:  # the op is not even defined
        return False


def convert_mx(model: nn.Module, layer_names: set[str], *, emulate: bool) -> None:
    """MXFP8 training (torchao.prototype.moe_training): the named layers' weights become
    MXFP8TrainingWeightWrapperTensor, whose matmuls quantize both operands to E4M3 with one
    e8m0 scale per 32 elements. `emulate`: plain PyTorch ops (any device; slow, for tests)."""
    problem = mxfp8.module_problem()
    if problem is not None:
        raise BadInput(f"{problem}; use fp8_recipe tensorwise")
    try:
        with _quiet_import():
            mx = importlib.import_module(mxfp8.MODULE)
            quantization = importlib.import_module("torchao.quantization")
    except ImportError as exc:
        raise BadInput(
            f"fp8_recipe mxfp8: {mxfp8.MODULE} does not import ({exc}); use fp8_recipe tensorwise"
        ) from exc
    if not emulate and not _has_cuda_kernel("torchao::mxfp8_quantize"):
        raise BadInput(
            mxfp8.kernel_problem()
            or "fp8_recipe mxfp8: torchao's MXFP8 CUDA extension (_C_mxfp8) did not load, so "
            "its casts have no CUDA kernel; use fp8_recipe tensorwise"
        )
    recipe = mx.MXFP8TrainingRecipe
    config = mx.MXFP8TrainingOpConfig.from_recipe(
        recipe.MXFP8_EMULATED_RCEIL if emulate else recipe.MXFP8_RCEIL
    )
    quantization.quantize_(model, config, filter_fn=lambda _mod, fqn: fqn in layer_names)


def convert_float8(model: nn.Module, layer_names: set[str], config: Any) -> None:
    """Swap the named nn.Linear layers for torchao Float8Linear under `config`, in place."""
    load().convert_to_float8_training(
        model, config=config, module_filter_fn=lambda _mod, fqn: fqn in layer_names
    )
