"""NVIDIA_REQUIRE_CUDA: write it from the rules, and evaluate it the way libnvidia-container does.

Grammar (libnvidia-container src/cli/dsl.c): terms separated by spaces are OR-ed; conditions
inside a term, separated by commas, are AND-ed. A condition is `<key><op><value>` with keys
cuda, driver, arch, brand and operators = != < <= > >=; versions compare as dotted numbers and
brands case-insensitively. Checks run once per visible GPU (arch and brand are per device); with
no GPU visible they run once and arch/brand conditions count as satisfied (src/cli/configure.c).
Podman's CDI path does not enforce any of this, hence this module:
https://github.com/NVIDIA/nvidia-container-toolkit/issues/1470
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.version import Version

from builder.rules import cuda as cuda_rules

KEYS = ("cuda", "driver", "arch", "brand")
OPERATORS = ("<=", ">=", "!=", "=", "<", ">")
_CONDITION = re.compile(r"^(?P<key>[A-Za-z]+)(?P<op><=|>=|!=|=|<|>)(?P<value>[A-Za-z0-9._-]+)$")
_DOTTED = re.compile(r"[0-9.]+")  # dsl_compare_version accepts digits and dots only
_ORDERING = ("<", "<=", ">", ">=")


class RequirementSyntaxError(ValueError):
    """The requirement text does not parse; the message quotes the offending condition."""


@dataclass(frozen=True)
class Condition:
    key: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}{self.op}{self.value}"


@dataclass(frozen=True)
class Term:
    conditions: tuple[Condition, ...]

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.conditions)


@dataclass(frozen=True)
class Requirement:
    terms: tuple[Term, ...]

    def __str__(self) -> str:
        return " ".join(str(t) for t in self.terms)


def parse(text: str) -> Requirement:
    terms: list[Term] = []
    for raw_term in text.split():
        conditions: list[Condition] = []
        for raw in raw_term.split(","):
            if not raw:  # libnvidia-container skips empty conditions ("a,,b", "a,")
                continue
            m = _CONDITION.match(raw)
            if m is None:
                raise RequirementSyntaxError(
                    f"unparsable condition {raw!r} in {text!r}: expected KEY OP VALUE with KEY "
                    f"one of {', '.join(KEYS)} and OP one of {' '.join(OPERATORS)}"
                )
            key = m["key"].lower()  # rule names match without case, like brands
            if key not in KEYS:
                raise RequirementSyntaxError(
                    f"unknown key {m['key']!r} in {raw!r}: valid keys are {', '.join(KEYS)}"
                )
            # What libnvidia-container rejects as "invalid expression" when it evaluates it.
            if key != "brand" and not _DOTTED.fullmatch(m["value"]):
                raise RequirementSyntaxError(
                    f"{raw!r}: a {key} version takes digits and dots only (libnvidia-container "
                    "fails the container with 'invalid expression')"
                )
            if key == "brand" and m["op"] in _ORDERING:
                raise RequirementSyntaxError(
                    f"{raw!r}: brands compare with = or != only (libnvidia-container fails the "
                    "container with 'invalid expression')"
                )
            conditions.append(Condition(key, m["op"], m["value"]))
        terms.append(Term(tuple(conditions)))
    if not terms:
        raise RequirementSyntaxError("empty requirement")
    return Requirement(tuple(terms))


def nvidia_require_cuda(cuda: Version) -> str:
    """The NVIDIA_REQUIRE_CUDA value NVIDIA's own images carry for this CUDA minor."""
    minor = cuda_rules.minor(cuda)
    parts = [f"cuda>={minor}"]
    for branch in cuda_rules.REQUIRE_BRANCH_WINDOWS.get(minor, ()):
        for brand in cuda_rules.REQUIRE_BRANDS:
            parts.append(f"brand={brand},driver>={branch},driver<{branch + 1}")
    return " ".join(parts)


@dataclass(frozen=True)
class Gpu:
    """One visible device as libnvidia-container sees it."""

    arch: str  # compute capability, "9.0"
    brand: str  # the brand string libnvidia-container reports ("geforce", "unknown" for NVIDIA)


@dataclass(frozen=True)
class HostFacts:
    driver: Version
    cuda: Version  # the CUDA version the driver supports
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)

    @classmethod
    def for_driver(cls, driver: Version, gpus: tuple[Gpu, ...] = ()) -> HostFacts:
        cuda = cuda_rules.driver_cuda_version(driver)
        return cls(driver, cuda if cuda is not None else Version("0"), gpus)


@dataclass(frozen=True)
class Verdict:
    satisfied: bool
    matched: tuple[Term | None, ...]  # per GPU (or one entry without GPUs): the term that held
    failed_gpu: Gpu | None = None

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


def _cmp_dotted(a: str, b: str) -> int:
    pa = [int(x) for x in re.findall(r"\d+", a)]
    pb = [int(x) for x in re.findall(r"\d+", b)]
    n = max(len(pa), len(pb))
    pa += [0] * (n - len(pa))
    pb += [0] * (n - len(pb))
    return (pa > pb) - (pa < pb)


def _holds(cond: Condition, host: HostFacts, gpu: Gpu | None) -> bool:
    if cond.key in ("arch", "brand") and gpu is None:
        return True
    if cond.key == "brand":
        assert gpu is not None
        equal = gpu.brand.lower() == cond.value.lower()
        if cond.op == "=":
            return equal
        if cond.op == "!=":
            return not equal
        return False  # ordering a brand means nothing; libnvidia-container rejects it
    have = {
        "cuda": str(host.cuda),
        "driver": str(host.driver),
        "arch": gpu.arch if gpu is not None else "",
    }[cond.key]
    c = _cmp_dotted(have, cond.value)
    return {
        "=": c == 0,
        "!=": c != 0,
        "<": c < 0,
        "<=": c <= 0,
        ">": c > 0,
        ">=": c >= 0,
    }[cond.op]


def evaluate(req: Requirement, host: HostFacts) -> Verdict:
    devices: tuple[Gpu | None, ...] = host.gpus if host.gpus else (None,)
    matched: list[Term | None] = []
    for gpu in devices:
        hit = next((t for t in req.terms if all(_holds(c, host, gpu) for c in t.conditions)), None)
        if hit is None:
            return Verdict(False, tuple(matched), gpu)
        matched.append(hit)
    return Verdict(True, tuple(matched))
