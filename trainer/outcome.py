"""What a training run did: the summary record's numbers and, for --compare and the quality gate,
the loss (and grad-norm) curve."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    """What a run did, for the summary record and for --compare (which asks for the curve)."""

    status: str
    step: int
    first_loss: float | None = None
    final_loss: float | None = None
    losses: dict[int, float] = field(default_factory=dict)
    grad_norms: dict[int, float] = field(default_factory=dict)  # kept with the curve (the gate)
    eval_loss: float | None = None
    peak_mem_gb: float = 0.0
    tokens: int = 0
    wall_s: float = 0.0
    checkpoint: str | None = None
    message: str | None = None
    steady_steps: int = 0
    steady_seconds: float = 0.0
    untimed_steps: int = 0  # compiled log steps (eager FP8 statistics): not steady state
    untimed_seconds: float = 0.0

    def tokens_per_s(self, tokens_per_step: int) -> float | None:
        """Tokens/s per device over the steady steps: after the first timed step of this
        invocation (warm-up, compile), without the compiled runs' log steps; over those when
        every step was one (log interval 1)."""
        steps, seconds = self.steady_steps, self.steady_seconds
        if not steps:
            steps, seconds = self.untimed_steps, self.untimed_seconds
        if not steps or seconds <= 0:
            return None
        return tokens_per_step * steps / seconds
