"""The values that cross the engine roles (engines/roles.py): BuildRequest, BuildResult,
ImageInfo, RunSpec, RunResult, ContainerRun, and the errors.

Two engines implement the roles, both subclasses of engines/sdk.SdkEngine (podman.py over
podman-py's libpod API, docker.py over the docker SDK). Image ids are `sha256:<hex>`
everywhere, whatever the API returns (normalize_id).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.engines.proxy import Proxy
from builder.errors import TrainimgError

LogSink = Callable[[str], None]

# The whole build may take long (a CUDA image: many minutes); a single silent step must not
# trip a read timeout, so builds get their own, generous one.
BUILD_TIMEOUT = 3 * 3600.0
API_TIMEOUT = 120.0


class EngineError(TrainimgError):
    """The engine refused a call or a container/build failed; says what to do."""


class EngineUnavailable(EngineError):
    """No engine answers where we looked (exit code 2)."""


class ImageNotFound(EngineError):
    pass


class BuildFailed(EngineError):
    """A build ran and failed (a RUN step, a missing file, ...); carries the tail of its log."""

    exit_code = 1

    def __init__(self, message: str, log_tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.log_tail = tuple(log_tail)


@dataclass(frozen=True)
class BuildRequest:
    """One build: its context (a directory, or a ready tarball file) and what it is built with.

    Build arguments and labels are kept sorted, so the same inputs always make the same request
    (and the same image id). trainimg's builder gives no tags and tags afterwards, so an
    interrupted build can never leave a tag behind; verify's deliberately broken images do."""

    context: Path
    tags: Sequence[str] = ()
    containerfile: str = "Containerfile"
    buildargs: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    network: str | None = None
    pull: bool = False
    nocache: bool = False
    # False: libpod's `layers=false` — each stage runs in one container, the final image's new
    # content is committed as one layer, intermediate stages are not kept: about a third less
    # peak disk (a cu128 image: 27 GB instead of 38), no layer reuse. Podman only.
    layers: bool = True
    # Creation time of the image, its history and every file in its layers (libpod's build
    # `timestamp`); None: the clock. Docker's classic builder has no equivalent and ignores it.
    timestamp: int | None = None
    target: str | None = None  # build only up to this stage (its name in the Containerfile)
    # `context` is a temporary tarball: removed as soon as the engine has received it, so the
    # build does not hold it on disk beside the engine's copies (a cu128 context is 4 GB).
    remove_context: bool = False
    # The host's HTTP proxy for the RUN steps (engines/proxy.py): sent as the engines'
    # predefined proxy build arguments, never in `buildargs` (the build hash), labels or a log.
    proxy: Proxy = field(default_factory=Proxy)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "buildargs", dict(sorted(self.buildargs.items())))
        object.__setattr__(self, "labels", dict(sorted(self.labels.items())))


@dataclass(frozen=True)
class BuildResult:
    image_id: str  # sha256:<hex>
    log_tail: tuple[str, ...] = ()
    steps: int = 0  # "STEP n/m" lines seen
    cached_steps: int = 0  # "--> Using cache" lines seen


@dataclass(frozen=True)
class ImageInfo:
    id: str  # sha256:<hex>
    tags: tuple[str, ...]
    digest: str | None  # the manifest digest where the API reports one
    size: int
    labels: Mapping[str, str]
    env: Mapping[str, str]
    user: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    layers: tuple[str, ...] = ()  # rootfs diff ids, base first
    created: str = ""
    workdir: str = ""
    volumes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class RunSpec:
    """What to run: an image, a command, and the few options trainimg uses."""

    image: str
    command: Sequence[str] = ()
    entrypoint: Sequence[str] | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    volumes: Mapping[str, str] = field(default_factory=dict)  # host path -> "container:mode"
    gpus: bool = False  # podman: CDI nvidia.com/gpu=all; docker: a GPU device request
    network: str = "none"
    user: str | None = None
    name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool
    relabel: str | None  # "z" (shared) or "Z" (private) on SELinux-enforcing hosts

    @property
    def options(self) -> tuple[str, ...]:
        return ("ro" if self.read_only else "rw", *((self.relabel,) if self.relabel else ()))


@dataclass(frozen=True)
class ContainerRun:
    """A supervised training container: everything `podman run` / `docker run` is given.
    builder/launch/plan.py makes it, launch/cli_line.py prints it, the engines run it."""

    engine: str
    image: str
    name: str
    command: tuple[str, ...]
    entrypoint: tuple[str, ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    cdi_devices: tuple[str, ...] = ()  # podman: nvidia.com/gpu=...
    gpu_request: str | None = None  # docker: "all", a count, or "device=2,3"
    devices: tuple[str, ...] = ()  # host device nodes (InfiniBand: /dev/infiniband/uverbs0)
    ipc: str | None = None
    shm_size: str | None = None
    ulimits: tuple[tuple[str, int, int], ...] = ()
    userns: str | None = None
    user: str | None = None
    security_opt: tuple[str, ...] = ()
    network: str = "none"
    hostname: str | None = None
    add_hosts: tuple[tuple[str, str], ...] = ()
    stop_signal: str = "SIGTERM"
    stop_timeout: int = 120
    labels: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)


_HEX64 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")


def normalize_id(image_id: str) -> str:
    m = _HEX64.match(image_id.strip())
    if not m:
        raise EngineError(f"the engine returned an image id that is not a sha256: {image_id!r}")
    return f"sha256:{m.group(1)}"


def short_id(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]
