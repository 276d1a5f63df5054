"""Which GPU a board is (pure): from its PCI device id first, its NVML name second, its compute
capability last. What the judgement needs of a GPU (compute capability, the brand
libnvidia-container matches, forward-compatibility eligibility, open-module need and support,
first and last driver branch) comes from the identity, so a board NVML cannot see (a
proprietary module on Blackwell) is judged as what it is, and a board nothing names is
"unidentified": never silently fine.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts import pci_ids
from builder.facts.gpus import CC, Gpu
from builder.nvidia_require.admission import VisibleGpu

NOT_IN_CATALOGUE = "NVML (not in the catalogue)"


@dataclass(frozen=True)
class GpuIdentity:
    name: str
    cc: CC | None
    libnvc_brand: str  # what libnvidia-container matches `brand=` against
    how: str  # how it was identified, in words ("PCI id 10de:2901", "NVML name", ...)
    catalogue: Gpu | None = None
    chip: pci_ids.ChipRange | None = None  # an unlisted id of a known chip
    product_brand: str = ""  # NVML's "Product Brand" ("" when not read)
    pci_id: int | None = None  # the PCI device id it was read with (vendor 10de)
    product_first_branch: int | None = None  # an id that came later than its GPU's first branch
    bus: str = ""  # its PCI address, where the reader knows it

    @property
    def known(self) -> bool:
        """Does anything say what this GPU needs (a catalogue entry, a chip, a capability)?"""
        return self.catalogue is not None or self.chip is not None or self.cc is not None

    @property
    def cc_text(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}" if self.cc else "?"

    @property
    def sm(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}" if self.cc else "sm_?"

    @property
    def visible(self) -> VisibleGpu:
        """The device as libnvidia-container evaluates requirements against it."""
        return VisibleGpu(self.cc_text if self.cc else "0.0", self.libnvc_brand, self.name)

    def _same_cc(self) -> list[Gpu]:
        return gpu_rules.by_cc(self.cc) if self.cc else []

    @property
    def architecture(self) -> str | None:
        if self.catalogue is not None:
            return self.catalogue.architecture
        if self.chip is not None:
            return self.chip.architecture
        archs = {g.architecture for g in self._same_cc()}
        return archs.pop() if len(archs) == 1 else None

    @property
    def needs_open_modules(self) -> bool | None:
        """True/False; None when the capability alone cannot tell (9.0: H100 or GH200)."""
        if self.catalogue is not None:
            return self.catalogue.needs_open_modules
        if self.chip is not None:
            return self.chip.needs_open_modules
        needs = {g.needs_open_modules for g in self._same_cc()}
        return needs.pop() if len(needs) == 1 else None

    @property
    def open_modules_ok(self) -> bool | None:
        arch = self.architecture
        if arch is not None:
            return gpu_rules.ARCHITECTURES[arch].open_modules
        if self.cc is not None:
            return self.cc >= driver_rules.OPEN_MODULES_MIN_CC
        return None

    @property
    def min_branch(self) -> int | None:
        if self.catalogue is not None:
            return max(self.catalogue.min_branch, self.product_first_branch or 0)
        if self.chip is not None:
            return self.chip.min_branch
        return min((g.min_branch for g in self._same_cc()), default=None)

    @property
    def last_branch(self) -> int | None:
        arch = self.architecture
        return gpu_rules.ARCHITECTURES[arch].last_branch if arch is not None else None

    @property
    def datacenter(self) -> bool | None:
        """Eligible for forward compatibility: the catalogue says; a GeForce/TITAN brand never
        is; otherwise unknown."""
        if self.catalogue is not None:
            return self.catalogue.datacenter
        if self.libnvc_brand in ("geforce", "titan"):
            return False
        return None


def by_name(name: str, cc: CC | None = None) -> Gpu | None:
    """The catalogue GPU an NVML name denotes: NVIDIA's product name for a PCI id first (what
    NVML reports: `NVIDIA A100-SXM4-80GB`, `Tesla V100-SXM2-16GB`), then the longest catalogue
    name inside it as a whole word (`NVIDIA H100 80GB HBM3` -> H100); a reported compute
    capability must agree."""
    wanted = name.strip().lower()
    for product in pci_ids.PCI_PRODUCTS.values():
        if product.product.lower() == wanted:
            g = gpu_rules.GPUS[product.gpu]
            if cc is None or g.cc == cc:
                return g
    norm = wanted.replace("nvidia ", "")
    best: tuple[int, Gpu] | None = None
    for g in gpu_rules.GPUS.values():
        key = g.name.lower().replace("nvidia ", "")
        named = re.search(rf"(?<![\w-]){re.escape(key)}(?!\w)", norm) is not None
        if named and (cc is None or g.cc == cc) and (best is None or len(key) > best[0]):
            best = (len(key), g)
    return best[1] if best else None


# NVML's "Product Brand" as the product name spells it, most specific first (NVIDIA's names:
# "NVIDIA GeForce RTX 4080", "Quadro GV100", "NVIDIA TITAN V", "Tesla V100-SXM2-16GB", "NVIDIA
# RTX A6000"): where no `nvidia-smi -q` was read (`trainimg run`, `verify` read /proc only).
_NAME_BRANDS = (("geforce", "GeForce"), ("titan", "Titan"), ("quadro", "Quadro"),
                ("tesla", "Tesla"), ("nvidia rtx", "NVIDIA RTX"))  # fmt: skip


def brand_from_name(name: str) -> str:
    """The NVML brand a product name implies ("" when the name does not say)."""
    low = f" {name.lower()} "
    return next((brand for word, brand in _NAME_BRANDS if f" {word}" in low), "")


def _brand(nvml_brand: str, cat: Gpu | None, name: str = "") -> str:
    if nvml_brand:
        return host_rules.libnvc_brand(nvml_brand)
    if cat is not None:
        return host_rules.libnvc_brand(cat.brand)
    if brand_from_name(name):
        return host_rules.libnvc_brand(brand_from_name(name))
    return host_rules.LIBNVC_BRAND_OTHER


def identify(
    *,
    pci_id: int | None = None,
    nvml_name: str = "",
    cc: CC | None = None,
    nvml_brand: str = "",
    pci_text: str = "",
    bus: str = "",
) -> GpuIdentity:
    """One board, from whatever was read of it: the PCI device id (lspci -nn, sysfs), NVML's
    name, compute capability and brand (nvidia-smi, /proc), or lspci's words (`pci_text`, last
    resort). A board not named by its exact PCI id carries the id in its name, so that every
    message about it says which device it is."""
    got = _identify(pci_id, nvml_name, cc, nvml_brand, pci_text)
    name = got.name
    if pci_id is not None and not got.how.startswith("PCI id") and f"{pci_id:04x}" not in name:
        name = f"{name} [10de:{pci_id:04x}]"
    return dataclasses.replace(got, name=name, pci_id=pci_id, bus=bus)


def _identify(
    pci_id: int | None, nvml_name: str, cc: CC | None, nvml_brand: str, pci_text: str
) -> GpuIdentity:
    if pci_id is not None and pci_id in pci_ids.PCI_PRODUCTS:
        product = pci_ids.PCI_PRODUCTS[pci_id]
        listed = gpu_rules.GPUS[product.gpu]
        return GpuIdentity(
            nvml_name or product.product,
            cc or listed.cc,
            _brand(nvml_brand, listed),
            f"PCI id 10de:{pci_id:04x}",
            listed,
            None,
            nvml_brand,
            product_first_branch=product.first_branch,
        )
    if nvml_name:
        cat = by_name(nvml_name, cc)
        how = "NVML name" if cat is not None else NOT_IN_CATALOGUE
        chip = pci_ids.chip_of(pci_id) if pci_id is not None and cat is None else None
        known_cc = cc or (cat.cc if cat else None) or (chip.cc if chip else None)
        return GpuIdentity(
            nvml_name, known_cc, _brand(nvml_brand, cat, nvml_name), how, cat, chip, nvml_brand,
        )  # fmt: skip
    if pci_id is not None:
        chip = pci_ids.chip_of(pci_id)
        if chip is not None:
            return GpuIdentity(
                f"NVIDIA {chip.chip} board 10de:{pci_id:04x} (unlisted id)",
                chip.cc,
                _brand(nvml_brand, None),
                f"PCI id 10de:{pci_id:04x} in the {chip.chip} block",
                None,
                chip,
                nvml_brand,
            )
    named = by_name(pci_text) if pci_text else None
    if named is not None:
        return GpuIdentity(
            named.name, named.cc, _brand(nvml_brand, named), "lspci's name", named, None,
            nvml_brand,
        )  # fmt: skip
    if cc is not None:
        same = gpu_rules.by_cc(cc)
        if nvml_brand:
            libnvc = host_rules.libnvc_brand(nvml_brand)
            consumer = ("geforce", "titan")  # neither can use forward compatibility
            same = [g for g in same if (g.brand in consumer) == (libnvc in consumer)]
        only = same[0] if len(same) == 1 else None
        return GpuIdentity(
            only.name if only else f"a GPU of compute capability {cc[0]}.{cc[1]}",
            cc,
            _brand(nvml_brand, only),
            "compute capability",
            only,
            None,
            nvml_brand,
        )
    shown = f"10de:{pci_id:04x}" if pci_id is not None else (pci_text or "an NVIDIA GPU")
    return GpuIdentity(
        f"unidentified NVIDIA GPU ({shown})", None, host_rules.LIBNVC_BRAND_OTHER,
        "unidentified", None, None, nvml_brand,
    )  # fmt: skip


def from_catalogue(key: str, nvml_brand: str = "") -> GpuIdentity:
    """A catalogue GPU by its key (`trainimg compat --gpu h100`, a matrix cell's target)."""
    cat = gpu_rules.GPUS[key]
    return GpuIdentity(cat.name, cat.cc, _brand(nvml_brand, cat), "catalogue", cat, None,
                       nvml_brand)  # fmt: skip


def identify_visible(gpus: tuple[VisibleGpu, ...]) -> tuple[GpuIdentity, ...]:
    """GPUs as a host shows them (libnvidia-container's arch and brand, NVML's name),
    identified: what `trainimg run` and `trainimg verify` judge this host's GPUs as."""
    return tuple(_visible(g) for g in gpus)


def _visible(g: VisibleGpu) -> GpuIdentity:
    major, _, minor = g.arch.partition(".")
    cc = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
    # g.brand is already libnvidia-container's word (geforce, tesla, unknown...), which maps to
    # itself
    return identify(nvml_name=g.name, cc=cc, nvml_brand=g.brand)
