"""Parsers of nvidia-smi: `--query-gpu` CSV, `-q` (brand, MIG, memory repairs, CUDA version), the
banner of a bare `nvidia-smi` and `--query-compute-apps` (pure).

From R610 nvidia-smi names its versions anew: `KMD Version` (the kernel-mode driver) and `CUDA
UMD Version` (the user-mode driver's CUDA) beside the old `Driver Version` / `CUDA Version`, which
`-q` keeps with a suffix (`13.5 [Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version
instead]`) and the banner drops (NVIDIA's nvidia-smi documentation, "Modified version
information"; the banner as quoted in sgl-project/sglang#27487). Both spellings are read; the
new key wins; a suffix never reaches a value."""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.facts.driver_version import DriverVersion


@dataclass(frozen=True)
class SmiGpu:
    index: int
    uuid: str
    name: str
    compute_cap: tuple[int, int] | None
    driver: DriverVersion | None
    bus_id: str
    persistence: str


# `[Deprecated; will be removed in CUDA 14.0. Use CUDA UMD Version instead]` after a value
_DEPRECATED = re.compile(r"\s*\[\s*deprecated\b[^\]]*\]\s*$", re.IGNORECASE)
# (new key, old key): R610+ prints both in `-q`; older drivers only the old one
DRIVER_KEYS = ("KMD Version", "Driver Version")
CUDA_KEYS = ("CUDA UMD Version", "CUDA Version")


def value(text: str) -> str:
    """A value as nvidia-smi means it: blanks and a `[Deprecated ...]` note dropped."""
    return _DEPRECATED.sub("", text).strip()


def deprecated(text: str) -> bool:
    """Does the value carry nvidia-smi's deprecation note?"""
    return _DEPRECATED.search(text) is not None


def _first(fields: dict[str, str], keys: tuple[str, ...]) -> str:
    return next((value(fields[k]) for k in keys if value(fields.get(k, ""))), "")


def _cc(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
    return (int(m[1]), int(m[2])) if m else None


def smi_gpus(text: str) -> list[SmiGpu]:
    """`nvidia-smi --query-gpu=index,uuid,name,compute_cap,driver_version,pci.bus_id,
    persistence_mode --format=csv,noheader`: one ", "-separated line per GPU."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 7 or not parts[0].isdigit():
            continue
        name = ", ".join(parts[2:-4])  # a name with a comma keeps it
        cc, driver, bus, persistence = parts[-4:]
        version = DriverVersion.parse(value(driver))
        gpus.append(SmiGpu(int(parts[0]), parts[1], name, _cc(cc), version, bus, persistence))
    return gpus


@dataclass(frozen=True)
class QGpu:
    bus_id: str
    product_name: str = ""
    brand: str = ""
    architecture: str = ""
    fabric_state: str = ""
    mig_current: str = ""  # "MIG Mode/Current": Enabled | Disabled | N/A
    mig_pending: str = ""
    retired_pending: str = ""  # "Retired Pages/Pending Page Blacklist" (pre-Ampere): Yes | No
    remap_pending: str = ""  # "Remapped Rows/Pending" (Ampere+): Yes | No
    remap_failure: str = ""  # "Remapped Rows/Remapping Failure Occurred"


@dataclass(frozen=True)
class SmiQuery:
    driver: str  # `KMD Version`, else `Driver Version` (R610+ prints both), without a note
    cuda: str  # `CUDA UMD Version`, else `CUDA Version`, without a note
    gpus: tuple[QGpu, ...]
    deprecated_keys: tuple[str, ...] = ()  # the header keys nvidia-smi marks deprecated


def smi_q(text: str) -> SmiQuery | None:
    """`nvidia-smi -q`: "Key : value" lines nested by indentation; one "GPU <bus id>" block per
    device. Reads the header versions and, per GPU, Product Name/Brand/Architecture and the
    Fabric State (NVSwitch systems report it; others print N/A). The header's versions are read
    under their R610+ names first and their old names second (module docstring)."""
    header: dict[str, str] = {}
    gpus: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        gpu = re.fullmatch(r"GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)", line)
        if gpu and indent == 0:
            gpus.append({"bus_id": gpu[1]})
            stack = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, sep, said = line.partition(":")
        if not sep:  # a section heading ("Fabric", "MIG Mode"): its keys are indented below
            stack.append((indent, line))
            continue
        path = "/".join([*(s for _, s in stack), key.strip()])
        (gpus[-1] if gpus else header)[path] = said.strip()
    if not any(k in header for k in DRIVER_KEYS) and not gpus:
        return None
    return SmiQuery(
        _first(header, DRIVER_KEYS),
        _first(header, CUDA_KEYS),
        tuple(
            QGpu(
                g["bus_id"],
                value(g.get("Product Name", "")),
                value(g.get("Product Brand", "")),
                value(g.get("Product Architecture", "")),
                value(g.get("Fabric/State", "")),
                value(g.get("MIG Mode/Current", "")),
                value(g.get("MIG Mode/Pending", "")),
                value(g.get("Retired Pages/Pending Page Blacklist", ""))
                or value(g.get("Retired Pages/Pending Page Retirement", "")),
                value(g.get("Remapped Rows/Pending", "")),
                value(g.get("Remapped Rows/Remapping Failure Occurred", "")),
            )
            for g in gpus
        ),
        tuple(k for k in (*DRIVER_KEYS, *CUDA_KEYS) if deprecated(header.get(k, ""))),
    )


@dataclass(frozen=True)
class SmiBanner:
    smi: str  # NVIDIA-SMI's own version
    driver: str  # `Driver Version:` (to R595) or `KMD Version:` (R610+)
    cuda: str  # `CUDA Version:` (to R595) or `CUDA UMD Version:` (R610+)


_BANNER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+(?:Driver|KMD) Version:\s*(?P<driver>\S+)"
    r"(?:\s+CUDA (?:UMD )?Version:\s*(?P<cuda>[^\s|]+))?"
)


def smi_banner(text: str) -> SmiBanner | None:
    """The first table line of a bare `nvidia-smi`: `| NVIDIA-SMI 595.71.05  Driver Version:
    595.71.05  CUDA Version: 13.2 |` to R595, `| NVIDIA-SMI 610.43.02  KMD Version: 610.43.02
    CUDA UMD Version: 13.3 |` from R610; None when no line has that shape."""
    m = _BANNER.search(text)
    if m is None:
        return None
    return SmiBanner(m["smi"], m["driver"], value(m["cuda"] or ""))


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    memory: str
    gpu_uuid: str


def smi_apps(text: str) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,
    noheader`; prints "No running processes found" when there are none."""
    apps = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        apps.append(GpuProcess(int(parts[0]), ", ".join(parts[1:-2]), parts[-2], parts[-1]))
    return apps
