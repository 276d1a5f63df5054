"""The reason codes of the image x host judgement (builder/judgement/image.py): stable names for
why an image will run on a driver and GPUs, or not, each with its fix and its source.

Every code a verdict can carry is listed here once; preflight counts hosts per code, reports
print the code beside the words, and docs/preflight.md's reason table is held to this list
(tests/preflight/test_registry.py). A code never changes meaning; a new reason gets a new code.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.facts import cuda as cuda_rules
from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts import pci_ids
from builder.facts.sources import CUDA_GPUS, LIBNVIDIA_CONTAINER_DSL, Source
from builder.judgement.severity import BLOCK, OK, SKIP, WARN, Severity

# Image statuses, from best to worst; cpu and no-driver judge nothing.
OK_, MVC, FWD, UNKNOWN, BROKEN = "ok", "mvc", "fwd-compat", "unknown", "broken"
CPU, NO_DRIVER = "cpu", "no-driver"
STATUS_ORDER = (OK_, MVC, FWD, UNKNOWN, BROKEN)

_TOOLKIT_IMAGE = Source(
    "https://github.com/NVIDIA/nvidia-container-toolkit (internal/config/image/cuda_image.go: "
    "GetRequirements, HasDisableRequire)"
)


@dataclass(frozen=True)
class ReasonCode:
    code: str
    severity: Severity  # what the reason weighs (driver.eol: block under --strict)
    status: str  # the image status it makes ("" for a note that leaves the status alone)
    fix: str
    source: Source


REASONS: dict[str, ReasonCode] = {
    r.code: r
    for r in (
        ReasonCode("image.cpu", SKIP, CPU, "nothing: a CPU image needs no GPU driver",
               _TOOLKIT_IMAGE),
        ReasonCode("driver.none", SKIP, NO_DRIVER,
               "install a driver; judge the plan first with --target-driver",
               host_rules.NVML_MISMATCH_SOURCE),
        ReasonCode("driver.nvml-mismatch", BLOCK, BROKEN,
               "reboot into the installed driver (or reload the nvidia modules) before starting "
               "GPU containers", host_rules.NVML_MISMATCH_SOURCE),
        ReasonCode("driver.proprietary-removed", BLOCK, BROKEN,
               "install the open kernel modules: this branch ships no proprietary ones",
               driver_rules.MODULE_SOURCE),
        ReasonCode("driver.supported", OK, "", "nothing: the branch is in NVIDIA's lifecycle",
               driver_rules.LIFECYCLE_SOURCE),
        ReasonCode("driver.eol-soon", WARN, "",
               "plan the move to a supported branch before its end of life",
               driver_rules.LIFECYCLE_SOURCE),
        ReasonCode("driver.eol", WARN, "",
               "move to a supported branch (LTSB R580/R620 or the current production branch)",
               driver_rules.LIFECYCLE_SOURCE),
        ReasonCode("driver.unlisted", WARN, "",
               "move to a supported branch: NVIDIA lists every supported one, and this is not "
               "among them", driver_rules.LIFECYCLE_SOURCE),
        ReasonCode("driver.newer-than-table", WARN, "",
               "check the branch in NVIDIA's lifecycle table, then add it to "
               "builder/facts/drivers.py", driver_rules.LIFECYCLE_SOURCE),
        ReasonCode("require.error", BLOCK, BROKEN,
               "fix the image's CUDA_VERSION / NVIDIA_REQUIRE_* so the toolkit can read them",
               _TOOLKIT_IMAGE),
        ReasonCode("require.invalid", BLOCK, BROKEN,
               "correct the malformed NVIDIA_REQUIRE_* condition (libnvidia-container fails the "
               "container with 'invalid expression')", LIBNVIDIA_CONTAINER_DSL),
        ReasonCode("require.unsatisfied", BLOCK, BROKEN,
               "install a driver whose branch supports the image's CUDA, or use an image built "
               "for an older CUDA", LIBNVIDIA_CONTAINER_DSL),
        ReasonCode("require.cuda-unknown", WARN, UNKNOWN,
               "read the branch's CUDA version (nvidia-smi) and add it to "
               "builder/facts/drivers.py BRANCH_CUDA", driver_rules.BRANCH_CUDA_SOURCE),
        ReasonCode("require.hook-refuses", WARN, MVC,
               "start it through CDI (podman --device nvidia.com/gpu=...), which does not check "
               "the label, or install a driver whose CUDA is at least the image's",
               host_rules.CDI_NO_REQUIRE_SOURCE),
        ReasonCode("require.window-without-compat", WARN, "",
               "rebuild the image with trainimg's labels: brand windows promise a cuda-compat "
               "the image does not ship", cuda_rules.FORWARD_COMPAT_SOURCE),
        ReasonCode("require.disabled", OK, "",
               "nothing: the image sets NVIDIA_DISABLE_REQUIRE (the legacy hook skips its check; "
               "it still needs what it asks)", _TOOLKIT_IMAGE),
        ReasonCode("fwd.compat", WARN, FWD,
               "install a driver whose CUDA is at least the image's; until then it runs through "
               "the image's cuda-compat", cuda_rules.FORWARD_COMPAT_SOURCE),
        ReasonCode("fwd.unsupported-branch", WARN, FWD,
               "use a branch NVIDIA's forward-compatibility matrix lists for the image's CUDA, or "
               "one that runs it natively", cuda_rules.FORWARD_COMPAT_SOURCE),
        ReasonCode("fwd.eligibility-unknown", WARN, FWD,
               "confirm the GPU is data center class (forward compatibility needs one)",
               cuda_rules.FORWARD_COMPAT_SOURCE),
        ReasonCode("fwd.ineligible-gpu", BLOCK, BROKEN,
               "install a driver whose CUDA is at least the image's: this GPU cannot use "
               "cuda-compat (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)",
               cuda_rules.FORWARD_COMPAT_SOURCE),
        ReasonCode("cuda.mvc", WARN, MVC,
               "install a driver whose CUDA is at least the image's: minor-version compatibility "
               "runs no PTX newer than the driver (torch.compile/Triton kernels fail)",
               cuda_rules.MVC_SOURCE),
        ReasonCode("cuda.unknown", WARN, UNKNOWN,
               "read the branch's CUDA version (nvidia-smi) and add it to "
               "builder/facts/drivers.py BRANCH_CUDA", driver_rules.BRANCH_CUDA_SOURCE),
        ReasonCode("gpu.none-visible", OK, "",
               "nothing: without a GPU, arch and brand conditions hold as libnvidia-container "
               "judges them", LIBNVIDIA_CONTAINER_DSL),
        ReasonCode("gpu.unidentified", BLOCK, UNKNOWN,
               "identify the board (`lspci -nn -d 10de:` device id) and add it to "
               "builder/facts/pci_ids.py with its source: nothing can be cleared for it",
               pci_ids.OPEN_MODULES_README),
        ReasonCode("gpu.not-in-catalogue", WARN, "",
               "add the GPU to builder/facts/gpus.py (and its PCI id to pci_ids.py) with its "
               "source", CUDA_GPUS),
        ReasonCode("gpu.branch-too-old", BLOCK, BROKEN,
               "install a driver branch at or above the GPU's first one", CUDA_GPUS),
        ReasonCode("gpu.branch-dropped", BLOCK, BROKEN,
               "stay on the GPU's last branch (R580 for Maxwell, Pascal and Volta): newer "
               "branches do not drive it", driver_rules.ARCHITECTURE_MATRIX),
        ReasonCode("gpu.needs-open-modules", BLOCK, BROKEN,
               "install the open kernel modules (dnf module enable nvidia-driver:<branch>-open)",
               gpu_rules.OPEN_MODULES_SOURCE),
        ReasonCode("gpu.open-unsupported", BLOCK, BROKEN,
               "install the proprietary kernel modules: the open ones need Turing or newer",
               gpu_rules.OPEN_MODULES_SOURCE),
        ReasonCode("image.no-kernel-image", BLOCK, BROKEN,
               "rebuild the image with SASS for the GPU's compute capability (a newer torch "
               "build), or run it on another GPU", gpu_rules.SASS_COMPAT_SOURCE),
        ReasonCode("image.arch-unknown", OK, "",
               "nothing to do: the image carries no compiled arch list label, so its kernels "
               "are not checked", gpu_rules.SASS_COMPAT_SOURCE),
    )
}  # fmt: skip
