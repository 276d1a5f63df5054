"""Two checkouts, two stores, one image id: the default cell built cold in a second, empty
podman store, from a copy of the checkout whose files are a day newer (a clone made on another
day, at another path), is the image the session's store built. Its base, loaded there from the
same rootfs tarball, is the same image (builder/build/base_archive.py), and Docker Engine loads
it as the same image too. The build's date comes from its inputs (builder/build/source_date.py):
libpod's `timestamp` for creation times and file mtimes, SOURCE_DATE_EPOCH for pip's byte-code.

Named to run before test_registry_build.py: once the session's podman service has pulled the
base by digest, buildah writes that name into every build's history (docs/build.md)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.build.base_image import BaseSpec, make_offline_base
from builder.build.builder import Builder
from builder.build.plan import BuildOptions, plan_cells
from builder.build.source_date import BUILD_ARG, source_date_epoch
from builder.engines.docker import DockerEngine
from builder.engines.local_podman import LocalPodman
from builder.engines.podman import PodmanEngine
from builder.spec.labels import BASE_LISTS_DATE_LABEL
from builder.workspace import open_workspace
from tests.conftest import BASE_TAG, CACHE
from tests.helpers import CPU_CELL, REPO

# what a build of a cell reads from a checkout (the rendered Containerfiles, the trainer)
CHECKOUT = ("matrix.yaml", "Containerfile.base", "images", "trainer")


def _clone(dest: Path) -> Path:
    """A copy of the checkout's build inputs, every file and directory dated a day later."""
    for name in CHECKOUT:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    later = time.time() + 86400
    for path in [dest, *dest.rglob("*")]:
        os.utime(path, (later, later), follow_symlinks=False)
    return dest


@pytest.fixture
def second_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A second, empty podman store and its service; the session's CONTAINERS_* come back
    afterwards (monkeypatch), which testinfra's podman:// backend reads."""
    for key in ("CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF"):
        monkeypatch.delenv(key, raising=False)
    store = LocalPodman(tmp_path / "podman")
    try:
        yield store.start_service()
    finally:
        store.stop_service()
        left = store.release(force=True)
        assert left == [], f"the second store left mounts: {left}"


def test_a_second_store_builds_the_default_cell_cold_to_the_same_image_id(
    podman_service: str, cpu_image: str, wheelhouse: Path, second_store: str, tmp_path: Path
) -> None:
    first = PodmanEngine(podman_service)
    try:
        base_first, image_first = (first.inspect_image(r).id for r in (BASE_TAG, cpu_image))
    finally:
        first.close()
    clone = _clone(tmp_path / "clone")
    ws = open_workspace(clone / "matrix.yaml")
    assert ws.matrix.project.default_cell == CPU_CELL
    lock = tmp_path / "lock.json"
    opts = BuildOptions(
        wheelhouse=wheelhouse,
        trainer_dir=clone / "trainer",
        lock_path=lock,
        work_dir=tmp_path / "build",
    )
    engine = PodmanEngine(second_store)
    try:
        assert not engine.image_exists(BASE_TAG)
        assert make_offline_base(BaseSpec(tag=BASE_TAG), CACHE / "base", engine)
        base = engine.inspect_image(BASE_TAG)
        (plan,) = plan_cells(ws, [ws.cell(CPU_CELL)], engine, opts)
    finally:
        engine.close()
    assert base.id == base_first
    # the date is the base's (its apt lists), not the clock
    assert plan.source_date_epoch == source_date_epoch(base.labels, base.created) > 0
    assert BASE_LISTS_DATE_LABEL in base.labels
    assert plan.request_buildargs[BUILD_ARG] == str(plan.source_date_epoch)
    (out,) = Builder(lambda: PodmanEngine(second_store), opts, lock, tmp_path / "build").run([plan])
    assert out.status == "built", out.error + "\n".join(out.log_tail)
    assert out.cached_steps == 0, "an empty store took a step from a layer cache"
    assert out.image_id == image_first, (
        f"{CPU_CELL} from a second checkout in a second store is {out.image_id}; the session's "
        f"store built {image_first} (`trainimg diff` of the two, saved from each store, says where)"
    )


def test_docker_engine_loads_the_base_as_the_same_image_podman_did(
    offline_base: str, podman_service: str, dockerd_base: str
) -> None:
    podman, docker = PodmanEngine(podman_service), DockerEngine(dockerd_base)
    try:
        assert docker.inspect_image(BASE_TAG).id == podman.inspect_image(offline_base).id
    finally:
        podman.close()
        docker.close()
