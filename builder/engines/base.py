"""The Engine interface: the few things trainimg asks of a container engine.

Two implementations exist (podman.py over podman-py's libpod API, docker.py over the docker
SDK); build, verify and the tests speak only to this interface. Every call has a timeout, and
`run` never uses the SDKs' attached mode: it creates detached, waits, reads logs and removes the
container in a `finally` (the docker SDK's attached run hangs against podman 4.3 now and then).

What the two share lives here too: the build log reader (partial lines, step and cache-hit
counting, the tail kept for error messages), the deterministic context tarball of a directory,
and id normalisation (`sha256:<hex>` everywhere, whatever the API returns).
"""

from __future__ import annotations

import re
import tarfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from builder.errors import TrainimgError
from builder.registry.auth import Credentials

LogSink = Callable[[str], None]

# The whole build may take long (a CUDA image: many minutes); a single silent step must not
# trip a read timeout, so builds get their own, generous one.
BUILD_TIMEOUT = 3 * 3600.0
API_TIMEOUT = 120.0
TAIL_LINES = 40


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
    @property
    def name(self) -> str:
        """ "podman" or "docker"."""
        ...

    base_url: str

    def version(self) -> str: ...

    def build(
        self,
        context: Path,
        tags: Sequence[str] = (),
        *,
        containerfile: str = "Containerfile",
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        network: str | None = None,
        pull: bool = False,
        nocache: bool = False,
        on_log: LogSink | None = None,
    ) -> BuildResult:
        """Build `context` (a directory, or a ready tarball file) and apply `tags`.

        Raises BuildFailed (with the log tail) when the build itself fails, EngineError when the
        engine refuses the request. trainimg's builder passes no tags and tags afterwards, so an
        interrupted build can never leave a tag behind."""
        ...

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

    def image_tags(self, repository: str) -> list[str]:
        """The tags of `repository` (registry/path, no tag) in the engine's store, sorted."""
        ...

    def import_image(self, tarball: Path, ref: str, changes: Sequence[str] = ()) -> str:
        """`ref` from a root filesystem tarball, with Dockerfile-style `changes`; its id."""
        ...

    def push(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        """Push `ref` (registry/repo:tag); credentials travel only in the request header."""
        ...

    def pull(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        """Pull `ref` (by tag or digest) into the engine's store."""
        ...

    def close(self) -> None: ...


# --- shared helpers ------------------------------------------------------------------------

_HEX64 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")
# buildah says "STEP 3/9: RUN ..." ("[2/3] STEP ..." in multi-stage builds) and "--> Using cache
# <id>"; Docker's classic builder says "Step 3/9 : RUN ..." and " ---> Using cache".
STEP_LINE = re.compile(r"^(?:\[\d+/\d+\] )?(?:STEP|Step) \d+/\d+ ?: ")
_CACHE = re.compile(r"^(?:-->| --->) Using cache")


def normalize_id(image_id: str) -> str:
    m = _HEX64.match(image_id.strip())
    if not m:
        raise EngineError(f"the engine returned an image id that is not a sha256: {image_id!r}")
    return f"sha256:{m.group(1)}"


def short_id(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]


class BuildLog:
    """Turns the engine's build stream into whole lines: counts steps and cache hits, keeps a
    tail for error messages and passes each line to the caller's sink."""

    def __init__(self, on_log: LogSink | None) -> None:
        self._sink = on_log
        self._partial = ""
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.steps = 0
        self.cached = 0

    def feed(self, text: str) -> None:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._line(line.rstrip("\r"))

    def close(self) -> None:
        if self._partial:
            self._line(self._partial)
            self._partial = ""

    def _line(self, line: str) -> None:
        if STEP_LINE.match(line):
            self.steps += 1
        elif _CACHE.match(line):
            self.cached += 1
        self.tail.append(line)
        if self._sink is not None:
            self._sink(line)

    def result(self, image_id: str) -> BuildResult:
        return BuildResult(normalize_id(image_id), tuple(self.tail), self.steps, self.cached)

    def failed(self, message: str) -> BuildFailed:
        self.close()
        return BuildFailed(message.strip(), tuple(self.tail))


def tar_directory(directory: Path) -> IO[bytes]:
    """A deterministic tarball of a build context directory (sorted, uid/gid 0, mtime 0), in a
    spooled temporary file. Symbolic links are refused: a context is plain files."""
    import tempfile

    out = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - caller closes
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(directory).as_posix()
            if path.is_symlink():
                raise EngineError(f"build context {directory}: {rel} is a symbolic link")
            info = tarfile.TarInfo(rel)
            info.uid = info.gid = 0
            info.mtime = 0
            if path.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = path.stat().st_size
                info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
    out.seek(0)
    return out


def open_context(context: Path) -> IO[bytes]:
    """The tarball to upload: `context` itself if it is a file, else a tarball of the directory."""
    if context.is_file():
        return context.open("rb")
    if context.is_dir():
        return tar_directory(context)
    raise EngineError(f"build context {context} does not exist")


def drain_text(chunks: bytes | Iterator[bytes]) -> str:
    """The SDKs return logs as bytes or as an iterator of byte chunks; this joins either."""
    data = bytes(chunks) if isinstance(chunks, bytes | bytearray) else b"".join(chunks)
    return data.decode("utf-8", errors="replace")
