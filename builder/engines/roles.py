"""What trainimg asks of a container engine, as the few roles its callers take: each caller's
parameter names the narrowest one it uses, and `Engine` is their union (both SDK engines,
engines/sdk.SdkEngine's subclasses, and the tests' fake implement all of it).

    EngineConnection  name, base_url, version, close: what every role has
    ImageStore        the images in the engine's store: exists, inspect, tag, remove, list, import
    ImageBuilder      builds into the store (build/builder.py, extend/build.py)
    ImageExport       saves out of the store (trainimg export, trainimg diff)
    RegistryTransfer  moves images between the store and a registry (push, pull before build)
    ContainerRunner   short containers: a command run to its end, or a started one for checks
    TrainingRunner    a supervised training container: no timeouts, it may run for days

The values that cross these roles (BuildRequest, RunSpec, ContainerRun, ...) and the errors
are in engines/base.py. Every call has a timeout except TrainingRunner's waits and streams.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import IO, Protocol

from builder.engines.base import (
    BuildRequest,
    BuildResult,
    ContainerRun,
    ImageInfo,
    LogSink,
    RunResult,
    RunSpec,
)
from builder.engines.credentials import Credentials


class EngineConnection(Protocol):
    """An engine answering at `base_url`: its kind, its version, and closing it."""

    @property
    def name(self) -> str:
        """ "podman" or "docker"."""
        ...

    base_url: str

    def version(self) -> str: ...

    def close(self) -> None: ...


class ImageStore(EngineConnection, Protocol):
    def image_exists(self, ref: str) -> bool: ...

    def inspect_image(self, ref: str) -> ImageInfo:
        """Raises ImageNotFound (saying which image) when it is not in the store."""
        ...

    def tag(self, image: str, ref: str) -> None:
        """Point `ref` (repo:tag) at `image` (an id or a reference)."""
        ...

    def remove_image(self, ref: str) -> None:
        """Remove one name; the image itself goes only when no name is left. No error if absent."""
        ...

    def image_tags(self, repository: str) -> list[str]:
        """The tags of `repository` (registry/path, no tag) in the engine's store, sorted."""
        ...

    def import_image(self, tarball: Path, ref: str, changes: Sequence[str] = ()) -> str:
        """`ref` from a root filesystem tarball, with Dockerfile-style `changes`; its id."""
        ...

    def load_image(self, archive: Path) -> None:
        """Load a docker-archive (docker load / podman load) as written: its config, so its
        image id, and its RepoTags kept."""
        ...


class ImageBuilder(ImageStore, Protocol):
    def build(self, request: BuildRequest, *, on_log: LogSink | None = None) -> BuildResult:
        """Build `request.context` and apply `request.tags`; each log line goes to `on_log`.

        Raises BuildFailed (with the log tail) when the build itself fails, EngineError when the
        engine refuses the request."""
        ...


class ImageExport(ImageStore, Protocol):
    """Images for machines without this engine (trainimg export) and for reading (diff)."""

    def save(self, ref: str, out: IO[bytes]) -> None:
        """Write `ref` as a docker-archive tarball (manifest.json, config, layer tars)."""
        ...

    def save_oci_archive(self, ref: str) -> Iterator[bytes]:
        """The image as an OCI archive (podman's `save --format oci-archive`), streamed."""
        ...

    def export_rootfs(self, ref: str) -> AbstractContextManager[Iterator[bytes]]:
        """The image's flattened root filesystem as a tar stream (a container made for it,
        never started, removed afterwards)."""
        ...


class RegistryTransfer(ImageStore, Protocol):
    def push(
        self,
        ref: str,
        creds: Credentials | None = None,
        *,
        tls_verify: bool = True,
        on_line: LogSink | None = None,
    ) -> None:
        """Push `ref` (registry/repo:tag); credentials travel only in the request header. Each
        blob's line (engines/sdk_shapes.transfer_line) goes to `on_line`."""
        ...

    def pull(
        self,
        ref: str,
        creds: Credentials | None = None,
        *,
        tls_verify: bool = True,
        on_line: LogSink | None = None,
    ) -> None:
        """Pull `ref` (by tag or digest) into the engine's store; each blob's line to
        `on_line`."""
        ...


class ContainerRunner(EngineConnection, Protocol):
    """Short containers: `run` creates detached, waits, reads the logs and removes the container
    in a `finally` (never the SDKs' attached mode: it hangs against podman 4.3 now and then)."""

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


class TrainingRunner(EngineConnection, Protocol):
    """A supervised training container (builder/launch): no timeouts, it may run for days."""

    def rootless(self) -> bool:
        """Whether the engine runs without root (rootless podman: --userns=keep-id)."""
        ...

    def create_container(self, run: ContainerRun) -> str:
        """Create (not start) the container `run` describes; its id."""
        ...

    def start_container(self, cid: str) -> None: ...

    def follow_logs(self, cid: str, *, stderr: bool) -> Iterator[bytes]:
        """The container's stdout (or stderr) as it comes, until it ends."""
        ...

    def wait_container(self, cid: str) -> int:
        """Block until the container ends; its exit code."""
        ...

    def kill_container(self, cid: str, sig: str) -> None:
        """Send `sig` (e.g. SIGTERM) to the container's main process."""
        ...

    def stop_container(self, cid: str, timeout: int) -> None:
        """Its stop signal, then SIGKILL after `timeout` seconds; no error if it is gone."""
        ...

    def container_exists(self, cid: str) -> bool: ...

    def remove_container(self, name: str) -> None:
        """Stop (if running) and remove; no error if it is already gone."""
        ...


class BuildAndRun(ImageBuilder, ContainerRunner, Protocol):
    """A cell's build (build/builder.py): it builds, then runs `rpm -qa` in what it built."""


class InspectAndRun(ImageStore, ContainerRunner, Protocol):
    """An image's facts from the store and containers of it: verify, the SBOM's inventory."""


class Engine(
    ImageBuilder, ImageExport, RegistryTransfer, ContainerRunner, TrainingRunner, Protocol
):
    """Every role: what discovery connects to (podman.PodmanEngine, docker.DockerEngine)."""
