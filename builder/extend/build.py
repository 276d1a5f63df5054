"""Plan, build, tag and record an extended image; then prove it against its parent.

Everything that can be wrong with the input is found before the engine builds anything (exit
2): the parent cell must have a lock record whose image is in the store, the requirements must
not replace a locked package, the extra wheels must resolve under the parent's lock. The build
is air-gapped (network none) and dated like the parent (builder/build/source_date.py); the image is
tagged `<repo>:<name>` and `<repo>:<build hash>` and recorded under `name` in the lock, with
the parent it came from. The fingerprint proof and verify follow (builder/commands/extend_cmd.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import NormalizedName
from packaging.version import Version

from builder.build import closure
from builder.build import lock as lockfile
from builder.build.context import BuildContext, ContextEntry, ContextError
from builder.build.source_date import BUILD_ARG, source_date_epoch
from builder.build.wheelhouse import ARCH, select
from builder.engines.base import BuildRequest, EngineError, ImageInfo, LogSink
from builder.engines.roles import ImageBuilder, ImageStore
from builder.errors import TrainimgError
from builder.extend import containerfile, requirements, wheels
from builder.extend.containerfile import Copy
from builder.matrix.model import Cell
from builder.matrix.validate import CELL_NAME
from builder.spec.labels import (
    EXTENSION_LABEL,
    PARENT_CELL_LABEL,
    PARENT_DIGEST_LABEL,
    PARENT_IMAGE_LABEL,
)
from builder.workspace import Workspace


class ExtendError(TrainimgError):
    pass


@dataclass(frozen=True)
class ExtendPlan:
    name: str
    cell: Cell
    parent: ImageInfo
    context: BuildContext
    extras: wheels.Extras
    tag: str
    hash_tag: str
    source_date_epoch: int


def _entries(
    data: dict[str, bytes], copies: Sequence[Copy], extras: wheels.Extras
) -> list[ContextEntry]:
    out = []
    for arcname, blob in data.items():
        out.append(ContextEntry(arcname, 0o644, hashlib.sha256(blob).hexdigest(), data=blob))
    out.append(ContextEntry("extra", 0o755))
    reqs = extras.requirements_txt().encode()
    cons = extras.constraints.encode()
    out += [
        ContextEntry("extra/requirements.txt", 0o644, hashlib.sha256(reqs).hexdigest(), data=reqs),
        ContextEntry(
            f"extra/{wheels.CONSTRAINTS}", 0o644, hashlib.sha256(cons).hexdigest(), data=cons
        ),
    ]
    out += [
        ContextEntry(f"extra/{w.path.name}", 0o644, w.sha256, source=w.path)
        for w in sorted(extras.wheels, key=lambda w: w.path.name)
    ]
    out.append(ContextEntry("copy", 0o755))
    for i, c in enumerate(copies):
        out.append(ContextEntry(f"copy/{i}", 0o755))
        paths = [c.source, *sorted(c.source.rglob("*"))] if c.source.is_dir() else [c.source]
        for path in paths:
            rel = path.relative_to(c.source.parent).as_posix()
            if path.is_symlink():
                raise ContextError(f"--copy {c.source}: {path} is a symbolic link")
            if path.is_dir():
                out.append(ContextEntry(f"copy/{i}/{rel}", 0o755))
            else:
                h = hashlib.sha256(path.read_bytes()).hexdigest()
                mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                out.append(ContextEntry(f"copy/{i}/{rel}", mode, h, source=path))
    return out


def _requirements(
    reqs_path: Path,
    cell: Cell,
    locked: dict[NormalizedName, Version],
    log: Callable[[str], None],
) -> tuple[requirements.UserRequirement, ...]:
    """The user's requirements whose marker holds for the cell, none replacing a locked one."""
    reqs, dropped = requirements.applicable(
        requirements.parse(reqs_path), closure.marker_environment(cell.python, ARCH)
    )
    for r in dropped:
        log(f"{reqs_path}:{r.line}: {r.text!r}: its marker is false for {cell.name}: not added")
    if not reqs:
        raise requirements.RequirementsError(
            f"{reqs_path}: every requirement's marker is false for {cell.name} (Python "
            f"{cell.python}, Linux {ARCH}): nothing to add to the image"
        )
    refused = requirements.replacing(reqs, locked)
    if refused:
        raise requirements.RequirementsError(
            f"{reqs_path}: refused before any build: "
            + "; ".join(refused)
            + f"; the image of {cell.name} was proven with these: extend another cell, or "
            "change the cell in matrix.yaml and build it"
        )
    return reqs


def plan(
    ws: Workspace,
    engine: ImageStore,
    cell: Cell,
    reqs_path: Path,
    *,
    name: str | None,
    copies: Sequence[Copy],
    lock_path: Path,
    parent_wheelhouse: Path,
    extra_wheelhouse: Path | None,
    repository: str | None,
    find_links: Sequence[Path] = (),
    offline: bool = False,
    pip_config: bool = False,
    log: Callable[[str], None] = lambda _m: None,
) -> ExtendPlan:
    """Everything decided before the build; bad input raises (exit 2)."""
    name = name or f"{cell.name}-ext"
    if not CELL_NAME.matches(name) or name in {c.name for c in ws.expansion.cells}:
        raise ExtendError(
            f"--name {name!r}: give a new image name of lower-case letters, digits and ._- "
            "(not a matrix cell's)"
        )
    selection = select(parent_wheelhouse, cell, ws.matrix.project)
    locked = {w.name: w.version for w in selection.wheels}
    reqs = _requirements(reqs_path, cell, locked, log)
    record = lockfile.read(lock_path).get(cell.name)
    if record is None:
        raise ExtendError(f"cell {cell.name}: no record in {lock_path}: `trainimg build` it first")
    if not engine.image_exists(record.image_id):
        raise ExtendError(
            f"cell {cell.name}: image {record.image_id} of {lock_path} is not in the "
            f"{engine.name} store: build it again"
        )
    pinned = {f"{w.name}=={w.version}": w.sha256 for w in selection.wheels}
    if record.wheels and pinned != record.wheels:
        changed = sorted(set(pinned.items()) ^ set(record.wheels.items()))
        raise ExtendError(
            f"cell {cell.name}: wheelhouse {parent_wheelhouse} is not the one its image was "
            f"built from ({len(changed)} pins or hashes differ, e.g. {changed[0][0]}): pass the "
            "cell's wheelhouse, or build the cell again"
        )
    parent = engine.inspect_image(record.image_id)
    extras = wheels.fetch(
        extra_wheelhouse or parent_wheelhouse.parent / f"{parent_wheelhouse.name}-{name}",
        cell,
        reqs,
        locked,
        parent_wheelhouse,
        find_links=find_links,
        offline=offline,
        pip_config=pip_config,
        log=log,
    )
    labels = {
        EXTENSION_LABEL: name,
        PARENT_CELL_LABEL: cell.name,
        PARENT_IMAGE_LABEL: parent.id,
        PARENT_DIGEST_LABEL: record.digest or "",
    }
    text = containerfile.render(parent.id, cell.name, labels, copies)
    entries = _entries({"Containerfile": text.encode()}, copies, extras)
    epoch = source_date_epoch(parent.labels, parent.created)
    ctx = BuildContext(tuple(entries), {BUILD_ARG: str(epoch)}, {}, parent.id)
    repo = repository or ws.matrix.project.repository
    return ExtendPlan(
        name, cell, parent, ctx, extras, f"{repo}:{name}", f"{repo}:{ctx.build_hash}", epoch
    )


def build(
    engine: ImageBuilder, p: ExtendPlan, work_dir: Path, on_log: LogSink | None = None
) -> str:
    """Build the child, untagged (nothing is named until it is proven); its image id."""
    tarball = p.context.tarball(work_dir)
    try:
        request = BuildRequest(
            tarball,
            buildargs=p.context.buildargs,
            network="none",
            timestamp=p.source_date_epoch,
        )
        return engine.build(request, on_log=on_log).image_id
    finally:
        tarball.unlink(missing_ok=True)


def commit(engine: ImageStore, p: ExtendPlan, image_id: str, lock_path: Path) -> ImageInfo:
    """Name the proven child `<repo>:<name>` and `<repo>:<build hash>`, and record it."""
    for ref in (p.hash_tag, p.tag):
        engine.tag(image_id, ref)
    info = engine.inspect_image(image_id)
    parent = lockfile.read(lock_path)[p.cell.name]
    record = lockfile.BuildRecord(
        image_id=info.id,
        tags=[p.tag, p.hash_tag],
        digest=info.digest,
        size=info.size,
        base_image=p.parent.id,
        base_digest=parent.digest,
        labels=dict(info.labels),
        torch=parent.torch,
        cuda=parent.cuda,
        engine=engine.name,
        built_at=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        build_hash=p.context.build_hash,
        wheels={
            **parent.wheels,
            **{f"{w.name}=={w.version}": w.sha256 for w in p.extras.wheels},
        },
        parent={"cell": p.cell.name, "image_id": p.parent.id, "digest": parent.digest or ""},
    )
    lockfile.update(lock_path, p.name, record)
    return info


def discard(engine: ImageStore, image_id: str) -> None:
    """Remove a child that failed its proof (it was never named)."""
    with contextlib.suppress(EngineError):
        engine.remove_image(image_id)
