"""Identical inputs give an identical image on dockerd: `--force` rebuilds of an unchanged cell
yield the same image id (labels and build inputs travel in a stable order; every step comes
from the layer cache). On podman the same holds by tests/engines/test_engines_build.py (a forced
rebuild is the session's image) and tests/build/test_cold_rebuild.py (so is a cold one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.build.builder import Builder
from builder.build.plan import BuildOptions, plan_cells
from builder.engines.roles import Engine
from builder.workspace import open_workspace
from tests.conftest import CACHE
from tests.engines.test_engines_build import ENGINES, engine_url
from tests.helpers import CPU_CELL, REPO

pytestmark = [pytest.mark.engine, pytest.mark.slow]
REBUILDS = {"dockerd": 2}


@pytest.mark.parametrize("kind", sorted(REBUILDS))
def test_forced_rebuilds_give_the_same_image_id(
    kind: str,
    request: pytest.FixtureRequest,
    wheelhouse: Path,
    trainer_dir: Path,
    tmp_path: Path,
) -> None:
    url = engine_url(kind, request)

    def connect() -> Engine:
        return ENGINES[kind](url)

    ws = open_workspace(REPO / "matrix.yaml")
    opts = BuildOptions(
        repository=f"localhost/trainimg-test-{kind}",
        wheelhouse=wheelhouse,
        trainer_dir=trainer_dir,
        lock_path=tmp_path / "lock.json",
        work_dir=CACHE / "build",
        force=True,
    )
    ids = []
    for _ in range(1 + REBUILDS[kind]):  # the first may fill the cache
        engine = connect()
        try:
            plans = plan_cells(ws, [ws.cell(CPU_CELL)], engine, opts)
        finally:
            engine.close()
        (out,) = Builder(connect, opts, tmp_path / "lock.json", CACHE / "build").run(plans)
        assert out.status == "built", out.error + "\n".join(out.log_tail)
        ids.append(out.image_id)
    rebuilt = ids[1:]
    assert rebuilt.count(ids[0]) == REBUILDS[kind], ids  # every rebuild: the same id
