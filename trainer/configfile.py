"""Reading a config file (YAML, TOML or JSON) and `--set section.key=value` overrides.

The format follows the extension (.yaml/.yml, .toml, .json); anything else is tried as YAML,
which also reads JSON. A file may be a `precision_config:` block on its own: a
top-level mapping whose keys are all precision keys is taken as the `precision` section.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import yaml

from trainer.config import SECTIONS, PrecisionConfig
from trainer.errors import BadInput

_PRECISION_KEYS = {f for f in PrecisionConfig.__dataclass_fields__}


def load(path: str) -> dict[str, Any]:
    """The file's top-level mapping, or BadInput naming the file and what is wrong."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"config file {path}: cannot read it ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"config file {path}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8"
        ) from exc
    suffix = p.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise BadInput(f"config file {path}: not valid {suffix or 'YAML'}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(f"config file {path}: the top level must be a mapping of sections")
    out: dict[str, Any] = data
    if "precision_config" in out and len(out) == 1:
        out = {"precision": out["precision_config"]}
    elif out and set(out) <= _PRECISION_KEYS:
        out = {"precision": out}
    return out


def parse_set(items: list[str]) -> dict[str, Any]:
    """`["train.lr=3e-4", "precision.sensitive_layers=[head]"]` as a nested mapping.

    Values are read as YAML scalars/lists, so `3e-4`, `true`, `null` and `[a, b]` mean what
    they look like.
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) != 2 or not all(parts):
            raise BadInput(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. train.lr=3e-4")
        section, name = parts
        if section not in SECTIONS:
            raise BadInput(f"--set {item!r}: unknown section {section!r}")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise BadInput(f"--set {item!r}: cannot read the value: {exc}") from exc
        out.setdefault(section, {})[name] = value
    return out
