"""An image as the engines save it (docker-archive: manifest.json, the config JSON, one tar per
layer), read for comparison: the config and, per layer, every entry's attributes and content
hash. Layer tars are read in place from the saved file."""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import TrainimgError


@dataclass(frozen=True)
class Entry:
    """One path of a layer: what a rebuild must reproduce byte for byte."""

    kind: str  # file | dir | symlink | hardlink | other
    mode: int
    uid: int
    gid: int
    mtime: int
    size: int
    sha256: str = ""
    link: str = ""


@dataclass(frozen=True)
class SavedImage:
    path: Path
    config: dict[str, Any]
    layers: tuple[str, ...]  # member names of the layer tars, base first
    diff_ids: tuple[str, ...]


def read_saved(path: Path) -> SavedImage:
    try:
        with tarfile.open(path) as tar:
            manifest = json.loads(_read(tar, "manifest.json"))
            item = manifest[0]
            config = json.loads(_read(tar, item["Config"]))
    except (OSError, tarfile.TarError, KeyError, IndexError, ValueError) as exc:
        raise TrainimgError(f"{path}: not a saved image (docker-archive): {exc}") from None
    diff_ids = tuple((config.get("rootfs") or {}).get("diff_ids") or ())
    return SavedImage(path, config, tuple(item["Layers"]), diff_ids)


def _read(tar: tarfile.TarFile, name: str) -> bytes:
    member = tar.extractfile(name)
    if member is None:
        raise KeyError(name)
    return member.read()


_KINDS = {tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.DIRTYPE: "dir",
          tarfile.SYMTYPE: "symlink", tarfile.LNKTYPE: "hardlink"}  # fmt: skip


def layer_entries(image: SavedImage, index: int) -> dict[str, Entry]:
    """path -> Entry of the layer at `index` (a regular file carries the sha256 of its bytes)."""
    out: dict[str, Entry] = {}
    with tarfile.open(image.path) as outer:
        blob = outer.extractfile(image.layers[index])
        if blob is None:
            raise TrainimgError(f"{image.path}: layer {image.layers[index]} is missing")
        with tarfile.open(fileobj=blob, mode="r|*") as layer:
            for m in layer:
                sha = ""
                if m.isreg():
                    fh = layer.extractfile(m)
                    h = hashlib.sha256()
                    if fh is not None:
                        while chunk := fh.read(1 << 20):
                            h.update(chunk)
                    sha = h.hexdigest()
                name = "/" + m.name.lstrip("./").rstrip("/")
                out[name] = Entry(
                    _KINDS.get(m.type, "other"), m.mode, m.uid, m.gid, int(m.mtime), m.size,
                    sha, m.linkname,
                )  # fmt: skip
    return out
