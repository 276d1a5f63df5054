"""The podman engine: podman-py over the libpod API.

Builds go to libpod's /build directly (podman-py's images.build reads the whole stream before
returning, so nothing could be shown while it runs) and always ask for OCI output: a libpod
build that names no output format never finds its own cached layers (podman 4.3's cache lookup
compares the candidate's manifest type with the requested, empty, one), measured here.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import podman
from podman import errors as perr

from builder.engines.base import (
    API_TIMEOUT,
    BUILD_TIMEOUT,
    BuildLog,
    BuildResult,
    EngineError,
    ImageInfo,
    ImageNotFound,
    LogSink,
    RunResult,
    RunSpec,
    drain_text,
    open_context,
)
from builder.engines.common import (
    MISSING_IMAGE_HINT,
    container_name,
    image_info,
    network_mode,
    split_ref,
    volume_binds,
)

OCI = "application/vnd.oci.image.manifest.v1+json"
_ID_LINE = re.compile(r"^([0-9a-f]{64})\s*$")


def _flag(value: bool) -> str:
    return "true" if value else "false"


class PodmanEngine:
    name = "podman"

    def __init__(self, base_url: str, *, timeout: float = API_TIMEOUT) -> None:
        self.base_url = base_url
        self._client = podman.PodmanClient(base_url=base_url, timeout=timeout)

    @contextlib.contextmanager
    def _api(self, what: str) -> Iterator[None]:
        try:
            yield
        except perr.ImageNotFound as exc:
            raise ImageNotFound(f"{what}: {exc.explanation or exc}; {MISSING_IMAGE_HINT}") from None
        except perr.APIError as exc:
            raise EngineError(
                f"podman at {self.base_url}: {what}: {exc.explanation or exc}"
            ) from None

    def version(self) -> str:
        with self._api("version"):
            info = self._client.version()  # type: ignore[no-untyped-call]
        return str(info.get("Version", "unknown"))

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
        params: dict[str, Any] = {
            "dockerfile": containerfile,
            "layers": "true",
            "rm": "true",
            "forcerm": "true",
            "outputformat": OCI,
            "nocache": _flag(nocache),
            "pull": _flag(pull),
            "pullpolicy": "always" if pull else "missing",
        }
        if tags:
            params["t"] = list(tags)
        if buildargs:
            params["buildargs"] = json.dumps(dict(buildargs))
        if labels:
            params["labels"] = json.dumps(dict(labels))
        if network:
            params["networkmode"] = network
        log = BuildLog(on_log)
        image_id = None
        with open_context(context) as body, self._api("build"):
            response = self._client.api.post(
                "/build",
                params=params,
                data=body,
                headers={"Content-Type": "application/x-tar"},
                stream=True,
                timeout=BUILD_TIMEOUT,
            )
            try:
                response.raise_for_status()
                for raw in response.iter_lines():
                    if not raw:
                        continue
                    item = json.loads(raw)
                    if item.get("error"):
                        raise log.failed(str(item["error"]))
                    text = item.get("stream")
                    if text:
                        log.feed(str(text))
                        m = _ID_LINE.match(str(text))
                        if m:
                            image_id = m.group(1)
                    aux = item.get("aux")
                    if isinstance(aux, dict) and aux.get("ID"):
                        image_id = str(aux["ID"])
            finally:
                response.close()
        log.close()
        if image_id is None:
            raise log.failed("the build ended without reporting an image id")
        return log.result(image_id)

    def image_exists(self, ref: str) -> bool:
        with self._api(f"image {ref}"):
            return bool(self._client.images.exists(ref))

    def inspect_image(self, ref: str) -> ImageInfo:
        with self._api(f"image {ref}"):
            attrs = self._client.images.get(ref).attrs
        return image_info(attrs, attrs.get("Digest") or None)

    def tag(self, image: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        with self._api(f"tag {ref}"):
            if not self._client.images.get(image).tag(repo, tag):
                raise EngineError(f"podman at {self.base_url}: could not tag {image} as {ref}")

    def remove_image(self, ref: str) -> None:
        with self._api(f"remove {ref}"), contextlib.suppress(perr.NotFound, perr.ImageNotFound):
            self._client.images.remove(ref)

    def _create(self, spec: RunSpec) -> Any:
        if not self.image_exists(spec.image):
            raise ImageNotFound(f"image {spec.image}: {MISSING_IMAGE_HINT}")
        kwargs: dict[str, Any] = {
            "name": container_name(spec),
            "command": list(spec.command) or None,
            "environment": dict(spec.environment),
            "volumes": volume_binds(spec),
            "network_mode": network_mode(spec),
            "labels": dict(spec.labels),
        }
        if spec.entrypoint is not None:
            kwargs["entrypoint"] = list(spec.entrypoint)
        if spec.user is not None:
            kwargs["user"] = spec.user
        if spec.gpus:
            kwargs["devices"] = ["nvidia.com/gpu=all"]  # CDI (nvidia-ctk cdi generate)
        with self._api(f"create a container of {spec.image}"):
            return self._client.containers.create(spec.image, **kwargs)

    def run(self, spec: RunSpec, *, timeout: float = 600) -> RunResult:
        container = self._create(spec)
        try:
            with self._api(f"run {spec.image}"):
                container.start()
                try:
                    code = int(container.wait(timeout=timeout))
                except perr.APIError as exc:
                    if "timed out" in str(exc).lower() or "timeout" in str(exc).lower():
                        raise EngineError(
                            f"{spec.image}: the container ran longer than {timeout:.0f}s"
                        ) from None
                    raise
                stdout = drain_text(container.logs(stdout=True, stderr=False))
                stderr = drain_text(container.logs(stdout=False, stderr=True))
        finally:
            self.remove_container(container.name)
        return RunResult(code, stdout, stderr)

    def start(self, spec: RunSpec) -> str:
        container = self._create(spec)
        try:
            with self._api(f"start {spec.image}"):
                container.start()
        except BaseException:
            self.remove_container(container.name)
            raise
        return str(container.name)

    def remove_container(self, name: str) -> None:
        with self._api(f"remove container {name}"), contextlib.suppress(perr.NotFound):
            response = self._client.api.delete(
                f"/containers/{name}", params={"force": "true", "timeout": 0, "v": "true"}
            )
            if response.status_code != 404:
                response.raise_for_status()

    def containers(self, label: str | None = None) -> list[str]:
        filters = {"label": label} if label else None
        with self._api("list containers"):
            found = self._client.containers.list(all=True, filters=filters)
        return sorted(str(c.name) for c in found)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]
