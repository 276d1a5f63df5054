"""What the image x host judgement (builder/judgement/image.py) reads: an image's facts and a
driver's state, as plain values every entry point fills from what it has (a matrix cell's
labels, a local image's environment, a host's module, a planned install)."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from builder.facts.cuda import CudaSource
from builder.facts.driver_version import DriverVersion


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
