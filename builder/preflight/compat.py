"""`trainimg compat` (pure): will this image run on that driver and GPU, without a host?

The one judgement (builder/judgement/image.py) on one image, one driver and one GPU described
by catalogue key, NVML name, compute capability and/or brand. The answer lists, per
requirement, the term that decided it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from builder.errors import TrainimgError
from builder.facts import drivers as driver_rules
from builder.facts import gpus as gpu_rules
from builder.facts.driver_version import DriverVersion
from builder.host.shown import printable
from builder.judgement.gpu_identity import GpuIdentity, by_name, from_catalogue, identify
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState
from builder.judgement.kind import Kind, kind_of
from builder.nvidia_require.admission import DriverFacts, evaluate, libnvc_message
from builder.nvidia_require.syntax import parse_require
from builder.preflight.images import ImageRecord
from builder.preflight.report import exit_code_of

MODULES = ("open", "proprietary")


class CompatError(TrainimgError):
    """The GPU description does not name one GPU; the message says what would."""


def describe_gpu(name: str | None, cc: str | None, brand: str | None) -> GpuIdentity | None:
    """A GPU as preflight would identify it: by catalogue key (`--gpu h100`), NVML name
    (`--gpu 'NVIDIA A100-SXM4-80GB'`) or compute capability (`--cc 9.0`), with the NVML brand
    given by `--brand`; None for no GPU at all."""
    if name is None and cc is None:
        if brand is not None:
            raise CompatError("--brand needs --gpu or --cc (a brand belongs to a GPU)")
        return None
    cap = _cc(cc) if cc is not None else None
    if name is not None:
        if name.lower() in gpu_rules.GPUS:
            ident = from_catalogue(name.lower(), brand or "")
            if cap is not None and cap != ident.cc:
                raise CompatError(f"--gpu {name} is CC {ident.cc_text}, not --cc {cc}")
            return ident
        if by_name(name, cap) is None:
            known = ", ".join(sorted(gpu_rules.GPUS))
            raise CompatError(
                f"--gpu {name!r} is not a GPU the rules know (a key: {known}; or an NVML name "
                "such as 'NVIDIA A100-SXM4-80GB')"
            )
        return identify(nvml_name=name, cc=cap, nvml_brand=brand or "")
    return identify(cc=cap, nvml_brand=brand or "")


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
    driver: DriverState
    gpu: GpuIdentity | None
    verdict: ImageVerdict
    terms: tuple[RequirementDecision, ...]

    @property
    def kind(self) -> Kind:
        """compat has no "now": it judges a driver and GPU the image would move to, so a block
        is what the move breaks (never broken-now or never-ran), a warning a risk."""
        return kind_of(None, self.verdict.severity, planned=True)

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.verdict.severity)

    def as_json(self) -> dict[str, Any]:
        entry = driver_rules.branch_cuda(self.driver.version.major)
        return {
            "image": self.image.as_json(),
            "driver": str(self.driver.version),
            "kernel_module": self.driver.flavour,
            "cuda": entry.text if entry else None,
            "gpu": None
            if self.gpu is None
            else {
                "name": self.gpu.name,
                "compute_cap": self.gpu.cc_text,
                "brand": self.gpu.product_brand,
                "libnvidia_container_brand": self.gpu.libnvc_brand,
                "identified_by": self.gpu.how,
            },
            # the finding kind (breaks/risk/info) sits in the verdict: the document's own
            # `kind` is its envelope's (trainimg.compat, docs/json.md)
            "verdict": {**self.verdict.as_json(), "kind": str(self.kind)},
            "terms": [t.__dict__ for t in self.terms],
            "exit_code": self.exit_code,
        }


def default_module(driver: DriverVersion, gpu: GpuIdentity | None) -> str:
    """The flavour a plain install of `driver` brings: open from R560 (NVIDIA's default), and
    the open modules wherever the GPU needs them; proprietary before R560."""
    if gpu is not None and gpu.needs_open_modules:
        return "open"
    return "open" if driver.major >= driver_rules.OPEN_DEFAULT_FROM_BRANCH else "proprietary"


def answer(
    image: ImageRecord,
    driver: DriverVersion,
    gpu: GpuIdentity | None,
    module: str | None = None,
    today: dt.date | None = None,
) -> Answer:
    state = DriverState(driver, module or default_module(driver, gpu))
    gpus = (gpu,) if gpu is not None else ()
    verdict = judge(image.facts, state, gpus, today)
    facts = DriverFacts.for_driver(driver, tuple(g.visible for g in gpus))
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
    return Answer(image, state, gpu, verdict, tuple(terms))


def render_answer(a: Answer) -> str:
    entry = driver_rules.branch_cuda(a.driver.version.major)
    gpu = (
        f"{a.gpu.name} (CC {a.gpu.cc_text}, brand {a.gpu.libnvc_brand!r})"
        if a.gpu is not None
        else "no GPU (arch and brand conditions hold, as libnvidia-container does)"
    )
    lines = [
        f"{a.image.name} on driver {a.driver.version} ({a.driver.flavour} modules, CUDA "
        f"{entry.text if entry else 'unknown'}), {gpu}:",
        f"  verdict: {a.verdict.status} ({a.verdict.severity})",
    ]
    for f in a.verdict.findings:
        if f.reason == "driver.supported" and f.severity.rank <= 1:
            continue
        lines.append(f"  - [{f.reason}] {f.message}")
    for t in a.terms:
        short = t.requirement if len(t.requirement) <= 60 else t.requirement[:57] + "..."
        lines.append(f"  {'holds' if t.holds else 'fails'}: {short}")
        lines.append(f"         decided by: {t.decided_by}")
    if not a.terms:
        lines.append("  no NVIDIA_REQUIRE_* requirement")
    return "\n".join(printable(line) for line in lines)  # labels and names come from records
