"""This host's NVIDIA driver, its GPUs and its CDI devices, read-only from /proc, sysfs and the
CDI spec directories: what `trainimg run` checks an image against before it starts one, and
what `trainimg verify` judges the image under verification on. Each GPU is identified as
preflight identifies it (builder/judgement/gpu_identity.py): by its PCI device id first (the
`Bus Location` of /proc/driver/nvidia/gpus/*/information -> /sys/bus/pci/devices/<bus>/device),
the driver's model name second; a GPU nothing names is judged unknown on its own, never dropped.
`root` lets a test read a recorded tree instead of /."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

from builder.facts.host import CDI_SPEC_DIRS, SYS_PCI_DEVICES
from builder.facts.pci_ids import NVIDIA_VENDOR
from builder.host import parsers
from builder.judgement.gpu_identity import GpuIdentity, identify

DRIVER_FILE = "/proc/driver/nvidia/version"
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"
_MODEL = re.compile(r"^Model:[ \t]*(.+)$", re.MULTILINE)
_BUS_LOCATION = re.compile(r"^Bus Location:[ \t]*(\S+)", re.MULTILINE)
# a PCI address as sysfs names its directory (domain:bus:device.function); nothing else is
# joined to a path
_PCI_ADDRESS = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_HEX_ID = re.compile(r"0x([0-9a-f]{4})")


def host_text(path: Path) -> str | None:
    """A file's text, or None where it cannot be read."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def cdi_devices(root: Path = Path("/")) -> tuple[str, ...]:
    """`kind=name` of every device in the CDI specs under /etc/cdi and /var/run/cdi."""
    out: list[str] = []
    for directory in CDI_SPEC_DIRS:
        d = root / directory.lstrip("/")
        with contextlib.suppress(OSError):
            for path in sorted(d.iterdir()):
                if path.suffix not in (".yaml", ".yml", ".json"):
                    continue
                text = host_text(path)
                spec = parsers.cdi_spec(str(path), text) if text is not None else None
                if spec is None or isinstance(spec, str):
                    continue
                out += [f"{spec.kind}={name}" for name in spec.devices if name]
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Board:
    """One device the driver lists under /proc/driver/nvidia/gpus."""

    bus: str  # its PCI address, as the driver prints it ("" when unreadable)
    model: str  # the driver's model name (NVML's name), "" when unreadable
    pci_id: int | None  # the device id sysfs gives for the address (vendor 10de only)

    @property
    def identity(self) -> GpuIdentity:
        return identify(pci_id=self.pci_id, nvml_name=self.model, bus=self.bus)


def nvidia(root: Path = Path("/")) -> tuple[str | None, tuple[GpuIdentity, ...], int]:
    """(driver, every GPU the driver lists, identified, device count) from /proc and sysfs."""
    text = host_text(root / DRIVER_FILE.lstrip("/"))
    module = parsers.nvidia_version(text) if text else None
    found = boards(root)
    return (str(module.version) if module else None), tuple(b.identity for b in found), len(found)


def module_flavour(root: Path = Path("/")) -> str | None:
    """open | proprietary: the loaded module's flavour (its /proc version line)."""
    text = host_text(root / DRIVER_FILE.lstrip("/"))
    module = parsers.nvidia_version(text) if text else None
    return module.flavour if module else None


def boards(root: Path = Path("/")) -> tuple[Board, ...]:
    """Every device under /proc/driver/nvidia/gpus with its model and PCI id."""
    out: list[Board] = []
    with contextlib.suppress(OSError):
        for entry in sorted((root / NVIDIA_GPUS.lstrip("/")).iterdir()):
            info = host_text(entry / "information") or ""
            model = m[1].strip() if (m := _MODEL.search(info)) else ""
            bus = (m[1] if (m := _BUS_LOCATION.search(info)) else entry.name).lower()
            out.append(Board(bus if _PCI_ADDRESS.fullmatch(bus) else "", model, pci_id(root, bus)))
    return tuple(out)


def pci_id(root: Path, bus: str) -> int | None:
    """The NVIDIA device id sysfs gives the PCI address `bus` (None: not an NVIDIA device,
    unreadable, or not an address)."""
    if not _PCI_ADDRESS.fullmatch(bus):
        return None
    d = root / SYS_PCI_DEVICES.lstrip("/") / bus
    vendor = _HEX_ID.fullmatch((host_text(d / "vendor") or "").strip().lower())
    device = _HEX_ID.fullmatch((host_text(d / "device") or "").strip().lower())
    if vendor is None or device is None or int(vendor[1], 16) != NVIDIA_VENDOR:
        return None
    return int(device[1], 16)
