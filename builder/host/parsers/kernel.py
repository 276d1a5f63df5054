"""Parsers of the kernel's view of the driver: /proc/driver/nvidia/version, modinfo, lsmod,
/proc/modules, lspci, modprobe.d and the kernel command line (nouveau), Xid lines of the
kernel log (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.pci_ids import NVIDIA_VENDOR

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


# --- /sys/bus/pci/devices: the kernel's own PCI inventory, a GPU witness beside lspci --------
# a PCI address as sysfs names its directory (domain:bus:device.function); nothing else is
# joined to a path
SYS_PCI_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_SYS_HEX = re.compile(r"0x([0-9a-f]{4,6})")
# PCI class codes (base class, subclass) of a GPU: VGA-compatible display controller (0300) and
# 3D controller (0302); NVSwitch bridges (0680) and audio functions (0403) are not GPUs
GPU_PCI_CLASSES = frozenset({0x0300, 0x0302})


@dataclass(frozen=True)
class SysPciDevice:
    """One NVIDIA display/3D controller as sysfs lists it (vendor 10de)."""

    bus: str  # its address with its domain, as sysfs names it ("0000:18:00.0")
    device: int  # the PCI device id
    pci_class: int  # the 24-bit class code (0x030200)


def sys_pci_listing(text: str, directory: str) -> list[str]:
    """`ls -1 -- /sys/bus/pci/devices`: the device addresses it names (GNU ls prints no header
    for one operand; a "DIR:" header, where present, is skipped). Anything that is not a PCI
    address is dropped: no other name is ever joined to a path."""
    names = [line.strip() for line in text.splitlines() if line.strip() != f"{directory}:"]
    return [n.lower() for n in names if SYS_PCI_ADDRESS.fullmatch(n.lower())]


def sys_pci_attrs(paths: list[str], text: str) -> dict[str, str] | None:
    """`cat -- PATH...` of one-line sysfs attributes: path -> its value, in order; None when the
    line count does not match (a file could not be read: nothing is guessed)."""
    lines = text.splitlines()
    if len(lines) != len(paths):
        return None
    return {p: line.strip().lower() for p, line in zip(paths, lines, strict=True)}


def sys_hex(value: str) -> int | None:
    """A sysfs id ("0x10de", "0x030200") as a number; None when it is not one."""
    m = _SYS_HEX.fullmatch(value.strip().lower())
    return int(m[1], 16) if m else None


def sys_pci_gpus(directory: str, values: dict[str, str]) -> tuple[SysPciDevice, ...]:
    """The NVIDIA GPUs among sysfs attribute values (`<directory>/<bus>/{vendor,device,class}`
    -> value): vendor 0x10de with a display or 3D controller class, sorted by address."""
    out = []
    buses = sorted({p[len(directory) + 1 :].split("/")[0] for p in values})
    for bus in buses:
        vendor, device, cls = (
            sys_hex(values.get(f"{directory}/{bus}/{attr}", ""))
            for attr in ("vendor", "device", "class")
        )
        if vendor != NVIDIA_VENDOR or device is None or cls is None:
            continue
        if cls >> 8 in GPU_PCI_CLASSES:
            out.append(SysPciDevice(bus, device, cls))
    return tuple(out)
