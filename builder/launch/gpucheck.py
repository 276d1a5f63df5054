"""The part of preflight that `trainimg run` applies before starting: does this host's driver
satisfy the image's NVIDIA_REQUIRE_CUDA? Podman's CDI path does not check it
(builder/facts/host.py CDI_NO_REQUIRE_SOURCE), so a mismatch would otherwise surface as a CUDA
error deep inside the trainer. Pure: the evaluator is builder/nvidia_require/admission.py."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from builder.engines.base import ImageInfo
from builder.labels import DRIVER_MIN_LABEL
from builder.launch.request import LaunchHost
from builder.nvidia_require.admission import DriverFacts, evaluate
from builder.nvidia_require.syntax import RequirementSyntaxError, parse_require

REQUIRE = "NVIDIA_REQUIRE_CUDA"
DRIVER_FILE = "/proc/driver/nvidia/version"


@dataclass(frozen=True)
class DriverVerdict:
    ok: bool
    message: str
    applicable: bool = True


def check_driver(image_ref: str, image: ImageInfo, host: LaunchHost, gpus: bool) -> DriverVerdict:
    if not gpus:
        return DriverVerdict(True, "driver check: not applicable (--gpus none)", False)
    text = image.env.get(REQUIRE)
    if not text:
        return DriverVerdict(
            True, f"driver check: not applicable ({image_ref} has no {REQUIRE}: a CPU image)", False
        )
    if host.driver is None:
        return DriverVerdict(
            False,
            f"no NVIDIA driver is loaded ({DRIVER_FILE} is missing), but GPUs were asked for: "
            "install/load the driver, or run on the CPU with --gpus none",
        )
    try:
        req = parse_require(text)
        driver = Version(host.driver)
    except (RequirementSyntaxError, InvalidVersion) as exc:
        return DriverVerdict(False, f"cannot judge {REQUIRE} of {image_ref}: {exc}")
    facts = DriverFacts.for_driver(driver, host.gpus)
    verdict = evaluate(req, facts)
    cuda = f"CUDA {facts.cuda}" if str(facts.cuda) != "0" else "an unknown CUDA version"
    if verdict.satisfied:
        how = " (through a forward-compatibility window)" if verdict.forward_compat_only else ""
        return DriverVerdict(
            True, f"driver check: driver {driver} ({cuda}) satisfies {REQUIRE}{how}"
        )
    which = f" for GPU arch {verdict.failed_gpu.arch}" if verdict.failed_gpu else ""
    minimum = image.labels.get(DRIVER_MIN_LABEL)
    need = f" (the image needs driver >= {minimum})" if minimum else ""
    return DriverVerdict(
        False,
        f"driver {driver} ({cuda}) does not satisfy {REQUIRE}={text!r} of {image_ref}{which}"
        f"{need}: upgrade the driver (`trainimg preflight --target-driver VERSION` first), "
        "use an image built for an older CUDA, or start anyway with --no-check",
    )
