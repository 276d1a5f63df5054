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
from builder.host.shown import shown
from builder.host.this_host import DRIVER_FILE
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState, image_facts
from builder.judgement.severity import BLOCK
from builder.launch.request import LaunchHost

REQUIRE = "NVIDIA_REQUIRE_CUDA"


@dataclass(frozen=True)
class DriverVerdict:
    ok: bool
    message: str
    applicable: bool = True
    verdict: ImageVerdict | None = None  # the judgement, where one was made


def check_driver(
    image_ref: str,
    image: ImageInfo,
    host: LaunchHost,
    gpus: bool,
    today: dt.date | None = None,
) -> DriverVerdict:
    if not gpus:
        return DriverVerdict(True, "driver check: not applicable (--gpus none)", False)
    facts = image_facts(image_ref, image.env, image.labels)
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
    verdict = judge(facts, state, host.gpus, today or dt.date.today())
    extra = _unidentified(host)
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


def _unidentified(host: LaunchHost) -> str:
    """The GPUs nothing names, by what was read of them (PCI id, address): each is judged on
    its own as unknown (gpu.unidentified), the others as what they are."""
    unknown = [g for g in host.gpus if not g.known]
    if not unknown:
        return ""
    said = ", ".join(shown(f"{g.name}{f' at {g.bus}' if g.bus else ''}") for g in unknown)
    return f"; not identified: {said}"
