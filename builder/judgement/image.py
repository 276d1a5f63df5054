"""Will this image run on this host? The one judgement (pure) of an image x a driver x GPUs on a
day, which preflight's image impact, `trainimg compat`, `trainimg run`'s pre-start check,
`trainimg verify` and the matrix rules all call: they differ in how they read the image and
the host, never in the answer.

Inputs: the image's facts (its NVIDIA_REQUIRE_* as the toolkit collects them, its CUDA release,
where that CUDA comes from - NVIDIA's repository with or without cuda-compat, or PyPI's wheels -
and its compiled arch list), the driver (version, kernel-module flavour, the CUDA version it
reports, whether NVML works under it), the GPUs as identified (builder/judgement/gpu_identity.py)
and the day. Output: a status (ok, mvc, fwd-compat, unknown, broken; cpu, no-driver) and
Findings, each with a stable reason code (builder/judgement/reasons.py).

One module, over 400 lines: the judgement reads top to bottom in the order its reasons are
given (requirements, driver branch, forward and minor-version compatibility, GPUs), and every
entry point's answer is this one file's.

The order NVIDIA's own stack decides in:
1. The label, evaluated as libnvidia-container does (builder/nvidia_require). Under CDI nothing
   checks it, so what the label admits is then held to what the image can do: a brand window
   admits forward compatibility, which needs cuda-compat in the image and a data center GPU on
   a branch NVIDIA's matrix lists; an image without cuda-compat runs on an older driver of the
   same CUDA major through minor-version compatibility (the legacy hook refusing its label).
2. The CUDA version: a driver whose CUDA (major.minor) is at least the image's runs it
   natively, whatever patch release the image is (a 12.8 driver runs every 12.8.x).
3. Each GPU: identified at all, first and last driver branch, open or proprietary modules,
   SASS in the compiled arch list.
4. The branch's lifecycle on the day (builder/judgement/driver_life.py).

Over 400 lines: the one judgement reads top to bottom in the order above, in one file; the
label's step is three functions (the label, a refused label, a window-only admission).
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass

from packaging.version import Version

from builder.facts import cuda as cuda_rules
from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts.driver_version import DriverVersion
from builder.judgement.driver_life import branch_life
from builder.judgement.finding import Finding
from builder.judgement.gpu_identity import NOT_IN_CATALOGUE, GpuIdentity
from builder.judgement.image_facts import DriverState, ImageFacts
from builder.judgement.reasons import BROKEN, CPU, NO_DRIVER, OK_, REASONS, STATUS_ORDER
from builder.judgement.severity import OK, SKIP, Severity, worst
from builder.nvidia_require.admission import Admission, DriverFacts, evaluate
from builder.nvidia_require.syntax import RequireExpression, RequireTerm, parse_require, problem

IMAGE_ID = "image.compat"  # the Finding id of every finding this judgement makes


@dataclass(frozen=True)
class ImageVerdict:
    status: str
    findings: tuple[Finding, ...] = ()

    @property
    def severity(self) -> Severity:
        if self.status in (CPU, NO_DRIVER):
            return SKIP
        return worst(f.severity for f in self.findings)

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.reason for f in self.findings))

    @property
    def reasons(self) -> tuple[str, ...]:
        """What to say about it, worst first (a supported branch is not news)."""
        said = [f for f in self.findings if f.reason != "driver.supported"]
        said.sort(key=lambda f: -f.severity.rank)
        return tuple(dict.fromkeys(f.message for f in said))

    def findings_json(self) -> list[dict[str, str]]:
        """Every finding as {code, severity, message}, worst first (the order the text says
        them): the code and its message paired, one entry each (docs/json.md)."""
        ranked = sorted(self.findings, key=lambda f: -f.severity.rank)
        return [f.paired_json() for f in ranked]

    def as_json(self) -> dict[str, object]:
        return {
            "status": self.status,
            "severity": str(self.severity),
            "codes": list(self.codes),
            "reasons": list(self.reasons),
        }


class _Findings:
    def __init__(self) -> None:
        self.items: list[Finding] = []

    def add(self, code: str, message: str, subject: str | None = None) -> None:
        reason = REASONS[code]
        fix = reason.fix if reason.severity.rank > OK.rank else ""
        f = Finding(IMAGE_ID, reason.severity, message, fix, (reason.source,), subject, code)
        if f not in self.items:
            self.items.append(f)

    def has(self, *codes: str) -> bool:
        return any(f.reason in codes for f in self.items)


def _cuda_native(facts: DriverFacts, minor: Version) -> bool | None:
    """Does the driver's CUDA reach the image's MAJOR.MINOR? None: the rules cannot tell."""
    if facts.cuda is None:
        return None
    have = facts.cuda
    if not facts.cuda_minor_known:
        if have.major != minor.major:
            return have.major > minor.major
        return None
    return (have.major, have.minor) >= (minor.major, minor.minor)


def _mvc(driver: DriverVersion, facts: DriverFacts, minor: Version) -> bool:
    """Minor-version compatibility: the same CUDA major, a driver at or above its floor."""
    floor = cuda_rules.MVC_FLOOR.get(minor.major)
    have = facts.cuda
    return floor is not None and have is not None and have.major == minor.major and driver >= floor


def _cuda_text(facts: DriverFacts) -> str:
    if facts.cuda is None:
        return "an unknown CUDA version"
    return f"CUDA {facts.cuda}" if facts.cuda_minor_known else f"CUDA {facts.cuda.major}.x"


def _failed_on(v: Admission, gpus: tuple[GpuIdentity, ...]) -> GpuIdentity | None:
    who = v.failed_gpu
    return next((g for g in gpus if who is not None and g.visible == who), None)


@dataclass(frozen=True)
class _Requirement:
    """One NVIDIA_REQUIRE_* value as evaluated on a driver and GPUs: what its two outcome
    helpers (refused, admitted by a window only) read."""

    image: ImageFacts
    driver: DriverState
    gpus: tuple[GpuIdentity, ...]
    facts: DriverFacts
    text: str
    req: RequireExpression
    v: Admission
    mvc_ok: bool


def _requirement(
    out: _Findings,
    image: ImageFacts,
    driver: DriverState,
    gpus: tuple[GpuIdentity, ...],
    facts: DriverFacts,
    text: str,
    mvc_ok: bool,
) -> None:
    """One NVIDIA_REQUIRE_* value, then what the image can really do where it is admitted."""
    req: RequireExpression = parse_require(text)
    v = evaluate(req, facts)
    if v.invalid is not None:
        bad = v.invalid
        out.add(
            "require.invalid",
            f"NVIDIA_REQUIRE condition {bad.raw!r} is malformed "
            f"({problem(bad) or 'not a valid comparison'}) and is evaluated here: "
            "libnvidia-container fails the container with 'invalid expression'",
        )
        return
    if not v.satisfied:
        _unadmitted(out, _Requirement(image, driver, gpus, facts, text, req, v, mvc_ok))
    elif v.forward_compat_only:
        _window_only(out, _Requirement(image, driver, gpus, facts, text, req, v, mvc_ok))


def _unadmitted(out: _Findings, case: _Requirement) -> None:
    """The label refuses the container: say whether the rules cannot tell, CDI would still run
    it through minor-version compatibility, or nothing admits it (and on which GPU)."""
    image, driver, gpus, facts = case.image, case.driver, case.gpus, case.facts
    text, req, v, mvc_ok = case.text, case.req, case.v, case.mvc_ok
    ver, minor = driver.version, image.cuda_minor
    first = text.split(" ", 1)[0]
    if v.undecided:
        out.add(
            "require.cuda-unknown",
            f"the CUDA version of driver {ver} is not known to the rules precisely enough "
            f"to judge {first} ({_cuda_text(facts)}); on a live host preflight reads "
            "nvidia-smi's CUDA Version",
        )
        return
    cuda_term = any(c.key == "cuda" for t in req.terms for c in t.conditions)
    if cuda_term and image.mvc_capable and mvc_ok:
        out.add(
            "require.hook-refuses",
            f"driver {ver} supports {_cuda_text(facts)}, below {first}: the legacy hook "
            f"refuses this label; under CDI (not checked) the image's CUDA {minor} runs "
            "through minor-version compatibility",
        )
        return
    gpu = _failed_on(v, gpus)
    on = f"{gpu.name} (brand {gpu.libnvc_brand!r}, arch {gpu.cc_text})" if gpu else "this host"
    why = (
        f"driver {ver} supports {_cuda_text(facts)}, below {first}, and no brand/driver "
        "window admits it"
        if cuda_term
        else f"no term of {text!r} holds"
    )
    out.add("require.unsatisfied", f"NVIDIA_REQUIRE unsatisfied on {on}: {why}")
    if gpu is not None and gpu.datacenter is False and image.ships_compat:
        out.add(
            "fwd.ineligible-gpu",
            f"{gpu.name} cannot use forward compatibility: the image's cuda-compat gives "
            "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)",
            gpu.name,
        )


def _window_only(out: _Findings, case: _Requirement) -> None:
    """Only a brand/driver window admits the driver: forward compatibility, which needs
    cuda-compat in the image, a data center GPU and a branch NVIDIA's matrix lists."""
    image, driver, gpus, facts = case.image, case.driver, case.gpus, case.facts
    text, req, v, mvc_ok = case.text, case.req, case.v, case.mvc_ok
    ver, branch, minor = driver.version, driver.version.major, image.cuda_minor
    first = text.split(" ", 1)[0]
    pairs: list[tuple[GpuIdentity | None, RequireTerm | None]] = list(
        zip(gpus, v.matched, strict=False)
    ) or [(None, v.matched[0])]
    for gpu, term in pairs:
        if term is None or any(c.key == "cuda" for c in term.conditions):
            continue
        if image.mvc_capable:
            out.add(
                "require.window-without-compat",
                f"only a forward-compatibility window ({term}) admits R{branch}, but the "
                f"image's CUDA comes from {image.source} without cuda-compat",
            )
            if not mvc_ok:
                out.add(
                    "require.unsatisfied",
                    f"driver {ver} supports {_cuda_text(facts)}, below {first}, and the image "
                    "has neither cuda-compat nor a minor-version-compatible driver",
                )
            return
        if gpu is not None and gpu.datacenter is False:
            out.add(
                "fwd.ineligible-gpu",
                f"only a forward-compatibility window ({term}) admits {gpu.name}, which cannot "
                "use cuda-compat (error 804)",
                gpu.name,
            )
            return
        brand = next((c.value for c in term.conditions if c.key == "brand"), "any")
        out.add(
            "fwd.compat",
            f"forward compatibility only: cuda-compat, admitted by the brand={brand} window "
            f"for R{branch} (not by {req.terms[0]})",
        )
        if gpu is not None and gpu.datacenter is None:
            out.add(
                "fwd.eligibility-unknown",
                f"could not confirm {gpu.name} is data center class (forward compatibility "
                "needs one)",
                gpu.name,
            )
        key = f"{minor.major}.{minor.minor}" if minor is not None else ""
        listed = cuda_rules.FORWARD_COMPAT_BRANCHES.get(key, ())
        if branch not in listed:
            out.add(
                "fwd.unsupported-branch",
                f"R{branch} is not in NVIDIA's forward-compatibility matrix for CUDA {key or '?'} "
                f"({', '.join(map(str, listed)) or 'none'}): the label admits it, NVIDIA does "
                "not support it",
            )
        return


def _gpu(out: _Findings, driver: DriverState, g: GpuIdentity) -> None:
    """Does this driver (branch, kernel-module flavour) drive the GPU at all?"""
    branch = driver.version.major
    if not g.known:
        out.add(
            "gpu.unidentified",
            f"{g.name}: neither its PCI id nor NVML say which GPU it is, so nothing about it "
            "can be cleared",
            g.name,
        )
        return
    if g.how == NOT_IN_CATALOGUE:
        out.add(
            "gpu.not-in-catalogue",
            f"{g.name} (CC {g.cc_text}) is not in builder/facts/gpus.py: its first branch and "
            "module needs are judged from its compute capability",
            g.name,
        )
    if g.min_branch is not None and branch < g.min_branch:
        out.add(
            "gpu.branch-too-old",
            f"{g.name} needs driver branch R{g.min_branch}+ (whatever the label admits); "
            f"{driver.version} is R{branch}",
            g.name,
        )
    if g.last_branch is not None and branch > g.last_branch:
        out.add(
            "gpu.branch-dropped",
            f"{g.name} ({g.architecture}) is supported up to R{g.last_branch}: R{branch} does "
            "not drive it",
            g.name,
        )
    if g.needs_open_modules and driver.flavour == "proprietary":
        out.add(
            "gpu.needs-open-modules",
            f"{g.name} needs the open kernel modules (proprietary ones are unsupported on Grace "
            "Hopper and Blackwell); this driver's are proprietary",
            g.name,
        )
    if driver.flavour == "open" and g.open_modules_ok is False:
        out.add(
            "gpu.open-unsupported",
            f"the open kernel modules need Turing (7.5) or newer; {g.name} is "
            f"{g.architecture or 'older'} (CC {g.cc_text})",
            g.name,
        )


def _kernels(out: _Findings, image: ImageFacts, g: GpuIdentity) -> None:
    """Does the image carry SASS for the GPU?"""
    if image.arch_list is None:
        out.add("image.arch-unknown", "compiled arch list unknown (no fact or label says it)")
    elif g.cc is not None and gpu_rules.covering_sass(image.arch_list, g.cc) is None:
        out.add(
            "image.no-kernel-image",
            f"no kernel image for {g.name} ({g.sm}): compiled for "
            f"{' '.join(image.arch_list) or 'nothing'} (cudaErrorNoKernelImageForDevice)",
            g.name,
        )


def driver_gpu_findings(driver: DriverState, gpus: tuple[GpuIdentity, ...]) -> tuple[Finding, ...]:
    """The part of the judgement that needs no image: does the driver (its branch and module
    flavour) drive each GPU? Preflight's driver.module/driver.target/gpu.inventory and the
    matrix's gpu.* rules say exactly this, with the same reason codes."""
    out = _Findings()
    if driver.flavour == "proprietary" and driver.version.major >= (
        driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH
    ):
        _proprietary_removed(out, driver)
    for g in gpus:
        _gpu(out, driver, g)
    return tuple(out.items)


def _proprietary_removed(out: _Findings, driver: DriverState) -> None:
    out.add(
        "driver.proprietary-removed",
        f"R{driver.version.major} has no proprietary kernel modules (removed from "
        f"R{driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH})",
    )


@functools.lru_cache(maxsize=8192)
def judge(
    image: ImageFacts,
    driver: DriverState | None,
    gpus: tuple[GpuIdentity, ...],
    today: dt.date | None = None,
    *,
    strict: bool = False,
) -> ImageVerdict:
    """The verdict on `image` with `driver` for `gpus` on `today` (no lifecycle without a day;
    `strict`: a branch past its end of life blocks). Cached: a fleet asks the same few
    questions many times."""
    out = _Findings()
    if not image.gpu:
        out.add("image.cpu", "CPU image: no GPU requirement")
        return ImageVerdict(CPU, tuple(out.items))
    if driver is None:
        out.add("driver.none", "no NVIDIA driver")
        return ImageVerdict(NO_DRIVER, tuple(out.items))
    ver, branch = driver.version, driver.version.major
    if driver.nvml_mismatch:
        out.add(
            "driver.nvml-mismatch",
            f"the loaded kernel module is not the userspace driver's version: NVML and CUDA "
            f"fail to initialise until the reboot (judged on {ver})",
        )
    if driver.flavour == "proprietary" and branch >= driver_rules.PROPRIETARY_REMOVED_FROM_BRANCH:
        _proprietary_removed(out, driver)
    facts = DriverFacts.for_driver(ver, tuple(g.visible for g in gpus), driver.cuda)
    minor = image.cuda_minor
    mvc_ok = minor is not None and _mvc(ver, facts, minor)
    if image.requirement_error:
        out.add("require.error", f"requirement error: {image.requirement_error}")
    if image.disable_require:
        out.add(
            "require.disabled",
            "the image sets NVIDIA_DISABLE_REQUIRE: the legacy hook skips its check too",
        )
    if not gpus:
        out.add(
            "gpu.none-visible",
            "no GPU visible: judged as libnvidia-container does without one (brand and arch "
            "conditions hold)",
        )
    for text in image.requirements:
        _requirement(out, image, driver, gpus, facts, text, mvc_ok)
    if minor is not None and not out.has(
        "fwd.compat", "fwd.ineligible-gpu", "require.unsatisfied", "require.invalid"
    ):
        native = _cuda_native(facts, minor)
        if native is None and not out.has("require.cuda-unknown"):
            out.add(
                "cuda.unknown",
                f"driver {ver} reports {_cuda_text(facts)}: whether it reaches CUDA {minor} is "
                "not known to the rules",
            )
        elif native is False and mvc_ok:
            out.add(
                "cuda.mvc",
                f"driver {ver} supports {_cuda_text(facts)}, below the image's CUDA {minor}: "
                f"minor-version compatibility only ({cuda_rules.MVC_LIMITS})",
            )
        elif native is False:
            out.add(
                "require.unsatisfied",
                f"driver {ver} supports {_cuda_text(facts)}, below the image's CUDA {minor}, "
                "and below minor-version compatibility's floor",
            )
    for g in gpus:
        _gpu(out, driver, g)
        if g.known:
            _kernels(out, image, g)
    if today is not None:
        out.items.append(branch_life(branch, today, strict=strict))
    statuses = {REASONS[f.reason].status for f in out.items if f.reason in REASONS}
    status = max((s for s in statuses if s in STATUS_ORDER), key=STATUS_ORDER.index, default=OK_)
    return ImageVerdict(BROKEN if status == BROKEN else status, tuple(out.items))
