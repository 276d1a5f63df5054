"""The FP8 names are a leaf below the config: config, presets and precision read them without
importing the fp8 package, which sits above precision (its converters take a precision.Plan)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

BELOW_FP8 = ("fp8_names.py", "config.py", "presets.py", "precision.py", "errors.py")


def _trainer_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "trainer" or name.startswith("trainer.")}


def test_the_fp8_names_import_nothing_of_the_trainer() -> None:
    assert _trainer_imports(REPO / "trainer" / "fp8_names.py") == set()


def test_the_config_layer_does_not_import_the_fp8_package() -> None:
    upward = {
        name: sorted(
            m for m in _trainer_imports(REPO / "trainer" / name) if m.startswith("trainer.fp8.")
        )
        for name in BELOW_FP8
    }
    assert upward == {name: [] for name in BELOW_FP8}


def test_every_fp8_backend_and_recipe_pair_the_precision_rules_accept_has_a_converter() -> None:
    import dataclasses

    from trainer import precision
    from trainer.config import PrecisionConfig
    from trainer.fp8 import converters
    from trainer.fp8_names import Backend, Recipe

    accepted = []
    for backend in Backend:
        for recipe in Recipe:
            for backward in ("bf16", "fp8_e4m3", "fp8_e5m2"):
                p = dataclasses.replace(
                    PrecisionConfig(),
                    fp8_backend=backend,
                    fp8_recipe=recipe,
                    backward_matmul=backward,
                )
                if not precision.problems(p):
                    converter = converters.for_plan(precision.resolve(p), "none")
                    assert converter is not None
                    assert (converter.backend, converter.recipe) == (backend, recipe)
                    accepted.append((backend, recipe))
    assert set(accepted) == set(converters.CONVERTERS)
