"""What `trainimg verify` says about the image and the host it runs on: the one image x host
judgement (builder/judgement/image.py), on the image's labels and environment and this host's
driver and GPUs; and whether the image's NVIDIA_REQUIRE_CUDA claims only what the image has
(brand windows promise forward compatibility, which needs cuda-compat inside).

Pure but for read_this_host, which reads /proc like `trainimg run` does."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from builder.engines.base import ImageInfo
from builder.facts.driver_version import DriverVersion
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState
from builder.launch.gpucheck import host_gpus, image_facts
from builder.launch.hostfacts import module_flavour, nvidia
from builder.launch.request import LaunchHost
from builder.nvidia_require.admission import VisibleGpu
from builder.nvidia_require.syntax import parse_require


def read_this_host(root: Path = Path("/")) -> dict[str, Any]:
    """This host's driver, its module flavour and its GPUs (as `trainimg run` reads them)."""
    driver, gpus, count = nvidia(root)
    return {
        "driver": driver,
        "flavour": module_flavour(root),
        "gpus": [{"arch": g.arch, "brand": g.brand, "name": g.name} for g in gpus],
        "count": count,
    }


def verdict_here(ctx: dict[str, Any], today: dt.date | None = None) -> ImageVerdict | None:
    """The judgement of the image under verification on this host; None without a driver."""
    host = ctx.get("host_driver") or {}
    driver = DriverVersion.parse(host.get("driver"))
    if driver is None:
        return None
    image = ctx["image"]
    info = ImageInfo(
        id=str(image.get("id", "")),
        tags=(str(image.get("ref", "")),),
        digest=None,
        size=0,
        labels=dict(image.get("labels") or {}),
        env=dict(image.get("env") or {}),
        user=str(image.get("user") or ""),
        entrypoint=tuple(image.get("entrypoint") or ()),
        cmd=(),
    )
    gpus = tuple(VisibleGpu(g["arch"], g["brand"], g.get("name", "")) for g in host.get("gpus", []))
    launch = LaunchHost("podman", False, 0, 0, gpus=gpus)
    facts = image_facts(str(image.get("ref", "")), info)
    state = DriverState(driver, host.get("flavour"))
    return judge(facts, state, host_gpus(launch), today or dt.date.today())


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
