"""Config layering: defaults < preset < file < flags, every key checked, a bare precision block."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer import config, configfile
from trainer.errors import BadInput
from trainer.presets import PRESETS

PRECISION_BLOCK = """\
precision_config:
  master_weights: bf16
  optimizer_state: fp32
  forward_matmul: fp8_e4m3
  backward_matmul: bf16
  activation: bf16
  grad_sync: bf16
  checkpoint_interval: 120
"""


def test_a_bare_precision_block_is_fp8_fwd_with_bf16_masters(tmp_path: Path) -> None:
    """A bare `precision_config:` block still reads verbatim; the preset differs only in keeping
    fp32 masters (bf16 masters lose small updates; the run warns about them)."""
    path = tmp_path / "precision.yaml"
    path.write_text(PRECISION_BLOCK)
    cfg = config.build(configfile.load(str(path)))
    assert cfg.preset == "fp8-fwd"
    for key, value in PRESETS["fp8-fwd"].items():
        expected = "bf16" if key == "master_weights" else value
        assert getattr(cfg.precision, key) == expected
    assert PRESETS["fp8-fwd"]["master_weights"] == "fp32"
    assert cfg.precision.checkpoint_interval == 120


def test_presets_differ_only_in_the_matmul_rows_except_fp16_and_fp32() -> None:
    base = PRESETS["fp8-fwd"]
    for name in ("bf16", "fp8"):
        changed = {k for k in base if PRESETS[name][k] != base[k]}
        assert changed <= {"forward_matmul", "backward_matmul"}, name
    assert PRESETS["fp8"]["backward_matmul"] == "fp8_e5m2"
    assert PRESETS["fp16"]["master_weights"] == "fp32"


def test_precedence_preset_then_file_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        'preset = "fp8"\n[precision]\ngrad_sync = "fp32"\n[train]\nsteps = 7\nlr = 1e-3\n'
    )
    cfg = config.build(
        configfile.load(str(path)), {"train": {"steps": 9}, "precision": {"activation": "fp32"}}
    )
    assert cfg.preset == "fp8"
    assert cfg.precision.backward_matmul == "fp8_e5m2"  # from the file's preset
    assert cfg.precision.grad_sync == "fp32"  # the file over the preset
    assert cfg.precision.activation == "fp32"  # the flag over both
    assert cfg.train.steps == 9 and cfg.train.lr == 1e-3
    # --preset beats the file's preset; the file's precision keys still apply.
    cfg = config.build(configfile.load(str(path)), preset="bf16")
    assert cfg.precision.backward_matmul == "bf16" and cfg.precision.grad_sync == "fp32"


def test_json_file_and_yaml_number_without_a_dot(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('{"train": {"batch_size": 16}, "model": {"size": "small"}}')
    cfg = config.build(configfile.load(str(path)))
    assert cfg.train.batch_size == 16 and cfg.model.size == "small"
    yaml_path = tmp_path / "run.yaml"
    yaml_path.write_text("train:\n  lr: 3e-4\n")  # YAML 1.1 reads this as a string
    assert config.build(configfile.load(str(yaml_path))).train.lr == 3e-4


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"precision": {"forward_matmul": "fp4"}}, "precision.forward_matmul: unknown value 'fp4'"),
        ({"precision": {"master_weight": "bf16"}}, "precision: unknown key(s) master_weight"),
        ({"trian": {"steps": 3}}, "unknown section(s) trian"),
        ({"train": {"steps": "ten"}}, "train.steps: expected an integer"),
        ({"train": {"steps": True}}, "train.steps: expected an integer"),
        ({"train": {"steps": 0}}, "train.steps: must be at least 1"),
        ({"train": {"compile": "yes"}}, "train.compile: expected true or false"),
        ({"train": {"stop_at": 50, "steps": 10}}, "train.stop_at: must lie in 1..train.steps"),
        ({"precision": {"sensitive_layers": "head"}}, "expected a list of strings"),
        ({"preset": "fp6"}, "unknown preset 'fp6'"),
        ({"data": {"eval_fraction": 0.7}}, "data.eval_fraction"),
        ({"health": {"spike_factor": 0.5}}, "health.spike_factor: must exceed 1"),
    ],
)
def test_bad_values_name_the_key(data: dict[str, object], needle: str) -> None:
    with pytest.raises(BadInput) as err:
        config.build(data)
    assert needle in str(err.value)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="cannot read"):
        configfile.load(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\nsteps = 3")
    with pytest.raises(BadInput, match=r"not valid \.toml"):
        configfile.load(str(bad))
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(BadInput, match="top level must be a mapping"):
        configfile.load(str(listing))


def test_set_overrides_read_yaml_values() -> None:
    out = configfile.parse_set(
        [
            "train.lr=3e-4",
            "precision.sensitive_layers=[head, blocks.*.mlp.down]",
            "train.compile=true",
        ]
    )
    cfg = config.build(None, out)
    assert cfg.train.lr == 3e-4 and cfg.train.compile is True
    assert cfg.precision.sensitive_layers == ("head", "blocks.*.mlp.down")
    for bad in ("lr=3", "train.lr", "nope.lr=3", "a.b.c=1"):
        with pytest.raises(BadInput):
            configfile.parse_set([bad])


def test_with_preset_changes_only_the_layering() -> None:
    cfg = config.build({"precision": {"fp8_recipe": "rowwise", "checkpoint_interval": 7}})
    other = config.with_preset(cfg, "bf16")
    assert other.preset == "bf16" and other.precision.forward_matmul == "bf16"
    assert other.precision.fp8_recipe == "rowwise" and other.precision.checkpoint_interval == 7


def test_log_interval_default_scales_with_the_run() -> None:
    assert config.build({"train": {"steps": 8}}).log_interval == 1
    assert config.build({"train": {"steps": 50}}).log_interval == 5
    assert config.build({"train": {"steps": 5000}}).log_interval == 10
    assert config.build({"metrics": {"log_interval": 3}}).log_interval == 3
