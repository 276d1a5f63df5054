"""The docker engine: the docker SDK, against Docker Engine or podman's Docker-compatible API.

API version 1.41 is pinned (podman 4.3's compat level; Docker 20.10 speaks it). Builds go to
the classic builder (`/build`; the SDK has no BuildKit session), so Containerfiles use no
`RUN --mount`. A compat-API build on podman makes Docker-format layers, so it never reuses the
layers of a libpod/CLI build (OCI), only those of earlier compat builds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, ClassVar

import docker
import requests
from docker import errors as derr
from docker.types import DeviceRequest, Ulimit

from builder.engines.base import (
    BUILD_TIMEOUT,
    BuildRequest,
    ContainerRun,
    EngineError,
    LogSink,
)
from builder.engines.credentials import Credentials
from builder.engines.sdk import SdkEngine
from builder.engines.sdk_shapes import (
    CONTAINER_OPTIONS,
    HOST_OPTIONS,
    JsonItems,
    json_lines,
    registry_auth_header,
    set_options,
    stream_errors,
)

API_VERSION = "1.41"
# Every build: the body is our own context tarball, intermediate containers go even when a step
# fails, the stream arrives decoded, and a long silent step does not trip the API timeout.
_CLASSIC_BUILD: Mapping[str, Any] = {
    "custom_context": True,
    "rm": True,
    "forcerm": True,
    "decode": True,
    "timeout": BUILD_TIMEOUT,
}


class DockerEngine(SdkEngine):
    name = "docker"
    not_found = (derr.NotFound,)
    image_not_found = derr.ImageNotFound
    api_errors = (derr.APIError, derr.DockerException)
    gpu_request: ClassVar[Mapping[str, Any]] = {
        "device_requests": [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    }
    create_options: ClassVar[Mapping[str, Any]] = {"detach": True}

    def _connect(self, base_url: str, timeout: float | None) -> Any:
        return docker.DockerClient(base_url=base_url, version=API_VERSION, timeout=timeout)

    def _rootless(self) -> bool:
        return any("rootless" in str(o) for o in self._low.info().get("SecurityOptions") or ())

    def _create_run(self, run: ContainerRun) -> str:
        """The low-level API: the high-level one cannot set a stop timeout."""
        create, host = docker_create_options(run)
        config = self._low.create_host_config(**host)
        return str(self._low.create_container(run.image, host_config=config, **create)["Id"])

    @property
    def _low(self) -> Any:
        return self._client.api

    def _post(self, path: str, **kw: Any) -> Any:
        return self._low._post(self._low._url(path), **kw)

    @contextlib.contextmanager
    def _build_stream(self, body: IO[bytes], request: BuildRequest) -> Iterator[JsonItems]:
        if not request.layers:
            raise EngineError(
                "--no-layers is podman's build mode (libpod's layers=false); Docker's classic "
                "builder commits every step: build with the podman engine, or without --no-layers"
            )
        stream = self._low.build(
            fileobj=body,
            **_CLASSIC_BUILD,
            dockerfile=request.containerfile,
            # Docker's predefined proxy arguments: out of `docker history` (no ARG declares them)
            buildargs={**request.buildargs, **request.proxy.buildargs},
            labels=request.labels,
            network_mode=request.network,
            target=request.target,
            pull=request.pull,
            nocache=request.nocache,
        )
        try:
            yield stream
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def _wait(self, container: Any, timeout: float | None) -> int:
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

    def _import(self, body: IO[bytes], repo: str, tag: str, changes: Sequence[str]) -> str:
        params = {"fromSrc": "-", "repo": repo, "tag": tag, "changes": list(changes)}
        headers = {"Content-Type": "application/tar"}
        with self._posted("/images/create", params, data=body, headers=headers) as response:
            self._low._raise_for_status(response)
            image_id = ""
            for item in json_lines(response):
                if item.get("error"):
                    raise EngineError(f"docker import {repo}:{tag}: {item['error']}")
                status = str(item.get("status") or "")
                if status.startswith("sha256:"):
                    image_id = status
            return image_id

    def _load(self, body: IO[bytes]) -> None:
        headers = {"Content-Type": "application/x-tar"}
        with self._posted("/images/load", {"quiet": "1"}, data=body, headers=headers) as response:
            self._low._raise_for_status(response)
            for item in json_lines(response):
                if item.get("error"):
                    raise EngineError(f"docker load: {item['error']}")

    def _push(
        self,
        repo: str,
        tag: str,
        creds: Credentials | None,
        tls_verify: bool,
        on_line: LogSink | None,
    ) -> None:
        auth = None if creds is None else {"username": creds.username, "password": creds.password}
        items = self._low.push(repo, tag=tag, auth_config=auth, stream=True, decode=True)
        stream_errors(items, f"push {repo}:{tag}", on_line)

    def _pull(
        self, ref: str, creds: Credentials | None, tls_verify: bool, on_line: LogSink | None
    ) -> None:
        headers = registry_auth_header(creds)
        with self._posted("/images/create", {"fromImage": ref}, headers=headers) as response:
            self._low._raise_for_status(response)
            stream_errors(json_lines(response), f"pull {ref}", on_line)


def docker_create_options(run: ContainerRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """(create_container, create_host_config) keyword arguments of the docker SDK's low-level
    API for a ContainerRun (pure)."""
    host: dict[str, Any] = {
        "binds": {m.source: {"bind": m.target, "mode": ",".join(m.options)} for m in run.mounts},
        "network_mode": run.network,
        "ulimits": [Ulimit(name=n, soft=s, hard=h) for n, s, h in run.ulimits],
    }
    if run.add_hosts:
        host["extra_hosts"] = dict(run.add_hosts)
    host.update(set_options(run, HOST_OPTIONS))
    if run.security_opt:
        host["security_opt"] = list(run.security_opt)
    if run.devices:
        host["devices"] = [f"{d}:{d}:rwm" for d in run.devices]
    if run.gpu_request:
        host["device_requests"] = [_gpu_request(run.gpu_request)]
    create: dict[str, Any] = {
        "name": run.name,
        "command": list(run.command),
        "environment": dict(run.env),
        "labels": dict(run.labels),
        "stop_signal": run.stop_signal,
        "stop_timeout": run.stop_timeout,
    }
    if run.entrypoint is not None:
        create["entrypoint"] = list(run.entrypoint)
    create.update(set_options(run, CONTAINER_OPTIONS))
    return create, host


def _gpu_request(request: str) -> DeviceRequest:
    """`all`, a count, or `device=2,3` (indices or UUIDs), as `docker run --gpus` takes them."""
    if request.startswith("device="):
        ids = request.removeprefix("device=").split(",")
        return DeviceRequest(device_ids=ids, capabilities=[["gpu"]])
    return DeviceRequest(count=-1 if request == "all" else int(request), capabilities=[["gpu"]])
