"""AdamW whose moments live in `optimizer_state` precision, independent of the weights' dtype.

torch.optim.AdamW keeps its moments in the parameter's dtype, so BF16 master weights would
force BF16 moments; `optimizer_state` fp32 keeps FP32 moments under BF16 weights. Here the
update is computed in fp32 for every parameter and written back in the parameter's and the
state's own dtypes. The math is torch's AdamW (decoupled weight decay, bias correction), and
the state dict has the same keys, so torch's distributed state-dict helpers handle it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import torch


def _local(t: torch.Tensor) -> torch.Tensor:
    """FSDP2 shards are DTensors: do the arithmetic on the local shard, in place."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _fp32(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t if t.dtype == torch.float32 else t.float() for t in tensors]


class AdamW(torch.optim.Optimizer):
    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        *,
        lr: float,
        betas: tuple[float, float],
        eps: float,
        weight_decay: float,
        state_dtype: torch.dtype,
        stochastic_rounding: bool = False,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)
        self.state_dtype = state_dtype
        self.stochastic_rounding = stochastic_rounding
        # set `measure` before a step to count the elements it leaves unchanged
        self.measure = False
        self.unchanged: torch.Tensor | None = None  # [unchanged elements, all elements]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch casts loaded moments to the parameter dtype (fp32 → bf16 under BF16 weights);
        take them again from `state_dict` in `state_dtype`, or a resume would not be exact."""
        super().load_state_dict(state_dict)
        saved_ids = itertools.chain.from_iterable(g["params"] for g in state_dict["param_groups"])
        params = itertools.chain.from_iterable(g["params"] for g in self.param_groups)
        by_id = dict(zip(saved_ids, params, strict=True))
        for pid, saved in state_dict["state"].items():
            p = by_id[pid]
            for key in ("exp_avg", "exp_avg_sq"):
                if key in saved:
                    self.state[p][key] = saved[key].to(device=p.device, dtype=self.state_dtype)

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        self.unchanged = None
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update(group, params)

    def _update(self, group: dict[str, Any], params: list[torch.Tensor]) -> None:
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = torch.zeros_like(p, dtype=self.state_dtype)
                state["exp_avg_sq"] = torch.zeros_like(p, dtype=self.state_dtype)
            state["step"] += 1
        step = int(self.state[params[0]]["step"].item())
        weights = [_local(p) for p in params]
        grads = _fp32([_local(p.grad) for p in params if p.grad is not None])
        m_store = [_local(self.state[p]["exp_avg"]) for p in params]
        v_store = [_local(self.state[p]["exp_avg_sq"]) for p in params]
        m, v, w = _fp32(m_store), _fp32(v_store), _fp32(weights)
        before = [t.clone() for t in weights] if self.measure else None

        torch._foreach_lerp_(m, grads, 1.0 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, 1.0 - beta2)
        bias1 = 1.0 - beta1**step
        bias2_sqrt = math.sqrt(1.0 - beta2**step)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, bias2_sqrt)
        torch._foreach_add_(denom, eps)
        if wd:
            torch._foreach_mul_(w, 1.0 - lr * wd)
        torch._foreach_addcdiv_(w, m, denom, -lr / bias1)

        if weights[0].dtype == torch.bfloat16 and self.stochastic_rounding:
            w = [stochastic_round_bf16(t) for t in w]
        for store, computed in ((weights, w), (m_store, m), (v_store, v)):
            if store[0] is not computed[0]:  # fp32 state is updated in place
                torch._foreach_copy_(store, computed)
        if before is not None:
            same = torch.stack([(a == b).sum() for a, b in zip(before, weights, strict=True)])
            # both counts on the weights' device: a CPU scalar cannot join a device tensor
            total = same.new_tensor(sum(t.numel() for t in weights), dtype=torch.float64)
            counted = torch.stack([same.sum().to(torch.float64), total])
            self.unchanged = counted if self.unchanged is None else self.unchanged + counted


def stochastic_round_bf16(x: torch.Tensor) -> torch.Tensor:
    """fp32 → bf16 rounding up with probability (dropped bits / 2**16): unbiased, so updates far
    below a bf16 ulp still move the weight on average (Gupta et al., 2015, "Deep Learning with
    Limited Numerical Precision"). Adds uniform noise to the 16 bits bf16 drops, then truncates;
    the sign-magnitude layout makes that work for either sign."""
    bits = x.contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, dtype=torch.int32, device=x.device)
    rounded = (bits + noise) & -65536  # clear the low 16 bits: exact in bf16
    return rounded.view(torch.float32).to(torch.bfloat16)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Matrices (linear and embedding weights) decay; norm gains do not."""
    decay: list[torch.Tensor] = []
    keep: list[torch.Tensor] = []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else keep).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": keep, "weight_decay": 0.0},
    ]
