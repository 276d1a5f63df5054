"""Identical inputs give an identical image without the layer cache: a `--no-cache` build of the
CPU cell gives the image id the session's build of it gave (on a fresh machine that one was cold
too), because the build's date comes from its inputs (builder/build/source_date.py): libpod's
`timestamp` for creation times and file mtimes, SOURCE_DATE_EPOCH for pip's byte-code.

Named to run before test_registry_build.py: once the session's podman service has pulled the
base by digest, buildah writes that name into every build's history (docs/build.md)."""

from __future__ import annotations

from pathlib import Path

from builder.build.builder import Builder
from builder.build.plan import BuildOptions, plan_cells
from builder.build.source_date import BUILD_ARG, source_date_epoch
from builder.engines.podman import PodmanEngine
from builder.spec.labels import BASE_LISTS_DATE_LABEL
from builder.workspace import open_workspace
from tests.conftest import CACHE
from tests.helpers import CPU_CELL, REPO, RunCli


def test_a_no_cache_build_gives_the_same_image_id(
    podman_service: str,
    cpu_image: str,
    wheelhouse: Path,
    trainer_dir: Path,
    tmp_path: Path,
    run_cli: RunCli,
) -> None:
    repo = "localhost/trainimg-rebuilt"
    engine = PodmanEngine(podman_service)
    try:
        first = engine.inspect_image(cpu_image)
        ws = open_workspace(REPO / "matrix.yaml")
        opts = BuildOptions(
            repository=repo,
            wheelhouse=wheelhouse,
            trainer_dir=trainer_dir,
            lock_path=tmp_path / "lock.json",
            work_dir=CACHE / "build",
            nocache=True,
            force=True,
        )
        (plan,) = plan_cells(ws, [ws.cell(CPU_CELL)], engine, opts)
        base = engine.inspect_image(plan.base_ref)
    finally:
        engine.close()
    # the date is the base's (its apt lists), not the clock
    assert plan.source_date_epoch == source_date_epoch(base.labels, base.created) > 0
    assert BASE_LISTS_DATE_LABEL in base.labels
    assert plan.request_buildargs[BUILD_ARG] == str(plan.source_date_epoch)
    builder = Builder(
        lambda: PodmanEngine(podman_service), opts, tmp_path / "lock.json", CACHE / "build"
    )
    differ = ""
    try:
        (out,) = builder.run([plan])
        if out.status == "built" and out.image_id != first.id:  # say where, while both exist
            differ = run_cli("diff", first.id, out.image_id, "--url", podman_service).out
    finally:  # untag only: the image is the session's cpu_image (`podman rmi -f` would remove it)
        engine = PodmanEngine(podman_service)
        try:
            for ref in (plan.cell_tag, plan.hash_tag):
                engine.remove_image(ref)
        finally:
            engine.close()
    assert out.status == "built", out.error + "\n".join(out.log_tail)
    assert out.cached_steps == 0, "a --no-cache build took a step from the layer cache"
    assert out.image_id == first.id, (
        f"a cold rebuild of {CPU_CELL} gave {out.image_id}, the first build {first.id}; "
        f"`trainimg diff` says:\n{differ}"
    )
