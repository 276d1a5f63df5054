"""Build cells from their plans (builder/build/plan.py): build, tag, record.

Order of effects per cell, chosen so nothing half-done survives a failure or Ctrl-C:
  1. the engine builds an UNTAGGED image (an interrupted build leaves at most a dangling image,
     even if the service finishes it after we are gone);
  2. the journal tags it `<repo>:<build hash>` then `<repo>:<cell>`, remembering what each
     name pointed at before;
  3. the lock record is written atomically, and only then is the cell done.
A failure after 1 or 2 rolls the names back; Ctrl-C rolls back every cell not yet done, with
further Ctrl-C deferred until that is finished. A cell whose build-hash tag exists is not
built again (its `<repo>:<cell>` tag and record are brought in line if needed).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.build import lock as lockfile
from builder.build.installed_packages import rpm_packages
from builder.build.journal import Cancelled, Journal
from builder.build.plan import BuildOptions, BuildPlan
from builder.engines.base import BuildRequest, ImageInfo, short_id
from builder.engines.roles import BuildAndRun, EngineConnection, ImageBuilder, ImageStore
from builder.errors import TrainimgError

TAIL = 30


class BuildsFailed(TrainimgError):
    exit_code = 1


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

    def started(self, cell: str) -> None:
        """The cell's build began (its progress step, builder/progress.py)."""

    def finished(self, cell: str) -> None:
        """The cell's build ended, whatever the outcome."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _record(
    plan: BuildPlan, info: ImageInfo, engine: EngineConnection, built_at: str
) -> lockfile.BuildRecord:
    # a pinned base: the digest it was pulled by (checked then); else what the engine reports
    base_digest = plan.cell.os.digest or plan.base.digest
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
        build_hash=plan.build_hash,
        wheels={f"{w.name}=={w.version}": w.sha256 for w in plan.wheelhouse.wheels},
    )


@dataclass
class Builder:
    engine_factory: Callable[[], BuildAndRun]
    opts: BuildOptions
    lock_path: Path
    work_dir: Path
    ui: Ui = field(default_factory=Ui)
    journal: Journal = field(default_factory=Journal)

    def build_one(self, engine: BuildAndRun, plan: BuildPlan) -> Outcome:
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
            self.ui.event(name, f"building {plan.cell_tag} (build hash {plan.build_hash})")
            tarball = plan.context.tarball(self.work_dir)
            self.ui.started(name)
            try:
                result = engine.build(
                    self._image_request(engine, plan, tarball, on_log), on_log=on_log
                )
            finally:  # the engine removed it once it had it; not when the request was refused
                self.ui.finished(name)
                tarball.unlink(missing_ok=True)
            self.journal.tag(engine, name, result.image_id, plan.hash_tag)
            self.journal.tag(engine, name, result.image_id, plan.cell_tag)
            info = engine.inspect_image(result.image_id)
            record = _record(plan, info, engine, _now())
            if plan.cell.os.distro.is_el:  # what dnf really installed, for matrix check
                record = dataclasses.replace(record, packages=rpm_packages(engine, result.image_id))
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

    def _image_request(
        self, engine: ImageBuilder, plan: BuildPlan, tarball: Path, on_log: Callable[[str], None]
    ) -> BuildRequest:
        """The request that builds the image; first, for a cell whose os stage installs
        packages, that stage alone with its network. The image build then takes the stage from
        the layer cache and runs every other stage with `plan.network` (none)."""
        image = BuildRequest(  # the tarball's last use: the engine removes it once received
            tarball,
            buildargs=plan.request_buildargs,
            network=plan.network,
            nocache=self.opts.nocache,
            layers=self.opts.layers,
            timestamp=plan.source_date_epoch,
            remove_context=True,
            proxy=self.opts.proxy,
        )
        if plan.network_stage is None:
            return image
        net = plan.stage_network or "the engine's default network"
        if self.opts.nocache or not self.opts.layers:
            # A cache-less image build would run the os stage again, without a network: the
            # whole build gets the stage's network instead (pip still installs --no-index).
            flag = "--no-cache" if self.opts.nocache else "--no-layers"
            self.ui.event(plan.cell.name, f"{flag}: every stage builds with {net}")
            return dataclasses.replace(image, network=plan.stage_network)
        self.ui.event(plan.cell.name, f"{plan.network_stage} stage: OS packages, with {net}")
        stage = dataclasses.replace(
            image, network=plan.stage_network, target=plan.network_stage, remove_context=False
        )
        engine.build(stage, on_log=on_log)
        self.ui.event(
            plan.cell.name,
            f"image: every other stage with --network {plan.network} "
            f"(the {plan.network_stage} stage from the layer cache)",
        )
        return image

    def _up_to_date(self, engine: ImageStore, plan: BuildPlan, start: float) -> Outcome:
        name = plan.cell.name
        info = engine.inspect_image(plan.hash_tag)
        self.journal.tag(engine, name, info.id, plan.cell_tag)
        records = lockfile.read(self.lock_path)
        old = records.get(name)
        if old is None or old.image_id != info.id or old.build_hash != plan.build_hash:
            record = _record(plan, info, engine, info.created or _now())
            self.journal.commit(name, lambda: lockfile.update(self.lock_path, name, record))
        else:
            self.journal.commit(name, lambda: None)
        self.ui.event(name, f"up to date: {plan.hash_tag} exists ({short_id(info.id)})")
        return Outcome(name, "skipped", time.monotonic() - start, info.id, info.size)

    def run(self, plans: Sequence[BuildPlan]) -> list[Outcome]:
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
        work: queue.Queue[BuildPlan] = queue.Queue()
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
        try:
            # Ctrl-C may come while the later workers are still starting (the first one's
            # build already running): the rollback covers that moment too.
            for t in threads:
                t.start()
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
