"""The engine interface is a few small roles (builder/engines/roles.py): Engine adds nothing of
its own, both SDK engines play every role, and outside builder/engines/ every caller takes a
role, never the whole Engine."""

from __future__ import annotations

import ast
import inspect

from builder.engines import roles
from builder.engines.docker import DockerEngine
from builder.engines.podman import PodmanEngine
from tests.conftest import REPO

ROLES = (
    roles.EngineConnection,
    roles.ImageStore,
    roles.ImageBuilder,
    roles.ImageExport,
    roles.RegistryTransfer,
    roles.ContainerRunner,
    roles.TrainingRunner,
)
SMALL = 9  # members a role declares itself


def own_members(cls: type) -> set[str]:
    names = {n for n in vars(cls) if not n.startswith("_")}
    return names | {n for n in vars(cls).get("__annotations__", {}) if not n.startswith("_")}


def members(cls: type) -> set[str]:
    return set().union(*(own_members(c) for c in cls.__mro__ if c is not object))


def test_each_role_is_small_and_engine_is_only_their_union() -> None:
    sizes = {r.__name__: len(own_members(r)) for r in ROLES}
    assert all(0 < n <= SMALL for n in sizes.values()), sizes
    assert own_members(roles.Engine) == set()
    assert members(roles.Engine) == set().union(*(members(r) for r in ROLES))
    assert "build" in members(roles.ImageBuilder) and "run" not in members(roles.ImageBuilder)


def test_both_sdk_engines_play_every_role() -> None:
    for engine in (PodmanEngine, DockerEngine):
        missing = {m for m in members(roles.Engine) if m != "base_url" and not hasattr(engine, m)}
        assert missing == set(), engine.__name__
        assert "base_url" in inspect.get_annotations(engine.__mro__[1])


def _names_engine(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "builder.engines.roles"
        and any(a.name == "Engine" for a in node.names)
        for node in ast.walk(tree)
    )


def test_callers_outside_the_engines_take_a_role_not_the_whole_engine() -> None:
    takers = sorted(
        p.relative_to(REPO).as_posix()
        for p in (REPO / "builder").rglob("*.py")
        if "engines" not in p.relative_to(REPO).parts
        and _names_engine(ast.parse(p.read_text(encoding="utf-8")))
    )
    assert takers == []
    planted = ast.parse("from builder.engines.roles import Engine, ImageStore\n")
    assert _names_engine(planted)
