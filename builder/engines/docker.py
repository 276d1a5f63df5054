"""The docker engine: the docker SDK, against Docker or podman's Docker-compatible API.

API version 1.41 is pinned (podman 4.3's compat level; Docker accepts it too). Builds stream
through the low-level client. A compat-API build on podman makes Docker-format layers, so it
never reuses the layers of a libpod/CLI build (OCI), only those of earlier compat builds.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import docker
import requests
from docker import errors as derr
from docker.types import DeviceRequest

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

API_VERSION = "1.41"
_ID_LINE = re.compile(r"^(?:sha256:)?([0-9a-f]{64})\s*$")


class DockerEngine:
    name = "docker"

    def __init__(self, base_url: str, *, timeout: float = API_TIMEOUT) -> None:
        self.base_url = base_url
        self._client = docker.DockerClient(base_url=base_url, version=API_VERSION, timeout=timeout)
        self._api_client: Any = self._client.api

    @contextlib.contextmanager
    def _api(self, what: str) -> Iterator[None]:
        try:
            yield
        except derr.ImageNotFound as exc:
            raise ImageNotFound(f"{what}: {exc.explanation or exc}; {MISSING_IMAGE_HINT}") from None
        except derr.APIError as exc:
            raise EngineError(
                f"docker API at {self.base_url}: {what}: {exc.explanation or exc}"
            ) from None
        except (derr.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"docker API at {self.base_url}: {what}: {exc}") from None

    def version(self) -> str:
        with self._api("version"):
            info = self._client.version()
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
        log = BuildLog(on_log)
        image_id = None
        with open_context(context) as body, self._api("build"):
            stream = self._api_client.build(
                fileobj=body,
                custom_context=True,
                dockerfile=containerfile,
                buildargs=dict(buildargs or {}),
                labels=dict(labels or {}),
                network_mode=network,
                pull=pull,
                nocache=nocache,
                rm=True,
                forcerm=True,
                decode=True,
                timeout=BUILD_TIMEOUT,
            )
            try:
                for item in stream:
                    if item.get("error"):
                        detail = (item.get("errorDetail") or {}).get("message") or item["error"]
                        raise log.failed(str(detail))
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
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
        log.close()
        if image_id is None:
            raise log.failed("the build ended without reporting an image id")
        result = log.result(image_id)
        for ref in tags:
            self.tag(result.image_id, ref)
        return result

    def image_exists(self, ref: str) -> bool:
        try:
            self._api_client.inspect_image(ref)
        except derr.ImageNotFound:
            return False
        except derr.NotFound:
            return False
        except (derr.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"docker API at {self.base_url}: image {ref}: {exc}") from None
        return True

    def inspect_image(self, ref: str) -> ImageInfo:
        with self._api(f"image {ref}"):
            attrs = self._api_client.inspect_image(ref)
        digests = [d.split("@", 1)[1] for d in attrs.get("RepoDigests") or () if "@" in d]
        return image_info(attrs, digests[0] if digests else None)

    def tag(self, image: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        with self._api(f"tag {ref}"):
            if not self._api_client.tag(image, repo, tag):
                raise EngineError(f"docker API at {self.base_url}: could not tag {image} as {ref}")

    def remove_image(self, ref: str) -> None:
        with self._api(f"remove {ref}"), contextlib.suppress(derr.NotFound):
            self._api_client.remove_image(ref)

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
            "detach": True,
        }
        if spec.entrypoint is not None:
            kwargs["entrypoint"] = list(spec.entrypoint)
        if spec.user is not None:
            kwargs["user"] = spec.user
        if spec.gpus:
            kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        with self._api(f"create a container of {spec.image}"):
            return self._client.containers.create(spec.image, **kwargs)

    def run(self, spec: RunSpec, *, timeout: float = 600) -> RunResult:
        # Never containers.run(detach=False): it hangs against podman 4.3 now and then.
        container = self._create(spec)
        try:
            with self._api(f"run {spec.image}"):
                container.start()
                try:
                    status = container.wait(timeout=timeout)
                except requests.exceptions.ConnectionError as exc:
                    if "timed out" not in str(exc).lower():
                        raise
                    raise EngineError(
                        f"{spec.image}: the container ran longer than {timeout:.0f}s"
                    ) from None
                except requests.exceptions.ReadTimeout:
                    raise EngineError(
                        f"{spec.image}: the container ran longer than {timeout:.0f}s"
                    ) from None
                stdout = drain_text(container.logs(stdout=True, stderr=False))
                stderr = drain_text(container.logs(stdout=False, stderr=True))
        finally:
            self.remove_container(container.name)
        return RunResult(int(status.get("StatusCode", -1)), stdout, stderr)

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
        with self._api(f"remove container {name}"), contextlib.suppress(derr.NotFound):
            self._api_client.remove_container(name, force=True, v=True)

    def containers(self, label: str | None = None) -> list[str]:
        filters = {"label": label} if label else None
        with self._api("list containers"):
            found = self._client.containers.list(all=True, filters=filters)
        return sorted(str(c.name) for c in found)

    def close(self) -> None:
        self._client.close()
