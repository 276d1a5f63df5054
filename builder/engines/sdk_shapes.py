"""The request and answer shapes both SDKs use, as plain functions (no client): create
options, repo:tag splitting, inspect data -> ImageInfo, the registry auth header, progress
streams, logs, and the deterministic build context tarball. engines/sdk.py (SdkEngine) and its
two subclasses call them."""

from __future__ import annotations

import base64
import json
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import requests

from builder.engines.base import ContainerRun, EngineError, ImageInfo, normalize_id
from builder.engines.credentials import Credentials
from builder.engines.messages import human

JsonItems = Iterator[Mapping[str, Any]]

# (ContainerRun field, SDK keyword) of the plain options both SDKs name alike: host settings
# (docker: create_host_config) and container settings (docker: create_container)
HOST_OPTIONS = (("ipc", "ipc_mode"), ("shm_size", "shm_size"), ("userns", "userns_mode"))
CONTAINER_OPTIONS = (("user", "user"), ("hostname", "hostname"))


def set_options(
    run: ContainerRun, options: Sequence[tuple[str, str]] = HOST_OPTIONS + CONTAINER_OPTIONS
) -> dict[str, Any]:
    """The options of `run` that are set, under their SDK keywords; unset ones keep defaults."""
    return {keyword: getattr(run, name) for name, keyword in options if getattr(run, name)}


def split_ref(ref: str) -> tuple[str, str]:
    """`repo[:tag]` -> (repo, tag); a registry port (`host:5000/x`) is not a tag."""
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1 :]
    return ref, "latest"


def image_info(attrs: Mapping[str, Any]) -> ImageInfo:
    """Inspect data -> ImageInfo. The manifest digest: libpod's `Digest`; Docker has none, so
    the first of its RepoDigests (a pushed or pulled image), if any."""
    if "Digest" in attrs:
        digest = attrs["Digest"] or None
    else:
        repo_digests = [d.split("@", 1)[1] for d in attrs.get("RepoDigests") or () if "@" in d]
        digest = repo_digests[0] if repo_digests else None
    config = attrs.get("Config") or {}
    env = {}
    for item in config.get("Env") or ():
        key, _, value = str(item).partition("=")
        env[key] = value
    labels = config.get("Labels") or attrs.get("Labels") or {}
    return ImageInfo(
        id=normalize_id(str(attrs["Id"])),
        tags=tuple(attrs.get("RepoTags") or ()),
        digest=digest,
        size=int(attrs.get("Size") or 0),
        labels={str(k): str(v) for k, v in labels.items()},
        env=env,
        user=str(config.get("User") or ""),
        entrypoint=tuple(config.get("Entrypoint") or ()),
        cmd=tuple(config.get("Cmd") or ()),
        layers=tuple((attrs.get("RootFS") or {}).get("Layers") or ()),
        created=str(attrs.get("Created") or ""),
        workdir=str(config.get("WorkingDir") or ""),
        volumes=tuple(sorted(config.get("Volumes") or ())),
    )


def registry_auth_header(creds: Credentials | None) -> dict[str, str]:
    """The X-Registry-Auth header both APIs read (base64url JSON); empty without credentials."""
    if creds is None:
        return {}
    blob = json.dumps(
        {"username": creds.username, "password": creds.password, "serveraddress": creds.registry}
    ).encode()
    return {"X-Registry-Auth": base64.urlsafe_b64encode(blob).decode()}


def json_lines(response: requests.Response) -> JsonItems:
    for raw in response.iter_lines():
        if raw:
            item = json.loads(raw)
            if isinstance(item, dict):
                yield item


# Docker's per-layer states that say nothing new: a layer queued, or one more tick of bytes
_QUIET_STATES = frozenset({"Preparing", "Waiting", "Pulling fs layer"})


def transfer_line(item: Mapping[str, Any]) -> str | None:
    """The line a push/pull stream item is worth showing (pure; tests/data/transfer_streams):
    libpod's `stream` text (`Copying blob sha256:...`), Docker's layer states (`62fd67d4067a:
    Pushed`) and messages (`one: digest: sha256:... size: 523`); None for Docker's byte ticks
    (an item with a progress bar) and queued layers, which the caller's heartbeat covers."""
    text = item.get("stream")
    if isinstance(text, str):
        return text.strip() or None
    status = item.get("status")
    if not isinstance(status, str) or item.get("progress") or status in _QUIET_STATES:
        return None
    layer = item.get("id")
    return f"{layer}: {status}" if isinstance(layer, str) and layer else status


def stream_errors(
    items: JsonItems, what: str, on_line: Callable[[str], None] | None = None
) -> None:
    """Consume a push/pull/import progress stream; raise its first error as an EngineError.
    Each item worth a line (transfer_line) goes to `on_line`."""
    for item in items:
        if item.get("error"):
            detail = (item.get("errorDetail") or {}).get("message") or item["error"]
            raise EngineError(f"{what}: {human(str(detail))}")
        if on_line is not None:
            line = transfer_line(item)
            if line is not None:
                on_line(line)


def drain_text(chunks: bytes | Iterator[bytes]) -> str:
    """The SDKs return logs as bytes or as an iterator of byte chunks; this joins either."""
    data = bytes(chunks) if isinstance(chunks, bytes | bytearray) else b"".join(chunks)
    return data.decode("utf-8", errors="replace")


def open_context(context: Path) -> IO[bytes]:
    """The tarball to upload: `context` itself if it is a file, else a tarball of the directory."""
    if context.is_file():
        return context.open("rb")
    if context.is_dir():
        return tar_directory(context)
    raise EngineError(f"build context {context} does not exist")


def tar_directory(directory: Path) -> IO[bytes]:
    """A deterministic tarball of a build context directory (sorted, uid/gid 0, mtime 0), in a
    spooled temporary file. Symbolic links are refused: a context is plain files."""
    out = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - caller closes
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(directory).as_posix()
            if path.is_symlink():
                raise EngineError(f"build context {directory}: {rel} is a symbolic link")
            info = tarfile.TarInfo(rel)
            info.uid = info.gid = 0
            info.mtime = 0
            if path.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = path.stat().st_size
                info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
    out.seek(0)
    return out
