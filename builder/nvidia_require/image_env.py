"""Which requirements an image carries, read from its environment the way
nvidia-container-toolkit's `GetRequirements` (internal/config/image/cuda_image.go) does."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
REQUIRE_EXCLUDED_PREFIX = "NVIDIA_REQUIRE_JETPACK"  # also NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # strconv.ParseBool's true set
_SEMVER_NUM = r"(?:0|[1-9][0-9]*)"
_SEMVER_IDENT = r"[0-9A-Za-z-]+"
_SEMVER = re.compile(
    rf"v(?P<major>{_SEMVER_NUM})(?:\.(?P<minor>{_SEMVER_NUM})"
    rf"(?:\.{_SEMVER_NUM}(?:-(?:{_SEMVER_IDENT})(?:\.{_SEMVER_IDENT})*)?"
    rf"(?:\+{_SEMVER_IDENT}(?:\.{_SEMVER_IDENT})*)?)?)?"
)
_U32 = 2**32


@dataclass(frozen=True)
class ImageRequirements:
    requirements: tuple[tuple[str, str], ...]  # (origin: the variable or "CUDA_VERSION", text)
    disabled: bool = False  # NVIDIA_DISABLE_REQUIRE parsed true: nothing is checked
    error: str = ""  # GetRequirements fails (the legacy hook refuses the container)

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.requirements)


def disable_require(env: Mapping[str, str]) -> bool:
    """NVIDIA_DISABLE_REQUIRE through Go's strconv.ParseBool (anything unparsable is false)."""
    return env.get("NVIDIA_DISABLE_REQUIRE", "") in _GO_TRUE


def legacy_cuda(version: str) -> str | None:
    """MAJOR.MINOR of a CUDA_VERSION as the toolkit reads it (golang.org/x/mod/semver with a
    "v" prefix: "12" -> 12.0, "12.8.1-rc1" -> 12.8; no leading zeros, no 4th part); None when
    it is not valid semver or a part exceeds 32 bits."""
    m = _SEMVER.fullmatch("v" + version.removeprefix("v"))
    if m is None:
        return None
    major, minor = int(m["major"]), int(m["minor"] or 0)
    if major >= _U32 or minor >= _U32:
        return None
    return f"{major}.{minor}"


def collect(env: Mapping[str, str]) -> ImageRequirements:
    """The requirements nvidia-container-toolkit's GetRequirements passes to the CLI: every
    NVIDIA_REQUIRE_* but NVIDIA_REQUIRE_JETPACK*, even empty ones; plus `cuda>=MAJOR.MINOR`
    for a legacy image (CUDA_VERSION set, NVIDIA_REQUIRE_CUDA empty or unset), beside any other
    NVIDIA_REQUIRE_*; nothing when NVIDIA_DISABLE_REQUIRE is true."""
    if disable_require(env):
        return ImageRequirements((), True)
    reqs = [
        (k, v)
        for k, v in sorted(env.items())
        if k.startswith(REQUIRE_PREFIX) and not k.startswith(REQUIRE_EXCLUDED_PREFIX)
    ]
    cuda = env.get("CUDA_VERSION", "")
    if cuda and not env.get("NVIDIA_REQUIRE_CUDA"):
        mm = legacy_cuda(cuda)
        if mm is None:
            return ImageRequirements(
                tuple(reqs),
                False,
                f"CUDA_VERSION={cuda!r} is not a version the toolkit accepts (semver "
                "MAJOR[.MINOR[.PATCH]]): the legacy hook fails the container",
            )
        reqs.append(("CUDA_VERSION", f"cuda>={mm}"))
    return ImageRequirements(tuple(reqs))
