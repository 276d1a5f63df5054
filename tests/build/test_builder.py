"""The builder's own logic against an in-memory engine: skip by build hash, tags, the lock,
and what failures and Ctrl-C leave behind (nothing half-done)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from builder.build import lock
from builder.build.builder import Builder, Outcome
from builder.build.plan import BuildOptions, BuildPlan, plan_cells
from builder.engines.base import BuildFailed, EngineError
from builder.engines.proxy import from_environment
from builder.errors import TrainimgError
from builder.matrix.model import Cell
from builder.workspace import Workspace, open_workspace
from tests.build.test_wheelhouse import fake_closures, fake_wheel_bytes, fake_wheels, locked
from tests.conftest import write_standin_trainer
from tests.fake_engine import FakeEngine, FakeStore
from tests.helpers import CPU_CELL, REPO, MakeProject, RecordingUi

REPOSITORY = "localhost/t"


@pytest.fixture(scope="module")
def ws() -> Workspace:
    return open_workspace(REPO / "matrix.yaml")


@pytest.fixture
def store(ws: Workspace) -> FakeStore:
    s = FakeStore()
    for cell in ws.cells:
        s.add(cell.os.base_ref)
    return s


@pytest.fixture
def trainer(tmp_path: Path) -> Path:
    return write_standin_trainer(tmp_path / "trainer", "1.0.0")


class Run:
    def __init__(self, ws: Workspace, store: FakeStore, tmp_path: Path, trainer: Path) -> None:
        self.ws, self.store, self.tmp, self.trainer = ws, store, tmp_path, trainer
        self.lock = tmp_path / "images" / "lock.json"
        self.work = tmp_path / "work"
        self.ui = RecordingUi()
        self.wheelhouse = locked(
            fake_closures(tmp_path / "wheelhouse", ws.cells, ws.matrix.project)
        )

    def opts(self, **kw: object) -> BuildOptions:
        args: dict[str, object] = {
            "repository": REPOSITORY,
            "trainer_dir": self.trainer,
            "lock_path": self.lock,
            "work_dir": self.work,
            "wheelhouse": self.wheelhouse,
        }
        args.update(kw)
        return BuildOptions(**args)  # type: ignore[arg-type]

    def plans(self, cells: list[Cell] | None = None, **kw: object) -> list[BuildPlan]:
        cells = cells or [self.ws.cell(CPU_CELL)]
        return plan_cells(self.ws, cells, FakeEngine(self.store), self.opts(**kw))

    def __call__(self, cells: list[Cell] | None = None, **kw: object) -> list[Outcome]:
        plans = self.plans(cells, **kw)
        builder = Builder(
            lambda: FakeEngine(self.store), self.opts(**kw), self.lock, self.work, self.ui
        )
        return builder.run(plans)


@pytest.fixture
def build(ws: Workspace, store: FakeStore, tmp_path: Path, trainer: Path) -> Run:
    return Run(ws, store, tmp_path, trainer)


def test_build_tags_and_records(build: Run, store: FakeStore) -> None:
    (out,) = build()
    assert out.status == "built"
    rec = lock.read(build.lock)[CPU_CELL]
    assert rec.image_id == out.image_id
    assert sorted(rec.tags) == sorted(store.refs(REPOSITORY))
    assert f"{REPOSITORY}:{CPU_CELL}" in rec.tags
    assert f"{REPOSITORY}:{rec.build_hash}" in rec.tags
    assert rec.labels["io.trainimg.trainer.version"] == "1.0.0"
    assert rec.labels["io.trainimg.build.hash"] == rec.build_hash
    assert (rec.torch, rec.cuda, rec.engine) == ("2.13.0+cpu", None, "fake")
    assert not list(build.work.iterdir())  # the context tarball is gone


def test_unchanged_cell_is_skipped(build: Run, store: FakeStore) -> None:
    build()
    before = build.lock.read_bytes(), build.lock.stat().st_mtime_ns, store.builds
    (out,) = build()
    assert out.status == "skipped"
    assert (build.lock.read_bytes(), build.lock.stat().st_mtime_ns, store.builds) == before


def test_skip_repairs_the_cell_tag_and_a_lost_record(build: Run, store: FakeStore) -> None:
    (first,) = build()
    other = store.add("localhost/elsewhere:x")
    store.names[f"{REPOSITORY}:{CPU_CELL}"] = other
    build.lock.unlink()
    (out,) = build()
    assert out.status == "skipped" and store.builds == 1
    assert store.names[f"{REPOSITORY}:{CPU_CELL}"] == first.image_id
    assert lock.read(build.lock)[CPU_CELL].image_id == first.image_id


def test_trainer_change_is_a_new_image_and_keeps_the_old(build: Run, store: FakeStore) -> None:
    (first,) = build()
    old_hash = lock.read(build.lock)[CPU_CELL].build_hash
    (build.trainer / "__main__.py").write_text("print('changed')\n")
    (second,) = build()
    rec = lock.read(build.lock)[CPU_CELL]
    assert second.status == "built" and second.image_id != first.image_id
    assert rec.build_hash != old_hash
    assert store.names[f"{REPOSITORY}:{CPU_CELL}"] == second.image_id
    assert store.names[f"{REPOSITORY}:{old_hash}"] == first.image_id


def test_force_builds_again(build: Run, store: FakeStore) -> None:
    build()
    (out,) = build(force=True)
    assert out.status == "built" and store.builds == 2


@pytest.mark.parametrize(
    "error",
    [
        BuildFailed("building at STEP 6: exit status 1", ["Step output", "pip says no"]),
        EngineError("podman at unix:///x: build: 500 storage is full"),
    ],
    ids=["run-step-fails", "engine-api-error"],
)
def test_failure_leaves_tags_and_lock_as_they_were(
    build: Run, store: FakeStore, error: EngineError
) -> None:
    build()
    (build.trainer / "__main__.py").write_text("print('changed')\n")
    lock_before, refs_before = build.lock.read_bytes(), dict(store.names)

    def fail(_context: Path) -> None:
        raise error

    store.on_build = fail
    (out,) = build()
    assert out.status == "failed"
    assert str(error) in out.error
    assert out.log_tail  # what the build printed last comes back with it
    if isinstance(error, BuildFailed):
        assert out.log_tail == error.log_tail
    else:
        assert out.log_tail[-1].startswith("STEP 2/2")
    assert build.lock.read_bytes() == lock_before
    assert store.names == refs_before
    assert not list(build.work.iterdir())


def test_ctrl_c_during_build(build: Run, store: FakeStore) -> None:
    build()
    (build.trainer / "__main__.py").write_text("print('changed')\n")
    lock_before, refs_before = build.lock.read_bytes(), dict(store.names)

    def interrupt(_context: Path) -> None:
        raise KeyboardInterrupt

    store.on_build = interrupt
    with pytest.raises(KeyboardInterrupt):
        build()
    assert build.lock.read_bytes() == lock_before
    assert store.names == refs_before
    assert not list(build.work.iterdir())


def test_ctrl_c_between_the_two_tags_rolls_back_the_first(build: Run, store: FakeStore) -> None:
    (first,) = build()
    (build.trainer / "__main__.py").write_text("print('changed')\n")
    lock_before, refs_before = build.lock.read_bytes(), dict(store.names)
    cell_tag = f"{REPOSITORY}:{CPU_CELL}"
    fired: list[str] = []

    def interrupt(ref: str) -> None:
        if ref == cell_tag and not fired:  # the build-hash tag is already on
            fired.append(ref)
            raise KeyboardInterrupt

    store.on_tag = interrupt
    with pytest.raises(KeyboardInterrupt):
        build()
    assert fired
    assert build.lock.read_bytes() == lock_before
    assert store.names == refs_before  # new hash tag removed, cell tag back on the old image
    assert store.names[cell_tag] == first.image_id


def test_jobs_build_many_cells(build: Run, store: FakeStore, ws: Workspace) -> None:
    cells = list(ws.cells)
    outs = build(cells, jobs=3, pull=True)
    assert [o.status for o in outs] == ["built"] * len(cells)
    records = lock.read(build.lock)
    assert sorted(records) == sorted(c.name for c in cells)
    for rec in records.values():
        assert all(store.names[t] == rec.image_id for t in rec.tags)


def test_one_failing_cell_does_not_stop_the_others(
    build: Run, store: FakeStore, ws: Workspace
) -> None:
    cells = list(ws.cells)[:4]
    victim = build.plans(cells, pull=True)[2]

    def fail(context: Path) -> None:
        if f"# cell: {victim.cell.name}\n".encode() in context.read_bytes():
            raise BuildFailed("RUN step failed", ["boom"])

    store.on_build = fail
    outs = build(cells, jobs=2, pull=True)
    assert {o.cell: o.status for o in outs} == {
        c.name: ("failed" if c.name == victim.cell.name else "built") for c in cells
    }
    assert victim.cell.name not in lock.read(build.lock)
    assert victim.hash_tag not in store.names and victim.cell_tag not in store.names


def test_ctrl_c_with_jobs_leaves_only_whole_cells(
    build: Run, store: FakeStore, ws: Workspace
) -> None:
    cells = list(ws.cells)[:6]
    started: list[Path] = []
    builders: list[Builder] = []

    def interrupt_on_third(context: Path) -> None:
        started.append(context)
        if len(started) == 3:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C arrives in the main thread
            builders[0].journal.cancelled.wait(10)

    store.on_build = interrupt_on_third
    plans = build.plans(cells, pull=True)
    opts = build.opts(jobs=2, pull=True)
    builders.append(Builder(lambda: FakeEngine(store), opts, build.lock, build.work, build.ui))
    # Python's own Ctrl-C handler, as a terminal has it (a shell starts background jobs with
    # SIGINT ignored, and then raise_signal would do nothing)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            builders[0].run(plans)
    finally:
        signal.signal(signal.SIGINT, previous)
    records = lock.read(build.lock)
    assert len(records) < len(cells)
    for plan in plans:
        tags = [plan.cell_tag, plan.hash_tag]
        if plan.cell.name in records:
            assert all(store.names[t] == records[plan.cell.name].image_id for t in tags)
        else:
            assert not any(t in store.names for t in tags), plan.cell.name


def test_drift_is_refused(make_project: MakeProject, store: FakeStore, trainer: Path) -> None:
    matrix = make_project()
    ws = open_workspace(matrix)
    path = matrix.parent / "images" / CPU_CELL / "Containerfile"
    path.write_text(path.read_text() + "RUN echo edited by hand\n")
    opts = BuildOptions(trainer_dir=trainer)
    with pytest.raises(TrainimgError, match=r"differs from a fresh render.*trainimg render"):
        plan_cells(ws, [ws.cell(CPU_CELL)], FakeEngine(store), opts)


def test_missing_bases(ws: Workspace, trainer: Path, tmp_path: Path) -> None:
    wh = locked(fake_closures(tmp_path / "wh", ws.cells, ws.matrix.project))
    empty = FakeEngine(FakeStore())
    opts = BuildOptions(trainer_dir=trainer, wheelhouse=wh)
    with pytest.raises(TrainimgError, match=r"trainimg-base:bookworm.*`trainimg base`") as err:
        plan_cells(ws, [ws.cell(CPU_CELL)], empty, opts)
    assert err.value.exit_code == 2
    remote = next(c for c in ws.cells if not c.os.local)
    with pytest.raises(TrainimgError, match="--pull"):
        plan_cells(ws, [remote], empty, opts)
    (plan,) = plan_cells(
        ws, [remote], empty, BuildOptions(trainer_dir=trainer, pull=True, wheelhouse=wh)
    )
    # --pull: trainimg pulls the base while planning (credentials never reach the build)
    assert empty.store.pulls == [remote.os.base_ref]
    assert remote.os.base_ref in plan.base.tags  # the build starts from what was pulled
    local_only = FakeStore()
    local_only.add(ws.cell(CPU_CELL).os.base_ref)
    (plan,) = plan_cells(
        ws,
        [ws.cell(CPU_CELL)],
        FakeEngine(local_only),
        BuildOptions(trainer_dir=trainer, pull=True, wheelhouse=wh),
    )
    assert local_only.pulls == []  # a locally made base is never pulled
    assert ws.cell(CPU_CELL).os.base_ref in plan.base.tags


def test_wheelhouse_means_offline(
    ws: Workspace, store: FakeStore, trainer: Path, tmp_path: Path
) -> None:
    wh = locked(fake_wheels(tmp_path / "wh"))
    opts = BuildOptions(trainer_dir=trainer, wheelhouse=wh)
    (plan,) = plan_cells(ws, [ws.cell(CPU_CELL)], FakeEngine(store), opts)
    assert plan.buildargs == {}
    assert plan.network == "none"
    names = [e.arcname for e in plan.context.entries]
    assert (
        "wheelhouse/rest/numpy-2.3.5-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
        in names
    )
    assert "wheelhouse/torch/requirements.txt" in names
    with pytest.raises(TrainimgError, match=r"only from a hash-locked wheelhouse"):
        plan_cells(ws, [ws.cell(CPU_CELL)], FakeEngine(store), BuildOptions(trainer_dir=trainer))


def test_a_changed_wheel_changes_the_build_hash(build: Run) -> None:
    (first,) = build.plans()
    name = "filelock-3.20.0-py3-none-any.whl"
    (build.wheelhouse / name).write_bytes(fake_wheel_bytes(name, b"re-published"))
    with pytest.raises(TrainimgError, match="fails its hash check"):
        build.plans()
    locked(build.wheelhouse)  # the new bytes, locked: a new image, never the old layers
    (second,) = build.plans()
    assert second.build_hash != first.build_hash


def test_a_proxy_reaches_the_engine_but_not_the_hash_the_labels_or_the_lock(
    build: Run, store: FakeStore
) -> None:
    """The same build with and without a proxy: one build hash, one lock record; the engine
    got the proxy on its request (tests/engines/test_proxy.py shows podman keeps it out of
    the image), never as one of the build arguments the hash covers."""
    secret = "planted-S3cret"  # noqa: S105 - planted, grepped for
    proxy = from_environment({}, f"http://u:{secret}@proxy.example:3128")
    (plain,) = build()
    before = lock.read(build.lock)[CPU_CELL].build_hash
    (out,) = build(proxy=proxy, force=True)
    assert out.status == "built" and out.image_id == plain.image_id
    assert build.lock.read_text(encoding="utf-8").count(secret) == 0
    assert lock.read(build.lock)[CPU_CELL].build_hash == before
    last = store.requests[-1]
    assert last.proxy == proxy and secret not in json.dumps(dict(last.buildargs))
    assert secret not in json.dumps(dict(last.labels)) and secret not in repr(last)
    assert all(secret not in line for line in build.ui.lines)
