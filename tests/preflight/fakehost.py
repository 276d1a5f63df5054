"""Fixture hosts: recorded outputs of real tools, served two ways.

- FakeHost answers preflight's command lines in memory (fast tests of every fixture).
- materialize() writes what a container needs to *be* that host: the host's files, empty
  placeholders for paths that only need to exist, and one fake program per recorded command
  that prints its recording (and exits 97 for an invocation nobody recorded). A container made
  from the offline base image with these plays the host for testinfra's podman:// backend.

/proc and /sys cannot hold a fixture's files inside a container (the runtime mounts procfs and
sysfs there), so the container's `cat` is a shim that serves those two trees from the fixture
and hands every other path to the real /bin/cat.

Recordings are keyed in fixture.yaml by a short name (SHORT below) or by the literal command
line (`systemctl is-active nvidia-persistenced`, `df -P -k /boot`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder.preflight import allowlist as al
from builder.rules import host as host_rules

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOSTS = sorted(p.name for p in FIXTURES.iterdir() if (p / "fixture.yaml").is_file())
UNRECORDED = 97

SHORT: dict[str, tuple[str, ...]] = {
    "uname": ("uname", "-r"),
    "grubby": ("grubby", "--default-kernel"),
    "rpm": ("rpm", "-q", "--qf", al.RPM_QF, *sorted(al.RPM_PACKAGES)),
    "rpm-kmods": ("rpm", "-qa", "--qf", al.RPM_QF, al.RPM_KMOD_GLOB),
    "modinfo": ("modinfo", "-F", "license", "nvidia"),
    "lspci": ("lspci", "-nnk", "-d", "10de:"),
    "modinfo-version": ("modinfo", "-F", "version", "nvidia"),
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
    "podman-images": ("podman", "images", "--format", "json"),
    "podman-inspect": ("podman", "image", "inspect"),
}
PREFIX_KEYS = {"podman-inspect"}  # recorded once, whatever image ids follow


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


@dataclass
class Fixture:
    name: str
    root: Path
    meta: dict[str, Any]
    recordings: list[Recording] = field(default_factory=list)

    @classmethod
    def load(cls, name: str) -> Fixture:
        root = FIXTURES / name
        meta = yaml.safe_load((root / "fixture.yaml").read_text())
        recs = []
        for key, spec in (meta.get("probes") or {}).items():
            argv = SHORT.get(key) or tuple(shlex.split(key))
            stdout = (root / spec["file"]).read_text() if "file" in spec else spec.get("stdout", "")
            recs.append(
                Recording(
                    argv,
                    stdout,
                    spec.get("stderr", ""),
                    int(spec.get("rc", 0)),
                    spec.get("origin", ""),
                    key in PREFIX_KEYS,
                    bool(spec.get("never_asked", False)),
                )
            )
        return cls(name, root, meta, recs)

    @property
    def files(self) -> dict[str, Path]:
        """Host path -> the fixture file holding its content."""
        base = self.root / "files"
        return {"/" + str(p.relative_to(base)): p for p in base.rglob("*") if p.is_file()}

    @property
    def exists(self) -> set[str]:
        return set(self.meta.get("exists") or []) | set(self.files)

    @property
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
class FakeHost:
    """Answers preflight's command lines from a fixture, like a host would."""

    fixture: Fixture
    lines: list[str] = field(default_factory=list)

    def run(self, line: str) -> Result:
        self.lines.append(line)
        argv = al.unrender(line)
        prog = argv[0]
        if prog == "cat":
            path = self.fixture.files.get(argv[1])
            if path is None:
                return Result(1, "", f"cat: {argv[1]}: No such file or directory\n")
            return Result(0, path.read_text(), "")
        if prog == "ls":
            return self._ls(argv)
        for rec in self.fixture.recordings:
            if rec.matches(argv):
                return Result(rec.rc, rec.stdout, rec.stderr)
        if prog in self.fixture.programs or prog in ("uname", "df"):
            return Result(UNRECORDED, "", f"fakehost: unrecorded: {shlex.join(argv)}\n")
        return Result(
            127, "", f"timeout: failed to run command '{prog}': No such file or directory\n"
        )

    def _ls(self, argv: tuple[str, ...]) -> Result:
        exists = self.fixture.exists
        dirs = {str(Path(p).parent) for p in exists}
        dirs |= {str(parent) for p in exists for parent in Path(p).parents}
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


# --- containers that play hosts ---------------------------------------------------------------
CONTAINER_HOME = "/opt/fakehost"
CLEARED = ("/etc/modprobe.d", "/usr/lib/modprobe.d", "/run/modprobe.d", *host_rules.CDI_SPEC_DIRS)
_SHIM_CAT = f"""#!/bin/sh
# fakehost: a container cannot hold a fixture's /proc or /sys files; serve them from the fixture.
case "$1" in
  /proc/*|/sys/*)
    if [ -f "{CONTAINER_HOME}/root$1" ]; then exec /bin/cat "{CONTAINER_HOME}/root$1"; fi
    echo "cat: $1: No such file or directory" >&2; exit 1 ;;
esac
exec /bin/cat "$@"
"""


def _script(prog: str, recs: list[tuple[int, Recording]]) -> str:
    lines = ["#!/bin/sh", f"# fakehost: recorded outputs of {prog}", 'case "$*" in']
    for n, rec in recs:
        args = " ".join(rec.argv[1:])  # what "$*" expands to
        pattern = f"{shlex.quote(args + ' ')}*" if rec.prefix else shlex.quote(args)
        lines.append(
            f"  {pattern}) /bin/cat {CONTAINER_HOME}/out/{n}.out; "
            f"/bin/cat {CONTAINER_HOME}/out/{n}.err >&2; exit {rec.rc} ;;"
        )
    lines += ["esac", f'echo "fakehost: unrecorded: {prog} $*" >&2', f"exit {UNRECORDED}", ""]
    return "\n".join(lines)


def materialize(fx: Fixture, dest: Path) -> None:
    """Write <dest>/{bin,out,root,setup.sh}: copy <dest> to /opt/fakehost, then run setup.sh."""
    (dest / "bin").mkdir(parents=True)
    (dest / "out").mkdir()
    by_prog: dict[str, list[tuple[int, Recording]]] = {}
    for n, rec in enumerate(fx.recordings):
        (dest / "out" / f"{n}.out").write_text(rec.stdout)
        (dest / "out" / f"{n}.err").write_text(rec.stderr)
        by_prog.setdefault(rec.argv[0], []).append((n, rec))
    for prog, recs in by_prog.items():
        path = dest / "bin" / prog
        path.write_text(_script(prog, recs))
        path.chmod(0o755)
    shim = dest / "bin" / "cat"
    shim.write_text(_SHIM_CAT)
    shim.chmod(0o755)
    setup = ["set -e", f"rm -rf {' '.join(CLEARED)}"]
    for host_path, src in sorted(fx.files.items()):
        target = dest / "root" / host_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(src.read_bytes())
        if not host_path.startswith(("/proc/", "/sys/")):
            q = shlex.quote(host_path)
            setup.append(f"mkdir -p $(dirname {q}) && /bin/cp {CONTAINER_HOME}/root{q} {q}")
    for host_path in sorted(set(fx.meta.get("exists") or []) - set(fx.files)):
        q = shlex.quote(host_path)
        setup.append(f"mkdir -p $(dirname {q}) && [ -e {q} ] || : > {q}")
    (dest / "setup.sh").write_text("\n".join(setup) + "\n")


def container_path() -> str:
    return f"{CONTAINER_HOME}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
