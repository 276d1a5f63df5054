"""`trainimg compat` (pure): will this image run on that driver and GPU, without a host?

The same evaluator and rules as preflight's image impact (builder.preflight.impact.judge and
builder.nvidia_require): one image, one driver, one GPU described by name, compute capability
and/or brand. The answer lists, per requirement, the term that decided it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from builder.errors import TrainimgError
from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts import host as host_rules
from builder.facts.driver_version import DriverVersion
from builder.judgement.severity import SKIP
from builder.nvidia_require.admission import DriverFacts, VisibleGpu, evaluate, libnvc_message
from builder.nvidia_require.syntax import parse_require
from builder.preflight.host_gpus import HostGpu, catalogue_gpu
from builder.preflight.images import ImageRecord
from builder.preflight.impact import STATUS_SEVERITY, ImageVerdict, judge_image
from builder.preflight.report import exit_code_of


class CompatError(TrainimgError):
    """The GPU description does not name one GPU; the message says what would."""


def describe_gpu(name: str | None, cc: str | None, brand: str | None) -> HostGpu | None:
    """A GPU as preflight would see it: by catalogue name (`--gpu H100`), by compute capability
    (`--cc 9.0`), with the NVML brand overridden by `--brand`; None for no GPU at all."""
    if name is None and cc is None:
        if brand is not None:
            raise CompatError("--brand needs --gpu or --cc (a brand belongs to a GPU)")
        return None
    cap = _cc(cc) if cc is not None else None
    cat = None
    if name is not None:
        cat = gpu_rules.GPUS.get(name.lower()) or catalogue_gpu(name, cap)
        if cat is None and not host_rules.forward_compat_rtx_server(name):
            known = ", ".join(sorted(gpu_rules.GPUS))
            raise CompatError(f"--gpu {name!r} is not a GPU the rules know (known: {known})")
    elif cap is not None:
        same = gpu_rules.by_cc(cap)
        cat = same[0] if len(same) == 1 else None
    shown = name or (cat.name if cat else f"a GPU of CC {cc}")
    if cat is not None and name is not None and name.lower() == cat.key:
        shown = cat.name
    if cap is None and cat is not None:
        cap = cat.cc
    nvml_brand = brand or (
        "GeForce" if cat and cat.brand == "geforce" else ("NVIDIA" if cat else "")
    )
    libnvc = host_rules.libnvc_brand(nvml_brand) if nvml_brand else host_rules.LIBNVC_BRAND_OTHER
    return HostGpu(0, "", shown, cap, "", "", nvml_brand, libnvc, "", cat, "compat")


def _cc(text: str) -> tuple[int, int]:
    parts = text.split(".")
    if len(parts) != 2 or not all(p.isdigit() and len(p) <= 2 for p in parts):
        raise CompatError(f"--cc {text!r} is not a compute capability (expected X.Y, e.g. 9.0)")
    return int(parts[0]), int(parts[1])


@dataclass(frozen=True)
class RequirementDecision:
    """One NVIDIA_REQUIRE_* value: whether it holds and the term (or error) that decided it."""

    requirement: str
    decided_by: str  # the term that held, or what failed
    holds: bool


@dataclass(frozen=True)
class Answer:
    image: ImageRecord
    driver: DriverVersion
    gpu: HostGpu | None
    verdict: ImageVerdict
    terms: tuple[RequirementDecision, ...]

    @property
    def exit_code(self) -> int:
        return exit_code_of(STATUS_SEVERITY.get(self.verdict.status, SKIP))

    def as_json(self) -> dict[str, Any]:
        return {
            "image": self.image.as_json(),
            "driver": str(self.driver),
            "cuda": str(c) if (c := driver_rules.driver_cuda_version(self.driver)) else None,
            "gpu": None
            if self.gpu is None
            else {
                "name": self.gpu.name,
                "compute_cap": self.gpu.cc_text,
                "brand": self.gpu.product_brand,
                "libnvidia_container_brand": self.gpu.libnvc_brand,
            },
            "verdict": self.verdict.as_json(),
            "terms": [t.__dict__ for t in self.terms],
            "exit_code": self.exit_code,
        }


def answer(image: ImageRecord, driver: DriverVersion, gpu: HostGpu | None) -> Answer:
    gpus = [gpu] if gpu is not None else []
    flavour = "open" if gpu is not None and gpu.needs_open_modules else None
    verdict = judge_image(image, driver, flavour, gpus)
    facts = DriverFacts.for_driver(
        driver, tuple(VisibleGpu(g.cc_text if g.cc else "0.0", g.libnvc_brand) for g in gpus)
    )
    terms = []
    for text in image.requirements:
        v = evaluate(parse_require(text), facts)
        if v.satisfied:
            term = next((t for t in v.matched if t is not None), None)
            terms.append(
                RequirementDecision(text, str(term) if term is not None else "(no condition)", True)
            )
        else:
            terms.append(RequirementDecision(text, libnvc_message(text, v), False))
    return Answer(image, driver, gpu, verdict, tuple(terms))


def render_answer(a: Answer) -> str:
    cuda = driver_rules.driver_cuda_version(a.driver)
    gpu = (
        f"{a.gpu.name} (CC {a.gpu.cc_text}, brand {a.gpu.libnvc_brand!r})"
        if a.gpu is not None
        else "no GPU (arch and brand conditions hold, as libnvidia-container does)"
    )
    lines = [
        f"{a.image.name} on driver {a.driver} (CUDA {cuda or 'unknown'}), {gpu}:",
        f"  verdict: {a.verdict.status}",
    ]
    lines += [f"  - {r}" for r in a.verdict.reasons]
    for t in a.terms:
        short = t.requirement if len(t.requirement) <= 60 else t.requirement[:57] + "..."
        lines.append(f"  {'holds' if t.holds else 'fails'}: {short}")
        lines.append(f"         decided by: {t.decided_by}")
    if not a.terms:
        lines.append("  no NVIDIA_REQUIRE_* requirement")
    return "\n".join(lines)
