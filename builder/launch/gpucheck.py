"""The part of preflight that `trainimg run` applies before starting: will the image run on this
host's driver and GPUs? Podman's CDI path checks nothing (builder/facts/host.py
CDI_NO_REQUIRE_SOURCE), so a mismatch would otherwise surface as a CUDA error deep inside the
trainer. Pure: the answer is the one judgement's (builder/judgement/image.py), the same as
`trainimg compat` and preflight give for this image, driver and GPUs."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from builder.engines.base import ImageInfo
from builder.facts.driver_version import DriverVersion
from builder.judgement.gpu_identity import GpuIdentity, identify
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState, ImageFacts
from builder.judgement.severity import BLOCK
from builder.labels import ARCH_LIST_LABEL, CUDA_LABEL
from builder.launch.request import LaunchHost
from builder.nvidia_require.admission import VisibleGpu
from builder.preflight.images import REQUIREMENT_ERROR, requirements_from_env, source_from_labels

REQUIRE = "NVIDIA_REQUIRE_CUDA"
DRIVER_FILE = "/proc/driver/nvidia/version"


@dataclass(frozen=True)
class DriverVerdict:
    ok: bool
    message: str
    applicable: bool = True
    verdict: ImageVerdict | None = None  # the judgement, where one was made


def image_facts(image_ref: str, image: ImageInfo) -> ImageFacts:
    """What the judgement reads of an image: its environment and our labels."""
    reqs, origin = requirements_from_env(dict(image.env))
    arches = image.labels.get(ARCH_LIST_LABEL)
    return ImageFacts(
        image_ref,
        reqs,
        image.labels.get(CUDA_LABEL) or image.env.get("CUDA_VERSION") or None,
        source_from_labels(dict(image.labels)),
        tuple(arches.split()) if arches is not None else None,
        origin.removeprefix(REQUIREMENT_ERROR) if origin.startswith(REQUIREMENT_ERROR) else "",
    )


def host_gpus(host: LaunchHost) -> tuple[GpuIdentity, ...]:
    """The host's GPUs, identified by NVML's name (hostfacts reads it) and capability."""
    return tuple(_identity(g) for g in host.gpus)


def _identity(g: VisibleGpu) -> GpuIdentity:
    major, _, minor = g.arch.partition(".")
    cc = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
    # g.brand is already libnvidia-container's word (geforce, tesla, unknown...), which maps to
    # itself
    return identify(nvml_name=g.name, cc=cc, nvml_brand=g.brand)


def check_driver(
    image_ref: str,
    image: ImageInfo,
    host: LaunchHost,
    gpus: bool,
    today: dt.date | None = None,
) -> DriverVerdict:
    if not gpus:
        return DriverVerdict(True, "driver check: not applicable (--gpus none)", False)
    facts = image_facts(image_ref, image)
    if not facts.gpu:
        return DriverVerdict(
            True, f"driver check: not applicable ({image_ref} has no {REQUIRE}: a CPU image)", False
        )
    if host.driver is None:
        return DriverVerdict(
            False,
            f"no NVIDIA driver is loaded ({DRIVER_FILE} is missing), but GPUs were asked for: "
            "install/load the driver, or run on the CPU with --gpus none",
        )
    driver = DriverVersion.parse(host.driver)
    if driver is None:
        return DriverVerdict(False, f"cannot judge {image_ref}: driver {host.driver!r} unreadable")
    state = DriverState(driver, host.driver_flavour)
    verdict = judge(facts, state, host_gpus(host), today or dt.date.today())
    unseen = host.gpu_count - len(host.gpus)
    extra = f"; {unseen} GPU(s) not identified (judged on the driver alone)" if unseen > 0 else ""
    said = "; ".join(f"[{f.reason}] {f.message}" for f in verdict.findings
                     if f.severity.rank >= 2)  # fmt: skip
    if verdict.severity is not BLOCK:
        how = f": {said}" if said else ""
        return DriverVerdict(
            True,
            f"driver check: {image_ref} {verdict.status} on driver {driver}{how}{extra}",
            True,
            verdict,
        )
    return DriverVerdict(
        False,
        f"{image_ref} will not run on driver {driver}: {said}{extra}. Upgrade the driver "
        "(`trainimg preflight --target-driver VERSION` first), use an image built for this "
        "host, or start anyway with --no-check",
        True,
        verdict,
    )
