"""trainimg's settings: the registry, the engine, the wheelhouse and preflight's inventory, each
from the first of a command-line flag, an environment variable, the config file
(`$XDG_CONFIG_HOME/trainimg/config.toml`, default `~/.config/trainimg/config.toml`) and a
built-in default.

Retyping `--registry HOST/REPO` on every push is what a config file is for; knowing where a
value came from is what makes one safe to have, so every value is a Setting that names its
source (`trainimg config show`). Resolution is pure: (a flag's value, an environment mapping,
the file's text) -> Settings; the one effect here is reading the file (`read_file`). A bad file
- TOML syntax, an unknown key, a wrong type or value - is a TrainimgError naming the file, the
line where tomllib gives one, the key and what is valid: exit 2, before any command works.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.errors import TrainimgError

ENGINES = ("podman", "docker")


@dataclass(frozen=True)
class Key:
    """One setting: the flag that sets it, its environment variable (None: none), its default
    (None: unset, the command decides) and, for a closed set, the values that are valid."""

    name: str
    flag: str
    env: str | None
    default: str | None
    meaning: str
    choices: tuple[str, ...] = ()
    noun: str = "a value"  # what a choice is, for the message that refuses another


SETTING_KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key(
            "registry",
            "--registry",
            "TRAINIMG_REGISTRY",
            None,
            "HOST[:PORT]/REPO that push, slurm and prune --registry use",
        ),
        Key(
            "engine",
            "--engine",
            "TRAINIMG_ENGINE",
            None,
            "podman or docker (unset: discovery, docs/build.md)",
            ENGINES,
            "an engine",
        ),
        Key(
            "wheelhouse",
            "--wheelhouse",
            "TRAINIMG_WHEELHOUSE",
            ".cache/wheelhouse",
            "the wheelhouse directory of build, wheelhouse and extend",
        ),
        Key("inventory", "--inventory", None, None, "preflight's ansible inventory file"),
    )
}


@dataclass(frozen=True)
class Setting:
    """A value and where it came from: `flag`, `env $NAME`, the config file's path, `default`."""

    key: str
    value: str | None
    source: str


def config_path(environ: Mapping[str, str]) -> Path:
    """Where the config file is: $XDG_CONFIG_HOME/trainimg/config.toml (the XDG base directory
    rule: an empty or relative value is ignored), else ~/.config/trainimg/config.toml."""
    base = environ.get("XDG_CONFIG_HOME", "")
    if not base or not os.path.isabs(base):
        base = str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(base) / "trainimg" / "config.toml"


_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")


def _where(path: Path, text: str, name: str) -> str:
    """`PATH:LINE` of the line that sets `name` (a key or a [table]), else `PATH`: tomllib
    gives a line only for syntax errors, and a person fixes a file by its line."""
    setting = re.compile(rf"^\s*(\[\s*)?[\"']?{re.escape(name)}[\"']?\s*[=\].]")
    for number, line in enumerate(text.splitlines(), 1):
        if setting.match(line):
            return f"{path}:{number}"
    return str(path)


def _expected(key: Key) -> str:
    if key.choices:
        return " or ".join(repr(c) for c in key.choices)
    return f"a non-empty string: {key.meaning}"


def parse_config(text: str, path: Path) -> dict[str, str]:
    """The file's values, each checked: TOML, known keys, strings, a valid choice."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line L, column C)"
        at = _AT_LINE.search(str(exc))
        where = f"{path}:{at.group(1)}" if at else str(path)
        raise TrainimgError(f"{where}: not valid TOML: {exc}") from None
    valid = ", ".join(SETTING_KEYS)
    out: dict[str, str] = {}
    for name, value in data.items():
        key = SETTING_KEYS.get(name)
        if key is None:
            raise TrainimgError(
                f"{_where(path, text, name)}: unknown key {name!r}: valid keys are {valid}"
            )
        if not isinstance(value, str) or not value or (key.choices and value not in key.choices):
            raise TrainimgError(
                f"{_where(path, text, name)}: {name} = {value!r}: expected {_expected(key)}"
            )
        out[name] = value
    return out


def resolve_setting(
    name: str, flag: str | None, environ: Mapping[str, str], file: Mapping[str, str], path: Path
) -> Setting:
    """One key's value: flag > environment > file > default (an empty variable counts as
    unset). The environment's value is taken as it is: `checked` judges it."""
    key = SETTING_KEYS[name]
    if flag is not None:
        return Setting(name, flag, "flag")
    env = environ.get(key.env) if key.env else None
    if env:
        return Setting(name, env, f"env ${key.env}")
    if name in file:
        return Setting(name, file[name], str(path))
    return Setting(name, key.default, "default")


def checked(setting: Setting) -> Setting:
    """The setting, or a TrainimgError when an environment value is not one of its key's
    choices, naming the variable (the file's values were checked when it was parsed)."""
    key = SETTING_KEYS[setting.key]
    if setting.source.startswith("env ") and key.choices and setting.value not in key.choices:
        raise TrainimgError(
            f"${key.env}={setting.value} is not {key.noun}: set it to "
            f"{' or '.join(key.choices)}, or unset it"
        )
    return setting


def resolve_all(
    flags: Mapping[str, str | None], environ: Mapping[str, str], text: str | None, path: Path
) -> dict[str, Setting]:
    """Every key's Setting, checked, from the flags given, the environment and the file's text
    (None: no file)."""
    file = parse_config(text, path) if text is not None else {}
    return {
        name: checked(resolve_setting(name, flags.get(name), environ, file, path))
        for name in SETTING_KEYS
    }


def read_file(path: Path) -> str | None:
    """The config file's text; None when there is none. The module's one effect."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise TrainimgError(f"{path}: cannot read the config file: {why}") from None


def settings(
    flags: Mapping[str, str | None] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Setting]:
    """Every Setting for this process: its flags, its environment and its config file."""
    env = os.environ if environ is None else environ
    path = config_path(env)
    return resolve_all(flags or {}, env, read_file(path), path)


def configured(name: str, environ: Mapping[str, str] | None = None) -> Setting:
    """The setting `name` has without its flag (environment > file > default), unchecked: an
    option's default, which its argparse type judges only when the flag is not given."""
    env = os.environ if environ is None else environ
    path = config_path(env)
    text = read_file(path)
    return resolve_setting(
        name, None, env, parse_config(text, path) if text is not None else {}, path
    )
