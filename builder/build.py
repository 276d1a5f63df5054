"""Build cells: plan (drift, base, wheelhouse, context, hash), build, tag, record.

Order of effects per cell, chosen so nothing half-done survives a failure or Ctrl-C:
  1. the engine builds an UNTAGGED image (an interrupted build leaves at most a dangling image,
     even if the service finishes it after we are gone);
  2. the journal tags it `<repo>:<content hash>` then `<repo>:<cell>`, remembering what each
     name pointed at before;
  3. the lock record is written atomically, and only then is the cell done.
A failure after 1 or 2 rolls the names back; Ctrl-C rolls back every cell not yet done, with
further Ctrl-C deferred until that is finished. A cell whose content-hash tag exists is not
built again (its `<repo>:<cell>` tag and record are brought in line if needed).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from builder import lock as lockfile
from builder.context import BuildContext, assemble, trainer_version
from builder.engines.base import BuildRequest, Engine, EngineError, ImageInfo, short_id
from builder.errors import TrainimgError
from builder.labels import PREFIX
from builder.matrix.model import Cell
from builder.registry.auth import refuse_credentials_in_buildargs
from builder.registry.pull import pull_base
from builder.render import render_all
from builder.wheelhouse import Selection, select
from builder.workspace import Workspace

TRAINER_VERSION_LABEL = f"{PREFIX}.trainer.version"
BUILD_HASH_LABEL = f"{PREFIX}.build.hash"
TAIL = 30


class Cancelled(BaseException):
    """Raised inside a worker when the user pressed Ctrl-C."""


class BuildsFailed(TrainimgError):
    exit_code = 1


@dataclass(frozen=True)
class BuildOptions:
    repository: str | None = None  # default: project.repository
    wheelhouse: Path | None = None
    network: str | None = None  # default: "none" (every wheel comes from the wheelhouse)
    pull: bool = False
    buildargs: Mapping[str, str] = field(default_factory=dict)
    nocache: bool = False
    force: bool = False  # build even when the content-hash tag exists
    jobs: int = 1
    trainer_dir: Path | None = None  # default: <root>/trainer
    lock_path: Path | None = None  # default: <root>/images/lock.json
    work_dir: Path | None = None  # context tarballs; default: <root>/.cache/build


@dataclass(frozen=True)
class Plan:
    cell: Cell
    context: BuildContext
    buildargs: Mapping[str, str]
    labels: Mapping[str, str]
    network: str | None
    pull: bool
    cell_tag: str
    hash_tag: str
    base_ref: str
    base: ImageInfo | None
    wheelhouse: Selection

    @property
    def content_hash(self) -> str:
        return self.context.content_hash


@dataclass
class Outcome:
    cell: str
    status: str  # built | skipped | failed | cancelled
    seconds: float = 0.0
    image_id: str = ""
    size: int = 0
    steps: int = 0
    cached_steps: int = 0
    error: str = ""
    log_tail: tuple[str, ...] = ()


class Ui:
    """What the builder tells the user; the command gives a rich implementation."""

    def line(self, cell: str, text: str) -> None:
        pass

    def event(self, cell: str, text: str) -> None:
        pass


# --- planning ------------------------------------------------------------------------------


def _check_drift(ws: Workspace, cells: Sequence[Cell]) -> dict[str, str]:
    outputs = render_all(ws.root, tuple(cells), ws.matrix.project)
    texts = {}
    for rel, text in outputs.items():
        path = ws.root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            raise TrainimgError(
                f"{rel} differs from a fresh render of matrix.yaml and the templates: "
                "run `trainimg render` (and commit it) before building"
            )
        texts[rel.parent.name] = text
    return texts


def _base(engine: Engine, cell: Cell, pull: bool) -> tuple[ImageInfo | None, bool]:
    """The base image (None when it will be pulled) and whether this cell's build pulls."""
    ref = cell.os.base_ref
    present = engine.image_exists(ref)
    if cell.os.local:
        if not present:
            raise TrainimgError(
                f"cell {cell.name}: base image {ref} is not in the engine's store; it is made "
                "locally, not pulled: run `trainimg base` (debootstrap -> podman import) "
                "against the same engine store"
            )
        return engine.inspect_image(ref), False
    if pull:  # pulled now, by trainimg with the registry's credentials; the build never pulls
        pull_base(engine, ref, cell.name)
        return engine.inspect_image(ref), False
    if not present:
        raise TrainimgError(
            f"cell {cell.name}: base image {ref} is not in the engine's store: pass --pull to "
            "fetch it from its registry (an air-gapped site loads it with `podman load` first)"
        )
    return engine.inspect_image(ref), False


def plan_cells(
    ws: Workspace, cells: Sequence[Cell], engine: Engine, opts: BuildOptions
) -> list[Plan]:
    """Everything decided before any build starts; bad input fails here (exit 2)."""
    project = ws.matrix.project
    repo = opts.repository or project.repository
    trainer_dir = opts.trainer_dir or ws.root / "trainer"
    version = trainer_version(trainer_dir)
    texts = _check_drift(ws, cells)
    buildargs = dict(opts.buildargs)
    refuse_credentials_in_buildargs(buildargs)
    network = opts.network or "none"  # wheels come from the wheelhouse; nothing is downloaded
    if opts.wheelhouse is None:
        raise TrainimgError(
            "builds install Python packages only from a hash-locked wheelhouse: fill one with "
            "`trainimg wheelhouse CELL... --dest DIR` and pass --wheelhouse DIR (or set "
            "TRAINIMG_WHEELHOUSE)"
        )
    # Every cell's closure and hashes first: a bad wheelhouse stops before the engine is asked.
    selections = {cell.name: select(opts.wheelhouse, cell, project) for cell in cells}
    plans = []
    for cell in cells:
        base, pull = _base(engine, cell, opts.pull)
        selection = selections[cell.name]
        hashed_labels = {TRAINER_VERSION_LABEL: version}
        ctx = assemble(
            texts[cell.name],
            trainer_dir,
            selection,
            buildargs=buildargs,
            labels=hashed_labels,
            base=base.id if base is not None else cell.os.base_ref,
        )
        labels = {**hashed_labels, BUILD_HASH_LABEL: ctx.content_hash}
        plans.append(
            Plan(
                cell=cell,
                context=ctx,
                buildargs=buildargs,
                labels=labels,
                network=network,
                pull=pull,
                cell_tag=f"{repo}:{cell.name}",
                hash_tag=f"{repo}:{ctx.content_hash}",
                base_ref=cell.os.base_ref,
                base=base,
                wheelhouse=selection,
            )
        )
    return plans


# --- tags and records, transactionally ----------------------------------------------------------


@contextlib.contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C until the block is done (main thread only; others never receive it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        got.append(signum)

    old = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


class Journal:
    """Names applied for cells that are not done yet, so they can be taken back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[str, str | None]]] = {}
        self.cancelled = threading.Event()

    def tag(self, engine: Engine, cell: str, image_id: str, ref: str) -> None:
        with self._lock, sigint_deferred():
            if self.cancelled.is_set():
                raise Cancelled
            previous = engine.inspect_image(ref).id if engine.image_exists(ref) else None
            if previous == image_id:
                return
            self._pending.setdefault(cell, []).append((ref, previous))
            engine.tag(image_id, ref)

    def commit(self, cell: str, write: Callable[[], None]) -> None:
        with self._lock, sigint_deferred():
            if self.cancelled.is_set():
                raise Cancelled
            write()
            self._pending.pop(cell, None)

    def rollback(self, engine: Engine, cell: str | None = None) -> list[str]:
        """Undo the names of one cell (a failure) or of every pending cell (Ctrl-C)."""
        undone = []
        with self._lock, sigint_deferred():
            if cell is None:
                self.cancelled.set()
            cells = list(self._pending) if cell is None else [cell]
            for name in cells:
                for ref, previous in reversed(self._pending.pop(name, [])):
                    with contextlib.suppress(EngineError):
                        if previous is not None:
                            engine.tag(previous, ref)
                        else:
                            engine.remove_image(ref)
                    undone.append(ref)
        return undone


# --- building ------------------------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _record(plan: Plan, info: ImageInfo, engine: Engine, built_at: str) -> lockfile.BuildRecord:
    # a pinned base: the digest it was pulled by (checked then); else what the engine reports
    base_digest = plan.cell.os.digest or (plan.base.digest if plan.base is not None else None)
    if plan.base is None:  # pulled by this build: look at what arrived
        with contextlib.suppress(EngineError):
            base_digest = engine.inspect_image(plan.base_ref).digest
    cell = plan.cell
    return lockfile.BuildRecord(
        image_id=info.id,
        tags=[plan.cell_tag, plan.hash_tag],
        digest=info.digest,
        size=info.size,
        base_image=plan.base_ref,
        base_digest=base_digest,
        labels=dict(info.labels),
        torch=str(cell.torch),
        cuda=str(cell.cuda.version) if cell.cuda else None,
        engine=engine.name,
        built_at=built_at,
        content_hash=plan.content_hash,
    )


@dataclass
class Builder:
    engine_factory: Callable[[], Engine]
    opts: BuildOptions
    lock_path: Path
    work_dir: Path
    ui: Ui = field(default_factory=Ui)
    journal: Journal = field(default_factory=Journal)

    def build_one(self, engine: Engine, plan: Plan) -> Outcome:
        name = plan.cell.name
        tail: deque[str] = deque(maxlen=TAIL)
        start = time.monotonic()

        def on_log(line: str) -> None:
            if self.journal.cancelled.is_set():
                raise Cancelled
            tail.append(line)
            self.ui.line(name, line)

        try:
            if not self.opts.force and engine.image_exists(plan.hash_tag):
                return self._up_to_date(engine, plan, start)
            self.ui.event(name, f"building {plan.cell_tag} (content hash {plan.content_hash})")
            tarball = plan.context.tarball(self.work_dir)
            try:
                request = BuildRequest(
                    tarball,
                    buildargs=plan.buildargs,
                    labels=plan.labels,
                    network=plan.network,
                    pull=plan.pull,
                    nocache=self.opts.nocache,
                )
                result = engine.build(request, on_log=on_log)
            finally:
                tarball.unlink(missing_ok=True)
            self.journal.tag(engine, name, result.image_id, plan.hash_tag)
            self.journal.tag(engine, name, result.image_id, plan.cell_tag)
            info = engine.inspect_image(result.image_id)
            record = _record(plan, info, engine, _now())
            self.journal.commit(name, lambda: lockfile.update(self.lock_path, name, record))
            return Outcome(
                name,
                "built",
                time.monotonic() - start,
                info.id,
                info.size,
                result.steps,
                result.cached_steps,
            )
        except Cancelled:
            self.journal.rollback(engine, name)
            return Outcome(name, "cancelled", time.monotonic() - start, log_tail=tuple(tail))
        except (TrainimgError, OSError) as exc:
            self.journal.rollback(engine, name)
            log_tail = tuple(getattr(exc, "log_tail", ())) or tuple(tail)
            return Outcome(
                name, "failed", time.monotonic() - start, error=str(exc), log_tail=log_tail
            )
        except BaseException:
            self.journal.rollback(engine, name)
            raise

    def _up_to_date(self, engine: Engine, plan: Plan, start: float) -> Outcome:
        name = plan.cell.name
        info = engine.inspect_image(plan.hash_tag)
        self.journal.tag(engine, name, info.id, plan.cell_tag)
        records = lockfile.read(self.lock_path)
        old = records.get(name)
        if old is None or old.image_id != info.id or old.content_hash != plan.content_hash:
            record = _record(plan, info, engine, info.created or _now())
            self.journal.commit(name, lambda: lockfile.update(self.lock_path, name, record))
        else:
            self.journal.commit(name, lambda: None)
        self.ui.event(name, f"up to date: {plan.hash_tag} exists ({short_id(info.id)})")
        return Outcome(name, "skipped", time.monotonic() - start, info.id, info.size)

    def run(self, plans: Sequence[Plan]) -> list[Outcome]:
        """Build every plan, `opts.jobs` at a time. Ctrl-C: roll back, then KeyboardInterrupt."""
        outcomes: dict[str, Outcome] = {}
        if self.opts.jobs <= 1 or len(plans) <= 1:
            engine = self.engine_factory()
            try:
                for plan in plans:
                    outcomes[plan.cell.name] = self.build_one(engine, plan)
            finally:
                engine.close()
            return [outcomes[p.cell.name] for p in plans]
        work: queue.Queue[Plan] = queue.Queue()
        for plan in plans:
            work.put(plan)

        def worker() -> None:
            engine = self.engine_factory()
            try:
                while not self.journal.cancelled.is_set():
                    try:
                        plan = work.get_nowait()
                    except queue.Empty:
                        return
                    outcomes[plan.cell.name] = self.build_one(engine, plan)
            finally:
                engine.close()

        threads = [
            threading.Thread(target=worker, daemon=True, name=f"build-{i}")
            for i in range(min(self.opts.jobs, len(plans)))
        ]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
        except KeyboardInterrupt:
            engine = self.engine_factory()
            try:
                self.journal.rollback(engine)
            finally:
                engine.close()
            raise
        return [outcomes.get(p.cell.name, Outcome(p.cell.name, "cancelled")) for p in plans]


def default_paths(ws: Workspace, opts: BuildOptions) -> tuple[Path, Path]:
    lock_path = opts.lock_path or ws.root / lockfile.DEFAULT_PATH
    work_dir = opts.work_dir or ws.root / ".cache" / "build"
    return lock_path, work_dir
