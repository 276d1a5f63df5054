"""Which torchao arrived: a CUDA cell's wheelhouse holding a torchao built for another CUDA is
refused before any build, naming the library its extension NEEDs (PyPI's plain torchao 0.17.0
NEEDs libcudart.so.13: tests/elf_synth.py has the measurement)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from builder.build.closure import Wheel
from builder.build.torchao_build import refuse_foreign_torchao
from builder.errors import TrainimgError as WheelhouseError
from builder.workspace import open_workspace
from tests.conftest import REPO
from tests.elf_synth import elf_needing

CU128 = "rocky9-cu128-py3.12-torch2.11.0-runtime"
CU130 = "rocky9-cu130-py3.12-torch2.13.0-runtime"


def _torchao(tmp_path: Path, version: str, cudart: int) -> Wheel:
    name = f"torchao-{version}-cp310-abi3-manylinux_2_28_x86_64.whl"
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("torchao/__init__.py", "")
        z.writestr("torchao/_C_cutlass_90a.abi3.so",
                   elf_needing("libc10.so", f"libcudart.so.{cudart}", "libc.so.6"))  # fmt: skip
    return Wheel(path, canonicalize_name("torchao"), Version(version), frozenset())


@pytest.fixture(scope="module")
def cells() -> dict[str, object]:
    ws = open_workspace(str(REPO / "matrix.yaml"), None, strict=False)
    return {c.name: c for c in ws.cells}


def test_pypi_torchao_in_a_cu128_wheelhouse_is_refused_naming_the_library(
    tmp_path: Path, cells: dict[str, object]
) -> None:
    with pytest.raises(WheelhouseError) as err:
        refuse_foreign_torchao(cells[CU128], [_torchao(tmp_path, "0.17.0", 13)])  # type: ignore[arg-type]
    msg = str(err.value)
    assert "torchao/_C_cutlass_90a.abi3.so NEEDs libcudart.so.13" in msg
    assert "CUDA 12.8.1 (libcudart.so.12)" in msg
    assert "torchao==0.17.0+cu128 from https://download.pytorch.org/whl/cu128" in msg


def test_the_cells_own_build_passes(tmp_path: Path, cells: dict[str, object]) -> None:
    refuse_foreign_torchao(cells[CU128], [_torchao(tmp_path, "0.17.0+cu128", 12)])  # type: ignore[arg-type]
    refuse_foreign_torchao(cells[CU130], [_torchao(tmp_path, "0.18.0", 13)])  # type: ignore[arg-type]


def test_another_builds_local_tag_is_refused(tmp_path: Path, cells: dict[str, object]) -> None:
    with pytest.raises(WheelhouseError, match=r"is the cu130 build, not cu128"):
        refuse_foreign_torchao(cells[CU128], [_torchao(tmp_path, "0.17.0+cu130", 13)])  # type: ignore[arg-type]
