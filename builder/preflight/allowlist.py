"""The read-only command allow-list: the only commands preflight may run on a host.

Preflight must never change a host it inspects: no writes, no installs, no module loads, no
service changes. Every probe is an argv checked here against an exact shape (program, fixed
arguments, bounded trailing arguments) before it is rendered to a shell line; anything else
raises NotAllowed and never reaches the host. Each shape says why it only reads.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from builder.facts import host as host_rules
from builder.facts import nvidia_packages as nv_pkgs
from builder.host.parsers import DNF_REPOQUERY_QF

Arg = str | re.Pattern[str] | frozenset[str]

# Every probe runs as `LC_ALL=C timeout -k 5 <secs> <argv>`: C locale for stable output, and a
# hard limit because nvidia-smi can hang on a GPU that fell off the bus.
TIMEOUT_S = 20
_PREFIX = ("LC_ALL=C", "timeout", "-k", "5")


class NotAllowed(PermissionError):
    """A command outside the allow-list; the message quotes it."""


def _path(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# Files preflight reads with `cat`. Anything else (keys, shadow files, home directories) is
# refused even though `cat` itself only reads.
READABLE: tuple[re.Pattern[str], ...] = (
    _path(r"/etc/os-release"),
    _path(r"/proc/driver/nvidia/version"),
    _path(r"/sys/module/nvidia/version"),
    _path(r"/proc/cmdline"),
    _path(r"/proc/modules"),
    _path(r"/etc/dnf/dnf\.conf"),
    _path(r"/etc/dnf/plugins/versionlock\.list"),
    _path(r"/(etc|usr/lib|run)/modprobe\.d/[A-Za-z0-9_.@+-]+\.conf"),
    _path(r"/(etc|var/run)/cdi/[A-Za-z0-9_.@+-]+\.(yaml|yml|json)"),
    _path(r"/etc/containers/storage\.conf"),
)
LISTABLE = frozenset({*host_rules.MODPROBE_DIRS, *host_rules.CDI_SPEC_DIRS})
# `ls -1 -- /sys/bus/pci/devices`, then `cat --` of its devices' one-line id files, many per
# probe (a host has hundreds of PCI functions: one probe each would cost a round trip each)
SYS_PCI_ATTR = re.compile(
    re.escape(host_rules.SYS_PCI_DEVICES)
    + r"/[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]/(?:vendor|device|class)"
)
SYS_PCI_ATTRS_MAX = 512
# Paths whose existence `ls -1d` reports (CDI spec entries, the DKMS key): absolute, no `..`.
_EXISTS = re.compile(r"/[A-Za-z0-9_.@+:,=/-]*")
RPM_QF = "%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\\n"
RPM_PACKAGES = frozenset(
    {
        "kernel-core",
        "kernel-devel",
        "kernel-headers",
        "dkms",
        *host_rules.FABRICMANAGER_PACKAGES,
        "nvidia-container-toolkit",
        "nvidia-driver",
        "podman",
    }
)
RPM_KMOD_GLOB = "kmod-nvidia*"
RPM_NSCQ_GLOB = host_rules.NSCQ_PACKAGE_GLOB
SMI_GPU_FIELDS = "index,uuid,name,compute_cap,driver_version,pci.bus_id,persistence_mode"
SMI_APP_FIELDS = "pid,process_name,used_memory,gpu_uuid"
UNITS = frozenset(
    {host_rules.PERSISTENCED_UNIT, host_rules.FABRICMANAGER_UNIT, host_rules.CDI_REFRESH_UNIT}
)
SYSTEMD_PROPERTIES = "Id,LoadState,ActiveState,UnitFileState"
XID_PATTERN = "NVRM: Xid"
_IMAGE_ID = re.compile(r"[0-9a-f]{12,64}")

# `--repos`: what the host's dnf offers of NVIDIA's driver packages (builder/facts/
# nvidia_packages.py) for a driver version and the boot kernels. Each spec is a fixed name, a
# validated driver version (digits and dots) and, for kernel-devel, a validated EL kernel
# release; the kmod globs (`kmod-nvidia-580.95.05-*`) stay words: no shell sees them.
_DRIVER = r"\d{3,4}\.\d{1,3}(?:\.\d{1,3})?"
_KERNEL = r"\d+\.\d+\.\d+-\d+(?:\.\d+)*\.el\d+(?:_\d+)?\.(?:x86_64|aarch64)"  # nvidia_packages
DNF_SPEC = re.compile(
    "|".join(
        (
            f"{re.escape(nv_pkgs.DRIVER_PACKAGE)}-{_DRIVER}",
            f"kmod-nvidia-(?:open-)?{_DRIVER}-\\*",
            *(f"{re.escape(name)}-{_DRIVER}" for name in nv_pkgs.DKMS_KMOD.values()),
            re.escape(nv_pkgs.DKMS_PACKAGE),
            f"{re.escape(nv_pkgs.KERNEL_DEVEL)}-{_KERNEL}",
        )
    )
)
# `dnf install --assumeno`: the exact packages repoquery found for a kernel, resolved as a
# transaction dnf is told not to run (the precompiled kmod by its full name, no glob).
_KERNEL_BASE = r"\d+\.\d+\.\d+-\d+(?:\.\d+)*"
DNF_INSTALL_SPEC = re.compile(
    "|".join(
        (
            f"{re.escape(nv_pkgs.DRIVER_PACKAGE)}-{_DRIVER}",
            f"kmod-nvidia-(?:open-)?{_DRIVER}-{_KERNEL_BASE}",
            *(f"{re.escape(name)}-{_DRIVER}" for name in nv_pkgs.DKMS_KMOD.values()),
            re.escape(nv_pkgs.DKMS_PACKAGE),
            f"{re.escape(nv_pkgs.KERNEL_DEVEL)}-{_KERNEL}",
        )
    )
)
DNF_INSTALL = ("install", "--assumeno", "--")
DNF_REPOQUERY = ("repoquery", "--latest-limit", "1", "--qf", DNF_REPOQUERY_QF, "--")
DNF_MODULE_LIST = ("module", "list", "--", nv_pkgs.MODULE)
DNF_SPECS_MAX = 12


@dataclass(frozen=True)
class Shape:
    program: str
    args: tuple[Arg, ...] = ()
    tail: Arg | None = None  # the kind of each trailing argument
    tail_min: int = 0
    tail_max: int = 0
    why: str = ""

    def matches(self, argv: Sequence[str]) -> bool:
        if not argv or argv[0] != self.program:
            return False
        rest = list(argv[1:])
        if len(rest) < len(self.args):
            return False
        if not all(_arg_ok(a, v) for a, v in zip(self.args, rest, strict=False)):
            return False
        tail = rest[len(self.args) :]
        if not self.tail_min <= len(tail) <= self.tail_max:
            return False
        kind = self.tail
        return not tail or (kind is not None and all(_arg_ok(kind, v) for v in tail))


def _arg_ok(kind: Arg, value: str) -> bool:
    if isinstance(kind, str):
        return value == kind
    if isinstance(kind, frozenset):
        return value in kind
    # a pattern: never a path that climbs out of where it points (`/etc/cdi/../shadow`)
    return ".." not in value.split("/") and kind.fullmatch(value) is not None


_READABLE = re.compile("|".join(f"(?:{p.pattern})" for p in READABLE))

ALLOWED: tuple[Shape, ...] = (
    Shape("cat", (_READABLE,), why="prints one of a fixed set of files"),
    Shape(
        "ls", ("-1", "--"), frozenset(LISTABLE), 1, len(LISTABLE), why="lists config directories"
    ),
    Shape("ls", ("-1d", "--"), _EXISTS, 1, 200, why="reports which paths exist"),
    Shape("ls", ("-1", "--", host_rules.SYS_PCI_DEVICES), why="lists the kernel's PCI devices"),
    Shape(
        "cat",
        ("--",),
        SYS_PCI_ATTR,
        1,
        SYS_PCI_ATTRS_MAX,
        why="prints PCI devices' vendor, device and class ids (sysfs, world-readable)",
    ),
    Shape("uname", ("-r",), why="prints the running kernel"),
    Shape("grubby", ("--default-kernel",), why="prints the kernel the next boot uses"),
    Shape(
        "rpm",
        ("-q", "--qf", RPM_QF),
        RPM_PACKAGES,
        1,
        len(RPM_PACKAGES),
        why="queries the package database",
    ),
    Shape("rpm", ("-qa", "--qf", RPM_QF, RPM_KMOD_GLOB), why="queries the package database"),
    Shape("rpm", ("-qa", "--qf", RPM_QF, RPM_NSCQ_GLOB), why="queries the package database"),
    Shape("dkms", ("status",), why="prints the DKMS tree's state"),
    Shape("mokutil", ("--sb-state",), why="prints the Secure Boot state"),
    Shape(
        "mokutil",
        ("--test-key", host_rules.DKMS_MOK_CERT),
        why="says whether a key is enrolled (reads MokListRT)",
    ),
    Shape("mokutil", ("--list-enrolled",), why="prints the enrolled keys"),
    Shape(
        "nvidia-smi", (f"--query-gpu={SMI_GPU_FIELDS}", "--format=csv,noheader"), why="NVML query"
    ),
    Shape(
        "nvidia-smi",
        (f"--query-compute-apps={SMI_APP_FIELDS}", "--format=csv,noheader"),
        why="NVML query",
    ),
    Shape("nvidia-smi", ("-q",), why="NVML query"),
    Shape("nvidia-ctk", ("--version",), why="prints a version"),
    Shape("nv-fabricmanager", ("--version",), why="prints a version"),
    Shape("lsmod", why="prints /proc/modules"),
    Shape(
        "modinfo",
        ("-F", frozenset({"license", "version"}), "nvidia"),
        why="reads a module file's metadata (loads nothing)",
    ),
    Shape(
        "systemctl",
        ("show", f"--property={SYSTEMD_PROPERTIES}"),
        UNITS,
        1,
        len(UNITS),
        why="prints units' properties",
    ),
    Shape("podman", ("--version",), why="prints a version"),
    Shape("dockerd", ("--version",), why="prints a version (starts no daemon)"),
    Shape("containerd", ("--version",), why="prints a version (starts no daemon)"),
    Shape("podman", ("images", "--format", "json"), why="lists local images"),
    Shape("podman", ("image", "inspect"), _IMAGE_ID, 1, 100, why="prints image metadata"),
    Shape("getenforce", why="prints the SELinux mode"),
    Shape("id", ("-u",), why="prints the caller's uid (whose podman store to look for)"),
    Shape("printenv", ("HOME",), why="prints the caller's home (a rootless podman store)"),
    Shape(
        "journalctl",
        ("-k", "-b", "--no-pager", "-q", "-o", "short-monotonic", f"--grep={XID_PATTERN}"),
        why="prints this boot's kernel messages that report an Xid",
    ),
    Shape(
        "lspci",
        ("-nnk", "-d", "10de:"),
        why="lists NVIDIA PCI devices and the driver bound to each (no driver needed)",
    ),
    *(
        Shape(
            "dnf",
            (*cache, *DNF_REPOQUERY),
            DNF_SPEC,
            1,
            DNF_SPECS_MAX,
            why="lists what the repositories offer (repoquery installs nothing)",
        )
        for cache in (("-q", "--cacheonly"), ("-q",))
    ),
    *(
        Shape("dnf", (*cache, *DNF_MODULE_LIST), why="lists the module's streams (changes none)")
        for cache in (("-q", "--cacheonly"), ("-q",))
    ),
    *(
        Shape(
            "dnf",
            (*cache, *DNF_INSTALL),
            DNF_INSTALL_SPEC,
            1,
            4,
            why="resolves a transaction and answers no to it (--assumeno: nothing is installed)",
        )
        for cache in (("-q", "--cacheonly"), ("-q",))
    ),
    Shape(
        "df",
        ("-P", "-k"),
        frozenset(host_rules.FREE_MB),
        1,
        len(host_rules.FREE_MB),
        why="prints free space",
    ),
)

PROGRAMS = frozenset(s.program for s in ALLOWED)


def permitted(argv: Sequence[str]) -> bool:
    return any(shape.matches(argv) for shape in ALLOWED)


def allowed_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """The argv itself when the allow-list permits it; NotAllowed otherwise."""
    args = tuple(argv)
    if not permitted(args):
        raise NotAllowed(
            f"preflight may not run {shlex.join(args)!r}: not on the read-only allow-list"
        )
    return args


def probe_line(argv: Sequence[str], timeout: int = TIMEOUT_S) -> str:
    """The shell line for an allowed argv: every argument quoted, under a C locale and a timeout."""
    args = allowed_argv(argv)
    return shlex.join((*_PREFIX, str(timeout), *args)).replace("'LC_ALL=C'", "LC_ALL=C")


@functools.lru_cache(maxsize=4096)
def probe_argv(line: str) -> tuple[str, ...]:
    """The argv inside a line `probe_line` made (a replayed host answers by it; the tests audit
    what reached a host with it). Cached: a fleet asks the same few lines of every host."""
    words = shlex.split(line)
    if tuple(words[: len(_PREFIX)]) != _PREFIX or len(words) < len(_PREFIX) + 2:
        raise NotAllowed(f"not a preflight command line: {line!r}")
    return tuple(words[len(_PREFIX) + 1 :])
