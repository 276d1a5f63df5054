"""What `trainimg verify` says about the image and the host it runs on: the one image x host
judgement (builder/judgement/image.py), on the image's labels and environment and this host's
driver and GPUs; and whether the image's NVIDIA_REQUIRE_CUDA claims only what the image has
(brand windows promise forward compatibility, which needs cuda-compat inside).

Pure but for read_this_host, which reads this host as `trainimg run` does
(builder/host/this_host.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from builder.facts.driver_version import DriverVersion
from builder.host.this_host import module_flavour, nvidia
from builder.judgement.gpu_identity import GpuIdentity, identify
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState, image_facts
from builder.nvidia_require.syntax import parse_require


def read_this_host(root: Path = Path("/")) -> dict[str, Any]:
    """This host's driver, its module flavour and its GPUs (as `trainimg run` reads them)."""
    driver, gpus, count = nvidia(root)
    return {
        "driver": driver,
        "flavour": module_flavour(root),
        "gpus": [{"name": g.name, "pci_id": g.pci_id, "bus": g.bus} for g in gpus],
        "count": count,
    }


def verdict_here(ctx: dict[str, Any], today: dt.date | None = None) -> ImageVerdict | None:
    """The judgement of the image under verification on this host; None without a driver."""
    host = ctx.get("host_driver") or {}
    driver = DriverVersion.parse(host.get("driver"))
    if driver is None:
        return None
    image = ctx["image"]
    gpus = tuple(_gpu(g) for g in host.get("gpus", []))
    facts = image_facts(
        str(image.get("ref", "")),
        {str(k): str(v) for k, v in (image.get("env") or {}).items()},
        {str(k): str(v) for k, v in (image.get("labels") or {}).items()},
    )
    state = DriverState(driver, host.get("flavour"))
    return judge(facts, state, gpus, today or dt.date.today())


def _gpu(g: dict[str, Any]) -> GpuIdentity:
    """A GPU of read_this_host, identified again the one way (by PCI id, then name); `arch` and
    `brand` (libnvidia-container's words) where a caller recorded them."""
    major, _, minor = str(g.get("arch", "")).partition(".")
    cc = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
    pci = g.get("pci_id")
    return identify(
        pci_id=pci if isinstance(pci, int) else None,
        nvml_name=str(g.get("name", "")),
        cc=cc,
        nvml_brand=str(g.get("brand", "")),
        bus=str(g.get("bus", "")),
    )


def compat_claim_problem(require: str, compat_libs: bool) -> str:
    """Does NVIDIA_REQUIRE_CUDA claim a path the image has? Brand windows (`brand=...,
    driver>=N,driver<N+1`) admit older drivers through forward compatibility, which runs only
    with cuda-compat in the image; "" when the claim holds."""
    windows = [
        str(t)
        for t in parse_require(require).terms
        if any(c.key == "driver" for c in t.conditions)
        and not any(c.key == "cuda" for c in t.conditions)
    ]
    if windows and not compat_libs:
        return (
            f"NVIDIA_REQUIRE_CUDA admits older drivers through {len(windows)} forward-"
            f"compatibility windows (e.g. {windows[0]}), but the image ships no cuda-compat "
            "(no libcuda under /usr/local/cuda*/compat): on such a driver CUDA fails at its "
            "first call; rebuild with trainimg's labels"
        )
    return ""
