"""The house's import contracts ([tool.importlinter] in pyproject.toml) hold on the tree, and
each one fails on the breach it exists for: a copy of builder/ and trainer/ with one import
planted is linted with the real configuration, and exactly that contract breaks."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT = Path(sys.executable).with_name("lint-imports")
CONTRACT_IDS = ("payload", "pure-core", "wings", "layers")

# (module file, the import planted at its top, the contracts it breaks). A sideways import is
# also against the layers (the wings are independent siblings there too); an upward import
# from the build into a wing joins the wings that import the build (sbom -> build -> verify).
BREACHES = [
    ("trainer/fp8_names.py", "import builder.errors", {"payload"}),
    ("builder/spec/render.py", "import subprocess", {"pure-core"}),
    ("builder/judgement/image.py", "import builder.engines.base", {"pure-core", "layers"}),
    ("builder/verify/report.py", "import builder.sbom.cyclonedx", {"wings", "layers"}),
    ("builder/launch/plan.py", "import builder.preflight.fleet", {"wings", "layers"}),
    ("builder/build/lock.py", "import builder.verify.runner", {"wings", "layers"}),
    ("builder/facts/cuda.py", "import builder.matrix.model", {"layers"}),
]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    if not LINT.exists():
        pytest.fail(f"{LINT} is missing: run scripts/setup.sh (import-linter is a dev dependency)")
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def broken(output: str) -> set[str]:
    """The names of the contracts lint-imports reports BROKEN, mapped back to their ids."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    names = {c["name"]: c["id"] for c in config["tool"]["importlinter"]["contracts"]}
    flat = re.sub(r"\s*\n\s*", " ", output)
    return {cid for name, cid in names.items() if f"{name} BROKEN" in flat}


def test_every_contract_has_a_planted_breach() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    ids = tuple(c["id"] for c in config["tool"]["importlinter"]["contracts"])
    assert ids == CONTRACT_IDS
    assert set().union(*(b[2] for b in BREACHES)) == set(CONTRACT_IDS)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("house")
    for package in ("builder", "trainer"):
        shutil.copytree(
            REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    res = lint(tree)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "4 kept, 0 broken" in res.stdout


# Eight lint-imports runs (~5 CPU-s): in the full run, not the quick loop.
@pytest.mark.integration
@pytest.mark.parametrize(("module", "planted", "contract"), BREACHES, ids=[b[0] for b in BREACHES])
def test_a_planted_import_breaks_its_contract(
    tree: Path, module: str, planted: str, contract: set[str]
) -> None:
    path = tree / module
    original = path.read_text(encoding="utf-8")
    head, sep, rest = original.partition("from __future__ import annotations\n")
    assert sep, f"{module}: no `from __future__ import annotations` line to plant after"
    path.write_text(f"{head}{sep}{planted}\n{rest}", encoding="utf-8")
    try:
        res = lint(tree)
    finally:
        path.write_text(original, encoding="utf-8")
    assert res.returncode == 1, res.stdout + res.stderr
    assert broken(res.stdout) == contract, res.stdout
    assert planted.split()[-1] in res.stdout  # the report names the planted import
