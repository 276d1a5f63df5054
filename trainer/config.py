"""The run configuration: typed sections, built from defaults, a preset, a file and overrides.

Every key is checked (type, allowed values) before anything heavy happens, so a typo in a
mounted config file is exit code 2 with the key's path, not a traceback an hour into a run.
Layers, in order of precedence: CLI overrides > config file > preset > built-in defaults.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Union

from trainer.errors import BadInput
from trainer.fp8_names import Backend, Recipe
from trainer.presets import DEFAULT_PRESET, PRESETS

PRECISION_CHOICES: Final = {
    "master_weights": ("fp32", "bf16"),
    "optimizer_state": ("fp32", "bf16"),
    "forward_matmul": ("fp32", "bf16", "fp16", "fp8_e4m3"),
    "backward_matmul": ("fp32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3"),
    "activation": ("fp32", "bf16", "fp16"),
    "grad_sync": ("fp32", "bf16"),
    "fp8_recipe": tuple(Recipe),
    "fp8_backend": tuple(Backend),
    "fp8_size_filter": ("auto", "always", "never"),
}

OTHER_CHOICES: Final = {
    ("data", "format"): ("auto", "synthetic", "bin", "text"),
    ("data", "token_dtype"): ("uint16", "uint32"),
    ("train", "activation_checkpointing"): ("none", "selective", "full"),
    ("train", "parallel"): ("auto", "none", "ddp", "fsdp"),
    ("health", "spike_action"): ("warn", "stop", "off"),
}


@dataclass(frozen=True)
class ModelConfig:
    """Architecture; unset sizes come from the named `size` (see trainer.model.SIZES)."""

    size: str = "tiny"
    dim: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None
    ffn_dim: int | None = None
    vocab_size: int | None = None
    max_seq_len: int | None = None
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5


@dataclass(frozen=True)
class DataConfig:
    """Where tokens come from: `synthetic`, a `.bin` token file or a text file (bytes)."""

    source: str = "synthetic"
    format: str = "auto"
    token_dtype: str = "uint16"  # noqa: S105 - a dtype name, not a secret
    seq_len: int | None = None
    eval_fraction: float = 0.05


@dataclass(frozen=True)
class PrecisionConfig:
    """The precision layering (a dtype per part of a step) plus the FP8 knobs."""

    master_weights: str = PRESETS[DEFAULT_PRESET]["master_weights"]
    optimizer_state: str = PRESETS[DEFAULT_PRESET]["optimizer_state"]
    forward_matmul: str = PRESETS[DEFAULT_PRESET]["forward_matmul"]
    backward_matmul: str = PRESETS[DEFAULT_PRESET]["backward_matmul"]
    activation: str = PRESETS[DEFAULT_PRESET]["activation"]
    grad_sync: str = PRESETS[DEFAULT_PRESET]["grad_sync"]
    stochastic_rounding: bool = False
    checkpoint_interval: int = 120
    fp8_recipe: Recipe = Recipe.TENSORWISE
    fp8_backend: Backend = Backend.TORCHAO
    fp8_size_filter: str = "auto"  # auto: torchao's size filter on CUDA, off on the CPU
    sensitive_layers: tuple[str, ...] = ("embedding", "head", "first_block", "last_block")
    loss_scale_init: float = 65536.0
    loss_scale_floor: float = 1.0


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation loop. `batch_size` is global (sequences per optimizer step)."""

    steps: int = 100
    stop_at: int | None = None
    batch_size: int = 8
    grad_accum: int = 1
    lr: float | None = None
    min_lr_ratio: float = 0.1
    warmup_steps: int | None = None
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0
    seed: int = 1234
    compile: bool | None = None  # None: on for FP8 on CUDA when a C compiler exists
    activation_checkpointing: str = "none"
    eval_interval: int = 200
    eval_batches: int = 4
    device: str = "auto"
    parallel: str = "auto"
    peak_tflops: float | None = None
    memory_check: bool = True
    inject_fault: str | None = None


@dataclass(frozen=True)
class HealthConfig:
    """Numerical health: NaN/Inf always stops; loss spikes warn or stop."""

    spike_action: str = "warn"
    spike_factor: float = 2.0
    spike_window: int = 50
    grad_norm_window: int = 100


@dataclass(frozen=True)
class CheckpointConfig:
    """Checkpoints go to `dir` (None: none are written); the interval is in `precision`."""

    dir: str | None = None
    keep_last: int = 3
    resume: str | None = None
    resume_anyway: bool = False


@dataclass(frozen=True)
class MetricsConfig:
    """Console lines and the JSONL file; `log_interval` None picks min(10, steps // 10)."""

    file: str | None = None
    log_interval: int | None = None
    tensorboard_dir: str | None = None
    profile_steps: int = 0
    profile_dir: str | None = None


@dataclass(frozen=True)
class RunConfig:
    """One training run, fully resolved."""

    preset: str = DEFAULT_PRESET
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (tuples become lists), as stored in checkpoints."""
        out: dict[str, Any] = dataclasses.asdict(self)
        out["precision"]["sensitive_layers"] = list(self.precision.sensitive_layers)
        return out

    @property
    def log_interval(self) -> int:
        if self.metrics.log_interval is not None:
            return self.metrics.log_interval
        return max(1, min(10, self.train.steps // 10))


SECTIONS: Final[dict[str, type[Any]]] = {
    "model": ModelConfig,
    "data": DataConfig,
    "precision": PrecisionConfig,
    "train": TrainConfig,
    "health": HealthConfig,
    "checkpoint": CheckpointConfig,
    "metrics": MetricsConfig,
}


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Check `value` against a field's annotation; ints are accepted where floats are."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner, where)
    if origin is tuple:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise BadInput(f"{where}: expected a list of strings, got {value!r}")
        return tuple(value)
    if annotation is bool:
        if not isinstance(value, bool):
            raise BadInput(f"{where}: expected true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadInput(f"{where}: expected an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, str):  # YAML 1.1 reads `3e-4` (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadInput(f"{where}: expected a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise BadInput(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(annotation, type) and issubclass(annotation, enum.StrEnum):
        if not isinstance(value, str) or value not in tuple(annotation):
            choices = ", ".join(annotation)
            raise BadInput(f"{where}: unknown value {value!r}; choose one of {choices}")
        return annotation(value)
    raise TypeError(f"unsupported annotation {annotation!r}")  # a bug in this module


def _build_section(cls: type[Any], data: Mapping[str, Any], name: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise BadInput(
            f"{name}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(known))}"
        )
    kwargs = {k: _coerce(v, hints[k], f"{name}.{k}") for k, v in data.items()}
    return cls(**kwargs)


def _check_choices(cfg: RunConfig) -> None:
    for key, choices in PRECISION_CHOICES.items():
        value = getattr(cfg.precision, key)
        if value not in choices:
            raise BadInput(
                f"precision.{key}: unknown value {value!r}; choose one of {', '.join(choices)}"
            )
    for (section, key), choices in OTHER_CHOICES.items():
        value = getattr(getattr(cfg, section), key)
        if value not in choices:
            raise BadInput(f"{section}.{key}: unknown value {value!r}; choose one of {choices}")


_SEED_MAX: Final = 2**63 - 1
_VOCAB_MAX: Final = 2**32


def _check_finite(cfg: RunConfig) -> None:
    """NaN and infinity are never a setting: every float key must be a finite number."""
    for section in SECTIONS:
        part = getattr(cfg, section)
        for f in dataclasses.fields(part):
            value = getattr(part, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise BadInput(f"{section}.{f.name}: must be a finite number, got {value}")


def _check_ranges(cfg: RunConfig) -> None:
    t, c, h, m, d = cfg.train, cfg.checkpoint, cfg.health, cfg.metrics, cfg.data
    positive = {
        "train.steps": t.steps,
        "train.batch_size": t.batch_size,
        "train.grad_accum": t.grad_accum,
        "train.eval_batches": t.eval_batches,
        "checkpoint.keep_last": c.keep_last,
        "health.spike_window": h.spike_window,
        "health.grad_norm_window": h.grad_norm_window,
    }
    for key, value in positive.items():
        if value < 1:
            raise BadInput(f"{key}: must be at least 1, got {value}")
    non_negative: dict[str, float] = {
        "train.eval_interval": t.eval_interval,
        "precision.checkpoint_interval": cfg.precision.checkpoint_interval,
        "train.grad_clip": t.grad_clip,
    }
    for key, amount in non_negative.items():
        if amount < 0:
            raise BadInput(f"{key}: must not be negative, got {amount}")
    # (key, value, low, high, what): low <= value < high unless noted in `what`
    between: list[tuple[str, float, float, float, str]] = [
        ("train.weight_decay", t.weight_decay, 0.0, 1.0, "[0, 1)"),
        ("train.beta1", t.beta1, 0.0, 1.0, "[0, 1)"),
        ("train.beta2", t.beta2, 0.0, 1.0, "[0, 1)"),
        ("train.min_lr_ratio", t.min_lr_ratio, 0.0, 1.0 + 1e-12, "[0, 1]"),
        ("data.eval_fraction", d.eval_fraction, 0.0, 0.5, "[0, 0.5)"),
    ]
    for key, number, low, high, what in between:
        if not low <= number < high:
            raise BadInput(f"{key}: must lie in {what}, got {number}")
    if t.lr is not None and not 0 < t.lr <= 1:
        raise BadInput(f"train.lr: must lie in (0, 1] (AdamW's step is about lr), got {t.lr}")
    if not 0 < t.eps < 1:
        raise BadInput(f"train.eps: must lie in (0, 1), got {t.eps}")
    if not 0 <= t.seed <= _SEED_MAX:
        raise BadInput(f"train.seed: must lie in 0..{_SEED_MAX}, got {t.seed}")
    if t.warmup_steps is not None and not 0 <= t.warmup_steps <= t.steps:
        raise BadInput(
            f"train.warmup_steps: must lie in 0..train.steps ({t.steps}), got {t.warmup_steps}"
        )
    if t.peak_tflops is not None and t.peak_tflops <= 0:
        raise BadInput(f"train.peak_tflops: must be positive, got {t.peak_tflops}")
    for key in ("dim", "n_layers", "n_heads", "ffn_dim", "vocab_size", "max_seq_len"):
        if (size := getattr(cfg.model, key)) is not None and size < 1:  # 0 is not "unset"
            raise BadInput(f"model.{key}: must be at least 1, got {size}")
    if (cfg.model.vocab_size or 0) > _VOCAB_MAX:
        raise BadInput(f"model.vocab_size: at most 2**32 (uint32 ids), got {cfg.model.vocab_size}")
    if cfg.model.rope_theta <= 1:
        raise BadInput(f"model.rope_theta: must exceed 1, got {cfg.model.rope_theta}")
    if not 0 < cfg.model.norm_eps < 1:
        raise BadInput(f"model.norm_eps: must lie in (0, 1), got {cfg.model.norm_eps}")
    p = cfg.precision
    if p.loss_scale_floor <= 0 or p.loss_scale_init < p.loss_scale_floor:
        raise BadInput(
            f"precision.loss_scale_init ({p.loss_scale_init}) must be at least "
            f"precision.loss_scale_floor ({p.loss_scale_floor}), and the floor positive"
        )
    if t.stop_at is not None and not 1 <= t.stop_at <= t.steps:
        raise BadInput(f"train.stop_at: must lie in 1..train.steps ({t.steps}), got {t.stop_at}")
    if m.log_interval is not None and m.log_interval < 1:
        raise BadInput(f"metrics.log_interval: must be at least 1, got {m.log_interval}")
    if d.seq_len is not None and d.seq_len < 1:
        raise BadInput(f"data.seq_len: must be at least 1, got {d.seq_len}")
    if h.spike_factor <= 1.0:
        raise BadInput(f"health.spike_factor: must exceed 1, got {h.spike_factor}")
    if m.profile_steps < 0:
        raise BadInput(f"metrics.profile_steps: must not be negative, got {m.profile_steps}")
    named = (
        ("checkpoint.dir", c.dir),
        ("metrics.file", m.file),
        ("metrics.tensorboard_dir", m.tensorboard_dir),
        ("metrics.profile_dir", m.profile_dir),
    )
    for key, path in named:
        if path is not None and not path.strip():
            raise BadInput(f"{key}: an empty path; name a directory/file or leave the key out")


def deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`, section by section (a section in `top` only overrides its keys)."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def build(
    file_data: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    preset: str | None = None,
) -> RunConfig:
    """Resolve defaults < preset < file < overrides into a checked RunConfig.

    `preset` (from --preset) wins over a `preset:` key in the file; the preset sets the six
    layering keys, and the file's and the CLI's precision keys then override them.
    """
    merged = deep_merge(dict(file_data or {}), overrides or {})
    unknown = sorted(set(merged) - set(SECTIONS) - {"preset"})
    if unknown:
        raise BadInput(
            f"unknown section(s) {', '.join(unknown)}; valid: preset, {', '.join(SECTIONS)}"
        )
    name = preset if preset is not None else merged.get("preset", DEFAULT_PRESET)
    if not isinstance(name, str) or name not in PRESETS:
        raise BadInput(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    sections: dict[str, Any] = {}
    for section, cls in SECTIONS.items():
        data = merged.get(section, {})
        if not isinstance(data, Mapping):
            raise BadInput(f"{section}: expected a mapping of keys, got {data!r}")
        if section == "precision":
            data = dict(PRESETS[name]) | dict(data)
        sections[section] = _build_section(cls, data, section)
    cfg = RunConfig(preset=name, **sections)
    _check_choices(cfg)
    _check_finite(cfg)
    _check_ranges(cfg)
    return cfg


def with_preset(cfg: RunConfig, name: str) -> RunConfig:
    """`cfg` with the precision keys of preset `name` (the six layering keys, and the FP8
    recipe for mxfp8), for --compare."""
    if name not in PRESETS:
        raise BadInput(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    keys: dict[str, Any] = dict(PRESETS[name])
    precision = dataclasses.replace(cfg.precision, **keys)
    return dataclasses.replace(cfg, preset=name, precision=precision)
