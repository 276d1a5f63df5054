"""The extra wheels of an extended image: fetched into a wheelhouse of their own, resolved
offline together with the parent's lock, and hash-locked like any trainimg wheelhouse.

`pip download` runs with the parent's lock as its constraints file and the parent's wheelhouse
as a find-links directory, for the cell's Python and platform. The closure is then resolved
again offline from the wheels' own metadata, the parent's pins first: a dependency that needs
another version of a locked package is refused, naming the package and what wanted it. Only
wheels the parent does not lock are the child's; their sha256 go to its wheelhouse.lock.

pip runs without the user's pip configuration (PIP_CONFIG_FILE=/dev/null and no PIP_*
variables but the transport ones, CA bundle, proxy and timeouts: an extra index in
~/.config/pip would otherwise be searched) unless `pip_config` says so. When the requirements
carry `--hash` options (pip's hash-checking mode), every wheel the child adds must be named
there with the sha256 it has, or nothing is built.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import NormalizedName
from packaging.version import Version

from builder.build import closure
from builder.build.wheelhouse import (
    ARCH,
    LOCK_NAME,
    PYPI,
    Locked,
    platforms,
    read_lock,
    scan,
    sha256_file,
    supported_tags,
    write_lock,
)
from builder.errors import TrainimgError
from builder.extend.requirements import UserRequirement, constraints_txt
from builder.matrix.model import Cell

GROUP = "extra"
CONSTRAINTS = "constraints.txt"


class ExtraWheelsError(TrainimgError):
    pass


@dataclass(frozen=True)
class Extras:
    """The child's own wheels, each checked against its wheelhouse.lock."""

    directory: Path
    wheels: tuple[Locked, ...]
    constraints: str

    def requirements_txt(self) -> str:
        lines = [f"# the extension's wheels, derived from {LOCK_NAME} by trainimg"]
        lines += sorted(w.requirement for w in self.wheels)
        return "\n".join(lines) + "\n"


PipRunner = Callable[[list[str], dict[str, str]], "subprocess.CompletedProcess[str]"]


def _pip(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=3600, env=env)


# PIP_* variables that say how to reach an index, never which one or what to take from it
_TRANSPORT = frozenset({"PIP_CERT", "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_DEFAULT_TIMEOUT",
                        "PIP_TIMEOUT", "PIP_RETRIES", "PIP_DISABLE_PIP_VERSION_CHECK",
                        "PIP_NO_COLOR", "PIP_PROGRESS_BAR"})  # fmt: skip


def pip_env(environ: Mapping[str, str], *, pip_config: bool) -> dict[str, str]:
    """pip's environment: the user's pip config files and PIP_* variables (but the transport
    ones: CA bundle, proxy, timeouts) only if asked."""
    if pip_config:
        return dict(environ)
    env = {k: v for k, v in environ.items() if not k.upper().startswith("PIP_") or k in _TRANSPORT}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def check_hashes(reqs: Sequence[UserRequirement], added: Sequence[Locked]) -> list[str]:
    """Hash-checking mode (any --hash given): why each added wheel is refused (empty: none)."""
    if not any(r.hashes for r in reqs):
        return []
    allowed: dict[str, frozenset[str]] = {}
    for r in reqs:
        allowed[r.name] = allowed.get(r.name, frozenset()) | r.hashes
    out = []
    for w in added:
        hashes = allowed.get(w.name)
        if not hashes:
            out.append(f"{w.path.name}: {w.name} has no --hash line (hash-checking mode: pin it)")
        elif w.sha256 not in hashes:
            out.append(
                f"{w.path.name}: sha256 {w.sha256} is none of the {len(hashes)} --hash values "
                f"given for {w.name}"
            )
    return out


def download_argv(
    cell: Cell, reqs: Sequence[UserRequirement], dest: Path, links: Sequence[Path], index: str
) -> list[str]:
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
            "--only-binary=:all:", "--python-version", cell.python, "--implementation", "cp",
            "--dest", str(dest), "--index-url", index, "-c", str(dest / CONSTRAINTS)]  # fmt: skip
    for plat in [*platforms(cell), "any"]:
        argv += ["--platform", plat]
    for link in links:
        argv += ["--find-links", str(link)]
    return argv + [r.text for r in reqs]


def fetch(
    dest: Path,
    cell: Cell,
    reqs: Sequence[UserRequirement],
    locked: Mapping[NormalizedName, Version],
    parent_wheels: Path,
    *,
    find_links: Sequence[Path] = (),
    index_url: str = PYPI,
    offline: bool = False,
    pip_config: bool = False,
    run: PipRunner = _pip,
    log: Callable[[str], None] = lambda _m: None,
) -> Extras:
    dest.mkdir(parents=True, exist_ok=True)
    constraints = constraints_txt(locked)
    (dest / CONSTRAINTS).write_text(constraints, encoding="utf-8")
    links = [parent_wheels, *find_links]
    if not offline:
        log(f"pip download {' '.join(r.text for r in reqs)} (constrained by the parent's lock)")
        proc = run(
            download_argv(cell, reqs, dest, links, index_url),
            pip_env(os.environ, pip_config=pip_config),
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
            raise ExtraWheelsError(
                "pip download of the extra requirements failed under the parent's lock "
                f"({dest / CONSTRAINTS}); a requirement that needs another version of a locked "
                f"package cannot be added:\n{tail}"
            )
    for w in scan(dest):  # copies of the parent's wheels: the parent already has them
        if w.name in locked:
            w.path.unlink()
    pool = scan(dest) + scan(parent_wheels) + [w for d in find_links for w in scan(d)]
    roots = [f"{name}=={version}" for name, version in sorted(locked.items())]
    res = closure.resolve(
        roots + [r.text for r in reqs],
        pool,
        supported_tags(cell),
        closure.marker_environment(cell.python, ARCH),
    )
    if res.conflicts:
        raise ExtraWheelsError(
            "the extra requirements would replace packages the parent image locks: "
            + "; ".join(res.conflicts)
        )
    if res.missing:
        raise ExtraWheelsError(
            f"no wheel in {dest} for {'; '.join(map(str, res.missing))}"
            + (" (offline: fill it where the network is)" if offline else "")
        )
    old = read_lock(dest) or {}
    wheels = []
    for w in res.chosen:
        if w.name in locked:
            continue
        if w.path.parent != dest:  # found in a find-links directory: the child's own copy
            target = dest / w.path.name
            target.write_bytes(w.path.read_bytes())
            w = closure.Wheel(target, w.name, w.version, w.tags)
        sha = sha256_file(w.path)
        if w.path.name in old and old[w.path.name] != sha:
            raise ExtraWheelsError(
                f"{w.path}: sha256 {sha[:16]}… but {dest / LOCK_NAME} says "
                f"{old[w.path.name][:16]}…; remove the file (or the lock entry) and run again"
            )
        wheels.append(Locked(w.path, w.name, w.version, sha, GROUP))
    if not wheels:
        raise ExtraWheelsError(
            "every requirement is already in the parent image at a version it allows: "
            "nothing to add"
        )
    refused = check_hashes(reqs, wheels)
    if refused:
        raise ExtraWheelsError(
            "the wheels do not match the requirements' --hash values: " + "; ".join(refused)
        )
    write_lock(dest, {**old, **{w.path.name: w.sha256 for w in wheels}})
    return Extras(dest, tuple(wheels), constraints)
