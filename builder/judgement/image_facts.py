"""What the image x host judgement (builder/judgement/image.py) reads: an image's facts and a
driver's state, as plain values every entry point fills from what it has (a matrix cell's
labels, a local image's environment, a host's module, a planned install)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from builder.facts.cuda import CudaSource
from builder.facts.driver_version import DriverVersion
from builder.nvidia_require.image_env import collect
from builder.spec.labels import ARCH_LIST_LABEL, ARCH_LIST_UNKNOWN, CUDA_LABEL, CUDA_SOURCE_LABEL


@dataclass(frozen=True)
class ImageFacts:
    """What an image asks of a host (from its environment and labels)."""

    name: str
    requirements: tuple[str, ...]  # every NVIDIA_REQUIRE_* value; each must hold
    cuda: str | None  # its CUDA release ("12.8.1"), None for a CPU image
    source: CudaSource = CudaSource.UNKNOWN
    arch_list: tuple[str, ...] | None = None  # compiled SASS; None when unknown
    requirement_error: str = ""  # the toolkit cannot collect the requirements
    disable_require: bool = False

    @property
    def gpu(self) -> bool:
        return bool(self.requirements) or self.cuda is not None or bool(self.requirement_error)

    @property
    def ships_compat(self) -> bool:
        """Does it carry cuda-compat? Its source says; a foreign image that does not say is
        taken at its label's word: NVIDIA's brand windows come with cuda-compat."""
        if self.source is not CudaSource.UNKNOWN:
            return self.source.ships_compat
        return any("brand=" in r and "driver>=" in r for r in self.requirements)

    @property
    def mvc_capable(self) -> bool:
        """Is its path on an older driver minor-version compatibility? Only where the image is
        known to carry no cuda-compat (PyPI's wheels, a toolkit install without it): a foreign
        image that does not say is held to its label."""
        return self.source in (CudaSource.PYPI, CudaSource.TOOLKIT)

    @property
    def cuda_minor(self) -> Version | None:
        """MAJOR.MINOR of the image's CUDA: its release, else its first `cuda>=` term."""
        texts = [self.cuda] if self.cuda else []
        texts += [w.removeprefix("cuda>=") for r in self.requirements for w in r.split()[:1]
                  if w.startswith("cuda>=")]  # fmt: skip
        for text in texts:
            try:
                v = Version(text)
            except InvalidVersion:
                continue
            return Version(f"{v.major}.{v.minor}")
        return None


@dataclass(frozen=True)
class DriverState:
    """A driver as it is (loaded), will be (after a pending reboot) or is planned."""

    version: DriverVersion
    flavour: str | None = None  # open | proprietary; None: unknown
    cuda: Version | None = None  # what the host reports (nvidia-smi); None: the branch table's
    nvml_mismatch: bool = False  # loaded module != userspace libraries: CUDA fails to start


REQUIREMENT_ERROR = "error: "


def requirements_from_env(env: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """What nvidia-container-toolkit's GetRequirements collects
    (builder.nvidia_require.image_env.collect), judged even when NVIDIA_DISABLE_REQUIRE is set
    (the flag is kept apart, see ImageRecord): the image still needs what it asks for, only the
    hook stops checking it."""
    got = collect({k: v for k, v in env.items() if k != "NVIDIA_DISABLE_REQUIRE"})
    if got.error:
        return (), f"{REQUIREMENT_ERROR}{got.error}"
    origins = [o for o, _ in got.requirements]
    if not origins:
        return (), ""
    legacy = "implicit from CUDA_VERSION (legacy image)"
    if origins == ["CUDA_VERSION"]:
        return got.texts, legacy
    return got.texts, "env" + (f" + {legacy}" if "CUDA_VERSION" in origins else "")


def arch_list_from_labels(labels: Mapping[str, str]) -> tuple[str, ...] | None:
    """The SASS the image was compiled for (our label); None when it does not say."""
    text = labels.get(ARCH_LIST_LABEL)
    if text is None or text.strip() == ARCH_LIST_UNKNOWN:
        return None
    return tuple(text.split())


def source_from_labels(labels: Mapping[str, str]) -> CudaSource:
    """The image's own word on where its CUDA comes from (our label), else unknown."""
    try:
        return CudaSource(labels.get(CUDA_SOURCE_LABEL, CudaSource.UNKNOWN))
    except ValueError:
        return CudaSource.UNKNOWN


def image_facts(name: str, env: Mapping[str, str], labels: Mapping[str, str]) -> ImageFacts:
    """What the judgement reads of an image: its environment and our labels (an image as an
    engine reports it, a record, or a cell's own labels)."""
    reqs, origin = requirements_from_env(env)
    return ImageFacts(
        name,
        reqs,
        labels.get(CUDA_LABEL) or env.get("CUDA_VERSION") or None,
        source_from_labels(labels),
        arch_list_from_labels(labels),
        origin.removeprefix(REQUIREMENT_ERROR) if origin.startswith(REQUIREMENT_ERROR) else "",
    )
