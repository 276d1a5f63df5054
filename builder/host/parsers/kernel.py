"""Parsers of the kernel's view of the driver: /proc/driver/nvidia/version, modinfo, lsmod,
/proc/modules, lspci, modprobe.d and the kernel command line (nouveau), Xid lines of the
kernel log (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (...)"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.07  Sat Feb 17 22:55:48 UTC 2024"
_NVRM = re.compile(
    r"NVRM version:\s+NVIDIA UNIX (?P<desc>.*?Kernel Module(?: for [\w-]+)?)\s+(?P<version>\S+)"
)


@dataclass(frozen=True)
class KernelModule:
    version: DriverVersion
    flavour: str  # open | proprietary
    line: str


def nvidia_version(text: str) -> KernelModule | None:
    m = _NVRM.search(text)
    version = DriverVersion.parse(m["version"]) if m else None
    if m is None or version is None:
        return None
    flavour = "open" if host_rules.OPEN_MODULE_MARKER in m["desc"] else "proprietary"
    return KernelModule(version, flavour, text.splitlines()[0].strip())


def module_license(text: str) -> str | None:
    """`modinfo -F license nvidia` -> open | proprietary (None when unknown)."""
    return host_rules.MODULE_LICENSES.get(text.strip())


def lsmod(text: str) -> set[str]:
    """`lsmod`: a "Module Size Used by" header, then one module per line."""
    mods = set()
    for line in text.splitlines()[1:]:
        parts = line.split()
        if parts:
            mods.add(parts[0])
    return mods


@dataclass(frozen=True)
class PciDevices:
    gpus: tuple[str, ...]  # display/3D controllers
    nvswitches: tuple[str, ...]  # NVSwitch bridges (class 0680)
    drivers: tuple[tuple[str, str], ...] = ()  # (bus id, "Kernel driver in use") with -k

    def driver_of(self, bus: str) -> str | None:
        """The kernel driver bound to a device ("" when lspci -k named none; None: unknown)."""
        if not self.drivers:
            return None
        return dict(self.drivers).get(bus, "")


def lspci_nvidia(text: str) -> PciDevices:
    """`lspci -nnk -d 10de:`: "41:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5
    80GB] [10de:2330] (rev a1)", then indented lines ("Kernel driver in use: nvidia",
    "Kernel modules: nouveau, nvidia"); NVSwitches are "Bridge [0680]" devices. Without -k
    (older recordings) there are no indented lines and no driver is known."""
    gpus, switches, drivers = [], [], []
    current = ""
    seen_k = False
    for line in text.splitlines():
        if line[:1] in (" ", "\t"):
            key, _, value = line.strip().partition(":")
            if key in ("Kernel driver in use", "Kernel modules"):
                seen_k = True
            if key == "Kernel driver in use" and current:
                drivers.append((current, value.strip()))
            continue
        m = re.match(r"(\S+) (.+?) \[(0[0-9a-f]{3})\]: (.+)", line.strip())
        if not m:
            continue
        current = m[1]
        if m[3] in ("0300", "0302"):
            gpus.append(f"{m[1]} {m[4]}")
        elif m[3] == "0680":
            switches.append(f"{m[1]} {m[4]}")
    if seen_k:
        bound = dict(drivers)
        drivers = [(g.split(" ", 1)[0], bound.get(g.split(" ", 1)[0], "")) for g in gpus]
    return PciDevices(tuple(gpus), tuple(switches), tuple(drivers))


_DEVICE_ID = re.compile(r"\[10de:([0-9a-fA-F]{4})\]")


def pci_device_id(line: str) -> int | None:
    """The NVIDIA device id of an `lspci -nn` line ("... [10de:2901] (rev a1)" -> 0x2901)."""
    m = _DEVICE_ID.search(line)
    return int(m[1], 16) if m else None


def pci_name(line: str) -> str:
    """The product pci.ids gives a device, with NVIDIA's prefix ("GB100 [B200] [10de:2901]" ->
    "NVIDIA B200"); "" when lspci printed none ("Device [10de:2901]": an older pci.ids)."""
    m = re.search(r"\[([^\]]+)\] \[10de:", line)
    return f"NVIDIA {m[1]}" if m else ""


def proc_modules(text: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    """/proc/modules: "name size refcount deps state address" per line; deps is "-" or a
    comma-separated list ending in ","; -> name: (refcount, modules using it)."""
    out: dict[str, tuple[int, tuple[str, ...]]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        users = tuple(u for u in parts[3].split(",") if u and u != "-")
        out[parts[0]] = (int(parts[2]) if parts[2].isdigit() else 0, users)
    return out


@dataclass(frozen=True)
class Blacklist:
    blacklisted: bool
    modeset0: bool
    where: tuple[str, ...]


def nouveau_blacklist(files: dict[str, str], cmdline: str = "") -> Blacklist:
    """modprobe.d(5) lines "blacklist nouveau", "install nouveau /bin/false|true" and "options
    nouveau modeset=0", plus the kernel command line's modprobe.blacklist= /
    rd.driver.blacklist= / nouveau.modeset=0."""
    blacklisted, modeset0, where = False, False, []
    for path, text in sorted(files.items()):
        for raw in text.splitlines():
            words = raw.split("#", 1)[0].split()
            if words[:2] == ["blacklist", "nouveau"] or words[:2] == ["install", "nouveau"]:
                blacklisted = True
                where.append(path)
            if words[:2] == ["options", "nouveau"] and "modeset=0" in words[2:]:
                modeset0 = True
    for token in cmdline.split():
        key, _, value = token.partition("=")
        if key in ("modprobe.blacklist", "rd.driver.blacklist") and "nouveau" in value.split(","):
            blacklisted = True
            where.append(f"kernel command line ({key})")
        if token == "nouveau.modeset=0":  # noqa: S105 (a kernel parameter, not a password)
            modeset0 = True
    return Blacklist(blacklisted, modeset0, tuple(dict.fromkeys(where)))


_CMDLINE_KEYS = ("modprobe.blacklist", "rd.driver.blacklist", "nouveau.modeset")


def cmdline_subset(cmdline: str) -> str:
    """What nouveau_blacklist reads of /proc/cmdline, and nothing else (a command line can
    carry secrets: iSCSI or root-device passwords)."""
    words = [w for w in cmdline.split() if w.partition("=")[0] in _CMDLINE_KEYS]
    return " ".join(words) + "\n"


@dataclass(frozen=True)
class Xid:
    bus: str
    code: int
    text: str


def xid_events(text: str) -> list[Xid]:
    """Kernel log lines "NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the bus."."""
    out = []
    for line in text.splitlines():
        m = re.search(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)", line)
        if m:
            out.append(Xid(m[1].lower(), int(m[2]), m[3].strip()))
    return out
