"""The offline base as a docker-archive whose image id is a function of the rootfs alone.

`podman import` / `docker import` stamp the image with the clock (its `created` and history
times), so two imports of one rootfs tarball are two image ids, and every cell built on them
differs too. A docker-archive (manifest.json, the image config, the layer) that `load` reads
keeps its config byte for byte, and an image id is the sha256 of its config: written here with
the lists date as its times, the same rootfs gives the same id in any store, through podman or
Docker Engine, on any day. The layout is Docker's image archive (moby's image/spec
"Docker Image Specification v1.2", manifest.json form), which both engines' load reads."""

from __future__ import annotations

import hashlib
import io
import json
import platform
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.errors import TrainimgError

# platform.machine() -> the OCI architecture an engine expects
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
CHUNK = 1 << 20


class BaseArchiveError(TrainimgError):
    pass


@dataclass(frozen=True)
class BaseConfig:
    """What an imported base declares: its command, environment and labels."""

    cmd: tuple[str, ...]
    env: tuple[str, ...]
    labels: Mapping[str, str]
    created_by: str


def oci_arch(machine: str | None = None) -> str:
    name = machine or platform.machine()
    try:
        return ARCHES[name]
    except KeyError:
        raise BaseArchiveError(
            f"no container architecture for this machine ({name!r}): one of {', '.join(ARCHES)}"
        ) from None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def config_json(base: BaseConfig, diff_id: str, created: str, arch: str) -> bytes:
    """The image config (pure): its sha256 is the image id."""
    doc = {
        "architecture": arch,
        "os": "linux",
        "created": created,
        "config": {"Cmd": list(base.cmd), "Env": list(base.env), "Labels": dict(base.labels)},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": base.created_by}],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = 0
    return info


def write_archive(
    rootfs: Path, out: Path, ref: str, base: BaseConfig, created: str, arch: str
) -> str:
    """Write the docker-archive of `rootfs` (one layer) tagged `ref` to `out`; the image id."""
    diff_id = file_sha256(rootfs)
    config = config_json(base, diff_id, created, arch)
    image_id = hashlib.sha256(config).hexdigest()
    manifest = json.dumps(
        [{"Config": f"{image_id}.json", "RepoTags": [ref], "Layers": [f"{diff_id}/layer.tar"]}]
    ).encode()
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as archive:
        with rootfs.open("rb") as layer:
            archive.addfile(_member(f"{diff_id}/layer.tar", rootfs.stat().st_size), layer)
        archive.addfile(_member(f"{image_id}.json", len(config)), io.BytesIO(config))
        archive.addfile(_member("manifest.json", len(manifest)), io.BytesIO(manifest))
    return f"sha256:{image_id}"
