"""NVIDIA_REQUIRE_CUDA: write it from the rules, and evaluate it the way libnvidia-container does.

The semantics are ported from libnvidia-container's `src/cli/dsl.c` and `src/cli/configure.c`
and nvidia-container-toolkit's `GetRequirements` (internal/config/image/cuda_image.go); no code
is copied. In short:

- Terms are separated by a space (" " only: a tab or newline is part of a condition) and OR-ed;
  conditions inside a term are separated by "," and AND-ed; empty pieces are skipped.
- Evaluation is lazy, left to right: the first false condition ends its term, the first true
  term ends the requirement. A malformed condition fails the container ("invalid expression")
  only if it is evaluated, so a typo behind a satisfied term is harmless.
- A condition is KEY OP VALUE: KEY is everything before the first of `<>=!` (matched without
  case against cuda, driver, arch, brand); OP is the whole run of `<>=!` characters, which must
  be a prefix-match of one of `=`, `!=`, `<`, `<=`, `>`, `>=` tried in that order (so a lone `!`
  means `!=`, and `==` is invalid); VALUE is the rest and must not be empty.
- Versions (cuda, driver, arch) are digits and dots only, compared component by component
  (repeated dots collapse, trailing `.0`s do not count); a component that does not start with a
  digit (`.5`, `.`) or reaches 2^64-1 is invalid. Brands compare with = and != only, no case.
- Per visible GPU every requirement must hold; with no GPU visible it runs once and arch/brand
  conditions hold without looking at their values.

Podman's CDI path does not enforce any of this, hence this module:
https://github.com/NVIDIA/nvidia-container-toolkit/issues/1470
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from packaging.version import Version

from builder.facts import cuda as cuda_rules
from builder.facts import drivers as driver_rules

KEYS = ("cuda", "driver", "arch", "brand")
# dsl.c's operator table, in its lookup order (a shorter run prefix-matches the first fit).
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
_OPERATOR_CHARS = "<>=!"
_VERSION_CHARS = frozenset("0123456789.")
_UINTMAX = 2**64 - 1  # strtoumax's overflow value; dsl.c rejects a component equal to it
_ORDERING = ("<", "<=", ">", ">=")


class RequirementSyntaxError(ValueError):
    """The requirement text does not parse; the message quotes the offending condition."""


@dataclass(frozen=True)
class Condition:
    key: str  # lower-cased when it is one of KEYS; as written otherwise
    op: str  # one of OPERATORS ("" when the condition has none)
    value: str
    raw: str = ""  # the text as written ("cuda>=12.8", "cuda!12.8")
    error: str = ""  # why libnvidia-container rejects it when evaluated ("" = well formed)
    name: str = ""  # the key as written ("CUDA")

    def __str__(self) -> str:
        return self.raw or f"{self.key}{self.op}{self.value}"


@dataclass(frozen=True)
class Term:
    conditions: tuple[Condition, ...]

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.conditions)


@dataclass(frozen=True)
class Requirement:
    terms: tuple[Term, ...]
    text: str = ""

    def __str__(self) -> str:
        return self.text or " ".join(str(t) for t in self.terms)


def _operator(run: str) -> str | None:
    """dsl.c's lookup: the first operator whose first len(run) characters equal the run."""
    for op in OPERATORS:
        if len(op) >= len(run) and op[: len(run)] == run:
            return op
    return None


def compare_version(have: str, op: str, want: str) -> bool | None:
    """Dotted-numeric comparison with dsl_compare_version's semantics; None: invalid expression.

    Both sides must be digits and dots. Components are compared pairwise while both sides have
    one (a side that starts with a dot, or a component of 2^64-1 or more, is invalid: only the
    components actually compared are checked); then the longer side counts as larger only if
    what remains of it holds a digit other than 0."""
    if not set(have) <= _VERSION_CHARS or not set(want) <= _VERSION_CHARS:
        return None
    if have and want and (have[0] == "." or want[0] == "."):
        return None
    a = [t for t in have.split(".") if t]
    b = [t for t in want.split(".") if t]
    for x, y in zip(a, b, strict=False):
        nx, ny = int(x), int(y)
        if nx >= _UINTMAX or ny >= _UINTMAX:
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


def _condition(raw: str) -> Condition:
    """Split KEY OP VALUE the way dsl.c's evaluate_rule does; `error` says why it is invalid."""
    cut = next((i for i, ch in enumerate(raw) if ch in _OPERATOR_CHARS), len(raw))
    end = cut
    while end < len(raw) and raw[end] in _OPERATOR_CHARS:
        end += 1
    name, run, value = raw[:cut], raw[cut:end], raw[end:]
    if cut == 0:
        return Condition(name, "", value, raw, "no key before the operator", name)
    if not run:
        return Condition(name, "", value, raw, "no operator (one of = != < <= > >=)", name)
    op = _operator(run)
    if op is None:
        return Condition(name, "", value, raw, f"{run!r} is not an operator", name)
    if not value:
        return Condition(name, op, value, raw, "no value after the operator", name)
    low = name.lower()
    if low not in KEYS:
        return Condition(name, op, value, raw, f"unknown key {name!r}", name)
    return Condition(low, op, value, raw, "", name)


def parse(text: str, *, strict: bool = False) -> Requirement:
    """The terms and conditions of a requirement, exactly as dsl.c splits them. Malformed
    conditions are kept (with their error) and matter only if evaluated; `strict` raises
    RequirementSyntaxError on the first one, and on an empty requirement, instead (a lint for
    requirements we write or verify ourselves). The split is cached: a fleet judges the same
    few requirements many times."""
    req = _split(text)
    if strict:
        _lint(req, text)
    return req


@functools.lru_cache(maxsize=1024)
def _split(text: str) -> Requirement:
    return Requirement(
        tuple(
            Term(tuple(_condition(raw) for raw in piece.split(",") if raw))
            for piece in text.split(" ")
            if piece
        ),
        text,
    )


def _lint(req: Requirement, text: str) -> None:
    if not any(t.conditions for t in req.terms):
        raise RequirementSyntaxError(f"empty requirement: {text!r}")
    for t in req.terms:
        for c in t.conditions:
            why = problem(c)
            if why:
                raise RequirementSyntaxError(
                    f"condition {c.raw!r} in {text!r}: {why} (libnvidia-container fails "
                    "the container with 'invalid expression' when it evaluates it)"
                )


def problem(c: Condition) -> str:
    """Why libnvidia-container would call this condition an invalid expression ("" if never)."""
    return c.error or _value_error(c)


def _value_error(c: Condition) -> str:
    if c.error:
        return ""
    if c.key == "brand":
        return "brands compare with = or != only" if c.op in _ORDERING else ""
    if not set(c.value) <= _VERSION_CHARS:
        return f"a {c.key} version takes digits and dots only"
    parts = [t for t in c.value.split(".") if t]
    if c.value.startswith(".") or any(int(t) >= _UINTMAX for t in parts):
        return f"{c.value!r} is not a dotted version (it starts with a dot or a part overflows)"
    return ""


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
    cuda: Version | None  # the CUDA version the driver supports; None: not known to the rules
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)

    @classmethod
    def for_driver(
        cls, driver: Version, gpus: tuple[Gpu, ...] = (), cuda: Version | None = None
    ) -> HostFacts:
        """Facts for a driver: `cuda` as the host reports it (nvidia-smi), else the branch's."""
        return cls(driver, cuda or driver_rules.driver_cuda_version(driver), gpus)


@dataclass(frozen=True)
class Verdict:
    satisfied: bool
    matched: tuple[Term | None, ...]  # per GPU (or one entry without GPUs): the term that held
    failed_gpu: Gpu | None = None
    invalid: Condition | None = None  # evaluated and malformed: "invalid expression"
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


# dsl.c formats a false condition as "KEY OP VALUE" into a 128-byte buffer; text that does not
# fit turns the false into "invalid expression".
_EXPR_MAX = 128


def _holds(cond: Condition, host: HostFacts, gpu: Gpu | None) -> bool | None:
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
        if host.cuda is None:
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
    req: Requirement, host: HostFacts, gpu: Gpu | None
) -> tuple[bool | None, Term | None, Condition | None, bool]:
    """(held, the term that held, the invalid condition, a cuda condition was undecidable)."""
    held: bool = True  # dsl.c's `ret`: the last condition's answer, carried across terms
    undecided = False
    for term in req.terms:
        completed = True
        for cond in term.conditions:
            answer = _holds(cond, host, gpu)
            if answer is None:
                return None, None, cond, undecided
            undecided |= cond.key == "cuda" and host.cuda is None
            held = answer
            if not answer:
                completed = False
                break
        if completed:  # every condition held (or the term had none): stop here
            return held, term if held else None, None, undecided
    return held, None, None, undecided


def evaluate(req: Requirement, host: HostFacts) -> Verdict:
    """One requirement on the host: per visible GPU, else once without a device."""
    devices: tuple[Gpu | None, ...] = host.gpus if host.gpus else (None,)
    matched: list[Term | None] = []
    undecided = False
    for gpu in devices:
        held, term, bad, unknown = _evaluate_once(req, host, gpu)
        undecided |= unknown
        if held is None:
            return Verdict(False, tuple(matched), gpu, bad, undecided)
        if not held:
            return Verdict(False, tuple(matched), gpu, None, undecided)
        matched.append(term)
    return Verdict(True, tuple(matched), None, None, undecided)


def libnvc_message(text: str, verdict: Verdict) -> str:
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


# --- which requirements an image carries (nvidia-container-toolkit's GetRequirements) --------
REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
REQUIRE_EXCLUDED_PREFIX = "NVIDIA_REQUIRE_JETPACK"  # also NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # strconv.ParseBool's true set
_SEMVER_NUM = r"(?:0|[1-9][0-9]*)"
_SEMVER_IDENT = r"[0-9A-Za-z-]+"
_SEMVER = re.compile(
    rf"v(?P<major>{_SEMVER_NUM})(?:\.(?P<minor>{_SEMVER_NUM})"
    rf"(?:\.{_SEMVER_NUM}(?:-(?:{_SEMVER_IDENT})(?:\.{_SEMVER_IDENT})*)?"
    rf"(?:\+{_SEMVER_IDENT}(?:\.{_SEMVER_IDENT})*)?)?)?"
)
_U32 = 2**32


@dataclass(frozen=True)
class Collected:
    requirements: tuple[tuple[str, str], ...]  # (origin: the variable or "CUDA_VERSION", text)
    disabled: bool = False  # NVIDIA_DISABLE_REQUIRE parsed true: nothing is checked
    error: str = ""  # GetRequirements fails (the legacy hook refuses the container)

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.requirements)


def disable_require(env: Mapping[str, str]) -> bool:
    """NVIDIA_DISABLE_REQUIRE through Go's strconv.ParseBool (anything unparsable is false)."""
    return env.get("NVIDIA_DISABLE_REQUIRE", "") in _GO_TRUE


def legacy_cuda(version: str) -> str | None:
    """MAJOR.MINOR of a CUDA_VERSION as the toolkit reads it (golang.org/x/mod/semver with a
    "v" prefix: "12" -> 12.0, "12.8.1-rc1" -> 12.8; no leading zeros, no 4th part); None when
    it is not valid semver or a part exceeds 32 bits."""
    m = _SEMVER.fullmatch("v" + version.removeprefix("v"))
    if m is None:
        return None
    major, minor = int(m["major"]), int(m["minor"] or 0)
    if major >= _U32 or minor >= _U32:
        return None
    return f"{major}.{minor}"


def collect(env: Mapping[str, str]) -> Collected:
    """The requirements nvidia-container-toolkit's GetRequirements passes to the CLI: every
    NVIDIA_REQUIRE_* but NVIDIA_REQUIRE_JETPACK*, even empty ones; plus `cuda>=MAJOR.MINOR`
    for a legacy image (CUDA_VERSION set, NVIDIA_REQUIRE_CUDA empty or unset), beside any other
    NVIDIA_REQUIRE_*; nothing when NVIDIA_DISABLE_REQUIRE is true."""
    if disable_require(env):
        return Collected((), True)
    reqs = [
        (k, v)
        for k, v in sorted(env.items())
        if k.startswith(REQUIRE_PREFIX) and not k.startswith(REQUIRE_EXCLUDED_PREFIX)
    ]
    cuda = env.get("CUDA_VERSION", "")
    if cuda and not env.get("NVIDIA_REQUIRE_CUDA"):
        mm = legacy_cuda(cuda)
        if mm is None:
            return Collected(
                tuple(reqs),
                False,
                f"CUDA_VERSION={cuda!r} is not a version the toolkit accepts (semver "
                "MAJOR[.MINOR[.PATCH]]): the legacy hook fails the container",
            )
        reqs.append(("CUDA_VERSION", f"cuda>={mm}"))
    return Collected(tuple(reqs))
