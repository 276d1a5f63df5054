"""Image references, split the way registries and engines read them (pure, no I/O)."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from builder.errors import TrainimgError

DOCKER_HUB = "docker.io"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_PATH = re.compile(r"^[a-z0-9]+(?:[._-]{1,2}[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]{1,2}[a-z0-9]+)*)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?$")
INSECURE_ENV = "TRAINIMG_INSECURE_REGISTRIES"


class ReferenceError_(TrainimgError):
    pass


@dataclass(frozen=True)
class Reference:
    registry: str  # HOST[:PORT]
    repository: str  # path inside the registry
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What to ask the registry's manifests endpoint for: the digest, else the tag."""
        return self.digest or self.tag or "latest"

    def with_tag(self, tag: str) -> Reference:
        return Reference(self.registry, self.repository, tag, None)

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_reference(text: str, *, what: str = "image reference") -> Reference:
    """`HOST[:PORT]/PATH[:TAG][@sha256:HEX]`; a first component without `.`/`:` (and not
    `localhost`) is a Docker Hub path, as the engines read it."""
    rest, _, digest = text.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ReferenceError_(f"{what} {text!r}: the digest must be sha256:<64 hex>")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, remainder
    else:
        registry, path = DOCKER_HUB, rest if slash else f"library/{rest}"
    tag = None
    if ":" in path:
        path, tag = path.rsplit(":", 1)
        if not _TAG.match(tag):
            raise ReferenceError_(f"{what} {text!r}: tag {tag!r} is not a valid tag")
    if not _HOST.match(registry) or not _PATH.match(path):
        raise ReferenceError_(
            f"{what} {text!r}: expected HOST[:PORT]/PATH[:TAG][@sha256:...], "
            "e.g. registry.example.com:5000/team/trainimg"
        )
    return Reference(registry, path, tag, digest or None)


def is_insecure(registry: str, env: Mapping[str, str] | None = None) -> bool:
    """Plain HTTP allowed: a loopback registry (as Docker treats 127.0.0.0/8), or one listed in
    $TRAINIMG_INSECURE_REGISTRIES (comma-separated HOST[:PORT])."""
    env = os.environ if env is None else env
    listed = {r.strip() for r in env.get(INSECURE_ENV, "").split(",") if r.strip()}
    if registry in listed:
        return True
    host = registry.rsplit(":", 1)[0] if not registry.endswith("]") else registry
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
