"""A podman-CLI Engine for the verify tests until the SDK engines (builder/engines/podman.py,
docker.py) are on this branch: the same calls, made through `podman` on the isolated store."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from builder.engines.base import EngineError, ImageInfo, ImageNotFound, RunResult, RunSpec
from builder.engines.local_podman import LocalPodman


@dataclass
class PodmanCliEngine:
    local: LocalPodman
    name: str = "podman"

    @property
    def base_url(self) -> str:
        return self.local.url

    def version(self) -> str:
        return self.local.podman("version", "--format", "{{.Client.Version}}").strip()

    def image_exists(self, ref: str) -> bool:
        return subprocess.run(["podman", "image", "exists", ref], env=self._env()).returncode == 0

    def _env(self) -> dict[str, str]:
        import os

        return {**os.environ, **self.local.env()}

    def inspect_image(self, ref: str) -> ImageInfo:
        if not self.image_exists(ref):
            raise ImageNotFound(f"image {ref}: not in the store")
        [attrs] = json.loads(self.local.podman("image", "inspect", ref))
        config = attrs.get("Config") or {}
        env = dict(str(e).partition("=")[::2] for e in config.get("Env") or ())
        return ImageInfo(
            id=f"sha256:{attrs['Id']}",
            tags=tuple(attrs.get("RepoTags") or ()),
            digest=attrs.get("Digest"),
            size=int(attrs.get("Size") or 0),
            labels=dict(config.get("Labels") or {}),
            env=env,
            user=str(config.get("User") or ""),
            entrypoint=tuple(config.get("Entrypoint") or ()),
            cmd=tuple(config.get("Cmd") or ()),
        )

    def _create_args(self, spec: RunSpec) -> list[str]:
        args = ["--network", spec.network]
        if spec.name:
            args += ["--name", spec.name]
        for k, v in spec.labels.items():
            args += ["--label", f"{k}={v}"]
        for k, v in spec.environment.items():
            args += ["--env", f"{k}={v}"]
        if spec.user:
            args += ["--user", spec.user]
        if spec.gpus:
            args += ["--device", "nvidia.com/gpu=all"]
        if spec.entrypoint is not None:
            args += ["--entrypoint", json.dumps(list(spec.entrypoint))]
        return [*args, spec.image, *spec.command]

    def run(self, spec: RunSpec, *, timeout: float = 600) -> RunResult:
        proc = subprocess.run(
            ["podman", "run", "--rm", *self._create_args(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self._env(),
        )
        return RunResult(proc.returncode, proc.stdout, proc.stderr)

    def start(self, spec: RunSpec) -> str:
        out = self.local.podman("run", "-d", *self._create_args(spec))
        return spec.name or out.strip()[:12]

    def remove_container(self, name: str) -> None:
        proc = subprocess.run(
            ["podman", "rm", "-f", "-t", "0", name], capture_output=True, text=True, env=self._env()
        )
        if proc.returncode != 0 and "no such container" not in proc.stderr.lower():
            raise EngineError(f"podman rm {name}: {proc.stderr.strip()}")

    def containers(self, label: str | None = None) -> list[str]:
        args = ["ps", "-a", "--format", "{{.Names}}"]
        if label:
            args += ["--filter", f"label={label}"]
        return sorted(self.local.podman(*args).split())

    def close(self) -> None:
        pass
