"""Parsers of what is installed and how: `dkms status` (both formats), `rpm -q --qf`, the
precompiled kmod packages, dnf versionlock and exclude= pins (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# dkms >= 2.8.6: "<module>/<version>, <kernel>, <arch>: <state>[ (<warning>)...]" and
# "<module>/<version>: added|broken"; older: "<module>, <version>, <kernel>, <arch>: <state>".
# Weak installs: "... : installed-weak from <kernel>". (dell/dkms dkms.in do_status.)
_DKMS_NEW = re.compile(
    r"(?P<module>[^/,\s]+)/(?P<version>[^,\s]+)(?:, (?P<kernel>[^,\s]+), (?P<arch>[^:\s]+))?"
    r": (?P<state>.+)"
)


_DKMS_OLD = re.compile(
    r"(?P<module>[^/,\s]+), (?P<version>[^,\s]+)(?:, (?P<kernel>[^,\s]+), (?P<arch>[^:\s]+))?"
    r": (?P<state>.+)"
)


@dataclass(frozen=True)
class DkmsEntry:
    module: str
    version: str
    kernel: str | None
    arch: str | None
    state: str  # installed | built | added | broken | installed-weak
    weak_from: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DkmsStatus:
    entries: tuple[DkmsEntry, ...]
    unparsed: tuple[str, ...] = ()


def dkms_status(text: str) -> DkmsStatus:
    entries, unparsed = [], []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = _DKMS_NEW.fullmatch(line) or _DKMS_OLD.fullmatch(line)
        if m is None:
            unparsed.append(line)
            continue
        state_text = m["state"]
        warnings = tuple(re.findall(r"\(([^)]*)\)", state_text))
        state_text = re.sub(r"\s*\([^)]*\)", "", state_text).strip()
        weak = re.fullmatch(r"installed-weak from (\S+)", state_text)
        entries.append(
            DkmsEntry(
                m["module"],
                m["version"],
                m["kernel"],
                m["arch"],
                "installed-weak" if weak else state_text,
                weak[1] if weak else None,
                warnings,
            )
        )
    return DkmsStatus(tuple(entries), tuple(unparsed))


@dataclass(frozen=True)
class RpmQuery:
    installed: dict[str, tuple[str, ...]]  # name -> every installed version-release.arch
    missing: tuple[str, ...]


def rpm_q(text: str) -> RpmQuery:
    """`rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}.%{ARCH}\\n' NAMES...` (and `rpm -qa` with the
    same format); a name that is absent prints "package NAME is not installed"."""
    installed: dict[str, list[str]] = {}
    missing = []
    for line in text.splitlines():
        m = re.fullmatch(r"package (\S+) is not installed", line.strip())
        if m:
            missing.append(m[1])
            continue
        parts = line.split()
        if len(parts) == 2:
            installed.setdefault(parts[0], []).append(parts[1])
    return RpmQuery({k: tuple(v) for k, v in installed.items()}, tuple(missing))


_KMOD = re.compile(
    r"kmod-nvidia-(?:open-)?(?P<driver>\d+\.\d+(?:\.\d+)?)-(?P<kernel>\d+\.\d+\.\d+-[\d.]+)"
)


def precompiled_kmods(query: RpmQuery) -> list[tuple[str, str, str]]:
    """(package, driver, kernel prefix) of NVIDIA's precompiled kmod packages, whose names carry
    both: kmod-nvidia-<driver>-<kernel version>-<kernel release without dist tag>, e.g.
    kmod-nvidia-535.54.03-5.14.0-284.18.1 for kernel 5.14.0-284.18.1.el9_2.x86_64
    (NVIDIA/yum-packaging-precompiled-kmod#45)."""
    out = []
    for name in query.installed:
        m = _KMOD.fullmatch(name)
        if m:
            out.append((name, m["driver"], m["kernel"]))
    return out


def kmod_covers(kernel_prefix: str, kernel: str) -> bool:
    return kernel.startswith(kernel_prefix + ".")


def dnf_pins(versionlock: str, dnf_conf: str, prefixes: tuple[str, ...]) -> list[str]:
    """NVIDIA packages pinned by the versionlock list (NEVRA lines, `!` excludes) or by
    `exclude=`/`excludepkgs=` in dnf.conf's [main]."""
    pins = []
    for raw in versionlock.splitlines():
        line = raw.strip().lstrip("!")
        name = re.sub(r"^\d+:", "", line)
        if line and not raw.strip().startswith("#") and name.startswith(prefixes):
            pins.append(f"versionlock: {raw.strip()}")
    section = ""
    for raw in dnf_conf.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "main" and key.strip() in ("exclude", "excludepkgs"):
            for word in re.split(r"[,\s]+", value.strip()):
                if word and word.lstrip("*").startswith(prefixes):
                    pins.append(f"dnf.conf exclude={word}")
    return pins


def dnf_conf_subset(dnf_conf: str) -> str:
    """What dnf_pins reads of dnf.conf - the section headers and the exclude lines - and
    nothing else: a record never keeps proxy_password, tokens or repository credentials."""
    kept = []
    for raw in dnf_conf.splitlines():
        line = raw.strip()
        key = line.partition("=")[0].strip()
        if line.startswith("[") or key in ("exclude", "excludepkgs"):
            kept.append(line)
    return "".join(f"{line}\n" for line in kept)
