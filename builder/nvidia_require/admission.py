"""Admit a host to an image's NVIDIA_REQUIRE_* the way libnvidia-container does.

Ported from libnvidia-container's `src/cli/dsl.c` and `src/cli/configure.c` (no code is copied):

- Evaluation is lazy, left to right: the first false condition ends its term, the first true
  term ends the requirement. A malformed condition fails the container ("invalid expression")
  only if it is evaluated, so a typo behind a satisfied term is harmless.
- Versions (cuda, driver, arch) are compared component by component (repeated dots collapse,
  trailing `.0`s do not count). Brands compare with = and != only, no case.
- Per visible GPU every requirement must hold; with no GPU visible it runs once and arch/brand
  conditions hold without looking at their values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import Version

from builder.facts import drivers as driver_rules
from builder.nvidia_require.syntax import (
    UINTMAX,
    VERSION_CHARS,
    RequireCondition,
    RequireExpression,
    RequireTerm,
)


def compare_version(have: str, op: str, want: str) -> bool | None:
    """Dotted-numeric comparison with dsl_compare_version's semantics; None: invalid expression.

    Both sides must be digits and dots. Components are compared pairwise while both sides have
    one (a side that starts with a dot, or a component of 2^64-1 or more, is invalid: only the
    components actually compared are checked); then the longer side counts as larger only if
    what remains of it holds a digit other than 0."""
    if not set(have) <= VERSION_CHARS or not set(want) <= VERSION_CHARS:
        return None
    if have and want and (have[0] == "." or want[0] == "."):
        return None
    a = [t for t in have.split(".") if t]
    b = [t for t in want.split(".") if t]
    for x, y in zip(a, b, strict=False):
        nx, ny = int(x), int(y)
        if nx >= UINTMAX or ny >= UINTMAX:
            return None
        if nx != ny:
            if op in ("=", "!="):
                return op == "!="
            return nx < ny if op in ("<", "<=") else nx > ny
    more_a = any(ch != "0" for t in a[len(b) :] for ch in t)
    more_b = any(ch != "0" for t in b[len(a) :] for ch in t)
    if op == "!=":
        return more_a or more_b
    if op in ("=", "<=", ">=") and not more_a and not more_b:
        return True
    if op == "=":
        return False
    if op in ("<", "<="):
        return not more_a and more_b
    return more_a and not more_b


@dataclass(frozen=True)
class VisibleGpu:
    """One visible device as libnvidia-container sees it."""

    arch: str  # compute capability, "9.0"
    brand: str  # the brand string libnvidia-container reports ("geforce", "unknown" for NVIDIA)
    name: str = ""  # for messages only (libnvidia-container does not match on it)


@dataclass(frozen=True)
class DriverFacts:
    driver: Version
    cuda: Version | None  # the CUDA version the driver supports; None: not known to the rules
    gpus: tuple[VisibleGpu, ...] = field(default_factory=tuple)
    cuda_minor_known: bool = True  # False: only the major is known for the branch

    @classmethod
    def for_driver(
        cls, driver: Version, gpus: tuple[VisibleGpu, ...] = (), cuda: Version | None = None
    ) -> DriverFacts:
        """Facts for a driver: `cuda` as the host reports it (nvidia-smi), else the branch's."""
        if cuda is not None:
            return cls(driver, cuda, gpus)
        entry = driver_rules.branch_cuda(driver.major)
        if entry is None:
            return cls(driver, None, gpus)
        return cls(driver, entry.cuda, gpus, entry.minor_known)


@dataclass(frozen=True)
class Admission:
    satisfied: bool
    matched: tuple[
        RequireTerm | None, ...
    ]  # per GPU (or one entry without GPUs): the term that held
    failed_gpu: VisibleGpu | None = None
    invalid: RequireCondition | None = None  # evaluated and malformed: "invalid expression"
    undecided: bool = False  # a cuda condition met a driver whose CUDA version is unknown

    @property
    def forward_compat_only(self) -> bool:
        """Satisfied, but only through brand/driver windows (not a cuda>= term): some device
        was admitted by a term that pins a driver range and says nothing about CUDA."""
        return self.satisfied and any(
            t is not None
            and all(c.key != "cuda" for c in t.conditions)
            and any(c.key == "driver" for c in t.conditions)
            for t in self.matched
        )


def _cuda_ambiguous(cond: RequireCondition, host: DriverFacts) -> bool:
    """A cuda condition on a driver known only to its CUDA major: does the answer depend on
    the minor nobody published? (cuda>=12.8 on "CUDA 13" does not; cuda>=13.1 does.)"""
    if host.cuda_minor_known or host.cuda is None:
        return False
    major = host.cuda.major
    low = compare_version(f"{major}.0", cond.op, cond.value)
    high = compare_version(f"{major}.{UINTMAX - 1}", cond.op, cond.value)
    return low != high


# dsl.c formats a false condition as "KEY OP VALUE" into a 128-byte buffer; text that does not
# fit turns the false into "invalid expression".
_EXPR_MAX = 128


def _holds(cond: RequireCondition, host: DriverFacts, gpu: VisibleGpu | None) -> bool | None:
    """One condition, as configure.c's rule functions answer it; None: invalid expression."""
    if cond.error:
        return None
    result: bool | None
    if cond.key in ("arch", "brand") and gpu is None:
        return True  # no visible device: arch and brand hold, whatever their value
    if cond.key == "brand":
        assert gpu is not None
        if cond.op not in ("=", "!="):
            return None
        result = (gpu.brand.lower() == cond.value.lower()) == (cond.op == "=")
    elif cond.key == "cuda":
        if host.cuda is None or _cuda_ambiguous(cond, host):
            return False
        result = compare_version(str(host.cuda), cond.op, cond.value)
    elif cond.key == "driver":
        result = compare_version(str(host.driver), cond.op, cond.value)
    else:
        assert gpu is not None
        result = compare_version(gpu.arch, cond.op, cond.value)
    if result is False and len(f"{cond.name} {cond.op} {cond.value}") >= _EXPR_MAX:
        return None
    return result


def _evaluate_once(
    req: RequireExpression, host: DriverFacts, gpu: VisibleGpu | None
) -> tuple[bool | None, RequireTerm | None, RequireCondition | None, bool]:
    """(held, the term that held, the invalid condition, a cuda condition was undecidable)."""
    held: bool = True  # dsl.c's `ret`: the last condition's answer, carried across terms
    undecided = False
    for term in req.terms:
        completed = True
        for cond in term.conditions:
            answer = _holds(cond, host, gpu)
            if answer is None:
                return None, None, cond, undecided
            undecided |= cond.key == "cuda" and (host.cuda is None or _cuda_ambiguous(cond, host))
            held = answer
            if not answer:
                completed = False
                break
        if completed:  # every condition held (or the term had none): stop here
            return held, term if held else None, None, undecided
    return held, None, None, undecided


def evaluate(req: RequireExpression, host: DriverFacts) -> Admission:
    """One requirement on the host: per visible GPU, else once without a device."""
    devices: tuple[VisibleGpu | None, ...] = host.gpus if host.gpus else (None,)
    matched: list[RequireTerm | None] = []
    undecided = False
    for gpu in devices:
        held, term, bad, unknown = _evaluate_once(req, host, gpu)
        undecided |= unknown
        if held is None:
            return Admission(False, tuple(matched), gpu, bad, undecided)
        if not held:
            return Admission(False, tuple(matched), gpu, None, undecided)
        matched.append(term)
    return Admission(True, tuple(matched), None, None, undecided)


def libnvc_message(text: str, verdict: Admission) -> str:
    """What nvidia-container-cli prints for a failed requirement (dsl_evaluate's error)."""
    if verdict.satisfied:
        return ""
    if verdict.invalid is not None:
        return "requirement error: invalid expression"
    first = text.split(" ", 1)[0]
    hint = (
        ", please update your driver to a newer version, or use an earlier cuda container"
        if first.startswith("cuda>=")
        else ""
    )
    return f"requirement error: unsatisfied condition: {first}{hint}"
