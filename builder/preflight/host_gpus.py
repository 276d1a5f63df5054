"""The host's GPUs as preflight judges them: NVML's, plus every GPU lspci shows that NVML does not
(with why), each matched to builder.facts.gpus and given the brand libnvidia-container sees."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules

if TYPE_CHECKING:
    from builder.preflight.host_state import HostState


@dataclass(frozen=True)
class HostGpu:
    index: int
    uuid: str
    name: str
    cc: tuple[int, int] | None
    bus_id: str
    persistence: str
    product_brand: str  # nvidia-smi -q "Product Brand" ("" when unknown)
    libnvc_brand: str  # what libnvidia-container matches `brand=` against
    fabric_state: str
    catalogue: gpu_rules.Gpu | None  # builder.facts.gpus entry, matched by name and CC
    source: str = "nvml"  # nvml | lspci (NVML saw no device: identified from PCI alone)
    pci_note: str = ""  # for source lspci: why NVML does not list it

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}" if self.cc else "sm_?"

    @property
    def cc_text(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}" if self.cc else "?"

    @property
    def min_branch(self) -> int | None:
        if self.catalogue is not None:
            return self.catalogue.min_branch
        same = gpu_rules.by_cc(self.cc) if self.cc else []
        return min((g.min_branch for g in same), default=None)

    @property
    def needs_open_modules(self) -> bool:
        if self.catalogue is not None:
            return self.catalogue.needs_open_modules
        return any(g.needs_open_modules for g in (gpu_rules.by_cc(self.cc) if self.cc else []))

    @property
    def datacenter(self) -> bool | None:
        """Eligible for forward compatibility; None when neither the catalogue nor the brand
        says (a GeForce/TITAN brand is never eligible). Select NGC Server Ready RTX SKUs are
        eligible too (builder.facts.host FORWARD_COMPAT_RTX_SERVER_SKUS)."""
        if host_rules.forward_compat_rtx_server(self.name):
            return True
        if self.catalogue is not None:
            return self.catalogue.datacenter
        if self.libnvc_brand in ("geforce", "titan"):
            return False
        return None


def catalogue_gpu(name: str, cc: tuple[int, int] | None) -> gpu_rules.Gpu | None:
    """The catalogue entry whose name is a whole-word part of nvidia-smi's name (longest wins),
    with the same compute capability when nvidia-smi reports one."""
    norm = name.lower().replace("nvidia ", "")
    best: tuple[int, gpu_rules.Gpu] | None = None
    for g in gpu_rules.GPUS.values():
        key = g.name.lower().replace("nvidia ", "")
        named = re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", norm) is not None
        if named and (cc is None or g.cc == cc) and (best is None or len(key) > best[0]):
            best = (len(key), g)
    return best[1] if best else None


def merged_gpus(state: HostState) -> list[HostGpu]:
    """NVML's GPUs (brand from `nvidia-smi -q`), then those only lspci lists."""
    by_bus = {g.bus_id.lower(): g for g in (state.smi_q.gpus if state.smi_q else ())}
    out = []
    for g in state.smi_gpus:
        q = by_bus.get(g.bus_id.lower())
        brand = q.brand if q else ""
        cat = catalogue_gpu(g.name, g.compute_cap)
        libnvc = (
            host_rules.libnvc_brand(brand)
            if brand
            else (host_rules.libnvc_brand(cat.brand) if cat else host_rules.LIBNVC_BRAND_OTHER)
        )
        out.append(
            HostGpu(
                g.index,
                g.uuid,
                g.name,
                g.compute_cap,
                g.bus_id,
                g.persistence,
                brand,
                libnvc,
                q.fabric_state if q else "",
                cat,
            )
        )
    if state.pci is None:
        return out
    # Inventory is lspci + NVML (union): a board on PCI that NVML does not list is named from PCI so
    # the rules still say what it needs (e.g. B200: open modules), with why NVML lacks it.
    nvml_buses = {bus_key(g.bus_id) for g in out}
    for line in state.pci.gpus:
        bus = line.split(" ", 1)[0]
        if bus_key(bus) in nvml_buses:
            continue
        m = re.search(r"\[([^\]]+)\] \[10de:", line)
        name = f"NVIDIA {m[1]}" if m else line.split(" ", 1)[-1]
        cat = catalogue_gpu(name, None)
        brand = host_rules.libnvc_brand(cat.brand) if cat else host_rules.LIBNVC_BRAND_OTHER
        out.append(
            HostGpu(
                len(out),
                "",
                name,
                cat.cc if cat else None,
                bus,
                "",
                "",
                brand,
                "",
                cat,
                "lspci",
                _pci_only_reason(state, line, bus),
            )
        )
    return out


def bus_key(bus: str) -> str:
    """A PCI address without its domain, lower-cased: NVML's 00000000:18:00.0 and lspci's
    18:00.0 name the same device."""
    return bus.lower().rsplit(":", 2)[-2] + ":" + bus.lower().rsplit(":", 1)[-1]


def _pci_only_reason(state: HostState, line: str, bus: str) -> str:
    """Why NVML does not list a GPU that lspci shows."""
    if "(rev ff)" in line:
        return "its config space reads rev ff: the GPU has fallen off the bus (Xid 79)"
    bound = state.pci.driver_of(bus) if state.pci else None
    if bound == "vfio-pci":
        return "bound to vfio-pci (passed through to a VM): the nvidia driver does not own it"
    if bound and bound != "nvidia":
        return f"bound to {bound}, not to nvidia"
    if not state.nvidia_loaded:
        return "no nvidia module is loaded"
    if bound == "nvidia":
        return "bound to nvidia, yet NVML does not list it (see `dmesg` for NVRM errors)"
    return "the loaded nvidia module does not drive it (a driver too old for this GPU?)"
