"""Small pieces both SDK engines need: reference parsing, run options, inspect -> ImageInfo."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from builder.engines.base import ImageInfo, RunSpec, normalize_id

# A build never pulls a `localhost/...` base (there is no registry behind it); `podman run`
# of a missing one would try https://localhost/v2. Both say which image is missing instead.
MISSING_IMAGE_HINT = "it is not in the engine's store: build it (`trainimg build`) or pull it"


def split_ref(ref: str) -> tuple[str, str]:
    """`repo[:tag]` -> (repo, tag); a registry port (`host:5000/x`) is not a tag."""
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1 :]
    return ref, "latest"


def container_name(spec: RunSpec) -> str:
    return spec.name or f"trainimg-{secrets.token_hex(4)}"


def volume_binds(spec: RunSpec) -> dict[str, dict[str, str]]:
    """{"host": "ctr:mode"} -> the SDKs' {"host": {"bind": ctr, "mode": mode}}."""
    out = {}
    for host, target in spec.volumes.items():
        path, _, mode = target.partition(":")
        out[host] = {"bind": path, "mode": mode or "rw"}
    return out


def network_mode(spec: RunSpec) -> str:
    return "bridge" if spec.network in ("", "default") else spec.network


def image_info(attrs: Mapping[str, Any], digest: str | None) -> ImageInfo:
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
    )
