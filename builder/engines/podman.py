"""The podman engine: podman-py over the libpod API.

Builds go to libpod's /build directly (podman-py's images.build reads the whole stream before
returning, so nothing could be shown while it runs) and always ask for OCI output: a libpod
build that names no output format never finds its own cached layers (podman 4.3's cache lookup
compares the candidate's manifest type with the requested, empty, one), measured here.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any, ClassVar

import podman
from podman import errors as perr

from builder.engines.base import BuildRequest, EngineError
from builder.engines.sdk import (
    JsonItems,
    SdkEngine,
    json_lines,
    registry_auth_header,
    stream_errors,
)
from builder.registry.auth import Credentials

OCI = "application/vnd.oci.image.manifest.v1+json"
TAR = {"Content-Type": "application/x-tar"}


def _flag(value: bool) -> str:
    return "true" if value else "false"


class PodmanEngine(SdkEngine):
    name = "podman"
    not_found = (perr.NotFound, perr.ImageNotFound)
    image_not_found = perr.ImageNotFound
    api_errors = (perr.APIError,)
    # CDI (nvidia-ctk cdi generate)
    gpu_request: ClassVar[Mapping[str, Any]] = {"devices": ["nvidia.com/gpu=all"]}

    def _connect(self, base_url: str, timeout: float) -> Any:
        return podman.PodmanClient(base_url=base_url, timeout=timeout)

    def _post(self, path: str, **kw: Any) -> Any:
        return self._client.api.post(path, **kw)

    @contextlib.contextmanager
    def _build_stream(self, body: IO[bytes], request: BuildRequest) -> Iterator[JsonItems]:
        query: dict[str, Any] = {
            "dockerfile": request.containerfile,
            "layers": "true",
            "rm": "true",
            "forcerm": "true",
            "outputformat": OCI,
            "nocache": _flag(request.nocache),
            "pull": _flag(request.pull),
            "pullpolicy": "always" if request.pull else "missing",
        }
        if request.buildargs:
            query["buildargs"] = json.dumps(dict(request.buildargs), sort_keys=True)
        if request.labels:
            # A JSON list of "k=v", sorted: libpod turns a JSON map into labels in Go's random
            # map order (a new final layer, so a new image id, now and then: measured 1 in 5
            # --force rebuilds); a list keeps its order.
            query["labels"] = json.dumps([f"{k}={v}" for k, v in sorted(request.labels.items())])
        if request.network:
            query["networkmode"] = request.network
        if request.target:
            query["target"] = request.target
        with self._posted("/build", query, data=body, headers=TAR) as response:
            response.raise_for_status()
            yield json_lines(response)

    def _exists(self, ref: str) -> bool:
        return bool(self._client.images.exists(ref))

    def _wait(self, container: Any, timeout: float) -> int:
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

    def _progress(
        self, path: str, params: Mapping[str, str], creds: Credentials | None, what: str
    ) -> None:
        """POST a push/pull and read its progress stream to the end; its error is ours."""
        with self._posted(path, params, headers=registry_auth_header(creds)) as response:
            if response.status_code >= 400:
                raise EngineError(f"{what}: {_message(response)}")
            stream_errors(json_lines(response), what)

    def _push(self, repo: str, tag: str, creds: Credentials | None, tls_verify: bool) -> None:
        params = {"tlsVerify": _flag(tls_verify), "destination": f"{repo}:{tag}"}
        self._progress(f"/images/{repo}:{tag}/push", params, creds, f"push {repo}:{tag}")

    def _pull(self, ref: str, creds: Credentials | None, tls_verify: bool) -> None:
        params = {"reference": ref, "tlsVerify": _flag(tls_verify), "policy": "always"}
        self._progress("/images/pull", params, creds, f"pull {ref}")


def _message(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return str(response.text)[:500]
    return str(body.get("message") or body.get("cause") or body)[:500]
