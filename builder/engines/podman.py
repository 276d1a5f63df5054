"""The podman engine: podman-py over the libpod API.

Builds go to libpod's /build directly (podman-py's images.build reads the whole stream before
returning, so nothing could be shown while it runs) and always ask for OCI output: a libpod
build that names no output format never finds its own cached layers (podman 4.3's cache lookup
compares the candidate's manifest type with the requested, empty, one), measured here.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, ClassVar

import podman
from podman import errors as perr

from builder.engines.base import BuildRequest, ContainerRun, EngineError, LogSink
from builder.engines.credentials import Credentials
from builder.engines.messages import human
from builder.engines.sdk import SdkEngine
from builder.engines.sdk_shapes import (
    JsonItems,
    json_lines,
    registry_auth_header,
    set_options,
    stream_errors,
)

OCI = "application/vnd.oci.image.manifest.v1+json"
TAR = {"Content-Type": "application/x-tar"}
UNLIMITED = 2**64 - 1  # libpod takes rlimits as uint64: unlimited (-1 on the CLI)


def _flag(value: bool) -> str:
    return "true" if value else "false"


class PodmanEngine(SdkEngine):
    name = "podman"
    not_found = (perr.NotFound, perr.ImageNotFound)
    image_not_found = perr.ImageNotFound
    api_errors = (perr.APIError,)
    # CDI (nvidia-ctk cdi generate)
    gpu_request: ClassVar[Mapping[str, Any]] = {"devices": ["nvidia.com/gpu=all"]}

    def _connect(self, base_url: str, timeout: float | None) -> Any:
        return podman.PodmanClient(base_url=base_url, timeout=timeout)

    def _rootless(self) -> bool:
        info = self._client.info()
        return bool(((info.get("host") or {}).get("security") or {}).get("rootless"))

    def _create_run(self, run: ContainerRun) -> str:
        return str(self._client.containers.create(run.image, **libpod_create_options(run)).id)

    def _post(self, path: str, **kw: Any) -> Any:
        return self._client.api.post(path, **kw)

    @contextlib.contextmanager
    def _build_stream(self, body: IO[bytes], request: BuildRequest) -> Iterator[JsonItems]:
        query: dict[str, Any] = {
            "dockerfile": request.containerfile,
            "layers": _flag(request.layers),
            "rm": "true",
            "forcerm": "true",
            "outputformat": OCI,
            "nocache": _flag(request.nocache),
            "pull": _flag(request.pull),
            "pullpolicy": "always" if request.pull else "missing",
        }
        # The proxy travels as buildah's predefined proxy arguments (kept out of the image's
        # history and config); `httpproxy` stays off: it would copy the *service's* own proxy
        # environment, which is not the host's of this client nor its --proxy.
        buildargs = {**request.buildargs, **request.proxy.buildargs}
        if buildargs:
            query["buildargs"] = json.dumps(buildargs, sort_keys=True)
        if request.labels:
            # A JSON list of "k=v", sorted: libpod turns a JSON map into labels in Go's random
            # map order (a new final layer, so a new image id, now and then: measured 1 in 5
            # --force rebuilds); a list keeps its order.
            query["labels"] = json.dumps([f"{k}={v}" for k, v in sorted(request.labels.items())])
        if request.network:
            query["networkmode"] = request.network
        if request.timestamp is not None:
            query["timestamp"] = str(request.timestamp)
        if request.target:
            query["target"] = request.target
        with self._posted("/build", query, data=body, headers=TAR) as response:
            response.raise_for_status()
            yield json_lines(response)

    def save_oci_archive(self, ref: str) -> Iterator[bytes]:
        with self._api(f"save {ref}"):
            response = self._unhurried.api.get(
                f"/images/{ref}/get", params={"format": "oci-archive"}, stream=True
            )
            response.raise_for_status()
        return iter(response.iter_content(chunk_size=1 << 20))

    def _exists(self, ref: str) -> bool:
        return bool(self._client.images.exists(ref))

    def _wait(self, container: Any, timeout: float | None) -> int:
        try:
            return int(container.wait(timeout=timeout))
        except perr.APIError as exc:
            if "timed out" in str(exc).lower() or "timeout" in str(exc).lower():
                raise self._timed_out(container.name, timeout) from None
            raise

    def _remove_container(self, name: str) -> None:
        response = self._client.api.delete(
            f"/containers/{name}", params={"force": "true", "timeout": 0, "v": "true"}
        )
        if response.status_code != 404:
            response.raise_for_status()

    def _import(self, body: IO[bytes], repo: str, tag: str, changes: Sequence[str]) -> str:
        params = {"reference": f"{repo}:{tag}", "changes": list(changes)}
        with self._posted("/images/import", params, data=body, headers=TAR, stream=False) as r:
            r.raise_for_status()
            return str(r.json().get("Id") or "")

    def _load(self, body: IO[bytes]) -> None:
        with self._posted("/images/load", {}, data=body, headers=TAR, stream=False) as r:
            if r.status_code >= 400:
                raise EngineError(f"load: {human(_message(r))}")

    def _progress(
        self,
        path: str,
        params: Mapping[str, str],
        creds: Credentials | None,
        what: str,
        on_line: LogSink | None,
    ) -> None:
        """POST a push/pull and read its progress stream to the end; its error is ours."""
        with self._posted(path, params, headers=registry_auth_header(creds)) as response:
            if response.status_code >= 400:
                raise EngineError(f"{what}: {human(_message(response))}")
            stream_errors(json_lines(response), what, on_line)

    def _push(
        self,
        repo: str,
        tag: str,
        creds: Credentials | None,
        tls_verify: bool,
        on_line: LogSink | None,
    ) -> None:
        # quiet=false: libpod streams each blob it copies (quiet by default: nothing until done)
        params = {"tlsVerify": _flag(tls_verify), "destination": f"{repo}:{tag}", "quiet": "false"}
        self._progress(f"/images/{repo}:{tag}/push", params, creds, f"push {repo}:{tag}", on_line)

    def _pull(
        self, ref: str, creds: Credentials | None, tls_verify: bool, on_line: LogSink | None
    ) -> None:
        params = {"reference": ref, "tlsVerify": _flag(tls_verify), "policy": "always"}
        self._progress("/images/pull", params, creds, f"pull {ref}", on_line)


def _rlimit(n: int) -> int:
    return n if n >= 0 else UNLIMITED


def libpod_create_options(run: ContainerRun) -> dict[str, Any]:
    """podman-py `containers.create` keyword arguments for a ContainerRun (pure)."""
    kw: dict[str, Any] = {
        "name": run.name,
        "command": list(run.command),
        "environment": dict(run.env),
        "labels": dict(run.labels),
        "network_mode": run.network,
        "stop_signal": int(signal.Signals[run.stop_signal]),  # libpod takes the number
        "stop_timeout": run.stop_timeout,
        "ulimits": [{"Name": n, "Soft": _rlimit(s), "Hard": _rlimit(h)} for n, s, h in run.ulimits],
        "volumes": {
            m.source: {"bind": m.target, "extended_mode": list(m.options)} for m in run.mounts
        },
    }
    if run.entrypoint is not None:
        kw["entrypoint"] = list(run.entrypoint)
    if run.add_hosts:
        kw["extra_hosts"] = dict(run.add_hosts)
    kw.update(set_options(run))
    if run.cdi_devices or run.devices:
        kw["devices"] = [*run.cdi_devices, *run.devices]
    if run.security_opt:  # libpod takes SELinux options without the CLI's "label=" prefix
        kw["security_opt"] = [o.removeprefix("label=") for o in run.security_opt]
    return kw


def _message(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return str(response.text)[:500]
    return str(body.get("message") or body.get("cause") or body)[:500]
