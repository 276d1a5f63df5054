"""What the two SDK engines share: one class that holds every call the docker SDK and podman-py
make the same way, with the few that really differ left to the subclasses (docker.py,
podman.py): where the build stream comes from, how existence, tags, waits and container
removal are asked, the GPU request, and the import/push/pull endpoints.

Error mapping is shared too: the SDKs' "not found" becomes ImageNotFound (with the hint to
build or pull), any other API or transport error an EngineError naming the engine's URL and
what was being done. Credentials reach the engines only as request headers, never as build
arguments, labels or log lines.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import requests

from builder.engines.base import (
    API_TIMEOUT,
    BuildLog,
    BuildResult,
    EngineError,
    ImageInfo,
    ImageNotFound,
    LogSink,
    RunResult,
    RunSpec,
    drain_text,
    normalize_id,
    open_context,
)
from builder.engines.common import (
    MISSING_IMAGE_HINT,
    container_name,
    network_mode,
    volume_binds,
)
from builder.registry.auth import Credentials

_ID_LINE = re.compile(r"^(?:sha256:)?([0-9a-f]{64})\s*$")


def registry_auth_header(creds: Credentials | None) -> dict[str, str]:
    """The X-Registry-Auth header both APIs read (base64url JSON); empty without credentials."""
    if creds is None:
        return {}
    blob = json.dumps(
        {"username": creds.username, "password": creds.password, "serveraddress": creds.registry}
    ).encode()
    return {"X-Registry-Auth": base64.urlsafe_b64encode(blob).decode()}


class SdkEngine:
    """The shared body of PodmanEngine and DockerEngine (see the module docstring)."""

    name: ClassVar[str]
    # The SDK's exception classes, set by each subclass.
    not_found: ClassVar[tuple[type[BaseException], ...]]
    image_not_found: ClassVar[type[BaseException]]
    api_errors: ClassVar[tuple[type[BaseException], ...]]

    base_url: str
    _client: Any

    def __init__(self, base_url: str, *, timeout: float = API_TIMEOUT) -> None:
        self.base_url = base_url
        self._client = self._connect(base_url, timeout)

    # --- what differs ----------------------------------------------------------------------

    def _connect(self, base_url: str, timeout: float) -> Any:
        raise NotImplementedError

    def _build_stream(
        self, body: Any, params: Mapping[str, Any], tags: Sequence[str]
    ) -> contextlib.AbstractContextManager[Iterator[Mapping[str, Any]]]:
        """The engine's build stream as decoded JSON items."""
        raise NotImplementedError

    def image_exists(self, ref: str) -> bool:
        raise NotImplementedError

    def _inspect(self, ref: str) -> ImageInfo:
        raise NotImplementedError

    def _tag(self, image: str, repo: str, tag: str) -> bool:
        raise NotImplementedError

    def _gpu_options(self) -> dict[str, Any]:
        raise NotImplementedError

    def _create_kwargs(self) -> dict[str, Any]:
        return {}

    def _wait(self, container: Any, timeout: float) -> int:
        raise NotImplementedError

    def _remove_container(self, name: str) -> None:
        raise NotImplementedError

    def _import(self, body: Any, repo: str, tag: str, changes: Sequence[str]) -> str:
        raise NotImplementedError

    def _push(self, repo: str, tag: str, creds: Credentials | None, tls_verify: bool) -> None:
        raise NotImplementedError

    def _pull(self, ref: str, creds: Credentials | None, tls_verify: bool) -> None:
        raise NotImplementedError

    # --- what is shared --------------------------------------------------------------------

    @contextlib.contextmanager
    def _api(self, what: str) -> Iterator[None]:
        try:
            yield
        except self.image_not_found as exc:
            detail = getattr(exc, "explanation", None) or exc
            raise ImageNotFound(f"{what}: {detail}; {MISSING_IMAGE_HINT}") from None
        except self.api_errors as exc:
            detail = getattr(exc, "explanation", None) or exc
            raise EngineError(f"{self.name} at {self.base_url}: {what}: {detail}") from None
        except requests.exceptions.RequestException as exc:
            raise EngineError(f"{self.name} at {self.base_url}: {what}: {exc}") from None

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
        # Sorted, so the same inputs always make the same request (and the same image id).
        params = {
            "dockerfile": containerfile,
            "buildargs": dict(sorted((buildargs or {}).items())),
            "labels": dict(sorted((labels or {}).items())),
            "network": network,
            "pull": pull,
            "nocache": nocache,
        }
        log = BuildLog(on_log)
        image_id = None
        with (
            open_context(context) as body,
            self._api("build"),
            self._build_stream(body, params, tags) as items,
        ):
            for item in items:
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
        log.close()
        if image_id is None:
            raise log.failed("the build ended without reporting an image id")
        result = log.result(image_id)
        for ref in tags:
            self.tag(result.image_id, ref)
        return result

    def inspect_image(self, ref: str) -> ImageInfo:
        with self._api(f"image {ref}"):
            return self._inspect(ref)

    def tag(self, image: str, ref: str) -> None:
        from builder.engines.common import split_ref

        repo, tag = split_ref(ref)
        with self._api(f"tag {ref}"):
            if not self._tag(image, repo, tag):
                raise EngineError(f"{self.name} at {self.base_url}: could not tag {image} as {ref}")

    def remove_image(self, ref: str) -> None:
        with self._api(f"remove {ref}"), contextlib.suppress(*self.not_found):
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
            kwargs.update(self._gpu_options())
        kwargs.update(self._create_kwargs())
        with self._api(f"create a container of {spec.image}"):
            return self._client.containers.create(spec.image, **kwargs)

    def run(self, spec: RunSpec, *, timeout: float = 600) -> RunResult:
        # Never the SDKs' attached run: it hangs against podman 4.3 now and then.
        container = self._create(spec)
        try:
            with self._api(f"run {spec.image}"):
                container.start()
                code = self._wait(container, timeout)
                stdout = drain_text(container.logs(stdout=True, stderr=False))
                stderr = drain_text(container.logs(stdout=False, stderr=True))
        finally:
            self.remove_container(container.name)
        return RunResult(code, stdout, stderr)

    def _timed_out(self, spec_image: str, timeout: float) -> EngineError:
        return EngineError(f"{spec_image}: the container ran longer than {timeout:.0f}s")

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
        with self._api(f"remove container {name}"), contextlib.suppress(*self.not_found):
            self._remove_container(name)

    def containers(self, label: str | None = None) -> list[str]:
        filters = {"label": label} if label else None
        with self._api("list containers"):
            found = self._client.containers.list(all=True, filters=filters)
        return sorted(str(c.name) for c in found)

    def history(self, ref: str) -> list[str]:
        """The image's history, newest first: each layer's `created_by` (what audits read)."""
        with self._api(f"history of {ref}"):
            entries = self._client.images.get(ref).history()
        return [str(e.get("CreatedBy") or e.get("createdBy") or "") for e in entries]

    def image_tags(self, repository: str) -> list[str]:
        with self._api(f"list images of {repository}"):
            found = self._client.images.list(filters={"reference": repository})
        prefix = repository + ":"
        return sorted(
            t.removeprefix(prefix)
            for image in found
            for t in (image.attrs.get("RepoTags") or image.attrs.get("Names") or ())
            if t.startswith(prefix)
        )

    def import_image(self, tarball: Path, ref: str, changes: Sequence[str] = ()) -> str:
        """`ref` from a root filesystem tarball (docker import / podman import); its id."""
        from builder.engines.common import split_ref

        repo, tag = split_ref(ref)
        with tarball.open("rb") as body, self._api(f"import {tarball.name} as {ref}"):
            image_id = self._import(body, repo, tag, changes)
        if not image_id:
            return self.inspect_image(ref).id
        return normalize_id(image_id)

    def push(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        """Push `ref` (registry/repo:tag) to its registry."""
        from builder.engines.common import split_ref

        repo, tag = split_ref(ref)
        with self._api(f"push {ref}"):
            self._push(repo, tag, creds, tls_verify)

    def pull(self, ref: str, creds: Credentials | None = None, *, tls_verify: bool = True) -> None:
        """Pull `ref` (registry/repo:tag or registry/repo@sha256:...)."""
        with self._api(f"pull {ref}"):
            self._pull(ref, creds, tls_verify)

    def close(self) -> None:
        self._client.close()


def stream_errors(items: Iterator[Mapping[str, Any]], what: str) -> None:
    """Consume a push/pull/import progress stream; raise its first error as an EngineError."""
    for item in items:
        if item.get("error"):
            detail = (item.get("errorDetail") or {}).get("message") or item["error"]
            raise EngineError(f"{what}: {detail}")


def json_lines(response: requests.Response) -> Iterator[Mapping[str, Any]]:
    for raw in response.iter_lines():
        if raw:
            item = json.loads(raw)
            if isinstance(item, dict):
                yield item
