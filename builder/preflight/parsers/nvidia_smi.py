"""Parsers of nvidia-smi: `--query-gpu` CSV, `-q` (brand, MIG, memory repairs, CUDA version) and
`--query-compute-apps` (pure)."""

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
        version = DriverVersion.parse(driver)
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
    driver: str
    cuda: str
    gpus: tuple[QGpu, ...]


def smi_q(text: str) -> SmiQuery | None:
    """`nvidia-smi -q`: "Key : value" lines nested by indentation; one "GPU <bus id>" block per
    device. Reads the header versions and, per GPU, Product Name/Brand/Architecture and the
    Fabric State (NVSwitch systems report it; others print N/A)."""
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
        key, sep, value = line.partition(":")
        if not sep:  # a section heading ("Fabric", "MIG Mode"): its keys are indented below
            stack.append((indent, line))
            continue
        path = "/".join([*(s for _, s in stack), key.strip()])
        (gpus[-1] if gpus else header)[path] = value.strip()
    if "Driver Version" not in header and not gpus:
        return None
    return SmiQuery(
        header.get("Driver Version", ""),
        header.get("CUDA Version", ""),
        tuple(
            QGpu(
                g["bus_id"],
                g.get("Product Name", ""),
                g.get("Product Brand", ""),
                g.get("Product Architecture", ""),
                g.get("Fabric/State", ""),
                g.get("MIG Mode/Current", ""),
                g.get("MIG Mode/Pending", ""),
                g.get("Retired Pages/Pending Page Blacklist", "")
                or g.get("Retired Pages/Pending Page Retirement", ""),
                g.get("Remapped Rows/Pending", ""),
                g.get("Remapped Rows/Remapping Failure Occurred", ""),
            )
            for g in gpus
        ),
    )


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
