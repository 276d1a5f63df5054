"""Start the image for verify and always take it down again: on success, on failure, on Ctrl-C
and on SIGTERM.

The container runs `sleep infinity` (the checks come in through `podman exec` / `docker exec`),
without network, labelled io.trainimg.verify so leftovers can be counted. GPUs: podman gets the
CDI device nvidia.com/gpu=all when this host has a CDI spec for it, docker a GPU device request
when an NVIDIA device is present (RunSpec.gpus; the engines turn it into either).
"""

from __future__ import annotations

import secrets
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from builder.engines.base import EngineError, RunSpec
from builder.engines.roles import ContainerRunner
from builder.spec.labels import VERIFY_LABEL

CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
NVIDIA_DEVICE = Path("/dev/nvidia0")


@dataclass(frozen=True)
class GpuPlan:
    attach: bool
    reason: str


def _cdi_spec(dirs: Sequence[Path]) -> Path | None:
    for d in dirs:
        if not d.is_dir():
            continue
        for spec in sorted(d.iterdir()):
            if spec.suffix not in (".yaml", ".yml", ".json"):
                continue
            try:
                text = spec.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "nvidia.com/gpu" in text:
                return spec
    return None


def plan_gpus(
    engine: str,
    mode: str = "auto",
    *,
    cdi_dirs: Sequence[Path] = CDI_DIRS,
    device: Path = NVIDIA_DEVICE,
) -> GpuPlan:
    """Whether to attach GPUs (`mode`: auto | all | none, with on and off the old spellings of
    all and none), and why, in words a user can act on."""
    if mode in ("none", "off"):
        return GpuPlan(False, f"GPUs not attached (--gpus {mode})")
    if mode in ("all", "on"):
        return GpuPlan(True, f"GPUs attached on request (--gpus {mode})")
    if engine == "podman":
        spec = _cdi_spec(cdi_dirs)
        if spec is not None:
            return GpuPlan(True, f"GPUs attached through CDI (nvidia.com/gpu=all, spec {spec})")
        where = " or ".join(str(d) for d in cdi_dirs)
        return GpuPlan(
            False,
            f"no GPU on this host: no CDI spec for nvidia.com/gpu in {where} "
            "(on a GPU host: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)",
        )
    if device.exists():
        return GpuPlan(True, f"GPUs attached through a docker device request ({device} present)")
    return GpuPlan(False, f"no GPU on this host ({device} does not exist)")


class _Terminate(KeyboardInterrupt):
    """SIGTERM, turned into an exception so the container is removed on the way out."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminate()


@contextmanager
def running_container(
    engine: ContainerRunner, image: str, *, gpus: bool, name: str | None = None
) -> Iterator[str]:
    """A started container of `image` for the checks; stopped and removed whatever happens."""
    name = name or f"trainimg-verify-{secrets.token_hex(4)}"
    spec = RunSpec(
        image=image,
        entrypoint=["sleep"],
        command=["infinity"],
        gpus=gpus,
        network="none",
        name=name,
        labels={VERIFY_LABEL: "verify"},
    )
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main_thread else None
    try:
        yield engine.start(spec)
    finally:
        try:
            _remove(engine, name)
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)


def _remove(engine: ContainerRunner, name: str) -> None:
    """Remove the container even if a second Ctrl-C arrives while it is being removed."""
    for attempt in range(3):
        try:
            engine.remove_container(name)
            return
        except KeyboardInterrupt:
            if attempt == 2:
                raise
        except EngineError as exc:
            print(f"trainimg: warning: could not remove container {name}: {exc}", file=sys.stderr)
            return
