"""Builders of the planner's inputs for the pure tests: an image as `inspect` reports a
trainimg image, and hosts of the kinds docs/run.md describes."""

from __future__ import annotations

from typing import Any

from builder.engines.base import ImageInfo
from builder.launch.request import Directory, LaunchHost, RunRequest
from builder.spec.labels import DRIVER_MIN_LABEL, TRAINER_VERSION_LABEL

IMAGE = "localhost/trainimg:rocky9-cu128-py3.12-torch2.9.1-runtime"
# NVIDIA_REQUIRE_CUDA as builder/nvidia_require/write.nvidia_require_cuda writes it for CUDA 12.8
REQUIRE_128 = "cuda>=12.8 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"


def image(**over: Any) -> ImageInfo:
    base: dict[str, Any] = {
        "id": "sha256:" + "a" * 64,
        "tags": (IMAGE,),
        "digest": None,
        "size": 1,
        "labels": {TRAINER_VERSION_LABEL: "0.1.0", DRIVER_MIN_LABEL: "570.124.06"},
        "env": {"NVIDIA_REQUIRE_CUDA": REQUIRE_128},
        "user": "1000:1000",
        "entrypoint": ("/opt/venv/bin/python", "-m", "trainer"),
        "cmd": ("--help",),
    }
    base.update(over)
    return ImageInfo(**base)


def host(**over: Any) -> LaunchHost:
    base: dict[str, Any] = {
        "engine": "podman",
        "rootless": True,
        "uid": 1234,
        "gid": 1234,
        "cdi_devices": tuple(f"nvidia.com/gpu={d}" for d in ("0", "1", "all")),
        "gpu_count": 2,
        "driver": "570.124.06",
        "dirs": {
            "/srv/data": Directory("/srv/data", True, True, 1234, 1234, 0o755),
            "/srv/ckpt": Directory("/srv/ckpt", True, True, 1234, 1234, 0o755),
        },
    }
    base.update(over)
    return LaunchHost(**base)


def request(**over: Any) -> RunRequest:
    base: dict[str, Any] = {"image": IMAGE, "name": "t", "trainer_args": ("--steps", "8")}
    base.update(over)
    return RunRequest(**base)
