"""NVIDIA PCI device ids -> the GPU (builder.facts.gpus): how preflight names a board that NVML
cannot see (a proprietary module on Blackwell, no module loaded, a GPU passed to a VM), and
names it right even where lspci's pci.ids is too old to ("NVIDIA Corporation Device
[10de:2901]").

Two tables: exact device ids (the product), then chip ranges (the generation only) for an id a
newer board brings. An id in neither is an unidentified GPU: nothing can be cleared for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.facts.sources import Source

NVIDIA_VENDOR = 0x10DE

# NVIDIA's open kernel modules README lists every Turing-or-newer product with its PCI device
# id ("Compatible GPUs"); the 595.45.04 release was read. Older boards (Pascal, Volta) are not
# in it (the open modules never drove them): their ids are the public PCI ID database's.
OPEN_MODULES_README = Source(
    "https://github.com/NVIDIA/open-gpu-kernel-modules/blob/595.45.04/README.md (Compatible GPUs)"
)
PCI_ID_DATABASE = Source("https://pci-ids.ucw.cz/read/PC/10de")


@dataclass(frozen=True)
class PciProduct:
    device_id: int
    product: str  # NVIDIA's product name for the id (what NVML names the board)
    gpu: str  # the builder.facts.gpus key
    source: Source = OPEN_MODULES_README
    first_branch: int | None = None  # where this id came later than its GPU's first branch


def _ids(gpu: str, source: Source, *pairs: tuple[int, str]) -> tuple[PciProduct, ...]:
    return tuple(PciProduct(i, name, gpu, source) for i, name in pairs)


_README, _PCIDB = OPEN_MODULES_README, PCI_ID_DATABASE
_H200_NVL_FIRST = Source(
    "https://github.com/NVIDIA/open-gpu-kernel-modules/blob/565.57.01/README.md "
    "(10de:233b first listed; read 2026-12-02 via issue 28)",
    False,
)
PCI_PRODUCTS: dict[int, PciProduct] = {
    p.device_id: p
    for p in (
        *_ids("k80", _PCIDB, (0x102D, "Tesla K80")),
        *_ids("m10", _PCIDB, (0x13BD, "Tesla M10")),
        *_ids("m60", _PCIDB, (0x13F2, "Tesla M60")),
        *_ids("p100", _PCIDB, (0x15F7, "Tesla P100-PCIE-12GB"), (0x15F8, "Tesla P100-PCIE-16GB"),
              (0x15F9, "Tesla P100-SXM2-16GB")),
        *_ids("p40", _PCIDB, (0x1B38, "Tesla P40")),
        *_ids("v100", _PCIDB, (0x1DB1, "Tesla V100-SXM2-16GB"), (0x1DB4, "Tesla V100-PCIE-16GB"),
              (0x1DB5, "Tesla V100-SXM2-32GB"), (0x1DB6, "Tesla V100-PCIE-32GB"),
              (0x1DB8, "Tesla V100-SXM3-32GB"), (0x1DF6, "Tesla V100S-PCIE-32GB")),
        *_ids("t4", _README, (0x1EB8, "Tesla T4")),
        *_ids("a100", _README, (0x20B0, "NVIDIA A100-SXM4-40GB"),
              (0x20B2, "NVIDIA A100-SXM4-80GB"), (0x20B3, "NVIDIA A100-SXM-64GB"),
              (0x20B5, "NVIDIA A100 80GB PCIe"), (0x20F1, "NVIDIA A100-PCIE-40GB")),
        *_ids("a30", _README, (0x20B7, "NVIDIA A30")),
        *_ids("a10", _README, (0x2236, "NVIDIA A10"), (0x2237, "NVIDIA A10G")),
        *_ids("a40", _README, (0x2235, "NVIDIA A40")),
        *_ids("rtx-a6000", _README, (0x2230, "NVIDIA RTX A6000")),
        *_ids("l4", _README, (0x27B8, "NVIDIA L4")),
        *_ids("l40", _README, (0x26B5, "NVIDIA L40")),
        *_ids("l40s", _README, (0x26B9, "NVIDIA L40S")),
        *_ids("rtx-6000-ada", _README, (0x26B1, "NVIDIA RTX 6000 Ada Generation")),
        *_ids("rtx4090", _README, (0x2684, "NVIDIA GeForce RTX 4090")),
        *_ids("h100", _README, (0x2321, "NVIDIA H100 NVL"), (0x2330, "NVIDIA H100 80GB HBM3"),
              (0x2331, "NVIDIA H100 PCIe"), (0x2339, "NVIDIA H100")),
        *_ids("h20", _README, (0x2329, "NVIDIA H20")),
        *_ids("h200", _README, (0x2335, "NVIDIA H200")),
        # the NVL board first appears in the 565.57.01 README (issue 28's per-tag survey)
        PciProduct(0x233B, "NVIDIA H200 NVL", "h200", _H200_NVL_FIRST, first_branch=565),
        *_ids("gh200", _README, (0x2342, "NVIDIA GH200 120GB"),
              (0x2348, "NVIDIA GH200 144G HBM3e")),
        *_ids("b200", _README, (0x2901, "NVIDIA B200")),
        *_ids("gb200", _README, (0x2941, "NVIDIA GB200")),
        *_ids("b300", _README, (0x3182, "NVIDIA B300 SXM6 AC")),
        *_ids("gb300", _README, (0x31C2, "NVIDIA GB300")),
        *_ids("rtx5090", _README, (0x2B85, "NVIDIA GeForce RTX 5090"),
              (0x2B87, "NVIDIA GeForce RTX 5090 D"), (0x2B8C, "NVIDIA GeForce RTX 5090 D v2")),
        *_ids("rtx-pro-6000", _README,
              (0x2BB1, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
              (0x2BB4, "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition")),
        *_ids("rtx-pro-6000-server", _README,
              (0x2BB5, "NVIDIA RTX PRO 6000 Blackwell Server Edition")),
        *_ids("rtx-pro-5000", _README, (0x2BB3, "NVIDIA RTX PRO 5000 Blackwell")),
        *_ids("gb10", _README, (0x2E12, "NVIDIA GB10")),
    )
}  # fmt: skip


@dataclass(frozen=True)
class ChipRange:
    """Device ids a chip's boards take: an id NVIDIA adds later for the same chip (a new SKU)
    still tells the generation, the compute capability and whether it needs the open modules."""

    first: int
    last: int
    chip: str
    architecture: str  # a key of builder.facts.gpus.ARCHITECTURES
    cc: tuple[int, int]
    needs_open_modules: bool
    min_branch: int
    source: Source


# Derived from the ids above (every listed board of a chip falls in its block); the block edges
# are not published by NVIDIA, hence unconfirmed.
_RANGES = Source(f"{OPEN_MODULES_README.ref}; {PCI_ID_DATABASE.ref} (block edges)", False)
# The consumer/workstation chips' blocks (issue 28: RTX 4080 10de:2704, A10M 10de:2238, L20
# 10de:26ba, L2 10de:27b6, RTX 5080 10de:2c02 were "no GPU" to `run`): the ids pci.ids lists for
# each chip fall inside its block; the edges are not published (unconfirmed), read 2026-12-02.
_CHIP_BLOCKS = Source(f"{PCI_ID_DATABASE.ref} (ids per chip; block edges)", False)
CHIP_RANGES: tuple[ChipRange, ...] = (
    ChipRange(0x15F0, 0x15FF, "GP100", "Pascal", (6, 0), False, 367, _RANGES),
    ChipRange(0x1B00, 0x1B3F, "GP102", "Pascal", (6, 1), False, 367, _CHIP_BLOCKS),
    ChipRange(0x1B80, 0x1BFF, "GP104", "Pascal", (6, 1), False, 367, _CHIP_BLOCKS),
    ChipRange(0x1E00, 0x1E7F, "TU102", "Turing", (7, 5), False, 410, _CHIP_BLOCKS),
    ChipRange(0x1E80, 0x1EFF, "TU104", "Turing", (7, 5), False, 410, _CHIP_BLOCKS),
    ChipRange(0x1F00, 0x1F7F, "TU106", "Turing", (7, 5), False, 410, _CHIP_BLOCKS),
    ChipRange(0x2200, 0x223F, "GA102", "Ampere", (8, 6), False, 455, _CHIP_BLOCKS),
    ChipRange(0x2480, 0x24FF, "GA104", "Ampere", (8, 6), False, 455, _CHIP_BLOCKS),
    ChipRange(0x2500, 0x257F, "GA106", "Ampere", (8, 6), False, 455, _CHIP_BLOCKS),
    ChipRange(0x2680, 0x26FF, "AD102", "Ada", (8, 9), False, 520, _CHIP_BLOCKS),
    ChipRange(0x2700, 0x277F, "AD103", "Ada", (8, 9), False, 520, _CHIP_BLOCKS),
    ChipRange(0x2780, 0x27FF, "AD104", "Ada", (8, 9), False, 520, _CHIP_BLOCKS),
    ChipRange(0x2C00, 0x2C7F, "GB203", "Blackwell", (12, 0), True, 570, _CHIP_BLOCKS),
    ChipRange(0x1D80, 0x1DFF, "GV100", "Volta", (7, 0), False, 384, _RANGES),
    ChipRange(0x20B0, 0x20FF, "GA100", "Ampere", (8, 0), False, 450, _RANGES),
    ChipRange(0x2300, 0x233F, "GH100", "Hopper", (9, 0), False, 520, _RANGES),
    ChipRange(0x2340, 0x237F, "GH100 (Grace Hopper)", "Hopper", (9, 0), True, 535, _RANGES),
    ChipRange(0x2900, 0x29FF, "GB100", "Blackwell", (10, 0), True, 570, _RANGES),
    ChipRange(0x3180, 0x31FF, "GB110", "Blackwell", (10, 3), True, 580, _RANGES),
    ChipRange(0x2B80, 0x2BFF, "GB202", "Blackwell", (12, 0), True, 570, _RANGES),
)


def chip_of(device_id: int) -> ChipRange | None:
    return next((r for r in CHIP_RANGES if r.first <= device_id <= r.last), None)
