"""Recorded hosts: everything preflight's probes read from a host, written once and judged many
times offline (`trainimg preflight --record DIR` / `--from DIR`).

A record is a directory in the layout of the test fixtures (tests/preflight/fixtures/README.md):

    fixture.yaml   description; `files` (host path -> origin); `exists` (paths that exist);
                   `probes` (command -> stdout/stderr/rc + origin, or `file: out/...`); `expect`
    files/...      files `cat` read, under their host paths
    out/...        longer command outputs

A probe key is a short name (SHORT below) or the literal command line. ReplayHost answers
preflight's command lines from a record exactly as the host did: recorded commands first, then
`cat` from files/ and `ls` from `exists`; a program with no recording is "not installed".
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder.facts import host as host_rules
from builder.host import parsers
from builder.host.parsers import safe_load_yaml
from builder.host.shown import shown
from builder.preflight import allowlist as al
from builder.preflight.hostio import Output
from builder.preflight.record_files import (
    MAX_RECORD_FILE_BYTES,
    RecordError,
    host_files,
    read_capped,
    regular_file,
)

UNRECORDED = 97  # the exit status of a recorded program asked something nobody recorded
RECORD_FILE = "fixture.yaml"

SHORT: dict[str, tuple[str, ...]] = {
    "uname": ("uname", "-r"),
    "grubby": ("grubby", "--default-kernel"),
    "rpm": ("rpm", "-q", "--qf", al.RPM_QF, *sorted(al.RPM_PACKAGES)),
    "rpm-kmods": ("rpm", "-qa", "--qf", al.RPM_QF, al.RPM_KMOD_GLOB),
    "rpm-nscq": ("rpm", "-qa", "--qf", al.RPM_QF, al.RPM_NSCQ_GLOB),
    "modinfo": ("modinfo", "-F", "license", "nvidia"),
    "modinfo-version": ("modinfo", "-F", "version", "nvidia"),
    "lspci": ("lspci", "-nnk", "-d", "10de:"),
    "smi": ("nvidia-smi", f"--query-gpu={al.SMI_GPU_FIELDS}", "--format=csv,noheader"),
    "smi-q": ("nvidia-smi", "-q"),
    "smi-apps": (
        "nvidia-smi",
        f"--query-compute-apps={al.SMI_APP_FIELDS}",
        "--format=csv,noheader",
    ),
    "dkms": ("dkms", "status"),
    "sb-state": ("mokutil", "--sb-state"),
    "mok-test": ("mokutil", "--test-key", host_rules.DKMS_MOK_CERT),
    "mok-list": ("mokutil", "--list-enrolled"),
    "lsmod": ("lsmod",),
    "systemctl": ("systemctl", "show", f"--property={al.SYSTEMD_PROPERTIES}", *sorted(al.UNITS)),
    "fabricmanager": ("nv-fabricmanager", "--version"),
    "nvidia-ctk": ("nvidia-ctk", "--version"),
    "podman": ("podman", "--version"),
    "dockerd": ("dockerd", "--version"),
    "containerd": ("containerd", "--version"),
    "podman-images": ("podman", "images", "--format", "json"),
    "id": ("id", "-u"),
    "podman-inspect": ("podman", "image", "inspect"),
}
PREFIX_KEYS = {"podman-inspect"}  # recorded once, whatever image ids follow
_SHORT_OF = {argv: key for key, argv in SHORT.items() if key not in PREFIX_KEYS}


@dataclass(frozen=True)
class Recording:
    argv: tuple[str, ...]
    stdout: str
    stderr: str
    rc: int
    origin: str
    prefix: bool = False
    never: bool = False  # on the host, but preflight must never ask (e.g. Debian's `rpm`)

    def matches(self, argv: tuple[str, ...]) -> bool:
        if self.prefix:
            return argv[: len(self.argv)] == self.argv and len(argv) > len(self.argv)
        return argv == self.argv


@functools.lru_cache(maxsize=1024)
def _argv_of(key: str) -> tuple[str, ...]:
    """A probe key written as a command line (records of a fleet share them)."""
    return tuple(shlex.split(key))


@dataclass
class Record:
    name: str
    root: Path
    meta: dict[str, Any]
    recordings: list[Recording] = field(default_factory=list)
    checked_files: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, name: str | None = None) -> Record:
        """A record, checked whole before any file it names is read (record_files.py): a
        hostile record is a RecordError (exit 2) with nothing read."""
        root = root.resolve()
        path = regular_file(root, RECORD_FILE, "the record file", MAX_RECORD_FILE_BYTES)
        try:
            meta = safe_load_yaml(read_capped(path, MAX_RECORD_FILE_BYTES))
        except OSError as exc:
            raise RecordError(f"{path}: cannot read the record ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            raise RecordError(f"{path}: not YAML: {shown(str(exc).splitlines()[0], 200)}") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("probes") or {}, dict):
            raise RecordError(f"{path}: not a preflight record (expected a mapping with `probes`)")
        exists = meta.get("exists") or []
        if not isinstance(exists, list) or not all(isinstance(e, str) for e in exists):
            raise RecordError(f"{path}: `exists` must be a list of host paths")
        files = host_files(root)  # checks files/ now: a symlink refuses the record
        checked: list[tuple[Any, dict[str, Any], Path | None]] = []
        for key, spec in (meta.get("probes") or {}).items():
            where = f"{path}: probes.{shown(key)}"
            if not isinstance(key, str) or not isinstance(spec, dict):
                raise RecordError(f"{where} must be a command and a mapping (stdout/file, rc)")
            out = spec.get("file")
            if out is not None and not isinstance(out, str):
                raise RecordError(f"{where}.file must be a path inside the record")
            bad = [
                k for k in ("stdout", "stderr", "origin") if not isinstance(spec.get(k, ""), str)
            ]
            if bad or not isinstance(spec.get("rc", 0), int) or isinstance(spec.get("rc"), bool):
                raise RecordError(f"{where}: stdout/stderr/origin must be text, rc a number")
            checked.append((key, spec, regular_file(root, out, "file") if out else None))
        recs = [
            Recording(
                SHORT.get(key) or _argv_of(key),
                read_capped(out) if out is not None else spec.get("stdout", ""),
                spec.get("stderr", ""),
                int(spec.get("rc", 0)),
                spec.get("origin", ""),
                key in PREFIX_KEYS,
                bool(spec.get("never_asked", False)),
            )
            for key, spec, out in checked
        ]
        return cls(name or root.name, root, meta, recs, files)

    @property
    def files(self) -> dict[str, Path]:
        """Host path -> the record file holding its content (checked at load)."""
        return self.checked_files

    @functools.cached_property
    def exists(self) -> set[str]:
        return set(self.meta.get("exists") or []) | set(self.files)

    @functools.cached_property
    def dirs(self) -> set[str]:
        """Every directory above an existing path."""
        return {str(parent) for p in self.exists for parent in Path(p).parents}

    @functools.cached_property
    def programs(self) -> set[str]:
        return {r.argv[0] for r in self.recordings}

    @property
    def expect(self) -> dict[str, Any]:
        return dict(self.meta.get("expect") or {})


@dataclass(frozen=True)
class Result:
    rc: int
    stdout: str
    stderr: str


@dataclass
class ReplayHost:
    """Answers preflight's command lines from a record, like the host did."""

    record: Record
    lines: list[str] = field(default_factory=list)

    def run(self, line: str) -> Result:
        self.lines.append(line)
        argv = al.probe_argv(line)
        for rec in self.record.recordings:
            if rec.matches(argv):
                return Result(rec.rc, rec.stdout, rec.stderr)
        prog = argv[0]
        if prog == "cat" and argv[1] == "--":
            return self._cat_many(argv[2:])
        if prog == "cat":
            path = self.record.files.get(argv[1])
            if path is None:
                return Result(1, "", f"cat: {argv[1]}: No such file or directory\n")
            return Result(0, read_capped(path), "")
        if prog == "ls":
            return self._ls(argv)
        if prog in self.record.programs or prog in ("uname", "df"):
            return Result(UNRECORDED, "", f"replay: unrecorded: {shlex.join(argv)}\n")
        return Result(
            127, "", f"timeout: failed to run command '{prog}': No such file or directory\n"
        )

    def _cat_many(self, paths: tuple[str, ...]) -> Result:
        """`cat -- PATH...` as cat does it: each file's text in turn, a missing one on stderr
        (and exit 1) while the others still print."""
        out, err = [], ""
        for p in paths:
            path = self.record.files.get(p)
            if path is None:
                err += f"cat: {p}: No such file or directory\n"
            else:
                out.append(read_capped(path))
        return Result(1 if err else 0, "".join(out), err)

    def _ls(self, argv: tuple[str, ...]) -> Result:
        exists, dirs = self.record.exists, self.record.dirs
        if argv[1] == "-1":  # ls -1 -- DIR...: GNU ls sorts the operands, heads each one
            sections, err = [], ""
            for d in sorted(argv[3:]):
                prefix = d.rstrip("/") + "/"
                if d not in dirs:
                    err += f"ls: cannot access '{d}': No such file or directory\n"
                    continue
                names = sorted(
                    {p[len(prefix) :].split("/")[0] for p in exists if p.startswith(prefix)}
                )
                sections.append(f"{d}:\n" + "".join(f"{n}\n" for n in names))
            return Result(2 if err else 0, "\n".join(sections), err)
        paths = argv[3:]
        found = [p for p in paths if p in exists or p in dirs]
        missing = [p for p in paths if p not in found]
        err = "".join(f"ls: cannot access '{p}': No such file or directory\n" for p in missing)
        return Result(2 if missing else 0, "".join(f"{p}\n" for p in sorted(found)), err)


# --- writing a record -----------------------------------------------------------------------
_INLINE_MAX = 400  # longer outputs go to out/<n>.txt


def write_record(dest: Path, host: str, spec: str, log: list[Output], today: dt.date) -> None:
    """Write what preflight read from `host` (its probe log) as a record in `dest`, atomically:
    into a temporary directory beside it, renamed into place at the end."""
    dest = dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        raise RecordError(f"{dest}: exists and is not empty (a record is never overwritten)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _write(tmp, host, spec, log, today)
        if dest.exists():
            dest.rmdir()
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write(root: Path, host: str, spec: str, log: list[Output], today: dt.date) -> None:
    origin = f"recorded by `trainimg preflight --record` from {spec} on {today}"
    files: dict[str, str] = {}
    probes: dict[str, dict[str, Any]] = {}
    (root / "out").mkdir()
    for n, out in enumerate(log):
        stdout, trimmed = _kept(out)
        if _one_line_files(root, out, origin, files):
            continue
        if out.argv[0] == "cat" and out.argv[1] != "--" and out.ok:
            target = root / "files" / out.argv[1].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(stdout)
            files[out.argv[1]] = origin + trimmed
            continue
        key = _SHORT_OF.get(out.argv) or shlex.join(out.argv)
        entry: dict[str, Any] = {"rc": out.rc, "origin": origin + trimmed}
        if len(stdout) > _INLINE_MAX:
            name = f"out/{n:03d}-{out.argv[0]}.txt"
            (root / name).write_text(stdout)
            entry["file"] = name
        else:
            entry["stdout"] = stdout
        if out.stderr:
            entry["stderr"] = out.stderr
        probes[key] = entry
    meta = {
        "description": f"host {host} ({spec}) as preflight read it on {today}",
        "recorded": {"host": host, "spec": spec, "date": str(today)},
        "files": files,
        "probes": probes,
    }
    (root / RECORD_FILE).write_text(
        f"# A preflight record of {host}: judge it with `trainimg preflight --from DIR`.\n"
        + yaml.safe_dump(meta, sort_keys=False, width=100, allow_unicode=True)
    )


def _one_line_files(root: Path, out: Output, origin: str, files: dict[str, str]) -> bool:
    """`cat -- PATH...` of one-line sysfs files, kept as those files under files/ (the layout
    a replay reads them from); False for any other probe, or one whose lines do not match."""
    if out.argv[:2] != ("cat", "--") or not out.ok:
        return False
    paths = list(out.argv[2:])
    values = out.stdout.splitlines()
    if len(values) != len(paths):
        return False
    for p, line in zip(paths, values, strict=True):
        target = root / "files" / p.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(line + "\n")
        files[p] = origin
    return True


# Outputs whose full text preflight does not parse: the record keeps what the parser reads.
_SUBSETS: dict[tuple[str, ...], Callable[[str], str]] = {
    ("cat", host_rules.DNF_CONF): parsers.dnf_conf_subset,
    ("cat", "/proc/cmdline"): parsers.cmdline_subset,
    ("podman", "images"): parsers.images_subset,
    ("podman", "image", "inspect"): parsers.inspect_subset,
}


def _kept(out: Output) -> tuple[str, str]:
    """(what the record keeps of an output, a note for its origin when that is a subset)."""
    for prefix, subset in _SUBSETS.items():
        if out.argv[: len(prefix)] == prefix and out.ok:
            return subset(out.stdout), " (only what preflight parses is kept)"
    return out.stdout, ""


def find_records(root: Path) -> list[Path]:
    """A record directory itself, or the record directories directly below it (a fleet)."""
    if (root / RECORD_FILE).is_file():
        return [root]
    if not root.is_dir():
        raise RecordError(f"{root}: no such record directory")
    found = sorted(p for p in root.iterdir() if (p / RECORD_FILE).is_file())
    if not found:
        raise RecordError(f"{root}: holds no {RECORD_FILE} (nor do its subdirectories)")
    return found
