"""The tests' one in-memory Engine (every role of builder/engines/roles.py, no container engine
behind it): images and names in a FakeStore that the engines of a parallel build share,
containers that "run" without running, every call recorded, and hooks that fail or interrupt at
exact moments. It implements the roles rather than subclassing engines/sdk.SdkEngine: the base
holds what the SDK clients share, and a fake has no client."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from builder.engines.base import (
    BuildRequest,
    BuildResult,
    ContainerRun,
    EngineError,
    ImageInfo,
    ImageNotFound,
    LogSink,
    RunResult,
    RunSpec,
)
from builder.engines.build_log import BuildLog
from builder.engines.credentials import Credentials
from builder.engines.roles import Engine
from builder.spec.labels import BUILD_LABEL_ARGS


@dataclass
class FakeStore:
    images: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> labels
    names: dict[str, str] = field(default_factory=dict)  # ref -> id
    builds: int = 0
    requests: list[BuildRequest] = field(default_factory=list)  # every build, in order
    pulls: list[str] = field(default_factory=list)
    # Hooks: called at the named moment (may raise).
    on_build: Callable[[Path], None] | None = None
    on_tag: Callable[[str], None] | None = None

    def add(self, ref: str, labels: Mapping[str, str] | None = None) -> str:
        image_id = "sha256:" + hashlib.sha256(ref.encode()).hexdigest()
        self.images[image_id] = dict(labels or {})
        self.names[ref] = image_id
        return image_id

    def refs(self, repo: str) -> list[str]:
        return sorted(r for r in self.names if r.startswith(repo + ":"))


@dataclass
class FakeEngine:
    store: FakeStore = field(default_factory=FakeStore)
    name: str = "fake"
    base_url: str = "fake://"
    running: dict[str, RunSpec] = field(default_factory=dict)  # container name -> spec
    calls: list[tuple[str, str]] = field(default_factory=list)  # (what, image or container)
    run_result: RunResult = field(default_factory=lambda: RunResult(0, "", ""))
    last_run: RunSpec = field(init=False)  # the spec of the latest run()
    on_start: Callable[[RunSpec], None] | None = None  # called once the container "runs"
    closed: bool = False

    def version(self) -> str:
        return "fake"

    def build(self, request: BuildRequest, *, on_log: LogSink | None = None) -> BuildResult:
        """The image id is the hash of the context file (a tarball), so equal contexts make
        equal images, as on a real engine."""
        self.store.builds += 1
        self.store.requests.append(request)
        log = BuildLog(on_log)
        log.feed("STEP 1/2: FROM base\nSTEP 2/2: COPY trainer/ /opt/trainimg/trainer/\n")
        if self.store.on_build is not None:
            self.store.on_build(request.context)
        image_id = "sha256:" + hashlib.sha256(request.context.read_bytes()).hexdigest()
        # what the Containerfile's last LABEL makes of the build-time label arguments
        from_args = {
            k: request.buildargs[a] for k, a in BUILD_LABEL_ARGS.items() if a in request.buildargs
        }
        self.store.images[image_id] = {**request.labels, **from_args}
        log.feed(f"COMMIT\n{image_id.removeprefix('sha256:')}\n")
        result = log.result(image_id)
        for ref in request.tags:
            self.tag(result.image_id, ref)
        return result

    def _resolve(self, ref: str) -> str:
        if ref in self.store.images:
            return ref
        if ref in self.store.names:
            return self.store.names[ref]
        raise ImageNotFound(f"image {ref}: not in the store")

    def image_exists(self, ref: str) -> bool:
        return ref in self.store.images or ref in self.store.names

    def inspect_image(self, ref: str) -> ImageInfo:
        self.calls.append(("inspect", ref))
        image_id = self._resolve(ref)
        tags = tuple(sorted(r for r, i in self.store.names.items() if i == image_id))
        return ImageInfo(
            image_id,
            tags,
            None,
            1000,
            self.store.images[image_id],
            {},
            "1000:1000",
            (),
            (),
            ("sha256:layer",),
            "2026-01-01T00:00:00Z",
        )

    def tag(self, image: str, ref: str) -> None:
        if self.store.on_tag is not None:
            self.store.on_tag(ref)
        self.store.names[ref] = self._resolve(image)

    def remove_image(self, ref: str) -> None:
        self.store.names.pop(ref, None)

    def run(self, spec: RunSpec, *, timeout: float = 600) -> RunResult:
        self.calls.append(("run", spec.image))
        self.last_run = spec
        return self.run_result

    def start(self, spec: RunSpec) -> str:
        name = spec.name or f"c{len(self.calls)}"
        self.calls.append(("start", name))
        self.running[name] = spec
        if self.on_start is not None:
            self.on_start(spec)
        return name

    def remove_container(self, name: str) -> None:
        self.calls.append(("remove", name))
        self.running.pop(name, None)

    def containers(self, label: str | None = None) -> list[str]:
        key = (label or "").split("=", 1)[0]
        return sorted(n for n, s in self.running.items() if not key or key in s.labels)

    def image_tags(self, repository: str) -> list[str]:
        return [r.removeprefix(repository + ":") for r in self.store.refs(repository)]

    def import_image(self, tarball: Path, ref: str, changes: Sequence[str] = ()) -> str:
        raise NotImplementedError

    def load_image(self, archive: Path) -> None:
        raise NotImplementedError

    def save(self, ref: str, out: IO[bytes]) -> None:
        raise NotImplementedError

    def push(
        self,
        ref: str,
        creds: Credentials | None = None,
        *,
        tls_verify: bool = True,
        on_line: LogSink | None = None,
    ) -> None:
        raise NotImplementedError

    def pull(
        self,
        ref: str,
        creds: Credentials | None = None,
        *,
        tls_verify: bool = True,
        on_line: LogSink | None = None,
    ) -> None:
        """A registry with every image in it, except names containing "missing"."""
        if "missing" in ref:
            raise EngineError(f"pull {ref}: manifest unknown")
        self.store.pulls.append(ref)
        self.store.add(ref)

    # a supervised training container (builder/launch): created, "runs" until killed
    def rootless(self) -> bool:
        return False

    def create_container(self, run: ContainerRun) -> str:
        self.calls.append(("create", run.name))
        self.running[run.name] = RunSpec(run.image, name=run.name, labels=dict(run.labels))
        return run.name

    def start_container(self, cid: str) -> None:
        self.calls.append(("start", cid))

    def follow_logs(self, cid: str, *, stderr: bool) -> Iterator[bytes]:
        return iter(())

    def wait_container(self, cid: str) -> int:
        return self.run_result.exit_code

    def kill_container(self, cid: str, sig: str) -> None:
        self.calls.append((f"kill {sig}", cid))

    def stop_container(self, cid: str, timeout: int) -> None:
        self.calls.append(("stop", cid))

    def container_exists(self, cid: str) -> bool:
        return cid in self.running

    def save_oci_archive(self, ref: str) -> Iterator[bytes]:
        raise NotImplementedError

    def export_rootfs(self, ref: str) -> AbstractContextManager[Iterator[bytes]]:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True


def _is_an_engine(fake: FakeEngine) -> Engine:
    return fake  # mypy: the fake plays every role
