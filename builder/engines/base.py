"""The Engine interface: the few things trainimg asks of a container engine.

Two implementations exist (podman.py over podman-py's libpod API, docker.py over the docker
SDK); build, verify and the tests speak only to this interface. Every call has a timeout, and
`run` never uses the SDKs' attached mode: it creates detached, waits, reads logs and removes the
container in a `finally` (the docker SDK's attached run hangs against podman 4.3 now and then).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from builder.errors import TrainimgError

LogSink = Callable[[str], None]


class EngineError(TrainimgError):
    """The engine is unreachable, refused a call, or a build/run failed; says what to do."""


class ImageNotFound(EngineError):
    pass


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    log_tail: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImageInfo:
    id: str
    tags: tuple[str, ...]
    digest: str | None
    size: int
    labels: Mapping[str, str]
    env: Mapping[str, str]
    user: str
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    layers: tuple[str, ...] = ()


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


class Engine(Protocol):
    name: str  # "podman" or "docker"
    base_url: str

    def version(self) -> str: ...

    def build(
        self,
        context: Path,
        tags: Sequence[str],
        *,
        containerfile: str = "Containerfile",
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        network: str | None = None,
        pull: bool = False,
        on_log: LogSink | None = None,
    ) -> BuildResult: ...

    def image_exists(self, ref: str) -> bool: ...

    def inspect_image(self, ref: str) -> ImageInfo: ...

    def tag(self, image: str, ref: str) -> None: ...

    def remove_image(self, ref: str) -> None: ...

    def run(self, spec: RunSpec, *, timeout: float = 600) -> RunResult: ...

    def start(self, spec: RunSpec) -> str:
        """Start a long-lived container (e.g. `sleep infinity`); returns its name."""
        ...

    def remove_container(self, name: str) -> None:
        """Stop (if running) and remove; no error if it is already gone."""
        ...

    def containers(self, label: str | None = None) -> list[str]:
        """Names of all containers (running or not), optionally only those with this label."""
        ...

    def close(self) -> None: ...
