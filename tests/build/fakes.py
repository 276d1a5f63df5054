"""An in-memory Engine for the builder's own logic: tags, records, failures and Ctrl-C at
exact moments, without a container engine."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.engines.base import (
    BuildLog,
    BuildResult,
    EngineError,
    ImageInfo,
    ImageNotFound,
    LogSink,
    RunResult,
    RunSpec,
)
from builder.registry.auth import Credentials


@dataclass
class FakeStore:
    images: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> labels
    names: dict[str, str] = field(default_factory=dict)  # ref -> id
    builds: int = 0
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


class FakeEngine:
    name = "fake"
    base_url = "fake://"

    def __init__(self, store: FakeStore) -> None:
        self.store = store

    def version(self) -> str:
        return "fake"

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
        self.store.builds += 1
        log = BuildLog(on_log)
        log.feed("STEP 1/2: FROM base\nSTEP 2/2: COPY trainer/ /opt/trainimg/trainer/\n")
        if self.store.on_build is not None:
            self.store.on_build(context)
        image_id = "sha256:" + hashlib.sha256(context.read_bytes()).hexdigest()
        self.store.images[image_id] = dict(labels or {})
        log.feed(f"COMMIT\n{image_id.removeprefix('sha256:')}\n")
        return log.result(image_id)

    def _resolve(self, ref: str) -> str:
        if ref in self.store.images:
            return ref
        if ref in self.store.names:
            return self.store.names[ref]
        raise ImageNotFound(f"image {ref}: not here")

    def image_exists(self, ref: str) -> bool:
        return ref in self.store.images or ref in self.store.names

    def inspect_image(self, ref: str) -> ImageInfo:
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
        raise NotImplementedError

    def start(self, spec: RunSpec) -> str:
        raise NotImplementedError

    def remove_container(self, name: str) -> None:
        raise NotImplementedError

    def containers(self, label: str | None = None) -> list[str]:
        return []

    def close(self) -> None:
        pass

    def image_tags(self, repository: str) -> list[str]:
        return [r.removeprefix(repository + ":") for r in self.store.refs(repository)]

    def import_image(self, tarball: Path, ref: str, changes: Sequence[str] = ()) -> str:
        raise NotImplementedError

    def push(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        raise NotImplementedError

    def pull(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        """A registry with every image in it, except names containing "missing"."""
        if "missing" in ref:
            raise EngineError(f"pull {ref}: manifest unknown")
        self.store.pulls.append(ref)
        self.store.add(ref)
