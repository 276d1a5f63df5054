"""Each step's loss, gradient norm (and fp16 loss scale) kept on the device until a read step.

On a GPU every `.item()` waits for the device's queue to drain, so reading the loss and the
norm each step would cap the step at the host's pace (issue 35, "honest throughput"). The loop
instead appends each step's values here as device tensors and reads them all in one transfer at
the next log step, checkpoint step, stop or the run's end; the health checks then judge the
steps in order and name the step a fault happened in (docs/trainer.md, "Numerical health").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainer.distributed import Dist, all_reduce


@dataclass(frozen=True)
class StepValues:
    """One step's values as read back: the loss is the mean over micro-batches and ranks."""

    step: int
    loss: float
    grad_norm: float
    loss_scale: float | None  # the GradScaler's scale after the step (fp16), else None


class Pending:
    """The steps done since the last read, their values still on the device."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self._losses: list[torch.Tensor] = []  # this rank's mean loss per step
        self._norms: list[torch.Tensor] = []  # the global grad norm (the same on every rank)
        self._scales: list[torch.Tensor] = []

    def add(
        self, step: int, loss: torch.Tensor, norm: torch.Tensor, scale: torch.Tensor | None
    ) -> None:
        """Keep a step's values: device tensors, detached; no host read."""
        self.steps.append(step)
        self._losses.append(loss.detach().float().reshape(()))
        self._norms.append(norm.detach().float().reshape(()))
        if scale is not None:
            # the scaler updates its scale in place: keep this step's value
            self._scales.append(scale.detach().float().reshape(()).clone())

    def read(self, d: Dist) -> list[StepValues]:
        """The pending steps' values, in step order, in one device-to-host transfer (the loss
        summed over ranks first, one all-reduce); empties the queue. Collective under torchrun:
        every rank reads at the same steps."""
        if not self.steps:
            return []
        losses = torch.stack(self._losses)
        if d.distributed:
            all_reduce(losses)
            losses = losses / d.world
        columns = [losses, torch.stack(self._norms)]
        if self._scales:
            columns.append(torch.stack(self._scales).to(losses.device))
        rows = torch.stack(columns, dim=1).tolist()  # the one blocking read
        scaled = bool(self._scales)
        values = [
            StepValues(step, row[0], row[1], row[2] if scaled else None)
            for step, row in zip(self.steps, rows, strict=True)
        ]
        self.steps, self._losses, self._norms, self._scales = [], [], [], []
        return values
