"""Which installed distribution needs which (pure): each distribution's Requires-Dist whose
marker holds in the image's own Python (its marker environment, read by the inventory probe),
resolved to the distributions installed beside it. Extras are not followed (an edge for
`torch[opt-einsum]` would need to know who asked for the extra), and a requirement no installed
distribution satisfies by name gives no edge: the SBOM lists what the image holds. An inventory
recorded before the probe kept Requires-Dist has no edges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from packaging.markers import InvalidMarker, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name


def _needed(spec: str, env: Mapping[str, str]) -> str | None:
    """The canonical name `spec` (one Requires-Dist line) needs in `env`; None when its marker
    does not hold there (an extra's requirement included) or the line is not PEP 508."""
    try:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            return None
    except (InvalidRequirement, InvalidMarker, UndefinedEnvironmentName):
        return None
    return canonicalize_name(req.name)


def dependency_edges(inventory: Mapping[str, Any]) -> dict[str, list[str]]:
    """{distribution: the installed distributions it requires}, canonical names, sorted."""
    env = inventory.get("markers")
    dists: Iterable[Mapping[str, Any]] = inventory.get("python") or ()
    installed = {canonicalize_name(d["name"]) for d in dists}
    if not isinstance(env, Mapping):
        return {}
    edges: dict[str, list[str]] = {}
    for dist in dists:
        name = canonicalize_name(dist["name"])
        needs = {_needed(spec, env) for spec in dist.get("requires") or ()}
        found = sorted(n for n in needs if n is not None and n in installed and n != name)
        if found:
            edges[name] = found
    return edges
