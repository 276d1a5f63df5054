"""The training loop: accumulate, unscale, clip, check, step; log, evaluate, checkpoint.

Per step the loop syncs with the device once (loss, grad norm and the stop flag travel
together, all-reduced across ranks), which is what lets it stop on the very step a NaN
appears, and lets every rank agree on when a signal stops the run.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
)

from trainer import checkpoint, health, memory
from trainer.assemble import Run
from trainer.distributed import all_reduce, no_sync
from trainer.errors import Interrupted, NumericalStop, OutOfMemory
from trainer.fp8 import torchao_backend
from trainer.metrics import Sink, Window, peak_memory_gb, train_line
from trainer.mfu import mfu
from trainer.presets import LAYERING_KEYS
from trainer.schedule import lr_at
from trainer.signals import StopRequest


@dataclass
class Outcome:
    """What a run did, for the summary record and for --compare (which asks for the curve)."""

    status: str
    step: int
    first_loss: float | None = None
    final_loss: float | None = None
    losses: dict[int, float] = field(default_factory=dict)
    eval_loss: float | None = None
    peak_mem_gb: float = 0.0
    tokens: int = 0
    wall_s: float = 0.0
    checkpoint: str | None = None
    message: str | None = None
    steady_steps: int = 0
    steady_seconds: float = 0.0

    def tokens_per_s(self, tokens_per_step: int) -> float | None:
        """Tokens/s per device after the first step of this invocation (warm-up, compile)."""
        if not self.steady_steps or self.steady_seconds <= 0:
            return None
        return tokens_per_step * self.steady_steps / self.steady_seconds


def _rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def _plain(value: Any) -> Any:
    """State with tensor subclasses unwrapped (torchao's MXFP8 weight wrapper keeps the real
    tensor in `_data`), so `torch.load(weights_only=True)` can read the checkpoint."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    inner = getattr(value, "_data", None)
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor and inner is not None:
        return _plain(inner)
    return value


class Loop:
    def __init__(
        self,
        run: Run,
        sink: Sink,
        stop: StopRequest,
        label: str | None = None,
        keep_curve: bool = False,
    ) -> None:
        self.run = run
        self.sink = sink
        self.stop = stop
        self.label = label
        self.keep_curve = keep_curve
        cfg = run.cfg
        self.spikes = health.SpikeDetector(cfg.health)
        self.grad_norms = Window(cfg.health.grad_norm_window)
        self.params = [p for p in run.core.parameters() if p.requires_grad]
        self.start_step = 0
        self.skipped_steps = 0
        self.warned_lost = False
        self.last_unchanged: float | None = None
        self.profiler: torch.profiler.profile | None = None
        if run.resume is not None:
            state = run.resume.state
            self.start_step = run.resume.step
            _set_rng_state(state["rng"])
            self.spikes.load_state_dict(state.get("health", {}))
            for value in state.get("grad_norms", []):
                self.grad_norms.add(float(value))
            self.skipped_steps = int(state.get("skipped_steps", 0))
        self.outcome = Outcome(status="running", step=self.start_step)
        b = run.batches
        self.tokens_per_step = b.micro * b.grad_accum * run.seq_len  # per device

    # -- records -------------------------------------------------------------------------

    def _base(self, event: str, step: int) -> dict[str, Any]:
        rec: dict[str, Any] = {"event": event, "step": step}
        if self.label is not None:
            rec["run"] = self.label
        return rec

    def _train_record(
        self, step: int, loss: float, grad_norm: float, lr: float, times: list[float]
    ) -> dict[str, Any]:
        run = self.run
        step_time = sum(times) / len(times)
        tps = self.tokens_per_step / step_time if step_time > 0 else 0.0
        mem, mem_kind = peak_memory_gb(run.dist.device)
        rec = self._base("train", step) | {
            "steps": run.cfg.train.steps,
            "loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "grad_norm_median": self.grad_norms.quantile(0.5),
            "grad_norm_p99": self.grad_norms.quantile(0.99),
            "tokens_per_s": tps,
            "tokens_per_s_total": tps * run.dist.world,
            "step_time_s": step_time,
            "peak_mem_gb": mem,
            "peak_mem_kind": mem_kind,
            "mfu": mfu(run.flops_per_token, tps, run.peak_tflops) if run.peak_tflops else None,
        }
        if run.peak_tflops_fp8:
            rec["mfu_fp8"] = mfu(run.flops_per_token, tps, run.peak_tflops_fp8)
        if run.scaler is not None:
            rec["loss_scale"] = float(run.scaler.get_scale())
            rec["skipped_steps"] = self.skipped_steps
        self.outcome.peak_mem_gb = mem
        return rec

    def _fp8_fields(self) -> dict[str, Any]:
        monitor = self.run.fp8_monitor
        if monitor is None:
            return {}
        table = monitor.table()
        table = torch.nan_to_num(table, nan=-1.0)
        all_reduce(table, op="max")
        table[table < 0] = float("nan")
        fields, warnings = monitor.summarize(table.cpu())
        for w in warnings:
            self.sink.warn(w)
        if warnings:
            fields["warnings"] = warnings
        return fields

    # -- pieces of a step ----------------------------------------------------------------

    def _evaluate(self, step: int) -> None:
        run = self.run
        run.model.eval()
        total = torch.zeros((), device=run.dist.device)
        with torch.no_grad():
            for i in range(run.cfg.train.eval_batches):
                x, y = run.batches.eval(i)
                with run.weight_context(), run.forward_context():
                    total += run.model(x, y).float()
        run.model.train()
        all_reduce(total)
        loss = total.item() / (run.cfg.train.eval_batches * run.dist.world)
        self.outcome.eval_loss = loss
        self.sink.record(self._base("eval", step) | {"eval_loss": loss})
        self.sink.say(f"eval step {step} | eval loss {loss:.4f}")

    def save_checkpoint(self, step: int) -> None:
        """Collective under FSDP2 (every rank gathers), written by rank 0 only."""
        run = self.run
        if run.ckpt_dir is None:
            return
        self._check_state_finite(step)
        full = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model_sd = get_model_state_dict(run.model, options=full)
        optim_sd = get_optimizer_state_dict(run.model, run.optimizer, options=full)
        if not run.dist.is_main:
            return
        state = {
            "model": _plain(model_sd),
            "optimizer": _plain(optim_sd),
            "scaler": run.scaler.state_dict() if run.scaler is not None else {},
            "rng": _rng_state(),
            "data_position": {"step": step, "samples": step * run.cfg.train.batch_size},
            "health": self.spikes.state_dict(),
            "grad_norms": list(self.grad_norms.values),
            "skipped_steps": self.skipped_steps,
        }
        meta = {
            "config": run.cfg.to_dict(),
            "arch": dataclasses.asdict(run.arch),
            "data": run.source.fingerprint,
            "world_size": run.dist.world,
            "seq_len": run.seq_len,
        }
        path = checkpoint.save(run.ckpt_dir, step, state, meta, run.cfg.checkpoint.keep_last)
        self.outcome.checkpoint = str(path)
        self.sink.say(f"checkpoint {path}")

    def _backward(self, step: int, lr: float, arm: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward over the micro-batches; returns (mean loss, grad norm)."""
        run = self.run
        accum = run.cfg.train.grad_accum
        loss_sum = torch.zeros((), device=run.dist.device)
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        for micro in range(accum):
            armed = arm and micro == 0 and run.fp8_monitor is not None
            if armed:
                assert run.fp8_monitor is not None
                run.fp8_monitor.arm()
            x, y = run.batches.train(step, micro)
            with run.weight_context():
                with no_sync(run.model, micro == accum - 1), run.forward_context():
                    loss = run.model(x, y)
                if run.fault is not None and run.fault[1] == step and run.fault[0] != "weight-nan":
                    loss = loss * float(run.fault[0])
                loss_sum += loss.detach().float()
                scaled = loss / accum
                (run.scaler.scale(scaled) if run.scaler is not None else scaled).backward()
            if armed:
                assert run.fp8_monitor is not None
                run.fp8_monitor.disarm()
        if run.scaler is not None:
            run.scaler.unscale_(run.optimizer)
        clip = run.cfg.train.grad_clip or float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.params, clip, foreach=True)
        full_tensor = getattr(norm, "full_tensor", None)
        if callable(full_tensor):
            norm = full_tensor()
        return loss_sum / accum, norm.float()

    # -- the loop ------------------------------------------------------------------------

    def _step_end(self, step: int, loss: float, grad_norm: float, measure: bool) -> None:
        """Health checks and the optimizer step (skipped by the GradScaler on overflow)."""
        run = self.run
        run.optimizer.measure = measure
        if run.scaler is None:
            health.check_finite(step, loss, grad_norm)
            run.optimizer.step()
        else:
            health.check_finite(step, loss, 0.0)
            if not math.isfinite(grad_norm):
                self.skipped_steps += 1
            run.scaler.step(run.optimizer)
            run.scaler.update()
            scale = float(run.scaler.get_scale())
            if scale < run.cfg.precision.loss_scale_floor:
                raise NumericalStop(
                    f"step {step}: loss scale fell to {scale:g}, below precision.loss_scale_floor "
                    f"{run.cfg.precision.loss_scale_floor:g}: fp16 gradients keep overflowing"
                )
        run.optimizer.measure = False
        if run.fp8_all_gather:
            torchao_backend.precompute_scales(run.model)
        run.optimizer.zero_grad(set_to_none=True)
        if run.fault is not None and run.fault == ("weight-nan", step):
            with torch.no_grad():
                self.params[0].view(-1)[0] = float("nan")

    def _unchanged_frac(self) -> float | None:
        """The fraction of weight elements the last (measured) step left as they were."""
        counted = self.run.optimizer.unchanged
        if counted is None:
            counted = torch.zeros(2, dtype=torch.float64)
        counted = all_reduce(counted.to(self.run.dist.device))
        unchanged, total = counted.tolist()
        if total <= 0:
            return None
        frac = float(unchanged / total)
        self.last_unchanged = frac
        message = health.lost_updates(frac, self.run.plan.config)
        if message is not None and not self.warned_lost:
            self.sink.warn(message)
            self.warned_lost = True
        return frac

    def _check_state_finite(self, step: int) -> None:
        """A checkpoint of NaN weights would be a trap: every resume would start from it."""
        run = self.run
        tensors: list[torch.Tensor] = list(run.core.parameters())
        for state in run.optimizer.state.values():
            tensors += [v for v in state.values() if isinstance(v, torch.Tensor)]
        local = [getattr(t, "to_local", lambda t=t: t)() for t in tensors]
        bad = torch.stack([~torch.isfinite(t).all() for t in local if t.is_floating_point()])
        count = all_reduce(bad.sum().float().to(run.dist.device)).item()
        if count:
            kept = self.outcome.checkpoint or "none was written yet"
            raise NumericalStop(
                f"step {step}: {int(count)} weight/optimizer tensor(s) hold NaN or Inf after the "
                f"optimizer step, so no checkpoint was written (the last one is {kept}). Resume "
                "from it with a lower lr, a BF16 preset (--forward-matmul bf16) or more layers "
                "in precision.sensitive_layers."
            )

    def _train(self) -> None:
        run, cfg = self.run, self.run.cfg
        t = cfg.train
        last = t.stop_at or t.steps
        interval = cfg.precision.checkpoint_interval
        times: list[float] = []
        tick = time.perf_counter()
        for step in range(self.start_step + 1, last + 1):
            lr = lr_at(
                step, peak=run.lr, steps=t.steps, warmup=run.warmup, min_ratio=t.min_lr_ratio
            )
            log_now = step % cfg.log_interval == 0 or step == last
            try:
                loss_t, norm_t = self._backward(step, lr, arm=log_now)
            except torch.OutOfMemoryError as exc:
                raise self._out_of_memory(step, exc) from exc
            loss, stop_votes = self._agree(loss_t)
            grad_norm = norm_t.item()
            self._step_end(step, loss, grad_norm, measure=log_now)
            now = time.perf_counter()
            times.append(now - tick)
            tick = now
            self._account(step, loss, times[-1])
            self.grad_norms.add(grad_norm)
            spike = self.spikes.observe(step, loss)
            if spike is not None:
                self.sink.warn(spike.message())
            if log_now:
                rec = self._train_record(step, loss, grad_norm, lr, times)
                rec["unchanged_frac"] = self._unchanged_frac()
                rec |= self._fp8_fields()
                if spike is not None:
                    rec.setdefault("warnings", []).append(spike.message())
                self.sink.record(rec)
                self.sink.say(train_line(rec))
                times = []
            if t.eval_interval and (step % t.eval_interval == 0 or step == last):
                self._evaluate(step)
            if step == last or stop_votes > 0 or (interval and step % interval == 0):
                self.save_checkpoint(step)
            if stop_votes > 0 and step < last:
                raise self._interrupted(step)
            if self.profiler is not None:
                self.profiler.step()
            tick = time.perf_counter()  # checkpoint and eval time is not step time

    def _out_of_memory(self, step: int, exc: Exception) -> OutOfMemory:
        run = self.run
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "out of memory"
        return OutOfMemory(
            f"step {step}: out of memory on {run.device_name} ({first}); estimated "
            f"{run.mem_estimate.describe()}: "
            f"{memory.advice(run.dist.mode, run.cfg.train.activation_checkpointing)}"
        )

    def _agree(self, loss: torch.Tensor) -> tuple[float, float]:
        """The mean loss over ranks and the number of ranks asked to stop (one all-reduce)."""
        flag = 1.0 if self.stop.signum is not None else 0.0
        if not self.run.dist.distributed:
            return loss.item(), flag
        shared = torch.stack([loss, torch.tensor(flag, device=loss.device)])
        all_reduce(shared)
        return shared[0].item() / self.run.dist.world, shared[1].item()

    def _account(self, step: int, loss: float, seconds: float) -> None:
        o = self.outcome
        if o.first_loss is None:
            o.first_loss = loss
        else:  # the invocation's first step warms up (allocator, compile)
            o.steady_steps += 1
            o.steady_seconds += seconds
        o.step, o.final_loss = step, loss
        o.tokens += self.tokens_per_step * self.run.dist.world
        if self.keep_curve:
            o.losses[step] = loss

    def _interrupted(self, step: int) -> Interrupted:
        signum = self.stop.signum if self.stop.signum is not None else 15
        ckpt_dir = self.run.ckpt_dir
        saved = (
            f"checkpoint saved in {ckpt_dir / checkpoint.step_name(step)}"
            if ckpt_dir is not None
            else "nothing saved (no --ckpt-dir)"
        )
        return Interrupted(
            signum,
            f"signal {signum} at step {step}: {saved}; start again with --resume to continue",
        )

    def _start_profiler(self) -> None:
        """--profile N: torch.profiler over steps 3..N+2 (two warm-up steps first), written as a
        Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev) per rank."""
        n = self.run.cfg.metrics.profile_steps
        if not n:
            return
        run = self.run
        where = run.cfg.metrics.profile_dir or (str(run.ckpt_dir) if run.ckpt_dir else ".")
        out = checkpoint.prepare_dir(where) / f"profile_rank{run.dist.rank}.json"
        activities = [torch.profiler.ProfilerActivity.CPU]
        if run.dist.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)

        def ready(prof: torch.profiler.profile) -> None:
            prof.export_chrome_trace(str(out))
            self.sink.say(f"profile: {n} step(s) traced into {out}")

        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=1, warmup=1, active=n, repeat=1),
            on_trace_ready=ready,
            record_shapes=True,
        )
        self.profiler.start()

    def train(self) -> Outcome:
        """Run to train.steps (or stop_at); the summary record is written whatever happens."""
        started = time.perf_counter()
        self._start_profiler()
        try:
            self._train()
            t = self.run.cfg.train
            self.outcome.status = "stopped_at" if t.stop_at and t.stop_at < t.steps else "completed"
        except NumericalStop as exc:
            self.outcome.status, self.outcome.message = "numerical_stop", str(exc)
            raise
        except Interrupted as exc:
            self.outcome.status, self.outcome.message = "interrupted", str(exc)
            raise
        finally:
            if self.profiler is not None:
                self.profiler.stop()
                self.profiler = None
            self.outcome.wall_s = time.perf_counter() - started
            if self.outcome.status != "running":
                self.sink.record(self.summary())
        return self.outcome

    def summary(self) -> dict[str, Any]:
        o, run = self.outcome, self.run
        tps = o.tokens_per_s(self.tokens_per_step)
        per_device = o.tokens / run.dist.world
        return self._base("summary", o.step) | {
            "status": o.status,
            "message": o.message,
            "steps_run": o.step - self.start_step,
            "first_loss": o.first_loss,
            "final_loss": o.final_loss,
            "eval_loss": o.eval_loss,
            "tokens": o.tokens,
            "tokens_per_s": tps,
            # everything included: first step, logging, evaluation, checkpoints
            "tokens_per_s_wall": per_device / o.wall_s if o.wall_s > 0 and o.tokens else None,
            "mfu": mfu(run.flops_per_token, tps, run.peak_tflops)
            if tps and run.peak_tflops
            else None,
            "peak_mem_gb": o.peak_mem_gb,
            "wall_s": o.wall_s,
            "checkpoint": o.checkpoint,
            "preset": run.cfg.preset,
            "precision": {k: getattr(run.plan.config, k) for k in LAYERING_KEYS},
            "fp8_layers": sum(1 for c in run.fp8_layers if c.fp8),
            "device": run.device_name,
            "world_size": run.dist.world,
        }
