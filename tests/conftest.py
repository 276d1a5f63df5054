"""Shared fixtures: an isolated podman (its own config, storage and API socket) and the offline
base image, made by the test session itself on a fresh machine and cached in .cache/ after."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.build.base_image import BaseSpec, make_offline_base
from builder.engines.local_podman import LocalPodman
from tests.quick_mode import load_hypothesis_profile

# Strict CI (tests/strict_ci.py): under CI=true only a skip for missing hardware is accepted;
# every run that skipped something ends with the table of skips and their reasons.
from tests.strict_ci import (  # noqa: F401 - hooks, taken in by name
    pytest_configure,
    pytest_make_collect_report,
    pytest_runtest_makereport,
    pytest_terminal_summary,
)

load_hypothesis_profile()  # fewer generated examples in scripts/test.sh --quick only

# The fixtures several test folders share, each defined once (a session fixture starts once):
# tests/engine_fixtures.py (the CLI in-process, throw-away projects, image repositories, fake
# engine APIs, dockerd, registries) and tests/cuda_fixtures.py (real CUDA parts for verify and
# arches); pytester: tests/test_strict_ci.py runs the hooks on small test files.
pytest_plugins = ["pytester", "tests.engine_fixtures", "tests.cuda_fixtures"]

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("TRAINIMG_TEST_CACHE", REPO / ".cache" / "test"))
# A developer's own settings (builder/config.py) never reach a test, nor the trainimg processes
# tests start: a config home with no config file in it, and no $TRAINIMG_REGISTRY.
os.environ["XDG_CONFIG_HOME"] = str(CACHE / "empty-config-home")
os.environ.pop("TRAINIMG_REGISTRY", None)
BASE_TAG = "localhost/trainimg-base:bookworm"


# --- the two speeds: what a test uses decides its marks (docs/testing.md) --------------------
# `scripts/test.sh --quick` leaves out engine, integration and slow tests; the full run (CI)
# runs them all. A test is marked by the fixtures it uses (their whole closure), so a new test
# on the podman store is never mistaken for a unit test.

# A real engine or registry process: the isolated podman store and service, dockerd, a
# registry. run_image/verify_cpu_image reach cpu_image through request.getfixturevalue, which
# the closure cannot see.
ENGINE_FIXTURES = frozenset(
    {"local_podman", "dockerd", "registries", "run_image", "verify_cpu_image"}
)
# Real parts fetched or built once per machine: wheels from PyPI (the network on a fresh
# machine), the cu128 torch wheel's libraries, NVIDIA's tools, a C compiler run; torchao
# itself (its first import: ~4 CPU-seconds over torch's; tests/trainer/conftest.py).
INTEGRATION_FIXTURES = frozenset(
    {"wheelhouse", "cu128_wheelhouse", "torch_cu128", "libcurand", "cuobjdump", "nvcc", "torchao"}
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the marks added here count
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & ENGINE_FIXTURES:
            item.add_marker(pytest.mark.engine)
        if used & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)
    # The cu128 image's tests go first: its build needs CU128_FREE_DISK while nothing else the
    # session builds is on the disk yet (the rest keep their order; the sort is stable).
    items.sort(key=lambda item: "cu128_image" not in getattr(item, "fixturenames", ()))


def _need_podman() -> None:
    missing = [t for t in ("podman", "runc") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: run scripts/setup.sh")


@pytest.fixture(scope="session")
def local_podman() -> Iterator[LocalPodman]:
    """The isolated podman store; CONTAINERS_CONF/CONTAINERS_STORAGE_CONF are exported for the
    podman CLI that testinfra's podman:// backend runs. At the end of the session its containers
    and tools are stopped and its mounts undone, so the checkout can be removed."""
    _need_podman()
    local = LocalPodman(CACHE / "podman")
    local.configure()
    try:
        yield local
    finally:
        local.release(force=True)


# The service keeps each build's context twice while it builds (the upload, then unpacked) and
# writes each layer's blob there before storing it: on a tmpfs with room, the cu128 build's
# 2 x 4 GB and its 7 GB final layer stay off the disk (measured peak on the tmpfs: 15.3 GB).
SERVICE_TMPFS = Path("/dev/shm")
SERVICE_TMPFS_FREE = 17 * 10**9
SERVICE_TMP = SERVICE_TMPFS / f"trainimg-test-{os.getpid()}"  # this session's


def service_tmp_dir() -> Path | None:
    """SERVICE_TMP when the tmpfs has SERVICE_TMPFS_FREE; None: the service's default
    (/var/tmp, on the disk)."""
    try:
        free = shutil.disk_usage(SERVICE_TMPFS).free
    except OSError:
        return None
    return SERVICE_TMP if free >= SERVICE_TMPFS_FREE else None


@pytest.fixture(scope="session")
def podman_service(local_podman: LocalPodman) -> Iterator[str]:
    """The libpod + Docker-compatible API on a private unix socket; its unix:// URL."""
    tmp_dir = service_tmp_dir()
    url = local_podman.start_service(tmp_dir=tmp_dir)
    try:
        yield url
    finally:
        local_podman.stop_service()
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def offline_base(podman_service: str) -> str:
    """localhost/trainimg-base:bookworm, made with debootstrap -> import (podman-py) if missing."""
    from builder.engines.podman import PodmanEngine

    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap not installed: run scripts/setup.sh")
    engine = PodmanEngine(podman_service)
    try:
        make_offline_base(BaseSpec(tag=BASE_TAG), CACHE / "base", engine)
    finally:
        engine.close()
    return BASE_TAG


# --- the build issue's generic fixtures: a filled wheelhouse and the built CPU image ---------

DEFAULT_FIND_LINKS = Path("/opt/wheels")


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """The default cell's wheelhouse (torch from /opt/wheels, the rest `pip download`ed once),
    with its wheelhouse.lock; cached in the test cache. Skipped, saying why, if it cannot be
    filled (no network and no local wheels)."""
    from builder.build.wheelhouse import WheelhouseError, fill
    from builder.workspace import open_workspace

    ws = open_workspace(REPO / "matrix.yaml")
    cell = ws.cell(ws.matrix.project.default_cell)
    dest = CACHE / "wheelhouse"
    links = [DEFAULT_FIND_LINKS] if DEFAULT_FIND_LINKS.is_dir() else []
    try:
        fill(dest, [cell], ws.matrix.project, find_links=links)
    except WheelhouseError as exc:
        pytest.skip(f"cannot fill the wheelhouse for {cell.name}: {exc}")
    return dest


def write_standin_trainer(directory: Path, version: str = "0.0.0+standin") -> Path:
    """A tiny stand-in for the trainer package, for build tests only (never committed as
    trainer/): `python -m trainer --help` prints usage and exits 0."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (directory / "__main__.py").write_text(
        "import argparse\n"
        "parser = argparse.ArgumentParser(prog='trainer', description='stand-in trainer')\n"
        "parser.add_argument('command', nargs='?', choices=['train', 'info'])\n"
        "parser.parse_args()\n"
    )
    return directory


@pytest.fixture(scope="session")
def trainer_dir() -> Path:
    """The trainer package the test images bundle: the repository's own trainer/."""
    real = REPO / "trainer"
    assert (real / "__main__.py").is_file(), f"{real} is not the trainer package"
    return real


def build_cell(
    cell_name: str,
    podman_service: str,
    wheelhouse: Path,
    trainer_dir: Path,
    lock_path: Path,
    *,
    layers: bool = True,
) -> str:
    """Build one cell with trainimg's builder through the podman engine (podman-py) from the
    wheelhouse, air-gapped; its `<project.repository>:<cell>` ref. Unchanged inputs make later
    sessions reuse the image (build-hash tag)."""
    from builder.build.builder import Builder
    from builder.build.plan import BuildOptions, plan_cells
    from builder.engines.podman import PodmanEngine
    from builder.workspace import open_workspace

    ws = open_workspace(REPO / "matrix.yaml")
    cell = ws.cell(cell_name)
    opts = BuildOptions(
        wheelhouse=wheelhouse,
        trainer_dir=trainer_dir,
        lock_path=lock_path,
        work_dir=CACHE / "build",
        layers=layers,
    )
    engine = PodmanEngine(podman_service)
    try:
        plans = plan_cells(ws, [cell], engine, opts)
    finally:
        engine.close()
    builder = Builder(lambda: PodmanEngine(podman_service), opts, lock_path, CACHE / "build")
    outcome = builder.run(plans)[0]
    if outcome.status not in ("built", "skipped"):
        pytest.fail(f"building {cell.name} failed: {outcome.error}\n" + "\n".join(outcome.log_tail))
    return plans[0].cell_tag


@pytest.fixture(scope="session")
def cpu_image(
    podman_service: str,
    offline_base: str,
    wheelhouse: Path,
    trainer_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """The default CPU cell, built once per session (build_cell); the build record goes to a
    temporary lock, never images/lock.json."""
    from builder.workspace import open_workspace

    cell = open_workspace(REPO / "matrix.yaml").matrix.project.default_cell
    lock_path = tmp_path_factory.mktemp("cpu-image") / "lock.json"
    return build_cell(cell, podman_service, wheelhouse, trainer_dir, lock_path)


# --- the Debian 12 cu128 cell: PyPI's torch 2.9.1 is the cu128 build (~3.9 GB closure) ---

CU128_CELL = "debian12-cu128-py3.11-torch2.9.1-runtime"


@pytest.fixture(scope="session")
def cu128_wheelhouse() -> Path:
    """The cu128 cell's whole closure, hash-locked; local wheels (the CPU wheelhouse,
    /opt/wheels) first, the rest from PyPI."""
    from builder.build.wheelhouse import WheelhouseError, fill
    from builder.workspace import open_workspace

    ws = open_workspace(REPO / "matrix.yaml")
    dest = CACHE / "wheelhouse-cu128"
    links = [d for d in (CACHE / "wheelhouse", DEFAULT_FIND_LINKS) if d.is_dir()]
    try:
        fill(dest, [ws.cell(CU128_CELL)], ws.matrix.project, find_links=links)
    except WheelhouseError as exc:
        pytest.skip(f"cannot fill the wheelhouse for {CU128_CELL}: {exc}")
    return dest


# The cu128 image is built with --no-layers (libpod's layers=false): with per-step layers podman
# keeps every step's container beside its committed layer until the build ends, so the wheels'
# COPY (4 GB), the venv stage's install (7.5 GB) and the final stage's copy of it (7.5 GB) are
# each on the disk twice: measured +34-36 GB (and a CI run on a ~40 GB disk ran out of space at
# the final stage's torch COPY). Without layers the venv stage is one container that is never
# committed: measured +25.8 GB on a 36 GB loop-mounted store (4.5 -> 30.0 GB used, wheelhouse
# and base already there), the build contexts and the final layer's blob (up to 15.3 GB) on the
# tmpfs. Off the tmpfs those come to the disk too (CU128_CONTEXT_COPIES).
CU128_FREE_DISK = 30 * 10**9
CU128_CONTEXT_COPIES = 15 * 10**9


@pytest.fixture(scope="session")
def cu128_image(
    local_podman: LocalPodman,
    podman_service: str,
    offline_base: str,
    cu128_wheelhouse: Path,
    trainer_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    free = shutil.disk_usage(CACHE).free
    on_tmpfs = SERVICE_TMP.is_dir()  # the podman_service fixture made it
    need = CU128_FREE_DISK + (0 if on_tmpfs else CU128_CONTEXT_COPIES)
    if free < need:
        where = "on the tmpfs" if on_tmpfs else f"on the disk ({SERVICE_TMPFS} has no room)"
        pytest.skip(
            f"building {CU128_CELL} needs ~{need // 10**9} GB free disk (every step's container "
            f"and layer: 2 x (4 + 7.5) GB for the venv stage, 2 x 7.5 GB for the image; the "
            f"context's copies {where}); {CACHE} has {free / 1e9:.1f} GB"
        )
    lock_path = tmp_path_factory.mktemp("cu128-image") / "lock.json"
    image = build_cell(
        CU128_CELL, podman_service, cu128_wheelhouse, trainer_dir, lock_path, layers=False
    )
    # Anything untagged it left is cache only; the rest of the session needs the disk more.
    # Tagged images and images in use stay.
    local_podman.podman("image", "prune", "--force")
    return image
