"""An in-memory Engine for lifecycle tests: records every call, can fail or be interrupted."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builder.engines.base import BuildResult, ImageInfo, ImageNotFound, RunResult, RunSpec
from builder.registry.auth import Credentials


@dataclass
class FakeEngine:
    name: str = "podman"
    base_url: str = "unix:///fake.sock"
    images: dict[str, ImageInfo] = field(default_factory=dict)
    running: dict[str, RunSpec] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    run_result: RunResult = field(default_factory=lambda: RunResult(0, "", ""))
    on_start: Callable[[RunSpec], None] | None = None
    closed: bool = False

    def version(self) -> str:
        return "4.3.1"

    def build(self, context: Path, tags: Sequence[str] = (), **kwargs: object) -> BuildResult:
        raise NotImplementedError

    def image_exists(self, ref: str) -> bool:
        return ref in self.images

    def inspect_image(self, ref: str) -> ImageInfo:
        self.calls.append(("inspect", ref))
        if ref not in self.images:
            raise ImageNotFound(f"image {ref}: not in the store")
        return self.images[ref]

    def tag(self, image: str, ref: str) -> None:
        raise NotImplementedError

    def remove_image(self, ref: str) -> None:
        self.images.pop(ref, None)

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

    def close(self) -> None:
        self.closed = True

    def image_tags(self, repository: str) -> list[str]:
        raise NotImplementedError

    def import_image(self, tarball: Path, ref: str, changes: Sequence[str] = ()) -> str:
        raise NotImplementedError

    def push(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        raise NotImplementedError

    def pull(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        raise NotImplementedError


def image_info(
    labels: Mapping[str, str], env: Mapping[str, str] | None = None, user: str = "1000:1000"
) -> ImageInfo:
    return ImageInfo(
        id="sha256:" + "0" * 64,
        tags=("localhost/x:y",),
        digest=None,
        size=1,
        labels=dict(labels),
        env=dict(env or {}),
        user=user,
        entrypoint=("/opt/venv/bin/python", "-m", "trainer"),
        cmd=("--help",),
    )
