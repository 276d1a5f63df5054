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
from dataclasses import dataclass
from pathlib import Path

from builder.facts import host as host_rules
from builder.preflight.record import (
    PREFIX_KEYS,
    SHORT,
    UNRECORDED,
    Record,
    Recording,
    ReplayHost,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOSTS = sorted(p.name for p in FIXTURES.iterdir() if (p / "fixture.yaml").is_file())
__all__ = ["PREFIX_KEYS", "SHORT", "UNRECORDED", "FakeHost", "Fixture", "Recording"]


class Fixture(Record):
    """A fixture host: a preflight record under tests/preflight/fixtures/."""

    @classmethod
    def load_fixture(cls, name: str) -> Fixture:
        rec = Record.load(FIXTURES / name, name)
        return cls(rec.name, rec.root, rec.meta, rec.recordings, rec.checked_files)


@dataclass
class FakeHost(ReplayHost):
    """Answers preflight's command lines from a fixture (a record), like a host would."""

    @property
    def fixture(self) -> Record:
        return self.record


# --- containers that play hosts ---------------------------------------------------------------
CONTAINER_HOME = "/opt/fakehost"
CLEARED = ("/etc/modprobe.d", "/usr/lib/modprobe.d", "/run/modprobe.d", *host_rules.CDI_SPEC_DIRS)
_SHIM_CAT = f"""#!/bin/sh
# fakehost: a container cannot hold a fixture's /proc or /sys files; serve them from the fixture.
if [ "$1" = "--" ]; then  # cat -- FILE...: the sysfs ids, many a probe
  shift; rc=0
  for f in "$@"; do
    case "$f" in /proc/*|/sys/*) f="{CONTAINER_HOME}/root$f" ;; esac
    /bin/cat -- "$f" || rc=1
  done
  exit $rc
fi
case "$1" in
  /proc/*|/sys/*)
    if [ -f "{CONTAINER_HOME}/root$1" ]; then exec /bin/cat "{CONTAINER_HOME}/root$1"; fi
    echo "cat: $1: No such file or directory" >&2; exit 1 ;;
esac
exec /bin/cat "$@"
"""

# ... and lists the fixture's /sys directories (the container's own are this machine's)
_SHIM_LS = f"""#!/bin/sh
if [ "$#" -eq 3 ] && [ "$1" = "-1" ] && [ "$2" = "--" ]; then
  case "$3" in /sys/*) exec /bin/ls -1 -- "{CONTAINER_HOME}/root$3" ;; esac
fi
exec /bin/ls "$@"
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
    lines += ["esac", f'echo "replay: unrecorded: {prog} $*" >&2', f"exit {UNRECORDED}", ""]
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
    for prog, text in (("cat", _SHIM_CAT), ("ls", _SHIM_LS)):
        if prog == "ls" and prog in by_prog:  # a recorded `ls` answers for itself
            continue
        shim = dest / "bin" / prog
        shim.write_text(text)
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
