"""Image records for the image judgement's tests: the CUDA 12.8.1 image as NVIDIA's images
declare it, the Debian cu128 image (CUDA from PyPI), and one call of the judgement on a driver
and GPUs."""

from __future__ import annotations

from pathlib import Path

from builder.facts.cuda import CudaSource
from builder.facts.driver_version import DriverVersion
from builder.judgement.gpu_identity import GpuIdentity, from_catalogue
from builder.judgement.image import ImageVerdict, judge
from builder.judgement.image_facts import DriverState
from builder.preflight import images as img

DATA = Path(__file__).resolve().parents[1] / "data"
NVIDIA = (DATA / "nvidia_require_cuda.yaml").read_text()
CU128_ARCHES = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def gpu(key: str, brand: str = "") -> GpuIdentity:
    return from_catalogue(key, brand)


def image(**kw: object) -> img.ImageRecord:
    base: dict[str, object] = {
        "name": "x", "source": "matrix", "requirements": (nvidia_12_8_1(),),
        "requirement_origin": "env", "arch_list": CU128_ARCHES, "cuda": "12.8.1",
        "driver_min": "570.124.06", "cuda_source": CudaSource.COMPAT,
    }  # fmt: skip
    base.update(kw)
    return img.ImageRecord(**base)  # type: ignore[arg-type]


def pypi(**kw: object) -> img.ImageRecord:
    """The Debian cu128 cell's image: CUDA from PyPI's wheels, no cuda-compat, no windows."""
    base: dict[str, object] = {"requirements": ("cuda>=12.8",), "cuda_source": CudaSource.PYPI}
    base.update(kw)
    return image(**base)


def nvidia_12_8_1() -> str:
    import yaml

    return str(yaml.safe_load(NVIDIA)[0]["value"])


def on(
    rec: img.ImageRecord, driver: str | None, gpus: tuple[GpuIdentity, ...], module: str = "open"
) -> ImageVerdict:
    state = DriverState(DriverVersion(driver), module) if driver else None
    return judge(rec.facts, state, gpus, None)
