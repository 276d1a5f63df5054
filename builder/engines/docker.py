"""The docker engine: the docker SDK, against Docker Engine or podman's Docker-compatible API.

API version 1.41 is pinned (podman 4.3's compat level; Docker 20.10 speaks it). Builds go to
the classic builder (`/build`; the SDK has no BuildKit session), so Containerfiles use no
`RUN --mount`. A compat-API build on podman makes Docker-format layers, so it never reuses the
layers of a libpod/CLI build (OCI), only those of earlier compat builds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import docker
import requests
from docker import errors as derr
from docker.types import DeviceRequest

from builder.engines.base import BUILD_TIMEOUT, EngineError, ImageInfo
from builder.engines.common import image_info
from builder.engines.sdk import SdkEngine, json_lines, registry_auth_header, stream_errors
from builder.registry.auth import Credentials

API_VERSION = "1.41"


def _auth_config(creds: Credentials | None) -> dict[str, str] | None:
    return None if creds is None else {"username": creds.username, "password": creds.password}


class DockerEngine(SdkEngine):
    name = "docker"
    not_found = (derr.NotFound,)
    image_not_found = derr.ImageNotFound
    api_errors = (derr.APIError, derr.DockerException)

    def _connect(self, base_url: str, timeout: float) -> Any:
        return docker.DockerClient(base_url=base_url, version=API_VERSION, timeout=timeout)

    @property
    def _low(self) -> Any:
        return self._client.api

    @contextlib.contextmanager
    def _build_stream(
        self, body: Any, params: Mapping[str, Any], tags: Sequence[str]
    ) -> Iterator[Iterator[Mapping[str, Any]]]:
        stream = self._low.build(
            fileobj=body,
            custom_context=True,
            dockerfile=params["dockerfile"],
            buildargs=params["buildargs"],
            labels=params["labels"],
            network_mode=params["network"],
            pull=params["pull"],
            nocache=params["nocache"],
            rm=True,
            forcerm=True,
            decode=True,
            timeout=BUILD_TIMEOUT,
        )
        try:
            yield stream
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def image_exists(self, ref: str) -> bool:
        try:
            self._low.inspect_image(ref)
        except derr.NotFound:
            return False
        except (derr.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"docker at {self.base_url}: image {ref}: {exc}") from None
        return True

    def _inspect(self, ref: str) -> ImageInfo:
        attrs = self._low.inspect_image(ref)
        digests = [d.split("@", 1)[1] for d in attrs.get("RepoDigests") or () if "@" in d]
        return image_info(attrs, digests[0] if digests else None)

    def _tag(self, image: str, repo: str, tag: str) -> bool:
        return bool(self._low.tag(image, repo, tag))

    def _gpu_options(self) -> dict[str, Any]:
        return {"device_requests": [DeviceRequest(count=-1, capabilities=[["gpu"]])]}

    def _create_kwargs(self) -> dict[str, Any]:
        return {"detach": True}

    def _wait(self, container: Any, timeout: float) -> int:
        try:
            status = container.wait(timeout=timeout)
        except requests.exceptions.ConnectionError as exc:
            if "timed out" not in str(exc).lower():
                raise
            raise self._timed_out(container.name, timeout) from None
        except requests.exceptions.ReadTimeout:
            raise self._timed_out(container.name, timeout) from None
        return int(status.get("StatusCode", -1))

    def _remove_container(self, name: str) -> None:
        self._low.remove_container(name, force=True, v=True)

    def _import(self, body: Any, repo: str, tag: str, changes: Sequence[str]) -> str:
        response = self._low._post(
            self._low._url("/images/create"),
            params={"fromSrc": "-", "repo": repo, "tag": tag, "changes": list(changes)},
            data=body,
            headers={"Content-Type": "application/tar"},
            stream=True,
            timeout=BUILD_TIMEOUT,
        )
        try:
            self._low._raise_for_status(response)
            image_id = ""
            for item in json_lines(response):
                if item.get("error"):
                    raise EngineError(f"docker import {repo}:{tag}: {item['error']}")
                status = str(item.get("status") or "")
                if status.startswith("sha256:"):
                    image_id = status
            return image_id
        finally:
            response.close()

    def _push(self, repo: str, tag: str, creds: Credentials | None, tls_verify: bool) -> None:
        items = self._low.push(
            repo, tag=tag, auth_config=_auth_config(creds), stream=True, decode=True
        )
        stream_errors(items, f"push {repo}:{tag}")

    def _pull(self, ref: str, creds: Credentials | None, tls_verify: bool) -> None:
        params = {"fromImage": ref}
        response = self._low._post(
            self._low._url("/images/create"),
            params=params,
            headers=registry_auth_header(creds),
            stream=True,
            timeout=BUILD_TIMEOUT,
        )
        try:
            self._low._raise_for_status(response)
            stream_errors(json_lines(response), f"pull {ref}")
        finally:
            response.close()
