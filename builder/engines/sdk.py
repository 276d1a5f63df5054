"""The one engine base: SdkEngine holds everything the docker SDK and podman-py do alike, and
its two small subclasses (docker.py, podman.py) only what really differs: how the client is
made, where the build stream comes from, the existence check, waits and container removal, the
GPU request, and the import/push/pull endpoints.

SdkEngine plays every role of engines/roles.py (its methods in the roles' order: the
connection, the image store and build, short containers, the supervised training container,
export, registry transfer). Error mapping is shared too: the SDKs' "not found" becomes
ImageNotFound (with the hint to build or pull), any other API or transport error an
EngineError naming the engine's URL and what was being done. Credentials reach the engines only
as request headers, never as build arguments, labels or log lines. The request and answer
shapes both SDKs use (volume binds, inspect data -> ImageInfo, the context tarball) are plain
functions in engines/sdk_shapes.py. One module, over 400 lines: the base is the roles' one
implementation, in their order, so an engine's behaviour is read in one place.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

import requests

from builder.engines.base import (
    API_TIMEOUT,
    BUILD_TIMEOUT,
    BuildRequest,
    BuildResult,
    ContainerRun,
    EngineError,
    ImageInfo,
    ImageNotFound,
    LogSink,
    RunResult,
    RunSpec,
    normalize_id,
)
from builder.engines.build_log import BuildLog, without_secrets
from builder.engines.credentials import Credentials
from builder.engines.messages import human
from builder.engines.sdk_shapes import (
    JsonItems,
    drain_text,
    image_info,
    open_context,
    split_ref,
)

# A build never pulls a `localhost/...` base (there is no registry behind it); `podman run`
# of a missing one would try https://localhost/v2. Both say which image is missing instead.
MISSING_IMAGE_HINT = "it is not in the engine's store: build it (`trainimg build`) or pull it"

_ID_LINE = re.compile(r"^(?:sha256:)?([0-9a-f]{64})\s*$")


class SdkEngine:
    """The shared body of PodmanEngine and DockerEngine (see the module docstring)."""

    name: ClassVar[str]
    # The SDK's exception classes, set by each subclass.
    not_found: ClassVar[tuple[type[BaseException], ...]]
    image_not_found: ClassVar[type[BaseException]]
    api_errors: ClassVar[tuple[type[BaseException], ...]]
    # What RunSpec.gpus adds to a container's create options, and what every create adds.
    gpu_request: ClassVar[Mapping[str, Any]]
    create_options: ClassVar[Mapping[str, Any]] = {}

    base_url: str
    _client: Any
    _long_client: Any = None

    def __init__(self, base_url: str, *, timeout: float = API_TIMEOUT) -> None:
        self.base_url = base_url
        self._client = self._connect(base_url, timeout)

    # --- what differs ----------------------------------------------------------------------

    def _connect(self, base_url: str, timeout: float | None) -> Any:
        """The SDK's client; `timeout` None: no read timeout."""
        raise NotImplementedError

    def _rootless(self) -> bool:
        raise NotImplementedError

    def _create_run(self, run: ContainerRun) -> str:
        """Create the container a ContainerRun describes (each SDK names its options
        differently); its id."""
        raise NotImplementedError

    def _post(self, path: str, **kw: Any) -> Any:
        """A raw POST to the engine's API (`path` relative to its versioned root)."""
        raise NotImplementedError

    def _build_stream(
        self, body: IO[bytes], request: BuildRequest
    ) -> contextlib.AbstractContextManager[JsonItems]:
        """The engine's build stream as decoded JSON items."""
        raise NotImplementedError

    def _exists(self, ref: str) -> bool:
        try:
            self._client.images.get(ref)
        except self.not_found:
            return False
        return True

    def _wait(self, container: Any, timeout: float | None) -> int:
        """The container's exit code once it ends; None: wait as long as it takes."""
        raise NotImplementedError

    def _remove_container(self, name: str) -> None:
        raise NotImplementedError

    def _import(self, body: IO[bytes], repo: str, tag: str, changes: Sequence[str]) -> str:
        raise NotImplementedError

    def _load(self, body: IO[bytes]) -> None:
        raise NotImplementedError

    def _push(
        self,
        repo: str,
        tag: str,
        creds: Credentials | None,
        tls_verify: bool,
        on_line: LogSink | None,
    ) -> None:
        raise NotImplementedError

    def _pull(
        self, ref: str, creds: Credentials | None, tls_verify: bool, on_line: LogSink | None
    ) -> None:
        raise NotImplementedError

    # --- what is shared --------------------------------------------------------------------
    @contextlib.contextmanager
    def _api(self, what: str) -> Iterator[None]:
        try:
            yield
        except self.image_not_found as exc:
            detail = getattr(exc, "explanation", None) or exc
            raise ImageNotFound(f"{what}: {detail}; {MISSING_IMAGE_HINT}") from None
        except (*self.api_errors, requests.exceptions.RequestException) as exc:  # type: ignore[misc]
            detail = human(str(getattr(exc, "explanation", None) or exc))
            raise EngineError(f"{self.name} at {self.base_url}: {what}: {detail}") from None

    @contextlib.contextmanager
    def _posted(
        self,
        path: str,
        params: Mapping[str, Any],
        *,
        data: IO[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = True,
    ) -> Iterator[Any]:
        """POST with the build timeout (uploads and progress streams may take long); the
        response is closed afterwards."""
        response = self._post(
            path,
            params=params,
            data=data,
            headers=dict(headers or {}),
            stream=stream,
            timeout=BUILD_TIMEOUT,
        )
        try:
            yield response
        finally:
            response.close()

    def version(self) -> str:
        with self._api("version"):
            info = self._client.version()
        return str(info.get("Version", "unknown"))

    def close(self) -> None:
        self._client.close()
        if self._long_client is not None:
            self._long_client.close()

    # --- images: build, the store ----------------------------------------------------------

    def build(self, request: BuildRequest, *, on_log: LogSink | None = None) -> BuildResult:
        """Build; the proxy's secrets never reach the log or an error (build_log.py)."""
        return without_secrets(self._build, request, on_log)

    def _build(self, request: BuildRequest, on_log: LogSink | None) -> BuildResult:
        log = BuildLog(on_log)
        image_id = None
        with (
            open_context(request.context) as body,
            self._api("build"),
            self._build_stream(body, request) as items,
        ):
            body.close()  # the response has begun: the engine holds the whole context
            if request.remove_context:
                request.context.unlink(missing_ok=True)
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
        for ref in request.tags:
            self.tag(result.image_id, ref)
        return result

    def image_exists(self, ref: str) -> bool:
        with self._api(f"image {ref}"):
            return self._exists(ref)

    def inspect_image(self, ref: str) -> ImageInfo:
        with self._api(f"image {ref}"):
            return image_info(self._client.images.get(ref).attrs)

    def tag(self, image: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        with self._api(f"tag {ref}"):
            if not self._client.images.get(image).tag(repo, tag):
                raise EngineError(f"{self.name} at {self.base_url}: could not tag {image} as {ref}")

    def remove_image(self, ref: str) -> None:
        with self._api(f"remove {ref}"), contextlib.suppress(*self.not_found):
            self._client.images.remove(ref)

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
        repo, tag = split_ref(ref)
        with tarball.open("rb") as body, self._api(f"import {tarball.name} as {ref}"):
            image_id = self._import(body, repo, tag, changes)
        if not image_id:
            return self.inspect_image(ref).id
        return normalize_id(image_id)

    def load_image(self, archive: Path) -> None:
        """Load a docker-archive as written (its config, so its id, and its tags kept)."""
        with archive.open("rb") as body, self._api(f"load {archive.name}"):
            self._load(body)

    # --- short containers ------------------------------------------------------------------

    def _create(self, spec: RunSpec) -> Any:
        if not self.image_exists(spec.image):
            raise ImageNotFound(f"image {spec.image}: {MISSING_IMAGE_HINT}")
        volumes = {}  # {"host": "ctr:mode"} -> the SDKs' {"host": {"bind": ctr, "mode": mode}}
        for host, target in spec.volumes.items():
            path, _, mode = target.partition(":")
            volumes[host] = {"bind": path, "mode": mode or "rw"}
        kwargs: dict[str, Any] = {
            "name": spec.name or f"trainimg-{secrets.token_hex(4)}",
            "command": list(spec.command) or None,
            "environment": dict(spec.environment),
            "volumes": volumes,
            "network_mode": "bridge" if spec.network in ("", "default") else spec.network,
            "labels": dict(spec.labels),
        }
        if spec.entrypoint is not None:
            kwargs["entrypoint"] = list(spec.entrypoint)
        if spec.user is not None:
            kwargs["user"] = spec.user
        if spec.gpus:
            kwargs.update(self.gpu_request)
        kwargs.update(self.create_options)
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

    def _timed_out(self, spec_image: str, timeout: float | None) -> EngineError:
        return EngineError(f"{spec_image}: the container ran longer than {timeout or 0:.0f}s")

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

    # --- a supervised training container ---------------------------------------------------

    @property
    def _unhurried(self) -> Any:
        """A second client without a read timeout, for calls that last as long as a training
        run (waiting for it, following its output, a stop with a long grace period)."""
        if self._long_client is None:
            self._long_client = self._connect(self.base_url, None)
        return self._long_client

    def rootless(self) -> bool:
        with self._api("info"):
            return self._rootless()

    def create_container(self, run: ContainerRun) -> str:
        with self._api(f"create a container of {run.image}"):
            return self._create_run(run)

    def start_container(self, cid: str) -> None:
        with self._api(f"start container {cid}"):
            self._client.containers.get(cid).start()

    def follow_logs(self, cid: str, *, stderr: bool) -> Iterator[bytes]:
        with self._api(f"logs of container {cid}"):
            out = self._unhurried.containers.get(cid).logs(
                stream=True, follow=True, stdout=not stderr, stderr=stderr
            )
        return iter((out,)) if isinstance(out, bytes) else iter(out)

    def wait_container(self, cid: str) -> int:
        with self._api(f"wait for container {cid}"):
            return self._wait(self._unhurried.containers.get(cid), None)

    def kill_container(self, cid: str, sig: str) -> None:
        with self._api(f"signal container {cid}"):
            self._client.containers.get(cid).kill(signal=sig)

    def stop_container(self, cid: str, timeout: int) -> None:
        with self._api(f"stop container {cid}"), contextlib.suppress(*self.not_found):
            self._unhurried.containers.get(cid).stop(timeout=timeout)

    def container_exists(self, cid: str) -> bool:
        with self._api(f"container {cid}"):
            try:
                self._client.containers.get(cid)
            except self.not_found:
                return False
        return True

    # --- export ----------------------------------------------------------------------------

    def save_oci_archive(self, ref: str) -> Iterator[bytes]:
        raise EngineError(
            f"{self.name}: its API saves docker archives only; export the image with podman, "
            "or as an enroot image (.sqsh)"
        )

    @contextlib.contextmanager
    def export_rootfs(self, ref: str) -> Iterator[Iterator[bytes]]:
        name = f"trainimg-export-{secrets.token_hex(4)}"
        self._create(RunSpec(ref, command=("true",), name=name))
        try:
            with self._api(f"export {ref}"):
                yield iter(self._unhurried.containers.get(name).export())
        finally:
            self.remove_container(name)

    def history(self, ref: str) -> list[str]:
        """The image's history, newest first: each layer's `created_by` (what audits read)."""
        with self._api(f"history of {ref}"):
            entries = self._client.images.get(ref).history()
        return [str(e.get("CreatedBy") or e.get("createdBy") or "") for e in entries]

    def save(self, ref: str, out: IO[bytes]) -> None:
        """Write `ref` as a docker-archive tarball (manifest.json, config, layer tars) to `out`."""
        with self._api(f"save {ref}"):
            for chunk in self._client.images.get(ref).save():
                out.write(chunk)

    # --- registry transfer -----------------------------------------------------------------

    def push(
        self,
        ref: str,
        creds: Credentials | None = None,
        *,
        tls_verify: bool = True,
        on_line: LogSink | None = None,
    ) -> None:
        """Push `ref` (registry/repo:tag) to its registry; each blob's line to `on_line`."""
        repo, tag = split_ref(ref)
        with self._api(f"push {ref}"):
            self._push(repo, tag, creds, tls_verify, on_line)

    def pull(
        self,
        ref: str,
        creds: Credentials | None = None,
        *,
        tls_verify: bool = True,
        on_line: LogSink | None = None,
    ) -> None:
        """Pull `ref` (registry/repo:tag or registry/repo@sha256:...); each blob's line to
        `on_line`."""
        with self._api(f"pull {ref}"):
            self._pull(ref, creds, tls_verify, on_line)
