"""Image impact of a driver change (pure): every image, judged on the current and the target
driver for this host's GPUs.

Three layers, in order:
1. NVIDIA_REQUIRE_* with libnvidia-container's semantics (builder.nvidia_require): per GPU, the
   brand as libnvidia-container sees it, the arch, the driver and the CUDA it supports. Under
   CDI nobody enforces this, so preflight does.
2. What the label cannot say: forward compatibility works on data center GPUs only (804 on
   others) and only on the branches NVIDIA's matrix lists; a GPU's minimum branch and its need
   for the open kernel modules (Blackwell on R535 passes the label's brand window, and fails).
3. Our labels: the compiled arch list against each GPU's compute capability, and the CUDA
   release's own minimum driver (below it, minor-version compatibility only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from builder.facts import cuda as cuda_rules
from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.facts.sources import LIBNVIDIA_CONTAINER_DSL
from builder.judgement.finding import Finding
from builder.judgement.registry import check
from builder.judgement.severity import BLOCK, OK, SKIP, WARN, Severity
from builder.labels import ARCH_LIST_LABEL, DRIVER_MIN_LABEL
from builder.nvidia_require.admission import DriverFacts, VisibleGpu, evaluate
from builder.nvidia_require.syntax import RequireTerm, parse_require, problem
from builder.preflight.host_gpus import HostGpu
from builder.preflight.images import ImageRecord

OK_, MVC, FWD, BROKEN = "ok", "mvc", "fwd-compat", "broken"
CPU, NO_DRIVER, UNKNOWN = "cpu", "no-driver", "unknown"
# What each image status weighs on the one severity scale (`images.impact`, `trainimg compat`).
STATUS_SEVERITY: dict[str, Severity] = {
    OK_: OK,
    UNKNOWN: WARN,
    MVC: WARN,
    FWD: WARN,
    BROKEN: BLOCK,
    CPU: SKIP,
    NO_DRIVER: SKIP,
}


def _weight(status: str) -> int | None:
    """How bad a status is on the severity scale; None where nothing was judged (cpu, no driver)."""
    severity = STATUS_SEVERITY.get(status, SKIP)
    return None if severity is SKIP else severity.rank


@dataclass(frozen=True)
class ImageVerdict:
    """One image on one driver: its status (ok, mvc, fwd-compat, unknown, broken, cpu,
    no-driver) and why."""

    status: str
    reasons: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"status": self.status, "reasons": list(self.reasons)}


@dataclass(frozen=True)
class Row:
    image: ImageRecord
    now: ImageVerdict
    after: ImageVerdict | None  # None without --target-driver

    @property
    def change(self) -> str:
        if self.after is None:
            return ""
        a, b = _weight(self.now.status), _weight(self.after.status)
        if b is None:
            return "-"
        if a is None:
            return "new"  # no driver runs now: a fresh install
        if b > a:
            return "breaks" if self.after.status == BROKEN else "degrades"
        if b < a:
            return "starts working" if self.now.status == BROKEN else "improves"
        return "unchanged"

    def as_json(self) -> dict[str, Any]:
        return {
            **self.image.as_json(),
            "now": self.now.as_json(),
            "after": self.after.as_json() if self.after else None,
            "change": self.change,
        }


def _req_gpu(g: HostGpu) -> VisibleGpu:
    return VisibleGpu(g.cc_text if g.cc else "0.0", g.libnvc_brand)


def _cuda_minor(image: ImageRecord) -> str | None:
    if image.cuda:
        parts = image.cuda.split(".")
        if len(parts) >= 2:
            return f"{parts[0]}.{parts[1]}"
    for req in image.requirements:
        for word in req.split():
            if word.startswith("cuda>="):
                return word.removeprefix("cuda>=")
    return None


def judge_image(
    image: ImageRecord,
    driver: DriverVersion | None,
    flavour: str | None,
    gpus: list[HostGpu],
    cuda: Version | None = None,
) -> ImageVerdict:
    """One image on one driver (with the given kernel-module flavour) for these GPUs; `cuda` is
    the CUDA version the host reports for that driver (nvidia-smi), else the branch table's."""
    if not image.gpu:
        return ImageVerdict(CPU, ("CPU image: no GPU requirement",))
    if driver is None:
        return ImageVerdict(NO_DRIVER, ("no NVIDIA driver",))
    broken: list[str] = []
    soft: list[str] = []  # reasons for mvc / fwd-compat
    notes: list[str] = []
    status = OK_
    branch = driver.major
    facts = DriverFacts.for_driver(driver, tuple(_req_gpu(g) for g in gpus), cuda)
    if not gpus:
        notes.append(
            "no GPU visible: judged as libnvidia-container does without one (brand and "
            "arch conditions hold)"
        )
    minor = _cuda_minor(image)
    if image.requirement_error:
        broken.append(f"requirement error: {image.requirement_error}")
    for text in image.requirements:
        req = parse_require(text)
        verdict = evaluate(req, facts)
        if verdict.undecided and not verdict.satisfied:
            status = UNKNOWN
            soft.append(
                f"the CUDA version of driver {driver} is not known to the rules (R{branch} is "
                f"past builder/facts/drivers.py BRANCH_CUDA): {text.split(' ', 1)[0]} cannot "
                "be judged; on a live host preflight reads nvidia-smi's CUDA Version"
            )
            continue
        if verdict.invalid is not None:
            bad = verdict.invalid
            broken.append(
                f"NVIDIA_REQUIRE condition {bad.raw!r} is malformed "
                f"({problem(bad) or 'not a valid comparison'}) and is evaluated here: "
                "libnvidia-container fails the container with 'invalid expression'"
            )
            continue
        if not verdict.satisfied:
            who = verdict.failed_gpu
            gpu = next((g for g in gpus if who is not None and _req_gpu(g) == who), None)
            on = (
                f"{gpu.name} (brand {gpu.libnvc_brand!r}, arch {gpu.cc_text})"
                if gpu
                else "this host"
            )
            cuda_terms = [t for t in req.terms if any(c.key == "cuda" for c in t.conditions)]
            why = (
                f"driver {driver} supports CUDA {facts.cuda}, below {cuda_terms[0]}, and no "
                "brand/driver window admits it"
                if cuda_terms
                else f"no term of {text!r} holds"
            )
            broken.append(
                f"NVIDIA_REQUIRE unsatisfied on {on}: {why} "
                "(the legacy hook refuses it; CDI does not check)"
            )
            if gpu is not None and gpu.datacenter is False:
                broken.append(
                    f"{gpu.name} cannot use forward compatibility (cuda-compat): "
                    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)"
                )
            continue
        if verdict.forward_compat_only:
            pairs: list[tuple[HostGpu | None, RequireTerm | None]] = list(
                zip(gpus, verdict.matched, strict=False)
            ) or [(None, verdict.matched[0])]
            for gpu, term in pairs:
                if term is None or any(c.key == "cuda" for c in term.conditions):
                    continue
                if gpu is not None and gpu.datacenter is False:
                    broken.append(
                        f"only a forward-compatibility window ({term}) admits {gpu.name}, "
                        "which cannot use cuda-compat (error 804)"
                    )
                    break
                status = FWD
                brand = next((c.value for c in term.conditions if c.key == "brand"), "any")
                soft.append(
                    f"forward compatibility only: cuda-compat, admitted by the brand={brand} "
                    f"window for R{branch} (not by {req.terms[0]})"
                )
                if gpu is not None and gpu.datacenter is None:
                    notes.append(
                        f"could not confirm {gpu.name} is data center class "
                        "(forward compatibility needs one)"
                    )
                fwd = cuda_rules.FORWARD_COMPAT_BRANCHES.get(minor or "", ())
                if branch not in fwd:
                    listed = ", ".join(map(str, fwd)) or "none"
                    notes.append(
                        f"R{branch} is not in NVIDIA's forward-compatibility matrix for "
                        f"CUDA {minor} ({listed}): the label admits it, NVIDIA does not "
                        "support it"
                    )
                break
    for g in gpus:
        if g.min_branch is not None and branch < g.min_branch:
            broken.append(
                f"{g.name} needs driver branch R{g.min_branch}+ (whatever the label admits)"
            )
        if g.needs_open_modules and flavour == "proprietary":
            broken.append(f"{g.name} needs the open kernel modules; this driver's are proprietary")
        if image.arch_list is None:
            notes.append(f"compiled arch list unknown (no {ARCH_LIST_LABEL} label)")
        elif g.cc is not None and gpu_rules.covering_sass(image.arch_list, g.cc) is None:
            broken.append(
                f"no kernel image for {g.name} ({g.sm}): compiled for "
                f"{' '.join(image.arch_list) or 'nothing'} (cudaErrorNoKernelImageForDevice)"
            )
    if image.driver_min and status == OK_ and not broken:
        try:
            floor = DriverVersion(image.driver_min)
        except ValueError:
            floor = None
        if floor is not None and driver < floor:
            status = MVC
            soft.append(
                f"driver {driver} is below CUDA {image.cuda or minor}'s minimum {floor}: "
                f"minor-version compatibility only ({cuda_rules.MVC_LIMITS})"
            )
    if image.disable_require:
        notes.append("the image sets NVIDIA_DISABLE_REQUIRE: the legacy hook skips its check too")
    if broken:
        return ImageVerdict(BROKEN, tuple(dict.fromkeys(broken + notes)))
    return ImageVerdict(status, tuple(dict.fromkeys(soft + notes)))


def impact(
    images: list[ImageRecord],
    gpus: list[HostGpu],
    current: DriverVersion | None,
    current_flavour: str | None,
    target: DriverVersion | None,
    target_flavour: str | None,
    current_cuda: Version | None = None,
) -> list[Row]:
    return [
        Row(
            img,
            judge_image(img, current, current_flavour, gpus, current_cuda),
            judge_image(img, target, target_flavour, gpus) if target is not None else None,
        )
        for img in images
    ]


IMPACT_SOURCES = (
    LIBNVIDIA_CONTAINER_DSL,
    cuda_rules.FORWARD_COMPAT_SOURCE,
    cuda_rules.MVC_SOURCE,
    gpu_rules.SASS_COMPAT_SOURCE,
    host_rules.CDI_NO_REQUIRE_SOURCE,
)


IMPACT_ID = "images.impact"


@check(IMPACT_ID, "image", summary="every image on the current and the target driver")
def impact_check(rows: list[Row], target: DriverVersion | None, notes: list[str]) -> Finding:
    cid = IMPACT_ID
    judged = [r for r in rows if r.image.gpu]
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not judged:
        return Finding(
            cid, SKIP, f"no GPU image to judge (matrix, lock and local){tail}", "", IMPACT_SOURCES
        )
    verdicts = [r.after if r.after is not None else r.now for r in judged]
    if all(v.status == NO_DRIVER for v in verdicts):
        return Finding(
            cid,
            SKIP,
            f"{len(judged)} GPU images; no driver to judge them against "
            "(pass --target-driver to judge a planned install)" + tail,
            "",
            IMPACT_SOURCES,
        )
    when = f"with {target}" if target is not None else "on the current driver"
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    breaks = [r for r in judged if r.change == "breaks"]
    broken = [r for r, v in zip(judged, verdicts, strict=True) if v.status == BROKEN]
    finding = f"{len(judged)} GPU images {when}: {summary}"
    if breaks:
        finding += f"; {len(breaks)} work now and break (e.g. {breaks[0].image.name})"
    if broken:
        first = next(iter(r.after or r.now for r in broken))
        why = f"; {first.reasons[0]}" if first.reasons else ""
        return Finding(
            cid,
            BLOCK,
            f"{finding}{why}{tail}",
            "keep the current driver for these images, choose a target they accept, "
            "or rebuild them for it (see the image table)",
            IMPACT_SOURCES,
        )
    if counts.get(FWD) or counts.get(MVC) or counts.get(UNKNOWN):
        return Finding(
            cid,
            WARN,
            finding + tail,
            f"prefer a driver at or above the images' CUDA minimum ({DRIVER_MIN_LABEL})",
            IMPACT_SOURCES,
        )
    return Finding(cid, OK, finding + tail, "", IMPACT_SOURCES)
