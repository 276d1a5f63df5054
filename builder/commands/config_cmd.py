"""`trainimg config show [--json]`: each setting trainimg takes from the config file, its value
and where that value came from (a flag, an environment variable, the file, the default), so a
registry or engine nobody typed is never a surprise. The resolution is builder/config.py's."""

from __future__ import annotations

import argparse
import os
from typing import Any

from builder import config
from builder.commands.json_out import JsonKind, add_json_option, document, text_wanted, write_json

KIND = JsonKind("trainimg.config", 1)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "config",
        description=(
            "trainimg's settings - "
            + ", ".join(config.SETTING_KEYS)
            + " - come from the first of a flag, an environment variable "
            "($TRAINIMG_REGISTRY, $TRAINIMG_ENGINE, $TRAINIMG_WHEELHOUSE), the config file "
            "$XDG_CONFIG_HOME/trainimg/config.toml (default ~/.config/trainimg/config.toml) "
            "and the built-in default. Exit codes: 0 shown, 2 a bad config file or variable."
        ),
    )
    csub = p.add_subparsers(dest="config_command", required=True, metavar="{show}")
    show = csub.add_parser(
        "show",
        help="each setting, its value and where it came from",
        description=(
            "Print each setting, its value and its source: flag, env $NAME, the config file's "
            "path, or default. The flags below stand for a command's own: `config show "
            "--registry X` shows what a command given --registry X would use."
        ),
        epilog="example: TRAINIMG_REGISTRY=reg.example.com/team trainimg config show --json",
    )
    add_json_option(show, KIND)
    for key in config.SETTING_KEYS.values():
        show.add_argument(
            key.flag,
            choices=key.choices or None,
            metavar=key.name.upper(),
            help=f"as a command's {key.flag}",
        )
    show.set_defaults(func=run_show)


def report(settings: dict[str, config.Setting], path: str, found: bool) -> dict[str, Any]:
    """The JSON of `config show --json` (trainimg.config, docs/json.md): the file, and each
    key's value and source."""
    return document(
        KIND,
        {
            "file": path,
            "file_exists": found,
            "settings": {k: {"value": s.value, "source": s.source} for k, s in settings.items()},
        },
    )


def lines(settings: dict[str, config.Setting], path: str, found: bool) -> list[str]:
    """The table: one line per key (value, then its source), under the file's path. A line
    that would pass 80 columns puts the source on a line of its own."""
    out = [f"config file: {path}" + ("" if found else " (none there)")]
    values = {k: "-" if s.value is None else s.value for k, s in settings.items()}
    width = max(len(k) for k in settings)
    value_width = max(len(v) for v in values.values())
    if width + value_width + max(len(s.source) for s in settings.values()) + 6 > 80:
        value_width = 0  # aligned, the table would pass 80 columns: each line on its own
    for key, s in settings.items():
        line = f"{key.ljust(width)}  {values[key].ljust(value_width)}  ({s.source})"
        if len(line) > 80:
            out += [f"{key.ljust(width)}  {values[key]}", f"{' ' * width}    ({s.source})"]
        else:
            out.append(line)
    return out


def run_show(args: argparse.Namespace) -> int:
    flags = {name: getattr(args, name) for name in config.SETTING_KEYS}
    settings = config.settings(flags, os.environ)
    path = config.config_path(os.environ)
    found = path.is_file()
    if args.json is not None:
        write_json(args.json, report(settings, str(path), found))
    if text_wanted(args):
        print("\n".join(lines(settings, str(path), found)))
    return 0
