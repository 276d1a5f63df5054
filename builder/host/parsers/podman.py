"""Parsers of podman: `podman --version`, `podman images --format json` and `podman image
inspect` (pure)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from builder.spec.labels import PREFIX


def podman_version(text: str) -> str | None:
    """`podman --version`: "podman version 5.2.2" (EL builds may add "-rhel")."""
    m = re.search(r"podman version (\d+\.\d+\.\d+)", text)
    return m[1] if m else None


def dockerd_version(text: str) -> str | None:
    """`dockerd --version`: "Docker version 27.5.1, build 4c9b3b0" (cmd/dockerd/cobra.go's
    template). The daemon's, not the client's: dockerd holds the CDI library. podman-docker's
    `docker` prints "podman version ..." and is never taken for docker."""
    m = re.match(r"Docker version (\d+\.\d+\.\d+)", text.strip())
    return m[1] if m else None


def containerd_version(text: str) -> str | None:
    """`containerd --version`: "containerd <package> <version> <revision>" (cmd/containerd's
    VersionPrinter): "containerd github.com/containerd/containerd/v2 v2.0.0 207ad71...",
    "containerd containerd.io 1.7.25 bcc810d..." (Docker's package)."""
    m = re.match(r"containerd \S+ v?(\d+\.\d+\.\d+)", text.strip())
    return m[1] if m else None


@dataclass(frozen=True)
class LocalImage:
    id: str
    names: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def podman_images(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """`podman images --format json`: a JSON list of {Id, Names, Labels, ...}; (id, names)."""
    try:
        doc = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    out = []
    for item in doc if isinstance(doc, list) else []:
        if isinstance(item, dict) and isinstance(item.get("Id"), str):
            names = item.get("Names") or item.get("RepoTags") or []
            out.append((item["Id"], tuple(str(n) for n in names)))
    return out


def podman_inspect(text: str) -> list[LocalImage]:
    """`podman image inspect ID...`: a JSON list; Config.Labels and Config.Env per image."""
    try:
        doc = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    out = []
    for item in doc if isinstance(doc, list) else []:
        if not isinstance(item, dict):
            continue
        config = item.get("Config") or {}
        labels = config.get("Labels") or item.get("Labels") or {}
        env = {}
        for pair in config.get("Env") or []:
            key, _, value = str(pair).partition("=")
            env[key] = value
        out.append(
            LocalImage(
                str(item.get("Id", "")),
                tuple(str(n) for n in item.get("RepoTags") or item.get("Names") or []),
                {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
                env,
            )
        )
    return out


# What a GPU image's requirements are read from (nvidia-container-toolkit's GetRequirements).
_KEPT_ENV = ("NVIDIA_", "CUDA_VERSION=")
_KEPT_LABELS = f"{PREFIX}."


def images_subset(text: str) -> str:
    """What podman_images reads (ids and names), as JSON: nothing else of the host's images."""
    return json.dumps([{"Id": i, "Names": list(n)} for i, n in podman_images(text)])


def inspect_subset(text: str) -> str:
    """What podman_inspect reads, and nothing else: the NVIDIA_*/CUDA_VERSION environment and
    our labels (an image's environment can hold credentials a record must never carry)."""
    out = []
    for img in podman_inspect(text):
        env = [f"{k}={v}" for k, v in img.env.items() if f"{k}=".startswith(_KEPT_ENV)]
        labels = {k: v for k, v in img.labels.items() if k.startswith(_KEPT_LABELS)}
        out.append(
            {"Id": img.id, "RepoTags": list(img.names), "Config": {"Env": env, "Labels": labels}}
        )
    return json.dumps(out, indent=1)
