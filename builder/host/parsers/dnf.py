"""Parsers of dnf: what the host's repositories offer (`dnf repoquery`) and the module streams
they publish (`dnf module list`) (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# `dnf repoquery --qf DNF_REPOQUERY_QF`: one line per package, `NAME EPOCH:VERSION-RELEASE.ARCH
# REPOID` (dnf prints epoch 0 as `0:`; @System is an installed package's repoid).
DNF_REPOQUERY_QF = "%{name} %{epoch}:%{version}-%{release}.%{arch} %{repoid}"
_LINE = re.compile(
    r"(?P<name>[A-Za-z0-9_.+-]+) (?:(?P<epoch>\d+):)?(?P<version>[^\s:-]+)-(?P<release>\S+)"
    r"\.(?P<arch>[A-Za-z0-9_]+) (?P<repo>\S+)"
)
# What dnf 4 says on stderr when --cacheonly finds no metadata for an enabled repository.
_NO_CACHE = re.compile(r"Cache-only enabled but no cache for|Cache-only enabled .* no cache")


@dataclass(frozen=True)
class Available:
    """One package a repository (or the rpm database, repo `@System`) offers."""

    name: str
    version: str
    release: str
    arch: str
    repo: str

    @property
    def nevra(self) -> str:
        return f"{self.name}-{self.version}-{self.release}.{self.arch}"


def dnf_repoquery(text: str) -> list[Available]:
    """Every line `dnf repoquery --qf DNF_REPOQUERY_QF` printed; other lines (a repository's
    'Last metadata expiration check', warnings) are ignored."""
    out = []
    for line in text.splitlines():
        m = _LINE.fullmatch(line.strip())
        if m:
            out.append(Available(m["name"], m["version"], m["release"], m["arch"], m["repo"]))
    return out


def dnf_no_cache(stderr: str) -> bool:
    """dnf --cacheonly found no metadata cache (the host never ran dnf, or it was cleaned)."""
    return _NO_CACHE.search(stderr) is not None


def dnf_module_streams(text: str, module: str) -> list[str]:
    """The streams of `module` in `dnf module list` (its table: `NAME STREAM [d][e]... PROFILES
    SUMMARY`, one table per repository), each once, in order; the [d]/[e]/[x] marks dropped."""
    streams: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if (
            len(words) >= 2
            and words[0] == module
            and ":" not in words[1]  # a stream name; never an EVR
            and words[1] not in (*streams, "Stream")
        ):
            streams.append(words[1])
    return streams


@dataclass(frozen=True)
class DnfResolution:
    """What `dnf install --assumeno` said: resolves (dnf would install it and was told no),
    fails (no transaction: dnf's own problem lines), or unknown (dnf would not try)."""

    status: str  # resolves | fails | unknown
    detail: str = ""


def dnf_assumeno(rc: int, text: str) -> DnfResolution:
    """`dnf -q install --assumeno -- SPEC...` (its stdout and stderr together): dnf 4 prints
    "Operation aborted." after resolving a transaction it was told not to run, "Nothing to
    do." when everything is installed, and "Error: ..." (with " Problem: ..." lines) when it
    cannot resolve one; a non-root caller gets "This command has to be run with superuser
    privileges"."""
    if "Operation aborted" in text or "Nothing to do" in text or rc == 0:
        return DnfResolution("resolves")
    if "superuser privileges" in text:
        return DnfResolution("unknown", "dnf install needs root to resolve a transaction")
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip().startswith(("Error:", "Problem", "- ", "package ", "nothing provides"))
        and line.strip() != "Error:"
    ]
    return DnfResolution("fails", "; ".join(lines[:4]) or f"dnf exited {rc}")
