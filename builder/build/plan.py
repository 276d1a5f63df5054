"""What a build of some cells will do, decided before any build starts (bad input fails here).

Per cell: the rendered Containerfile (refused if it drifted from matrix.yaml), the base image
(present, pulled now, or made locally), the wheelhouse closure, the build context and its
build hash, and the two tags. builder/build/builder.py carries a plan out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.build import lock as lockfile
from builder.build.context import BuildContext, assemble
from builder.build.source_date import BUILD_ARG, source_date_epoch
from builder.build.wheelhouse import Selection, select
from builder.engines.base import ImageInfo
from builder.engines.proxy import Proxy
from builder.engines.roles import RegistryTransfer
from builder.errors import TrainimgError
from builder.matrix.expand import expand
from builder.matrix.mirrors import with_mirrors_file
from builder.matrix.model import Cell
from builder.registry.auth import refuse_credentials_in_buildargs
from builder.registry.pull import pull_base
from builder.spec.cell_hash import with_cell_hashes
from builder.spec.labels import BUILD_HASH_LABEL, BUILD_LABEL_ARGS, TRAINER_VERSION_LABEL
from builder.spec.os_install import OS_STAGE, os_install
from builder.spec.render import render_all
from builder.spec.trainer_version import trainer_version
from builder.workspace import Workspace

NO_WHEELHOUSE = (
    "builds install Python packages only from a hash-locked wheelhouse: fill one with "
    "`trainimg wheelhouse CELL... --dest DIR` and pass --wheelhouse DIR (or set "
    "TRAINIMG_WHEELHOUSE)"
)


@dataclass(frozen=True)
class BuildOptions:
    repository: str | None = None  # default: project.repository
    wheelhouse: Path | None = None
    # The network of the stage that installs OS packages (None: the engine's default); every
    # other stage builds with none. "none" here is refused for a cell whose os stage downloads.
    network: str | None = None
    pull: bool = False
    buildargs: Mapping[str, str] = field(default_factory=dict)
    nocache: bool = False
    layers: bool = True  # False: `build --no-layers` (BuildRequest.layers)
    force: bool = False  # build even when the build-hash tag exists
    jobs: int = 1
    trainer_dir: Path | None = None  # default: <root>/trainer
    lock_path: Path | None = None  # default: <root>/images/lock.json
    work_dir: Path | None = None  # context tarballs; default: <root>/.cache/build
    # A mirrors file (matrix.yaml's `mirrors:` schema) laid over the matrix's own for this
    # build: the Containerfiles are rendered with it (the committed ones without it).
    mirrors: Path | None = None
    # The host's HTTP proxy (engines/proxy.py) for the RUN steps: not a build argument of the
    # build hash, nor a label, nor in the lock, so the same image comes out with or without it.
    proxy: Proxy = field(default_factory=Proxy)


@dataclass(frozen=True)
class BuildPlan:
    cell: Cell
    context: BuildContext
    buildargs: Mapping[str, str]
    labels: Mapping[str, str]
    network: str | None  # the image build's network: "none" unless the user chose one
    # A cell whose os stage installs packages is built in two steps: that stage alone, with
    # `stage_network` (None: the engine's default network), then the whole image with
    # `network` ("none"), which takes the os stage from the layer cache the first step filled.
    network_stage: str | None
    stage_network: str | None
    cell_tag: str
    hash_tag: str
    base_ref: str
    base: ImageInfo  # in the engine's store before any build starts: a build never pulls
    wheelhouse: Selection
    source_date_epoch: int = 0  # builder/build/source_date.py

    @property
    def request_buildargs(self) -> dict[str, str]:
        """What the engine is sent: the user's build arguments, SOURCE_DATE_EPOCH (unless the
        user set it) and the build-time labels' values (labels.BUILD_LABEL_ARGS)."""
        build_labels = {arg: self.labels[key] for key, arg in BUILD_LABEL_ARGS.items()}
        return {BUILD_ARG: str(self.source_date_epoch), **build_labels, **self.buildargs}

    @property
    def build_hash(self) -> str:
        return self.context.build_hash


def drifted(ws: Workspace, cells: Sequence[Cell]) -> tuple[dict[str, str], dict[str, str]]:
    """(each cell's fresh render, the cells whose committed Containerfile differs: why)."""
    texts, problems = {}, {}
    for rel, text in render_all(ws.root, tuple(cells), ws.matrix.project).items():
        path = ws.root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            problems[rel.parent.name] = (
                f"{rel} differs from a fresh render of matrix.yaml and the templates: "
                "run `trainimg render` (and commit it) before building"
            )
        texts[rel.parent.name] = text
    return texts, problems


def _check_drift(ws: Workspace, cells: Sequence[Cell]) -> dict[str, str]:
    texts, problems = drifted(ws, cells)
    if problems:
        raise TrainimgError(next(iter(problems.values())))
    return texts


def _with_mirrors(
    ws: Workspace, cells: Sequence[Cell], path: Path
) -> tuple[list[Cell], dict[str, str]]:
    """The cells as `path`'s mirrors change them, and their Containerfiles rendered so (the
    committed ones were checked for drift without them)."""
    matrix = with_mirrors_file(ws.matrix, path)
    expansion = with_cell_hashes(expand(matrix), matrix.project)
    mirrored = [expansion.find(cell.name) or cell for cell in cells]
    outputs = render_all(ws.root, tuple(mirrored), ws.matrix.project)
    return mirrored, {rel.parent.name: text for rel, text in outputs.items()}


def base_missing(engine: RegistryTransfer, cell: Cell, pull: bool) -> str | None:
    """Why the cell's base cannot be had (None: it is in the store, or --pull fetches it)."""
    ref = cell.os.base_ref
    if engine.image_exists(ref) or (pull and not cell.os.local):
        return None
    if cell.os.local:
        return (
            f"cell {cell.name}: base image {ref} is not in the engine's store; it is made "
            "locally, not pulled: run `trainimg base` (debootstrap -> podman import) "
            "against the same engine store"
        )
    return (
        f"cell {cell.name}: base image {ref} is not in the engine's store: pass --pull to "
        "fetch it from its registry (an air-gapped site loads it with `podman load` first)"
    )


def _base(engine: RegistryTransfer, cell: Cell, pull: bool) -> ImageInfo:
    """The base image, in the engine's store: made locally, pulled now by trainimg (--pull,
    with the registry's credentials), or already there."""
    missing = base_missing(engine, cell, pull)
    if missing is not None:
        raise TrainimgError(missing)
    if pull and not cell.os.local:  # pulled now, with the registry's credentials
        pull_base(engine, cell.os.base_ref, cell.name)
    return engine.inspect_image(cell.os.base_ref)


def networks_of(cell: Cell, chosen: str | None) -> tuple[str, str | None, str | None]:
    """(the image build's network, the stage built first with a network, that network).

    Wheels come from the wheelhouse, so the stages that install them never get a network. A
    cell whose os stage installs packages (dnf from the OS and NVIDIA repositories) needs one
    there: that stage is built first with `chosen` (default: the engine's own network)."""
    if not os_install(cell).downloads:
        return chosen or "none", None, None
    if chosen == "none":
        raise TrainimgError(
            f"cell {cell.name} installs OS packages in its {OS_STAGE} stage (dnf, from its "
            "repositories): that stage needs a network, so --network none cannot build it. "
            "Leave --network out (the engine's default network, for that stage only: the "
            "wheel stages always build with none), or name one that reaches your mirror "
            "(--network host for a mirror on this host; see docs/build.md, 'Networks and "
            "mirrors')"
        )
    return "none", OS_STAGE, chosen


def refuse_bad_options(ws: Workspace, cells: Sequence[Cell], opts: BuildOptions) -> None:
    """What is refused before any engine is asked (exit 2): a network a cell cannot build
    with, a mirrors file that is malformed or does not fit the matrix."""
    for cell in cells:
        networks_of(cell, opts.network)
    if opts.mirrors is not None:
        with_mirrors_file(ws.matrix, opts.mirrors)


def plan_cells(
    ws: Workspace, cells: Sequence[Cell], engine: RegistryTransfer, opts: BuildOptions
) -> list[BuildPlan]:
    """Everything decided before any build starts; bad input fails here (exit 2)."""
    project = ws.matrix.project
    repo = opts.repository or project.repository
    trainer_dir = opts.trainer_dir or ws.root / "trainer"
    version = trainer_version(trainer_dir)
    texts = _check_drift(ws, cells)
    if opts.mirrors is not None:
        cells, texts = _with_mirrors(ws, cells, opts.mirrors)
    buildargs = dict(opts.buildargs)
    refuse_credentials_in_buildargs(buildargs)
    if opts.wheelhouse is None:
        raise TrainimgError(NO_WHEELHOUSE)
    # Every cell's closure and hashes first: a bad wheelhouse stops before the engine is asked.
    selections = {cell.name: select(opts.wheelhouse, cell, project) for cell in cells}
    plans = []
    networks = {cell.name: networks_of(cell, opts.network) for cell in cells}
    for cell in cells:
        base = _base(engine, cell, opts.pull)
        selection = selections[cell.name]
        hashed_labels = {TRAINER_VERSION_LABEL: version}
        ctx = assemble(
            texts[cell.name],
            trainer_dir,
            selection,
            buildargs=buildargs,
            labels=hashed_labels,
            base=base.id,
        )
        labels = {**hashed_labels, BUILD_HASH_LABEL: ctx.build_hash}
        plans.append(
            BuildPlan(
                cell=cell,
                context=ctx,
                buildargs=buildargs,
                labels=labels,
                network=networks[cell.name][0],
                network_stage=networks[cell.name][1],
                stage_network=networks[cell.name][2],
                cell_tag=f"{repo}:{cell.name}",
                hash_tag=f"{repo}:{ctx.build_hash}",
                base_ref=cell.os.base_ref,
                base=base,
                wheelhouse=selection,
                source_date_epoch=source_date_epoch(base.labels, base.created),
            )
        )
    return plans


def plan_each(
    ws: Workspace, cells: Sequence[Cell], engine: RegistryTransfer, opts: BuildOptions
) -> tuple[list[BuildPlan], dict[str, str]]:
    """`build --keep-going`: each cell planned on its own, so one that cannot start (drift, a
    wheel its closure lacks, its base missing, a network it cannot build with) does not stop
    the others. (The plans, in cell order; each refused cell: why.)"""
    plans: list[BuildPlan] = []
    refused: dict[str, str] = {}
    for cell in cells:
        try:
            plans += plan_cells(ws, [cell], engine, opts)
        except TrainimgError as exc:
            refused[cell.name] = str(exc)
    return plans, refused


def default_paths(ws: Workspace, opts: BuildOptions) -> tuple[Path, Path]:
    lock_path = opts.lock_path or ws.root / lockfile.DEFAULT_PATH
    work_dir = opts.work_dir or ws.root / ".cache" / "build"
    return lock_path, work_dir
