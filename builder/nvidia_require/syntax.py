"""NVIDIA_REQUIRE_* text split into terms and conditions exactly as libnvidia-container does.

The semantics are ported from libnvidia-container's `src/cli/dsl.c` (no code is copied):

- Terms are separated by a space (" " only: a tab or newline is part of a condition) and OR-ed;
  conditions inside a term are separated by "," and AND-ed; empty pieces are skipped.
- A condition is KEY OP VALUE: KEY is everything before the first of `<>=!` (matched without
  case against cuda, driver, arch, brand); OP is the whole run of `<>=!` characters, which must
  be a prefix-match of one of `=`, `!=`, `<`, `<=`, `>`, `>=` tried in that order (so a lone `!`
  means `!=`, and `==` is invalid); VALUE is the rest and must not be empty.
- Versions (cuda, driver, arch) are digits and dots only; a component that does not start with
  a digit (`.5`, `.`) or reaches 2^64-1 is invalid. Brands compare with = and != only.
- A malformed condition is kept with its error: libnvidia-container fails the container
  ("invalid expression") only if it evaluates it (builder/nvidia_require/admission.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

KEYS = ("cuda", "driver", "arch", "brand")
# dsl.c's operator table, in its lookup order (a shorter run prefix-matches the first fit).
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")
_OPERATOR_CHARS = "<>=!"
VERSION_CHARS = frozenset("0123456789.")
UINTMAX = 2**64 - 1  # strtoumax's overflow value; dsl.c rejects a component equal to it
ORDERING = ("<", "<=", ">", ">=")


class RequirementSyntaxError(ValueError):
    """The requirement text does not parse; the message quotes the offending condition."""


@dataclass(frozen=True)
class RequireCondition:
    key: str  # lower-cased when it is one of KEYS; as written otherwise
    op: str  # one of OPERATORS ("" when the condition has none)
    value: str
    raw: str = ""  # the text as written ("cuda>=12.8", "cuda!12.8")
    error: str = ""  # why libnvidia-container rejects it when evaluated ("" = well formed)
    name: str = ""  # the key as written ("CUDA")

    def __str__(self) -> str:
        return self.raw or f"{self.key}{self.op}{self.value}"


@dataclass(frozen=True)
class RequireTerm:
    conditions: tuple[RequireCondition, ...]

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.conditions)


@dataclass(frozen=True)
class RequireExpression:
    terms: tuple[RequireTerm, ...]
    text: str = ""

    def __str__(self) -> str:
        return self.text or " ".join(str(t) for t in self.terms)


def _operator(run: str) -> str | None:
    """dsl.c's lookup: the first operator whose first len(run) characters equal the run."""
    for op in OPERATORS:
        if len(op) >= len(run) and op[: len(run)] == run:
            return op
    return None


def _condition(raw: str) -> RequireCondition:
    """Split KEY OP VALUE the way dsl.c's evaluate_rule does; `error` says why it is invalid."""
    cut = next((i for i, ch in enumerate(raw) if ch in _OPERATOR_CHARS), len(raw))
    end = cut
    while end < len(raw) and raw[end] in _OPERATOR_CHARS:
        end += 1
    name, run, value = raw[:cut], raw[cut:end], raw[end:]
    if cut == 0:
        return RequireCondition(name, "", value, raw, "no key before the operator", name)
    if not run:
        return RequireCondition(name, "", value, raw, "no operator (one of = != < <= > >=)", name)
    op = _operator(run)
    if op is None:
        return RequireCondition(name, "", value, raw, f"{run!r} is not an operator", name)
    if not value:
        return RequireCondition(name, op, value, raw, "no value after the operator", name)
    low = name.lower()
    if low not in KEYS:
        return RequireCondition(name, op, value, raw, f"unknown key {name!r}", name)
    return RequireCondition(low, op, value, raw, "", name)


def parse_require(text: str, *, strict: bool = False) -> RequireExpression:
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
def _split(text: str) -> RequireExpression:
    return RequireExpression(
        tuple(
            RequireTerm(tuple(_condition(raw) for raw in piece.split(",") if raw))
            for piece in text.split(" ")
            if piece
        ),
        text,
    )


def _lint(req: RequireExpression, text: str) -> None:
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


def problem(c: RequireCondition) -> str:
    """Why libnvidia-container would call this condition an invalid expression ("" if never)."""
    return c.error or _value_error(c)


def _value_error(c: RequireCondition) -> str:
    if c.error:
        return ""
    if c.key == "brand":
        return "brands compare with = or != only" if c.op in ORDERING else ""
    if not set(c.value) <= VERSION_CHARS:
        return f"a {c.key} version takes digits and dots only"
    parts = [t for t in c.value.split(".") if t]
    if c.value.startswith(".") or any(int(t) >= UINTMAX for t in parts):
        return f"{c.value!r} is not a dotted version (it starts with a dot or a part overflows)"
    return ""
