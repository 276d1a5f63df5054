"""One FP8 converter per backend and recipe, chosen once from the precision plan.

The shape of torchtitan's model converters (torchtitan/components/quantization/float8.py and
mx.py): one object converts the model and owns the work that conversion implies for the rest
of the run. A converter here gives the size filter of its recipe, converts the chosen nn.Linear
layers, supplies the contexts around each micro-batch (the weights' compute copies, Transformer
Engine's autocast), runs the hook after each optimizer step (FSDP2 float8 all-gather: every
scale in one all-reduce), and says what it is and how many GEMMs it runs in FP8 for the banner
and the FP8 share. `for_plan` maps the plan's (backend, recipe) to one converter; assemble calls
it once, and no caller compares backend or recipe names.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, Final

import torch
from torch import nn

from trainer import precision
from trainer.errors import BadInput
from trainer.fp8 import te_backend, torchao_backend
from trainer.fp8.layers import SizeFilter
from trainer.fp8_names import Backend, Recipe

Context = Callable[[], contextlib.AbstractContextManager[object]]


class Fp8Converter(ABC):
    """What the trainer asks of an FP8 backend and recipe. `mode`: the data-parallel mode
    (none, ddp or fsdp), which decides the weight casts and the FSDP2 all-gather."""

    backend: ClassVar[Backend]
    recipe: ClassVar[Recipe]
    cuda_only: ClassVar[bool] = False  # refused on the CPU before the model exists

    def __init__(self, plan: precision.Plan, mode: str) -> None:
        self.plan = plan
        self.mode = mode
        self.converted: frozenset[str] = frozenset()

    def describe(self) -> str:
        """How the banner names this converter: `torchao (tensorwise)`."""
        return f"{self.backend} ({self.recipe})"

    @property
    def fp8_gemms(self) -> int:
        """Of a converted layer's three GEMMs (forward, gradient input, gradient weight), how
        many run in FP8."""
        return 1 if self.plan.fp8_backward is None else 3

    @property
    def fsdp_float8_all_gather(self) -> bool:
        """Whether converted layers' weights are all-gathered in FP8 under FSDP2."""
        return False

    def size_filter(self) -> SizeFilter | None:
        """Which candidate layers are large enough for FP8 to pay (None: every one is)."""
        return None

    def convert(self, model: nn.Module, layer_names: set[str], device: torch.device) -> None:
        """Convert the named nn.Linear layers in place (none named: nothing to do)."""
        if layer_names:
            self._convert(model, layer_names, device)
            self.converted = frozenset(layer_names)

    @abstractmethod
    def _convert(self, model: nn.Module, layer_names: set[str], device: torch.device) -> None: ...

    def forward_context(self, device: torch.device) -> Context:
        """Around each micro-batch's forward."""
        return lambda: precision.autocast(self.plan, device.type)

    def weight_context(self, fp8_modules: list[nn.Module]) -> Context:
        """Around each micro-batch's forward and backward (a recompute reads the weights again)."""
        return contextlib.nullcontext

    def after_optimizer_step(self, model: nn.Module) -> None:
        """The per-step work after each optimizer step (none by default)."""
        return None


class _Torchao(Fp8Converter):
    """torchao's converters: the FP8 layers see their fp32 masters as compute-dtype copies
    (FSDP2 casts the parameters itself: MixedPrecisionPolicy.param_dtype)."""

    backend = Backend.TORCHAO
    filter_recipe: ClassVar[Recipe]  # the recipe whose auto-filter thresholds apply

    def size_filter(self) -> SizeFilter | None:
        return torchao_backend.size_filter(self.filter_recipe)

    def weight_context(self, fp8_modules: list[nn.Module]) -> Context:
        plan = self.plan
        if fp8_modules and plan.master != plan.compute and self.mode != "fsdp":
            return lambda: torchao_backend.compute_weights(fp8_modules, plan.compute)
        return contextlib.nullcontext


class TorchaoTensorwise(_Torchao):
    """Float8Linear with one dynamic scale per tensor; under FSDP2 with every GEMM in FP8, the
    weights are cast before the all-gather (half the bytes of bf16; torchtitan's
    enable_fsdp_float8_all_gather) and their scales computed in one all-reduce after each
    step (precompute_float8_dynamic_scale_for_fsdp). `fp8-fwd`'s BF16 backward needs the
    high-precision weight, which a float8 all-gather does not bring."""

    recipe = filter_recipe = Recipe.TENSORWISE

    def __init__(self, plan: precision.Plan, mode: str) -> None:
        super().__init__(plan, mode)
        self._all_gather = mode == "fsdp" and plan.fp8_backward is not None

    @property
    def fsdp_float8_all_gather(self) -> bool:
        return self._all_gather and bool(self.converted)

    def _convert(self, model: nn.Module, layer_names: set[str], device: torch.device) -> None:
        plan = self.plan
        assert plan.fp8_forward is not None
        if plan.fp8_backward is None:
            config = torchao_backend.forward_only_config(
                plan.fp8_forward, rowwise=False, all_gather=self._all_gather
            )
        else:
            config = torchao_backend.tensorwise_config(
                plan.fp8_forward, plan.fp8_backward, all_gather=self._all_gather
            )
        torchao_backend.convert_float8(model, layer_names, config)

    def after_optimizer_step(self, model: nn.Module) -> None:
        if self.fsdp_float8_all_gather:
            torchao_backend.precompute_scales(model)


class TorchaoRowwise(_Torchao):
    """Float8Linear with one scale per row (axiswise), rounded to a power of 2; with FP8
    gradients, torchao's own recipe of that name (gradients in E4M3)."""

    recipe = Recipe.ROWWISE
    filter_recipe = Recipe.ROWWISE

    def _convert(self, model: nn.Module, layer_names: set[str], device: torch.device) -> None:
        plan = self.plan
        assert plan.fp8_forward is not None
        if plan.fp8_backward is None:
            config = torchao_backend.forward_only_config(
                plan.fp8_forward, rowwise=True, all_gather=False
            )
        else:
            config = torchao_backend.recipe_config(self.recipe)
        torchao_backend.convert_float8(model, layer_names, config)


class TorchaoRowwiseGwHp(TorchaoRowwise):
    """Row-wise, with the weight-gradient GEMM kept in high precision (it has no size filter
    of its own: its GEMMs are rowwise's)."""

    recipe = Recipe.ROWWISE_WITH_GW_HP

    @property
    def fp8_gemms(self) -> int:
        return 1 if self.plan.fp8_backward is None else 2


class TorchaoMxfp8(_Torchao):
    """MXFP8 weights (torchao.prototype.moe_training): all three GEMMs in E4M3 with one e8m0
    scale per 32 elements; off CUDA the emulated recipe (plain PyTorch ops, slow, for tests).
    The size filter is tensorwise's."""

    recipe = Recipe.MXFP8
    filter_recipe = Recipe.TENSORWISE

    def _convert(self, model: nn.Module, layer_names: set[str], device: torch.device) -> None:
        torchao_backend.convert_mx(model, layer_names, emulate=device.type != "cuda")


class TransformerEngine(Fp8Converter):
    """te.pytorch.Linear layers run under TE's autocast (delayed per-tensor scaling), on CUDA
    only; TE keeps its own weights in the master dtype, so there is no weight cast."""

    backend = Backend.TRANSFORMER_ENGINE
    recipe = Recipe.TENSORWISE
    cuda_only = True

    def _convert(self, model: nn.Module, layer_names: set[str], device: torch.device) -> None:
        te_backend.convert(model, layer_names, self.plan, device)

    def forward_context(self, device: torch.device) -> Context:
        plan = self.plan

        def both() -> contextlib.ExitStack:
            stack = contextlib.ExitStack()
            stack.enter_context(precision.autocast(plan, device.type))
            stack.enter_context(te_backend.autocast(plan))
            return stack

        return both


CONVERTERS: Final[dict[tuple[Backend, Recipe], type[Fp8Converter]]] = {
    (cls.backend, cls.recipe): cls
    for cls in (
        TorchaoTensorwise,
        TorchaoRowwise,
        TorchaoRowwiseGwHp,
        TorchaoMxfp8,
        TransformerEngine,
    )
}


def for_plan(plan: precision.Plan, mode: str) -> Fp8Converter | None:
    """The converter of this plan's (fp8_backend, fp8_recipe); None when the plan has no FP8."""
    if not plan.uses_fp8:
        return None
    key = (Backend(plan.config.fp8_backend), Recipe(plan.config.fp8_recipe))
    cls = CONVERTERS.get(key)
    if cls is None:  # precision.problems refuses these first
        pairs = ", ".join(f"{b} {r}" for b, r in CONVERTERS)
        raise BadInput(
            f"precision: fp8_backend {key[0]} has no fp8_recipe {key[1]}; one of: {pairs}"
        )
    return cls(plan, mode)
