"""Which network each stage builds with: a cell whose os stage installs packages (dnf from its
repositories) gets one for that stage, built first; every stage that installs wheels builds
with none. Against the in-memory engine; tests/el9/test_rehearsal.py proves it on podman."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.errors import TrainimgError
from builder.spec.labels import BUILD_HASH_LABEL, BUILD_LABEL_ARGS
from builder.spec.os_install import OS_STAGE, os_install
from builder.workspace import Workspace, open_workspace
from tests.build.test_builder import REPOSITORY, Run
from tests.conftest import write_standin_trainer
from tests.fake_engine import FakeStore
from tests.helpers import CPU_CELL, REPO, RunCli

EL9_CELL = "rocky9-cu128-py3.12-torch2.11.0-runtime"  # project.default_gpu_cell


@pytest.fixture(scope="module")
def ws() -> Workspace:
    return open_workspace(REPO / "matrix.yaml")


@pytest.fixture
def build(ws: Workspace, tmp_path: Path) -> Run:
    store = FakeStore()
    for cell in ws.cells:
        store.add(cell.os.base_ref)
    return Run(ws, store, tmp_path, write_standin_trainer(tmp_path / "trainer", "1.0.0"))


def test_which_cells_download_in_their_os_stage(ws: Workspace) -> None:
    downloads = {cell.name: os_install(cell).downloads for cell in ws.cells}
    el = {n for n in downloads if ws.cell(n).os.distro.is_el}
    assert len([n for n in el if ws.cell(n).os.family == "el9"]) == 19
    assert len([n for n in el if ws.cell(n).os.family == "el10"]) == 5
    assert all(downloads[n] for n in el)
    assert not any(downloads[n] for n in downloads if n not in el)  # the Debian base has all


def test_el9_cell_as_readme_builds_it_gets_a_network_for_its_os_stage_only(build: Run) -> None:
    """`trainimg build rocky9-... --pull` passes no --network: the os stage builds first on
    the engine's default network, then the image with none (its os stage from the cache)."""
    (plan,) = build.plans([build.ws.cell(EL9_CELL)])
    assert (plan.network, plan.network_stage, plan.stage_network) == ("none", OS_STAGE, None)
    (out,) = build([build.ws.cell(EL9_CELL)])
    assert out.status == "built", out.error
    stage, image = build.store.requests
    assert (stage.target, stage.network, dict(stage.labels)) == (OS_STAGE, None, {})
    assert (image.target, image.network) == (None, "none")
    # the build's own labels come as build arguments to the Containerfile's last LABEL
    assert image.buildargs[BUILD_LABEL_ARGS[BUILD_HASH_LABEL]] == plan.build_hash
    assert stage.context == image.context and stage.buildargs == image.buildargs
    assert build.ui.events[1:3] == [
        f"{OS_STAGE} stage: OS packages, with the engine's default network",
        f"image: every other stage with --network none (the {OS_STAGE} stage from the layer cache)",
    ]


def test_a_named_network_goes_to_the_os_stage(build: Run) -> None:
    (out,) = build([build.ws.cell(EL9_CELL)], network="host")
    assert out.status == "built", out.error
    assert [(r.target, r.network) for r in build.store.requests] == [
        (OS_STAGE, "host"),
        (None, "none"),
    ]


def test_network_none_is_refused_for_a_cell_that_installs_os_packages(build: Run) -> None:
    with pytest.raises(TrainimgError) as info:
        build.plans([build.ws.cell(EL9_CELL)], network="none")
    text = str(info.value)
    assert f"cell {EL9_CELL} installs OS packages in its os stage" in text
    assert "Leave --network out" in text and "--network host" in text
    assert info.value.exit_code == 2
    assert build.store.builds == 0


def test_no_cache_builds_every_stage_with_the_os_stage_network(build: Run) -> None:
    """A cache-less image build would run dnf again without a network: one build, networked
    (pip still installs --no-index from the wheelhouse)."""
    (out,) = build([build.ws.cell(EL9_CELL)], nocache=True)
    assert out.status == "built", out.error
    (only,) = build.store.requests
    assert (only.target, only.network, only.nocache) == (None, None, True)


def test_no_layers_builds_every_stage_with_the_os_stage_network(build: Run) -> None:
    """--no-layers keeps no stage in the layer cache, so the os stage cannot come from it: one
    build, networked, asking the engine for no per-step layers."""
    (out,) = build([build.ws.cell(EL9_CELL)], layers=False)
    assert out.status == "built", out.error
    (only,) = build.store.requests
    assert (only.target, only.network, only.layers, only.nocache) == (None, None, False, False)
    assert "--no-layers: every stage builds with the engine's default network" in build.ui.events


def test_a_cell_without_os_packages_builds_once_without_a_network(build: Run) -> None:
    (out,) = build([build.ws.cell(CPU_CELL)])
    assert out.status == "built", out.error
    (only,) = build.store.requests
    assert (only.target, only.network) == (None, "none")
    (out,) = build([build.ws.cell(CPU_CELL)], network="host", force=True)
    assert build.store.requests[-1].network == "host"  # what the user chose, for every stage


def test_a_failing_os_stage_fails_the_cell_and_tags_nothing(build: Run) -> None:
    def fail_the_stage(context: Path) -> None:
        if len(build.store.requests) == 1:
            raise TrainimgError("dnf: Curl error (6): Could not resolve host")

    build.store.on_build = fail_the_stage
    (out,) = build([build.ws.cell(EL9_CELL)])
    assert out.status == "failed" and "Could not resolve host" in out.error
    assert build.store.refs(REPOSITORY) == []
    assert [r.target for r in build.store.requests] == [OS_STAGE]


def test_network_none_and_a_bad_mirrors_file_stop_before_the_engine(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """An EL9 cell's os stage installs packages: --network none cannot build it; a mirrors
    file that does not fit the matrix is named with its line. Both before an engine is asked."""
    cell = "rocky9-cu128-py3.12-torch2.11.0-runtime"
    r = run_cli("build", cell, "--network", "none", "--url", "unix:///nonexistent.sock")
    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert f"cell {cell} installs OS packages in its os stage" in r.err
    assert "no engine answers" not in r.err
    mirrors = tmp_path / "site.yaml"
    mirrors.write_text("mirrors:\n  oses:\n    rocky9:\n      repos: {baseos: 'ftp://x/y'}\n")
    r = run_cli("build", cell, "--mirrors", str(mirrors), "--url", "unix:///nonexistent.sock")
    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert f"{mirrors}:4: mirrors.oses.rocky9" in r.err and "no engine answers" not in r.err
