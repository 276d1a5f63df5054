"""Where a fact comes from. Every number in builder.facts carries one of these."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """A citation: a public URL (or a file of this repository), and whether a primary source
    confirmed it."""

    ref: str
    confirmed: bool = True

    def __str__(self) -> str:
        return self.ref if self.confirmed else f"{self.ref} (unconfirmed)"


# The sources cited most often, named once.
# The project's own matrix: a pin, a repository or a list it lacks is the finding's source.
MATRIX_YAML = Source("matrix.yaml")
CUDA_RELEASE_NOTES = Source(
    "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (Table 3)"
)
CUDA_MVC = Source(
    "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
)
CUDA_FORWARD_COMPAT = Source(
    "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
)
NVIDIA_CUDA_IMAGE_12_8_1 = Source(
    "https://github.com/pranavmishra90/nvidia-container-images-cuda/blob/60a1c892/"
    "dist/12.8.1/rockylinux9/base/Dockerfile"
    " (GitHub copy of https://gitlab.com/nvidia/container-images/cuda)"
)
LIBNVIDIA_CONTAINER_DSL = Source(
    "https://github.com/NVIDIA/libnvidia-container (src/cli/dsl.c, src/cli/configure.c)"
)
CUDA_GPUS = Source("https://developer.nvidia.com/cuda-gpus")
BLACKWELL_COMPAT_GUIDE = Source(
    "https://docs.nvidia.com/cuda/blackwell-compatibility-guide/index.html"
)
OPEN_MODULES_BLOG = Source(
    "https://developer.nvidia.com/blog/"
    "nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/"
)
DRIVER_INSTALL_GUIDE = Source("https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/")
DATACENTER_DRIVER_LIFECYCLE = Source("https://docs.nvidia.com/datacenter/tesla/drivers/")
TORCH_BUILD_CUDA_SH = Source(
    "https://github.com/pytorch/pytorch/blob/00c7a380/.ci/manywheel/build_cuda.sh"
)
