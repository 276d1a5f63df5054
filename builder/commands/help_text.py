"""The examples and exit codes every command's --help ends with, written once here and added
by builder.cli's registration (a command whose own text already shows them adds none):
tests/commands/test_help_text.py parses every example with the real parser and checks that each
command's help has both."""

from __future__ import annotations

# A few lines a user types, each parsed by the test (so no flag here can go stale).
HELP_EXAMPLES: dict[str, tuple[str, ...]] = {
    "matrix": (
        "trainimg matrix list",
        "trainimg matrix explain rocky9-cu128-py3.12-torch2.11.0-runtime",
        "trainimg matrix check --strict --json",
    ),
    "render": ("trainimg render", "trainimg render --check"),
    "base": ("trainimg base", "trainimg base --engine docker --force"),
    "wheelhouse": (
        "trainimg wheelhouse --dest .cache/wheelhouse",
        "trainimg wheelhouse --all --dest /srv/wheels --check",
    ),
    "build": (
        "trainimg build --wheelhouse .cache/wheelhouse",
        "trainimg build 'rocky9-*' --plan",
        "trainimg build --all --keep-going --jobs 2",
    ),
    "extend": ("trainimg extend debian12-cpu-py3.11-torch2.13.0-runtime -r requirements.txt",),
    "verify": (
        "trainimg verify debian12-cpu-py3.11-torch2.13.0-runtime",
        "trainimg verify rocky9-cu128-py3.12-torch2.11.0-runtime --gpus all --json report.json",
    ),
    "diff": ("trainimg diff localhost/trainimg:old localhost/trainimg:new",),
    "arches": (
        "trainimg arches debian12-cpu-py3.11-torch2.13.0-runtime",
        "trainimg arches .venv/lib/python3.11/site-packages --gpu b200",
    ),
    "preflight": (
        "trainimg preflight --target-driver 580.65.06",
        "trainimg preflight --inventory hosts.ini --target-driver 580.65.06 --fail-on breaks",
    ),
    "compat": (
        "trainimg compat rocky9-cu128-py3.12-torch2.11.0-runtime --target-driver 570.124.06 "
        "--gpu h100",
        "trainimg compat --require 'cuda>=13.1' --target-driver 595.71.05 --cc 9.0 --json",
    ),
    "env": ('eval "$(trainimg env)"', "trainimg env --release"),
    "export": ("trainimg export debian12-cpu-py3.11-torch2.13.0-runtime -o /srv/images/cpu.sqsh",),
    "push": (
        "trainimg push --registry registry.example.com/ml/trainimg",
        "trainimg push --all --sign --sign-by ops@example.com",
    ),
    "sbom": (
        "trainimg sbom debian12-cpu-py3.11-torch2.13.0-runtime -o cpu.cdx.json "
        "--provenance cpu.intoto.json",
    ),
    "attestations": ("trainimg attestations registry.example.com/ml/trainimg:cell --key pub.pem",),
    "policy": (
        "trainimg policy --registry registry.example.com/ml/trainimg --key pub.gpg "
        "--signatures https://sigs.example.com --dest /etc/containers",
    ),
    "pin": ("trainimg pin --dry-run", "trainimg pin rocky9"),
    "prune": ("trainimg prune --dry-run", "trainimg prune --registry --dry-run"),
    "facts": ("trainimg facts refresh", "trainimg facts refresh --write"),
    "completion": ('eval "$(trainimg completion bash)"',),
    "config": ("trainimg config show", "trainimg config show --json"),
}

# What a command's exit status means, for the commands whose own text does not say it. Every
# command: 2 is bad input (a clear message naming the value, builder/errors.py) and 130 an
# interrupt (Ctrl-C: nothing half-written is left).
HELP_EXITS: dict[str, str] = {
    "matrix": "0 fine, 1 warnings under check --strict, 2 an error in the matrix or a blocked "
    "cell (explain)",
    "render": "0 written (or, with --check, up to date), 1 --check found drift",
    "base": "0 made (or already there)",
    "wheelhouse": "0 filled, 1 --check found the wheelhouse incomplete",
    "arches": "0 listed (every library runs on each --gpu), 1 a --gpu is not covered",
    "compat": "0 runs, 1 does not run (breaks), 3 runs with a caveat (risk)",
    "env": "0 printed (or released), 1 --release found the store still in use",
    "sbom": "0 written",
    "policy": "0 written",
    "pin": "0 pinned (or, with --dry-run, shown)",
    "prune": "0 pruned (or, with --dry-run, listed)",
    "facts": "0 up to date (or written with --write), 1 behind the index: review the diff",
}
COMMON_EXITS = "2 bad input, 130 interrupted"


def epilog(name: str, own: str | None, description: str | None = None) -> str | None:
    """The command's epilog: its own text, then its examples and exit codes unless that text
    (or its description) already gives them."""
    parts = [own] if own else []
    said = f"{own or ''} {description or ''}".lower()
    if HELP_EXAMPLES.get(name) and "example" not in said:
        parts.append("examples:\n" + "\n".join(f"  {line}" for line in HELP_EXAMPLES[name]))
    if name in HELP_EXITS and "exit code" not in said:
        parts.append(f"exit codes: {HELP_EXITS[name]}, {COMMON_EXITS}")
    return "\n\n".join(parts) or None
