"""Checks are registered once, with `@check(id, domain)`; id lists, --help lists and the docs
tables are read from here (or tested against it), never written again by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

DOMAINS = ("matrix", "host", "image", "verify")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Registered:
    id: str
    domain: str
    fn: Callable[..., Any]
    summary: str  # one line: what it judges (the function's docstring's first line if not given)
    reads: tuple[str, ...]  # domain-specific inputs it depends on (e.g. preflight gather steps)


_REGISTRY: dict[str, dict[str, Registered]] = {d: {} for d in DOMAINS}


def check(
    id: str, domain: str, *, summary: str = "", reads: tuple[str, ...] = ()
) -> Callable[[F], F]:
    """Register `fn` as check `id` of `domain`, in definition order; an id twice is a bug."""
    if domain not in _REGISTRY:
        raise ValueError(f"unknown check domain {domain!r} (known: {', '.join(DOMAINS)})")

    def register(fn: F) -> F:
        if id in _REGISTRY[domain]:
            raise ValueError(f"check id {id!r} registered twice in domain {domain!r}")
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[domain][id] = Registered(
            id, domain, fn, summary or (doc[0] if doc else ""), reads
        )
        return fn

    return register


def registered(domain: str) -> tuple[Registered, ...]:
    """The checks of `domain`, in registration order (import the domain's package first)."""
    return tuple(_REGISTRY[domain].values())


def ids(domain: str) -> tuple[str, ...]:
    return tuple(r.id for r in registered(domain))
