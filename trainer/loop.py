"""The training loop: accumulate, unscale, clip, step; read, check, log, evaluate, checkpoint.

No step reads a device value back on its own: each step's loss and grad norm stay on the device
(trainer/step_values.py) until the next log step, checkpoint step, stop or the run's end, where
one transfer brings them all and the health checks judge the steps in order, stopping the run
with the step a fault happened in. A checkpoint step reads before it saves, so no checkpoint is
written after a fault. Only the stop flag is agreed every step, on the host (every rank must
stop at the same step). The step itself is train_step.py, what a checkpoint holds
train_state.py, --profile profiling.py; this module keeps the order of things per step and the
records it logs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Iterator
from typing import Any, Final

import torch

from trainer import checkpoint, health, profiling, train_state, train_step
from trainer.assemble import Run
from trainer.distributed import agree_written, all_reduce
from trainer.errors import Interrupted, NumericalStop, TrainerError
from trainer.metrics import Sink, Window, peak_memory_gb, train_line
from trainer.mfu import mfu
from trainer.outcome import Outcome
from trainer.presets import LAYERING_KEYS
from trainer.schedule import lr_at
from trainer.signals import StopRequest
from trainer.step_values import Pending, StepValues

SLOW_SAVE_S: Final = 20.0  # a save slower than this may not fit a SIGTERM's grace period


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
        self.warmed_up = False
        self.warned_slow_save = False
        self.step_in_flight = self.start_step  # the step a stop happened in
        self.pending = Pending()  # steps whose values are still on the device
        self.timed_last: bool | None = None  # how the last step's seconds were counted
        self.unlogged: list[str] = []  # spike warnings read since the last train record
        self.profiler: torch.profiler.profile | None = None
        if run.resume is not None:
            state = run.resume.state
            self.start_step = run.resume.step
            train_state.set_rng_state(state["rng"])
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
        self, values: StepValues, lr: float, times: list[tuple[float, bool]]
    ) -> dict[str, Any]:
        run = self.run
        counted = [t for t, timed in times if timed] or [t for t, _ in times]
        step_time = sum(counted) / len(counted)
        tps = self.tokens_per_step / step_time if step_time > 0 else 0.0
        mem, mem_kind = peak_memory_gb(run.dist.device)
        rec = self._base("train", values.step) | {
            "steps": run.cfg.train.steps,
            "loss": values.loss,
            "lr": lr,
            "grad_norm": values.grad_norm,
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
        if values.loss_scale is not None:
            rec["loss_scale"] = values.loss_scale
            rec["skipped_steps"] = self.skipped_steps
        self.outcome.peak_mem_gb = mem
        return rec

    def _fp8_fields(self) -> dict[str, Any]:
        monitor = self.run.fp8_monitor
        if monitor is None:
            return {}
        table = all_reduce(monitor.table(self.run.dist.device), op="max")
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
        """Collective under FSDP2 (every rank gathers), written by rank 0 only; every rank
        waits for the write (distributed.agree_written)."""
        loop_state = {
            "health": self.spikes.state_dict(),
            "grad_norms": list(self.grad_norms.values),
            "skipped_steps": self.skipped_steps,
        }
        started = time.perf_counter()
        try:
            path = train_state.save(self.run, step, loop_state, self.outcome.checkpoint)
        except checkpoint.WriteFailed as exc:
            agree_written(self.run.dist, exc)
            raise
        agree_written(self.run.dist, None)
        if path is None:
            return
        self.outcome.checkpoint = str(path)
        self.sink.say(f"checkpoint {path}")
        seconds = time.perf_counter() - started
        if seconds > SLOW_SAVE_S and not self.warned_slow_save:
            self.warned_slow_save = True
            gb = (path / checkpoint.STATE_FILE).stat().st_size / 1e9
            self.sink.warn(
                f"saving {path.name} took {seconds:.0f} s ({gb:.1f} GB at {gb / seconds:.2f} "
                "GB/s): a SIGTERM checkpoint must fit the stop timeout (podman --stop-timeout, "
                "Kubernetes terminationGracePeriodSeconds; torchrun waits 30 s for its workers). "
                f"Allow at least {2 * seconds:.0f} s, or checkpoint to a faster disk"
            )

    # -- the loop ------------------------------------------------------------------------

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

    def _steps(self) -> Iterator[int]:
        """The steps, yielded as each is done (log, eval and checkpoint included)."""
        run, cfg = self.run, self.run.cfg
        t = cfg.train
        last = t.stop_at or t.steps
        interval = cfg.precision.checkpoint_interval
        times: list[tuple[float, bool]] = []  # this log interval's (seconds, timed) per step
        tick = time.perf_counter()
        for step in range(self.start_step + 1, last + 1):
            self.step_in_flight = step
            lr = lr_at(
                step, peak=run.lr, steps=t.steps, warmup=run.warmup, min_ratio=t.min_lr_ratio
            )
            log_now = step % cfg.log_interval == 0 or step == last
            # compiled runs measure FP8 statistics eagerly on log steps (train_step.backward):
            # throughput counts the other steps, the same ones for every preset of an A/B
            timed = not (log_now and run.compiled)
            if not timed:  # the queue the steps before left: their time, not this step's
                tick = self._drain(tick, times)
            try:
                loss_t, norm_t = train_step.backward(run, self.params, step, lr, arm=log_now)
            except torch.OutOfMemoryError as exc:
                raise train_step.out_of_memory(run, step, exc) from exc
            stop_votes = train_step.agree_stop(run, self.stop)
            scale = train_step.optimizer_step(run, self.params, step, measure=log_now)
            self.pending.add(step, loss_t, norm_t, scale)
            save_now = step == last or stop_votes > 0 or bool(interval and step % interval == 0)
            eval_now = bool(t.eval_interval) and (step % t.eval_interval == 0 or step == last)
            # the one read: log steps; checkpoint steps before they save; eval steps, so that
            # the eval's own read does not drain (and hide) the steps' queue
            read = self.pending.read(run.dist) if log_now or save_now or eval_now else []
            now = time.perf_counter()
            times.append((now - tick, timed))
            self._time(now - tick, timed)
            tick = now
            self._judge(read)
            self.step_in_flight = step
            if log_now:
                rec = self._train_record(read[-1], lr, times)
                rec["unchanged_frac"] = self._unchanged_frac()
                rec |= self._fp8_fields()
                if self.unlogged:
                    rec.setdefault("warnings", []).extend(self.unlogged)
                    self.unlogged = []
                self.sink.record(rec)
                self.sink.say(train_line(rec))
                times = []
            if eval_now:
                self._evaluate(step)
            if save_now:
                self.save_checkpoint(step)
            if stop_votes > 0 and step < last:
                raise self._interrupted(step)
            if self.profiler is not None:
                self.profiler.step()
            yield step
            tick = time.perf_counter()  # checkpoint, eval and --compare's other side: not step time

    def _drain(self, tick: float, times: list[tuple[float, bool]]) -> float:
        """Wait for the device to finish the steps queued so far and charge the wait to the
        last of them (a log step of a compiled run is not timed, and its eager pass would
        otherwise absorb the interval's GPU time); the new tick."""
        if self.run.dist.device.type == "cuda":
            torch.cuda.synchronize(self.run.dist.device)
        now = time.perf_counter()
        if times:
            seconds, timed = times[-1]
            times[-1] = (seconds + now - tick, timed)
        if self.timed_last is not None:
            self._time(now - tick, self.timed_last, add_to_last=True)
        return now

    def _judge(self, read: list[StepValues]) -> None:
        """The health checks of the steps just read, in step order: NumericalStop names the
        step a fault happened in (step_in_flight is left there); spikes warn at once and wait
        in `unlogged` for the next train record."""
        scaled = self.run.scaler is not None
        floor = self.run.cfg.precision.loss_scale_floor
        for v in read:
            self.step_in_flight = v.step
            health.check_finite(v.step, v.loss, 0.0 if scaled else v.grad_norm)
            if scaled and not math.isfinite(v.grad_norm):
                self.skipped_steps += 1  # the GradScaler skipped it (overflow)
            if v.loss_scale is not None and v.loss_scale < floor:
                raise NumericalStop(
                    f"step {v.step}: loss scale fell to {v.loss_scale:g}, below "
                    f"precision.loss_scale_floor {floor:g}: fp16 gradients keep overflowing"
                )
            self._account(v.step, v.loss, v.grad_norm)
            self.grad_norms.add(v.grad_norm)
            spike = self.spikes.observe(v.step, v.loss)
            if spike is not None:
                self.sink.warn(spike.message())
                self.unlogged.append(spike.message())

    def _time(self, seconds: float, timed: bool, add_to_last: bool = False) -> None:
        """A step's host seconds into the steady-state (or untimed) totals; `add_to_last`: more
        seconds of the step counted last (its queue, drained later)."""
        o, steps = self.outcome, 0 if add_to_last else 1
        if not timed:
            o.untimed_steps += steps
            o.untimed_seconds += seconds
        elif not self.warmed_up:  # the invocation's first timed step warms up (allocator, compile)
            self.warmed_up = True
        elif o.steady_steps or not add_to_last:  # not the warm-up step's own queue
            o.steady_steps += steps
            o.steady_seconds += seconds
        if not add_to_last:
            self.timed_last = timed

    def _account(self, step: int, loss: float, grad_norm: float) -> None:
        o = self.outcome
        if o.first_loss is None:
            o.first_loss = loss
        o.step, o.final_loss = step, loss
        o.tokens += self.tokens_per_step * self.run.dist.world
        if self.keep_curve:
            o.losses[step] = loss
            o.grad_norms[step] = grad_norm

    def _interrupted(self, step: int) -> Interrupted:
        signum = self.stop.signum if self.stop.signum is not None else 15
        ckpt_dir = self.run.ckpt_dir
        saved = (
            f"checkpoint saved in {ckpt_dir / checkpoint.step_name(step)}"
            if ckpt_dir is not None
            else "nothing saved (no --ckpt-dir)"
        )
        if ckpt_dir is None:
            return Interrupted(signum, f"signal {signum} at step {step}: {saved}", saved=False)
        return Interrupted(
            signum,
            f"signal {signum} at step {step}: {saved}; start again with --resume to continue",
        )

    def train(self) -> Outcome:
        """Run to train.steps (or stop_at); the summary record is written whatever happens."""
        for _ in self.stepping():
            pass
        return self.outcome

    def stepping(self) -> Generator[int]:
        """The run one optimizer step at a time: `train` runs it through, --compare interleaves
        two (trainer/compare_run.py). `wall_s` counts only the time spent in this run, and the
        summary record is written whatever ends it."""
        self.profiler = profiling.start(self.run, self.sink)
        resumed: float | None = time.perf_counter()
        try:
            for step in self._steps():
                self.outcome.wall_s += time.perf_counter() - (resumed or 0.0)
                resumed = None
                yield step
                resumed = time.perf_counter()
            t = self.run.cfg.train
            self.outcome.status = "stopped_at" if t.stop_at and t.stop_at < t.steps else "completed"
        except NumericalStop as exc:
            self.outcome.status, self.outcome.message = "numerical_stop", str(exc)
            raise
        except Interrupted as exc:
            self.outcome.status, self.outcome.message = "interrupted", str(exc)
            raise
        except TrainerError as exc:  # out of memory, a full disk: still a summary
            self.outcome.status, self.outcome.message = "error", str(exc)
            raise
        finally:
            if self.profiler is not None:
                self.profiler.stop()
                self.profiler = None
            if resumed is not None:
                self.outcome.wall_s += time.perf_counter() - resumed
            if self.outcome.status != "running":
                self.sink.record(self.summary())

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
            "fp8_flops_share": run.fp8_share.share if run.fp8_share else None,
            "fp8_speed_ceiling": run.fp8_share.ceiling if run.fp8_share else None,
            "device": run.device_name,
            "world_size": run.dist.world,
        }
