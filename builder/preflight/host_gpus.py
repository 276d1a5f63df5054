"""The host's GPUs as preflight judges them: NVML's, plus every GPU lspci shows that NVML does
not (with why), each identified by its PCI device id first and NVML's name second
(builder/judgement/gpu_identity.py), with the brand libnvidia-container sees.

Pure, and fed plain parsed values (never HostState), so that host_state.py can hold HostGpu
without either module importing the other in a circle."""

from __future__ import annotations

from dataclasses import dataclass

from builder.facts.gpus import CC, Gpu
from builder.host.parsers import (
    PciDevices,
    QGpu,
    SmiGpu,
    SysPciDevice,
    pci_device_id,
    pci_name,
)
from builder.judgement.gpu_identity import GpuIdentity, identify


@dataclass(frozen=True)
class HostGpu:
    index: int
    uuid: str
    bus_id: str
    persistence: str
    fabric_state: str
    identity: GpuIdentity
    # nvml | lspci | sysfs (NVML saw no device: identified from PCI alone, by lspci or, where
    # lspci is missing or does not list it, by /sys/bus/pci/devices)
    source: str = "nvml"
    pci_note: str = ""  # for source lspci or sysfs: why NVML does not list it

    @property
    def pci_only(self) -> bool:
        """Seen on the PCI bus only (lspci or sysfs), not by NVML."""
        return self.source in ("lspci", "sysfs")

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def cc(self) -> CC | None:
        return self.identity.cc

    @property
    def sm(self) -> str:
        return self.identity.sm

    @property
    def cc_text(self) -> str:
        return self.identity.cc_text

    @property
    def product_brand(self) -> str:
        return self.identity.product_brand

    @property
    def libnvc_brand(self) -> str:
        return self.identity.libnvc_brand

    @property
    def catalogue(self) -> Gpu | None:
        return self.identity.catalogue

    @property
    def min_branch(self) -> int | None:
        return self.identity.min_branch

    @property
    def needs_open_modules(self) -> bool:
        return bool(self.identity.needs_open_modules)

    @property
    def datacenter(self) -> bool | None:
        return self.identity.datacenter


def bus_key(bus: str) -> str:
    """A PCI address without its domain, lower-cased: NVML's 00000000:18:00.0 and lspci's
    18:00.0 name the same device."""
    return bus.lower().rsplit(":", 2)[-2] + ":" + bus.lower().rsplit(":", 1)[-1]


def merged_gpus(
    smi_gpus: list[SmiGpu],
    smi_q: tuple[QGpu, ...],
    pci: PciDevices | None,
    nvidia_loaded: bool,
    sysfs: tuple[SysPciDevice, ...] = (),
) -> list[HostGpu]:
    """NVML's GPUs (brand from `nvidia-smi -q`, device id from lspci, else sysfs), then those
    only lspci lists, then those only sysfs lists: the inventory is lspci + sysfs + NVML, so a
    board NVML cannot see is still judged as what it is (a B200 under a proprietary module
    needs the open modules) on a host without lspci too, with why NVML lacks it."""
    by_bus = {bus_key(g.bus_id): g for g in smi_q}
    pci_lines = {bus_key(line.split(" ", 1)[0]): line for line in (pci.gpus if pci else ())}
    sys_ids = {bus_key(d.bus): d.device for d in sysfs}
    out = []
    for g in smi_gpus:
        key = bus_key(g.bus_id)
        q = by_bus.get(key)
        line = pci_lines.get(key, "")
        ident = identify(
            pci_id=pci_device_id(line) if line else sys_ids.get(key),
            nvml_name=g.name,
            cc=g.compute_cap,
            nvml_brand=q.brand if q else "",
        )
        out.append(
            HostGpu(g.index, g.uuid, g.bus_id, g.persistence, q.fabric_state if q else "", ident)
        )
    seen = {bus_key(g.bus_id) for g in out}
    lspci = pci if pci is not None else PciDevices((), ())
    for line in lspci.gpus:
        bus = line.split(" ", 1)[0]
        if bus_key(bus) in seen:
            continue
        ident = identify(pci_id=pci_device_id(line), pci_text=pci_name(line))
        note = _pci_only_reason(lspci, nvidia_loaded, line, bus)
        out.append(HostGpu(len(out), "", bus, "", "", ident, "lspci", note))
    seen |= {bus_key(g.bus_id) for g in out}
    for d in sysfs:
        if bus_key(d.bus) in seen:
            continue
        note = _pci_only_reason(lspci, nvidia_loaded, "", d.bus)
        ident = identify(pci_id=d.device, bus=d.bus)
        out.append(HostGpu(len(out), "", d.bus, "", "", ident, "sysfs", note))
    return out


# lspci reads all-ones config space (rev ff) from a device that left the bus
OFF_THE_BUS = "its config space reads rev ff: the GPU has fallen off the bus (Xid 79)"


def _pci_only_reason(pci: PciDevices, nvidia_loaded: bool, line: str, bus: str) -> str:
    """Why NVML does not list a GPU that lspci shows."""
    if "(rev ff)" in line:
        return OFF_THE_BUS
    bound = pci.driver_of(bus)
    if bound == "vfio-pci":
        return "bound to vfio-pci (passed through to a VM): the nvidia driver does not own it"
    if bound and bound != "nvidia":
        return f"bound to {bound}, not to nvidia"
    if not nvidia_loaded:
        return "no nvidia module is loaded"
    if bound == "nvidia":
        return "bound to nvidia, yet NVML does not list it (see `dmesg` for NVRM errors)"
    return "the loaded nvidia module does not drive it (a driver too old for this GPU?)"
