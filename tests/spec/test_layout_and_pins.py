"""What a cell's image is: the image layout defined once, the pip pins made once as data."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
from packaging.version import Version

from builder.build.wheelhouse import WheelhouseError, requirements
from builder.matrix.model import Cell, Pin
from builder.spec import layout
from builder.spec.labels import env
from builder.spec.pip_pins import PipPin, pip_pins
from builder.spec.render import render_all
from tests.matrices import load

REPO = Path(__file__).resolve().parents[2]
MATRIX, EXPANSION = load()
TEXTS = {p.parent.name: t for p, t in render_all(REPO, EXPANSION.cells, MATRIX.project).items()}
# The layout's paths, as a literal would begin with one.
LAYOUT_LITERAL = re.compile(
    r"^(/opt/venv|/opt/trainimg|/home/trainer|/usr/local/cuda|/usr/local/nvidia|/workspace"
    r"|/ckpt|/data)(/|-|$)"
)


def cells() -> list[Cell]:
    return list(EXPANSION.cells)


def test_the_cuda_toolkit_directory_follows_the_release() -> None:
    assert layout.cuda_home(Version("12.8.1")) == "/usr/local/cuda-12.8"
    assert layout.cuda_home(Version("13.0")) == "/usr/local/cuda-13.0"
    roots = layout.library_roots()
    assert roots[:2] == (layout.VENV, layout.CUDA_LINK)
    assert "/usr/local/cuda-12.8" in roots and len(set(roots)) == len(roots)


@pytest.mark.parametrize("cell", [c for c in cells() if c.cuda and c.flavour == "devel"][:1])
def test_a_devel_image_points_at_its_own_toolkit(cell: Cell) -> None:
    assert cell.cuda is not None
    home = layout.cuda_home(cell.cuda.version)
    assert env(cell)["CUDA_HOME"] == home
    assert f'ENV CUDA_HOME="{home}"' in TEXTS[cell.name]


@pytest.mark.parametrize("cell", cells(), ids=lambda c: c.name)
def test_the_rendered_image_has_the_layout(cell: Cell) -> None:
    lines = TEXTS[cell.name].splitlines()
    assert f"USER {layout.USER_ID}:{layout.USER_ID}" in lines
    assert f"WORKDIR {layout.WORKDIR}" in lines
    assert 'ENTRYPOINT ["/opt/venv/bin/python", "-m", "trainer"]' in lines
    assert f'ENV PYTHONPATH="{layout.TRAINER_HOME}"' in lines


def test_no_builder_module_but_the_layout_spells_an_in_image_path() -> None:
    """Every in-image path is layout.py's: a module that writes one as a literal has made a
    second home for it (docstrings and messages that only mention one are not literals that
    start with it)."""
    found = []
    for path in sorted((REPO / "builder").rglob("*.py")):
        if path == REPO / "builder" / "spec" / "layout.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if LAYOUT_LITERAL.match(node.value):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert found == []


@pytest.mark.parametrize("cell", cells(), ids=lambda c: c.name)
def test_the_containerfile_prints_the_pins_in_their_order(cell: Cell) -> None:
    text = TEXTS[cell.name]
    block = text.split("# The cell's pins, whose closure the requirements files hold:\n")[1]
    printed = [line[4:] for line in block.splitlines() if line.startswith("#   ")]
    assert printed == [str(p) for p in pip_pins(cell)]


@pytest.mark.parametrize("cell", cells(), ids=lambda c: c.name)
def test_the_pins_are_torch_torchao_then_the_packages_sorted(cell: Cell) -> None:
    pins = pip_pins(cell)
    assert pins[0].name == "torch"
    rest = pins[1:]
    if cell.fp8 == "torchao":
        assert rest[0].name == "torchao"
        rest = rest[1:]
    assert [str(p) for p in rest] == sorted(f"{p.name}=={p.version}" for p in cell.python_packages)


@pytest.mark.parametrize("cell", cells(), ids=lambda c: c.name)
def test_the_wheelhouse_resolves_the_same_pins(cell: Cell) -> None:
    reqs = requirements(cell)
    pins = pip_pins(cell)
    assert [(str(r.name), str(r.version)) for r in reqs] == [
        (p.name.lower().replace("_", "-"), str(Version(p.version))) for p in pins
    ]


def test_a_pin_without_a_pep440_version_is_named() -> None:
    cell = dataclasses.replace(cells()[0], python_packages=(Pin("numpy", "two"),))
    assert PipPin("numpy", "two") in pip_pins(cell)
    with pytest.raises(WheelhouseError, match=r"numpy==two has no PEP 440 version"):
        requirements(cell)
